"""Kaldi's MoveSizingCommands and RemoveUnnecessaryAllocation
(nnet-optimize.cc): where matrices are allocated and freed.

move_sizing_commands: each allocation (with the zeroing right after it, as a
unit) moves to just before the matrix's first other access, and each
deallocation to just after its last access, so fewer matrices are alive at
once. Inputs (kAcceptInput) and outputs (kProvideOutput) stay in place.

remove_unnecessary_allocation ("allocate from other"): a deallocation
followed later by an allocation of a matrix of the same size and stride
becomes one kSwapMatrix at the allocation, reusing the freed memory.
"""

import bisect

import numpy as np

from ..compiler.computation import CommandType as C, MatrixStrideType
from .analysis import Analyzer, matrix_access_summary
from .command_types import command_type_bytes
from .command_types import commands_of_types
from .computation_edit import fix_goto_label
from .renumber import remove_no_ops


def move_sizing_commands(nnet, computation):
    """Reorders allocation/zeroing pairs and deallocations (stable sort on
    positions scaled by 3, so "just before" is 3k-1 and "just after" 3k+1).
    The positions are computed and sorted as NumPy arrays over the analysis'
    per-matrix summary; only the commands themselves are Python objects."""
    analyzer = Analyzer().init(nnet, computation)
    commands = computation.commands
    n = len(commands)
    if n == 0:
        return
    types = np.frombuffer(command_type_bytes(commands), dtype=np.uint8)
    if (types == int(C.kGotoLabel)).any():
        raise AssertionError("move_sizing_commands cannot run after looped optimization")
    alloc_type, dealloc_type = int(C.kAllocMatrix), int(C.kDeallocMatrix)
    set_const = int(C.kSetConst)
    # an allocation directly followed by the zeroing of the same submatrix
    # moves with it, as one unit
    is_pair = np.zeros(n + 1, dtype=bool)
    for i in np.flatnonzero(types[:-1] == alloc_type).tolist():
        a, b = commands[i], commands[i + 1]
        if b.command_type == set_const and a.arg1 == b.arg1 and b.alpha == 0.0:
            is_pair[i] = True
    summary = matrix_access_summary(analyzer.matrix_accesses)
    position = np.arange(n, dtype=np.int64) * 3
    # per matrix (from m1): where its allocation goes, just before its first
    # other access ...
    alloc = np.array(summary.allocate_command[1:], dtype=np.int64)
    first = np.array(summary.first_access[1:], dtype=np.int64)
    second = np.array(summary.second_access[1:], dtype=np.int64)
    at = np.maximum(alloc, 0)
    moves = (alloc != -1) & (types[at] == alloc_type)
    first = np.where((first == alloc + 1) & is_pair[at], second, first)
    moves &= first != -1
    assert (first[moves] > alloc[moves]).all()
    position[alloc[moves]] = 3 * first[moves] - 1
    # ... and its deallocation, just after its last access
    dealloc = np.array(summary.deallocate_command[1:], dtype=np.int64)
    last = np.array(summary.last_access[1:], dtype=np.int64)
    at = np.maximum(dealloc, 0)
    moves = (dealloc != -1) & (last != -1) & (types[at] == dealloc_type)
    position[dealloc[moves]] = 3 * last[moves] + 1
    order = np.argsort(position, kind="stable")
    # The zeroing of a pair is not placed by its own position: it follows
    # its allocation.
    follows = np.zeros(n, dtype=bool)
    follows[1:] = is_pair[:n - 1]
    placed = order[~follows[order]]
    units = 1 + is_pair[placed]
    new_order = np.repeat(placed, units)
    new_order[(np.cumsum(units) - 1)[units == 2]] += 1
    computation.commands = [commands[i] for i in new_order.tolist()]


def _command_pairs(deallocs, allocs):
    """Pairs (d, a) with d < a, each command used at most once: from the
    latest deallocation backwards, each takes the earliest free allocation
    after it."""
    free = sorted(allocs)
    pairs = []
    for d in reversed(deallocs):
        i = bisect.bisect_right(free, d)
        if i == len(free):
            continue
        pairs.append((d, free.pop(i)))
    return pairs


def remove_unnecessary_allocation(nnet, computation):
    """Replaces (deallocate X, ..., allocate Y of X's size) by a swap."""
    lists = {}
    commands = computation.commands
    dealloc_type = int(C.kDeallocMatrix)
    default_stride = MatrixStrideType.kDefaultStride
    mats, subs = computation.matrices, computation.submatrices
    for index in commands_of_types(computation, (C.kAllocMatrix, C.kDeallocMatrix)):
        c = commands[index]
        m = mats[subs[c.arg1].matrix_index]
        sign = 1 if m.stride_type == default_stride else -1
        deallocs, allocs = lists.setdefault((m.num_rows, m.num_cols * sign), ([], []))
        (deallocs if c.command_type == dealloc_type else allocs).append(index)
    for deallocs, allocs in lists.values():
        for d, a in _command_pairs(deallocs, allocs):
            dealloc, alloc = commands[d], commands[a]
            dealloc.command_type = C.kNoOperation
            alloc.arg2 = dealloc.arg1
            alloc.command_type = C.kSwapMatrix
    remove_no_ops(computation)
    fix_goto_label(computation)
