"""The parameter summaries Kaldi prints inside component Info() lines.

A thin front over :mod:`pynnet3.nnet.parameter_stats` (which reproduces
Kaldi's float32 arithmetic and BLAS summation order, so the printed digits
agree with Kaldi's):

- :func:`parameter_stats` -> ``", w_h-rms=0.2628"`` or
  ``", output-{mean,stddev}=0,0"``: Kaldi's PrintParameterStats, choosing the
  vector or matrix form from the array's rank as Kaldi's overloads do;
- :func:`summarize_vector` -> Kaldi's SummarizeVector;
- :func:`float_succinctly` -> Kaldi's PrintFloatSuccinctly.
"""

import numpy as np

from ..nnet.parameter_stats import format_float_succinctly as float_succinctly
from ..nnet.parameter_stats import matrix_stats, summarize_vector, vector_stats

__all__ = ["parameter_stats", "summarize_vector", "float_succinctly"]


def parameter_stats(name, params, include_mean=False):
    """Kaldi's PrintParameterStats (without row/column norms or singular
    values): the matrix form for 2-D ``params``, the vector form otherwise."""
    if np.ndim(params) == 2:
        return matrix_stats(name, params, include_mean=include_mean)
    return vector_stats(name, params, include_mean=include_mean)
