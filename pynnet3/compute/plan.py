"""ExecutionPlan: what NnetComputer works out once per compiled computation
and reuses for every run of it (every chunk of the same shape).

- the submatrices as (matrix, row slice, column slice) triples;
- the index tables (``indexes``, ``indexes_multi``, ``indexes_ranges``)
  converted to backend arrays, each the first time a command uses it;
- which commands run fused into one pass for the default arithmetic
  (:mod:`pynnet3.compute.fusion`: bias + ReLU + batch norm, scaled sums,
  zeroing before an adding product);
- which kSetConst(0) commands can be skipped: those whose matrix is next
  touched by a command that overwrites all of it without reading it (a
  kPropagate into the whole matrix of a component without kPropagateAdds
  or of one that zeroes its output itself, a kMatrixCopy, a kCopyRows
  with no -1 row into the whole matrix), or is next deallocated. The
  unoptimized computation zeroes every matrix it allocates; Kaldi's
  optimizer removes the same zeroing (RemoveUnnecessaryZeroing).
  Likewise a kMatrixAdd or kAddRows into the whole of a just-zeroed
  matrix is run as the copy it amounts to and the zeroing is skipped.
  Computations with loops (kGotoLabel) keep all their zeroing;
- which spliced inputs are multiplied without being built
  (:mod:`pynnet3.compute.shifted_splice`; default arithmetic): their
  matrices are allocated only as wide as the columns anything reads
  (``narrowed``), their copies skipped;
- which recurrent steps' affine products have their non-recurrent half
  multiplied ahead for several steps at once
  (:mod:`pynnet3.compute.hoisted_products`; default arithmetic), and the
  arena's scratch blocks those products go into;
- where each matrix lives (:mod:`pynnet3.compute.arena`): one buffer for
  all of them, each matrix at an offset fixed when the plan is made, so a
  run allocates nothing (and faults in no fresh pages) and needs about the
  peak of live matrix memory; a computation with loops (kGotoLabel) uses a
  pool of matrices by shape instead (kAllocMatrix takes one, kDeallocMatrix
  gives it back). Either way a matrix holds old values where Kaldi's would
  be undefined.

Guarantee: running a computation with or without a plan, and with a fresh
or a reused plan, gives the same numbers. A plan belongs to one computation,
one network (its component properties) and one backend; it is not
thread-safe (one NnetComputer at a time per plan).
"""

from ..compiler.computation import CommandType, command_touches, has_loops, touched_matrices
from ..components.base import ComponentProperty
from .arena import Workspace, plan_arena
from .fusion import find_fusions
from .hoisted_products import find_hoisted_products
from .shifted_splice import find_shifted_splices

__all__ = ["ExecutionPlan", "MatrixPool"]

T = CommandType


class MatrixPool:
    """Free matrices by shape, reused by kAllocMatrix."""

    __slots__ = ("backend", "_free")

    def __init__(self, backend):
        self.backend = backend
        self._free = {}

    def take(self, num_rows, num_cols, fill=None):
        free = self._free.get((num_rows, num_cols))
        if free:
            mat = free.pop()
            if fill is not None:
                mat[...] = fill
            return mat
        return self.backend.empty(num_rows, num_cols, fill)

    def give(self, mat):
        """Returns a matrix to the pool (only whole C-contiguous float32
        matrices, so a view or a foreign array never enters it)."""
        if mat is None or mat.base is not None or not mat.flags.c_contiguous:
            return
        self._free.setdefault(mat.shape, []).append(mat)


class ExecutionPlan:
    """See the module docstring. ``reuse_matrices``: keep the matrices'
    memory across runs (an arena, or a pool for computations with loops;
    off: allocate as Kaldi does, one matrix per kAllocMatrix).
    ``elide_zeroing``: skip the zeroing that is not needed (off: every
    command runs as written, e.g. for code that looks at matrices between
    commands). ``workspace``: a :class:`~pynnet3.compute.arena.Workspace`
    to hold the arena, shared with other plans that are never run at the
    same time as this one (None: the plan's own). ``outputs_in_arena``:
    the outputs live in the arena too, for a caller that copies them out
    before the plan runs again (else each output is a matrix of its own,
    the caller's to keep). ``like``: a plan of the same computation,
    network, backend, ``reuse_matrices`` and ``elide_zeroing``, whose
    read-only parts (submatrices, fusions, zeroing, index tables) this one
    shares: plans of one computation for several threads hold them once
    (on the BLSTM of scripts/bench_compute.py, 5 MB a chunk shape); only
    the arena and its memory are this plan's."""

    __slots__ = ("computation", "backend", "slices", "skip_zeroing", "add_as_copy", "pool",
                 "arena", "workspace", "fusions", "narrowed", "scratches", "_views",
                 "_views_array", "_scratch_arrays", "rows_cache", "multi_cache", "ranges_cache",
                 "__weakref__")

    def __init__(self, computation, nnet, backend, reuse_matrices=True, elide_zeroing=True,
                 workspace=None, outputs_in_arena=False, like=None):
        self.computation = computation
        self.backend = backend
        self._scratch_arrays = {}
        if like is not None:
            if like.computation is not computation or like.backend is not backend:
                raise ValueError("a plan can share only the parts of a plan of the same "
                                 "computation and backend")
            for name in ("slices", "rows_cache", "multi_cache", "ranges_cache", "narrowed",
                         "scratches", "skip_zeroing", "add_as_copy", "fusions"):
                setattr(self, name, getattr(like, name))
        else:
            self._make_shared_parts(nnet, elide_zeroing)
        self.arena = (plan_arena(computation, outputs_in_arena, self.narrowed, self.scratches)
                      if reuse_matrices else None)
        self.pool = MatrixPool(backend) if reuse_matrices and self.arena is None else None
        self.workspace = None
        if self.arena is not None:
            self.workspace = workspace if workspace is not None else Workspace(backend)
        self._views = None
        self._views_array = None

    def _make_shared_parts(self, nnet, elide_zeroing):
        computation = self.computation
        self.slices = [(s.matrix_index, slice(s.row_offset, s.row_offset + s.num_rows),
                        slice(s.col_offset, s.col_offset + s.num_cols))
                       for s in computation.submatrices]
        self.rows_cache = {}
        self.multi_cache = {}
        self.ranges_cache = {}
        fuses = elide_zeroing and getattr(self.backend, "fuses_elementwise", False)
        # Spliced inputs multiplied without being built (default arithmetic
        # only): their matrices are allocated only as wide as what is read.
        touches = command_touches(computation) if fuses else None
        splices = find_shifted_splices(computation, nnet, touches) if fuses else {}
        self.narrowed = {sp.matrix: sp.width for sp in splices.values()}
        # Recurrent steps whose input's x part is multiplied ahead (likewise).
        hoisted, self.scratches = (find_hoisted_products(computation, nnet, touches) if fuses
                                   else ({}, []))
        if elide_zeroing:
            self.skip_zeroing, self.add_as_copy = _unneeded_zeroing(computation, nnet)
        else:
            self.skip_zeroing = self.add_as_copy = frozenset()
        # Commands run together (default arithmetic only: see fusion.py).
        self.fusions = None
        if fuses:
            self.fusions = find_fusions(computation, nnet, self, splices, hoisted)

    def scratch(self, k):
        """The memory (1-D, float32) of the plan's scratch number ``k``
        (see ``scratches``): in the arena, or else its own array."""
        floats = self.scratches[k][1]
        if self.arena is not None:
            start = self.arena.scratch_offsets[k]
            return self.workspace.array(self.arena.size)[start:start + floats]
        array = self._scratch_arrays.get(k)
        if array is None:
            array = self._scratch_arrays[k] = self.backend.empty(1, floats).reshape(-1)
        return array

    def arena_views(self, fused=True):
        """A list, by command index, of the matrix each allocating command
        places in the arena (None: that command allocates a fresh
        matrix); None if the plan has no arena. Valid until another plan
        sharing the workspace makes it grow (which releases them).
        ``fused``: the commands run with the plan's fusions; without them,
        the narrowed matrices are allocated fresh at their full width."""
        if self.arena is None:
            return None
        if not fused and self.narrowed:
            commands = self.computation.commands
            return [None if view is not None and self.slices[commands[i].arg1][0]
                    in self.narrowed else view
                    for i, view in enumerate(self.arena_views())]
        array = self.workspace.array(self.arena.size)
        if array is not self._views_array:
            computation = self.computation
            views = [None] * len(computation.commands)
            for i, offset in self.arena.offsets.items():
                m = self.slices[computation.commands[i].arg1][0]
                rows = computation.matrices[m].num_rows
                cols = self.narrowed.get(m, computation.matrices[m].num_cols)
                views[i] = array[offset:offset + rows * cols].reshape(rows, cols)
            self._views, self._views_array = views, array
            self.workspace.hold(self)
        return self._views

    def release(self):
        """Drops the views of the workspace's array (it is being replaced:
        see :class:`~pynnet3.compute.arena.Workspace`)."""
        self._views = self._views_array = None

    def rows(self, i):
        r = self.rows_cache.get(i)
        if r is None:
            r = self.rows_cache[i] = self.backend.prepare_rows(self.computation.indexes[i])
        return r

    def multi(self, i):
        r = self.multi_cache.get(i)
        if r is None:
            r = self.multi_cache[i] = self.backend.prepare_multi(
                self.computation.indexes_multi[i])
        return r

    def ranges(self, i):
        r = self.ranges_cache.get(i)
        if r is None:
            r = self.ranges_cache[i] = self.backend.prepare_ranges(
                self.computation.indexes_ranges[i])
        return r


def _overwrites_whole(computation, nnet, c, m):
    """True if command ``c`` writes every element of matrix ``m`` without
    reading what was there."""
    subs = computation.submatrices
    t = c.command_type
    if t == T.kDeallocMatrix:
        return True
    if t == T.kPropagate:
        out_s, in_s = c.arg4, c.arg3
        if not (0 <= c.arg1 < len(nnet.components)):
            return False
        component = nnet.components[c.arg1]
        return (subs[out_s].matrix_index == m and computation.is_whole_matrix(out_s)
                and (not component.properties() & ComponentProperty.kPropagateAdds
                     or component.propagate_sets_whole_output)
                and (in_s == 0 or subs[in_s].matrix_index != m))
    if t in (T.kMatrixCopy, T.kCopyRows):
        if not (computation.is_whole_matrix(c.arg1) and subs[c.arg1].matrix_index == m
                and subs[c.arg2].matrix_index != m):
            return False
        if t == T.kMatrixCopy:
            return True
        # CopyRows with alpha 0 writes nothing; a -1 row is written as zero.
        return c.alpha != 0.0
    return False


def _adds_whole(computation, c, m):
    """True if command ``c`` adds into all of matrix ``m`` from another matrix
    (so that, on a zeroed ``m``, it equals the matching copy)."""
    subs = computation.submatrices
    if c.command_type not in (T.kMatrixAdd, T.kAddRows):
        return False
    return (computation.is_whole_matrix(c.arg1) and subs[c.arg1].matrix_index == m
            and subs[c.arg2].matrix_index != m)


def _unneeded_zeroing(computation, nnet):
    """(kSetConst(0) commands that can be skipped, kMatrixAdd / kAddRows
    commands to run as copies because their zeroing is skipped)."""
    commands = computation.commands
    if has_loops(computation):
        return frozenset(), frozenset()
    add_as_copy = set()
    subs = computation.submatrices
    skip = set()
    # The next command touching each matrix, found by walking backwards.
    next_touch = {}
    for i in range(len(commands) - 1, -1, -1):
        c = commands[i]
        touched = touched_matrices(computation, c)
        if (c.command_type == T.kSetConst and c.alpha == 0.0 and 0 < c.arg1 < len(subs)
                and computation.is_whole_matrix(c.arg1)):
            m = subs[c.arg1].matrix_index
            j = next_touch.get(m)
            if j is not None and _overwrites_whole(computation, nnet, commands[j], m):
                skip.add(i)
            elif j is not None and _adds_whole(computation, commands[j], m):
                skip.add(i)
                add_as_copy.add(j)
        for m in touched:
            next_touch[m] = i
    return frozenset(skip), frozenset(add_as_copy)
