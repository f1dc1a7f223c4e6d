"""What a finished LatticeFasterDecoder leaves behind, and Kaldi's ways of
reading it: the raw state-level lattice (GetRawLattice, with TopSortTokens'
numbering) and the best path (GetBestPath: ShortestPath over that lattice).

Both decoders (the Cython one and its plain-Python twin) export the same
:class:`TokenLattice`, so everything after the search is shared.
:func:`get_raw_lattice` and :func:`best_path` are the plain-Python twins of
the C kernels in pynnet3/_fast/token_lattice_kernel.pyx, which
:func:`raw_lattice_and_best_path` uses when they are loaded (the one
``pynnet3._fast.load`` policy).
"""

from dataclasses import dataclass

import numpy as np

from .. import _fast
from ..common.floats import f32 as _f32
from ..errors import PynnetError
from .determinize_lattice import clattice_from_arrays
from .lattice import Lattice

__all__ = ["TokenLattice", "get_raw_lattice", "best_path", "BestPath",
           "raw_lattice_and_best_path"]

_kernel = _fast.load("token_lattice_kernel")

_F = np.float32
_INF = float("inf")


@dataclass(slots=True)
class TokenLattice:
    """Surviving tokens per frame (frame f: tokens ``frame_begin[f]:
    frame_begin[f+1]``, in the decoder's list order, newest first) and their
    forward links (token t: links ``link_begin[t]:link_begin[t+1]``, newest
    first, as Kaldi keeps them). ``acoustic_cost`` is relative to the frame's
    ``cost_offsets`` entry; ``final_cost`` is per token (+inf: not final);
    ``has_final`` is False when no token reached a final state (then every
    last-frame token counts as final with cost 0, as Kaldi does)."""

    frame_begin: np.ndarray
    link_begin: np.ndarray
    next_tok: np.ndarray
    ilabel: np.ndarray
    olabel: np.ndarray
    graph_cost: np.ndarray
    acoustic_cost: np.ndarray
    cost_offsets: np.ndarray
    final_cost: np.ndarray
    has_final: bool

    @property
    def num_frames(self):
        return len(self.frame_begin) - 2

    def frame_of(self):
        """The frame of every token."""
        return np.repeat(np.arange(len(self.frame_begin) - 1), np.diff(self.frame_begin))


def _top_sort_frame(tl, begin, end):
    """Kaldi's TopSortTokens for the tokens begin..end-1 of one frame: list
    position i gets number (n-1-i) (oldest first), then a token reached by an
    epsilon link from a token numbered after it is renumbered past all others,
    repeatedly. Returns the tokens in their final order."""
    n = end - begin
    pos = {begin + i: n - 1 - i for i in range(n)}
    cur_pos = n
    link_begin, next_tok, ilabel = tl.link_begin, tl.next_tok, tl.ilabel

    def relax(tok):
        nonlocal cur_pos
        moved = []
        p = pos[tok]
        for k in range(link_begin[tok], link_begin[tok + 1]):
            if ilabel[k] == 0:
                nt = int(next_tok[k])
                q = pos.get(nt)
                if q is not None and q < p:
                    pos[nt] = cur_pos
                    cur_pos += 1
                    moved.append(nt)
        return moved

    reprocess = []
    for tok in range(end - 1, begin - 1, -1):
        reprocess.extend(relax(tok))
    loops = 0
    while reprocess:
        loops += 1
        if loops > 1000000:
            raise PynnetError("Epsilon loops exist in your decoding graph (this is not allowed!)")
        todo, reprocess = list(dict.fromkeys(reprocess)), []
        for tok in todo:
            reprocess.extend(relax(tok))
    return sorted(pos, key=pos.__getitem__)


def get_raw_lattice(tl):
    """Kaldi's GetRawLattice (use_final_probs=true, after FinalizeDecoding):
    one state per surviving token, numbered frame by frame in TopSortTokens
    order; arcs in link order with weight (graph cost, acoustic cost minus the
    frame's cost offset); final weights on the last frame."""
    num_tokens = int(tl.frame_begin[-1])
    state_of = np.full(num_tokens, -1, dtype=np.int64)
    nframes = len(tl.frame_begin) - 1
    next_state = 0
    for f in range(nframes):
        for tok in _top_sort_frame(tl, int(tl.frame_begin[f]), int(tl.frame_begin[f + 1])):
            state_of[tok] = next_state
            next_state += 1
    lat = Lattice()
    lat.add_states(next_state)
    if next_state:
        lat.start = 0
    frame_of = tl.frame_of()
    offsets = tl.cost_offsets
    last_begin = int(tl.frame_begin[nframes - 1])
    for tok in range(num_tokens):
        s = int(state_of[tok])
        f = int(frame_of[tok])
        arcs = lat.arcs[s]
        for k in range(tl.link_begin[tok], tl.link_begin[tok + 1]):
            il = int(tl.ilabel[k])
            ac = tl.acoustic_cost[k]
            if il != 0:
                ac = _F(ac - offsets[f])
            arcs.append((il, int(tl.olabel[k]), float(tl.graph_cost[k]), float(ac),
                         int(state_of[tl.next_tok[k]])))
        if tok >= last_begin:
            if tl.has_final:
                if tl.final_cost[tok] != _INF:
                    lat.final[s] = (float(tl.final_cost[tok]), 0.0)
            else:
                lat.final[s] = (0.0, 0.0)
    return lat


@dataclass(slots=True)
class BestPath:
    """The best path's transition-ids (alignment), words and total weight
    (graph cost, acoustic cost), as GetLinearSymbolSequence gives them."""

    alignment: list
    words: list
    weight: tuple

    @property
    def likelihood(self):
        return -float(_F(_F(self.weight[0]) + _F(self.weight[1])))


def _better(a1, a2, b1, b2):
    """True when weight (b1, b2) is strictly better than (a1, a2) in Kaldi's
    LatticeWeight order (total cost, then graph cost)."""
    fa, fb = _f32(a1 + a2), _f32(b1 + b2)
    if fb != fa:
        return fb < fa
    return b1 < a1


def best_path(lat):
    """Kaldi's ShortestPath over a raw lattice whose states are numbered in
    topological order (as get_raw_lattice's are); None if no final state is
    reachable."""
    n = lat.num_states
    if n == 0 or lat.start is None:
        return None
    d1 = [_INF] * n
    d2 = [_INF] * n
    back = [None] * n
    d1[lat.start] = d2[lat.start] = 0.0
    best = None
    b1 = b2 = _INF
    for s in range(n):
        if d1[s] == _INF:
            continue
        for arc in lat.arcs[s]:
            il, ol, w1, w2, t = arc
            n1, n2 = _f32(d1[s] + w1), _f32(d2[s] + w2)
            if d1[t] == _INF or _better(d1[t], d2[t], n1, n2):
                d1[t], d2[t], back[t] = n1, n2, (s, arc)
        fw = lat.final[s]
        if fw is not None:
            f1, f2 = _f32(d1[s] + fw[0]), _f32(d2[s] + fw[1])
            if best is None or _better(b1, b2, f1, f2):
                best, b1, b2 = s, f1, f2
    if best is None:
        return None
    path = []
    s = best
    while back[s] is not None:
        s, arc = back[s]
        path.append(arc)
    path.reverse()
    alignment, words = [], []
    w1, w2 = _F(0), _F(0)
    for il, ol, a1, a2, _ in path:
        if il:
            alignment.append(il)
        if ol:
            words.append(ol)
        w1, w2 = _F(w1 + _F(a1)), _F(w2 + _F(a2))
    fw = lat.final[best]
    w1, w2 = _F(w1 + _F(fw[0])), _F(w2 + _F(fw[1]))
    return BestPath(alignment, words, (float(w1), float(w2)))


def raw_lattice_and_best_path(tl, use_kernel=True):
    """The raw lattice of a :class:`TokenLattice` and its best path
    (:class:`BestPath`, or None when no final state is reachable), as
    :func:`get_raw_lattice` and :func:`best_path` give them. With the C
    kernels (``use_kernel`` and both this module's and determinization's
    kernels loaded; the GIL is released while they run) the lattice is a
    CLattice (what determinization takes; ``to_lattice()`` gives a
    :class:`Lattice`), with the twins a :class:`Lattice`."""
    if not use_kernel or _kernel is None or clattice_from_arrays is None:
        lat = get_raw_lattice(tl)
        return lat, best_path(lat)
    arrays = _kernel.raw_lattice_arrays(tl)
    found = _kernel.best_path_arrays(*arrays)
    path = None
    if found is not None:
        alignment, words, weight = found
        path = BestPath(alignment.tolist(), words.tolist(), weight)
    return clattice_from_arrays(*arrays), path
