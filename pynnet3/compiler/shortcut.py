"""Shortcut compilation: compile two sequences, expand to N (Kaldi's
RequestIsDecomposable and ExpandComputation, nnet-optimize-utils).

A request whose every input and output lists the same (t, x) pattern for each
of N > 2 sequences n = 0 .. N-1, laid out with a fixed *n-stride* (the row of
(n+1, t, x) is n_stride rows after that of (n, t, x), inside blocks of
n_stride * N rows), is *decomposable*: the computation for it is the one for
the same request with two sequences, with every matrix stretched from 2 to N
sequences. :func:`request_is_decomposable` finds that structure and builds the
two-sequence *mini request*; :func:`expand_computation` stretches the (compiled
and optimized) mini computation back to N sequences.

Guarantees, as in Kaldi: the expanded computation has the same commands,
matrices and submatrices (indices unchanged) as the mini computation; matrix
row counts are scaled by N / 2; every row-index table is rebuilt, one new table
per row command in command order (no sharing, no renumbering); precomputed
indexes are recomputed by the components for the expanded Index lists. When
the request is not decomposable, nothing is expanded and the caller compiles
normally; when the mini computation lacks the regular structure (which Kaldi
treats as a fatal error, suggesting ``--use-shortcut=false``) a
ComputationError says so.

The work is vectorized with NumPy: the mini computation is small, but the
expanded one has N/2 times the rows, and its index tables and debug info are
built per row.
"""

import gc
from itertools import chain

import numpy as np

from .. import _fast
from ..common.index import Index, kNoTime
from ..errors import ComputationError
from .computation import (Command, CommandType, LazyMatrixDebugInfo, MatrixDebugInfo,
                          MatrixInfo, NnetComputation, PrecomputedIndexesInfo, SubMatrixInfo)
from .computation_io import print_computation, submatrix_strings
from .request import ComputationRequest, IoSpecification
from .steps import cindexes_from_keys as _cindexes_from_keys, unpack_keys as _unpack_keys

__all__ = ["find_n_stride", "request_is_decomposable", "expand_computation",
           "compile_via_shortcut"]

_T = CommandType
_ROWS_COMMANDS = (_T.kCopyRows, _T.kAddRows)
_MULTI_COMMANDS = (_T.kCopyRowsMulti, _T.kAddRowsMulti, _T.kCopyToRowsMulti,
                   _T.kAddToRowsMulti)


# -- n-stride ---------------------------------------------------------------------------

def _index_array(indexes):
    """An (R, 3) int64 array of (n, t, x) from a list of Indexes (fromiter over
    the flattened values is several times faster than np.array on tuples)."""
    return np.fromiter(chain.from_iterable(indexes), dtype=np.int64,
                       count=3 * len(indexes)).reshape(len(indexes), 3)


def _index_arrays(indexes):
    """(n, key) for a list of Indexes: n as an int64 array and key an (size, 2)
    array of (t, x), the part of an Index that must repeat across n."""
    arr = _index_array(indexes)
    return arr[:, 0], arr[:, 1:]


def _cindex_arrays(cindexes):
    """(n, key) for a list of Cindexes (node, (n, t, x)); key is (node, t, x)."""
    size = len(cindexes)
    arr = np.empty((size, 4), dtype=np.int64)
    if size:
        arr[:, 0] = np.fromiter((c[0] for c in cindexes), dtype=np.int64, count=size)
        arr[:, 1:] = _index_array([c[1] for c in cindexes])
    return arr[:, 1], arr[:, [0, 2, 3]]


def _candidate_n_stride(n, is_next):
    """The first part of Kaldi's FindNStride, shared by the array and the
    list versions: (N, n_stride), where N is the last row's n + 1 and
    n_stride the first of 1, rows/N, 2, 3, ... (dividing the row count) at
    which ``is_next(pos)`` says row ``pos`` holds the first row's Index with
    n = 1; n_stride is 0 when the n values cannot have the structure or no
    candidate fits. The caller then checks every row."""
    size = len(n)
    if size == 0:
        return 0, 0
    num_n = int(n[size - 1]) + 1
    if num_n <= 1 or n[0] != 0 or size % num_n != 0:
        return num_n, 0
    if is_next(1):
        return num_n, 1
    if is_next(size // num_n):
        return num_n, size // num_n
    for stride in range(2, size // num_n):
        if size % stride == 0 and is_next(stride):
            return num_n, stride
    return num_n, 0


def _find_n_stride_arrays(n, key):
    """Kaldi's FindNStride (with the full check) on arrays: the n-stride, or 0
    when the rows lack the regular structure (see the module docstring)."""
    size = len(n)
    num_n, n_stride = _candidate_n_stride(
        n, lambda pos: n[pos] == 1 and bool((key[pos] == key[0]).all()))
    if n_stride == 0:
        return 0
    block = n_stride * num_n
    pos = np.arange(size)
    # every row with n < N-1 has its successor n_stride rows later ...
    fwd = n < num_n - 1
    fwd_pos = pos[fwd] + n_stride
    if (fwd_pos >= size).any():
        return 0
    if not ((n[fwd_pos] == n[fwd] + 1).all() and (key[fwd_pos] == key[fwd]).all()):
        return 0
    # ... an n == 0 row's N copies stay inside one block ...
    first = n == 0
    if (pos[first] // block != (pos[first] + n_stride * (num_n - 1)) // block).any():
        return 0
    # ... and every other row has its predecessor n_stride rows earlier.
    back = ~first
    back_pos = pos[back] - n_stride
    if (back_pos < 0).any():
        return 0
    if not ((n[back_pos] == n[back] - 1).all() and (key[back_pos] == key[back]).all()):
        return 0
    return n_stride


def _find_n_stride_rows(n, key):
    """_find_n_stride_arrays on Python lists (``n`` ints, ``key`` tuples): the
    same answer, row by row, which is faster for the many matrices of a few
    rows (a recurrent network has one per time step)."""
    size = len(n)
    num_n, n_stride = _candidate_n_stride(n, lambda pos: n[pos] == 1 and key[pos] == key[0])
    if n_stride == 0:
        return 0
    block = n_stride * num_n
    for i in range(size):
        this_n = n[i]
        if this_n < num_n - 1:
            j = i + n_stride
            if j >= size or n[j] != this_n + 1 or key[j] != key[i]:
                return 0
        if this_n == 0:
            if i // block != (i + n_stride * (num_n - 1)) // block:
                return 0
        else:
            j = i - n_stride
            if j < 0 or n[j] != this_n - 1 or key[j] != key[i]:
                return 0
    return n_stride


# Below this many rows the row-by-row version is the faster one.
_SMALL = 64


def find_n_stride(indexes, cindexes=False):
    """The n-stride of a list of Indexes (or of Cindexes with ``cindexes``),
    or 0 when it lacks the regular structure: n values 0 .. N-1 (N > 1, the
    last row's n + 1), the row of (n+1, t, x) n_stride rows after that of
    (n, t, x), within blocks of n_stride * N rows."""
    if len(indexes) <= _SMALL:
        if cindexes:
            return _find_n_stride_rows([c[1][0] for c in indexes],
                                       [(c[0], c[1][1], c[1][2]) for c in indexes])
        return _find_n_stride_rows([i[0] for i in indexes], [i[1:] for i in indexes])
    n, key = (_cindex_arrays if cindexes else _index_arrays)(indexes)
    return _find_n_stride_arrays(n, key)


def _convert_positions(n_stride, old_num_n, new_num_n, n0_rows):
    """Where the rows ``n0_rows`` (rows with n == 0 of a layout with
    ``old_num_n`` sequences) go in the layout with ``new_num_n`` sequences,
    as an array (len(n0_rows), new_num_n) over the new n values."""
    start = (n0_rows // (n_stride * old_num_n)) * (n_stride * new_num_n) \
        + n0_rows % (n_stride * old_num_n)
    return start[:, None] + n_stride * np.arange(new_num_n)


def _convert_num_n_values_array(n_stride, old_num_n, new_num_n, indexes):
    """Kaldi's ConvertNumNValues as an (R, 3) array of (n, t, x): the Index
    list with the same n-stride and (t, x) pattern, but n values
    0 .. new_num_n - 1."""
    arr = _index_array(indexes)
    n0_rows = np.flatnonzero(arr[:, 0] == 0)
    out = np.zeros(((len(indexes) // old_num_n) * new_num_n, 3), dtype=np.int64)
    dest = _convert_positions(n_stride, old_num_n, new_num_n, n0_rows)
    out[dest, 1:] = arr[n0_rows, None, 1:]
    out[dest, 0] = np.arange(new_num_n)
    return out


def _convert_num_n_values(n_stride, old_num_n, new_num_n, indexes):
    """Kaldi's ConvertNumNValues, as a list of Indexes."""
    return list(map(_new_index, _convert_num_n_values_array(
        n_stride, old_num_n, new_num_n, indexes).tolist()))


def _index_lists(arrays):
    """Index lists for (R_i, 3) arrays of (n, t, x). Equal Indexes share one
    object, so a few thousand distinct Indexes are built however long the
    lists are (the lists of one computation repeat the same (n, t, x))."""
    if not arrays:
        return []
    rows = np.concatenate(arrays)
    if len(rows) == 0:
        return [[] for _ in arrays]
    # Code each column densely (its values minus the smallest, or, for a
    # column with far-apart values such as kNoTime among times, its rank
    # among the distinct values), then find the distinct (n, t, x) by marking
    # one small integer per triple.
    codes, column_values = [], []
    for c in range(3):
        col = rows[:, c]
        low, high = int(col.min()), int(col.max())
        if high - low < 1 << 16:
            codes.append(col - low)
            column_values.append(np.arange(low, high + 1, dtype=np.int64))
            continue
        if low == kNoTime:      # padding rows: code 0, the other times after it
            timed = col != kNoTime
            low = int(col[timed].min()) if timed.any() else 0
            if high - low < 1 << 16:
                codes.append(np.where(timed, col - (low - 1), 0))
                column_values.append(np.concatenate((
                    [kNoTime], np.arange(low, high + 1, dtype=np.int64))))
                continue
        distinct_values, code = np.unique(col, return_inverse=True)
        codes.append(code.reshape(-1))
        column_values.append(distinct_values)
    span = [len(v) for v in column_values]
    if span[0] * span[1] * span[2] <= 1 << 24:
        keys = (codes[0] * span[1] + codes[1]) * span[2] + codes[2]
        present = np.zeros(span[0] * span[1] * span[2], dtype=bool)
        present[keys] = True
        distinct = np.flatnonzero(present)
        inverse = (np.cumsum(present) - 1)[keys]
        values = np.empty((len(distinct), 3), dtype=np.int64)
        values[:, 2] = column_values[2][distinct % span[2]]
        values[:, 1] = column_values[1][(distinct // span[2]) % span[1]]
        values[:, 0] = column_values[0][distinct // (span[2] * span[1])]
    else:   # too many combinations to mark
        values, inverse = np.unique(rows, axis=0, return_inverse=True)
    pool = np.empty(len(values), dtype=object)
    for i, index in enumerate(map(_new_index, values.tolist())):
        pool[i] = index     # (a slice assignment would unpack the tuples)
    inverse = inverse.reshape(-1)
    ans, start = [], 0
    for arr in arrays:
        ans.append(pool[inverse[start:start + len(arr)]].tolist())
        start += len(arr)
    return ans


def _new_index(values, _new=tuple.__new__):
    """Index(n, t, x) from a 3-list, without NamedTuple._make's Python frame."""
    return _new(Index, values)


# -- the request ------------------------------------------------------------------------

def _io_specification_is_decomposable(spec):
    """(mini IoSpecification, N) or None (Kaldi's IoSpecificationIsDecomposable)."""
    if not spec.indexes:
        raise ComputationError("computation request: %s '%s' has no Indexes"
                               % ("io-specification", spec.name))
    num_n = spec.indexes[-1][0] + 1
    if num_n <= 2:
        # with two or fewer sequences there is nothing to gain
        return None
    n_stride = find_n_stride(spec.indexes)
    if n_stride == 0:
        return None
    mini = IoSpecification(spec.name, _convert_num_n_values(n_stride, num_n, 2, spec.indexes),
                           spec.has_deriv)
    return mini, num_n


def request_is_decomposable(request):
    """Kaldi's RequestIsDecomposable: ``(mini_request, num_n_values)`` when
    every input and output has the regular n structure with the same N > 2
    sequences, else None. The mini request lists the same specifications
    with sequences 0 and 1 only."""
    if not request.inputs or not request.outputs:
        raise ComputationError("computation request has no inputs or no outputs")
    mini = ComputationRequest(need_model_derivative=request.need_model_derivative,
                              store_component_stats=request.store_component_stats,
                              misc_info=request.misc_info)
    num_n = None
    for specs, mini_specs in ((request.inputs, mini.inputs), (request.outputs, mini.outputs)):
        for spec in specs:
            ans = _io_specification_is_decomposable(spec)
            if ans is None or (num_n is not None and ans[1] != num_n):
                return None
            mini_specs.append(ans[0])
            num_n = ans[1]
    return mini, num_n


# -- expanding the computation ----------------------------------------------------------

class ComputationExpander:
    """Stretches a computation compiled for sequences {0, 1} to ``num_n_values``
    sequences (Kaldi's ComputationExpander; see the module docstring). The
    mini computation must carry matrix debug info."""

    def __init__(self, nnet, misc_info, computation, need_debug_info, num_n_values):
        if num_n_values <= 2:
            raise ValueError("ComputationExpander: num_n_values must be > 2, got %d"
                             % num_n_values)
        self.nnet = nnet
        self.misc_info = misc_info
        self.computation = computation
        self.need_debug_info = need_debug_info
        self.num_n = num_n_values
        self.expanded = NnetComputation()

    def expand(self):
        self._init_stride_info()
        self._compute_matrix_info()
        if self.need_debug_info:
            self._compute_debug_info()
        self._compute_submatrix_info()
        self._compute_precomputed_indexes()
        self._compute_commands()
        self.expanded.need_model_derivative = self.computation.need_model_derivative
        return self.expanded

    # -- matrices ---------------------------------------------------------------------
    def _init_stride_info(self):
        comp = self.computation
        if len(comp.matrix_debug_info) != len(comp.matrices):
            raise ComputationError("shortcut compilation: the computation to expand has no "
                                   "matrix debug info")
        infos = comp.matrix_debug_info
        sizes = [_debug_row_count(info) for info in infos]
        for m in range(1, len(comp.matrices)):
            if sizes[m] != comp.matrices[m].num_rows:
                raise ComputationError("shortcut compilation: matrix m%d has %d rows but "
                                       "debug info for %d" % (m, comp.matrices[m].num_rows,
                                                              sizes[m]))
        # all rows of all matrices at once; per matrix, views into them
        n_all, key_all = _debug_row_arrays(infos[1:], sizes[1:])
        n_list = n_all.tolist()
        self.n_of_row = [None]      # per matrix: the n value of each row
        self.key_of_row = [None]    # per matrix: (node, t, x) of each row
        self.n_stride = [0]
        start = 0
        for m in range(1, len(comp.matrices)):
            end = start + sizes[m]
            if sizes[m] <= _SMALL:
                stride = _find_n_stride_rows(n_list[start:end],
                                             list(map(tuple, key_all[start:end].tolist())))
            else:
                stride = _find_n_stride_arrays(n_all[start:end], key_all[start:end])
            if stride == 0:
                raise ComputationError(
                    "Problem encountered in 'shortcut' compilation: the computation does not "
                    "have the expected structure (matrix m%d).  Try compiling with "
                    "--use-shortcut=false." % m)
            self.n_of_row.append(n_all[start:end])
            self.key_of_row.append(key_all[start:end])
            self.n_stride.append(stride)
            start = end
        self.n_list = n_list
        self.matrix_start = [0, 0] + list(np.cumsum(sizes[1:]).tolist())

    def _new_matrix_rows(self, m, old_rows):
        """Kaldi's GetNewMatrixLocationInfo for an array of rows of matrix m
        (see _new_rows)."""
        return _new_rows(old_rows, self.n_stride[m], self.num_n)

    def _compute_matrix_info(self):
        comp = self.computation
        self.expanded.matrices = [MatrixInfo(0, 0)] + [
            MatrixInfo((m.num_rows // 2) * self.num_n, m.num_cols, m.stride_type)
            for m in comp.matrices[1:]]

    def _compute_debug_info(self):
        comp = self.computation
        infos = [MatrixDebugInfo(comp.matrix_debug_info[0].is_deriv,
                                 list(comp.matrix_debug_info[0].cindexes))]
        for m in range(1, len(comp.matrices)):
            infos.append(_ExpandedDebugInfo(
                comp.matrix_debug_info[m].is_deriv, self.expanded.matrices[m].num_rows,
                self.n_of_row[m], self.key_of_row[m], self.n_stride[m], self.num_n))
        self.expanded.matrix_debug_info = infos

    def _compute_submatrix_info(self):
        comp = self.computation
        subs = [comp.submatrices[0]]
        n_list, matrix_start, n_stride, num_n = (self.n_list, self.matrix_start,
                                                 self.n_stride, self.num_n)
        fields = [[], [], [], [], []]       # matrix, first row, rows, first col, cols
        for s in range(1, len(comp.submatrices)):
            info = comp.submatrices[s]
            m = info.matrix_index
            first, last = info.row_offset, info.row_offset + info.num_rows - 1
            start = matrix_start[m]
            if not (n_list[start + first] == 0 and n_list[start + last] == 1):
                raise ComputationError(
                    "Submatrix s%d = %s has strange dimensions.  Computation is: %s"
                    % (s, submatrix_strings(comp)[s], print_computation(comp, self.nnet)))
            fields[0].append(m)
            fields[1].append(first)
            fields[2].append(last)
            fields[3].append(info.col_offset)
            fields[4].append(info.num_cols)
        # the new rows of all submatrices' first and last rows at once
        if len(comp.submatrices) > 1:
            stride = np.array(n_stride, dtype=np.int64)[fields[0]]
            new_first = _new_rows(np.array(fields[1], dtype=np.int64), stride, num_n)
            new_last = _new_rows(np.array(fields[2], dtype=np.int64), stride, num_n)
            fields[1] = new_first.tolist()
            fields[2] = (new_last + 1 - new_first).tolist()
        subs += _make_submatrices(*fields)
        self.expanded.submatrices = subs
        # Per submatrix (old and new row offsets, matrix) and per matrix
        # (n-stride, first row in n_all) as arrays, for the row tables whose
        # every row names its own source submatrix.
        self.sub_matrix = np.array([info.matrix_index for info in comp.submatrices],
                                   dtype=np.int64)
        self.sub_row_offset = np.array([info.row_offset for info in comp.submatrices],
                                       dtype=np.int64)
        self.new_sub_row_offset = np.array([info.row_offset for info in subs], dtype=np.int64)
        self.n_stride_array = np.array(n_stride, dtype=np.int64)
        self.matrix_start_array = np.array(matrix_start, dtype=np.int64)
        self.n_all = np.array(n_list, dtype=np.int64)

    # -- precomputed indexes ----------------------------------------------------------
    def _expand_index_lists(self, lists):
        """The Index lists for N sequences of the two-sequence ``lists``, in
        order. Equal lists (the layers of a TDNN see the same ones) are
        expanded once and the result shared: components only read them."""
        # Group by a cheap signature, then compare whole lists (at C speed)
        # only within a group; hashing every Index would cost more.
        groups = {}         # signature -> [position in ``distinct``]
        distinct, which = [], []
        for indexes in lists:
            signature = (len(indexes), indexes[0], indexes[-1], indexes[len(indexes) // 2])
            candidates = groups.setdefault(signature, [])
            for d in candidates:
                if distinct[d] == indexes:
                    which.append(d)
                    break
            else:
                candidates.append(len(distinct))
                which.append(len(distinct))
                distinct.append(indexes)
        arrays = []
        for indexes in distinct:
            stride = find_n_stride(indexes)
            if stride == 0:
                raise ComputationError("shortcut compilation: precomputed-indexes Index list "
                                       "lacks the regular n structure")
            arrays.append(_convert_num_n_values_array(stride, 2, self.num_n, indexes))
        expanded = _index_lists(arrays)
        return [expanded[d] for d in which]

    def _compute_precomputed_indexes(self):
        comp = self.computation
        num = len(comp.component_precomputed_indexes)
        component_of = [-1] * num
        need_backprop = [False] * num
        for c in comp.commands:
            if c.arg2 > 0:
                if c.command_type == _T.kPropagate:
                    component_of[c.arg2] = c.arg1
                elif c.command_type in (_T.kBackprop, _T.kBackpropNoModelUpdate):
                    need_backprop[c.arg2] = True
        infos = [PrecomputedIndexesInfo()] if num else []
        lists = []
        for p in range(1, num):
            old = comp.component_precomputed_indexes[p]
            if not old.input_indexes or not old.output_indexes:
                raise ComputationError("shortcut compilation: precomputed indexes %d have no "
                                       "input/output Indexes to expand" % p)
            if component_of[p] < 0:
                raise ComputationError("shortcut compilation: precomputed indexes %d are "
                                       "used by no Propagate command" % p)
            lists += [old.input_indexes, old.output_indexes]
        expanded = self._expand_index_lists(lists)
        for p in range(1, num):
            component = self.nnet.get_component(component_of[p])
            data = component.precompute_indexes(self.misc_info, expanded[2 * p - 2],
                                                expanded[2 * p - 1], need_backprop[p])
            if data is None:
                raise ComputationError("shortcut compilation: component %d gave no "
                                       "precomputed indexes for the expanded computation"
                                       % component_of[p])
            # The expanded Index lists are not kept: only computations over
            # sequences {0, 1} need them (to be expanded).
            infos.append(PrecomputedIndexesInfo(data))
        self.expanded.component_precomputed_indexes = infos

    # -- commands ---------------------------------------------------------------------
    def _new_submatrix_rows(self, s, old_rows):
        """Kaldi's GetNewSubmatLocationInfo for an array of rows of submatrix
        s, all of which must hold n == 0: (new rows within the expanded
        submatrix, n-stride)."""
        old = self.computation.submatrices[s]
        m = old.matrix_index
        rows = old_rows + old.row_offset
        if (self.n_of_row[m][rows] != 0).any():
            raise ComputationError("shortcut compilation: a row command mixes sequences "
                                   "(submatrix s%d)" % s)
        return (self._new_matrix_rows(m, rows) - self.expanded.submatrices[s].row_offset,
                self.n_stride[m])

    def _new_rows_of_submatrices(self, subs, old_rows):
        """_new_submatrix_rows for rows each of its own submatrix (arrays
        ``subs``, ``old_rows``): (new rows, n-stride of each row)."""
        m = self.sub_matrix[subs]
        rows = old_rows + self.sub_row_offset[subs]
        bad = self.n_all[self.matrix_start_array[m] + rows] != 0
        if bad.any():
            raise ComputationError("shortcut compilation: a row command mixes sequences "
                                   "(submatrix s%d)" % int(subs[bad].min()))
        stride = self.n_stride_array[m]
        return _new_rows(rows, stride, self.num_n) - self.new_sub_row_offset[subs], stride

    def _n0_rows(self, s):
        """Rows of submatrix s (in the mini computation) that hold n == 0."""
        old = self.computation.submatrices[s]
        n = self.n_of_row[old.matrix_index][old.row_offset:old.row_offset + old.num_rows]
        return np.flatnonzero(n == 0)

    def _expand_rows(self, c):
        s1, s2 = c.arg1, c.arg2
        old = np.asarray(self.computation.indexes[c.arg3], dtype=np.int64)
        i1 = self._n0_rows(s1)
        i2 = old[i1]
        keep = i2 >= 0
        i1, i2 = i1[keep], i2[keep]
        new = np.full(self.expanded.submatrices[s1].num_rows, -1, dtype=np.int64)
        new_i1, stride1 = self._new_submatrix_rows(s1, i1)
        new_i2, stride2 = self._new_submatrix_rows(s2, i2)
        n_range = np.arange(self.num_n)
        new[new_i1[:, None] + stride1 * n_range] = new_i2[:, None] + stride2 * n_range
        self.expanded.indexes.append(new.tolist())
        return len(self.expanded.indexes) - 1

    def _expand_rows_multi(self, c):
        s1 = c.arg1
        if self.computation.submatrices[s1].num_rows % 2 != 0:
            raise ComputationError("shortcut compilation: submatrix s%d has an odd number "
                                   "of rows" % s1)
        old = self.computation.indexes_multi[c.arg2]
        i1 = self._n0_rows(s1)
        new = np.full((self.expanded.submatrices[s1].num_rows, 2), -1, dtype=np.int64)
        if len(i1):
            pairs = np.asarray(old, dtype=np.int64).reshape(len(old), 2)[i1]
            keep = pairs[:, 0] >= 0
            i1, pairs = i1[keep], pairs[keep]
            new_i1, stride1 = self._new_submatrix_rows(s1, i1)
            n_range = np.arange(self.num_n)
            dest = new_i1[:, None] + stride1 * n_range
            # the source submatrices differ per row
            new_i2, stride2 = self._new_rows_of_submatrices(pairs[:, 0], pairs[:, 1])
            new[dest, 0] = pairs[:, 0, None]
            new[dest, 1] = new_i2[:, None] + stride2[:, None] * n_range
        self.expanded.indexes_multi.append(list(zip(new[:, 0].tolist(), new[:, 1].tolist())))
        return len(self.expanded.indexes_multi) - 1

    def _expand_row_ranges(self, c):
        s1, s2 = c.arg1, c.arg2
        old = self.computation.indexes_ranges[c.arg3]
        i1 = self._n0_rows(s1)
        new = np.full((self.expanded.submatrices[s1].num_rows, 2), -1, dtype=np.int64)
        if len(i1):
            ranges = np.asarray(old, dtype=np.int64).reshape(len(old), 2)[i1]
            keep = ranges[:, 0] != ranges[:, 1]
            i1, ranges = i1[keep], ranges[keep]
            new_i1, stride1 = self._new_submatrix_rows(s1, i1)
            begin, stride2 = self._new_submatrix_rows(s2, ranges[:, 0])
            last, _ = self._new_submatrix_rows(s2, ranges[:, 1] - 1)
            if (last < begin).any() or (begin < 0).any():
                raise ComputationError("shortcut compilation: bad row range in command "
                                       "with indexes_ranges[%d]" % c.arg3)
            n_range = np.arange(self.num_n)
            dest = new_i1[:, None] + stride1 * n_range
            new[dest, 0] = begin[:, None] + stride2 * n_range
            new[dest, 1] = last[:, None] + 1 + stride2 * n_range
        self.expanded.indexes_ranges.append(list(zip(new[:, 0].tolist(), new[:, 1].tolist())))
        return len(self.expanded.indexes_ranges) - 1

    def _compute_commands(self):
        old = self.computation.commands
        commands = _copy_commands(old)
        # only the row commands get new index tables, in command order
        rows, multi = frozenset(map(int, _ROWS_COMMANDS)), frozenset(map(int, _MULTI_COMMANDS))
        ranges = int(_T.kAddRowRanges)
        for i, c in enumerate(old):
            t = c.command_type
            if t in rows:
                commands[i].arg3 = self._expand_rows(old[i])
            elif t in multi:
                commands[i].arg2 = self._expand_rows_multi(old[i])
            elif t == ranges:
                commands[i].arg3 = self._expand_row_ranges(old[i])
        self.expanded.commands = commands


def copy_commands_py(commands):
    """A new Command with the same fields for each command, in order (the
    twin of ``copy_commands`` in pynnet3/_fast/shortcut_kernel.pyx)."""
    return [Command(c.command_type, c.arg1, c.arg2, c.arg3, c.arg4, c.arg5, c.arg6, c.arg7,
                    c.alpha) for c in commands]


def make_submatrices_py(matrix_index, row_offset, num_rows, col_offset, num_cols):
    """SubMatrixInfo records from five equally long lists (the twin of
    ``make_submatrices`` in pynnet3/_fast/shortcut_kernel.pyx)."""
    if not (len(row_offset) == len(num_rows) == len(col_offset) == len(num_cols)
            == len(matrix_index)):
        raise ValueError("make_submatrices: lists of different lengths")
    return list(map(SubMatrixInfo, matrix_index, row_offset, num_rows, col_offset, num_cols))


_kernel = _fast.load("shortcut_kernel")
(_copy_commands, _make_submatrices) = _fast.select(
    _kernel, copy_commands_py, make_submatrices_py)


def _new_rows(old_rows, n_stride, num_n):
    """Where rows of a two-sequence matrix with this n-stride go in the
    expanded one (arrays or ints): the row of the same Cindex, except that a
    row with n == 1 maps to the row with n = N - 1 (the last sequence), which
    maps the end of an old range to the end of the new one (Kaldi's
    GetNewMatrixLocationInfo)."""
    old_block, new_block = 2 * n_stride, num_n * n_stride
    offset = old_rows % old_block
    last = (offset // n_stride) * (num_n - 1)   # 0 for n == 0, N - 1 for n == 1
    return (old_rows // old_block) * new_block + offset % n_stride + last * n_stride


def _cindex_list(rows):
    """Cindexes (node, Index(n, t, x)) from an (R, 4) array of (node, n, t, x)."""
    new = tuple.__new__
    return [(r[0], new(Index, r[1:])) for r in rows.tolist()]


def _packed_keys(info):
    """(node, packed keys) of a debug info still to be built from a compiled
    step's packed keys, else None."""
    pending = info.pending() if isinstance(info, LazyMatrixDebugInfo) else None
    if pending is None or _unpack_keys is None or pending[2] is not _cindexes_from_keys:
        return None
    return pending[3]


def _debug_row_count(info):
    pending = info.pending() if isinstance(info, LazyMatrixDebugInfo) else None
    return len(info.cindexes) if pending is None else pending[0]


def _debug_row_arrays(infos, sizes):
    """_cindex_arrays of the debug Cindexes of ``infos`` (matrices m1 ...,
    with ``sizes`` rows), all concatenated. Lists not built yet from a
    compiled step are read from their packed keys instead of being built."""
    packed = [_packed_keys(info) for info in infos]
    from_keys = np.repeat(np.array([p is not None for p in packed], dtype=bool),
                          np.array(sizes, dtype=np.int64))
    n_all = np.empty(len(from_keys), dtype=np.int64)
    key_all = np.empty((len(from_keys), 3), dtype=np.int64)
    if from_keys.any():
        present = [p for p in packed if p is not None]
        node_ids = np.repeat(np.array([p[0] for p in present], dtype=np.int64),
                             np.array([len(p[1]) // 8 for p in present], dtype=np.int64))
        node, n, t, x = _unpack_keys(b"".join(p[1] for p in present))
        n_all[from_keys] = n
        key_all[from_keys, 0] = node_ids
        key_all[from_keys, 1] = t
        key_all[from_keys, 2] = x
    if not from_keys.all():
        n, key = _cindex_arrays(list(chain.from_iterable(
            info.cindexes for info, p in zip(infos, packed) if p is None)))
        n_all[~from_keys] = n
        key_all[~from_keys] = key
    return n_all, key_all


class _ExpandedDebugInfo(LazyMatrixDebugInfo):
    """MatrixDebugInfo of an expanded matrix whose Cindex list is built on
    first access. An expanded computation has N/2 times the rows of the mini
    one, and building a Python tuple per row would cost far more than the
    rest of the expansion, while running a computation never reads them;
    printing, writing or checking it does, and then gets the same list."""

    __slots__ = ()

    def __init__(self, is_deriv, num_rows, old_n, old_keys, n_stride, num_n):
        """``old_n``, ``old_keys``: n and (node, t, x) of the two-sequence
        matrix's rows; the expanded matrix has ``num_rows`` rows (n from 0)."""
        LazyMatrixDebugInfo.__init__(self, is_deriv, num_rows, 0, _expanded_cindexes,
                                     (num_rows, old_n, old_keys, n_stride, num_n))


def _expanded_cindexes(num_rows, old_n, old_keys, n_stride, num_n):
    n0_rows = np.flatnonzero(old_n == 0)
    key = old_keys[n0_rows]
    n_range = np.arange(num_n)
    dest = _new_rows(n0_rows, n_stride, num_n)[:, None] + n_stride * n_range
    rows = np.zeros((num_rows, 4), dtype=np.int64)
    rows[dest, 0] = key[:, None, 0]
    rows[dest, 1] = n_range
    rows[dest, 2] = key[:, None, 1]
    rows[dest, 3] = key[:, None, 2]
    return _cindex_list(rows)


def expand_computation(nnet, misc_info, computation, need_debug_info, num_n_values):
    """Kaldi's ExpandComputation: ``computation`` (compiled for the mini request
    of :func:`request_is_decomposable`, with debug info) stretched to
    ``num_n_values`` sequences. Returns a new NnetComputation."""
    # The expansion allocates many small lists and tuples and frees none:
    # the cyclic garbage collector would only re-walk the live heap (the
    # network, the cache) over and over, so it is paused meanwhile.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ComputationExpander(nnet, misc_info, computation, need_debug_info,
                                   num_n_values).expand()
    finally:
        if was_enabled:
            gc.enable()


def compile_via_shortcut(nnet, request, compile_mini):
    """The computation for ``request`` through the shortcut, or None when the
    request is not decomposable (then compile it normally).
    ``compile_mini(mini_request)`` compiles (and optimizes) the two-sequence
    request; the caching compiler passes its own cached compile here."""
    ans = request_is_decomposable(request)
    if ans is None:
        return None
    mini_request, num_n = ans
    mini = compile_mini(mini_request)
    return expand_computation(nnet, request.misc_info, mini, True, num_n)
