"""Kaldi's pruned lattice determinization (lat/determinize-lattice-pruned.cc):
DeterminizeLatticePruned and DeterminizeLatticePhonePruned(Wrapper), which
nnet3-latgen-faster applies to the raw lattice.

What it computes: from a state-level lattice with words on the input side and
transition-ids on the output side, an acceptor over words (a
:class:`CompactLattice`) that keeps, for every word sequence within
``beam`` of the best path, only its best alignment (its transition-ids are
carried as the string part of the weights). The phone-pruned variant first
determinizes on words plus a phone symbol inserted where each phone starts
(which bounds the work: alignments are merged phone by phone), deletes the
phone symbols, and determinizes again on words only.

How (Kaldi's algorithm): subsets of (input state, residual string, residual
weight) are output states; a priority queue of (output state, label) tasks
is expanded best-first by the cost of the best path through them (forward
cost of the output state plus the subset's best cost-to-go), and tasks worse
than the best path plus ``beam`` are dropped. Guarantees: the output states
are created, numbered and given arcs in Kaldi's order (the task queue is a
binary heap handled exactly as the C++ standard library's
std::priority_queue, subsets are found again with Kaldi's approximate
equality), so the text of the result is Kaldi's wherever the input lattice
and its float costs are. Not reproduced: Kaldi's approximate memory limit
(``max_mem``, which stops determinization early on very large lattices), so
such lattices come out complete here.
"""

import heapq
import math
from array import array

import numpy as np

from .lattice import CompactLattice, Lattice

__all__ = ["CompactLattice", "determinize_lattice_pruned",
           "determinize_lattice_phone_pruned_wrapper", "top_sort", "K_DELTA"]

K_DELTA = np.float32(1.0 / 1024.0)
_F = np.float32
_INF = math.inf


# Weights are Python floats holding float32 values. A float32 sum or
# difference is computed in double and rounded once to float32 through this
# one-element buffer: double rounding is harmless for + and - since double
# has more than 2 * 24 + 2 bits, so this equals C's float arithmetic.
_BUF = array("f", [0.0])


def _f32(x):
    _BUF[0] = x
    return _BUF[0]


def _times(a1, a2, b1, b2):
    buf = _BUF
    buf[0] = a1 + b1
    x = buf[0]
    buf[0] = a2 + b2
    return x, buf[0]


def _compare(a1, a2, b1, b2):
    """Kaldi's Compare on LatticeWeight: 1 if a is better (lower cost)."""
    fa, fb = _f32(a1 + a2), _f32(b1 + b2)
    if fa < fb:
        return 1
    if fa > fb:
        return -1
    if a1 < b1:
        return 1
    if a1 > b1:
        return -1
    return 0


def _compare_ws(a1, a2, astr, b1, b2, bstr):
    """Compare on (weight, string): weights first, then the shorter string,
    then the lexicographically smaller one counts as better... in Kaldi's
    sense (see LatticeDeterminizerPruned::Compare)."""
    c = _compare(a1, a2, b1, b2)
    if c != 0:
        return c
    if astr == bstr:
        return 0
    if len(astr) > len(bstr):
        return -1
    if len(astr) < len(bstr):
        return 1
    for x, y in zip(astr, bstr):
        if x < y:
            return -1
        if x > y:
            return 1
    return 0


def _cost(w1, w2):
    return float(w1) + float(w2)


def _approx_equal(a1, a2, b1, b2, delta):
    if a1 == b1 and a2 == b2:
        return True
    return abs(_f32(_f32(a1 + a2) - _f32(b1 + b2))) <= delta


# -- OpenFst helpers on Lattice -------------------------------------------------------------

def is_top_sorted(lat):
    return all(a[4] > s for s in range(lat.num_states) for a in lat.arcs[s])


def top_sort(lat):
    """OpenFst's TopSort: states renumbered in reverse DFS finishing order
    (DFS from the start state, arcs in order, then from unvisited states in
    numbering order); arcs keep their order. Returns False (and leaves the
    lattice alone) if it has a cycle."""
    n = lat.num_states
    if n == 0:
        return True
    color = [0] * n            # 0 white, 1 grey, 2 black
    pos = [0] * n              # next arc to look at, per state on the stack
    finish = []
    all_arcs = lat.arcs
    roots = ([lat.start] if lat.start is not None else []) + list(range(n))
    for root in roots:
        if color[root]:
            continue
        color[root] = 1
        stack = [root]
        while stack:
            s = stack[-1]
            arcs = all_arcs[s]
            i, na = pos[s], len(arcs)
            while i < na:
                t = arcs[i][4]
                i += 1
                c = color[t]
                if c == 0:
                    color[t] = 1
                    stack.append(t)
                    break
                if c == 1:
                    return False
            else:
                color[s] = 2
                finish.append(s)
                stack.pop()
            pos[s] = i
    order = [0] * n
    for i, s in enumerate(reversed(finish)):
        order[s] = i
    arcs = [None] * n
    final = [None] * n
    for s in range(n):
        arcs[order[s]] = [(a[0], a[1], a[2], a[3], order[a[4]]) for a in lat.arcs[s]]
        final[order[s]] = lat.final[s]
    lat.arcs, lat.final = arcs, final
    if lat.start is not None:
        lat.start = order[lat.start]
    return True


def invert(lat):
    for s in range(lat.num_states):
        lat.arcs[s] = [(ol, il, x, y, t) for il, ol, x, y, t in lat.arcs[s]]


def arc_sort_ilabel(lat):
    for s in range(lat.num_states):
        lat.arcs[s].sort(key=lambda a: a[0])


# -- std::priority_queue as libstdc++ runs it ------------------------------------------------

class _TaskQueue:
    """A binary heap with libstdc++'s push_heap/pop_heap moves, ordered so
    the task with the lowest priority cost is on top (ties broken exactly as
    std::priority_queue breaks them)."""

    def __init__(self):
        self.c = []

    def __len__(self):
        return len(self.c)

    @staticmethod
    def _less(a, b):
        # the comparator "a is lower priority than b": a.cost > b.cost
        return a[0] > b[0]

    def top(self):
        return self.c[0]

    def push(self, task):
        c = self.c
        c.append(task)
        hole = len(c) - 1
        parent = (hole - 1) // 2
        while hole > 0 and self._less(c[parent], task):
            c[hole] = c[parent]
            hole = parent
            parent = (hole - 1) // 2
        c[hole] = task

    def pop(self):
        c = self.c
        top = c[0]
        last = c.pop()
        length = len(c)
        if length == 0:
            return top
        # __adjust_heap(first, 0, length, last)
        hole = 0
        child = 0
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if self._less(c[child], c[child - 1]):
                child -= 1
            c[hole] = c[child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            c[hole] = c[child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > 0 and self._less(c[parent], last):
            c[hole] = c[parent]
            hole = parent
            parent = (hole - 1) // 2
        c[hole] = last
        return top


# -- the determinizer ------------------------------------------------------------------------

class LatticeDeterminizerPruned:
    """Kaldi's LatticeDeterminizerPruned over a top-sorted :class:`Lattice`
    (determinizes on input labels; output labels become strings)."""

    def __init__(self, ifst, beam, delta=K_DELTA):
        self.ifst = ifst
        self.beam = float(beam)
        self.delta = float(_F(delta))
        self.output_states = []     # [minimal_subset, arcs, forward_cost]
        self.minimal_hash = {}
        self.initial_hash = {}
        self.queue = _TaskQueue()
        self.isymbol_or_final = {}
        self.task_counter = 0

    # subsets are lists of (state, string, w1, w2), sorted by state
    @staticmethod
    def _key(subset):
        return tuple((e[0], e[1]) for e in subset)

    def _find(self, table, subset):
        for weights, value in table.get(self._key(subset), ()):
            if all(_approx_equal(a1, a2, e[2], e[3], self.delta)
                   for (a1, a2), e in zip(weights, subset)):
                return value
        return None

    def _insert(self, table, subset, value):
        table.setdefault(self._key(subset), []).append(
            ([(e[2], e[3]) for e in subset], value))

    def is_isymbol_or_final(self, state):
        v = self.isymbol_or_final.get(state)
        if v is None:
            v = self.ifst.final[state] is not None or any(
                a[0] != 0 and not (a[2] == _INF and a[3] == _INF)
                for a in self.ifst.arcs[state])
            self.isymbol_or_final[state] = v
        return v

    def epsilon_closure(self, subset):
        cur = {}
        heap = []
        count = 0
        for e in subset:
            cur[e[0]] = e
            heapq.heappush(heap, (e[0], count, e))
            count += 1
        replaced = False
        arcs_of = self.ifst.arcs
        while heap:
            _, _, elem = heapq.heappop(heap)
            if replaced and cur[elem[0]] != elem:
                continue
            state, string, w1, w2 = elem
            for il, ol, x, y, t in arcs_of[state]:
                if il != 0 or (x == _INF and y == _INF):
                    continue
                n1, n2 = _times(w1, w2, x, y)
                old = cur.get(t)
                if old is None:
                    nstr = string + (ol,) if ol else string
                    ne = (t, nstr, n1, n2)
                    cur[t] = ne
                    heapq.heappush(heap, (t, count, ne))
                    count += 1
                else:
                    comp = _compare(n1, n2, old[2], old[3])
                    nstr = None
                    if comp == 0:
                        nstr = string + (ol,) if ol else string
                        comp = _compare_ws(n1, n2, nstr, old[2], old[3], old[1])
                    if comp == 1:
                        if nstr is None:
                            nstr = string + (ol,) if ol else string
                        ne = (t, nstr, n1, n2)
                        cur[t] = ne
                        heapq.heappush(heap, (t, count, ne))
                        count += 1
                        replaced = True
        return sorted(cur.values(), key=lambda e: e[0])

    def convert_to_minimal(self, subset):
        return [e for e in subset if self.is_isymbol_or_final(e[0])]

    def normalize_subset(self, subset):
        """(normalized subset, total weight (w1, w2), common prefix)."""
        prefix = subset[0][1]
        t1, t2 = subset[0][2], subset[0][3]
        for e in subset[1:]:
            if _compare(t1, t2, e[2], e[3]) < 0:
                t1, t2 = e[2], e[3]
            n = 0
            s = e[1]
            m = min(len(prefix), len(s))
            while n < m and prefix[n] == s[n]:
                n += 1
            prefix = prefix[:n]
        k = len(prefix)
        out = []
        for st, s, w1, w2 in subset:
            out.append((st, s[k:], _f32(w1 - t1), _f32(w2 - t2)))
        return out, (t1, t2), prefix

    def process_final(self, osid):
        minimal, arcs, forward_cost = self.output_states[osid]
        is_final = False
        fw1 = fw2 = _INF
        fstr = ()
        for st, s, w1, w2 in minimal:
            f = self.ifst.final[st]
            if f is None:
                continue
            t1, t2 = _times(w1, w2, f[0], f[1])
            if t1 == _INF and t2 == _INF:
                continue
            if not is_final or _compare_ws(t1, t2, s, fw1, fw2, fstr) == 1:
                is_final = True
                fw1, fw2, fstr = t1, t2, s
        if is_final and _cost(fw1, fw2) + forward_cost <= self.cutoff:
            arcs.append((0, fstr, None, fw1, fw2))

    def minimal_to_state_id(self, subset, forward_cost):
        found = self._find(self.minimal_hash, subset)
        if found is not None:
            return found
        osid = len(self.output_states)
        self.output_states.append((subset, [], forward_cost))
        self._insert(self.minimal_hash, subset, osid)
        self.process_final(osid)
        self.process_transitions(osid)
        return osid

    def initial_to_state_id(self, subset_in, forward_cost):
        found = self._find(self.initial_hash, subset_in)
        if found is not None:
            return found
        subset = self.convert_to_minimal(self.epsilon_closure(subset_in))
        subset, (w1, w2), prefix = self.normalize_subset(subset)
        forward_cost += _cost(w1, w2)
        osid = self.minimal_to_state_id(subset, forward_cost)
        value = (osid, w1, w2, prefix)
        self._insert(self.initial_hash, subset_in, value)
        return value

    @staticmethod
    def make_subset_unique(subset):
        out = []
        for e in subset:
            if out and out[-1][0] == e[0]:
                o = out[-1]
                if _compare_ws(e[2], e[3], e[1], o[2], o[3], o[1]) == 1:
                    out[-1] = (o[0], e[1], e[2], e[3])
            else:
                out.append(e)
        return out

    def process_transitions(self, osid):
        minimal, _, forward_cost = self.output_states[osid]
        all_elems = []
        for st, s, w1, w2 in minimal:
            for il, ol, x, y, t in self.ifst.arcs[st]:
                if il == 0 or (x == _INF and y == _INF):
                    continue
                n1, n2 = _times(w1, w2, x, y)
                all_elems.append((il, t, s + (ol,) if ol else s, n1, n2))
        all_elems.sort(key=lambda p: (p[0], p[1]))
        i, n = 0, len(all_elems)
        back = self.backward_costs
        while i < n:
            label = all_elems[i][0]
            subset = []
            priority = _INF
            while i < n and all_elems[i][0] == label:
                _, t, s, n1, n2 = all_elems[i]
                subset.append((t, s, n1, n2))
                priority = min(priority, _cost(n1, n2) + back[t])
                i += 1
            priority += forward_cost
            if priority > self.cutoff:
                continue
            subset = self.make_subset_unique(subset)
            self.queue.push((priority, osid, label, subset))

    def process_transition(self, osid, label, subset):
        forward_cost = self.output_states[osid][2]
        subset, (t1, t2), common = self.normalize_subset(subset)
        forward_cost += _cost(t1, t2)
        nextstate, n1, n2, nstr = self.initial_to_state_id(subset, forward_cost)
        common = common + nstr
        t1, t2 = _times(t1, t2, n1, n2)
        self.output_states[osid][1].append((label, common, nextstate, t1, t2))

    def compute_backward_weight(self):
        lat = self.ifst
        n = lat.num_states
        back = [0.0] * n
        for s in range(n - 1, -1, -1):
            f = lat.final[s]
            cost = _cost(*f) if f is not None else _INF
            for il, ol, x, y, t in lat.arcs[s]:
                c = _cost(x, y) + back[t]
                if c < cost:
                    cost = c
            back[s] = cost
        self.backward_costs = back
        self.cutoff = back[lat.start] + self.beam

    def determinize(self):
        """Returns (success, effective_beam)."""
        lat = self.ifst
        self.compute_backward_weight()
        start = [(lat.start, (), 0.0, 0.0)]
        subset = self.convert_to_minimal(self.epsilon_closure(start))
        self.output_states.append((subset, [], 0.0))
        self._insert(self.minimal_hash, subset, 0)
        self.process_final(0)
        self.process_transitions(0)
        while len(self.queue):
            _, osid, label, subset = self.queue.pop()
            self.process_transition(osid, label, subset)
        return True, self.beam

    # -- output ------------------------------------------------------------------------------
    def output_compact(self):
        clat = CompactLattice()
        n = len(self.output_states)
        clat.arcs = [[] for _ in range(n)]
        clat.final = [None] * n
        if n:
            clat.start = 0
        for s, (_, arcs, _) in enumerate(self.output_states):
            for label, string, nextstate, w1, w2 in arcs:
                if nextstate is None:
                    clat.final[s] = (w1, w2, string)
                else:
                    clat.arcs[s].append((label, w1, w2, string, nextstate))
        return clat

    def output_lattice(self):
        lat = Lattice()
        n = len(self.output_states)
        lat.add_states(n)
        if n:
            lat.start = 0
        for s, (_, arcs, _) in enumerate(self.output_states):
            for label, seq, nextstate, w1, w2 in arcs:
                if nextstate is None:
                    cur = s
                    for i, sym in enumerate(seq):
                        lat.add_states(1)
                        nxt = lat.num_states - 1
                        w = (w1, w2) if i == 0 else (0.0, 0.0)
                        lat.arcs[cur].append((0, sym) + w + (nxt,))
                        cur = nxt
                    lat.final[cur] = (w1, w2) if not seq else (0.0, 0.0)
                else:
                    cur = s
                    for i in range(len(seq) - 1):
                        lat.add_states(1)
                        nxt = lat.num_states - 1
                        w = (w1, w2) if i == 0 else (0.0, 0.0)
                        lat.arcs[cur].append((label if i == 0 else 0, seq[i]) + w + (nxt,))
                        cur = nxt
                    w = (w1, w2) if len(seq) <= 1 else (0.0, 0.0)
                    lat.arcs[cur].append((label if len(seq) <= 1 else 0,
                                          seq[-1] if seq else 0) + w + (nextstate,))
        return lat


class _FastDeterminizer(LatticeDeterminizerPruned):
    """The C determinizer (pynnet3/_fast/lattice_determinize.pyx) behind
    the twin's output methods."""

    def determinize(self):
        from .._fast.lattice_determinize import LatticeDeterminizerCore
        lat = self.ifst
        n = lat.num_states
        counts = np.fromiter((len(a) for a in lat.arcs), dtype=np.int64, count=n)
        arc_begin = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=arc_begin[1:])
        flat = [a for arcs in lat.arcs for a in arcs]
        if flat:
            il, ol, w1, w2, nxt = (np.array(c) for c in zip(*flat))
        else:
            il = ol = nxt = np.zeros(0, dtype=np.int32)
            w1 = w2 = np.zeros(0, dtype=np.float32)
        f1 = np.array([f[0] if f is not None else math.inf for f in lat.final],
                      dtype=np.float32)
        f2 = np.array([f[1] if f is not None else math.inf for f in lat.final],
                      dtype=np.float32)
        core = LatticeDeterminizerCore(
            arc_begin, il.astype(np.int32), ol.astype(np.int32), w1.astype(np.float32),
            w2.astype(np.float32), nxt.astype(np.int32), f1, f2, lat.start, self.beam,
            self.delta)
        core.determinize()
        self.output_states = [(None, [(l, st, t, x, y) for l, x, y, st, t in arcs]
                               + ([(0, final[2], None, final[0], final[1])]
                                  if final is not None else []), 0.0)
                              for arcs, final in core.output()]
        return True, self.beam


def determinize_lattice_pruned(lat, beam, compact, delta=K_DELTA, fast=True):
    """Kaldi's DeterminizeLatticePruned (no memory limit): returns
    (result, success); ``compact`` picks a CompactLattice or a Lattice;
    ``fast``: the C determinizer, else this module's plain-Python twin."""
    if lat.num_states == 0 or lat.start is None:
        return (CompactLattice() if compact else Lattice()), True
    det = (_FastDeterminizer if fast else LatticeDeterminizerPruned)(lat, beam, delta)
    ok, _ = det.determinize()
    return (det.output_compact() if compact else det.output_lattice()), ok


def determinize_lattice_phone_pruned_wrapper(trans_model, lat, beam, delta=K_DELTA,
                                             phone_determinize=True, fast=True):
    """Kaldi's DeterminizeLatticePhonePrunedWrapper (phone then word
    determinization, or word only without ``phone_determinize``; no
    minimization) on a raw lattice (transition-ids on input, words on output;
    it is modified). Returns (CompactLattice, success)."""
    invert(lat)
    if not is_top_sorted(lat):
        if not top_sort(lat):
            raise ValueError("Topological sorting of state-level lattice failed (probably "
                             "your lexicon has empty words or your LM has epsilon cycles).")
    arc_sort_ilabel(lat)
    if not phone_determinize:
        clat, ok = determinize_lattice_pruned(lat, beam, True, delta, fast)
        clat.connect()
        return clat, ok
    # phone pass: insert phone symbols where phones start
    first_phone_label = max((a[0] for arcs in lat.arcs for a in arcs), default=0) + 1
    id2state, tuples = trans_model.id2state, trans_model.tuples
    start_of_phone = {}
    for s in range(lat.num_states):
        if s == lat.start:
            continue
        new_arcs = []
        for arc in lat.arcs[s]:
            il, ol, x, y, t = arc
            if ol != 0:
                info = start_of_phone.get(ol)
                if info is None:
                    phone, hmm_state = tuples[id2state[ol] - 1][:2]
                    info = (phone if hmm_state == 0 and not trans_model.is_self_loop(ol)
                            else 0)
                    start_of_phone[ol] = info
                if info:
                    if il == 0:
                        arc = (first_phone_label + info, ol, x, y, t)
                    else:
                        lat.add_states(1)
                        extra = lat.num_states - 1
                        lat.arcs[extra].append((first_phone_label + info, 0, 0.0, 0.0, t))
                        arc = (il, ol, x, y, extra)
            new_arcs.append(arc)
        lat.arcs[s] = new_arcs
    top_sort(lat)
    lat, ok1 = determinize_lattice_pruned(lat, beam, False, delta, fast)
    for s in range(lat.num_states):
        lat.arcs[s] = [(0 if a[0] >= first_phone_label else a[0],) + a[1:]
                       for a in lat.arcs[s]]
    top_sort(lat)
    clat, ok2 = determinize_lattice_pruned(lat, beam, True, delta, fast)
    clat.connect()
    return clat, ok1 and ok2
