# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
# distutils: language = c++
"""GeneralDropoutComponent's precomputed indexes in C (owner and twin:
``dropout_mask_rows`` in pynnet3/components/dropout.py).

Contract (that of every index-list kernel, see index_lists.pxd): the twin's
result, or None where the input is not the ordinary case.
"""

from cython.operator cimport dereference as deref
from libc.stdint cimport int32_t, int64_t
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from pynnet3._fast.index_lists cimport TWO32, read_indexes

import numpy as np

def dropout_mask_rows(list indexes, int64_t time_period):
    """Twin of GeneralDropoutComponent.precompute_indexes' loop: (rows, count)
    where rows[i] (int32 array) numbers the distinct (n, t // time_period)
    pairs (t ignored when time_period is 0) in order of first appearance;
    None for irregular input."""
    cdef vector[int64_t] ns, ts, xs
    cdef unordered_map[int64_t, int32_t] row_of
    cdef unordered_map[int64_t, int32_t].iterator it
    cdef Py_ssize_t i, size
    cdef int64_t t, key
    cdef int32_t next_row = 0
    if time_period < 0 or read_indexes(indexes, ns, ts, xs):
        return None
    size = ns.size()
    rows = np.empty(size, dtype=np.int32)
    cdef int32_t[::1] out = rows
    for i in range(size):
        t = 0 if time_period == 0 else ts[i] // time_period   # floor division
        key = ns[i] * TWO32 + t
        it = row_of.find(key)
        if it == row_of.end():
            row_of[key] = next_row
            out[i] = next_row
            next_row += 1
        else:
            out[i] = deref(it).second
    return rows, next_row
