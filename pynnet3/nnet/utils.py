"""Whole-network utilities (Kaldi's nnet-utils and the structural Nnet methods).

Parameter-level helpers loop over components in order and touch only the
updatable ones (``kUpdatableComponent``), exactly as Kaldi's functions of the
same names do, so e.g. :func:`vectorize_nnet` concatenates in Kaldi's order.
Structural helpers (orphans, node removal) keep Kaldi's node order and its
log messages.
"""

import logging

import numpy as np

from ..components.base import ComponentProperty as P
from ..errors import NnetError

logger = logging.getLogger("pynnet3")

_DROPOUT_TYPES = ("DropoutComponent", "DropoutMaskComponent", "GeneralDropoutComponent")


def _is_updatable(comp):
    return bool(comp.properties() & P.kUpdatableComponent)


def _updatable(nnet):
    return [c for c in nnet.components if _is_updatable(c)]


# -- counting / inspection ----------------------------------------------------------------

def num_input_nodes(nnet):
    return sum(1 for n in range(nnet.num_nodes()) if nnet.is_input_node(n))


def num_output_nodes(nnet):
    return sum(1 for n in range(nnet.num_nodes()) if nnet.is_output_node(n))


def is_simple_nnet(nnet):
    """Kaldi's IsSimpleNnet: an output "output", an input "input", and no other
    input except possibly "ivector"."""
    out = nnet.get_node_index("output")
    if out == -1 or not nnet.is_output_node(out):
        return False
    inp = nnet.get_node_index("input")
    if inp == -1 or not nnet.is_input_node(inp):
        return False
    if num_input_nodes(nnet) == 1:
        return True
    iv = nnet.get_node_index("ivector")
    return iv != -1 and nnet.is_input_node(iv)


def num_parameters(nnet):
    """Kaldi's NumParameters: the parameters of the updatable components."""
    return sum(c.num_parameters() for c in _updatable(nnet))


def num_updatable_components(nnet):
    return len(_updatable(nnet))


def nnet_to_directed_graph(nnet):
    """Kaldi's NnetToDirectedGraph: graph[i] lists the nodes that depend on node i."""
    num_nodes = nnet.num_nodes()
    graph = [[] for _ in range(num_nodes)]
    for n, node in enumerate(nnet.nodes):
        t = node.node_type
        if t == 0:       # kInput
            deps = ()
        elif t == 1:     # kDescriptor
            deps = node.descriptor.get_node_dependencies(set())
        elif t == 2:     # kComponent
            deps = (n - 1,)
        elif t == 3:     # kDimRange
            deps = (node.node_index,)
        else:
            raise NnetError("node %s has an invalid node type" % nnet.node_names[n])
        for d in sorted(set(deps)):
            graph[d].append(n)
    return graph


def nnet_is_recurrent(nnet):
    """Kaldi's NnetIsRecurrent: whether the node graph has a cycle."""
    from .nnet import _find_cycle
    return _find_cycle(nnet_to_directed_graph(nnet)) is not None


def find_orphan_components(nnet):
    """Indexes of components no component-node uses (Kaldi's FindOrphanComponents)."""
    used = [False] * nnet.num_components()
    for node in nnet.nodes:
        if node.node_type == 2:
            used[node.component_index] = True
    return [c for c, u in enumerate(used) if not u]


def find_orphan_nodes(nnet):
    """Indexes of nodes not needed to compute any output (Kaldi's FindOrphanNodes)."""
    depend_on = nnet_to_directed_graph(nnet)
    dependencies = [[] for _ in depend_on]
    for n, users in enumerate(depend_on):
        for u in users:
            dependencies[u].append(n)
    required = [False] * nnet.num_nodes()
    queue = [n for n in range(nnet.num_nodes()) if nnet.is_output_node(n)]
    while queue:
        i = queue.pop()
        if not required[i]:
            required[i] = True
            queue.extend(dependencies[i])
    return [n for n, r in enumerate(required) if not r]


# -- structural edits (Kaldi's Nnet member functions) ---------------------------------------

def remove_some_nodes(nnet, nodes_to_remove):
    """Kaldi's Nnet::RemoveSomeNodes: drops those nodes; descriptors are
    renumbered by printing and re-parsing them, as Kaldi does."""
    from .descriptor import descriptor_name_lookup, parse_descriptor
    from .nnet import kDescriptor, kDimRange
    if not nodes_to_remove:
        return
    remove = set(nodes_to_remove)
    old2new = {}
    new_nodes, new_names = [], []
    for n, node in enumerate(nnet.nodes):
        if n not in remove:
            old2new[n] = len(new_nodes)
            new_nodes.append(node.copy())
            new_names.append(nnet.node_names[n])
    new_lookup = descriptor_name_lookup(new_names)
    for node in new_nodes:
        if node.node_type == kDescriptor:
            text = node.descriptor.write_config(nnet.node_names)
            node.descriptor = parse_descriptor(text, new_lookup)
        elif node.node_type == kDimRange:
            if node.node_index not in old2new:
                raise NnetError("cannot remove node %s: dim-range node uses it"
                                % nnet.node_names[node.node_index])
            node.node_index = old2new[node.node_index]
    nnet.nodes = new_nodes
    nnet.node_names = new_names
    nnet.check(warn_for_orphans=False)


def remove_orphan_nodes(nnet, remove_orphan_inputs=False):
    """Kaldi's Nnet::RemoveOrphanNodes (logs how many were removed)."""
    orphans = find_orphan_nodes(nnet)
    if not remove_orphan_inputs:
        # Kaldi erases input nodes from the list while stepping through it
        # with an index, so an orphan right after an erased input is skipped
        # (kept in the list, hence removed); we reproduce that exactly.
        i = 0
        while i < len(orphans):
            if nnet.is_input_node(orphans[i]):
                del orphans[i]
            i += 1
    num_removed = sum(1 for n in orphans if not nnet.is_component_input_node(n))
    remove_some_nodes(nnet, orphans)
    logger.info("Removed %d orphan nodes.", num_removed)


def remove_orphan_components(nnet):
    """Kaldi's Nnet::RemoveOrphanComponents."""
    orphans = find_orphan_components(nnet)
    logger.info("Removing %d orphan components.", len(orphans))
    if not orphans:
        return
    drop = set(orphans)
    old2new = {}
    comps, names = [], []
    for c, (comp, name) in enumerate(zip(nnet.components, nnet.component_names)):
        if c not in drop:
            old2new[c] = len(comps)
            comps.append(comp)
            names.append(name)
    for node in nnet.nodes:
        if node.node_type == 2:
            node.component_index = old2new[node.component_index]
    nnet.components = comps
    nnet.component_names = names
    nnet.check()


# -- parameters ----------------------------------------------------------------------------

def scale_nnet(nnet, scale):
    """Kaldi's ScaleNnet: every component's Scale() (parameters and stats)."""
    if scale == 1.0:
        return
    for comp in nnet.components:
        comp.scale(scale)


def add_nnet(src, alpha, dest):
    """Kaldi's AddNnet: dest += alpha * src, component by component."""
    if src.num_components() != dest.num_components():
        raise NnetError("Trying to add incompatible nnets.")
    for s, d in zip(src.components, dest.components):
        d.add(alpha, s)


def set_nnet_as_gradient(nnet):
    """Kaldi's SetNnetAsGradient: updatable components become gradients
    (learning rate 1, is-gradient true)."""
    for comp in _updatable(nnet):
        comp.set_as_gradient()


def zero_component_stats(nnet):
    """Kaldi's ZeroComponentStats."""
    for comp in nnet.components:
        comp.zero_stats()


def set_learning_rate(nnet, learning_rate):
    """Kaldi's SetLearningRate: the underlying rate (times each component's
    learning-rate-factor) on every updatable component."""
    for comp in _updatable(nnet):
        if not hasattr(comp, "set_underlying_learning_rate"):
            raise NnetError("Updatable component %s does not support learning rates"
                            % comp.type_name)
        comp.set_underlying_learning_rate(learning_rate)


def vectorize_nnet(nnet):
    """Kaldi's VectorizeNnet: all updatable parameters as one float32 vector."""
    parts = [np.asarray(c.vectorize(), dtype=np.float32) for c in _updatable(nnet)]
    if not parts:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(parts)


def unvectorize_nnet(nnet, params):
    """Kaldi's UnVectorizeNnet (the inverse of :func:`vectorize_nnet`)."""
    params = np.asarray(params, dtype=np.float32)
    total = num_parameters(nnet)
    if params.shape != (total,):
        raise NnetError("UnVectorizeNnet: expected %d parameters, got %s"
                        % (total, params.shape))
    offset = 0
    for comp in _updatable(nnet):
        n = comp.num_parameters()
        comp.unvectorize(params[offset:offset + n])
        offset += n


def dot_product(nnet1, nnet2):
    """Kaldi's DotProduct over updatable components."""
    if nnet1.num_components() != nnet2.num_components():
        raise NnetError("DotProduct: the networks have different numbers of components")
    ans = 0.0
    for c1, c2 in zip(nnet1.components, nnet2.components):
        if _is_updatable(c1):
            ans += c1.dot_product(c2)
    return ans


def component_dot_products(nnet1, nnet2):
    """Kaldi's ComponentDotProducts: one dot product per updatable component."""
    return np.array([c1.dot_product(c2) for c1, c2 in zip(nnet1.components,
                                                          nnet2.components)
                     if _is_updatable(c1)], dtype=np.float32)


# -- modes ----------------------------------------------------------------------------------

def set_dropout_proportion(nnet, proportion):
    """Kaldi's SetDropoutProportion on every dropout-type component."""
    for comp in nnet.components:
        if comp.type_name in _DROPOUT_TYPES:
            comp.set_dropout_proportion(proportion)


def has_batchnorm(nnet):
    return any(c.type_name == "BatchNormComponent" for c in nnet.components)


def set_batchnorm_test_mode(nnet, test_mode):
    """Kaldi's SetBatchnormTestMode (nnet3-copy always calls it, with false by
    default, which is part of what it writes)."""
    for comp in nnet.components:
        if comp.type_name == "BatchNormComponent":
            comp.set_test_mode(test_mode)


def set_dropout_test_mode(nnet, test_mode):
    """Kaldi's SetDropoutTestMode on every RandomComponent."""
    for comp in nnet.components:
        if comp.properties() & P.kRandomComponent and hasattr(comp, "set_test_mode"):
            comp.set_test_mode(test_mode)


def reset_generators(nnet):
    """Kaldi's ResetGenerators on every RandomComponent that has one."""
    for comp in nnet.components:
        if hasattr(comp, "reset_generator"):
            comp.reset_generator()
