# cython: language_level=3
"""C-level SplitLocations kernels (see split_locations.pyx)."""

from libc.stdint cimport int32_t, int64_t
from libcpp.vector cimport vector


cdef struct Pair:
    int32_t first
    int32_t second


cdef int split_locations_c(const int64_t *ptr, const int32_t *firsts, const int32_t *seconds,
                           int64_t num_rows, vector[vector[Pair]] &out) except -1

cdef int split_locations_backward_c(const int64_t *ptr, const int32_t *firsts,
                                    const int32_t *seconds, int64_t num_rows,
                                    vector[vector[Pair]] &out) except -1

cdef bint convert_to_indexes_c(const vector[Pair] &pairs, int32_t *first,
                               vector[int32_t] &rows) noexcept

cdef bint contiguous_ranges_c(const vector[int32_t] &indexes, vector[Pair] &ranges) noexcept

cdef void hash_order_c(const vector[int32_t] &keys, vector[int32_t] &order) noexcept
