# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
# distutils: language = c++
"""BackpropTruncationComponent's precomputed indexes in C (owner and twin:
``zeroing_rows`` in pynnet3/components/backprop_truncation.py).

Contract (that of every index-list kernel, see index_lists.pxd): the twin's
result, or None where the input is not the ordinary case.
"""

from libc.stdint cimport int64_t
from libcpp.vector cimport vector

from pynnet3._fast.index_lists cimport read_indexes

import numpy as np

def backprop_truncation_zeroing(list indexes, int64_t zeroing_interval,
                                int64_t recurrence_interval):
    """Twin of BackpropTruncationComponent.precompute_indexes' loop: (zeroing,
    count), zeroing[i] = -1.0 (float32) where (t - n) // zeroing_interval
    differs from (t - recurrence_interval - n) // zeroing_interval, else 0;
    None for irregular input or zeroing_interval <= 0."""
    cdef vector[int64_t] ns, ts, xs
    cdef Py_ssize_t i, size
    cdef int64_t count = 0
    if zeroing_interval <= 0 or read_indexes(indexes, ns, ts, xs):
        return None
    size = ns.size()
    zeroing = np.zeros(size, dtype=np.float32)
    cdef float[::1] out = zeroing
    for i in range(size):
        if ((ts[i] - ns[i]) // zeroing_interval
                != (ts[i] - recurrence_interval - ns[i]) // zeroing_interval):
            out[i] = -1.0
            count += 1
    return zeroing, count
