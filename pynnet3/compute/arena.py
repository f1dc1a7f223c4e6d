"""Static memory planning: every matrix of a computation placed in one
buffer (an *arena*) at plan time, so that running the computation
allocates nothing.

A computation's command list says exactly when each matrix comes to life
(kAllocMatrix, kAcceptInput, kDecompressMatrix) and when it dies
(kDeallocMatrix, kCompressMatrix); kSwapMatrix only exchanges which matrix
index names which block. :func:`plan_arena` walks the commands once, gives
each block an offset with first-fit over the free space (as a heap
allocator would, but once, at plan time) and returns a
:class:`ArenaPlan`: the offset of the block each allocating command
creates and the arena's size. Blocks that reach a kProvideOutput (the
outputs the caller takes away; unless the caller copies its outputs out
before the next run: ``outputs_in_arena``), empty matrices and, in
computations with loops (kGotoLabel), everything are left out: those
commands allocate a fresh matrix as before.

Guarantees: two blocks that are alive at the same time never overlap, so a
run with the arena computes what a run with one allocation per matrix
computes (Kaldi's way); the arena is at most the sum of the blocks and
usually near the peak of live matrix memory (Kaldi's
``peak_matrix_bytes``); a block's offset is a multiple of 16 floats (64
bytes). Like Kaldi's freshly allocated matrices, a block holds whatever
was there before (undefined values).

:class:`Workspace` is the arena memory itself. A plan owns one, or several
plans share one when the caller runs them strictly one after the other
(:class:`~pynnet3.compute.utterance.SimpleNnetComputer` shares one among
its chunk shapes): it grows to the largest arena asked of it, and when it
grows the plans let go of the array it replaces, so that only one array
is alive however many shapes share it.
"""

import weakref

from ..compiler.computation import CommandType, has_loops

__all__ = ["ArenaPlan", "Workspace", "plan_arena"]

T = CommandType
_ALIGN = 16      # floats (64 bytes)


class ArenaPlan:
    """``offsets``: command index -> offset (in floats) of the block that
    command allocates; commands not in it allocate a fresh matrix.
    ``scratch_offsets``: the offset of each scratch block asked for.
    ``size``: floats the arena needs."""

    __slots__ = ("offsets", "scratch_offsets", "size")

    def __init__(self, offsets, size, scratch_offsets=()):
        self.offsets = offsets
        self.scratch_offsets = list(scratch_offsets)
        self.size = size


class Workspace:
    """The float32 memory behind one or more arenas (see the module
    docstring); :meth:`array` gives a 1-D array of at least ``size``
    floats, reallocated (and so a different object) when it must grow.

    A plan keeps views of the array it ran in, to run again without
    rebuilding them; it registers with :meth:`hold`, and its ``release()``
    drops them when the array is replaced. So the old array is freed as
    soon as no computer runs in it: the memory of the largest arena, not
    of every size seen. (Holders are weakly referenced: a plan its owner
    drops is not kept alive by the workspace.)"""

    __slots__ = ("backend", "_array", "_holders")

    def __init__(self, backend):
        self.backend = backend
        self._array = None
        self._holders = weakref.WeakSet()

    def array(self, size):
        if self._array is None or self._array.shape[0] < size:
            for holder in list(self._holders):
                holder.release()
            self._holders.clear()
            self._array = None      # let the old one go before taking the new one
            self._array = self.backend.empty(1, max(size, 1)).reshape(-1)
        return self._array

    def hold(self, holder):
        """Registers ``holder`` (an object with ``release()``) as keeping
        views of the current array."""
        self._holders.add(holder)

    @property
    def nbytes(self):
        return 0 if self._array is None else self._array.nbytes


def _matrix(computation, s):
    return computation.submatrices[s].matrix_index


def plan_arena(computation, outputs_in_arena=False, narrowed=None, scratches=()):
    """The :class:`ArenaPlan` of a computation (see the module docstring);
    None for a computation with loops. ``narrowed``: {matrix index: the
    number of columns to allocate it with} for matrices whose other
    columns nothing reads or writes (a plan's shifted splices).
    ``scratches``: ``(first command, floats, last command)`` of memory the
    plan's own operations need from the first command to the last (placed
    as a matrix allocated at the first command and freed after the last)."""
    commands = computation.commands
    if has_loops(computation):
        return None
    matrices = computation.matrices
    # Pass 1: the blocks, as (allocating command, floats, end command),
    # following matrix indexes through swaps; outputs are external.
    owner = {}              # matrix index -> block id
    blocks = []             # [command, floats, end]
    external = set()
    num_commands = len(commands)

    narrowed = narrowed or {}

    def begin(i, m):
        info = matrices[m]
        owner[m] = len(blocks)
        blocks.append([i, info.num_rows * narrowed.get(m, info.num_cols), num_commands])

    def end(i, m):
        b = owner.pop(m, None)
        if b is not None:
            blocks[b][2] = i

    for i, c in enumerate(commands):
        t = c.command_type
        if t in (T.kAllocMatrix, T.kDecompressMatrix):
            begin(i, _matrix(computation, c.arg1))
        elif t == T.kAcceptInput:
            begin(i, _matrix(computation, c.arg1))
        elif t in (T.kDeallocMatrix, T.kCompressMatrix):
            end(i, _matrix(computation, c.arg1))
        elif t == T.kSwapMatrix:
            m1, m2 = _matrix(computation, c.arg1), _matrix(computation, c.arg2)
            b1, b2 = owner.pop(m1, None), owner.pop(m2, None)
            if b2 is not None:
                owner[m1] = b2
            if b1 is not None:
                owner[m2] = b1
        elif t == T.kProvideOutput and not outputs_in_arena:
            b = owner.get(_matrix(computation, c.arg1))
            if b is not None:
                external.add(b)
    first_scratch = len(blocks)
    for first, floats, last in scratches:
        # freed after the last command: blocks freed at last + 1 come first
        blocks.append([first, floats, last + 1])
    # Pass 2: first-fit placement in command order. ``free`` holds
    # (offset, size) holes below ``top``, sorted by offset.
    events = []
    for b, (start, floats, stop) in enumerate(blocks):
        if b in external or floats == 0 or commands[start].command_type == T.kDecompressMatrix:
            continue
        events.append((start, 1, b))
        events.append((stop, 0, b))      # frees sort before allocations at one index
    events.sort()
    free = []
    top = high = 0
    offsets = {}
    scratch_offsets = [0] * len(scratches)
    placed = {}
    for _, is_alloc, b in events:
        if not is_alloc:
            if b in placed:
                _release(free, placed.pop(b))
                if free and free[-1][0] + free[-1][1] == top:
                    top = free.pop()[0]
            continue
        size = -(-blocks[b][1] // _ALIGN) * _ALIGN
        offset = None
        for k, (hole, hole_size) in enumerate(free):
            if hole_size >= size:
                offset = hole
                if hole_size == size:
                    del free[k]
                else:
                    free[k] = (hole + size, hole_size - size)
                break
        if offset is None:
            offset = top
            top += size
            high = max(high, top)
        placed[b] = (offset, size)
        if b < first_scratch:
            offsets[blocks[b][0]] = offset
        else:
            scratch_offsets[b - first_scratch] = offset
    return ArenaPlan(offsets, high, scratch_offsets)


def _release(free, block):
    """Returns ``block`` (offset, size) to the sorted hole list, merging
    it with its neighbours."""
    offset, size = block
    lo, hi = 0, len(free)
    while lo < hi:
        mid = (lo + hi) // 2
        if free[mid][0] < offset:
            lo = mid + 1
        else:
            hi = mid
    k = lo
    if k < len(free) and offset + size == free[k][0]:
        size += free[k][1]
        del free[k]
    if k > 0 and free[k - 1][0] + free[k - 1][1] == offset:
        offset = free[k - 1][0]
        size += free[k - 1][1]
        k -= 1
        del free[k]
    free.insert(k, (offset, size))
