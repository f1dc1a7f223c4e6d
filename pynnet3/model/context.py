"""Left/right context of a 'simple' network (Kaldi's IsSimpleNnet and
ComputeSimpleNnetContext in nnet-utils.cc), as ``nnet3-info`` prints it.

A network is *simple* when it has an input node "input", an output node
"output", and either no other input node or exactly one more called
"ivector". Its context is found by asking the computation-graph builder which
outputs are computable when inputs cover a window of frames: the first
computable output gives the left context, the last the right context. This is
repeated for every shift 0..modulus (Nnet.modulus(): the network is invariant
to time shifts by multiples of it) and the maximum is taken; the window starts
at 40 frames and doubles while no output is computable, up to 800.

Guarantees: the same numbers as Kaldi for every simple network; NnetError
for a network that is not simple or whose context exceeds the largest window.
"""

from ..common.index import Index
from ..compiler.computation_graph import computation_graph_builder
from ..compiler.request import ComputationRequest, IoSpecification
from ..errors import NnetError
from ..nnet.nnet import is_simple_nnet

_START_WINDOW = 40
_MAX_WINDOW = 800


def evaluate_computation_request(nnet, request):
    """Kaldi's EvaluateComputationRequest: for each output of ``request``, a
    list saying which of its Indexes are computable (graph building only)."""
    builder = computation_graph_builder(nnet)
    builder.compute(request)
    return builder.get_computable_info()


def _context_for_shift(nnet, input_start, window_size, modulus):
    """(left, right) context with inputs at [input_start, input_start +
    window_size), or None if no output in the window is computable."""
    input_end = input_start + window_size
    # Kaldi uses n = rand() % 10 here; the answer does not depend on n.
    n = 0
    times = range(input_start, input_end)
    request = ComputationRequest(
        inputs=[IoSpecification("input", [Index(n, t, 0) for t in times])],
        outputs=[IoSpecification("output", [Index(n, t, 0) for t in times])])
    if nnet.get_node_index("ivector") != -1:
        request.inputs.append(IoSpecification(
            "ivector", [Index(n, t, 0) for t in range(input_start - modulus, input_end)]))
    output_ok = evaluate_computation_request(nnet, request)[0]
    try:
        first_ok = output_ok.index(True)
    except ValueError:
        return None
    try:
        first_not_ok = output_ok.index(False, first_ok)
    except ValueError:
        first_not_ok = window_size
    if first_not_ok <= first_ok:
        return None
    return first_ok, window_size - first_not_ok


def compute_simple_nnet_context(nnet):
    """(left_context, right_context) of a simple network, as nnet3-info prints."""
    if not is_simple_nnet(nnet):
        raise NnetError("cannot compute the context of a network that is not 'simple' "
                        "(it needs an input node 'input', an output node 'output', and "
                        "at most one other input, named 'ivector')")
    modulus = nnet_modulus(nnet)
    window_size = _START_WINDOW
    while window_size < _MAX_WINDOW:
        contexts = []
        for input_start in range(modulus + 1):
            ans = _context_for_shift(nnet, input_start, window_size, modulus)
            if ans is None:
                break
            contexts.append(ans)
        if len(contexts) <= modulus:
            window_size *= 2  # too small a window (or the network needs more)
            continue
        if contexts[0] != contexts[modulus]:
            raise NnetError("the network's context depends on the time shift in a way "
                            "Kaldi does not expect (shift 0: %s, shift %d: %s)"
                            % (contexts[0], modulus, contexts[modulus]))
        return max(c[0] for c in contexts), max(c[1] for c in contexts)
    raise NnetError("Failure in ComputeSimpleNnetContext (perhaps not a simple nnet?): no "
                    "output was computable from a window of %d input frames" % _MAX_WINDOW)


def nnet_modulus(nnet):
    """Kaldi's Nnet::Modulus(): the time shift the network is invariant to
    (the lcm of its Descriptors' moduli; 1 without Round()/Switch())."""
    return nnet.modulus()
