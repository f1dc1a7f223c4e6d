# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
# distutils: language = c++
"""Index-list hooks of non-simple components in C (twins of Python code in
pynnet3/components/convolution_model.py and statistics.py).

The compiler calls ``reorder_indexes`` and ``precompute_indexes`` of every
non-simple component once or twice per compilation with Index lists of up to
tens of thousands of entries; these kernels do the per-Index work in C.

Contract: every function takes lists of (n, t, x) tuples (Index objects) and
returns exactly what its Python twin returns, or ``None`` when the input is
anything but the ordinary case (an Index that is not a 3-tuple of ints, a
value outside the packable range, an empty list, indexes the twin would
reject). On ``None`` the caller runs the Python twin, which gives the result
or raises the descriptive ComputationError. A test compares each kernel
with its twin on random inputs.

Index objects of the original lists are reused in the results (equal values,
so the results compare equal to the twin's).
"""

cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport int32_t, int64_t
from libcpp.algorithm cimport sort
from cython.operator cimport dereference as deref
from libcpp.pair cimport pair
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

import numpy as np
cimport numpy as cnp

from pynnet3._fast.cindex_keys cimport (
    CindexTable, K_NO_TIME, pack, table_find, table_free, table_get_or_insert, table_init,
    table_slot)

from ..common.index import Index

cnp.import_array()

cdef int64_t TWO32 = 4294967296
cdef object IndexType = Index


# -- reading Index lists ---------------------------------------------------------------------

cdef extern from *:
    """
    /* An exact int as a C long long: the one-digit fast path of CPython's
       int layout (|v| < 2^30), else PyLong_AsLongLongAndOverflow. Returns 0
       if v is not an exact int or does not fit. */
    static CYTHON_INLINE int pynnet3_exact_int(PyObject *v, long long *out) {
        int overflow = 0;
        long long value;
        if (!PyLong_CheckExact(v)) return 0;
    #if PY_VERSION_HEX >= 0x030C0000
        if (PyUnstable_Long_IsCompact((PyLongObject *)v)) {
            *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
            return 1;
        }
    #else
        {
            Py_ssize_t size = Py_SIZE(v);
            if (size == 0) { *out = 0; return 1; }
            if (size == 1) { *out = (long long)((PyLongObject *)v)->ob_digit[0]; return 1; }
            if (size == -1) { *out = -(long long)((PyLongObject *)v)->ob_digit[0]; return 1; }
        }
    #endif
        value = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow != 0 || (value == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
        *out = value;
        return 1;
    }
    """
    bint pynnet3_exact_int(object v, long long *out) noexcept


cdef inline bint read_int32(object v, int64_t *out) noexcept:
    """``v`` as an int in int32 range; False if it is anything else (the
    caller falls back to Python)."""
    cdef long long value
    if not pynnet3_exact_int(v, &value) or value < -2147483648 or value > 2147483647:
        return False
    out[0] = value
    return True


cdef int read_indexes(list indexes, vector[int64_t] &ns, vector[int64_t] &ts,
                      vector[int64_t] &xs) except -1:
    """Fills ns/ts/xs from a list of (n, t, x) tuples; returns 0, or 1 if an
    item is not a 3-tuple of ints in int32 range (the caller falls back)."""
    cdef Py_ssize_t i, size = PyList_GET_SIZE(indexes)
    cdef object item
    ns.resize(size)
    ts.resize(size)
    xs.resize(size)
    for i in range(size):
        item = <object>PyList_GET_ITEM(indexes, i)
        if not PyTuple_Check(item) or PyTuple_GET_SIZE(item) != 3:
            return 1
        if not (read_int32(<object>PyTuple_GET_ITEM(item, 0), &ns[i])
                and read_int32(<object>PyTuple_GET_ITEM(item, 1), &ts[i])
                and read_int32(<object>PyTuple_GET_ITEM(item, 2), &xs[i])):
            return 1
    return 0


cdef inline int64_t nx_key(int64_t n, int64_t x) noexcept nogil:
    """(n, x) as one int64 whose order is the tuple order (both in int32 range)."""
    return n * TWO32 + x


cdef inline Py_ssize_t find_key(vector[int64_t] &sorted_keys, int64_t key) noexcept nogil:
    """Position of ``key`` in ``sorted_keys`` (binary search), or -1."""
    cdef Py_ssize_t lo = 0, hi = sorted_keys.size(), mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if sorted_keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < <Py_ssize_t>sorted_keys.size() and sorted_keys[lo] == key:
        return lo
    return -1


@cython.cdivision(True)
cdef inline int64_t gcd(int64_t a, int64_t b) noexcept nogil:
    """gcd of non-negative a, b (C division is exact for them)."""
    cdef int64_t r
    while b != 0:
        r = a % b
        a = b
        b = r
    return a


@cython.cdivision(True)
cdef inline int64_t c_mod(int64_t a, int64_t b) noexcept nogil:
    """a % b for a >= 0, b > 0."""
    return a % b


@cython.cdivision(True)
cdef inline int64_t c_div(int64_t a, int64_t b) noexcept nogil:
    """a // b for a >= 0, b > 0."""
    return a // b


# -- convolution / TDNN ----------------------------------------------------------------------

cdef void nx_pairs(vector[int64_t] &ns, vector[int64_t] &xs, vector[int64_t] &out):
    """Sorted unique (n, x) keys (an insertion into a sorted vector: there are
    few images, and runs of one image are skipped at once)."""
    cdef size_t i
    cdef Py_ssize_t lo, hi, mid
    cdef int64_t key, last = 0
    cdef bint have_last = False
    out.clear()
    for i in range(ns.size()):
        key = nx_key(ns[i], xs[i])
        if have_last and key == last:
            continue
        last = key
        have_last = True
        lo = 0
        hi = out.size()
        while lo < hi:
            mid = (lo + hi) >> 1
            if out[mid] < key:
                lo = mid + 1
            else:
                hi = mid
        if lo == <Py_ssize_t>out.size() or out[lo] != key:
            out.insert(out.begin() + lo, key)


cdef bint regular_t(vector[int64_t] &ts, int64_t *start, int64_t *step, int64_t *num):
    """The smallest regular grid of the t values (kNoTime skipped); False if none."""
    cdef size_t i
    cdef bint any_t = False
    cdef int64_t lo = 0, hi = 0, g = 0
    for i in range(ts.size()):
        if ts[i] == K_NO_TIME:
            continue
        if not any_t:
            lo = hi = ts[i]
            any_t = True
        elif ts[i] < lo:
            lo = ts[i]
        elif ts[i] > hi:
            hi = ts[i]
    if not any_t:
        return False
    for i in range(ts.size()):
        # (gcd(g, d) is g when g divides d: the common case is checked first)
        if ts[i] != K_NO_TIME and (g == 0 or c_mod(ts[i] - lo, g) != 0):
            g = gcd(g, ts[i] - lo)
    start[0] = lo
    if g == 0:
        step[0] = 0
        num[0] = 1
    else:
        step[0] = g
        num[0] = 1 + (hi - lo) // g
    return True


def computation_io(list input_indexes, list output_indexes):
    """Twin of convolution_model.get_computation_io: (num_images, start_t_in,
    t_step_in, num_t_in, start_t_out, t_step_out, num_t_out), or None."""
    cdef vector[int64_t] ns, ts, xs, pairs
    cdef int64_t s_in, st_in, nt_in, s_out, st_out, nt_out
    if read_indexes(input_indexes, ns, ts, xs):
        return None
    nx_pairs(ns, xs, pairs)
    if pairs.size() == 0 or not regular_t(ts, &s_in, &st_in, &nt_in):
        return None
    if read_indexes(output_indexes, ns, ts, xs):
        return None
    if not regular_t(ts, &s_out, &st_out, &nt_out):
        return None
    return (<int64_t>pairs.size(), s_in, st_in, nt_in, s_out, st_out, nt_out)


cdef list grid_indexes(list orig, vector[int64_t] &ns, vector[int64_t] &ts,
                       vector[int64_t] &xs, vector[int64_t] &pairs, list blanks,
                       int64_t t_start, int64_t t_step, int64_t num_t, int64_t reorder_t):
    """Twin of _create_indexes + _set_some_indexes_blank: the (t-block, image,
    t) grid, each slot the original Index when present, else the image's
    kNoTime Index. ``ns``/``ts``/``xs`` are ``orig`` read by read_indexes.
    None on anything irregular."""
    cdef Py_ssize_t num_images = pairs.size(), size, i, j, pos
    cdef int64_t d, k, key, n
    cdef list out
    cdef object item, blank
    if t_step == 0:
        if num_t != 1:
            return None
        t_step = 1
    if reorder_t < 1 or num_t <= 0 or num_t % reorder_t != 0:
        return None
    size = num_images * num_t
    out = PyList_New(size)       # NULL slots until filled
    cdef vector[char] filled
    filled.resize(size, 0)
    for i in range(<Py_ssize_t>ns.size()):
        if ts[i] == K_NO_TIME:
            # reuse the list's own kNoTime Index as the image's blank, so that
            # an already-reordered list compares equal by identity
            item = <object>PyList_GET_ITEM(orig, i)
            if type(item) is IndexType:
                j = find_key(pairs, nx_key(ns[i], xs[i]))
                if j >= 0 and blanks[j] is None:
                    blanks[j] = item
            continue
        d = ts[i] - t_start
        if d < 0 or c_mod(d, t_step) != 0:
            continue
        k = c_div(d, t_step)
        if k >= num_t:
            continue
        key = nx_key(ns[i], xs[i])
        j = find_key(pairs, key)
        if j < 0:
            continue
        pos = (c_div(k, reorder_t) * (num_images * reorder_t) + j * reorder_t
               + c_mod(k, reorder_t))
        if filled[pos]:
            continue
        item = <object>PyList_GET_ITEM(orig, i)
        if type(item) is not IndexType:
            item = IndexType(ns[i], ts[i], xs[i])
        Py_INCREF(item)
        PyList_SET_ITEM(out, pos, item)
        filled[pos] = 1
    for pos in range(size):
        if not filled[pos]:
            j = c_mod(c_div(pos, reorder_t), num_images)
            blank = blanks[j]
            if blank is None:
                n = (pairs[j] + 2147483648) // TWO32  # floor division: the key's n
                blank = IndexType(n, K_NO_TIME, pairs[j] - n * TWO32)
                blanks[j] = blank
            Py_INCREF(blank)
            PyList_SET_ITEM(out, pos, blank)
    return out


def indexes_for_computation(tuple io, list orig_input_indexes, list orig_output_indexes):
    """Twin of convolution_model.get_indexes_for_computation. ``io`` is
    (num_images, start_t_in, t_step_in, num_t_in, reorder_t_in, start_t_out,
    t_step_out, num_t_out). Returns (inputs, outputs) or None."""
    cdef vector[int64_t] ns, ts, xs, pairs
    cdef int64_t num_images, s_in, st_in, nt_in, r_in, s_out, st_out, nt_out
    num_images, s_in, st_in, nt_in, r_in, s_out, st_out, nt_out = io
    if read_indexes(orig_input_indexes, ns, ts, xs):
        return None
    nx_pairs(ns, xs, pairs)
    if <int64_t>pairs.size() != num_images or num_images == 0:
        return None
    blanks = [None] * num_images      # each image's kNoTime Index, made when needed
    inputs = grid_indexes(orig_input_indexes, ns, ts, xs, pairs, blanks, s_in, st_in, nt_in,
                          r_in)
    if inputs is None or read_indexes(orig_output_indexes, ns, ts, xs):
        return None
    outputs = grid_indexes(orig_output_indexes, ns, ts, xs, pairs, blanks, s_out, st_out,
                           nt_out, 1)
    if outputs is None:
        return None
    return inputs, outputs


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


# -- dropout / backprop truncation -------------------------------------------------------------

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
