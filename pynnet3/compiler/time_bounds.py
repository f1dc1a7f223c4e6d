"""The times at which each node of a network can be computable for a request:
a bound that lets the graph builders leave out the part of a statistics
window that no input reaches.

An x-vector's StatisticsPoolingComponent pools over a window such as
[t, t + 10000]: Kaldi's graph builder adds every Cindex of that window and
all that they depend on, down to the input, and finds them not computable
(340,000 Cindexes for one x-vector whatever the utterance's length). The
builders here skip window inputs whose t lies outside the bound of the
window's input node.

Guarantee: for each node, :func:`computable_time_bounds` gives ``None`` (no
bound known) or ``(lo, hi)``, and every Cindex of that node that can be
computable for the requests has ``lo <= t <= hi`` (``lo > hi``: none can
be). The Cindexes left out are never computable, so the pruned graph, and
everything compiled from it, is the one Kaldi's builder gives: the kept
Cindexes are added in the same relative order, and the steps sort Cindexes
by their own order, not by id.

The bound follows Kaldi's computability rules: an input node's Cindexes are
computable only where a request supplies them (this request or an earlier
segment's; a request may also supply a component's output); every part of
a Descriptor is needed (Append), both sides of a Sum, either side of a
Failover, nothing of an IfDefined or a Const; a TdnnComponent needs all its
time offsets, a statistics component any input of its window. An IfDefined
or a Const constrains nothing, so the bound of a
recurrent network's node comes from its other inputs (the cycle through
IfDefined(Offset(..., -1)) is not followed). Components whose index hooks
run in Python get no bound, and a network whose cycle runs through inputs
that are needed gets none at all. A window without a bound is built whole,
as Kaldi builds it, and the log says so once per window node.
"""

import logging

from ..nnet import descriptor as D
from ..nnet.node import kComponent, kDescriptor, kDimRange, kInput
from .descriptor_program import component_index_program

__all__ = ["computable_time_bounds", "window_input_bounds"]

log = logging.getLogger(__name__)

_EMPTY = (1, 0)
# The windows already said to be unbounded (node names), so that each is
# said once per process, not once per compilation.
_TOLD_UNBOUNDED = set()


def _is_empty(b):
    return b is not None and b[0] > b[1]


def _shift(b, dt):
    """Output times t whose input time t + dt lies in ``b``."""
    if b is None or _is_empty(b):
        return b
    return (b[0] - dt, b[1] - dt)


def _intersect(a, b):
    if a is None:
        return b
    if b is None:
        return a
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else _EMPTY


def _hull(a, b):
    if a is None or b is None:
        return None
    if _is_empty(a):
        return b
    if _is_empty(b):
        return a
    return (min(a[0], b[0]), max(a[1], b[1]))


def _forwarding(fwd, bound_of):
    if isinstance(fwd, D.SimpleForwardingDescriptor):
        return bound_of(fwd.src_node)
    if isinstance(fwd, D.OffsetForwardingDescriptor):
        return _shift(_forwarding(fwd.src, bound_of), fwd.offset.t)
    if isinstance(fwd, D.SwitchingForwardingDescriptor):
        ans = _EMPTY
        for src in fwd.srcs:
            ans = _hull(ans, _forwarding(src, bound_of))
        return ans
    if isinstance(fwd, D.RoundingForwardingDescriptor):
        b = _forwarding(fwd.src, bound_of)
        if b is None or _is_empty(b):
            return b
        m = fwd.t_modulus
        return (b[0] - (m - 1), b[1] + (m - 1))
    if isinstance(fwd, D.ReplaceIndexForwardingDescriptor):
        b = _forwarding(fwd.src, bound_of)
        if fwd.variable != "t":
            return b
        if b is None or b[0] <= fwd.value <= b[1]:
            return None         # every t maps onto the one input time
        return _EMPTY
    return None


def _sum(part, bound_of):
    if isinstance(part, D.SimpleSumDescriptor):
        return _forwarding(part.src, bound_of)
    if isinstance(part, (D.OptionalSumDescriptor, D.ConstantSumDescriptor)):
        return None             # computable wherever the rest is
    if isinstance(part, D.BinarySumDescriptor):
        a, b = _sum(part.src1, bound_of), _sum(part.src2, bound_of)
        return _intersect(a, b) if part.op == D.kSumOperation else _hull(a, b)
    return None


def _window_bound(b, window):
    """Output times of a statistics component (``("window", P, M, lo, hi,
    step)``) with at least one input time in ``b``."""
    if b is None or _is_empty(b):
        return b
    period, _, lo, hi = window[1:5]
    # inputs lie in [base + lo, base + hi) with base = t rounded down to a
    # multiple of period, so base + lo <= b[1] and base + hi - 1 >= b[0]
    return (b[0] - hi + 1, b[1] - lo + period - 1)


def computable_time_bounds(nnet, requests):
    """Per node, ``None`` or ``(lo, hi)`` (see the module docstring), for a
    graph built from ``requests`` (a multi-segment computation's segments so
    far, the last being built); None for the whole network when a cycle runs
    through inputs that are needed."""
    input_bounds = {}
    for request in requests:
        for io in request.inputs:
            node = nnet.get_node_index(io.name)
            if node < 0 or not io.indexes:
                continue            # the builder reports an unknown name or no indexes
            times = [index.t for index in io.indexes]
            input_bounds[node] = _hull(input_bounds.get(node, _EMPTY), (min(times), max(times)))
    bounds = [None] * len(nnet.nodes)
    state = [0] * len(nnet.nodes)      # 0 new, 1 in progress, 2 done

    class _Cycle(Exception):
        pass

    def bound_of(i):
        if state[i] == 2:
            return bounds[i]
        if state[i] == 1:
            raise _Cycle()
        state[i] = 1
        node = nnet.nodes[i]
        node_type = int(node.node_type)
        if node_type == kInput:
            b = input_bounds.get(i, _EMPTY)
        elif node_type == kDescriptor:
            b = None
            for part in node.descriptor.parts:
                b = _intersect(b, _sum(part, bound_of))
        elif node_type == kComponent:
            component = nnet.get_component(node.component_index)
            kind = component_index_program(component, component.properties())
            src = bound_of(i - 1)
            if kind[0] == "simple":
                b = src
            elif kind[0] == "offsets":
                b = None
                for o in kind[1]:
                    b = _intersect(b, _shift(src, o))
            elif kind[0] == "window":
                b = _window_bound(src, kind)
            else:
                b = None
        elif node_type == kDimRange:
            b = bound_of(node.node_index)
        else:
            b = None
        if node_type != kInput and i in input_bounds:
            b = _hull(b, input_bounds[i])       # a component's output given as input
        bounds[i] = b
        state[i] = 2
        return b

    try:
        for i in range(len(nnet.nodes)):
            bound_of(i)
    except (_Cycle, RecursionError):
        return None             # no bound: the builders take every window input
    return bounds


def window_input_bounds(nnet, requests):
    """{statistics component node: (lo, hi)}: the times its window's inputs
    can be computable at for ``requests``, what the graph builders cut the
    windows to; nodes without a bound are absent (and nothing is worked out
    for a network without a statistics window)."""
    windows = []
    for i, node in enumerate(nnet.nodes):
        if int(node.node_type) == kComponent:
            component = nnet.get_component(node.component_index)
            if component_index_program(component, component.properties())[0] == "window":
                windows.append(i)
    if not windows:
        return {}
    bounds = computable_time_bounds(nnet, requests)
    unbounded = [i for i in windows if bounds is None or bounds[i - 1] is None]
    _tell_unbounded(nnet, unbounded, bounds is None)
    return {i: bounds[i - 1] for i in windows if i not in unbounded}


def _tell_unbounded(nnet, nodes, cycle):
    """Says once per window node that its window is built whole (Kaldi's
    way: correct, but its graph is as large as the window)."""
    names = [nnet.node_names[i] for i in nodes if nnet.node_names[i] not in _TOLD_UNBOUNDED]
    if not names:
        return
    _TOLD_UNBOUNDED.update(names)
    reason = ("the network's needed inputs form a cycle" if cycle else
              "nothing bounds the times of its input: an IfDefined or a Const, or a "
              "component whose index rules run in Python")
    log.info("No time bound for the statistics window of %s (%s): the graph builder "
             "takes every Cindex of the window, as Kaldi's does, which is slower to "
             "compile for a long window", ", ".join(names), reason)
