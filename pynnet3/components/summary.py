"""Kaldi's compact vector summaries used in components' Info() lines.

``summarize_vector`` prints what Kaldi's SummarizeVector (nnet-parse.cc)
prints: all elements for short vectors, else percentiles, mean and stddev.
Numbers are float32 as in Kaldi and printed as C++ streams print them.
"""

import math

import numpy as np

_PERCENTILES = (0, 1, 2, 5, 10, 20, 50, 80, 90, 95, 98, 99, 100)
_PERCENTILES_STR = "0,1,2,5 10,20,50,80,90 95,98,99,100"


def print_float_succinctly(value):
    """Kaldi's PrintFloatSuccinctly: few digits, more for small magnitudes."""
    f = float(np.float32(value))
    a = abs(f)
    if 10.0 <= a < 10000.0:
        return "%.0f" % f
    if a >= 0.995:
        return "%.1f" % f
    if a >= 0.01:
        return "%.2f" % f
    return _general(f, 1)


def _general(f, precision):
    """C++ ostream general format (nan/inf spelled as glibc prints them)."""
    if math.isnan(f):
        return "-nan" if math.copysign(1.0, f) < 0 else "nan"
    if math.isinf(f):
        return "-inf" if f < 0 else "inf"
    return "%.*g" % (precision, f)


def summarize_vector(vec):
    """Kaldi's SummarizeVector of a float vector (doubles are first rounded
    to float32, as Kaldi does)."""
    vec = np.asarray(vec).astype(np.float32)
    dim = vec.shape[0]
    if dim < 10:
        return "[ " + "".join(print_float_succinctly(v) + " " for v in vec.tolist()) + "]"
    f32 = np.float32
    mean = f32(f32(vec.astype(np.float64).sum()) / f32(dim))
    sumsq = f32(np.dot(vec.astype(np.float64), vec.astype(np.float64)))
    with np.errstate(invalid="ignore"):
        stddev = np.sqrt(f32(f32(sumsq / f32(dim)) - f32(mean * mean)))
    ordered = np.sort(vec)
    n = dim - 1
    parts = []
    for i, p in enumerate(_PERCENTILES):
        parts.append(print_float_succinctly(ordered[(n * p) // 100]))
        if i + 1 < len(_PERCENTILES):
            parts.append(" " if i in (3, 8) else ",")
    return "[percentiles(%s)=(%s), mean=%s, stddev=%s]" % (
        _PERCENTILES_STR, "".join(parts), _general(float(mean), 3), _general(float(stddev), 3))
