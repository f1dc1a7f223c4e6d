"""nnet3-compute's chunked computation as an ONNX model.

nnet3-compute computes an utterance in chunks (:class:`pynnet3.compute.
utterance.ChunkLayout`): chunks of ``frames_per_chunk`` input frames, each
with the network's left/right context plus the extra context, the first
chunk with ``--extra-left-context-initial``, the last one shorter and with
``--extra-right-context-final``; frames outside the utterance are copies of
its first/last frame. Each chunk shape is a different computation.

The exported model holds the *regular* chunk's computation (and, where it
differs, the *initial* chunk's): input ``input`` ``[batch, frames, dim]``
(and ``ivector`` ``[batch, 1, ivector-dim]``), output ``output``
``[batch, frames_per_chunk / frame_subsampling_factor, output-dim]``; with
two computations the model selects by the number of input frames (an If).
A runtime computes every chunk of an utterance with one of them: the chunk's
input window is that computation's (edge frames repeated as nnet3-compute
repeats them) and the first rows of its output are the chunk's.

That equals Kaldi's chunk exactly when no output of the chunk depends on
input frames outside Kaldi's own (shorter) window. The exporter proves it
before exporting, on the computation graph of the padded chunk
(:func:`cone_input_extents`): for every output, the span of input frames
its value depends on (through the dependencies Kaldi's graph builder kept:
IfDefined/Failover terms and optional component inputs only where they were
computable) must lie inside the window of every chunk Kaldi would compute
it in (a final chunk ends ``extra-right-context-final`` frames after its
last output; an initial chunk starts ``extra-left-context-initial`` frames
before frame 0). If a Kaldi chunk sees fewer frames but the output's value
only depends on frames both see, the dependencies Kaldi keeps are the same
(computability only grows with the input), hence the value. Networks whose
outputs depend on the chunk's right edge (backward recurrences, statistics
pooled over the chunk) fail this test; :class:`NeedsLengthGenericModel`
says which output and why.
"""

import numpy as np

from ..compiler.request import ComputationRequest, IoSpecification
from ..compiler.compiler import pruned_computation_graph
from ..errors import ComputationError
from ..common.index import Index
from .computation import FLOAT, computation_graph
from .graph import GraphBuilder
from .lower import ComputationLowering

__all__ = ["ChunkShape", "NeedsLengthGenericModel", "chunk_shapes", "cone_input_extents",
           "chunked_graph", "chunk_request"]


class NeedsLengthGenericModel(ComputationError):
    """Kaldi's chunks of this network cannot all be computed exactly by
    fixed-size padded chunks (the message says which output and why)."""


class ChunkShape:
    """One exported chunk computation: ``left`` / ``right`` input frames
    before the first / after the last output frame, ``num_outputs`` output
    frames every ``subsampling`` frames; ``input_frames`` in all."""

    __slots__ = ("name", "left", "right", "num_outputs", "subsampling")

    def __init__(self, name, left, right, num_outputs, subsampling):
        self.name, self.left, self.right = name, left, right
        self.num_outputs, self.subsampling = num_outputs, subsampling

    @property
    def input_frames(self):
        return self.left + (self.num_outputs - 1) * self.subsampling + 1 + self.right

    def describe(self):
        return "left=%d right=%d input-frames=%d output-frames=%d" % (
            self.left, self.right, self.input_frames, self.num_outputs)

    def __repr__(self):
        return "ChunkShape(%s: %s)" % (self.name, self.describe())


def chunk_request(shape, has_ivector):
    """The request of a chunk shape (times shifted so that the first output
    is at t = 0, as Kaldi's DecodableNnetSimple does)."""
    request = ComputationRequest()
    request.need_model_derivative = False
    request.store_component_stats = False
    request.inputs = [IoSpecification.from_t_range("input", -shape.left,
                                                   -shape.left + shape.input_frames)]
    if has_ivector:
        request.inputs.append(IoSpecification("ivector", [Index(0, 0, 0)]))
    request.outputs = [IoSpecification("output", [Index(0, j * shape.subsampling, 0)
                                                  for j in range(shape.num_outputs)])]
    return request


def cone_input_extents(nnet, request):
    """For each output Index of ``request`` (one output node), the (first,
    last) input-node frame its value depends on, following the dependencies
    Kaldi's pruned computation graph keeps (ComputationError if an output is
    not computable)."""
    cindexes, deps = pruned_computation_graph(nnet, request)
    input_node = nnet.get_node_index("input")
    output_node = nnet.get_node_index(request.outputs[0].name)
    num = len(cindexes)
    lo = [None] * num
    hi = [None] * num
    big = 1 << 40
    for root in range(num):
        if cindexes[root][0] != output_node or lo[root] is not None:
            continue
        stack = [(root, False)]
        while stack:
            c, expanded = stack.pop()
            if lo[c] is not None:
                continue
            if not expanded:
                stack.append((c, True))
                stack.extend((d, False) for d in deps[c] if lo[d] is None)
                continue
            node, index = cindexes[c]
            first, last = (index.t, index.t) if node == input_node else (big, -big)
            for d in deps[c]:
                first = min(first, lo[d])
                last = max(last, hi[d])
            lo[c], hi[c] = first, last
    return {cindexes[c][1].t: (lo[c], hi[c]) for c in range(num)
            if cindexes[c][0] == output_node}


def chunk_shapes(nnet, layout, has_ivector):
    """The chunk shapes to export for ``layout`` (a ChunkLayout): the regular
    one, and the initial one where the first chunk's different left context
    changes its outputs. Raises :class:`NeedsLengthGenericModel` when a
    chunk Kaldi computes is not a row range of one of them (see the module
    docstring)."""
    opts = layout.opts
    f = opts.frame_subsampling_factor
    k = layout.subsampled_frames_per_chunk()
    left, right = layout.nnet_left_context, layout.nnet_right_context
    el, er = opts.extra_left_context, opts.extra_right_context
    el_init = opts.extra_left_context_initial if opts.extra_left_context_initial >= 0 else el
    er_final = opts.extra_right_context_final if opts.extra_right_context_final >= 0 else er
    regular = ChunkShape("regular", left + el, right + er, k, f)
    shapes = [regular]
    extents = {"regular": cone_input_extents(nnet, chunk_request(regular, has_ivector))}
    if el_init != el:
        initial = ChunkShape("initial", left + el_init, right + er, k, f)
        if el_init < el:
            # Kaldi's first chunk sees less on the left: do the regular
            # chunk's outputs reach past it?
            if _first_frame(extents["regular"]) >= -initial.left:
                initial = None
            else:
                extents["initial"] = cone_input_extents(nnet, chunk_request(initial,
                                                                            has_ivector))
        else:
            ext = cone_input_extents(nnet, chunk_request(initial, has_ivector))
            if _first_frame(ext) >= -regular.left:
                initial = None
            else:
                extents["initial"] = ext
        if initial is not None:
            shapes.append(initial)
    for shape in shapes:
        ext = extents[shape.name]
        for j in range(k):
            t = j * f
            last = ext[t][1]
            # the shortest final chunk holding output j ends at t + right + er_final
            if last > t + right + er_final:
                raise NeedsLengthGenericModel(
                    "output frame %d of a chunk depends on input frame %d, but nnet3-compute's "
                    "last chunk of an utterance whose last output frame is %d ends at frame %d "
                    "(network right context %d + --extra-right-context-final=%d): the network's "
                    "outputs depend on where a chunk ends (a backward recurrence or statistics "
                    "over the chunk), so fixed-size chunks cannot reproduce them"
                    % (t, last, t, t + right + er_final, right, er_final))
    return shapes


def _first_frame(extents):
    return min(lo for lo, _ in extents.values())


def chunked_graph(nnet, shapes, computations, has_ivector, log_priors=None):
    """A GraphBuilder holding the chunk computations of ``shapes`` (from
    :func:`chunk_shapes`), compiled (and optimized) as ``computations``
    (their requests: :func:`chunk_request`). With ``log_priors`` they are
    subtracted from the output, as nnet3-compute --use-priors does."""
    g = GraphBuilder("nnet3_chunk")
    input_dim = nnet.input_dim("input")
    frames = shapes[0].input_frames if len(shapes) == 1 else "frames"
    g.add_input("input", FLOAT, ["batch", frames, input_dim])
    if has_ivector:
        g.add_input("ivector", FLOAT, ["batch", 1, nnet.input_dim("ivector")])
    output_dim = nnet.output_dim("output")
    num_outputs = shapes[0].num_outputs

    def lower(builder, shape):
        computation = computations[shapes.index(shape)]
        result = {}

        def on_input(node, rows, cols):
            if node not in ("input", "ivector"):
                raise ComputationError("ONNX export: unexpected input node '%s'" % node)
            return node

        def on_output(node, value, rows, cols):
            result[node] = value

        ComputationLowering(builder, computation, nnet, on_input, on_output).run()
        value = result["output"]
        if log_priors is not None:
            value = builder.op("Sub", [value, builder.const(log_priors, "log_priors")])
        return value

    if len(shapes) == 1:
        g.add_output("output", lower(g, shapes[0]), FLOAT, ["batch", num_outputs, output_dim])
        return g
    # two shapes: the number of input frames says which
    branches = []
    for shape in shapes:
        sub = g.subgraph("chunk_" + shape.name)
        value = lower(sub, shape)
        sub.add_output(None, value, FLOAT,
                       ["batch", num_outputs, output_dim])
        branches.append(sub.subgraph_proto())
    frames_now = g.op("Gather", [g.op("Shape", ["input"]), g.ints([1])])
    is_regular = g.op("Equal", [frames_now, g.ints([shapes[0].input_frames])])
    is_regular = g.op("Squeeze", [is_regular, g.ints([0])])
    value = g.op("If", [is_regular], "output", then_branch=branches[0], else_branch=branches[1])
    g.add_output("output", value, FLOAT, ["batch", num_outputs, output_dim])
    return g
