"""Kaldi's parameter statistics, as component Info() lines print them.

Kaldi's Info() of a parameterized component appends summaries such as::

    , linear-params-rms=0.2076, linear-params-row-norms=[percentiles(0,1,2,5
    10,20,50,80,90 95,98,99,100)=(0.79,...,1.4), mean=1.01, stddev=0.136],
    ..., bias-{mean,stddev}=0.2049,1.052

(Kaldi's PrintParameterStats and SummarizeVector in nnet-parse.cc). This
module reproduces that text exactly:

- a mean/stddev/rms is printed with 4 significant digits (``%.4g``);
- a summarized vector of 10 or more elements prints 13 percentiles, each
  "succinctly" (see :func:`format_float_succinctly`), then ``mean`` and
  ``stddev`` with 3 significant digits; a shorter vector is printed whole,
  each element succinctly, as ``[ a b c ]``.

Kaldi computes these statistics in single precision
(``stddev = sqrt(sum(x^2)/n - mean^2)`` in float), with sums in the order its
BLAS uses; we follow the same float32 steps and summation order (see the
reductions below), so the printed digits agree even where the last digit sits
on a rounding boundary, and print a negative variance's square root as Kaldi's
C library does (``-nan``).
"""

import math

import numpy as np

_PERCENTILES = (0, 1, 2, 5, 10, 20, 50, 80, 90, 95, 98, 99, 100)
_PERCENTILES_STR = "0,1,2,5 10,20,50,80,90 95,98,99,100"

_verbose_level = 0


def set_verbose_level(level):
    """Kaldi's --verbose: at level >= 2, matrix statistics include singular values."""
    global _verbose_level
    _verbose_level = int(level)


def get_verbose_level():
    return _verbose_level


def _host(array):
    """A NumPy view or copy of a NumPy or CuPy array."""
    if type(array).__module__.startswith("cupy"):
        return array.get()
    return array


def _general(value, digits):
    """C++ ostream default float format with ``digits`` precision (``%.Ng``),
    including the C library's spelling of NaN with its sign bit."""
    value = float(value)
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return "%.*g" % (digits, value)


def format_float_succinctly(f):
    """Kaldi's PrintFloatSuccinctly: 0 decimals for 10 <= |f| < 10000,
    1 decimal for |f| >= 0.995 otherwise, 2 decimals for |f| >= 0.01,
    one significant digit below that."""
    f = float(np.float32(f))
    a = abs(f)
    if math.isnan(f):
        return _general(f, 1)
    if 10.0 <= a < 10000.0:
        return "%.0f" % f
    if a >= 0.995:
        return "%.1f" % f
    if a >= 0.01:
        return "%.2f" % f
    return _general(f, 1)


# -- Kaldi's BLAS reductions ------------------------------------------------------
#
# Kaldi computes these statistics with cblas_sdot (through Sum(), VecVec(),
# AddDiagMat2 and TraceMatMat). The oracle's OpenBLAS (0.3.21, x86_64 with
# AVX-512) sums in a fixed order; since Info() prints 3-4 significant digits
# of a difference of nearly equal float32 numbers (stddev of norms close to 1),
# one ulp matters, so that order is reproduced here:
# - unit stride: the first n - n % 32 products go through the vector kernel
#   (four 16-lane fused multiply-add accumulators over 64-element steps,
#   then four 8-lane ones over 32-element steps, folded in a fixed order);
#   the remaining products are added one by one in double, then the kernel's
#   float result; the total is rounded to float;
# - other strides (column norms; Sum() uses a zero stride on a constant 1):
#   products summed in pairs in float, the pair sums accumulated in double.

def _fma32(a, b, c):
    """Fused multiply-add rounded once to float32 (a*b is exact in double)."""
    return (a.astype(np.float64) * b + c).astype(np.float32)


def _sdot_unit_rows(x, y):
    """OpenBLAS sdot of each row of x with the same row of y (unit stride)."""
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.float32)
    rows, n = x.shape
    n1 = n & -32
    kernel = np.zeros(rows, dtype=np.float32)
    if n1:
        n64 = n1 & -64
        acc = np.zeros((rows, 4, 8), dtype=np.float32)
        if n64:
            wide = np.zeros((rows, 4, 16), dtype=np.float32)
            for b in range(0, n64, 64):
                wide = _fma32(x[:, b:b + 64].reshape(rows, 4, 16),
                              y[:, b:b + 64].reshape(rows, 4, 16), wide)
            acc = wide[:, :, :8] + wide[:, :, 8:]
        for b in range(n64, n1, 32):
            acc = _fma32(x[:, b:b + 32].reshape(rows, 4, 8), y[:, b:b + 32].reshape(rows, 4, 8),
                         acc)
        a = ((acc[:, 0] + acc[:, 1]) + acc[:, 2]) + acc[:, 3]
        h = a[:, :4] + a[:, 4:]
        kernel = (h[:, 0] + h[:, 1]) + (h[:, 2] + h[:, 3])
    tail = np.zeros(rows, dtype=np.float64)
    if n1 < n:
        products = (x[:, n1:] * y[:, n1:]).astype(np.float64)
        tail = np.cumsum(products, axis=1)[:, -1]
    return (tail + kernel.astype(np.float64)).astype(np.float32)


def _sdot_strided_cols(m):
    """OpenBLAS sdot of each column of m with itself (a non-unit stride)."""
    m = np.asarray(m, dtype=np.float32)
    rows, cols = m.shape
    total = np.zeros(cols, dtype=np.float64)
    n1 = rows & -2
    if n1:
        even, odd = m[0:n1:2], m[1:n1:2]
        pairs = _fma32(even, even, odd * odd).astype(np.float64)
        total = np.cumsum(pairs, axis=0)[-1]
    if n1 < rows:
        total = total + (m[-1] * m[-1]).astype(np.float64)
    return total.astype(np.float32)


def _vector_sum(vec):
    """Kaldi's Vector::Sum() (sdot against a zero-stride 1)."""
    v = np.asarray(vec, dtype=np.float32).ravel()
    n1 = v.shape[0] & -2
    total = 0.0
    if n1:
        total = float(np.cumsum((v[0:n1:2] + v[1:n1:2]).astype(np.float64))[-1])
    if n1 < v.shape[0]:
        total += float(v[-1])
    return np.float32(total)


def _vec_vec(vec):
    """Kaldi's VecVec(v, v)."""
    v = np.asarray(vec, dtype=np.float32).reshape(1, -1)
    return _sdot_unit_rows(v, v)[0]


def _trace_mat_mat_self(mat):
    """Kaldi's TraceMatMat(M, M, kTrans): row dot products summed in float."""
    rows = _sdot_unit_rows(mat, mat)
    return np.cumsum(rows, dtype=np.float32)[-1] if rows.size else np.float32(0.0)


def _mean_stddev(total, sumsq, count):
    """Kaldi's float32 ``mean = sum/n; stddev = sqrt(sumsq/n - mean^2)``."""
    n = np.float32(count)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.float32(np.float32(total) / n)
        var = np.float32(np.float32(np.float32(sumsq) / n) - np.float32(mean * mean))
        stddev = np.sqrt(var) if var >= 0 else np.float32(-np.nan)
    return mean, stddev


def _rms(sumsq, count):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(np.float32(np.float32(sumsq) / np.float32(count)))


def summarize_vector(vec):
    """Kaldi's SummarizeVector: the whole vector when it has fewer than 10
    elements, else percentiles, mean and stddev."""
    vec = np.asarray(_host(vec), dtype=np.float32).ravel()
    dim = vec.shape[0]
    if dim < 10:
        return "[ " + "".join(format_float_succinctly(v) + " " for v in vec.tolist()) + "]"
    mean, stddev = _mean_stddev(_vector_sum(vec), _vec_vec(vec), dim)
    ordered = np.sort(vec)
    n = dim - 1
    parts = []
    for i, p in enumerate(_PERCENTILES):
        parts.append(format_float_succinctly(ordered[(n * p) // 100]))
        if i + 1 < len(_PERCENTILES):
            parts.append(" " if i in (3, 8) else ",")
    return "[percentiles(%s)=(%s), mean=%s, stddev=%s]" % (
        _PERCENTILES_STR, "".join(parts), _general(mean, 3), _general(stddev, 3))


def vector_stats(name, params, include_mean=False):
    """Kaldi's PrintParameterStats for a vector: ``", NAME-rms=X"`` or, with
    ``include_mean``, ``", NAME-{mean,stddev}=M,S"``."""
    params = np.asarray(_host(params), dtype=np.float32).ravel()
    sumsq = _vec_vec(params)
    if include_mean:
        mean, stddev = _mean_stddev(_vector_sum(params), sumsq, params.shape[0])
        return ", %s-{mean,stddev}=%s,%s" % (name, _general(mean, 4), _general(stddev, 4))
    return ", %s-rms=%s" % (name, _general(_rms(sumsq, params.shape[0]), 4))


def matrix_stats(name, params, include_mean=False, include_row_norms=False,
                 include_column_norms=False, include_singular_values=False):
    """Kaldi's PrintParameterStats for a matrix: rms (or mean and stddev) of
    all elements, then optionally summaries of the row norms, column norms
    and singular values."""
    params = np.asarray(_host(params), dtype=np.float32)
    if params.ndim != 2:
        raise ValueError("matrix_stats needs a 2-D array")
    dim = params.shape[0] * params.shape[1]
    sumsq = _trace_mat_mat_self(params)
    if include_mean:
        # Kaldi's Matrix::Sum() accumulates in double, row by row.
        flat = params.astype(np.float64).ravel()
        total = np.cumsum(flat)[-1] if flat.size else 0.0
        mean, stddev = _mean_stddev(total, sumsq, dim)
        out = ", %s-{mean,stddev}=%s,%s" % (name, _general(mean, 4), _general(stddev, 4))
    else:
        out = ", %s-rms=%s" % (name, _general(_rms(sumsq, dim), 4))
    if include_row_norms:
        out += ", %s-row-norms=%s" % (name, summarize_vector(np.sqrt(_sdot_unit_rows(params,
                                                                                    params))))
    if include_column_norms:
        out += ", %s-col-norms=%s" % (name, summarize_vector(np.sqrt(_sdot_strided_cols(params))))
    if include_singular_values:
        s = np.linalg.svd(params.astype(np.float64), compute_uv=False).astype(np.float32)
        out += ", %s-singular-values=%s" % (name, summarize_vector(s))
    return out


def kaldi_min_max(vec):
    """Kaldi's Vector Min()/Max() of a possibly empty vector (+inf/-inf when empty)."""
    vec = np.asarray(vec, dtype=np.float32)
    if vec.size == 0:
        return float("inf"), float("-inf")
    return float(vec.min()), float(vec.max())
