"""Backends: where NnetComputer's matrices live and the row kernels it needs.

A :class:`Backend` owns an array module ``xp`` (NumPy here; CuPy shares all of
this code through :class:`CupyBackend`, which only changes ``xp``, the
scatter-add and host transfers) and provides:

- matrix allocation: float32, C-contiguous (so every matrix also satisfies
  Kaldi's kStrideEqualNumCols);
- the row kernels NumPy's API does not express directly, with Kaldi's
  semantics (CuMatrix::CopyRows/AddRows/CopyToRows/AddToRows/AddRowRanges):
  an index of -1 (or a NULL row pointer) means "no source row": CopyRows
  writes zeros there, the add variants leave the row alone;
- Kaldi's CuCompressedMatrix (kCompressMatrix / kDecompressMatrix): int8,
  uint8, int16, uint16 with ``scale = range / max-int``, round-half-even,
  optional clamping (``truncate``), and the range-0 uint8 "sign" form that
  keeps only ``x > 0``.

Index tables are converted once (``prepare_rows`` / ``prepare_multi`` /
``prepare_ranges``) into device arrays with the -1 entries split off, so the
per-command work is a few fancy-indexing operations.
"""

import logging

import numpy as np

from ..components.row_ranges import add_row_ranges
from ..errors import ComputationError
from ..numerics.kaldi_cpu import KaldiCpu
from ..numerics.openblas_plan import openblas_threads_from_environment
from .row_copy import copy_matrix, copy_rows

logger = logging.getLogger("pynnet3")

# Kaldi's CuCompressedMatrixType (arg2 of kCompressMatrix) -> integer dtype.
_COMPRESSED_DTYPES = {1: np.int8, 2: np.uint8, 3: np.int16, 4: np.uint16}


class RowIndexes:
    """A prepared ``indexes`` table (one int per destination row, -1 = none).

    ``identity_offset`` is set when the table is ``a, a+1, ..., a+n-1`` (no -1):
    the copy is then a plain slice.
    """

    __slots__ = ("num_rows", "all_valid", "src_rows", "dest_rows", "missing_rows",
                 "identity_offset", "max_row", "table")

    def __init__(self, xp, indexes):
        idx = np.ascontiguousarray(np.asarray(indexes, dtype=np.int64).reshape(-1))
        self.num_rows = idx.shape[0]
        self.table = idx        # the whole table, on the host
        valid = idx >= 0
        self.all_valid = bool(valid.all())
        self.max_row = int(idx.max()) if idx.size else -1
        self.identity_offset = None
        if self.all_valid and idx.size and np.array_equal(idx, np.arange(idx[0],
                                                                         idx[0] + idx.size)):
            self.identity_offset = int(idx[0])
        if self.all_valid:
            self.src_rows = xp.asarray(idx)
            self.dest_rows = None
            self.missing_rows = None
        else:
            pos = np.nonzero(valid)[0]
            self.src_rows = xp.asarray(idx[pos])
            self.dest_rows = xp.asarray(pos)
            self.missing_rows = xp.asarray(np.nonzero(~valid)[0])


class MultiRowIndexes:
    """A prepared ``indexes_multi`` table: (submatrix, row) per row, grouped by
    submatrix. ``groups`` is a list of (submatrix_index, positions, rows,
    positions_unique); ``missing_rows`` the positions whose pair is (-1, -1)."""

    __slots__ = ("num_rows", "groups", "missing_rows", "max_rows")

    def __init__(self, xp, pairs):
        arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        self.num_rows = arr.shape[0]
        subs, rows = arr[:, 0], arr[:, 1]
        missing = np.nonzero(subs < 0)[0]
        self.missing_rows = xp.asarray(missing) if missing.size else None
        self.groups = []
        self.max_rows = {}
        for s in np.unique(subs[subs >= 0]).tolist():
            pos = np.nonzero(subs == s)[0]
            r = rows[pos]
            # Several rows of one table may point at the same source/destination
            # row; AddToRows must then accumulate, which needs a scatter-add.
            unique = np.unique(r).size == r.size
            self.groups.append((s, xp.asarray(pos, dtype=np.int64),
                                xp.asarray(r, dtype=np.int64), unique))
            self.max_rows[s] = int(r.max())


class RowRanges:
    """A prepared ``indexes_ranges`` table: destination row i gets the sum of
    source rows [begin_i, end_i) (Kaldi prints an empty range as ``null``)."""

    __slots__ = ("num_rows", "single", "single_dest", "single_src", "begin", "end",
                 "max_end")

    def __init__(self, xp, pairs):
        arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        self.num_rows = arr.shape[0]
        begin, end = arr[:, 0].copy(), arr[:, 1].copy()
        empty = end <= begin
        begin[empty] = 0
        end[empty] = 0
        self.max_end = int(end.max()) if end.size else 0
        lengths = end - begin
        # Most tables (e.g. backprop through a kNoTime-padded input) have
        # ranges of length 0 or 1; those are a plain AddRows.
        self.single = bool((lengths <= 1).all())
        if self.single:
            pos = np.nonzero(lengths == 1)[0]
            self.single_dest = xp.asarray(pos)
            self.single_src = xp.asarray(begin[pos])
            self.begin = self.end = None
        else:
            self.single_dest = self.single_src = None
            self.begin = xp.asarray(begin)
            self.end = xp.asarray(end)


class CompressedMatrix:
    """Kaldi's CuCompressedMatrix: integer data and the scale that maps it back."""

    __slots__ = ("data", "scale")

    def __init__(self, data, scale):
        self.data = data
        self.scale = scale

    @property
    def shape(self):
        return self.data.shape


class Backend:
    """NumPy backend (``xp = numpy``); the base of every backend."""

    name = "numpy"
    # The execution plan may run some commands fused into one pass
    # (pynnet3.compute.fusion: NumPy/Cython kernels, the default arithmetic).
    fuses_elementwise = True

    def __init__(self, xp=np):
        self.xp = xp

    # -- matrices -------------------------------------------------------------
    def empty(self, num_rows, num_cols, fill=None):
        """A new float32 C-contiguous matrix; undefined values unless ``fill``."""
        if fill is None:
            return self.xp.empty((num_rows, num_cols), dtype=np.float32)
        return self.xp.full((num_rows, num_cols), fill, dtype=np.float32)

    def zeros(self, num_rows, num_cols):
        return self.xp.zeros((num_rows, num_cols), dtype=np.float32)

    def from_host(self, matrix):
        """A float32 C-contiguous copy of ``matrix`` on this backend."""
        return self.xp.array(matrix, dtype=np.float32, order="C", copy=True)

    def to_host(self, matrix):
        """``matrix`` as a NumPy array (a copy)."""
        return np.array(matrix, dtype=np.float32, copy=True)

    def copy(self, matrix):
        return matrix.copy()

    # -- components and whole-matrix arithmetic -----------------------------------
    def propagate(self, component, indexes, in_value, out):
        """A component's Propagate (kPropagate); returns its memo."""
        return component.propagate(indexes, in_value, out)

    def add_mat(self, dest, alpha, src):
        """dest += alpha * src (kMatrixAdd, Kaldi's AddMat)."""
        self._axpy(dest, alpha, src)

    # -- index tables -----------------------------------------------------------
    def prepare_rows(self, indexes):
        return RowIndexes(self.xp, indexes)

    def prepare_multi(self, pairs):
        return MultiRowIndexes(self.xp, pairs)

    def prepare_ranges(self, pairs):
        return RowRanges(self.xp, pairs)

    # -- single-source row kernels ----------------------------------------------------
    def copy_matrix(self, dest, src):
        """dest[...] = src (kMatrixCopy, CuMatrix::CopyFromMat)."""
        if self.xp is np:
            copy_matrix(dest, src)      # no temporary when the two interleave
        else:
            dest[...] = src

    def copy_rows(self, dest, src, rows):
        """dest[i] = src[rows[i]], zero where rows[i] == -1 (CuMatrix::CopyRows)."""
        if rows.identity_offset is not None:
            off = rows.identity_offset
            self.copy_matrix(dest, src[off:off + rows.num_rows])
        elif self.xp is np:
            copy_rows(dest, src, rows.table)     # no gathered temporary
        elif rows.all_valid:
            dest[...] = src[rows.src_rows]
        else:
            dest[rows.dest_rows] = src[rows.src_rows]
            dest[rows.missing_rows] = 0.0

    def add_rows(self, dest, alpha, src, rows):
        """dest[i] += alpha * src[rows[i]] where rows[i] != -1 (CuMatrix::AddRows)."""
        if rows.identity_offset is not None:
            off = rows.identity_offset
            self._axpy(dest, alpha, src[off:off + rows.num_rows])
        elif rows.all_valid:
            self._axpy(dest, alpha, src[rows.src_rows])
        else:
            if alpha == 1.0:
                dest[rows.dest_rows] += src[rows.src_rows]
            else:
                dest[rows.dest_rows] += np.float32(alpha) * src[rows.src_rows]

    @staticmethod
    def _axpy(dest, alpha, src):
        if alpha == 1.0:
            dest += src
        else:
            dest += np.float32(alpha) * src

    def add_row_ranges(self, dest, alpha, src, ranges):
        """dest[i] += alpha * sum(src[begin_i:end_i]) (CuMatrix::AddRowRanges)."""
        if ranges.single:
            if ranges.single_dest.shape[0] == 0:
                return
            part = src[ranges.single_src]
        elif self.xp is np and alpha == 1.0:
            # Kaldi's CPU loop (a Cython kernel): float32, row by row.
            add_row_ranges(src, np.stack([ranges.begin, ranges.end], axis=1), dest)
            return
        else:
            # Prefix sums in float64 keep long ranges accurate.
            xp = self.xp
            csum = xp.zeros((src.shape[0] + 1, src.shape[1]), dtype=np.float64)
            xp.cumsum(src, axis=0, dtype=np.float64, out=csum[1:])
            total = (csum[ranges.end] - csum[ranges.begin]).astype(np.float32)
            self._axpy(dest, alpha, total)
            return
        if alpha != 1.0:
            part = np.float32(alpha) * part
        dest[ranges.single_dest] += part

    # -- multi-source row kernels (indexes_multi) -----------------------------------------
    # ``sources`` maps a submatrix index to its current view; the computer
    # resolves them because they are matrices of the running computation.
    def copy_rows_multi(self, dest, sources, multi):
        """dest[i] = *pointer_i, zero for NULL pointers (CuMatrix::CopyRows(ptrs))."""
        for s, pos, rows, _ in multi.groups:
            if self.xp is np:
                copy_rows(dest, sources[s], rows, pos)
            else:
                dest[pos] = sources[s][rows]
        if multi.missing_rows is not None:
            dest[multi.missing_rows] = 0.0

    def add_rows_multi(self, dest, alpha, sources, multi):
        """dest[i] += alpha * *pointer_i, skipping NULL (CuMatrix::AddRows(alpha, ptrs))."""
        a = np.float32(alpha)
        for s, pos, rows, _ in multi.groups:
            if alpha == 1.0:
                dest[pos] += sources[s][rows]
            else:
                dest[pos] += a * sources[s][rows]

    def copy_to_rows_multi(self, src, targets, multi):
        """*pointer_i = src[i], skipping NULL (CuMatrix::CopyToRows)."""
        for s, pos, rows, _ in multi.groups:
            targets[s][rows] = src[pos]

    def add_to_rows_multi(self, alpha, src, targets, multi):
        """*pointer_i += alpha * src[i], skipping NULL; repeated pointers
        accumulate (CuMatrix::AddToRows)."""
        a = np.float32(alpha)
        for s, pos, rows, unique in multi.groups:
            values = src[pos] if alpha == 1.0 else a * src[pos]
            if unique:
                targets[s][rows] += values
            else:
                self.scatter_add(targets[s], rows, values)

    def scatter_add(self, target, rows, values):
        """target[rows[i]] += values[i], accumulating repeated rows."""
        np.add.at(target, rows, values)

    # -- compression (kCompressMatrix / kDecompressMatrix) ---------------------------------
    def compress(self, matrix, compressed_type, range_, truncate):
        """Kaldi's NewCuCompressedMatrix(type, range, truncate)->CopyFromMat."""
        xp = self.xp
        dtype = _COMPRESSED_DTYPES.get(compressed_type)
        if dtype is None:
            raise ComputationError("unknown compressed-matrix type %d (expected 1..4: int8, "
                                   "uint8, int16, uint16)" % compressed_type)
        info = np.iinfo(dtype)
        scale = np.float32(np.float32(range_) / np.float32(info.max))
        if scale == 0.0:
            if dtype is not np.uint8:
                raise ComputationError("compression with range 0 (keep only the sign) exists "
                                       "only for uint8, not %s" % np.dtype(dtype).name)
            return CompressedMatrix((matrix > 0).astype(np.uint8), scale)
        if range_ < 0:
            raise ComputationError("compression range must be >= 0, got %g" % range_)
        inv_scale = np.float32(1.0 / float(scale))
        with np.errstate(over="ignore", invalid="ignore"):
            values = xp.rint(matrix * inv_scale)     # round half to even, as __float2int_rn
        # __float2int_rn saturates to the int32 range and turns NaN into 0
        # (diverged values, e.g. an exploding recurrence, reach here).
        values = xp.clip(xp.where(xp.isnan(values), 0.0, values), -2.0**31, 2.0**31 - 1)
        if truncate:
            values = xp.clip(values, info.min, info.max)
            data = values.astype(dtype)
        else:
            # Without the bounds check the int is converted as C does (wraps).
            data = values.astype(np.int64).astype(dtype)
        return CompressedMatrix(data, scale)

    def decompress(self, compressed):
        """CuCompressedMatrix::CopyToMat: value * scale (scale 1 for the sign form)."""
        scale = compressed.scale if compressed.scale != 0.0 else np.float32(1.0)
        out = compressed.data.astype(np.float32) * np.float32(scale)
        return self.xp.ascontiguousarray(out, dtype=np.float32)


class KaldiExactBackend(Backend):
    """NumPy backend whose arithmetic is Kaldi's CPU arithmetic, bit for bit
    (``arithmetic="kaldi"``): the oracle's OpenBLAS for products and row
    additions, the C library's expf/logf, Kaldi's loops' roundings (see
    :mod:`pynnet3.numerics.kaldi_cpu`). Components compute through their
    ``propagate_kaldi_exact``; one whose type cannot give Kaldi's bits (its
    ``kaldi_exact`` is false) runs it anyway and a warning names the type
    once. ``blas_threads``: the OpenBLAS thread count whose summation order
    to reproduce, since the order depends on it; None: the count OpenBLAS
    itself would start with in this environment (OPENBLAS_NUM_THREADS and
    the like, else the number of CPUs), i.e. what Kaldi run here, in the
    same environment, would use. (kaldi-ref's nnet3-compute outputs were
    made with 2 threads, its decode/large lattices with 1.)"""

    name = "kaldi-exact"
    fuses_elementwise = False        # Kaldi's roundings, command by command

    def __init__(self, blas_threads=None):
        super().__init__(np)
        if blas_threads is None:
            blas_threads = openblas_threads_from_environment()
        self.kaldi = KaldiCpu(blas_threads)
        self._inexact_warned = set()

    @property
    def blas_threads(self):
        return self.kaldi.threads

    def propagate(self, component, indexes, in_value, out):
        if not component.kaldi_exact:
            self._warn_inexact(component)
        return component.propagate_kaldi_exact(indexes, in_value, out, self.kaldi)

    def _warn_inexact(self, component):
        key = component.type_name
        if key not in self._inexact_warned:
            self._inexact_warned.add(key)
            logger.warning("%s has no Kaldi-exact arithmetic%s: its outputs (and what "
                           "depends on them) may differ from Kaldi's in the last bits",
                           key, " in training mode" if hasattr(component, "test_mode")
                           else "")

    def _axpy(self, dest, alpha, src):
        # Kaldi's AddMat / AddRows: one saxpy per row.
        self.kaldi.axpy_rows(dest, alpha, src)

    def add_rows(self, dest, alpha, src, rows):
        if rows.all_valid:
            super().add_rows(dest, alpha, src, rows)
        else:
            part = dest[rows.dest_rows]
            self._axpy(part, alpha, src[rows.src_rows])
            dest[rows.dest_rows] = part

    def add_row_ranges(self, dest, alpha, src, ranges):
        """Kaldi's kAddRowRanges: each destination element adds the float
        sum of its range (summed from +0 in row order); with alpha != 1
        Kaldi scales by 1/alpha first and by alpha after."""
        alpha = np.float32(alpha)
        if ranges.single:
            pairs = np.zeros((ranges.num_rows, 2), np.int64)
            pairs[ranges.single_dest, 0] = ranges.single_src
            pairs[ranges.single_dest, 1] = ranges.single_src + 1
        else:
            pairs = np.stack([ranges.begin, ranges.end], axis=1)
        if alpha != 1:
            self.kaldi.scale(dest, np.float32(1.0 / float(alpha)))
        add_row_ranges(src, np.ascontiguousarray(pairs, np.int64), dest)
        if alpha != 1:
            self.kaldi.scale(dest, alpha)

    def add_rows_multi(self, dest, alpha, sources, multi):
        for s, pos, rows, _ in multi.groups:
            part = dest[pos]
            self._axpy(part, alpha, sources[s][rows])
            dest[pos] = part

    def add_to_rows_multi(self, alpha, src, targets, multi):
        for s, pos, rows, unique in multi.groups:
            if unique:
                part = targets[s][rows]
                self._axpy(part, alpha, src[pos])
                targets[s][rows] = part
            else:
                # repeated targets: one saxpy per source row, in row order
                for p, r in zip(pos.tolist(), rows.tolist()):
                    self._axpy(targets[s][r:r + 1], alpha, src[p:p + 1])


class CupyBackend(Backend):
    """CuPy backend: the same kernels on the GPU."""

    name = "cupy"
    fuses_elementwise = False        # the fused kernels are CPU kernels

    def __init__(self):
        import cupy
        super().__init__(cupy)

    def to_host(self, matrix):
        return np.array(matrix.get(), dtype=np.float32, copy=True)

    def scatter_add(self, target, rows, values):
        import cupyx
        cupyx.scatter_add(target, rows, values)


def get_backend(backend):
    """A :class:`Backend` from a name ("numpy", "kaldi-exact", "cupy") or a
    Backend instance."""
    if isinstance(backend, Backend):
        return backend
    if backend in (None, "numpy"):
        return Backend()
    if backend == "kaldi-exact":
        return KaldiExactBackend()
    if backend == "cupy":
        try:
            return CupyBackend()
        except ImportError:
            raise ComputationError("backend 'cupy' needs the cupy package, which is not "
                                   "installed") from None
    raise ComputationError("unknown backend %r (expected 'numpy', 'kaldi-exact' or 'cupy')"
                           % (backend,))
