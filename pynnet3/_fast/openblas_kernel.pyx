# cython: boundscheck=False, wraparound=False
"""The oracle's OpenBLAS sgemm arithmetic, compiled (openblas_sgemm_kernel.h).

Twin: :func:`pynnet3.numerics.openblas.sgemm_py` (its owner, :mod:`pynnet3.numerics.openblas`); the plan (k blocks, which
elements are paired) comes from :func:`pynnet3.numerics.openblas_plan.gemm_plan`.
Callers validate shapes; :func:`sgemm_blocks` only checks what would make it
read or write out of bounds.
"""

from libc.stdint cimport int64_t


cdef extern from "openblas_sgemm_kernel.h" nogil:
    int pn_cpu_has_fma()
    void pn_sgemm_blocks(int num_rows, int num_cols, const float *a, Py_ssize_t lda,
                         const float *b, Py_ssize_t ldb, const unsigned char *paired,
                         const int64_t *k_steps, int num_steps, float alpha, float *c,
                         Py_ssize_t ldc, int use_fma)

_HAS_FMA = bool(pn_cpu_has_fma())


cdef inline bint _rows_contiguous(Py_ssize_t row_stride, Py_ssize_t col_stride):
    return col_stride == sizeof(float) and row_stride % sizeof(float) == 0


def has_fma():
    """Whether this CPU runs the vectorized FMA path (else libm's fmaf, exact
    but several times slower)."""
    return _HAS_FMA


def sgemm_blocks(const float[:, :] a, const float[:, :] b,
                 const unsigned char[:, :] paired, const int64_t[:, :] k_steps,
                 float alpha, float[:, :] c, bint portable=False):
    """``c += alpha * op(A) op(B)`` block by block in the plan's forms (see
    the header): ``a`` is op(A) (num_rows x K), ``b`` is op(B) (K x num_cols),
    both with contiguous rows; ``c`` likewise; ``paired`` C-contiguous and
    shaped like ``c``; ``k_steps`` C-contiguous (start, length) rows inside K.
    Beta has been applied by the caller. ``portable`` forces the libm fmaf
    path (the one CPUs without FMA take)."""
    cdef Py_ssize_t num_rows = c.shape[0], num_cols = c.shape[1], k = a.shape[1]
    cdef Py_ssize_t s
    if a.shape[0] != num_rows or b.shape[0] != k or b.shape[1] != num_cols:
        raise ValueError("sgemm_blocks: shapes %dx%d, %dx%d, %dx%d do not fit"
                         % (a.shape[0], a.shape[1], b.shape[0], b.shape[1], num_rows,
                            num_cols))
    if paired.shape[0] != num_rows or paired.shape[1] != num_cols or \
            (num_rows > 0 and num_cols > 0 and
             (paired.strides[1] != 1 or paired.strides[0] != num_cols)):
        raise ValueError("sgemm_blocks: the plan's mask must be a C-contiguous %dx%d array"
                         % (num_rows, num_cols))
    if k_steps.shape[1] != 2 or (k_steps.shape[0] > 0 and
                                 (k_steps.strides[1] != sizeof(int64_t) or
                                  k_steps.strides[0] != 2 * sizeof(int64_t))):
        raise ValueError("sgemm_blocks: k_steps must be C-contiguous (start, length) rows")
    for s in range(k_steps.shape[0]):
        if k_steps[s, 0] < 0 or k_steps[s, 1] < 0 or k_steps[s, 0] + k_steps[s, 1] > k:
            raise ValueError("sgemm_blocks: k block %d is outside K = %d" % (s, k))
    if num_rows == 0 or num_cols == 0 or k_steps.shape[0] == 0:
        return
    if k == 0:
        return
    if not (_rows_contiguous(a.strides[0], a.strides[1]) and
            _rows_contiguous(b.strides[0], b.strides[1]) and
            _rows_contiguous(c.strides[0], c.strides[1])):
        raise ValueError("sgemm_blocks: a, b and c must have contiguous float32 rows")
    cdef int use_fma = 1 if (_HAS_FMA and not portable) else 0
    with nogil:
        pn_sgemm_blocks(<int>num_rows, <int>num_cols, &a[0, 0], a.strides[0] // sizeof(float),
                        &b[0, 0], b.strides[0] // sizeof(float), &paired[0, 0],
                        &k_steps[0, 0], <int>k_steps.shape[0], alpha, &c[0, 0],
                        c.strides[0] // sizeof(float), use_fma)
