"""Kaldi's LatticeDeterminizerPruned (lat/determinize-lattice-pruned.cc):
the readable twin of the determinizer in
``pynnet3/_fast/determinize_lattice_kernel.pyx``; :mod:`.determinize_lattice`
runs one or the other.

How (Kaldi's algorithm): subsets of (input state, residual string, residual
weight) are output states; a priority queue of (output state, label) tasks
is expanded best-first by the cost of the best path through them (forward
cost of the output state plus the subset's best cost-to-go), and tasks worse
than the best path plus ``beam`` are dropped. Guarantees: the output states
are created, numbered and given arcs in Kaldi's order (the task queue is a
binary heap handled exactly as the C++ standard library's
std::priority_queue, subsets are found again with Kaldi's approximate
equality), so the text of the result is Kaldi's wherever the input lattice
and its float costs are.

Limits (Kaldi's DeterminizeLatticePrunedOptions): ``max_states`` and
``max_arcs`` stop the expansion when the output has more states or arcs;
``max_mem`` stops it when Kaldi's approximate memory count, which is checked
before each task while the number of output states is a multiple of 10, is
above the limit even after the string repository has been rebuilt (cut down
to the strings still referenced) to at most 80% of it. The count is Kaldi's
in bytes of its x86-64 structures: 32 per repository entry (a 16-byte Entry,
counted twice), 32 per output arc or final weight (TempArc) and 24 per
subset element (Element) of output states and of the initial-subset table.
pynnet3 keeps the same entry set (an entry per distinct non-empty string
prefix created since the last rebuild, plus the prefixes of the strings still
referenced), so the cut happens at Kaldi's task. What is expanded by then is
the result; if the effective beam (the best unexpanded task's cost above the
best path) is below ``retry_cutoff`` times the beam, the input is pruned with
a narrower beam and determinized again (at most 10 tries), as Kaldi's
DeterminizeLatticePruned does. ``max_loop`` bounds each epsilon closure (an
error, for input with negative-cost epsilon loops).
"""

from dataclasses import dataclass
import heapq
import math

import numpy as np

from ..errors import PynnetError
from .lattice import CompactLattice, Lattice
from .lattice_ops import approx_equal as _approx_equal
from .lattice_ops import compare_weights as _compare
from .lattice_ops import f32 as _f32
from .lattice_ops import times as _times

__all__ = ["K_DELTA", "DeterminizeLatticePrunedOptions", "LatticeStringRepository",
           "LatticeDeterminizerPruned", "weight_cost"]

# Kaldi's kDelta, the default tolerance for equal weights.
K_DELTA = np.float32(1.0 / 1024.0)
_F = np.float32
_INF = math.inf

# Bytes Kaldi's memory count gives each object (sizeof on x86-64 with
# libstdc++): a repository Entry (parent pointer, int32 label) is 16 bytes
# and MemSize() counts it twice; a TempArc (int32 ilabel, string pointer,
# int32 nextstate, two-float weight) is 32 with padding; an Element (int32
# state, string pointer, two-float weight) is 24.
REPOSITORY_BYTES_PER_ENTRY = 32
TEMP_ARC_BYTES = 32
ELEMENT_BYTES = 24


def _int32(x):
    """x wrapped to a signed 32-bit int, as Kaldi's int32 sizes are."""
    return (x + 2**31) % 2**32 - 2**31


@dataclass(slots=True)
class DeterminizeLatticePrunedOptions:
    """Kaldi's DeterminizeLatticePrunedOptions (limits off when <= 0)."""

    delta: float = float(K_DELTA)
    max_mem: int = -1
    max_loop: int = -1
    max_states: int = -1
    max_arcs: int = -1
    retry_cutoff: float = 0.5


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


def weight_cost(w1, w2):
    """The cost of a LatticeWeight (graph + acoustic), as a double."""
    return float(w1) + float(w2)


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

    def _sift_up(self, hole, value):
        """libstdc++'s __push_heap: moves ``value`` up from ``hole`` past
        every parent that is less than it."""
        c = self.c
        parent = (hole - 1) // 2
        while hole > 0 and self._less(c[parent], value):
            c[hole] = c[parent]
            hole = parent
            parent = (hole - 1) // 2
        c[hole] = value

    def push(self, task):
        self.c.append(task)
        self._sift_up(len(self.c) - 1, task)

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
        self._sift_up(hole, last)
        return top


# -- the string repository -------------------------------------------------------------------

class LatticeStringRepository:
    """Kaldi's LatticeStringRepository as far as its size goes. Strings are
    tuples of labels here; ``entries`` holds the strings Kaldi's repository
    holds an Entry for: every non-empty string its Successor has made since
    the last rebuild (the callers below make them at Kaldi's points, so the
    set is Kaldi's), and after a rebuild the prefixes of the strings kept."""

    __slots__ = ("entries",)

    def __init__(self):
        self.entries = set()

    def successor(self, s, label):
        t = s + (label,)
        self.entries.add(t)
        return t

    def convert_from_vector(self, seq):
        for i in range(1, len(seq) + 1):
            self.entries.add(seq[:i])
        return seq

    def remove_prefix(self, s, n):
        return s if n == 0 else self.convert_from_vector(s[n:])

    def concatenate(self, a, b):
        if not a:
            return b
        if not b:
            return a
        for i in range(1, len(b) + 1):
            self.entries.add(a + b[:i])
        return a + b

    def mem_size(self):
        return _int32(len(self.entries) * REPOSITORY_BYTES_PER_ENTRY)

    def rebuild(self, to_keep):
        kept = set()
        for s in to_keep:
            for n in range(len(s), 0, -1):
                prefix = s[:n]
                if prefix in kept:
                    break
                kept.add(prefix)
        self.entries = kept


# -- the determinizer ------------------------------------------------------------------------

class LatticeDeterminizerPruned:
    """Kaldi's LatticeDeterminizerPruned over a top-sorted :class:`Lattice`
    (determinizes on input labels; output labels become strings), with the
    limits of :class:`DeterminizeLatticePrunedOptions`. ``events`` collects
    what Kaldi logs (see :func:`log_determinization_events`)."""

    def __init__(self, ifst, beam, opts=None):
        opts = opts if opts is not None else DeterminizeLatticePrunedOptions()
        self.ifst = ifst
        self.beam = float(beam)
        self.opts = opts
        self.delta = float(_F(opts.delta))
        self.output_states = []     # [minimal_subset, arcs, forward_cost]
        self.minimal_hash = {}
        self.initial_hash = {}
        self.queue = _TaskQueue()
        self.isymbol_or_final = {}
        self.repository = LatticeStringRepository()
        self.num_arcs = 0           # arcs and final weights in output_states
        self.num_elems = 0          # elements of output subsets and initial_hash keys
        self.events = []

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
        successor = self.repository.successor
        max_loop = self.opts.max_loop
        loops = 0
        while heap:
            _, _, elem = heapq.heappop(heap)
            if replaced and cur[elem[0]] != elem:
                continue
            if max_loop > 0:
                loops += 1
                if loops > max_loop + 1:
                    raise PynnetError("Lattice determinization aborted since looped more than "
                                      "%d times during epsilon closure." % max_loop)
            state, string, w1, w2 = elem
            for il, ol, x, y, t in arcs_of[state]:
                if il != 0 or (x == _INF and y == _INF):
                    continue
                n1, n2 = _times(w1, w2, x, y)
                old = cur.get(t)
                nstr = None
                if old is not None:
                    # only a better element replaces the one t has
                    comp = _compare(n1, n2, old[2], old[3])
                    if comp == 0:
                        nstr = successor(string, ol) if ol else string
                        comp = _compare_ws(n1, n2, nstr, old[2], old[3], old[1])
                    if comp != 1:
                        continue
                    replaced = True
                if nstr is None:
                    nstr = successor(string, ol) if ol else string
                ne = (t, nstr, n1, n2)
                cur[t] = ne
                heapq.heappush(heap, (t, count, ne))
                count += 1
        return sorted(cur.values(), key=lambda e: e[0])

    def convert_to_minimal(self, subset):
        return [e for e in subset if self.is_isymbol_or_final(e[0])]

    def normalize_subset(self, subset):
        """(normalized subset, total weight (w1, w2), common prefix); for an
        empty subset, Kaldi's warning (an event) and the zero weight."""
        if not subset:
            self.events.append(("empty subset",))
            return [], (_INF, _INF), self.repository.convert_from_vector(())
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
        remove_prefix = self.repository.remove_prefix
        out = []
        for st, s, w1, w2 in subset:
            out.append((st, remove_prefix(s, k), _f32(w1 - t1), _f32(w2 - t2)))
        return out, (t1, t2), self.repository.convert_from_vector(prefix)

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
        if is_final and weight_cost(fw1, fw2) + forward_cost <= self.cutoff:
            arcs.append((0, fstr, None, fw1, fw2))
            self.num_arcs += 1

    def minimal_to_state_id(self, subset, forward_cost):
        found = self._find(self.minimal_hash, subset)
        if found is not None:
            return found
        osid = len(self.output_states)
        self.output_states.append((subset, [], forward_cost))
        self._insert(self.minimal_hash, subset, osid)
        self.num_elems += len(subset)
        self.process_final(osid)
        self.process_transitions(osid)
        return osid

    def initial_to_state_id(self, subset_in, forward_cost):
        found = self._find(self.initial_hash, subset_in)
        if found is not None:
            return found
        subset = self.convert_to_minimal(self.epsilon_closure(subset_in))
        subset, (w1, w2), prefix = self.normalize_subset(subset)
        forward_cost += weight_cost(w1, w2)
        osid = self.minimal_to_state_id(subset, forward_cost)
        value = (osid, w1, w2, prefix)
        self._insert(self.initial_hash, subset_in, value)
        self.num_elems += len(subset_in)
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
        successor = self.repository.successor
        all_elems = []
        for st, s, w1, w2 in minimal:
            for il, ol, x, y, t in self.ifst.arcs[st]:
                if il == 0 or (x == _INF and y == _INF):
                    continue
                n1, n2 = _times(w1, w2, x, y)
                all_elems.append((il, t, successor(s, ol) if ol else s, n1, n2))
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
                priority = min(priority, weight_cost(n1, n2) + back[t])
                i += 1
            priority += forward_cost
            if priority > self.cutoff:
                continue
            subset = self.make_subset_unique(subset)
            self.queue.push((priority, osid, label, subset))

    def process_transition(self, osid, label, subset):
        forward_cost = self.output_states[osid][2]
        subset, (t1, t2), common = self.normalize_subset(subset)
        forward_cost += weight_cost(t1, t2)
        nextstate, n1, n2, nstr = self.initial_to_state_id(subset, forward_cost)
        common = self.repository.concatenate(common, nstr)
        t1, t2 = _times(t1, t2, n1, n2)
        self.output_states[osid][1].append((label, common, nextstate, t1, t2))
        self.num_arcs += 1

    def compute_backward_weight(self):
        lat = self.ifst
        n = lat.num_states
        back = [0.0] * n
        for s in range(n - 1, -1, -1):
            f = lat.final[s]
            cost = weight_cost(*f) if f is not None else _INF
            for il, ol, x, y, t in lat.arcs[s]:
                c = weight_cost(x, y) + back[t]
                if c < cost:
                    cost = c
            back[s] = cost
        self.backward_costs = back
        self.cutoff = back[lat.start] + self.beam

    # -- the memory limit ---------------------------------------------------------------------
    def rebuild_repository(self):
        """Keeps only the strings the output states, queued tasks and the
        initial-subset table still refer to (and their prefixes)."""
        needed = []
        for minimal, arcs, _ in self.output_states:
            needed.extend(e[1] for e in minimal)
            needed.extend(a[1] for a in arcs)
        for task in self.queue.c:
            needed.extend(e[1] for e in task[3])
        for key, entries in self.initial_hash.items():
            needed.extend(string for _, string in key)
            needed.extend(value[3] for _, value in entries)
        self.events.append(("rebuild",))
        self.repository.rebuild(needed)

    def memory_sizes(self):
        """Kaldi's (repository, arcs, elements) byte counts."""
        return (self.repository.mem_size(), _int32(self.num_arcs * TEMP_ARC_BYTES),
                _int32(self.num_elems * ELEMENT_BYTES))

    def check_memory_usage(self):
        """False when over ``max_mem`` even after rebuilding the repository
        to 80% of it (then the expansion stops, as Kaldi's)."""
        max_mem = self.opts.max_mem
        repo, arcs, elems = self.memory_sizes()
        if max_mem <= 0 or _int32(repo + arcs + elems) <= max_mem:
            return True
        self.rebuild_repository()
        new_repo = self.repository.mem_size()
        if _int32(new_repo + arcs + elems) > int(max_mem * 0.8):
            self.events.append(("memory", max_mem, repo, arcs, elems, new_repo,
                                self.effective_beam(), self.beam))
            return False
        return True

    def effective_beam(self):
        if not len(self.queue):
            return self.beam
        return self.queue.top()[0] - self.backward_costs[self.ifst.start]

    def determinize(self):
        """Returns (success, effective_beam): success is false when a limit
        stopped the expansion before the queue ran out."""
        lat = self.ifst
        self.compute_backward_weight()
        start = [(lat.start, (), 0.0, 0.0)]
        subset = self.convert_to_minimal(self.epsilon_closure(start))
        self.output_states.append((subset, [], 0.0))
        self._insert(self.minimal_hash, subset, 0)
        self.num_elems += len(subset)
        self.process_final(0)
        self.process_transitions(0)
        opts = self.opts
        while len(self.queue):
            num_states = len(self.output_states)
            if ((opts.max_states > 0 and num_states > opts.max_states)
                    or (opts.max_arcs > 0 and self.num_arcs > opts.max_arcs)
                    or (num_states % 10 == 0 and not self.check_memory_usage())):
                break
            _, osid, label, subset = self.queue.pop()
            self.process_transition(osid, label, subset)
        return not len(self.queue), self.effective_beam()

    # -- output ------------------------------------------------------------------------------
    def output_compact(self, connect=False):
        """The result as a CompactLattice; with ``connect``, connected
        (OpenFst's Connect)."""
        clat = self._output_compact()
        return clat.connect() if connect else clat

    def _output_compact(self):
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
