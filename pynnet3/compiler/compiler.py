"""The Compiler: Nnet + ComputationRequest(s) -> unoptimized NnetComputation
(Kaldi's nnet-compile.cc).

Pipeline (Kaldi's CreateComputation): build and prune the computation graph
(per segment), order it into phases and steps, locate every cindex_id at a
(step, row), decide which steps need derivative matrices, create one matrix
(and its derivative) per step, a sub-matrix per dim-range step and per part of
an Append, then emit commands:

- allocation (kAllocMatrix + kSetConst 0) of every matrix except those the
  user supplies (inputs, output derivatives);
- forward: kAcceptInput for inputs, a kNoOperationPermanent after the last
  input, kPropagate per component step (memo index = step when the component
  uses a memo and its derivative is needed; arg6 = store stats), and per
  Descriptor part the row gathers — kSetConst for a Const() term, then per
  scale (Scale() expressions) the SplitLocations pieces as kMatrixAdd (same
  rows), kAddRows (one source) or kAddRowsMulti; kProvideOutput for outputs;
- a kNoOperationMarker (also between segments), then backward in reverse step
  order where a derivative is needed: kAcceptInput of output derivatives,
  SplitLocationsBackward pieces as kMatrixAdd, kAddRows (reversed mapping),
  kAddRowRanges (contiguous property) or kAddToRowsMulti, kBackprop per
  component step, kProvideOutput of input derivatives;
- deallocation of everything except outputs and requested input derivatives;
- ConsolidateIoOperations (kAcceptInput first, kProvideOutput last in each
  segment) and matrix debug info.

Two implementations produce the same computation: this module's Compiler run
with ``use_kernel=False`` or without the kernel built (the readable
specification: the Python graph builder, PyStepsData, SplitLocations) and, by
default, its kernel ``pynnet3/_fast/compiler_kernel.pyx`` (which mirrors the
methods below on C arrays, over the graph and steps kernels it cimports). A
test compares the two on the reference cases.

Guarantees: for any request Kaldi can compile, the computation equals
Kaldi's unoptimized one (same matrices, submatrices, index tables, commands,
debug info); anything Kaldi refuses raises ComputationError with a message
naming the node/Cindexes involved.
"""

import gc

import numpy as np

from .. import _fast
from ..components.base import Component, ComponentProperty as P
from ..errors import ComputationError
from ..nnet.node import kComponent, kDescriptor, kDimRange, kInput
from . import split_locations
from .computation import (Command, CommandType, MatrixDebugInfo, MatrixStrideType,
                          NnetComputation, PrecomputedIndexesInfo)
from .computation_graph import ComputationGraphBuilder, computation_graph_builder
from .steps import PyStepsData

CT = CommandType

# ComponentProperties bits used here.
kUpdatableComponent = P.kUpdatableComponent
kBackpropNeedsInput = P.kBackpropNeedsInput
kBackpropNeedsOutput = P.kBackpropNeedsOutput
kStoresStats = P.kStoresStats
kInputContiguous = P.kInputContiguous
kOutputContiguous = P.kOutputContiguous
kUsesMemo = P.kUsesMemo

# The compiler's kernel (graph building, steps and commands in C), unless the
# user chose the twins or it is not built (then pynnet3._fast warns once).
_kernel = _fast.load("compiler_kernel")

_INF = float("inf")


class StepInfo:
    """What the compiler knows about one step (Kaldi's Compiler::StepInfo).
    The step's cindexes live in the StepsData object (``num_rows`` of them);
    ``input_locations_list[p]`` is, for Descriptor part p, the CSR triple
    (row_ptr, loc_steps, loc_rows) of the (step, row) locations each row sums."""

    __slots__ = ("node_index", "value", "deriv", "segment", "precomputed_indexes_index",
                 "num_rows", "value_parts", "deriv_parts", "input_locations_list")

    def __init__(self):
        self.node_index = -1
        self.value = 0
        self.deriv = 0
        self.segment = 0
        self.precomputed_indexes_index = 0
        self.num_rows = 0
        self.value_parts = []
        self.deriv_parts = []
        self.input_locations_list = []


def _new_submatrix(computation, base_submatrix, row_offset, num_rows, col_offset, num_cols):
    """Kaldi's NnetComputation::NewSubMatrix: a range of an existing submatrix
    (-1 for num_rows/num_cols means 'the rest')."""
    base = computation.submatrices[base_submatrix]
    if num_rows == -1:
        num_rows = base.num_rows - row_offset
    if num_cols == -1:
        num_cols = base.num_cols - col_offset
    if not (row_offset + num_rows <= base.num_rows and col_offset + num_cols <= base.num_cols
            and row_offset >= 0 and col_offset >= 0 and num_rows > 0 and num_cols > 0):
        raise ComputationError("invalid sub-matrix (%d rows at %d, %d cols at %d) of a "
                               "%dx%d submatrix" % (num_rows, row_offset, num_cols, col_offset,
                                                    base.num_rows, base.num_cols))
    return computation.new_submatrix(base.matrix_index, base.row_offset + row_offset, num_rows,
                                     base.col_offset + col_offset, num_cols)


def get_whole_submatrices(computation):
    """Kaldi's GetWholeSubmatrices: for each matrix, the LAST submatrix that
    covers it entirely."""
    whole = [0] * len(computation.matrices)
    matrices = computation.matrices
    for s, sub in enumerate(computation.submatrices):
        if s == 0:
            continue
        m = matrices[sub.matrix_index]
        if (sub.row_offset == 0 and sub.col_offset == 0 and sub.num_rows == m.num_rows
                and sub.num_cols == m.num_cols):
            whole[sub.matrix_index] = s
    return whole


def consolidate_io_operations(computation):
    """Kaldi's ConsolidateIoOperations: within each marker-separated segment,
    kAcceptInput commands first and kProvideOutput commands last."""
    commands = computation.commands
    out = []
    segment = []

    def flush():
        out.extend(c for c in segment if c.command_type == CT.kAcceptInput)
        out.extend(c for c in segment if c.command_type not in (CT.kAcceptInput,
                                                                CT.kProvideOutput))
        out.extend(c for c in segment if c.command_type == CT.kProvideOutput)
        segment.clear()

    for c in commands:
        if c.command_type == CT.kNoOperationMarker:
            flush()
            out.append(c)
        else:
            segment.append(c)
    flush()
    computation.commands = out


class Compiler:
    """Kaldi's Compiler. ``requests`` is one ComputationRequest or a list (one
    per segment, for online computations). ``use_kernel`` runs the kernel
    (when it is loaded); with False the readable Python twins run instead.
    Both give the same computation."""

    def __init__(self, requests, nnet, use_kernel=True):
        if not isinstance(requests, (list, tuple)):
            requests = [requests]
        if not requests:
            raise ComputationError("Compiler needs at least one request")
        if len(requests) > 1:
            for r in requests:
                if r.need_model_derivative:
                    raise ComputationError("model derivatives are not supported for "
                                           "multi-segment (online) computations")
                if r.store_component_stats != requests[0].store_component_stats:
                    raise ComputationError("all segments must agree on store_component_stats")
        self.requests = list(requests)
        self.nnet = nnet
        self.steps = []
        self.data = None
        self.kernel = _kernel if use_kernel else None

    # -- driver -----------------------------------------------------------------------------
    def create_computation(self, output_debug_info=True):
        """The unoptimized NnetComputation (Kaldi's CreateComputation)."""
        # Compilation allocates millions of small containers and frees none of
        # them until it returns; Python's cyclic GC would rescan them over and over.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._create_computation(output_debug_info)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _create_computation(self, output_debug_info):
        nnet = self.nnet
        kernel = self.kernel
        builder = (kernel.FastComputationGraphBuilder(nnet) if kernel is not None
                   else ComputationGraphBuilder(nnet))
        for request in self.requests:
            builder.compute(request)
            if not builder.all_outputs_are_computable():
                raise builder.not_computable_error()
            builder.prune()
        if kernel is not None:
            self.data = kernel.compute_steps(builder.net, builder.graph, self.requests)
            return kernel.compile_fast(nnet, self.requests, builder.net, self.data,
                                       output_debug_info)
        self.data = PyStepsData.compute(nnet, builder.graph, self.requests)
        step_to_segment = list(self.data.step_to_segment)
        computation = NnetComputation()
        deriv_needed = self.compute_deriv_needed(step_to_segment)
        self.create_step_info(deriv_needed, step_to_segment, computation)
        self.add_commands(deriv_needed, step_to_segment, computation)
        consolidate_io_operations(computation)
        if output_debug_info:
            self.output_debug_info(computation)
        return computation

    # -- derivatives -----------------------------------------------------------------------------
    def compute_deriv_needed(self, step_to_segment):
        nnet, data = self.nnet, self.data
        num_steps = data.num_steps()
        deriv_needed = [False] * num_steps
        for step in range(num_steps):
            if data.step_size(step) == 0:
                continue
            node_index = data.step_node(step)
            node_name = nnet.node_names[node_index]
            is_component = nnet.is_component_node(node_index)
            dep_steps = [step - 1] if is_component else data.step_dependency_steps(step)
            for dep_step in dep_steps:
                if dep_step >= step:
                    raise ComputationError("internal error: step %d depends on later step %d"
                                           % (step, dep_step))
                if deriv_needed[dep_step]:
                    deriv_needed[step] = True
            request = self.requests[step_to_segment[step]]
            if data.step_is_input(step):
                i = request.index_for_input(node_name)
                if i == -1:
                    raise ComputationError("internal error: input step for %s not in request"
                                           % node_name)
                if request.inputs[i].has_deriv:
                    deriv_needed[step] = True
            if nnet.is_output_node(node_index):
                i = request.index_for_output(node_name)
                if i == -1:
                    raise ComputationError("internal error: output step for %s not in request"
                                           % node_name)
                if request.outputs[i].has_deriv:
                    deriv_needed[step] = True
            if is_component and request.need_model_derivative:
                c = nnet.get_component(nnet.nodes[node_index].component_index)
                if c.properties() & kUpdatableComponent:
                    if getattr(c, "learning_rate", 1.0) != 0:
                        deriv_needed[step] = True
        return deriv_needed

    # -- matrices -------------------------------------------------------------------------------
    def _stride_type(self, node_index):
        nnet = self.nnet
        if nnet.is_component_input_node(node_index):
            comp = nnet.get_component(nnet.nodes[node_index + 1].component_index)
            flag = kInputContiguous
        elif nnet.is_component_node(node_index):
            comp = nnet.get_component(nnet.nodes[node_index].component_index)
            flag = kOutputContiguous
        else:
            return MatrixStrideType.kDefaultStride
        if comp.properties() & flag:
            return MatrixStrideType.kStrideEqualNumCols
        return MatrixStrideType.kDefaultStride

    def create_step_info(self, deriv_needed, step_to_segment, computation):
        nnet, data = self.nnet, self.data
        num_steps = data.num_steps()
        self.steps = infos = [StepInfo() for _ in range(num_steps)]
        for step, info in enumerate(infos):
            info.segment = step_to_segment[step]
            info.num_rows = num_rows = data.step_size(step)
            if num_rows == 0:
                # the empty input step of a component that needs no input
                if step + 1 >= num_steps or data.step_size(step + 1) == 0:
                    raise ComputationError("internal error: empty step not followed by a "
                                           "component step")
                info.node_index = data.step_node(step + 1) - 1
                continue
            info.node_index = node_index = data.step_node(step)
            node = nnet.nodes[node_index]
            node_type = int(node.node_type)
            num_cols = nnet.node_dim(node_index)
            if node_type != kDimRange:
                stride = self._stride_type(node_index)
                info.value = computation.new_matrix(num_rows, num_cols, stride)
                if deriv_needed[step]:
                    info.deriv = computation.new_matrix(num_rows, num_cols, stride)
            else:
                input_step = data.dim_range_source_step(step)
                if input_step < 0:
                    raise ComputationError("internal error: dim-range step for %s has no "
                                           "source" % nnet.node_names[node_index])
                src_info = infos[input_step]
                if src_info.num_rows != num_rows or not 0 <= input_step < step:
                    raise ComputationError("internal error: dim-range step for %s does not "
                                           "match its source step" % nnet.node_names[node_index])
                info.value = _new_submatrix(computation, src_info.value, 0, -1,
                                            node.dim_offset, node.dim)
                if deriv_needed[step]:
                    info.deriv = _new_submatrix(computation, src_info.deriv, 0, -1,
                                                node.dim_offset, node.dim)
            if node_type == kDescriptor:
                desc = node.descriptor
                num_parts = desc.num_parts()
                info.input_locations_list = [data.input_locations(step, p)
                                             for p in range(num_parts)]
                if num_parts == 1:
                    info.value_parts = [info.value]
                    if deriv_needed[step]:
                        info.deriv_parts = [info.deriv]
                else:
                    offset = 0
                    for p in range(num_parts):
                        dim = desc.part(p).dim(nnet)
                        info.value_parts.append(_new_submatrix(computation, info.value, 0, -1,
                                                               offset, dim))
                        if deriv_needed[step]:
                            info.deriv_parts.append(_new_submatrix(computation, info.deriv, 0,
                                                                   -1, offset, dim))
                        offset += dim

    # -- commands ------------------------------------------------------------------------------
    def add_commands(self, deriv_needed, step_to_segment, computation):
        computation.need_model_derivative = self.requests[0].need_model_derivative
        whole = get_whole_submatrices(computation)
        self.allocate_matrices(whole, computation)
        self.set_up_precomputed_indexes(step_to_segment, computation)
        self._value_of_step = np.array([info.value for info in self.steps], dtype=np.int32)
        self._deriv_of_step = np.array([info.deriv for info in self.steps], dtype=np.int32)
        num_steps = len(self.steps)
        for step in range(num_steps):
            self.compile_forward(step, computation)
            if step + 1 < len(step_to_segment) and \
                    step_to_segment[step + 1] != step_to_segment[step]:
                computation.commands.append(Command(CT.kNoOperationMarker))
        computation.commands.append(Command(CT.kNoOperationMarker))
        for step in range(num_steps - 1, -1, -1):
            if deriv_needed[step]:
                self.compile_backward(step, computation)
        self.deallocate_matrices(whole, step_to_segment, computation)

    def allocate_matrices(self, whole, computation):
        nnet, data = self.nnet, self.data
        skip = set()
        for step, info in enumerate(self.steps):
            if info.num_rows == 0:
                continue
            if data.step_is_input(step):
                skip.add(computation.submatrices[info.value].matrix_index)
            if nnet.is_output_node(info.node_index) and info.deriv != 0:
                skip.add(computation.submatrices[info.deriv].matrix_index)
        commands = computation.commands
        for m in range(1, len(computation.matrices)):
            if m not in skip:
                commands.append(Command(CT.kAllocMatrix, whole[m]))
                commands.append(Command(CT.kSetConst, whole[m], alpha=0.0))

    def set_up_precomputed_indexes(self, step_to_segment, computation):
        nnet, data = self.nnet, self.data
        computation.component_precomputed_indexes = [PrecomputedIndexesInfo()]
        for step, info in enumerate(self.steps):
            node = nnet.nodes[info.node_index]
            if int(node.node_type) != kComponent:
                continue
            input_info = self.steps[step - 1]
            if input_info.node_index != info.node_index - 1:
                raise ComputationError("internal error: component step not preceded by its "
                                       "input step")
            component = nnet.get_component(node.component_index)
            request = self.requests[step_to_segment[step]]
            need_derivs = request.need_derivatives()  # Kaldi checks this for every component
            if type(component).precompute_indexes is Component.precompute_indexes:
                continue  # the base hook returns None; no need to build Index lists
            input_indexes = data.step_indexes(step - 1)
            output_indexes = data.step_indexes(step)
            pre = component.precompute_indexes(request.misc_info, input_indexes, output_indexes,
                                               need_derivs)
            if pre is None:
                continue
            info.precomputed_indexes_index = len(computation.component_precomputed_indexes)
            entry = PrecomputedIndexesInfo(pre)
            if (input_indexes and input_indexes[-1][0] == 1 and output_indexes
                    and output_indexes[-1][0] == 1):
                # possibly 'shortcut' compilation: ExpandComputation needs these
                entry.input_indexes = list(input_indexes)
                entry.output_indexes = list(output_indexes)
            computation.component_precomputed_indexes.append(entry)

    def _is_input_step(self, step):
        if step >= len(self.steps):
            return False
        return int(self.nnet.nodes[self.steps[step].node_index].node_type) == kInput

    def compile_forward(self, step, computation):
        info = self.steps[step]
        node_type = int(self.nnet.nodes[info.node_index].node_type)
        commands = computation.commands
        if node_type == kInput:
            commands.append(Command(CT.kAcceptInput, info.value, info.node_index))
            if not self._is_input_step(step + 1):
                commands.append(Command(CT.kNoOperationPermanent))
        elif node_type == kDimRange:
            pass
        elif node_type == kComponent:
            self._forward_component(step, computation)
        elif node_type == kDescriptor:
            for part in range(len(info.value_parts)):
                self._forward_sum_descriptor(step, part, computation)
            if self.nnet.is_output_node(info.node_index):
                commands.append(Command(CT.kProvideOutput, info.value, info.node_index))
        else:
            raise ComputationError("invalid node type")

    def _forward_component(self, step, computation):
        info = self.steps[step]
        input_info = self.steps[step - 1]
        node = self.nnet.nodes[info.node_index]
        component = self.nnet.get_component(node.component_index)
        props = component.properties()
        memo = step if (info.deriv > 0 and props & kUsesMemo) else 0
        store_stats = 1 if (self.requests[0].store_component_stats and
                            props & kStoresStats) else 0
        computation.commands.append(Command(CT.kPropagate, node.component_index,
                                            info.precomputed_indexes_index, input_info.value,
                                            info.value, memo, store_stats))

    def _split_by_scale(self, descriptor, locations):
        """Kaldi's SplitByScale over a CSR locations triple: [(alpha, triple)],
        one entry with the triple itself when every node has the same scale,
        else one per distinct scale, by increasing alpha."""
        alpha_to_nodes = {}
        for node in sorted(set(descriptor.get_node_dependencies([]))):
            alpha = descriptor.get_scale_for_node(node)
            if alpha - alpha != 0.0:
                raise ComputationError("invalid scale for node %s in a descriptor"
                                       % self.nnet.node_names[node])
            alpha_to_nodes.setdefault(alpha, []).append(node)
        if len(alpha_to_nodes) == 1:
            return [(next(iter(alpha_to_nodes)), locations)]
        row_ptr, loc_steps, loc_rows = locations
        node_to_steps = {}
        for s in np.unique(loc_steps).tolist():
            node_to_steps.setdefault(self.steps[s].node_index, []).append(s)
        step_to_split = np.full(len(self.steps), -1, dtype=np.int32)
        alphas = sorted(alpha_to_nodes)
        for i, alpha in enumerate(alphas):
            for node in alpha_to_nodes[alpha]:
                if node not in node_to_steps:
                    raise ComputationError("Scale() expression of node %s has no inputs here "
                                           "(Kaldi fails on this case too)"
                                           % self.nnet.node_names[node])
                for s in node_to_steps[node]:
                    step_to_split[s] = i
        split_of = step_to_split[loc_steps]
        num_rows = len(row_ptr) - 1
        row_of = np.repeat(np.arange(num_rows), np.diff(row_ptr))
        pieces = []
        for i, alpha in enumerate(alphas):
            mask = split_of == i
            pieces.append((alpha, (_row_ptr(row_of[mask], num_rows), loc_steps[mask],
                                   loc_rows[mask])))
        return pieces

    def _forward_sum_descriptor(self, step, part, computation):
        info = self.steps[step]
        value_submatrix = info.value_parts[part]
        descriptor = self.nnet.nodes[info.node_index].descriptor.part(part)
        offset_term = descriptor.get_scale_for_node(-1)
        if offset_term != 0.0:
            computation.commands.append(Command(CT.kSetConst, value_submatrix,
                                                alpha=offset_term))
        value_of_step = self._value_of_step
        for alpha, (row_ptr, loc_steps, loc_rows) in self._split_by_scale(
                descriptor, info.input_locations_list[part]):
            firsts = value_of_step[loc_steps]
            for pairs in split_locations.split_locations_csr(row_ptr, firsts, loc_rows):
                converted = split_locations.convert_pairs_to_indexes(pairs)
                if converted is not None:
                    self._forward_from_indexes(value_submatrix, int(converted[0]), alpha,
                                               np.asarray(converted[1], dtype=np.int32),
                                               computation)
                else:
                    computation.indexes_multi.append(_pair_list(pairs))
                    computation.commands.append(Command(CT.kAddRowsMulti, value_submatrix,
                                                        len(computation.indexes_multi) - 1,
                                                        alpha=alpha))

    def _forward_from_indexes(self, value_submatrix, input_submatrix, alpha, indexes,
                              computation):
        input_rows = computation.submatrices[input_submatrix].num_rows
        if input_rows == len(indexes) and _is_identity(indexes):
            computation.commands.append(Command(CT.kMatrixAdd, value_submatrix, input_submatrix,
                                                alpha=alpha))
            return
        computation.indexes.append(indexes.tolist())
        computation.commands.append(Command(CT.kAddRows, value_submatrix, input_submatrix,
                                            len(computation.indexes) - 1, alpha=alpha))

    # -- backward ------------------------------------------------------------------------------
    def compile_backward(self, step, computation):
        info = self.steps[step]
        node_type = int(self.nnet.nodes[info.node_index].node_type)
        commands = computation.commands
        if node_type == kInput:
            if info.deriv != 0:
                commands.append(Command(CT.kProvideOutput, info.deriv, info.node_index))
            if not self._is_input_step(step + 1):
                commands.append(Command(CT.kNoOperationPermanent))
        elif node_type == kDimRange:
            pass
        elif node_type == kComponent:
            self._backward_component(step, computation)
        elif node_type == kDescriptor:
            if self.nnet.is_output_node(info.node_index) and info.deriv > 0:
                commands.append(Command(CT.kAcceptInput, info.deriv, info.node_index))
            for part in range(len(info.value_parts)):
                self._backward_sum_descriptor(step, part, computation)
        else:
            raise ComputationError("invalid node type")

    def _backward_component(self, step, computation):
        info = self.steps[step]
        input_info = self.steps[step - 1]
        node = self.nnet.nodes[info.node_index]
        component = self.nnet.get_component(node.component_index)
        props = component.properties()
        input_sub = input_info.value if props & kBackpropNeedsInput else 0
        output_sub = info.value if props & kBackpropNeedsOutput else 0
        memo = step if props & kUsesMemo else 0
        if not (info.deriv > 0 and (input_info.deriv > 0 or props & kUpdatableComponent)):
            raise ComputationError("internal error: backprop for component %s without "
                                   "derivatives" % self.nnet.node_names[info.node_index])
        computation.commands.append(Command(CT.kBackprop, node.component_index,
                                            info.precomputed_indexes_index, input_sub,
                                            output_sub, info.deriv, input_info.deriv, memo))

    def _backward_sum_descriptor(self, step, part, computation):
        info = self.steps[step]
        deriv_submatrix = info.deriv_parts[part]
        descriptor = self.nnet.nodes[info.node_index].descriptor.part(part)
        deriv_of_step = self._deriv_of_step
        for alpha, (row_ptr, loc_steps, loc_rows) in self._split_by_scale(
                descriptor, info.input_locations_list[part]):
            firsts = deriv_of_step[loc_steps]
            keep = firsts > 0
            if not keep.all():
                # inputs without a derivative matrix get no derivative
                num_rows = len(row_ptr) - 1
                row_of = np.repeat(np.arange(num_rows), np.diff(row_ptr))
                row_ptr = _row_ptr(row_of[keep], num_rows)
                firsts = firsts[keep]
                loc_rows = loc_rows[keep]
            for pairs in split_locations.split_locations_backward_csr(row_ptr, firsts, loc_rows):
                converted = split_locations.convert_pairs_to_indexes(pairs)
                if converted is not None:
                    self._backward_from_indexes(deriv_submatrix, int(converted[0]), alpha,
                                                np.asarray(converted[1], dtype=np.int32),
                                                computation)
                else:
                    # Kaldi checks an (always empty) sorted copy here, so multi-source
                    # pieces always become kAddToRowsMulti.
                    computation.indexes_multi.append(_pair_list(pairs))
                    computation.commands.append(Command(CT.kAddToRowsMulti, deriv_submatrix,
                                                        len(computation.indexes_multi) - 1,
                                                        alpha=alpha))

    def _backward_from_indexes(self, deriv_submatrix, input_deriv_submatrix, alpha, indexes,
                               computation):
        num_rows = computation.submatrices[deriv_submatrix].num_rows
        input_rows = computation.submatrices[input_deriv_submatrix].num_rows
        if len(indexes) != num_rows:
            raise ComputationError("internal error: index vector size mismatch in backprop")
        if input_rows == num_rows and _is_identity(indexes):
            computation.commands.append(Command(CT.kMatrixAdd, input_deriv_submatrix,
                                                deriv_submatrix, alpha=alpha))
            return
        if input_rows >= num_rows:
            reverse = _reverse_indexes(indexes, input_rows)
            if reverse is not None:
                computation.indexes.append(reverse.tolist())
                computation.commands.append(Command(CT.kAddRows, input_deriv_submatrix,
                                                    deriv_submatrix, len(computation.indexes) - 1,
                                                    alpha=alpha))
                return
        ranges = split_locations.contiguous_ranges(indexes)
        if ranges is not None:
            ranges = list(ranges)
            if len(ranges) != input_rows:
                if len(ranges) > input_rows:
                    raise ComputationError("internal error: row ranges exceed the input rows")
                ranges.extend([(-1, -1)] * (input_rows - len(ranges)))
            computation.indexes_ranges.append(ranges)
            computation.commands.append(Command(CT.kAddRowRanges, input_deriv_submatrix,
                                                deriv_submatrix,
                                                len(computation.indexes_ranges) - 1,
                                                alpha=alpha))
            return
        raise ComputationError("this backprop case is not implemented (as in Kaldi): a "
                               "descriptor's rows repeat an input row non-contiguously")

    # -- deallocation and debug info ----------------------------------------------------------
    def deallocate_matrices(self, whole, step_to_segment, computation):
        nnet = self.nnet
        will_destroy = [True] * len(computation.matrices)
        for step, info in enumerate(self.steps):
            request = self.requests[step_to_segment[step]]
            if nnet.is_output_node(info.node_index):
                will_destroy[computation.submatrices[info.value].matrix_index] = False
            elif nnet.is_input_node(info.node_index):
                name = nnet.node_names[info.node_index]
                has_deriv = None
                for spec in request.inputs:
                    if spec.name == name:
                        has_deriv = spec.has_deriv
                        break
                if has_deriv is None:
                    raise ComputationError("internal error: input %s not in request" % name)
                if has_deriv:
                    will_destroy[computation.submatrices[info.deriv].matrix_index] = False
        for m in range(1, len(computation.matrices)):
            if will_destroy[m]:
                computation.commands.append(Command(CT.kDeallocMatrix, whole[m]))

    def output_debug_info(self, computation):
        computation.matrix_debug_info = debug = [MatrixDebugInfo()
                                                 for _ in computation.matrices]
        for step, info in enumerate(self.steps):
            if info.value == 0 or not computation.is_whole_matrix(info.value):
                continue
            value_matrix = computation.submatrices[info.value].matrix_index
            deriv_matrix = 0
            if info.deriv != 0 and computation.is_whole_matrix(info.deriv):
                deriv_matrix = computation.submatrices[info.deriv].matrix_index
            entry = debug[value_matrix]
            entry.is_deriv = False
            if entry.cindexes:
                continue  # a whole-matrix dim-range alias of an existing matrix
            entry.cindexes = self.data.step_cindexes(step, info.node_index)
            if deriv_matrix != 0:
                d = debug[deriv_matrix]
                d.is_deriv = True
                d.cindexes = list(entry.cindexes)


def _row_ptr(row_of, num_rows):
    """CSR row pointers for entries whose (sorted) row numbers are ``row_of``."""
    ptr = np.zeros(num_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_of, minlength=num_rows), out=ptr[1:])
    return ptr


def _is_identity(indexes):
    return bool(np.array_equal(indexes, np.arange(len(indexes), dtype=indexes.dtype)))


def _reverse_indexes(indexes, input_rows):
    """Kaldi's reversed row mapping for backprop kAddRows: None if a source
    row repeats; ComputationError if an index is out of range."""
    valid = indexes >= 0
    targets = indexes[valid]
    if len(indexes) and (indexes.min() < -1 or indexes.max() >= input_rows):
        raise ComputationError("internal error: row index out of range in backprop")
    if len(np.unique(targets)) != len(targets):
        return None
    reverse = np.full(input_rows, -1, dtype=np.int32)
    reverse[targets] = np.nonzero(valid)[0]
    return reverse


def _pair_list(pairs):
    return list(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist()))


def create_computation(nnet, request, output_debug_info=True, use_kernel=True):
    """Compiles ``request`` (or a list of requests, one per segment) for ``nnet``
    into an unoptimized NnetComputation."""
    return Compiler(request, nnet, use_kernel).create_computation(output_debug_info)


def pruned_computation_graph(nnet, request):
    """The pruned ComputationGraph Kaldi's compiler builds for one request,
    as Python lists: ``(cindexes, dependencies)``, ``cindexes[i]`` a (node,
    Index) pair and ``dependencies[i]`` the ids of the cindexes it uses (after
    pruning: IfDefined/Failover terms and optional component inputs that are
    not computable are left out). Raises ComputationError, naming the
    Cindexes, if an output is not computable."""
    builder = computation_graph_builder(nnet)
    builder.compute(request)
    if not builder.all_outputs_are_computable():
        raise builder.not_computable_error()
    builder.prune()
    graph = builder.graph
    if isinstance(builder, ComputationGraphBuilder):
        return list(graph.cindexes), [list(d) for d in graph.dependencies]
    return graph.cindexes_list, graph.dependencies_list
