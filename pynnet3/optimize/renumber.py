"""Kaldi's RenumberComputation (ComputationRenumberer) and RemoveNoOps.

After passes have rewritten commands, a computation may hold matrices and
submatrices no command refers to, duplicate submatrices, and unused or
duplicate ``indexes`` / ``indexes_multi`` / ``indexes_ranges`` tables.
:func:`renumber_computation` removes all of these and renumbers every
reference, keeping the relative order of what survives (so the result is the
one Kaldi prints); memo indexes are made consecutive in propagate order.

:func:`submatrix_fields` and :func:`map_submatrix_args` (Kaldi's
IdentifySubmatrixArgs) name and rewrite the command fields that hold
submatrix indexes; other passes use them too.
"""

from ..compile.computation import CommandType as C, SubMatrixInfo

# Which Command fields hold submatrix indexes, per command type (Kaldi's
# IdentifySubmatrixArgs).
_SUBMATRIX_FIELDS = {
    C.kAllocMatrix: ("arg1",), C.kDeallocMatrix: ("arg1",), C.kSetConst: ("arg1",),
    C.kSwapMatrix: ("arg1", "arg2"),
    C.kPropagate: ("arg3", "arg4"),
    C.kBackprop: ("arg3", "arg4", "arg5", "arg6"),
    C.kBackpropNoModelUpdate: ("arg3", "arg4", "arg5", "arg6"),
    C.kMatrixCopy: ("arg1", "arg2"), C.kMatrixAdd: ("arg1", "arg2"),
    C.kAddRows: ("arg1", "arg2"), C.kCopyRows: ("arg1", "arg2"),
    C.kAddRowRanges: ("arg1", "arg2"),
    C.kAddRowsMulti: ("arg1",), C.kCopyRowsMulti: ("arg1",),
    C.kAddToRowsMulti: ("arg1",), C.kCopyToRowsMulti: ("arg1",),
    C.kAcceptInput: ("arg1",), C.kProvideOutput: ("arg1",),
    C.kCompressMatrix: ("arg1",), C.kDecompressMatrix: ("arg1",),
    C.kNoOperation: (), C.kNoOperationPermanent: (), C.kNoOperationMarker: (),
    C.kNoOperationLabel: (), C.kGotoLabel: (),
}

MULTI_TYPES = frozenset((C.kAddRowsMulti, C.kAddToRowsMulti, C.kCopyRowsMulti,
                         C.kCopyToRowsMulti))
INDEXES_TYPES = frozenset((C.kCopyRows, C.kAddRows))


def submatrix_fields(command):
    """The names of ``command``'s fields that are submatrix indexes."""
    return _SUBMATRIX_FIELDS[command.command_type]


def map_submatrix_args(computation, mapping):
    """Replaces every submatrix reference s > 0 (in commands and in
    indexes_multi) by ``mapping(s)``."""
    for c in computation.commands:
        for f in _SUBMATRIX_FIELDS[c.command_type]:
            s = getattr(c, f)
            if s > 0:
                setattr(c, f, mapping(s))
    for i, pairs in enumerate(computation.indexes_multi):
        computation.indexes_multi[i] = [(mapping(s) if s > 0 else s, r) for s, r in pairs]


def _renumbering(used):
    """[True, False, True] -> ([0, -1, 1], 2)."""
    out = []
    n = 0
    for u in used:
        if u:
            out.append(n)
            n += 1
        else:
            out.append(-1)
    return out, n


def _dedup_tables(computation, table_name, types, field):
    """Drops entries of ``computation.<table_name>`` no command of ``types``
    refers to (through ``field``) and merges identical entries (first
    occurrence wins), renumbering the references."""
    table = getattr(computation, table_name)
    if not table:
        return
    users = [c for c in computation.commands if c.command_type in types]
    seen = [False] * len(table)
    for c in users:
        seen[getattr(c, field)] = True
    first = {}
    old_to_new = [-1] * len(table)
    for i, entry in enumerate(table):
        if seen[i]:
            key = tuple(entry)
            j = first.get(key)
            if j is None:
                j = first[key] = len(first)
            old_to_new[i] = j
    if len(first) == len(table):
        return
    new_table = [None] * len(first)
    for i, j in enumerate(old_to_new):
        if j >= 0 and new_table[j] is None:
            new_table[j] = table[i]
    setattr(computation, table_name, new_table)
    for c in users:
        setattr(c, field, old_to_new[getattr(c, field)])


def _renumber_memos(computation):
    """Memo indexes become 1, 2, ... in the order of their propagates."""
    propagate_of = {}
    backprop_of = {}
    order = []
    for c in computation.commands:
        if c.command_type == C.kPropagate and c.arg5 > 0:
            propagate_of[c.arg5] = c
            order.append(c.arg5)
        elif c.command_type == C.kBackprop and c.arg7 > 0:
            backprop_of[c.arg7] = c
    for new, old in enumerate(order, 1):
        propagate_of[old].arg5 = new
        b = backprop_of.get(old)
        if b is not None:
            b.arg7 = new


def renumber_computation(computation):
    """Kaldi's RenumberComputation: removes unused matrices, submatrices and
    index tables and duplicates among them, in Kaldi's order of steps."""
    # 1. indexes_multi entries no command uses.
    _remove_unused_indexes_multi(computation)
    # 2. which submatrices and matrices are referenced.
    subs = computation.submatrices
    num_sub = len(subs)
    sub_used = [False] * num_sub
    if num_sub:
        sub_used[0] = True
    for c in computation.commands:
        for f in _SUBMATRIX_FIELDS[c.command_type]:
            s = getattr(c, f)
            if s > 0:
                sub_used[s] = True
    for pairs in computation.indexes_multi:
        for s, _ in pairs:
            if s > 0:
                sub_used[s] = True
    mat_used = [False] * len(computation.matrices)
    if mat_used:
        mat_used[0] = True
    for s in range(1, num_sub):
        if sub_used[s]:
            mat_used[subs[s].matrix_index] = True
    # 3. old -> new maps; identical submatrices collapse onto the first.
    old_to_new_matrix, _ = _renumbering(mat_used)
    old_to_new_sub = [-1] * num_sub
    kept = list(sub_used)
    if num_sub:
        old_to_new_sub[0] = 0
    seen = {}
    for s in range(1, num_sub):
        if sub_used[s]:
            info = subs[s]
            key = (info.matrix_index, info.row_offset, info.num_rows, info.col_offset,
                   info.num_cols)
            j = seen.get(key)
            if j is None:
                j = seen[key] = len(seen) + 1
            else:
                kept[s] = False
            old_to_new_sub[s] = j
    # 4. apply to submatrices, then matrices.
    map_submatrix_args(computation, old_to_new_sub.__getitem__)
    computation.submatrices = [
        SubMatrixInfo(old_to_new_matrix[i.matrix_index] if s else 0, i.row_offset,
                      i.num_rows, i.col_offset, i.num_cols)
        for s, i in enumerate(subs) if kept[s]]
    computation.matrices = [m for m, u in zip(computation.matrices, mat_used) if u]
    if computation.matrix_debug_info:
        computation.matrix_debug_info = [d for d, u in zip(computation.matrix_debug_info,
                                                           mat_used) if u]
    # 5. index tables.
    _dedup_tables(computation, "indexes_multi", MULTI_TYPES, "arg2")
    _dedup_tables(computation, "indexes", INDEXES_TYPES, "arg3")
    _dedup_tables(computation, "indexes_ranges", (C.kAddRowRanges,), "arg3")
    _renumber_memos(computation)


def _remove_unused_indexes_multi(computation):
    table = computation.indexes_multi
    if not table:
        return
    users = [c for c in computation.commands if c.command_type in MULTI_TYPES]
    used = [False] * len(table)
    for c in users:
        used[c.arg2] = True
    old_to_new, n = _renumbering(used)
    if n == len(table):
        return
    computation.indexes_multi = [t for t, u in zip(table, used) if u]
    for c in users:
        c.arg2 = old_to_new[c.arg2]


def remove_no_ops(computation):
    """Kaldi's RemoveNoOps: drops every kNoOperation command (the permanent,
    marker and label no-ops stay)."""
    computation.commands = [c for c in computation.commands
                            if c.command_type != C.kNoOperation]
