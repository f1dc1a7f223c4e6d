# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""The per-command loops of RenumberComputation in C (twin:
the ``*_py`` functions of ``pynnet3.optimize.renumber``).

Renumbering runs after every variable-merging round and after the row-op
passes; on large computations (a quarter million commands) its loops over the
command list dominate it. Here each command's type is switched on as a C int,
and the submatrix maps are C arrays, so a command costs a few attribute reads
instead of interpreted set lookups.

Same results as the twin, field for field (tests/test_optimize_renumber_fast.py
cross-checks them on the reference computations).
"""

from cpython.ref cimport Py_REFCNT
from libc.stdint cimport uint64_t
from libcpp.vector cimport vector

from pynnet3.compiler.computation import Command, SubMatrixInfo

from pynnet3._fast.constants cimport *
from pynnet3._fast.slots cimport Slots, get_slot, slots_init

# direct slot reads of the records (see slots.pxd)
cdef Slots _CMD, _SUB
slots_init(&_CMD, Command, ("command_type", "arg1", "arg2", "arg3", "arg4", "arg5", "arg6"))
slots_init(&_SUB, SubMatrixInfo, ("matrix_index", "row_offset", "num_rows", "col_offset",
                                  "num_cols"))


cdef inline int _kind(int t):
    """Which fields hold submatrices: 1 (arg1), 2 (arg1, arg2), 3 (arg3,
    arg4), 4 (arg3..arg6), 0 (none)."""
    if (t == kAllocMatrix or t == kDeallocMatrix or t == kSetConst
            or (kCopyRowsMulti <= t <= kAddToRowsMulti)
            or t == kAcceptInput or t == kProvideOutput
            or t == kCompressMatrix or t == kDecompressMatrix):
        return 1
    if (t == kSwapMatrix or t == kMatrixCopy or t == kMatrixAdd or t == kAddRows
            or t == kCopyRows or t == kAddRowRanges):
        return 2
    if t == kPropagate:
        return 3
    if t == kBackprop or t == kBackpropNoModelUpdate:
        return 4
    return 0


cdef inline void _mark(bytearray used, Py_ssize_t n, long s) except *:
    if s < 0 or s >= n:
        raise IndexError("submatrix index %d out of range (%d submatrices)" % (s, n))
    used[s] = 1


def scan_commands(list commands, bytearray sub_used):
    """Sets ``sub_used[s] = 1`` for every submatrix s a command field refers
    to, and returns (multi_users, indexes_users, ranges_users, propagates,
    backprops): the commands using indexes_multi, indexes, indexes_ranges, and
    the propagate and backprop commands, each in command order."""
    cdef list multi = [], indexes = [], ranges = [], props = [], backs = []
    cdef Py_ssize_t n = len(sub_used)
    cdef object c
    cdef int t, k
    for c in commands:
        t = get_slot(&_CMD, c, 0, "command_type")
        k = _kind(t)
        if k == 1:
            _mark(sub_used, n, get_slot(&_CMD, c, 1, "arg1"))
            if kCopyRowsMulti <= t <= kAddToRowsMulti:
                multi.append(c)
        elif k == 2:
            _mark(sub_used, n, get_slot(&_CMD, c, 1, "arg1"))
            _mark(sub_used, n, get_slot(&_CMD, c, 2, "arg2"))
            if t == kCopyRows or t == kAddRows:
                indexes.append(c)
            elif t == kAddRowRanges:
                ranges.append(c)
        elif k == 3:
            _mark(sub_used, n, get_slot(&_CMD, c, 3, "arg3"))
            _mark(sub_used, n, get_slot(&_CMD, c, 4, "arg4"))
            props.append(c)
        elif k == 4:
            _mark(sub_used, n, get_slot(&_CMD, c, 3, "arg3"))
            _mark(sub_used, n, get_slot(&_CMD, c, 4, "arg4"))
            _mark(sub_used, n, get_slot(&_CMD, c, 5, "arg5"))
            _mark(sub_used, n, get_slot(&_CMD, c, 6, "arg6"))
            backs.append(c)
    return multi, indexes, ranges, props, backs


def map_submatrix_fields(list commands, list mapping):
    """Replaces every submatrix field s > 0 of every command by
    ``mapping[s]``."""
    cdef Py_ssize_t n = len(mapping)
    cdef object c
    cdef int k
    for c in commands:
        k = _kind(get_slot(&_CMD, c, 0, "command_type"))
        if k == 0:
            continue
        if k <= 2:
            _map_field(c, 1, "arg1", mapping, n)
            if k == 2:
                _map_field(c, 2, "arg2", mapping, n)
        else:
            _map_field(c, 3, "arg3", mapping, n)
            _map_field(c, 4, "arg4", mapping, n)
            if k == 4:
                _map_field(c, 5, "arg5", mapping, n)
                _map_field(c, 6, "arg6", mapping, n)


cdef inline int _map_field(object c, int i, str name, list mapping, Py_ssize_t n) except -1:
    """c.<name> (field i of _CMD) = mapping[c.<name>] when that is > 0. The mapping's own int
    objects are stored (no new int per field), and only where the number
    changes (a renumbering often keeps most numbers)."""
    cdef object old = get_slot(&_CMD, c, i, name)
    cdef long s = old
    if s <= 0:
        return 0
    if s >= n:
        raise IndexError("submatrix index %d out of range (%d submatrices)" % (s, n))
    new = mapping[s]
    if new is not old and <long>new != s:
        setattr(c, name, new)
    return 0


cdef inline long _at(vector[long]& m, Py_ssize_t n, long s) except? -2:
    if s >= n:
        raise IndexError("submatrix index %d out of range (%d submatrices)" % (s, n))
    return m[s]


def without_no_ops(list commands):
    """The commands other than kNoOperation, in order."""
    cdef list out = []
    cdef object c
    for c in commands:
        if <int>get_slot(&_CMD, c, 0, "command_type") != kNoOperation:
            out.append(c)
    return out


def scan_indexes_multi(list indexes_multi, bytearray sub_used):
    """Sets ``sub_used[s] = 1`` for every submatrix s > 0 named by a pair
    (s, row) of any indexes_multi table."""
    cdef Py_ssize_t n = len(sub_used)
    cdef object pairs, pair
    cdef long s, last = 0
    for pairs in indexes_multi:
        for pair in pairs:
            s = pair[0]
            if s > 0 and s != last:
                _mark(sub_used, n, s)
                last = s


def map_indexes_multi(list indexes_multi, list mapping):
    """Replaces, in place, every table's pairs (s, row) with s > 0 by
    (mapping[s], row)."""
    cdef vector[long] m
    cdef Py_ssize_t i, k, n = len(mapping)
    m.resize(n)
    for i in range(n):
        m[i] = mapping[i]
    cdef list pairs, out
    cdef tuple pair
    cdef long s
    for i in range(len(indexes_multi)):
        pairs = list(indexes_multi[i])
        out = [None] * len(pairs)
        for k in range(len(pairs)):
            pair = tuple(pairs[k])
            s = pair[0]
            out[k] = (_at(m, n, s), pair[1]) if s > 0 else pair
        indexes_multi[i] = out


cdef inline uint64_t _hash5(const int* k):
    cdef uint64_t h = 0
    cdef int i
    for i in range(5):
        h = (h ^ <uint64_t><unsigned int>k[i]) * <uint64_t>1099511628211
    return h ^ (h >> 29)


def renumber_submatrices(list submatrices, bytearray used, int num_matrices):
    """Steps 2 to 4 of renumbering for the submatrix and matrix lists: the
    surviving submatrices, each old submatrix's new number and which matrices
    are used (see the twin in renumber.py). Identical submatrices are found
    with an open-addressing hash table over their five fields. A surviving
    record whose matrix number changes and that only ``submatrices`` refers
    to is renumbered in place (the caller replaces the list); any other gets
    a new record."""
    cdef Py_ssize_t num_sub = len(submatrices)
    if len(used) < num_sub:
        raise ValueError("used has %d entries for %d submatrices" % (len(used), num_sub))
    cdef vector[int] fields
    fields.resize(5 * num_sub)
    cdef Py_ssize_t s, t
    cdef int m
    cdef object info
    cdef list matrix_used = [False] * num_matrices
    if num_matrices:
        matrix_used[0] = True
    cdef vector[int] old_to_new_matrix
    old_to_new_matrix.assign(num_matrices, -1)
    for s in range(num_sub):
        info = submatrices[s]
        m = get_slot(&_SUB, info, 0, "matrix_index")
        fields[5 * s] = m
        fields[5 * s + 1] = get_slot(&_SUB, info, 1, "row_offset")
        fields[5 * s + 2] = get_slot(&_SUB, info, 2, "num_rows")
        fields[5 * s + 3] = get_slot(&_SUB, info, 3, "col_offset")
        fields[5 * s + 4] = get_slot(&_SUB, info, 4, "num_cols")
        if s > 0 and used[s]:
            if not 0 <= m < num_matrices:
                raise IndexError("submatrix %d names matrix %d (%d matrices)"
                                 % (s, m, num_matrices))
            matrix_used[m] = True
    cdef int n = 0
    for m in range(num_matrices):
        if matrix_used[m]:
            old_to_new_matrix[m] = n
            n += 1
    cdef list matrix_numbers = list(range(n))    # one int object per new number
    cdef Py_ssize_t cap = 16
    while cap < 2 * num_sub:
        cap *= 2
    cdef vector[Py_ssize_t] table
    table.assign(cap, -1)
    cdef vector[int] new_number
    new_number.assign(num_sub, -1)
    cdef list old_to_new = [-1] * num_sub
    cdef list new_submatrices = []
    cdef int num_distinct = 0, j
    cdef uint64_t h
    cdef const int* k
    cdef bint found
    for s in range(num_sub):
        info = submatrices[s]
        if s == 0:
            m = 0
        else:
            if not used[s]:
                continue
            k = &fields[5 * s]
            h = _hash5(k) & <uint64_t>(cap - 1)
            found = False
            while table[h] != -1:
                t = table[h]
                if (fields[5 * t] == k[0] and fields[5 * t + 1] == k[1]
                        and fields[5 * t + 2] == k[2] and fields[5 * t + 3] == k[3]
                        and fields[5 * t + 4] == k[4]):
                    found = True
                    break
                h = (h + 1) & <uint64_t>(cap - 1)
            if found:
                old_to_new[s] = new_number[t]
                continue
            table[h] = s
            num_distinct += 1
            new_number[s] = num_distinct
            old_to_new[s] = num_distinct
            m = old_to_new_matrix[k[0]]
        if m != fields[5 * s]:
            if Py_REFCNT(info) == 2:
                # Only the old list and this loop hold the record, and the old
                # list is being replaced: renumber it in place rather than
                # build a new one (a record shared with anything else is
                # left alone).
                info.matrix_index = matrix_numbers[m]
            else:
                info = SubMatrixInfo(m, fields[5 * s + 1], fields[5 * s + 2],
                                     fields[5 * s + 3], fields[5 * s + 4])
        new_submatrices.append(info)
    if num_sub:
        old_to_new[0] = 0
    return new_submatrices, old_to_new, matrix_used
