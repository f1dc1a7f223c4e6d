"""A network's nodes: Kaldi's NodeType, ObjectiveType and NetworkNode
(nnet-nnet.h), with Kaldi's values.

Node layout (which config line makes which nodes) is described in
:mod:`pynnet3.nnet.nnet`.
"""

from enum import IntEnum

__all__ = ["NodeType", "ObjectiveType", "NetworkNode", "kInput", "kDescriptor", "kComponent",
           "kDimRange", "kNone", "kLinear", "kQuadratic"]


class NodeType(IntEnum):
    """Kaldi's NodeType, same values."""

    kInput = 0
    kDescriptor = 1
    kComponent = 2
    kDimRange = 3
    kNone = 4


class ObjectiveType(IntEnum):
    """Kaldi's ObjectiveType, same values."""

    kLinear = 0
    kQuadratic = 1


kInput, kDescriptor, kComponent, kDimRange, kNone = (
    NodeType.kInput, NodeType.kDescriptor, NodeType.kComponent, NodeType.kDimRange,
    NodeType.kNone)
kLinear, kQuadratic = ObjectiveType.kLinear, ObjectiveType.kQuadratic


class NetworkNode:
    """One node (Kaldi's NetworkNode).

    ``descriptor``: kDescriptor nodes; ``component_index``: kComponent nodes;
    ``node_index``: kDimRange nodes (the source node); ``objective_type``:
    output nodes; ``dim``: kInput and kDimRange nodes; ``dim_offset``:
    kDimRange nodes. Unused fields are None / -1.
    """

    __slots__ = ("node_type", "descriptor", "component_index", "node_index", "dim",
                 "dim_offset", "objective_type")

    def __init__(self, node_type=kNone, descriptor=None, component_index=-1,
                 node_index=-1, dim=-1, dim_offset=-1, objective_type=kLinear):
        self.node_type = NodeType(node_type)
        self.descriptor = descriptor
        self.component_index = component_index
        self.node_index = node_index
        self.dim = dim
        self.dim_offset = dim_offset
        self.objective_type = ObjectiveType(objective_type)

    def copy(self):
        # Descriptors are immutable, so sharing them is safe.
        return NetworkNode(self.node_type, self.descriptor, self.component_index,
                           self.node_index, self.dim, self.dim_offset, self.objective_type)

    def __repr__(self):
        return ("NetworkNode(%s, component_index=%d, node_index=%d, dim=%d, dim_offset=%d, "
                "descriptor=%r)" % (self.node_type.name, self.component_index,
                                    self.node_index, self.dim, self.dim_offset,
                                    self.descriptor))
