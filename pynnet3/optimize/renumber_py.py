"""The per-command loops of RenumberComputation (Kaldi's ComputationRenumberer)
in plain Python: the twin of ``pynnet3/_fast/renumber_kernel.pyx``, and the
specification it is tested against.

Which command fields hold submatrix indexes is Kaldi's IdentifySubmatrixArgs:
arg1 (allocation, deallocation, kSetConst, the *RowsMulti ops, I/O,
compression), arg1 and arg2 (swap, copy, add, kCopyRows, kAddRows,
kAddRowRanges), arg3 and arg4 (kPropagate), arg3..arg6 (the backprops).
"""

from ..compiler.computation import CommandType as C, SubMatrixInfo

ARG1 = frozenset(int(t) for t in (
    C.kAllocMatrix, C.kDeallocMatrix, C.kSetConst, C.kAddRowsMulti, C.kCopyRowsMulti,
    C.kAddToRowsMulti, C.kCopyToRowsMulti, C.kAcceptInput, C.kProvideOutput,
    C.kCompressMatrix, C.kDecompressMatrix))
ARG12 = frozenset(int(t) for t in (
    C.kSwapMatrix, C.kMatrixCopy, C.kMatrixAdd, C.kAddRows, C.kCopyRows, C.kAddRowRanges))
ARG34 = frozenset((int(C.kPropagate),))
ARG3456 = frozenset((int(C.kBackprop), int(C.kBackpropNoModelUpdate)))
MULTI_TYPES = frozenset(int(t) for t in (C.kAddRowsMulti, C.kAddToRowsMulti,
                                         C.kCopyRowsMulti, C.kCopyToRowsMulti))
INDEXES_TYPES = frozenset((int(C.kCopyRows), int(C.kAddRows)))


def _mark(used, s):
    if s < 0 or s >= len(used):
        raise IndexError("submatrix index %d out of range (%d submatrices)" % (s, len(used)))
    used[s] = 1


def scan_commands(commands, sub_used):
    """Sets ``sub_used[s] = 1`` (a bytearray) for every submatrix s a command
    field refers to, and returns (multi_users, indexes_users, ranges_users,
    propagates, backprops): the commands using indexes_multi, indexes,
    indexes_ranges, and the propagate and backprop commands, in order."""
    multi, indexes, ranges, props, backs = [], [], [], [], []
    ranges_type = int(C.kAddRowRanges)
    for c in commands:
        t = c.command_type
        if t in ARG1:
            _mark(sub_used, c.arg1)
            if t in MULTI_TYPES:
                multi.append(c)
        elif t in ARG12:
            _mark(sub_used, c.arg1)
            _mark(sub_used, c.arg2)
            if t in INDEXES_TYPES:
                indexes.append(c)
            elif t == ranges_type:
                ranges.append(c)
        elif t in ARG34:
            _mark(sub_used, c.arg3)
            _mark(sub_used, c.arg4)
            props.append(c)
        elif t in ARG3456:
            for s in (c.arg3, c.arg4, c.arg5, c.arg6):
                _mark(sub_used, s)
            backs.append(c)
    return multi, indexes, ranges, props, backs


def map_submatrix_fields(commands, mapping):
    """Replaces every submatrix field s > 0 of every command by
    ``mapping[s]`` (a list indexed by old submatrix)."""
    def new(s):
        if s >= len(mapping):
            raise IndexError("submatrix index %d out of range (%d submatrices)"
                             % (s, len(mapping)))
        return mapping[s] if s > 0 else s
    for c in commands:
        t = c.command_type
        if t in ARG1:
            c.arg1 = new(c.arg1)
        elif t in ARG12:
            c.arg1 = new(c.arg1)
            c.arg2 = new(c.arg2)
        elif t in ARG34:
            c.arg3 = new(c.arg3)
            c.arg4 = new(c.arg4)
        elif t in ARG3456:
            c.arg3 = new(c.arg3)
            c.arg4 = new(c.arg4)
            c.arg5 = new(c.arg5)
            c.arg6 = new(c.arg6)


def without_no_ops(commands):
    """The commands other than kNoOperation, in order."""
    no_op = int(C.kNoOperation)
    return [c for c in commands if c.command_type != no_op]


def scan_indexes_multi(indexes_multi, sub_used):
    """Sets ``sub_used[s] = 1`` for every submatrix s > 0 named by a pair
    (s, row) of any indexes_multi table."""
    for pairs in indexes_multi:
        for s in {p[0] for p in pairs}:
            if s > 0:
                _mark(sub_used, s)


def map_indexes_multi(indexes_multi, mapping):
    """Replaces, in place, every table's pairs (s, row) with s > 0 by
    (mapping[s], row)."""
    for i, pairs in enumerate(indexes_multi):
        out = []
        for s, r in pairs:
            if s >= len(mapping):
                raise IndexError("submatrix index %d out of range (%d submatrices)"
                                 % (s, len(mapping)))
            out.append((mapping[s], r) if s > 0 else (s, r))
        indexes_multi[i] = out


def renumber_submatrices(submatrices, used, num_matrices):
    """Steps 2 to 4 of renumbering for the submatrix and matrix lists.
    ``used`` (one byte per submatrix) says which submatrices something refers
    to; submatrix 0, the empty one, is always kept. Returns (new_submatrices,
    old_to_new, matrix_used): the surviving submatrices in order (used ones,
    the first of each group of identical ones, each naming its matrix's new
    number; an unchanged record is kept as the same object), each old
    submatrix's new number (-1 if unused; identical ones share the first's),
    and which matrices a used submatrix lies in (matrix 0 always)."""
    num_sub = len(submatrices)
    matrix_used = [False] * num_matrices
    if num_matrices:
        matrix_used[0] = True
    for s in range(1, num_sub):
        if used[s]:
            matrix_used[submatrices[s].matrix_index] = True
    old_to_new_matrix = []
    n = 0
    for u in matrix_used:
        old_to_new_matrix.append(n if u else -1)
        n += u
    old_to_new = [-1] * num_sub
    new_submatrices = []
    seen = {}
    for s in range(num_sub):
        info = submatrices[s]
        if s == 0:
            m = 0
        else:
            if not used[s]:
                continue
            key = (info.matrix_index, info.row_offset, info.num_rows, info.col_offset,
                   info.num_cols)
            j = seen.get(key)
            if j is not None:
                old_to_new[s] = j
                continue
            j = seen[key] = len(seen) + 1
            old_to_new[s] = j
            m = old_to_new_matrix[info.matrix_index]
        new_submatrices.append(info if m == info.matrix_index else SubMatrixInfo(
            m, info.row_offset, info.num_rows, info.col_offset, info.num_cols))
    if num_sub:
        old_to_new[0] = 0
    return new_submatrices, old_to_new, matrix_used
