"""One compiled computation as an ONNX model (any inference request).

:func:`computation_graph` lowers an NnetComputation (:mod:`.lower`) into a
GraphBuilder whose inputs and outputs are the request's nodes, named as the
nnet3 nodes are ("input", "ivector", "output", ...). Each is a
``[batch, rows, dim]`` float32 tensor: ``rows`` are the request's Indexes in
the request's order, ``batch`` independent copies of the computation.
:func:`request_model` compiles a ComputationRequest (as Kaldi's tools do,
optimized) and returns the model.
"""

from ..errors import ComputationError
from .graph import GraphBuilder
from .lower import ComputationLowering
from ..driver.compile_and_optimize import compile as compile_

__all__ = ["computation_graph", "request_model", "FLOAT"]

FLOAT = 1      # onnx.TensorProto.FLOAT


def computation_graph(nnet, computation, g=None, input_names=None, output_names=None,
                      batch="batch"):
    """Lowers ``computation`` into ``g`` (a new GraphBuilder if None) with
    graph inputs/outputs named after the nnet3 nodes (``input_names`` /
    ``output_names`` map a node name to another graph name). Returns ``g``."""
    g = g if g is not None else GraphBuilder()
    input_names = input_names or {}
    output_names = output_names or {}
    seen_inputs = set()

    def on_input(node, rows, cols):
        name = input_names.get(node, node)
        if node in seen_inputs:
            raise ComputationError("ONNX export: input node '%s' is given twice" % node)
        seen_inputs.add(node)
        return g.add_input(name, FLOAT, [batch, rows, cols])

    def on_output(node, value, rows, cols):
        g.add_output(output_names.get(node, node), value, FLOAT, [batch, rows, cols])

    ComputationLowering(g, computation, nnet, on_input, on_output).run()
    return g


def request_model(nnet, request, optimize_options=None, metadata=None):
    """The ONNX model of ``request`` on ``nnet`` (which must not need
    derivatives), compiled and optimized as Kaldi's tools do."""
    if request.need_model_derivative or any(io.has_deriv for io in
                                            list(request.inputs) + list(request.outputs)):
        raise ComputationError("ONNX export: the request asks for derivatives; only "
                               "inference requests export")
    computation = compile_(nnet, request, options=optimize_options)
    meta = {"nnet3.request": request.print_request()}
    meta.update(metadata or {})
    return computation_graph(nnet, computation).model(meta)
