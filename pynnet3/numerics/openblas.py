"""Kaldi's matrix products with the oracle's OpenBLAS bits, fast.

:func:`add_mat_mat` is Kaldi's ``C.AddMatMat(alpha, A, transA, B, transB,
beta)`` computed bit for bit as Debian's OpenBLAS 0.3.21 (Haswell kernels)
computes it, with ``threads`` OpenBLAS threads (the oracle ran 2, its number
of cores; 1 is what ``OPENBLAS_NUM_THREADS=1`` gives). The plan comes from
:mod:`.openblas_plan`, the arithmetic from the Cython kernel
``pynnet3._fast.openblas_kernel`` (8-wide fused multiply-adds), or from the
NumPy twin :mod:`.openblas_py` when the kernel is not built (with
pynnet3._fast's one warning). A CPU without FMA runs the kernel's libm
``fmaf`` path, exact but slower (warned once).

:func:`sgemm` returns a new matrix (the collapser's products);
:func:`sgemv_add` is Kaldi's ``y.AddMatVec(1.0, M, kNoTrans, x, 1.0)``;
:func:`sdot_rows` is ``cblas_sdot`` of every row pair (NumPy, vectorized
over rows; it has no compiled kernel).
"""

import warnings

import numpy as np

from .. import _fast
from ..errors import NnetError
from . import openblas_py
from .openblas_plan import ORACLE_THREADS, gemm_plan

__all__ = ["ORACLE_THREADS", "add_mat_mat", "sgemm", "sgemv_add", "sdot_rows"]

_kernel = _fast.load("openblas_kernel")
_F32 = np.float32
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
        c[...] = openblas_py.sgemm(op_a, op_b, c, alpha, 1.0, threads=threads)
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


def sgemv_add(mat, x, y, threads=ORACLE_THREADS):
    """Kaldi's ``y.AddMatVec(1.0, M, kNoTrans, x, 1.0)`` on the oracle's
    OpenBLAS; returns the new ``y`` (see :func:`.openblas_py.sgemv_add`)."""
    return openblas_py.sgemv_add(mat, x, y, threads)


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
            acc = openblas_py.fma32(x[:, start:start + 32], y[:, start:start + 32], acc)
        acc = acc.reshape(rows, 4, 8)
        quads = acc[:, :, :4] + acc[:, :, 4:]                   # per accumulator
        s = (quads[:, 0] + quads[:, 1]) + (quads[:, 2] + quads[:, 3])
        block = (s[:, 0] + s[:, 1]) + (s[:, 2] + s[:, 3])
    tail = np.zeros((rows,), np.float64)
    for j in range(n1, n):
        tail = tail + (x[:, j] * y[:, j]).astype(np.float64)
    return (tail + block.astype(np.float64)).astype(_F32)
