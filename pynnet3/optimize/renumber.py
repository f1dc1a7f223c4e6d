"""Kaldi's RenumberComputation (ComputationRenumberer) and RemoveNoOps.

After passes have rewritten commands, a computation may hold matrices and
submatrices no command refers to, duplicate submatrices, and unused or
duplicate ``indexes`` / ``indexes_multi`` / ``indexes_ranges`` tables.
:func:`renumber_computation` removes all of these and renumbers every
reference, keeping the relative order of what survives (so the result is the
one Kaldi prints); memo indexes are made consecutive in propagate order.

The loops over the command list (which fields hold submatrices: Kaldi's
IdentifySubmatrixArgs) are in ``pynnet3/_fast/renumber_kernel.pyx``, with the twin
``pynnet3.optimize.renumber_py``.
"""

from .. import _fast
from ..compiler.computation import CommandType
from . import renumber_py as _py

# The per-command loops: compiled unless the user chose the twins (or the
# extension is not built: then pynnet3._fast warns once).
_impl = _fast.load("renumber_kernel") or _py


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
        _impl.scan_commands(computation.commands, used)
    # 1. indexes_multi entries no command uses.
    _remove_unused_indexes_multi(computation, multi_users)
    # 2b. which submatrices the remaining indexes_multi entries refer to.
    _impl.scan_indexes_multi(computation.indexes_multi, used)
    # 3. old -> new maps; identical submatrices collapse onto the first.
    # (Submatrix fields are >= 0 in a valid computation; 0, "none", is the
    # empty submatrix, always kept.)
    new_subs, old_to_new_sub, mat_used = _impl.renumber_submatrices(
        subs, used, len(computation.matrices))
    # 4. apply to submatrices, then matrices.
    if len(new_subs) != num_sub:    # else every submatrix keeps its number
        _impl.map_submatrix_fields(computation.commands, old_to_new_sub)
        _impl.map_indexes_multi(computation.indexes_multi, old_to_new_sub)
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
    computation.commands = _impl.without_no_ops(computation.commands)
