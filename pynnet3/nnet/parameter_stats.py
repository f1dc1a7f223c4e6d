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
(``stddev = sqrt(sum(x^2)/n - mean^2)`` in float), so a vector of equal
values can give a tiny negative variance; we follow the same float32 steps
(sums accumulated exactly, then rounded to float32) so the printed digits agree,
and print a negative variance's square root as Kaldi's C library does
(``-nan``).
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


def _f32(x):
    return np.float32(x)


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
    f = float(_f32(f))
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


def _sum_f32(values):
    """A float32 sum, accumulated exactly and rounded once (Kaldi sums with
    BLAS in float; exact accumulation is the closest portable stand-in)."""
    return _f32(math.fsum(np.asarray(values, dtype=np.float64).ravel().tolist()))


def _dot_f32(values):
    v = np.asarray(values, dtype=np.float64).ravel()
    return _f32(math.fsum((v * v).tolist()))


def _mean_stddev(values, count):
    """Kaldi's float32 ``mean = sum/n; stddev = sqrt(sumsq/n - mean^2)``."""
    n = _f32(count)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = _f32(_sum_f32(values) / n)
        var = _f32(_f32(_dot_f32(values) / n) - _f32(mean * mean))
        stddev = np.sqrt(var) if var >= 0 else _f32(-np.nan)
    return mean, stddev


def _rms(values, count):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(_f32(_dot_f32(values) / _f32(count)))


def summarize_vector(vec):
    """Kaldi's SummarizeVector: the whole vector when it has fewer than 10
    elements, else percentiles, mean and stddev."""
    vec = np.asarray(vec, dtype=np.float32).ravel()
    dim = vec.shape[0]
    if dim < 10:
        return "[ " + "".join(format_float_succinctly(v) + " " for v in vec.tolist()) + "]"
    mean, stddev = _mean_stddev(vec, dim)
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
    params = np.asarray(params, dtype=np.float32).ravel()
    if include_mean:
        mean, stddev = _mean_stddev(params, params.shape[0])
        return ", %s-{mean,stddev}=%s,%s" % (name, _general(mean, 4), _general(stddev, 4))
    return ", %s-rms=%s" % (name, _general(_rms(params, params.shape[0]), 4))


def _norms(mat, axis):
    """Row (axis=1) or column (axis=0) 2-norms, float32 as Kaldi's
    AddDiagMat2 followed by ApplyPow(0.5)."""
    m = np.asarray(mat, dtype=np.float64)
    sq = (m * m).sum(axis=axis).astype(np.float32)
    return np.sqrt(sq)


def matrix_stats(name, params, include_mean=False, include_row_norms=False,
                 include_column_norms=False, include_singular_values=False):
    """Kaldi's PrintParameterStats for a matrix: rms (or mean and stddev) of
    all elements, then optionally summaries of the row norms, column norms
    and singular values."""
    params = np.asarray(params, dtype=np.float32)
    if params.ndim != 2:
        raise ValueError("matrix_stats needs a 2-D array")
    dim = params.shape[0] * params.shape[1]
    if include_mean:
        mean, stddev = _mean_stddev(params, dim)
        out = ", %s-{mean,stddev}=%s,%s" % (name, _general(mean, 4), _general(stddev, 4))
    else:
        out = ", %s-rms=%s" % (name, _general(_rms(params, dim), 4))
    if include_row_norms:
        out += ", %s-row-norms=%s" % (name, summarize_vector(_norms(params, 1)))
    if include_column_norms:
        out += ", %s-col-norms=%s" % (name, summarize_vector(_norms(params, 0)))
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
