# cython: language_level=3
"""C-level declarations of the fast steps data (see steps.pyx)."""

from libc.stdint cimport int32_t, int64_t
from libcpp.unordered_map cimport unordered_map
from libcpp.unordered_set cimport unordered_set
from libcpp.vector cimport vector

from pynnet3._fast.computation_graph_kernel cimport FastGraph, NetInfo


cdef class FastStepsData:
    cdef FastGraph graph
    cdef NetInfo net
    cdef vector[vector[int32_t]] steps
    cdef vector[int32_t] loc_step
    cdef vector[int32_t] loc_row
    cdef public list step_to_segment
    cdef list index_objects
    cdef unordered_map[int64_t, int32_t] index_slot
    cdef unordered_set[int64_t] dim_range_done
    cdef vector[int64_t] scratch_keys
    cdef vector[int64_t] scratch_sub
    cdef vector[int64_t] scratch_used
    cdef int add_step_keys(self, vector[int64_t] &keys, bint add_if_absent) except -1
    cdef int add_step_ids(self, vector[int32_t] &ids) except -1
    cdef int process_io_step(self, request, bint is_output, vector[int64_t] &sub_phase) except -1
    cdef int process_component_step(self, vector[int64_t] &step) except -1
    cdef int process_dim_range(self, vector[int64_t] &sub_phase) except -1
    cdef int compute_for_segment(self, request, vector[vector[int32_t]] &phases) except -1
    cdef object _index(self, int64_t key)
    cdef list _index_list(self, vector[int64_t] &keys)
    cdef list step_cindexes_c(self, int s, int node)
    cdef bytes step_keys_c(self, int s, int32_t *min_n)
    cdef int locate_inputs(self, int s, int part_index, vector[int64_t] &ptr,
                           vector[int32_t] &loc_steps, vector[int32_t] &loc_rows) except -1
