"""A TDNN layer's spliced input, multiplied without being built.

Kaldi's optimizer builds the input of a layer like ``Append(tdnn1, Offset(tdnn1,
1), Offset(tdnn1, 2))`` in place: the matrix M that holds tdnn1's output in
its first d columns is allocated K times as wide, K - 1 kMatrixCopy commands
copy row-shifted parts of those d columns into the other column blocks, and
an affine kPropagate multiplies rows [r, r + n) of the whole width by the
weights. On the TDNN-LSTM of scripts/bench_compute.py that matrix (1218 x 3072
for 6 chunks) was most of a computation's memory.

:func:`find_shifted_splices` finds that pattern; the plan then allocates M
only d columns wide, skips the copies and runs the product as
:func:`shifted_products`: ``out = sum_k M[r + s_k : r + s_k + n, 0:d] @
W[:, k d : (k + 1) d]^T``, each block of rows straight from M (the bias is
left to the caller, as ``propagate_deferring_bias`` leaves it).

Guarantee: the fused product is the same sum, added block by block: within
float32 rounding of the unfused one (not bit for bit: one product over all
K d columns adds its terms in another order). Three evenly spaced blocks
go through Winograd's minimal filtering where it gains
(:mod:`pynnet3.components.winograd`: 4 products for 6).
The pattern is taken only when nothing else can see the difference: the
wide columns are touched by nothing but those copies and that product,
nothing touches M between the first copy and the product, and M is not an
input, an output or swapped.
"""

from dataclasses import dataclass

import numpy as np

from ..compiler.computation import CommandType, command_touches, has_loops
from ..components import winograd
from ..components.affine import AffineTransform
from ..components.products import sum_of_products

__all__ = ["ShiftedSplice", "affine_propagates", "find_shifted_splices", "shifted_products"]

T = CommandType
# The accumulated products go through a scratch of at most this many bytes
# (a cache-sized block of output rows, never less than _MIN_ROWS_PER_STEP):
# each product keeps enough rows for BLAS's full speed. On the x-vector's
# 512-column layers (before they went to F(2, 3)) 1024-row blocks ran 2-3%
# faster than 256-row ones (AMD EPYC, Zen 4: 103 against 100 GFLOPS).
_SCRATCH_BYTES = 2 << 20
_MIN_ROWS_PER_STEP = 256


@dataclass(slots=True)
class ShiftedSplice:
    """One found pattern: ``propagate`` (command index) multiplies rows
    ``[row_offset, row_offset + num_rows)`` of matrix ``matrix`` whose
    column block k is its first ``width`` columns shifted down by
    ``shifts[k]`` rows (``shifts[0]`` is 0: the block itself); ``copies``
    are the command indexes that built the other blocks."""

    propagate: int
    copies: list
    matrix: int
    width: int
    row_offset: int
    num_rows: int
    shifts: list


def shifted_products(params, base, splice, out):
    """``out = sum_k base[r + s_k : r + s_k + n] @ params[:, k d:(k+1) d].T``
    (r, n, s_k, d from ``splice``; ``base`` is the matrix's d columns)."""
    d, n, r = splice.width, splice.num_rows, splice.row_offset
    starts = [r + s for s in splice.shifts]
    if winograd.usable(starts, 1, n, d, out.shape[1]):
        # three evenly spaced offsets (Append(-s, 0, s)): fewer products
        winograd.convolution_products([params[:, k * d:(k + 1) * d].T
                                       for k in range(len(starts))], base, starts, 1, out)
        return
    pairs = [(base[start:start + n], params[:, k * d:(k + 1) * d].T)
             for k, start in enumerate(starts)]
    sum_of_products(np, pairs, out, max_scratch_rows=max(
        _MIN_ROWS_PER_STEP, _SCRATCH_BYTES // (4 * out.shape[1])))


def find_shifted_splices(computation, nnet, touches=None):
    """``{propagate command index: ShiftedSplice}`` of a computation (see
    the module docstring); empty for a computation with loops.
    ``touches``: ``command_touches(computation)``, if already made."""
    if has_loops(computation):
        return {}
    if touches is None:
        touches = command_touches(computation)
    found = {}
    for i, c in affine_propagates(computation, nnet):
        splice = _splice_of(computation, touches, i, c)
        if splice is not None:
            found[i] = splice
    return found


def affine_propagates(computation, nnet):
    """``(command index, command)`` of each kPropagate of an affine
    component (:class:`~pynnet3.components.affine.AffineTransform`) that
    stores no stats and keeps no memo: the products the plan may rewrite."""
    components = nnet.components
    for i, c in enumerate(computation.commands):
        if (c.command_type == T.kPropagate and c.arg5 == 0 and c.arg6 == 0
                and 0 <= c.arg1 < len(components)
                and isinstance(components[c.arg1], AffineTransform)):
            yield i, c


def _splice_of(computation, touches, p, c):
    subs = computation.submatrices
    commands = computation.commands
    if not (0 < c.arg3 < len(subs) and 0 < c.arg4 < len(subs)):
        return None
    inp = subs[c.arg3]
    m = inp.matrix_index
    info = computation.matrices[m]
    if subs[c.arg4].matrix_index == m or inp.col_offset != 0 or inp.num_cols != info.num_cols:
        return None
    r, n = inp.row_offset, inp.num_rows
    copies, blocks = [], {}          # column offset -> row shift
    width = None
    for j, s in touches.get(m, ()):
        t = commands[j].command_type
        if j == p or t in (T.kAllocMatrix, T.kDeallocMatrix):
            continue
        if t in (T.kSwapMatrix, T.kAcceptInput, T.kProvideOutput) or s < 0:
            return None
        if t == T.kMatrixCopy and j < p and s == commands[j].arg1:
            dest, src = subs[commands[j].arg1], subs[commands[j].arg2]
            if (src.matrix_index == m and commands[j].alpha == 1.0 and src.col_offset == 0
                    and dest.row_offset == r and dest.num_rows == n
                    and dest.num_cols == src.num_cols and dest.col_offset > 0):
                if width is None:
                    width = src.num_cols
                if src.num_cols == width and dest.col_offset not in blocks:
                    blocks[dest.col_offset] = src.row_offset - r
                    copies.append(j)
                    continue
            return None
    if width is None or info.num_cols % width:
        return None
    k = info.num_cols // width
    if sorted(blocks) != [b * width for b in range(1, k)]:
        return None
    # every other command on m stays inside its first ``width`` columns, and
    # none runs between the first copy and the product
    first = min(copies)
    for j, s in touches.get(m, ()):
        if j == p or j in copies:
            continue
        t = commands[j].command_type
        whole = t in (T.kAllocMatrix, T.kDeallocMatrix) or (
            t == T.kSetConst and commands[j].alpha == 0.0 and j < first)
        if not whole and subs[s].col_offset + subs[s].num_cols > width:
            return None
        if first < j < p:
            return None
    shifts = [0] + [blocks[b * width] for b in range(1, k)]
    if any(r + sh < 0 or r + sh + n > info.num_rows for sh in shifts):
        return None
    return ShiftedSplice(p, sorted(copies), m, width, r, n, shifts)
