# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
# distutils: language = c++
"""The Index-list work of compiling a convolution in C (owner and twin:
``get_computation_io_py`` and ``get_indexes_for_computation_py`` in
pynnet3/components/convolution_computation.py): the regular (t, image) grid of
a component call and the reordered, padded Index lists. Index objects of the
original lists are reused in the results (equal values, so the results compare
equal to the twin's).

Contract (that of every index-list kernel, see index_lists.pxd): the twin's
result, or None where the input is not the ordinary case.
"""

from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int64_t
from libcpp.vector cimport vector

cimport numpy as cnp

from pynnet3._fast.cindex_keys cimport K_NO_TIME
from pynnet3._fast.index_lists cimport (TWO32, c_div, c_mod, find_key, gcd, lower_bound_key,
                                        nx_key, read_indexes)

import numpy as np

from ..common.index import Index

cnp.import_array()

cdef object IndexType = Index

# -- convolution / TDNN ----------------------------------------------------------------------

cdef void nx_pairs(vector[int64_t] &ns, vector[int64_t] &xs, vector[int64_t] &out):
    """Sorted unique (n, x) keys (an insertion into a sorted vector: there are
    few images, and runs of one image are skipped at once)."""
    cdef size_t i
    cdef Py_ssize_t lo
    cdef int64_t key, last = 0
    cdef bint have_last = False
    out.clear()
    for i in range(ns.size()):
        key = nx_key(ns[i], xs[i])
        if have_last and key == last:
            continue
        last = key
        have_last = True
        lo = lower_bound_key(out, key)
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
