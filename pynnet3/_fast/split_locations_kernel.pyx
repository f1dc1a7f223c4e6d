# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""SplitLocations and friends in C (twin of pynnet3/compiler/split_locations.py).

The ``*_c`` functions (declared in split_locations.pxd) are what the Cython
compiler calls; ``split_locations_csr``, ``split_locations_backward_csr``,
``convert_pairs_to_indexes`` and ``contiguous_ranges`` wrap them with the same
array API as the Python twin, for tests and for the Python compiler.

The one order decision Kaldi leaves to a hash table (which large-count
submatrices get their own command first: GetSubmatCounts iterates a
``std::unordered_map<int, int>``) is reproduced by an emulation of libstdc++'s
(GCC 12) bucket layout, the same algorithm as StdUnorderedIntSet.
"""

from libc.stdint cimport int32_t, int64_t, uint64_t
from cython.operator cimport dereference as deref
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

import numpy as np

from ..errors import ComputationError

# libstdc++'s bucket counts for a container grown one element at a time.
cdef int64_t[24] BUCKET_COUNTS = [13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753,
                                  42043, 85229, 172933, 351061, 712697, 1447153, 2938679,
                                  5967347, 12195257, 24407021, 48814091, 97628193, 195256437]

cdef enum:
    NONE = -2
    BEFORE = -1


cdef inline void _insert_after(vector[int32_t] &nxt, int32_t *head, int64_t prev,
                               int32_t node) noexcept nogil:
    """Links ``node`` in after ``prev`` (after the list head when ``prev``
    is BEFORE): where libstdc++ puts a node whose bucket is not empty."""
    if prev == BEFORE:
        nxt[node] = head[0]
        head[0] = node
    else:
        nxt[node] = nxt[prev]
        nxt[prev] = node


cdef void hash_order_c(const vector[int32_t] &keys, vector[int32_t] &order) noexcept:
    """The iteration order of a libstdc++ unordered_set<int> after inserting
    the distinct non-negative ``keys`` in this order."""
    cdef vector[int32_t] nxt
    cdef vector[int64_t] buckets
    cdef int64_t count = 0, b
    cdef int step = -1
    cdef int32_t head = -1, p, following, node
    cdef size_t i
    cdef int64_t bbegin
    nxt.resize(keys.size(), -1)
    for i in range(keys.size()):
        if count == 0 or <int64_t>i + 1 > count:
            step += 1
            count = BUCKET_COUNTS[step]
            buckets.assign(count, NONE)
            p = head
            head = -1
            bbegin = 0
            while p != -1:
                following = nxt[p]
                b = keys[p] % count
                if buckets[b] == NONE:
                    nxt[p] = head
                    head = p
                    buckets[b] = BEFORE
                    if nxt[p] != -1:
                        buckets[bbegin] = p
                    bbegin = b
                else:
                    _insert_after(nxt, &head, buckets[b], p)
                p = following
        node = <int32_t>i
        b = keys[i] % count
        if buckets[b] != NONE:
            _insert_after(nxt, &head, buckets[b], node)
        else:
            nxt[node] = head
            head = node
            if nxt[node] != -1:
                buckets[keys[nxt[node]] % count] = node
            buckets[b] = BEFORE
    order.clear()
    p = head
    while p != -1:
        order.push_back(keys[p])
        p = nxt[p]


def hash_order(keys):
    """Python view of the libstdc++ iteration-order emulation (for tests)."""
    cdef vector[int32_t] k, order
    seen = set()
    for key in keys:
        if key not in seen:
            seen.add(key)
            k.push_back(key)
    hash_order_c(k, order)
    return list(order)


cdef int split_locations_c(const int64_t *ptr, const int32_t *firsts, const int32_t *seconds,
                           int64_t num_rows, vector[vector[Pair]] &out) except -1:
    """Kaldi's SplitLocations; appends the split lists to ``out``."""
    cdef int64_t max_len = 0, length, cutoff, r, k, total = ptr[num_rows]
    cdef int32_t f, idx
    cdef size_t i, base
    cdef vector[int32_t] counts, first_seen, order, large, large_index
    cdef unordered_map[int32_t, int32_t] slot_of
    cdef unordered_map[int32_t, int32_t].iterator it
    cdef vector[int64_t] red_ptr
    cdef vector[int32_t] red_f, red_s
    cdef Pair empty
    empty.first = -1
    empty.second = -1
    for r in range(num_rows):
        length = ptr[r + 1] - ptr[r]
        if length > max_len:
            max_len = length
    if max_len == 0:
        return 0
    base = out.size()
    if max_len == 1:
        out.resize(base + 1)
        out[base].assign(num_rows, empty)
        for r in range(num_rows):
            if ptr[r + 1] > ptr[r]:
                out[base][r].first = firsts[ptr[r]]
                out[base][r].second = seconds[ptr[r]]
        return 0
    # counts per submatrix; 'slot' numbers the distinct submatrices in order of
    # first appearance (submatrix indexes can be large, so no dense arrays)
    for k in range(total):
        f = firsts[k]
        if f < 0:
            raise ComputationError("internal error: negative submatrix in SplitLocations")
        it = slot_of.find(f)
        if it == slot_of.end():
            slot_of[f] = <int32_t>first_seen.size()
            first_seen.push_back(f)
            counts.push_back(1)
        else:
            counts[deref(it).second] += 1
    cutoff = num_rows // 2
    hash_order_c(first_seen, order)
    for i in range(order.size()):
        if counts[slot_of[order[i]]] > cutoff:
            large.push_back(order[i])
    if not large.empty():
        large_index.assign(first_seen.size(), -1)
        out.resize(base + large.size())
        for i in range(large.size()):
            large_index[slot_of[large[i]]] = <int32_t>i
            out[base + i].assign(num_rows, empty)
        red_ptr.push_back(0)
        for r in range(num_rows):
            for k in range(ptr[r], ptr[r + 1]):
                f = firsts[k]
                idx = large_index[slot_of[f]]
                if idx < 0 or out[base + idx][r].first >= 0:
                    red_f.push_back(f)
                    red_s.push_back(seconds[k])
                else:
                    out[base + idx][r].first = f
                    out[base + idx][r].second = seconds[k]
            red_ptr.push_back(red_f.size())
        return split_locations_c(red_ptr.data(), red_f.data(), red_s.data(), num_rows, out)
    out.resize(base + max_len)
    for i in range(<size_t>max_len):
        out[base + i].assign(num_rows, empty)
    for r in range(num_rows):
        i = 0
        for k in range(ptr[r], ptr[r + 1]):
            out[base + i][r].first = firsts[k]
            out[base + i][r].second = seconds[k]
            i += 1
    return 0


cdef bint convert_to_indexes_c(const vector[Pair] &pairs, int32_t *first,
                               vector[int32_t] &rows) noexcept:
    """Kaldi's ConvertToIndexes."""
    cdef size_t i
    first[0] = -1
    rows.resize(pairs.size())
    for i in range(pairs.size()):
        if pairs[i].first != -1:
            if first[0] == -1:
                first[0] = pairs[i].first
            elif pairs[i].first != first[0]:
                return False
            rows[i] = pairs[i].second
        else:
            rows[i] = -1
    return True


cdef void _ensure_contiguous(const vector[int32_t] &indexes,
                             vector[vector[int32_t]] &out) noexcept:
    """Kaldi's EnsureContiguousProperty."""
    cdef size_t dim = indexes.size(), i, start, j
    cdef int32_t value, max_value = -1, seen
    cdef vector[int32_t] segments_seen
    out.clear()
    for i in range(dim):
        if indexes[i] > max_value:
            max_value = indexes[i]
    if dim == 0 or max_value == -1:
        return
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
        if <size_t>seen >= out.size():
            out.push_back(vector[int32_t](dim, -1))
        for j in range(start, i):
            out[seen][j] = value


cdef int _split_pair_list(const vector[Pair] &pairs, vector[vector[Pair]] &out) except -1:
    """Kaldi's SplitPairList: the k-th occurrence of each pair goes to list k."""
    cdef size_t n = pairs.size(), i, base = out.size()
    cdef unordered_map[int64_t, int32_t] counts
    cdef int64_t key
    cdef int32_t count
    cdef Pair empty
    empty.first = -1
    empty.second = -1
    for i in range(n):
        if pairs[i].first == -1:
            continue
        key = (<int64_t>pairs[i].first << 32) | <int64_t>(<unsigned int>pairs[i].second)
        counts[key] += 1
        count = counts[key]
        if <size_t>count > out.size() - base:
            out.push_back(vector[Pair](n, empty))
        out[base + count - 1][i] = pairs[i]
    if out.size() == base:
        raise ComputationError("internal error: SplitPairList got a list of only (-1, -1) pairs")
    return 0


cdef int split_locations_backward_c(const int64_t *ptr, const int32_t *firsts,
                                    const int32_t *seconds, int64_t num_rows,
                                    vector[vector[Pair]] &out) except -1:
    """Kaldi's SplitLocationsBackward; appends to ``out``."""
    cdef vector[vector[Pair]] intermediate
    cdef vector[int32_t] rows
    cdef vector[vector[int32_t]] pieces
    cdef int32_t first
    cdef size_t i, j, k, base
    split_locations_c(ptr, firsts, seconds, num_rows, intermediate)
    for i in range(intermediate.size()):
        if convert_to_indexes_c(intermediate[i], &first, rows):
            if first == -1:
                continue
            _ensure_contiguous(rows, pieces)
            if pieces.size() == 1:
                out.push_back(intermediate[i])
            else:
                for j in range(pieces.size()):
                    base = out.size()
                    out.push_back(vector[Pair](pieces[j].size()))
                    for k in range(pieces[j].size()):
                        out[base][k].first = -1 if pieces[j][k] == -1 else first
                        out[base][k].second = pieces[j][k]
        else:
            _split_pair_list(intermediate[i], out)
    return 0


cdef bint contiguous_ranges_c(const vector[int32_t] &idx, vector[Pair] &ranges) noexcept:
    """Kaldi's HasContiguousProperty: fills ``ranges`` (begin, end) per value."""
    cdef size_t n = idx.size(), i
    cdef int32_t num_input = -1, v, j
    ranges.clear()
    for i in range(n):
        if idx[i] > num_input:
            num_input = idx[i]
    num_input += 1
    if n == 0 or num_input == 0:
        return True
    cdef Pair empty
    empty.first = -1
    empty.second = -1
    ranges.assign(num_input, empty)
    for i in range(n):
        v = idx[i]
        if v == -1:
            continue
        if ranges[v].first == -1:
            ranges[v].first = <int32_t>i
            ranges[v].second = <int32_t>i + 1
        else:
            if <int32_t>i < ranges[v].first:
                ranges[v].first = <int32_t>i
            if <int32_t>i + 1 > ranges[v].second:
                ranges[v].second = <int32_t>i + 1
    for v in range(num_input):
        if ranges[v].first != -1:
            for j in range(ranges[v].first, ranges[v].second):
                if idx[j] != v:
                    return False
    return True


# -- the array API (same as the Python twin's) --------------------------------------------

cdef list _to_arrays(vector[vector[Pair]] &lists):
    cdef list ans = []
    cdef size_t i, r
    cdef int32_t[:, ::1] view
    for i in range(lists.size()):
        arr = np.empty((lists[i].size(), 2), dtype=np.int32)
        view = arr
        for r in range(lists[i].size()):
            view[r, 0] = lists[i][r].first
            view[r, 1] = lists[i][r].second
        ans.append(arr)
    return ans


cdef list _split_csr(row_ptr, firsts, seconds, bint backward):
    """The CSR input's lists as C arrays, split by split_locations_c (or
    split_locations_backward_c when ``backward``), as _to_arrays' arrays."""
    cdef const int64_t[::1] p = np.ascontiguousarray(row_ptr, dtype=np.int64)
    cdef const int32_t[::1] f = np.ascontiguousarray(firsts, dtype=np.int32)
    cdef const int32_t[::1] s = np.ascontiguousarray(seconds, dtype=np.int32)
    cdef const int32_t *fp = NULL
    cdef const int32_t *sp = NULL
    cdef vector[vector[Pair]] out
    if f.shape[0] != 0:
        fp = &f[0]
        sp = &s[0]
    if backward:
        split_locations_backward_c(&p[0], fp, sp, p.shape[0] - 1, out)
    else:
        split_locations_c(&p[0], fp, sp, p.shape[0] - 1, out)
    return _to_arrays(out)


def split_locations_csr(row_ptr, firsts, seconds):
    """Kaldi's SplitLocations over CSR input; list of (num_rows, 2) int32 arrays."""
    return _split_csr(row_ptr, firsts, seconds, False)


def split_locations_backward_csr(row_ptr, firsts, seconds):
    """Kaldi's SplitLocationsBackward over CSR input."""
    return _split_csr(row_ptr, firsts, seconds, True)


def convert_pairs_to_indexes(pairs):
    """Kaldi's ConvertToIndexes: (submatrix, rows int32 array) or None."""
    cdef const int32_t[:, ::1] p = np.ascontiguousarray(pairs, dtype=np.int32).reshape(-1, 2)
    cdef vector[Pair] v
    cdef vector[int32_t] rows
    cdef int32_t first
    cdef Py_ssize_t i
    v.resize(p.shape[0])
    for i in range(p.shape[0]):
        v[i].first = p[i, 0]
        v[i].second = p[i, 1]
    if not convert_to_indexes_c(v, &first, rows):
        return None
    return first, np.asarray([rows[i] for i in range(rows.size())], dtype=np.int32)


def contiguous_ranges(indexes):
    """Kaldi's HasContiguousProperty: list of (begin, end) per value, or None."""
    cdef vector[int32_t] idx
    cdef vector[Pair] ranges
    for v in indexes:
        idx.push_back(v)
    if not contiguous_ranges_c(idx, ranges):
        return None
    return [(ranges[i].first, ranges[i].second) for i in range(ranges.size())]
