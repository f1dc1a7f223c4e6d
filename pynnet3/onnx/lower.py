"""An NnetComputation's command list as an ONNX graph.

pynnet3 compiles a ComputationRequest into Kaldi's static command list
(matrices, submatrices, index tables, kPropagate / kMatrixCopy / kCopyRows /
... commands); this module runs that list *symbolically* and emits, for
every value a command computes, the default-domain ONNX operators that
compute it:

- kPropagate: the component's forward formula (:mod:`.components`);
- kMatrixCopy / kMatrixAdd: Mul / Add;
- kCopyRows, kAddRows, the ``*Multi`` row commands: Gather (Slice where the
  rows are a contiguous or strided range), with a zero row for Kaldi's -1;
- kAddRowRanges: sums over row ranges (:func:`.components.row_range_sums`);
- sub-matrices: Slice and Concat.

Matrices are written in place by Kaldi's commands, one sub-matrix at a time;
ONNX values are written once. Each matrix is therefore tracked as a set of
disjoint rectangular *tiles*, each a view of an ONNX value (or a constant,
or undefined): a command writing a sub-matrix replaces the tiles under it,
a command reading one gathers the tiles it covers (a Slice when one tile
holds it all, Concat of slices otherwise). Nothing is copied until it is
read, so a recurrent computation that writes one row per time step costs
one small tensor per step, not one copy of the whole matrix per step.

Every value is ``[batch, rows, cols]``: the batch entries are independent
copies of the computation (in a chunked export, chunks of several
utterances). Commands that only a training computation contains
(backprop, memory compression) and random components in training mode are
refused with :class:`~.components.NotLowerable`, which names the command
or node.

Guarantee: the graph computes, for every batch entry, what NnetComputer
computes for the same inputs (float32 arithmetic; sums may be taken in
another order).
"""

import numpy as np

from ..compiler.computation import CommandType
from ..errors import ComputationError
from .components import NotLowerable, lower_propagate, row_range_sums
from ..compiler.computation_io import command_string

__all__ = ["ComputationLowering"]

T = CommandType

# A matrix with more tiles than this is gathered into one tensor.
_MAX_TILES = 64

_UNDEFINED = "undefined"


class _Tile:
    """Rows [r0, r1) x columns [c0, c1) of a matrix hold rows sr0.. and
    columns sc0.. of ONNX value ``src`` (a name), or the constant ``const``
    (``src`` None), or nothing yet (``src`` is _UNDEFINED)."""

    __slots__ = ("r0", "r1", "c0", "c1", "src", "sr0", "sc0", "const")

    def __init__(self, r0, r1, c0, c1, src, sr0=0, sc0=0, const=0.0):
        self.r0, self.r1, self.c0, self.c1 = r0, r1, c0, c1
        self.src, self.sr0, self.sc0, self.const = src, sr0, sc0, const

    def part(self, r0, r1, c0, c1):
        """The piece of this tile inside [r0, r1) x [c0, c1) (which it overlaps)."""
        a, b = max(r0, self.r0), min(r1, self.r1)
        c, d = max(c0, self.c0), min(c1, self.c1)
        return _Tile(a, b, c, d, self.src, self.sr0 + a - self.r0, self.sc0 + c - self.c0,
                     self.const)

    def overlaps(self, r0, r1, c0, c1):
        return self.r0 < r1 and r0 < self.r1 and self.c0 < c1 and c0 < self.c1


class ComputationLowering:
    """Lowers the commands of one computation into a GraphBuilder.

    ``on_input(node_name, rows, cols)`` returns the ONNX value a kAcceptInput
    supplies; ``on_output(node_name, value, rows, cols)`` receives the value
    of a kProvideOutput. :meth:`run` lowers a range of commands (a looped
    computation is lowered a part at a time); :attr:`matrices` holds each
    matrix's tiles between calls."""

    def __init__(self, g, computation, nnet, on_input, on_output):
        self.g = g
        self.computation = computation
        self.nnet = nnet
        self.on_input = on_input
        self.on_output = on_output
        self.shapes = {}                    # ONNX value -> (rows, cols)
        self.matrices = [None] * len(computation.matrices)   # lists of _Tile
        # component index -> the (first) node that uses it, to name errors
        self._component_nodes = {}
        for i, name in enumerate(nnet.node_names):
            if nnet.is_component_node(i):
                self._component_nodes.setdefault(nnet.nodes[i].component_index, name)
        self._dispatch = {
            T.kAllocMatrix: self._alloc, T.kDeallocMatrix: self._dealloc,
            T.kSwapMatrix: self._swap, T.kSetConst: self._set_const,
            T.kPropagate: self._propagate, T.kMatrixCopy: self._matrix_copy,
            T.kMatrixAdd: self._matrix_add, T.kCopyRows: self._copy_rows,
            T.kAddRows: self._add_rows, T.kCopyRowsMulti: self._copy_rows_multi,
            T.kCopyToRowsMulti: self._copy_to_rows_multi,
            T.kAddRowsMulti: self._add_rows_multi, T.kAddToRowsMulti: self._add_to_rows_multi,
            T.kAddRowRanges: self._add_row_ranges, T.kAcceptInput: self._accept_input,
            T.kProvideOutput: self._provide_output,
            T.kNoOperation: None, T.kNoOperationPermanent: None, T.kNoOperationMarker: None,
            T.kNoOperationLabel: None,
        }

    # -- driving ----------------------------------------------------------------------------
    def run(self, start=0, end=None):
        """Lowers commands [start, end) (to the end of the list by default)."""
        commands = self.computation.commands
        end = len(commands) if end is None else end
        for pc in range(start, end):        # refuse before lowering anything
            c = commands[pc]
            if c.command_type not in self._dispatch:
                raise self._refusal(pc, c)
            if c.command_type == T.kAcceptInput and self.nnet.is_output_node(c.arg2):
                raise NotLowerable("cannot export command %s to ONNX: it takes the derivative "
                                   "of output '%s' (only inference computations export)"
                                   % (self._command_text(pc), self.nnet.node_names[c.arg2]))
        for pc in range(start, end):
            c = commands[pc]
            handler = self._dispatch[c.command_type]
            if handler is None:
                continue
            try:
                handler(c)
            except NotLowerable:
                raise
            except ComputationError as e:
                raise ComputationError("ONNX export, command %s: %s"
                                       % (self._command_text(pc), e)) from None

    def _refusal(self, pc, c):
        t = c.command_type
        if t in (T.kBackprop, T.kBackpropNoModelUpdate):
            why = "the computation has a backward pass (only inference computations export)"
        elif t in (T.kCompressMatrix, T.kDecompressMatrix):
            why = "memory compression belongs to training computations"
        elif t == T.kGotoLabel:
            why = "a looped computation exports only as a streaming model"
        else:
            why = "command type %s has no ONNX form" % t.name
        return NotLowerable("cannot export command %s to ONNX: %s" % (self._command_text(pc),
                                                                      why))

    def _command_text(self, pc):
        try:
            return command_string(self.computation, self.nnet, pc).strip()
        except Exception:  # a malformed command prints as its fields
            return "c%d: %r" % (pc, self.computation.commands[pc])

    # -- values ----------------------------------------------------------------------------------
    def register(self, value, rows, cols):
        """Records the static shape of an ONNX value stored in tiles."""
        self.shapes[value] = (rows, cols)
        return value

    def submatrix(self, s):
        """(matrix, r0, r1, c0, c1) of submatrix ``s``."""
        info = self.computation.submatrices[s]
        return (info.matrix_index, info.row_offset, info.row_offset + info.num_rows,
                info.col_offset, info.col_offset + info.num_cols)

    def _tiles(self, m):
        tiles = self.matrices[m]
        if tiles is None:
            raise ComputationError("matrix m%d is used while not allocated" % m)
        return tiles

    def read(self, s, allow_const=False):
        """The value of submatrix ``s``: an ONNX value name, or (with
        ``allow_const``) a Python float when it is one constant."""
        return self.read_region(*self.submatrix(s), allow_const=allow_const)

    def read_region(self, m, r0, r1, c0, c1, allow_const=False):
        pieces = [t.part(r0, r1, c0, c1) for t in self._tiles(m) if t.overlaps(r0, r1, c0, c1)]
        area = sum((p.r1 - p.r0) * (p.c1 - p.c0) for p in pieces)
        if area != (r1 - r0) * (c1 - c0) or any(p.src is _UNDEFINED for p in pieces):
            raise ComputationError("rows %d:%d, columns %d:%d of matrix m%d are read before "
                                   "they are written" % (r0, r1 - 1, c0, c1 - 1, m))
        if all(p.src is None for p in pieces) and len({p.const for p in pieces}) == 1:
            if allow_const:
                return pieces[0].const
        return self._assemble(pieces, r0, r1, c0, c1)

    def _assemble(self, pieces, r0, r1, c0, c1):
        cuts = sorted({p.r0 for p in pieces} | {p.r1 for p in pieces})
        bands = []
        for a, b in zip(cuts, cuts[1:]):
            row = sorted((p.part(a, b, c0, c1) for p in pieces if p.r0 < b and a < p.r1),
                         key=lambda p: p.c0)
            merged = [row[0]]
            for p in row[1:]:
                q = merged[-1]
                if (p.src is not None and p.src == q.src and p.sr0 == q.sr0
                        and p.sc0 == q.sc0 + (q.c1 - q.c0)):
                    merged[-1] = _Tile(q.r0, q.r1, q.c0, p.c1, q.src, q.sr0, q.sc0)
                elif p.src is None and q.src is None and p.const == q.const:
                    merged[-1] = _Tile(q.r0, q.r1, q.c0, p.c1, None, const=q.const)
                else:
                    merged.append(p)
            if bands and len(merged) == 1 and len(bands[-1]) == 1:
                p, q = merged[0], bands[-1][0]
                if (p.src is not None and p.src == q.src and p.sc0 == q.sc0
                        and p.sr0 == q.sr0 + (q.r1 - q.r0)):
                    bands[-1] = [_Tile(q.r0, p.r1, q.c0, q.c1, q.src, q.sr0, q.sc0)]
                    continue
                if p.src is None and q.src is None and p.const == q.const:
                    bands[-1] = [_Tile(q.r0, p.r1, q.c0, q.c1, None, const=q.const)]
                    continue
            bands.append(merged)
        rows = [self.g.concat([self._materialize(p) for p in band], 2) for band in bands]
        return self.register(self.g.concat(rows, 1), r1 - r0, c1 - c0)

    def _materialize(self, p):
        rows, cols = p.r1 - p.r0, p.c1 - p.c0
        if p.src is None:
            return self.register(self.g.filled(p.const, rows, cols), rows, cols)
        src_rows, src_cols = self.shapes[p.src]
        if (p.sr0, p.sc0, rows, cols) == (0, 0, src_rows, src_cols):
            return p.src
        g = self.g
        if p.sc0 == 0 and cols == src_cols:
            value = g.slice(p.src, 1, p.sr0, p.sr0 + rows)
        elif p.sr0 == 0 and rows == src_rows:
            value = g.slice(p.src, 2, p.sc0, p.sc0 + cols)
        else:
            value = g.memo(("slice2", p.src, p.sr0, rows, p.sc0, cols), lambda: g.op(
                "Slice", [p.src, g.ints([p.sr0, p.sc0]), g.ints([p.sr0 + rows, p.sc0 + cols]),
                          g.ints([1, 2])], "slice"))
        return self.register(value, rows, cols)

    def write(self, s, value):
        """Submatrix ``s`` := ``value`` (an ONNX value of its shape, or a float)."""
        self.write_region(*self.submatrix(s), value)

    def write_region(self, m, r0, r1, c0, c1, value):
        if r1 <= r0 or c1 <= c0:
            return
        kept = []
        for t in self._tiles(m):
            if not t.overlaps(r0, r1, c0, c1):
                kept.append(t)
                continue
            # the parts of t outside the written rectangle
            if t.r0 < r0:
                kept.append(t.part(t.r0, r0, t.c0, t.c1))
            if r1 < t.r1:
                kept.append(t.part(r1, t.r1, t.c0, t.c1))
            a, b = max(r0, t.r0), min(r1, t.r1)
            if t.c0 < c0:
                kept.append(t.part(a, b, t.c0, c0))
            if c1 < t.c1:
                kept.append(t.part(a, b, c1, t.c1))
        if isinstance(value, str):
            if self.shapes.get(value) != (r1 - r0, c1 - c0):
                self.register(value, r1 - r0, c1 - c0)
            kept.append(_Tile(r0, r1, c0, c1, value))
        else:
            kept.append(_Tile(r0, r1, c0, c1, None, const=float(np.float32(value))))
        self.matrices[m] = kept
        if len(kept) > _MAX_TILES and all(t.src is not _UNDEFINED for t in kept):
            info = self.computation.matrices[m]
            whole = self.read_region(m, 0, info.num_rows, 0, info.num_cols)
            self.matrices[m] = [_Tile(0, info.num_rows, 0, info.num_cols, whole)]

    def set_matrix(self, m, value):
        """Matrix ``m`` (all of it) := ONNX value ``value`` (a state input)."""
        info = self.computation.matrices[m]
        self.register(value, info.num_rows, info.num_cols)
        self.matrices[m] = [_Tile(0, info.num_rows, 0, info.num_cols, value)]

    def read_matrix(self, m):
        info = self.computation.matrices[m]
        return self.read_region(m, 0, info.num_rows, 0, info.num_cols)

    def read_matrix_or_zero(self, m):
        """The whole matrix, its never-written parts as zeros (for a state
        handed to the next chunk: a later command writes them before any
        read, or Kaldi would read undefined memory)."""
        info = self.computation.matrices[m]
        tiles = self._tiles(m)
        if any(t.src is _UNDEFINED for t in tiles):
            self.matrices[m] = [t if t.src is not _UNDEFINED
                                else _Tile(t.r0, t.r1, t.c0, t.c1, None, const=0.0)
                                for t in tiles]
        return self.read_region(m, 0, info.num_rows, 0, info.num_cols)

    def matrix_defined(self, m):
        tiles = self.matrices[m]
        return tiles is not None and all(t.src is not _UNDEFINED for t in tiles)

    def _sub_shape(self, s):
        info = self.computation.submatrices[s]
        return info.num_rows, info.num_cols

    # -- commands ----------------------------------------------------------------------------------
    def _alloc(self, c):
        m = self.computation.submatrices[c.arg1].matrix_index
        info = self.computation.matrices[m]
        self.matrices[m] = [_Tile(0, info.num_rows, 0, info.num_cols, _UNDEFINED)]

    def _dealloc(self, c):
        self.matrices[self.computation.submatrices[c.arg1].matrix_index] = None

    def _swap(self, c):
        m1 = self.computation.submatrices[c.arg1].matrix_index
        m2 = self.computation.submatrices[c.arg2].matrix_index
        self.matrices[m1], self.matrices[m2] = self.matrices[m2], self.matrices[m1]

    def _set_const(self, c):
        self.write(c.arg1, c.alpha)

    def _propagate(self, c):
        component = self.nnet.components[c.arg1]
        indexes = self.computation.component_precomputed_indexes[c.arg2].data
        x = self.read(c.arg3) if c.arg3 != 0 else None
        rows, cols = self._sub_shape(c.arg4)

        def old():
            value = self.read(c.arg4, allow_const=True)
            if isinstance(value, float):
                if value == 0.0:
                    return None
                return self.register(self.g.filled(value, rows, cols), rows, cols)
            return value

        node = self._component_nodes.get(c.arg1, self.nnet.component_names[c.arg1])
        y = lower_propagate(self.g, component, x, indexes, node, rows, old)
        self.write(c.arg4, y)

    def _plus(self, s, addend):
        """Submatrix ``s`` := its value + ``addend`` (folding a zero)."""
        old = self.read(s, allow_const=True)
        if isinstance(old, float):
            if old != 0.0:
                rows, cols = self._sub_shape(s)
                addend = self.g.add(self.g.filled(old, rows, cols), addend)
        else:
            addend = self.g.add(old, addend)
        self.write(s, addend)

    def _matrix_copy(self, c):
        value = self.read(c.arg2, allow_const=True)
        if isinstance(value, float):
            self.write(c.arg1, float(np.float32(value) * np.float32(c.alpha)))
        else:
            self.write(c.arg1, self.g.scale(value, c.alpha))

    def _matrix_add(self, c):
        if c.alpha == 0.0:
            return
        value = self.read(c.arg2, allow_const=True)
        if isinstance(value, float):
            if value == 0.0:
                return
            rows, cols = self._sub_shape(c.arg2)
            value = self.g.filled(value, rows, cols)
        self._plus(c.arg1, self.g.scale(value, c.alpha))

    def _gather_zero(self, value, src_rows, rows):
        """value[:, rows, :] with a row of zeros where ``rows`` is -1."""
        rows = np.asarray(rows, np.int64)
        if (rows >= 0).all():
            return self.g.gather_rows(value, rows)
        rows = np.where(rows < 0, src_rows, rows)
        return self.g.gather_rows(self.g.pad_rows(value, 0, 1), rows)

    def _copy_rows(self, c):
        if c.alpha == 0.0:
            return
        rows = self.computation.indexes[c.arg3]
        src_rows = self._sub_shape(c.arg2)[0]
        value = self._gather_zero(self.read(c.arg2), src_rows, rows)
        self.write(c.arg1, self.g.scale(value, c.alpha))

    def _add_rows(self, c):
        if c.alpha == 0.0:
            return
        rows = self.computation.indexes[c.arg3]
        if all(r < 0 for r in rows):
            return
        src_rows = self._sub_shape(c.arg2)[0]
        value = self._gather_zero(self.read(c.arg2), src_rows, rows)
        self._plus(c.arg1, self.g.scale(value, c.alpha))

    def _rows_multi(self, c):
        """alpha times the rows c's indexes_multi list points to, row i of the
        result from the (submatrix, row) pair i (zeros for (-1, -1)); None
        when no pair points anywhere."""
        pairs = self.computation.indexes_multi[c.arg2]
        subs = sorted({s for s, _ in pairs if s >= 0})
        if not subs:
            return None
        offsets, parts, total = {}, [], 0
        for s in subs:
            offsets[s] = total
            parts.append(self.read(s))
            total += self._sub_shape(s)[0]
        rows = np.asarray([offsets[s] + r if s >= 0 else -1 for s, r in pairs], np.int64)
        return self.g.scale(self._gather_zero(self.g.concat(parts, 1), total, rows), c.alpha)

    def _copy_rows_multi(self, c):
        if c.alpha == 0.0:
            return
        value = self._rows_multi(c)
        self.write(c.arg1, 0.0 if value is None else value)

    def _add_rows_multi(self, c):
        if c.alpha == 0.0:
            return
        value = self._rows_multi(c)
        if value is not None:
            self._plus(c.arg1, value)

    def _targets(self, pairs):
        """target submatrix -> {target row: [source rows in order]}."""
        targets = {}
        for i, (s, r) in enumerate(pairs):
            if s >= 0:
                targets.setdefault(s, {}).setdefault(r, []).append(i)
        return targets

    @staticmethod
    def _runs(rows):
        """Sorted rows as (first, end) runs of consecutive rows."""
        runs = []
        for r in sorted(rows):
            if runs and runs[-1][1] == r:
                runs[-1][1] += 1
            else:
                runs.append([r, r + 1])
        return runs

    def _copy_to_rows_multi(self, c):
        if c.alpha != 1.0:
            raise ComputationError("CopyToRowsMulti supports only alpha = 1, got %g" % c.alpha)
        src = self.read(c.arg1)
        pairs = self.computation.indexes_multi[c.arg2]
        for s, rows in self._targets(pairs).items():
            m, r0, r1, c0, c1 = self.submatrix(s)
            for a, b in self._runs(rows):
                # the last source row written to a target row is the one kept
                value = self.g.gather_rows(src, [rows[r][-1] for r in range(a, b)])
                self.write_region(m, r0 + a, r0 + b, c0, c1, value)

    def _add_to_rows_multi(self, c):
        if c.alpha == 0.0:
            return
        src = self.read(c.arg1)
        src_rows = self._sub_shape(c.arg1)[0]
        pairs = self.computation.indexes_multi[c.arg2]
        for s, rows in self._targets(pairs).items():
            m, r0, r1, c0, c1 = self.submatrix(s)
            for a, b in self._runs(rows):
                depth = max(len(rows[r]) for r in range(a, b))
                total = None
                for k in range(depth):
                    sel = [rows[r][k] if k < len(rows[r]) else -1 for r in range(a, b)]
                    part = self._gather_zero(src, src_rows, sel)
                    total = part if total is None else self.g.add(total, part)
                old = self.read_region(m, r0 + a, r0 + b, c0, c1, allow_const=True)
                total = self.g.scale(total, c.alpha)
                if isinstance(old, float):
                    if old != 0.0:
                        total = self.g.add(self.g.filled(old, b - a, c1 - c0), total)
                else:
                    total = self.g.add(old, total)
                self.write_region(m, r0 + a, r0 + b, c0, c1, total)

    def _add_row_ranges(self, c):
        if c.alpha == 0.0:
            return
        ranges = self.computation.indexes_ranges[c.arg3]
        sums = row_range_sums(self.g, self.read(c.arg2), ranges)
        self._plus(c.arg1, self.g.scale(sums, c.alpha))

    def _accept_input(self, c):
        rows, cols = self._sub_shape(c.arg1)
        name = self.nnet.node_names[c.arg2]
        if not self.computation.is_whole_matrix(c.arg1):
            raise ComputationError("the input of node '%s' is not a whole matrix" % name)
        # kAcceptInput allocates the matrix (Kaldi's AcceptInput)
        self.set_matrix(self.computation.submatrices[c.arg1].matrix_index,
                        self.on_input(name, rows, cols))

    def _provide_output(self, c):
        rows, cols = self._sub_shape(c.arg1)
        self.on_output(self.nnet.node_names[c.arg2], self.read(c.arg1), rows, cols)
