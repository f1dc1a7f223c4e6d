# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Kaldi's CPU AddRowRanges: dst[r, c] += src[j, c] for j in [begin_r, end_r),
added one source row at a time in increasing j, in float32, as Kaldi's CPU
loop adds them (so the numbers are Kaldi's exactly). Empty or reversed ranges
add nothing. The Python twin is pynnet3.components.row_ranges.add_row_ranges_py.
"""

cimport cython


def add_row_ranges(const float[:, :] src, const int[:, :] ranges, float[:, :] dst):
    """In place on ``dst`` (any strides); ``ranges`` is (dst rows, 2) int32.
    The caller checks that every range lies inside ``src``."""
    cdef Py_ssize_t num_rows = dst.shape[0], num_cols = dst.shape[1]
    cdef Py_ssize_t r, j, c, begin, end
    with nogil:
        for r in range(num_rows):
            begin = ranges[r, 0]
            end = ranges[r, 1]
            for j in range(begin, end):
                for c in range(num_cols):
                    dst[r, c] += src[j, c]
