# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: language = c++
"""Kaldi's GetRawLattice and GetBestPath over a finished decoder's tokens, in
C (twins: :func:`pynnet3.decode.token_lattice.get_raw_lattice` and
:func:`pynnet3.decode.token_lattice.best_path`, which document the
algorithms; the tests compare the two).

:func:`raw_lattice_arrays` numbers the states as Kaldi's TopSortTokens does
(per frame, list order reversed, then tokens reached by an epsilon link from
a later-numbered token moved past all others, repeatedly) and returns the
raw lattice as flat arrays (CSR by state); :func:`best_path_arrays` runs
Kaldi's ShortestPath over them (states in topological order, weights
compared as LatticeWeight: total cost, then graph cost, float32 sums).
Both do their work without the GIL (only the output arrays are made with
it), so several utterances can be processed at once by threads.
"""

import numpy as np
cimport numpy as cnp
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t
from libcpp.vector cimport vector

from ..errors import PynnetError

cnp.import_array()

cdef enum:
    MAX_TOP_SORT_LOOPS = 1000000


cdef inline const int64_t *i64(cnp.ndarray a) noexcept:
    return <const int64_t *>cnp.PyArray_DATA(a)


cdef inline const int32_t *i32(cnp.ndarray a) noexcept:
    return <const int32_t *>cnp.PyArray_DATA(a)


cdef inline const float *f32(cnp.ndarray a) noexcept:
    return <const float *>cnp.PyArray_DATA(a)


cdef cnp.ndarray _contiguous(x, dtype):
    return np.ascontiguousarray(x, dtype=dtype)


cdef bint top_sort_frame(int64_t begin, int64_t end, const int64_t *link_begin,
                         const int32_t *next_tok, const int32_t *ilabel,
                         int64_t *state_of, int64_t first_state,
                         vector[int64_t] &pos, vector[int64_t] &moved,
                         vector[int64_t] &todo, vector[int64_t] &stamp,
                         vector[int64_t] &slots) noexcept nogil:
    """TopSortTokens for tokens begin..end-1 (one frame): writes their state
    numbers (first_state + rank). False when the epsilon loops do not end."""
    cdef int64_t n = end - begin, i, tok, nt, cur_pos = n, p, k, loops = 0, generation = 0
    pos.resize(n)
    stamp.assign(n, -1)
    for i in range(n):
        pos[i] = n - 1 - i
    moved.clear()
    # first pass: every token, oldest (position 0) first
    for tok in range(end - 1, begin - 1, -1):
        p = pos[tok - begin]
        for k in range(link_begin[tok], link_begin[tok + 1]):
            if ilabel[k] == 0:
                nt = next_tok[k]
                if begin <= nt < end and pos[nt - begin] < p:
                    pos[nt - begin] = cur_pos
                    cur_pos += 1
                    moved.push_back(nt)
    while not moved.empty():
        loops += 1
        if loops > MAX_TOP_SORT_LOOPS:
            return False
        # the moved tokens, each once, in order of first appearance
        generation += 1
        todo.clear()
        for i in range(<int64_t>moved.size()):
            tok = moved[i]
            if stamp[tok - begin] != generation:
                stamp[tok - begin] = generation
                todo.push_back(tok)
        moved.clear()
        for i in range(<int64_t>todo.size()):
            tok = todo[i]
            p = pos[tok - begin]
            for k in range(link_begin[tok], link_begin[tok + 1]):
                if ilabel[k] == 0:
                    nt = next_tok[k]
                    if begin <= nt < end and pos[nt - begin] < p:
                        pos[nt - begin] = cur_pos
                        cur_pos += 1
                        moved.push_back(nt)
    # rank by position (positions are distinct)
    slots.assign(cur_pos, -1)
    for i in range(n):
        slots[pos[i]] = begin + i
    k = first_state
    for i in range(cur_pos):
        if slots[i] >= 0:
            state_of[slots[i]] = k
            k += 1
    return True


def raw_lattice_arrays(tl):
    """The raw lattice of a :class:`TokenLattice` as (start, arc_begin,
    ilabel, olabel, graph_cost, acoustic_cost, nextstate, final_graph,
    final_acoustic): states numbered as Kaldi's GetRawLattice, arcs of a
    state in its token's link order, acoustic costs of emitting arcs minus
    the frame's cost offset, final weights (final cost, 0) on the last
    frame's tokens ((0, 0) for all of them when no token reached a final
    state), (+inf, +inf) where not final; start -1 when there are no
    states."""
    cdef cnp.ndarray frame_begin = _contiguous(tl.frame_begin, np.int64)
    cdef cnp.ndarray link_begin = _contiguous(tl.link_begin, np.int64)
    cdef cnp.ndarray next_tok = _contiguous(tl.next_tok, np.int32)
    cdef cnp.ndarray ilabel = _contiguous(tl.ilabel, np.int32)
    cdef cnp.ndarray olabel = _contiguous(tl.olabel, np.int32)
    cdef cnp.ndarray graph_cost = _contiguous(tl.graph_cost, np.float32)
    cdef cnp.ndarray acoustic_cost = _contiguous(tl.acoustic_cost, np.float32)
    cdef cnp.ndarray offsets = _contiguous(tl.cost_offsets, np.float32)
    cdef cnp.ndarray final_cost = _contiguous(tl.final_cost, np.float32)
    cdef bint has_final = bool(tl.has_final)
    cdef int64_t nframes = frame_begin.shape[0] - 1
    cdef int64_t num_tokens = i64(frame_begin)[nframes] if nframes >= 0 else 0
    cdef int64_t num_links = i64(link_begin)[num_tokens]
    cdef cnp.ndarray state_of = np.empty(num_tokens, dtype=np.int64)
    cdef cnp.ndarray arc_begin = np.zeros(num_tokens + 1, dtype=np.int64)
    cdef cnp.ndarray o_il = np.empty(num_links, dtype=np.int32)
    cdef cnp.ndarray o_ol = np.empty(num_links, dtype=np.int32)
    cdef cnp.ndarray o_gc = np.empty(num_links, dtype=np.float32)
    cdef cnp.ndarray o_ac = np.empty(num_links, dtype=np.float32)
    cdef cnp.ndarray o_next = np.empty(num_links, dtype=np.int32)
    cdef cnp.ndarray o_f1 = np.empty(num_tokens, dtype=np.float32)
    cdef cnp.ndarray o_f2 = np.empty(num_tokens, dtype=np.float32)
    cdef const int64_t *fb = i64(frame_begin)
    cdef const int64_t *lb = i64(link_begin)
    cdef const int32_t *nt = i32(next_tok)
    cdef const int32_t *il = i32(ilabel)
    cdef const int32_t *ol = i32(olabel)
    cdef const float *gc = f32(graph_cost)
    cdef const float *ac = f32(acoustic_cost)
    cdef const float *off = f32(offsets)
    cdef const float *fc = f32(final_cost)
    cdef int64_t *so = <int64_t *>cnp.PyArray_DATA(state_of)
    cdef int64_t *ab = <int64_t *>cnp.PyArray_DATA(arc_begin)
    cdef int32_t *pil = <int32_t *>cnp.PyArray_DATA(o_il)
    cdef int32_t *pol = <int32_t *>cnp.PyArray_DATA(o_ol)
    cdef float *pgc = <float *>cnp.PyArray_DATA(o_gc)
    cdef float *pac = <float *>cnp.PyArray_DATA(o_ac)
    cdef int32_t *pnext = <int32_t *>cnp.PyArray_DATA(o_next)
    cdef float *pf1 = <float *>cnp.PyArray_DATA(o_f1)
    cdef float *pf2 = <float *>cnp.PyArray_DATA(o_f2)
    cdef vector[int64_t] pos, moved, todo, stamp, slots
    cdef int64_t f, tok, s, k, j, last_begin
    cdef bint ok = True
    cdef float a
    with nogil:
        for f in range(nframes):
            if not top_sort_frame(fb[f], fb[f + 1], lb, nt, il, so, fb[f], pos, moved, todo,
                                  stamp, slots):
                ok = False
                break
        if ok:
            # arcs grouped by state: counts, then offsets, then the arcs
            for tok in range(num_tokens):
                ab[so[tok] + 1] = lb[tok + 1] - lb[tok]
            for s in range(num_tokens):
                ab[s + 1] += ab[s]
            last_begin = fb[nframes - 1] if nframes > 0 else 0
            f = 0
            for tok in range(num_tokens):
                while tok >= fb[f + 1]:
                    f += 1
                s = so[tok]
                j = ab[s]
                for k in range(lb[tok], lb[tok + 1]):
                    pil[j] = il[k]
                    pol[j] = ol[k]
                    pgc[j] = gc[k]
                    a = ac[k]
                    if il[k] != 0:
                        a = a - off[f]
                    pac[j] = a
                    pnext[j] = <int32_t>so[nt[k]]
                    j += 1
                pf1[s] = INFINITY
                pf2[s] = INFINITY
                if tok >= last_begin:
                    if has_final:
                        if fc[tok] != INFINITY:
                            pf1[s] = fc[tok]
                            pf2[s] = 0
                    else:
                        pf1[s] = 0
                        pf2[s] = 0
    if not ok:
        raise PynnetError("Epsilon loops exist in your decoding graph (this is not allowed!)")
    return (0 if num_tokens else -1, arc_begin, o_il, o_ol, o_gc, o_ac, o_next, o_f1, o_f2)


cdef inline bint better(float a1, float a2, float b1, float b2) noexcept nogil:
    """(b1, b2) strictly better than (a1, a2) as LatticeWeights."""
    cdef float fa = a1 + a2, fb = b1 + b2
    if fb != fa:
        return fb < fa
    return b1 < a1


def best_path_arrays(int64_t start, arc_begin, ilabel, olabel, graph_cost, acoustic_cost,
                     nextstate, final_graph, final_acoustic):
    """Kaldi's ShortestPath over a raw lattice in :func:`raw_lattice_arrays`'
    form (states in topological order): (alignment, words, (graph cost,
    acoustic cost)) of the best path, alignment and words as int32 arrays,
    or None when no final state is reachable."""
    cdef cnp.ndarray c_ab = _contiguous(arc_begin, np.int64)
    cdef cnp.ndarray c_il = _contiguous(ilabel, np.int32)
    cdef cnp.ndarray c_ol = _contiguous(olabel, np.int32)
    cdef cnp.ndarray c_gc = _contiguous(graph_cost, np.float32)
    cdef cnp.ndarray c_ac = _contiguous(acoustic_cost, np.float32)
    cdef cnp.ndarray c_next = _contiguous(nextstate, np.int32)
    cdef cnp.ndarray c_f1 = _contiguous(final_graph, np.float32)
    cdef cnp.ndarray c_f2 = _contiguous(final_acoustic, np.float32)
    cdef int64_t n = c_ab.shape[0] - 1
    if n <= 0 or start < 0:
        return None
    cdef const int64_t *ab = i64(c_ab)
    cdef const int32_t *il = i32(c_il)
    cdef const int32_t *ol = i32(c_ol)
    cdef const float *gc = f32(c_gc)
    cdef const float *ac = f32(c_ac)
    cdef const int32_t *nxt = i32(c_next)
    cdef const float *f1 = f32(c_f1)
    cdef const float *f2 = f32(c_f2)
    cdef vector[float] d1 = vector[float](n, INFINITY), d2 = vector[float](n, INFINITY)
    cdef vector[int64_t] back = vector[int64_t](n, -1)      # best arc into the state
    cdef vector[int64_t] back_state = vector[int64_t](n, -1)
    cdef vector[int64_t] path
    cdef vector[int32_t] alignment, words
    cdef int64_t s, k, t, best = -1
    cdef float b1 = INFINITY, b2 = INFINITY, n1, n2, w1 = 0, w2 = 0
    with nogil:
        d1[start] = 0
        d2[start] = 0
        for s in range(n):
            if d1[s] == INFINITY:
                continue
            for k in range(ab[s], ab[s + 1]):
                t = nxt[k]
                n1 = d1[s] + gc[k]
                n2 = d2[s] + ac[k]
                if d1[t] == INFINITY or better(d1[t], d2[t], n1, n2):
                    d1[t] = n1
                    d2[t] = n2
                    back[t] = k
                    back_state[t] = s
            if not (f1[s] == INFINITY and f2[s] == INFINITY):
                n1 = d1[s] + f1[s]
                n2 = d2[s] + f2[s]
                if best < 0 or better(b1, b2, n1, n2):
                    best = s
                    b1 = n1
                    b2 = n2
        if best >= 0:
            s = best
            while back[s] >= 0:
                path.push_back(back[s])
                s = back_state[s]
            for t in range(<int64_t>path.size() - 1, -1, -1):
                k = path[t]
                if il[k] != 0:
                    alignment.push_back(il[k])
                if ol[k] != 0:
                    words.push_back(ol[k])
                w1 = w1 + gc[k]
                w2 = w2 + ac[k]
            w1 = w1 + f1[best]
            w2 = w2 + f2[best]
    if best < 0:
        return None
    ali = np.empty(alignment.size(), dtype=np.int32)
    wrd = np.empty(words.size(), dtype=np.int32)
    for k in range(<int64_t>alignment.size()):
        ali[k] = alignment[k]
    for k in range(<int64_t>words.size()):
        wrd[k] = words[k]
    return ali, wrd, (float(w1), float(w2))
