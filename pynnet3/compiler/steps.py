"""Ordering a pruned computation graph: phases and steps (the second half of
Kaldi's nnet-computation-graph.cc).

- *Epochs* (:func:`pynnet3.nnet.graph.compute_nnet_computation_epochs`): the
  network's nodes grouped into strongly connected components, in a
  topological order; the phases are computed epoch by epoch.
- *Phases* (:func:`compute_computation_phases`): within each epoch, the
  cindex_ids in rounds: a phase holds everything whose same-epoch dependencies
  were all computed in earlier phases. Supplied inputs form epoch 0.
- *Steps* (:class:`ComputationStepsComputer`): each phase split by node
  ("sub-phases", sorted in Kaldi's Cindex order: node, then t, x, n), and each
  sub-phase turned into steps obeying Kaldi's rules: (a) an input or output is
  one step in the request's order; (b) a component step is preceded by its
  component-input (descriptor) step with the same Indexes (simple components)
  or with the sorted inputs the component uses, possibly reordered and padded
  by the component's ``reorder_indexes`` (kReordersIndexes); (c) a dim-range
  step copies the Indexes of its source node's step, once per source step.

Guarantees: the same epochs, phases, steps and locations as Kaldi, including
the order of dim-range steps, which Kaldi takes from iterating a
``std::unordered_set`` (reproduced by StdUnorderedIntSet).
"""

import numpy as np

from .. import _fast
from ..common.index import Index, kNoTime
from ..common.index_io import print_cindex
from ..components.base import ComponentProperty
from ..errors import ComputationError
from ..nnet.graph import compute_nnet_computation_epochs
from ..nnet.node import kComponent, kDimRange, kInput
from .split_locations import StdUnorderedIntSet

kSimpleComponent = ComponentProperty.kSimpleComponent
kReordersIndexes = ComponentProperty.kReordersIndexes


def cindex_sort_key(cindex):
    """Kaldi's Cindex order: node, then the Index's own order t, x, n."""
    node, index = cindex
    return (node, index[1], index[2], index[0])


# -- nnet-graph.cc ---------------------------------------------------------------------


# -- phases ---------------------------------------------------------------------------------

def compute_epoch_info(nnet, graph):
    """(cindex_id -> segment-and-epoch key, epochs per segment, epoch_is_trivial)."""
    node_to_epoch = [e + 1 for e in compute_nnet_computation_epochs(nnet)]
    num_epochs = 1 + max(node_to_epoch)
    epoch_num_nodes = [0] * num_epochs
    for e in node_to_epoch:
        epoch_num_nodes[e] += 1
    epoch_is_trivial = [c <= 1 for c in epoch_num_nodes]
    cindexes, is_input = graph.cindexes, graph.is_input
    key = [0] * len(cindexes)
    epochs_per_segment = []
    start = 0
    for segment, end in enumerate(graph.segment_ends):
        epochs = [[] for _ in range(num_epochs)]
        for c in range(start, end):
            e = 0 if is_input[c] else node_to_epoch[cindexes[c][0]]
            key[c] = e + segment * num_epochs
            epochs[e].append(c)
        epochs_per_segment.append(epochs)
        start = end
    return key, epochs_per_segment, epoch_is_trivial


def _phases_for_epoch(this_epoch, deps_subset, depend_on_subset, trivial, phase_index, phases):
    if not this_epoch:
        return
    if trivial:
        this_phase = list(this_epoch)
    else:
        this_phase = [c for c in this_epoch if not deps_subset[c]]
    if not this_phase:
        raise ComputationError("Trying to process computation with cycles")
    while this_phase:
        phases.append(this_phase)
        if trivial:
            return
        cur = len(phases) - 1
        candidates = set()
        for c in this_phase:
            phase_index[c] = cur
            candidates.update(depend_on_subset[c])
        this_phase = [c for c in sorted(candidates)
                      if all(phase_index[d] >= 0 for d in deps_subset[c])]
        if candidates and not this_phase:
            raise ComputationError(
                "Your model has a type of recurrence that cannot be computed. E.g. if "
                "x[t] depends on both x[t+1] and x[t-1]... no order of computation will work.")


def compute_computation_phases(nnet, graph):
    """Kaldi's ComputeComputationPhases: for each segment, a list of phases,
    each a sorted list of cindex_ids."""
    key, epochs_per_segment, epoch_is_trivial = compute_epoch_info(nnet, graph)
    num = len(graph.cindexes)
    deps_subset = []
    depend_on_subset = [[] for _ in range(num)]
    for c in range(num):
        k = key[c]
        subset = [d for d in graph.dependencies[c] if key[d] == k]
        deps_subset.append(subset)
        for d in subset:
            depend_on_subset[d].append(c)
    phase_index = [-1] * num
    ans = []
    for epochs in epochs_per_segment:
        phases = []
        for e, this_epoch in enumerate(epochs):
            _phases_for_epoch(this_epoch, deps_subset, depend_on_subset, epoch_is_trivial[e],
                              phase_index, phases)
        ans.append(phases)
    if sum(len(p) for phases in ans for p in phases) != num:
        raise ComputationError("internal error: not every cindex was assigned a phase")
    return ans


# -- steps ------------------------------------------------------------------------------------

class ComputationStepsComputer:
    """Kaldi's ComputationStepsComputer: fills ``steps`` (lists of cindex_ids)
    and ``locations`` (cindex_id -> (step, row)); may add cindexes to the graph
    (dim-range padding, component padding)."""

    def __init__(self, nnet, graph, steps, locations):
        self.nnet = nnet
        self.graph = graph
        self.steps = steps
        self.locations = locations
        del steps[:]
        locations[:] = [(-1, -1)] * len(graph.cindexes)
        self.dim_range_nodes = set()
        self._node_type = [int(n.node_type) for n in nnet.nodes]

    def compute_for_segment(self, request, phases):
        for phase in phases:
            for sub_phase in self._split_into_sub_phases(phase):
                self._process_sub_phase(request, sub_phase)

    def _split_into_sub_phases(self, phase):
        cindexes = self.graph.cindexes
        phase_cindexes = sorted((cindexes[c] for c in phase), key=cindex_sort_key)
        sub_phases = []
        cur_node = None
        for cindex in phase_cindexes:
            if cindex[0] != cur_node:
                cur_node = cindex[0]
                sub_phases.append([])
            sub_phases[-1].append(cindex)
        return sub_phases

    def _process_sub_phase(self, request, sub_phase):
        node_index = sub_phase[0][0]
        nnet = self.nnet
        node_type = self._node_type[node_index]
        if node_type == kComponent:
            self._process_component_step(sub_phase)
        elif node_type == kInput:
            self._process_io_step(request, False, sub_phase)
        elif nnet.is_output_node(node_index):
            self._process_io_step(request, True, sub_phase)
        elif node_type == kDimRange:
            self._process_dim_range_sub_phase(sub_phase)
        elif nnet.is_component_input_node(node_index):
            return  # handled together with the component's own step
        else:
            raise ComputationError("unknown node type for node %s" % nnet.node_names[node_index])

    def _process_io_step(self, request, is_output, sub_phase):
        io_node = sub_phase[0][0]
        name = self.nnet.node_names[io_node]
        specs = request.outputs if is_output else request.inputs
        io_index = -1
        for i, spec in enumerate(specs):
            if spec.name == name:
                io_index = i
        if io_index < 0:
            raise ComputationError("node %s is not in the request's %s" %
                                   (name, "outputs" if is_output else "inputs"))
        io_cindexes = [(io_node, Index(*i)) for i in specs[io_index].indexes]
        if len(io_cindexes) != len(sub_phase):
            raise ComputationError("internal error: the %s step for node %s has %d cindexes, "
                                   "the request %d" % ("output" if is_output else "input", name,
                                                       len(sub_phase), len(io_cindexes)))
        self.add_step(io_cindexes)

    def add_step(self, cindexes, add_if_absent=False):
        """Appends a step made of ``cindexes`` (Cindex tuples) and returns its index."""
        graph = self.graph
        locations = self.locations
        step_index = len(self.steps)
        step = []
        if not add_if_absent:
            get = graph.get_cindex_id
            for row, cindex in enumerate(cindexes):
                cid = get(cindex)
                if cid < 0:
                    raise ComputationError("internal error: step needs %s, which is not in "
                                           "the computation graph"
                                           % print_cindex(cindex, self.nnet.node_names))
                step.append(cid)
                locations[cid] = (step_index, row)
        else:
            for row, cindex in enumerate(cindexes):
                cid, added = graph.get_or_add(cindex, False)
                step.append(cid)
                if added:
                    locations.append((step_index, row))
                else:
                    locations[cid] = (step_index, row)
        self.steps.append(step)
        return step_index

    def add_step_ids(self, cindex_ids):
        step_index = len(self.steps)
        for row, cid in enumerate(cindex_ids):
            self.locations[cid] = (step_index, row)
        self.steps.append(list(cindex_ids))
        return step_index

    def _process_component_step(self, step):
        nnet, graph = self.nnet, self.graph
        node_index = step[0][0]
        input_node = node_index - 1
        component = nnet.get_component(nnet.nodes[node_index].component_index)
        props = component.properties()
        if props & kSimpleComponent:
            self.add_step([(input_node, c[1]) for c in step])
            self.add_step(step)
            return
        step_ids = [graph.get_cindex_id(c) for c in step]
        inputs = set()
        for c in step_ids:
            inputs.update(graph.dependencies[c])
        input_step = sorted((graph.cindexes[c] for c in inputs), key=cindex_sort_key)
        if props & kReordersIndexes:
            input_indexes = [c[1] for c in input_step]
            output_indexes = [c[1] for c in step]
            orig_size = len(input_indexes) + len(output_indexes)
            input_indexes, output_indexes = component.reorder_indexes(input_indexes,
                                                                      output_indexes)
            added_padding = orig_size != len(input_indexes) + len(output_indexes)
            self.add_step([(input_node, Index(*i)) for i in input_indexes], added_padding)
            self.add_step([(node_index, Index(*i)) for i in output_indexes], added_padding)
        else:
            self.add_step(input_step)
            self.add_step_ids(step_ids)

    def _process_dim_range_sub_phase(self, sub_phase):
        graph = self.graph
        dim_range_node = sub_phase[0][0]
        source_node = self.nnet.nodes[dim_range_node].node_index
        source_steps = StdUnorderedIntSet()
        cur = -1
        for _, index in sub_phase:
            cid = graph.get_cindex_id((source_node, index))
            if cid < 0:
                raise ComputationError("internal error: dim-range node %s needs a missing input"
                                       % self.nnet.node_names[dim_range_node])
            step = self.locations[cid][0]
            if step < 0:
                raise ComputationError("internal error: dim-range node %s: its input has no "
                                       "step yet" % self.nnet.node_names[dim_range_node])
            if step != cur:
                cur = step
                source_steps.add(step)
        cindexes = graph.cindexes
        for step in list(source_steps):
            key = (step, dim_range_node)
            if key in self.dim_range_nodes:
                continue
            self.dim_range_nodes.add(key)
            self.add_step([(dim_range_node, cindexes[c][1]) for c in self.steps[step]], True)

    def check(self):
        """Kaldi's Check(): every cindex is located where its step says (blank,
        kNoTime cindexes used for padding may appear in several places)."""
        steps, cindexes = self.steps, self.graph.cindexes
        if len(self.locations) != len(cindexes):
            raise ComputationError("internal error computing steps: %d locations for %d "
                                   "cindexes" % (len(self.locations), len(cindexes)))
        for c, (step, row) in enumerate(self.locations):
            if not (step >= 0 and row >= 0 and steps[step][row] == c):
                if cindexes[c][1][1] != kNoTime:
                    raise ComputationError("internal error computing computation steps at %s"
                                           % print_cindex(cindexes[c], self.nnet.node_names))


# -- the StepsData interface (Python twin of pynnet3._fast.steps_kernel.FastStepsData) ---------------

class PyStepsData:
    """Steps and locations of a pruned Python graph, queried per step by the
    Compiler. Same interface and results as the Cython FastStepsData."""

    def __init__(self, nnet, graph, steps, locations, step_to_segment):
        self.nnet = nnet
        self.graph = graph
        self.steps = steps
        self.locations = locations
        self.step_to_segment = step_to_segment

    @classmethod
    def compute(cls, nnet, graph, requests):
        """Phases and steps for every segment of a pruned graph."""
        phases_per_segment = compute_computation_phases(nnet, graph)
        steps = []
        locations = []
        step_to_segment = []
        computer = ComputationStepsComputer(nnet, graph, steps, locations)
        for segment, request in enumerate(requests):
            computer.compute_for_segment(request, phases_per_segment[segment])
            while len(step_to_segment) < len(steps):
                step_to_segment.append(segment)
        computer.check()
        return cls(nnet, graph, steps, locations, step_to_segment)

    def num_steps(self):
        return len(self.steps)

    def step_size(self, s):
        return len(self.steps[s])

    def step_node(self, s):
        step = self.steps[s]
        return self.graph.cindexes[step[0]][0] if step else -1

    def step_is_input(self, s):
        return self.graph.is_input[self.steps[s][0]]

    def step_dependency_steps(self, s):
        deps_of = self.graph.dependencies
        return sorted({self.locations[d][0] for c in self.steps[s] for d in deps_of[c]})

    def dim_range_source_step(self, s):
        for c in self.steps[s]:
            deps = self.graph.dependencies[c]
            if deps:
                return self.locations[deps[0]][0]
        return -1

    def step_indexes(self, s):
        cindexes = self.graph.cindexes
        return [cindexes[c][1] for c in self.steps[s]]

    def step_cindexes(self, s, node):
        cindexes = self.graph.cindexes
        return [(node, cindexes[c][1]) for c in self.steps[s]]

    def input_locations(self, s, part_index):
        """For each row of step s, the sorted (step, row) locations of the
        inputs that part ``part_index`` of its Descriptor sums, as CSR arrays
        (row_ptr int64, loc_steps int32, loc_rows int32)."""
        node = self.step_node(s)
        descriptor = self.nnet.nodes[node].descriptor.part(part_index)
        ids = self.graph._ids
        cindexes = self.graph.cindexes
        location = self.locations

        def exists(cindex):
            return (cindex[0], cindex[1]) in ids

        row_ptr = [0]
        loc_steps = []
        loc_rows = []
        for c in self.steps[s]:
            index = cindexes[c][1]
            if index[1] != kNoTime:
                used = []
                if not descriptor.is_computable(index, exists, used):
                    raise ComputationError("internal error: descriptor of node %s not "
                                           "computable at %s while compiling"
                                           % (self.nnet.node_names[node], tuple(index)))
                used.sort(key=cindex_sort_key)
                for u in used:
                    step, row = location[ids[(u[0], u[1])]]
                    loc_steps.append(step)
                    loc_rows.append(row)
            row_ptr.append(len(loc_steps))
        return (np.asarray(row_ptr, dtype=np.int64), np.asarray(loc_steps, dtype=np.int32),
                np.asarray(loc_rows, dtype=np.int32))


# The kernel (pynnet3/_fast/steps_kernel.pyx): the compiler's kernel builds its
# FastStepsData. Compiled debug info keeps a step's Cindexes as packed keys
# until they are read (a LazyMatrixDebugInfo whose builder is the kernel's
# cindexes_from_keys); unpack_keys reads such keys as arrays. Both are None
# without the kernel, when no debug info is packed.
_kernel = _fast.load("steps_kernel")
cindexes_from_keys = _kernel.cindexes_from_keys if _kernel is not None else None
unpack_keys = _kernel.unpack_keys if _kernel is not None else None
