"""Kaldi's matrix products with the oracle's OpenBLAS bits, fast.

:func:`add_mat_mat` is Kaldi's ``C.AddMatMat(alpha, A, transA, B, transB,
beta)`` computed bit for bit as Debian's OpenBLAS 0.3.21 (Haswell kernels)
computes it, with ``threads`` OpenBLAS threads (the oracle ran 2, its number
of cores; 1 is what ``OPENBLAS_NUM_THREADS=1`` gives). The plan comes from
:mod:`.openblas_plan`, the arithmetic from the Cython kernel
``pynnet3._fast.openblas_kernel`` (8-wide fused multiply-adds), or from the
NumPy twin below (:func:`sgemm_py`) when the kernel is not built (with
pynnet3._fast's one warning). A CPU without FMA runs the kernel's libm
``fmaf`` path, exact but slower (warned once).

:func:`sgemm` returns a new matrix (the collapser's products);
:func:`sgemv_add` is Kaldi's ``y.AddMatVec(1.0, M, kNoTrans, x, 1.0)``;
:func:`sdot_rows` is ``cblas_sdot`` of every row pair (NumPy, vectorized
over rows; it has no compiled kernel).

The twin, the oracle's arithmetic in NumPy (the specification the kernel is
tested against, about a thousand times slower):

- :func:`sgemm_py`: ``C = beta C + alpha op(A) op(B)``. C is first scaled by
  beta when beta is not 1 (beta 0 writes zeros, whatever C held); then, per
  block of k, each element's products are accumulated from +0 with fused
  multiply-adds (one chain over the block's k in order, or the kernel's
  paired form, see :func:`fma_chains`) and the block's sum is added onto C
  with one fused multiply-add by alpha.
- :func:`sgemv_add`: ``y += M x`` (Kaldi's ``AddMatVec(1.0, M, kNoTrans, x,
  1.0)``), the Haswell sgemv_t kernels' lanes and reductions.
"""

import warnings

import numpy as np

from .. import _fast
from ..errors import NnetError
from .openblas_plan import GEMM_MULTITHREAD_THRESHOLD, ORACLE_THREADS, gemm_plan

__all__ = ["ORACLE_THREADS", "add_mat_mat", "sgemm", "sgemv_add", "sdot_rows", "fma32",
           "fma_chains", "sgemm_py"]

_kernel = _fast.load("openblas_kernel")
_F32 = np.float32
_F64 = np.float64
_warned_no_fma = False


def _warn_if_no_fma():
    global _warned_no_fma
    if not _warned_no_fma and _kernel is not None and not _kernel.has_fma():
        _warned_no_fma = True
        warnings.warn("this CPU has no FMA instructions: Kaldi-exact matrix products run "
                      "through libm's fmaf, exact but several times slower",
                      _fast.SlowPathWarning, stacklevel=3)


def add_mat_mat(c, alpha, a, trans_a, b, trans_b, beta, threads=ORACLE_THREADS):
    """Kaldi's ``C.AddMatMat(alpha, A, trans_a, B, trans_b, beta)``, in place
    on the float32 matrix ``c`` (its rows must be contiguous; a column range
    of a wider matrix is fine), bit for bit as the oracle's OpenBLAS with
    ``threads`` threads. ``a`` and ``b`` are float32 matrices."""
    op_a = a.T if trans_a else a
    op_b = b.T if trans_b else b
    rows, k = op_a.shape
    if op_b.shape[0] != k or c.shape != (rows, op_b.shape[1]):
        raise NnetError("AddMatMat: cannot add a %dx%d times %dx%d product to a %dx%d matrix"
                        % (op_a.shape + op_b.shape + c.shape))
    if c.dtype != _F32 or a.dtype != _F32 or b.dtype != _F32:
        raise NnetError("AddMatMat: float32 matrices expected")
    cols = c.shape[1]
    beta, alpha = _F32(beta), _F32(alpha)
    if beta == 0:
        c[...] = 0         # OpenBLAS writes zeros: NaN or inf in C do not survive
    elif beta != 1:
        c *= beta
    if rows == 0 or cols == 0 or k == 0 or alpha == 0:
        return c
    if _kernel is None:
        c[...] = sgemm_py(op_a, op_b, c, alpha, 1.0, threads=threads)
        return c
    _warn_if_no_fma()
    plan = gemm_plan(rows, cols, k, threads)
    # The kernel reads rows of op(A) and of op(B) (k-major) contiguously.
    op_a = op_a if op_a.strides[1] == 4 else np.ascontiguousarray(op_a)
    op_b = op_b if op_b.strides[1] == 4 else np.ascontiguousarray(op_b)
    if c.strides[1] == 4:
        _kernel.sgemm_blocks(op_a, op_b, plan.paired, plan.k_steps, alpha, c)
    else:
        out = np.ascontiguousarray(c)
        _kernel.sgemm_blocks(op_a, op_b, plan.paired, plan.k_steps, alpha, out)
        c[...] = out
    return c


def sgemm(a, b, trans_a=False, trans_b=False, threads=ORACLE_THREADS):
    """op(A) op(B) as a new float32 matrix: Kaldi's ``C.AddMatMat(1.0, A,
    trans_a, B, trans_b, 0.0)`` on the oracle's OpenBLAS."""
    a = np.asarray(a, _F32)
    b = np.asarray(b, _F32)
    rows = a.shape[1] if trans_a else a.shape[0]
    cols = b.shape[0] if trans_b else b.shape[1]
    c = np.zeros((rows, cols), _F32)
    return add_mat_mat(c, 1.0, a, trans_a, b, trans_b, 0.0, threads)




def sdot_rows(x, y):
    """``cblas_sdot(n, x[r], 1, y[r], 1)`` for every row r of two float32
    matrices, as OpenBLAS 0.3.21's Haswell sdot computes it (rows of at most
    10000 elements, which it does not split between threads): the first
    ``n & -32`` elements in four 8-lane fused multiply-add accumulators (one
    per 8-element part of each block of 32), reduced as (lo + hi) per
    accumulator, (a0 + a1) + (a2 + a3), then two horizontal pair additions;
    the remaining elements' float products summed in double in order, that
    sum plus the block sum in double, rounded to float at return."""
    x = np.asarray(x, _F32)
    y = np.asarray(y, _F32)
    rows, n = x.shape
    if n > 10000:
        raise NnetError("sdot_rows: rows longer than 10000 elements (OpenBLAS would split "
                        "them between threads) are not reproduced")
    n1 = n & -32
    block = np.zeros((rows,), _F32)
    if n1:
        acc = np.zeros((rows, 32), _F32)
        for start in range(0, n1, 32):
            acc = fma32(x[:, start:start + 32], y[:, start:start + 32], acc)
        acc = acc.reshape(rows, 4, 8)
        quads = acc[:, :, :4] + acc[:, :, 4:]                   # per accumulator
        s = (quads[:, 0] + quads[:, 1]) + (quads[:, 2] + quads[:, 3])
        block = (s[:, 0] + s[:, 1]) + (s[:, 2] + s[:, 3])
    tail = np.zeros((rows,), np.float64)
    for j in range(n1, n):
        tail = tail + (x[:, j] * y[:, j]).astype(np.float64)
    return (tail + block.astype(np.float64)).astype(_F32)


# -- the twin: the oracle's arithmetic in NumPy --------------------------------------------



_GEMV_NBMAX = 4096


def fma32(a, b, c):
    """float32 fused multiply-add ``a*b + c`` rounded once (broadcasting).

    The product is exact in double; the double sum may round onto a float32
    tie that the exact sum is not on, so such ties are resolved with the
    exact remainder of the double addition (TwoSum)."""
    # Like the hardware instruction: inf, NaN and overflow quietly.
    with np.errstate(all="ignore"):
        p = np.asarray(a, _F32).astype(_F64) * np.asarray(b, _F32).astype(_F64)
        c = np.asarray(c, _F32).astype(_F64)
        p, c = np.broadcast_arrays(p, c)
        s = np.asarray(p + c)
        r = s.astype(_F32)
        bits = s.view(np.int64)
        tie = (bits & 0x1FFFFFFF) == 0x10000000
        if tie.any():
            bb = s - p
            err = (p - (s - bb)) + (c - bb)
            fix = tie & (err != 0)
            if fix.any():
                toward = np.where(err[fix] > 0, np.inf, -np.inf)
                r[fix] = np.nextafter(s[fix], toward).astype(_F32)
    return r


def fma_chains(a, b):
    """For A (M x K) and B (K x N), the two ways the Haswell sgemm kernel
    accumulates a block of k, both starting from +0 and using fused
    multiply-adds: ``(single, paired)``. ``single`` is one chain over k in
    order; ``paired`` runs k in groups of 8, even steps into one accumulator
    and odd steps into a second, then the last K % 8 steps into the first,
    and adds the two accumulators."""
    m, k = a.shape
    n = b.shape[1]
    single = np.zeros((m, n), _F32)
    first = np.zeros((m, n), _F32)
    second = np.zeros((m, n), _F32)
    k8 = k & ~7
    for kk in range(k):
        col, row = a[:, kk:kk + 1], b[kk:kk + 1, :]
        single = fma32(col, row, single)
        if kk < k8 and kk & 1:
            second = fma32(col, row, second)
        else:
            first = fma32(col, row, first)
    return single, first + second


def sgemm_py(a, b, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
          threads=ORACLE_THREADS):
    """``beta C + alpha op(A) op(B)`` as the oracle's OpenBLAS computes
    Kaldi's ``C.AddMatMat(alpha, A, trans_a, B, trans_b, beta)`` with
    ``threads`` threads (see the module docstring); returns a new float32
    matrix (``c`` is not changed; None means a zero matrix, as for beta 0).
    """
    a = np.asarray(a, _F32)
    b = np.asarray(b, _F32)
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    rows, k = a.shape
    if b.shape[0] != k:
        raise NnetError("sgemm: inner dimensions differ (%d vs %d)" % (k, b.shape[0]))
    cols = b.shape[1]
    if c is None:
        out = np.zeros((rows, cols), _F32)
    else:
        out = np.array(c, dtype=_F32)
        if out.shape != (rows, cols):
            raise NnetError("sgemm: C is %dx%d, the product is %dx%d"
                            % (out.shape + (rows, cols)))
    alpha, beta = _F32(alpha), _F32(beta)
    if beta == 0:
        out[...] = 0
    elif beta != 1:
        out *= beta
    if rows == 0 or cols == 0 or k == 0 or alpha == 0:
        return out
    plan = gemm_plan(rows, cols, k, threads)
    paired = plan.paired.astype(bool)
    for ls, min_l in plan.k_steps.tolist():
        single, two = fma_chains(a[:, ls:ls + min_l], b[ls:ls + min_l, :])
        out = fma32(alpha, np.where(paired, two, single), out)
    return out


def _gemv_lanes_fma(a, x, lanes_width, chunks):
    """Helper of the sgemv kernels: for row-major ``a`` (rows x NB), lane
    accumulators of ``lanes_width`` over the given column chunks
    ``(start, lanes)`` (chunk element j goes to lane j), with fused
    multiply-adds."""
    acc = np.zeros((a.shape[0], lanes_width), _F32)
    for start, width in chunks:
        acc[:, :width] = fma32(a[:, start:start + width], x[None, start:start + width],
                               acc[:, :width])
    return acc


def _gemv_t_dot_4x4(a, x):
    """sgemv_kernel_4x4 (Haswell micro-kernel): 8 FMA lanes (a leading
    4-chunk, an 8-chunk, then 8-chunks two at a time), reduced as
    ((l0+l4)+(l1+l5)) + ((l2+l6)+(l3+l7))."""
    nb = a.shape[1]
    chunks = []
    i = 0
    if nb & 4:
        chunks.append((0, 4))
        i = 4
    while i < nb:
        chunks.append((i, 8))
        i += 8
    lanes = _gemv_lanes_fma(a, x, 8, chunks)
    t = lanes[:, 4:8] + lanes[:, 0:4]
    return (t[:, 0] + t[:, 1]) + (t[:, 2] + t[:, 3])


def _gemv_t_dot_sse(a, x, two_accumulators):
    """sgemv_kernel_4x2 / 4x1 (SSE, multiply then add): 4 lanes; 4x1 keeps
    the second half of every 8 columns in a second accumulator."""
    nb = a.shape[1]
    first = np.zeros((a.shape[0], 4), _F32)
    second = np.zeros((a.shape[0], 4), _F32)
    i = 0
    if nb & 4:
        first = first + a[:, 0:4] * x[None, 0:4]
        i = 4
    while i < nb:
        first = first + a[:, i:i + 4] * x[None, i:i + 4]
        p = a[:, i + 4:i + 8] * x[None, i + 4:i + 8]
        if two_accumulators:
            second = second + p
        else:
            first = first + p
        i += 8
    if two_accumulators:
        first = first + second
    return (first[:, 0] + first[:, 1]) + (first[:, 2] + first[:, 3])


def _gemv_t_block(a, x, y):
    """One column block of sgemv_t_4: y += row dot products (rows in groups
    of 4 through the 4x4 kernel, then a pair, then a single row)."""
    rows = a.shape[0]
    n4 = rows & ~3
    if n4:
        y[:n4] = y[:n4] + _gemv_t_dot_4x4(a[:n4], x)
    r = n4
    if rows & 2:
        y[r:r + 2] = y[r:r + 2] + _gemv_t_dot_sse(a[r:r + 2], x, False)
        r += 2
    if rows & 1:
        y[r:r + 1] = y[r:r + 1] + _gemv_t_dot_sse(a[r:r + 1], x, True)


def _gemv_t_kernel(a, x, y):
    """OpenBLAS's sgemv_t_4.c on a row-major matrix (rows = its n, columns =
    its m): column blocks of up to 4096 (a multiple of 4), then the last
    1-3 columns as separate float32 products and sums (the Haswell kernels
    are built with -mavx2 but not -mfma, so GCC contracts nothing there)."""
    rows, m = a.shape
    m3 = m & 3
    m1 = m & -4
    m2 = (m & (_GEMV_NBMAX - 1)) - m3
    nb = _GEMV_NBMAX
    col = 0
    while nb == _GEMV_NBMAX:
        m1 -= nb
        if m1 < 0:
            if m2 == 0:
                break
            nb = m2
        _gemv_t_block(a[:, col:col + nb], x[col:col + nb], y)
        col += nb
    if m3:
        t = a[:, col] * x[col]
        for j in range(col + 1, col + m3):
            t = t + a[:, j] * x[j]
        y[:] = y + t


def sgemv_add(mat, x, y, threads=ORACLE_THREADS):
    """Kaldi's ``y.AddMatVec(1.0, M, kNoTrans, x, 1.0)`` in OpenBLAS's order
    (row-major no-transpose is OpenBLAS's sgemv_t); returns the new ``y``.

    Rows are split between threads as OpenBLAS splits them (from 2304 x
    GEMM_MULTITHREAD_THRESHOLD elements on); each part goes through the
    kernel, whose row grouping decides the summation order."""
    mat = np.ascontiguousarray(mat, _F32)
    x = np.ascontiguousarray(x, _F32)
    y = np.array(y, dtype=_F32)
    rows, cols = mat.shape
    if rows == 0 or cols == 0:
        return y
    nthreads = 1 if rows * cols < 2304 * GEMM_MULTITHREAD_THRESHOLD else threads
    start, remaining, num = 0, rows, 0
    while remaining > 0:
        width = (remaining + nthreads - num - 1) // (nthreads - num) if num < nthreads \
            else remaining
        width = min(max(width, 4), remaining)
        _gemv_t_kernel(mat[start:start + width], x, y[start:start + width])
        start += width
        remaining -= width
        num += 1
    return y
