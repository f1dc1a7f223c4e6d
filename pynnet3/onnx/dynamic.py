"""A simple network's chunk computation as a *length-generic* ONNX graph.

Where a network's outputs depend on where a chunk ends (a backward
recurrence, statistics pooled over the chunk), each chunk length is another
computation, and the fixed-size chunks of :mod:`.chunked` cannot reproduce
Kaldi's. This module lowers the network itself, node by node, for any number
of input frames: the graph takes

- ``input`` ``[batch, frames, dim]`` (frame ``i`` is time ``i``) and, if the
  network has one, ``ivector`` ``[batch, 1, dim]`` (Index t = 0);
- ``first_output`` and ``num_outputs`` (int64, shape [1]): the output times
  ``first_output + j * frame_subsampling_factor``, j < ``num_outputs``
  (an x-vector model binds them to 0 and 1);

and returns ``output`` ``[batch, num_outputs, dim]``: exactly what Kaldi's
compiled computation of that chunk gives (the request with those input and
output Indexes; Kaldi shifts a chunk's times, which changes nothing for a
network of modulus 1, the only kind this module takes).

How: Kaldi computes each node at the times that are *needed* (reached from
the requested outputs) and *computable* (from the given inputs). For the
Descriptors and components of the usual networks both sets are intervals
whose ends are the input's ends or the outputs' ends shifted by constants,
so they are written symbolically (:class:`Expr`) and evaluated in the graph:
each node is one ``[batch, rows, dim]`` tensor over its interval, a
Descriptor's Offset is a row slice of its source, an IfDefined a slice padded
with zero rows where the source is not computable, a StatisticsPooling
window a difference of prefix sums clipped to the computable rows. A set of
nodes that depend on each other through time (a recurrence: an LSTM's cell,
a GRU's state) is one ONNX Scan over its interval, forward or backward,
whose state keeps the last values each delayed read needs (zeros at the
start: IfDefined's zero for a time before the first computable one). The
row values are the components' own formulas (:mod:`.components`).

Whatever this module does not know how to write for any length (Failover,
Switch, Round with a period, x or n offsets, convolution and attention
components, modulus > 1) is refused with :class:`~.components.NotLowerable`
naming the node.

Guarantee: for any input length for which Kaldi's computation of the chunk
exists, the graph's output is Kaldi's within float32 rounding; the output
computable range (:meth:`LengthGenericLowering.output_computable`) says for
which lengths it exists (Kaldi refuses the others: "Not all outputs were
computable").
"""

import numpy as np

from ..components.base import ComponentProperty
from ..errors import ComputationError
from ..nnet.descriptor import (BinarySumDescriptor, ConstantSumDescriptor,
                               OffsetForwardingDescriptor, OptionalSumDescriptor,
                               ReplaceIndexForwardingDescriptor, RoundingForwardingDescriptor,
                               SimpleForwardingDescriptor, SimpleSumDescriptor,
                               kSumOperation)
from ..nnet.node import NodeType
from .components import LOWERINGS, NotLowerable, PropagateContext, statistics_pooling_output
from .graph import INT64_MAX

__all__ = ["Expr", "LengthGenericLowering"]

_INF = float("inf")


# -- symbolic integers ------------------------------------------------------------------------

class Expr:
    """An integer that depends on the input length and the requested
    outputs: a constant, ``T + c`` (T: number of input frames), ``S + c``
    (S: first output time), ``E + c`` (E: last output time), +/- infinity,
    or the max / min of such. Immutable; ``key`` is canonical."""

    __slots__ = ("op", "var", "c", "args", "key")

    def __init__(self, op, var=None, c=0, args=()):
        self.op, self.var, self.c, self.args = op, var, c, tuple(args)
        if op == "lin":
            self.key = ("lin", var, c)
        elif op == "inf":
            self.key = ("inf", c)
        else:
            self.key = (op, tuple(sorted((a.key for a in self.args), key=repr)))

    # constructors
    @staticmethod
    def const(c):
        return Expr("lin", None, int(c))

    @staticmethod
    def var_(name, c=0):
        return Expr("lin", name, int(c))

    @staticmethod
    def inf(sign):
        return Expr("inf", c=1 if sign > 0 else -1)

    def is_inf(self, sign=0):
        return self.op == "inf" and (sign == 0 or self.c == sign)

    def __add__(self, k):
        if self.op == "lin":
            return Expr("lin", self.var, self.c + k)
        if self.op == "inf":
            return self
        return Expr(self.op, args=[a + k for a in self.args])

    def __sub__(self, k):
        return self + (-k)

    @staticmethod
    def _combine(op, items):
        flat = []
        for a in items:
            flat.extend(a.args if a.op == op else (a,))
        absorbing, neutral = (1, -1) if op == "max" else (-1, 1)
        if any(a.is_inf(absorbing) for a in flat):
            return Expr.inf(absorbing)
        flat = [a for a in flat if not a.is_inf(neutral)]
        if not flat:
            return Expr.inf(neutral)
        best = {}
        others = []
        for a in flat:
            if a.op == "lin":
                old = best.get(a.var)
                if old is None or (a.c > old.c if op == "max" else a.c < old.c):
                    best[a.var] = a
            else:
                others.append(a)
        items = list(best.values()) + others
        uniq = {}
        for a in items:
            uniq.setdefault(a.key, a)
        items = list(uniq.values())
        if len(items) == 1:
            return items[0]
        return Expr(op, args=items)

    @staticmethod
    def max(*items):
        return Expr._combine("max", items)

    @staticmethod
    def min(*items):
        return Expr._combine("min", items)

    def eval(self, env):
        if self.op == "lin":
            return self.c + (env[self.var] if self.var else 0)
        if self.op == "inf":
            return _INF if self.c > 0 else -_INF
        values = [a.eval(env) for a in self.args]
        return max(values) if self.op == "max" else min(values)

    def __str__(self):
        if self.op == "lin":
            if self.var is None:
                return str(self.c)
            return self.var + ("%+d" % self.c if self.c else "")
        if self.op == "inf":
            return "inf" if self.c > 0 else "-inf"
        return "%s(%s)" % (self.op, ",".join(str(a) for a in self.args))

    @staticmethod
    def parse(text):
        """The inverse of str()."""
        text = text.strip()
        if text in ("inf", "-inf"):
            return Expr.inf(1 if text == "inf" else -1)
        if text.startswith(("max(", "min(")):
            args, depth, start = [], 0, 4
            for i, ch in enumerate(text[4:-1], 4):
                depth += ch == "("
                depth -= ch == ")"
                if ch == "," and depth == 0:
                    args.append(Expr.parse(text[start:i]))
                    start = i + 1
            args.append(Expr.parse(text[start:-1]))
            return Expr.max(*args) if text.startswith("max") else Expr.min(*args)
        if text[0].isalpha():
            var, rest = text[0], text[1:]
            return Expr.var_(var, int(rest) if rest else 0)
        return Expr.const(int(text))

    def __eq__(self, other):
        return isinstance(other, Expr) and self.key == other.key

    def __hash__(self):
        return hash(self.key)


_ALL = (Expr.inf(-1), Expr.inf(1))


def _meet(a, b):
    return Expr.max(a[0], b[0]), Expr.min(a[1], b[1])


def _ge(x, y):
    """True if x >= y for every value of the variables (False when that
    cannot be shown)."""
    if y.is_inf(-1) or x.is_inf(1):
        return True
    if x.is_inf(-1) or y.is_inf(1):
        return False
    if x.op == "max":
        return any(_ge(a, y) for a in x.args)
    if x.op == "min":
        return all(_ge(a, y) for a in x.args)
    if y.op == "max":
        return all(_ge(x, a) for a in y.args)
    if y.op == "min":
        return any(_ge(x, a) for a in y.args)
    return x.var == y.var and x.c >= y.c


def _within(a, b):
    """True if interval a is provably inside interval b."""
    return _ge(a[0], b[0]) and _ge(b[1], a[1])


def _hull(a, b):
    return Expr.min(a[0], b[0]), Expr.max(a[1], b[1])


def _shift(interval, k):
    return interval[0] + k, interval[1] + k


# -- references a node makes ----------------------------------------------------------------------

class _Ref:
    """Node ``node`` read at time t + ``offset`` (``fixed``: at time
    ``fixed`` whatever t, a ReplaceIndex), zero where not computable if
    ``optional``."""

    __slots__ = ("node", "offset", "optional", "fixed")

    def __init__(self, node, offset, optional, fixed=None):
        self.node, self.offset, self.optional, self.fixed = node, offset, optional, fixed


class LengthGenericLowering:
    """Analysis and lowering of one simple network (see the module
    docstring). ``subsampling``: the step between output times."""

    def __init__(self, nnet, subsampling=1):
        self.nnet = nnet
        self.f = int(subsampling)
        self.names = nnet.node_names
        if nnet.modulus() != 1:
            raise NotLowerable("cannot export a length-generic computation of a network with "
                               "modulus %d (only modulus 1)" % nnet.modulus())
        self.output = nnet.get_node_index("output")
        self.refs = {}
        self._collect(self.output)
        self.sccs = self._sccs()
        self.comp = {}
        self.conds = {}         # node -> intervals that must be non-empty for it to exist
        self.need = {}
        self.range = {}
        self.scc_of = {}
        for k, scc in enumerate(self.sccs):
            for n in scc:
                self.scc_of[n] = k
        self._computable()
        self._needed()

    # -- structure -------------------------------------------------------------------------------
    def _refuse(self, node, why):
        raise NotLowerable("cannot export node '%s' to a length-generic ONNX graph: %s"
                           % (self.names[node], why))

    def _collect(self, root):
        stack = [root]
        while stack:
            n = stack.pop()
            if n in self.refs:
                continue
            refs = self._node_refs(n)
            self.refs[n] = refs
            stack.extend(r.node for r in refs)

    def _node_refs(self, n):
        nnet = self.nnet
        node = nnet.nodes[n]
        t = node.node_type
        if t == NodeType.kInput:
            if self.names[n] not in ("input", "ivector"):
                self._refuse(n, "an input node other than 'input' and 'ivector'")
            return []
        if t == NodeType.kDimRange:
            return [_Ref(node.node_index, 0, False)]
        if t == NodeType.kComponent:
            if self._component(n).type_name in ("ConstantComponent", "DropoutMaskComponent"):
                return []                          # they read no input
            return [_Ref(n - 1, 0, False)]        # offsets are the component's (below)
        refs = []
        for part in node.descriptor.parts:
            self._sum_refs(n, part, False, refs)
        return refs

    def _sum_refs(self, n, part, optional, refs):
        if isinstance(part, SimpleSumDescriptor):
            refs.append(self._fwd_ref(n, part.src, optional))
        elif isinstance(part, OptionalSumDescriptor):
            self._sum_refs(n, part.src, True, refs)
        elif isinstance(part, BinarySumDescriptor):
            if part.op != kSumOperation:
                self._refuse(n, "Failover() is not supported")
            self._sum_refs(n, part.src1, optional, refs)
            self._sum_refs(n, part.src2, optional, refs)
        elif isinstance(part, ConstantSumDescriptor):
            pass
        else:
            self._refuse(n, "descriptor %s is not supported" % type(part).__name__)

    def _fwd_ref(self, n, fwd, optional):
        offset = 0
        while True:
            if isinstance(fwd, SimpleForwardingDescriptor):
                return _Ref(fwd.src_node, offset, optional)
            if isinstance(fwd, OffsetForwardingDescriptor):
                if fwd.offset.n != 0 or fwd.offset.x != 0:
                    self._refuse(n, "Offset() in n or x is not supported")
                offset += fwd.offset.t
                fwd = fwd.src
            elif isinstance(fwd, RoundingForwardingDescriptor):
                if fwd.t_modulus != 1:
                    self._refuse(n, "Round() with a period is not supported")
                fwd = fwd.src
            elif isinstance(fwd, ReplaceIndexForwardingDescriptor):
                if fwd.variable not in ("t", 1):
                    self._refuse(n, "ReplaceIndex() of x is not supported")
                inner = self._fwd_ref(n, fwd.src, optional)
                if inner.offset != 0 or inner.fixed is not None:
                    self._refuse(n, "ReplaceIndex() of an Offset() is not supported")
                return _Ref(inner.node, 0, optional, fixed=fwd.value)
            else:
                self._refuse(n, "descriptor %s is not supported" % type(fwd).__name__)

    def _sccs(self):
        """Strongly connected components of the node graph, dependencies
        first (Tarjan)."""
        index, low, on_stack, stack, out = {}, {}, set(), [], []
        counter = [0]
        for root in sorted(self.refs):
            if root in index:
                continue
            work = [(root, 0)]
            while work:
                v, i = work.pop()
                if i == 0:
                    index[v] = low[v] = counter[0]
                    counter[0] += 1
                    stack.append(v)
                    on_stack.add(v)
                deps = [r.node for r in self.refs[v]]
                if i < len(deps):
                    work.append((v, i + 1))
                    w = deps[i]
                    if w not in index:
                        work.append((w, 0))
                    elif w in on_stack:
                        low[v] = min(low[v], index[w])
                    continue
                for w in deps:
                    if w in on_stack:
                        low[v] = min(low[v], low[w])
                if low[v] == index[v]:
                    scc = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        scc.append(w)
                        if w == v:
                            break
                    out.append(sorted(scc))
        return out

    # -- component time relations ---------------------------------------------------------------
    def _component(self, n):
        return self.nnet.components[self.nnet.nodes[n].component_index]

    def _component_kind(self, n):
        c = self._component(n)
        name = c.type_name
        if name == "TdnnComponent":
            return "tdnn"
        if name == "StatisticsExtractionComponent":
            if c.input_period != 1 or c.output_period != 1:
                self._refuse(n, "StatisticsExtraction with periods other than 1")
            return "stats-extraction"
        if name == "StatisticsPoolingComponent":
            if c.input_period != 1:
                self._refuse(n, "StatisticsPooling with an input period other than 1")
            return "stats-pooling"
        if name in ("ConstantComponent", "DropoutMaskComponent"):
            return "constant"
        if name == "TimeHeightConvolutionComponent":
            return "convolution"
        if name == "RestrictedAttentionComponent":
            return "attention"
        if name in ("GeneralDropoutComponent", "SpecAugmentTimeMaskComponent",
                    "BackpropTruncationComponent"):
            return "simple"
        if c.properties() & ComponentProperty.kSimpleComponent:
            return "simple"
        self._refuse(n, "component type %s has no length-generic lowering" % name)

    def _component_comp(self, n, d):
        kind = self._component_kind(n)
        c = self._component(n)
        if kind == "tdnn":
            out = _ALL
            for o in c.time_offsets:
                out = _meet(out, _shift(d, -o))
            return out
        if kind == "stats-pooling":
            return d[0] - c.right_context, d[1] + c.left_context
        if kind == "constant":
            return _ALL
        if kind == "convolution":
            out = _ALL
            for o in c.model.required_time_offsets:
                out = _meet(out, _shift(d, -o))
            return out
        if kind == "attention":
            out = _ALL
            for o in range(-c.num_left_inputs_required, c.num_right_inputs_required + 1):
                out = _meet(out, _shift(d, -o * c.time_stride))
            return out
        return d

    def _component_need(self, n, r):
        kind = self._component_kind(n)
        c = self._component(n)
        if kind == "tdnn":
            return r[0] + min(c.time_offsets), r[1] + max(c.time_offsets)
        if kind == "stats-pooling":
            return r[0] - c.left_context, r[1] + c.right_context
        if kind == "constant":
            return None
        if kind == "convolution":
            offsets = c.model.all_time_offsets
            return r[0] + min(offsets), r[1] + max(offsets)
        if kind == "attention":
            return (r[0] - c.num_left_inputs * c.time_stride,
                    r[1] + c.num_right_inputs * c.time_stride)
        return r

    # -- computable and needed times -------------------------------------------------------------
    def _node_comp(self, n, comp):
        nnet = self.nnet
        t = nnet.nodes[n].node_type
        if t == NodeType.kInput:
            if self.names[n] == "input":
                return Expr.const(0), Expr.var_("T", -1)
            return Expr.const(0), Expr.const(0)
        if t == NodeType.kComponent:
            if not self.refs[n]:
                return _ALL                         # reads no input
            return self._component_comp(n, comp[n - 1])
        out = _ALL
        for r in self.refs[n]:
            if r.optional:
                continue
            src = comp[r.node]
            if r.fixed is not None:
                if not (src[0].op == "lin" and src[0].var is None and src[1].op == "lin"
                        and src[1].var is None and src[0].c <= r.fixed <= src[1].c):
                    self._refuse(n, "ReplaceIndex() of node '%s' at t=%d, which is not given"
                                 % (self.names[r.node], r.fixed))
                continue
            out = _meet(out, _shift(src, -r.offset))
        return out

    def _node_conds(self, n):
        """The intervals (of this node's sources) that must be non-empty for
        it to be computable at all: a widening (StatisticsPooling's window)
        of an empty interval is empty, not wide."""
        conds = set()
        nnet = self.nnet
        if nnet.nodes[n].node_type == NodeType.kComponent:
            conds |= set(self.conds.get(n - 1, ()))
            if self._component_kind(n) == "stats-pooling":
                conds.add(self.comp[n - 1])
            return conds
        for r in self.refs[n]:
            if not r.optional:
                conds |= set(self.conds.get(r.node, ()))
        return conds

    def _computable(self):
        comp = self.comp
        for scc in self.sccs:
            if len(scc) == 1 and not any(r.node == scc[0] for r in self.refs[scc[0]]):
                comp[scc[0]] = self._node_comp(scc[0], comp)
                self.conds[scc[0]] = self._node_conds(scc[0])
                continue
            self._check_recurrence(scc)
            for n in scc:
                comp[n] = _ALL
            for _ in range(len(scc) + 1):
                for n in scc:
                    comp[n] = self._node_comp(n, comp)
            # The values carried from one time to the next must stop being
            # computable exactly where the recurrence does (IfDefined's zero
            # before its first time is then the Scan's zero state); the other
            # members may be computable at more times.
            carriers = self._carriers(scc)
            keys = {(comp[n][0].key, comp[n][1].key) for n in carriers}
            if len(keys) != 1:
                self._refuse(scc[0], "the values its recurrence carries are computable at "
                                     "different times")
            base = comp[carriers[0]]
            for n in scc:
                if not _within(base, comp[n]):
                    self._refuse(n, "it is computable at fewer times than the recurrence it "
                                    "belongs to")
            conds = set()
            for _ in range(2):
                for n in scc:
                    self.conds[n] = self._node_conds(n) | conds
                    conds |= self.conds[n]

    def _carriers(self, scc):
        members = set(scc)
        return sorted({r.node for n in scc for r in self.refs[n]
                       if r.node in members and r.offset != 0})

    def _check_recurrence(self, scc):
        members = set(scc)
        directions = set()
        for n in scc:
            if self.nnet.nodes[n].node_type == NodeType.kComponent and \
                    self._component_kind(n) != "simple":
                self._refuse(n, "a %s inside a recurrence" % self._component(n).type_name)
            for r in self.refs[n]:
                if r.node in members and r.offset != 0:
                    if not r.optional:
                        self._refuse(n, "a recurrence through Offset(%s, %d) without IfDefined"
                                     % (self.names[r.node], r.offset))
                    directions.add(1 if r.offset > 0 else -1)
                if r.node in members and r.fixed is not None:
                    self._refuse(n, "ReplaceIndex() inside a recurrence")
        if len(directions) != 1:
            self._refuse(scc[0], "a recurrence that reads both past and future times")

    def _needed(self):
        need = {n: None for n in self.refs}
        e = Expr.var_("E")
        need[self.output] = (Expr.var_("S"), e)
        comp, rng = self.comp, self.range

        def add(node, interval):
            if interval is None:
                return
            need[node] = interval if need[node] is None else _hull(need[node], interval)

        for scc in reversed(self.sccs):
            members = set(scc)
            recurrent = len(scc) > 1 or any(r.node == scc[0] for r in self.refs[scc[0]])
            hull = None
            for n in scc:
                if need[n] is not None:
                    hull = need[n] if hull is None else _hull(hull, need[n])
            if hull is None:
                for n in scc:
                    rng[n] = None
                continue
            if recurrent:
                back = any(r.offset > 0 for n in scc for r in self.refs[n]
                           if r.node in members)
                wanted = hull
                hull = (hull[0], Expr.inf(1)) if back else (Expr.inf(-1), hull[1])
                scc_range = _meet(hull, comp[self._carriers(scc)[0]])
                for n in scc:
                    # what other nodes need of a member must be inside the range
                    if need[n] is not None and not _within(_meet(need[n], comp[n]),
                                                           scc_range):
                        self._refuse(n, "other nodes need it at times its recurrence does "
                                        "not compute")
                    rng[n] = scc_range
            else:
                for n in scc:
                    rng[n] = _meet(need[n], comp[n])
            for n in scc:
                r_n = rng[n]
                t = self.nnet.nodes[n].node_type
                for r in self.refs[n]:
                    if r.node in members:
                        continue
                    if r.fixed is not None:
                        add(r.node, (Expr.const(r.fixed), Expr.const(r.fixed)))
                    elif t == NodeType.kComponent:
                        add(r.node, self._component_need(n, r_n))
                    else:
                        add(r.node, _shift(r_n, r.offset))
        self.need = need

    def output_computable(self):
        """(first, last, conditions): the output times Kaldi can compute from
        T input frames are first..last, provided every interval of
        ``conditions`` is non-empty (else none)."""
        lo, hi = self.comp[self.output]
        return lo, hi, sorted(self.conds.get(self.output, ()), key=lambda c: str(c))

    # -- emission ----------------------------------------------------------------------------------
    def lower(self, g, bind_outputs=None, log_priors=None):
        """Adds the graph to ``g`` (graph inputs ``input`` [and ``ivector``],
        plus ``first_output`` / ``num_outputs`` unless ``bind_outputs`` =
        (first, count) fixes them) and its output ``output``."""
        self.g = g
        nnet = self.nnet
        g.add_input("input", 1, ["batch", "frames", nnet.input_dim("input")])
        if "ivector" in (self.names[n] for n in self.refs):
            g.add_input("ivector", 1, ["batch", 1, nnet.input_dim("ivector")])
        if bind_outputs is None:
            g.add_input("first_output", 7, [1])
            g.add_input("num_outputs", 7, [1])
            self._first = "first_output"
            self._count = "num_outputs"
        else:
            self._first = g.ints([bind_outputs[0]])
            self._count = g.ints([bind_outputs[1]])
        self._values = {}
        self.tensors = {}
        for scc in self.sccs:
            if any(self.range[n] is None for n in scc):
                continue
            if len(scc) == 1 and not any(r.node == scc[0] for r in self.refs[scc[0]]):
                self.tensors[scc[0]] = self._emit_node(scc[0])
            else:
                self._emit_recurrence(scc)
        out, lo, _ = self.tensors[self.output]
        # the requested outputs: every f-th row from the first
        count = self._count
        start = g.op("Sub", [self._first, self._val(lo)])
        end = g.op("Add", [start, g.op("Mul", [g.op("Sub", [count, g.ints([1])]),
                                               g.ints([self.f])])])
        end = g.op("Add", [end, g.ints([1])])
        value = g.op("Slice", [out, start, end, g.ints([1]), g.ints([self.f])], "outputs")
        if log_priors is not None:
            value = g.op("Sub", [value, g.const(log_priors, "log_priors")])
        g.add_output("output", value, 1, ["batch", "output_frames", nnet.output_dim("output")])
        return g

    def _val(self, expr):
        """An Expr as an int64 [1] value in the current graph."""
        g = self.g

        def build():
            if expr.op == "inf":
                raise ComputationError("internal error: an unbounded range reached the graph")
            if expr.op == "lin":
                if expr.var is None:
                    return g.ints([expr.c])
                base = {"T": self._frames, "S": lambda: self._first, "E": self._last}[expr.var]()
                return base if expr.c == 0 else g.op("Add", [base, g.ints([expr.c])])
            args = [self._val(a) for a in expr.args]
            return g.op("Max" if expr.op == "max" else "Min", args)
        return g.memo(("expr", expr.key), build)

    def _frames(self):
        g = self.g
        return g.memo("frames", lambda: g.op("Slice", [g.op("Shape", ["input"]), g.ints([1]),
                                                       g.ints([2])], "frames"))

    def _last(self):
        g = self.g
        return g.memo("last", lambda: g.op("Add", [self._first, g.op(
            "Mul", [g.op("Sub", [self._count, g.ints([1])]), g.ints([self.f])])], "last"))

    def _length(self, lo, hi):
        """max(0, hi - lo + 1) of two [1] values."""
        g = self.g
        return g.op("Max", [g.op("Add", [g.op("Sub", [hi, lo]), g.ints([1])]), g.ints([0])])

    def _filled(self, value, length, dim):
        g = self.g
        shape = g.op("Concat", [g.op("Slice", [g.op("Shape", ["input"]), g.ints([0]),
                                              g.ints([1])]), length, g.ints([1])], axis=0)
        return g.op("Expand", [g.const(np.full((1, 1, dim), value, np.float32), "fill"), shape])

    def _rows(self, n, lo, hi, optional):
        """Node n at times [lo, hi] (values [1]) as [batch, rows, dim]; zero
        rows where it is not computed (only when ``optional``)."""
        g = self.g
        dim = self.nnet.node_dim(n)
        entry = self.tensors.get(n)
        if entry is None:
            if not optional:
                raise ComputationError("internal error: node '%s' is read but not computed"
                                       % self.names[n])
            return self._filled(0.0, self._length(lo, hi), dim)
        value, node_lo, node_hi = entry
        base = self._val(node_lo)
        if not optional:
            start = g.op("Sub", [lo, base])
            end = g.op("Add", [g.op("Sub", [hi, base]), g.ints([1])])
            return g.op("Slice", [value, start, end, g.ints([1])], "rows")
        length = self._length(lo, hi)
        top = self._val(node_hi)
        valid_lo = g.op("Max", [lo, base])
        valid_len = self._length(valid_lo, g.op("Min", [hi, top]))
        pre = g.op("Min", [g.op("Max", [g.op("Sub", [base, lo]), g.ints([0])]), length])
        post = g.op("Sub", [g.op("Sub", [length, pre]), valid_len])
        start = g.op("Sub", [valid_lo, base])
        part = g.op("Slice", [value, start, g.op("Add", [start, valid_len]), g.ints([1])])
        pads = g.op("Concat", [g.ints([0]), pre, g.ints([0, 0]), post, g.ints([0])], axis=0)
        return g.op("Pad", [part, pads], "padded", mode="constant")

    def _fixed_row(self, n, t, length):
        """Node n's row at time t, repeated ``length`` times."""
        g = self.g
        value, node_lo, _ = self.tensors[n]
        start = g.op("Sub", [g.ints([t]), self._val(node_lo)])
        row = g.op("Slice", [value, start, g.op("Add", [start, g.ints([1])]), g.ints([1])])
        shape = g.op("Concat", [g.ints([1]), length, g.ints([1])], axis=0)
        return g.op("Expand", [row, shape])

    def _descriptor(self, n, resolve, length):
        """Node n's Descriptor; ``resolve(node, offset, optional)`` gives a
        source's rows, ``length`` is the number of rows."""
        parts = [self._sum(n, part, resolve, length, False)
                 for part in self.nnet.nodes[n].descriptor.parts]
        return self.g.concat(parts, 2)

    def _sum(self, n, part, resolve, length, optional):
        g = self.g
        if isinstance(part, SimpleSumDescriptor):
            return self._forward(n, part.src, resolve, length, optional)
        if isinstance(part, OptionalSumDescriptor):
            return self._sum(n, part.src, resolve, length, True)
        if isinstance(part, BinarySumDescriptor):
            return g.add(self._sum(n, part.src1, resolve, length, optional),
                         self._sum(n, part.src2, resolve, length, optional))
        return self._filled(part.value, length, part.dim_)

    def _forward(self, n, fwd, resolve, length, optional):
        offset = 0
        while not isinstance(fwd, (SimpleForwardingDescriptor, ReplaceIndexForwardingDescriptor)):
            if isinstance(fwd, OffsetForwardingDescriptor):
                offset += fwd.offset.t
            fwd = fwd.src
        if isinstance(fwd, ReplaceIndexForwardingDescriptor):
            inner = fwd.src
            value = resolve(inner.src_node, None, optional, fixed=fwd.value)
            return self.g.scale(value, inner.scale)
        return self.g.scale(resolve(fwd.src_node, offset, optional), fwd.scale)

    # -- one node over its interval ------------------------------------------------------------
    def _emit_node(self, n):
        g = self.g
        nnet = self.nnet
        lo_e, hi_e = self.range[n]
        lo, hi = self._val(lo_e), self._val(hi_e)
        length = self._length(lo, hi)
        node = nnet.nodes[n]
        t = node.node_type
        if t == NodeType.kInput:
            if self.names[n] == "ivector":
                return "ivector", lo_e, hi_e
            end = g.op("Add", [hi, g.ints([1])])
            return g.op("Slice", ["input", lo, end, g.ints([1])], "input_rows"), lo_e, hi_e

        def resolve(src, offset, optional, fixed=None):
            if fixed is not None:
                return self._fixed_row(src, fixed, length)
            return self._rows(src, g.op("Add", [lo, g.ints([offset])]),
                              g.op("Add", [hi, g.ints([offset])]), optional)

        if t == NodeType.kDimRange:
            x = self._rows(node.node_index, lo, hi, False)
            value = g.slice(x, 2, node.dim_offset, node.dim_offset + node.dim)
        elif t == NodeType.kDescriptor:
            value = self._descriptor(n, resolve, length)
        else:
            value = self._emit_component(n, lo, hi, length)
        return value, lo_e, hi_e

    def _emit_component(self, n, lo, hi, length):
        g = self.g
        c = self._component(n)
        kind = self._component_kind(n)
        name = self.names[n]
        if kind == "constant":
            if c.type_name == "DropoutMaskComponent":
                ctx = PropagateContext(g, name, None, lambda: None)
                like = self._filled(0.0, length, 1)
                return LOWERINGS[c.type_name](ctx, c, like, None)
            return self._filled_rows(c.output, length)
        if kind == "convolution":
            return self._convolution(n, c, lo, hi)
        if kind == "attention":
            return self._attention(n, c, lo, hi)
        if kind == "tdnn":
            parts = [self._rows(n - 1, g.op("Add", [lo, g.ints([o])]),
                                g.op("Add", [hi, g.ints([o])]), False) for o in c.time_offsets]
            y = g.matmul_t(g.concat(parts, 2), c.linear_params)
            if c.bias_params.shape[0]:
                y = g.add(y, g.const(c.bias_params, "bias"))
            return y
        x = self._rows(n - 1, lo, hi, False)
        if kind == "stats-extraction":
            ones = g.rows_like(x, g.const(np.ones((1, 1, 1), np.float32), "one"))
            parts = [ones, x]
            if c.include_variance:
                parts.append(g.op("Mul", [x, x]))
            return g.concat(parts, 2)
        if kind == "stats-pooling":
            return self._stats_pooling(n, c, lo, hi)
        ctx = PropagateContext(g, name, None, lambda: None)
        return LOWERINGS[c.type_name](ctx, c, x, None)

    def _filled_rows(self, vector, length):
        g = self.g
        vector = np.asarray(vector, np.float32).reshape(1, 1, -1)
        shape = g.op("Concat", [g.op("Slice", [g.op("Shape", ["input"]), g.ints([0]),
                                              g.ints([1])]), length, g.ints([1])], axis=0)
        return g.op("Expand", [g.const(vector, "row"), shape])

    def _stats_pooling(self, n, c, lo, hi):
        """Sums of the input rows in [t - left, t + right] (those computed:
        the computable ones), from float64 prefix sums."""
        g = self.g
        value, in_lo_e, in_hi_e = self.tensors[n - 1]
        in_lo = self._val(in_lo_e)
        in_len = self._length(in_lo, self._val(in_hi_e))
        scalar = lambda v: g.op("Squeeze", [v, g.ints([0])])
        times = g.op("Range", [scalar(lo), scalar(g.op("Add", [hi, g.ints([1])])),
                               scalar(g.ints([1]))], "times")
        zero, top = scalar(g.ints([0])), scalar(in_len)
        begin = g.op("Sub", [g.op("Sub", [times, scalar(g.ints([c.left_context]))]),
                             scalar(in_lo)])
        end = g.op("Add", [g.op("Sub", [times, scalar(in_lo)]),
                           scalar(g.ints([c.right_context + 1]))])
        begin = g.op("Min", [g.op("Max", [begin, zero]), top])
        end = g.op("Min", [g.op("Max", [end, zero]), top])
        axis = g.const(np.asarray(1, np.int64), "axis")
        cum = g.op("CumSum", [g.pad_rows(g.op("Cast", [value], to=11), 1, 0), axis], "cumsum")
        total = g.op("Sub", [g.op("Gather", [cum, end], axis=1),
                             g.op("Gather", [cum, begin], axis=1)])
        total = g.op("Cast", [total], to=1)
        # A window that starts at the first row is summed in float32 in row
        # order, as Kaldi's loop sums it; the others as float64 differences.
        from_start = g.op("Gather", [g.op("CumSum", [g.pad_rows(value, 1, 0), axis]), end],
                          axis=1)
        first = g.op("Unsqueeze", [g.op("Equal", [begin, zero]), g.ints([0, 2])])
        total = g.op("Where", [first, from_start, total])
        counts = g.slice(total, 2, 0, 1)
        sums = g.slice(total, 2, 1, c.input_dim_)
        return statistics_pooling_output(g, c, counts, sums)

    def _shifted(self, n, lo, hi, offset, optional):
        g = self.g
        return self._rows(n, g.op("Add", [lo, g.ints([offset])]),
                          g.op("Add", [hi, g.ints([offset])]), optional)

    def _convolution(self, n, c, lo, hi):
        """TimeHeightConvolution: for each output height and (time, height)
        offset, the input block at that time (zero where an optional time is
        not computable) and height (zero outside the input's heights), times
        the offset's filter parameters."""
        g = self.g
        model = c.model
        nfi, nfo = model.num_filters_in, model.num_filters_out
        required = set(model.required_time_offsets)
        blocks = {}
        for dt in model.all_time_offsets:
            x = self._shifted(n - 1, lo, hi, dt, dt not in required)
            x = g.reshape(x, [0, 0, model.height_in, nfi])
            blocks[dt] = g.op("Pad", [x, g.ints([0, 0, 0, 0, 0, 0, 1, 0])], mode="constant")
        parts = []
        for dt, dh in model.offsets:
            heights = [j * model.height_subsample_out + dh for j in range(model.height_out)]
            heights = [h if 0 <= h < model.height_in else model.height_in for h in heights]
            parts.append(g.op("Gather", [blocks[dt], g.const(np.asarray(heights, np.int64),
                                                             "heights")], axis=2))
        patches = g.concat(parts, 3)        # [batch, rows, height_out, offsets * nfi]
        y = g.add(g.matmul_t(patches, c.linear_params), g.const(c.bias_params, "bias"))
        return g.reshape(y, [0, 0, model.height_out * nfo])

    def _attention(self, n, c, lo, hi):
        """RestrictedAttention: each output attends to the inputs at its
        context times (zero rows where an optional one is not computable,
        which still take part in the softmax, as in Kaldi)."""
        g = self.g
        din = c._input_dim_per_head()
        k, v = c.key_dim, c.value_dim
        context = []
        for o in range(-c.num_left_inputs, c.num_right_inputs + 1):
            optional = not (-c.num_left_inputs_required <= o <= c.num_right_inputs_required)
            context.append(self._shifted(n - 1, lo, hi, o * c.time_stride, optional))
        queries = self._rows(n - 1, lo, hi, False)
        heads = []
        for h in range(c.num_heads):
            base = h * din

            def stack(first, last):
                return g.concat([g.op("Unsqueeze", [g.slice(x, 2, base + first, base + last),
                                                    g.ints([2])]) for x in context], 2)
            q_key = g.slice(queries, 2, base + k + v, base + k + v + k)
            q_context = g.slice(queries, 2, base + k + v + k, base + din)
            dots = g.op("ReduceSum", [g.op("Mul", [g.op("Unsqueeze", [q_key, g.ints([2])]),
                                                   stack(0, k)]), g.ints([3])], keepdims=0)
            weights = g.op("Softmax", [g.add(g.scale(dots, c.key_scale), q_context)], axis=-1)
            weighted = g.op("ReduceSum", [g.op("Mul", [g.op("Unsqueeze", [weights,
                                                                          g.ints([3])]),
                                                       stack(k, k + v)]), g.ints([2])],
                            keepdims=0)
            heads.append(weighted)
            if c.output_context:
                heads.append(weights)
        return g.concat(heads, 2)

    # -- a recurrence as a Scan --------------------------------------------------------------------
    def _emit_recurrence(self, scc):
        g = self.g
        nnet = self.nnet
        members = set(scc)
        lo_e, hi_e = self.range[scc[0]]
        lo, hi = self._val(lo_e), self._val(hi_e)
        length = self._length(lo, hi)
        backward = any(r.offset > 0 for n in scc for r in self.refs[n] if r.node in members)
        direction = 1 if backward else 0
        order = self._intra_order(scc)
        depth = {}
        for n in scc:
            for r in self.refs[n]:
                if r.node in members and r.offset != 0:
                    depth[r.node] = max(depth.get(r.node, 0), abs(r.offset))
        # inputs from outside, aligned with the recurrence's times
        scan_keys, scan_values = [], []

        def outer(src, offset, optional):
            key = (src, offset, optional)
            if key not in scan_keys:
                scan_keys.append(key)
                scan_values.append(self._rows(src, g.op("Add", [lo, g.ints([offset])]),
                                              g.op("Add", [hi, g.ints([offset])]), optional))
            return scan_keys.index(key)

        for n in order:
            for r in self.refs[n]:
                if r.node not in members and r.fixed is None:
                    outer(r.node, r.offset, r.optional)
        if not scan_values:        # Scan needs a sequence to iterate over
            outer(scc[0], 0, True)
        body = g.subgraph("recurrence_" + self.names[scc[0]].replace(".", "_"))
        saved_g = self.g
        self.g = body
        states_in = {}
        for m in sorted(depth):
            name = body.fresh("ring")
            body.inputs.append(_value_info(name, ["batch", depth[m], nnet.node_dim(m)]))
            states_in[m] = name
        elements = []
        for (src, offset, optional) in scan_keys:
            name = body.fresh("step")
            dim = nnet.node_dim(src) if src not in members else nnet.node_dim(src)
            body.inputs.append(_value_info(name, ["batch", dim]))
            elements.append(body.op("Unsqueeze", [name, body.ints([1])]))
        current = {}

        def resolve(src, offset, optional, fixed=None):
            if fixed is not None:
                return self._fixed_row_outer(src, fixed)
            if src in members:
                if offset == 0:
                    return current[src]
                slot = depth[src] - abs(offset)
                return body.slice(states_in[src], 1, slot, slot + 1)
            return elements[scan_keys.index((src, offset, optional))]

        one = body.ints([1])
        for n in order:
            node = nnet.nodes[n]
            t = node.node_type
            if t == NodeType.kDimRange:
                current[n] = body.slice(resolve(node.node_index, 0, False), 2, node.dim_offset,
                                        node.dim_offset + node.dim)
            elif t == NodeType.kDescriptor:
                current[n] = self._descriptor(n, resolve, one)
            else:
                c = self._component(n)
                ctx = PropagateContext(body, self.names[n], 1, lambda: None)
                current[n] = LOWERINGS[c.type_name](ctx, c, current[n - 1], None)
        for m in sorted(depth):
            ring = states_in[m]
            new = (current[m] if depth[m] == 1
                   else body.concat([body.slice(ring, 1, 1, depth[m]), current[m]], 1))
            body.add_output(None, new, 1, ["batch", depth[m], nnet.node_dim(m)])
        exported = [n for n in scc if self._read_outside(n, members)]
        for n in exported:
            body.add_output(None, body.op("Squeeze", [current[n], body.ints([1])]), 1,
                            ["batch", nnet.node_dim(n)])
        self.g = saved_g
        initial = [self._filled(0.0, g.ints([depth[m]]), nnet.node_dim(m)) for m in sorted(depth)]
        outputs = g.op("Scan", initial + scan_values, "scan",
                       num_outputs=len(depth) + len(exported), body=body.subgraph_proto(),
                       num_scan_inputs=len(scan_values),
                       scan_input_axes=[1] * len(scan_values),
                       scan_input_directions=[direction] * len(scan_values),
                       scan_output_axes=[1] * len(exported),
                       scan_output_directions=[direction] * len(exported))
        outputs = outputs if isinstance(outputs, list) else [outputs]
        for n, value in zip(exported, outputs[len(depth):]):
            self.tensors[n] = (value, lo_e, hi_e)

    def _fixed_row_outer(self, n, t):
        """Inside a recurrence: node n's row at time t (a [batch, 1, dim]
        value of the outer graph)."""
        value, node_lo, _ = self.tensors[n]
        g = self.g
        if node_lo.op == "lin" and node_lo.var is None:
            return g.slice(value, 1, t - node_lo.c, t - node_lo.c + 1)
        raise ComputationError("internal error: ReplaceIndex() of a node with a variable range")

    def _read_outside(self, n, members):
        if n == self.output:
            return True
        return any(r.node == n for m, refs in self.refs.items() if m not in members
                   for r in refs)

    def _intra_order(self, scc):
        """The members in an order where each comes after the members it
        reads at the same time (offset 0)."""
        members = set(scc)
        deps = {n: [r.node for r in self.refs[n] if r.node in members and r.offset == 0
                    and r.fixed is None] for n in scc}
        order, state = [], {}

        def visit(u):
            state[u] = 1
            for w in deps[u]:
                if state.get(w) == 1:
                    self._refuse(u, "a zero-delay cycle")
                if not state.get(w):
                    visit(w)
            state[u] = 2
            order.append(u)

        for n in scc:
            if not state.get(n):
                visit(n)
        return order


def _value_info(name, shape):
    import onnx
    return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)
