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

from ..compile.computation import CommandType as C, MatrixStrideType
from .analysis import Analyzer, matrix_access_summary
from .computation_edit import commands_of_types
from .looped import fix_goto_label
from .renumber import remove_no_ops


def move_sizing_commands(nnet, computation):
    """Reorders allocation/zeroing pairs and deallocations (stable sort on
    positions scaled by 3, so "just before" is 3k-1 and "just after" 3k+1)."""
    analyzer = Analyzer().init(nnet, computation)
    commands = computation.commands
    n = len(commands)
    alloc_type, set_const = int(C.kAllocMatrix), int(C.kSetConst)
    is_pair = [False] * n
    for i in commands_of_types(computation, (C.kAllocMatrix,)):
        if i + 1 < n:
            a, b = commands[i], commands[i + 1]
            if b.command_type == set_const and a.arg1 == b.arg1 and b.alpha == 0.0:
                is_pair[i] = True
    position = [3 * i for i in range(n)]
    summary = matrix_access_summary(analyzer.matrix_accesses)
    dealloc_type = int(C.kDeallocMatrix)
    for m in range(1, len(summary.first_access)):
        first = summary.first_access[m]
        alloc = summary.allocate_command[m]
        if alloc != -1 and commands[alloc].command_type == alloc_type:
            if first == alloc + 1 and is_pair[alloc]:
                first = summary.second_access[m]
            if first != -1:
                assert first > alloc
                position[alloc] = 3 * first - 1
        dealloc = summary.deallocate_command[m]
        last = summary.last_access[m]
        if dealloc != -1 and last != -1 and commands[dealloc].command_type == dealloc_type:
            position[dealloc] = 3 * last + 1
    if commands_of_types(computation, (C.kGotoLabel,)):
        raise AssertionError("move_sizing_commands cannot run after looped optimization")
    # Python's sort is stable: equal positions keep their old order.
    order = sorted(range(n), key=position.__getitem__)
    reordered = []
    for old in order:
        if old > 0 and is_pair[old - 1]:
            continue            # the zeroing travels with its allocation
        reordered.append(commands[old])
        if is_pair[old]:
            reordered.append(commands[old + 1])
    computation.commands = reordered


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
