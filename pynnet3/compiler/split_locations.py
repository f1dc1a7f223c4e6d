"""Kaldi's nnet-compile-utils: SplitLocations, SplitLocationsBackward,
ConvertToIndexes, HasContiguousProperty, EnsureContiguousProperty — the
readable twin of ``pynnet3/_fast/split_locations_kernel.pyx``.

A *submat-locations list* is indexed by output row and holds, per row, the
(submatrix, row) pairs summed into it. SplitLocations turns it into a few
vectors of single (submatrix, row) pairs (padded with (-1, -1)) that each
compile to one row-copy/add command; SplitLocationsBackward further splits so
each backward command is either free of repeated pairs or, within one
submatrix, has the contiguous property that kAddRowRanges needs.

Kaldi makes one ordering decision by iterating a ``std::unordered_map<int,
int>`` (which submatrices have a large count, GetSubmatCounts), so the order of
the emitted commands depends on libstdc++'s hash-table iteration order.
:class:`StdUnorderedIntSet` reproduces that order (identity hash, prime bucket
counts, insertion at the front of the bucket or of the whole list, Kaldi's
build: GCC 12 libstdc++) so our command order is Kaldi's.
"""

import numpy as np

from .. import _fast
from ..errors import ComputationError

# Bucket counts libstdc++ (GCC 12) moves through as an unordered container of
# default max_load_factor 1.0 grows one element at a time from empty.
_BUCKET_COUNTS = (13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043,
                  85229, 172933, 351061, 712697, 1447153, 2938679, 5967347, 12195257,
                  24407021, 48814091, 97628193, 195256437)

_NONE = -2      # bucket holds no node
_BEFORE = -1    # bucket's predecessor is the list head (_M_before_begin)


class StdUnorderedIntSet:
    """Iteration order of a libstdc++ ``unordered_set<int>`` /
    ``unordered_map<int, V>`` built by inserting keys one at a time."""

    __slots__ = ("_keys", "_next", "_head", "_buckets", "_bucket_count", "_index", "_size_step")

    def __init__(self):
        self._keys = []
        self._next = []
        self._head = -1
        self._buckets = None
        self._bucket_count = 1
        self._index = {}
        self._size_step = -1

    def __len__(self):
        return len(self._keys)

    def __contains__(self, key):
        return key in self._index

    def _set_next_of(self, prev, node):
        if prev == _BEFORE:
            self._head = node
        else:
            self._next[prev] = node

    def _next_of(self, prev):
        return self._head if prev == _BEFORE else self._next[prev]

    def _rehash(self, count):
        buckets = [_NONE] * count
        keys = self._keys
        nxt = self._next
        p = self._head
        self._head = -1
        bbegin = 0
        while p != -1:
            following = nxt[p]
            b = keys[p] % count
            if buckets[b] == _NONE:
                nxt[p] = self._head
                self._head = p
                buckets[b] = _BEFORE
                if nxt[p] != -1:
                    buckets[bbegin] = p
                bbegin = b
            else:
                prev = buckets[b]
                nxt[p] = self._next_of(prev)
                self._set_next_of(prev, p)
            p = following
        self._buckets = buckets
        self._bucket_count = count

    def add(self, key):
        """Inserts ``key`` (no-op if present)."""
        if key in self._index:
            return
        size = len(self._keys)
        if self._buckets is None or size + 1 > self._bucket_count:
            self._size_step += 1
            self._rehash(_BUCKET_COUNTS[self._size_step])
        key_hash = key % (1 << 64)
        node = size
        self._keys.append(key)
        self._next.append(-1)
        self._index[key] = node
        count = self._bucket_count
        b = key_hash % count
        buckets = self._buckets
        if buckets[b] != _NONE:
            prev = buckets[b]
            self._next[node] = self._next_of(prev)
            self._set_next_of(prev, node)
        else:
            self._next[node] = self._head
            self._head = node
            if self._next[node] != -1:
                buckets[(self._keys[self._next[node]] % (1 << 64)) % count] = node
            buckets[b] = _BEFORE

    def __iter__(self):
        p = self._head
        keys = self._keys
        nxt = self._next
        while p != -1:
            yield keys[p]
            p = nxt[p]


def get_submat_counts(submat_lists):
    """Kaldi's GetSubmatCounts: (counts dict, submatrices whose count exceeds
    half the number of rows, in libstdc++ iteration order)."""
    counts = {}
    order = StdUnorderedIntSet()
    for row in submat_lists:
        for submat, _ in row:
            if submat in counts:
                counts[submat] += 1
            else:
                counts[submat] = 1
                order.add(submat)
    cutoff = len(submat_lists) // 2
    return counts, [s for s in order if counts[s] > cutoff]


def separate_submats_with_large_counts(submats_to_separate, submat_lists):
    """Kaldi's SeparateSubmatsWithLargeCounts: (reduced lists, split lists)."""
    num_rows = len(submat_lists)
    submat_to_index = {s: i for i, s in enumerate(submats_to_separate)}
    split_lists = [[(-1, -1)] * num_rows for _ in submats_to_separate]
    reduced = []
    for row, this_list in enumerate(submat_lists):
        reduced_list = []
        for pair in this_list:
            index = submat_to_index.get(pair[0])
            if index is None:
                reduced_list.append(pair)
                continue
            target = split_lists[index]
            if target[row][0] >= 0:
                # the same large-count submatrix twice in one row (rare)
                reduced_list.append(pair)
                continue
            target[row] = pair
        reduced.append(reduced_list)
    return reduced, split_lists


def split_locations(submat_lists):
    """Kaldi's SplitLocations: list of vectors of (submatrix, row), each as
    long as ``submat_lists``, (-1, -1) where a row has nothing."""
    num_rows = len(submat_lists)
    num_output_lists = max((len(r) for r in submat_lists), default=0)
    if num_output_lists == 0:
        return []
    if num_output_lists == 1:
        return [[r[0] if r else (-1, -1) for r in submat_lists]]
    _, large = get_submat_counts(submat_lists)
    if large:
        reduced, split_lists = separate_submats_with_large_counts(large, submat_lists)
        return split_lists + split_locations(reduced)
    split_lists = [[(-1, -1)] * num_rows for _ in range(num_output_lists)]
    for row, this_list in enumerate(submat_lists):
        for i, pair in enumerate(this_list):
            split_lists[i][row] = pair
    return split_lists


def convert_to_indexes(location_vector):
    """Kaldi's ConvertToIndexes: (submatrix, rows) when every pair's submatrix
    is one value s or -1 (rows get -1 there), else None. The submatrix is -1
    when all pairs are (-1, -1)."""
    first = -1
    rows = []
    for submat, row in location_vector:
        if submat != -1:
            if first == -1:
                first = submat
            elif submat != first:
                return None
            rows.append(row)
        else:
            rows.append(-1)
    return first, rows


def ensure_contiguous_property(indexes):
    """Kaldi's EnsureContiguousProperty: splits ``indexes`` into vectors in
    which each value occupies one contiguous run (the rest -1)."""
    out = []
    if not indexes:
        return out
    max_value = max(indexes)
    if max_value == -1:
        return out
    segments_seen = [0] * (max_value + 1)
    dim = len(indexes)
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
            out.append([-1] * dim)
        vec = out[seen]
        for j in range(start, i):
            vec[j] = value
    return out


def split_pair_list(pairs):
    """Kaldi's SplitPairList: the k-th occurrence of each pair goes to list k."""
    counts = {}
    split_lists = []
    size = len(pairs)
    for i, pair in enumerate(pairs):
        if pair[0] == -1:
            continue
        count = counts.get(pair, 0) + 1
        counts[pair] = count
        if count > len(split_lists):
            split_lists.append([(-1, -1)] * size)
        split_lists[count - 1][i] = pair
    if not split_lists:
        raise ComputationError("internal error: SplitPairList got a list of only (-1, -1) pairs")
    return split_lists


def split_locations_backward(submat_lists):
    """Kaldi's SplitLocationsBackward."""
    out = []
    for this_list in split_locations(submat_lists):
        converted = convert_to_indexes(this_list)
        if converted is not None:
            first, rows = converted
            if first == -1:
                continue
            pieces = ensure_contiguous_property(rows)
            if len(pieces) == 1:
                out.append(this_list)
            else:
                for piece in pieces:
                    out.append([(-1, r) if r == -1 else (first, r) for r in piece])
        else:
            out.extend(split_pair_list(this_list))
    return out


def has_contiguous_property(indexes):
    """Kaldi's HasContiguousProperty: the (begin, end) range of each value
    when every value's occurrences are contiguous, else None."""
    if not indexes:
        return []
    num_input = max(indexes) + 1
    if num_input == 0:
        return []
    ranges = [[-1, -1] for _ in range(num_input)]
    for i, j in enumerate(indexes):
        if j == -1:
            continue
        pair = ranges[j]
        if pair[0] == -1:
            pair[0] = i
            pair[1] = i + 1
        else:
            pair[0] = min(pair[0], i)
            pair[1] = max(pair[1], i + 1)
    for value, (begin, end) in enumerate(ranges):
        if begin != -1:
            for j in range(begin, end):
                if indexes[j] != value:
                    return None
    return [tuple(p) for p in ranges]


# -- the array API the Compiler uses (twin of pynnet3/_fast/split_locations_kernel.pyx) ---
# A submat-locations list is passed as CSR arrays: row r's pairs are
# (firsts[k], seconds[k]) for row_ptr[r] <= k < row_ptr[r + 1]. Split lists come
# back as (num_rows, 2) int32 arrays of (submatrix, row), (-1, -1) for nothing.

def _csr_to_lists(row_ptr, firsts, seconds):
    p = [int(v) for v in row_ptr]
    f = [int(v) for v in firsts]
    s = [int(v) for v in seconds]
    return [list(zip(f[p[i]:p[i + 1]], s[p[i]:p[i + 1]])) for i in range(len(p) - 1)]


def _as_array(pairs):
    return np.asarray(pairs, dtype=np.int32).reshape(-1, 2)


def split_locations_csr_py(row_ptr, firsts, seconds):
    """split_locations over CSR input, as (num_rows, 2) arrays."""
    return [_as_array(v) for v in split_locations(_csr_to_lists(row_ptr, firsts, seconds))]


def split_locations_backward_csr_py(row_ptr, firsts, seconds):
    """split_locations_backward over CSR input, as (num_rows, 2) arrays."""
    return [_as_array(v) for v in
            split_locations_backward(_csr_to_lists(row_ptr, firsts, seconds))]


def convert_pairs_to_indexes_py(pairs):
    """convert_to_indexes of a (num_rows, 2) array: (submatrix, rows list) or None."""
    return convert_to_indexes([(int(a), int(b)) for a, b in pairs])


def contiguous_ranges_py(indexes):
    """has_contiguous_property of a sequence of ints: list of (begin, end) or None."""
    return has_contiguous_property([int(i) for i in indexes])


# The kernel's versions of the array API when it is loaded (the one
# pynnet3._fast.load policy), else the twins above.
_kernel = _fast.load("split_locations_kernel")
(split_locations_csr, split_locations_backward_csr, convert_pairs_to_indexes,
 contiguous_ranges) = _fast.select(
    _kernel, split_locations_csr_py, split_locations_backward_csr_py,
    convert_pairs_to_indexes_py, contiguous_ranges_py)
