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

Two implementations of every step run through one pipeline
(:func:`_determinize_lattice_pruned`, the wrapper): the C kernel
(pynnet3/_fast/determinize_lattice_kernel.pyx: a CLattice with invert, TopSort,
ArcSort, phone insertion and deletion, PruneLattice, Connect, and the
determinizer) and this module's plain-Python twins, which specify it and are
cross-checked against it in the tests. Without ``word_determinize`` the
result is Kaldi's ConvertLattice of the (phone-determinized) lattice
(:mod:`.lattice_ops`); with ``minimize`` it is pushed and minimized
(:mod:`.push_minimize`).
"""

import heapq
import logging
import math
from dataclasses import dataclass

import numpy as np

from ..errors import PynnetError
from .lattice import CompactLattice, Lattice
from .lattice_ops import approx_equal as _approx_equal
from .lattice_ops import arc_sort_ilabel, convert_lattice
from .lattice_ops import compare_weights as _compare
from .lattice_ops import f32 as _f32
from .lattice_ops import invert, is_top_sorted
from .lattice_ops import times as _times
from .lattice_ops import top_sort
from .push_minimize import (minimize_compact_lattice, push_compact_lattice_strings,
                            push_compact_lattice_weights)

__all__ = ["CompactLattice", "DeterminizeLatticePrunedOptions",
           "DeterminizeLatticePhonePrunedOptions", "determinize_lattice_pruned",
           "determinize_lattice_phone_pruned_wrapper", "prune_lattice", "top_sort",
           "K_DELTA"]

logger = logging.getLogger(__name__)

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
MAX_DETERMINIZE_TRIES = 10


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


@dataclass(slots=True)
class DeterminizeLatticePhonePrunedOptions:
    """Kaldi's DeterminizeLatticePhonePrunedOptions (nnet3-latgen-faster's
    --delta, --max-mem, --phone-determinize, --word-determinize,
    --minimize)."""

    delta: float = float(K_DELTA)
    max_mem: int = 50000000
    phone_determinize: bool = True
    word_determinize: bool = True
    minimize: bool = False


def log_determinization_events(events):
    """Logs what a determinizer reported, as Kaldi's LOG and WARNING lines:
    ("rebuild",) for each repository rebuild, ("memory", max_mem, repo, arcs,
    elems, new_repo, effective_beam, beam) when the memory limit stopped it."""
    for event in events:
        if event[0] == "rebuild":
            logger.info("Rebuilding repository.")
        else:
            max_mem, repo, arcs, elems, new_repo, effective_beam, beam = event[1:]
            logger.warning("Did not reach requested beam in determinize-lattice: size exceeds "
                           "maximum %d bytes; (repo,arcs,elems) = (%d,%d,%d), after rebuilding, "
                           "repo size was %d, effective beam was %g vs. requested beam %g",
                           max_mem, repo, arcs, elems, new_repo, effective_beam, beam)


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
                if old is None:
                    nstr = successor(string, ol) if ol else string
                    ne = (t, nstr, n1, n2)
                    cur[t] = ne
                    heapq.heappush(heap, (t, count, ne))
                    count += 1
                else:
                    comp = _compare(n1, n2, old[2], old[3])
                    nstr = None
                    if comp == 0:
                        nstr = successor(string, ol) if ol else string
                        comp = _compare_ws(n1, n2, nstr, old[2], old[3], old[1])
                    if comp == 1:
                        if nstr is None:
                            nstr = successor(string, ol) if ol else string
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
        if is_final and _cost(fw1, fw2) + forward_cost <= self.cutoff:
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
        forward_cost += _cost(w1, w2)
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
            cost = _cost(*f) if f is not None else _INF
            for il, ol, x, y, t in lat.arcs[s]:
                c = _cost(x, y) + back[t]
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


def phone_start_table(trans_model):
    """Per transition-id, its phone where DeterminizeLatticeInsertPhones puts
    a phone symbol (the transition starts a phone, TransitionIdIsStartOfPhone,
    and is not a self-loop), else 0."""
    id2state, tuples = trans_model.id2state, trans_model.tuples
    table = np.zeros(len(id2state), dtype=np.int32)
    for tid in range(1, len(id2state)):
        phone, hmm_state = tuples[id2state[tid] - 1][:2]
        if hmm_state == 0 and not trans_model.is_self_loop(tid):
            table[tid] = phone
    return table


def determinize_lattice_insert_phones(lat, phone_of_tid):
    """Kaldi's DeterminizeLatticeInsertPhones on a lattice with words on the
    input side: where a transition-id (output side) starts a phone, the
    phone symbol (first phone label + phone) goes on the input side, on the
    arc itself if it has no word, else on an extra arc (a new state, added in
    order) after it. Arcs of the start state are left alone. Returns the
    first phone label (highest input label + 1)."""
    first = max((a[0] for arcs in lat.arcs for a in arcs), default=0) + 1
    num_tids = len(phone_of_tid)
    for s in range(lat.num_states):
        if s == lat.start:
            continue
        new_arcs = []
        for arc in lat.arcs[s]:
            il, ol, x, y, t = arc
            if ol != 0:
                if not 0 < ol < num_tids:
                    raise PynnetError("lattice has transition-id %d but the transition model "
                                      "has only %d" % (ol, num_tids - 1))
                phone = int(phone_of_tid[ol])
                if phone:
                    if il == 0:
                        arc = (first + phone, ol, x, y, t)
                    else:
                        lat.add_states(1)
                        extra = lat.num_states - 1
                        lat.arcs[extra].append((first + phone, 0, 0.0, 0.0, t))
                        arc = (il, ol, x, y, extra)
            new_arcs.append(arc)
        lat.arcs[s] = new_arcs
    return first


def determinize_lattice_delete_phones(lat, first_phone_label):
    """Kaldi's DeterminizeLatticeDeletePhones: phone symbols become epsilons."""
    for s in range(lat.num_states):
        lat.arcs[s] = [(0 if a[0] >= first_phone_label else a[0],) + a[1:]
                       for a in lat.arcs[s]]


# -- the two implementations of the steps ------------------------------------------------------

class _TwinSteps:
    """The pipeline's steps on a :class:`Lattice` (the plain-Python twins)."""

    @staticmethod
    def load(lat):
        return lat

    @staticmethod
    def unload(lat):
        return lat

    @staticmethod
    def copy(lat):
        c = Lattice()
        c.start, c.arcs, c.final = lat.start, list(lat.arcs), list(lat.final)
        return c

    @staticmethod
    def is_empty(lat):
        return lat.num_states == 0 or lat.start is None

    invert = staticmethod(invert)
    is_top_sorted = staticmethod(is_top_sorted)
    top_sort = staticmethod(top_sort)
    arc_sort = staticmethod(arc_sort_ilabel)
    insert_phones = staticmethod(determinize_lattice_insert_phones)
    delete_phones = staticmethod(determinize_lattice_delete_phones)

    @staticmethod
    def prune(lat, beam):
        return prune_lattice(beam, lat)

    determinizer = LatticeDeterminizerPruned


class _FastDeterminizer:
    """LatticeDeterminizerPruned's interface over the C determinizer."""

    def __init__(self, ifst, beam, opts):
        from .._fast.determinize_lattice_kernel import LatticeDeterminizerCore
        self.core = LatticeDeterminizerCore(ifst, float(beam), float(_F(opts.delta)),
                                            opts.max_mem, opts.max_loop, opts.max_states,
                                            opts.max_arcs)
        self.events = []

    def determinize(self):
        ok, effective_beam = self.core.determinize()
        self.events = self.core.events
        return ok, effective_beam

    def output_lattice(self):
        return self.core.output_lattice()

    def output_compact(self):
        return self.core.output_compact()


class _FastSteps:
    """The pipeline's steps in C (pynnet3/_fast/determinize_lattice_kernel.pyx) on
    a CLattice; the twins are :class:`_TwinSteps`'."""

    @staticmethod
    def load(lat):
        from .._fast.determinize_lattice_kernel import CLattice
        return CLattice.from_lattice(lat)

    @staticmethod
    def unload(lat):
        return lat.to_lattice()

    @staticmethod
    def copy(lat):
        return lat.copy()

    @staticmethod
    def is_empty(lat):
        return lat.num_states == 0 or lat.start < 0

    @staticmethod
    def invert(lat):
        lat.invert()

    @staticmethod
    def is_top_sorted(lat):
        return lat.is_top_sorted()

    @staticmethod
    def top_sort(lat):
        return lat.top_sort()

    @staticmethod
    def arc_sort(lat):
        lat.arc_sort()

    @staticmethod
    def insert_phones(lat, phone_of_tid):
        return lat.insert_phones(phone_of_tid)

    @staticmethod
    def delete_phones(lat, first_phone_label):
        lat.delete_phones(first_phone_label)

    @staticmethod
    def prune(lat, beam):
        ok = lat.prune(float(_F(beam)))
        if ok is None:
            logger.warning("Cycles detected in lattice")
            return False
        return ok

    determinizer = _FastDeterminizer


def prune_lattice(beam, lat):
    """Kaldi's PruneLattice on a :class:`Lattice`, in place: arcs and final
    weights not on a path within ``beam`` (a float32, as Kaldi's BaseFloat)
    of the best path are removed, then the lattice is connected. Returns
    false for an empty or cyclic lattice (the latter with Kaldi's warning)."""
    beam = float(_F(beam))
    if not is_top_sorted(lat) and not top_sort(lat):
        logger.warning("Cycles detected in lattice")
        return False
    n = lat.num_states
    if n == 0:
        return False
    cost = [_INF] * n          # forward costs, then (from the end) backward costs
    cost[lat.start] = 0.0
    best_final = _INF
    for s in range(n):
        here = cost[s]
        for il, ol, x, y, t in lat.arcs[s]:
            c = here + _cost(x, y)
            if cost[t] > c:
                cost[t] = c
        f = lat.final[s]
        c = here + (_cost(*f) if f is not None else _INF)
        if c < best_final:
            best_final = c
    cutoff = best_final + beam
    bad_state = n              # a non-final state without arcs; Connect removes it
    lat.add_states(1)
    for s in range(n - 1, -1, -1):
        forward = cost[s]
        f = lat.final[s]
        backward = _cost(*f) if f is not None else _INF
        if backward + forward > cutoff and backward != _INF:
            lat.final[s] = None
        arcs = []
        for arc in lat.arcs[s]:
            arc_backward = _cost(arc[2], arc[3]) + cost[arc[4]]
            if arc_backward < backward:
                backward = arc_backward
            if forward + arc_backward > cutoff:
                arc = arc[:4] + (bad_state,)
            arcs.append(arc)
        lat.arcs[s] = arcs
        cost[s] = backward
    lat.connect()
    return lat.num_states > 0


def _determinize_lattice_pruned(steps, lat, beam, compact, opts):
    """determinize_lattice_pruned on ``steps``' lattices."""
    if steps.is_empty(lat):
        return (CompactLattice() if compact else steps.load(Lattice())), True
    retry_cutoff = float(_F(opts.retry_cutoff))
    if not 0.0 <= retry_cutoff < 1.0:
        raise PynnetError("determinization's retry cutoff must be in [0, 1), not %g"
                          % retry_cutoff)
    beam = float(beam)
    current = lat
    attempt = 1
    while True:
        det = steps.determinizer(current, beam, opts)
        ok, effective_beam = det.determinize()
        log_determinization_events(det.events)
        if (effective_beam >= beam * retry_cutoff or (compact and beam == _INF)
                or attempt == MAX_DETERMINIZE_TRIES):
            return (det.output_compact() if compact else det.output_lattice()), ok
        # never narrow the beam by more than half at once
        effective_beam = max(effective_beam, 0.0)
        new_beam = max(beam * math.sqrt(effective_beam / beam), 0.5 * beam)
        if not compact:
            logger.warning("Effective beam %g was less than beam %g * cutoff %g, pruning raw "
                           "lattice with new beam %g and retrying.", effective_beam, beam,
                           retry_cutoff, new_beam)
        beam = new_beam
        if attempt == 1:
            current = steps.copy(lat)
        steps.prune(current, beam)
        if compact:
            logger.info("Pruned state-level lattice with beam %g and retrying determinization "
                        "with that beam.", beam)
        attempt += 1


def determinize_lattice_pruned(lat, beam, compact, opts=None, fast=True):
    """Kaldi's DeterminizeLatticePruned on a top-sorted :class:`Lattice`
    with the limits of ``opts`` (a :class:`DeterminizeLatticePrunedOptions`;
    default: none): returns (result, success); ``compact`` picks a
    CompactLattice or a Lattice; ``fast``: in C, else this module's
    plain-Python twin. When a limit leaves the effective beam under
    ``retry_cutoff`` times the beam, the input is pruned to a narrower beam
    (a copy; ``lat`` is not changed) and determinized again, as Kaldi's."""
    steps = _FastSteps if fast else _TwinSteps
    opts = opts if opts is not None else DeterminizeLatticePrunedOptions()
    result, ok = _determinize_lattice_pruned(steps, steps.load(lat), beam, compact, opts)
    return (result if compact else steps.unload(result)), ok


def determinize_lattice_phone_pruned_wrapper(trans_model, lat, beam, opts=None, fast=True):
    """Kaldi's DeterminizeLatticePhonePrunedWrapper with ``opts`` (a
    :class:`DeterminizeLatticePhonePrunedOptions`; default Kaldi's: phone
    then word determinization, ``max_mem`` 50,000,000, no minimization;
    without word determinization the (phone-determinized) lattice is
    converted as it is, as Kaldi's ConvertLattice does, and not minimized)
    on
    a raw lattice (transition-ids on input, words on output; the twin
    (``fast`` false) changes it). Returns (CompactLattice, success)."""
    steps = _FastSteps if fast else _TwinSteps
    opts = opts if opts is not None else DeterminizeLatticePhonePrunedOptions()
    # Kaldi passes only delta and max_mem on to the passes
    det_opts = DeterminizeLatticePrunedOptions(delta=opts.delta, max_mem=opts.max_mem)
    lat = steps.load(lat)
    steps.invert(lat)
    if not steps.is_top_sorted(lat) and not steps.top_sort(lat):
        raise PynnetError("Topological sorting of state-level lattice failed (probably "
                          "your lexicon has empty words or your LM has epsilon cycles).")
    steps.arc_sort(lat)
    ok = True
    if not (opts.phone_determinize or opts.word_determinize):
        logger.warning("Both --phone-determinize and --word-determinize are set to false, "
                       "copying lattice without determinization.")
    if opts.phone_determinize:
        first_phone_label = steps.insert_phones(lat, phone_start_table(trans_model))
        steps.top_sort(lat)
        lat, ok = _determinize_lattice_pruned(steps, lat, beam, False, det_opts)
        steps.delete_phones(lat, first_phone_label)
        steps.top_sort(lat)
    if opts.word_determinize:
        clat, ok2 = _determinize_lattice_pruned(steps, lat, beam, True, det_opts)
        ok = ok and ok2
        if opts.minimize:
            # (Kaldi minimizes with the default delta, whatever --delta is)
            ok = push_compact_lattice_strings(clat) and ok
            ok = push_compact_lattice_weights(clat) and ok
            ok = minimize_compact_lattice(clat, float(K_DELTA)) and ok
    else:
        # the words (input side) label the arcs, transition-ids become strings
        clat = convert_lattice(steps.unload(lat), invert_labels=False)
    clat.connect()
    return clat, ok
