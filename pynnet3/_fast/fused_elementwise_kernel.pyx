# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: extra_compile_args = -O2 -ffp-contract=off
"""Fused element-wise passes of the default arithmetic (C loops in
fused_elementwise_ops.h: AVX-512, AVX2 or scalar, chosen at run time;
twins: the ``*_py`` functions of ``pynnet3.compute.fused_elementwise``, which
define the results and give the same bits: each operation is one float32
rounding, in the twin's order, never contracted into a fused multiply-add).

Matrices are float32 with contiguous rows and any row stride (a column
range of a wider matrix is fine); the caller
(``pynnet3.compute.fused_elementwise``) checks shapes, that rows are
contiguous, row indexes and aliasing.
"""

from libc.stdint cimport int64_t


cdef extern from "fused_elementwise_ops.h" nogil:
    int pn_fused_level()
    void pn_bias_relu_scale_offset(int level, float *m, Py_ssize_t rows, Py_ssize_t cols,
                                   Py_ssize_t stride, const float *b, const float *s,
                                   const float *o)
    void pn_scaled_copy_add(int level, float *d, Py_ssize_t n, Py_ssize_t cols,
                            Py_ssize_t d_stride, const float *x, Py_ssize_t x_stride,
                            const int64_t *rows, float alpha, const float *y,
                            Py_ssize_t y_stride, float beta)

cdef int _LEVEL = pn_fused_level()


def level():
    """The vector path in use: 2 AVX-512, 1 AVX2, 0 scalar."""
    return _LEVEL


def bias_relu_scale_offset(float[:, :] mat, const float[::1] bias, const float[::1] scale,
                           const float[::1] offset):
    """In place, every element: v = m + bias (if not None); v = max(v, 0);
    v = v * scale (if not None); v = v + offset (if not None)."""
    cdef Py_ssize_t rows = mat.shape[0], cols = mat.shape[1]
    if rows == 0 or cols == 0:
        return
    cdef const float* b = &bias[0] if bias is not None else NULL
    cdef const float* s = &scale[0] if scale is not None else NULL
    cdef const float* o = &offset[0] if offset is not None else NULL
    cdef Py_ssize_t stride = mat.strides[0] // sizeof(float)
    with nogil:
        pn_bias_relu_scale_offset(_LEVEL, &mat[0, 0], rows, cols, stride, b, s, o)


def scaled_copy_add(float[:, :] dest, const float[:, :] src, const int64_t[::1] rows,
                    float alpha, const float[:, :] add, float beta):
    """dest[i] = alpha * src[r(i)] + beta * add[i], with r(i) = rows[i], or
    i when ``rows`` is None; a factor of 1 is no multiplication. ``src``
    may be ``dest`` itself (no ``rows`` then); ``add`` is another matrix."""
    cdef Py_ssize_t n = dest.shape[0], cols = dest.shape[1]
    if n == 0 or cols == 0:
        return
    cdef const int64_t* r = &rows[0] if rows is not None else NULL
    with nogil:
        pn_scaled_copy_add(_LEVEL, &dest[0, 0], n, cols, dest.strides[0] // sizeof(float),
                           &src[0, 0], src.strides[0] // sizeof(float), r, alpha,
                           &add[0, 0], add.strides[0] // sizeof(float), beta)
