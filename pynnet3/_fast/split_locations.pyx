# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""SplitLocations and friends in C (twin of pynnet3/compile/split_locations.py,
its array API: split_locations_csr, split_locations_backward_csr,
convert_pairs_to_indexes, contiguous_ranges).

The only order decision Kaldi leaves to a hash table (which large-count
submatrices get their own command first) is reproduced with the same
StdUnorderedIntSet emulation as the Python twin.
"""

from libc.stdint cimport int32_t, int64_t
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

import numpy as np

from ..compile.split_locations import StdUnorderedIntSet
from ..errors import ComputationError


cdef object _split(const int64_t[::1] ptr, const int32_t[::1] firsts,
                   const int32_t[::1] seconds):
    cdef Py_ssize_t num_rows = ptr.shape[0] - 1, r, k, i
    cdef int64_t max_len = 0, length, cutoff
    cdef int32_t f, max_first = -1, idx
    cdef int32_t[:, ::1] view
    cdef vector[int32_t] counts, first_seen, large_index
    cdef vector[int64_t] red_ptr
    cdef vector[int32_t] red_f, red_s
    cdef int32_t num_large
    cdef int32_t[:, :, ::1] sview, s3
    for r in range(num_rows):
        length = ptr[r + 1] - ptr[r]
        if length > max_len:
            max_len = length
    if max_len == 0:
        return []
    if max_len == 1:
        arr = np.full((num_rows, 2), -1, dtype=np.int32)
        view = arr
        for r in range(num_rows):
            if ptr[r + 1] > ptr[r]:
                view[r, 0] = firsts[ptr[r]]
                view[r, 1] = seconds[ptr[r]]
        return [arr]
    for k in range(firsts.shape[0]):
        if firsts[k] < 0:
            raise ComputationError("internal error: negative submatrix in SplitLocations")
        if firsts[k] > max_first:
            max_first = firsts[k]
    counts.resize(max_first + 1, 0)
    for k in range(firsts.shape[0]):
        f = firsts[k]
        if counts[f] == 0:
            first_seen.push_back(f)
        counts[f] += 1
    cutoff = num_rows // 2
    order = StdUnorderedIntSet()
    for i in range(first_seen.size()):
        order.add(first_seen[i])
    large = [s for s in order if counts[s] > cutoff]
    if large:
        num_large = len(large)
        large_index.resize(max_first + 1, -1)
        for i, s in enumerate(large):
            large_index[s] = i
        split = np.full((num_large, num_rows, 2), -1, dtype=np.int32)
        sview = split
        red_ptr.push_back(0)
        for r in range(num_rows):
            for k in range(ptr[r], ptr[r + 1]):
                f = firsts[k]
                idx = large_index[f]
                if idx < 0 or sview[idx, r, 0] >= 0:
                    red_f.push_back(f)
                    red_s.push_back(seconds[k])
                else:
                    sview[idx, r, 0] = f
                    sview[idx, r, 1] = seconds[k]
            red_ptr.push_back(red_f.size())
        rp = np.empty(red_ptr.size(), dtype=np.int64)
        for k in range(<Py_ssize_t>red_ptr.size()):
            rp[k] = red_ptr[k]
        rf = np.empty(red_f.size(), dtype=np.int32)
        rs = np.empty(red_s.size(), dtype=np.int32)
        for k in range(<Py_ssize_t>red_f.size()):
            rf[k] = red_f[k]
            rs[k] = red_s[k]
        return [split[i] for i in range(num_large)] + _split(rp, rf, rs)
    split = np.full((max_len, num_rows, 2), -1, dtype=np.int32)
    s3 = split
    for r in range(num_rows):
        i = 0
        for k in range(ptr[r], ptr[r + 1]):
            s3[i, r, 0] = firsts[k]
            s3[i, r, 1] = seconds[k]
            i += 1
    return [split[i] for i in range(max_len)]


def split_locations_csr(row_ptr, firsts, seconds):
    """Kaldi's SplitLocations over CSR input; list of (num_rows, 2) int32 arrays."""
    return _split(np.ascontiguousarray(row_ptr, dtype=np.int64),
                  np.ascontiguousarray(firsts, dtype=np.int32),
                  np.ascontiguousarray(seconds, dtype=np.int32))


def convert_pairs_to_indexes(pairs):
    """Kaldi's ConvertToIndexes: (submatrix, rows int32 array) when all pairs'
    submatrix is one value or -1, else None (submatrix -1 if all are -1)."""
    cdef const int32_t[:, ::1] p = np.ascontiguousarray(pairs, dtype=np.int32).reshape(-1, 2)
    cdef Py_ssize_t n = p.shape[0], i
    cdef int32_t first = -1
    rows = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] rv = rows
    for i in range(n):
        if p[i, 0] != -1:
            if first == -1:
                first = p[i, 0]
            elif p[i, 0] != first:
                return None
            rv[i] = p[i, 1]
        else:
            rv[i] = -1
    return first, rows


cdef list _ensure_contiguous(const int32_t[::1] indexes):
    """Kaldi's EnsureContiguousProperty."""
    cdef Py_ssize_t dim = indexes.shape[0], i, start, j
    cdef int32_t value, max_value = -1, seen
    cdef vector[int32_t] segments_seen
    cdef list out = []
    cdef int32_t[::1] vec
    for i in range(dim):
        if indexes[i] > max_value:
            max_value = indexes[i]
    if dim == 0 or max_value == -1:
        return out
    segments_seen.resize(max_value + 1, 0)
    i = 0
    while i < dim:
        value = indexes[i]
        if value == -1:
            i += 1
            continue
        start = i
        while i < dim and indexes[i] == value:
            i += 1
        seen = segments_seen[value]
        segments_seen[value] += 1
        if seen >= len(out):
            out.append(np.full(dim, -1, dtype=np.int32))
        vec = out[seen]
        for j in range(start, i):
            vec[j] = value
    return out


cdef list _split_pair_list(const int32_t[:, ::1] pairs):
    """Kaldi's SplitPairList: the k-th occurrence of each pair goes to list k."""
    cdef Py_ssize_t n = pairs.shape[0], i
    cdef unordered_map[int64_t, int32_t] counts
    cdef int64_t key
    cdef int32_t count
    cdef list out = []
    cdef int32_t[:, ::1] view
    for i in range(n):
        if pairs[i, 0] == -1:
            continue
        key = (<int64_t>pairs[i, 0] << 32) | <int64_t>(<unsigned int>pairs[i, 1])
        counts[key] += 1
        count = counts[key]
        if count > len(out):
            out.append(np.full((n, 2), -1, dtype=np.int32))
        view = out[count - 1]
        view[i, 0] = pairs[i, 0]
        view[i, 1] = pairs[i, 1]
    if not out:
        raise ComputationError("internal error: SplitPairList got a list of only (-1, -1) pairs")
    return out


def split_locations_backward_csr(row_ptr, firsts, seconds):
    """Kaldi's SplitLocationsBackward over CSR input."""
    cdef list out = []
    for arr in split_locations_csr(row_ptr, firsts, seconds):
        converted = convert_pairs_to_indexes(arr)
        if converted is not None:
            first, rows = converted
            if first == -1:
                continue
            pieces = _ensure_contiguous(rows)
            if len(pieces) == 1:
                out.append(arr)
            else:
                for piece in pieces:
                    pairs = np.empty((len(piece), 2), dtype=np.int32)
                    pairs[:, 0] = np.where(piece == -1, -1, first)
                    pairs[:, 1] = piece
                    out.append(pairs)
        else:
            out.extend(_split_pair_list(np.ascontiguousarray(arr)))
    return out


def contiguous_ranges(indexes):
    """Kaldi's HasContiguousProperty: list of (begin, end) per value, or None."""
    cdef const int32_t[::1] idx = np.ascontiguousarray(indexes, dtype=np.int32)
    cdef Py_ssize_t n = idx.shape[0], i, j
    cdef int32_t num_input = -1, v
    cdef vector[int32_t] begin, end
    for i in range(n):
        if idx[i] > num_input:
            num_input = idx[i]
    num_input += 1
    if n == 0 or num_input == 0:
        return []
    begin.resize(num_input, -1)
    end.resize(num_input, -1)
    for i in range(n):
        v = idx[i]
        if v == -1:
            continue
        if begin[v] == -1:
            begin[v] = i
            end[v] = i + 1
        else:
            if i < begin[v]:
                begin[v] = i
            if i + 1 > end[v]:
                end[v] = i + 1
    for v in range(num_input):
        if begin[v] != -1:
            for j in range(begin[v], end[v]):
                if idx[j] != v:
                    return None
    return [(begin[v], end[v]) for v in range(num_input)]
