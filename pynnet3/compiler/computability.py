"""Whether a Cindex can be computed (Kaldi's ComputableInfo), the graph
builder's depth limit, and the error that explains an uncomputable request:
what the readable graph builder (:mod:`.computation_graph`) and its kernel
(``pynnet3/_fast/computation_graph_kernel.pyx``) share.
"""

from ..common.index_io import print_cindex
from ..errors import ComputationError

__all__ = ["kUnknown", "kComputable", "kNotComputable", "kWillNotCompute", "COMPUTABLE_NAMES",
           "MAX_DISTANCE", "not_computable_error"]

# Kaldi's ComputableInfo values.
kUnknown = 0
kComputable = 1
kNotComputable = 2
kWillNotCompute = 3

COMPUTABLE_NAMES = {kUnknown: "kUnknown", kComputable: "kComputable",
                    kNotComputable: "kNotComputable", kWillNotCompute: "kWillNotCompute"}

# Kaldi gives up after this many breadth-first levels (a loop in the topology).
MAX_DISTANCE = 10000


def not_computable_error(builder, max_explain=10):
    """Builds the ComputationError for a builder (Python or Cython) whose
    outputs are not all computable. ``builder`` must provide ``nnet``,
    ``request``, ``computable_list()``, ``cindex_list()`` and
    ``explain_why_not_computable(cid)``."""
    nnet = builder.nnet
    computable = builder.computable_list()
    cindexes = builder.cindex_list()
    not_computable = []
    total = 0
    for cid, (node, _) in enumerate(cindexes):
        if nnet.is_output_node(node):
            total += 1
            if computable[cid] != kComputable:
                not_computable.append(cid)
    names = nnet.node_names
    missing = []
    seen = set()
    explanations = []
    for cid in not_computable[:max_explain]:
        text, miss = builder.explain_why_not_computable(cid)
        explanations.append(text)
        for m in miss:
            if m not in seen:
                seen.add(m)
                missing.append(m)
    outputs = ", ".join(print_cindex(cindexes[c], names) for c in not_computable[:10])
    if len(not_computable) > 10:
        outputs += ", ..."
    msg = ("Not all outputs were computable, cannot create computation: %d output cindexes "
           "out of %d were not computable (%s)" % (len(not_computable), total, outputs))
    if missing:
        shown = sorted(missing, key=lambda c: (cindexes[c][0], cindexes[c][1][1],
                                               cindexes[c][1][2], cindexes[c][1][0]))
        text = ", ".join(print_cindex(cindexes[c], names) for c in shown[:20])
        if len(shown) > 20:
            text += ", ... (%d in all)" % len(shown)
        msg += "; they need inputs the request does not supply: " + text
    msg += ".\nComputation request was:" + builder.request.print_request()
    msg += "\n" + "\n".join(explanations)
    return ComputationError(msg)
