"""Kaldi's time-height convolution machinery (nnet3/convolution.{h,cc}).

A :class:`ConvolutionModel` is the structure of a 2-D convolution whose width
axis is nnet3's time index ``t`` and whose height axis lives in the feature
dimension (``height * num_filters``, filter index with stride 1). It is a list
of (time-offset, height-offset) pairs plus the set of *required* time offsets
(the others are zero-padded when absent).

:func:`compile_convolution_computation` turns a model plus the input/output
Index lists of one component call into a :class:`ConvolutionComputation`: the
input is padded/reordered into a regular (t, image) grid, zero-padding in
height is made explicit, time subsampling is turned into frame appending (a
reshape of the input), and the convolution becomes a few *steps*, one per
distinct time offset, each a column gather into a temporary matrix followed by
one matrix product with a column block of the parameters. The temporary matrix
is limited to ``max_memory_mb``; larger computations are done in row chunks.

Guarantees: the computation, its serialization and the reordered Index lists
are exactly Kaldi's (so computations Kaldi wrote can be read and executed);
:func:`convolve_forward`, :func:`convolve_backward_data` and
:func:`convolve_backward_params` compute what Kaldi's ConvolveForward,
ConvolveBackwardData and ConvolveBackwardParams compute (they add to their
output), on NumPy or CuPy arrays.
"""

import math
import re

import numpy as np

from .. import _fast
from ..errors import ComputationError
from ..common.index import Index, kNoTime
from .base import array_module

# the C twins of the Index-list helpers below (pynnet3/_fast/component_indexes.pyx), or
# None when the user chose the Python versions or it is not built (pynnet3._fast then
# warns once)
_fast_indexes = _fast.load("component_indexes")


def split_ints(text, sep=","):
    """Kaldi's SplitStringToIntegers(text, sep, omit_empty_strings=false):
    a list of ints, or None when some piece is not an integer ('' gives [])."""
    if text == "":
        return []
    out = []
    for piece in text.split(sep):
        if not re.fullmatch(r"\s*[+-]?\d+", piece):
            return None
        value = int(piece)
        if not -2**31 <= value < 2**31:
            return None
        out.append(value)
    return out


def _gcd(m, n):
    """Kaldi's Gcd for the non-negative arguments used here (0,0 is an error)."""
    if m == 0 and n == 0:
        raise ComputationError("convolution: undefined GCD of 0 and 0")
    return math.gcd(m, n)


def _is_sorted_and_uniq(values):
    return all(values[i] < values[i + 1] for i in range(len(values) - 1))


# ---------------------------------------------------------------------------
# ConvolutionModel
# ---------------------------------------------------------------------------

class ConvolutionModel:
    """Structure of a time-height convolution (Kaldi's ConvolutionModel).

    ``offsets``: sorted unique list of (time_offset, height_offset);
    ``required_time_offsets``: sorted unique list (Kaldi's std::set);
    derived: ``all_time_offsets`` (sorted unique time offsets) and
    ``time_offsets_modulus`` (GCD of their differences, 0 if only one).
    Parameters for it are a (num_filters_out, len(offsets) * num_filters_in)
    matrix, offset index with the larger stride.
    """

    __slots__ = ("num_filters_in", "num_filters_out", "height_in", "height_out",
                 "height_subsample_out", "offsets", "required_time_offsets",
                 "all_time_offsets", "time_offsets_modulus")

    def __init__(self, num_filters_in=0, num_filters_out=0, height_in=0, height_out=0,
                 height_subsample_out=1, offsets=(), required_time_offsets=()):
        self.num_filters_in = num_filters_in
        self.num_filters_out = num_filters_out
        self.height_in = height_in
        self.height_out = height_out
        self.height_subsample_out = height_subsample_out
        self.offsets = [tuple(o) for o in offsets]
        self.required_time_offsets = sorted(set(required_time_offsets))
        self.all_time_offsets = []
        self.time_offsets_modulus = 0
        if self.offsets:
            self.compute_derived()

    def copy(self):
        m = ConvolutionModel.__new__(ConvolutionModel)
        for name in self.__slots__:
            value = getattr(self, name)
            setattr(m, name, list(value) if isinstance(value, list) else value)
        return m

    def __eq__(self, other):
        return isinstance(other, ConvolutionModel) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def input_dim(self):
        return self.num_filters_in * self.height_in

    def output_dim(self):
        return self.num_filters_out * self.height_out

    def param_rows(self):
        return self.num_filters_out

    def param_cols(self):
        return self.num_filters_in * len(self.offsets)

    def compute_derived(self):
        """Sets all_time_offsets and time_offsets_modulus from offsets."""
        self.all_time_offsets = sorted({t for t, _ in self.offsets})
        modulus = 0
        for a, b in zip(self.all_time_offsets, self.all_time_offsets[1:]):
            modulus = _gcd(modulus, b - a)
        self.time_offsets_modulus = modulus

    def check(self, check_heights_used=True, allow_height_padding=True):
        """Kaldi's ConvolutionModel::Check: returns (ok, reason)."""
        if (self.num_filters_in <= 0 or self.num_filters_out <= 0 or self.height_in <= 0
                or self.height_out <= 0 or self.height_subsample_out <= 0
                or not self.offsets or not self.required_time_offsets):
            return False, "convolution model fails basic check (non-positive sizes or no offsets)"
        if not _is_sorted_and_uniq(self.offsets):
            return False, "offsets are not sorted and unique"
        all_t = set(self.all_time_offsets)
        if any(t not in all_t for t in self.required_time_offsets):
            return False, "required time offsets are not a subset of the time offsets"
        required = set(self.required_time_offsets)
        h_in_used = [False] * self.height_in
        offsets_used = [False] * len(self.offsets)
        for h_out in range(0, self.height_out * self.height_subsample_out,
                           self.height_subsample_out):
            some_input_available = False
            for i, (t_off, h_off) in enumerate(self.offsets):
                h_in = h_out + h_off
                if 0 <= h_in < self.height_in:
                    offsets_used[i] = True
                    h_in_used[h_in] = True
                    if t_off in required:
                        some_input_available = True
                elif not allow_height_padding:
                    return False, "height padding not allowed but is required"
            if not some_input_available:
                return False, ("for output height %d no input is available if only the "
                               "required time offsets are available" % h_out)
        if check_heights_used:
            for h, used in enumerate(h_in_used):
                if not used:
                    return False, "the input at height %d is never used" % h
        for i, used in enumerate(offsets_used):
            if not used:
                return False, ("(time,height) offset (%d,%d) is never used"
                               % self.offsets[i])
        return True, ""

    def info(self):
        """Kaldi's ConvolutionModel::Info()."""
        return ("num-filters-in=%d, num-filters-out=%d, height-in=%d, height-out=%d, "
                "height-subsample-out=%d, {time,height}-offsets=[%s], "
                "required-time-offsets=[%s], input-dim=%d, output-dim=%d" % (
                    self.num_filters_in, self.num_filters_out, self.height_in,
                    self.height_out, self.height_subsample_out,
                    " ".join("%d,%d" % o for o in self.offsets),
                    ",".join(str(t) for t in self.required_time_offsets),
                    self.input_dim(), self.output_dim()))

    def write(self, stream):
        stream.write_token("<ConvolutionModel>")
        stream.write_token("<NumFiltersIn>")
        stream.write_int32(self.num_filters_in)
        stream.write_token("<NumFiltersOut>")
        stream.write_int32(self.num_filters_out)
        stream.write_token("<HeightIn>")
        stream.write_int32(self.height_in)
        stream.write_token("<HeightOut>")
        stream.write_int32(self.height_out)
        stream.write_token("<HeightSubsampleOut>")
        stream.write_int32(self.height_subsample_out)
        stream.write_token("<Offsets>")
        stream.write_int_pair_vector(self.offsets)
        stream.write_token("<RequiredTimeOffsets>")
        stream.write_int_vector(self.required_time_offsets)
        stream.write_token("</ConvolutionModel>")

    @classmethod
    def read(cls, stream):
        """Reads ``[<ConvolutionModel>] <NumFiltersIn> ... </ConvolutionModel>``."""
        start = stream.pos
        stream.read_optional_token("<ConvolutionModel>")
        m = cls.__new__(cls)
        stream.expect_token("<NumFiltersIn>")
        m.num_filters_in = stream.read_int32()
        stream.expect_token("<NumFiltersOut>")
        m.num_filters_out = stream.read_int32()
        stream.expect_token("<HeightIn>")
        m.height_in = stream.read_int32()
        stream.expect_token("<HeightOut>")
        m.height_out = stream.read_int32()
        stream.expect_token("<HeightSubsampleOut>")
        m.height_subsample_out = stream.read_int32()
        stream.expect_token("<Offsets>")
        m.offsets = stream.read_int_pair_vector()
        stream.expect_token("<RequiredTimeOffsets>")
        # Kaldi stores these in a std::set: order and repeats are normalized.
        m.required_time_offsets = sorted(set(stream.read_int_vector()))
        stream.expect_token("</ConvolutionModel>")
        if not m.offsets:
            raise stream.error("convolution model has no offsets", start)
        m.compute_derived()
        ok, reason = m.check(False, True)
        if not ok:
            raise stream.error("invalid convolution model: " + reason, start)
        return m


# ---------------------------------------------------------------------------
# ConvolutionComputation
# ---------------------------------------------------------------------------

class ConvolutionStep:
    """One step of a convolution computation (Kaldi's ConvolutionStep).

    Serialized: input_time_shift, params_start_col, height_map. Derived by
    :meth:`ConvolutionComputation.compute_derived`: ``columns`` (int64 array,
    -1 = zero), ``backward_columns`` (list of int64 arrays over input columns,
    -1 = nothing), ``columns_are_contiguous``, ``first_column``; and for
    execution ``height_sources`` (height_map with -1 as 0), ``zero_heights``
    (positions where height_map is -1) and ``backward_heights`` (per overlap
    level, (input heights, temp positions) pairs).
    """

    __slots__ = ("input_time_shift", "params_start_col", "height_map", "columns",
                 "backward_columns", "columns_are_contiguous", "first_column",
                 "height_sources", "zero_heights", "backward_heights")

    def __init__(self, input_time_shift=0, params_start_col=0, height_map=None):
        self.input_time_shift = input_time_shift
        self.params_start_col = params_start_col
        self.height_map = list(height_map) if height_map is not None else []
        self.columns = None
        self.backward_columns = []
        self.columns_are_contiguous = False
        self.first_column = 0
        self.height_sources = None
        self.zero_heights = None
        self.backward_heights = []


def _reverse_column_mapping(columns, input_dim):
    """Kaldi's ReverseColumnMapping: list of arrays of size input_dim with
    backward[k][j] = i for the k'th i having columns[i] == j."""
    columns = np.asarray(columns, dtype=np.int64)
    sources = np.nonzero(columns != -1)[0]
    targets = columns[sources]
    # Stable sort by target keeps the i's of each j in increasing order, so
    # the k'th occurrence of j goes to backward[k] as in Kaldi.
    order = np.argsort(targets, kind="stable")
    sources, targets = sources[order], targets[order]
    if targets.size == 0:
        return []
    group_start = np.concatenate(([0], np.nonzero(np.diff(targets))[0] + 1))
    starts = np.repeat(group_start, np.diff(np.concatenate((group_start, [targets.size]))))
    rank = np.arange(targets.size) - starts
    backward = np.full((int(rank.max()) + 1, input_dim), -1, dtype=np.int64)
    backward[rank, targets] = sources
    return list(backward)


def _is_contiguous(vec):
    return all(vec[i + 1] == vec[i] + 1 for i in range(len(vec) - 1))


class ConvolutionComputation:
    """A compiled convolution (Kaldi's ConvolutionComputation).

    ``height_in`` and ``num_t_in`` describe the input after any frame
    appending (reshape) done for time subsampling. ``temp_rows``/``temp_cols``
    size the temporary matrix (0, 0 if never needed).
    """

    __slots__ = ("num_filters_in", "num_filters_out", "height_in", "height_out",
                 "num_t_in", "num_t_out", "num_images", "temp_rows", "temp_cols", "steps")

    def __init__(self):
        self.num_filters_in = self.num_filters_out = 0
        self.height_in = self.height_out = 0
        self.num_t_in = self.num_t_out = 0
        self.num_images = 0
        self.temp_rows = self.temp_cols = 0
        self.steps = []

    def __eq__(self, other):
        if not isinstance(other, ConvolutionComputation):
            return False
        fields = ("num_filters_in", "num_filters_out", "height_in", "height_out",
                  "num_t_in", "num_t_out", "num_images", "temp_rows", "temp_cols")
        if any(getattr(self, f) != getattr(other, f) for f in fields):
            return False
        return [(s.input_time_shift, s.params_start_col, s.height_map) for s in self.steps] == \
            [(s.input_time_shift, s.params_start_col, s.height_map) for s in other.steps]

    def write(self, stream):
        stream.write_token("<ConvComputation>")
        stream.write_token("<NumFiltersInOut>")
        stream.write_int32(self.num_filters_in)
        stream.write_int32(self.num_filters_out)
        stream.write_token("<HeightInOut>")
        stream.write_int32(self.height_in)
        stream.write_int32(self.height_out)
        stream.write_token("<NumTInOut>")
        stream.write_int32(self.num_t_in)
        stream.write_int32(self.num_t_out)
        stream.write_token("<NumImages>")
        stream.write_int32(self.num_images)
        stream.write_token("<TempRowsCols>")
        stream.write_int32(self.temp_rows)
        stream.write_int32(self.temp_cols)
        stream.write_token("<NumSteps>")
        stream.write_int32(len(self.steps))
        for step in self.steps:
            stream.write_token("<TimeShift>")
            stream.write_int32(step.input_time_shift)
            stream.write_token("<ParamsStartCol>")
            stream.write_int32(step.params_start_col)
            stream.write_token("<HeightMap>")
            stream.write_int_vector(step.height_map)
        stream.write_token("</ConvComputation>")

    @classmethod
    def read(cls, stream):
        start = stream.pos
        stream.read_optional_token("<ConvComputation>")
        c = cls()
        stream.expect_token("<NumFiltersInOut>")
        c.num_filters_in = stream.read_int32()
        c.num_filters_out = stream.read_int32()
        stream.expect_token("<HeightInOut>")
        c.height_in = stream.read_int32()
        c.height_out = stream.read_int32()
        stream.expect_token("<NumTInOut>")
        c.num_t_in = stream.read_int32()
        c.num_t_out = stream.read_int32()
        stream.expect_token("<NumImages>")
        c.num_images = stream.read_int32()
        stream.expect_token("<TempRowsCols>")
        c.temp_rows = stream.read_int32()
        c.temp_cols = stream.read_int32()
        stream.expect_token("<NumSteps>")
        num_steps = stream.read_int32()
        if num_steps < 0:
            raise stream.error("negative number of convolution steps %d" % num_steps)
        for _ in range(num_steps):
            step = ConvolutionStep()
            stream.expect_token("<TimeShift>")
            step.input_time_shift = stream.read_int32()
            stream.expect_token("<ParamsStartCol>")
            step.params_start_col = stream.read_int32()
            stream.expect_token("<HeightMap>")
            step.height_map = stream.read_int_vector()
            c.steps.append(step)
        stream.expect_token("</ConvComputation>")
        try:
            c.compute_derived()
            c.check()
        except ComputationError as e:
            raise stream.error("invalid convolution computation: %s" % e, start) from None
        return c

    def compute_derived(self):
        """Kaldi's ComputeDerived: columns, backward_columns, contiguity."""
        if not self.steps:
            raise ComputationError("convolution computation has no steps")
        f_in = self.num_filters_in
        input_dim = self.height_in * f_in
        for step in self.steps:
            hm = step.height_map
            if not hm:
                raise ComputationError("convolution step has an empty height map")
            columns = np.empty(len(hm) * f_in, dtype=np.int64)
            for h, src in enumerate(hm):
                if not -1 <= src < self.height_in:
                    raise ComputationError("height map value %d out of range [-1, %d)"
                                           % (src, self.height_in))
                if src == -1:
                    columns[h * f_in:(h + 1) * f_in] = -1
                else:
                    columns[h * f_in:(h + 1) * f_in] = np.arange(src * f_in, (src + 1) * f_in)
            step.columns = columns
            step.backward_columns = _reverse_column_mapping(columns, input_dim)
            step.columns_are_contiguous = hm[0] != -1 and _is_contiguous(hm)
            step.first_column = int(columns[0])
            # The same maps at height granularity (blocks of num_filters_in
            # columns), which is how execution gathers and scatters.
            step.height_sources = np.maximum(np.asarray(hm, dtype=np.int64), 0)
            step.zero_heights = np.nonzero(np.asarray(hm) == -1)[0]
            step.backward_heights = [
                (np.nonzero(b >= 0)[0], b[b >= 0])
                for b in _reverse_column_mapping(hm, self.height_in)]

    def check(self):
        """Kaldi's ConvolutionComputation::Check (raises ComputationError)."""
        def need(cond, what):
            if not cond:
                raise ComputationError("convolution computation check failed: " + what)
        need(self.num_filters_in > 0 and self.num_filters_out > 0 and self.height_in > 0
             and self.height_out > 0, "non-positive sizes")
        need(self.num_t_in >= self.num_t_out and self.num_t_out > 0 and self.num_images > 0,
             "bad num-t-in/num-t-out/num-images")
        need((self.temp_rows == 0 and self.temp_cols == 0) or
             (self.temp_rows <= self.num_t_out * self.num_images and self.temp_cols > 0),
             "bad temp matrix size")
        need(self.temp_rows % self.num_images == 0, "temp rows not a multiple of num-images")
        temp_mat_required = False
        num_extra = self.num_t_in - self.num_t_out
        input_cols = self.num_filters_in * self.height_in
        smallest, largest = 1000, 0
        for s, step in enumerate(self.steps):
            need(0 <= step.input_time_shift <= num_extra, "bad time shift")
            smallest = min(smallest, step.input_time_shift)
            largest = max(largest, step.input_time_shift)
            need(step.params_start_col >= 0 and step.params_start_col % self.num_filters_in == 0,
                 "bad params start column")
            if s != 0:
                need(step.input_time_shift != self.steps[s - 1].input_time_shift,
                     "repeated time shift")
            need(not all(h == -1 for h in step.height_map), "step uses no input")
            if not step.columns_are_contiguous or len(step.columns) != input_cols:
                temp_mat_required = True
                need(len(step.columns) <= self.temp_cols, "temp matrix too narrow")
        need(smallest == 0 and largest == num_extra, "not all input rows are used")
        need((self.temp_cols != 0) == temp_mat_required,
             "temp matrix allocated iff required")


class ConvolutionComputationIo:
    """The regular (t, image) grid of a computation's input and output."""

    __slots__ = ("num_images", "start_t_in", "t_step_in", "num_t_in",
                 "start_t_out", "t_step_out", "num_t_out", "reorder_t_in")

    def __init__(self):
        for s in self.__slots__:
            setattr(self, s, 0)
        self.reorder_t_in = 1

    def copy(self):
        io = ConvolutionComputationIo()
        for s in self.__slots__:
            setattr(io, s, getattr(self, s))
        return io

    def __eq__(self, other):
        return isinstance(other, ConvolutionComputationIo) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def write(self, stream):
        """Kaldi's ConvolutionComputationIo::Write (``<ConvCompIo> ... </ConvCompIo>``)."""
        stream.write_token("<ConvCompIo>")
        for s in self.__slots__:
            stream.write_int32(getattr(self, s))
        stream.write_token("</ConvCompIo>")

    @classmethod
    def read(cls, stream):
        stream.expect_token("<ConvCompIo>")
        io = cls()
        for s in cls.__slots__:
            setattr(io, s, stream.read_int32())
        stream.expect_token("</ConvCompIo>")
        return io


# ---------------------------------------------------------------------------
# compilation
# ---------------------------------------------------------------------------

def get_nx_list(indexes):
    """Sorted unique (n, x) pairs of ``indexes`` (kNoTime ones included)."""
    return sorted({(i[0], i[2]) for i in indexes})


def get_t_list(indexes):
    """Sorted unique t values of ``indexes``, kNoTime excluded."""
    return sorted({i[1] for i in indexes if i[1] != kNoTime})


def _regularize_t_list(t_values):
    if not t_values:
        raise ComputationError("convolution: no index with a time value")
    start = t_values[0]
    step = 0
    for a, b in zip(t_values, t_values[1:]):
        step = _gcd(step, b - a)
    if step == 0:
        return start, 0, 1
    return start, step, 1 + (t_values[-1] - start) // step


def get_computation_io(input_indexes, output_indexes):
    """Kaldi's GetComputationIo: the smallest regular grid covering the
    (t, image) pairs of the input and of the output. Runs the C kernel
    (pynnet3/_fast/component_indexes) when built; the readable twin,
    :func:`get_computation_io_py`, otherwise and for anything irregular."""
    if _fast_indexes is not None and type(input_indexes) is list \
            and type(output_indexes) is list:
        grid = _fast_indexes.computation_io(input_indexes, output_indexes)
        if grid is not None:
            io = ConvolutionComputationIo.__new__(ConvolutionComputationIo)  # all slots set here
            (io.num_images, io.start_t_in, io.t_step_in, io.num_t_in, io.start_t_out,
             io.t_step_out, io.num_t_out) = grid
            io.reorder_t_in = 1
            return io
    return get_computation_io_py(input_indexes, output_indexes)


def get_computation_io_py(input_indexes, output_indexes):
    """The Python twin of :func:`get_computation_io` (raises ComputationError
    for an empty input list or a list with no time values)."""
    io = ConvolutionComputationIo()
    n_x_pairs = get_nx_list(input_indexes)
    if not n_x_pairs:
        raise ComputationError("convolution: empty list of input indexes")
    io.num_images = len(n_x_pairs)
    io.start_t_in, io.t_step_in, io.num_t_in = _regularize_t_list(get_t_list(input_indexes))
    io.start_t_out, io.t_step_out, io.num_t_out = _regularize_t_list(
        get_t_list(output_indexes))
    io.reorder_t_in = 1
    return io


def _create_indexes(n_x_pairs, t_start, t_step, num_t_values, reorder_t):
    """Kaldi's CreateIndexes: t with the largest stride (or, with reorder_t >
    1, blocks of reorder_t consecutive t values inside which t varies fastest)."""
    if t_step == 0:
        if num_t_values != 1:
            raise ComputationError("convolution: zero time step with several time values")
        t_step = 1
    if reorder_t < 1 or num_t_values % reorder_t != 0:
        raise ComputationError("convolution: bad time reordering")
    out = []
    outer = t_step * reorder_t
    t_end = t_start + num_t_values * t_step
    for t_block in range(t_start, t_end, outer):
        for n, x in n_x_pairs:
            for t in range(t_block, t_block + outer, t_step):
                out.append(Index(n, t, x))
    return out


def _set_some_indexes_blank(ref_indexes, indexes):
    ref = set(ref_indexes)
    return [i if i in ref else Index(i[0], kNoTime, i[2]) for i in indexes]


def get_indexes_for_computation(io, orig_input_indexes, orig_output_indexes):
    """Kaldi's GetIndexesForComputation: the reordered input and output Index
    lists for ``io``, with t = kNoTime where the original lists had no Index.
    Runs the C kernel when built; the readable twin,
    :func:`get_indexes_for_computation_py`, otherwise and for anything irregular."""
    if _fast_indexes is not None and type(orig_input_indexes) is list \
            and type(orig_output_indexes) is list:
        lists = _fast_indexes.indexes_for_computation(
            (io.num_images, io.start_t_in, io.t_step_in, io.num_t_in, io.reorder_t_in,
             io.start_t_out, io.t_step_out, io.num_t_out),
            orig_input_indexes, orig_output_indexes)
        if lists is not None:
            return lists
    return get_indexes_for_computation_py(io, orig_input_indexes, orig_output_indexes)


def get_indexes_for_computation_py(io, orig_input_indexes, orig_output_indexes):
    """The Python twin of :func:`get_indexes_for_computation`."""
    n_x_pairs = get_nx_list(orig_input_indexes)
    if len(n_x_pairs) != io.num_images:
        raise ComputationError("convolution: number of images changed")
    inputs = _create_indexes(n_x_pairs, io.start_t_in, io.t_step_in, io.num_t_in,
                             io.reorder_t_in)
    inputs = _set_some_indexes_blank(orig_input_indexes, inputs)
    outputs = _create_indexes(n_x_pairs, io.start_t_out, io.t_step_out, io.num_t_out, 1)
    outputs = _set_some_indexes_blank(orig_output_indexes, outputs)
    return inputs, outputs


def _time_value_in_input(io, t):
    step = max(1, io.t_step_in)
    return (io.start_t_in <= t < io.start_t_in + step * io.num_t_in
            and (t - io.start_t_in) % step == 0)


def check_model_and_io(model, io, allow_extra_input=False):
    """Kaldi's CheckModelAndIo (checks every output time, not a random few)."""
    if io.num_t_in <= 0 or io.num_t_out <= 0:
        raise ComputationError("convolution: empty input or output")
    if not allow_extra_input:
        if io.start_t_in < io.start_t_out + model.all_time_offsets[0]:
            raise ComputationError("convolution: input starts at t=%d, before the first "
                                   "usable time %d" % (io.start_t_in, io.start_t_out
                                                        + model.all_time_offsets[0]))
        last_t_in = io.start_t_in + io.t_step_in * (io.num_t_in - 1)
        last_t_out = io.start_t_out + io.t_step_out * (io.num_t_out - 1)
        if last_t_in > last_t_out + model.all_time_offsets[-1]:
            raise ComputationError("convolution: input ends at t=%d, after the last usable "
                                   "time %d" % (last_t_in, last_t_out + model.all_time_offsets[-1]))
    for k in range(io.num_t_out):
        t_out = io.start_t_out + k * io.t_step_out
        for offset in model.required_time_offsets:
            if not _time_value_in_input(io, t_out + offset):
                raise ComputationError("convolution: time %d is required but not in the "
                                       "input" % (t_out + offset))


def pad_computation_input_time(model, io):
    """Stage 1: extend the input grid over every usable time (zero padding)."""
    if model.time_offsets_modulus == 0:
        return
    min_off, max_off = model.all_time_offsets[0], model.all_time_offsets[-1]
    old_t_step_in = io.t_step_in
    io.t_step_in = _gcd(io.t_step_in, model.time_offsets_modulus)
    if io.t_step_out != 0:
        io.t_step_in = _gcd(io.t_step_in, io.t_step_out)
    io.num_t_in = 1 + (old_t_step_in * (io.num_t_in - 1)) // io.t_step_in
    first_desired = io.start_t_out + min_off
    if first_desired < io.start_t_in:
        if (io.start_t_in - first_desired) % io.t_step_in != 0:
            raise ComputationError("convolution: input times are not on the required grid")
        io.num_t_in += (io.start_t_in - first_desired) // io.t_step_in
        io.start_t_in = first_desired
    last_desired = io.start_t_out + (io.num_t_out - 1) * io.t_step_out + max_off
    last_input = io.start_t_in + (io.num_t_in - 1) * io.t_step_in
    if last_desired < last_input:
        raise ComputationError("convolution: more input provided than can be used")
    if last_desired > last_input:
        if (last_desired - last_input) % io.t_step_in != 0:
            raise ComputationError("convolution: input times are not on the required grid")
        io.num_t_in += (last_desired - last_input) // io.t_step_in


def pad_model_height(model):
    """Stage 2: a model with a taller input that needs no height padding."""
    padded = model.copy()
    h_offsets = [h for _, h in model.offsets]
    max_output_height = model.height_subsample_out * (model.height_out - 1)
    bottom = max(0, -min(h_offsets))
    top = max(0, max(h_offsets) + max_output_height - (model.height_in - 1))
    padded.height_in += bottom + top
    padded.offsets = [(t, h + bottom) for t, h in model.offsets]
    ok, reason = padded.check(False, False)
    if not ok:
        raise ComputationError("convolution: height-padded model is invalid: " + reason)
    return padded


def _shift_all_time_offsets(shift, model):
    model.offsets = [(t + shift, h) for t, h in model.offsets]
    model.required_time_offsets = sorted(t + shift for t in model.required_time_offsets)
    model.all_time_offsets = sorted(t + shift for t in model.all_time_offsets)


def _prepare_io_for_appending(io):
    if io.t_step_out == 0:
        if io.num_t_out != 1:
            raise ComputationError("convolution: zero output time step with several outputs")
        io.t_step_out = io.t_step_in
    if io.t_step_out == io.t_step_in:
        return 1, io.copy()
    if io.t_step_in == 0 or io.t_step_out % io.t_step_in != 0:
        raise ComputationError("convolution: input time step %d does not divide output "
                               "time step %d" % (io.t_step_in, io.t_step_out))
    ratio = io.t_step_out // io.t_step_in
    io.reorder_t_in = ratio
    if io.num_t_in % ratio != 0:
        io.num_t_in += ratio - io.num_t_in % ratio
    appended = io.copy()
    appended.reorder_t_in = 1
    appended.t_step_in = io.t_step_out
    appended.num_t_in //= ratio
    return ratio, appended


def append_input_frames(model, io):
    """Stage 3: make input and output time steps equal by appending
    ``ratio`` consecutive input frames into one wider frame. Modifies ``io``
    (reorder_t_in, padding); returns (model_appended, io_appended)."""
    ratio, io_appended = _prepare_io_for_appending(io)
    if ratio == 1:
        return model.copy(), io_appended
    time_step_out = io_appended.t_step_out
    orig_step_in = io.t_step_in
    first_time_offset = model.all_time_offsets[0]
    if io.start_t_in - io.start_t_out != first_time_offset:
        raise ComputationError("convolution: unexpected first input time when appending frames")
    temp = model.copy()
    _shift_all_time_offsets(-first_time_offset, temp)
    appended = ConvolutionModel.__new__(ConvolutionModel)
    appended.num_filters_in = model.num_filters_in
    appended.num_filters_out = model.num_filters_out
    appended.height_in = ratio * model.height_in
    appended.height_out = model.height_out
    appended.height_subsample_out = model.height_subsample_out
    appended.offsets = []
    for t_old, h_old in temp.offsets:
        # Subsampling: the time offset is rounded down to the output step and
        # the remainder becomes a shift in the appended (taller) input.
        t_new = time_step_out * (t_old // time_step_out)
        row_offset = (t_old - t_new) // orig_step_in
        appended.offsets.append((t_new, h_old + row_offset * model.height_in))
    appended.all_time_offsets = sorted({t for t, _ in appended.offsets})
    appended.required_time_offsets = list(appended.all_time_offsets)
    _shift_all_time_offsets(first_time_offset, appended)
    appended.compute_derived()
    ok, reason = appended.check(False, False)
    if not ok:
        raise ComputationError("convolution: frame-appended model is invalid: " + reason)
    return appended, io_appended


def _compute_temp_matrix_size(max_memory_mb, computation):
    temp_rows = temp_cols = 0
    for step in computation.steps:
        hm = step.height_map
        this_num_cols = len(hm) * computation.num_filters_in
        contiguous = hm[0] != -1 and _is_contiguous(hm)
        need_temp = not (contiguous and hm[0] == 0 and
                         this_num_cols == computation.num_filters_in * computation.height_in)
        if need_temp and this_num_cols > temp_cols:
            temp_cols = this_num_cols
    if temp_cols > 0:
        temp_rows = computation.num_t_out * computation.num_images
        # Kaldi computes the size in double, stores it as float, divides in float.
        num_megabytes = np.float32(4 * (temp_rows / 1000.0) * (temp_cols / 1000.0))
        ratio = int(1.0 + float(num_megabytes / np.float32(max_memory_mb)))
        new_num_t_out = (computation.num_t_out + ratio - 1) // ratio
        temp_rows = new_num_t_out * computation.num_images
    computation.temp_rows = temp_rows
    computation.temp_cols = temp_cols


def make_computation(model, io, max_memory_mb):
    """Stage 4: one step per distinct time offset (io steps must be equal)."""
    if io.t_step_in != io.t_step_out or io.reorder_t_in != 1:
        raise ComputationError("convolution: make_computation needs equal time steps")
    c = ConvolutionComputation()
    c.num_filters_in = model.num_filters_in
    c.num_filters_out = model.num_filters_out
    c.height_in = model.height_in
    c.height_out = model.height_out
    c.num_t_in = io.num_t_in
    c.num_t_out = io.num_t_out
    c.num_images = io.num_images
    t_step = max(1, io.t_step_in)
    num_t_extra = io.num_t_in - io.num_t_out
    offsets = model.offsets
    start = 0
    while start < len(offsets):
        end = start
        while end < len(offsets) and offsets[end][0] == offsets[start][0]:
            end += 1
        time_offset = offsets[start][0]
        modified = time_offset + io.start_t_out - io.start_t_in
        if modified < 0 or modified % t_step != 0:
            raise ComputationError("convolution: time offset %d does not fit the input grid"
                                   % time_offset)
        step = ConvolutionStep(modified // t_step, model.num_filters_in * start)
        if step.input_time_shift > num_t_extra:
            raise ComputationError("convolution: time shift beyond the input")
        for h_out in range(0, model.height_out * model.height_subsample_out,
                           model.height_subsample_out):
            for o in range(start, end):
                h_in = h_out + offsets[o][1]
                if not 0 <= h_in < model.height_in:
                    raise ComputationError("convolution: height %d outside padded input" % h_in)
                step.height_map.append(h_in)
        c.steps.append(step)
        start = end
    _compute_temp_matrix_size(max_memory_mb, c)
    return c


def unpad_model_height(max_memory_mb, model, model_padded, computation):
    """Reverse of stage 2: padded heights become -1 (zero) in height maps."""
    bottom = model_padded.offsets[0][1] - model.offsets[0][1]
    total = model_padded.height_in - model.height_in
    top = total - bottom
    old_height_in = computation.height_in
    padded_h = model_padded.height_in
    if old_height_in % padded_h != 0 or computation.height_out != model.height_out:
        raise ComputationError("convolution: inconsistent heights when un-padding")
    ratio = old_height_in // padded_h
    computation.height_in = ratio * model.height_in
    for step in computation.steps:
        new_map = []
        for c in step.height_map:
            h, m = c % padded_h, c // padded_h
            if h < bottom or h >= padded_h - top:
                new_map.append(-1)
            else:
                new_map.append(h - bottom + m * model.height_in)
        step.height_map = new_map
    _compute_temp_matrix_size(max_memory_mb, computation)
    computation.compute_derived()
    computation.check()


def compile_convolution_computation(model, input_indexes, output_indexes, max_memory_mb=200.0):
    """Kaldi's CompileConvolutionComputation.

    Returns (computation, input_indexes_modified, output_indexes_modified);
    the modified lists are the reordered, kNoTime-padded lists the component
    must be called with. Raises ComputationError if the outputs' required
    inputs are not present.
    """
    io = get_computation_io(input_indexes, output_indexes)
    check_model_and_io(model, io, False)
    pad_computation_input_time(model, io)
    check_model_and_io(model, io, False)
    model_padded = pad_model_height(model)
    check_model_and_io(model_padded, io, False)
    model_appended, io_appended = append_input_frames(model_padded, io)
    check_model_and_io(model_appended, io_appended, True)
    computation = make_computation(model_appended, io_appended, max_memory_mb)
    unpad_model_height(max_memory_mb, model, model_padded, computation)
    inputs, outputs = get_indexes_for_computation(io, input_indexes, output_indexes)
    return computation, inputs, outputs


# ---------------------------------------------------------------------------
# execution
# ---------------------------------------------------------------------------

def _gather(xp, cc, part, step):
    """The step's temporary matrix: part's column blocks in height_map order,
    zero blocks where height_map is -1 (Kaldi's CopyCols with step.columns),
    or the plain column range when the map is contiguous."""
    rows = part.shape[0]
    ncols = len(step.columns)
    if step.columns_are_contiguous:
        if ncols == part.shape[1]:
            return part
        return xp.ascontiguousarray(part[:, step.first_column:step.first_column + ncols])
    src = part.reshape(rows, cc.height_in, cc.num_filters_in)
    temp = xp.take(src, xp.asarray(step.height_sources), axis=1)
    if step.zero_heights.size:
        temp[:, xp.asarray(step.zero_heights), :] = 0
    return temp.reshape(rows, ncols)


def _params_part(xp, params, step, pcols):
    return xp.ascontiguousarray(params[:, step.params_start_col:step.params_start_col + pcols])


def _reshape_input(cc, mat, what):
    rows = mat.shape[0]
    required = cc.num_images * cc.num_t_in
    if rows == required:
        return mat
    if required == 0 or rows % required != 0:
        raise ComputationError("convolution: %s has %d rows, expected a multiple of %d"
                               % (what, rows, required))
    return mat.reshape(required, mat.shape[1] * (rows // required))


def _chunks(cc, input_rows):
    """(t_start, this_num_t_out) pieces Kaldi splits the computation into."""
    if cc.temp_rows != 0 and cc.temp_rows != input_rows:
        per_chunk = cc.temp_rows // cc.num_images
        return [(t, min(cc.num_t_out - t, per_chunk)) for t in range(0, cc.num_t_out, per_chunk)]
    return [(0, cc.num_t_out)]


def _check_shapes(cc, in_mat, params, out_mat):
    if params.shape[0] != cc.num_filters_out:
        raise ComputationError("convolution: parameter rows %d != num-filters-out %d"
                               % (params.shape[0], cc.num_filters_out))
    if out_mat.shape != (cc.num_t_out * cc.num_images, cc.height_out * cc.num_filters_out):
        raise ComputationError("convolution: output is %dx%d, expected %dx%d" % (
            out_mat.shape + (cc.num_t_out * cc.num_images, cc.height_out * cc.num_filters_out)))
    if in_mat.shape[0] * in_mat.shape[1] != (cc.num_images * cc.num_t_in * cc.height_in
                                             * cc.num_filters_in):
        raise ComputationError("convolution: input of %dx%d does not fit the computation"
                               % in_mat.shape)


def _step_blocks(cc, inp, out):
    """The blocks the three convolution functions work on, in Kaldi's order:
    for each chunk of output times (Kaldi's memory-limited chunking) and each
    step, ``(step, rows of inp the step reads, the chunk's rows of out viewed
    as (rows * height_out, num_filters_out), rows, params columns)``.
    ``inp`` is the (rows-per-time-reshaped) input or input derivative, ``out``
    the output or output derivative; the views share their memory."""
    ni, ho = cc.num_images, cc.height_out
    extra = cc.num_t_in - cc.num_t_out
    for t_start, n_t in _chunks(cc, inp.shape[0]):
        in_chunk = inp[t_start * ni:(t_start + n_t + extra) * ni]
        rows = n_t * ni
        out_r = out[t_start * ni:(t_start + n_t) * ni].reshape(rows * ho, cc.num_filters_out)
        for step in cc.steps:
            shift = step.input_time_shift * ni
            yield step, in_chunk[shift:shift + rows], out_r, rows, len(step.columns) // ho


def convolve_forward(cc, inp, params, out, kaldi=None):
    """Adds the convolution of ``inp`` with ``params`` to ``out`` (both
    C-contiguous 2-D float32 arrays; no bias). With ``kaldi`` (a
    :class:`pynnet3.numerics.kaldi_cpu.KaldiCpu`) each step's product is
    Kaldi's AddMatMat onto the output, bit for bit."""
    xp = array_module(inp)
    _check_shapes(cc, inp, params, out)
    inp = _reshape_input(cc, inp, "input")
    for step, part, out_r, rows, pcols in _step_blocks(cc, inp, out):
        temp = _gather(xp, cc, part, step).reshape(rows * cc.height_out, pcols)
        if kaldi is None:
            out_r += temp @ _params_part(xp, params, step, pcols).T
        else:
            kaldi.add_mat_mat(out_r, 1.0, temp, False,
                              params[:, step.params_start_col:step.params_start_col + pcols],
                              True, 1.0)


def convolve_backward_data(cc, params, out_deriv, in_deriv):
    """Adds the derivative w.r.t. the convolution's input to ``in_deriv``
    (C-contiguous, so that reshaping it gives a view)."""
    xp = array_module(in_deriv)
    _check_shapes(cc, in_deriv, params, out_deriv)
    in_deriv = _reshape_input(cc, in_deriv, "input derivative")
    for step, part, od_r, rows, pcols in _step_blocks(cc, in_deriv, out_deriv):
        ncols = len(step.columns)
        temp = (od_r @ _params_part(xp, params, step, pcols)).reshape(rows, ncols)
        if step.columns_are_contiguous:
            part[:, step.first_column:step.first_column + ncols] += temp
            continue
        # Kaldi's AddCols with each level of backward_columns, in blocks
        # of num_filters_in columns (one block per height).
        part3 = part.reshape(rows, cc.height_in, cc.num_filters_in)
        temp3 = temp.reshape(rows, len(step.height_map), cc.num_filters_in)
        for heights, positions in step.backward_heights:
            part3[:, xp.asarray(heights), :] += temp3[:, xp.asarray(positions), :]


def convolve_backward_params(cc, inp, out_deriv, alpha, params_deriv):
    """Adds ``alpha`` times the parameter derivative to ``params_deriv``."""
    xp = array_module(inp)
    _check_shapes(cc, inp, params_deriv, out_deriv)
    inp = _reshape_input(cc, inp, "input")
    for step, part, od_r, rows, pcols in _step_blocks(cc, inp, out_deriv):
        temp = _gather(xp, cc, part, step)
        grad = od_r.T @ temp.reshape(rows * cc.height_out, pcols)
        params_deriv[:, step.params_start_col:step.params_start_col + pcols] += alpha * grad
