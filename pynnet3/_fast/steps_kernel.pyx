# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""Phases, steps and per-step data in C (twin of pynnet3/compiler/steps.py's
compute_computation_phases, ComputationStepsComputer and PyStepsData).

:func:`compute_steps` turns a pruned FastGraph into :class:`FastStepsData`, the
object the Compiler queries per step (node, size, dependencies, Indexes,
input locations of a Descriptor part, debug Cindexes). Results are identical to
the Python twin's (a test compares whole computations).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cython.operator cimport dereference as deref
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t
from libcpp.unordered_map cimport unordered_map
from libcpp.algorithm cimport sort, unique
from libcpp.utility cimport move
from libcpp.vector cimport vector

import numpy as np

from pynnet3._fast.cindex_keys cimport (
    K_NO_TIME, N_BIAS, N_MASK, NODE_SHIFT, T_BIAS, T_MASK, T_SHIFT, X_BIAS, X_MASK, X_SHIFT,
    key_n, key_node, key_t, key_x, pack, with_node)
from pynnet3._fast.constants cimport *
from pynnet3._fast.descriptor_interpreter cimport (MODE_EXISTS, Predicate, pred_holds,
                                                   sum_is_computable)
from pynnet3._fast.computation_graph_kernel cimport FastGraph, NetInfo
from pynnet3._fast.py_lists cimport set_pair_item
from pynnet3._fast.split_locations_kernel cimport hash_order_c

from ..nnet.graph import compute_nnet_computation_epochs
from ..errors import ComputationError
from ..common.index import Index
from .computation_graph_kernel import pack_cindex, range_error, unpack_cindex


cdef class FastStepsData:
    """Steps (lists of cindex_ids) and locations (cindex_id -> (step, row))."""

    def __init__(self, FastGraph graph, NetInfo net):
        self.graph = graph
        self.net = net
        self.step_to_segment = []
        self.index_objects = []
        self.loc_step.resize(graph.cindexes.size(), -1)
        self.loc_row.resize(graph.cindexes.size(), -1)

    # -- building -----------------------------------------------------------------------------
    cdef int add_step_keys(self, vector[int64_t] &keys, bint add_if_absent) except -1:
        cdef int32_t step_index = <int32_t>self.steps.size()
        cdef size_t row
        cdef int32_t cid
        cdef bint is_new
        cdef vector[int32_t] step
        step.resize(keys.size())
        for row in range(keys.size()):
            if add_if_absent:
                cid = self.graph.get_or_add(keys[row], False, &is_new)
                if is_new:
                    self.loc_step.push_back(-1)
                    self.loc_row.push_back(-1)
            else:
                cid = self.graph.find(keys[row])
                if cid < 0:
                    node, index = unpack_cindex(keys[row])
                    raise ComputationError("internal error: step needs %s(%d,%d,%d), which is "
                                           "not in the computation graph"
                                           % (self.net.nnet.node_names[node], index[0],
                                              index[1], index[2]))
            step[row] = cid
            self.loc_step[cid] = step_index
            self.loc_row[cid] = <int32_t>row
        self.steps.push_back(move(step))
        return step_index

    cdef int add_step_ids(self, vector[int32_t] &ids) except -1:
        cdef int32_t step_index = <int32_t>self.steps.size()
        cdef size_t row
        for row in range(ids.size()):
            self.loc_step[ids[row]] = step_index
            self.loc_row[ids[row]] = <int32_t>row
        self.steps.push_back(ids)
        return step_index

    cdef int process_io_step(self, request, bint is_output, vector[int64_t] &sub_phase) except -1:
        cdef int node = key_node(sub_phase[0])
        cdef vector[int64_t] keys
        name = self.net.nnet.node_names[node]
        specs = request.outputs if is_output else request.inputs
        io_index = -1
        for i, spec in enumerate(specs):
            if spec.name == name:
                io_index = i
        if io_index < 0:
            raise ComputationError("node %s is not in the request's %s"
                                   % (name, "outputs" if is_output else "inputs"))
        for index in specs[io_index].indexes:
            keys.push_back(pack_cindex(node, index))
        if keys.size() != sub_phase.size():
            raise ComputationError("internal error: the %s step for node %s has %d cindexes, "
                                   "the request %d" % ("output" if is_output else "input", name,
                                                       sub_phase.size(), keys.size()))
        self.add_step_keys(keys, False)
        return 0

    cdef int process_component_step(self, vector[int64_t] &step) except -1:
        cdef int node = key_node(step[0])
        cdef vector[int64_t] input_keys
        cdef vector[int32_t] step_ids, input_ids
        cdef size_t i, j
        cdef int32_t cid
        comp = self.net.components[node]
        cdef int props = self.net.props[node]
        if props & kSimpleComponent:
            input_keys.resize(step.size())
            for i in range(step.size()):
                input_keys[i] = with_node(step[i], node - 1)
            self.add_step_keys(input_keys, False)
            self.add_step_keys(step, False)
            return 0
        step_ids.resize(step.size())
        for i in range(step.size()):
            cid = self.graph.find(step[i])
            step_ids[i] = cid
            for j in range(self.graph.dep_count[cid]):
                input_ids.push_back(self.graph.dep_pool[self.graph.dep_start[cid] + j])
        sort(input_ids.begin(), input_ids.end())
        input_ids.erase(unique(input_ids.begin(), input_ids.end()), input_ids.end())
        input_keys.resize(input_ids.size())
        for i in range(input_ids.size()):
            input_keys[i] = self.graph.cindexes[input_ids[i]]
        sort(input_keys.begin(), input_keys.end())
        if props & kReordersIndexes:
            in_list = self._index_list(input_keys)
            out_list = self._index_list(step)
            orig_size = len(in_list) + len(out_list)
            in_list, out_list = comp.reorder_indexes(in_list, out_list)
            added_padding = orig_size != len(in_list) + len(out_list)
            _pack_indexes(node - 1, in_list, input_keys)
            self.add_step_keys(input_keys, added_padding)
            _pack_indexes(node, out_list, input_keys)
            self.add_step_keys(input_keys, added_padding)
        else:
            self.add_step_keys(input_keys, False)
            self.add_step_ids(step_ids)
        return 0

    cdef int process_dim_range(self, vector[int64_t] &sub_phase) except -1:
        cdef int node = key_node(sub_phase[0])
        cdef int source_node = self.net.dim_range_source[node]
        cdef int32_t cid, step, cur = -1
        cdef size_t i, j
        cdef vector[int32_t] source_steps, order
        cdef vector[int64_t] keys
        cdef int64_t done_key
        for i in range(sub_phase.size()):
            cid = self.graph.find(with_node(sub_phase[i], source_node))
            if cid < 0 or self.loc_step[cid] < 0:
                raise ComputationError("internal error: dim-range node %s needs an input that "
                                       "has no step" % self.net.nnet.node_names[node])
            step = self.loc_step[cid]
            if step != cur:
                cur = step
                for j in range(source_steps.size()):
                    if source_steps[j] == step:
                        break
                else:
                    source_steps.push_back(step)
        # Kaldi iterates an unordered_set of the source steps
        hash_order_c(source_steps, order)
        for j in range(order.size()):
            step = order[j]
            done_key = (<int64_t>step << 16) | node
            if self.dim_range_done.count(done_key):
                continue
            self.dim_range_done.insert(done_key)
            keys.resize(self.steps[step].size())
            for i in range(self.steps[step].size()):
                keys[i] = with_node(self.graph.cindexes[self.steps[step][i]], node)
            self.add_step_keys(keys, True)
        return 0

    cdef int compute_for_segment(self, request, vector[vector[int32_t]] &phases) except -1:
        cdef size_t p, i, begin, end
        cdef vector[int64_t] *keys = &self.scratch_keys
        cdef vector[int64_t] *sub_phase = &self.scratch_sub
        cdef int node, nt
        for p in range(phases.size()):
            keys.resize(phases[p].size())
            for i in range(phases[p].size()):
                keys[0][i] = self.graph.cindexes[phases[p][i]]
            sort(keys.begin(), keys.end())
            begin = 0
            while begin < keys.size():
                node = key_node(keys[0][begin])
                end = begin + 1
                while end < keys.size() and key_node(keys[0][end]) == node:
                    end += 1
                sub_phase.assign(keys.begin() + begin, keys.begin() + end)
                nt = self.net.node_type[node]
                if nt == kComponent:
                    self.process_component_step(sub_phase[0])
                elif nt == kInput:
                    self.process_io_step(request, False, sub_phase[0])
                elif self.net.is_output[node]:
                    self.process_io_step(request, True, sub_phase[0])
                elif nt == kDimRange:
                    self.process_dim_range(sub_phase[0])
                elif not self.net.is_component_input[node]:
                    raise ComputationError("unknown node type for node %s"
                                           % self.net.nnet.node_names[node])
                begin = end
        return 0

    def check(self):
        cdef size_t c
        cdef int32_t step, row
        if self.loc_step.size() != self.graph.cindexes.size():
            raise ComputationError("internal error computing steps: %d locations for %d "
                                   "cindexes" % (self.loc_step.size(), self.graph.cindexes.size()))
        for c in range(self.graph.cindexes.size()):
            step = self.loc_step[c]
            row = self.loc_row[c]
            if not (step >= 0 and row >= 0 and self.steps[step][row] == <int32_t>c):
                if key_t(self.graph.cindexes[c]) != K_NO_TIME:
                    node, index = unpack_cindex(self.graph.cindexes[c])
                    raise ComputationError("internal error computing computation steps at "
                                           "%s(%d,%d,%d)" % (self.net.nnet.node_names[node],
                                                             index[0], index[1], index[2]))

    # -- queries (the StepsData interface) ------------------------------------------------------
    def num_steps(self):
        return self.steps.size()

    def step_size(self, int s):
        return self.steps[s].size()

    def step_node(self, int s):
        if self.steps[s].empty():
            return -1
        return key_node(self.graph.cindexes[self.steps[s][0]])

    def step_is_input(self, int s):
        return bool(self.graph.is_input[self.steps[s][0]])

    def step_dependency_steps(self, int s):
        """The steps whose outputs the cindexes of step s depend on."""
        cdef size_t i, j
        cdef int32_t c, prev = -1, st
        cdef vector[int32_t] out
        for i in range(self.steps[s].size()):
            c = self.steps[s][i]
            for j in range(self.graph.dep_count[c]):
                st = self.loc_step[self.graph.dep_pool[self.graph.dep_start[c] + j]]
                if st != prev:
                    prev = st
                    out.push_back(st)
        sort(out.begin(), out.end())
        out.erase(unique(out.begin(), out.end()), out.end())
        return list(out)

    def dim_range_source_step(self, int s):
        """The step of the source of the first cindex of step s that has one, or -1."""
        cdef size_t i
        cdef int32_t c
        for i in range(self.steps[s].size()):
            c = self.steps[s][i]
            if not (self.graph.dep_count[c] == 0):
                return self.loc_step[self.graph.dep_pool[self.graph.dep_start[c] + 0]]
        return -1

    cdef object _index(self, int64_t key):
        """The (shared) Index object of a packed key's (n, t, x)."""
        cdef int64_t ntx = key & ((<int64_t>1 << 51) - 1)
        cdef unordered_map[int64_t, int32_t].iterator it = self.index_slot.find(ntx)
        if it != self.index_slot.end():
            return <object>PyList_GET_ITEM(self.index_objects, deref(it).second)
        idx = Index(key_n(key), key_t(key), key_x(key))
        self.index_slot[ntx] = <int32_t>len(self.index_objects)
        self.index_objects.append(idx)
        return idx

    cdef list _index_list(self, vector[int64_t] &keys):
        cdef size_t i, n = keys.size()
        cdef list out = PyList_New(n)
        cdef object idx
        for i in range(n):
            idx = self._index(keys[i])
            Py_INCREF(idx)
            PyList_SET_ITEM(out, i, idx)
        return out

    def step_indexes(self, int s):
        """The Indexes of step s, in row order (Index objects shared between steps)."""
        cdef size_t i, n = self.steps[s].size()
        cdef list out = [None] * n
        for i in range(n):
            out[i] = self._index(self.graph.cindexes[self.steps[s][i]])
        return out

    def step_cindexes(self, int s, int node):
        """(node, Index) per row of step s (for matrix debug info)."""
        return self.step_cindexes_c(s, node)

    cdef list step_cindexes_c(self, int s, int node):
        """step_cindexes without the Python call (the compiler calls it per step)."""
        cdef size_t i, n = self.steps[s].size()
        cdef list out = PyList_New(n)
        cdef object node_obj = node
        for i in range(n):
            set_pair_item(out, i, node_obj, self._index(self.graph.cindexes[self.steps[s][i]]))
        return out

    cdef bytes step_keys_c(self, int s, int32_t *min_n):
        """The packed keys of step s's rows as bytes (an int64 each), from which
        :func:`cindexes_from_keys` builds step_cindexes' list later; the
        smallest n among them (0 for none) in ``min_n``."""
        cdef size_t i, n = self.steps[s].size()
        cdef bytes out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>(8 * n))
        cdef int64_t *p = <int64_t *>PyBytes_AS_STRING(out)
        cdef int64_t key
        cdef int32_t lowest = 0
        for i in range(n):
            key = self.graph.cindexes[self.steps[s][i]]
            p[i] = key
            if i == 0 or key_n(key) < lowest:
                lowest = key_n(key)
        min_n[0] = lowest
        return out

    cdef int locate_inputs(self, int s, int part_index, vector[int64_t] &ptr,
                           vector[int32_t] &loc_steps, vector[int32_t] &loc_rows) except -1:
        """For part ``part_index`` of the Descriptor of step s's node: CSR lists
        (ptr, loc_steps, loc_rows) of the sorted (step, row) locations each row
        sums (Kaldi's ComputeInputLocationsList)."""
        cdef int node = key_node(self.graph.cindexes[self.steps[s][0]])
        cdef const int32_t *prog = self.net.programs[node].data()
        cdef int start = self.net.part_starts[node][part_index]
        cdef size_t num_rows = self.steps[s].size(), r, j
        cdef vector[int64_t] *used = &self.scratch_used
        cdef Predicate pred
        cdef int64_t key
        cdef int32_t cid
        cdef int ok
        pred.table = &self.graph.table
        pred.computable = NULL
        pred.stride = 0
        pred.mode = MODE_EXISTS
        ptr.clear()
        loc_steps.clear()
        loc_rows.clear()
        # usually one location per row: one allocation each instead of a doubling series
        ptr.reserve(num_rows + 1)
        loc_steps.reserve(num_rows)
        loc_rows.reserve(num_rows)
        ptr.push_back(0)
        for r in range(num_rows):
            key = self.graph.cindexes[self.steps[s][r]]
            if key_t(key) != K_NO_TIME:
                used.clear()
                ok = sum_is_computable(prog, start, key_n(key), key_t(key), key_x(key),
                                       &pred, used)
                if ok != 1:
                    node, index = unpack_cindex(key)
                    if ok < 0:
                        raise range_error(node, index, "an input of Cindex")
                    raise ComputationError("internal error: descriptor of node %s not "
                                           "computable at %s while compiling"
                                           % (self.net.nnet.node_names[node], tuple(index)))
                if used.size() > 1:
                    sort(used.begin(), used.end())
                for j in range(used.size()):
                    cid = self.graph.find(used[0][j])
                    loc_steps.push_back(self.loc_step[cid])
                    loc_rows.push_back(self.loc_row[cid])
            ptr.push_back(loc_steps.size())
        return 0

    def input_locations(self, int s, int part_index):
        """locate_inputs as NumPy arrays (row_ptr int64, loc_steps, loc_rows int32)."""
        cdef vector[int64_t] ptr
        cdef vector[int32_t] loc_steps, loc_rows
        cdef size_t j
        self.locate_inputs(s, part_index, ptr, loc_steps, loc_rows)
        row_ptr = np.empty(ptr.size(), dtype=np.int64)
        steps_arr = np.empty(loc_steps.size(), dtype=np.int32)
        rows_arr = np.empty(loc_rows.size(), dtype=np.int32)
        cdef int64_t[::1] pv = row_ptr
        cdef int32_t[::1] sv = steps_arr, rv = rows_arr
        for j in range(ptr.size()):
            pv[j] = ptr[j]
        for j in range(loc_steps.size()):
            sv[j] = loc_steps[j]
            rv[j] = loc_rows[j]
        return row_ptr, steps_arr, rows_arr


cdef int _pack_indexes(int node, object indexes, vector[int64_t] &out) except -1:
    """Packed keys of (node, index) for a sequence of (n, t, x) tuples."""
    cdef int64_t key
    out.clear()
    for index in indexes:
        key = pack(node, index[0], index[1], index[2])
        if key < 0:
            raise range_error(node, index)
        out.push_back(key)
    return 0


cdef int _phases_for_epoch(vector[int32_t] &this_epoch,
                           const vector[int32_t] &ds_ptr, const vector[int32_t] &ds_val,
                           const vector[int32_t] &do_ptr, const vector[int32_t] &do_val,
                           bint trivial, vector[int32_t] &phase_index,
                           vector[vector[int32_t]] &phases) except -1:
    """Kaldi's phases of one epoch. The same-epoch dependencies of cindex c are
    ds_val[ds_ptr[c]:ds_ptr[c + 1]] (in dependency order) and the cindexes that
    depend on c are do_val[do_ptr[c]:do_ptr[c + 1]] (increasing), as CSR arrays
    (one allocation each instead of two vectors per cindex)."""
    cdef vector[int32_t] this_phase, candidates
    cdef size_t i, j
    cdef int32_t c, cur
    cdef bint ready
    if this_epoch.empty():
        return 0
    if trivial:
        this_phase = this_epoch
    else:
        for i in range(this_epoch.size()):
            if ds_ptr[this_epoch[i]] == ds_ptr[this_epoch[i] + 1]:
                this_phase.push_back(this_epoch[i])
    if this_phase.empty():
        raise ComputationError("Trying to process computation with cycles")
    while not this_phase.empty():
        phases.push_back(this_phase)
        if trivial:
            return 0
        cur = <int32_t>phases.size() - 1
        candidates.clear()
        for i in range(this_phase.size()):
            c = this_phase[i]
            phase_index[c] = cur
            for j in range(<size_t>do_ptr[c], <size_t>do_ptr[c + 1]):
                candidates.push_back(do_val[j])
        sort(candidates.begin(), candidates.end())
        candidates.erase(unique(candidates.begin(), candidates.end()), candidates.end())
        this_phase.clear()
        for i in range(candidates.size()):
            c = candidates[i]
            ready = True
            for j in range(<size_t>ds_ptr[c], <size_t>ds_ptr[c + 1]):
                if phase_index[ds_val[j]] < 0:
                    ready = False
                    break
            if ready:
                this_phase.push_back(c)
        if not candidates.empty() and this_phase.empty():
            raise ComputationError(
                "Your model has a type of recurrence that cannot be computed. E.g. if "
                "x[t] depends on both x[t+1] and x[t-1]... no order of computation will work.")
    return 0


def compute_steps(NetInfo net, FastGraph graph, requests):
    """Phases (Kaldi's ComputeComputationPhases) and steps
    (ComputationStepsComputer) for a pruned graph; returns FastStepsData."""
    cdef vector[int32_t] node_to_epoch
    cdef int32_t num_epochs = 0, e, k, c, d
    cdef size_t i, j, num = graph.cindexes.size()
    cdef vector[int32_t] epoch_num_nodes, key
    cdef vector[int32_t] ds_ptr, ds_val, do_ptr, do_val, do_fill
    cdef vector[int32_t] phase_index
    cdef vector[vector[int32_t]] epochs, phases
    cdef int32_t start = 0, end, segment
    cdef size_t total = 0, num_steps
    cdef object segment_obj
    for e in compute_nnet_computation_epochs(net.nnet):
        node_to_epoch.push_back(e + 1)
        if e + 2 > num_epochs:
            num_epochs = e + 2
    epoch_num_nodes.resize(num_epochs, 0)
    for i in range(node_to_epoch.size()):
        epoch_num_nodes[node_to_epoch[i]] += 1
    key.resize(num)
    for segment in range(graph.segment_ends.size()):
        end = graph.segment_ends[segment]
        for c in range(start, end):
            e = 0 if graph.is_input[c] else node_to_epoch[key_node(graph.cindexes[c])]
            key[c] = e + segment * num_epochs
        start = end
    # same-epoch dependencies (ds) and their reverse (do) as CSR arrays
    ds_ptr.reserve(num + 1)
    ds_ptr.push_back(0)
    do_ptr.assign(num + 1, 0)
    for i in range(num):
        for j in range(graph.dep_count[i]):
            d = graph.dep_pool[graph.dep_start[i] + j]
            if key[d] == key[i]:
                ds_val.push_back(d)
                do_ptr[d + 1] += 1
        ds_ptr.push_back(<int32_t>ds_val.size())
    for i in range(num):
        do_ptr[i + 1] += do_ptr[i]
    do_val.resize(ds_val.size())
    do_fill.assign(do_ptr.begin(), do_ptr.end() - 1)
    for i in range(num):
        for j in range(<size_t>ds_ptr[i], <size_t>ds_ptr[i + 1]):
            d = ds_val[j]
            do_val[do_fill[d]] = <int32_t>i
            do_fill[d] += 1
    phase_index.resize(num, -1)
    data = FastStepsData(graph, net)
    start = 0
    for segment in range(graph.segment_ends.size()):
        end = graph.segment_ends[segment]
        epochs.clear()
        epochs.resize(num_epochs)
        for c in range(start, end):
            epochs[key[c] - segment * num_epochs].push_back(c)
        phases.clear()
        for e in range(num_epochs):
            _phases_for_epoch(epochs[e], ds_ptr, ds_val, do_ptr, do_val,
                              epoch_num_nodes[e] <= 1, phase_index, phases)
        for i in range(phases.size()):
            total += phases[i].size()
        data.compute_for_segment(requests[segment], phases)
        segment_obj = segment
        num_steps = data.steps.size()
        while <size_t>len(data.step_to_segment) < num_steps:
            data.step_to_segment.append(segment_obj)
        start = end
    if total != num:
        raise ComputationError("internal error: not every cindex was assigned a phase")
    data.check()
    return data


def cindexes_from_keys(int node, bytes keys):
    """[(node, Index(n, t, x))] for the packed keys of a step (see
    FastStepsData.step_keys_c): the list step_cindexes gives for that step,
    built when a matrix's debug info is first read."""
    cdef const int64_t *p = <const int64_t *>PyBytes_AS_STRING(keys)
    cdef Py_ssize_t i, n = len(keys) // 8
    cdef list out = PyList_New(n)
    cdef object node_obj = node
    cdef object new_tuple = tuple.__new__
    for i in range(n):
        set_pair_item(out, i, node_obj,
                      new_tuple(Index, (key_n(p[i]), key_t(p[i]), key_x(p[i]))))
    return out


def unpack_keys(bytes keys):
    """(node, n, t, x) as int64 arrays for packed Cindex keys (see
    FastStepsData.step_keys_c), all rows at once."""
    k = np.frombuffer(keys, dtype=np.int64)
    tf = (k >> T_SHIFT) & T_MASK
    return (k >> NODE_SHIFT, (k & N_MASK) - N_BIAS,
            np.where(tf == 0, <int64_t>K_NO_TIME, tf - T_BIAS),
            ((k >> X_SHIFT) & X_MASK) - X_BIAS)
