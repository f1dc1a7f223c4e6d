"""The epochs cache of nnet/graph.py: cached epochs equal freshly computed
ones, and a change to the network's node structure is never served stale."""

import pytest
from conftest import TEST_DATA

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.nnet import graph as steps
from pynnet3.nnet.descriptor_parser import parse_descriptor
from pynnet3.nnet.nnet import Nnet

CASES = sorted(TEST_DATA.glob("compile/case*"))[:20]

RECURRENT = """
input-node name=input dim=2
component name=a type=AffineComponent input-dim=4 output-dim=2
component-node name=a component=a input=Append(input, IfDefined(Offset(b, -1)))
component name=b type=RectifiedLinearComponent dim=2
component-node name=b component=b input=a
output-node name=output input=b
"""


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_cached_epochs_equal_fresh_ones(case):
    nnet = Nnet.read(str(case / "model.raw"))
    fresh = steps._compute_nnet_computation_epochs(nnet)
    assert steps.compute_nnet_computation_epochs(nnet) == fresh
    again = steps.compute_nnet_computation_epochs(nnet)
    assert again == fresh
    again.append(-1)                       # callers get their own list
    assert steps.compute_nnet_computation_epochs(nnet) == fresh


def test_changed_structure_is_recomputed():
    nnet = Nnet.from_config(RECURRENT)
    recurrent = steps.compute_nnet_computation_epochs(nnet)
    a_input = nnet.get_node_index("a_input")
    a, b = nnet.get_node_index("a"), nnet.get_node_index("b")
    assert recurrent[a] == recurrent[b]     # one epoch: a and b feed each other
    # the same network with the recurrence cut: a new Descriptor object
    nnet.nodes[a_input].descriptor = parse_descriptor("Append(input, input)",
                                                      nnet.node_names)
    feed_forward = steps.compute_nnet_computation_epochs(nnet)
    assert feed_forward == steps._compute_nnet_computation_epochs(nnet)
    assert feed_forward[a] < feed_forward[b]
