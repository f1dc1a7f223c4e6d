# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
# distutils: language = c++
"""The Index-list hooks of the statistics components in C (owner and twins:
pynnet3/components/statistics.py): the (n, x, t) sort and the precomputed
indexes of StatisticsExtractionComponent and StatisticsPoolingComponent.

Contract (that of every index-list kernel, see index_lists.pxd): the twin's
result, or None where the input is not the ordinary case.
"""

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


cdef int position_table(list indexes, vector[int64_t] &ns, vector[int64_t] &ts,
                        vector[int64_t] &xs, CindexTable *table) except -1:
    """Index -> last position in ``indexes`` (as a dict comprehension keeps the
    last); returns 1 if an Index cannot be packed (caller falls back)."""
    cdef size_t i
    cdef int64_t key
    cdef bint is_new
    cdef int32_t got
    if read_indexes(indexes, ns, ts, xs):
        return 1
    if table_init(table, ns.size()) != 0:
        raise MemoryError()
    for i in range(ns.size()):
        key = pack(0, ns[i], ts[i], xs[i])
        if key < 0:
            return 1
        got = table_get_or_insert(table, key, <int32_t>i, &is_new)
        if got == -2:
            raise MemoryError()
        if not is_new:
            table.vals[table_slot(table, key)] = <int32_t>i
    return 0



def statistics_extraction_indexes(list input_indexes, list output_indexes,
                                  int64_t input_period, int64_t output_period):
    """Twin of StatisticsExtractionComponent.precompute_indexes' loop:
    (forward (num_out, 2) int32, counts float32, backward int32), or None
    when the twin would raise (or the input is irregular)."""
    cdef vector[int64_t] ns, ts, xs, ons, ots, oxs
    cdef CindexTable table
    cdef Py_ssize_t num_in, num_out
    if input_period <= 0 or output_period <= 0:
        return None
    table.keys = NULL
    table.vals = NULL
    try:
        if position_table(input_indexes, ns, ts, xs, &table):
            return None
        if read_indexes(output_indexes, ons, ots, oxs):
            return None
        num_in = ns.size()
        num_out = ons.size()
        forward = np.full((num_out, 2), -1, dtype=np.int32)
        counts = np.zeros(num_out, dtype=np.float32)
        backward = np.full(num_in, -1, dtype=np.int32)
        return _extraction_loop(table, ons, ots, oxs, input_period, output_period,
                                forward, counts, backward)
    finally:
        table_free(&table)


cdef object _extraction_loop(CindexTable &table, vector[int64_t] &ons, vector[int64_t] &ots,
                             vector[int64_t] &oxs, int64_t input_period,
                             int64_t output_period, cnp.ndarray forward_arr,
                             cnp.ndarray counts_arr, cnp.ndarray backward_arr):
    cdef int32_t *forward = <int32_t *>cnp.PyArray_DATA(forward_arr)
    cdef float *counts = <float *>cnp.PyArray_DATA(counts_arr)
    cdef int32_t *backward = <int32_t *>cnp.PyArray_DATA(backward_arr)
    cdef Py_ssize_t i, num_in = backward_arr.shape[0]
    cdef int64_t t, t_start, key
    cdef int32_t pos
    for i in range(<Py_ssize_t>ons.size()):
        if ots[i] == K_NO_TIME:
            return None
        t_start = output_period * (ots[i] // output_period)
        t = t_start
        while t < t_start + output_period:
            key = pack(0, ons[i], t, oxs[i])
            if key < 0:
                return None
            pos = table_find(&table, key)
            if pos >= 0:
                if forward[2 * i] == -1:
                    forward[2 * i] = pos
                    forward[2 * i + 1] = pos + 1
                elif forward[2 * i + 1] == pos:
                    forward[2 * i + 1] += 1
                else:
                    return None
                counts[i] += 1.0
                if backward[pos] != -1:
                    return None
                backward[pos] = <int32_t>i
            t += input_period
        if counts[i] == 0.0:
            return None
    for i in range(num_in):
        if backward[i] == -1:
            return None
    return forward_arr, counts_arr, backward_arr


def statistics_pooling_indexes(list input_indexes, list output_indexes, int64_t input_period,
                               int64_t left_context, int64_t right_context):
    """Twin of StatisticsPoolingComponent.precompute_indexes' loop: (forward
    (num_out, 2) int32, backward (num_in, 2) int32), or None when the twin
    would raise (or the input is irregular)."""
    cdef vector[int64_t] ns, ts, xs, ons, ots, oxs
    cdef CindexTable table
    if input_period <= 0:
        return None
    table.keys = NULL
    table.vals = NULL
    try:
        if position_table(input_indexes, ns, ts, xs, &table):
            return None
        if read_indexes(output_indexes, ons, ots, oxs):
            return None
        forward = np.full((ons.size(), 2), -1, dtype=np.int32)
        backward = np.full((ns.size(), 2), -1, dtype=np.int32)
        return _pooling_loop(table, ons, ots, oxs, input_period, left_context, right_context,
                             forward, backward)
    finally:
        table_free(&table)


cdef object _pooling_loop(CindexTable &table, vector[int64_t] &ons, vector[int64_t] &ots,
                          vector[int64_t] &oxs, int64_t input_period, int64_t left_context,
                          int64_t right_context, cnp.ndarray forward_arr,
                          cnp.ndarray backward_arr):
    cdef int32_t *forward = <int32_t *>cnp.PyArray_DATA(forward_arr)
    cdef int32_t *backward = <int32_t *>cnp.PyArray_DATA(backward_arr)
    cdef Py_ssize_t i, num_in = backward_arr.shape[0]
    cdef int64_t t, t_last, key
    cdef int32_t pos
    for i in range(<Py_ssize_t>ons.size()):
        if ots[i] == K_NO_TIME:
            return None
        t = ots[i] - left_context
        t_last = ots[i] + right_context
        while t <= t_last:
            key = pack(0, ons[i], t, oxs[i])
            if key < 0:
                return None
            pos = table_find(&table, key)
            if pos >= 0:
                if forward[2 * i] == -1:
                    forward[2 * i] = pos
                    forward[2 * i + 1] = pos + 1
                elif forward[2 * i + 1] == pos:
                    forward[2 * i + 1] += 1
                else:
                    return None
                if backward[2 * pos] == -1:
                    backward[2 * pos] = <int32_t>i
                    backward[2 * pos + 1] = <int32_t>(i + 1)
                elif backward[2 * pos + 1] == i:
                    backward[2 * pos + 1] += 1
                else:
                    return None
            t += input_period
        if forward[2 * i] == -1:
            return None
    for i in range(num_in):
        if backward[2 * i] == -1:
            return None
    return forward_arr, backward_arr
