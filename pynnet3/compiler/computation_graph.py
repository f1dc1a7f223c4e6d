"""The computation graph and its builder, in plain Python (Kaldi's
nnet-computation-graph.cc, first half).

This is the readable specification of
``pynnet3/_fast/computation_graph_kernel.pyx``; both build the same graph (same cindex_ids, dependencies and computable flags), which a
test checks on every reference case.

A :class:`ComputationGraph` numbers the Cindexes (node, Index) a computation
involves (*cindex_ids*) and records, for each, whether the user supplies it
(``is_input``) and which cindex_ids it directly depends on. The
:class:`ComputationGraphBuilder` builds it backwards from the requested
outputs, breadth first, deciding for each Cindex whether it is computable from
the supplied inputs. To stay finite on recurrent networks it keeps a *usable
count* per Cindex (1 for requested outputs, else the number of usable,
not-known-uncomputable Cindexes that depend on it) and never expands a
Cindex whose count is zero (state kWillNotCompute). ``prune()`` then keeps only
the dependencies actually used (Failover/IfDefined may leave some unused) and
the Cindexes needed for the outputs.

Guarantees: identical results to Kaldi's builder, including the order in which
cindex_ids are assigned (queues are processed exactly as Kaldi does, LIFO within
one distance level; the recursive usable-count updates are done with an explicit
stack in the same order). If an output is not computable,
:meth:`ComputationGraphBuilder.explain_why_not_computable` produces Kaldi's
explanation and :func:`~pynnet3.compiler.computability.not_computable_error`
a ComputationError that names the outputs and the input Cindexes that were
missing.

:func:`computation_graph_builder` gives the kernel's builder when it is built
(the one ``pynnet3._fast.load`` policy), else this module's.
"""

from .. import _fast
from ..common.index import Index
from ..common.index_io import print_cindex
from ..errors import ComputationError
from ..nnet.node import kComponent, kDescriptor, kDimRange, kInput
from .computability import (COMPUTABLE_NAMES, MAX_DISTANCE, kComputable, kNotComputable,
                            kUnknown, not_computable_error)
from .time_bounds import window_input_bounds

_kernel = _fast.load("computation_graph_kernel")


class ComputationGraph:
    """Cindexes of a computation, numbered, with inputs flags and dependencies."""

    __slots__ = ("cindexes", "is_input", "dependencies", "segment_ends", "_ids")

    def __init__(self):
        self.cindexes = []        # cindex_id -> (node, Index)
        self.is_input = []        # cindex_id -> bool
        self.dependencies = []    # cindex_id -> list of cindex_id
        self.segment_ends = []
        self._ids = {}            # (node, Index) -> cindex_id

    def __len__(self):
        return len(self.cindexes)

    def get_or_add(self, cindex, is_input):
        """(cindex_id, is_new): the id of ``cindex``, adding it if absent."""
        cid = self._ids.get(cindex)
        if cid is not None:
            return cid, False
        cid = len(self.cindexes)
        self._ids[cindex] = cid
        self.cindexes.append(cindex)
        self.is_input.append(is_input)
        self.dependencies.append([])
        return cid, True

    def get_cindex_id(self, cindex):
        """The id of ``cindex`` or -1 if it is not in the graph."""
        return self._ids.get(cindex, -1)

    def renumber(self, start, keep):
        """Keeps cindex_ids c >= start with keep[c - start] true, renumbering
        them in order (Kaldi's ComputationGraph::Renumber)."""
        old_num = len(self.cindexes)
        old2new = [-1] * (old_num - start)
        new2old = []
        for j, k in enumerate(keep):
            if k:
                old2new[j] = len(new2old) + start
                new2old.append(j + start)
        if len(new2old) == old_num - start:
            return
        ids = self._ids
        for old in range(start, old_num):
            new = old2new[old - start]
            cindex = self.cindexes[old]
            if new == -1:
                del ids[cindex]
            elif new != old:
                ids[cindex] = new
        cindexes, is_input, deps = self.cindexes, self.is_input, self.dependencies
        for c, d in enumerate(new2old, start):
            cindexes[c] = cindexes[d]
            is_input[c] = is_input[d]
            new_deps = []
            for dep in deps[d]:
                if dep < start:
                    new_deps.append(dep)
                else:
                    nd = old2new[dep - start]
                    if nd == -1:
                        raise ComputationError("internal error: dependency on a removed "
                                               "cindex-id while pruning the graph")
                    new_deps.append(nd)
            deps[c] = new_deps
        new_num = start + len(new2old)
        del cindexes[new_num:]
        del is_input[new_num:]
        del deps[new_num:]


class ComputationGraphBuilder:
    """Kaldi's ComputationGraphBuilder (single- or multi-segment)."""

    def __init__(self, nnet, graph=None):
        self.nnet = nnet
        self.graph = graph if graph is not None else ComputationGraph()
        if len(self.graph):
            raise ComputationError("ComputationGraphBuilder needs an empty graph")
        self.request = None
        self.requests = []
        self._window_bounds = {}
        self.depend_on_this = []
        self.computable = []
        self.usable_count = []
        self.queued = []
        self.dependencies_computed = []
        self.current_distance = -1
        self.current_queue = []
        self.next_queue = []
        nodes = nnet.nodes
        self._node_type = [int(node.node_type) for node in nodes]
        self._is_output = [nnet.is_output_node(i) for i in range(len(nodes))]

    # -- bookkeeping ---------------------------------------------------------------
    def _add_cindex_id(self):
        self.depend_on_this.append([])
        self.computable.append(kUnknown)
        self.usable_count.append(0)
        self.queued.append(False)
        self.dependencies_computed.append(False)

    def _request_node(self, name, what):
        """The index of the node a request's input or output (``what``) names."""
        n = self.nnet.get_node_index(name)
        if n == -1:
            raise ComputationError("Network has no %s with name %s" % (what, name))
        return n

    def _add_inputs(self):
        graph = self.graph
        num_added = 0
        for spec in self.request.inputs:
            n = self._request_node(spec.name, "input")
            if self._node_type[n] not in (kInput, kComponent):
                raise ComputationError("request input '%s' is not an input or component node;"
                                       " inputs to the graph are only allowed for those"
                                       % spec.name)
            for index in spec.indexes:
                cid, is_new = graph.get_or_add((n, Index(*index)), True)
                if not is_new:
                    raise ComputationError("request input '%s' lists index %s more than once"
                                           % (spec.name, tuple(index)))
                self._add_cindex_id()
                self.computable[cid] = kComputable
                num_added += 1
        if num_added == 0:
            raise ComputationError("computation request has no input indexes")

    def _add_outputs(self):
        graph = self.graph
        num_added = 0
        for spec in self.request.outputs:
            n = self._request_node(spec.name, "output")
            for index in spec.indexes:
                cid, is_new = graph.get_or_add((n, Index(*index)), False)
                if not is_new:
                    raise ComputationError("request output '%s' lists index %s more than "
                                           "once (or it is also an input)"
                                           % (spec.name, tuple(index)))
                self._add_cindex_id()
                self.usable_count[cid] = 1
                self.queued[cid] = True
                self.next_queue.append(cid)
                num_added += 1
        if num_added == 0:
            raise ComputationError("Cannot process computation request with no outputs")
        self.current_distance = 0
        self.current_queue, self.next_queue = self.next_queue, []

    # -- the algorithm ---------------------------------------------------------------
    def compute(self, request):
        """Builds the graph for ``request`` (Kaldi's Compute()); call
        all_outputs_are_computable() and then prune()."""
        if self.request is not None and not self.graph.segment_ends:
            raise ComputationError("call compute(), prune(), compute(), prune(), ...")
        self.request = request
        self.requests.append(request)
        self._window_bounds = window_input_bounds(self.nnet, self.requests)
        self._add_inputs()
        self._add_outputs()
        while self.current_distance < MAX_DISTANCE:
            self._build_graph_one_iter()
            if not self.current_queue:
                break
        if self.current_distance == MAX_DISTANCE:
            raise ComputationError("Loop detected while building computation graph (bad "
                                   "network topology?)")

    def _build_graph_one_iter(self):
        queue = self.current_queue
        queued = self.queued
        while queue:
            cid = queue.pop()
            queued[cid] = False
            if not self.dependencies_computed[cid] and self.usable_count[cid] != 0:
                self.dependencies_computed[cid] = True
                self._add_dependencies(cid)
                if not queued[cid]:
                    queued[cid] = True
                    self.next_queue.append(cid)
            elif self.computable[cid] == kUnknown:
                self._update_computable_info(cid)
        self.current_queue, self.next_queue = self.next_queue, []
        self.current_distance += 1

    def _input_cindexes(self, cid):
        """The Cindexes that ``cid`` may depend on (Kaldi's switch in AddDependencies)."""
        node_index, index = self.graph.cindexes[cid]
        node = self.nnet.nodes[node_index]
        node_type = self._node_type[node_index]
        if node_type == kDescriptor:
            return node.descriptor.get_dependencies(index)
        if node_type == kComponent:
            component = self.nnet.get_component(node.component_index)
            inputs = component.get_input_indexes(self.request.misc_info, index)
            bound = self._window_bounds.get(node_index)
            if bound is not None:
                # inputs no request can make computable are left out
                return [(node_index - 1, Index(*i)) for i in inputs
                        if bound[0] <= i[1] <= bound[1]]
            return [(node_index - 1, Index(*i)) for i in inputs]
        if node_type == kDimRange:
            return [(node.node_index, index)]
        return []

    def _add_dependencies(self, cid):
        graph = self.graph
        this_dep = []
        for cindex in self._input_cindexes(cid):
            dep, is_new = graph.get_or_add((cindex[0], Index(*cindex[1])), False)
            this_dep.append(dep)
            if is_new:
                self._add_cindex_id()
                self.queued[dep] = True
                self.next_queue.append(dep)
        this_dep = sorted(set(this_dep))
        graph.dependencies[cid] = this_dep
        for dep in this_dep:
            self.depend_on_this[dep].append(cid)
            self._increment_usable_count(dep)

    def _cindex_set(self, treat_unknown_as_computable):
        """Kaldi's CindexSet over the graph with computable info."""
        get = self.graph._ids.get
        computable = self.computable

        def contains(cindex):
            cid = get((cindex[0], cindex[1]))
            if cid is None:
                return False
            c = computable[cid]
            return c == kComputable or (c == kUnknown and treat_unknown_as_computable)
        return contains

    def _index_set(self, node_id, treat_unknown_as_computable):
        """Kaldi's IndexSet: Indexes x with (node_id, x) computable."""
        get = self.graph._ids.get
        computable = self.computable

        def contains(index):
            cid = get((node_id, Index(*index)))
            if cid is None:
                return False
            c = computable[cid]
            if treat_unknown_as_computable:
                return c == kComputable or c == kUnknown
            return c == kComputable
        return contains

    def _compute_computable_info(self, cid):
        node_index, index = self.graph.cindexes[cid]
        node = self.nnet.nodes[node_index]
        node_type = self._node_type[node_index]
        if node_type == kDescriptor:
            desc = node.descriptor
            if desc.is_computable(index, self._cindex_set(False)):
                return kComputable
            if not desc.is_computable(index, self._cindex_set(True)):
                return kNotComputable
            return kUnknown
        if node_type == kComponent:
            component = self.nnet.get_component(node.component_index)
            misc = self.request.misc_info
            if component.is_computable(misc, index, self._index_set(node_index - 1, False)):
                return kComputable
            if not component.is_computable(misc, index, self._index_set(node_index - 1, True)):
                return kNotComputable
            return kUnknown
        if node_type == kDimRange:
            input_cid = self.graph.get_cindex_id((node.node_index, index))
            return self.computable[input_cid] if input_cid != -1 else kUnknown
        if node_type == kInput:
            return kComputable if self.graph.is_input[cid] else kNotComputable
        raise ComputationError("invalid node type for node %d" % node_index)

    def _update_computable_info(self, cid):
        if self.usable_count[cid] == 0:
            return
        computable = self.computable
        output = self._compute_computable_info(cid)
        computable[cid] = output
        if output != kUnknown:
            queued = self.queued
            for other in self.depend_on_this[cid]:
                if computable[other] == kUnknown and not queued[other]:
                    queued[other] = True
                    self.next_queue.append(other)
            if output == kNotComputable and self.usable_count[cid] != 0:
                for dep in self.graph.dependencies[cid]:
                    self._decrement_usable_count(dep)

    def _increment_usable_count(self, cid):
        """Kaldi's recursive IncrementUsableCount, with an explicit stack: when a
        count goes 0 -> 1 (and the Cindex is not known uncomputable) its
        dependencies are incremented, then it is queued if still unknown."""
        usable, computable = self.usable_count, self.computable
        deps_of = self.graph.dependencies
        usable[cid] += 1
        if usable[cid] != 1 or computable[cid] == kNotComputable:
            return
        stack = [(cid, 0)]
        while stack:
            c, pos = stack[-1]
            deps = deps_of[c]
            descended = False
            while pos < len(deps):
                d = deps[pos]
                pos += 1
                usable[d] += 1
                if usable[d] == 1 and computable[d] != kNotComputable:
                    stack[-1] = (c, pos)
                    stack.append((d, 0))
                    descended = True
                    break
            if descended:
                continue
            stack.pop()
            if computable[c] == kUnknown and not self.queued[c]:
                self.queued[c] = True
                self.next_queue.append(c)

    def _decrement_usable_count(self, cid):
        usable, computable = self.usable_count, self.computable
        deps_of = self.graph.dependencies
        stack = [cid]
        while stack:
            c = stack.pop()
            usable[c] -= 1
            if usable[c] == 0 and computable[c] != kNotComputable:
                # Kaldi recurses in order; decrements commute, so order is immaterial.
                stack.extend(reversed(deps_of[c]))

    # -- results -----------------------------------------------------------------------
    def all_outputs_are_computable(self):
        cindexes = self.graph.cindexes
        is_output = self._is_output
        for cid, c in enumerate(self.computable):
            if c != kComputable and is_output[cindexes[cid][0]]:
                return False
        return True

    def get_computable_info(self):
        """For each request output, a list of bools: which of its Indexes are computable."""
        ans = []
        for spec in self.request.outputs:
            n = self.nnet.get_node_index(spec.name)
            ans.append([self.computable[self.graph.get_cindex_id((n, Index(*i)))] == kComputable
                        for i in spec.indexes])
        return ans

    def _prune_dependencies(self, cid):
        computable, usable = self.computable[cid], self.usable_count[cid]
        graph = self.graph
        if computable == kUnknown and usable != 0:
            raise ComputationError("internal error: usable cindex with unknown "
                                   "computable state after building the graph")
        if computable == kNotComputable or usable == 0:
            graph.dependencies[cid] = []
            return
        node_index, index = graph.cindexes[cid]
        node_type = self._node_type[node_index]
        node = self.nnet.nodes[node_index]
        deps = sorted(graph.dependencies[cid])
        dep_set = set(deps)
        if node_type == kDescriptor:
            used = []
            ok = node.descriptor.is_computable(index, self._cindex_set(False), used)
            used_ids = [graph.get_cindex_id((c[0], c[1])) for c in used]
        elif node_type == kComponent:
            component = self.nnet.get_component(node.component_index)
            used = []
            ok = component.is_computable(self.request.misc_info, index,
                                         self._index_set(node_index - 1, False), used)
            used_ids = [graph.get_cindex_id((node_index - 1, Index(*i))) for i in used]
        elif node_type in (kDimRange, kInput):
            graph.dependencies[cid] = deps
            return
        else:
            raise ComputationError("invalid node type for node %d" % node_index)
        if not ok or any(u == -1 or u not in dep_set for u in used_ids):
            raise ComputationError("internal error pruning the computation graph at %s: "
                                   "making more inputs available changed what is computable"
                                   % print_cindex(graph.cindexes[cid], self.nnet.node_names))
        graph.dependencies[cid] = sorted(set(used_ids))

    def _compute_required_array(self, start):
        graph = self.graph
        num = len(graph.cindexes)
        required = [False] * (num - start)
        is_output = self._is_output
        queue = []
        for c in range(start, num):
            if is_output[graph.cindexes[c][0]]:
                required[c - start] = True
                queue.append(c)
        deps_of = graph.dependencies
        while queue:
            c = queue.pop()
            for d in deps_of[c]:
                if d >= start and not required[d - start]:
                    required[d - start] = True
                    queue.append(d)
        return required

    def prune(self):
        """Removes unused dependencies and unneeded cindex_ids (Kaldi's Prune())."""
        graph = self.graph
        start = graph.segment_ends[-1] if graph.segment_ends else 0
        num = len(graph.cindexes)
        for cid in range(start, num):
            self._prune_dependencies(cid)
        required = self._compute_required_array(start)
        keep = [False] * (num - start)
        for c in range(start, num):
            if required[c - start] or graph.is_input[c]:
                if self.computable[c] != kComputable:
                    raise ComputationError("prune() called when not all outputs are "
                                           "computable")
                keep[c - start] = True
        graph.renumber(start, keep)
        new_num = len(graph.cindexes)
        for name in ("computable", "usable_count", "queued", "dependencies_computed"):
            del getattr(self, name)[start:]
        self.depend_on_this = self.depend_on_this[:start]
        for _ in range(start, new_num):
            self._add_cindex_id()
            self.computable[-1] = kComputable
            self.usable_count[-1] = 1
        graph.segment_ends.append(new_num)

    # -- diagnostics ---------------------------------------------------------------------
    def _cindex_text(self, cid):
        node, (n, t, x) = self.graph.cindexes[cid]
        return "%s(%d, %d, %d)" % (self.nnet.node_names[node], n, t, x)

    def explain_why_not_computable(self, first_cid, max_lines=100):
        """Kaldi's ExplainWhyNotComputable text, and the missing input Cindexes
        (input-node Cindexes the request did not supply) found on the way."""
        graph = self.graph
        lines = ["*** cindex %s is not computable for the following reason: ***"
                 % self._cindex_text(first_cid)]
        queue = [first_cid]
        added = {first_cid}
        missing = []
        head = 0
        while head < len(queue) and head < max_lines:
            cid = queue[head]
            head += 1
            node = graph.cindexes[cid][0]
            if self._node_type[node] == kInput and not graph.is_input[cid]:
                missing.append(cid)
            parts = []
            deps = graph.dependencies[cid]
            for dep in deps:
                parts.append("%s[%s]" % (self._cindex_text(dep),
                                         COMPUTABLE_NAMES[self.computable[dep]]))
                if self.computable[dep] != kComputable and dep not in added:
                    added.add(dep)
                    queue.append(dep)
            lines.append("%s is %s, dependencies: %s"
                         % (self._cindex_text(cid), COMPUTABLE_NAMES[self.computable[cid]],
                            ", ".join(parts)))
        for cid in queue[head:]:
            node = graph.cindexes[cid][0]
            if self._node_type[node] == kInput and not graph.is_input[cid]:
                missing.append(cid)
        return "\n".join(lines), missing

    def not_computable_error(self, max_explain=10):
        """A ComputationError naming the uncomputable outputs and missing inputs."""
        return not_computable_error(self, max_explain)

    def computable_list(self):
        """The ComputableInfo of every cindex_id (same as the Cython builder's)."""
        return self.computable

    def cindex_list(self):
        return self.graph.cindexes


def computation_graph_builder(nnet):
    """A graph builder for ``nnet``: the kernel's FastComputationGraphBuilder
    when it is loaded, else :class:`ComputationGraphBuilder`. Both have the
    same interface and build the same graph."""
    if _kernel is not None:
        return _kernel.FastComputationGraphBuilder(nnet)
    return ComputationGraphBuilder(nnet)
