# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: language = c++
"""Kaldi's LatticeFasterDecoder search in C (twin of
pynnet3/decoding/lattice_faster_decoder.py, which documents the algorithm).

Same float32 arithmetic in the same order, same token-list order (a HashList
laid out as Kaldi's: elements chained bucket by bucket, buckets in order of
first use), same pruning; tokens and links live in flat arrays with free
lists, the graph is the StdFst's flat arrays (arcs in file order). The tests
compare its TokenLattice with the twin's on small graphs, exactly.
"""

import numpy as np
cimport numpy as cnp
from libc.math cimport fabsf, INFINITY
from libcpp.vector cimport vector
from libcpp.algorithm cimport nth_element

cnp.import_array()

cdef int NONE = -1
cdef int INT32_MAX = 2147483647


cdef class LatticeFasterDecoderCore:
    # graph
    cdef const long long[:] arc_begin
    cdef const int[:] ilabel, olabel, nextstate, neps
    cdef const float[:] weight, final
    cdef int start
    # options
    cdef float beam, lattice_beam, beam_delta, hash_ratio, prune_delta
    cdef int max_active, min_active, prune_interval
    # tokens
    cdef vector[float] tok_tot, tok_extra, tok_final
    cdef vector[int] tok_links, tok_next, tok_free
    # links
    cdef vector[int] l_next_tok, l_ilabel, l_olabel, l_next, l_free
    cdef vector[float] l_graph, l_ac
    # per frame
    cdef vector[int] frame_head
    cdef vector[char] must_prune_fl, must_prune_toks
    cdef vector[float] cost_offsets
    # hash list
    cdef vector[int] e_key, e_val, e_tail
    cdef int e_free, list_head
    cdef long long bucket_list_tail
    cdef vector[int] b_last
    cdef vector[long long] b_prev
    cdef size_t hash_size
    # misc
    cdef vector[float] tmp_array
    cdef vector[int] queue
    cdef public bint warned, decoding_finalized, has_final
    cdef public float final_relative_cost, final_best_cost
    cdef public list warnings
    cdef const float[:, :] loglikes
    cdef const int[:] tid_to_pdf

    def __init__(self, fst, config):
        self.arc_begin = fst.arc_begin
        self.ilabel = fst.ilabel
        self.olabel = fst.olabel
        self.nextstate = fst.nextstate
        self.weight = fst.weight
        self.final = fst.final
        self.neps = fst.num_input_epsilons()
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
        self.e_free = NONE
        self.list_head = NONE
        self.bucket_list_tail = -1
        self.set_size(1000)
        self.warnings = []

    # -- hash list ---------------------------------------------------------------------
    cdef void set_size(self, size_t size):
        self.hash_size = size
        if size > self.b_last.size():
            self.b_last.resize(size, NONE)
            self.b_prev.resize(size, -1)

    cdef int clear_hash(self):
        cdef long long b = self.bucket_list_tail
        while b != -1:
            self.b_last[b] = NONE
            b = self.b_prev[b]
        self.bucket_list_tail = -1
        cdef int ans = self.list_head
        self.list_head = NONE
        return ans

    cdef inline void delete_elem(self, int e):
        self.e_tail[e] = self.e_free
        self.e_free = e

    cdef inline int new_elem(self):
        cdef int e
        if self.e_free != NONE:
            e = self.e_free
            self.e_free = self.e_tail[e]
            return e
        self.e_key.push_back(0)
        self.e_val.push_back(NONE)
        self.e_tail.push_back(NONE)
        return <int>self.e_key.size() - 1

    cdef inline int find_or_insert(self, int key, bint *found):
        cdef size_t index = (<size_t>key) % self.hash_size
        cdef int head, tail, e, last = self.b_last[index]
        if last != NONE:
            if self.b_prev[index] == -1:
                head = self.list_head
            else:
                head = self.e_tail[self.b_last[self.b_prev[index]]]
            tail = self.e_tail[last]
            e = head
            while e != tail:
                if self.e_key[e] == key:
                    found[0] = True
                    return e
                e = self.e_tail[e]
        found[0] = False
        e = self.new_elem()
        self.e_key[e] = key
        self.e_val[e] = NONE
        if last == NONE:
            if self.bucket_list_tail == -1:
                self.list_head = e
            else:
                self.e_tail[self.b_last[self.bucket_list_tail]] = e
            self.e_tail[e] = NONE
            self.b_last[index] = e
            self.b_prev[index] = self.bucket_list_tail
            self.bucket_list_tail = index
        else:
            self.e_tail[e] = self.e_tail[last]
            self.e_tail[last] = e
            self.b_last[index] = e
        return e

    # -- tokens and links -----------------------------------------------------------------
    cdef inline int new_token(self, float tot, float extra, int next_tok):
        cdef int t
        if not self.tok_free.empty():
            t = self.tok_free.back()
            self.tok_free.pop_back()
            self.tok_tot[t] = tot
            self.tok_extra[t] = extra
            self.tok_links[t] = NONE
            self.tok_next[t] = next_tok
            self.tok_final[t] = INFINITY
            return t
        self.tok_tot.push_back(tot)
        self.tok_extra.push_back(extra)
        self.tok_links.push_back(NONE)
        self.tok_next.push_back(next_tok)
        self.tok_final.push_back(INFINITY)
        return <int>self.tok_tot.size() - 1

    cdef inline int new_link(self, int next_tok, int il, int ol, float g, float ac, int nxt):
        cdef int k
        if not self.l_free.empty():
            k = self.l_free.back()
            self.l_free.pop_back()
            self.l_next_tok[k] = next_tok
            self.l_ilabel[k] = il
            self.l_olabel[k] = ol
            self.l_graph[k] = g
            self.l_ac[k] = ac
            self.l_next[k] = nxt
            return k
        self.l_next_tok.push_back(next_tok)
        self.l_ilabel.push_back(il)
        self.l_olabel.push_back(ol)
        self.l_graph.push_back(g)
        self.l_ac.push_back(ac)
        self.l_next.push_back(nxt)
        return <int>self.l_next_tok.size() - 1

    cdef void delete_links(self, int t):
        cdef int k = self.tok_links[t], m
        while k != NONE:
            m = self.l_next[k]
            self.l_free.push_back(k)
            k = m
        self.tok_links[t] = NONE

    cdef inline int find_or_add_token(self, int state, int frame_plus_one, float tot,
                                      bint *changed):
        cdef bint found
        cdef int e = self.find_or_insert(state, &found)
        cdef int t
        if not found:
            t = self.new_token(tot, 0, self.frame_head[frame_plus_one])
            self.frame_head[frame_plus_one] = t
            self.e_val[e] = t
            changed[0] = True
        else:
            t = self.e_val[e]
            if self.tok_tot[t] > tot:
                self.tok_tot[t] = tot
                changed[0] = True
            else:
                changed[0] = False
        return e

    # -- decoding -------------------------------------------------------------------------
    def decode(self, loglikes, tid_to_pdf):
        self.loglikes = loglikes
        self.tid_to_pdf = tid_to_pdf
        self.init_decoding()
        cdef int num_frames = loglikes.shape[0]
        cdef float cutoff
        while self.num_frames_decoded() < num_frames:
            if self.num_frames_decoded() % self.prune_interval == 0:
                self.prune_active_tokens(self.prune_delta)
            cutoff = self.process_emitting()
            self.process_nonemitting(cutoff)
        self.finalize_decoding()
        return self.frame_head.size() > 0 and self.frame_head.back() != NONE

    cdef int num_frames_decoded(self):
        return <int>self.frame_head.size() - 1

    cdef void init_decoding(self):
        cdef int e = self.clear_hash()
        while e != NONE:
            nxt = self.e_tail[e]
            self.delete_elem(e)
            e = nxt
        self.tok_tot.clear(); self.tok_extra.clear(); self.tok_final.clear()
        self.tok_links.clear(); self.tok_next.clear(); self.tok_free.clear()
        self.l_next_tok.clear(); self.l_ilabel.clear(); self.l_olabel.clear()
        self.l_next.clear(); self.l_free.clear(); self.l_graph.clear(); self.l_ac.clear()
        self.frame_head.clear(); self.must_prune_fl.clear(); self.must_prune_toks.clear()
        self.cost_offsets.clear()
        self.warnings = []
        self.warned = False
        self.decoding_finalized = False
        self.has_final = False
        if self.start < 0:
            raise ValueError("the decoding graph has no start state")
        cdef int t = self.new_token(0, 0, NONE)
        self.frame_head.push_back(t)
        self.must_prune_fl.push_back(1)
        self.must_prune_toks.push_back(1)
        cdef bint found
        e = self.find_or_insert(self.start, &found)
        self.e_val[e] = t
        self.process_nonemitting(self.beam)

    cdef float get_cutoff(self, int list_head, size_t *tok_count, float *adaptive_beam,
                          int *best_elem):
        cdef float best_weight = INFINITY, w
        cdef size_t count = 0
        cdef int e = list_head
        best_elem[0] = NONE
        if self.max_active == INT32_MAX and self.min_active == 0:
            while e != NONE:
                w = self.tok_tot[self.e_val[e]]
                if w < best_weight:
                    best_weight = w
                    best_elem[0] = e
                e = self.e_tail[e]
                count += 1
            tok_count[0] = count
            adaptive_beam[0] = self.beam
            return best_weight + self.beam
        self.tmp_array.clear()
        while e != NONE:
            w = self.tok_tot[self.e_val[e]]
            self.tmp_array.push_back(w)
            if w < best_weight:
                best_weight = w
                best_elem[0] = e
            e = self.e_tail[e]
            count += 1
        tok_count[0] = count
        cdef float beam_cutoff = best_weight + self.beam
        cdef float min_active_cutoff = INFINITY, max_active_cutoff = INFINITY
        cdef size_t n = self.tmp_array.size()
        if n > <size_t>self.max_active:
            nth_element(self.tmp_array.begin(), self.tmp_array.begin() + self.max_active,
                        self.tmp_array.end())
            max_active_cutoff = self.tmp_array[self.max_active]
        if max_active_cutoff < beam_cutoff:
            adaptive_beam[0] = max_active_cutoff - best_weight + self.beam_delta
            return max_active_cutoff
        if n > <size_t>self.min_active:
            if self.min_active == 0:
                min_active_cutoff = best_weight
            else:
                if n > <size_t>self.max_active:
                    nth_element(self.tmp_array.begin(),
                                self.tmp_array.begin() + self.min_active,
                                self.tmp_array.begin() + self.max_active)
                else:
                    nth_element(self.tmp_array.begin(),
                                self.tmp_array.begin() + self.min_active,
                                self.tmp_array.end())
                min_active_cutoff = self.tmp_array[self.min_active]
        if min_active_cutoff > beam_cutoff:
            adaptive_beam[0] = min_active_cutoff - best_weight + self.beam_delta
            return min_active_cutoff
        adaptive_beam[0] = self.beam
        return beam_cutoff

    cdef float process_emitting(self):
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
        cdef int state, t, e, e_tail, e_next
        cdef long long a, a_end
        cdef int il
        cdef bint changed
        cdef const float[:] row = self.loglikes[frame]
        if best_elem != NONE:
            state = self.e_key[best_elem]
            t = self.e_val[best_elem]
            cost_offset = -self.tok_tot[t]
            a_end = self.arc_begin[state + 1]
            a = self.arc_begin[state]
            while a < a_end:
                il = self.ilabel[a]
                if il != 0:
                    new_weight = self.weight[a] + cost_offset
                    new_weight = new_weight - row[self.tid_to_pdf[il]]
                    new_weight = new_weight + self.tok_tot[t]
                    if new_weight + adaptive_beam < next_cutoff:
                        next_cutoff = new_weight + adaptive_beam
                a += 1
        self.cost_offsets.push_back(cost_offset)
        e = final_toks
        while e != NONE:
            state = self.e_key[e]
            t = self.e_val[e]
            cur = self.tok_tot[t]
            if cur <= cur_cutoff:
                a_end = self.arc_begin[state + 1]
                a = self.arc_begin[state]
                while a < a_end:
                    il = self.ilabel[a]
                    if il != 0:
                        ac = cost_offset - row[self.tid_to_pdf[il]]
                        g = self.weight[a]
                        tot = cur + ac
                        tot = tot + g
                        if tot < next_cutoff:
                            if tot + adaptive_beam < next_cutoff:
                                next_cutoff = tot + adaptive_beam
                            e_next = self.find_or_add_token(self.nextstate[a], frame + 1, tot,
                                                            &changed)
                            self.tok_links[t] = self.new_link(
                                self.e_val[e_next], il, self.olabel[a], g, ac,
                                self.tok_links[t])
                    a += 1
            e_tail = self.e_tail[e]
            self.delete_elem(e)
            e = e_tail
        return next_cutoff

    cdef void process_nonemitting(self, float cutoff):
        cdef int frame = <int>self.frame_head.size() - 2
        cdef int e = self.list_head, t, state, e_new, il
        cdef float cur, g, tot
        cdef long long a, a_end
        cdef bint changed
        if e == NONE and not self.warned:
            self.warned = True
            self.warnings.append("Error, no surviving tokens: frame is %d" % frame)
        self.queue.clear()
        while e != NONE:
            if self.neps[self.e_key[e]] != 0:
                self.queue.push_back(e)
            e = self.e_tail[e]
        while not self.queue.empty():
            e = self.queue.back()
            self.queue.pop_back()
            state = self.e_key[e]
            t = self.e_val[e]
            cur = self.tok_tot[t]
            if cur >= cutoff:
                continue
            self.delete_links(t)
            a_end = self.arc_begin[state + 1]
            a = self.arc_begin[state]
            while a < a_end:
                if self.ilabel[a] == 0:
                    g = self.weight[a]
                    tot = cur + g
                    if tot < cutoff:
                        e_new = self.find_or_add_token(self.nextstate[a], frame + 1, tot,
                                                       &changed)
                        self.tok_links[t] = self.new_link(self.e_val[e_new], 0, self.olabel[a],
                                                          g, 0, self.tok_links[t])
                        if changed and self.neps[self.nextstate[a]] != 0:
                            self.queue.push_back(e_new)
                a += 1

    # -- pruning ------------------------------------------------------------------------
    cdef float prune_links_of(self, int t, bint *pruned):
        cdef float tok_extra = INFINITY, link_extra, zero = 0
        cdef int k = self.tok_links[t], prev = NONE, nxt, nt
        cdef float tt = self.tok_tot[t], x
        while k != NONE:
            nt = self.l_next_tok[k]
            x = tt + self.l_ac[k]
            x = x + self.l_graph[k]
            x = x - self.tok_tot[nt]
            link_extra = self.tok_extra[nt] + x
            if link_extra > self.lattice_beam:
                nxt = self.l_next[k]
                if prev != NONE:
                    self.l_next[prev] = nxt
                else:
                    self.tok_links[t] = nxt
                self.l_free.push_back(k)
                k = nxt
                pruned[0] = True
            else:
                if link_extra < zero:
                    link_extra = zero
                if link_extra < tok_extra:
                    tok_extra = link_extra
                prev = k
                k = self.l_next[k]
        return tok_extra

    cdef void prune_forward_links(self, int fpo, bint *extra_changed, bint *links_pruned,
                                  float delta):
        extra_changed[0] = False
        links_pruned[0] = False
        if self.frame_head[fpo] == NONE and not self.warned:
            self.warned = True
            self.warnings.append("No tokens alive [doing pruning].. warning first time "
                                 "only for each utterance")
        cdef bint changed = True
        cdef int t
        cdef float tok_extra
        while changed:
            changed = False
            t = self.frame_head[fpo]
            while t != NONE:
                tok_extra = self.prune_links_of(t, links_pruned)
                if fabsf(tok_extra - self.tok_extra[t]) > delta:
                    changed = True
                self.tok_extra[t] = tok_extra
                t = self.tok_next[t]
            if changed:
                extra_changed[0] = True

    cdef void compute_final_costs(self, bint store):
        cdef float best_cost = INFINITY, best_with_final = INFINITY, fc, cost, cwf
        cdef int e = self.list_head, t
        while e != NONE:
            t = self.e_val[e]
            fc = self.final[self.e_key[e]]
            cost = self.tok_tot[t]
            cwf = cost + fc
            if cost < best_cost:
                best_cost = cost
            if cwf < best_with_final:
                best_with_final = cwf
            if store and fc != INFINITY:
                self.tok_final[t] = fc
                self.has_final = True
            e = self.e_tail[e]
        if best_cost == INFINITY and best_with_final == INFINITY:
            self.final_relative_cost = INFINITY
        else:
            self.final_relative_cost = best_with_final - best_cost
        self.final_best_cost = best_with_final if best_with_final != INFINITY else best_cost

    cdef void prune_forward_links_final(self):
        cdef int fpo = <int>self.frame_head.size() - 1
        if self.frame_head[fpo] == NONE:
            self.warnings.append("No tokens alive at end of file")
        self.compute_final_costs(True)
        self.decoding_finalized = True
        cdef int e = self.clear_hash(), nxt
        while e != NONE:
            nxt = self.e_tail[e]
            self.delete_elem(e)
            e = nxt
        cdef bint changed = True, pruned
        cdef int t
        cdef float final_cost, tok_extra, links_extra
        while changed:
            changed = False
            t = self.frame_head[fpo]
            while t != NONE:
                final_cost = self.tok_final[t] if self.has_final else 0
                tok_extra = self.tok_tot[t] + final_cost
                tok_extra = tok_extra - self.final_best_cost
                links_extra = self.prune_links_of(t, &pruned)
                if links_extra < tok_extra:
                    tok_extra = links_extra
                if tok_extra > self.lattice_beam:
                    tok_extra = INFINITY
                if not _approx_equal(self.tok_extra[t], tok_extra):
                    changed = True
                self.tok_extra[t] = tok_extra
                t = self.tok_next[t]

    cdef void prune_tokens_for_frame(self, int fpo):
        cdef int t = self.frame_head[fpo], prev = NONE, nxt
        if t == NONE:
            self.warnings.append("No tokens alive [doing pruning]")
        while t != NONE:
            nxt = self.tok_next[t]
            if self.tok_extra[t] == INFINITY:
                if prev != NONE:
                    self.tok_next[prev] = nxt
                else:
                    self.frame_head[fpo] = nxt
                self.delete_links(t)
                self.tok_free.push_back(t)
            else:
                prev = t
            t = nxt

    cdef void prune_active_tokens(self, float delta):
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

    cdef void finalize_decoding(self):
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

    def token_lattice_arrays(self):
        """(frame_begin, link_begin, next_tok, ilabel, olabel, graph_cost,
        acoustic_cost, cost_offsets, final_cost, has_final), tokens numbered
        frame by frame in list order, links in list order."""
        cdef int nframes = <int>self.frame_head.size(), f, t, k, n = 0, nl = 0
        cdef vector[int] order
        cdef cnp.ndarray[cnp.int32_t] index = np.full(self.tok_tot.size(), -1, dtype=np.int32)
        frame_begin = np.zeros(nframes + 1, dtype=np.int64)
        for f in range(nframes):
            t = self.frame_head[f]
            while t != NONE:
                index[t] = n
                order.push_back(t)
                n += 1
                k = self.tok_links[t]
                while k != NONE:
                    nl += 1
                    k = self.l_next[k]
                t = self.tok_next[t]
            frame_begin[f + 1] = n
        cdef cnp.ndarray[cnp.int64_t] link_begin = np.zeros(n + 1, dtype=np.int64)
        cdef cnp.ndarray[cnp.int32_t] next_tok = np.empty(nl, dtype=np.int32)
        cdef cnp.ndarray[cnp.int32_t] il = np.empty(nl, dtype=np.int32)
        cdef cnp.ndarray[cnp.int32_t] ol = np.empty(nl, dtype=np.int32)
        cdef cnp.ndarray[cnp.float32_t] gc = np.empty(nl, dtype=np.float32)
        cdef cnp.ndarray[cnp.float32_t] ac = np.empty(nl, dtype=np.float32)
        cdef cnp.ndarray[cnp.float32_t] fc = np.empty(n, dtype=np.float32)
        cdef int i, j = 0
        for i in range(n):
            t = order[i]
            fc[i] = self.tok_final[t]
            k = self.tok_links[t]
            while k != NONE:
                next_tok[j] = index[self.l_next_tok[k]]
                il[j] = self.l_ilabel[k]
                ol[j] = self.l_olabel[k]
                gc[j] = self.l_graph[k]
                ac[j] = self.l_ac[k]
                j += 1
                k = self.l_next[k]
            link_begin[i + 1] = j
        offsets = np.array([self.cost_offsets[i] for i in range(self.cost_offsets.size())],
                           dtype=np.float32)
        return (frame_begin, link_begin, next_tok, il, ol, gc, ac, offsets, fc,
                bool(self.has_final))


cdef inline bint _approx_equal(float a, float b):
    if a == b:
        return True
    cdef float diff = fabsf(a - b)
    cdef float tol = 1.0e-05
    if diff == INFINITY or diff != diff:
        return False
    return diff <= tol * (fabsf(a) + fabsf(b))
