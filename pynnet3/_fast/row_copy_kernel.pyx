# cython: language_level=3, boundscheck=False, wraparound=False
"""Row copies straight from source to destination (twins:
``copy_rows_py`` and ``copy_matrix_py`` in ``pynnet3.compute.row_copy``).

NumPy's ``dest[...] = src[rows]`` gathers into a temporary first, and
``dest[...] = src`` makes one whenever the two matrices' memory ranges
interleave (two column ranges of one matrix); these copy each row once,
with no temporary. Matrices are float32 with any strides; rows whose
elements are adjacent are copied with memmove, and a row-major source
goes into a column-major destination in square tiles. The caller checks shapes
and row numbers.
"""

from libc.stdint cimport int64_t
from libc.string cimport memmove, memset


cdef inline void _copy_row(float *d, Py_ssize_t ds, const float *s, Py_ssize_t ss,
                           Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t c
    if ds == 1 and ss == 1:
        memmove(d, s, n * sizeof(float))
    else:
        for c in range(n):
            d[c * ds] = s[c * ss]


cdef inline void _zero_row(float *d, Py_ssize_t ds, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t c
    if ds == 1:
        memset(d, 0, n * sizeof(float))
    else:
        for c in range(n):
            d[c * ds] = 0.0


def copy_rows(float[:, :] dest, const float[:, :] src, const int64_t[::1] rows,
              const int64_t[::1] positions=None):
    """dest[p(i)] = src[rows[i]] for each i (p(i) = positions[i], or i
    without ``positions``); a negative ``rows[i]`` sets that row to zero."""
    cdef Py_ssize_t n = rows.shape[0], cols = dest.shape[1], i, r, p
    cdef Py_ssize_t ds = dest.strides[1] // sizeof(float), ss = src.strides[1] // sizeof(float)
    if n == 0 or cols == 0:
        return
    with nogil:
        for i in range(n):
            p = positions[i] if positions is not None else i
            r = rows[i]
            if r < 0:
                _zero_row(&dest[p, 0], ds, cols)
            else:
                _copy_row(&dest[p, 0], ds, &src[r, 0], ss, cols)


# the side of the square tiles a transposing copy moves at a time: a
# tile's source rows and destination columns (16 floats: one cache line
# each) stay in L1 while it is copied
cdef enum:
    TILE = 16


cdef void _copy_transposing(float *d, Py_ssize_t d_col, const float *s, Py_ssize_t s_row,
                            Py_ssize_t n, Py_ssize_t cols) noexcept nogil:
    """d[i + j d_col] = s[i s_row + j]: a row-major source into a
    column-major destination, tile by tile."""
    cdef Py_ssize_t i0 = 0, j0, i1, j1, i, j
    while i0 < n:
        i1 = min(i0 + TILE, n)
        j0 = 0
        while j0 < cols:
            j1 = min(j0 + TILE, cols)
            for j in range(j0, j1):
                for i in range(i0, i1):
                    d[i + j * d_col] = s[i * s_row + j]
            j0 = j1
        i0 = i1


def copy_matrix(float[:, :] dest, const float[:, :] src):
    """dest[...] = src, row by row in increasing order (a row-major source
    into a column-major destination: tile by tile, the same values)."""
    cdef Py_ssize_t n = dest.shape[0], cols = dest.shape[1], i
    cdef Py_ssize_t ds = dest.strides[1] // sizeof(float), ss = src.strides[1] // sizeof(float)
    if n == 0 or cols == 0:
        return
    with nogil:
        if (ss == 1 and dest.strides[0] == sizeof(float) and ds != 1 and n > 1):
            _copy_transposing(&dest[0, 0], ds, &src[0, 0], src.strides[0] // sizeof(float),
                              n, cols)
        else:
            for i in range(n):
                _copy_row(&dest[i, 0], ds, &src[i, 0], ss, cols)
