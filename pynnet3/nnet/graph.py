"""A network as a directed graph of its nodes (Kaldi's nnet-graph.h):
which nodes depend on which, strongly connected components (Tarjan), the
topological order of the components, the computation epochs, and cycles.

- :func:`nnet_to_directed_graph`: graph[i] lists the nodes that read node i;
- :func:`find_sccs`, :func:`make_scc_graph`, :func:`compute_top_sort_order`:
  Kaldi's algorithms, in Kaldi's output order;
- :func:`compute_nnet_computation_epochs`: the nodes grouped into strongly
  connected components numbered in a topological order, so a node of a later
  epoch never feeds one of an earlier epoch (a recurrent layer is one epoch);
- :func:`find_cycle`, :func:`nnet_is_recurrent`: cycles of a graph.
"""

from ..errors import NnetError
from .node import kComponent, kDescriptor, kDimRange, kInput

__all__ = ["nnet_to_directed_graph", "find_sccs", "make_scc_graph", "compute_top_sort_order",
           "compute_nnet_computation_epochs", "find_cycle", "nnet_is_recurrent"]


def nnet_to_directed_graph(nnet):
    """For each node, the nodes that directly depend on it (Kaldi's NnetToDirectedGraph)."""
    num_nodes = len(nnet.nodes)
    graph = [[] for _ in range(num_nodes)]
    for n, node in enumerate(nnet.nodes):
        t = int(node.node_type)
        if t == kInput:
            deps = []
        elif t == kDescriptor:
            deps = list(node.descriptor.get_node_dependencies([]))
        elif t == kComponent:
            deps = [n - 1]
        elif t == kDimRange:
            deps = [node.node_index]
        else:
            raise NnetError("node %s has an invalid node type" % nnet.node_names[n])
        for dep in sorted(set(deps)):
            if not 0 <= dep < num_nodes:
                raise NnetError("node %s depends on invalid node %d" % (nnet.node_names[n], dep))
            graph[dep].append(n)
    return graph


def find_sccs(graph):
    """Tarjan's strongly connected components, in Kaldi's output order
    (the recursive algorithm, run with an explicit stack)."""
    num = len(graph)
    index = [-1] * num
    lowlink = [-1] * num
    on_stack = [False] * num
    stack = []
    sccs = []
    counter = 0
    for root in range(num):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        index[root] = lowlink[root] = counter
        counter += 1
        on_stack[root] = True
        stack.append(root)
        while work:
            node, i = work[-1]
            arcs = graph[node]
            if i < len(arcs):
                work[-1] = (node, i + 1)
                nxt = arcs[i]
                if index[nxt] == -1:
                    index[nxt] = lowlink[nxt] = counter
                    counter += 1
                    on_stack[nxt] = True
                    stack.append(nxt)
                    work.append((nxt, 0))
                elif on_stack[nxt]:
                    lowlink[node] = min(lowlink[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                lowlink[parent] = min(lowlink[parent], lowlink[node])
            if index[node] == lowlink[node]:
                scc = []
                while True:
                    popped = stack.pop()
                    on_stack[popped] = False
                    scc.append(popped)
                    if popped == node:
                        break
                sccs.append(scc)
    return sccs


def make_scc_graph(graph, sccs):
    node_to_scc = [0] * len(graph)
    for i, scc in enumerate(sccs):
        for node in scc:
            node_to_scc[node] = i
    scc_graph = []
    for i, scc in enumerate(sccs):
        arcs = set()
        for node in scc:
            for dest in graph[node]:
                if node_to_scc[dest] != i:
                    arcs.add(node_to_scc[dest])
        scc_graph.append(sorted(arcs))
    return scc_graph


def compute_top_sort_order(graph):
    """node -> position in Kaldi's DFS-based topological order."""
    num = len(graph)
    visited = [False] * num
    in_progress = [False] * num
    reversed_order = []
    for root in range(num):
        if visited[root]:
            continue
        in_progress[root] = True
        work = [(root, 0)]
        while work:
            node, i = work[-1]
            arcs = graph[node]
            if i < len(arcs):
                work[-1] = (node, i + 1)
                nxt = arcs[i]
                if in_progress[nxt]:
                    raise NnetError("Cycle detected when computing the topological "
                                    "sorting order")
                if not visited[nxt]:
                    in_progress[nxt] = True
                    work.append((nxt, 0))
                continue
            work.pop()
            in_progress[node] = False
            visited[node] = True
            reversed_order.append(node)
    order = [0] * num
    for i, node in enumerate(reversed_order):
        order[node] = num - i - 1
    return order


# Epochs of the networks compiled last: (structure key, node -> epoch). The
# epochs depend only on each node's type, Descriptor and dim-range source;
# Descriptors are immutable (and held here, so their ids are not reused), so
# an equal key means equal epochs. Compiling one network many times is the
# common case; this saves the graph walk (~1 ms for a 200-node network).
_EPOCH_CACHE = []


_EPOCH_CACHE_SIZE = 8


def compute_nnet_computation_epochs(nnet):
    """node -> epoch index (Kaldi's ComputeNnetComputationEpochs); a new list
    the caller may modify."""
    key = tuple([(node.node_type, node.descriptor, node.node_index) for node in nnet.nodes])
    for cached_key, epochs in _EPOCH_CACHE:
        if cached_key == key:
            return list(epochs)
    epochs = _compute_nnet_computation_epochs(nnet)
    if len(_EPOCH_CACHE) >= _EPOCH_CACHE_SIZE:
        del _EPOCH_CACHE[0]
    _EPOCH_CACHE.append((key, list(epochs)))
    return epochs


def _compute_nnet_computation_epochs(nnet):
    graph = nnet_to_directed_graph(nnet)
    sccs = find_sccs(graph)
    scc_order = compute_top_sort_order(make_scc_graph(graph, sccs))
    node_to_epoch = [0] * len(graph)
    for i, scc in enumerate(sccs):
        for node in scc:
            node_to_epoch[node] = scc_order[i]
    return node_to_epoch


def find_cycle(graph):
    """A list of nodes forming a cycle in ``graph`` (adjacency lists), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = [WHITE] * len(graph)
    for root in range(len(graph)):
        if color[root] != WHITE:
            continue
        stack = [(root, iter(graph[root]))]
        path = [root]
        color[root] = GREY
        while stack:
            node, it = stack[-1]
            advanced = False
            for nxt in it:
                if color[nxt] == GREY:
                    return path[path.index(nxt):]
                if color[nxt] == WHITE:
                    color[nxt] = GREY
                    stack.append((nxt, iter(graph[nxt])))
                    path.append(nxt)
                    advanced = True
                    break
            if not advanced:
                color[node] = BLACK
                stack.pop()
                path.pop()
    return None


def nnet_is_recurrent(nnet):
    """Kaldi's NnetIsRecurrent: whether the node graph has a cycle."""
    return find_cycle(nnet_to_directed_graph(nnet)) is not None
