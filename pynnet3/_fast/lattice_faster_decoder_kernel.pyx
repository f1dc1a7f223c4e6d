# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: language = c++
"""Kaldi's LatticeFasterDecoder search in C (twin of
pynnet3/decoding/lattice_faster_decoder.py, which documents the algorithm).

Same float32 arithmetic in the same order, same token-list order (a HashList
laid out as Kaldi's: elements chained bucket by bucket, buckets in order of
first use, bucket = state modulo the hash size), same pruning. The tests
compare its TokenLattice with the twin's on small graphs, exactly.

Layout, chosen for the memory traffic that dominates the search (measured
with perf on an AVX-512 Xeon: the link pruning walks and the arc loop wait on
cache misses, not on arithmetic):

- tokens, forward links and hash elements are C structs in growing arrays
  (one cache line brings a whole link or token, where parallel per-field
  arrays needed one line per field); a link's labels, which only the
  lattice needs, lie in an array beside the links, so the pruning walks
  read 16-byte links (a link's input-epsilon bit rides on its token number);
- a freed token or link slot is reused lowest address first (a bitmap of
  free slots, :func:`pool_add`), so the links a token gets together lie
  side by side and the live ones crowd the low end of the array: the
  pruning walks then follow near addresses. Reused last-freed-first (a
  free list), the slots scatter over the array within a few hundred
  frames, and on decode/large ``narrow`` the link pruning waited on a
  cache miss at almost every link (42% of the decode, AMD EPYC Zen 5);
- the graph is read through the StdFst's own record arrays (the const FST's
  20-byte state and 16-byte arc records), not copies;
- the bucket of a state is computed with a precomputed-reciprocal modulo
  (Lemire's fastmod: exact for 32-bit keys and sizes) instead of a division.

:meth:`LatticeFasterDecoderCore.decode` runs the whole utterance without the
GIL, so several decoders (one per thread, sharing one graph) run at once.
Warnings are kept as (code, frame) pairs while decoding and become Kaldi's
messages afterwards.
"""

import numpy as np
cimport numpy as cnp
from libc.math cimport fabsf, INFINITY
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libcpp.vector cimport vector
from libcpp.algorithm cimport nth_element

cnp.import_array()

cdef extern from *:
    """
    #include <stdint.h>
    /* Lemire, Kaser, Kurz (2019), "Faster remainder by direct computation":
       a % d for 32-bit unsigned a and d > 0, with m = 2^64 / d rounded up. */
    static inline uint64_t pynnet3_fastmod_m(uint32_t d) {
        return UINT64_C(0xFFFFFFFFFFFFFFFF) / d + 1;
    }
    static inline uint32_t pynnet3_fastmod(uint32_t a, uint64_t m, uint32_t d) {
        uint64_t lowbits = m * a;
        return (uint32_t)(((__uint128_t)lowbits * d) >> 64);
    }
    """
    uint64_t fastmod_m "pynnet3_fastmod_m"(uint32_t d) noexcept nogil
    uint32_t fastmod "pynnet3_fastmod"(uint32_t a, uint64_t m, uint32_t d) noexcept nogil
    void prefetch "__builtin_prefetch"(const void *address) noexcept nogil
    int count_trailing_zeros "__builtin_ctzll"(unsigned long long word) noexcept nogil

cdef enum:
    NONE = -1
    INT32_MAX = 2147483647
    # how many list elements ahead the walks over a frame's tokens ask for
    # the memory they will read
    LOOKAHEAD = 4
    # the size of a new decoder's hash table (Kaldi's decoder constructor)
    INITIAL_HASH_SIZE = 1000

# warning codes (messages in WARNING_TEXT)
cdef enum:
    W_NO_SURVIVING = 0
    W_NO_ALIVE_PRUNING_FIRST = 1
    W_NO_ALIVE_END = 2
    W_NO_ALIVE_PRUNING = 3

WARNING_TEXT = (
    "Error, no surviving tokens: frame is %d",
    "No tokens alive [doing pruning].. warning first time only for each utterance",
    "No tokens alive at end of file",
    "No tokens alive [doing pruning]",
)

cdef packed struct FstState:
    float final
    uint32_t pos
    uint32_t narcs
    uint32_t niepsilons
    uint32_t noepsilons

cdef packed struct FstArc:
    int ilabel
    int olabel
    float weight
    int nextstate

cdef struct Token:
    float tot_cost
    float extra_cost
    int links        # first forward link (NONE: none)
    int next         # next token of the same frame (NONE: last)

cdef struct Link:
    int tok_eps      # next token * 2, + 1 for an input-epsilon link
    float graph_cost
    float acoustic_cost
    int next         # next link of the same token


ctypedef fused PoolItem:
    Token
    Link


cdef struct FreeSlots:
    vector[uint64_t] bits   # bit k % 64 of word k / 64 set: slot k is free
    size_t lowest_word      # no free slot lies in a word before this one
    size_t count            # free slots


cdef inline void slots_clear(FreeSlots &free) noexcept nogil:
    free.bits.clear()
    free.lowest_word = 0
    free.count = 0


cdef inline void slot_free(FreeSlots &free, int k) noexcept nogil:
    cdef size_t w = <size_t>k >> 6
    free.bits[w] |= (<uint64_t>1) << (k & 63)
    free.count += 1
    if w < free.lowest_word:
        free.lowest_word = w


cdef inline int pool_add(vector[PoolItem] &items, FreeSlots &free,
                         PoolItem item) noexcept nogil:
    """Stores ``item`` in the lowest free slot of ``items``, or at the end
    when none is free; returns its index. The scan for that slot starts at
    the word where the last one stopped, or lower where a slot was freed
    since: slots are freed mostly by the pruning passes and taken by the
    expansion between them, so the scan mostly moves forward, a pass over
    the bitmap per pruning interval."""
    cdef size_t w
    cdef uint64_t word
    cdef int k
    if free.count == 0:
        return pool_append(items, free, item)
    w = free.lowest_word
    while free.bits[w] == 0:
        w += 1
    word = free.bits[w]
    k = <int>((w << 6) + <size_t>count_trailing_zeros(word))
    free.bits[w] = word & (word - 1)
    free.lowest_word = w
    free.count -= 1
    items[k] = item
    return k


cdef int pool_append(vector[PoolItem] &items, FreeSlots &free,
                     PoolItem item) noexcept nogil:
    """:func:`pool_add` where no slot is free: at the end (kept out of line,
    so that the common case is small enough to inline)."""
    items.push_back(item)
    if items.size() > (free.bits.size() << 6):
        free.bits.push_back(0)
    return <int>items.size() - 1


# Order statistics of the tokens' costs (the max-active and min-active
# cutoffs), by counting: one pass puts each cost in one of SELECT_BUCKETS
# equal-width buckets between the smallest and the largest, a second keeps
# the costs of the bucket that holds the k-th, and nth_element finishes on
# those few. The bucket of a cost is a non-decreasing function of the cost
# (a subtraction and a multiplication, each rounded, then truncated), so the
# k-th smallest lies in the bucket where the running count passes k: the
# value is exactly the k-th smallest, as nth_element over all the costs
# gives it, in two cache-friendly passes instead of nth_element's
# unpredictable partitioning of the whole array.
cdef enum:
    SELECT_BUCKETS = 1024
    # below this many costs, nth_element alone
    SELECT_MIN_COSTS = 256


cdef inline int cost_bucket(float cost, float lowest, float scale) noexcept nogil:
    """The bucket of ``cost`` (see above): the same for the same cost in
    both passes, never outside [0, SELECT_BUCKETS)."""
    cdef int b = <int>((cost - lowest) * scale)
    if b > SELECT_BUCKETS - 1:
        return SELECT_BUCKETS - 1
    if b < 0:           # not a number: anywhere, but in bounds
        return 0
    return b


cdef float kth_smallest(vector[float] &costs, size_t k, float lowest, float highest,
                        vector[int] &counts, vector[float] &bucket) noexcept nogil:
    """The k-th smallest (from 0) of ``costs`` (k < its size), whose smallest
    and largest are ``lowest`` and ``highest``; ``costs`` keeps its values
    (reordered only on the short path), ``counts`` and ``bucket`` are
    scratch."""
    cdef size_t n = costs.size(), i
    cdef float span = highest - lowest, scale
    cdef const float *c = costs.data()
    cdef int below = 0, want
    if n < SELECT_MIN_COSTS or not (span > 0 and span < INFINITY):
        nth_element(costs.begin(), costs.begin() + k, costs.end())
        return costs[k]
    scale = <float>(SELECT_BUCKETS - 1) / span
    counts.assign(SELECT_BUCKETS, 0)
    for i in range(n):
        counts[cost_bucket(c[i], lowest, scale)] += 1
    want = 0
    while below + counts[want] <= <int>k:
        below += counts[want]
        want += 1
    bucket.clear()
    for i in range(n):
        if cost_bucket(c[i], lowest, scale) == want:
            bucket.push_back(c[i])
    nth_element(bucket.begin(), bucket.begin() + (k - below), bucket.end())
    return bucket[k - below]


def kth_smallest_value(costs, size_t k):
    """:func:`kth_smallest` of a float32 vector (a copy of it), for checking
    it against a full sort: the value the decoder's cutoffs would get."""
    cdef cnp.ndarray a = np.ascontiguousarray(costs, dtype=np.float32)
    if a.ndim != 1 or k >= <size_t>a.shape[0]:
        raise ValueError("need a vector with more than k elements")
    cdef vector[float] values
    cdef vector[int] counts
    cdef vector[float] bucket
    cdef const float *p = <const float *>cnp.PyArray_DATA(a)
    cdef size_t i, n = <size_t>a.shape[0]
    cdef float lowest = INFINITY, highest = -INFINITY
    for i in range(n):
        values.push_back(p[i])
        if p[i] < lowest:
            lowest = p[i]
        if p[i] > highest:
            highest = p[i]
    return kth_smallest(values, k, lowest, highest, counts, bucket)


cdef struct Elem:
    int key          # graph state
    int val          # token
    int tail         # next element of the list (NONE: last)

cdef struct Bucket:
    int last         # last element of the bucket (NONE: bucket unused)
    int prev         # the bucket used before this one (NONE: first)


cdef inline int list_ahead(const Elem *elems, int e, int steps) noexcept nogil:
    """The element ``steps`` places after ``e`` in a hash list (NONE past
    its end): where a walk that loads memory ahead starts its second cursor."""
    cdef int i
    for i in range(steps):
        if e == NONE:
            break
        e = elems[e].tail
    return e


cdef class LatticeFasterDecoderCore:
    # graph (pointers into the StdFst's record arrays, kept alive by self.fst)
    cdef object fst
    cdef const FstState *states
    cdef const FstArc *arcs
    cdef int start
    # options
    cdef float beam, lattice_beam, beam_delta, hash_ratio, prune_delta
    cdef int max_active, min_active, prune_interval
    # tokens and links
    cdef vector[Token] toks
    cdef FreeSlots tok_free
    cdef vector[float] tok_final
    cdef vector[Link] links
    # the graph arc each link was made from (same index as the links), for
    # its labels: the pruning walks read only the 16-byte links, four to a
    # cache line
    cdef vector[uint32_t] link_arcs
    cdef FreeSlots link_free
    # per frame
    cdef vector[int] frame_head
    cdef vector[char] must_prune_fl, must_prune_toks
    cdef vector[float] cost_offsets
    # hash list
    cdef vector[Elem] elems
    cdef int e_free, list_head, bucket_list_tail
    cdef vector[Bucket] buckets
    cdef uint32_t hash_size
    cdef uint64_t hash_m
    # scratch
    cdef vector[float] tmp_array, select_bucket
    cdef vector[int] select_counts
    cdef vector[int] queue, eps_toks
    # state and results
    cdef bint warned, decoding_finalized, has_final
    cdef public float final_relative_cost, final_best_cost
    cdef vector[int] warning_codes, warning_frames
    # the utterance's scores
    cdef object scores_ref, tid_ref
    cdef const float *loglikes
    cdef Py_ssize_t row_stride
    cdef const int *tid_to_pdf

    def __init__(self, fst, config):
        states = fst.state_records
        arcs = fst.arc_records
        if (not states.flags.c_contiguous or not arcs.flags.c_contiguous
                or states.dtype.itemsize != sizeof(FstState)
                or arcs.dtype.itemsize != sizeof(FstArc)):
            raise ValueError("the graph's records are not the decoder's layout")
        self.fst = fst
        self.states = <const FstState *>cnp.PyArray_DATA(states)
        self.arcs = <const FstArc *>cnp.PyArray_DATA(arcs)
        self.start = fst.start
        self.beam = config.beam
        self.lattice_beam = config.lattice_beam
        self.beam_delta = config.beam_delta
        self.hash_ratio = config.hash_ratio
        cdef float lb = config.lattice_beam, ps = config.prune_scale
        self.prune_delta = lb * ps
        self.max_active = config.max_active
        self.min_active = config.min_active
        self.prune_interval = config.prune_interval
        self.list_head = NONE
        self.bucket_list_tail = NONE
        self.renew()            # the hash table's first state, set in one place

    def renew(self):
        """Puts the decoder in the state of one just made over the same graph
        and options, keeping its memory: the hash table goes back to its
        first size (the size decides the order of equal-cost tokens, see
        :meth:`LatticeFasterDecoder.renew`) and its elements are numbered
        afresh, as a new decoder's would be. The next :meth:`decode` then
        gives what a new decoder gives, without growing its arrays again."""
        self.clear_hash()       # empties every bucket in use
        self.elems.clear()      # the elements, free or not, are numbered afresh
        self.e_free = NONE
        self.set_size(INITIAL_HASH_SIZE)

    # -- hash list ---------------------------------------------------------------------
    cdef void set_size(self, size_t size) noexcept nogil:
        cdef Bucket empty
        if size > 0xFFFFFFFFu:
            size = 0xFFFFFFFFu
        self.hash_size = <uint32_t>size
        self.hash_m = fastmod_m(self.hash_size)
        if size > self.buckets.size():
            empty.last = NONE
            empty.prev = NONE
            self.buckets.resize(size, empty)

    cdef int clear_hash(self) noexcept nogil:
        cdef int b = self.bucket_list_tail
        while b != NONE:
            self.buckets[b].last = NONE
            b = self.buckets[b].prev
        self.bucket_list_tail = NONE
        cdef int ans = self.list_head
        self.list_head = NONE
        return ans

    cdef inline void delete_elem(self, int e) noexcept nogil:
        self.elems[e].tail = self.e_free
        self.e_free = e

    cdef void delete_elems(self, int e) noexcept nogil:
        cdef int nxt
        while e != NONE:
            nxt = self.elems[e].tail
            self.delete_elem(e)
            e = nxt

    cdef inline int new_elem(self) noexcept nogil:
        cdef int e
        cdef Elem blank
        if self.e_free != NONE:
            e = self.e_free
            self.e_free = self.elems[e].tail
            return e
        blank.key = 0
        blank.val = NONE
        blank.tail = NONE
        self.elems.push_back(blank)
        return <int>self.elems.size() - 1

    cdef inline int find_or_insert(self, int key, bint *found) noexcept nogil:
        cdef int index = <int>fastmod(<uint32_t>key, self.hash_m, self.hash_size)
        cdef Bucket *bucket = &self.buckets[index]
        cdef int head, tail, e, last = bucket.last
        cdef Elem *elems = self.elems.data()
        if last != NONE:
            if bucket.prev == NONE:
                head = self.list_head
            else:
                head = elems[self.buckets[bucket.prev].last].tail
            tail = elems[last].tail
            e = head
            while e != tail:
                if elems[e].key == key:
                    found[0] = True
                    return e
                e = elems[e].tail
        found[0] = False
        e = self.new_elem()
        elems = self.elems.data()
        elems[e].key = key
        elems[e].val = NONE
        if last == NONE:
            if self.bucket_list_tail == NONE:
                self.list_head = e
            else:
                elems[self.buckets[self.bucket_list_tail].last].tail = e
            elems[e].tail = NONE
            bucket.last = e
            bucket.prev = self.bucket_list_tail
            self.bucket_list_tail = index
        else:
            elems[e].tail = elems[last].tail
            elems[last].tail = e
            bucket.last = e
        return e

    # -- tokens and links -----------------------------------------------------------------
    cdef inline int new_token(self, float tot, float extra, int next_tok) noexcept nogil:
        cdef Token tok
        tok.tot_cost = tot
        tok.extra_cost = extra
        tok.links = NONE
        tok.next = next_tok
        return pool_add(self.toks, self.tok_free, tok)

    cdef inline int new_link(self, int next_tok, const FstArc *arc, float g, float ac,
                             int nxt) noexcept nogil:
        cdef Link link
        link.tok_eps = next_tok * 2 + (arc.ilabel == 0)
        link.graph_cost = g
        link.acoustic_cost = ac
        link.next = nxt
        cdef int k = pool_add(self.links, self.link_free, link)
        cdef uint32_t arc_index = <uint32_t>(arc - self.arcs)
        if <size_t>k == self.link_arcs.size():
            self.link_arcs.push_back(arc_index)
        else:
            self.link_arcs[k] = arc_index
        return k

    cdef void delete_links(self, int t) noexcept nogil:
        cdef int k = self.toks[t].links
        cdef Link *links = self.links.data()
        while k != NONE:
            slot_free(self.link_free, k)
            k = links[k].next
        self.toks[t].links = NONE

    cdef inline int find_or_add_token(self, int state, int frame_plus_one, float tot,
                                      bint *changed) noexcept nogil:
        cdef bint found
        cdef int e = self.find_or_insert(state, &found)
        cdef int t
        cdef Token *tok
        if not found:
            t = self.new_token(tot, 0, self.frame_head[frame_plus_one])
            self.frame_head[frame_plus_one] = t
            self.elems[e].val = t
            changed[0] = True
        else:
            tok = &self.toks[self.elems[e].val]
            if tok.tot_cost > tot:
                tok.tot_cost = tot
                changed[0] = True
            else:
                changed[0] = False
        return e

    cdef void warn(self, int code, int frame) noexcept nogil:
        self.warning_codes.push_back(code)
        self.warning_frames.push_back(frame)

    # -- decoding -------------------------------------------------------------------------
    def decode(self, loglikes, tid_to_pdf):
        """Decodes one utterance (``loglikes``: C-contiguous float32 frames x
        pdfs; ``tid_to_pdf``: C-contiguous int32); the GIL is released for
        the search. Returns whether any token survived to the end."""
        cdef cnp.ndarray ll = loglikes, tid = tid_to_pdf
        if (ll.ndim != 2 or ll.dtype != np.float32 or not ll.flags.c_contiguous
                or tid.ndim != 1 or tid.dtype != np.int32 or not tid.flags.c_contiguous):
            raise ValueError("decode needs C-contiguous float32 scores and int32 pdf table")
        if self.start < 0:
            raise ValueError("the decoding graph has no start state")
        self.scores_ref = ll
        self.tid_ref = tid
        self.loglikes = <const float *>cnp.PyArray_DATA(ll)
        self.row_stride = ll.shape[1]
        self.tid_to_pdf = <const int *>cnp.PyArray_DATA(tid)
        cdef int num_frames = <int>ll.shape[0]
        cdef bint ok
        with nogil:
            ok = self.run(num_frames)
        self.scores_ref = None
        self.tid_ref = None
        return ok

    cdef bint run(self, int num_frames) noexcept nogil:
        self.init_decoding()
        cdef float cutoff
        while self.num_frames_decoded() < num_frames:
            if self.num_frames_decoded() % self.prune_interval == 0:
                self.prune_active_tokens(self.prune_delta)
            cutoff = self.process_emitting()
            self.process_nonemitting(cutoff)
        self.finalize_decoding()
        return self.frame_head.size() > 0 and self.frame_head.back() != NONE

    @property
    def warnings(self):
        """Kaldi's warning messages of the last utterance, in order."""
        out = []
        cdef size_t i
        for i in range(self.warning_codes.size()):
            text = WARNING_TEXT[self.warning_codes[i]]
            out.append(text % self.warning_frames[i] if "%d" in text else text)
        return out

    cdef inline int num_frames_decoded(self) noexcept nogil:
        return <int>self.frame_head.size() - 1

    cdef void init_decoding(self) noexcept nogil:
        self.delete_elems(self.clear_hash())
        self.toks.clear()
        slots_clear(self.tok_free)
        self.tok_final.clear()
        self.links.clear()
        self.link_arcs.clear()
        slots_clear(self.link_free)
        self.frame_head.clear()
        self.must_prune_fl.clear()
        self.must_prune_toks.clear()
        self.cost_offsets.clear()
        self.warning_codes.clear()
        self.warning_frames.clear()
        self.warned = False
        self.decoding_finalized = False
        self.has_final = False
        cdef int t = self.new_token(0, 0, NONE)
        self.frame_head.push_back(t)
        self.must_prune_fl.push_back(1)
        self.must_prune_toks.push_back(1)
        cdef bint found
        cdef int e = self.find_or_insert(self.start, &found)
        self.elems[e].val = t
        self.process_nonemitting(self.beam)

    cdef float get_cutoff(self, int list_head, size_t *tok_count, float *adaptive_beam,
                          int *best_elem) noexcept nogil:
        cdef float best_weight = INFINITY, worst_weight = -INFINITY, w
        cdef size_t count = 0
        cdef int e = list_head
        cdef const Elem *elems = self.elems.data()
        cdef const Token *toks = self.toks.data()
        best_elem[0] = NONE
        if self.max_active == INT32_MAX and self.min_active == 0:
            while e != NONE:
                w = toks[elems[e].val].tot_cost
                if w < best_weight:
                    best_weight = w
                    best_elem[0] = e
                e = elems[e].tail
                count += 1
            tok_count[0] = count
            adaptive_beam[0] = self.beam
            return best_weight + self.beam
        self.tmp_array.clear()
        # the tokens lie anywhere in their array: load a few ahead
        cdef int ahead = list_ahead(elems, e, LOOKAHEAD)
        while e != NONE:
            if ahead != NONE:
                prefetch(&toks[elems[ahead].val])
                ahead = elems[ahead].tail
            w = toks[elems[e].val].tot_cost
            self.tmp_array.push_back(w)
            if w < best_weight:
                best_weight = w
                best_elem[0] = e
            if w > worst_weight:
                worst_weight = w
            e = elems[e].tail
            count += 1
        tok_count[0] = count
        cdef float beam_cutoff = best_weight + self.beam
        cdef float min_active_cutoff = INFINITY, max_active_cutoff = INFINITY
        cdef size_t n = self.tmp_array.size()
        # Kaldi's nth_element calls; their values, which are all that is
        # used, from kth_smallest
        if n > <size_t>self.max_active:
            max_active_cutoff = kth_smallest(self.tmp_array, self.max_active, best_weight,
                                             worst_weight, self.select_counts,
                                             self.select_bucket)
        if max_active_cutoff < beam_cutoff:
            adaptive_beam[0] = max_active_cutoff - best_weight + self.beam_delta
            return max_active_cutoff
        if n > <size_t>self.min_active:
            if self.min_active == 0:
                min_active_cutoff = best_weight
            else:
                # (Kaldi selects among the max_active smallest when there
                # are more: the same value)
                min_active_cutoff = kth_smallest(self.tmp_array, self.min_active, best_weight,
                                                 worst_weight, self.select_counts,
                                                 self.select_bucket)
        if min_active_cutoff > beam_cutoff:
            adaptive_beam[0] = min_active_cutoff - best_weight + self.beam_delta
            return min_active_cutoff
        adaptive_beam[0] = self.beam
        return beam_cutoff

    cdef float process_emitting(self) noexcept nogil:
        cdef int frame = <int>self.frame_head.size() - 1
        self.frame_head.push_back(NONE)
        self.must_prune_fl.push_back(1)
        self.must_prune_toks.push_back(1)
        cdef int final_toks = self.clear_hash()
        cdef int best_elem
        cdef float adaptive_beam
        cdef size_t tok_cnt
        cdef float cur_cutoff = self.get_cutoff(final_toks, &tok_cnt, &adaptive_beam,
                                                &best_elem)
        cdef float fcnt = <float>tok_cnt
        cdef size_t new_sz = <size_t>(fcnt * self.hash_ratio)
        if new_sz > self.hash_size:
            self.set_size(new_sz)
        cdef float next_cutoff = INFINITY, cost_offset = 0, new_weight, tot, ac, g, cur
        cdef int t, e, e_tail, e_next, il
        cdef const FstState *st
        cdef const FstArc *arc
        cdef const FstArc *arc_end
        cdef bint changed
        cdef const float *row = self.loglikes + <Py_ssize_t>frame * self.row_stride
        cdef const int *tid_to_pdf = self.tid_to_pdf
        if best_elem != NONE:
            st = &self.states[self.elems[best_elem].key]
            t = self.elems[best_elem].val
            cost_offset = -self.toks[t].tot_cost
            arc = self.arcs + st.pos
            arc_end = arc + st.narcs
            while arc < arc_end:
                il = arc.ilabel
                if il != 0:
                    new_weight = arc.weight + cost_offset
                    new_weight = new_weight - row[tid_to_pdf[il]]
                    new_weight = new_weight + self.toks[t].tot_cost
                    if new_weight + adaptive_beam < next_cutoff:
                        next_cutoff = new_weight + adaptive_beam
                arc += 1
        self.cost_offsets.push_back(cost_offset)
        cdef const Elem *elems
        cdef int e_ahead
        e = final_toks
        if e != NONE:
            prefetch(&self.states[self.elems[e].key])
        while e != NONE:
            # The graph's states and arcs are read in no order: ask for the
            # next token's arcs (its state was asked for one token ago) and
            # the state of the one after, while this one's arcs are walked.
            # (The tokens ahead are the last frame's, which nothing below
            # changes; the array may move as tokens are added.)
            elems = self.elems.data()
            e_ahead = elems[e].tail
            if e_ahead != NONE:
                prefetch(self.arcs + self.states[elems[e_ahead].key].pos)
                e_ahead = elems[e_ahead].tail
                if e_ahead != NONE:
                    prefetch(&self.states[elems[e_ahead].key])
                    prefetch(&self.toks[elems[e_ahead].val])
            t = self.elems[e].val
            cur = self.toks[t].tot_cost
            if cur <= cur_cutoff:
                st = &self.states[self.elems[e].key]
                arc = self.arcs + st.pos
                arc_end = arc + st.narcs
                while arc < arc_end:
                    il = arc.ilabel
                    if il != 0:
                        ac = cost_offset - row[tid_to_pdf[il]]
                        g = arc.weight
                        tot = cur + ac
                        tot = tot + g
                        if tot < next_cutoff:
                            if tot + adaptive_beam < next_cutoff:
                                next_cutoff = tot + adaptive_beam
                            e_next = self.find_or_add_token(arc.nextstate, frame + 1, tot,
                                                            &changed)
                            self.toks[t].links = self.new_link(
                                self.elems[e_next].val, arc, g, ac, self.toks[t].links)
                    arc += 1
            e_tail = self.elems[e].tail
            self.delete_elem(e)
            e = e_tail
        return next_cutoff

    cdef void process_nonemitting(self, float cutoff) noexcept nogil:
        cdef int frame = <int>self.frame_head.size() - 2
        cdef int e = self.list_head, t, e_new, next_state
        cdef float cur, g, tot
        cdef const FstState *st
        cdef const FstArc *arc
        cdef const FstArc *arc_end
        cdef bint changed
        if e == NONE and not self.warned:
            self.warned = True
            self.warn(W_NO_SURVIVING, frame)
        self.queue.clear()
        # the states lie anywhere in the graph: load a few ahead
        cdef const Elem *elems = self.elems.data()
        cdef int ahead = list_ahead(elems, e, LOOKAHEAD)
        while e != NONE:
            if ahead != NONE:
                prefetch(&self.states[elems[ahead].key])
                ahead = elems[ahead].tail
            if self.states[elems[e].key].niepsilons != 0:
                self.queue.push_back(e)
            e = elems[e].tail
        while not self.queue.empty():
            e = self.queue.back()
            self.queue.pop_back()
            t = self.elems[e].val
            cur = self.toks[t].tot_cost
            if cur >= cutoff:
                continue
            self.delete_links(t)
            st = &self.states[self.elems[e].key]
            arc = self.arcs + st.pos
            arc_end = arc + st.narcs
            while arc < arc_end:
                if arc.ilabel == 0:
                    g = arc.weight
                    tot = cur + g
                    if tot < cutoff:
                        next_state = arc.nextstate
                        e_new = self.find_or_add_token(next_state, frame + 1, tot, &changed)
                        self.toks[t].links = self.new_link(self.elems[e_new].val, arc, g, 0,
                                                           self.toks[t].links)
                        if changed and self.states[next_state].niepsilons != 0:
                            self.queue.push_back(e_new)
                arc += 1

    # -- pruning ------------------------------------------------------------------------
    cdef float prune_links_of(self, int t, bint *pruned, bint *has_epsilon) noexcept nogil:
        cdef float tok_extra = INFINITY, link_extra, zero = 0, x
        cdef Token *toks = self.toks.data()
        cdef Link *links = self.links.data()
        cdef Token *tok = &toks[t]
        cdef Token *nt
        cdef Link *link
        cdef int k = tok.links, prev = NONE, nxt
        cdef float tt = tok.tot_cost
        while k != NONE:
            link = &links[k]
            nxt = link.next
            if nxt != NONE:
                prefetch(&links[nxt])
            nt = &toks[link.tok_eps >> 1]
            x = tt + link.acoustic_cost
            x = x + link.graph_cost
            x = x - nt.tot_cost
            link_extra = nt.extra_cost + x
            if link_extra > self.lattice_beam:
                if prev != NONE:
                    links[prev].next = nxt
                else:
                    tok.links = nxt
                slot_free(self.link_free, k)
                pruned[0] = True
            else:
                if link_extra < zero:
                    link_extra = zero
                if link_extra < tok_extra:
                    tok_extra = link_extra
                if link.tok_eps & 1:
                    has_epsilon[0] = True
                prev = k
            k = nxt
        return tok_extra

    cdef void prune_forward_links(self, int fpo, bint *extra_changed, bint *links_pruned,
                                  float delta) noexcept nogil:
        extra_changed[0] = False
        links_pruned[0] = False
        if self.frame_head[fpo] == NONE and not self.warned:
            self.warned = True
            self.warn(W_NO_ALIVE_PRUNING_FIRST, fpo)
        cdef int t
        cdef size_t i
        cdef float tok_extra
        cdef bint has_epsilon
        # Kaldi's loop: passes over the frame's tokens until no extra cost
        # moves by more than delta. A token's extra cost depends on the next
        # frame's tokens (fixed here) and, through epsilon links, on this
        # frame's; after the first pass only tokens with epsilon links can
        # change, so the later passes recompute only those, in list order:
        # the same values and prunings as recomputing every token.
        self.eps_toks.clear()
        cdef bint changed = False
        # The walk waits on memory: it asks for the first link of the token
        # two places ahead in the list (whose record was asked for one turn
        # before) and for the record of the token three places ahead.
        cdef int next1 = NONE, next2 = NONE, next3
        t = self.frame_head[fpo]
        if t != NONE:
            next1 = self.toks[t].next
            if next1 != NONE:
                next2 = self.toks[next1].next
        while t != NONE:
            next3 = NONE
            if next2 != NONE:
                next3 = self.toks[next2].next
                if next3 != NONE:
                    prefetch(&self.toks[next3])
                if self.toks[next2].links != NONE:
                    prefetch(&self.links[self.toks[next2].links])
            has_epsilon = False
            tok_extra = self.prune_links_of(t, links_pruned, &has_epsilon)
            if fabsf(tok_extra - self.toks[t].extra_cost) > delta:
                changed = True
            self.toks[t].extra_cost = tok_extra
            if has_epsilon:
                self.eps_toks.push_back(t)
            t = next1
            next1 = next2
            next2 = next3
        if changed:
            extra_changed[0] = True
        while changed:
            changed = False
            for i in range(self.eps_toks.size()):
                t = self.eps_toks[i]
                tok_extra = self.prune_links_of(t, links_pruned, &has_epsilon)
                if fabsf(tok_extra - self.toks[t].extra_cost) > delta:
                    changed = True
                self.toks[t].extra_cost = tok_extra
            if changed:
                extra_changed[0] = True

    cdef void compute_final_costs(self, bint store) noexcept nogil:
        cdef float best_cost = INFINITY, best_with_final = INFINITY, fc, cost, cwf
        cdef int e = self.list_head, t
        if store:
            self.tok_final.assign(self.toks.size(), INFINITY)
        while e != NONE:
            t = self.elems[e].val
            fc = self.states[self.elems[e].key].final
            cost = self.toks[t].tot_cost
            cwf = cost + fc
            if cost < best_cost:
                best_cost = cost
            if cwf < best_with_final:
                best_with_final = cwf
            if store and fc != INFINITY:
                self.tok_final[t] = fc
                self.has_final = True
            e = self.elems[e].tail
        if best_cost == INFINITY and best_with_final == INFINITY:
            self.final_relative_cost = INFINITY
        else:
            self.final_relative_cost = best_with_final - best_cost
        self.final_best_cost = best_with_final if best_with_final != INFINITY else best_cost

    cdef void prune_forward_links_final(self) noexcept nogil:
        cdef int fpo = <int>self.frame_head.size() - 1
        if self.frame_head[fpo] == NONE:
            self.warn(W_NO_ALIVE_END, fpo)
        self.compute_final_costs(True)
        self.decoding_finalized = True
        self.delete_elems(self.clear_hash())
        cdef bint changed = True, pruned, has_epsilon
        cdef int t
        cdef float final_cost, tok_extra, links_extra
        while changed:
            changed = False
            t = self.frame_head[fpo]
            while t != NONE:
                final_cost = self.tok_final[t] if self.has_final else 0
                tok_extra = self.toks[t].tot_cost + final_cost
                tok_extra = tok_extra - self.final_best_cost
                links_extra = self.prune_links_of(t, &pruned, &has_epsilon)
                if links_extra < tok_extra:
                    tok_extra = links_extra
                if tok_extra > self.lattice_beam:
                    tok_extra = INFINITY
                if not _approx_equal(self.toks[t].extra_cost, tok_extra):
                    changed = True
                self.toks[t].extra_cost = tok_extra
                t = self.toks[t].next

    cdef void prune_tokens_for_frame(self, int fpo) noexcept nogil:
        cdef int t = self.frame_head[fpo], prev = NONE, nxt
        if t == NONE:
            self.warn(W_NO_ALIVE_PRUNING, fpo)
        while t != NONE:
            nxt = self.toks[t].next
            if self.toks[t].extra_cost == INFINITY:
                if prev != NONE:
                    self.toks[prev].next = nxt
                else:
                    self.frame_head[fpo] = nxt
                self.delete_links(t)
                slot_free(self.tok_free, t)
            else:
                prev = t
            t = nxt

    cdef void prune_active_tokens(self, float delta) noexcept nogil:
        cdef int cur = self.num_frames_decoded(), f
        cdef bint extra_changed, links_pruned
        for f in range(cur - 1, -1, -1):
            if self.must_prune_fl[f]:
                self.prune_forward_links(f, &extra_changed, &links_pruned, delta)
                if extra_changed and f > 0:
                    self.must_prune_fl[f - 1] = 1
                if links_pruned:
                    self.must_prune_toks[f] = 1
                self.must_prune_fl[f] = 0
            if f + 1 < cur and self.must_prune_toks[f + 1]:
                self.prune_tokens_for_frame(f + 1)
                self.must_prune_toks[f + 1] = 0

    cdef void finalize_decoding(self) noexcept nogil:
        cdef int fpo = self.num_frames_decoded(), f
        cdef bint b1, b2
        self.prune_forward_links_final()
        for f in range(fpo - 1, -1, -1):
            self.prune_forward_links(f, &b1, &b2, 0)
            self.prune_tokens_for_frame(f + 1)
        self.prune_tokens_for_frame(0)

    # -- results ----------------------------------------------------------------------------
    def reached_final(self):
        return self.final_relative_cost != INFINITY

    @property
    def has_final_state(self):
        return bool(self.has_final)

    def token_lattice_arrays(self):
        """(frame_begin, link_begin, next_tok, ilabel, olabel, graph_cost,
        acoustic_cost, cost_offsets, final_cost, has_final), tokens numbered
        frame by frame in list order, links in list order (the walks run
        without the GIL)."""
        cdef int nframes = <int>self.frame_head.size(), f, t, k
        cdef long long n = 0, nl = 0, i, j = 0
        cdef vector[int] order
        cdef vector[int] index
        cdef const Token *toks = self.toks.data()
        cdef const Link *links = self.links.data()
        cdef const uint32_t *link_arcs = self.link_arcs.data()
        cdef const FstArc *arc
        cdef vector[int64_t] frame_sizes = vector[int64_t](nframes, 0)
        with nogil:
            index.assign(self.toks.size(), -1)
            for f in range(nframes):
                t = self.frame_head[f]
                while t != NONE:
                    index[t] = <int>n
                    order.push_back(t)
                    n += 1
                    frame_sizes[f] += 1
                    k = toks[t].links
                    while k != NONE:
                        nl += 1
                        k = links[k].next
                    t = toks[t].next
        frame_begin = np.zeros(nframes + 1, dtype=np.int64)
        link_begin = np.zeros(n + 1, dtype=np.int64)
        next_tok = np.empty(nl, dtype=np.int32)
        il = np.empty(nl, dtype=np.int32)
        ol = np.empty(nl, dtype=np.int32)
        gc = np.empty(nl, dtype=np.float32)
        ac = np.empty(nl, dtype=np.float32)
        fc = np.empty(n, dtype=np.float32)
        offsets = np.empty(self.cost_offsets.size(), dtype=np.float32)
        cdef long long[::1] p_fb = frame_begin, p_lb = link_begin
        cdef int[::1] p_nt = next_tok, p_il = il, p_ol = ol
        cdef float[::1] p_gc = gc, p_ac = ac, p_fc = fc, p_off = offsets
        cdef size_t nfinal = self.tok_final.size()
        with nogil:
            for f in range(nframes):
                p_fb[f + 1] = p_fb[f] + frame_sizes[f]
            for i in range(n):
                t = order[i]
                p_fc[i] = self.tok_final[t] if <size_t>t < nfinal else INFINITY
                k = toks[t].links
                while k != NONE:
                    arc = &self.arcs[link_arcs[k]]
                    p_nt[j] = index[links[k].tok_eps >> 1]
                    p_il[j] = arc.ilabel
                    p_ol[j] = arc.olabel
                    p_gc[j] = links[k].graph_cost
                    p_ac[j] = links[k].acoustic_cost
                    j += 1
                    k = links[k].next
                p_lb[i + 1] = j
            for i in range(<long long>self.cost_offsets.size()):
                p_off[i] = self.cost_offsets[i]
        return (frame_begin, link_begin, next_tok, il, ol, gc, ac, offsets, fc,
                bool(self.has_final))


cdef inline bint _approx_equal(float a, float b) noexcept nogil:
    if a == b:
        return True
    cdef float diff = fabsf(a - b)
    cdef float tol = 1.0e-05
    if diff == INFINITY or diff != diff:
        return False
    return diff <= tol * (fabsf(a) + fabsf(b))
