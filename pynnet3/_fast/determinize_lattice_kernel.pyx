# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: language = c++
"""Kaldi's LatticeDeterminizerPruned in C (twin of
pynnet3/decoding/determinize_lattice.py's LatticeDeterminizerPruned, which documents
the algorithm and the ordering guarantees), and the steps around it on a
CLattice (a lattice in C++ vectors): invert, TopSort, ArcSort, phone
insertion and deletion, PruneLattice, Connect (twins: the Python functions
of pynnet3/decoding/determinize_lattice.py and lattice_ops.py).

Same float32 weight arithmetic, same double costs, same task heap moves,
same subset lookups (exact states and strings, weights within delta), so the
output states, arcs and strings are the twin's; the tests compare the two.
Strings are interned in a trie (one id per distinct sequence, 0 = empty), as
Kaldi's LatticeStringRepository does; a trie node is "alive" while Kaldi's
repository would hold an Entry for it (made by a successor call since the
last rebuild, or kept by the rebuild), which gives Kaldi's memory count.
"""

import numpy as np
cimport numpy as cnp
from libc.math cimport fabsf, INFINITY
from libcpp.vector cimport vector
from libcpp.pair cimport pair
from libcpp.algorithm cimport sort as csort
from libcpp.queue cimport priority_queue

from ..decoding.lattice import CompactLattice, Lattice
from ..errors import PynnetError

cnp.import_array()

# Kaldi's sizes on x86-64 (see pynnet3/decoding/determinize_lattice.py)
cdef enum:
    REPOSITORY_BYTES_PER_ENTRY = 32
    TEMP_ARC_BYTES = 32
    ELEMENT_BYTES = 24

cdef struct Elem:
    int state
    int string
    float w1
    float w2

cdef struct TempArc:
    int ilabel
    int string
    int nextstate      # -1: final weight
    float w1
    float w2

cdef struct MemoryEvent:
    int max_mem        # -1: a repository rebuild, -2: an empty subset (no other field)
    int repo
    int arcs
    int elems
    int new_repo
    double effective_beam
    double beam

cdef struct LabelElem:
    int label
    int state
    int string
    float w1
    float w2


cdef inline size_t hash_key(long long key) noexcept nogil:
    # a 64-bit mix (splitmix64's finalizer)
    cdef unsigned long long x = <unsigned long long>key
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL
    return <size_t>(x ^ (x >> 31))


cdef inline int compare_w(float a1, float a2, float b1, float b2) noexcept nogil:
    cdef float fa = a1 + a2, fb = b1 + b2
    if fa < fb:
        return 1
    if fa > fb:
        return -1
    if a1 < b1:
        return 1
    if a1 > b1:
        return -1
    return 0


cdef bint label_elem_less(const LabelElem &a, const LabelElem &b) noexcept nogil:
    if a.label != b.label:
        return a.label < b.label
    return a.state < b.state


cdef bint elem_less(const Elem &a, const Elem &b) noexcept nogil:
    return a.state < b.state


# -- lattices in C++ vectors (twins: the functions of pynnet3/decoding/determinize_lattice.py) --------

cdef struct Arc:
    int ilabel
    int olabel
    float w1
    float w2
    int nextstate


cdef bint arc_labels_less(const Arc &a, const Arc &b) noexcept nogil:
    # OpenFst's ILabelCompare: (ilabel, olabel) lexicographically
    if a.ilabel != b.ilabel:
        return a.ilabel < b.ilabel
    return a.olabel < b.olabel


cdef class CLattice:
    """A :class:`Lattice` held in C++ vectors for the determinization
    pipeline: ``arcs[s]`` (ilabel, olabel, graph cost, acoustic cost,
    nextstate), final costs (+inf, +inf when not final), start (-1: none)."""

    cdef vector[vector[Arc]] arcs
    cdef vector[float] f1, f2
    cdef public int start

    def __init__(self):
        self.start = -1

    @staticmethod
    def from_lattice(lat):
        cdef CLattice c = CLattice()
        cdef Py_ssize_t n = len(lat.arcs), s
        cdef Arc arc
        c.arcs.resize(n)
        c.f1.resize(n, INFINITY)
        c.f2.resize(n, INFINITY)
        for s in range(n):
            row = lat.arcs[s]
            c.arcs[s].reserve(len(row))
            for a in row:
                arc.ilabel = a[0]
                arc.olabel = a[1]
                arc.w1 = a[2]
                arc.w2 = a[3]
                arc.nextstate = a[4]
                c.arcs[s].push_back(arc)
            f = lat.final[s]
            if f is not None:
                c.f1[s] = f[0]
                c.f2[s] = f[1]
        c.start = -1 if lat.start is None else lat.start
        return c

    @staticmethod
    def from_arrays(long long start, arc_begin, ilabel, olabel, graph_cost, acoustic_cost,
                    nextstate, final_graph, final_acoustic):
        """A CLattice from flat arrays (arcs grouped by state, CSR:
        ``arc_begin`` has num_states + 1 entries; final costs +inf, +inf
        where not final), as pynnet3._fast.token_lattice_kernel makes them."""
        cdef CLattice c = CLattice()
        cdef const long long[::1] ab = np.ascontiguousarray(arc_begin, dtype=np.int64)
        cdef const int[::1] il = np.ascontiguousarray(ilabel, dtype=np.int32)
        cdef const int[::1] ol = np.ascontiguousarray(olabel, dtype=np.int32)
        cdef const float[::1] w1 = np.ascontiguousarray(graph_cost, dtype=np.float32)
        cdef const float[::1] w2 = np.ascontiguousarray(acoustic_cost, dtype=np.float32)
        cdef const int[::1] nxt = np.ascontiguousarray(nextstate, dtype=np.int32)
        cdef const float[::1] f1 = np.ascontiguousarray(final_graph, dtype=np.float32)
        cdef const float[::1] f2 = np.ascontiguousarray(final_acoustic, dtype=np.float32)
        cdef Py_ssize_t n = ab.shape[0] - 1, s, k
        cdef Arc arc
        if n < 0 or f1.shape[0] != n or f2.shape[0] != n:
            raise ValueError("inconsistent lattice arrays")
        with nogil:
            c.arcs.resize(n)
            c.f1.resize(n)
            c.f2.resize(n)
            for s in range(n):
                c.arcs[s].reserve(ab[s + 1] - ab[s])
                for k in range(ab[s], ab[s + 1]):
                    arc.ilabel = il[k]
                    arc.olabel = ol[k]
                    arc.w1 = w1[k]
                    arc.w2 = w2[k]
                    arc.nextstate = nxt[k]
                    c.arcs[s].push_back(arc)
                c.f1[s] = f1[s]
                c.f2[s] = f2[s]
        c.start = start if n > 0 else -1
        return c

    def to_lattice(self):
        lat = Lattice()
        cdef size_t s, i
        cdef Arc a
        arcs = []
        final = []
        for s in range(self.arcs.size()):
            row = []
            for i in range(self.arcs[s].size()):
                a = self.arcs[s][i]
                row.append((a.ilabel, a.olabel, a.w1, a.w2, a.nextstate))
            arcs.append(row)
            final.append(None if self.f1[s] == INFINITY and self.f2[s] == INFINITY
                         else (self.f1[s], self.f2[s]))
        lat.arcs, lat.final = arcs, final
        lat.start = None if self.start < 0 else self.start
        return lat

    def copy(self):
        cdef CLattice c = CLattice()
        c.arcs = self.arcs
        c.f1 = self.f1
        c.f2 = self.f2
        c.start = self.start
        return c

    @property
    def num_states(self):
        return self.arcs.size()

    def invert(self):
        with nogil:
            self.invert_c()

    cdef void invert_c(self) noexcept nogil:
        cdef size_t s, i
        cdef int t
        for s in range(self.arcs.size()):
            for i in range(self.arcs[s].size()):
                t = self.arcs[s][i].ilabel
                self.arcs[s][i].ilabel = self.arcs[s][i].olabel
                self.arcs[s][i].olabel = t

    def is_top_sorted(self):
        cdef bint ans
        with nogil:
            ans = self.is_top_sorted_c()
        return ans

    cdef bint is_top_sorted_c(self) noexcept nogil:
        cdef size_t s, i
        for s in range(self.arcs.size()):
            for i in range(self.arcs[s].size()):
                if <size_t>self.arcs[s][i].nextstate <= s:
                    return False
        return True

    def top_sort(self):
        """The twin's top_sort (OpenFst's TopSort): False, unchanged, on a cycle."""
        cdef bint ans
        with nogil:
            ans = self.top_sort_c()
        return ans

    cdef bint top_sort_c(self) noexcept nogil:
        cdef int n = <int>self.arcs.size(), root, s, t, c, k
        if n == 0:
            return True
        cdef vector[char] color = vector[char](n, 0)
        cdef vector[size_t] pos = vector[size_t](n, 0)
        cdef vector[int] finish, stack
        cdef size_t i, na
        cdef bint descended
        finish.reserve(n)
        for k in range(-1 if self.start >= 0 else 0, n):
            root = self.start if k < 0 else k
            if color[root]:
                continue
            color[root] = 1
            stack.push_back(root)
            while not stack.empty():
                s = stack.back()
                i = pos[s]
                na = self.arcs[s].size()
                descended = False
                while i < na:
                    t = self.arcs[s][i].nextstate
                    i += 1
                    c = color[t]
                    if c == 0:
                        color[t] = 1
                        stack.push_back(t)
                        descended = True
                        break
                    if c == 1:
                        return False
                pos[s] = i
                if not descended:
                    color[s] = 2
                    finish.push_back(s)
                    stack.pop_back()
        cdef vector[int] order = vector[int](n, 0)
        for k in range(n):
            order[finish[n - 1 - k]] = k
        self.permute(order)
        return True

    cdef void permute(self, vector[int] &order) noexcept nogil:
        """State s becomes order[s] (a permutation); arcs keep their order."""
        cdef size_t n = self.arcs.size(), s, i
        cdef vector[vector[Arc]] arcs = vector[vector[Arc]](n)
        cdef vector[float] f1 = vector[float](n), f2 = vector[float](n)
        for s in range(n):
            arcs[order[s]].swap(self.arcs[s])
            f1[order[s]] = self.f1[s]
            f2[order[s]] = self.f2[s]
        for s in range(n):
            for i in range(arcs[s].size()):
                arcs[s][i].nextstate = order[arcs[s][i].nextstate]
        self.arcs.swap(arcs)
        self.f1.swap(f1)
        self.f2.swap(f2)
        if self.start >= 0:
            self.start = order[self.start]

    def arc_sort(self):
        """The twin's arc_sort_ilabel (std::sort, as OpenFst's ArcSort)."""
        cdef size_t s
        with nogil:
            for s in range(self.arcs.size()):
                if self.arcs[s].size() > 1:
                    csort(self.arcs[s].begin(), self.arcs[s].end(), arc_labels_less)

    def insert_phones(self, const int[:] phone_of_tid):
        """The twin's determinize_lattice_insert_phones; returns the first
        phone label."""
        cdef int num_tids = <int>phone_of_tid.shape[0], bad = 0, first
        cdef size_t s, i
        with nogil:
            for s in range(self.arcs.size()):
                if <int>s == self.start:
                    continue
                for i in range(self.arcs[s].size()):
                    if self.arcs[s][i].olabel < 0 or self.arcs[s][i].olabel >= num_tids:
                        bad = self.arcs[s][i].olabel
                        break
                if bad != 0:
                    break
            if bad == 0:
                first = self.insert_phones_c(&phone_of_tid[0], num_tids)
        if bad != 0:
            raise PynnetError("lattice has transition-id %d but the transition model "
                              "has only %d" % (bad, num_tids - 1))
        return first

    cdef int insert_phones_c(self, const int *phone_of_tid, int num_tids) noexcept nogil:
        cdef size_t n = self.arcs.size(), s, i
        cdef int first = 0, ol, phone, extra
        cdef Arc extra_arc
        for s in range(n):
            for i in range(self.arcs[s].size()):
                if self.arcs[s][i].ilabel > first:
                    first = self.arcs[s][i].ilabel
        first += 1
        for s in range(n):
            if <int>s == self.start:
                continue
            for i in range(self.arcs[s].size()):
                ol = self.arcs[s][i].olabel
                if ol == 0:
                    continue
                phone = phone_of_tid[ol]
                if phone == 0:
                    continue
                if self.arcs[s][i].ilabel == 0:
                    self.arcs[s][i].ilabel = first + phone
                else:
                    extra = <int>self.arcs.size()
                    extra_arc.ilabel = first + phone
                    extra_arc.olabel = 0
                    extra_arc.w1 = 0
                    extra_arc.w2 = 0
                    extra_arc.nextstate = self.arcs[s][i].nextstate
                    self.arcs.push_back(vector[Arc](1, extra_arc))
                    self.f1.push_back(INFINITY)
                    self.f2.push_back(INFINITY)
                    self.arcs[s][i].nextstate = extra
        return first

    def delete_phones(self, int first_phone_label):
        cdef size_t s, i
        with nogil:
            for s in range(self.arcs.size()):
                for i in range(self.arcs[s].size()):
                    if self.arcs[s][i].ilabel >= first_phone_label:
                        self.arcs[s][i].ilabel = 0

    def connect(self):
        """The twin's Lattice.connect (OpenFst's Connect), without the GIL."""
        with nogil:
            self.connect_c()

    cdef void connect_c(self) noexcept nogil:
        cdef int n = <int>self.arcs.size(), s, t, k
        cdef size_t i
        if self.start < 0:
            self.arcs.clear()
            self.f1.clear()
            self.f2.clear()
            return
        cdef vector[char] access = vector[char](n, 0), co = vector[char](n, 0)
        cdef vector[int] stack
        access[self.start] = 1
        stack.push_back(self.start)
        while not stack.empty():
            s = stack.back()
            stack.pop_back()
            for i in range(self.arcs[s].size()):
                t = self.arcs[s][i].nextstate
                if not access[t]:
                    access[t] = 1
                    stack.push_back(t)
        # predecessors in CSR form
        cdef vector[int] pred_begin = vector[int](n + 1, 0), preds, fill
        for s in range(n):
            for i in range(self.arcs[s].size()):
                pred_begin[self.arcs[s][i].nextstate + 1] += 1
        for s in range(n):
            pred_begin[s + 1] += pred_begin[s]
        preds.resize(pred_begin[n])
        fill = pred_begin
        for s in range(n):
            for i in range(self.arcs[s].size()):
                t = self.arcs[s][i].nextstate
                preds[fill[t]] = s
                fill[t] += 1
        for s in range(n):
            if not (self.f1[s] == INFINITY and self.f2[s] == INFINITY):
                co[s] = 1
                stack.push_back(s)
        while not stack.empty():
            s = stack.back()
            stack.pop_back()
            for k in range(pred_begin[s], pred_begin[s + 1]):
                if not co[preds[k]]:
                    co[preds[k]] = 1
                    stack.push_back(preds[k])
        cdef vector[int] new_id = vector[int](n, -1)
        k = 0
        for s in range(n):
            if access[s] and co[s]:
                new_id[s] = k
                k += 1
        if k == n:
            return
        cdef vector[vector[Arc]] arcs = vector[vector[Arc]](k)
        cdef vector[float] f1 = vector[float](k), f2 = vector[float](k)
        cdef Arc a
        for s in range(n):
            if new_id[s] < 0:
                continue
            for i in range(self.arcs[s].size()):
                a = self.arcs[s][i]
                if new_id[a.nextstate] >= 0:
                    a.nextstate = new_id[a.nextstate]
                    arcs[new_id[s]].push_back(a)
            f1[new_id[s]] = self.f1[s]
            f2[new_id[s]] = self.f2[s]
        self.arcs.swap(arcs)
        self.f1.swap(f1)
        self.f2.swap(f2)
        self.start = new_id[self.start]
        if self.start < 0:
            self.arcs.clear()
            self.f1.clear()
            self.f2.clear()

    def prune(self, float beam):
        """The twin's prune_lattice (Kaldi's PruneLattice); False for an
        empty or cyclic lattice (None for the latter: the caller warns)."""
        cdef int ans
        with nogil:
            ans = self.prune_c(beam)
        return None if ans < 0 else bool(ans)

    cdef int prune_c(self, float beam) noexcept nogil:
        if not self.is_top_sorted_c() and not self.top_sort_c():
            return -1
        cdef int n = <int>self.arcs.size(), s, bad
        if n == 0:
            return 0
        cdef vector[double] cost = vector[double](n, INFINITY)
        cdef double here, c, best_final = INFINITY, cutoff, forward, backward, arc_backward
        cdef size_t i
        cost[self.start] = 0.0
        for s in range(n):
            here = cost[s]
            for i in range(self.arcs[s].size()):
                c = here + (<double>self.arcs[s][i].w1 + <double>self.arcs[s][i].w2)
                if cost[self.arcs[s][i].nextstate] > c:
                    cost[self.arcs[s][i].nextstate] = c
            c = here + (<double>self.f1[s] + <double>self.f2[s])
            if c < best_final:
                best_final = c
        cutoff = best_final + <double>beam
        bad = n
        self.arcs.push_back(vector[Arc]())
        self.f1.push_back(INFINITY)
        self.f2.push_back(INFINITY)
        for s in range(n - 1, -1, -1):
            forward = cost[s]
            backward = <double>self.f1[s] + <double>self.f2[s]
            if backward + forward > cutoff and backward != INFINITY:
                self.f1[s] = INFINITY
                self.f2[s] = INFINITY
            for i in range(self.arcs[s].size()):
                arc_backward = ((<double>self.arcs[s][i].w1 + <double>self.arcs[s][i].w2)
                                + cost[self.arcs[s][i].nextstate])
                if arc_backward < backward:
                    backward = arc_backward
                if forward + arc_backward > cutoff:
                    self.arcs[s][i].nextstate = bad
            cost[s] = backward
        self.connect_c()
        return self.arcs.size() > 0


cdef inline unsigned long long subset_hash(vector[Elem] &subset) noexcept nogil:
    """A hash of the subset's (state, string) sequence (not its weights)."""
    cdef unsigned long long h = subset.size()
    cdef size_t i
    for i in range(subset.size()):
        h = h * 0x9e3779b97f4a7c15ULL + hash_key(
            ((<long long>subset[i].state) << 32) | (<unsigned int>subset[i].string))
    return h


cdef inline bint same_key(vector[Elem] &a, vector[Elem] &b) noexcept nogil:
    """Whether two subsets have the same (state, string) sequence."""
    if a.size() != b.size():
        return False
    cdef size_t i
    for i in range(a.size()):
        if a[i].state != b[i].state or a[i].string != b[i].string:
            return False
    return True


cdef class SubsetIndex:
    """Subsets' ids (0, 1, 2, ... in the order they are added) by hash: an
    open-addressing table from a hash to the first and last id with that
    hash, and each id's next id with the same hash. The candidates for a
    lookup come in the order they were added, and the first whose states,
    strings and weights (within delta) match wins, as in the twin. No
    allocation per subset."""

    cdef vector[unsigned long long] slot_hash
    cdef vector[int] slot_first, slot_last
    cdef vector[int] next_id
    cdef size_t mask, used

    def __cinit__(self):
        self.slot_hash.resize(1024)
        self.slot_first.assign(1024, -1)
        self.slot_last.assign(1024, -1)
        self.mask = 1023
        self.used = 0

    cdef inline size_t slot(self, unsigned long long h) noexcept nogil:
        cdef size_t i = <size_t>(h ^ (h >> 29)) & self.mask
        while self.slot_first[i] >= 0 and self.slot_hash[i] != h:
            i = (i + 1) & self.mask
        return i

    cdef int first(self, unsigned long long h) noexcept nogil:
        return self.slot_first[self.slot(h)]

    cdef void add(self, int id, unsigned long long h) noexcept nogil:
        """Adds ``id`` (the next id: ids are added in order) under ``h``."""
        self.next_id.push_back(-1)
        cdef size_t i = self.slot(h)
        if self.slot_first[i] >= 0:
            self.next_id[self.slot_last[i]] = id
            self.slot_last[i] = id
            return
        self.slot_hash[i] = h
        self.slot_first[i] = id
        self.slot_last[i] = id
        self.used += 1
        if 2 * self.used > self.slot_first.size():
            self.grow()

    cdef void grow(self) noexcept nogil:
        cdef vector[unsigned long long] hashes
        cdef vector[int] first, last
        hashes.swap(self.slot_hash)
        first.swap(self.slot_first)
        last.swap(self.slot_last)
        cdef size_t size = 2 * first.size(), j, i
        self.slot_hash.assign(size, 0)
        self.slot_first.assign(size, -1)
        self.slot_last.assign(size, -1)
        self.mask = size - 1
        for j in range(first.size()):
            if first[j] >= 0:
                i = self.slot(hashes[j])
                self.slot_hash[i] = hashes[j]
                self.slot_first[i] = first[j]
                self.slot_last[i] = last[j]


cdef class LatticeDeterminizerCore:
    # input lattice (CSR)
    cdef vector[long long] arc_begin
    cdef vector[int] ilabel, olabel, nextstate
    cdef vector[float] aw1, aw2, fw1, fw2
    cdef int start, num_states
    cdef double beam, cutoff
    cdef float delta
    cdef vector[double] backward
    cdef vector[char] isym_or_final
    # string repository
    cdef vector[int] s_parent, s_label, s_len
    cdef vector[char] s_alive
    cdef long long s_num_alive
    # (parent, label) -> string id: open addressing, linear probing, -1 = empty
    cdef vector[long long] s_keys
    cdef vector[int] s_ids
    cdef size_t s_mask
    # limits and Kaldi's memory count
    cdef int max_mem, max_loop, max_states, max_arcs
    cdef int num_arcs, num_elems
    cdef vector[MemoryEvent] mem_events   # rebuild, empty subset: max_mem < 0
    cdef bint loop_error
    # output states
    cdef vector[vector[Elem]] o_minimal
    cdef vector[vector[TempArc]] o_arcs
    cdef vector[double] o_forward
    # subset lookups: (state, string) sequence -> candidate entries
    cdef SubsetIndex minimal_index
    cdef SubsetIndex initial_index
    cdef vector[vector[Elem]] init_subsets
    cdef vector[int] init_state, init_string
    cdef vector[float] init_w1, init_w2
    # task heap
    cdef vector[int] heap
    cdef vector[double] t_priority
    cdef vector[int] t_state, t_label
    cdef vector[vector[Elem]] t_subset
    cdef vector[int] t_free
    # scratch buffers, reused from call to call (each call leaves them free)
    cdef vector[int] closure_slot          # state -> index into closure_best, -1: none
    cdef vector[Elem] closure_best, closure_pending
    cdef priority_queue[pair[int, int]] closure_queue
    cdef vector[LabelElem] transition_elems
    cdef vector[Elem] transition_subset
    cdef vector[int] seq_a, seq_b

    def __init__(self, CLattice ifst, double beam, float delta, int max_mem=-1,
                 int max_loop=-1, int max_states=-1, int max_arcs=-1):
        """``ifst``: top-sorted, with a start state."""
        cdef size_t s, i, n = ifst.arcs.size(), k = 0
        with nogil:
            self.arc_begin.resize(n + 1)
            for s in range(n):
                self.arc_begin[s] = k
                k += ifst.arcs[s].size()
            self.arc_begin[n] = k
            self.ilabel.resize(k)
            self.olabel.resize(k)
            self.nextstate.resize(k)
            self.aw1.resize(k)
            self.aw2.resize(k)
            k = 0
            for s in range(n):
                for i in range(ifst.arcs[s].size()):
                    self.ilabel[k] = ifst.arcs[s][i].ilabel
                    self.olabel[k] = ifst.arcs[s][i].olabel
                    self.nextstate[k] = ifst.arcs[s][i].nextstate
                    self.aw1[k] = ifst.arcs[s][i].w1
                    self.aw2[k] = ifst.arcs[s][i].w2
                    k += 1
        self.fw1 = ifst.f1
        self.fw2 = ifst.f2
        self.start = ifst.start
        self.num_states = <int>n
        self.beam = beam
        self.delta = delta
        self.isym_or_final.resize(self.num_states, 0)
        self.closure_slot.assign(self.num_states, -1)
        self.minimal_index = SubsetIndex()
        self.initial_index = SubsetIndex()
        self.s_parent.push_back(-1)
        self.s_label.push_back(0)
        self.s_len.push_back(0)
        self.s_alive.push_back(0)      # the empty string is no entry
        self.s_keys.assign(1024, -1)
        self.s_ids.assign(1024, 0)
        self.s_mask = 1023
        self.s_num_alive = 0
        self.max_mem = max_mem
        self.max_loop = max_loop
        self.max_states = max_states
        self.max_arcs = max_arcs
        self.num_arcs = 0
        self.num_elems = 0
        self.loop_error = False

    # -- strings -----------------------------------------------------------------------
    cdef int successor(self, int s, int label) noexcept nogil:
        cdef long long key = ((<long long>s) << 32) | (<unsigned int>label)
        cdef int nid
        cdef size_t i = hash_key(key) & self.s_mask
        while self.s_keys[i] != -1:
            if self.s_keys[i] == key:
                nid = self.s_ids[i]
                if not self.s_alive[nid]:       # dropped by a rebuild, made again
                    self.s_alive[nid] = 1
                    self.s_num_alive += 1
                return nid
            i = (i + 1) & self.s_mask
        nid = <int>self.s_parent.size()
        self.s_parent.push_back(s)
        self.s_label.push_back(label)
        self.s_len.push_back(self.s_len[s] + 1)
        self.s_alive.push_back(1)
        self.s_num_alive += 1
        self.s_keys[i] = key
        self.s_ids[i] = nid
        if 2 * self.s_parent.size() > self.s_keys.size():
            self.grow_string_table()
        return nid

    cdef void grow_string_table(self) noexcept nogil:
        cdef vector[long long] keys
        cdef vector[int] ids
        keys.assign(2 * self.s_keys.size(), -1)
        ids.resize(keys.size())
        cdef size_t mask = keys.size() - 1, j, i
        for j in range(self.s_keys.size()):
            if self.s_keys[j] != -1:
                i = hash_key(self.s_keys[j]) & mask
                while keys[i] != -1:
                    i = (i + 1) & mask
                keys[i] = self.s_keys[j]
                ids[i] = self.s_ids[j]
        self.s_keys.swap(keys)
        self.s_ids.swap(ids)
        self.s_mask = mask

    cdef inline void keep_string(self, int s) noexcept nogil:
        while s != 0 and not self.s_alive[s]:
            self.s_alive[s] = 1
            self.s_num_alive += 1
            s = self.s_parent[s]

    cdef inline void keep_strings(self, vector[Elem] &subset) noexcept nogil:
        cdef size_t i
        for i in range(subset.size()):
            self.keep_string(subset[i].string)

    cdef void to_vector(self, int s, vector[int] *out) noexcept nogil:
        cdef int n = self.s_len[s], i
        out.resize(n)
        i = n - 1
        while s != 0:
            out[0][i] = self.s_label[s]
            s = self.s_parent[s]
            i -= 1

    cdef int common_prefix(self, int a, int b) noexcept nogil:
        if a == 0 or b == 0:
            return 0
        while self.s_len[a] > self.s_len[b]:
            a = self.s_parent[a]
        while self.s_len[b] > self.s_len[a]:
            b = self.s_parent[b]
        while a != b:
            a = self.s_parent[a]
            b = self.s_parent[b]
        return a

    cdef int remove_prefix(self, int s, int k) noexcept nogil:
        if k == 0:
            return s
        self.to_vector(s, &self.seq_a)
        cdef int r = 0, i
        for i in range(k, <int>self.seq_a.size()):
            r = self.successor(r, self.seq_a[i])
        return r

    cdef int concatenate(self, int a, int b) noexcept nogil:
        if b == 0:
            return a
        self.to_vector(b, &self.seq_a)
        cdef int i
        for i in range(<int>self.seq_a.size()):
            a = self.successor(a, self.seq_a[i])
        return a

    cdef int compare_ws(self, float a1, float a2, int astr, float b1, float b2, int bstr) noexcept nogil:
        cdef int c = compare_w(a1, a2, b1, b2)
        if c != 0:
            return c
        if astr == bstr:
            return 0
        if self.s_len[astr] > self.s_len[bstr]:
            return -1
        if self.s_len[astr] < self.s_len[bstr]:
            return 1
        self.to_vector(astr, &self.seq_a)
        self.to_vector(bstr, &self.seq_b)
        cdef size_t i
        for i in range(self.seq_a.size()):
            if self.seq_a[i] < self.seq_b[i]:
                return -1
            if self.seq_a[i] > self.seq_b[i]:
                return 1
        return 0

    # -- helpers -----------------------------------------------------------------------
    cdef bint is_isymbol_or_final(self, int state) noexcept nogil:
        cdef char v = self.isym_or_final[state]
        if v != 0:
            return v == 2
        cdef bint ans = not (self.fw1[state] == INFINITY and self.fw2[state] == INFINITY)
        cdef long long a
        if not ans:
            for a in range(self.arc_begin[state], self.arc_begin[state + 1]):
                if self.ilabel[a] != 0 and not (self.aw1[a] == INFINITY
                                                and self.aw2[a] == INFINITY):
                    ans = True
                    break
        # (not ``x[i] = 2 if ans else 1``: Cython compiles that for a
        # vector[char] into a reference to a temporary that is gone before
        # the store, and the stored value is then whatever the stack holds)
        if ans:
            self.isym_or_final[state] = 2
        else:
            self.isym_or_final[state] = 1
        return ans

    cdef bint weights_match(self, vector[Elem] &a, vector[Elem] &b) noexcept nogil:
        cdef size_t i
        cdef float d
        for i in range(a.size()):
            if a[i].w1 == b[i].w1 and a[i].w2 == b[i].w2:
                continue
            d = (a[i].w1 + a[i].w2) - (b[i].w1 + b[i].w2)
            if fabsf(d) > self.delta:
                return False
        return True

    cdef void epsilon_closure(self, vector[Elem] *subset) noexcept nogil:
        # closure_best[closure_slot[t]]: the best element for state t so far;
        # closure_queue pops the lowest state first, and of two entries for
        # one state the later one (their order in Kaldi's priority queue).
        cdef vector[Elem] *best = &self.closure_best
        cdef vector[Elem] *pending = &self.closure_pending
        cdef size_t i
        for i in range(subset.size()):
            self.closure_slot[subset[0][i].state] = <int>best.size()
            best.push_back(subset[0][i])
            pending.push_back(subset[0][i])
            self.closure_queue.push(pair[int, int](-subset[0][i].state, <int>pending.size() - 1))
        cdef bint replaced = False
        cdef Elem elem, ne
        cdef long long a
        cdef int t, ol, comp, nstr, slot
        cdef long long loops = 0
        cdef float n1, n2
        while not self.closure_queue.empty():
            elem = pending[0][self.closure_queue.top().second]
            self.closure_queue.pop()
            if replaced:
                ne = best[0][self.closure_slot[elem.state]]
                if ne.string != elem.string or ne.w1 != elem.w1 or ne.w2 != elem.w2:
                    continue
            if self.max_loop > 0:
                loops += 1
                if loops > <long long>self.max_loop + 1:
                    self.loop_error = True
                    break
            for a in range(self.arc_begin[elem.state], self.arc_begin[elem.state + 1]):
                if self.ilabel[a] != 0 or (self.aw1[a] == INFINITY and self.aw2[a] == INFINITY):
                    continue
                t = self.nextstate[a]
                ol = self.olabel[a]
                n1 = elem.w1 + self.aw1[a]
                n2 = elem.w2 + self.aw2[a]
                slot = self.closure_slot[t]
                if slot < 0:
                    ne.state = t
                    ne.string = self.successor(elem.string, ol) if ol != 0 else elem.string
                    ne.w1 = n1
                    ne.w2 = n2
                    self.closure_slot[t] = <int>best.size()
                    best.push_back(ne)
                    pending.push_back(ne)
                    self.closure_queue.push(pair[int, int](-t, <int>pending.size() - 1))
                else:
                    comp = compare_w(n1, n2, best[0][slot].w1, best[0][slot].w2)
                    nstr = -1
                    if comp == 0:
                        nstr = self.successor(elem.string, ol) if ol != 0 else elem.string
                        comp = self.compare_ws(n1, n2, nstr, best[0][slot].w1, best[0][slot].w2,
                                               best[0][slot].string)
                    if comp == 1:
                        if nstr == -1:
                            nstr = self.successor(elem.string, ol) if ol != 0 else elem.string
                        ne.state = t
                        ne.string = nstr
                        ne.w1 = n1
                        ne.w2 = n2
                        best[0][slot] = ne
                        pending.push_back(ne)
                        self.closure_queue.push(pair[int, int](-t, <int>pending.size() - 1))
                        replaced = True
        # leave the scratch buffers free for the next call
        while not self.closure_queue.empty():
            self.closure_queue.pop()
        pending.clear()
        for i in range(best.size()):
            self.closure_slot[best[0][i].state] = -1
        if not self.loop_error:
            subset.swap(best[0])
            csort(subset.begin(), subset.end(), elem_less)
        best.clear()

    cdef void convert_to_minimal(self, vector[Elem] *subset) noexcept nogil:
        cdef size_t i, k = 0
        for i in range(subset.size()):
            if self.is_isymbol_or_final(subset[0][i].state):
                subset[0][k] = subset[0][i]
                k += 1
        subset.resize(k)

    cdef void normalize_subset(self, vector[Elem] *subset, float *t1, float *t2, int *prefix) noexcept nogil:
        cdef MemoryEvent empty
        if subset.empty():
            # (a closure with no state that has an input symbol or is final:
            # Kaldi warns and gives the zero weight and the empty string)
            empty.max_mem = -2
            self.mem_events.push_back(empty)
            t1[0] = INFINITY
            t2[0] = INFINITY
            prefix[0] = 0
            return
        cdef int p = subset[0][0].string
        cdef float w1 = subset[0][0].w1, w2 = subset[0][0].w2
        cdef size_t i
        for i in range(1, subset.size()):
            if compare_w(w1, w2, subset[0][i].w1, subset[0][i].w2) < 0:
                w1 = subset[0][i].w1
                w2 = subset[0][i].w2
            p = self.common_prefix(p, subset[0][i].string)
        cdef int k = self.s_len[p]
        for i in range(subset.size()):
            subset[0][i].w1 = subset[0][i].w1 - w1
            subset[0][i].w2 = subset[0][i].w2 - w2
            subset[0][i].string = self.remove_prefix(subset[0][i].string, k)
        t1[0] = w1
        t2[0] = w2
        prefix[0] = p

    cdef void process_final(self, int osid) noexcept nogil:
        cdef bint is_final = False
        cdef float f1 = INFINITY, f2 = INFINITY, t1, t2
        cdef int fstr = 0
        cdef size_t i
        cdef Elem e
        for i in range(self.o_minimal[osid].size()):
            e = self.o_minimal[osid][i]
            if self.fw1[e.state] == INFINITY and self.fw2[e.state] == INFINITY:
                continue
            t1 = e.w1 + self.fw1[e.state]
            t2 = e.w2 + self.fw2[e.state]
            if t1 == INFINITY and t2 == INFINITY:
                continue
            if not is_final or self.compare_ws(t1, t2, e.string, f1, f2, fstr) == 1:
                is_final = True
                f1, f2, fstr = t1, t2, e.string
        cdef TempArc arc
        if is_final and (<double>f1 + <double>f2) + self.o_forward[osid] <= self.cutoff:
            arc.ilabel = 0
            arc.string = fstr
            arc.nextstate = -1
            arc.w1 = f1
            arc.w2 = f2
            self.o_arcs[osid].push_back(arc)
            self.num_arcs += 1

    cdef int new_output_state(self, vector[Elem] &subset, double forward_cost,
                              unsigned long long h) noexcept nogil:
        """A new output state for the minimal ``subset`` (``h``: its subset_hash)."""
        cdef int osid = <int>self.o_minimal.size()
        self.o_minimal.push_back(subset)
        self.o_arcs.push_back(vector[TempArc]())
        self.o_forward.push_back(forward_cost)
        self.num_elems += <int>subset.size()
        self.minimal_index.add(osid, h)
        return osid

    cdef int find_subset(self, SubsetIndex index, vector[vector[Elem]] &subsets,
                         vector[Elem] &subset, unsigned long long h) noexcept nogil:
        """The first id (in the order they were added) under which a subset
        with ``subset``'s states and strings and weights within delta is
        stored in ``index`` (ids index ``subsets``; ``h``: subset_hash), or
        -1 when there is none."""
        cdef int id = index.first(h)
        while id >= 0:
            if same_key(subsets[id], subset) and self.weights_match(subsets[id], subset):
                return id
            id = index.next_id[id]
        return -1

    cdef int minimal_to_state_id(self, vector[Elem] &subset, double forward_cost) noexcept nogil:
        cdef unsigned long long h = subset_hash(subset)
        cdef int found = self.find_subset(self.minimal_index, self.o_minimal, subset, h)
        if found >= 0:
            return found
        cdef int osid = self.new_output_state(subset, forward_cost, h)
        self.process_final(osid)
        self.process_transitions(osid)
        return osid

    cdef int initial_to_state_id(self, vector[Elem] &subset_in, double forward_cost) noexcept nogil:
        """Returns an index into the init_* tables."""
        cdef unsigned long long h = subset_hash(subset_in)
        cdef int found = self.find_subset(self.initial_index, self.init_subsets, subset_in, h)
        if found >= 0:
            return found
        cdef vector[Elem] subset = subset_in
        self.epsilon_closure(&subset)
        self.convert_to_minimal(&subset)
        cdef float w1, w2
        cdef int prefix
        self.normalize_subset(&subset, &w1, &w2, &prefix)
        forward_cost += <double>w1 + <double>w2
        cdef int osid = self.minimal_to_state_id(subset, forward_cost)
        cdef int idx = <int>self.init_subsets.size()
        self.init_subsets.push_back(subset_in)
        self.init_state.push_back(osid)
        self.init_string.push_back(prefix)
        self.init_w1.push_back(w1)
        self.init_w2.push_back(w2)
        self.initial_index.add(idx, h)
        self.num_elems += <int>subset_in.size()
        return idx

    # -- the task heap (libstdc++'s push_heap / pop_heap) -------------------------------
    cdef inline bint task_less(self, int a, int b) noexcept nogil:
        return self.t_priority[a] > self.t_priority[b]

    cdef void heap_push(self, int task) noexcept nogil:
        self.heap.push_back(task)
        cdef long hole = <long>self.heap.size() - 1, parent = (hole - 1) // 2
        while hole > 0 and self.task_less(self.heap[parent], task):
            self.heap[hole] = self.heap[parent]
            hole = parent
            parent = (hole - 1) // 2
        self.heap[hole] = task

    cdef int heap_pop(self) noexcept nogil:
        cdef int top = self.heap[0]
        cdef int last = self.heap.back()
        self.heap.pop_back()
        cdef long length = <long>self.heap.size()
        if length == 0:
            return top
        cdef long hole = 0, child = 0, parent
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if self.task_less(self.heap[child], self.heap[child - 1]):
                child -= 1
            self.heap[hole] = self.heap[child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            self.heap[hole] = self.heap[child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > 0 and self.task_less(self.heap[parent], last):
            self.heap[hole] = self.heap[parent]
            hole = parent
            parent = (hole - 1) // 2
        self.heap[hole] = last
        return top

    cdef int new_task(self) noexcept nogil:
        cdef int t
        if not self.t_free.empty():
            t = self.t_free.back()
            self.t_free.pop_back()
            return t
        self.t_priority.push_back(0)
        self.t_state.push_back(0)
        self.t_label.push_back(0)
        self.t_subset.push_back(vector[Elem]())
        return <int>self.t_priority.size() - 1

    # -- transitions --------------------------------------------------------------------
    cdef void process_transitions(self, int osid) noexcept nogil:
        cdef vector[LabelElem] *all_elems = &self.transition_elems
        cdef vector[Elem] *subset = &self.transition_subset
        cdef LabelElem le
        cdef Elem e
        cdef size_t i
        cdef long long a
        cdef int ol
        all_elems.clear()
        for i in range(self.o_minimal[osid].size()):
            e = self.o_minimal[osid][i]
            for a in range(self.arc_begin[e.state], self.arc_begin[e.state + 1]):
                if self.ilabel[a] == 0 or (self.aw1[a] == INFINITY and self.aw2[a] == INFINITY):
                    continue
                le.label = self.ilabel[a]
                le.state = self.nextstate[a]
                le.w1 = e.w1 + self.aw1[a]
                le.w2 = e.w2 + self.aw2[a]
                ol = self.olabel[a]
                le.string = self.successor(e.string, ol) if ol != 0 else e.string
                all_elems.push_back(le)
        csort(all_elems.begin(), all_elems.end(), label_elem_less)
        cdef size_t cur = 0, n = all_elems.size()
        cdef int label, task
        cdef double priority, c
        while cur < n:
            label = all_elems[0][cur].label
            subset.clear()
            priority = INFINITY
            while cur < n and all_elems[0][cur].label == label:
                e.state = all_elems[0][cur].state
                e.string = all_elems[0][cur].string
                e.w1 = all_elems[0][cur].w1
                e.w2 = all_elems[0][cur].w2
                subset.push_back(e)
                c = (<double>e.w1 + <double>e.w2) + self.backward[e.state]
                if c < priority:
                    priority = c
                cur += 1
            priority += self.o_forward[osid]
            if priority > self.cutoff:
                continue
            self.make_subset_unique(subset)
            task = self.new_task()
            self.t_priority[task] = priority
            self.t_state[task] = osid
            self.t_label[task] = label
            self.t_subset[task] = subset[0]
            self.heap_push(task)

    cdef void make_subset_unique(self, vector[Elem] *subset) noexcept nogil:
        cdef size_t i, k = 0
        for i in range(subset.size()):
            if k > 0 and subset[0][k - 1].state == subset[0][i].state:
                if self.compare_ws(subset[0][i].w1, subset[0][i].w2, subset[0][i].string,
                                   subset[0][k - 1].w1, subset[0][k - 1].w2,
                                   subset[0][k - 1].string) == 1:
                    subset[0][k - 1] = subset[0][i]
            else:
                subset[0][k] = subset[0][i]
                k += 1
        subset.resize(k)

    cdef void process_transition(self, int osid, int label, vector[Elem] *subset) noexcept nogil:
        cdef double forward_cost = self.o_forward[osid]
        cdef float t1, t2
        cdef int common
        self.normalize_subset(subset, &t1, &t2, &common)
        forward_cost += <double>t1 + <double>t2
        cdef int idx = self.initial_to_state_id(subset[0], forward_cost)
        cdef TempArc arc
        arc.ilabel = label
        arc.nextstate = self.init_state[idx]
        arc.string = self.concatenate(common, self.init_string[idx])
        arc.w1 = t1 + self.init_w1[idx]
        arc.w2 = t2 + self.init_w2[idx]
        self.o_arcs[osid].push_back(arc)
        self.num_arcs += 1

    cdef void compute_backward_weight(self) noexcept nogil:
        self.backward.resize(self.num_states)
        cdef int s
        cdef long long a
        cdef double cost, c
        for s in range(self.num_states - 1, -1, -1):
            if self.fw1[s] == INFINITY and self.fw2[s] == INFINITY:
                cost = INFINITY
            else:
                cost = <double>self.fw1[s] + <double>self.fw2[s]
            for a in range(self.arc_begin[s], self.arc_begin[s + 1]):
                c = (<double>self.aw1[a] + <double>self.aw2[a]) + self.backward[self.nextstate[a]]
                if c < cost:
                    cost = c
            self.backward[s] = cost
        self.cutoff = self.backward[self.start] + self.beam

    # -- the memory limit -------------------------------------------------------------
    cdef void rebuild_repository(self) noexcept nogil:
        """Keeps the strings of the output states, the queued tasks and the
        initial-subset table (and their prefixes); drops the others."""
        cdef size_t s, i
        for s in range(self.s_alive.size()):
            self.s_alive[s] = 0
        self.s_num_alive = 0
        for s in range(self.o_minimal.size()):
            self.keep_strings(self.o_minimal[s])
            for i in range(self.o_arcs[s].size()):
                self.keep_string(self.o_arcs[s][i].string)
        for i in range(self.heap.size()):
            self.keep_strings(self.t_subset[self.heap[i]])
        for s in range(self.init_subsets.size()):
            self.keep_strings(self.init_subsets[s])
            self.keep_string(self.init_string[s])
        cdef MemoryEvent rebuild
        rebuild.max_mem = -1
        self.mem_events.push_back(rebuild)

    cdef double effective_beam(self) noexcept nogil:
        if self.heap.empty():
            return self.beam
        return self.t_priority[self.heap[0]] - self.backward[self.start]

    cdef bint check_memory_usage(self) noexcept nogil:
        """The twin's check_memory_usage (int32 sizes as Kaldi's)."""
        cdef int repo = <int>(self.s_num_alive * REPOSITORY_BYTES_PER_ENTRY)
        cdef int arcs = <int>(<long long>self.num_arcs * TEMP_ARC_BYTES)
        cdef int elems = <int>(<long long>self.num_elems * ELEMENT_BYTES)
        cdef int total = <int>(<unsigned int>repo + <unsigned int>arcs + <unsigned int>elems)
        if self.max_mem <= 0 or total <= self.max_mem:
            return True
        self.rebuild_repository()
        cdef int new_repo = <int>(self.s_num_alive * REPOSITORY_BYTES_PER_ENTRY)
        total = <int>(<unsigned int>new_repo + <unsigned int>arcs + <unsigned int>elems)
        cdef MemoryEvent event
        if total > <int>(self.max_mem * 0.8):
            event.max_mem = self.max_mem
            event.repo = repo
            event.arcs = arcs
            event.elems = elems
            event.new_repo = new_repo
            event.effective_beam = self.effective_beam()
            event.beam = self.beam
            self.mem_events.push_back(event)
            return False
        return True

    def determinize(self):
        """Returns (success, effective_beam), as the twin's; runs without the
        GIL."""
        cdef bint done
        cdef double effective_beam
        with nogil:
            done = self.determinize_c()
            effective_beam = self.effective_beam()
        if self.loop_error:
            raise PynnetError("Lattice determinization aborted since looped more than %d "
                              "times during epsilon closure." % self.max_loop)
        return done, effective_beam

    @property
    def events(self):
        """("rebuild",) for each repository rebuild, ("memory", max_mem, repo,
        arcs, elems, new_repo, effective_beam, beam) when the memory limit
        stopped the expansion."""
        out = []
        cdef MemoryEvent e
        for e in self.mem_events:
            if e.max_mem == -1:
                out.append(("rebuild",))
            elif e.max_mem == -2:
                out.append(("empty subset",))
            else:
                out.append(("memory", e.max_mem, e.repo, e.arcs, e.elems, e.new_repo,
                            e.effective_beam, e.beam))
        return out

    cdef bint determinize_c(self) noexcept nogil:
        self.compute_backward_weight()
        cdef vector[Elem] subset
        cdef Elem e
        e.state = self.start
        e.string = 0
        e.w1 = 0
        e.w2 = 0
        subset.push_back(e)
        self.epsilon_closure(&subset)
        if self.loop_error:
            return False
        self.convert_to_minimal(&subset)
        self.new_output_state(subset, 0.0, subset_hash(subset))
        self.process_final(0)
        self.process_transitions(0)
        cdef int task
        cdef size_t num_states
        cdef vector[Elem] tsubset
        while not self.heap.empty() and not self.loop_error:
            num_states = self.o_minimal.size()
            if ((self.max_states > 0 and num_states > <size_t>self.max_states)
                    or (self.max_arcs > 0 and self.num_arcs > self.max_arcs)
                    or (num_states % 10 == 0 and not self.check_memory_usage())):
                break
            task = self.heap_pop()
            tsubset.swap(self.t_subset[task])
            self.t_free.push_back(task)
            self.process_transition(self.t_state[task], self.t_label[task], &tsubset)
        return self.heap.empty()

    def output_lattice(self):
        """The twin's output_lattice, as a CLattice."""
        cdef CLattice lat = CLattice()
        cdef size_t n = self.o_arcs.size(), s, i, j
        cdef int cur, nxt
        cdef vector[int] seq
        cdef TempArc ta
        cdef Arc arc
        lat.arcs.resize(n)
        lat.f1.resize(n, INFINITY)
        lat.f2.resize(n, INFINITY)
        if n:
            lat.start = 0
        for s in range(n):
            for i in range(self.o_arcs[s].size()):
                ta = self.o_arcs[s][i]
                self.to_vector(ta.string, &seq)
                cur = <int>s
                if ta.nextstate < 0:
                    # the string as a chain of epsilon-input arcs to a final state
                    for j in range(seq.size()):
                        nxt = <int>lat.arcs.size()
                        lat.arcs.push_back(vector[Arc]())
                        lat.f1.push_back(INFINITY)
                        lat.f2.push_back(INFINITY)
                        arc.ilabel = 0
                        arc.olabel = seq[j]
                        arc.w1 = ta.w1 if j == 0 else 0
                        arc.w2 = ta.w2 if j == 0 else 0
                        arc.nextstate = nxt
                        lat.arcs[cur].push_back(arc)
                        cur = nxt
                    lat.f1[cur] = ta.w1 if seq.empty() else 0
                    lat.f2[cur] = ta.w2 if seq.empty() else 0
                else:
                    for j in range(seq.size() - 1 if seq.size() > 0 else 0):
                        nxt = <int>lat.arcs.size()
                        lat.arcs.push_back(vector[Arc]())
                        lat.f1.push_back(INFINITY)
                        lat.f2.push_back(INFINITY)
                        arc.ilabel = ta.ilabel if j == 0 else 0
                        arc.olabel = seq[j]
                        arc.w1 = ta.w1 if j == 0 else 0
                        arc.w2 = ta.w2 if j == 0 else 0
                        arc.nextstate = nxt
                        lat.arcs[cur].push_back(arc)
                        cur = nxt
                    arc.ilabel = ta.ilabel if seq.size() <= 1 else 0
                    arc.olabel = seq.back() if seq.size() > 0 else 0
                    arc.w1 = ta.w1 if seq.size() <= 1 else 0
                    arc.w2 = ta.w2 if seq.size() <= 1 else 0
                    arc.nextstate = ta.nextstate
                    lat.arcs[cur].push_back(arc)
        return lat

    cdef int connected_output_states(self, vector[int] *new_id) noexcept nogil:
        """new_id[s]: output state s's number after OpenFst's Connect (the
        states on a path from the start to a final state, in order), -1 for
        the others; returns how many are kept."""
        cdef size_t n = self.o_arcs.size(), s, i
        cdef vector[char] access = vector[char](n, 0), co = vector[char](n, 0)
        cdef vector[int] stack, pred_begin = vector[int](n + 1, 0), preds, fill
        cdef int t, k = 0
        new_id.assign(n, -1)
        if n == 0:
            return 0
        access[0] = 1
        stack.push_back(0)
        while not stack.empty():
            s = <size_t>stack.back()
            stack.pop_back()
            for i in range(self.o_arcs[s].size()):
                t = self.o_arcs[s][i].nextstate
                if t >= 0 and not access[t]:
                    access[t] = 1
                    stack.push_back(t)
        for s in range(n):
            for i in range(self.o_arcs[s].size()):
                t = self.o_arcs[s][i].nextstate
                if t >= 0:
                    pred_begin[t + 1] += 1
        for s in range(n):
            pred_begin[s + 1] += pred_begin[s]
        preds.resize(pred_begin[n])
        fill.assign(pred_begin.begin(), pred_begin.end() - 1)
        for s in range(n):
            for i in range(self.o_arcs[s].size()):
                t = self.o_arcs[s][i].nextstate
                if t >= 0:
                    preds[fill[t]] = <int>s
                    fill[t] += 1
                elif not co[s]:
                    co[s] = 1          # final
                    stack.push_back(<int>s)
        while not stack.empty():
            t = stack.back()
            stack.pop_back()
            for i in range(<size_t>pred_begin[t], <size_t>pred_begin[t + 1]):
                if not co[preds[i]]:
                    co[preds[i]] = 1
                    stack.push_back(preds[i])
        for s in range(n):
            if access[s] and co[s]:
                new_id[0][s] = k
                k += 1
        return k

    def output_compact(self, bint connect=False):
        """The twin's output_compact (a CompactLattice); with ``connect``,
        then OpenFst's Connect (as CompactLattice.connect), done here."""
        cdef vector[int] seq, new_id
        cdef size_t n = self.o_arcs.size(), s, i
        cdef TempArc ta
        cdef int num_kept = <int>n
        if connect:
            num_kept = self.connected_output_states(&new_id)
        clat = CompactLattice()
        if num_kept == 0 or (connect and new_id[0] < 0):
            return clat
        arcs = []
        final = [None] * num_kept
        for s in range(n):
            if connect and new_id[s] < 0:
                continue
            row = []
            for i in range(self.o_arcs[s].size()):
                ta = self.o_arcs[s][i]
                if connect and ta.nextstate >= 0 and new_id[ta.nextstate] < 0:
                    continue
                self.to_vector(ta.string, &seq)
                string = tuple(seq)
                if ta.nextstate < 0:
                    final[len(arcs)] = (ta.w1, ta.w2, string)
                else:
                    row.append((ta.ilabel, ta.w1, ta.w2, string,
                                new_id[ta.nextstate] if connect else ta.nextstate))
            arcs.append(row)
        clat.arcs, clat.final = arcs, final
        clat.start = 0
        return clat
