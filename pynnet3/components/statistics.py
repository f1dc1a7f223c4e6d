"""Moving-window statistics: extraction and pooling (x-vector style).

Kaldi's StatisticsExtractionComponent and StatisticsPoolingComponent
(nnet-general-component), with their precomputed indexes.

StatisticsExtractionComponent turns input frames at multiples of
``input_period`` into count / sum / (optionally) sum-of-squares stats at
multiples of ``output_period``, summing the inputs of each output period.
StatisticsPoolingComponent sums those stats over a window
[t - left_context, t + right_context] and outputs means (and optionally
log-counts and standard deviations).

Guarantees: serialization (including Kaldi's misspelled
``<IncludeVarinance>`` token) and the precomputed-index objects are
byte-identical to Kaldi's; the index hooks reproduce Kaldi's choices
(sorted by n, x, then t); propagate/backprop follow Kaldi's arithmetic
(row-range sums are done in float64, which only improves on Kaldi's
float32 sums).
"""

import numpy as np

from . import row_ranges as _row_ranges
from .. import _fast
from ..errors import ComputationError
from .base import Component, Field, P, PrecomputedIndexes, array_module

# The kernel of the Index-list loops below when it is loaded (the one
# pynnet3._fast.load policy); else the Python twins run.
_kernel = _fast.load("statistics_kernel")


def _int32_pairs(pairs):
    """``pairs`` (a sequence of (a, b) or an array) as an (n, 2) int32 array."""
    return np.asarray(pairs, np.int32).reshape(-1, 2)


def add_row_ranges(xp, src, ranges, dst, squared=False, onto_zeros=False):
    """dst[i] += sum of src[ranges[i,0]:ranges[i,1]] (Kaldi's AddRowRanges),
    or with ``squared`` of the rows' squares; empty ranges add nothing; with
    ``onto_zeros``, onto a zeroed ``dst``. On NumPy: Kaldi's CPU loop
    exactly (:mod:`pynnet3.components.row_ranges`, a Cython kernel); on
    another array module: float64 prefix sums."""
    if dst.shape[0] == 0 or dst.shape[1] == 0:
        return
    if xp is np:
        _row_ranges.add_row_ranges(src, ranges, dst, squared, onto_zeros)
        return
    if onto_zeros:
        dst[...] = 0.0
    if squared:
        src = src * src
    ranges = xp.asarray(ranges)
    cum = xp.zeros((src.shape[0] + 1, src.shape[1]), dtype=np.float64)
    xp.cumsum(src, axis=0, dtype=np.float64, out=cum[1:])
    first = xp.maximum(ranges[:, 0], 0)
    second = xp.maximum(ranges[:, 1], first)
    dst += (cum[second] - cum[first]).astype(dst.dtype)


def _nxt_key(index):
    return (index.n, index.x, index.t)


def sort_nxt(indexes):
    """``indexes`` sorted by (n, x, t), stably (the C kernel when built)."""
    if _kernel is not None and type(indexes) is list:
        out = _kernel.sort_nxt(indexes)
        if out is not None:
            return out
    return sorted(indexes, key=_nxt_key)


def _any_input(inputs, input_index_set, used_inputs):
    """Both components' IsComputable: an output needs any one of its
    ``inputs``; all those present go to ``used_inputs`` (when a list)."""
    ok = False
    for index in inputs:
        if input_index_set(index):
            ok = True
            if used_inputs is None:
                return True
            used_inputs.append(index)
    return ok


def _period_start(t, period):
    """The start of the output period containing t (rounding down)."""
    return period * (t // period)


# ---------------------------------------------------------------------------
# StatisticsExtractionComponent
# ---------------------------------------------------------------------------

def _extend_input_range(forward, i, pos, type_name, output_index):
    """Adds input row ``pos`` to output ``i``'s row range ``forward[i]``
    (begin, end); the rows of one output must be consecutive."""
    if forward[i, 0] == -1:
        forward[i] = (pos, pos + 1)
    elif forward[i, 1] == pos:
        forward[i, 1] += 1
    else:
        raise ComputationError("%s: inputs of output %s are not consecutive rows (indexes "
                               "not sorted?)" % (type_name, output_index))


class StatisticsExtractionComponentPrecomputedIndexes(PrecomputedIndexes):
    """forward_indexes: per output row, the (begin, end) input-row range summed;
    counts: per output row, how many inputs; backward_indexes: per input row,
    the output row it contributes to (empty when backprop is not needed)."""

    type_name = "StatisticsExtractionComponentPrecomputedIndexes"
    layout = (
        Field("<ForwardIndexes>", "int_pair_vector", "forward_indexes"),
        Field("<Counts>", "vector", "counts"),
        Field("<BackwardIndexes>", "int_vector", "backward_indexes"),
    )

    def __init__(self, forward_indexes=None, counts=None, backward_indexes=None):
        self.forward_indexes = _int32_pairs(() if forward_indexes is None else forward_indexes)
        self.counts = np.zeros(0, np.float32) if counts is None else np.asarray(counts,
                                                                                np.float32)
        self.backward_indexes = (np.zeros(0, np.int32) if backward_indexes is None
                                 else np.asarray(backward_indexes, np.int32))

    def after_read(self):
        self.forward_indexes = _int32_pairs(self.forward_indexes)
        self.backward_indexes = np.asarray(self.backward_indexes, np.int32)


class StatisticsExtractionComponent(Component):
    """Count, sum and (include_variance) sum-of-squares statistics per output
    period. Output dim: 1 + input_dim (+ input_dim)."""

    type_name = "StatisticsExtractionComponent"

    # Kaldi's propagate: counts copied, AddRowRanges of x and of pow(x, 2.0)
    # (exact in double, so one float rounding, as x * x); on NumPy ours runs
    # Kaldi's AddRowRanges loop.
    kaldi_exact = True
    layout = (
        Field("<InputDim>", "int", "input_dim_"),
        Field("<InputPeriod>", "int", "input_period"),
        Field("<OutputPeriod>", "int", "output_period"),
        Field("<IncludeVarinance>", "bool", "include_variance"),  # sic: Kaldi's spelling
    )

    def __init__(self, input_dim=-1, input_period=1, output_period=1, include_variance=True):
        self.input_dim_ = input_dim
        self.input_period = input_period
        self.output_period = output_period
        self.include_variance = include_variance

    # Kaldi's propagate zeroes its output before adding into it, as ours does.
    propagate_sets_whole_output = True

    def properties(self):
        return (P.kPropagateAdds | P.kReordersIndexes
                | (P.kBackpropNeedsInput if self.include_variance else 0))

    def input_dim(self):
        return self.input_dim_

    def output_dim(self):
        return 1 + self.input_dim_ + (self.input_dim_ if self.include_variance else 0)

    def _valid(self):
        return (self.input_dim_ > 0 and self.input_period > 0 and self.output_period > 0
                and self.output_period % self.input_period == 0)

    def init_from_config(self, cfl):
        self.__init__()
        self.input_dim_ = cfl.get_int("input-dim", -1)
        self.input_period = cfl.get_int("input-period", 1)
        self.output_period = cfl.get_int("output-period", 1)
        self.include_variance = cfl.get_bool("include-variance", True)
        if not cfl.has("input-dim") or not self._valid():
            raise cfl.error("Invalid initializer for layer of type %s: need input-dim > 0, "
                            "input-period > 0, output-period > 0 and a multiple of "
                            "input-period" % self.type_name)

    def read_body(self, stream):
        super().read_body(stream)
        if not self._valid():
            raise stream.error("Invalid configuration of StatisticsExtractionComponent "
                               "(input-dim %d, input-period %d, output-period %d)"
                               % (self.input_dim_, self.input_period, self.output_period))

    # -- index hooks ------------------------------------------------------------
    def _inputs_for(self, output_index):
        start = _period_start(output_index.t, self.output_period)
        return [output_index._replace(t=t)
                for t in range(start, start + self.output_period, self.input_period)]

    def get_input_indexes(self, misc_info, output_index):
        return self._inputs_for(output_index)

    def is_computable(self, misc_info, output_index, input_index_set, used_inputs=None):
        return _any_input(self._inputs_for(output_index), input_index_set, used_inputs)

    def reorder_indexes(self, input_indexes, output_indexes):
        return sort_nxt(input_indexes), sort_nxt(output_indexes)

    def precompute_indexes(self, misc_info, input_indexes, output_indexes, need_backprop):
        if _kernel is not None and type(input_indexes) is list \
                and type(output_indexes) is list:
            arrays = _kernel.statistics_extraction_indexes(
                input_indexes, output_indexes, self.input_period, self.output_period)
            if arrays is not None:
                forward, counts, backward = arrays
                return StatisticsExtractionComponentPrecomputedIndexes(
                    forward, counts, backward if need_backprop else None)
        return self.precompute_indexes_py(misc_info, input_indexes, output_indexes,
                                          need_backprop)

    def precompute_indexes_py(self, misc_info, input_indexes, output_indexes, need_backprop):
        """The Python twin of precompute_indexes (which runs the C kernel when
        built, this for anything irregular; this raises the errors)."""
        position = {index: i for i, index in enumerate(input_indexes)}
        num_out = len(output_indexes)
        forward = np.full((num_out, 2), -1, dtype=np.int32)
        counts = np.zeros(num_out, dtype=np.float32)
        backward = np.full(len(input_indexes), -1, dtype=np.int32)
        for i, output_index in enumerate(output_indexes):
            for index in self._inputs_for(output_index):
                pos = position.get(index)
                if pos is None:
                    continue
                _extend_input_range(forward, i, pos, self.type_name, output_index)
                counts[i] += 1.0
                if backward[pos] != -1:
                    raise ComputationError("StatisticsExtractionComponent: input %s used by "
                                           "two outputs" % (index,))
                backward[pos] = i
            if counts[i] == 0.0:
                raise ComputationError("StatisticsExtractionComponent: output %s has no inputs"
                                       % (output_index,))
        if (backward == -1).any():
            raise ComputationError("StatisticsExtractionComponent: input %s is used by no "
                                   "output" % (input_indexes[int(np.argmax(backward == -1))],))
        return StatisticsExtractionComponentPrecomputedIndexes(
            forward, counts, backward if need_backprop else None)

    # -- computation --------------------------------------------------------------
    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        d = self.input_dim_
        # Kaldi zeroes the output, copies the counts and adds the sums (and
        # the squares' sums): together they cover every column, so each
        # row is zeroed just before its sums are added, not all beforehand
        out[:, 0] = xp.asarray(indexes.counts)
        add_row_ranges(xp, in_value, indexes.forward_indexes, out[:, 1:1 + d], onto_zeros=True)
        if self.include_variance:
            add_row_ranges(xp, in_value, indexes.forward_indexes, out[:, 1 + d:1 + 2 * d],
                           squared=True, onto_zeros=True)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module(out_deriv)
        d = self.input_dim_
        backward = xp.asarray(indexes.backward_indexes)
        in_deriv[...] = out_deriv[backward, 1:1 + d]
        if self.include_variance:
            in_deriv += 2.0 * out_deriv[backward, 1 + d:1 + 2 * d] * in_value


# ---------------------------------------------------------------------------
# StatisticsPoolingComponent
# ---------------------------------------------------------------------------

class StatisticsPoolingComponentPrecomputedIndexes(PrecomputedIndexes):
    """forward_indexes: per output row, the (begin, end) input-row range summed;
    backward_indexes: per input row, the (begin, end) range of output rows it
    contributes to (empty when backprop is not needed)."""

    type_name = "StatisticsPoolingComponentPrecomputedIndexes"
    layout = (
        Field("<ForwardIndexes>", "int_pair_vector", "forward_indexes"),
        Field("<BackwardIndexes>", "int_pair_vector", "backward_indexes"),
    )

    def __init__(self, forward_indexes=None, backward_indexes=None):
        self.forward_indexes = _int32_pairs(() if forward_indexes is None else forward_indexes)
        self.backward_indexes = _int32_pairs(() if backward_indexes is None
                                             else backward_indexes)

    def after_read(self):
        self.forward_indexes = _int32_pairs(self.forward_indexes)
        self.backward_indexes = _int32_pairs(self.backward_indexes)


class StatisticsPoolingComponent(Component):
    """Pools extraction stats over [t - left_context, t + right_context] (at
    multiples of input_period) and outputs [log-count x num_log_count_features,
    mean, (stddev if output_stddevs, else the raw second-order stats / count)].
    Output dim: input_dim + num_log_count_features - 1."""

    type_name = "StatisticsPoolingComponent"
    layout = (
        Field("<InputDim>", "int", "input_dim_"),
        Field("<InputPeriod>", "int", "input_period"),
        Field("<LeftContext>", "int", "left_context"),
        Field("<RightContext>", "int", "right_context"),
        Field("<NumLogCountFeatures>", "int", "num_log_count_features"),
        Field("<OutputStddevs>", "bool", "output_stddevs"),
        Field("<VarianceFloor>", "float", "variance_floor"),
    )

    def __init__(self):
        self.input_dim_ = -1
        self.input_period = 1
        self.left_context = -1
        self.right_context = -1
        self.num_log_count_features = 0
        self.output_stddevs = False
        self.variance_floor = float(np.float32(1.0e-10))
        # Kaldi's require_direct_input_: in memory only, never written. Kaldi
        # (at the version we match) stores it but its IsComputable does not
        # consult it, so neither do we.
        self.require_direct_input = False

    def properties(self):
        return (P.kReordersIndexes | P.kBackpropAdds
                | (P.kBackpropNeedsOutput
                   if self.output_stddevs or self.num_log_count_features > 0 else 0)
                | (P.kBackpropNeedsInput if self.num_log_count_features == 0 else 0))

    def input_dim(self):
        return self.input_dim_

    def output_dim(self):
        return self.input_dim_ + self.num_log_count_features - 1

    def _problem(self):
        """What is wrong with the configuration (Kaldi's Check()), or None."""
        if self.input_dim_ <= 0:
            return "input-dim must be > 0"
        if self.input_period <= 0:
            return "input-period must be > 0"
        if not (self.left_context >= 0 and self.right_context >= 0
                and self.left_context + self.right_context > 0):
            return "left-context and right-context must be >= 0 with a positive sum"
        if self.left_context % self.input_period or self.right_context % self.input_period:
            return "left-context and right-context must be multiples of input-period"
        if not 0.0 < self.variance_floor < 1.0:
            return "variance-floor must be in (0, 1)"
        if self.output_stddevs and (self.input_dim_ - 1) % 2 != 0:
            return "output-stddevs=true needs an odd input-dim (count, sums, squares)"
        if self.num_log_count_features < 0:
            return "num-log-count-features must be >= 0"
        return None

    def init_from_config(self, cfl):
        self.__init__()
        self.input_dim_ = cfl.get_int("input-dim", -1)
        self.input_period = cfl.get_int("input-period", 1)
        self.left_context = cfl.get_int("left-context", -1)
        self.right_context = cfl.get_int("right-context", -1)
        self.num_log_count_features = cfl.get_int("num-log-count-features", 0)
        self.output_stddevs = cfl.get_bool("output-stddevs", False)
        self.variance_floor = float(np.float32(cfl.get_float("variance-floor", 1.0e-10)))
        if not cfl.has("input-dim"):
            raise cfl.error("Invalid initializer for layer of type %s: input-dim is required"
                            % self.type_name)
        problem = self._problem()
        if problem:
            raise cfl.error("Invalid initializer for layer of type %s: %s"
                            % (self.type_name, problem))

    def read_body(self, stream):
        super().read_body(stream)
        self.require_direct_input = False
        problem = self._problem()
        if problem:
            raise stream.error("StatisticsPoolingComponent: " + problem)

    def set_require_direct_input(self, value):
        """Kaldi's SetRequireDirectInput (used when computing the real context)."""
        self.require_direct_input = bool(value)

    # -- index hooks ------------------------------------------------------------
    def _window(self, output_index):
        t = output_index.t
        return [output_index._replace(t=s)
                for s in range(t - self.left_context, t + self.right_context + 1,
                               self.input_period)]

    def get_input_indexes(self, misc_info, output_index):
        if output_index.t % self.input_period != 0:
            raise ComputationError("StatisticsPoolingComponent: output t=%d is not a multiple "
                                   "of input-period %d" % (output_index.t, self.input_period))
        return self._window(output_index)

    def is_computable(self, misc_info, output_index, input_index_set, used_inputs=None):
        # Outputs exist only at multiples of the input period.
        if output_index.t % self.input_period != 0:
            return False
        return _any_input(self._window(output_index), input_index_set, used_inputs)

    def reorder_indexes(self, input_indexes, output_indexes):
        return sort_nxt(input_indexes), sort_nxt(output_indexes)

    def precompute_indexes(self, misc_info, input_indexes, output_indexes, need_backprop):
        if _kernel is not None and type(input_indexes) is list \
                and type(output_indexes) is list:
            arrays = _kernel.statistics_pooling_indexes(
                input_indexes, output_indexes, self.input_period, self.left_context,
                self.right_context)
            if arrays is not None:
                forward, backward = arrays
                return StatisticsPoolingComponentPrecomputedIndexes(
                    forward, backward if need_backprop else None)
        return self.precompute_indexes_py(misc_info, input_indexes, output_indexes,
                                          need_backprop)

    def precompute_indexes_py(self, misc_info, input_indexes, output_indexes, need_backprop):
        """The Python twin of precompute_indexes (which runs the C kernel when
        built, this for anything irregular; this raises the errors)."""
        position = {index: i for i, index in enumerate(input_indexes)}
        forward = np.full((len(output_indexes), 2), -1, dtype=np.int32)
        backward = np.full((len(input_indexes), 2), -1, dtype=np.int32)
        for i, output_index in enumerate(output_indexes):
            for index in self._window(output_index):
                pos = position.get(index)
                if pos is None:
                    continue
                _extend_input_range(forward, i, pos, self.type_name, output_index)
                if backward[pos, 0] == -1:
                    backward[pos] = (i, i + 1)
                elif backward[pos, 1] == i:
                    backward[pos, 1] += 1
                else:
                    raise ComputationError("StatisticsPoolingComponent: outputs using input %s "
                                           "are not consecutive rows" % (index,))
            if forward[i, 0] == -1:
                raise ComputationError("StatisticsPoolingComponent: output %s has no inputs"
                                       % (output_index,))
        if (backward[:, 0] == -1).any():
            raise ComputationError("StatisticsPoolingComponent: input %s is used by no output"
                                   % (input_indexes[int(np.argmax(backward[:, 0] == -1))],))
        return StatisticsPoolingComponentPrecomputedIndexes(
            forward, backward if need_backprop else None)

    # -- computation --------------------------------------------------------------
    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        d = self.input_dim_
        nlc = self.num_log_count_features
        num_out = out.shape[0]
        out[...] = 0.0
        counts = xp.zeros((num_out, 1), dtype=np.float32)
        add_row_ranges(xp, in_value[:, 0:1], indexes.forward_indexes, counts)
        add_row_ranges(xp, in_value[:, 1:d], indexes.forward_indexes, out[:, nlc:nlc + d - 1])
        self._statistics_from_sums(xp, counts, out)
        return None

    def propagate_from_sums(self, counts, sums, out):
        """What :meth:`propagate` writes, from the pooled sums it would add
        up: ``counts`` (output rows x 1) and ``sums`` (output rows x
        input_dim - 1: the sums, then the sums of squares), float32 as its
        row-range sums give them (the same bits). For the statistics pooled
        straight from the extraction's input (:mod:`pynnet3.compute.fusion`)."""
        nlc = self.num_log_count_features
        out[:, nlc:nlc + self.input_dim_ - 1] = sums    # (the log-counts fill the rest)
        self._statistics_from_sums(array_module(out), counts, out)

    def _statistics_from_sums(self, xp, counts, out):
        """``out`` holds the pooled sums after its log-count columns: the
        means, log-counts and standard deviations from them, in place."""
        d = self.input_dim_
        nlc = self.num_log_count_features
        non_count = out[:, nlc:nlc + d - 1]
        non_count /= counts
        if nlc > 0:
            out[:, 0:nlc] = xp.log(counts)
        if self.output_stddevs:
            f = (d - 1) // 2
            mean = out[:, nlc:nlc + f]
            variance = out[:, nlc + f:nlc + 2 * f]
            variance -= mean * mean
            xp.maximum(variance, np.float32(self.variance_floor), out=variance)
            xp.sqrt(variance, out=variance)

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: sums by AddRowRanges; DivRowsVec multiplies by float 1 /
        # count; log counts by logf; variance = var + (-mean) * mean, floored,
        # then the C library's pow(0.5).
        d = self.input_dim_
        nlc = self.num_log_count_features
        num_out = out.shape[0]
        out[...] = 0.0
        counts = np.zeros((num_out, 1), dtype=np.float32)
        add_row_ranges(np, in_value[:, 0:1], indexes.forward_indexes, counts)
        non_count = out[:, nlc:nlc + d - 1]
        add_row_ranges(np, in_value[:, 1:d], indexes.forward_indexes, non_count)
        non_count *= np.float32(1.0) / counts
        if nlc > 0:
            out[:, 0:nlc] = kaldi.apply_log(counts[:, 0])[:, None]
        if self.output_stddevs:
            f = (d - 1) // 2
            mean = out[:, nlc:nlc + f]
            variance = out[:, nlc + f:nlc + 2 * f]
            variance[...] = variance + (-mean) * mean
            kaldi.apply_floor(variance, self.variance_floor)
            variance[...] = kaldi.apply_pow(variance.ravel(), 0.5).reshape(variance.shape)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv_in, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module(out_deriv_in)
        d = self.input_dim_
        nlc = self.num_log_count_features
        num_out = out_deriv_in.shape[0]
        out_deriv = out_deriv_in.copy()
        if self.output_stddevs:
            # The variance floor is ignored here, as in Kaldi (an approximation).
            f = (d - 1) // 2
            mean_deriv = out_deriv[:, nlc:nlc + f]
            variance_deriv = out_deriv[:, nlc + f:nlc + 2 * f]
            mean_value = out_value[:, nlc:nlc + f]
            stddev_value = out_value[:, nlc + f:nlc + 2 * f]
            variance_deriv /= stddev_value
            variance_deriv *= np.float32(0.5)
            mean_deriv -= 2.0 * mean_value * variance_deriv
        if nlc > 0:
            counts = xp.exp(out_value[:, 0:1])
        else:
            counts = xp.zeros((num_out, 1), dtype=np.float32)
            add_row_ranges(xp, in_value[:, 0:1], indexes.forward_indexes, counts)
        out_deriv /= counts
        # The count column gets no derivative (it is not differentiable).
        add_row_ranges(xp, out_deriv[:, nlc:nlc + d - 1], indexes.backward_indexes,
                       in_deriv[:, 1:d])


__all__ = ["StatisticsExtractionComponent", "StatisticsPoolingComponent",
           "StatisticsExtractionComponentPrecomputedIndexes",
           "StatisticsPoolingComponentPrecomputedIndexes", "add_row_ranges"]
