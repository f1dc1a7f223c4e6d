"""Kaldi's ConvolutionComputation and its compilation (nnet3/convolution.{h,cc}).

:func:`compile_convolution_computation` turns a :class:`~.convolution_model.ConvolutionModel`
plus the input/output Index lists of one component call into a
:class:`ConvolutionComputation`: the input is padded/reordered into a regular
(t, image) grid, zero-padding in height is made explicit, time subsampling is
turned into frame appending (a reshape of the input), and the convolution
becomes a few *steps*, one per distinct time offset, each a column gather into
a temporary matrix followed by one matrix product with a column block of the
parameters. The temporary matrix is limited to ``max_memory_mb``; larger
computations are done in row chunks. :mod:`.convolve` runs the steps.

The Index-list work (the computation's regular grid, the reordered lists) has a
kernel, ``pynnet3/_fast/convolution_computation_kernel.pyx``; the ``*_py``
functions here are its twins.

Guarantees: the computation, its serialization and the reordered Index lists
are exactly Kaldi's (so computations Kaldi wrote can be read and executed).
"""

import numpy as np

from .. import _fast
from ..common.index import Index, kNoTime
from ..errors import ComputationError
from .convolution_model import ConvolutionModel, _gcd

# The Index-list kernel when it is loaded (the one pynnet3._fast.load policy);
# else the twins below run.
_kernel = _fast.load("convolution_computation_kernel")


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
    (pynnet3/_fast/convolution_computation_kernel) when built; the readable twin,
    :func:`get_computation_io_py`, otherwise and for anything irregular."""
    if _kernel is not None and type(input_indexes) is list \
            and type(output_indexes) is list:
        grid = _kernel.computation_io(input_indexes, output_indexes)
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
    if _kernel is not None and type(orig_input_indexes) is list \
            and type(orig_output_indexes) is list:
        lists = _kernel.indexes_for_computation(
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
