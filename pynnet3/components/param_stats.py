"""The parameter summaries Kaldi prints inside component Info() lines.

Kaldi's nnet-parse helpers PrintParameterStats and SummarizeVector, as
functions returning the text they append:

- :func:`parameter_stats` -> ``", w_h-rms=0.2628"`` or
  ``", output-{mean,stddev}=0,0"`` (4 significant digits);
- :func:`summarize_vector` -> ``"[ 0.50 1.0 -0.03 ]"`` for fewer than 10
  elements, else ``"[percentiles(0,1,2,5 10,20,50,80,90 95,98,99,100)=(...),
  mean=.., stddev=..]"``.

Values are computed in float32 where Kaldi uses BaseFloat, so the printed
digits agree with Kaldi's.
"""

import math

import numpy as np

_PERCENTILES = (0, 1, 2, 5, 10, 20, 50, 80, 90, 95, 98, 99, 100)


def _to_host(values):
    """A float64 NumPy copy of a NumPy or CuPy array."""
    if type(values).__module__.startswith("cupy"):
        values = values.get()
    return np.asarray(values, dtype=np.float64)


def _g(value, precision):
    """A float as a C++ ostream prints it with the given precision
    (general format; NaN and infinities as glibc prints them)."""
    value = float(value)
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return "%.*g" % (precision, value)


def _sqrt_f32(value):
    """std::sqrt of a float: NaN (printed '-nan' by glibc) for negatives."""
    value = np.float32(value)
    if value < 0:
        return float("-nan")
    return float(np.sqrt(value))


def parameter_stats(name, params, include_mean=False):
    """Kaldi's PrintParameterStats for a vector or matrix (without the
    row/column-norm and singular-value options)."""
    p = _to_host(params).ravel()
    dim = p.size
    total = np.float32(p.sum())
    sumsq = np.float32(np.dot(p, p))
    if include_mean:
        mean = np.float32(total / np.float32(dim))
        stddev = _sqrt_f32(np.float32(sumsq / np.float32(dim)) - mean * mean)
        return ", %s-{mean,stddev}=%s,%s" % (name, _g(mean, 4), _g(stddev, 4))
    rms = _sqrt_f32(np.float32(sumsq / np.float32(dim)))
    return ", %s-rms=%s" % (name, _g(rms, 4))


def float_succinctly(value):
    """Kaldi's PrintFloatSuccinctly (few digits, fixed or general notation)."""
    f = float(np.float32(value))
    a = abs(f)
    if 10.0 <= a < 10000.0:
        return "%.0f" % f
    if a >= 0.995:
        return "%.1f" % f
    if a >= 0.01:
        return "%.2f" % f
    return _g(f, 1)


def summarize_vector(vec):
    """Kaldi's SummarizeVector of a float vector."""
    v = _to_host(vec).astype(np.float32)
    dim = v.shape[0]
    if dim < 10:
        return "[ " + "".join(float_succinctly(x) + " " for x in v.tolist()) + "]"
    mean = np.float32(np.float32(v.astype(np.float64).sum()) / np.float32(dim))
    sumsq = np.float32(np.dot(v.astype(np.float64), v.astype(np.float64)))
    stddev = _sqrt_f32(np.float32(sumsq / np.float32(dim)) - mean * mean)
    srt = np.sort(v)
    n = dim - 1
    parts = []
    for i, pct in enumerate(_PERCENTILES):
        parts.append(float_succinctly(srt[(n * pct) // 100]))
        if i + 1 < len(_PERCENTILES):
            parts.append(" " if i in (3, 8) else ",")
    return ("[percentiles(0,1,2,5 10,20,50,80,90 95,98,99,100)=(" + "".join(parts)
            + "), mean=%s, stddev=%s]" % (_g(mean, 3), _g(stddev, 3)))
