"""Kaldi's RenumberComputation (ComputationRenumberer) and RemoveNoOps.

After passes have rewritten commands, a computation may hold matrices and
submatrices no command refers to, duplicate submatrices, and unused or
duplicate ``indexes`` / ``indexes_multi`` / ``indexes_ranges`` tables.
:func:`renumber_computation` removes all of these and renumbers every
reference, keeping the relative order of what survives (so the result is the
one Kaldi prints); memo indexes are made consecutive in propagate order.

The loops over the command list (which fields hold submatrices: Kaldi's
IdentifySubmatrixArgs, the table beside CommandType) have a kernel,
``pynnet3/_fast/renumber_kernel.pyx``; their readable twins are the ``*_py``
functions below.
"""

from .. import _fast
from ..compiler.computation import (INDEXES_ARG, INDEXES_MULTI_ARG, SUBMATRIX_ARGS, CommandType,
                                    SubMatrixInfo)


# -- the per-command loops (readable twins of the kernel's) ---------------------------------
# The command types by which fields hold submatrix indexes, and those naming
# index tables (from the command-argument table beside CommandType).
def _types_with(fields):
    return frozenset(int(t) for t, f in SUBMATRIX_ARGS.items() if f == fields)


ARG1 = _types_with(("arg1",))
ARG12 = _types_with(("arg1", "arg2"))
ARG34 = _types_with(("arg3", "arg4"))
ARG3456 = _types_with(("arg3", "arg4", "arg5", "arg6"))
MULTI_TYPES = frozenset(int(t) for t in INDEXES_MULTI_ARG)
INDEXES_TYPES = frozenset(int(t) for t in INDEXES_ARG)


def _mark(used, s):
    if s < 0 or s >= len(used):
        raise IndexError("submatrix index %d out of range (%d submatrices)" % (s, len(used)))
    used[s] = 1


def scan_commands_py(commands, sub_used):
    """Sets ``sub_used[s] = 1`` (a bytearray) for every submatrix s a command
    field refers to, and returns (multi_users, indexes_users, ranges_users,
    propagates, backprops): the commands using indexes_multi, indexes,
    indexes_ranges, and the propagate and backprop commands, in order."""
    multi, indexes, ranges, props, backs = [], [], [], [], []
    ranges_type = int(CommandType.kAddRowRanges)
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


def map_submatrix_fields_py(commands, mapping):
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


def without_no_ops_py(commands):
    """The commands other than kNoOperation, in order."""
    no_op = int(CommandType.kNoOperation)
    return [c for c in commands if c.command_type != no_op]


def scan_indexes_multi_py(indexes_multi, sub_used):
    """Sets ``sub_used[s] = 1`` for every submatrix s > 0 named by a pair
    (s, row) of any indexes_multi table."""
    for pairs in indexes_multi:
        for s in {p[0] for p in pairs}:
            if s > 0:
                _mark(sub_used, s)


def map_indexes_multi_py(indexes_multi, mapping):
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


def renumber_submatrices_py(submatrices, used, num_matrices):
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


# The kernel's loops when it is loaded (the one pynnet3._fast.load policy),
# else the twins above.
_kernel = _fast.load("renumber_kernel")
(scan_commands, map_submatrix_fields, without_no_ops, scan_indexes_multi, map_indexes_multi,
 renumber_submatrices) = _fast.select(
    _kernel, scan_commands_py, map_submatrix_fields_py, without_no_ops_py,
    scan_indexes_multi_py, map_indexes_multi_py, renumber_submatrices_py)


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


_SHORT = 32


def _dedup_tables(computation, table_name, users, field):
    """Drops entries of ``computation.<table_name>`` none of the commands
    ``users`` refers to (through ``field``) and merges identical entries
    (first occurrence wins), renumbering the references."""
    table = getattr(computation, table_name)
    if not table:
        return
    seen = [False] * len(table)
    for c in users:
        seen[getattr(c, field)] = True
    # Identical entries are found as Kaldi's map finds them: by length
    # first, contents only among entries of equal length. Short entries are
    # hashed as tuples; long ones (whole-minibatch row lists) are compared
    # with list equality, which stops at the first difference and so avoids
    # converting every long list on every renumbering.
    first = {}
    long_by_length = {}
    num_new = 0
    old_to_new = [-1] * len(table)
    for i, entry in enumerate(table):
        if not seen[i]:
            continue
        n = len(entry)
        if n <= _SHORT:
            key = tuple(entry)
            j = first.get(key)
            if j is None:
                j = first[key] = num_new
                num_new += 1
        else:
            same_length = long_by_length.setdefault(n, [])
            for other, other_j in same_length:
                if other == entry:
                    j = other_j
                    break
            else:
                j = num_new
                num_new += 1
                same_length.append((entry, j))
        old_to_new[i] = j
    if num_new == len(table):
        return
    new_table = [None] * num_new
    for i, j in enumerate(old_to_new):
        if j >= 0 and new_table[j] is None:
            new_table[j] = table[i]
    setattr(computation, table_name, new_table)
    for c in users:
        setattr(c, field, old_to_new[getattr(c, field)])


def _renumber_memos(propagates, backprops):
    """Memo indexes become 1, 2, ... in the order of their propagates."""
    propagate_of = {}
    backprop_of = {}
    order = []
    backprop = int(CommandType.kBackprop)
    for c in propagates:
        if c.arg5 > 0:
            propagate_of[c.arg5] = c
            order.append(c.arg5)
    for c in backprops:
        if c.command_type == backprop and c.arg7 > 0:
            backprop_of[c.arg7] = c
    for new, old in enumerate(order, 1):
        propagate_of[old].arg5 = new
        b = backprop_of.get(old)
        if b is not None:
            b.arg7 = new


def renumber_computation(computation):
    """Kaldi's RenumberComputation: removes unused matrices, submatrices and
    index tables and duplicates among them, in Kaldi's order of steps."""
    # 2a. which submatrices the commands' fields refer to; this also lists
    # the commands that use indexes_multi (the scan does not read their
    # indexes_multi field, which step 1 may change).
    subs = computation.submatrices
    num_sub = len(subs)
    used = bytearray(num_sub)
    if num_sub:
        used[0] = 1
    multi_users, index_users, range_users, propagates, backprops = \
        scan_commands(computation.commands, used)
    # 1. indexes_multi entries no command uses.
    _remove_unused_indexes_multi(computation, multi_users)
    # 2b. which submatrices the remaining indexes_multi entries refer to.
    scan_indexes_multi(computation.indexes_multi, used)
    # 3. old -> new maps; identical submatrices collapse onto the first.
    # (Submatrix fields are >= 0 in a valid computation; 0, "none", is the
    # empty submatrix, always kept.)
    new_subs, old_to_new_sub, mat_used = renumber_submatrices(
        subs, used, len(computation.matrices))
    # 4. apply to submatrices, then matrices.
    if len(new_subs) != num_sub:    # else every submatrix keeps its number
        map_submatrix_fields(computation.commands, old_to_new_sub)
        map_indexes_multi(computation.indexes_multi, old_to_new_sub)
    computation.submatrices = new_subs
    computation.matrices = [m for m, u in zip(computation.matrices, mat_used) if u]
    if computation.matrix_debug_info:
        computation.matrix_debug_info = [d for d, u in zip(computation.matrix_debug_info,
                                                           mat_used) if u]
    # 5. index tables.
    _dedup_tables(computation, "indexes_multi", multi_users, "arg2")
    _dedup_tables(computation, "indexes", index_users, "arg3")
    _dedup_tables(computation, "indexes_ranges", range_users, "arg3")
    _renumber_memos(propagates, backprops)


def _remove_unused_indexes_multi(computation, users):
    """Drops the indexes_multi entries none of ``users`` (every command that
    uses indexes_multi) refers to."""
    table = computation.indexes_multi
    if not table:
        return
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
    computation.commands = without_no_ops(computation.commands)
