# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
# distutils: language = c++
"""The Index-list hooks of the statistics components in C (owner and twins:
pynnet3/components/statistics.py): the (n, x, t) sort and the precomputed
indexes of StatisticsExtractionComponent and StatisticsPoolingComponent.

Contract (that of every index-list kernel, see index_lists.pxd): the twin's
result, or None where the input is not the ordinary case.
"""

cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int32_t, int64_t
from libcpp.algorithm cimport sort
from libcpp.pair cimport pair
from libcpp.vector cimport vector

cimport numpy as cnp

from pynnet3._fast.cindex_keys cimport (CindexTable, K_NO_TIME, pack, table_find, table_free,
                                        table_get_or_insert, table_init, table_slot)
from pynnet3._fast.index_lists cimport nx_key, read_indexes

import numpy as np

cnp.import_array()

# -- statistics extraction / pooling -----------------------------------------------------------

def sort_nxt(list indexes):
    """Twin of ``sorted(indexes, key=lambda i: (i.n, i.x, i.t))`` (stable), or None."""
    cdef vector[int64_t] ns, ts, xs
    cdef vector[pair[pair[int64_t, int64_t], Py_ssize_t]] keys
    cdef Py_ssize_t i, size = PyList_GET_SIZE(indexes)
    cdef list out
    cdef object item
    if read_indexes(indexes, ns, ts, xs):
        return None
    keys.resize(size)
    for i in range(size):
        keys[i].first.first = nx_key(ns[i], xs[i])
        keys[i].first.second = ts[i]
        keys[i].second = i     # ties keep their order, as a stable sort does
    sort(keys.begin(), keys.end())
    out = PyList_New(size)
    for i in range(size):
        item = <object>PyList_GET_ITEM(indexes, keys[i].second)
        Py_INCREF(item)
        PyList_SET_ITEM(out, i, item)
    return out


@cython.final
cdef class _Request:
    """What both precomputed-index hooks read: the input Indexes' positions
    (Index -> last position, as a dict comprehension keeps the last) and the
    output Indexes' n, t, x. The table is freed with the object."""
    cdef CindexTable table
    cdef vector[int64_t] ons, ots, oxs
    cdef Py_ssize_t num_in

    def __cinit__(self):
        self.table.keys = NULL
        self.table.vals = NULL

    def __dealloc__(self):
        table_free(&self.table)

    cdef int read(self, list input_indexes, list output_indexes) except -1:
        """Reads both lists; 1 if an Index is not the ordinary case (the
        caller falls back), an output without a time included."""
        cdef vector[int64_t] ns, ts, xs
        cdef size_t i
        cdef int64_t key
        cdef bint is_new
        cdef int32_t got
        if read_indexes(input_indexes, ns, ts, xs):
            return 1
        self.num_in = ns.size()
        if table_init(&self.table, ns.size()) != 0:
            raise MemoryError()
        for i in range(ns.size()):
            key = pack(0, ns[i], ts[i], xs[i])
            if key < 0:
                return 1
            got = table_get_or_insert(&self.table, key, <int32_t>i, &is_new)
            if got == -2:
                raise MemoryError()
            if not is_new:
                self.table.vals[table_slot(&self.table, key)] = <int32_t>i
        if read_indexes(output_indexes, self.ons, self.ots, self.oxs):
            return 1
        for i in range(self.ots.size()):
            if self.ots[i] == K_NO_TIME:
                return 1
        return 0

    cdef inline int32_t position(self, Py_ssize_t i, int64_t t) noexcept:
        """The position of input (n, t, x), n and x those of output ``i``: -1
        when there is none, -2 when it cannot be packed."""
        cdef int64_t key = pack(0, self.ons[i], t, self.oxs[i])
        if key < 0:
            return -2
        return table_find(&self.table, key)


cdef inline bint _extend_range(int32_t *r, int32_t v) noexcept nogil:
    """Adds ``v`` to the range [r[0], r[1]) (r[0] == -1: empty), which must
    stay contiguous and in order: False when ``v`` is not its next value."""
    if r[0] == -1:
        r[0] = v
        r[1] = v + 1
    elif r[1] == v:
        r[1] += 1
    else:
        return False
    return True


def statistics_extraction_indexes(list input_indexes, list output_indexes,
                                  int64_t input_period, int64_t output_period):
    """Twin of StatisticsExtractionComponent.precompute_indexes' loop:
    (forward (num_out, 2) int32, counts float32, backward int32), or None
    when the twin would raise (or the input is irregular)."""
    cdef _Request r = _Request()
    if input_period <= 0 or output_period <= 0 or r.read(input_indexes, output_indexes):
        return None
    forward = np.full((r.ons.size(), 2), -1, dtype=np.int32)
    counts = np.zeros(r.ons.size(), dtype=np.float32)
    backward = np.full(r.num_in, -1, dtype=np.int32)
    return _extraction_loop(r, input_period, output_period, forward, counts, backward)


cdef object _extraction_loop(_Request r, int64_t input_period, int64_t output_period,
                             cnp.ndarray forward_arr, cnp.ndarray counts_arr,
                             cnp.ndarray backward_arr):
    cdef int32_t *forward = <int32_t *>cnp.PyArray_DATA(forward_arr)
    cdef float *counts = <float *>cnp.PyArray_DATA(counts_arr)
    cdef int32_t *backward = <int32_t *>cnp.PyArray_DATA(backward_arr)
    cdef Py_ssize_t i
    cdef int64_t t, t_start
    cdef int32_t pos
    for i in range(<Py_ssize_t>r.ons.size()):
        t_start = output_period * (r.ots[i] // output_period)
        t = t_start
        while t < t_start + output_period:
            pos = r.position(i, t)
            if pos == -2:
                return None
            if pos >= 0:
                if not _extend_range(&forward[2 * i], pos):
                    return None
                counts[i] += 1.0
                if backward[pos] != -1:
                    return None
                backward[pos] = <int32_t>i
            t += input_period
        if counts[i] == 0.0:
            return None
    for i in range(r.num_in):
        if backward[i] == -1:
            return None
    return forward_arr, counts_arr, backward_arr


def statistics_pooling_indexes(list input_indexes, list output_indexes, int64_t input_period,
                               int64_t left_context, int64_t right_context):
    """Twin of StatisticsPoolingComponent.precompute_indexes' loop: (forward
    (num_out, 2) int32, backward (num_in, 2) int32), or None when the twin
    would raise (or the input is irregular)."""
    cdef _Request r = _Request()
    if input_period <= 0 or r.read(input_indexes, output_indexes):
        return None
    forward = np.full((r.ons.size(), 2), -1, dtype=np.int32)
    backward = np.full((r.num_in, 2), -1, dtype=np.int32)
    return _pooling_loop(r, input_period, left_context, right_context, forward, backward)


cdef object _pooling_loop(_Request r, int64_t input_period, int64_t left_context,
                          int64_t right_context, cnp.ndarray forward_arr,
                          cnp.ndarray backward_arr):
    cdef int32_t *forward = <int32_t *>cnp.PyArray_DATA(forward_arr)
    cdef int32_t *backward = <int32_t *>cnp.PyArray_DATA(backward_arr)
    cdef Py_ssize_t i
    cdef int64_t t, t_last
    cdef int32_t pos
    for i in range(<Py_ssize_t>r.ons.size()):
        t = r.ots[i] - left_context
        t_last = r.ots[i] + right_context
        while t <= t_last:
            pos = r.position(i, t)
            if pos == -2:
                return None
            if pos >= 0:
                if not _extend_range(&forward[2 * i], pos):
                    return None
                if not _extend_range(&backward[2 * pos], <int32_t>i):
                    return None
            t += input_period
        if forward[2 * i] == -1:
            return None
    for i in range(r.num_in):
        if backward[2 * i] == -1:
            return None
    return forward_arr, backward_arr
