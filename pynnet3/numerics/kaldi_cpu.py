"""Kaldi's CPU matrix operations, bit for bit.

Kaldi's CuMatrix operations, on a machine without a GPU, run
matrix/kaldi-matrix.cc and kaldi-vector.cc (built with -O2 and without
-march=native, so its own loops never fuse a multiply with an add) and call
OpenBLAS for products, row additions and scalings. Each function here is one
such Kaldi operation on float32 NumPy matrices, computed with the same
float32 roundings in the same order, so it gives Kaldi's bits where the
oracle's OpenBLAS (:mod:`.openblas`) and C library (:mod:`.kaldi_libm`)
are the ones reproduced:

- :func:`add_mat_mat`: ``AddMatMat`` (OpenBLAS sgemm);
- :func:`axpy_rows`: ``AddMat`` / ``AddRows`` / ``AddToRows``: one
  ``cblas_saxpy`` per row. The Haswell saxpy kernel fuses the multiply-add
  for the first ``n & -32`` elements of each part and rounds the product
  separately for the rest; OpenBLAS splits vectors longer than 10000
  between its threads, each part taking ceil(left / threads left).
  alpha 0 leaves the destination alone;
- :func:`add_vec_to_rows`: ``AddVecToRows(alpha, v, beta)``: scaling by
  beta, then ``data[j] += alpha * v[j]`` (two roundings) when the matrix has
  at most 64 columns, else a rank-one update (``cblas_sger`` with a vector
  of ones), which is a saxpy per row;
- :func:`mul_cols_vec`, :func:`scale`: one rounding per element (sscal by 0
  writes zeros);
- :func:`apply_floor`: ``x < floor ? floor : x`` (NaN and -0 stay);
- :func:`log_softmax_per_row`, :func:`softmax_per_row`, :func:`sigmoid`,
  :func:`tanh`, :func:`scalar_sigmoid`, :func:`scalar_tanh` (cu-math's
  all-float versions), :func:`apply_exp`, :func:`apply_log`, :func:`apply_pow`:
  loops that call the C library's ``expf`` / ``logf`` / ``pow``, with
  Kaldi's double-precision steps where its C++ has them (compiled in
  :mod:`.kaldi_libm`, which runs its kernel or its twins).

Matrices must be float32 with contiguous rows (column ranges of wider
matrices are fine); the functions work in place unless they say otherwise.
:class:`KaldiCpu` binds the OpenBLAS thread count for code (components)
that is handed one object to do its arithmetic with.
"""

import numpy as np

from . import kaldi_libm
from .openblas import ORACLE_THREADS, add_mat_mat, fma32

__all__ = ["KaldiCpu", "add_mat_mat", "axpy_rows", "add_vec_to_rows", "mul_cols_vec", "scale",
           "apply_floor", "log_softmax_per_row", "softmax_per_row", "sigmoid", "tanh",
           "scalar_sigmoid", "scalar_tanh",
           "apply_exp", "apply_log", "apply_pow"]

_F32 = np.float32

# OpenBLAS's saxpy stays on one thread up to this length.
_AXPY_SERIAL_MAX = 10000
# The Haswell saxpy kernel's block: elements before the last partial block
# are fused multiply-adds, the rest are C code without FMA contraction.
_AXPY_BLOCK = 32
# MatrixBase::AddVecToRows loops itself up to this many columns.
_ADD_VEC_TO_ROWS_LOOP_MAX = 64


def _axpy_parts(n, threads):
    """The (start, length) parts OpenBLAS's saxpy runs its kernel on."""
    if n <= _AXPY_SERIAL_MAX or threads <= 1:
        return [(0, n)]
    parts, start, left, num = [], 0, n, 0
    while left > 0:
        width = (left + threads - num - 1) // (threads - num)
        parts.append((start, width))
        start += width
        left -= width
        num += 1
    return parts


def axpy_rows(dest, alpha, src, threads=ORACLE_THREADS):
    """``dest[r] += alpha * src[r]`` for every row r, each row one
    ``cblas_saxpy`` (Kaldi's AddMat, and AddRows / AddToRows on the rows
    they pick). ``src`` may be a row vector shape (1, n) broadcast to every
    row. ``alpha`` may also be a vector, one alpha per row (Kaldi's
    AddDiagVecMat); a row whose alpha is 0 is left alone, as saxpy does.
    Returns ``dest``."""
    if np.ndim(alpha) != 0:
        alpha = np.asarray(alpha, _F32).reshape(-1, 1)
        before = dest.copy()
        _saxpy(dest, alpha, src, threads)
        np.copyto(dest, before, where=np.broadcast_to(alpha == 0, dest.shape))
        return dest
    alpha = _F32(alpha)
    if alpha == 0:
        return dest
    if alpha == 1:
        dest += src
        return dest
    if alpha == -1:
        dest -= src
        return dest
    return _saxpy(dest, alpha, src, threads)


def _saxpy(dest, alpha, src, threads):
    """``dest += alpha * src`` row by row in the saxpy kernel's order: within
    each thread's part, fused multiply-adds on the whole blocks, then a
    multiply and an add on the tail. ``alpha``: a float32 scalar or a column
    of per-row values."""
    src = np.broadcast_to(src, dest.shape)
    for start, width in _axpy_parts(dest.shape[1], threads):
        fused = start + (width & -_AXPY_BLOCK)
        if fused > start:
            dest[:, start:fused] = fma32(alpha, src[:, start:fused], dest[:, start:fused])
        if fused < start + width:
            dest[:, fused:start + width] += alpha * src[:, fused:start + width]
    return dest


def scale(mat, alpha):
    """Kaldi's MatrixBase::Scale (sscal; 1 does nothing, 0 writes zeros)."""
    alpha = _F32(alpha)
    if alpha == 1:
        return mat
    if alpha == 0:
        mat[...] = 0
    else:
        mat *= alpha
    return mat


def add_vec_to_rows(mat, alpha, vec, beta=1.0, threads=ORACLE_THREADS):
    """Kaldi's CuMatrixBase::AddVecToRows(alpha, vec, beta) on the CPU."""
    if _F32(beta) != 1:
        scale(mat, beta)
    vec = np.asarray(vec, _F32).reshape(1, -1)
    if mat.shape[1] <= _ADD_VEC_TO_ROWS_LOOP_MAX:
        mat += _F32(alpha) * vec
    else:
        axpy_rows(mat, alpha, vec, threads)
    return mat


def mul_cols_vec(mat, vec):
    """Kaldi's MulColsVec: column j times vec[j], one rounding."""
    mat *= np.asarray(vec, _F32).reshape(1, -1)
    return mat


def apply_floor(mat, floor):
    """Kaldi's ApplyFloor: ``x < floor ? floor : x`` (NaN and -0 stay)."""
    floor = _F32(floor)
    np.copyto(mat, floor, where=mat < floor)
    return mat


def log_softmax_per_row(src, dest):
    """Kaldi's LogSoftMaxPerRow on the CPU, into ``dest`` (may be ``src``)."""
    kaldi_libm.log_softmax_rows(src, dest)
    return dest


def sigmoid(src, dest):
    """Kaldi's CuMatrixBase::Sigmoid on the CPU, into ``dest`` (may be ``src``)."""
    kaldi_libm.sigmoid_rows(src, dest)
    return dest


def tanh(src, dest):
    """Kaldi's CuMatrixBase::Tanh on the CPU, into ``dest`` (may be ``src``)."""
    kaldi_libm.tanh_rows(src, dest)
    return dest


def scalar_sigmoid(x):
    """cu-math.cc's ScalarSigmoid (the CPU LSTM kernel's, all float) of every
    element of ``x``, as a new matrix."""
    x = np.ascontiguousarray(x, _F32)
    out = np.empty_like(x)
    kaldi_libm.scalar_sigmoid_rows(x.reshape(x.shape[0], -1), out.reshape(x.shape[0], -1))
    return out


def scalar_tanh(x):
    """cu-math.cc's ScalarTanh (all float) of every element, as a new matrix."""
    x = np.ascontiguousarray(x, _F32)
    out = np.empty_like(x)
    kaldi_libm.scalar_tanh_rows(x.reshape(x.shape[0], -1), out.reshape(x.shape[0], -1))
    return out


def softmax_per_row(src, dest):
    """Kaldi's SoftMaxPerRow on the CPU, into ``dest`` (may be ``src``)."""
    kaldi_libm.softmax_rows(src, dest)
    return dest


def apply_exp(mat):
    """Kaldi's ApplyExp: expf of every element, in place."""
    kaldi_libm.exp_rows(mat, mat)
    return mat


def apply_pow(vec, power):
    """Kaldi's VectorBase::ApplyPow: the C library's double pow of every
    element of a float32 vector, rounded to float, as a new vector."""
    src = np.ascontiguousarray(vec, _F32)
    out = np.empty_like(src)
    kaldi_libm.pow_vector(src, _F32(power), out)
    return out


def apply_log(vec):
    """Kaldi's VectorBase::ApplyLog: logf of every element of a float32
    vector, as a new vector (Kaldi refuses negative values; callers check)."""
    src = np.ascontiguousarray(vec, _F32)
    out = np.empty_like(src)
    kaldi_libm.log_vector(src, out)
    return out


class KaldiCpu:
    """Kaldi's CPU matrix operations (the functions of this module) with the
    OpenBLAS thread count fixed: what a component's
    ``propagate_kaldi_exact`` computes with."""

    __slots__ = ("threads",)

    def __init__(self, threads=ORACLE_THREADS):
        if threads < 1:
            raise ValueError("OpenBLAS thread count must be >= 1, got %d" % threads)
        self.threads = int(threads)

    def add_mat_mat(self, c, alpha, a, trans_a, b, trans_b, beta):
        return add_mat_mat(c, alpha, a, trans_a, b, trans_b, beta, self.threads)

    def axpy_rows(self, dest, alpha, src):
        return axpy_rows(dest, alpha, src, self.threads)

    def add_vec_to_rows(self, mat, alpha, vec, beta=1.0):
        return add_vec_to_rows(mat, alpha, vec, beta, self.threads)

    # Operations that do not involve OpenBLAS threads.
    mul_cols_vec = staticmethod(mul_cols_vec)
    scale = staticmethod(scale)
    apply_floor = staticmethod(apply_floor)
    log_softmax_per_row = staticmethod(log_softmax_per_row)
    softmax_per_row = staticmethod(softmax_per_row)
    scalar_sigmoid = staticmethod(scalar_sigmoid)
    scalar_tanh = staticmethod(scalar_tanh)
    sigmoid = staticmethod(sigmoid)
    tanh = staticmethod(tanh)
    apply_exp = staticmethod(apply_exp)
    apply_log = staticmethod(apply_log)
    apply_pow = staticmethod(apply_pow)
