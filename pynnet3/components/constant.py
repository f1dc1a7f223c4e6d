"""Kaldi's ConstantComponent (nnet-general-component.h): outputs the same
vector for every requested Index and needs no input; optionally updatable.

Guarantees: serialization is byte-identical to Kaldi's; Info() and
Properties() equal Kaldi's.
"""

import numpy as np

from . import kaldi_random
from ..common.floats import f32, kaldi_str
from ..common.parameter_stats import vector_stats
from .base import InputFree, P, UpdatableComponent, array_module, read_layout, to_host, write_layout


class ConstantComponent(InputFree, UpdatableComponent):
    """Outputs the same vector ``output`` for every requested Index; needs no
    input. Optionally updatable (``updatable``, Kaldi's is_updatable_); ``use_natural_gradient``
    is stored but the update here is always a plain learning-rate step."""

    type_name = "ConstantComponent"

    # Kaldi's propagate copies (rows, or a vector into every row): so does ours.
    kaldi_exact = True

    def properties(self):
        return P.kUpdatableComponent if self.updatable else 0

    def input_dim(self):
        # No input is ever used; Kaldi reports the output dim.
        return int(self.output.shape[0])

    def output_dim(self):
        return int(self.output.shape[0])

    def init_from_config(self, cfl):
        self.init_updatable_common(cfl)
        output_dim = cfl.get_int("output-dim", 0)
        self.updatable = cfl.get_bool("is-updatable", True)
        self.use_natural_gradient = cfl.get_bool("use-natural-gradient", True)
        mean = f32(cfl.get_float("output-mean", 0.0))
        stddev = f32(cfl.get_float("output-stddev", 0.0))
        if not cfl.has("output-dim") or output_dim <= 0:
            raise cfl.error("Bad initializer: ConstantComponent needs output-dim > 0")
        output = kaldi_random.normal_vector(output_dim).astype(np.float32)
        self.output = output * np.float32(stddev) + np.float32(mean)

    def read_body(self, stream):
        # Kaldi reads the common header by hand here (without
        # <L2Regularize>); accepting it too is harmless.
        read_layout(self, stream, self.UPDATABLE_COMMON)
        stream.expect_token("<Output>")
        self.output = stream.read_vector()
        stream.expect_token("<IsUpdatable>")
        self.updatable = stream.read_bool()
        stream.expect_token("<UseNaturalGradient>")
        self.use_natural_gradient = stream.read_bool()
        stream.expect_token("</ConstantComponent>")

    def write_body(self, stream):
        write_layout(self, stream, self.UPDATABLE_COMMON)
        stream.write_token("<Output>")
        stream.write_vector(to_host(self.output))
        stream.write_token("<IsUpdatable>")
        stream.write_bool(self.updatable)
        stream.write_token("<UseNaturalGradient>")
        stream.write_bool(self.use_natural_gradient)

    def info(self):
        return (self.updatable_info()
                + ", ConstantComponent, output-dim=%d, is-updatable=%s, "
                  "use-natural-gradient=%s" % (self.output_dim(),
                                               kaldi_str(bool(self.updatable)),
                                               kaldi_str(bool(self.use_natural_gradient)))
                + vector_stats("output", self.output, include_mean=True))

    # -- computation --------------------------------------------------------------
    def propagate(self, indexes, in_value, out):
        xp = array_module(out)
        out[...] = xp.asarray(self.output)[None, :]
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        # The output does not depend on the input: no input derivative.
        if to_update is not None and to_update.updatable:
            delta = out_deriv.sum(axis=0, dtype=np.float32)
            xp = array_module(to_update.output)
            if array_module(delta) is not xp:
                delta = delta.get() if xp is np else xp.asarray(delta)
            to_update.output += np.float32(to_update.learning_rate) * delta

    # -- parameters ---------------------------------------------------------------
    def scale(self, alpha):
        if self.updatable:
            if alpha == 0.0:
                self.output[...] = 0.0
            else:
                self.output *= np.float32(alpha)

    def add(self, alpha, other):
        if self.updatable:
            self.output += np.float32(alpha) * other.output

    def num_parameters(self):
        return self.output_dim()

    def vectorize(self):
        return np.asarray(to_host(self.output), dtype=np.float32).copy()

    def unvectorize(self, params):
        params = np.asarray(params, dtype=np.float32)
        if params.shape != self.output.shape:
            raise ValueError("ConstantComponent: expected %d parameters, got %d"
                             % (self.output.shape[0], params.shape[0]))
        self.output[...] = array_module(self.output).asarray(params)

    def dot_product(self, other):
        return float(np.dot(np.asarray(to_host(self.output), np.float64),
                            np.asarray(to_host(other.output), np.float64)))

    def perturb_params(self, stddev):
        xp = array_module(self.output)
        noise = kaldi_random.normal_vector(self.output.shape[0]).astype(np.float32)
        self.output += xp.asarray(noise) * np.float32(stddev)
