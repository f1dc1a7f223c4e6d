"""TimeHeightConvolutionComponent: 2-D convolution over (time, height).

Kaldi's nnet-convolutional-component.cc. The input row of an Index (n,t,x) is
``height_in * num_filters_in`` features (filter index with stride 1); the
output row is ``height_out * num_filters_out``. The width axis is nnet3's
``t``, so the component is non-simple: it asks for inputs at every time
offset of its model, needs only the *required* ones to be present (the rest
are zero-padded), reorders its input/output Indexes into a regular grid
(padding with t = kNoTime blanks), and precomputes a
:class:`~pynnet3.components.convolution_computation.ConvolutionComputation`
serialized inside computations as
``<TimeHeightConvolutionComponentPrecomputedIndexes> <Computation> ...``.

Updates are the plain gradient (``is_gradient`` or not natural-gradient) or a
plain learning-rate step; the natural-gradient options are kept only so files
round-trip and Info() matches Kaldi.
"""

import logging

import numpy as np

from ..common.floats import f32, kaldi_str
from ..common.index import Index, kNoTime
from ..common.parameter_stats import matrix_stats, vector_stats
from ..errors import ComputationError
from .affine import ParameterArrays
from .base import P, PrecomputedIndexes, UpdatableComponent, array_module, read_layout, write_layout
from .convolution_computation import ConvolutionComputation, compile_convolution_computation
from .convolution_model import ConvolutionModel, split_ints
from .convolve import convolve_backward_data, convolve_backward_params, convolve_forward

_LOG = logging.getLogger("pynnet3")


def _randn(shape, stddev):
    """Gaussian parameters times ``stddev`` (exact zeros when stddev is 0, as
    Kaldi's BLAS scaling by 0 gives)."""
    if stddev == 0.0:
        return np.zeros(shape, dtype=np.float32)
    return (np.random.standard_normal(shape) * stddev).astype(np.float32)


def _contiguous_call(xp, mat, fn):
    """Calls ``fn`` on a C-contiguous version of ``mat`` and writes the
    result back when ``mat`` itself was not contiguous (a strided view)."""
    if mat.flags.c_contiguous:
        fn(mat)
    else:
        tmp = xp.ascontiguousarray(mat)
        fn(tmp)
        mat[...] = tmp


class TimeHeightConvolutionComponentPrecomputedIndexes(PrecomputedIndexes):
    """Kaldi's TimeHeightConvolutionComponent::PrecomputedIndexes."""

    type_name = "TimeHeightConvolutionComponentPrecomputedIndexes"
    __slots__ = ("computation",)

    def __init__(self, computation=None):
        self.computation = computation

    def __eq__(self, other):
        return (isinstance(other, TimeHeightConvolutionComponentPrecomputedIndexes)
                and self.computation == other.computation)

    def read_body(self, stream):
        stream.expect_token("<Computation>")
        self.computation = ConvolutionComputation.read(stream)
        stream.expect_token("</%s>" % self.type_name)

    def write_body(self, stream):
        stream.write_token("<Computation>")
        self.computation.write(stream)


class TimeHeightConvolutionComponent(ParameterArrays, UpdatableComponent):
    """Kaldi's TimeHeightConvolutionComponent.

    State: ``model`` (ConvolutionModel), ``linear_params`` (num_filters_out x
    len(offsets)*num_filters_in), ``bias_params`` (num_filters_out),
    ``max_memory_mb``, ``use_natural_gradient``, ``num_minibatches_history``,
    ``alpha_in``, ``alpha_out``, ``rank_in``, ``rank_out``.
    """

    type_name = "TimeHeightConvolutionComponent"
    param_attrs = ("linear_params", "bias_params")

    # -- description ----------------------------------------------------------
    def properties(self):
        return int(P.kUpdatableComponent | P.kReordersIndexes | P.kBackpropAdds
                   | P.kBackpropNeedsInput | P.kInputContiguous | P.kOutputContiguous)

    def input_dim(self):
        return self.model.input_dim()

    def output_dim(self):
        return self.model.output_dim()

    def info(self):
        s = self.updatable_info() + " " + self.model.info()
        s += matrix_stats("filter-params", self.linear_params)
        s += vector_stats("bias-params", self.bias_params, include_mean=True)
        s += ", num-params=%d, max-memory-mb=%s, use-natural-gradient=%d" % (
            self.num_parameters(), kaldi_str(self.max_memory_mb), int(self.use_natural_gradient))
        if self.use_natural_gradient:
            s += ", num-minibatches-history=%s, rank-in=%d, rank-out=%d, alpha=%s" % (
                kaldi_str(self.num_minibatches_history), self.rank_in, self.rank_out,
                kaldi_str(self.alpha_in))
        return s

    # -- initialization ---------------------------------------------------------
    def init_from_config(self, cfl):
        self.init_updatable_common(cfl)
        model = ConvolutionModel.__new__(ConvolutionModel)
        model.height_subsample_out = 1
        self.max_memory_mb = 200.0
        values = {}
        for key in ("num-filters-in", "num-filters-out", "height-in", "height-out"):
            values[key] = cfl.get_int(key)
        if any(v is None for v in values.values()):
            raise cfl.error("expected all of num-filters-in, num-filters-out, height-in, "
                            "height-out to be defined")
        model.num_filters_in = values["num-filters-in"]
        model.num_filters_out = values["num-filters-out"]
        model.height_in = values["height-in"]
        model.height_out = values["height-out"]
        required = cfl.get_str("required-time-offsets", "undef")
        model.height_subsample_out = cfl.get_int("height-subsample-out", 1)
        self.max_memory_mb = f32(cfl.get_float("max-memory-mb", 200.0))
        if not self.max_memory_mb > 0.0:
            raise cfl.error("max-memory-mb must be positive")

        if cfl.has("offsets"):
            text = cfl.get_str("offsets")
            offsets = []
            for piece in text.split(";"):
                pair = split_ints(piece)
                if pair is None or len(pair) != 2:
                    raise cfl.error("bad config value offsets=%s" % text)
                offsets.append(tuple(pair))
            offsets.sort()
            if not offsets or any(offsets[i] == offsets[i + 1] for i in range(len(offsets) - 1)):
                raise cfl.error("error in offsets (probably a repeated offset): offsets=%s"
                                % text)
        elif cfl.has("height-offsets") and cfl.has("time-offsets"):
            h_text, t_text = cfl.get_str("height-offsets"), cfl.get_str("time-offsets")
            h_vec, t_vec = split_ints(h_text), split_ints(t_text)
            if h_vec is None or t_vec is None:
                raise cfl.error("formatting problem in time-offsets or height-offsets")
            if (not h_vec or not t_vec or sorted(set(h_vec)) != h_vec
                    or sorted(set(t_vec)) != t_vec):
                raise cfl.error("time-offsets and height-offsets must be nonempty, sorted "
                                "and unique")
            offsets = [(t, h) for t in t_vec for h in h_vec]
        else:
            raise cfl.error("expected either 'offsets', or both 'height-offsets' and "
                            "'time-offsets', to be defined")
        model.offsets = offsets

        if required == "undef":
            req = sorted({t for t, _ in offsets})
        else:
            req = split_ints(required)
            if req is None or not req or sorted(set(req)) != req:
                raise cfl.error("formatting problem in required-time-offsets")
        model.required_time_offsets = req
        model.compute_derived()
        ok, reason = model.check(False, True)
        if not ok:
            raise cfl.error("parameters of TimeHeightConvolutionComponent do not make sense: "
                            + reason)
        ok, reason = model.check(True, True)
        if not ok:
            _LOG.warning("There are input heights unused in TimeHeightConvolutionComponent "
                         "(%s); consider increasing output height or decreasing height of "
                         "preceding layer: %s", reason, cfl.whole_line)
        self.model = model

        param_stddev = cfl.get_float("param-stddev", -1.0)
        bias_stddev = f32(cfl.get_float("bias-stddev", 0.0))
        init_unit = cfl.get_bool("init-unit", False)
        if param_stddev < 0.0:
            param_stddev = 1.0 / np.sqrt(model.num_filters_in * len(model.offsets))
        param_stddev = f32(param_stddev)
        shape = (model.param_rows(), model.param_cols())
        if not init_unit:
            self.linear_params = _randn(shape, param_stddev)
        else:
            self.linear_params = np.zeros(shape, dtype=np.float32)
            self._init_unit(cfl)
        self.bias_params = _randn(model.num_filters_out, bias_stddev)

        self.use_natural_gradient = cfl.get_bool("use-natural-gradient", True)
        rank_in = cfl.get_int("rank-in", -1)
        rank_out = cfl.get_int("rank-out", -1)
        self.alpha_in = f32(cfl.get_float("alpha-in", 4.0))
        self.alpha_out = f32(cfl.get_float("alpha-out", 4.0))
        self.num_minibatches_history = f32(cfl.get_float("num-minibatches-history", 4.0))
        dim_in, dim_out = shape[1] + 1, shape[0]
        self.rank_in = rank_in if rank_in >= 0 else min(80, (dim_in + 1) // 2)
        self.rank_out = rank_out if rank_out >= 0 else min(80, (dim_out + 1) // 2)
        problem = self._natural_gradient_problem()
        if problem:
            raise cfl.error(problem)

    def _init_unit(self, cfl):
        m = self.model
        if m.num_filters_in != m.num_filters_out:
            raise cfl.error("init-unit needs num-filters-in == num-filters-out")
        if (0, 0) not in m.offsets:
            raise cfl.error("init-unit needs the model to have the offset (0, 0)")
        i = m.offsets.index((0, 0))
        block = self.linear_params[:, i * m.num_filters_in:(i + 1) * m.num_filters_in]
        block[np.diag_indices(m.num_filters_in)] += 1.0

    def _natural_gradient_problem(self):
        if self.rank_in <= 0 or self.rank_out <= 0:
            return "rank-in and rank-out must be positive"
        if not self.num_minibatches_history > 1.0:
            return "num-minibatches-history must be > 1"
        if self.alpha_in < 0.0 or self.alpha_out < 0.0:
            return "alpha-in and alpha-out must be >= 0"
        return None

    # -- serialization ------------------------------------------------------------
    def read_body(self, stream):
        start = stream.pos
        read_layout(self, stream, self.UPDATABLE_COMMON)
        stream.expect_token("<Model>")
        self.model = ConvolutionModel.read(stream)
        stream.expect_token("<LinearParams>")
        self.linear_params = stream.read_matrix()
        stream.expect_token("<BiasParams>")
        self.bias_params = stream.read_vector()
        stream.expect_token("<MaxMemoryMb>")
        self.max_memory_mb = stream.read_float()
        stream.expect_token("<UseNaturalGradient>")
        self.use_natural_gradient = stream.read_bool()
        stream.expect_token("<NumMinibatchesHistory>")
        self.num_minibatches_history = stream.read_float()
        stream.expect_token("<AlphaInOut>")
        self.alpha_in = stream.read_float()
        self.alpha_out = stream.read_float()
        stream.expect_token("<RankInOut>")
        self.rank_in = stream.read_int32()
        self.rank_out = stream.read_int32()
        stream.expect_token("</%s>" % self.type_name)
        m = self.model
        if (self.bias_params.shape[0] != m.num_filters_out
                or self.linear_params.shape != (m.param_rows(), m.param_cols())):
            raise stream.error("TimeHeightConvolutionComponent: parameter sizes %s and %d do "
                               "not match the model (%dx%d, %d)" % (
                                   self.linear_params.shape, self.bias_params.shape[0],
                                   m.param_rows(), m.param_cols(), m.num_filters_out), start)
        problem = self._natural_gradient_problem()
        if problem:
            raise stream.error("TimeHeightConvolutionComponent: " + problem, start)

    def write_body(self, stream):
        write_layout(self, stream, self.UPDATABLE_COMMON)
        stream.write_token("<Model>")
        self.model.write(stream)
        stream.write_token("<LinearParams>")
        stream.write_matrix(self.linear_params)
        stream.write_token("<BiasParams>")
        stream.write_vector(self.bias_params)
        stream.write_token("<MaxMemoryMb>")
        stream.write_float(self.max_memory_mb)
        stream.write_token("<UseNaturalGradient>")
        stream.write_bool(self.use_natural_gradient)
        stream.write_token("<NumMinibatchesHistory>")
        stream.write_float(self.num_minibatches_history)
        stream.write_token("<AlphaInOut>")
        stream.write_float(self.alpha_in)
        stream.write_float(self.alpha_out)
        stream.write_token("<RankInOut>")
        stream.write_int32(self.rank_in)
        stream.write_int32(self.rank_out)

    # -- index hooks ------------------------------------------------------------------
    def get_input_indexes(self, misc_info, output_index):
        n, t, x = output_index
        if t == kNoTime:
            raise ComputationError("TimeHeightConvolutionComponent: output index has no time")
        return [Index(n, t + off, x) for off in self.model.all_time_offsets]

    def is_computable(self, misc_info, output_index, input_index_set, used_inputs=None):
        n, t, x = output_index
        if t == kNoTime:
            raise ComputationError("TimeHeightConvolutionComponent: output index has no time")
        required = self.model.required_time_offsets
        if used_inputs is None:
            return all(input_index_set(Index(n, t + off, x)) for off in required)
        used = []
        for off in self.model.all_time_offsets:
            index = Index(n, t + off, x)
            if input_index_set(index):
                used.append(index)
            elif off in required:
                return False
        used_inputs.extend(used)
        return True

    def reorder_indexes(self, input_indexes, output_indexes):
        _, inputs, outputs = compile_convolution_computation(
            self.model, input_indexes, output_indexes, self.max_memory_mb)
        return inputs, outputs

    def precompute_indexes(self, misc_info, input_indexes, output_indexes, need_backprop):
        computation, inputs, outputs = compile_convolution_computation(
            self.model, input_indexes, output_indexes, self.max_memory_mb)
        if list(inputs) != list(input_indexes) or list(outputs) != list(output_indexes):
            raise ComputationError("TimeHeightConvolutionComponent: indexes were not "
                                   "reordered with reorder_indexes before precomputing")
        return TimeHeightConvolutionComponentPrecomputedIndexes(computation)

    # -- computation ----------------------------------------------------------------------
    def _bias_view(self, mat):
        return mat.reshape(mat.shape[0] * self.model.height_out, self.model.num_filters_out)

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        cc = indexes.computation
        params = xp.asarray(self.linear_params)
        bias = xp.asarray(self.bias_params)
        inp = xp.ascontiguousarray(in_value)

        def run(o):
            self._bias_view(o)[...] = bias
            convolve_forward(cc, inp, params, o)
        _contiguous_call(xp, out, run)
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: the bias into every (row, height), then ConvolveForward's
        # AddMatMat per step and chunk, in its order.
        cc = indexes.computation
        inp = np.ascontiguousarray(in_value)

        def run(o):
            self._bias_view(o)[...] = self.bias_params
            convolve_forward(cc, inp, self.linear_params, o, kaldi)
        _contiguous_call(np, out, run)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(out_deriv)
        cc = indexes.computation
        od = xp.ascontiguousarray(out_deriv)
        if in_deriv is not None:
            params = xp.asarray(self.linear_params)
            _contiguous_call(xp, in_deriv,
                             lambda d: convolve_backward_data(cc, params, od, d))
        if to_update is not None:
            if to_update.learning_rate == 0.0:
                return
            to_update._update_simple(cc, xp.ascontiguousarray(in_value), od)

    def _update_simple(self, cc, in_value, out_deriv):
        """Plain gradient step: params += learning_rate * gradient."""
        xp = array_module(in_value)
        lr = np.float32(self.learning_rate)
        bias = xp.asarray(self.bias_params)
        bias += lr * self._bias_view(out_deriv).sum(axis=0)
        params = xp.asarray(self.linear_params)
        convolve_backward_params(cc, in_value, out_deriv, lr, params)
        self._store_params(params, bias)

    def _store_params(self, params, bias):
        """Keeps parameters as NumPy arrays (a CuPy update is copied back)."""
        if not isinstance(params, np.ndarray):
            self.linear_params = params.get()
            self.bias_params = bias.get()

    # -- parameters (scale, add, vectorize...: ParameterArrays) -------------------------
    def dot_product(self, other):
        return float(np.vdot(self.linear_params.astype(np.float64),
                             other.linear_params.astype(np.float64))
                     + np.dot(self.bias_params.astype(np.float64),
                              other.bias_params.astype(np.float64)))
