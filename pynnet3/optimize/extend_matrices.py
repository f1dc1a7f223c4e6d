"""Kaldi's ExtendMatrices (MatrixExtender, nnet-optimize-utils.cc).

In TDNNs a matrix is often copied whole into the last rows of a slightly
larger one (``dest(rows r..end) = src(most of its rows)``), which blocks
merging the two. Where the copied part of ``src`` starts at row 0, spans all
its columns, covers at least 80% of its original rows but not all of them,
and the destination part ends at the destination's original last row, the
destination matrix is made taller so the copy can take all of ``src``'s
rows; the copy then is of whole matrices and VariableMergingOptimizer can
merge it away. Inputs and outputs are never extended. The added rows hold
nothing anybody reads; their debug cindexes repeat earlier rows' with
``t = kNoTime``.
"""

import numpy as np

from ..compiler.computation import CommandType as C, LazyMatrixDebugInfo, SubMatrixInfo
from ..common.index import kNoTime
from .command_types import commands_of_types
from .computation_edit import get_whole_submatrices
from .renumber import renumber_computation

# Kaldi's threshold is a BaseFloat; the comparison is done in float32.
_MIN_PROPORTION = np.float32(0.8)


def extend_matrices(computation):
    """Extends destination matrices of near-whole copies (see the module
    docstring); returns nothing, renumbering only if something changed."""
    subs = computation.submatrices
    mats = computation.matrices
    orig_num_rows = [m.num_rows for m in mats]
    is_io = [False] * len(mats)
    commands = computation.commands
    swap, copy_type = int(C.kSwapMatrix), int(C.kMatrixCopy)
    copies = []
    for i in commands_of_types(computation, (C.kSwapMatrix, C.kProvideOutput,
                                             C.kAcceptInput, C.kMatrixCopy)):
        c = commands[i]
        t = c.command_type
        if t == swap:
            raise AssertionError("extend_matrices must run before any kSwapMatrix exists")
        if t == copy_type:
            copies.append(c)
        else:
            is_io[subs[c.arg1].matrix_index] = True
    # Kaldi compares with min_proportion * num_rows in float32; the products
    # for every matrix at once
    min_rows = (_MIN_PROPORTION * np.array(orig_num_rows, dtype=np.float32)).tolist()
    changed = False
    extended = set()        # matrices made taller
    for c in copies:
        if c.alpha != 1.0:
            continue
        dest, src = subs[c.arg1], subs[c.arg2]
        if src.matrix_index == dest.matrix_index or is_io[dest.matrix_index]:
            continue
        src_mat = mats[src.matrix_index]
        if src.num_rows < min_rows[src.matrix_index]:
            continue
        if not (src.col_offset == 0 and src.num_cols == src_mat.num_cols
                and src.row_offset == 0 and src.num_rows < src_mat.num_rows
                and dest.row_offset + dest.num_rows == orig_num_rows[dest.matrix_index]):
            continue
        dest_mat = mats[dest.matrix_index]
        new_rows = dest.row_offset + src_mat.num_rows
        if new_rows > dest_mat.num_rows:
            dest_mat.num_rows = new_rows
            subs.append(SubMatrixInfo(dest.matrix_index, 0, new_rows, 0, dest_mat.num_cols))
            extended.add(dest.matrix_index)
        c.arg1 = len(subs)
        subs.append(SubMatrixInfo(dest.matrix_index, dest.row_offset, src_mat.num_rows,
                                  dest.col_offset, dest.num_cols))
        c.arg2 = len(subs)
        subs.append(SubMatrixInfo(src.matrix_index, 0, src_mat.num_rows, 0,
                                  src_mat.num_cols))
        changed = True
    if changed:
        _fix_computation(computation, orig_num_rows, sorted(extended))


def _fix_computation(computation, orig_num_rows, extended):
    """Points allocations, deallocations and whole-matrix zeroings of
    extended matrices (``extended``, in order) at the new whole submatrices,
    fixes their debug info, and renumbers."""
    subs = computation.submatrices
    mats = computation.matrices
    whole = get_whole_submatrices(computation)
    sizing = (int(C.kAllocMatrix), int(C.kDeallocMatrix))
    set_const = int(C.kSetConst)
    commands = computation.commands
    for i in commands_of_types(computation, (C.kAllocMatrix, C.kDeallocMatrix, C.kSetConst)):
        c = commands[i]
        t = c.command_type
        if t in sizing:
            c.arg1 = whole[subs[c.arg1].matrix_index]
        elif t == set_const and c.alpha == 0.0:
            info = subs[c.arg1]
            m = info.matrix_index
            if whole[m] != c.arg1 and (
                    info.row_offset == 0 and info.col_offset == 0
                    and info.num_cols == mats[m].num_cols
                    and info.num_rows == orig_num_rows[m]):
                c.arg1 = whole[m]
    debug = computation.matrix_debug_info
    if debug:
        for m in extended:
            info = debug[m]
            pending = info.pending() if isinstance(info, LazyMatrixDebugInfo) else None
            if pending is None:
                _pad_cindexes(info.cindexes, mats[m].num_rows)
                continue
            # not built yet: build it padded when it is first read
            old_rows, min_n, build, args = pending
            if mats[m].num_rows != old_rows:
                debug[m] = LazyMatrixDebugInfo(info.is_deriv, mats[m].num_rows, min_n,
                                               _padded_cindexes,
                                               (build, args, mats[m].num_rows))
    renumber_computation(computation)


def _pad_cindexes(cindexes, num_rows):
    """Extends a matrix's debug Cindexes to ``num_rows`` rows: each added row
    repeats the row that many rows earlier, with t = kNoTime."""
    old_rows = len(cindexes)
    extra = num_rows - old_rows
    assert 0 <= extra <= old_rows
    for r in range(old_rows, num_rows):
        node, index = cindexes[r - extra]
        cindexes.append((node, type(index)(index[0], kNoTime, index[2])))


def _padded_cindexes(build, args, num_rows):
    cindexes = build(*args)
    _pad_cindexes(cindexes, num_rows)
    return cindexes
