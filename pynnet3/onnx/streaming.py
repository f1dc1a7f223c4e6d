"""The looped computation of Kaldi's online decoding as a streaming ONNX model.

Kaldi's DecodableNnetSimpleLooped compiles one *looped* computation
(:func:`pynnet3.driver.compile_looped.compile_looped`): commands for the first two
chunks, a label, the commands of one further chunk, and a goto back to the
label. The matrices alive at the label are what one chunk hands to the next
(recurrent states, activations later chunks reuse instead of recomputing
left context); the loop's last commands accept the next chunk's input and
swap matrices so that the state is where the label expects it.

The exported model makes that explicit. One call of the model is one step:

- inputs ``input`` ``[batch, frames, input-dim]``, ``ivector``
  ``[batch, rows, ivector-dim]`` (if the network has one) and the state, one
  input ``state/<name>`` ``[batch, rows, cols]`` per matrix the loop carries;
- outputs ``output`` ``[batch, frames / frame-subsampling-factor,
  output-dim]`` and the next state, ``next_state/<name>``.

The first call takes the first *two* chunks' input frames (``left + 2 *
frames-per-chunk + right`` frames: the network's left context plus
--extra-left-context-initial, two chunks, the right context) and gives their
outputs; its state inputs are not read (pass zeros). Every later call takes
the next ``frames-per-chunk`` frames and gives one chunk of output. The model
tells the two apart by the number of input frames (an If). ``<name>`` says
what a state holds: ``<node>@<first>:<last>``, the network node and the
frames (relative to the first frame of the chunk the next call outputs) of
the rows it keeps, e.g. ``lstm1.c@-3:-1``. States that nothing reads are
left out.

Guarantee: step by step, the outputs are those of pynnet3's
DecodableNnetSimpleLooped (Kaldi's looped computation) on the same frames,
within float32 rounding.
"""

import re

from ..compiler.computation import CommandType
from ..errors import ComputationError
from .computation import FLOAT
from .graph import GraphBuilder
from .lower import ComputationLowering, _Tile

__all__ = ["streaming_graph", "StreamingLayout"]

T = CommandType


class StreamingLayout:
    """What a runtime needs to feed a streaming model (recorded in its
    metadata): input frames and i-vector rows of the first and of later
    calls, output frames per call."""

    __slots__ = ("first_frames", "chunk_frames", "first_ivector_rows", "chunk_ivector_rows",
                 "first_outputs", "chunk_outputs", "states")

    def __init__(self, **values):
        for key in self.__slots__:
            setattr(self, key, values.get(key))


def _phase_bounds(computation):
    """(label, goto, first_loop_accept): the label and goto command indexes
    and where the prefix's accepts of the loop's first chunk begin."""
    commands = computation.commands
    if not commands or commands[-1].command_type != T.kGotoLabel:
        raise ComputationError("not a looped computation (it does not end with a goto)")
    goto = len(commands) - 1
    label = commands[goto].arg1
    last_output = max((i for i in range(label) if commands[i].command_type == T.kProvideOutput),
                      default=-1)
    accepts = [i for i in range(last_output + 1, label)
               if commands[i].command_type == T.kAcceptInput]
    if not accepts:
        raise ComputationError("looped computation: no input accepted before the loop")
    return label, goto, accepts


def _state_name(computation, nnet, m, first_output_t):
    info = computation.matrix_debug_info[m] if computation.matrix_debug_info else None
    cindexes = info.cindexes if info is not None else []
    if not cindexes:
        return "m%d" % m
    node = nnet.node_names[cindexes[0][0]]
    times = [index[1] for _, index in cindexes]
    name = "%s@%d:%d" % (node, min(times) - first_output_t, max(times) - first_output_t)
    return re.sub(r"\s", "_", name)


def streaming_graph(nnet, computation, frames_per_chunk, frame_subsampling_factor, log_priors,
                    input_rows_first, ivector_rows):
    """A GraphBuilder with the streaming model of a looped ``computation``
    (see the module docstring) and its StreamingLayout. ``input_rows_first``:
    input frames of the first two chunks; ``ivector_rows``: (chunk 1, chunk
    2, later chunks) i-vector rows (0 without i-vectors)."""
    label, goto, loop_accepts = _phase_bounds(computation)
    commands = computation.commands
    loop_inputs = {}            # matrix -> node name, the loop chunk's inputs at the label
    for i in loop_accepts:
        c = commands[i]
        loop_inputs[computation.submatrices[c.arg1].matrix_index] = nnet.node_names[c.arg2]
    has_ivector = ivector_rows[0] > 0
    g = GraphBuilder("nnet3_looped")
    input_dim = nnet.input_dim("input")
    g.add_input("input", FLOAT, ["batch", "frames", input_dim])
    if has_ivector:
        g.add_input("ivector", FLOAT, ["batch", "ivector_rows", nnet.input_dim("ivector")])
    output_dim = nnet.output_dim("output")
    chunk_outputs = frames_per_chunk // frame_subsampling_factor

    # -- the first call: the prefix without the loop chunk's accepts -------------------------
    first = g.subgraph("first_chunks")
    feeds = {"input": [], "ivector": []}
    first_outputs = []

    def first_input(node, rows, cols):
        feeds[node].append(rows)
        start = sum(feeds[node][:-1])
        return first.op("Slice", [node, first.ints([start]), first.ints([start + rows]),
                                  first.ints([1])], node + "_part")

    def first_output(node, value, rows, cols):
        if node != "output":
            raise ComputationError("looped computation: unexpected output node '%s'" % node)
        first_outputs.append(value)

    prefix = ComputationLowering(first, computation, nnet, first_input, first_output)
    for pc in range(label):
        if pc in loop_accepts:
            continue
        prefix.run(pc, pc + 1)
    if len(first_outputs) != 2:
        raise ComputationError("looped computation: expected two chunks before the loop, "
                               "found %d outputs" % len(first_outputs))
    live = [m for m, tiles in enumerate(prefix.matrices) if tiles is not None
            and m not in loop_inputs]
    first_time = 2 * frames_per_chunk
    names = {}
    for m in live:
        name = _state_name(computation, nnet, m, first_time)
        while name in names.values():
            name += "'"
        names[m] = name

    # -- later calls: the loop body, its next-chunk accepts as placeholders ------------------
    body = g.subgraph("next_chunk")
    body_outputs = []
    placeholders = {}

    def body_input(node, rows, cols):
        value = body.fresh("next_" + node)
        placeholders[value] = node
        return value

    def body_output(node, value, rows, cols):
        body_outputs.append(value)

    loop = ComputationLowering(body, computation, nnet, body_input, body_output)
    for m in live:
        loop.set_matrix(m, "state/" + names[m])
    for m, node in loop_inputs.items():
        info = computation.matrices[m]
        loop.matrices[m] = [_Tile(0, info.num_rows, 0, info.num_cols, node)]
        loop.register(node, info.num_rows, info.num_cols)
    loop.run(label + 1, goto)
    if len(body_outputs) != 1:
        raise ComputationError("looped computation: expected one output in the loop, found %d"
                               % len(body_outputs))
    # the loop must leave the next chunk's inputs where the label expects them
    for m, node in loop_inputs.items():
        tiles = loop.matrices[m]
        if not (tiles and len(tiles) == 1 and placeholders.get(tiles[0].src) == node):
            raise ComputationError("looped computation: matrix m%d does not hold the next "
                                   "chunk's '%s' at the end of the loop" % (m, node))

    # -- which states are read at all ----------------------------------------------------------
    gone = [m for m in live if loop.matrices[m] is None]
    if gone:
        raise ComputationError("looped computation: matrices %s are alive at the label but "
                               "not at the end of the loop" % ", ".join("m%d" % m for m in gone))
    next_values = {m: loop.read_matrix_or_zero(m) for m in live}
    needed = _needed_states(body, body_outputs[0], next_values, names)
    if any(v in placeholders for v in _reachable_values(body, [body_outputs[0]]
                                                         + [next_values[m] for m in needed])):
        raise ComputationError("looped computation: the loop reads the next chunk's input")

    # -- the If ----------------------------------------------------------------------------------
    def finish(sub, output, states):
        if log_priors is not None:
            output = sub.op("Sub", [output, sub.const(log_priors, "log_priors")])
        sub.add_output(None, output, FLOAT, ["batch", "output_frames", output_dim])
        for m in needed:
            info = computation.matrices[m]
            sub.add_output(None, states[m], FLOAT, ["batch", info.num_rows, info.num_cols])
        return sub.subgraph_proto()

    first_states = {m: prefix.read_matrix_or_zero(m) for m in needed}
    first_output_value = first.concat(first_outputs, 1)
    then_branch = finish(first, first_output_value, first_states)
    else_branch = finish(body, body_outputs[0], next_values)
    for m in needed:
        info = computation.matrices[m]
        g.add_input("state/" + names[m], FLOAT, ["batch", info.num_rows, info.num_cols])
    frames = g.op("Gather", [g.op("Shape", ["input"]), g.ints([1])])
    is_first = g.op("Squeeze", [g.op("Equal", [frames, g.ints([sum(feeds["input"])])]),
                                g.ints([0])])
    results = g.op("If", [is_first], "step", num_outputs=1 + len(needed),
                   then_branch=then_branch, else_branch=else_branch)
    results = results if isinstance(results, list) else [results]
    g.add_output("output", results[0], FLOAT, ["batch", "output_frames", output_dim])
    for value, m in zip(results[1:], needed):
        info = computation.matrices[m]
        g.add_output("next_state/" + names[m], value, FLOAT,
                     ["batch", info.num_rows, info.num_cols])
    layout = StreamingLayout(
        first_frames=sum(feeds["input"]), chunk_frames=frames_per_chunk,
        first_ivector_rows=sum(feeds["ivector"]),
        chunk_ivector_rows=sum(computation.submatrices[commands[i].arg1].num_rows
                               for i in loop_accepts
                               if nnet.node_names[commands[i].arg2] == "ivector"),
        first_outputs=2 * chunk_outputs, chunk_outputs=chunk_outputs,
        states=[names[m] for m in needed])
    if feeds["input"] and sum(feeds["input"]) != input_rows_first:
        raise ComputationError("looped computation: the first two chunks take %d input "
                               "frames, expected %d" % (sum(feeds["input"]), input_rows_first))
    return g, layout


def _producers(g):
    out = {}
    for node in g.nodes:
        for name in node.output:
            out[name] = node
    return out


def _reachable_values(g, roots):
    """Every value the values ``roots`` are computed from (within ``g``)."""
    producers = _producers(g)
    seen = set()
    stack = list(roots)
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        node = producers.get(v)
        if node is not None:
            stack.extend(node.input)
    return seen


def _needed_states(body, output, next_values, names):
    """The live matrices whose state the output needs, directly or through
    the states it needs (a fixed point)."""
    state_of = {"state/" + names[m]: m for m in next_values}
    needed = set()
    frontier = [output]
    while frontier:
        reached = _reachable_values(body, frontier)
        frontier = []
        for value in reached:
            m = state_of.get(value)
            if m is not None and m not in needed:
                needed.add(m)
                frontier.append(next_values[m])
    return sorted(needed)
