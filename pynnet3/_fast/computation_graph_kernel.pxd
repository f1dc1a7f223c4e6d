# cython: language_level=3
"""C-level declarations of the fast computation graph (see graph.pyx)."""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t
from libcpp.vector cimport vector

from pynnet3._fast.cindex_keys cimport CindexTable
from pynnet3._fast.descriptor_interpreter cimport Predicate


cdef class NetInfo:
    """Per-node facts of an Nnet the C code needs (node types, descriptor
    programs, how to evaluate each component's index hooks)."""
    cdef readonly object nnet
    cdef int num_nodes
    cdef vector[int32_t] node_type
    cdef vector[uint8_t] is_output
    cdef vector[uint8_t] is_component_input
    cdef vector[int32_t] props
    cdef vector[uint8_t] all_required
    cdef vector[int32_t] dim_range_source
    cdef vector[vector[int32_t]] programs
    cdef vector[vector[int32_t]] part_starts
    cdef vector[int32_t] comp_kind
    cdef vector[vector[int32_t]] comp_offsets
    cdef vector[vector[int32_t]] comp_window
    cdef list components


cdef class FastGraph:
    """Kaldi's ComputationGraph over packed Cindexes."""
    cdef vector[int64_t] cindexes
    cdef vector[uint8_t] is_input
    # dependencies[c] (Kaldi's graph->dependencies) live in one pool: the
    # dep_count[c] ids from dep_pool[dep_start[c]]; pruning only shrinks them
    cdef vector[int32_t] dep_pool
    cdef vector[int64_t] dep_start
    cdef vector[int32_t] dep_count
    cdef vector[int32_t] segment_ends
    cdef CindexTable table
    cdef int32_t get_or_add(self, int64_t key, bint input, bint *is_new) except -2
    cdef int32_t find(self, int64_t key) noexcept nogil
    cdef int rebuild_table(self) except -1
    cdef void set_dependencies(self, int32_t c, const vector[int32_t] &deps) noexcept


cdef struct CindexInfo:
    int32_t usable_count
    int8_t computable
    uint8_t queued
    uint8_t deps_computed


cdef class FastComputationGraphBuilder:
    """Kaldi's ComputationGraphBuilder (see graph.pyx)."""
    cdef public object nnet
    cdef public object request
    cdef public NetInfo net
    cdef public FastGraph graph
    # depend_on_this (Kaldi's depend_on_this_) as linked lists in one pool, so
    # adding a cindex allocates nothing: dot_head/dot_tail per cindex_id,
    # dot_value/dot_next per entry, -1 terminated, in insertion order
    cdef vector[int32_t] dot_head
    cdef vector[int32_t] dot_tail
    cdef vector[int32_t] dot_value
    cdef vector[int32_t] dot_next
    cdef vector[CindexInfo] info
    cdef vector[int32_t] scratch_ids
    cdef vector[int64_t] scratch_used
    cdef int current_distance
    cdef vector[int32_t] current_queue
    cdef vector[int32_t] next_queue
    cdef vector[int64_t] scratch
    cdef vector[int32_t] stack_ids
    cdef vector[int32_t] stack_pos
    # per node: the times a statistics window's inputs are taken from
    # (pynnet3.compiler.time_bounds; lo > hi: none; the full int64 range: all)
    cdef vector[int64_t] window_lo
    cdef vector[int64_t] window_hi
    cdef public list requests
    cdef int _request_node(self, name, str what) except -1
    cdef void _add_cindex_id(self) noexcept
    cdef int _build_graph_one_iter(self) except -1
    cdef int _input_keys(self, int32_t cid, vector[int64_t] *out) except -1
    cdef int _add_dependencies(self, int32_t cid) except -1
    cdef int _python_component_computable(self, int node, int64_t key, int mode,
                                          list used) except -1
    cdef int _component_computable(self, int32_t cid, int mode) except -1
    cdef int _window_computable(self, int node, int64_t key, Predicate *pred,
                                vector[int64_t] *used) except -1
    cdef int _descriptor_computable(self, int32_t cid, int mode,
                                    vector[int64_t] *used) except -1
    cdef int _compute_computable_info(self, int32_t cid) except -1
    cdef int _update_computable_info(self, int32_t cid) except -1
    cdef void _increment_usable_count(self, int32_t cid) noexcept
    cdef void _decrement_usable_count(self, int32_t cid) noexcept
    cdef int _prune_dependencies(self, int32_t cid) except -1


cdef class _IndexSet:
    cdef FastComputationGraphBuilder builder
    cdef int node
    cdef int mode
