"""Components that normalize their input: NormalizeComponent, BatchNormComponent.

NormalizeComponent scales each row (or each ``block-dim`` block of a row) to
have root-mean-square ``target-rms``, optionally appending log(rms) of the
input. BatchNormComponent normalizes each dimension with minibatch statistics
(training mode) or with stored statistics (test mode).

BatchNorm statistics are float64 sums as in Kaldi, written as float32 mean and
variance with Kaldi's exact float32 operations, so reading and writing
reproduce Kaldi's bytes (including the small changes Kaldi's own round trip
makes to the statistics).
"""

import logging
import math

import numpy as np

from . import kaldi_random
from ..common.floats import f32, kaldi_str
from ..common.parameter_stats import summarize_vector
from ..errors import NnetError
from ..numerics import kaldi_cpu
from ..numerics.openblas import sdot_rows
from .base import Component, P, to_host
from .nonlinear import array_module_of, invalid_initializer

_F32 = np.float32
#: Kaldi's kSquaredNormFloor, 2^-66: exactly representable, and so is its
#: inverse square root, which backprop compares against.
SQUARED_NORM_FLOOR = _F32(2.0 ** -66)

_log = logging.getLogger(__name__)


def _same_memory(a, b):
    """True if two arrays are the same matrix in memory (in-place backprop)."""
    if a is b:
        return True
    if a.shape != b.shape or a.strides != b.strides:
        return False
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
        return a.data.ptr == b.data.ptr
    return False


def _blocks(matrix, block_dim):
    """``matrix`` seen as rows of ``block_dim`` (Kaldi's reshape of a
    contiguous matrix); a copy if the matrix is not contiguous."""
    rows, cols = matrix.shape
    return matrix.reshape(rows * (cols // block_dim), block_dim)


def _like_cpp():
    """The NumPy error state of C++ arithmetic on the stats: overflow (also in
    a double -> float cast) gives inf and inf - inf gives nan, silently."""
    return np.errstate(over="ignore", invalid="ignore")


def _sub_outer(var, mean):
    """``var - mean * mean`` in float32, one rounding per operation (Kaldi's
    AddVecVec(-1.0, mean, mean, 1.0) on a float vector)."""
    return (var - mean * mean).astype(_F32)


class NormalizeComponent(Component):
    """y = x * target-rms * sqrt(D) / |x| per row or per block of ``block-dim``
    (a zero input gives zero output); with ``add-log-stddev`` an extra output
    per block holds log(|x| / sqrt(D)).

    Config: ``dim`` or ``input-dim`` (required), ``block-dim`` (default dim),
    ``target-rms`` (default 1), ``add-log-stddev`` (default false).
    """

    type_name = "NormalizeComponent"

    def __init__(self, dim=None, block_dim=None, target_rms=1.0, add_log_stddev=False):
        if dim is not None:
            self.dim = int(dim)
            self.block_dim = int(dim if block_dim is None else block_dim)
        self.target_rms = f32(target_rms)
        self.add_log_stddev = bool(add_log_stddev)

    def init_from_config(self, cfl):
        self.add_log_stddev = False
        self.target_rms = 1.0
        # Kaldi reads 'dim' and only if it is absent 'input-dim'
        dim = cfl.get_int("dim") if cfl.has("dim") else cfl.get_int("input-dim")
        self.dim = 0 if dim is None else dim
        self.block_dim = cfl.get_int("block-dim", self.dim)
        self.target_rms = f32(cfl.get_float("target-rms", 1.0))
        self.add_log_stddev = cfl.get_bool("add-log-stddev", False)
        if (dim is None or self.dim <= 0 or self.target_rms <= 0.0 or self.block_dim <= 0
                or self.dim % self.block_dim != 0):
            raise invalid_initializer(cfl, self.type_name)

    def input_dim(self):
        return self.dim

    def output_dim(self):
        return self.dim + (self.dim // self.block_dim if self.add_log_stddev else 0)

    def properties(self):
        p = P.kSimpleComponent | P.kBackpropNeedsInput | P.kBackpropAdds
        if not self.add_log_stddev:
            p |= P.kPropagateInPlace | P.kBackpropInPlace
        if self.block_dim != self.dim:
            p |= P.kInputContiguous | P.kOutputContiguous
        return int(p)

    def info(self):
        s = "%s, input-dim=%d, output-dim=%d, target-rms=%s, add-log-stddev=%s" % (
            self.type_name, self.input_dim(), self.output_dim(), kaldi_str(self.target_rms),
            kaldi_str(self.add_log_stddev))
        if self.block_dim != self.dim:
            s += ", block-dim=%d" % self.block_dim
        return s

    # -- serialization -----------------------------------------------------------
    def read_body(self, stream):
        start = stream.pos
        token = stream.read_token()
        if token == "<NormalizeComponent>":
            start, token = stream.pos, stream.read_token()
        if token not in ("<Dim>", "<InputDim>"):
            raise stream.error("expected <InputDim> or <Dim>, got '%s'" % token, start)
        self.dim = stream.read_int32()
        start, token = stream.pos, stream.read_token()
        if token == "<BlockDim>":
            self.block_dim = stream.read_int32()
            start, token = stream.pos, stream.read_token()
        else:
            self.block_dim = self.dim
        self.target_rms = 1.0
        if token == "<TargetRms>":
            self.target_rms = stream.read_float()
            start, token = stream.pos, stream.read_token()
        self.add_log_stddev = False
        if token == "<AddLogStddev>":
            self.add_log_stddev = stream.read_bool()
            start, token = stream.pos, stream.read_token()
        if token == "<ValueAvg>":
            # statistics written by old versions; read and discarded as Kaldi does
            stream.read_vector(np.float64)
            stream.expect_token("<DerivAvg>")
            stream.read_vector(np.float64)
            stream.expect_token("<Count>")
            stream.read_double()
            start, token = stream.pos, stream.read_token()
        if token != "</NormalizeComponent>":
            raise stream.error("expected token </NormalizeComponent>, got '%s'" % token, start)
        if self.dim <= 0 or self.block_dim <= 0 or self.dim % self.block_dim != 0:
            raise stream.error("NormalizeComponent: bad dim %d / block-dim %d"
                               % (self.dim, self.block_dim), start)

    def write_body(self, stream):
        stream.write_token("<InputDim>")
        stream.write_int32(self.dim)
        if self.block_dim != self.dim:
            stream.write_token("<BlockDim>")
            stream.write_int32(self.block_dim)
        stream.write_token("<TargetRms>")
        stream.write_float(self.target_rms)
        stream.write_token("<AddLogStddev>")
        stream.write_bool(self.add_log_stddev)

    # -- computation --------------------------------------------------------------
    def _d_scaled(self):
        rms = _F32(self.target_rms)
        return _F32(_F32(self.block_dim) * rms * rms)

    def propagate(self, indexes, in_value, out):
        xp = array_module_of(in_value)
        x = _blocks(in_value, self.block_dim)
        scale = (x * x).sum(axis=1, dtype=xp.float32) * (_F32(1.0) / self._d_scaled())
        scale = xp.maximum(scale, SQUARED_NORM_FLOOR) ** _F32(-0.5)
        y = x * scale[:, None]
        if self.add_log_stddev:
            log_rms = -xp.log(scale) + _F32(math.log(self.target_rms))
            y = xp.concatenate([y, log_rms[:, None].astype(xp.float32)], axis=1)
        out[...] = y.reshape(out.shape)
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi's NormalizePerRow on the CPU: per row (block), 0 * 0 + alpha
        # * sdot(x, x) with alpha = float(1.0 / d_scaled), floored, the C
        # library's pow(-0.5), x times it; the log-stddev column is logf of
        # that, times -1, plus float(log(target_rms)).
        x = _blocks(in_value, self.block_dim)
        alpha = _F32(1.0 / float(self._d_scaled()))
        norm = alpha * sdot_rows(x, x) + _F32(0.0)
        np.copyto(norm, SQUARED_NORM_FLOOR, where=norm < SQUARED_NORM_FLOOR)
        norm = kaldi.apply_pow(norm, -0.5)
        y = x * norm[:, None]
        if self.add_log_stddev:
            log_rms = kaldi.apply_log(norm) * _F32(-1.0) + _F32(math.log(self.target_rms))
            y = np.concatenate([y, log_rms[:, None]], axis=1)
        out[...] = y.reshape(out.shape)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module_of(in_value)
        bd = self.block_dim
        in_place = _same_memory(in_deriv, out_deriv)
        x = _blocks(in_value, bd)
        od_all = _blocks(out_deriv, bd + (1 if self.add_log_stddev else 0))
        od = od_all[:, :bd]
        dot = (od * x).sum(axis=1, dtype=xp.float32)
        sumsq = (x * x).sum(axis=1, dtype=xp.float32)
        result = xp.zeros(x.shape, dtype=xp.float32) if in_place else \
            _blocks(in_deriv, bd).astype(xp.float32, copy=True)
        if self.add_log_stddev:
            # d log(|x|/sqrt(D)) / dx = x / (x^T x), floored to stay finite at 0
            inv = _F32(1.0) / xp.maximum(sumsq, _F32(bd) * SQUARED_NORM_FLOOR)
            result += (inv * od_all[:, bd])[:, None] * x
        d_scaled = self._d_scaled()
        scale = xp.maximum(sumsq * (_F32(1.0) / d_scaled), SQUARED_NORM_FLOOR) ** _F32(-0.5)
        result += scale[:, None] * od
        # the norm term vanishes where the floor was hit
        cube = xp.where(scale == _F32(1.0) / xp.sqrt(SQUARED_NORM_FLOOR), _F32(0.0), scale) ** 3
        result += ((_F32(-1.0) / d_scaled) * (dot * cube))[:, None] * x
        in_deriv[...] = result.reshape(in_deriv.shape)


class BatchNormMemo:
    """What training-mode propagate passes to backprop and store_stats:
    frames (after block reshaping), per-dimension mean, uncentered variance
    and the normalizing scale."""

    __slots__ = ("num_frames", "mean", "uvar", "scale")

    def __init__(self, num_frames, mean, uvar, scale):
        self.num_frames = num_frames
        self.mean = mean
        self.uvar = uvar
        self.scale = scale


class BatchNormComponent(Component):
    """Batch normalization per dimension (or per position within blocks of
    ``block-dim``): training mode uses the minibatch's mean and variance and
    accumulates statistics; test mode uses the stored statistics.

    Config: ``dim`` (required), ``block-dim`` (default dim), ``epsilon``
    (default 0.001), ``target-rms`` (default 1), ``test-mode`` (default false).
    """

    type_name = "BatchNormComponent"

    def __init__(self, dim=None, block_dim=None, epsilon=1.0e-3, target_rms=1.0,
                 test_mode=False):
        self.dim = -1 if dim is None else int(dim)
        self.block_dim = self.dim if block_dim is None else int(block_dim)
        self.epsilon = f32(epsilon)
        self.target_rms = f32(target_rms)
        self.test_mode = bool(test_mode)
        self.count = 0.0
        self.stats_sum = np.zeros(max(self.block_dim, 0))
        self.stats_sumsq = np.zeros(max(self.block_dim, 0))
        self.offset = None
        self.scale_vec = None
        if self.test_mode:
            self.compute_derived()

    def init_from_config(self, cfl):
        dim = cfl.get_int("dim")
        self.dim = -1 if dim is None else dim
        self.block_dim = cfl.get_int("block-dim", -1)
        self.epsilon = f32(cfl.get_float("epsilon", 1.0e-3))
        self.target_rms = f32(cfl.get_float("target-rms", 1.0))
        self.test_mode = cfl.get_bool("test-mode", False)
        if dim is None or self.dim <= 0:
            raise cfl.error("BatchNormComponent must have 'dim' specified, and > 0")
        if self.block_dim == -1:
            self.block_dim = self.dim
        if not (self.block_dim > 0 and self.dim % self.block_dim == 0 and self.epsilon > 0
                and self.target_rms > 0):
            raise cfl.error("invalid configuration in BatchNormComponent")
        self.count = 0.0
        self.stats_sum = np.zeros(self.block_dim)
        self.stats_sumsq = np.zeros(self.block_dim)
        self.offset = None
        self.scale_vec = None
        if self.test_mode:
            self.compute_derived()

    def input_dim(self):
        return self.dim

    def output_dim(self):
        return self.dim

    def properties(self):
        p = P.kSimpleComponent | P.kBackpropNeedsOutput | P.kPropagateInPlace | P.kBackpropInPlace
        if self.block_dim < self.dim:
            p |= P.kInputContiguous | P.kOutputContiguous
        if not self.test_mode:
            p |= P.kUsesMemo | P.kStoresStats
        return int(p)

    def _mean_var(self):
        """Kaldi's float32 mean and variance from the stats (as Write and
        Info compute them)."""
        with _like_cpp():
            mean = self.stats_sum.astype(_F32)
            var = self.stats_sumsq.astype(_F32)
            if self.count != 0:
                inv = _F32(1.0 / self.count)
                mean = mean * inv
                var = _sub_outer(var * inv, mean)
        return mean, var

    def info(self):
        s = "%s, dim=%d, block-dim=%d, epsilon=%s, target-rms=%s, count=%s, test-mode=%s" % (
            self.type_name, self.dim, self.block_dim, kaldi_str(self.epsilon),
            kaldi_str(self.target_rms), kaldi_str(float(self.count)),
            kaldi_str(self.test_mode))
        if self.count > 0:
            mean, var = self._mean_var()
            stddev = np.sqrt(np.maximum(var, _F32(0.0)))
            s += ", data-mean=%s, data-stddev=%s" % (summarize_vector(mean),
                                                      summarize_vector(stddev))
        return s

    # -- serialization -------------------------------------------------------------
    def read_body(self, stream):
        stream.expect_token("<Dim>")
        self.dim = stream.read_int32()
        stream.expect_token("<BlockDim>")
        self.block_dim = stream.read_int32()
        stream.expect_token("<Epsilon>")
        self.epsilon = stream.read_float()
        stream.expect_token("<TargetRms>")
        self.target_rms = stream.read_float()
        stream.expect_token("<TestMode>")
        self.test_mode = stream.read_bool()
        stream.expect_token("<Count>")
        self.count = stream.read_double()
        stream.expect_token("<StatsMean>")
        mean = stream.read_vector(np.float64)
        stream.expect_token("<StatsVar>")
        var = stream.read_vector(np.float64)
        start = stream.pos
        stream.expect_token("</BatchNormComponent>")
        if not (self.dim > 0 and self.block_dim > 0 and self.dim % self.block_dim == 0
                and self.epsilon > 0.0 and self.target_rms > 0.0):
            raise stream.error("BatchNormComponent: bad dim %d / block-dim %d / epsilon %s / "
                               "target-rms %s" % (self.dim, self.block_dim,
                                                  kaldi_str(self.epsilon),
                                                  kaldi_str(self.target_rms)), start)
        if mean.shape[0] != var.shape[0]:
            raise stream.error("BatchNormComponent: <StatsMean> has dim %d, <StatsVar> %d"
                               % (mean.shape[0], var.shape[0]), start)
        # stored as mean and variance; kept as sums, as Kaldi keeps them
        with _like_cpp():
            self.stats_sum = mean * self.count
            self.stats_sumsq = (var + mean * mean) * self.count
        self.compute_derived()

    def write_body(self, stream):
        stream.write_token("<Dim>")
        stream.write_int32(self.dim)
        stream.write_token("<BlockDim>")
        stream.write_int32(self.block_dim)
        stream.write_token("<Epsilon>")
        stream.write_float(self.epsilon)
        stream.write_token("<TargetRms>")
        stream.write_float(self.target_rms)
        stream.write_token("<TestMode>")
        stream.write_bool(self.test_mode)
        stream.write_token("<Count>")
        stream.write_double(self.count)
        mean, var = self._mean_var()
        stream.write_token("<StatsMean>")
        stream.write_vector(mean)
        stream.write_token("<StatsVar>")
        stream.write_vector(var)

    # -- test mode -------------------------------------------------------------------
    def set_test_mode(self, test_mode):
        """Kaldi's SetTestMode: switches mode and recomputes the transform."""
        self.test_mode = bool(test_mode)
        self.compute_derived()

    def compute_derived(self):
        """Kaldi's ComputeDerived: the test-mode offset and scale from the
        stats (cleared in training mode). With no stats in test mode Kaldi
        invents random ones (with a warning); so do we."""
        if not self.test_mode:
            self.offset = None
            self.scale_vec = None
            return
        if self.count == 0.0:
            _log.warning("Test-mode is set but there is no data count.  Creating random "
                         "counts.  This is NOT A PROBLEM if the message appears in unit-tests "
                         "or in compute_prob_*.0.log.  If you see this elsewhere, something "
                         "is very wrong.")
            self.count = 1.0
            self.stats_sum = kaldi_random.normal_vector(self.block_dim)
            self.stats_sumsq = kaldi_random.normal_vector(self.block_dim) + \
                self.stats_sum * self.stats_sum
        with _like_cpp():
            offset = self.stats_sum.astype(_F32) * _F32(-1.0 / self.count)
            scale = _sub_outer(self.stats_sumsq.astype(_F32) * _F32(1.0 / self.count), offset)
            scale = np.maximum(scale, _F32(0.0)) + _F32(self.epsilon)
            # the C library's pow, as Kaldi's ApplyPow (NumPy's own float32
            # power differs in the last bit for about one element in five)
            scale = kaldi_cpu.apply_pow(scale, -0.5) * _F32(self.target_rms)
        self.offset = (offset * scale).astype(_F32)
        self.scale_vec = scale.astype(_F32)

    # -- computation -------------------------------------------------------------------
    @property
    def kaldi_exact(self):
        """In test mode propagate is Kaldi's MulColsVec(scale) then
        AddVecToRows(1.0, offset): one rounding each, as Kaldi; training
        mode sums in another order."""
        return bool(self.test_mode)

    def propagate(self, indexes, in_value, out):
        xp = array_module_of(in_value)
        x = _blocks(in_value, self.block_dim)
        if not self.test_mode:
            n = x.shape[0]
            mean = x.sum(axis=0, dtype=xp.float32) * _F32(1.0 / n)
            uvar = (x * x).sum(axis=0, dtype=xp.float32) * _F32(1.0 / n)
            var_scale = _F32(1.0 / (self.target_rms * self.target_rms))
            scale = uvar * var_scale - var_scale * (mean * mean)
            scale = xp.maximum(scale, _F32(0.0)) + _F32(var_scale * self.epsilon)
            scale = scale ** _F32(-0.5)
            y = (x - mean) * scale
            out[...] = y.reshape(out.shape)
            return BatchNormMemo(n, mean, uvar, scale)
        if self.offset is None or self.offset.shape[0] != self.block_dim:
            raise NnetError("Test mode set in BatchNormComponent, but no stats.")
        # in place on the output, no temporaries (out is contiguous when the
        # blocks are narrower than a row: kOutputContiguous)
        y = _blocks(out, self.block_dim)
        xp.multiply(x, xp.asarray(self.scale_vec), out=y)
        y += xp.asarray(self.offset)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module_of(out_deriv)
        bd = self.block_dim
        dy = _blocks(out_deriv, bd)
        if not self.test_mode:
            if memo is None:
                raise NnetError("BatchNormComponent: memo not passed into backprop")
            y = _blocks(out_value, bd)
            n = memo.num_frames
            if y.shape[0] != n:
                raise NnetError("BatchNormComponent: backprop on %d frames, propagate had %d"
                                % (y.shape[0], n))
            coeff = _F32(-1.0 / (self.target_rms * self.target_rms * n))
            var_deriv_mod = coeff * (y * dy).sum(axis=0, dtype=xp.float32) * memo.scale
            mean_deriv = dy.sum(axis=0, dtype=xp.float32) * _F32(-1.0 / n)
            result = (dy + mean_deriv) * memo.scale + y * var_deriv_mod
        else:
            if self.scale_vec is None or self.scale_vec.shape[0] != bd:
                raise NnetError("Test mode set in BatchNormComponent, but no stats.")
            result = dy * xp.asarray(self.scale_vec)
        in_deriv[...] = result.reshape(in_deriv.shape)

    def store_stats(self, in_value, out_value, memo):
        if self.test_mode:
            raise NnetError("BatchNormComponent stores no stats in test mode")
        if memo is None:
            raise NnetError("BatchNormComponent: store_stats needs the propagate memo")
        y = _blocks(out_value, self.block_dim)
        if y.shape[0] != memo.num_frames:
            raise NnetError("BatchNormComponent: store_stats on %d frames, propagate had %d"
                            % (y.shape[0], memo.num_frames))
        n = float(memo.num_frames)
        if self.stats_sum.shape[0] != self.block_dim:
            self.stats_sum = np.zeros(self.block_dim)
            self.stats_sumsq = np.zeros(self.block_dim)
        self.count += n
        self.stats_sum = self.stats_sum + n * to_host(memo.mean).astype(np.float64)
        self.stats_sumsq = self.stats_sumsq + n * to_host(memo.uvar).astype(np.float64)

    # -- statistics algebra ----------------------------------------------------------------
    def zero_stats(self):
        # in test mode the stats are the transform's parameters: kept
        if not self.test_mode:
            self.count = 0.0
            self.stats_sum = np.zeros_like(self.stats_sum)
            self.stats_sumsq = np.zeros_like(self.stats_sumsq)

    def scale(self, alpha):
        alpha = f32(alpha)
        if alpha == 0.0:
            self.count = 0.0
            self.stats_sum = np.zeros_like(self.stats_sum)
            self.stats_sumsq = np.zeros_like(self.stats_sumsq)
        else:
            self.count *= alpha
            self.stats_sum = self.stats_sum * alpha
            self.stats_sumsq = self.stats_sumsq * alpha

    def add(self, alpha, other):
        if not isinstance(other, BatchNormComponent):
            raise NnetError("cannot add a %s to a BatchNormComponent" % other.type_name)
        alpha = f32(alpha)
        self.count += alpha * other.count
        self.stats_sum = self.stats_sum + alpha * other.stats_sum
        self.stats_sumsq = self.stats_sumsq + alpha * other.stats_sumsq
        self.compute_derived()
