"""AddRowRanges on NumPy (Kaldi's CuMatrix::AddRowRanges on the CPU): row r
of ``dst`` gets the sum of rows [begin_r, end_r) of ``src`` added to it, the
source rows added one at a time in increasing order in float32, exactly as
Kaldi's CPU loop adds them. Used by the statistics components (x-vector
pooling) and the computer's kAddRowRanges.

:func:`add_row_ranges` runs the Cython kernel (``pynnet3/_fast/row_ranges_kernel.pyx``)
when built, else the twin :func:`add_row_ranges_py` (same numbers, bit for
bit). Both check that every non-empty range lies inside ``src``.
"""

import numpy as np

from .. import _fast
from ..errors import ComputationError

__all__ = ["add_row_ranges", "add_row_ranges_py"]

_kernel = _fast.load("row_ranges_kernel")


def _checked_ranges(src, ranges, dst):
    ranges = np.ascontiguousarray(np.asarray(ranges, dtype=np.int32).reshape(-1, 2))
    if ranges.shape[0] != dst.shape[0]:
        raise ComputationError("AddRowRanges: %d ranges for %d destination rows"
                               % (ranges.shape[0], dst.shape[0]))
    if src.shape[1] != dst.shape[1]:
        raise ComputationError("AddRowRanges: source has %d columns, destination %d"
                               % (src.shape[1], dst.shape[1]))
    # Empty or reversed ranges add nothing: make them (0, 0).
    empty = ranges[:, 1] <= ranges[:, 0]
    if empty.any():
        ranges = ranges.copy()
        ranges[empty] = 0
    if ranges.size and (ranges[:, 0].min() < 0 or ranges[:, 1].max() > src.shape[0]):
        raise ComputationError("AddRowRanges: a range reaches outside the %d source rows"
                               % src.shape[0])
    return ranges


def add_row_ranges_py(src, ranges, dst, squared=False, onto_zeros=False):
    """The readable twin of the kernel (same order of float32 additions)."""
    ranges = _checked_ranges(src, ranges, dst)
    for r in range(dst.shape[0]):
        if onto_zeros:
            dst[r] = 0.0
        for j in range(int(ranges[r, 0]), int(ranges[r, 1])):
            dst[r] += src[j] * src[j] if squared else src[j]


def add_row_ranges(src, ranges, dst, squared=False, onto_zeros=False):
    """dst[r] += sum(src[begin_r:end_r]) in Kaldi's order (see the module
    docstring); float32 NumPy arrays, ``dst`` written in place. With
    ``squared``, the sum of the rows' squares (each square rounded to
    float32, as Kaldi squares a copy of ``src`` before it adds). With
    ``onto_zeros``, ``dst`` as if zeroed first (row by row, each just
    before its sums: no separate pass over it)."""
    if _kernel is None or src.dtype != np.float32 or dst.dtype != np.float32:
        add_row_ranges_py(src, ranges, dst, squared, onto_zeros)
        return
    _kernel.add_row_ranges(src, _checked_ranges(src, ranges, dst), dst, squared, onto_zeros)
