"""A recurrent layer's affine on ``Append(x(t), r(t - d))``: the x part
multiplied for many steps at once, ahead of the recurrence.

An LSTM layer of Kaldi's xconfigs (lstm-layer, lstmp-layer,
fast-lstmp-layer, their BLSTM forms) multiplies, at every time step, its
weights by ``Append(x(t), IfDefined(Offset(r, -d)))``: the layer below's
output and the recurrent projection of an earlier step. Kaldi's compiler
makes one step out of each time (all chunks of the computation as rows):
x(t) and r(t - d) are put side by side in a matrix M (by kMatrixCopy
commands, or written there in place by the products that make them), then
the affine kPropagate multiplies M. Each of those products has a row per
chunk and the whole weight matrix, which BLAS packs again at every call:
on the TDNN-LSTM of scripts/bench_compute.py (1280 x 4096 weights) they
ran at 20-22 GFLOPS and took 62% of the CPU time.

x does not depend on the recurrence, so its part is hoisted out of it: the
first step of a *block* of steps of one component gathers the x rows of
all the block's steps into a scratch matrix G and multiplies G by the
weights' x columns in one product near the CPU's peak rate, into a scratch
matrix P, bias added. Every step of the block then multiplies only M's
other columns and adds its rows of P: ``out = M[:, w:] W[:, w:]^T + (x
W[:, :w]^T + b)``.

:func:`find_hoisted_products` finds the steps and blocks; the plan gives
each component's steps one scratch block in its arena (G and P), alive
from the component's first hoisted product to its last.

Which columns are hoisted. A step's input columns are *segments*: those
the last plain kMatrixCopy commands into M put there (alpha 1, whole
rows of the input, from another matrix; nothing but reads of M between
them and the product), each a submatrix of its source as it was at the
copy; the others are M's own, cut where the column ranges of M's writes
begin and end, as they are at the product. A block's first step gives its
rows from its own input; each later step's leading segments whose source
nothing writes (or frees, or swaps) between the segment's copy (or
product) and the block's first product give its rows there, so the rows
gathered are the rows the step multiplies. The first w columns are
hoisted when every later step of the block can give them, with the same
segment layout. A recurrent state fails that test by itself (the steps in
between compute it), so w stops before it; a block with nothing left
(w = all the columns: no recurrence) is not made.

Guarantee: each step's output is the same sum of products as the unfused
product's, added in another order: within float32 rounding of it (not bit
for bit).
"""

import bisect
from dataclasses import dataclass, field

import numpy as np

from ..compiler.computation import CommandType, command_touches, has_loops
from ..components.products import few_rows_product
from .shifted_splice import affine_propagates

__all__ = ["HoistedBlock", "HoistedStep", "Segment", "find_hoisted_products",
           "run_hoisted_step"]

T = CommandType
# A block has at most this many rows (but at least one step's), and its
# scratch (G and P) at most _SCRATCH_BYTES. On the bench TDNN-LSTM's 1024 x
# 4096 x part, 60 rows ran at 114 GFLOPS, 126 at 116 and all 408 rows of a
# computation at once at 128 (AMD EPYC, Zen 4): 64 rows keep nearly all of
# the gain for half the scratch of 128 (1.3 MB a thread there).
_MAX_ROWS = 64
_SCRATCH_BYTES = 3 << 20

# Commands that read their second submatrix argument and write only their first.
_COPYING = (T.kMatrixCopy, T.kMatrixAdd, T.kCopyRows, T.kAddRows)
# Commands that change a whole matrix, whatever submatrix they name.
_WHOLE_MATRIX = (T.kAllocMatrix, T.kDeallocMatrix, T.kSwapMatrix, T.kAcceptInput,
                 T.kCompressMatrix, T.kDecompressMatrix)


@dataclass(slots=True)
class Segment:
    """Columns ``[col_offset, col_offset + width)`` of a step's input are
    rows ``[row_offset, row_offset + num_rows)``, columns ``[source_col,
    source_col + width)`` of matrix ``matrix`` as they were at command
    ``ready``: the kMatrixCopy that put them there, or, for columns no copy
    wrote (M's own, written earlier), the product itself."""

    ready: int
    col_offset: int
    width: int
    matrix: int
    row_offset: int
    num_rows: int
    source_col: int


@dataclass(slots=True)
class HoistedBlock:
    """Steps whose first ``width`` input columns are multiplied together,
    ``num_rows`` rows in all, into the plan's scratch number ``scratch``
    when command ``first`` (the block's first product) runs."""

    first: int
    width: int
    num_rows: int = 0
    scratch: int = -1
    steps: list = field(default_factory=list)


@dataclass(slots=True)
class HoistedStep:
    """The kPropagate ``propagate``: ``num_rows`` input rows whose columns
    are ``segments`` (in column order, from column 0), then the rest; its
    rows are ``[block_row, block_row + num_rows)`` of its block's."""

    propagate: int
    num_rows: int
    segments: list
    block: HoistedBlock = None
    block_row: int = 0


def find_hoisted_products(computation, nnet, touches=None):
    """``(steps, scratches)``: ``{propagate command index: HoistedStep}``
    and, for each scratch, ``(first command, floats, last command)`` (the
    commands between which it is alive). Empty for a computation with
    loops. ``touches``: ``command_touches(computation)``, if already made."""
    if has_loops(computation):
        return {}, []
    if touches is None:
        touches = command_touches(computation)
    subs = computation.submatrices
    writers = _Writers(computation, touches)
    by_component = {}
    for p, c in affine_propagates(computation, nnet):
        segments = _input_segments(computation, touches, writers, p, c)
        if segments:
            by_component.setdefault(c.arg1, []).append(
                HoistedStep(p, subs[c.arg3].num_rows, segments))
    steps, scratches = {}, []
    for component, group in by_component.items():
        in_cols = nnet.components[component].input_dim()
        out_cols = nnet.components[component].output_dim()
        max_rows = min(_MAX_ROWS, _SCRATCH_BYTES // (4 * (in_cols + out_cols)))
        # one step alone gains nothing; a block without a recurrent part
        # is no recurrence (left to the plain product)
        blocks = [b for b in _blocks(group, writers, max_rows)
                  if len(b.steps) > 1 and b.width < in_cols]
        if not blocks:
            continue
        for block in blocks:
            block.scratch = len(scratches)
            for step in block.steps:
                steps[step.propagate] = step
        scratches.append((blocks[0].first,
                          max(b.num_rows * (b.width + out_cols) for b in blocks),
                          blocks[-1].steps[-1].propagate))
    return steps, scratches


def _reads_only(computation, i, s):
    """Command ``i`` only reads submatrix ``s`` (which it names)."""
    c = computation.commands[i]
    subs = computation.submatrices
    m = subs[s].matrix_index
    if c.command_type in _COPYING:
        return s == c.arg2 and subs[c.arg1].matrix_index != m
    if c.command_type == T.kPropagate:
        return s == c.arg3 and subs[c.arg4].matrix_index != m
    return False


def _input_segments(computation, touches, writers, p, c):
    """The columns of the kPropagate ``c``'s (command ``p``) input, as
    :class:`Segment` s in column order: those the last copies into it made
    (see the module docstring), and between them M's own."""
    subs = computation.submatrices
    commands = computation.commands
    if not (0 < c.arg3 < len(subs) and 0 < c.arg4 < len(subs)):
        return []
    inp = subs[c.arg3]
    m = inp.matrix_index
    if subs[c.arg4].matrix_index == m:
        return []
    copies = []
    touched = touches.get(m, ())
    for k in range(bisect.bisect_left(touched, (p, -2)) - 1, -1, -1):
        i, s = touched[k]
        if s >= 0 and _reads_only(computation, i, s):
            continue
        ci = commands[i]
        if s < 0 or ci.command_type != T.kMatrixCopy or s != ci.arg1 or ci.alpha != 1.0:
            break                       # an earlier write: the copies after it count
        dest, src = subs[ci.arg1], subs[ci.arg2]
        col = dest.col_offset - inp.col_offset
        if (src.matrix_index in (m, subs[c.arg4].matrix_index)
                or dest.row_offset != inp.row_offset or dest.num_rows != inp.num_rows
                or col < 0 or col + dest.num_cols > inp.num_cols
                or any(col < f.col_offset + f.width and f.col_offset < col + dest.num_cols
                       for f in copies)):
            break
        copies.append(Segment(i, col, dest.num_cols, src.matrix_index, src.row_offset,
                              src.num_rows, src.col_offset))
    copies.sort(key=lambda f: f.col_offset)
    # M's own columns are cut where the column ranges of its writes start
    # and end (a recurrent state written into some of them by a product)
    cuts = {inp.num_cols}
    for i, s in writers.writes(m):
        if s >= 0:
            w = subs[s]
            cuts.update(col - inp.col_offset for col in (w.col_offset, w.col_offset + w.num_cols))
    segments, col = [], 0
    for f in copies + [None]:
        end = inp.num_cols if f is None else f.col_offset
        for cut in sorted(c for c in cuts if col < c <= end):
            segments.append(Segment(p, col, cut - col, m, inp.row_offset, inp.num_rows,
                                    inp.col_offset + col))
            col = cut
        if f is not None:
            segments.append(f)
            col = f.col_offset + f.width
    return segments


class _Writers:
    """Whether anything writes (or allocates, frees, swaps) part of a
    segment's source between two commands."""

    __slots__ = ("computation", "touches", "_writes")

    def __init__(self, computation, touches):
        self.computation = computation
        self.touches = touches
        self._writes = {}

    def writes(self, m):
        """``(command index, submatrix)`` of the commands that do more than
        read matrix ``m``, in command order (submatrix -1: through an
        indexes_multi table)."""
        writes = self._writes.get(m)
        if writes is None:
            writes = self._writes[m] = [
                (i, s) for i, s in self.touches.get(m, ())
                if s < 0 or not _reads_only(self.computation, i, s)]
        return writes

    def between(self, f, first, last):
        """Anything writes what segment ``f`` reads in commands [first, last]."""
        writes = self.writes(f.matrix)
        subs = self.computation.submatrices
        commands = self.computation.commands
        for k in range(bisect.bisect_left(writes, (first, -2)), len(writes)):
            i, s = writes[k]
            if i > last:
                break
            if s < 0 or commands[i].command_type in _WHOLE_MATRIX:
                return True
            w = subs[s]
            if (w.row_offset < f.row_offset + f.num_rows and f.row_offset < w.row_offset + w.num_rows
                    and w.col_offset < f.source_col + f.width
                    and f.source_col < w.col_offset + w.num_cols):
                return True
        return False


def _hoistable_width(step, first, writers):
    """How many of ``step``'s first input columns a block computed at
    command ``first`` can hold: its leading segments whose source nothing
    writes between the segment's ``ready`` command and ``first``."""
    width = 0
    for f in step.segments:
        if writers.between(f, min(f.ready, first), max(f.ready, first)):
            break
        width += f.width
    return width


def _layout(step, width):
    return [(f.col_offset, f.width) for f in step.segments if f.col_offset < width]


def _blocks(group, writers, max_rows):
    """Splits one component's steps (in command order) into blocks of
    consecutive steps: the second fixes the block's width (the columns it
    can hold when the block is computed at the first's product, where the
    first's are all in its input); each further step joins if it holds as
    many with the same copies' layout, and the rows stay within
    ``max_rows`` (or one step's)."""
    blocks = []
    block = None
    for step in group:
        if block is not None and block.num_rows + step.num_rows <= max_rows:
            held = _hoistable_width(step, block.first, writers)
            width = block.width if block.steps[1:] else min(block.width, held)
            if (width > 0 and held >= width
                    and _layout(step, width) == _layout(block.steps[0], width)):
                block.width = width
                step.block, step.block_row = block, block.num_rows
                block.steps.append(step)
                block.num_rows += step.num_rows
                continue
        # the first step's rows are gathered from its own input, all of it
        block = HoistedBlock(step.propagate, sum(f.width for f in step.segments),
                             step.num_rows)
        step.block, step.block_row = block, 0
        block.steps.append(step)
        blocks.append(block)
    return blocks


def run_hoisted_step(computer, step, command, component, scratch):
    """Runs the kPropagate ``command`` of a hoisted step; ``scratch``: a
    1-D float32 array of its component's scratch (at least its block's
    rows x (width + the component's output dimension))."""
    block = step.block
    weights_t = np.asarray(component.linear_params).T     # (input dim, output dim)
    width, rows = block.width, block.num_rows
    out_cols = weights_t.shape[1]
    hoisted = scratch[:rows * out_cols].reshape(rows, out_cols)
    if step.propagate == block.first:
        gathered = scratch[rows * out_cols:rows * (out_cols + width)].reshape(rows, width)
        gathered[:step.num_rows] = computer._sub(command.arg3)[:, :width]
        for s in block.steps[1:]:
            for f in s.segments:
                if f.col_offset >= width:
                    break
                gathered[s.block_row:s.block_row + s.num_rows,
                         f.col_offset:f.col_offset + f.width] = computer.matrices[f.matrix][
                             f.row_offset:f.row_offset + f.num_rows,
                             f.source_col:f.source_col + f.width]
        np.matmul(gathered, weights_t[:width], out=hoisted)
        bias = np.asarray(component.bias_params)
        if bias.shape[0] != 0:
            hoisted += bias
    # (a block always leaves some columns: find_hoisted_products makes none
    # of all of them)
    out = computer._sub(command.arg4)
    few_rows_product(np, computer._sub(command.arg3)[:, width:], weights_t[width:], out)
    out += hoisted[step.block_row:step.block_row + step.num_rows]
