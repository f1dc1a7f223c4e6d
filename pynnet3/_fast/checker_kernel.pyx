# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""The ComputationChecker's index check as a yes/no question in C
(``indexes_look_valid``; twin: ``ComputationChecker.check_computation_indexes``
in ``pynnet3.optimize.checker``, which runs only when this says no, to name
the fault).
"""

from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from pynnet3._fast.constants cimport *
from pynnet3._fast.slots cimport Slots, get_slot, slots_init

from pynnet3.compiler.computation import Command, MatrixInfo, SubMatrixInfo

cdef Slots _FIELDS, _SUB, _MAT
slots_init(&_FIELDS, Command, ("command_type", "arg1", "arg2", "arg3", "arg4", "arg5", "arg6",
                               "arg7", "alpha"))
slots_init(&_SUB, SubMatrixInfo, ("matrix_index", "row_offset", "num_rows", "col_offset",
                                  "num_cols"))
slots_init(&_MAT, MatrixInfo, ("num_rows", "num_cols"))

_ARG_NAMES = ("command_type", "arg1", "arg2", "arg3", "arg4", "arg5", "arg6", "arg7")


def indexes_look_valid(computation, list properties, list input_dims, list output_dims,
                       bytes io_nodes):
    """True when the checker's check_computation_indexes (the twin, which
    names the first fault) finds nothing wrong with ``computation``; False
    when it would fail, or when a field is not an int that fits (then the
    twin says what is wrong). ``properties``, ``input_dims``,
    ``output_dims``: per component; ``io_nodes``: per network node, 1 for an
    input or output node."""
    try:
        return _indexes_look_valid(computation, properties, input_dims, output_dims,
                                   io_nodes)
    except (OverflowError, TypeError, ValueError, IndexError, AttributeError):
        return False


cdef bint _indexes_look_valid(computation, list properties, list input_dims,
                              list output_dims, bytes io_nodes) except -1:
    cdef list subs = computation.submatrices, mats = computation.matrices
    cdef list commands = computation.commands
    cdef list indexes = computation.indexes, indexes_multi = computation.indexes_multi
    cdef list indexes_ranges = computation.indexes_ranges
    cdef Py_ssize_t nsub = len(subs), nmat = len(mats), ncmd = len(commands)
    cdef Py_ssize_t ncomp = len(properties), nnodes = len(io_nodes)
    cdef Py_ssize_t nprecomputed = len(computation.component_precomputed_indexes)
    cdef const unsigned char *io = io_nodes
    cdef vector[long long] rows, cols
    cdef vector[char] whole
    cdef vector[long long] mat_rows, mat_cols
    cdef Py_ssize_t s, ci, m, i
    cdef long long ro, co, nr, nc
    mat_rows.resize(nmat)
    mat_cols.resize(nmat)
    for m in range(nmat):
        info = mats[m]
        mat_rows[m] = get_slot(&_MAT, info, 0, "num_rows")
        mat_cols[m] = get_slot(&_MAT, info, 1, "num_cols")
    rows.resize(nsub)
    cols.resize(nsub)
    whole.assign(nsub, 0)
    for s in range(nsub):
        info = subs[s]
        m = get_slot(&_SUB, info, 0, "matrix_index")
        ro = get_slot(&_SUB, info, 1, "row_offset")
        nr = get_slot(&_SUB, info, 2, "num_rows")
        co = get_slot(&_SUB, info, 3, "col_offset")
        nc = get_slot(&_SUB, info, 4, "num_cols")
        rows[s] = nr
        cols[s] = nc
        # (the twin's NnetComputation.is_whole_matrix; a bad matrix index
        # leaves it False, and the twin then says what is wrong)
        whole[s] = (0 <= m < nmat and ro == 0 and co == 0 and nr == mat_rows[m]
                    and nc == mat_cols[m])
    cdef unordered_map[long long, Py_ssize_t] memo_to_command
    cdef long long a[8]
    cdef int t, k
    cdef long long p, in_dim, out_dim, first, second, src_rows, lo, hi, v
    cdef double alpha
    cdef bint simple
    for ci in range(ncmd):
        c = commands[ci]
        t_obj = get_slot(&_FIELDS, c, 0, "command_type")
        if not isinstance(t_obj, int):
            return False
        a[0] = t_obj
        if not 0 <= a[0] < 255:
            return False
        t = <int>a[0]
        if kNoOperation <= t <= kNoOperationLabel:
            continue
        for k in range(1, 8):
            a[k] = get_slot(&_FIELDS, c, k, _ARG_NAMES[k])
        if t == kAllocMatrix or t == kDeallocMatrix or t == kDecompressMatrix:
            if not (1 <= a[1] < nsub and whole[a[1]]):
                return False
        elif t == kSetConst:
            if not 1 <= a[1] < nsub:
                return False
        elif t == kSwapMatrix:
            if not (1 <= a[1] < nsub and whole[a[1]] and 1 <= a[2] < nsub and whole[a[2]]):
                return False
            if rows[a[1]] != rows[a[2]] or cols[a[1]] != cols[a[2]]:
                return False
        elif t == kPropagate or t == kBackprop or t == kBackpropNoModelUpdate:
            # the component and its precomputed indexes, checked alike for both
            if not 0 <= a[1] < ncomp:
                return False
            p = properties[a[1]]
            simple = p & kSimpleComponent
            if not 0 <= a[2] <= nprecomputed or (a[2] != 0 and simple):
                return False
            if t == kPropagate:
                if not (0 <= a[3] < nsub) or (a[3] == 0 and simple) or not (1 <= a[4] < nsub):
                    return False
                if a[3] > 0 and cols[a[3]] != <long long>input_dims[a[1]]:
                    return False
                if cols[a[4]] != <long long>output_dims[a[1]]:
                    return False
                if simple and rows[a[3]] != rows[a[4]]:
                    return False
                if not (p & kPropagateInPlace) and a[3] == a[4]:
                    return False
                if a[5] > 0:
                    if memo_to_command.count(a[5]):
                        return False
                    memo_to_command[a[5]] = ci
                if a[6] != 0 and a[6] != 1:
                    return False
            else:
                if not (0 <= a[3] < nsub and 0 <= a[4] < nsub and 1 <= a[5] < nsub
                        and 0 <= a[6] < nsub):
                    return False
                if (p & kBackpropNeedsInput and a[3] == 0) or \
                        (p & kBackpropNeedsOutput and a[4] == 0):
                    return False
                if a[6] == 0 and not (p & kUpdatableComponent):
                    return False
                if a[5] == a[6] and not (p & kBackpropInPlace):
                    return False
                in_dim = input_dims[a[1]]
                out_dim = output_dims[a[1]]
                if ((a[3] != 0 and cols[a[3]] != in_dim) or (a[4] != 0 and cols[a[4]] != out_dim)
                        or cols[a[5]] != out_dim or (a[6] != 0 and cols[a[6]] != in_dim)):
                    return False
                if a[3] != 0 and a[6] != 0 and rows[a[3]] != rows[a[6]]:
                    return False
                if a[4] != 0 and rows[a[4]] != rows[a[5]]:
                    return False
                if simple and a[6] != 0 and rows[a[5]] != rows[a[6]]:
                    return False
                if a[7] != 0:
                    if a[7] < 0 or not memo_to_command.count(a[7]):
                        return False
                    i = memo_to_command[a[7]]
                    memo_to_command.erase(a[7])
                    if a[1] != <long long>get_slot(&_FIELDS, commands[i], 1, "arg1"):
                        return False
                    if not (p & kUsesMemo):
                        return False
        elif t == kMatrixCopy or t == kMatrixAdd:
            if not (1 <= a[1] < nsub and 1 <= a[2] < nsub):
                return False
            if rows[a[1]] != rows[a[2]] or cols[a[1]] != cols[a[2]]:
                return False
            if a[1] == a[2]:
                alpha = get_slot(&_FIELDS, c, 8, "alpha")
                if not (t == kMatrixCopy and alpha != 1.0):
                    return False
        elif t == kAddRows or t == kCopyRows:
            if not (1 <= a[1] < nsub and 1 <= a[2] < nsub and 0 <= a[3] < len(indexes)):
                return False
            table = indexes[a[3]]
            if len(table) != rows[a[1]] or cols[a[1]] != cols[a[2]] or a[1] == a[2]:
                return False
            src_rows = rows[a[2]]
            for value in table:
                v = value
                if v >= src_rows or v < -1:
                    return False
        elif kCopyRowsMulti <= t <= kAddToRowsMulti:
            if not (_multi_ok(t, a, subs, rows, cols, nsub, indexes_multi)):
                return False
        elif t == kAddRowRanges:
            if not (1 <= a[1] < nsub and 1 <= a[2] < nsub and 0 <= a[3] < len(indexes_ranges)):
                return False
            table = indexes_ranges[a[3]]
            if rows[a[1]] != len(table) or cols[a[1]] != cols[a[2]]:
                return False
            src_rows = rows[a[2]]
            for pair in table:
                first, second = pair
                if not ((first == -1 and second == -1)
                        or (second > first and first >= 0 and second <= src_rows)):
                    return False
        elif t == kCompressMatrix:
            if not (1 <= a[1] < nsub and whole[a[1]]):
                return False
            if not 1 <= a[2] <= 4 or (a[3] != 0 and a[3] != 1):
                return False
            alpha = get_slot(&_FIELDS, c, 8, "alpha")
            if alpha < 0.0 or alpha > 1000.0 or (alpha == 0.0 and a[2] != 2):
                return False
        elif t == kAcceptInput or t == kProvideOutput:
            if not (1 <= a[1] < nsub and whole[a[1]]):
                return False
            if not (0 <= a[2] < nnodes and io[a[2]]):
                return False
        elif t == kGotoLabel:
            if not 0 <= a[1] < ci:
                return False
            if <long long>get_slot(&_FIELDS, commands[a[1]], 0,
                                   "command_type") != kNoOperationLabel:
                return False
            if ci + 1 != ncmd:
                return False
        else:
            return False
    return memo_to_command.empty()


cdef bint _multi_ok(int t, long long *a, list subs, vector[long long] &rows,
                    vector[long long] &cols, Py_ssize_t nsub, list indexes_multi) except -1:
    """The twin's _check_multi for one *-multi command, as a yes/no."""
    if not (1 <= a[1] < nsub and 0 <= a[2] < len(indexes_multi)):
        return False
    pairs = indexes_multi[a[2]]
    if len(pairs) != rows[a[1]]:
        return False
    cdef long long s, row, num_cols = cols[a[1]]
    for pair in pairs:
        s, row = pair
        if s == -1:
            if row != -1:
                return False
            continue
        if not 1 <= s < nsub or not 0 <= row < rows[s] or s == a[1] or cols[s] != num_cols:
            return False
    if t == kAddToRowsMulti or t == kCopyToRowsMulti:
        seen = set()
        for pair in pairs:
            if pair[0] != -1:
                if pair in seen:
                    return False
                seen.add(pair)
    return True
