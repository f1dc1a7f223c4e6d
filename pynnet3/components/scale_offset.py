"""Per-element scale and offset components: PerElementScaleComponent,
NaturalGradientPerElementScaleComponent, PerElementOffsetComponent,
FixedScaleComponent, FixedBiasComponent, ScaleAndOffsetComponent,
ConstantFunctionComponent.

Each maps an input row x to y with y_i = s_i x_i, y_i = x_i + o_i,
y_i = s_i x_i + o_i, or (ConstantFunction) y = c regardless of x. With a
``block-dim`` smaller than ``dim`` (PerElementOffset, ScaleAndOffset) one
block of parameters is applied to each block of ``block-dim`` columns.

I/O is byte-identical to Kaldi's (older optional tokens accepted), ``info()``
is Kaldi's Info(), and the update is the plain learning-rate gradient step
(natural-gradient options are kept for I/O only).
"""

import numpy as np

from ..common.floats import f32, kaldi_str
from ..common.parameter_stats import kaldi_min_max, vector_stats
from ..errors import NnetError
from .affine import (ParameterArrays, ReadSteps, add_scaled, check_natural_gradient_options,
                     check_positive, gaussian, load_config_vector, randn, read_legacy_is_gradient,
                     row_sum)
from .base import Component, Field, P, UpdatableComponent, array_module

_COMMON = UpdatableComponent.UPDATABLE_COMMON


def _init_common(comp, cfl):
    comp.init_updatable_common(cfl)
    if comp.max_change < 0.0 or comp.l2_regularize < 0.0:
        raise cfl.error("max-change and l2-regularize must be >= 0")


def _write_into(out, result):
    """``out[...] = result``; ``result`` is a new array, so this is right even
    when ``out`` shares memory with the input (kPropagateInPlace/kBackpropInPlace)."""
    out[...] = result


# --------------------------------------------------------------------------
# PerElementScaleComponent
# --------------------------------------------------------------------------

class PerElementScaleComponent(ReadSteps, ParameterArrays, UpdatableComponent):
    """y_i = s_i x_i with trainable scales s."""

    type_name = "PerElementScaleComponent"

    # Kaldi's propagate is copies and one rounding per element: so is ours.
    kaldi_exact = True
    param_attrs = ("scales",)
    layout = _COMMON + (Field("<Params>", "vector", "scales"),)
    read_steps = layout + (read_legacy_is_gradient,)

    def __init__(self, scales=None):
        super().__init__()
        self.scales = (np.zeros(0, np.float32) if scales is None
                       else np.array(scales, dtype=np.float32))

    def _init_scales_from_config(self, cfl, file_key):
        if cfl.has(file_key):
            self.scales = load_config_vector(cfl, file_key)
            if self.scales.shape[0] == 0:
                raise cfl.error("%s= names an empty vector" % file_key)
            dim = cfl.get_int("dim")
            if dim is not None and dim != self.scales.shape[0]:
                raise cfl.error("dim=%d does not match the vector (%d)"
                                % (dim, self.scales.shape[0]))
            return
        dim = cfl.require("dim", "int")
        check_positive(cfl, dim=dim)
        param_mean = f32(cfl.get_float("param-mean", 1.0))
        param_stddev = f32(cfl.get_float("param-stddev", 0.0))
        if param_stddev < 0.0:
            raise cfl.error("param-stddev must be >= 0")
        self.scales = gaussian(dim, param_stddev, param_mean)

    def init_from_config(self, cfl):
        """Keys: the learning-rate keys; vector= (the scales) or dim,
        param-mean (1.0), param-stddev (0.0)."""
        self.__init__()
        _init_common(self, cfl)
        self._init_scales_from_config(cfl, "vector")

    def properties(self):
        return int(P.kSimpleComponent | P.kUpdatableComponent | P.kBackpropNeedsInput
                   | P.kPropagateInPlace | P.kBackpropInPlace)

    def input_dim(self):
        return int(self.scales.shape[0])

    def output_dim(self):
        return int(self.scales.shape[0])

    def info(self):
        lo, hi = kaldi_min_max(self.scales)
        return (self.updatable_info() + ", scales-min=%s, scales-max=%s"
                % (kaldi_str(lo), kaldi_str(hi)) + vector_stats("scales", self.scales, True))

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        _write_into(out, in_value * xp.asarray(self.scales))
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(out_deriv)
        # Kaldi updates first (out_deriv may share memory with in_deriv).
        if to_update is not None:
            add_scaled(to_update.scales, to_update.learning_rate,
                       row_sum(xp, out_deriv * in_value))
        if in_deriv is not None:
            _write_into(in_deriv, out_deriv * xp.asarray(self.scales))


def _skip_max_change_per_minibatch(comp, stream):
    """Older Kaldi wrote <MaxChangePerMinibatch> (now the max-change option); ignored."""
    if stream.peek_token() == "<MaxChangePerMinibatch>":
        stream.read_token()
        stream.read_float()


class NaturalGradientPerElementScaleComponent(PerElementScaleComponent):
    """PerElementScaleComponent with Kaldi's natural-gradient options
    (rank 8, update-period 10, num-samples-history 2000, alpha 4)."""

    type_name = "NaturalGradientPerElementScaleComponent"
    layout = _COMMON + (
        Field("<Params>", "vector", "scales"),
        Field("<IsGradient>", "bool", "is_gradient"),
        Field("<Rank>", "int", "rank"),
        Field("<UpdatePeriod>", "int", "update_period"),
        Field("<NumSamplesHistory>", "float", "num_samples_history"),
        Field("<Alpha>", "float", "alpha"),
    )
    read_steps = layout + (_skip_max_change_per_minibatch,)

    def __init__(self, scales=None):
        super().__init__(scales)
        # OnlineNaturalGradient's constructor defaults (used only if neither
        # init_from_config nor read sets them).
        self.rank = 40
        self.update_period = 1
        self.num_samples_history = 2000.0
        self.alpha = 4.0

    def check(self):
        try:
            check_natural_gradient_options(ValueError, self.rank, self.update_period,
                                           self.num_samples_history, self.alpha)
        except ValueError as e:
            return str(e)
        return None

    def init_from_config(self, cfl):
        """Keys: rank (8), update-period (10), num-samples-history (2000),
        alpha (4), the learning-rate keys; scales= (a vector file) or dim,
        param-mean (1.0), param-stddev (0.0)."""
        self.__init__()
        self.rank = cfl.get_int("rank", 8)
        self.update_period = cfl.get_int("update-period", 10)
        self.num_samples_history = f32(cfl.get_float("num-samples-history", 2000.0))
        self.alpha = f32(cfl.get_float("alpha", 4.0))
        _init_common(self, cfl)
        self._init_scales_from_config(cfl, "scales")
        check_natural_gradient_options(cfl.error, self.rank, self.update_period,
                                       self.num_samples_history, self.alpha)

    def info(self):
        return super().info() + (", rank=%d, update-period=%d, num-samples-history=%s, alpha=%s"
                                 % (self.rank, self.update_period,
                                    kaldi_str(self.num_samples_history), kaldi_str(self.alpha)))


# --------------------------------------------------------------------------
# PerElementOffsetComponent
# --------------------------------------------------------------------------

def _read_offset_dims(comp, stream):
    """Older files end after <Offsets>: then dim is the offsets' dimension and
    natural gradient is on."""
    token = stream.peek_token()
    if token is not None and token.startswith("</"):
        comp.dim = int(comp.offsets.shape[0])
        comp.use_natural_gradient = True
        return
    stream.expect_token("<Dim>")
    comp.dim = stream.read_int32()
    stream.expect_token("<UseNaturalGradient>")
    comp.use_natural_gradient = stream.read_bool()


class PerElementOffsetComponent(ReadSteps, ParameterArrays, UpdatableComponent):
    """y = x + o, with trainable offsets o of dimension block-dim applied to
    each block of block-dim columns."""

    type_name = "PerElementOffsetComponent"

    # Kaldi's propagate is copies and one rounding per element: so is ours.
    kaldi_exact = True
    param_attrs = ("offsets",)
    # Kaldi's fixed natural-gradient settings (not configurable, not stored).
    rank = 20
    update_period = 4
    layout = _COMMON + (
        Field("<Offsets>", "vector", "offsets"),
        Field("<Dim>", "int", "dim"),
        Field("<UseNaturalGradient>", "bool", "use_natural_gradient"),
    )
    read_steps = _COMMON + (Field("<Offsets>", "vector", "offsets"), read_legacy_is_gradient,
                            _read_offset_dims)

    def __init__(self, offsets=None):
        super().__init__()
        self.offsets = (np.zeros(0, np.float32) if offsets is None
                        else np.array(offsets, dtype=np.float32))
        self.dim = int(self.offsets.shape[0])
        self.use_natural_gradient = True

    def check(self):
        block = self.offsets.shape[0]
        if self.dim <= 0 or block == 0 or self.dim % block != 0:
            return "<Dim> %d is not a positive multiple of the offsets' dimension %d" % (
                self.dim, block)
        return None

    def init_from_config(self, cfl):
        """Keys: the learning-rate keys; vector= (the offsets; dim, if given,
        must equal its dimension) or dim, block-dim (dim), param-mean (0),
        param-stddev (0); use-natural-gradient (true)."""
        self.__init__()
        _init_common(self, cfl)
        if cfl.has("vector"):
            self.offsets = load_config_vector(cfl, "vector")
            self.dim = cfl.get_int("dim", int(self.offsets.shape[0]))
            # Kaldi requires the vector's dimension to be a multiple of dim;
            # propagation needs dim to be a multiple of it: so they are equal.
            block = self.offsets.shape[0]
            if self.dim <= 0 or block == 0 or block % self.dim != 0 or self.dim % block != 0:
                raise cfl.error("Invalid dimension dim=%d for a vector of dimension %d"
                                % (self.dim, block))
        else:
            self.dim = cfl.require("dim", "int")
            if self.dim <= 0:
                raise cfl.error("Invalid dimension dim=%d" % self.dim)
            param_mean = f32(cfl.get_float("param-mean", 0.0))
            param_stddev = f32(cfl.get_float("param-stddev", 0.0))
            block_dim = cfl.get_int("block-dim", self.dim)
            if block_dim <= 0 or self.dim % block_dim != 0:
                raise cfl.error("Invalid value block-dim=%d" % block_dim)
            self.offsets = gaussian(block_dim, param_stddev, param_mean)
        self.use_natural_gradient = cfl.get_bool("use-natural-gradient", True)

    def properties(self):
        return int(P.kSimpleComponent | P.kUpdatableComponent | P.kBackpropInPlace
                   | P.kPropagateInPlace
                   | (P.kOutputContiguous if self.dim != self.offsets.shape[0] else 0))

    def input_dim(self):
        return int(self.dim)

    def output_dim(self):
        return int(self.dim)

    def info(self):
        lo, hi = kaldi_min_max(self.offsets)
        return (self.updatable_info()
                + ", offsets-min=%s, offsets-max=%s, block-dim=%d, use-natural-gradient=%s"
                % (kaldi_str(lo), kaldi_str(hi), self.offsets.shape[0],
                   kaldi_str(bool(self.use_natural_gradient)))
                + vector_stats("offsets", self.offsets, True))

    def _tiled(self, xp):
        return xp.tile(xp.asarray(self.offsets), self.dim // self.offsets.shape[0])

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        _write_into(out, in_value + self._tiled(xp))
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(out_deriv)
        if in_deriv is not None and in_deriv is not out_deriv:
            in_deriv[...] = out_deriv
        if to_update is not None:
            block = to_update.offsets.shape[0]
            grad = row_sum(xp, out_deriv.reshape(-1, block))
            add_scaled(to_update.offsets, to_update.learning_rate, grad)


# --------------------------------------------------------------------------
# FixedScaleComponent, FixedBiasComponent
# --------------------------------------------------------------------------

class _FixedVectorComponent(ReadSteps, Component):
    """A simple component given by one fixed vector, the attribute named
    ``vector_attr`` (also its config key, and its name in Info())."""

    vector_attr = None

    def __init__(self, values=None):
        setattr(self, self.vector_attr, np.zeros(0, np.float32) if values is None
                else np.array(values, dtype=np.float32))

    def _vector(self):
        return getattr(self, self.vector_attr)

    def _load_from_config(self, cfl):
        """``<vector_attr>=<rxfilename>``: loads it and returns True (other
        keys stay unused, so the caller's check rejects them); False if absent."""
        key = self.vector_attr
        if not cfl.has(key):
            return False
        setattr(self, key, load_config_vector(cfl, key))
        if self._vector().shape[0] == 0:
            raise cfl.error("%s= names an empty vector" % key)
        return True

    def properties(self):
        return int(P.kSimpleComponent | P.kPropagateInPlace | P.kBackpropInPlace)

    def input_dim(self):
        return int(self._vector().shape[0])

    def output_dim(self):
        return int(self._vector().shape[0])

    def info(self):
        return Component.info(self) + vector_stats(self.vector_attr, self._vector(), True)


class FixedScaleComponent(_FixedVectorComponent):
    """y_i = s_i x_i with fixed scales."""

    type_name = "FixedScaleComponent"

    # Kaldi's propagate is copies and one rounding per element: so is ours.
    kaldi_exact = True
    layout = (Field("<Scales>", "vector", "scales"),)
    vector_attr = "scales"

    def init_from_config(self, cfl):
        """``scales=<rxfilename>`` alone, or dim plus optional scale (every
        scale equal to it; without it, unit-Gaussian scales, for testing)."""
        if self._load_from_config(cfl):
            return
        scale = cfl.get_float("scale")
        dim = cfl.require("dim", "int")
        check_positive(cfl, dim=dim)
        if scale is not None:
            self.scales = np.full(dim, f32(scale), dtype=np.float32)
        else:
            self.scales = randn(dim)

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        _write_into(out, in_value * xp.asarray(self.scales))
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is not None:
            xp = array_module(out_deriv)
            _write_into(in_deriv, out_deriv * xp.asarray(self.scales))


class FixedBiasComponent(_FixedVectorComponent):
    """y = x + b with a fixed bias."""

    type_name = "FixedBiasComponent"

    # Kaldi's propagate is copies and one rounding per element: so is ours.
    kaldi_exact = True
    layout = (Field("<Bias>", "vector", "bias"),)
    vector_attr = "bias"

    def init_from_config(self, cfl):
        """``bias=<rxfilename>`` alone, or dim (unit-Gaussian bias, for testing)."""
        if self._load_from_config(cfl):
            return
        dim = cfl.require("dim", "int")
        check_positive(cfl, dim=dim)
        self.bias = randn(dim)

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        _write_into(out, in_value + xp.asarray(self.bias))
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is not None and in_deriv is not out_deriv:
            in_deriv[...] = out_deriv


# --------------------------------------------------------------------------
# ScaleAndOffsetComponent
# --------------------------------------------------------------------------

_EPSILON = np.float32(1.0e-04)


def _nonzero(xp, scales):
    """Kaldi's EnsureNonzero: values in (-eps, eps) become +eps (or -eps if negative)."""
    small = (scales > -_EPSILON) & (scales < _EPSILON)
    signed = xp.where(scales >= 0, _EPSILON, -_EPSILON).astype(xp.float32)
    return xp.where(small, signed, scales).astype(xp.float32)


class ScaleAndOffsetComponent(ReadSteps, ParameterArrays, UpdatableComponent):
    """y = s * x + o (per element, scales kept away from zero by 1e-4), with
    trainable s (initially 1) and o (initially 0) of dimension block-dim."""

    type_name = "ScaleAndOffsetComponent"

    # Kaldi's propagate is copies and one rounding per element: so is ours.
    kaldi_exact = True
    param_attrs = ("scales", "offsets")
    update_period = 4   # fixed in Kaldi (not configurable, not stored)
    layout = _COMMON + (
        Field("<Dim>", "int", "dim"),
        Field("<Scales>", "vector", "scales"),
        Field("<Offsets>", "vector", "offsets"),
        Field("<UseNaturalGradient>", "bool", "use_natural_gradient"),
        Field("<Rank>", "int", "rank"),
    )

    def __init__(self):
        super().__init__()
        self.dim = 0
        self.scales = np.zeros(0, np.float32)
        self.offsets = np.zeros(0, np.float32)
        self.use_natural_gradient = True
        self.rank = 40

    def check(self):
        block = self.scales.shape[0]
        if self.offsets.shape[0] != block:
            return "<Offsets> has dimension %d but <Scales> has %d" % (
                self.offsets.shape[0], block)
        if self.dim <= 0 or block == 0 or self.dim % block != 0:
            return "<Dim> %d is not a positive multiple of the scales' dimension %d" % (
                self.dim, block)
        if self.rank <= 0:
            return "<Rank> must be positive, got %d" % self.rank
        return None

    def init_from_config(self, cfl):
        """Keys: the learning-rate keys; dim (required); use-natural-gradient
        (true); block-dim (dim); rank (20). Scales start at 1, offsets at 0."""
        self.__init__()
        _init_common(self, cfl)
        dim = cfl.get_int("dim")
        if dim is None or dim <= 0:
            raise cfl.error("Dimension 'dim' must be specified and >0")
        self.dim = dim
        self.use_natural_gradient = cfl.get_bool("use-natural-gradient", True)
        block_dim = cfl.get_int("block-dim", dim)
        if block_dim <= 0 or dim % block_dim != 0:
            raise cfl.error("Invalid block-dim=%d" % block_dim)
        self.rank = cfl.get_int("rank", 20)
        check_natural_gradient_options(cfl.error, self.rank)
        self.scales = np.ones(block_dim, np.float32)
        self.offsets = np.zeros(block_dim, np.float32)

    def properties(self):
        contiguous = (P.kInputContiguous | P.kOutputContiguous
                      if self.dim != self.scales.shape[0] else 0)
        return int(P.kSimpleComponent | P.kUpdatableComponent | P.kBackpropInPlace
                   | P.kPropagateInPlace | P.kBackpropNeedsOutput | contiguous)

    def input_dim(self):
        return int(self.dim)

    def output_dim(self):
        return int(self.dim)

    def info(self):
        s = self.updatable_info() + ", rank=%d" % self.rank
        if self.dim != self.scales.shape[0]:
            s += ", block-size=%d" % self.scales.shape[0]
        return (s + vector_stats("scales", self.scales, True)
                + vector_stats("offsets", self.offsets, True))

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        block = self.scales.shape[0]
        x = in_value.reshape(-1, block)
        y = x * _nonzero(xp, xp.asarray(self.scales)) + xp.asarray(self.offsets)
        _write_into(out, y.reshape(out.shape))
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(out_deriv)
        block = self.scales.shape[0]
        d = out_deriv.reshape(-1, block)
        if to_update is not None:
            add_scaled(to_update.offsets, to_update.learning_rate, row_sum(xp, d))
            # The input, reconstructed from the output (as Kaldi does, with
            # this component's offsets, after the offset step when updating
            # itself).
            x = ((out_value.reshape(-1, block) - xp.asarray(self.offsets))
                 * (np.float32(1.0) / _nonzero(xp, xp.asarray(self.scales))))
            add_scaled(to_update.scales, to_update.learning_rate, row_sum(xp, x * d))
        if in_deriv is not None:
            _write_into(in_deriv, (d * xp.asarray(self.scales)).reshape(in_deriv.shape))


# --------------------------------------------------------------------------
# ConstantFunctionComponent
# --------------------------------------------------------------------------

class ConstantFunctionComponent(ReadSteps, ParameterArrays, UpdatableComponent):
    """y = c for every input row; c is trainable when is-updatable."""

    type_name = "ConstantFunctionComponent"

    # Kaldi's propagate copies the output vector into every row: so does ours.
    kaldi_exact = True
    param_attrs = ("output",)
    layout = _COMMON + (
        Field("<InputDim>", "int", "input_dim_"),
        Field("<Output>", "vector", "output"),
        Field("<IsUpdatable>", "bool", "is_updatable"),
        Field("<UseNaturalGradient>", "bool", "use_natural_gradient"),
    )

    def __init__(self):
        super().__init__()
        self.input_dim_ = -1
        self.output = np.zeros(0, np.float32)
        self.is_updatable = True
        self.use_natural_gradient = True

    def check(self):
        if self.input_dim_ <= 0:
            return "<InputDim> must be positive, got %d" % self.input_dim_
        return None

    def init_from_config(self, cfl):
        """Keys: the learning-rate keys; input-dim, output-dim (required);
        is-updatable (true); use-natural-gradient (true); output-mean (0),
        output-stddev (0)."""
        self.__init__()
        _init_common(self, cfl)
        output_dim = cfl.require("output-dim", "int")
        self.input_dim_ = cfl.require("input-dim", "int")
        self.is_updatable = cfl.get_bool("is-updatable", True)
        self.use_natural_gradient = cfl.get_bool("use-natural-gradient", True)
        output_mean = f32(cfl.get_float("output-mean", 0.0))
        output_stddev = f32(cfl.get_float("output-stddev", 0.0))
        check_positive(cfl, input_dim=self.input_dim_, output_dim=output_dim)
        self.output = gaussian(output_dim, output_stddev, output_mean)

    def properties(self):
        return int(P.kSimpleComponent
                   | (P.kUpdatableComponent if self.is_updatable else 0)
                   | (P.kPropagateInPlace if self.input_dim() == self.output_dim() else 0)
                   | P.kBackpropAdds)

    def input_dim(self):
        return int(self.input_dim_)

    def output_dim(self):
        return int(self.output.shape[0])

    def info(self):
        return (self.updatable_info()
                + ", %s, input-dim=%d, output-dim=%d, is-updatable=%s, use-natural-gradient=%s"
                % (self.type_name, self.input_dim(), self.output_dim(),
                   kaldi_str(bool(self.is_updatable)), kaldi_str(bool(self.use_natural_gradient)))
                + vector_stats("output", self.output, True))

    def propagate(self, indexes, in_value, out):
        xp = array_module(out)
        out[...] = xp.asarray(self.output)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        # The output does not depend on the input: nothing is added to in_deriv.
        if to_update is not None and to_update.is_updatable:
            xp = array_module(out_deriv)
            add_scaled(to_update.output, to_update.learning_rate, row_sum(xp, out_deriv))

    # Kaldi's Scale/Add do nothing unless the component is updatable.
    def scale(self, alpha):
        if self.is_updatable:
            super().scale(alpha)

    def add(self, alpha, other):
        if self.is_updatable:
            super().add(alpha, other)

    def num_parameters(self):
        return int(self.output.shape[0]) if self.is_updatable else 0

    def vectorize(self):
        return super().vectorize() if self.is_updatable else np.zeros(0, np.float32)

    def unvectorize(self, params):
        if self.is_updatable:
            super().unvectorize(params)
        elif len(params) != 0:
            raise NnetError("ConstantFunctionComponent is not updatable; it has no parameters")

    def dot_product(self, other):
        return super().dot_product(other) if self.is_updatable else 0.0
