"""Elementwise nonlinearities and the softmax family (Kaldi's NonlinearComponent).

:class:`NonlinearComponent` holds what Kaldi's base of the same name holds:
``dim``/``block_dim``, the diagnostic statistics (sum of outputs, sum of the
nonlinearity's derivative, their count; sum of squared output derivatives and
its count; self-repair counters) and the self-repair configuration. Statistics
are kept as float64 sums on the host, exactly as Kaldi keeps them
(CuVector<double>), and are written count-normalized as Kaldi writes them, with
the same float32 roundings, so a read-then-write reproduces Kaldi's bytes.

Self-repair (Sigmoid, Tanh, RectifiedLinear) happens in ``backprop`` when a
``to_update`` component is given, as in Kaldi: units whose average derivative
(from the stored stats) is out of range get a term added to ``in_deriv``; it
runs on about half of the calls (a random draw, see ``kaldi_random``).
"""

import numpy as np

from . import kaldi_random
from ..common.floats import f32, kaldi_str
from ..common.parameter_stats import summarize_vector
from ..errors import NnetError
from .base import Component, P, to_host

#: Kaldi's kUnsetThreshold: a self-repair threshold that was not configured.
UNSET_THRESHOLD = -1000.0
#: Kaldi's hard-coded probability of applying self-repair on one minibatch.
REPAIR_PROBABILITY = 0.5

_F32 = np.float32
_EMPTY = np.zeros(0, dtype=np.float64)


def array_module_of(array):
    if isinstance(array, np.ndarray):
        return np
    import cupy
    return cupy


def invalid_initializer(cfl, type_name):
    """Kaldi's 'Invalid initializer for layer of type ...' as a ConfigError."""
    return cfl.error("invalid initializer for layer of type %s" % type_name)


def column_sums(out_value):
    """Float32 column sums of a matrix, on the host as float64 (Kaldi's
    AddRowSumMat into a float vector, then added to double stats)."""
    xp = array_module_of(out_value)
    return to_host(xp.sum(out_value, axis=0, dtype=xp.float32)).astype(np.float64)


def scaled_float_vector(sums, count):
    """Kaldi's write-time normalization: ``Vector<float>(sums)`` scaled by
    ``float(1.0 / count)`` in float32 (not scaled when count is 0)."""
    temp = np.asarray(sums, dtype=np.float64).astype(_F32)
    if count != 0.0:
        temp = temp * _F32(1.0 / count)
    return temp


def heaviside(x):
    """Kaldi's Heaviside: 1 where x > 0, else 0 (same dtype)."""
    return (x > 0).astype(x.dtype)


class NonlinearComponent(Component):
    """Kaldi's NonlinearComponent: a dim-preserving function with statistics.

    Config: ``dim`` (required), ``block-dim`` (divisor of dim, default dim),
    ``self-repair-lower-threshold``, ``self-repair-upper-threshold``,
    ``self-repair-scale``.
    """

    def __init__(self, dim=None, block_dim=None, self_repair_lower_threshold=UNSET_THRESHOLD,
                 self_repair_upper_threshold=UNSET_THRESHOLD, self_repair_scale=0.0):
        self.set_defaults()
        if dim is not None:
            self.dim = int(dim)
            self.block_dim = int(dim if block_dim is None else block_dim)
        self.self_repair_lower_threshold = f32(self_repair_lower_threshold)
        self.self_repair_upper_threshold = f32(self_repair_upper_threshold)
        self.self_repair_scale = f32(self_repair_scale)

    def set_defaults(self):
        """The state of Kaldi's default constructor."""
        self.dim = -1
        self.block_dim = -1
        self.value_sum = _EMPTY.copy()      # sum over frames of the output
        self.deriv_sum = _EMPTY.copy()      # sum of the nonlinearity's derivative
        self.count = 0.0                    # frames counted in value_sum/deriv_sum
        self.oderiv_sumsq = _EMPTY.copy()   # sum of squared output derivatives
        self.oderiv_count = 0.0
        self.num_dims_self_repaired = 0.0
        self.num_dims_processed = 0.0
        self.self_repair_lower_threshold = UNSET_THRESHOLD
        self.self_repair_upper_threshold = UNSET_THRESHOLD
        self.self_repair_scale = 0.0

    # -- configuration ----------------------------------------------------------
    def init_from_config(self, cfl):
        self.set_defaults()
        dim = cfl.get_int("dim")
        self.dim = -1 if dim is None else dim
        self.block_dim = cfl.get_int("block-dim", self.dim)
        self.self_repair_lower_threshold = f32(
            cfl.get_float("self-repair-lower-threshold", UNSET_THRESHOLD))
        self.self_repair_upper_threshold = f32(
            cfl.get_float("self-repair-upper-threshold", UNSET_THRESHOLD))
        self.self_repair_scale = f32(cfl.get_float("self-repair-scale", 0.0))
        if (dim is None or self.dim <= 0 or self.block_dim <= 0
                or self.dim % self.block_dim != 0):
            raise invalid_initializer(cfl, self.type_name)

    def input_dim(self):
        return self.dim

    def output_dim(self):
        return self.dim

    # -- serialization ------------------------------------------------------------
    def read_body(self, stream):
        self.set_defaults()
        stream.expect_token("<Dim>")
        self.dim = stream.read_int32()
        if (stream.peek_token() or "").startswith("<B"):
            stream.expect_token("<BlockDim>")
            self.block_dim = stream.read_int32()
        else:
            self.block_dim = self.dim
        stream.expect_token("<ValueAvg>")
        self.value_sum = stream.read_vector(np.float64)
        stream.expect_token("<DerivAvg>")
        self.deriv_sum = stream.read_vector(np.float64)
        stream.expect_token("<Count>")
        self.count = stream.read_double()
        if (stream.peek_token() or "").startswith("<O"):
            stream.expect_token("<OderivRms>")
            self.oderiv_sumsq = np.square(stream.read_vector(np.float64))
            stream.expect_token("<OderivCount>")
            self.oderiv_count = stream.read_double()
        else:
            self.oderiv_count = 0.0
            self.oderiv_sumsq = _EMPTY.copy()
        self.value_sum = self.value_sum * self.count
        self.deriv_sum = self.deriv_sum * self.count
        self.oderiv_sumsq = self.oderiv_sumsq * self.oderiv_count
        end = "</%s>" % self.type_name
        start = stream.pos
        token = stream.read_token()
        if token == "<NumDimsSelfRepaired>":
            self.num_dims_self_repaired = stream.read_double()
            start, token = stream.pos, stream.read_token()
        if token == "<NumDimsProcessed>":
            self.num_dims_processed = stream.read_double()
            start, token = stream.pos, stream.read_token()
        if token == "<SelfRepairLowerThreshold>":
            self.self_repair_lower_threshold = stream.read_float()
            start, token = stream.pos, stream.read_token()
        if token == "<SelfRepairUpperThreshold>":
            self.self_repair_upper_threshold = stream.read_float()
            start, token = stream.pos, stream.read_token()
        if token == "<SelfRepairScale>":
            self.self_repair_scale = stream.read_float()
            start, token = stream.pos, stream.read_token()
        if token != end:
            raise stream.error("expected token %s, got '%s'" % (end, token), start)
        if self.dim <= 0 or self.block_dim <= 0 or self.dim % self.block_dim != 0:
            raise stream.error("%s: bad <Dim> %d / <BlockDim> %d"
                               % (self.type_name, self.dim, self.block_dim), start)

    def write_body(self, stream):
        stream.write_token("<Dim>")
        stream.write_int32(self.dim)
        if self.block_dim != self.dim:
            stream.write_token("<BlockDim>")
            stream.write_int32(self.block_dim)
        stream.write_token("<ValueAvg>")
        stream.write_vector(scaled_float_vector(self.value_sum, self.count))
        stream.write_token("<DerivAvg>")
        stream.write_vector(scaled_float_vector(self.deriv_sum, self.count))
        stream.write_token("<Count>")
        stream.write_double(self.count)
        stream.write_token("<OderivRms>")
        rms = scaled_float_vector(self.oderiv_sumsq, self.oderiv_count)
        stream.write_vector(np.sqrt(np.maximum(rms, _F32(0.0))))
        stream.write_token("<OderivCount>")
        stream.write_double(self.oderiv_count)
        stream.write_token("<NumDimsSelfRepaired>")
        stream.write_double(self.num_dims_self_repaired)
        stream.write_token("<NumDimsProcessed>")
        stream.write_double(self.num_dims_processed)
        if self.self_repair_lower_threshold != UNSET_THRESHOLD:
            stream.write_token("<SelfRepairLowerThreshold>")
            stream.write_float(self.self_repair_lower_threshold)
        if self.self_repair_upper_threshold != UNSET_THRESHOLD:
            stream.write_token("<SelfRepairUpperThreshold>")
            stream.write_float(self.self_repair_upper_threshold)
        if self.self_repair_scale != 0.0:
            stream.write_token("<SelfRepairScale>")
            stream.write_float(self.self_repair_scale)

    # -- description -----------------------------------------------------------------
    def info(self):
        s = "%s, dim=%d" % (self.type_name, self.dim)
        if self.block_dim != self.dim:
            s += ", block-dim=%d" % self.block_dim
        if self.self_repair_lower_threshold != UNSET_THRESHOLD:
            s += ", self-repair-lower-threshold=" + kaldi_str(self.self_repair_lower_threshold)
        if self.self_repair_upper_threshold != UNSET_THRESHOLD:
            s += ", self-repair-upper-threshold=" + kaldi_str(self.self_repair_upper_threshold)
        if self.self_repair_scale != 0.0:
            s += ", self-repair-scale=" + kaldi_str(self.self_repair_scale)
        if self.count > 0 and self.value_sum.shape[0] == self.dim:
            s += ", count=" + kaldi_str(self.count, 3)
            proportion = (self.num_dims_self_repaired / self.num_dims_processed
                          if self.num_dims_processed > 0 else 0.0)
            s += ", self-repaired-proportion=" + kaldi_str(proportion)
            value_avg = self.value_sum.astype(_F32) * _F32(1.0 / self.count)
            s += ", value-avg=" + summarize_vector(value_avg)
            if self.deriv_sum.shape[0] == self.dim:
                s += ", deriv-avg=" + summarize_vector(self.deriv_sum * (1.0 / self.count))
        if self.oderiv_count > 0 and self.oderiv_sumsq.shape[0] == self.dim:
            rms = np.sqrt(np.maximum(self.oderiv_sumsq * (1.0 / self.oderiv_count), 0.0))
            s += ", oderiv-rms=" + summarize_vector(rms)
            s += ", oderiv-count=" + kaldi_str(self.oderiv_count)
        return s

    # -- statistics ------------------------------------------------------------------
    def store_stats_internal(self, out_value, deriv=None):
        """Kaldi's StoreStatsInternal: adds column sums of ``out_value`` (and of
        ``deriv``, the nonlinearity's derivative) to the stats."""
        dim = self.dim
        if out_value.shape[1] != dim:
            raise NnetError("%s: stats of dim %d stored in component of dim %d"
                            % (self.type_name, out_value.shape[1], dim))
        if self.value_sum.shape[0] != dim:
            self.value_sum = np.zeros(dim)
            self.count = 0.0
        if deriv is not None and self.deriv_sum.shape[0] != dim:
            self.deriv_sum = np.zeros(dim)
            self.count = 0.0
            self.value_sum[:] = 0.0
        self.count += out_value.shape[0]
        self.value_sum = self.value_sum + column_sums(out_value)
        if deriv is not None:
            self.deriv_sum = self.deriv_sum + column_sums(deriv)

    def store_backprop_stats(self, out_deriv):
        """Kaldi's StoreBackpropStats: sum of squared output derivatives, on
        about 3 of 4 calls (always on the first)."""
        if kaldi_random.rand_int(0, 3) == 0 and self.oderiv_count != 0:
            return
        dim = self.dim
        if self.oderiv_sumsq.shape[0] != dim:
            self.oderiv_sumsq = np.zeros(dim)
            self.oderiv_count = 0.0
        xp = array_module_of(out_deriv)
        sumsq = to_host(xp.sum(out_deriv * out_deriv, axis=0, dtype=xp.float32))
        self.oderiv_sumsq = self.oderiv_sumsq + sumsq.astype(np.float64)
        self.oderiv_count += out_deriv.shape[0]

    def zero_stats(self):
        self.value_sum = np.zeros_like(self.value_sum)
        self.deriv_sum = np.zeros_like(self.deriv_sum)
        self.oderiv_sumsq = np.zeros_like(self.oderiv_sumsq)
        self.count = 0.0
        self.oderiv_count = 0.0
        self.num_dims_self_repaired = 0.0
        self.num_dims_processed = 0.0

    def scale(self, alpha):
        alpha = f32(alpha)
        self.value_sum = self.value_sum * alpha
        self.deriv_sum = self.deriv_sum * alpha
        self.oderiv_sumsq = self.oderiv_sumsq * alpha
        self.count *= alpha
        self.oderiv_count *= alpha
        self.num_dims_self_repaired *= alpha
        self.num_dims_processed *= alpha

    def add(self, alpha, other):
        if not isinstance(other, NonlinearComponent):
            raise NnetError("cannot add a %s to a %s" % (other.type_name, self.type_name))
        alpha = f32(alpha)
        for name in ("value_sum", "deriv_sum", "oderiv_sumsq"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine.shape[0] == 0 and theirs.shape[0] != 0:
                mine = np.zeros(theirs.shape[0])
            if theirs.shape[0] != 0:
                mine = mine + alpha * theirs
            setattr(self, name, mine)
        self.count += alpha * other.count
        self.oderiv_count += alpha * other.oderiv_count
        self.num_dims_self_repaired += alpha * other.num_dims_self_repaired
        self.num_dims_processed += alpha * other.num_dims_processed

    # -- self-repair helpers ------------------------------------------------------------
    def _check_self_repair_scale(self):
        if not 0.0 < self.self_repair_scale < 0.1:
            raise NnetError("%s: self-repair-scale=%s is out of the range (0, 0.1) Kaldi allows"
                            % (self.type_name, kaldi_str(self.self_repair_scale)))

    def _saturation_mask(self, xp, default_lower_threshold):
        """1 for each unit whose summed derivative is below the lower
        threshold times the count (Sigmoid/Tanh self-repair), else 0."""
        lower = (default_lower_threshold if self.self_repair_lower_threshold == UNSET_THRESHOLD
                 else self.self_repair_lower_threshold)
        lower = _F32(lower * self.count)
        if self.self_repair_upper_threshold != UNSET_THRESHOLD:
            raise NnetError("Do not set the self-repair-upper-threshold for sigmoid "
                            "components, it does nothing.")
        thresholds = (-self.deriv_sum).astype(_F32) + lower
        return xp.asarray(heaviside(thresholds))

    def _may_self_repair(self):
        """Kaldi's gate for Sigmoid/Tanh self-repair (includes the random draw)."""
        return not (self.self_repair_scale == 0.0 or self.count == 0.0
                    or self.deriv_sum.shape[0] != self.dim
                    or kaldi_random.rand_uniform() > REPAIR_PROBABILITY)


def _check_to_update(to_update, cls):
    """Kaldi's dynamic_cast: only a component of the same class is updated."""
    return to_update if isinstance(to_update, cls) else None


class _SaturatingComponent(NonlinearComponent):
    """Sigmoid and Tanh: the derivative is a function of the output
    (:meth:`deriv_from_output`), and self-repair acts on units whose average
    derivative is below the lower threshold (default
    ``default_lower_threshold``), adding :meth:`_repair_term`'s term."""

    default_lower_threshold = None

    def properties(self):
        return int(P.kSimpleComponent | P.kBackpropNeedsOutput | P.kPropagateInPlace
                   | P.kStoresStats)

    def deriv_from_output(self, out_value):
        raise NotImplementedError(self.type_name)

    def _repaired(self, in_deriv, out_value, mask):
        """``in_deriv`` plus the self-repair term on the ``mask``ed units."""
        raise NotImplementedError(self.type_name)

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        deriv = out_deriv * self.deriv_from_output(out_value)
        to_update = _check_to_update(to_update, type(self))
        if to_update is not None:
            deriv = self._repair_gradients(out_value, deriv, to_update)
            to_update.store_backprop_stats(out_deriv)
        in_deriv[...] = deriv

    def _repair_gradients(self, out_value, in_deriv, to_update):
        to_update.num_dims_processed += self.dim
        if not self._may_self_repair():
            return in_deriv
        self._check_self_repair_scale()
        xp = array_module_of(out_value)
        mask = self._saturation_mask(xp, self.default_lower_threshold)
        to_update.num_dims_self_repaired += float(to_host(mask).sum())
        return self._repaired(in_deriv, out_value, mask)

    def store_stats(self, in_value, out_value, memo):
        if kaldi_random.rand_int(0, 1) == 0 and self.count != 0:
            return
        self.store_stats_internal(out_value, self.deriv_from_output(out_value))


class SigmoidComponent(_SaturatingComponent):
    """y = 1 / (1 + exp(-x)); self-repair pushes saturated units' inputs
    towards zero (lower threshold on the average derivative, default 0.05)."""

    type_name = "SigmoidComponent"
    default_lower_threshold = 0.05

    def propagate(self, indexes, in_value, out):
        xp = array_module_of(in_value)
        with np.errstate(over="ignore"):
            out[...] = 1.0 / (1.0 + xp.exp(-in_value))
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        kaldi.sigmoid(in_value, out)
        return None

    def deriv_from_output(self, out_value):
        return out_value * (1.0 - out_value)

    def _repaired(self, in_deriv, out_value, mask):
        # adds -scale/p * (2 y - 1) on the saturated units
        scale = _F32(self.self_repair_scale / REPAIR_PROBABILITY)
        return in_deriv + (_F32(-2.0) * scale) * out_value * mask + scale * mask


class TanhComponent(_SaturatingComponent):
    """y = tanh(x); self-repair as for sigmoid (default lower threshold 0.2)."""

    type_name = "TanhComponent"
    default_lower_threshold = 0.2

    def propagate(self, indexes, in_value, out):
        out[...] = array_module_of(in_value).tanh(in_value)
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        kaldi.tanh(in_value, out)
        return None

    def deriv_from_output(self, out_value):
        return 1.0 - out_value * out_value

    def _repaired(self, in_deriv, out_value, mask):
        scale = _F32(-self.self_repair_scale / REPAIR_PROBABILITY)
        return in_deriv + scale * out_value * mask


class RectifiedLinearComponent(NonlinearComponent):
    """y = max(x, 0). Self-repair adds +scale to units active too rarely
    (below the lower threshold, default 0.05) and -scale to units active too
    often (above the upper threshold, default 0.95); with ``block-dim`` the
    stats of all blocks are averaged and the repair is per block position."""

    type_name = "RectifiedLinearComponent"

    def properties(self):
        p = P.kSimpleComponent | P.kBackpropNeedsOutput | P.kPropagateInPlace | P.kStoresStats
        if self.block_dim != self.dim:
            p |= P.kInputContiguous
        return int(p)

    def propagate(self, indexes, in_value, out):
        array_module_of(in_value).maximum(in_value, _F32(0.0), out=out)   # no temporary
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: CopyFromMat, then ApplyFloor(0): x < 0 ? 0 : x (-0 stays).
        if out is not in_value:
            out[...] = in_value
        kaldi.apply_floor(out, 0.0)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        deriv = heaviside(out_value) * out_deriv
        to_update = _check_to_update(to_update, RectifiedLinearComponent)
        if to_update is not None:
            deriv = self._repair_gradients(deriv, to_update)
            to_update.store_backprop_stats(out_deriv)
        in_deriv[...] = deriv

    def _repair_gradients(self, in_deriv, to_update):
        dim, block_dim = self.dim, self.block_dim
        if self.self_repair_scale == 0.0 or self.count == 0.0 or self.deriv_sum.shape[0] != dim:
            return in_deriv
        if in_deriv.shape[1] != block_dim:
            rows = in_deriv.shape[0]
            reshaped = in_deriv.reshape(rows * (dim // block_dim), block_dim)
            return self._repair_gradients(reshaped, to_update).reshape(rows, dim)
        if kaldi_random.rand_uniform() > REPAIR_PROBABILITY:
            return in_deriv
        to_update.num_dims_processed += block_dim
        self._check_self_repair_scale()
        count = _F32(self.count)
        lower = (0.05 if self.self_repair_lower_threshold == UNSET_THRESHOLD
                 else self.self_repair_lower_threshold)
        upper = (0.95 if self.self_repair_upper_threshold == UNSET_THRESHOLD
                 else self.self_repair_upper_threshold)
        lower, upper = _F32(lower) * count, _F32(upper) * count
        if block_dim == dim:
            stats = self.deriv_sum.astype(_F32)
        else:
            blocks = self.deriv_sum.reshape(dim // block_dim, block_dim)
            stats = (blocks.sum(axis=0) * (block_dim * 1.0 / dim)).astype(_F32)
        # +1 where the unit is rarely active, -1 where it is nearly always active
        direction = heaviside(stats - lower) + heaviside(stats - upper) - _F32(1.0)
        to_update.num_dims_self_repaired += float(np.square(direction).sum())
        direction = direction * _F32(-self.self_repair_scale / REPAIR_PROBABILITY)
        xp = array_module_of(in_deriv)
        return in_deriv + xp.asarray(direction)

    def store_stats(self, in_value, out_value, memo):
        if kaldi_random.rand_int(0, 1) == 0 and self.count != 0:
            return
        self.store_stats_internal(out_value, heaviside(out_value))


class SoftmaxComponent(NonlinearComponent):
    """Row-wise softmax, floored at 1e-20; stores only output stats."""

    type_name = "SoftmaxComponent"

    def properties(self):
        return int(P.kSimpleComponent | P.kPropagateInPlace | P.kBackpropInPlace
                   | P.kBackpropNeedsOutput | P.kStoresStats)

    def propagate(self, indexes, in_value, out):
        xp = array_module_of(in_value)
        e = xp.exp(in_value - in_value.max(axis=1, keepdims=True))
        y = e * (_F32(1.0) / e.sum(axis=1, keepdims=True))
        out[...] = xp.maximum(y, _F32(1.0e-20))
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: SoftMaxPerRow, then ApplyFloor(1.0e-20).
        kaldi.softmax_per_row(in_value, out)
        kaldi.apply_floor(out, 1.0e-20)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        to_update = _check_to_update(to_update, SoftmaxComponent)
        if to_update is not None:
            to_update.store_backprop_stats(out_deriv)
        if in_deriv is None:
            return
        # d = y .* e - y (y . e), per row
        pe = (out_value * out_deriv).sum(axis=1, keepdims=True)
        in_deriv[...] = out_value * out_deriv - out_value * pe

    def store_stats(self, in_value, out_value, memo):
        self.store_stats_internal(out_value, None)


class LogSoftmaxComponent(NonlinearComponent):
    """Row-wise log-softmax. Kaldi gives it kStoresStats but stores nothing
    in StoreStats; only backprop stats are kept."""

    type_name = "LogSoftmaxComponent"

    def properties(self):
        return int(P.kSimpleComponent | P.kBackpropNeedsOutput | P.kStoresStats)

    def propagate(self, indexes, in_value, out):
        xp = array_module_of(in_value)
        shifted = in_value - in_value.max(axis=1, keepdims=True)
        out[...] = shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        kaldi.log_softmax_per_row(in_value, out)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        to_update = _check_to_update(to_update, LogSoftmaxComponent)
        if to_update is not None:
            to_update.store_backprop_stats(out_deriv)
        if in_deriv is None:
            return
        xp = array_module_of(out_value)
        # d = e - exp(y) * sum(e), per row
        in_deriv[...] = out_deriv - xp.exp(out_value) * out_deriv.sum(axis=1, keepdims=True)
