# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""The computation graph builder in C (twin of pynnet3/compiler/computation_graph.py).

Same algorithm, same cindex_id numbering, same dependencies and computable
flags as the Python twin (and Kaldi); Cindexes are packed int64 keys (see
cindex.pxd), Descriptors are evaluated by the C interpreter over their
compiled programs, simple components and TdnnComponent's time offsets are
handled in C, and other non-simple components are called back in Python per
Cindex (as Kaldi makes a virtual call).
"""

from libc.stdint cimport INT64_MAX, INT64_MIN, int8_t, int32_t, int64_t, uint8_t
from libcpp.algorithm cimport sort, unique
from libcpp.vector cimport vector

import numpy as np

from pynnet3._fast.cindex_keys cimport (
    CindexTable, key_n, key_node, key_t, key_x, pack, table_find, table_free,
    table_get_or_insert, table_init, with_node)
from pynnet3._fast.constants cimport *
from pynnet3._fast.descriptor_interpreter cimport (
    MODE_COMPUTABLE, MODE_COMPUTABLE_OR_UNKNOWN, MODE_EXISTS, Predicate, desc_dependencies,
    desc_is_computable, pred_holds)

from ..compiler.descriptor_program import compile_descriptor_cached, component_index_program
from ..compiler.computability import COMPUTABLE_NAMES, MAX_DISTANCE, not_computable_error
from ..compiler.time_bounds import window_input_bounds
from ..errors import ComputationError
from ..common.index import Index

cdef enum:
    KIND_NONE = 0
    KIND_SIMPLE = 1
    KIND_OFFSETS = 2
    KIND_PYTHON = 3
    KIND_WINDOW = 4


def pack_cindex(node, index):
    """The packed key of (node, (n, t, x)); ComputationError if out of range."""
    cdef int64_t key = pack(node, index[0], index[1], index[2])
    if key < 0:
        raise range_error(node, index)
    return key


def unpack_cindex(int64_t key):
    """(node, Index) of a packed key."""
    return (key_node(key), Index(key_n(key), key_t(key), key_x(key)))


def range_error(node, index, what="Cindex"):
    return ComputationError(
        "%s (node %d, n=%d, t=%d, x=%d) is outside the range the compiler supports "
        "(node < 4096, -16384 <= n < 16384, |t| < 2^23, -2048 <= x < 2048)"
        % (what, node, index[0], index[1], index[2]))


cdef inline object key_index(int64_t key):
    return Index(key_n(key), key_t(key), key_x(key))


cdef class NetInfo:
    def __init__(self, nnet):
        cdef int i
        self.nnet = nnet
        self.num_nodes = len(nnet.nodes)
        if self.num_nodes > 4096:
            raise ComputationError("the compiler supports at most 4096 nodes, this network "
                                   "has %d" % self.num_nodes)
        self.node_type.resize(self.num_nodes)
        self.is_output.resize(self.num_nodes)
        self.is_component_input.resize(self.num_nodes)
        self.dim_range_source.resize(self.num_nodes, -1)
        self.programs.resize(self.num_nodes)
        self.part_starts.resize(self.num_nodes)
        self.comp_kind.resize(self.num_nodes, KIND_NONE)
        self.props.resize(self.num_nodes, 0)
        self.all_required.resize(self.num_nodes, 0)
        self.comp_offsets.resize(self.num_nodes)
        self.comp_window.resize(self.num_nodes)
        self.components = [None] * self.num_nodes
        for i, node in enumerate(nnet.nodes):
            t = int(node.node_type)
            self.node_type[i] = t
            nxt = int(nnet.nodes[i + 1].node_type) if i + 1 < self.num_nodes else -1
            self.is_output[i] = t == kDescriptor and nxt != kComponent
            self.is_component_input[i] = t == kDescriptor and nxt == kComponent
            if t == kDescriptor:
                prog, starts, optional = compile_descriptor_cached(node.descriptor)
                self.programs[i] = prog
                self.part_starts[i] = starts
                self.all_required[i] = not optional
            elif t == kComponent:
                comp = nnet.get_component(node.component_index)
                self.components[i] = comp
                self.props[i] = int(comp.properties())
                kind = component_index_program(comp, self.props[i])
                if kind[0] == "simple":
                    self.comp_kind[i] = KIND_SIMPLE
                    self.all_required[i] = True
                elif kind[0] == "offsets":
                    self.comp_kind[i] = KIND_OFFSETS
                    self.comp_offsets[i] = list(kind[1])
                    self.all_required[i] = True
                elif kind[0] == "window":
                    self.comp_kind[i] = KIND_WINDOW
                    self.comp_window[i] = list(kind[1:])
                else:
                    self.comp_kind[i] = KIND_PYTHON
            elif t == kDimRange:
                self.dim_range_source[i] = node.node_index


cdef class FastGraph:
    def __cinit__(self):
        if table_init(&self.table, 1024) != 0:
            raise MemoryError()

    def __dealloc__(self):
        table_free(&self.table)

    def __len__(self):
        return self.cindexes.size()

    cdef int32_t get_or_add(self, int64_t key, bint input, bint *is_new) except -2:
        cdef int32_t new_id = <int32_t>self.cindexes.size()
        cdef int32_t cid = table_get_or_insert(&self.table, key, new_id, is_new)
        if cid == -2:
            raise MemoryError()
        if is_new[0]:
            self.cindexes.push_back(key)
            self.is_input.push_back(input)
            self.dep_start.push_back(self.dep_pool.size())
            self.dep_count.push_back(0)
        return cid

    cdef void set_dependencies(self, int32_t c, const vector[int32_t] &deps) noexcept:
        """Sets c's dependencies (appended to the pool)."""
        cdef size_t i
        self.dep_start[c] = self.dep_pool.size()
        self.dep_count[c] = <int32_t>deps.size()
        for i in range(deps.size()):
            self.dep_pool.push_back(deps[i])

    cdef int32_t find(self, int64_t key) noexcept nogil:
        return table_find(&self.table, key)

    cdef int rebuild_table(self) except -1:
        cdef size_t i
        cdef bint is_new
        table_free(&self.table)
        if table_init(&self.table, self.cindexes.size() + 1024) != 0:
            raise MemoryError()
        for i in range(self.cindexes.size()):
            table_get_or_insert(&self.table, self.cindexes[i], <int32_t>i, &is_new)
        return 0

    # -- Python views (tests, diagnostics) ----------------------------------------------
    def get_cindex_id(self, cindex):
        """The id of (node, Index) or -1."""
        cdef int64_t key = pack(cindex[0], cindex[1][0], cindex[1][1], cindex[1][2])
        if key < 0:
            return -1
        return self.find(key)

    def get_or_add_cindex(self, cindex, bint input=False):
        """(id, is_new), adding (node, Index) if absent."""
        cdef bint is_new
        cdef int32_t cid = self.get_or_add(pack_cindex(cindex[0], cindex[1]), input, &is_new)
        return cid, is_new

    def keys(self):
        """The packed cindexes as an int64 NumPy array."""
        cdef size_t n = self.cindexes.size()
        arr = np.empty(n, dtype=np.int64)
        cdef int64_t[::1] view = arr
        cdef size_t i
        for i in range(n):
            view[i] = self.cindexes[i]
        return arr

    @property
    def cindexes_list(self):
        return [unpack_cindex(k) for k in self.cindexes]

    @property
    def is_input_list(self):
        return [bool(b) for b in self.is_input]

    def dependencies_of(self, int32_t c):
        """The dependency ids of cindex_id c, as a list."""
        return [self.dep_pool[self.dep_start[c] + i] for i in range(self.dep_count[c])]

    @property
    def dependencies_list(self):
        return [[self.dep_pool[self.dep_start[c] + i] for i in range(self.dep_count[c])]
                for c in range(self.cindexes.size())]

    @property
    def segment_ends_list(self):
        return list(self.segment_ends)


cdef class _IndexSet:
    """Kaldi's IndexSet for Python component callbacks: Indexes x such that
    (node, x) is computable (or unknown, in the lenient mode)."""

    def __call__(self, index):
        cdef int64_t key = pack(self.node, index[0], index[1], index[2])
        cdef Predicate pred
        if key < 0:
            return False
        pred.table = &self.builder.graph.table
        pred.computable = <const int8_t *>&self.builder.info[0].computable
        pred.stride = sizeof(CindexInfo)
        pred.mode = self.mode
        return pred_holds(&pred, key)


cdef class FastComputationGraphBuilder:
    """Kaldi's ComputationGraphBuilder in C; same interface as the Python twin
    (compute, all_outputs_are_computable, prune, explain_why_not_computable)."""

    def __init__(self, nnet, NetInfo net=None):
        self.nnet = nnet
        self.request = None
        self.requests = []
        self.net = net if net is not None else NetInfo(nnet)
        self.graph = FastGraph()
        self.current_distance = -1

    def _set_window_bounds(self):
        """The times each statistics window takes inputs from, for the
        requests so far (pynnet3.compiler.time_bounds)."""
        self.window_lo.assign(self.net.num_nodes, INT64_MIN)
        self.window_hi.assign(self.net.num_nodes, INT64_MAX)
        for node, (lo, hi) in window_input_bounds(self.nnet, self.requests).items():
            self.window_lo[node] = lo
            self.window_hi[node] = hi

    cdef void _add_cindex_id(self) noexcept:
        cdef CindexInfo fresh
        fresh.usable_count = 0
        fresh.computable = kUnknown
        fresh.queued = False
        fresh.deps_computed = False
        self.dot_head.push_back(-1)
        self.dot_tail.push_back(-1)
        self.info.push_back(fresh)

    cdef int _request_node(self, name, str what) except -1:
        """The index of the node a request's input or output (``what``) names."""
        n = self.nnet.get_node_index(name)
        if n == -1:
            raise ComputationError("Network has no %s with name %s" % (what, name))
        return n

    def _add_inputs(self):
        cdef bint is_new
        cdef int32_t cid
        num_added = 0
        for spec in self.request.inputs:
            n = self._request_node(spec.name, "input")
            if self.net.node_type[n] != kInput and self.net.node_type[n] != kComponent:
                raise ComputationError("request input '%s' is not an input or component node;"
                                       " inputs to the graph are only allowed for those"
                                       % spec.name)
            for index in spec.indexes:
                cid = self.graph.get_or_add(pack_cindex(n, index), True, &is_new)
                if not is_new:
                    raise ComputationError("request input '%s' lists index %s more than once"
                                           % (spec.name, tuple(index)))
                self._add_cindex_id()
                self.info[cid].computable = kComputable
                num_added += 1
        if num_added == 0:
            raise ComputationError("computation request has no input indexes")

    def _add_outputs(self):
        cdef bint is_new
        cdef int32_t cid
        num_added = 0
        for spec in self.request.outputs:
            n = self._request_node(spec.name, "output")
            for index in spec.indexes:
                cid = self.graph.get_or_add(pack_cindex(n, index), False, &is_new)
                if not is_new:
                    raise ComputationError("request output '%s' lists index %s more than "
                                           "once (or it is also an input)"
                                           % (spec.name, tuple(index)))
                self._add_cindex_id()
                self.info[cid].usable_count = 1
                self.info[cid].queued = True
                self.next_queue.push_back(cid)
                num_added += 1
        if num_added == 0:
            raise ComputationError("Cannot process computation request with no outputs")
        self.current_distance = 0
        self.current_queue.swap(self.next_queue)
        self.next_queue.clear()

    def compute(self, request):
        """Builds the graph for ``request`` (Kaldi's Compute())."""
        if self.request is not None and self.graph.segment_ends.empty():
            raise ComputationError("call compute(), prune(), compute(), prune(), ...")
        self.request = request
        self.requests.append(request)
        self._set_window_bounds()
        cdef size_t expected = self.graph.cindexes.size()
        for spec in request.inputs:
            expected += len(spec.indexes)
        for spec in request.outputs:
            expected += len(spec.indexes)
        # graphs typically grow to several times the request's size; reserving
        # avoids repeated reallocation of the per-cindex arrays
        expected *= 8
        if expected > self.info.capacity():
            self.info.reserve(expected)
            self.dot_head.reserve(expected)
            self.dot_tail.reserve(expected)
            self.dot_value.reserve(expected)
            self.dot_next.reserve(expected)
            self.graph.cindexes.reserve(expected)
            self.graph.is_input.reserve(expected)
            self.graph.dep_start.reserve(expected)
            self.graph.dep_count.reserve(expected)
            self.graph.dep_pool.reserve(2 * expected)
        self._add_inputs()
        self._add_outputs()
        while self.current_distance < MAX_DISTANCE:
            self._build_graph_one_iter()
            if self.current_queue.empty():
                break
        if self.current_distance == MAX_DISTANCE:
            raise ComputationError("Loop detected while building computation graph (bad "
                                   "network topology?)")

    cdef int _build_graph_one_iter(self) except -1:
        cdef int32_t cid
        while not self.current_queue.empty():
            cid = self.current_queue.back()
            self.current_queue.pop_back()
            self.info[cid].queued = False
            if not self.info[cid].deps_computed and self.info[cid].usable_count != 0:
                self.info[cid].deps_computed = True
                self._add_dependencies(cid)
                if not self.info[cid].queued:
                    self.info[cid].queued = True
                    self.next_queue.push_back(cid)
            elif self.info[cid].computable == kUnknown:
                self._update_computable_info(cid)
        self.current_queue.swap(self.next_queue)
        self.next_queue.clear()
        self.current_distance += 1
        return 0

    cdef int _input_keys(self, int32_t cid, vector[int64_t] *out) except -1:
        """Kaldi's switch in AddDependencies: the packed Cindexes cid may depend on."""
        cdef int64_t key = self.graph.cindexes[cid]
        cdef int node = key_node(key)
        cdef int nt = self.net.node_type[node]
        cdef int64_t n = key_n(key), t = key_t(key), x = key_x(key)
        cdef int kind
        cdef size_t i
        cdef int64_t k2, lo, hi, step
        out.clear()
        if nt == kDescriptor:
            if desc_dependencies(self.net.programs[node].data(),
                                 self.net.part_starts[node].data(),
                                 <int>self.net.part_starts[node].size(), n, t, x, out) < 0:
                raise range_error(node, (n, t, x), "an input of Cindex")
        elif nt == kComponent:
            kind = self.net.comp_kind[node]
            if kind == KIND_SIMPLE:
                out.push_back(with_node(key, node - 1))
            elif kind == KIND_OFFSETS:
                for i in range(self.net.comp_offsets[node].size()):
                    k2 = pack(node - 1, n, t + self.net.comp_offsets[node][i], x)
                    if k2 < 0:
                        raise range_error(node, (n, t, x), "an input of Cindex")
                    out.push_back(k2)
            elif kind == KIND_WINDOW:
                if not _window(self.net.comp_window[node], t, &lo, &hi, &step):
                    raise ComputationError("%s: output t=%d is not a multiple of its input "
                                           "period" % (self.nnet.node_names[node], t))
                while lo < hi:
                    # inputs no request can make computable are left out
                    if self.window_lo[node] <= lo <= self.window_hi[node]:
                        k2 = pack(node - 1, n, lo, x)
                        if k2 < 0:
                            raise range_error(node, (n, t, x), "an input of Cindex")
                        out.push_back(k2)
                    lo += step
            else:
                comp = self.net.components[node]
                for index in comp.get_input_indexes(self.request.misc_info, Index(n, t, x)):
                    out.push_back(pack_cindex(node - 1, index))
        elif nt == kDimRange:
            out.push_back(with_node(key, self.net.dim_range_source[node]))
        return 0

    cdef int _add_dependencies(self, int32_t cid) except -1:
        cdef vector[int64_t] *inputs = &self.scratch
        cdef vector[int32_t] *this_dep = &self.scratch_ids
        cdef int32_t entry
        cdef size_t i
        cdef int32_t dep
        cdef bint is_new
        self._input_keys(cid, inputs)
        this_dep.resize(inputs.size())
        for i in range(inputs.size()):
            dep = self.graph.get_or_add(inputs[0][i], False, &is_new)
            this_dep[0][i] = dep
            if is_new:
                self._add_cindex_id()
                self.info[dep].queued = True
                self.next_queue.push_back(dep)
        if this_dep.size() > 1:
            sort(this_dep.begin(), this_dep.end())
            this_dep.erase(unique(this_dep.begin(), this_dep.end()), this_dep.end())
        self.graph.set_dependencies(cid, this_dep[0])
        for i in range(this_dep.size()):
            dep = this_dep[0][i]
            # append cid to dep's depend-on-this list
            entry = <int32_t>self.dot_value.size()
            self.dot_value.push_back(cid)
            self.dot_next.push_back(-1)
            if self.dot_tail[dep] == -1:
                self.dot_head[dep] = entry
            else:
                self.dot_next[self.dot_tail[dep]] = entry
            self.dot_tail[dep] = entry
            self._increment_usable_count(dep)
        return 0

    cdef int _python_component_computable(self, int node, int64_t key, int mode,
                                          list used) except -1:
        cdef _IndexSet index_set = _IndexSet()
        index_set.builder = self
        index_set.node = node - 1
        index_set.mode = mode
        comp = self.net.components[node]
        index = Index(key_n(key), key_t(key), key_x(key))
        if used is None:
            return 1 if comp.is_computable(self.request.misc_info, index, index_set) else 0
        return 1 if comp.is_computable(self.request.misc_info, index, index_set, used) else 0

    cdef int _component_computable(self, int32_t cid, int mode) except -1:
        cdef int64_t key = self.graph.cindexes[cid]
        cdef int node = key_node(key)
        cdef int kind = self.net.comp_kind[node]
        cdef Predicate pred
        cdef size_t i
        cdef int64_t k2
        pred.table = &self.graph.table
        pred.computable = <const int8_t *>&self.info[0].computable
        pred.stride = sizeof(CindexInfo)
        pred.mode = mode
        if kind == KIND_SIMPLE:
            return 1 if pred_holds(&pred, with_node(key, node - 1)) else 0
        if kind == KIND_OFFSETS:
            for i in range(self.net.comp_offsets[node].size()):
                k2 = pack(node - 1, key_n(key), key_t(key) + self.net.comp_offsets[node][i],
                          key_x(key))
                if k2 < 0 or not pred_holds(&pred, k2):
                    return 0
            return 1
        if kind == KIND_WINDOW:
            return self._window_computable(node, key, &pred, NULL)
        return self._python_component_computable(node, key, mode, None)

    cdef int _window_computable(self, int node, int64_t key, Predicate *pred,
                                vector[int64_t] *used) except -1:
        """Statistics components: computable when any input in the window is;
        appends the present inputs to ``used``."""
        cdef int64_t lo, hi, step, k2
        cdef int ans = 0
        if not _window(self.net.comp_window[node], key_t(key), &lo, &hi, &step):
            return 0
        while lo < hi:
            k2 = pack(node - 1, key_n(key), lo, key_x(key))
            if k2 >= 0 and pred_holds(pred, k2):
                ans = 1
                if used == NULL:
                    return 1
                used.push_back(k2)
            lo += step
        return ans

    cdef int _descriptor_computable(self, int32_t cid, int mode,
                                    vector[int64_t] *used) except -1:
        cdef int64_t key = self.graph.cindexes[cid]
        cdef int node = key_node(key)
        cdef Predicate pred
        cdef int r
        pred.table = &self.graph.table
        pred.computable = <const int8_t *>&self.info[0].computable
        pred.stride = sizeof(CindexInfo)
        pred.mode = mode
        r = desc_is_computable(self.net.programs[node].data(),
                               self.net.part_starts[node].data(),
                               <int>self.net.part_starts[node].size(),
                               key_n(key), key_t(key), key_x(key), &pred, used)
        if r < 0:
            raise range_error(node, (key_n(key), key_t(key), key_x(key)), "an input of Cindex")
        return r

    cdef int _compute_computable_info(self, int32_t cid) except -1:
        cdef int64_t key = self.graph.cindexes[cid]
        cdef int node = key_node(key)
        cdef int nt = self.net.node_type[node]
        cdef int32_t input_cid
        cdef size_t i
        cdef int c
        cdef bint all_computable
        if self.net.all_required[node]:
            # Every input is required (no IfDefined/Failover; simple or TDNN
            # component), and the dependencies are exactly the inputs: the
            # two-pass IsComputable reduces to their states.
            all_computable = True
            for i in range(self.graph.dep_count[cid]):
                c = self.info[self.graph.dep_pool[self.graph.dep_start[cid] + i]].computable
                if c == kNotComputable or c == kWillNotCompute:
                    return kNotComputable
                if c != kComputable:
                    all_computable = False
            return kComputable if all_computable else kUnknown
        if nt == kDescriptor:
            if self._descriptor_computable(cid, MODE_COMPUTABLE, NULL):
                return kComputable
            if not self._descriptor_computable(cid, MODE_COMPUTABLE_OR_UNKNOWN, NULL):
                return kNotComputable
            return kUnknown
        if nt == kComponent:
            if self._component_computable(cid, MODE_COMPUTABLE):
                return kComputable
            if not self._component_computable(cid, MODE_COMPUTABLE_OR_UNKNOWN):
                return kNotComputable
            return kUnknown
        if nt == kDimRange:
            input_cid = self.graph.find(with_node(key, self.net.dim_range_source[node]))
            return self.info[input_cid].computable if input_cid != -1 else kUnknown
        if nt == kInput:
            return kComputable if self.graph.is_input[cid] else kNotComputable
        raise ComputationError("invalid node type for node %d" % node)

    cdef int _update_computable_info(self, int32_t cid) except -1:
        cdef int output
        cdef size_t i
        cdef int32_t other, entry
        if self.info[cid].usable_count == 0:
            return 0
        output = self._compute_computable_info(cid)
        self.info[cid].computable = output
        if output != kUnknown:
            entry = self.dot_head[cid]
            while entry != -1:
                other = self.dot_value[entry]
                entry = self.dot_next[entry]
                if self.info[other].computable == kUnknown and not self.info[other].queued:
                    self.info[other].queued = True
                    self.next_queue.push_back(other)
            if output == kNotComputable and self.info[cid].usable_count != 0:
                for i in range(self.graph.dep_count[cid]):
                    self._decrement_usable_count(self.graph.dep_pool[self.graph.dep_start[cid] + i])
        return 0

    cdef void _increment_usable_count(self, int32_t cid) noexcept:
        """Kaldi's recursive IncrementUsableCount with an explicit stack."""
        cdef int32_t c, d, pos
        cdef bint descended
        self.info[cid].usable_count += 1
        if self.info[cid].usable_count != 1 or self.info[cid].computable == kNotComputable:
            return
        self.stack_ids.clear()
        self.stack_pos.clear()
        self.stack_ids.push_back(cid)
        self.stack_pos.push_back(0)
        while not self.stack_ids.empty():
            c = self.stack_ids.back()
            pos = self.stack_pos.back()
            descended = False
            while pos < <int32_t>self.graph.dep_count[c]:
                d = self.graph.dep_pool[self.graph.dep_start[c] + pos]
                pos += 1
                self.info[d].usable_count += 1
                if self.info[d].usable_count == 1 and self.info[d].computable != kNotComputable:
                    self.stack_pos[self.stack_pos.size() - 1] = pos
                    self.stack_ids.push_back(d)
                    self.stack_pos.push_back(0)
                    descended = True
                    break
            if descended:
                continue
            self.stack_ids.pop_back()
            self.stack_pos.pop_back()
            if self.info[c].computable == kUnknown and not self.info[c].queued:
                self.info[c].queued = True
                self.next_queue.push_back(c)

    cdef void _decrement_usable_count(self, int32_t cid) noexcept:
        # stack_ids is free here (the two usable-count walks never nest); reusing
        # it saves an allocation per call
        cdef int32_t c
        cdef size_t i
        cdef vector[int32_t] *stack = &self.stack_ids
        stack.clear()
        stack.push_back(cid)
        while not stack.empty():
            c = stack.back()
            stack.pop_back()
            self.info[c].usable_count -= 1
            if self.info[c].usable_count == 0 and self.info[c].computable != kNotComputable:
                for i in range(self.graph.dep_count[c]):
                    stack.push_back(self.graph.dep_pool[self.graph.dep_start[c] + i])

    # -- results ---------------------------------------------------------------------------
    def all_outputs_are_computable(self):
        cdef size_t cid
        for cid in range(self.info.size()):
            if self.info[cid].computable != kComputable and \
                    self.net.is_output[key_node(self.graph.cindexes[cid])]:
                return False
        return True

    def get_computable_info(self):
        ans = []
        for spec in self.request.outputs:
            n = self.nnet.get_node_index(spec.name)
            ans.append([self.info[self.graph.find(pack_cindex(n, i))].computable == kComputable
                        for i in spec.indexes])
        return ans

    def computable_list(self):
        return [int(self.info[i].computable) for i in range(self.info.size())]

    def cindex_list(self):
        return self.graph.cindexes_list

    cdef int _prune_dependencies(self, int32_t cid) except -1:
        cdef int c = self.info[cid].computable
        cdef int usable = self.info[cid].usable_count
        cdef int64_t key = self.graph.cindexes[cid]
        cdef int node = key_node(key)
        cdef int nt = self.net.node_type[node]
        cdef FastGraph graph = self.graph
        cdef int32_t *deps = &graph.dep_pool[0] + graph.dep_start[cid] if graph.dep_count[cid] \
            else NULL
        cdef int32_t num_deps = graph.dep_count[cid]
        cdef vector[int32_t] *used_ids = &self.scratch_ids
        cdef vector[int64_t] *used = &self.scratch_used
        cdef size_t i
        cdef int32_t u
        cdef int kind
        cdef int ok = 1
        cdef Predicate pred
        if c == kUnknown and usable != 0:
            raise ComputationError("internal error: usable cindex with unknown computable "
                                   "state after building the graph")
        if c == kNotComputable or usable == 0:
            graph.dep_count[cid] = 0
            return 0
        if num_deps > 1:
            sort(deps, deps + num_deps)
        if nt == kDimRange or nt == kInput or self.net.all_required[node]:
            # all inputs are used (the dependencies are already sorted and unique)
            return 0
        used.clear()
        used_ids.clear()
        if nt == kDescriptor:
            ok = self._descriptor_computable(cid, MODE_COMPUTABLE, used)
        elif nt == kComponent:
            kind = self.net.comp_kind[node]
            if kind == KIND_WINDOW:
                pred.table = &self.graph.table
                pred.computable = <const int8_t *>&self.info[0].computable
                pred.stride = sizeof(CindexInfo)
                pred.mode = MODE_COMPUTABLE
                ok = self._window_computable(node, key, &pred, used)
            elif kind == KIND_SIMPLE or kind == KIND_OFFSETS:
                ok = self._component_computable(cid, MODE_COMPUTABLE)
                if kind == KIND_SIMPLE:
                    used.push_back(with_node(key, node - 1))
                else:
                    for i in range(self.net.comp_offsets[node].size()):
                        used.push_back(pack(node - 1, key_n(key),
                                            key_t(key) + self.net.comp_offsets[node][i],
                                            key_x(key)))
            else:
                used_list = []
                ok = self._python_component_computable(node, key, MODE_COMPUTABLE, used_list)
                for index in used_list:
                    used.push_back(pack_cindex(node - 1, index))
        else:
            raise ComputationError("invalid node type for node %d" % node)
        for i in range(used.size()):
            u = self.graph.find(used[0][i])
            used_ids.push_back(u)
            if u < 0 or not _sorted_contains(deps, num_deps, u):
                ok = 0
        if not ok:
            raise ComputationError("internal error pruning the computation graph at node %s: "
                                   "making more inputs available changed what is computable"
                                   % self.nnet.node_names[node])
        if used_ids.size() > 1:
            sort(used_ids.begin(), used_ids.end())
            used_ids.erase(unique(used_ids.begin(), used_ids.end()), used_ids.end())
        # the used inputs are a subset of the dependencies: overwrite in place
        for i in range(used_ids.size()):
            deps[i] = used_ids[0][i]
        graph.dep_count[cid] = <int32_t>used_ids.size()
        return 0

    def prune(self):
        """Kaldi's Prune(): used dependencies only, required cindex_ids only."""
        cdef FastGraph graph = self.graph
        cdef int32_t start = graph.segment_ends.back() if not graph.segment_ends.empty() else 0
        cdef int32_t num = <int32_t>graph.cindexes.size()
        cdef int32_t c, d, new_num, j
        cdef size_t i
        cdef vector[uint8_t] required
        cdef vector[int32_t] queue
        for c in range(start, num):
            self._prune_dependencies(c)
        required.resize(num - start, 0)
        for c in range(start, num):
            if self.net.is_output[key_node(graph.cindexes[c])]:
                required[c - start] = 1
                queue.push_back(c)
        while not queue.empty():
            c = queue.back()
            queue.pop_back()
            for i in range(graph.dep_count[c]):
                d = graph.dep_pool[graph.dep_start[c] + i]
                if d >= start and not required[d - start]:
                    required[d - start] = 1
                    queue.push_back(d)
        for c in range(start, num):
            if required[c - start] or graph.is_input[c]:
                if self.info[c].computable != kComputable:
                    raise ComputationError("prune() called when not all outputs are "
                                           "computable")
                required[c - start] = 1
        _renumber(graph, start, required)
        new_num = <int32_t>graph.cindexes.size()
        self.info.resize(start)
        self.dot_head.resize(start)
        self.dot_tail.resize(start)
        if start == 0:
            self.dot_value.clear()
            self.dot_next.clear()
        for j in range(start, new_num):
            self._add_cindex_id()
            self.info[j].computable = kComputable
            self.info[j].usable_count = 1
        graph.segment_ends.push_back(new_num)

    # -- diagnostics ------------------------------------------------------------------------
    def _cindex_text(self, int32_t cid):
        cdef int64_t key = self.graph.cindexes[cid]
        return "%s(%d, %d, %d)" % (self.nnet.node_names[key_node(key)], key_n(key), key_t(key),
                                   key_x(key))

    def explain_why_not_computable(self, int32_t first_cid, int max_lines=100):
        """Same text and missing-input list as the Python twin's."""
        lines = ["*** cindex %s is not computable for the following reason: ***"
                 % self._cindex_text(first_cid)]
        queue = [first_cid]
        added = {first_cid}
        missing = []
        head = 0
        while head < len(queue) and head < max_lines:
            cid = queue[head]
            head += 1
            node = key_node(self.graph.cindexes[cid])
            if self.net.node_type[node] == kInput and not self.graph.is_input[cid]:
                missing.append(cid)
            parts = []
            for dep in self.graph.dependencies_of(cid):
                parts.append("%s[%s]" % (self._cindex_text(dep),
                                         COMPUTABLE_NAMES[self.info[dep].computable]))
                if self.info[dep].computable != kComputable and dep not in added:
                    added.add(dep)
                    queue.append(dep)
            lines.append("%s is %s, dependencies: %s"
                         % (self._cindex_text(cid), COMPUTABLE_NAMES[self.info[cid].computable],
                            ", ".join(parts)))
        for cid in queue[head:]:
            node = key_node(self.graph.cindexes[cid])
            if self.net.node_type[node] == kInput and not self.graph.is_input[cid]:
                missing.append(cid)
        return "\n".join(lines), missing

    def not_computable_error(self, max_explain=10):
        return not_computable_error(self, max_explain)


cdef inline bint _window(const vector[int32_t] &w, int64_t t, int64_t *lo, int64_t *hi,
                         int64_t *step) noexcept:
    """The statistics-component window (see descriptor_program); False when t
    is not a multiple of the required period."""
    cdef int64_t period = w[0], modulus = w[1], base
    if modulus > 1 and t % modulus != 0:
        return False
    base = t - (t % period + period) % period
    lo[0] = base + w[2]
    hi[0] = base + w[3]
    step[0] = w[4]
    return True


cdef inline bint _sorted_contains(const int32_t *v, int32_t size, int32_t value) noexcept:
    cdef int32_t lo = 0, hi = size, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if v[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo < size and v[lo] == value


cdef int _renumber(FastGraph graph, int32_t start, vector[uint8_t] &keep) except -1:
    """Kaldi's ComputationGraph::Renumber for cindex_ids >= start."""
    cdef int32_t old_num = <int32_t>graph.cindexes.size()
    cdef vector[int32_t] old2new
    cdef vector[int32_t] new2old
    cdef int32_t j, c, d, nd
    cdef size_t i
    old2new.resize(old_num - start, -1)
    for j in range(old_num - start):
        if keep[j]:
            old2new[j] = <int32_t>new2old.size() + start
            new2old.push_back(j + start)
    if <int32_t>new2old.size() == old_num - start:
        return 0
    for c in range(start, start + <int32_t>new2old.size()):
        d = new2old[c - start]
        graph.cindexes[c] = graph.cindexes[d]
        graph.is_input[c] = graph.is_input[d]
        # renumber d's dependencies in place (its pool region) and give it to c;
        # d >= c, so no region still needed is overwritten
        for i in range(graph.dep_count[d]):
            j = graph.dep_pool[graph.dep_start[d] + i]
            if j >= start:
                nd = old2new[j - start]
                if nd == -1:
                    raise ComputationError("internal error: dependency on a removed "
                                           "cindex-id while pruning the graph")
                graph.dep_pool[graph.dep_start[d] + i] = nd
        graph.dep_start[c] = graph.dep_start[d]
        graph.dep_count[c] = graph.dep_count[d]
    graph.cindexes.resize(start + new2old.size())
    graph.is_input.resize(start + new2old.size())
    graph.dep_start.resize(start + new2old.size())
    graph.dep_count.resize(start + new2old.size())
    graph.rebuild_table()
    return 0
