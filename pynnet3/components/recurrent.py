"""The fused recurrent nonlinearities: LSTM, GRU and output-gated GRU.

Kaldi's LstmNonlinearityComponent, GruNonlinearityComponent and
OutputGruNonlinearityComponent (nnet-combined-component). Each is a simple,
updatable component holding the few diagonal/recurrent parameters of a cell;
the affine parts live in other components.

Guarantees:
- read/write are byte-identical to Kaldi in both modes. The statistics are
  stored on disk as averages (value-avg, deriv-avg, self-repair proportion)
  and in memory as sums; the conversions use Kaldi's precisions (float on
  disk, double in memory), so a read-write round trip reproduces Kaldi's
  bytes even where the averages change in the last bit.
- propagate/backprop follow Kaldi's formulas (cu-math's LSTM kernels and
  the GRU code), including the self-repair terms and the statistics the
  backward pass accumulates into ``to_update``. Updates are a plain
  learning-rate step (gradient when ``to_update.is_gradient``); Kaldi's
  natural-gradient preconditioning is not applied.
- The GRUs accumulate statistics and self-repair on a random half of the
  minibatches, as Kaldi does; the draw comes from
  :mod:`pynnet3.components.kaldi_random` (seedable, not Kaldi's sequence).
"""

import numpy as np

from . import kaldi_random
from ..common.floats import f32, kaldi_str
from ..common.parameter_stats import matrix_stats, summarize_vector, vector_stats
from .base import P, UpdatableComponent, array_module, read_layout, to_host, write_layout


def _sigmoid(xp, x):
    """Logistic function without overflow for large |x| (Kaldi's ScalarSigmoid)."""
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _randn(shape):
    """Standard normal float32 draws (Kaldi's SetRandn) from the components'
    seedable random source."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return kaldi_random.normal_vector(int(np.prod(shape))).astype(np.float32).reshape(shape)


def _like(array, param):
    """``array`` moved to the device (NumPy or CuPy) that ``param`` lives on."""
    xp = array_module(param)
    if array_module(array) is xp:
        return array
    return array.get() if xp is np else xp.asarray(array)


def _scaled_avg(sums, count):
    """On-disk average of in-memory sums: the sums as float32, times the
    float32 of 1/count (left alone when count is 0), as Kaldi computes it."""
    avg = np.asarray(to_host(sums), dtype=np.float32).copy()
    if count != 0.0:
        avg *= np.float32(1.0 / count)
    return avg


class _RecurrentBase(UpdatableComponent):
    """Shared plumbing: parameter access via ``_param_names``, the
    UpdatableComponent header, and the vector-space operations."""

    _param_names = ()

    def _params(self):
        return [getattr(self, name) for name in self._param_names]

    def num_parameters(self):
        return sum(int(p.size) for p in self._params())

    def vectorize(self):
        return np.concatenate([np.asarray(to_host(p), np.float32).ravel()
                               for p in self._params()])

    def unvectorize(self, params):
        params = np.asarray(params, dtype=np.float32)
        if params.shape[0] != self.num_parameters():
            raise ValueError("%s: expected %d parameters, got %d"
                             % (self.type_name, self.num_parameters(), params.shape[0]))
        offset = 0
        for name in self._param_names:
            p = getattr(self, name)
            xp = array_module(p)
            size = int(p.size)
            p[...] = xp.asarray(params[offset:offset + size].reshape(p.shape))
            offset += size

    def dot_product(self, other):
        return float(sum(float((a.astype(np.float64) * b.astype(np.float64)).sum())
                         for a, b in zip(self._params(), other._params())))

    def perturb_params(self, stddev):
        for p in self._params():
            xp = array_module(p)
            p += xp.asarray(_randn(p.shape)) * np.float32(stddev)


# ---------------------------------------------------------------------------
# LSTM
# ---------------------------------------------------------------------------

_LSTM_NONLIN_NAMES = ("i_t_sigmoid", "f_t_sigmoid", "c_t_tanh", "o_t_sigmoid", "m_t_tanh")


class LstmNonlinearityComponent(_RecurrentBase):
    """The LSTM cell nonlinearity (Kaldi's LstmNonlinearityComponent).

    Input per row: (i_part, f_part, c_part, o_part, c_{t-1}), each cell_dim
    wide, plus 3 dropout scales (i, f, o) when use_dropout; output (c_t, m_t).
    Parameters: ``params`` (3 x cell_dim) = the diagonal peephole weights
    w_ic, w_fc, w_oc. Statistics (for self-repair and diagnostics):
    ``value_sum``/``deriv_sum`` (5 x cell_dim, float64), ``self_repair_total``
    (5, float64) and ``count``; ``self_repair_config`` holds 5 thresholds then
    5 scales.
    """

    type_name = "LstmNonlinearityComponent"
    _param_names = ("params",)

    def properties(self):
        return P.kSimpleComponent | P.kUpdatableComponent | P.kBackpropNeedsInput

    def cell_dim(self):
        return int(self.params.shape[1])

    def input_dim(self):
        return self.cell_dim() * 5 + (3 if self.use_dropout else 0)

    def output_dim(self):
        return self.cell_dim() * 2

    # -- initialization ------------------------------------------------------
    def init_from_config(self, cfl):
        self.init_updatable_common(cfl)
        cell_dim = cfl.get_int("cell-dim")
        param_stddev = f32(cfl.get_float("param-stddev", 1.0))
        tanh_thr = f32(cfl.get_float("tanh-self-repair-threshold", 0.2))
        sigmoid_thr = f32(cfl.get_float("sigmoid-self-repair-threshold", 0.05))
        scale = f32(cfl.get_float("self-repair-scale", 1.0e-05))
        use_dropout = cfl.get_bool("use-dropout", False)
        if cell_dim is None:
            raise cfl.error("cell-dim is required for LstmNonlinearityComponent")
        if not (cell_dim > 0 and param_stddev >= 0.0 and 0.0 <= tanh_thr <= 1.0
                and 0.0 <= sigmoid_thr <= 0.25 and 0.0 <= scale <= 0.1):
            raise cfl.error("invalid values: need cell-dim > 0, param-stddev >= 0, "
                            "0 <= tanh-self-repair-threshold <= 1, "
                            "0 <= sigmoid-self-repair-threshold <= 0.25, "
                            "0 <= self-repair-scale <= 0.1")
        self.use_dropout = use_dropout
        self.params = _randn((3, cell_dim)) * np.float32(param_stddev)
        self.value_sum = np.zeros((5, cell_dim), dtype=np.float64)
        self.deriv_sum = np.zeros((5, cell_dim), dtype=np.float64)
        config = np.empty(10, dtype=np.float32)
        config[0:5] = sigmoid_thr
        config[2] = tanh_thr
        config[4] = tanh_thr
        config[5:10] = scale
        self.self_repair_config = config
        self.self_repair_total = np.zeros(5, dtype=np.float64)
        self.count = 0.0

    # -- serialization -----------------------------------------------------------
    def read_body(self, stream):
        read_layout(self, stream, self.UPDATABLE_COMMON)
        stream.expect_token("<Params>")
        self.params = stream.read_matrix()
        stream.expect_token("<ValueAvg>")
        value_avg = stream.read_matrix(np.float64)
        stream.expect_token("<DerivAvg>")
        deriv_avg = stream.read_matrix(np.float64)
        stream.expect_token("<SelfRepairConfig>")
        self.self_repair_config = stream.read_vector()
        stream.expect_token("<SelfRepairProb>")
        self_repair_prob = stream.read_vector(np.float64)
        self.use_dropout = False
        if stream.read_optional_token("<UseDropout>"):
            self.use_dropout = stream.read_bool()
        stream.expect_token("<Count>")
        self.count = stream.read_double()
        stream.expect_token("</LstmNonlinearityComponent>")
        cell_dim = self.params.shape[1]
        if (self.params.shape[0] != 3 or value_avg.shape != (5, cell_dim)
                or deriv_avg.shape != (5, cell_dim) or self.self_repair_config.shape != (10,)
                or self_repair_prob.shape != (5,)):
            raise stream.error("LstmNonlinearityComponent: inconsistent dimensions "
                               "(params %s, value-avg %s, deriv-avg %s, self-repair-config %s)"
                               % (self.params.shape, value_avg.shape, deriv_avg.shape,
                                  self.self_repair_config.shape))
        # On disk: averages; in memory: sums (Kaldi scales by the count).
        self.value_sum = value_avg * self.count
        self.deriv_sum = deriv_avg * self.count
        self.self_repair_total = self_repair_prob * (self.count * cell_dim)

    def write_body(self, stream):
        write_layout(self, stream, self.UPDATABLE_COMMON)
        stream.write_token("<Params>")
        stream.write_matrix(to_host(self.params))
        stream.write_token("<ValueAvg>")
        stream.write_matrix(_scaled_avg(self.value_sum, self.count))
        stream.write_token("<DerivAvg>")
        stream.write_matrix(_scaled_avg(self.deriv_sum, self.count))
        stream.write_token("<SelfRepairConfig>")
        stream.write_vector(self.self_repair_config)
        stream.write_token("<SelfRepairProb>")
        stream.write_vector(_scaled_avg(self.self_repair_total, self.count * self.cell_dim()))
        if self.use_dropout:
            stream.write_token("<UseDropout>")
            stream.write_bool(True)
        stream.write_token("<Count>")
        stream.write_double(self.count)

    def info(self):
        cell_dim = self.cell_dim()
        params = to_host(self.params)
        s = self.updatable_info() + ", cell-dim=%d, use-dropout=%s" % (
            cell_dim, "true" if self.use_dropout else "false")
        s += vector_stats("w_ic", params[0])
        s += vector_stats("w_fc", params[1])
        s += vector_stats("w_oc", params[2])
        if self.count > 0:
            s += ", count=" + kaldi_str(self.count, 3)
        config = self.self_repair_config
        for i, name in enumerate(_LSTM_NONLIN_NAMES):
            s += ", %s={ self-repair-lower-threshold=%s, self-repair-scale=%s" % (
                name, kaldi_str(float(config[i])), kaldi_str(float(config[i + 5])))
            if self.count != 0:
                prop = np.float32(self.self_repair_total[i] / (self.count * cell_dim))
                value_avg = self.value_sum[i].astype(np.float32) * np.float32(1.0 / self.count)
                deriv_avg = self.deriv_sum[i].astype(np.float32) * np.float32(1.0 / self.count)
                s += ", self-repaired-proportion=%s, value-avg=%s, deriv-avg=%s" % (
                    kaldi_str(float(prop)), summarize_vector(value_avg),
                    summarize_vector(deriv_avg))
            s += " }"
        return s

    # -- statistics and parameters ------------------------------------------------
    def zero_stats(self):
        self.value_sum[...] = 0.0
        self.deriv_sum[...] = 0.0
        self.self_repair_total[...] = 0.0
        self.count = 0.0

    def scale(self, alpha):
        if alpha == 0.0:
            self.params[...] = 0.0
            self.zero_stats()
        else:
            self.params *= np.float32(alpha)
            self.value_sum *= alpha
            self.deriv_sum *= alpha
            self.self_repair_total *= alpha
            self.count *= alpha

    def add(self, alpha, other):
        self.params += np.float32(alpha) * other.params
        self.value_sum += alpha * other.value_sum
        self.deriv_sum += alpha * other.deriv_sum
        self.self_repair_total += alpha * other.self_repair_total
        self.count += alpha * other.count

    # -- computation -------------------------------------------------------------
    def _split(self, in_value):
        c = self.cell_dim()
        xp = array_module(in_value)
        parts = [in_value[:, k * c:(k + 1) * c] for k in range(5)]
        if in_value.shape[1] == 5 * c + 3:
            scales = [in_value[:, 5 * c + k:5 * c + k + 1] for k in range(3)]
        else:
            one = xp.float32(1.0)
            scales = [one, one, one]
        return parts, scales

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        c = self.cell_dim()
        (i_part, f_part, c_part, o_part, c_prev), (i_scale, f_scale, o_scale) = \
            self._split(in_value)
        params = xp.asarray(self.params)
        w_ic, w_fc, w_oc = params[0], params[1], params[2]
        i_t = _sigmoid(xp, i_part + w_ic * c_prev)
        f_t = _sigmoid(xp, f_part + w_fc * c_prev)
        c_t = f_t * f_scale * c_prev + i_t * i_scale * xp.tanh(c_part)
        o_t = _sigmoid(xp, o_part + w_oc * c_t)
        out[:, :c] = c_t
        out[:, c:2 * c] = o_t * o_scale * xp.tanh(c_t)
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi's CpuComputeLstmNonlinearity: the same float expressions,
        # evaluated left to right, with cu-math's all-float sigmoid and tanh.
        c = self.cell_dim()
        (i_part, f_part, c_part, o_part, c_prev), (i_scale, f_scale, o_scale) = \
            self._split(in_value)
        w_ic, w_fc, w_oc = self.params[0], self.params[1], self.params[2]
        i_t = kaldi.scalar_sigmoid(i_part + w_ic * c_prev)
        f_t = kaldi.scalar_sigmoid(f_part + w_fc * c_prev)
        c_t = f_t * f_scale * c_prev + i_t * i_scale * kaldi.scalar_tanh(c_part)
        o_t = kaldi.scalar_sigmoid(o_part + w_oc * c_t)
        out[:, :c] = c_t
        out[:, c:2 * c] = o_t * o_scale * kaldi.scalar_tanh(c_t)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(in_value)
        c = self.cell_dim()
        num_rows = in_value.shape[0]
        (i_part, f_part, c_part, o_part, c_prev), (i_scale, f_scale, o_scale) = \
            self._split(in_value)
        params = xp.asarray(self.params)
        w_ic, w_fc, w_oc = params[0], params[1], params[2]
        # Self-repair scales per nonlinearity and column, from this
        # component's derivative averages (count + 1 avoids dividing by 0).
        count = float(np.float32(1.0 + self.count))
        host_config = np.asarray(to_host(self.self_repair_config), dtype=np.float64)
        active = (self.deriv_sum / count) < host_config[0:5, None]      # (5, c), host
        repair = xp.asarray(np.where(active, host_config[5:10, None], 0.0).astype(np.float32))

        i_t = _sigmoid(xp, i_part + w_ic * c_prev)
        f_t = _sigmoid(xp, f_part + w_fc * c_prev)
        tanh_c_part = xp.tanh(c_part)
        c_t = f_t * f_scale * c_prev + i_t * i_scale * tanh_c_part
        o_t = _sigmoid(xp, o_part + w_oc * c_t)
        tanh_c_t = xp.tanh(c_t)

        dc_t_out = out_deriv[:, :c]
        dm_t = out_deriv[:, c:2 * c]
        dtanh_c_t = o_t * o_scale * dm_t
        do_t = o_scale * tanh_c_t * dm_t
        do_t_input = o_t * (1.0 - o_t) * do_t - (2.0 * o_t - 1.0) * repair[3]
        dc_t = ((1.0 - tanh_c_t * tanh_c_t) * dtanh_c_t + dc_t_out + do_t_input * w_oc
                - tanh_c_t * repair[4])
        dtanh_c_part = i_t * i_scale * dc_t
        df_t = dc_t * f_scale * c_prev
        df_t_input = df_t * f_t * (1.0 - f_t) - (2.0 * f_t - 1.0) * repair[1]
        di_t = dc_t * i_scale * tanh_c_part
        di_t_input = di_t * i_t * (1.0 - i_t) - (2.0 * i_t - 1.0) * repair[0]

        if in_deriv is not None:
            in_deriv[:, 0:c] = di_t_input
            in_deriv[:, c:2 * c] = df_t_input
            in_deriv[:, 2 * c:3 * c] = ((1.0 - tanh_c_part * tanh_c_part) * dtanh_c_part
                                        - tanh_c_part * repair[2])
            in_deriv[:, 3 * c:4 * c] = do_t_input
            in_deriv[:, 4 * c:5 * c] = w_ic * di_t_input + w_fc * df_t_input + \
                f_t * f_scale * dc_t
            # The dropout-scale columns get no derivative (left as they are).

        if to_update is not None:
            params_deriv = xp.stack([
                (c_prev * di_t_input).sum(axis=0),
                (c_prev * df_t_input).sum(axis=0),
                (c_t * do_t_input).sum(axis=0)]).astype(np.float32)
            values = xp.stack([i_t.sum(axis=0), f_t.sum(axis=0), tanh_c_part.sum(axis=0),
                               o_t.sum(axis=0), tanh_c_t.sum(axis=0)])
            derivs = xp.stack([(i_t * (1.0 - i_t)).sum(axis=0),
                               (f_t * (1.0 - f_t)).sum(axis=0),
                               (1.0 - tanh_c_part * tanh_c_part).sum(axis=0),
                               (o_t * (1.0 - o_t)).sum(axis=0),
                               (1.0 - tanh_c_t * tanh_c_t).sum(axis=0)])
            # Self-repair counts use this component's stats from before this
            # update (to_update may be this very component).
            repaired = active.sum(axis=1).astype(np.float64) * num_rows
            to_update.value_sum += to_host(values).astype(np.float64)
            to_update.deriv_sum += to_host(derivs).astype(np.float64)
            to_update.self_repair_total += repaired
            to_update.count += float(num_rows)
            to_update.params += np.float32(to_update.learning_rate) * \
                _like(params_deriv, to_update.params)


# ---------------------------------------------------------------------------
# GRU and output-gated GRU
# ---------------------------------------------------------------------------

class _GruBase(_RecurrentBase):
    """What GruNonlinearityComponent and OutputGruNonlinearityComponent share:
    the tanh statistics, self-repair, and the (h_t, c_t) backprop through
    c_t = (1 - z_t) h_t + z_t c_{t-1}."""

    # Kaldi accumulates stats and self-repairs on this fraction of minibatches.
    repair_and_stats_probability = 0.5

    def properties(self):
        return (P.kSimpleComponent | P.kUpdatableComponent | P.kBackpropNeedsInput
                | P.kBackpropNeedsOutput | P.kBackpropAdds)

    def output_dim(self):
        return 2 * self.cell_dim

    def _init_stats(self):
        self.count = 0.0
        self.self_repair_total = 0.0
        self.value_sum = np.zeros(self.cell_dim, dtype=np.float64)
        self.deriv_sum = np.zeros(self.cell_dim, dtype=np.float64)

    def _check(self, error):
        if not (self.cell_dim > 0 and self.self_repair_threshold >= 0.0
                and self.self_repair_scale >= 0.0):
            raise error("%s: need cell-dim > 0 and non-negative self-repair-threshold "
                        "and self-repair-scale" % self.type_name)

    def _read_stats(self, stream):
        stream.expect_token("<ValueAvg>")
        value_avg = stream.read_vector(np.float64)
        stream.expect_token("<DerivAvg>")
        deriv_avg = stream.read_vector(np.float64)
        stream.expect_token("<SelfRepairTotal>")
        self.self_repair_total = stream.read_double()
        stream.expect_token("<Count>")
        self.count = stream.read_double()
        self.value_sum = value_avg * self.count
        self.deriv_sum = deriv_avg * self.count
        stream.expect_token("<SelfRepairThreshold>")
        self.self_repair_threshold = stream.read_float()
        stream.expect_token("<SelfRepairScale>")
        self.self_repair_scale = stream.read_float()
        stream.expect_token("<Alpha>")
        self.alpha = stream.read_float()

    def _write_stats(self, stream):
        stream.write_token("<ValueAvg>")
        stream.write_vector(_scaled_avg(self.value_sum, self.count))
        stream.write_token("<DerivAvg>")
        stream.write_vector(_scaled_avg(self.deriv_sum, self.count))
        stream.write_token("<SelfRepairTotal>")
        stream.write_double(self.self_repair_total)
        stream.write_token("<Count>")
        stream.write_double(self.count)
        stream.write_token("<SelfRepairThreshold>")
        stream.write_float(self.self_repair_threshold)
        stream.write_token("<SelfRepairScale>")
        stream.write_float(self.self_repair_scale)
        stream.write_token("<Alpha>")
        stream.write_float(self.alpha)

    def _stats_info(self):
        s = ", self-repair-threshold=%s, self-repair-scale=%s" % (
            kaldi_str(self.self_repair_threshold), kaldi_str(self.self_repair_scale))
        if self.count > 0:
            s += ", count=" + kaldi_str(self.count, 3)
            s += ", self-repaired-proportion=" + kaldi_str(
                self.self_repair_total / (self.count * self.cell_dim))
            inv = np.float32(1.0 / self.count)
            s += ", value-avg=" + summarize_vector(self.value_sum.astype(np.float32) * inv)
            s += ", deriv-avg=" + summarize_vector(self.deriv_sum.astype(np.float32) * inv)
        return s

    def _check_dims(self, stream):
        if self.value_sum.shape != (self.cell_dim,) or self.deriv_sum.shape != (self.cell_dim,):
            raise stream.error("%s: value/deriv averages have dims %d/%d, expected cell-dim %d"
                               % (self.type_name, self.value_sum.shape[0],
                                  self.deriv_sum.shape[0], self.cell_dim))

    def zero_stats(self):
        self.value_sum[...] = 0.0
        self.deriv_sum[...] = 0.0
        self.self_repair_total = 0.0
        self.count = 0.0

    def scale(self, alpha):
        w = getattr(self, self._param_names[0])
        if alpha == 0.0:
            w[...] = 0.0
            self.zero_stats()
        else:
            w *= np.float32(alpha)
            self.value_sum *= alpha
            self.deriv_sum *= alpha
            self.self_repair_total *= alpha
            self.count *= alpha

    def add(self, alpha, other):
        name = self._param_names[0]
        w = getattr(self, name)
        w += np.float32(alpha) * getattr(other, name)
        self.value_sum += alpha * other.value_sum
        self.deriv_sum += alpha * other.deriv_sum
        self.self_repair_total += alpha * other.self_repair_total
        self.count += alpha * other.count

    def tanh_stats_and_self_repair(self, h_t, h_t_deriv):
        """Kaldi's TanhStatsAndSelfRepair: on a random half of the calls,
        accumulates the tanh value/derivative stats of ``h_t`` and adds the
        self-repair term to ``h_t_deriv`` in place."""
        prob = self.repair_and_stats_probability
        if kaldi_random.rand_uniform() > prob:
            return
        xp = array_module(h_t)
        tanh_deriv = 1.0 - h_t * h_t
        self.count += h_t.shape[0]
        self.value_sum += to_host(h_t.sum(axis=0)).astype(np.float64)
        self.deriv_sum += to_host(tanh_deriv.sum(axis=0)).astype(np.float64)
        if self.count <= 0.0:
            return
        thresholds = (np.float32(self.self_repair_threshold * self.count)
                      - self.deriv_sum.astype(np.float32))
        thresholds = (thresholds > 0).astype(np.float32)
        self.self_repair_total += float(thresholds.sum())
        h_t_deriv -= (np.float32(self.self_repair_scale / prob) * h_t
                      * xp.asarray(thresholds))

    def _backprop_cell(self, in_value, out_value, out_deriv, z_t, c_t1, in_deriv,
                       z_t_deriv, c_t1_deriv):
        """The part shared by both GRUs: returns h_t and d/d(tanh input)
        before self-repair, adding z_t and c_{t-1} derivatives of
        c_t = (1 - z_t) h_t + z_t c_{t-1} into in_deriv."""
        c = self.cell_dim
        h_t = out_value[:, :c]
        c_t_deriv = out_deriv[:, c:2 * c]
        # In a real GRU the h_t output is unused (its derivative is zero);
        # tests may give it one, so it is included.
        h_t_deriv = out_deriv[:, :c] + c_t_deriv - c_t_deriv * z_t
        if in_deriv is not None:
            z_t_deriv += c_t_deriv * (c_t1 - h_t)
            c_t1_deriv += c_t_deriv * z_t
        h_t_deriv = h_t_deriv * (1.0 - h_t * h_t)
        return h_t, h_t_deriv


def _kaldi_gru_output(c_t, h_t, z_t, c_t1):
    """c_t = (1 - z) h + z c_{t-1} as Kaldi computes it: c = h, then two
    AddMatMatElements (beta * c + alpha * a * b, left to right)."""
    c_t[...] = h_t
    c_t[...] = c_t + (-z_t) * h_t
    c_t[...] = c_t + z_t * c_t1


class GruNonlinearityComponent(_GruBase):
    """The GRU cell nonlinearity (Kaldi's GruNonlinearityComponent).

    Input per row: (z_t, r_t, hpart_t, c_{t-1}, s_{t-1}) of dims (cell,
    recurrent, cell, cell, recurrent); when recurrent_dim == cell_dim there is
    no separate s_{t-1} (it is c_{t-1}). Output (h_t, c_t) with
    h_t = tanh(hpart_t + W^h (r_t * s_{t-1})),
    c_t = (1 - z_t) h_t + z_t c_{t-1}. Parameters: ``w_h``
    (cell_dim x recurrent_dim).
    """

    type_name = "GruNonlinearityComponent"
    _param_names = ("w_h",)

    def input_dim(self):
        if self.recurrent_dim == self.cell_dim:
            return 4 * self.cell_dim
        return 3 * self.cell_dim + 2 * self.recurrent_dim

    def init_from_config(self, cfl):
        self.init_updatable_common(cfl)
        cell_dim = cfl.get_int("cell-dim")
        if cell_dim is None or cell_dim <= 0:
            raise cfl.error("cell-dim > 0 is required for GruNonlinearityComponent.")
        self.cell_dim = cell_dim
        param_stddev = f32(cfl.get_float("param-stddev", 1.0 / np.sqrt(np.float32(cell_dim))))
        self.recurrent_dim = cfl.get_int("recurrent-dim", -1)
        self.self_repair_threshold = f32(cfl.get_float("self-repair-threshold", 0.2))
        self.self_repair_scale = f32(cfl.get_float("self-repair-scale", 1.0e-05))
        self.alpha = f32(cfl.get_float("alpha", 4.0))
        self.rank_in = cfl.get_int("rank-in", 20)
        self.rank_out = cfl.get_int("rank-out", 80)
        self.update_period = cfl.get_int("update-period", 4)
        if self.recurrent_dim < 0:
            self.recurrent_dim = cell_dim
        if self.recurrent_dim == 0 or self.recurrent_dim > cell_dim:
            raise cfl.error("Invalid values for cell-dim and recurrent-dim")
        self.w_h = _randn((cell_dim, self.recurrent_dim)) * np.float32(param_stddev)
        self._init_stats()
        self._check(cfl.error)

    def read_body(self, stream):
        read_layout(self, stream, self.UPDATABLE_COMMON)
        stream.expect_token("<CellDim>")
        self.cell_dim = stream.read_int32()
        stream.expect_token("<RecurrentDim>")
        self.recurrent_dim = stream.read_int32()
        stream.expect_token("<w_h>")
        self.w_h = stream.read_matrix()
        self._read_stats(stream)
        stream.expect_token("<RankInOut>")
        self.rank_in = stream.read_int32()
        self.rank_out = stream.read_int32()
        stream.expect_token("<UpdatePeriod>")
        self.update_period = stream.read_int32()
        stream.expect_token("</GruNonlinearityComponent>")
        if not (0 < self.recurrent_dim <= self.cell_dim) or \
                self.w_h.shape != (self.cell_dim, self.recurrent_dim):
            raise stream.error("GruNonlinearityComponent: w_h is %dx%d, cell-dim %d, "
                               "recurrent-dim %d" % (self.w_h.shape + (self.cell_dim,
                                                                       self.recurrent_dim)))
        self._check_dims(stream)
        self._check(stream.error)

    def write_body(self, stream):
        write_layout(self, stream, self.UPDATABLE_COMMON)
        stream.write_token("<CellDim>")
        stream.write_int32(self.cell_dim)
        stream.write_token("<RecurrentDim>")
        stream.write_int32(self.recurrent_dim)
        stream.write_token("<w_h>")
        stream.write_matrix(to_host(self.w_h))
        self._write_stats(stream)
        stream.write_token("<RankInOut>")
        stream.write_int32(self.rank_in)
        stream.write_int32(self.rank_out)
        stream.write_token("<UpdatePeriod>")
        stream.write_int32(self.update_period)

    def info(self):
        s = self.updatable_info() + ", cell-dim=%d, recurrent-dim=%d" % (
            self.cell_dim, self.recurrent_dim)
        s += matrix_stats("w_h", self.w_h)
        s += self._stats_info()
        s += ", alpha=%s, rank-in=%d, rank-out=%d, update-period=%d" % (
            kaldi_str(self.alpha), self.rank_in, self.rank_out, self.update_period)
        return s

    def _split(self, mat):
        c, r = self.cell_dim, self.recurrent_dim
        cols = mat.shape[1]
        return (mat[:, 0:c], mat[:, c:c + r], mat[:, c + r:2 * c + r],
                mat[:, 2 * c + r:3 * c + r], mat[:, cols - r:cols])

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        c = self.cell_dim
        z_t, r_t, hpart_t, c_t1, s_t1 = self._split(in_value)
        h_t = xp.tanh(hpart_t + (r_t * s_t1) @ xp.asarray(self.w_h).T)
        out[:, :c] = h_t
        out[:, c:2 * c] = h_t - z_t * h_t + z_t * c_t1
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: sdotr = r .* s (onto zeros), h = hpart + sdotr W^T (AddMatMat
        # onto hpart), h = Tanh(h) (the double-precision matrix Tanh), then
        # c = h + (-1 * z) .* h, c = c + z .* c_{t-1} (AddMatMatElements).
        c = self.cell_dim
        z_t, r_t, hpart_t, c_t1, s_t1 = self._split(in_value)
        sdotr = r_t * s_t1 + np.float32(0.0)
        h_t = out[:, :c]
        h_t[...] = hpart_t
        kaldi.add_mat_mat(h_t, 1.0, sdotr, False, self.w_h, True, 1.0)
        kaldi.tanh(h_t, h_t)
        _kaldi_gru_output(out[:, c:2 * c], h_t, z_t, c_t1)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(in_value)
        z_t, r_t, hpart_t, c_t1, s_t1 = self._split(in_value)
        if in_deriv is not None:
            z_d, r_d, hpart_d, c_t1_d, s_t1_d = self._split(in_deriv)
        else:
            z_d = r_d = hpart_d = c_t1_d = s_t1_d = None
        sdotr = r_t * s_t1
        h_t, h_t_deriv = self._backprop_cell(in_value, out_value, out_deriv, z_t, c_t1,
                                             in_deriv, z_d, c_t1_d)
        if to_update is not None:
            to_update.tanh_stats_and_self_repair(h_t, h_t_deriv)
            to_update.w_h += np.float32(to_update.learning_rate) * \
                _like(h_t_deriv.T @ sdotr, to_update.w_h)
        if in_deriv is not None:
            hpart_d += h_t_deriv
            sdotr_deriv = h_t_deriv @ xp.asarray(self.w_h)
            r_d += sdotr_deriv * s_t1
            s_t1_d += sdotr_deriv * r_t


class OutputGruNonlinearityComponent(_GruBase):
    """The output-gated GRU nonlinearity (Kaldi's OutputGruNonlinearityComponent).

    Input per row: (z_t, hpart_t, c_{t-1}), each cell_dim wide; output
    (h_t, c_t) with h_t = tanh(hpart_t + w_h * c_{t-1}) (w_h diagonal),
    c_t = (1 - z_t) h_t + z_t c_{t-1}. Parameters: ``w_h`` (cell_dim).
    """

    type_name = "OutputGruNonlinearityComponent"
    _param_names = ("w_h",)

    def input_dim(self):
        return 3 * self.cell_dim

    def init_from_config(self, cfl):
        self.init_updatable_common(cfl)
        cell_dim = cfl.get_int("cell-dim")
        if cell_dim is None or cell_dim <= 0:
            raise cfl.error("cell-dim > 0 is required for OutputGruNonlinearityComponent.")
        self.cell_dim = cell_dim
        self.self_repair_threshold = f32(cfl.get_float("self-repair-threshold", 0.2))
        self.self_repair_scale = f32(cfl.get_float("self-repair-scale", 1.0e-05))
        param_mean = f32(cfl.get_float("param-mean", 0.0))
        param_stddev = f32(cfl.get_float("param-stddev", 1.0))
        self.alpha = f32(cfl.get_float("alpha", 4.0))
        self.rank = cfl.get_int("rank", 8)
        self.update_period = cfl.get_int("update-period", 10)
        self.w_h = _randn(cell_dim) * np.float32(param_stddev) + np.float32(param_mean)
        self._init_stats()
        self._check(cfl.error)

    def read_body(self, stream):
        read_layout(self, stream, self.UPDATABLE_COMMON)
        stream.expect_token("<CellDim>")
        self.cell_dim = stream.read_int32()
        stream.expect_token("<w_h>")
        self.w_h = stream.read_vector()
        self._read_stats(stream)
        stream.expect_token("<Rank>")
        self.rank = stream.read_int32()
        stream.expect_token("<UpdatePeriod>")
        self.update_period = stream.read_int32()
        stream.expect_token("</OutputGruNonlinearityComponent>")
        if self.w_h.shape != (self.cell_dim,):
            raise stream.error("OutputGruNonlinearityComponent: w_h has dim %d, cell-dim %d"
                               % (self.w_h.shape[0], self.cell_dim))
        self._check_dims(stream)
        self._check(stream.error)

    def write_body(self, stream):
        write_layout(self, stream, self.UPDATABLE_COMMON)
        stream.write_token("<CellDim>")
        stream.write_int32(self.cell_dim)
        stream.write_token("<w_h>")
        stream.write_vector(to_host(self.w_h))
        self._write_stats(stream)
        stream.write_token("<Rank>")
        stream.write_int32(self.rank)
        stream.write_token("<UpdatePeriod>")
        stream.write_int32(self.update_period)

    def info(self):
        s = self.updatable_info() + ", cell-dim=%d" % self.cell_dim
        s += vector_stats("w_h", self.w_h)
        s += self._stats_info()
        s += ", alpha=%s, rank=%d, update-period=%d" % (
            kaldi_str(self.alpha), self.rank, self.update_period)
        return s

    def _split(self, mat):
        c = self.cell_dim
        return mat[:, 0:c], mat[:, c:2 * c], mat[:, 2 * c:3 * c]

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        c = self.cell_dim
        z_t, hpart_t, c_t1 = self._split(in_value)
        h_t = xp.tanh(c_t1 * xp.asarray(self.w_h) + hpart_t)
        out[:, :c] = h_t
        out[:, c:2 * c] = h_t - z_t * h_t + z_t * c_t1
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: h = c_{t-1} .* w (MulColsVec), h += hpart (AddMat), h =
        # Tanh(h) (the double-precision matrix Tanh), then c as for GRU.
        c = self.cell_dim
        z_t, hpart_t, c_t1 = self._split(in_value)
        h_t = out[:, :c]
        h_t[...] = c_t1 * self.w_h
        kaldi.axpy_rows(h_t, 1.0, hpart_t)
        kaldi.tanh(h_t, h_t)
        _kaldi_gru_output(out[:, c:2 * c], h_t, z_t, c_t1)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(in_value)
        z_t, hpart_t, c_t1 = self._split(in_value)
        if in_deriv is not None:
            z_d, hpart_d, c_t1_d = self._split(in_deriv)
        else:
            z_d = hpart_d = c_t1_d = None
        h_t, h_t_deriv = self._backprop_cell(in_value, out_value, out_deriv, z_t, c_t1,
                                             in_deriv, z_d, c_t1_d)
        if to_update is not None:
            to_update.tanh_stats_and_self_repair(h_t, h_t_deriv)
            to_update.w_h += np.float32(to_update.learning_rate) * \
                _like((h_t_deriv * c_t1).sum(axis=0), to_update.w_h)
        if in_deriv is not None:
            hpart_d += h_t_deriv
            c_t1_d += h_t_deriv * xp.asarray(self.w_h)
