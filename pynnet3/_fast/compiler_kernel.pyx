# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""The Compiler's command generation in C (twin of the Python Compiler in
pynnet3/compiler/compiler.py, which is the readable specification).

Given the pruned FastGraph and its FastStepsData, :func:`compile_fast` decides
derivative needs, creates matrices and submatrices, the commands (forward,
marker, backward, deallocation), consolidates I/O commands and writes matrix
debug info, all on C arrays, then builds the NnetComputation's Python records
in one pass. Python is called only per network node (descriptor scales and
dimensions) and for non-simple components' precompute_indexes, as Kaldi calls
virtual functions. The result equals the Python Compiler's (a test compares
whole computations on every reference case).
"""

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from libc.stdint cimport int32_t, int64_t, uint8_t
from libcpp.vector cimport vector

import numpy as np

from pynnet3._fast.cindex_keys cimport key_node
from pynnet3._fast.constants cimport *
from pynnet3._fast.computation_graph_kernel cimport FastGraph, NetInfo
from pynnet3._fast.py_lists cimport set_pair_item
from pynnet3._fast.split_locations_kernel cimport (
    Pair, contiguous_ranges_c, convert_to_indexes_c, split_locations_backward_c,
    split_locations_c)
from pynnet3._fast.steps_kernel cimport FastStepsData

from ..compiler.computation import (Command, CommandType, LazyMatrixDebugInfo,
                                   MatrixDebugInfo, MatrixInfo,
                                   MatrixStrideType, NnetComputation, PrecomputedIndexesInfo,
                                   SubMatrixInfo)
from ..components.base import Component
from ..errors import ComputationError
# The Compiler takes the whole pipeline from this kernel: the graph builder and
# the steps come from the kernels cimported above.
from .computation_graph_kernel import FastComputationGraphBuilder  # noqa: F401
from .steps_kernel import cindexes_from_keys, compute_steps  # noqa: F401


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    object PyType_GenericAlloc(PyTypeObject *type, Py_ssize_t nitems)


cdef struct Cmd:
    int32_t type
    int32_t args[7]
    double alpha


cdef struct Mat:
    int32_t rows
    int32_t cols
    int32_t stride


cdef struct Sub:
    int32_t matrix
    int32_t row_offset
    int32_t rows
    int32_t col_offset
    int32_t cols


cdef struct Step:
    int32_t node
    int32_t value
    int32_t deriv
    int32_t segment
    int32_t precomputed
    int32_t num_rows


cdef struct LocList:
    vector[int64_t] ptr
    vector[int32_t] steps
    vector[int32_t] rows


cdef class _RecordMaker:
    """Builds instances of a __slots__ dataclass by filling the slots directly
    (the dataclass __init__ costs ~1 us per object; a computation may have
    hundreds of thousands of commands). Falls back to calling the class when
    the layout is not plain slots."""
    cdef object cls
    cdef PyTypeObject *tp
    cdef vector[Py_ssize_t] offsets
    cdef bint direct

    def __init__(self, cls, fields):
        self.cls = cls
        self.tp = <PyTypeObject *>cls
        # only for plain slots classes whose instances start empty
        self.direct = (cls.__new__ is object.__new__ and "__dict__" not in dir(cls)
                       and type(cls).__name__ == "type")
        member_type = type(Command.__dict__["arg1"])
        for name in fields:
            descr = cls.__dict__.get(name)
            if type(descr) is not member_type:
                self.direct = False
                return
            self.offsets.push_back((<PyMemberDescrObject *>descr).d_member.offset)

    cdef object new(self):
        """An empty instance (slots unset); fill every slot with put()."""
        return PyType_GenericAlloc(self.tp, 0)

    cdef inline void put(self, object obj, int i, object value) noexcept:
        cdef PyObject **slot = <PyObject **>((<char *><PyObject *>obj) + self.offsets[i])
        Py_INCREF(value)
        slot[0] = <PyObject *>value

    cdef object make(self, tuple values):
        cdef object obj
        cdef size_t i
        if not self.direct:
            return self.cls(*values)
        obj = self.new()
        for i in range(self.offsets.size()):
            self.put(obj, <int>i, values[i])
        return obj


cdef list _INTS = []

# Row-index tables share the int objects of _INTS up to this value (larger
# values get their own), so that the cache stays small.
DEF _MAX_SHARED_ROW = 1 << 20


cdef object _int_list(const vector[int32_t] &v):
    """A row-index table as a list of ints, sharing one int object per value
    (from _INTS): building it allocates no int, and freeing it, as the
    optimizer does for the many tables it replaces (an x-vector request's are
    10,000 rows long), frees none."""
    global _INTS
    cdef Py_ssize_t i, n = v.size()
    cdef int32_t top = 0
    for i in range(n):
        if v[i] >= top:
            top = v[i] + 1
    if top > _MAX_SHARED_ROW:
        top = _MAX_SHARED_ROW
    if len(_INTS) < top:
        _INTS = list(range(top))
    cdef list ints = _INTS
    cdef list out = PyList_New(n)
    cdef object item
    for i in range(n):
        if 0 <= v[i] < top:
            item = <object>PyList_GET_ITEM(ints, v[i])
        else:
            item = v[i]
        Py_INCREF(item)
        PyList_SET_ITEM(out, i, item)
    return out


cdef object _pair_list(const vector[Pair] &v):
    cdef Py_ssize_t i, n = v.size()
    cdef list out = PyList_New(n)
    for i in range(n):
        set_pair_item(out, i, v[i].first, v[i].second)
    return out


cdef class _Core:
    cdef object nnet
    cdef list requests
    cdef NetInfo net
    cdef FastStepsData data
    cdef FastGraph graph
    # per node (filled lazily where Kaldi would only ask when needed)
    cdef vector[int32_t] props
    cdef vector[int32_t] component_index
    cdef vector[int32_t] node_dim
    cdef vector[uint8_t] lr_nonzero
    cdef vector[uint8_t] custom_precompute
    cdef vector[int32_t] part_start
    cdef vector[int32_t] part_count
    cdef vector[int32_t] part_dim
    cdef vector[double] part_offset
    cdef vector[vector[double]] part_alphas
    cdef vector[vector[int32_t]] part_group
    cdef vector[vector[int32_t]] part_group_nodes
    # per segment x node: has_deriv of the request's input/output of that node (-1: absent)
    cdef vector[vector[int32_t]] input_deriv
    cdef vector[vector[int32_t]] output_deriv
    cdef vector[uint8_t] need_model_derivative
    cdef bint store_stats
    # results
    cdef vector[Step] steps
    cdef vector[vector[int32_t]] value_parts
    cdef vector[vector[int32_t]] deriv_parts
    cdef vector[vector[LocList]] locations
    cdef vector[Mat] matrices
    cdef vector[Sub] subs
    cdef vector[Cmd] cmds
    cdef list indexes
    cdef list indexes_multi
    cdef list indexes_ranges
    cdef list precomputed
    cdef vector[int32_t] step_value
    cdef vector[int32_t] step_deriv
    cdef vector[uint8_t] deriv_needed
    # scratch buffers of compile_part, kept between calls so that
    # their vectors keep their capacity (most parts are a few rows)
    cdef vector[LocList] scratch_pieces
    cdef vector[vector[Pair]] scratch_split
    cdef vector[int32_t] scratch_rows

    def __init__(self, nnet, requests, NetInfo net, FastStepsData data):
        cdef int n, num_nodes = net.num_nodes
        cdef vector[int32_t] ins, outs
        cdef int32_t flag
        self.nnet = nnet
        self.requests = list(requests)
        self.net = net
        self.data = data
        self.graph = data.graph
        self.props.resize(num_nodes, 0)
        self.component_index.resize(num_nodes, -1)
        self.node_dim.resize(num_nodes, -1)
        self.lr_nonzero.resize(num_nodes, 0)
        self.custom_precompute.resize(num_nodes, 0)
        self.part_start.resize(num_nodes, -1)
        self.part_count.resize(num_nodes, 0)
        for n in range(num_nodes):
            if net.node_type[n] == kComponent:
                ci = nnet.nodes[n].component_index
                comp = nnet.get_component(ci)
                self.component_index[n] = ci
                self.props[n] = net.props[n]
                self.lr_nonzero[n] = getattr(comp, "learning_rate", 1.0) != 0
                self.custom_precompute[n] = \
                    type(comp).precompute_indexes is not Component.precompute_indexes
        names = nnet.node_names
        self.store_stats = bool(self.requests[0].store_component_stats)
        for request in self.requests:
            self.need_model_derivative.push_back(bool(request.need_model_derivative))
            ins.assign(num_nodes, -1)
            outs.assign(num_nodes, -1)
            for specs, target in ((request.inputs, 0), (request.outputs, 1)):
                seen = set()
                for spec in specs:
                    n = nnet.get_node_index(spec.name)
                    if spec.name in seen:
                        raise ComputationError("request lists %s '%s' twice"
                                               % ("input" if target == 0 else "output",
                                                  spec.name))
                    seen.add(spec.name)
                    if n >= 0:
                        # (a typed temporary: Cython mis-compiles "v[i] = a if c else b")
                        flag = 1 if spec.has_deriv else 0
                        if target == 0:
                            ins[n] = flag
                        else:
                            outs[n] = flag
            self.input_deriv.push_back(ins)
            self.output_deriv.push_back(outs)
        self.indexes = []
        self.indexes_multi = []
        self.indexes_ranges = []
        self.precomputed = [PrecomputedIndexesInfo()]

    cdef int dim_of(self, int node) except -1:
        if self.node_dim[node] < 0:
            self.node_dim[node] = self.nnet.node_dim(node)
        return self.node_dim[node]

    cdef int ensure_parts(self, int node) except -1:
        """Caches, for each part of node's Descriptor, its dim, constant term and
        scale groups (Kaldi's SplitByScale groups nodes by their Scale()); returns
        the id of the node's first part."""
        cdef int pid, g
        if self.part_start[node] >= 0:
            return self.part_start[node]
        desc = self.nnet.nodes[node].descriptor
        self.part_start[node] = <int32_t>self.part_dim.size()
        self.part_count[node] = desc.num_parts()
        for p in range(self.part_count[node]):
            part = desc.part(p)
            self.part_dim.push_back(part.dim(self.nnet))
            self.part_offset.push_back(part.get_scale_for_node(-1))
            alpha_to_nodes = {}
            for dep in sorted(set(part.get_node_dependencies([]))):
                alpha = part.get_scale_for_node(dep)
                if alpha - alpha != 0.0:
                    raise ComputationError("invalid scale for node %s in a descriptor"
                                           % self.nnet.node_names[dep])
                alpha_to_nodes.setdefault(alpha, []).append(dep)
            pid = <int>self.part_alphas.size()
            self.part_alphas.push_back(vector[double]())
            self.part_group.push_back(vector[int32_t]())
            self.part_group_nodes.push_back(vector[int32_t]())
            if len(alpha_to_nodes) == 1:
                self.part_alphas[pid].push_back(next(iter(alpha_to_nodes)))
            else:
                # several scales (or none: a Const() part): one group per alpha,
                # by increasing alpha (Kaldi's std::map order)
                self.part_group[pid].assign(self.net.num_nodes, -1)
                for g, alpha in enumerate(sorted(alpha_to_nodes)):
                    self.part_alphas[pid].push_back(alpha)
                    for dep in alpha_to_nodes[alpha]:
                        self.part_group[pid][dep] = g
                        self.part_group_nodes[pid].push_back(dep)
        return self.part_start[node]

    # -- matrices -------------------------------------------------------------------------
    cdef int32_t new_matrix(self, int32_t rows, int32_t cols, int32_t stride):
        cdef Mat m
        cdef Sub s
        if self.matrices.empty():
            m.rows = 0
            m.cols = 0
            m.stride = 0
            self.matrices.push_back(m)
            s.matrix = 0
            s.row_offset = 0
            s.rows = 0
            s.col_offset = 0
            s.cols = 0
            self.subs.push_back(s)
        m.rows = rows
        m.cols = cols
        m.stride = stride
        self.matrices.push_back(m)
        s.matrix = <int32_t>self.matrices.size() - 1
        s.row_offset = 0
        s.rows = rows
        s.col_offset = 0
        s.cols = cols
        self.subs.push_back(s)
        return <int32_t>self.subs.size() - 1

    cdef int32_t new_submatrix(self, int32_t base, int32_t col_offset, int32_t num_cols) except -1:
        """Kaldi's NewSubMatrix(base, 0, -1, col_offset, num_cols)."""
        cdef Sub b = self.subs[base]
        cdef Sub s
        if not (col_offset + num_cols <= b.cols and col_offset >= 0 and b.rows > 0
                and num_cols > 0):
            raise ComputationError("invalid sub-matrix (%d cols at %d) of a %dx%d submatrix"
                                   % (num_cols, col_offset, b.rows, b.cols))
        s.matrix = b.matrix
        s.row_offset = b.row_offset
        s.rows = b.rows
        s.col_offset = b.col_offset + col_offset
        s.cols = num_cols
        self.subs.push_back(s)
        return <int32_t>self.subs.size() - 1

    cdef bint is_whole(self, int32_t sub) noexcept:
        cdef Sub s = self.subs[sub]
        cdef Mat m = self.matrices[s.matrix]
        return s.row_offset == 0 and s.col_offset == 0 and s.rows == m.rows and s.cols == m.cols

    cdef void cmd(self, int32_t t, int32_t a1, int32_t a2, int32_t a3, int32_t a4, int32_t a5,
                  int32_t a6, int32_t a7, double alpha) noexcept:
        cdef Cmd c
        c.type = t
        c.args[0] = a1
        c.args[1] = a2
        c.args[2] = a3
        c.args[3] = a4
        c.args[4] = a5
        c.args[5] = a6
        c.args[6] = a7
        c.alpha = alpha
        self.cmds.push_back(c)

    # -- Kaldi's ComputeDerivNeeded --------------------------------------------------------------
    cdef int compute_deriv_needed(self) except -1:
        cdef int32_t num_steps = <int32_t>self.data.steps.size(), s, c, dep_step, prev
        cdef int node, seg
        cdef size_t i, j
        cdef bint needed
        cdef FastStepsData data = self.data
        cdef FastGraph graph = self.graph
        self.deriv_needed.assign(num_steps, 0)
        for s in range(num_steps):
            if data.steps[s].empty():
                continue
            c = data.steps[s][0]
            node = key_node(graph.cindexes[c])
            seg = data.step_to_segment[s]
            needed = False
            if self.net.node_type[node] == kComponent:
                if self.deriv_needed[s - 1]:
                    needed = True
            else:
                prev = -1
                for i in range(data.steps[s].size()):
                    c = data.steps[s][i]
                    for j in range(graph.dep_count[c]):
                        dep_step = data.loc_step[graph.dep_pool[graph.dep_start[c] + j]]
                        if dep_step != prev:
                            prev = dep_step
                            if dep_step >= s:
                                raise ComputationError("internal error: step %d depends on "
                                                       "later step %d" % (s, dep_step))
                            if self.deriv_needed[dep_step]:
                                needed = True
            if graph.is_input[data.steps[s][0]]:
                if self.input_deriv[seg][node] < 0:
                    raise ComputationError("internal error: input step for %s not in request"
                                           % self.nnet.node_names[node])
                if self.input_deriv[seg][node] == 1:
                    needed = True
            if self.net.is_output[node]:
                if self.output_deriv[seg][node] < 0:
                    raise ComputationError("internal error: output step for %s not in request"
                                           % self.nnet.node_names[node])
                if self.output_deriv[seg][node] == 1:
                    needed = True
            if self.net.node_type[node] == kComponent and self.need_model_derivative[seg]:
                if (self.props[node] & kUpdatableComponent) and self.lr_nonzero[node]:
                    needed = True
            self.deriv_needed[s] = needed
        return 0

    cdef int32_t stride_type(self, int node) noexcept:
        if self.net.is_component_input[node]:
            return 1 if self.props[node + 1] & kInputContiguous else 0
        if self.net.node_type[node] == kComponent:
            return 1 if self.props[node] & kOutputContiguous else 0
        return 0

    # -- Kaldi's CreateStepInfo ------------------------------------------------------------------
    cdef int create_step_info(self) except -1:
        cdef FastStepsData data = self.data
        cdef int32_t num_steps = <int32_t>data.steps.size(), s, input_step, offset, c
        cdef int node, nt, p, num_parts, dim, num_cols, first_part
        cdef Step info
        cdef size_t i
        self.steps.resize(num_steps)
        self.value_parts.resize(num_steps)
        self.deriv_parts.resize(num_steps)
        self.locations.resize(num_steps)
        for s in range(num_steps):
            info.value = 0
            info.deriv = 0
            info.precomputed = 0
            info.segment = data.step_to_segment[s]
            info.num_rows = <int32_t>data.steps[s].size()
            if info.num_rows == 0:
                if s + 1 >= num_steps or data.steps[s + 1].empty():
                    raise ComputationError("internal error: empty step not followed by a "
                                           "component step")
                info.node = key_node(self.graph.cindexes[data.steps[s + 1][0]]) - 1
                self.steps[s] = info
                continue
            node = key_node(self.graph.cindexes[data.steps[s][0]])
            info.node = node
            nt = self.net.node_type[node]
            num_cols = self.dim_of(node)
            if nt != kDimRange:
                info.value = self.new_matrix(info.num_rows, num_cols, self.stride_type(node))
                if self.deriv_needed[s]:
                    info.deriv = self.new_matrix(info.num_rows, num_cols, self.stride_type(node))
            else:
                input_step = -1
                for i in range(data.steps[s].size()):
                    c = data.steps[s][i]
                    if not (self.graph.dep_count[c] == 0):
                        input_step = data.loc_step[self.graph.dep_pool[self.graph.dep_start[c] + 0]]
                        break
                if input_step < 0 or input_step >= s or \
                        self.steps[input_step].num_rows != info.num_rows:
                    raise ComputationError("internal error: dim-range step for %s does not "
                                           "match its source step" % self.nnet.node_names[node])
                py_node = self.nnet.nodes[node]
                info.value = self.new_submatrix(self.steps[input_step].value,
                                                py_node.dim_offset, py_node.dim)
                if self.deriv_needed[s]:
                    info.deriv = self.new_submatrix(self.steps[input_step].deriv,
                                                    py_node.dim_offset, py_node.dim)
            if nt == kDescriptor:
                first_part = self.ensure_parts(node)
                num_parts = self.part_count[node]
                self.locations[s].resize(num_parts)
                for p in range(num_parts):
                    data.locate_inputs(s, p, self.locations[s][p].ptr,
                                       self.locations[s][p].steps, self.locations[s][p].rows)
                if num_parts == 1:
                    self.value_parts[s].push_back(info.value)
                    if self.deriv_needed[s]:
                        self.deriv_parts[s].push_back(info.deriv)
                else:
                    offset = 0
                    for p in range(num_parts):
                        dim = self.part_dim[first_part + p]
                        self.value_parts[s].push_back(self.new_submatrix(info.value, offset,
                                                                         dim))
                        if self.deriv_needed[s]:
                            self.deriv_parts[s].push_back(self.new_submatrix(info.deriv,
                                                                             offset, dim))
                        offset += dim
            self.steps[s] = info
        return 0

    # -- Kaldi's AddCommands -----------------------------------------------------------------
    cdef int add_commands(self) except -1:
        cdef int32_t num_steps = <int32_t>self.steps.size(), s
        cdef vector[int32_t] whole
        self.whole_submatrices(whole)
        self.allocate_matrices(whole)
        self.set_up_precomputed_indexes()
        self.step_value.resize(num_steps)
        self.step_deriv.resize(num_steps)
        for s in range(num_steps):
            self.step_value[s] = self.steps[s].value
            self.step_deriv[s] = self.steps[s].deriv
        for s in range(num_steps):
            self.compile_forward(s)
            if s + 1 < num_steps and self.steps[s + 1].segment != self.steps[s].segment:
                self.cmd(kNoOperationMarker, -1, -1, -1, -1, -1, -1, -1, 1.0)
        self.cmd(kNoOperationMarker, -1, -1, -1, -1, -1, -1, -1, 1.0)
        for s in range(num_steps - 1, -1, -1):
            if self.deriv_needed[s]:
                self.compile_backward(s)
        self.deallocate_matrices(whole)
        return 0

    cdef void whole_submatrices(self, vector[int32_t] &whole) noexcept:
        cdef size_t s
        whole.assign(self.matrices.size(), 0)
        for s in range(1, self.subs.size()):
            if self.is_whole(<int32_t>s):
                whole[self.subs[s].matrix] = <int32_t>s

    cdef int allocate_matrices(self, vector[int32_t] &whole) except -1:
        cdef vector[uint8_t] skip
        cdef size_t s, m
        skip.assign(self.matrices.size(), 0)
        for s in range(self.steps.size()):
            if self.steps[s].num_rows == 0:
                continue
            if self.graph.is_input[self.data.steps[s][0]]:
                skip[self.subs[self.steps[s].value].matrix] = 1
            if self.net.is_output[self.steps[s].node] and self.steps[s].deriv != 0:
                skip[self.subs[self.steps[s].deriv].matrix] = 1
        for m in range(1, self.matrices.size()):
            if not skip[m]:
                self.cmd(kAllocMatrix, whole[m], -1, -1, -1, -1, -1, -1, 1.0)
                self.cmd(kSetConst, whole[m], -1, -1, -1, -1, -1, -1, 0.0)
        return 0

    cdef int set_up_precomputed_indexes(self) except -1:
        cdef size_t s
        cdef int node
        need_derivs_of = {}
        for s in range(self.steps.size()):
            node = self.steps[s].node
            if self.net.node_type[node] != kComponent:
                continue
            if self.steps[s - 1].node != node - 1:
                raise ComputationError("internal error: component step not preceded by its "
                                       "input step")
            request = self.requests[self.steps[s].segment]
            need_derivs = need_derivs_of.get(self.steps[s].segment)
            if need_derivs is None:
                # Kaldi checks NeedDerivatives() for every component step
                need_derivs = request.need_derivatives()
                need_derivs_of[self.steps[s].segment] = need_derivs
            if not self.custom_precompute[node]:
                continue
            comp = self.nnet.get_component(self.component_index[node])
            input_indexes = self.data.step_indexes(s - 1) if self.steps[s - 1].num_rows else []
            output_indexes = self.data.step_indexes(s)
            pre = comp.precompute_indexes(request.misc_info, input_indexes, output_indexes,
                                          need_derivs)
            if pre is None:
                continue
            self.steps[s].precomputed = len(self.precomputed)
            entry = PrecomputedIndexesInfo(pre)
            if (input_indexes and input_indexes[len(input_indexes) - 1][0] == 1 and
                    output_indexes and output_indexes[len(output_indexes) - 1][0] == 1):
                entry.input_indexes = list(input_indexes)
                entry.output_indexes = list(output_indexes)
            self.precomputed.append(entry)
        return 0

    cdef bint is_input_step(self, int32_t s) noexcept:
        if s >= <int32_t>self.steps.size():
            return False
        return self.net.node_type[self.steps[s].node] == kInput

    cdef int compile_forward(self, int32_t s) except -1:
        cdef Step info = self.steps[s]
        cdef int node = info.node, nt = self.net.node_type[node]
        cdef size_t p
        cdef int32_t memo, stats
        if nt == kInput:
            self.cmd(kAcceptInput, info.value, node, -1, -1, -1, -1, -1, 1.0)
            if not self.is_input_step(s + 1):
                self.cmd(kNoOperationPermanent, -1, -1, -1, -1, -1, -1, -1, 1.0)
        elif nt == kComponent:
            memo = s if (info.deriv > 0 and self.props[node] & kUsesMemo) else 0
            stats = 1 if (self.store_stats and self.props[node] & kStoresStats) else 0
            self.cmd(kPropagate, self.component_index[node], info.precomputed,
                     self.steps[s - 1].value, info.value, memo, stats, -1, 1.0)
        elif nt == kDescriptor:
            for p in range(self.value_parts[s].size()):
                self.compile_part(s, <int>p, False)
            if self.net.is_output[node]:
                self.cmd(kProvideOutput, info.value, node, -1, -1, -1, -1, -1, 1.0)
        return 0

    cdef int split_by_scale(self, int32_t s, int p, bint backward,
                            vector[LocList] &pieces) except -1:
        """Kaldi's SplitByScale, and the change from (step, row) to (submatrix,
        row) locations (values, or derivatives without the steps that have none).
        pieces[g] goes with part_alphas[pid][g], pid = the part's id."""
        cdef LocList *loc = &self.locations[s][p]
        cdef int pid = self.ensure_parts(self.steps[s].node) + p
        cdef int64_t num_rows = <int64_t>loc.ptr.size() - 1, r, k
        cdef vector[uint8_t] node_used
        cdef int32_t sub, g, num_groups = <int32_t>self.part_alphas[pid].size(), step
        cdef size_t i
        cdef vector[int32_t] *step_sub = &self.step_deriv if backward else &self.step_value
        cdef bint grouped = not self.part_group[pid].empty()
        if grouped:
            node_used.assign(self.net.num_nodes, 0)
            for k in range(<int64_t>loc.steps.size()):
                node_used[self.steps[loc.steps[k]].node] = 1
            for i in range(self.part_group_nodes[pid].size()):
                if not node_used[self.part_group_nodes[pid][i]]:
                    raise ComputationError("Scale() expression of node %s has no inputs here "
                                           "(Kaldi fails on this case too)"
                                           % self.nnet.node_names[self.part_group_nodes[pid][i]])
        if <int32_t>pieces.size() != num_groups:
            pieces.resize(num_groups)
        for g in range(num_groups):
            pieces[g].ptr.clear()
            pieces[g].steps.clear()
            pieces[g].rows.clear()
            pieces[g].ptr.push_back(0)
        for r in range(num_rows):
            for k in range(loc.ptr[r], loc.ptr[r + 1]):
                step = loc.steps[k]
                sub = step_sub[0][step]
                if backward and sub <= 0:
                    continue
                g = self.part_group[pid][self.steps[step].node] if grouped else 0
                pieces[g].steps.push_back(sub)
                pieces[g].rows.push_back(loc.rows[k])
            for g in range(num_groups):
                pieces[g].ptr.push_back(pieces[g].steps.size())
        return 0

    cdef int compile_part(self, int32_t s, int p, bint backward) except -1:
        """Part p of step s's Sum descriptor, forward (Kaldi's
        CompileForwardSumDescriptor: the part's value from its inputs' values)
        or backward (CompileBackwardSumDescriptor: its derivative added to its
        inputs' derivatives), one piece per scale, each split into commands by
        SplitLocations (SplitLocationsBackward)."""
        cdef int32_t sub = self.deriv_parts[s][p] if backward else self.value_parts[s][p]
        cdef int32_t first
        cdef vector[LocList] *pieces = &self.scratch_pieces
        cdef vector[vector[Pair]] *split = &self.scratch_split
        cdef vector[int32_t] *rows = &self.scratch_rows
        cdef LocList *piece
        cdef size_t g, i
        cdef double alpha
        cdef int pid = self.ensure_parts(self.steps[s].node) + p
        if not backward and self.part_offset[pid] != 0.0:
            self.cmd(kSetConst, sub, -1, -1, -1, -1, -1, -1, self.part_offset[pid])
        self.split_by_scale(s, p, backward, pieces[0])
        for g in range(pieces.size()):
            alpha = self.part_alphas[pid][g]
            piece = &pieces[0][g]
            split.clear()
            if backward:
                split_locations_backward_c(piece.ptr.data(), piece.steps.data(),
                                           piece.rows.data(), <int64_t>piece.ptr.size() - 1,
                                           split[0])
            else:
                split_locations_c(piece.ptr.data(), piece.steps.data(), piece.rows.data(),
                                  <int64_t>piece.ptr.size() - 1, split[0])
            for i in range(split.size()):
                if convert_to_indexes_c(split[0][i], &first, rows[0]):
                    if backward:
                        self.backward_from_indexes(sub, first, alpha, rows[0])
                    else:
                        self.forward_from_indexes(sub, first, alpha, rows[0])
                else:
                    self.indexes_multi.append(_pair_list(split[0][i]))
                    self.cmd(kAddToRowsMulti if backward else kAddRowsMulti, sub,
                             len(self.indexes_multi) - 1, -1, -1, -1, -1, -1, alpha)
        return 0

    cdef int forward_from_indexes(self, int32_t value_sub, int32_t input_sub, double alpha,
                                  vector[int32_t] &rows) except -1:
        cdef size_t i, n = rows.size()
        cdef bint identity = <size_t>self.subs[input_sub].rows == n
        if identity:
            for i in range(n):
                if rows[i] != <int32_t>i:
                    identity = False
                    break
        if identity:
            self.cmd(kMatrixAdd, value_sub, input_sub, -1, -1, -1, -1, -1, alpha)
            return 0
        self.indexes.append(_int_list(rows))
        self.cmd(kAddRows, value_sub, input_sub, len(self.indexes) - 1, -1, -1, -1, -1, alpha)
        return 0

    cdef int compile_backward(self, int32_t s) except -1:
        cdef Step info = self.steps[s]
        cdef Step in_info
        cdef int node = info.node, nt = self.net.node_type[node]
        cdef int32_t props, in_sub, out_sub, memo
        cdef size_t p
        if nt == kInput:
            if info.deriv != 0:
                self.cmd(kProvideOutput, info.deriv, node, -1, -1, -1, -1, -1, 1.0)
            if not self.is_input_step(s + 1):
                self.cmd(kNoOperationPermanent, -1, -1, -1, -1, -1, -1, -1, 1.0)
        elif nt == kComponent:
            in_info = self.steps[s - 1]
            props = self.props[node]
            in_sub = in_info.value if props & kBackpropNeedsInput else 0
            out_sub = info.value if props & kBackpropNeedsOutput else 0
            memo = s if props & kUsesMemo else 0
            if not (info.deriv > 0 and (in_info.deriv > 0 or props & kUpdatableComponent)):
                raise ComputationError("internal error: backprop for component %s without "
                                       "derivatives" % self.nnet.node_names[node])
            self.cmd(kBackprop, self.component_index[node], info.precomputed, in_sub, out_sub,
                     info.deriv, in_info.deriv, memo, 1.0)
        elif nt == kDescriptor:
            if self.net.is_output[node] and info.deriv > 0:
                self.cmd(kAcceptInput, info.deriv, node, -1, -1, -1, -1, -1, 1.0)
            for p in range(self.value_parts[s].size()):
                self.compile_part(s, <int>p, True)
        return 0

    cdef int backward_from_indexes(self, int32_t deriv_sub, int32_t input_deriv_sub, double alpha,
                                   vector[int32_t] &rows) except -1:
        cdef int32_t num_rows = self.subs[deriv_sub].rows
        cdef int32_t input_rows = self.subs[input_deriv_sub].rows
        cdef int32_t i, j
        cdef bint identity, ok
        cdef vector[int32_t] reverse
        cdef vector[Pair] ranges
        cdef Pair empty
        if <int32_t>rows.size() != num_rows:
            raise ComputationError("internal error: index vector size mismatch in backprop")
        identity = input_rows == num_rows
        if identity:
            for i in range(num_rows):
                if rows[i] != i:
                    identity = False
                    break
        if identity:
            self.cmd(kMatrixAdd, input_deriv_sub, deriv_sub, -1, -1, -1, -1, -1, alpha)
            return 0
        if input_rows >= num_rows:
            reverse.assign(input_rows, -1)
            ok = True
            for i in range(num_rows):
                j = rows[i]
                if j < -1 or j >= input_rows:
                    raise ComputationError("internal error: row index out of range in backprop")
                if j >= 0:
                    if reverse[j] == -1:
                        reverse[j] = i
                    else:
                        ok = False
                        break
            if ok:
                self.indexes.append(_int_list(reverse))
                self.cmd(kAddRows, input_deriv_sub, deriv_sub, len(self.indexes) - 1,
                         -1, -1, -1, -1, alpha)
                return 0
        if contiguous_ranges_c(rows, ranges):
            if <int32_t>ranges.size() != input_rows:
                if <int32_t>ranges.size() > input_rows:
                    raise ComputationError("internal error: row ranges exceed the input rows")
                empty.first = -1
                empty.second = -1
                ranges.resize(input_rows, empty)
            self.indexes_ranges.append(_pair_list(ranges))
            self.cmd(kAddRowRanges, input_deriv_sub, deriv_sub, len(self.indexes_ranges) - 1,
                     -1, -1, -1, -1, alpha)
            return 0
        raise ComputationError("this backprop case is not implemented (as in Kaldi): a "
                               "descriptor's rows repeat an input row non-contiguously")

    cdef int deallocate_matrices(self, vector[int32_t] &whole) except -1:
        cdef vector[uint8_t] keep
        cdef size_t s, m
        cdef int node, seg
        keep.assign(self.matrices.size(), 0)
        for s in range(self.steps.size()):
            node = self.steps[s].node
            seg = self.steps[s].segment
            if self.net.is_output[node]:
                keep[self.subs[self.steps[s].value].matrix] = 1
            elif self.net.node_type[node] == kInput:
                if self.input_deriv[seg][node] < 0:
                    raise ComputationError("internal error: input %s not in request"
                                           % self.nnet.node_names[node])
                if self.input_deriv[seg][node] == 1:
                    keep[self.subs[self.steps[s].deriv].matrix] = 1
        for m in range(1, self.matrices.size()):
            if not keep[m]:
                self.cmd(kDeallocMatrix, whole[m], -1, -1, -1, -1, -1, -1, 1.0)
        return 0

    cdef void consolidate_io(self) noexcept:
        """Kaldi's ConsolidateIoOperations (stable per marker-separated segment)."""
        cdef vector[Cmd] out
        cdef size_t start = 0, end, c, n = self.cmds.size()
        out.reserve(n)
        while start <= n:
            end = start
            while end < n and self.cmds[end].type != kNoOperationMarker:
                end += 1
            for c in range(start, end):
                if self.cmds[c].type == kAcceptInput:
                    out.push_back(self.cmds[c])
            for c in range(start, end):
                if self.cmds[c].type != kAcceptInput and self.cmds[c].type != kProvideOutput:
                    out.push_back(self.cmds[c])
            for c in range(start, end):
                if self.cmds[c].type == kProvideOutput:
                    out.push_back(self.cmds[c])
            if end < n:
                out.push_back(self.cmds[end])
            start = end + 1
        self.cmds.swap(out)

    # -- results ---------------------------------------------------------------------------------
    cdef object build(self, bint output_debug_info):
        """The NnetComputation's Python records from the C arrays."""
        cdef size_t i
        cdef Mat m
        cdef Sub s
        cdef Cmd c
        cdef int j
        cdef object obj, alpha
        cdef list ints
        cdef _RecordMaker mm = _RecordMaker(MatrixInfo, ("num_rows", "num_cols", "stride_type"))
        cdef _RecordMaker sm = _RecordMaker(SubMatrixInfo, ("matrix_index", "row_offset",
                                                            "num_rows", "col_offset", "num_cols"))
        cdef _RecordMaker cm = _RecordMaker(Command, ("command_type", "arg1", "arg2", "arg3",
                                                      "arg4", "arg5", "arg6", "arg7", "alpha"))
        computation = NnetComputation()
        strides = [MatrixStrideType.kDefaultStride, MatrixStrideType.kStrideEqualNumCols]
        types = list(CommandType)
        # one int object per value (command arguments repeat submatrix indexes),
        # kept between compilations (ints are immutable)
        cdef int32_t num_ints = <int32_t>max(self.subs.size(), self.matrices.size(),
                                             self.steps.size()) + 1
        global _INTS
        if len(_INTS) < num_ints:
            _INTS = list(range(num_ints))
        ints = _INTS
        matrices = PyList_New(self.matrices.size())
        for i in range(self.matrices.size()):
            m = self.matrices[i]
            obj = mm.make((m.rows, m.cols, strides[m.stride]))
            Py_INCREF(obj)
            PyList_SET_ITEM(matrices, i, obj)
        subs = PyList_New(self.subs.size())
        for i in range(self.subs.size()):
            s = self.subs[i]
            obj = sm.make((ints[s.matrix], s.row_offset, s.rows, s.col_offset, s.cols))
            Py_INCREF(obj)
            PyList_SET_ITEM(subs, i, obj)
        cmds = PyList_New(self.cmds.size())
        alpha_cache = {}
        # typed as objects: an inferred C double would make a new float per command
        cdef object one = 1.0, zero = 0.0, minus_one = -1
        for i in range(self.cmds.size()):
            c = self.cmds[i]
            if c.alpha == 1.0:
                alpha = one
            elif c.alpha == 0.0:
                alpha = zero
            else:
                alpha = alpha_cache.get(c.alpha)
                if alpha is None:
                    alpha = float(c.alpha)
                    alpha_cache[c.alpha] = alpha
            if cm.direct:
                obj = cm.new()
                cm.put(obj, 0, types[c.type])
                for j in range(7):
                    if 0 <= c.args[j] < num_ints:
                        cm.put(obj, j + 1, ints[c.args[j]])
                    elif c.args[j] == -1:
                        cm.put(obj, j + 1, minus_one)
                    else:
                        cm.put(obj, j + 1, c.args[j])
                cm.put(obj, 8, alpha)
            else:
                obj = cm.make((types[c.type], c.args[0], c.args[1], c.args[2], c.args[3],
                               c.args[4], c.args[5], c.args[6], alpha))
            Py_INCREF(obj)
            PyList_SET_ITEM(cmds, i, obj)
        computation.matrices = matrices
        computation.submatrices = subs
        computation.commands = cmds
        computation.indexes = self.indexes
        computation.indexes_multi = self.indexes_multi
        computation.indexes_ranges = self.indexes_ranges
        computation.component_precomputed_indexes = self.precomputed
        computation.need_model_derivative = bool(self.requests[0].need_model_derivative)
        if output_debug_info:
            computation.matrix_debug_info = self.debug_info()
        return computation

    cdef list debug_info(self):
        """Kaldi's matrix debug info: per whole-matrix step, its cindexes (and the
        same for its derivative matrix). Decided on C arrays first, then each
        record is made once with its final fields; the Cindex lists are built
        on first access (LazyMatrixDebugInfo), from the step's packed keys."""
        cdef size_t s, i, num_matrices = self.matrices.size()
        cdef int32_t value_matrix, deriv_matrix, min_n
        cdef _RecordMaker dm = _RecordMaker(MatrixDebugInfo, ("is_deriv", "cindexes"))
        cdef vector[uint8_t] is_deriv
        cdef list recipes = [None] * num_matrices     # (node, keys, min_n)
        cdef tuple recipe
        cdef bytes keys
        cdef object obj
        is_deriv.assign(num_matrices, 0)
        for s in range(self.steps.size()):
            if self.steps[s].value == 0 or not self.is_whole(self.steps[s].value):
                continue
            value_matrix = self.subs[self.steps[s].value].matrix
            deriv_matrix = 0
            if self.steps[s].deriv != 0 and self.is_whole(self.steps[s].deriv):
                deriv_matrix = self.subs[self.steps[s].deriv].matrix
            is_deriv[value_matrix] = 0
            if recipes[value_matrix] is not None:
                continue  # a whole-matrix dim-range alias of an existing matrix
            keys = self.data.step_keys_c(<int>s, &min_n)
            recipe = (self.steps[s].node, keys, min_n)
            recipes[value_matrix] = recipe
            if deriv_matrix != 0:
                is_deriv[deriv_matrix] = 1
                recipes[deriv_matrix] = recipe
        debug = PyList_New(num_matrices)
        for i in range(num_matrices):
            recipe = recipes[i]
            if recipe is not None:
                keys = recipe[1]
                obj = LazyMatrixDebugInfo(True if is_deriv[i] else False, len(keys) // 8,
                                          recipe[2], cindexes_from_keys, recipe[:2])
            elif dm.direct:
                obj = dm.make((True if is_deriv[i] else False, []))
            else:
                obj = MatrixDebugInfo(True if is_deriv[i] else False, [])
            Py_INCREF(obj)
            PyList_SET_ITEM(debug, i, obj)
        return debug


def compile_fast(nnet, requests, NetInfo net, FastStepsData data, bint output_debug_info=True):
    """The unoptimized NnetComputation for a pruned graph and its steps."""
    cdef _Core core = _Core(nnet, requests, net, data)
    core.compute_deriv_needed()
    core.create_step_info()
    core.add_commands()
    core.consolidate_io()
    return core.build(output_debug_info)


