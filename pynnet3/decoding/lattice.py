"""Kaldi's Lattice (an FST over LatticeWeight: a pair of float costs, graph
and acoustic, ordered by their sum) with Kaldi's archive formats.

- text (``ark,t:``): ``key`` and a space, a newline, one line per arc
  ``src<TAB>dst<TAB>ilabel<TAB>olabel[<TAB>w1,w2]`` (the weight left out when
  it is (0,0)), one line per final state ``s[<TAB>w1,w2]``, then an empty
  line; numbers as C++ streams print floats (6 significant digits,
  ``Infinity``);
- binary: OpenFst's vector-FST format with arc type ``lattice4`` (header as in
  :mod:`pynnet3.decoding.fst`; per state a final weight (two floats), an int64
  arc count and 20-byte arcs: int32 ilabel, int32 olabel, two float costs,
  int32 next state).

Also Kaldi's CompactLattice (an acceptor over words whose weights are
(graph cost, acoustic cost, transition-id string); text ``src dst word
[w1,w2,t1_t2_...]``; binary arc type ``compactlattice44``, each weight two
floats, an int32 length and the int32 string), with the operations the lattice
tools need (scaling, word insertion penalty, Kaldi's CompactLatticeShortestPath).

Weights are held as Python floats that are float32 values.
"""

import math
import struct

# Sums and differences of float32 values computed in double and rounded once
# to float32 equal C's float arithmetic (double has more than 2 * 24 + 2 bits,
# so the double rounding is harmless).
from .. import _fast
from ..common.floats import f32 as _f32
from ..errors import KaldiFormatError

_kernel = _fast.load("lattice_kernel")

__all__ = ["Lattice", "CompactLattice", "read_compact_lattice_text",
           "read_compact_lattice_binary", "format_weight_value", "LATTICE_ARC_TYPE",
           "read_lattice_text", "read_fst_header", "FST_MAGIC"]

LATTICE_ARC_TYPE = "lattice4"
FST_MAGIC = 2125659606
# OpenFst property bits (fst/properties.h) that Kaldi's written lattices carry:
# raw lattices from nnet3-latgen-faster have kExpanded|kMutable plus the
# "has" bits their arcs justify; compact lattices the acceptor and
# "no epsilons" bits. Computed from the content (pynnet3 keeps no running
# property set), which reproduces the headers Kaldi writes for decoder output.
_K_EXPANDED_MUTABLE = 0x3
_K_ACCEPTOR, _K_NOT_ACCEPTOR = 0x10000, 0x20000
_K_EPSILONS, _K_NO_EPSILONS = 0x400000, 0x800000
_K_IEPSILONS, _K_NO_IEPSILONS = 0x1000000, 0x2000000
_K_OEPSILONS, _K_NO_OEPSILONS = 0x4000000, 0x8000000
_K_IDETERMINISTIC, _K_ODETERMINISTIC = 0x40000, 0x100000
_K_ILABEL_SORTED, _K_OLABEL_SORTED = 0x10000000, 0x40000000
_K_WEIGHTED, _K_UNWEIGHTED = 0x100000000, 0x200000000
_K_ACYCLIC, _K_INITIAL_ACYCLIC, _K_TOP_SORTED = 0x800000000, 0x2000000000, 0x4000000000
_K_ACCESSIBLE, _K_COACCESSIBLE = 0x10000000000, 0x40000000000
_K_UNWEIGHTED_CYCLES = 0x800000000000


def _lattice_properties(lat):
    props = _K_EXPANDED_MUTABLE
    for arcs in lat.arcs:
        for il, ol, x, y, _ in arcs:
            if il != ol:
                props |= _K_NOT_ACCEPTOR
            if il == 0:
                props |= _K_IEPSILONS
                if ol == 0:
                    props |= _K_EPSILONS
            if ol == 0:
                props |= _K_OEPSILONS
            if x != 0 or y != 0:
                props |= _K_WEIGHTED
    if any(f is not None and (f[0] != 0 or f[1] != 0) for f in lat.final):
        props |= _K_WEIGHTED
    return props


def _compact_lattice_property_bits(has_eps, weighted):
    props = _K_EXPANDED_MUTABLE | _K_ACCEPTOR
    if has_eps:
        props |= _K_EPSILONS | _K_IEPSILONS | _K_OEPSILONS
    else:
        props |= _K_NO_EPSILONS | _K_NO_IEPSILONS | _K_NO_OEPSILONS
    if weighted:
        props |= _K_WEIGHTED
    return props


def _connected_compact_lattice_property_bits(clat, has_eps, weighted, how):
    """The bits a compact lattice carries after OpenFst's Connect: those that
    deleting states keeps, plus kAccessible | kCoAccessible. Which of the
    kept bits it still had follows from how it was made (``how``, see
    :class:`CompactLattice`). ``"built"``: arcs added one by one into an
    emptied FST (a determinization's output, a conversion) keep an empty
    FST's sorted, acyclic and topologically-sorted bits as long as the
    arcs' order allows (with no arc at all, its deterministic and
    unweighted-cycles bits too). ``"pushed"``: arc values set one by one
    (pushing) keep only the acceptor, epsilon and weight bits; the
    minimizer's question then adds the sorted and topologically-sorted bits
    the arcs show. ``"rewritten"``: the minimizer then merged states and
    set arcs again: the acceptor, epsilon and weight bits alone. Checked
    against Kaldi's headers, nnet3-latgen-faster at acoustic scale 1 (no
    ScaleLattice after the Connect): the chain decode of
    scripts/bench_decode.py (20 lattices, with and without
    ``--minimize=true``) and decode/tdnn_lda (4 lattices, both ways)."""
    props = _K_EXPANDED_MUTABLE | _K_ACCEPTOR | _K_ACCESSIBLE | _K_COACCESSIBLE
    if not has_eps:
        props |= _K_NO_EPSILONS | _K_NO_IEPSILONS | _K_NO_OEPSILONS
    if not weighted:
        props |= _K_UNWEIGHTED
    if how == "rewritten":
        return props
    if how == "built" and not any(clat.arcs):
        return props | (_K_IDETERMINISTIC | _K_ODETERMINISTIC | _K_UNWEIGHTED_CYCLES
                         | _K_ILABEL_SORTED | _K_OLABEL_SORTED | _K_TOP_SORTED | _K_ACYCLIC
                         | _K_INITIAL_ACYCLIC)
    if all(arcs[i][0] <= arcs[i + 1][0] for arcs in clat.arcs for i in range(len(arcs) - 1)):
        props |= _K_ILABEL_SORTED | _K_OLABEL_SORTED
    if all(arc[4] > s for s, arcs in enumerate(clat.arcs) for arc in arcs):
        # "pushed": the minimizer asked whether the lattice was topologically
        # sorted, which OpenFst answers from the arcs (no search for cycles)
        props |= (_K_TOP_SORTED if how == "pushed"
                  else _K_TOP_SORTED | _K_ACYCLIC | _K_INITIAL_ACYCLIC)
    return props


def format_weight_value(x):
    """A float as Kaldi's WriteFloatType prints it in FST text."""
    if x == math.inf:
        return "Infinity"
    if x == -math.inf:
        return "-Infinity"
    if x != x:
        return "BadNumber"
    return "%g" % x


def _weight_scaler(scale):
    """Kaldi's ScaleTupleWeight for a 2x2 matrix ((a, b), (c, d)), as a
    function (x, y) -> (a x + b y, c x + d y) (computed in double, stored as
    float; +inf graph cost gives the zero weight (+inf, +inf)); None for the
    identity, which Kaldi's ScaleLattice leaves alone."""
    (a, b), (c, d) = scale
    if (a, b, c, d) == (1.0, 0.0, 0.0, 1.0):
        return None

    def sc(x, y):
        if x == math.inf:
            return math.inf, math.inf
        return _f32(a * x + b * y), _f32(c * x + d * y)
    return sc


class _StateLists:
    """What both lattice types share: states 0..n-1, ``arcs[s]`` the arcs
    leaving state s, ``final[s]`` its final weight or None (not final),
    ``start`` a state or None."""

    __slots__ = ("start", "arcs", "final")

    def __init__(self):
        self.start = None
        self.arcs = []
        self.final = []

    @property
    def num_states(self):
        return len(self.arcs)

    def num_arcs(self):
        return sum(len(a) for a in self.arcs)

    def connect(self):
        """OpenFst's Connect: removes states not on a path from the start to a
        final state; the others keep their relative order."""
        return _connect(self)

    def _text_order(self):
        """The order OpenFst prints states in: the start state first, then the
        others in order."""
        order = list(range(self.num_states))
        if self.start not in (None, 0):
            order.remove(self.start)
            order.insert(0, self.start)
        return order


class Lattice(_StateLists):
    """States 0..n-1; ``arcs[s]``: list of (ilabel, olabel, graph_cost,
    acoustic_cost, nextstate); ``final[s]``: (graph_cost, acoustic_cost) or
    None (not final); ``start``: a state or None."""

    __slots__ = ()

    def add_states(self, n):
        self.arcs.extend([] for _ in range(n))
        self.final.extend([None] * n)

    # -- operations --------------------------------------------------------------------
    def scale(self, scale):
        """Kaldi's ScaleLattice with a 2x2 matrix ((a, b), (c, d)): each
        weight (x, y) becomes (a x + b y, c x + d y), computed in double and
        stored as float; nothing to do for the identity; a weight whose
        graph cost is +inf becomes the zero weight (+inf, +inf), as Kaldi's
        ScaleTupleWeight."""
        sc = _weight_scaler(scale)
        if sc is None:
            return self
        for s in range(self.num_states):
            self.arcs[s] = [(il, ol) + sc(x, y) + (t,) for il, ol, x, y, t in self.arcs[s]]
            if self.final[s] is not None:
                f = sc(*self.final[s])
                # a final weight scaled to the zero weight makes the state not final
                self.final[s] = None if f[0] == math.inf else f
        return self

    # -- text ----------------------------------------------------------------------------
    def write_text(self):
        """The lattice's text form (without the key), as bytes."""
        out = []
        for s in self._text_order():
            for il, ol, x, y, t in self.arcs[s]:
                if x == 0 and y == 0:
                    out.append("%d\t%d\t%d\t%d\n" % (s, t, il, ol))
                else:
                    out.append("%d\t%d\t%d\t%d\t%s,%s\n" % (s, t, il, ol, format_weight_value(x),
                                                           format_weight_value(y)))
            fw = self.final[s]
            if fw is not None:
                if fw[0] == 0 and fw[1] == 0:
                    out.append("%d\n" % s)
                else:
                    out.append("%d\t%s,%s\n" % (s, format_weight_value(fw[0]),
                                                format_weight_value(fw[1])))
        return ("\n" + "".join(out) + "\n").encode()

    # -- binary ----------------------------------------------------------------------------
    def write_binary(self):
        parts = [_fst_header("vector", LATTICE_ARC_TYPE, self.start, self.num_states,
                             _lattice_properties(self))]
        inf = math.inf
        for s in range(self.num_states):
            fw = self.final[s] if self.final[s] is not None else (inf, inf)
            arcs = self.arcs[s]
            parts.append(struct.pack("<ffq", fw[0], fw[1], len(arcs)))
            if arcs:
                parts.append(b"".join(struct.pack("<iiffi", *a) for a in arcs))
        return b"".join(parts)

    @classmethod
    def read_binary(cls, data, pos, source):
        """(lattice, position after it) from binary data at ``pos``."""
        fst_type, arc_type, start, num_states, pos = read_fst_header(data, pos, source)
        if fst_type != "vector" or arc_type != LATTICE_ARC_TYPE:
            raise KaldiFormatError("expected a lattice (vector FST of arc type %s), got %s/%s"
                                   % (LATTICE_ARC_TYPE, fst_type, arc_type), source, pos)
        lat = cls()
        lat.add_states(num_states)
        lat.start = start if start >= 0 else None
        for s in range(num_states):
            w1, w2, n = _unpack("<ffq", data, pos, source)
            pos += 16
            if not (w1 == math.inf and w2 == math.inf):
                lat.final[s] = (w1, w2)
            size = 20 * n
            if pos + size > len(data):
                raise KaldiFormatError("lattice ends inside state %d's arcs" % s, source, pos)
            lat.arcs[s] = list(struct.iter_unpack("<iiffi", data[pos:pos + size]))
            pos += size
        return lat, pos

    def __eq__(self, other):
        return (isinstance(other, Lattice) and self.start == other.start
                and self.arcs == other.arcs and self.final == other.final)


def _unpack(fmt, data, pos, source):
    size = struct.calcsize(fmt)
    if pos + size > len(data):
        raise KaldiFormatError("file ends inside an FST", source, pos)
    return struct.unpack_from(fmt, data, pos)


def _fst_header(fst_type, arc_type, start, num_states, properties):
    """OpenFst's header as VectorFst writes it to a stream (arc count left 0)."""
    def string(s):
        b = s.encode()
        return struct.pack("<i", len(b)) + b
    return (struct.pack("<i", FST_MAGIC) + string(fst_type) + string(arc_type)
            + struct.pack("<iiQqqq", 2, 0, properties, -1 if start is None else start,
                          num_states, 0))


def read_fst_header(data, pos, source):
    (magic,) = _unpack("<i", data, pos, source)
    if magic != FST_MAGIC:
        raise KaldiFormatError("not a binary FST (bad magic number %d)" % magic, source, pos)
    pos += 4
    names = []
    for _ in range(2):
        (n,) = _unpack("<i", data, pos, source)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise KaldiFormatError("bad string in FST header", source, pos)
        names.append(bytes(data[pos:pos + n]).decode("latin-1"))
        pos += n
    _version, flags, _props, start, num_states, _num_arcs = _unpack("<iiQqqq", data, pos,
                                                                    source)
    pos += 40
    if flags & 3:
        raise KaldiFormatError("lattices with symbol tables are not supported", source, pos)
    return names[0], names[1], start, num_states, pos


class CompactLattice(_StateLists):
    """An acceptor over words whose weights carry (graph cost, acoustic
    cost, transition-id string): ``arcs[s]``: list of (label, w1, w2, string,
    nextstate); ``final[s]``: (w1, w2, string) or None.

    ``connected``: set when the last thing Kaldi's code would have done to
    this lattice is OpenFst's Connect (by
    :func:`~pynnet3.decoding.determinize_lattice.determinize_lattice_phone_pruned_wrapper`,
    as Kaldi's wrapper ends), to how it was made: ``"built"`` (arcs added
    one by one), ``"pushed"`` (then pushed; minimizing merged no state) or
    ``"rewritten"`` (pushed, and minimizing merged states). The binary
    header then carries the property bits Connect leaves (kAccessible and
    kCoAccessible, no kWeighted), as Kaldi's
    nnet3-latgen-faster writes them when the acoustic scale is 1 (chain
    models: its ScaleLattice then has nothing to do). Otherwise (False, the
    default, and after any change made here) the bits are those of the
    content, as an arc-by-arc rewrite such as ScaleLattice leaves them. Code
    that edits ``arcs`` or ``final`` directly should set it to False."""

    __slots__ = ("connected",)

    def __init__(self):
        super().__init__()
        self.connected = False

    def scale(self, scale):
        """Kaldi's ScaleLattice on the weights (strings unchanged): nothing
        to do for the identity; a weight whose graph cost is +inf becomes
        the zero weight (+inf, +inf), as Kaldi's ScaleTupleWeight."""
        sc = _weight_scaler(scale)
        if sc is None:
            return self
        self.connected = False
        for s in range(self.num_states):
            self.arcs[s] = [(l,) + sc(x, y) + (st, t) for l, x, y, st, t in self.arcs[s]]
            f = self.final[s]
            if f is not None:
                self.final[s] = sc(f[0], f[1]) + (f[2],)
        return self

    def add_word_ins_penalty(self, penalty):
        """Kaldi's AddWordInsPenToCompactLattice: ``penalty`` added (in
        float) to the graph cost of every arc with a word."""
        p = _f32(penalty)
        self.connected = False
        for s in range(self.num_states):
            self.arcs[s] = [(l, _f32(x + p) if l != 0 else x, y, st, t)
                            for l, x, y, st, t in self.arcs[s]]
        return self

    def top_order(self):
        """States in a topological order (the numbering itself when it is
        one, else OpenFst TopSort's order); None if there is a cycle."""
        n = self.num_states
        if all(a[4] > s for s in range(n) for a in self.arcs[s]):
            return list(range(n))
        color, finish = [0] * n, []
        roots = ([self.start] if self.start is not None else []) + list(range(n))
        for root in roots:
            if color[root]:
                continue
            color[root] = 1
            stack = [(root, 0)]
            while stack:
                s, i = stack[-1]
                if i < len(self.arcs[s]):
                    stack[-1] = (s, i + 1)
                    t = self.arcs[s][i][4]
                    if color[t] == 0:
                        color[t] = 1
                        stack.append((t, 0))
                    elif color[t] == 1:
                        return None
                else:
                    color[s] = 2
                    finish.append(s)
                    stack.pop()
        return finish[::-1]

    def shortest_path(self):
        """Kaldi's CompactLatticeShortestPath: the best path (costs summed in
        double) as a linear CompactLattice (empty if there is none)."""
        out = CompactLattice()
        if self.start is None:
            return out
        order = self.top_order()
        if order is None:
            raise ValueError("Was not able to topologically sort lattice (cycles found?)")
        n = self.num_states
        best = [math.inf] * (n + 1)
        pred = [None] * (n + 1)
        best[self.start] = 0.0
        for s in order:
            my = best[s]
            for l, x, y, st, t in self.arcs[s]:
                c = my + (float(x) + float(y))
                if c < best[t]:
                    best[t], pred[t] = c, s
            f = self.final[s]
            c = my + (float(f[0]) + float(f[1]) if f is not None else math.inf)
            if c < best[n]:
                best[n], pred[n] = c, s
        states = []
        cur = n
        while cur != self.start:
            prev = pred[cur]
            if prev is None:
                return out
            states.append(prev)
            cur = prev
        states.reverse()
        out.arcs = [[] for _ in states]
        out.final = [None] * len(states)
        out.start = 0
        for i, s in enumerate(states):
            if i + 1 < len(states):
                chosen = None
                for a in self.arcs[s]:
                    if a[4] == states[i + 1] and (
                            chosen is None
                            or float(a[1]) + float(a[2]) < float(chosen[1]) + float(chosen[2])):
                        chosen = a
                out.arcs[i].append(chosen[:4] + (i + 1,))
            else:
                out.final[i] = self.final[s]
        return out

    def linear_symbol_sequence(self):
        """(alignment, words, (graph cost, acoustic cost)) of a linear compact
        lattice, as GetLinearSymbolSequence gives them after ConvertLattice."""
        alignment, words = [], []
        w1 = w2 = 0.0
        s = self.start
        while s is not None:
            if self.arcs[s]:
                label, x, y, string, t = self.arcs[s][0]
                if label:
                    words.append(label)
                alignment.extend(string)
                w1, w2 = _f32(w1 + x), _f32(w2 + y)
                s = t
            else:
                f = self.final[s]
                alignment.extend(f[2])
                w1, w2 = _f32(w1 + f[0]), _f32(w2 + f[1])
                s = None
        return alignment, words, (w1, w2)

    @staticmethod
    def _weight_text(x, y, string):
        return "%s,%s,%s" % (format_weight_value(x), format_weight_value(y),
                             "_".join(str(v) for v in string))

    def write_text(self):
        out = []
        for s in self._text_order():
            for label, x, y, string, t in self.arcs[s]:
                if x == 0 and y == 0 and not string:
                    out.append("%d\t%d\t%d\n" % (s, t, label))
                else:
                    out.append("%d\t%d\t%d\t%s\n" % (s, t, label,
                                                     self._weight_text(x, y, string)))
            f = self.final[s]
            if f is not None:
                if f[0] == 0 and f[1] == 0 and not f[2]:
                    out.append("%d\n" % s)
                else:
                    out.append("%d\t%s\n" % (s, self._weight_text(*f)))
        return ("\n" + "".join(out) + "\n").encode()

    def write_binary(self):
        states, has_eps, weighted = compact_lattice_states_binary(self.arcs, self.final)
        bits = (_connected_compact_lattice_property_bits(self, has_eps, weighted, self.connected)
                if self.connected else _compact_lattice_property_bits(has_eps, weighted))
        return _fst_header("vector", "compactlattice44", self.start, self.num_states,
                           bits) + states


def compact_lattice_states_binary_py(arcs, final):
    """(bytes, has_epsilons, weighted): the states of a CompactLattice
    (``arcs[s]``: (label, w1, w2, string, nextstate); ``final[s]``: (w1, w2,
    string) or None) as OpenFst writes them after the header: per state its
    final weight (two float32 costs, the string's length as int32, then the
    string; +inf, +inf and no string when not final), its arc count as int64,
    then each arc: the label twice (input and output), its weight as above
    and the next state, all little-endian; whether an arc has label 0;
    whether an arc or final weight is not (0, 0, empty)."""
    def weight(x, y, string):
        return struct.pack("<ffi", x, y, len(string)) + struct.pack(
            "<%di" % len(string), *string)

    parts = []
    has_eps = weighted = False
    for s in range(len(arcs)):
        f = final[s] if final[s] is not None else (math.inf, math.inf, ())
        parts.append(weight(*f))
        if final[s] is not None and (f[0] != 0 or f[1] != 0 or f[2]):
            weighted = True
        parts.append(struct.pack("<q", len(arcs[s])))
        for label, x, y, string, t in arcs[s]:
            parts.append(struct.pack("<ii", label, label) + weight(x, y, string)
                         + struct.pack("<i", t))
            has_eps = has_eps or label == 0
            weighted = weighted or x != 0 or y != 0 or bool(string)
    return b"".join(parts), has_eps, weighted


(compact_lattice_states_binary,) = _fast.select(_kernel, compact_lattice_states_binary_py)


def _connect(lat):
    """Removes, in place, the states of ``lat`` (either lattice kind) that are
    not both accessible and coaccessible, renumbering the others in order;
    returns ``lat``."""
    n = lat.num_states
    keep = _connected_states(lat)
    if all(keep):
        return lat
    new_id = [-1] * n
    k = 0
    for s in range(n):
        if keep[s]:
            new_id[s] = k
            k += 1
    lat.arcs = [[a[:4] + (new_id[a[4]],) for a in lat.arcs[s] if keep[a[4]]]
                for s in range(n) if keep[s]]
    lat.final = [lat.final[s] for s in range(n) if keep[s]]
    lat.start = new_id[lat.start] if lat.start is not None and keep[lat.start] else None
    if lat.start is None:
        lat.arcs, lat.final = [], []
    return lat


def _connected_states(lat):
    """Which states are both accessible and coaccessible (arc tuples of
    either lattice kind have the next state at index 4)."""
    n = lat.num_states
    if lat.start is None:
        return [False] * n
    access = [False] * n
    access[lat.start] = True
    stack = [lat.start]
    while stack:
        s = stack.pop()
        for a in lat.arcs[s]:
            if not access[a[4]]:
                access[a[4]] = True
                stack.append(a[4])
    preds = [[] for _ in range(n)]
    for s in range(n):
        for a in lat.arcs[s]:
            preds[a[4]].append(s)
    co = [False] * n
    stack = [s for s in range(n) if lat.final[s] is not None]
    for s in stack:
        co[s] = True
    while stack:
        s = stack.pop()
        for p in preds[s]:
            if not co[p]:
                co[p] = True
                stack.append(p)
    return [access[s] and co[s] for s in range(n)]


def _read_fst_text(data, pos, source, fst, label_fields, parse_weight, one):
    """Kaldi's text form of a lattice of either kind at ``pos`` (a newline,
    the FST lines, an empty line) into the empty ``fst``: final lines
    ``s [w]``, arc lines ``src dst LABELS [w]`` with ``label_fields`` labels
    (2 for a Lattice, 1 for a CompactLattice); a missing weight is ``one``.
    Returns (fst, position after it)."""
    n = len(data)
    if pos < n and data[pos:pos + 1] == b"\n":
        pos += 1
    arc_fields = 2 + label_fields

    def state(s):
        missing = s + 1 - fst.num_states
        if missing > 0:
            fst.arcs.extend([] for _ in range(missing))
            fst.final.extend([None] * missing)
        return s

    while pos < n:
        end = data.find(b"\n", pos)
        if end < 0:
            end = n
        line = bytes(data[pos:end]).decode()
        where, pos = pos, end + 1
        fields = line.split()
        if not fields:
            break
        try:
            if len(fields) in (1, 2):
                s = state(int(fields[0]))
                fst.final[s] = parse_weight(fields[1], where) if len(fields) == 2 else one
            elif len(fields) in (arc_fields, arc_fields + 1):
                s, t = state(int(fields[0])), state(int(fields[1]))
                w = parse_weight(fields[arc_fields], where) \
                    if len(fields) == arc_fields + 1 else one
                labels = tuple(int(f) for f in fields[2:arc_fields])
                fst.arcs[s].append(labels + w + (t,))
            else:
                raise ValueError
        except ValueError:
            raise KaldiFormatError("bad %s line '%s'" % (
                "lattice" if label_fields == 2 else "compact-lattice", line),
                source, where) from None
        if fst.start is None:
            fst.start = int(fields[0])
    return fst, min(pos, n)


def read_lattice_text(data, pos, source):
    """(lattice, position after it) from Kaldi's text form at ``pos`` (a
    newline, the FST lines, an empty line)."""
    def weight(text, where):
        try:
            a, b = text.split(",")
            return (_f32(_parse_float(a)), _f32(_parse_float(b)))
        except ValueError:
            raise KaldiFormatError("bad lattice weight '%s'" % text, source, where) from None

    return _read_fst_text(data, pos, source, Lattice(), 2, weight, (0.0, 0.0))


def read_compact_lattice_text(data, pos, source):
    """(compact lattice, position after it) from Kaldi's text form (acceptor
    lines ``src dst label [w1,w2,t1_t2_...]`` and ``s [w1,w2,...]``)."""
    def weight(text, where):
        try:
            a, b, c = text.split(",")
            return (_f32(_parse_float(a)), _f32(_parse_float(b)),
                    tuple(int(v) for v in c.split("_")) if c else ())
        except ValueError:
            raise KaldiFormatError("bad compact-lattice weight '%s'" % text, source,
                                   where) from None

    return _read_fst_text(data, pos, source, CompactLattice(), 1, weight, (0.0, 0.0, ()))


def read_compact_lattice_binary(data, pos, source):
    fst_type, arc_type, start, num_states, pos = read_fst_header(data, pos, source)
    if fst_type != "vector" or arc_type != "compactlattice44":
        raise KaldiFormatError("expected a compact lattice (vector FST of arc type "
                               "compactlattice44), got %s/%s" % (fst_type, arc_type),
                               source, pos)
    clat = CompactLattice()
    clat.arcs = [[] for _ in range(num_states)]
    clat.final = [None] * num_states
    clat.start = start if start >= 0 else None

    def weight(pos):
        w1, w2, k = _unpack("<ffi", data, pos, source)
        pos += 12
        if k < 0 or pos + 4 * k > len(data):
            raise KaldiFormatError("bad string length %d in compact-lattice weight" % k,
                                   source, pos)
        string = struct.unpack_from("<%di" % k, data, pos)
        return (w1, w2, tuple(string)), pos + 4 * k

    for s in range(num_states):
        fw, pos = weight(pos)
        if not (fw[0] == math.inf and fw[1] == math.inf):
            clat.final[s] = fw
        (narcs,) = _unpack("<q", data, pos, source)
        pos += 8
        arcs = clat.arcs[s]
        for _ in range(narcs):
            label, _olabel = _unpack("<ii", data, pos, source)
            w, pos = weight(pos + 8)
            (t,) = _unpack("<i", data, pos, source)
            pos += 4
            arcs.append((label,) + w + (t,))
    return clat, pos


def _parse_float(text):
    if text == "Infinity":
        return math.inf
    if text == "-Infinity":
        return -math.inf
    return float(text)


