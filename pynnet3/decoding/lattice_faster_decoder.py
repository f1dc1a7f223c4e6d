"""Kaldi's LatticeFasterDecoder: :func:`make_decoder` gives the kernel's
(``pynnet3/_fast/lattice_faster_decoder_kernel.pyx``, :class:`LatticeFasterDecoder`)
when it is loaded, else :class:`LatticeFasterDecoderPy`, the plain-Python twin
below: the readable specification, which the tests cross-check the kernel
against on small graphs (too slow for real graphs).

The algorithm (Kaldi's decoder/lattice-faster-decoder.cc): token passing
over the graph, one token per (frame, graph state), each holding the best
cost so far and forward links to the tokens it reached on the next frame
(emitting arcs) or the same frame (epsilon arcs). Per frame, the tokens of the
previous frame are expanded if within the cutoff (best + beam, tightened by
max-active and loosened by min-active through ``beam_delta``); the next
frame's cutoff is estimated from the best token's arcs and tightened while
expanding. Every ``prune_interval`` frames, forward links whose "extra cost"
(how much worse than the best path through them) exceeds ``lattice_beam`` are
removed and tokens left without links dropped; at the end the final costs
take part (FinalizeDecoding).

Guarantees: every arithmetic step is done in float32 in Kaldi's order, and the
active-token list is kept in the order of Kaldi's HashList (buckets in the
order they were first used, keys within a bucket in insertion order), so the
surviving tokens, their links and their order are Kaldi's; this makes the best
path (words, alignment) and the raw lattice those of Kaldi for the same
acoustic scores.
"""

import numpy as np

from .. import _fast
from .config import LatticeFasterDecoderConfig
from .token_lattice import TokenLattice

__all__ = ["LatticeFasterDecoder", "LatticeFasterDecoderPy", "make_decoder"]

# The search's kernel when it is loaded (the one pynnet3._fast.load policy).
_kernel = _fast.load("lattice_faster_decoder_kernel")


def make_decoder(fst, config=None, use_kernel=True):
    """A LatticeFasterDecoder over ``fst``: the kernel's when it is loaded
    (and ``use_kernel``), else the twin. Both give the same results."""
    if use_kernel and _kernel is not None:
        return LatticeFasterDecoder(fst, config)
    return LatticeFasterDecoderPy(fst, config)


class LatticeFasterDecoder:
    """The kernel's search with the twin's interface (see the module
    docstring for the algorithm): ``decode(loglikes, tid_to_pdf)`` then
    :meth:`token_lattice`, :meth:`reached_final`, ``warnings``."""

    def __init__(self, fst, config=None):
        self.fst = fst
        self.config = config if config is not None else LatticeFasterDecoderConfig()
        self.config.check()
        self._core = _kernel.LatticeFasterDecoderCore(fst, self.config)

    def renew(self):
        """Makes this decoder behave as a new one over the same graph and
        options, keeping its memory. A decoder kept from one utterance to
        the next (as nnet3-latgen-faster keeps it) keeps its hash table at
        the largest size it needed; that size decides the order in which
        tokens of equal cost meet, and so, rarely, the words. After
        ``renew`` the next :meth:`decode` gives exactly what a new decoder
        gives (nnet3-latgen-faster-parallel's output must not depend on
        which utterances a thread decoded before)."""
        self._core.renew()

    def decode(self, loglikes, tid_to_pdf):
        return self._core.decode(np.ascontiguousarray(loglikes, dtype=np.float32),
                                 np.ascontiguousarray(tid_to_pdf, dtype=np.int32))

    @property
    def warnings(self):
        return self._core.warnings

    def reached_final(self):
        return self._core.reached_final()

    def token_lattice(self):
        return TokenLattice(*self._core.token_lattice_arrays())

_F = np.float32
_INF = np.float32(np.inf)


class _Token:
    __slots__ = ("tot_cost", "extra_cost", "links", "next")

    def __init__(self, tot_cost, extra_cost, links, next_tok):
        self.tot_cost = tot_cost
        self.extra_cost = extra_cost
        self.links = links
        self.next = next_tok


class _Link:
    __slots__ = ("next_tok", "ilabel", "olabel", "graph_cost", "acoustic_cost", "next")

    def __init__(self, next_tok, ilabel, olabel, graph_cost, acoustic_cost, next_link):
        self.next_tok = next_tok
        self.ilabel = ilabel
        self.olabel = olabel
        self.graph_cost = graph_cost
        self.acoustic_cost = acoustic_cost
        self.next = next_link


class _HashList:
    """The active tokens of the frame being built: state -> token, iterated in
    Kaldi's HashList order (see the module docstring)."""

    def __init__(self, size):
        self.size = size
        self.tokens = {}
        self.buckets = {}          # bucket -> list of states, in insertion order

    def clear(self):
        """Returns the (state, token) list in order and empties the table."""
        items = [(s, self.tokens[s]) for states in self.buckets.values() for s in states]
        self.tokens = {}
        self.buckets = {}
        return items

    def items(self):
        return [(s, self.tokens[s]) for states in self.buckets.values() for s in states]

    def find(self, state):
        return self.tokens.get(state)

    def insert(self, state, tok):
        self.tokens[state] = tok
        self.buckets.setdefault(state % self.size, []).append(state)


def _approx_equal(a, b, tol=_F(1.0e-05)):
    if a == b:
        return True
    diff = abs(a - b)
    if np.isinf(diff) or diff != diff:
        return False
    return diff <= tol * (abs(a) + abs(b))


class LatticeFasterDecoderPy:
    """Kaldi's LatticeFasterDecoder over a :class:`StdFst`. ``decode``
    takes a (num_frames x num_pdfs) float32 matrix of scaled log-likelihoods
    and ``tid_to_pdf`` (int array indexed by transition-id), and leaves the
    result in :meth:`token_lattice`."""

    def __init__(self, fst, config=None):
        self.fst = fst
        self.config = config if config is not None else LatticeFasterDecoderConfig()
        self.config.check()
        self._arcs = [fst.arcs(s) for s in range(fst.num_states)]
        self._neps = fst.num_input_epsilons()
        self._final = fst.final
        self.renew()

    def renew(self):
        """See :meth:`LatticeFasterDecoder.renew`."""
        # Kaldi's decoder keeps its hash size (it only grows) across utterances,
        # and the size decides the order of the token list; a new one starts here.
        self._hash_size = 1000

    # -- Kaldi's Decode ---------------------------------------------------------------------
    def decode(self, loglikes, tid_to_pdf):
        self._loglikes = np.asarray(loglikes, dtype=np.float32)
        self._tid_to_pdf = np.asarray(tid_to_pdf)
        self.init_decoding()
        self.advance_decoding()
        self.finalize_decoding()
        return bool(self.active_toks) and self.active_toks[-1] is not None

    def init_decoding(self):
        if self.fst.start < 0:
            raise ValueError("the decoding graph has no start state")
        c = self.config
        self.beam, self.lattice_beam = _F(c.beam), _F(c.lattice_beam)
        self.beam_delta = _F(c.beam_delta)
        self.toks = _HashList(self._hash_size)
        self.cost_offsets = []
        self._warnings = []
        self.warned = False
        self.decoding_finalized = False
        self.final_costs = {}
        self.num_toks = 0
        start_tok = _Token(_F(0), _F(0), None, None)
        self.active_toks = [start_tok]
        self.must_prune_forward_links = [True]
        self.must_prune_tokens = [True]
        self.toks.insert(self.fst.start, start_tok)
        self.num_toks = 1
        self.process_nonemitting(self.beam)

    def num_frames_decoded(self):
        return len(self.active_toks) - 1

    def advance_decoding(self):
        num_frames = self._loglikes.shape[0]
        delta = _F(_F(self.config.lattice_beam) * _F(self.config.prune_scale))
        while self.num_frames_decoded() < num_frames:
            if self.num_frames_decoded() % self.config.prune_interval == 0:
                self.prune_active_tokens(delta)
            cost_cutoff = self.process_emitting()
            self.process_nonemitting(cost_cutoff)

    def finalize_decoding(self):
        final_frame_plus_one = self.num_frames_decoded()
        self.prune_forward_links_final()
        for f in range(final_frame_plus_one - 1, -1, -1):
            self.prune_forward_links(f, _F(0))
            self.prune_tokens_for_frame(f + 1)
        self.prune_tokens_for_frame(0)

    # -- tokens ----------------------------------------------------------------------------
    def find_or_add_token(self, state, frame_plus_one, tot_cost):
        """(token, changed)."""
        tok = self.toks.find(state)
        if tok is None:
            tok = _Token(tot_cost, _F(0), None, self.active_toks[frame_plus_one])
            self.active_toks[frame_plus_one] = tok
            self.num_toks += 1
            self.toks.insert(state, tok)
            return tok, True
        if tok.tot_cost > tot_cost:
            tok.tot_cost = tot_cost
            return tok, True
        return tok, False

    def get_cutoff(self, items):
        """(cutoff, adaptive_beam, best item or None)."""
        c = self.config
        best_weight, best = _INF, None
        costs = []
        for item in items:
            w = item[1].tot_cost
            costs.append(w)
            if w < best_weight:
                best_weight, best = w, item
        if c.max_active == 2**31 - 1 and c.min_active == 0:
            return _F(best_weight + self.beam), self.beam, best
        beam_cutoff = _F(best_weight + self.beam)
        min_active_cutoff = max_active_cutoff = _INF
        if len(costs) > c.max_active:
            max_active_cutoff = sorted(costs)[c.max_active]
        if max_active_cutoff < beam_cutoff:
            return max_active_cutoff, _F(_F(max_active_cutoff - best_weight)
                                         + self.beam_delta), best
        if len(costs) > c.min_active:
            if c.min_active == 0:
                min_active_cutoff = best_weight
            else:
                min_active_cutoff = sorted(costs)[c.min_active]
        if min_active_cutoff > beam_cutoff:
            return min_active_cutoff, _F(_F(min_active_cutoff - best_weight)
                                         + self.beam_delta), best
        return beam_cutoff, self.beam, best

    def process_emitting(self):
        frame = len(self.active_toks) - 1
        self.active_toks.append(None)
        self.must_prune_forward_links.append(True)
        self.must_prune_tokens.append(True)
        items = self.toks.clear()
        cur_cutoff, adaptive_beam, best = self.get_cutoff(items)
        new_size = int(np.float32(len(items)) * np.float32(self.config.hash_ratio))
        if new_size > self.toks.size:
            self.toks.size = self._hash_size = new_size
        loglikes = self._loglikes[frame]
        tid_to_pdf = self._tid_to_pdf
        next_cutoff = _INF
        cost_offset = _F(0)
        if best is not None:
            state, tok = best
            cost_offset = -tok.tot_cost
            for ilabel, _, w, _ in self._arcs[state]:
                if ilabel != 0:
                    new_weight = _F(_F(_F(_F(w) + cost_offset)
                                       - loglikes[tid_to_pdf[ilabel]]) + tok.tot_cost)
                    if _F(new_weight + adaptive_beam) < next_cutoff:
                        next_cutoff = _F(new_weight + adaptive_beam)
        self.cost_offsets.append(cost_offset)
        for state, tok in items:
            if tok.tot_cost <= cur_cutoff:
                for ilabel, olabel, w, nextstate in self._arcs[state]:
                    if ilabel == 0:
                        continue
                    ac_cost = _F(cost_offset - loglikes[tid_to_pdf[ilabel]])
                    graph_cost = _F(w)
                    tot_cost = _F(_F(tok.tot_cost + ac_cost) + graph_cost)
                    if tot_cost >= next_cutoff:
                        continue
                    if _F(tot_cost + adaptive_beam) < next_cutoff:
                        next_cutoff = _F(tot_cost + adaptive_beam)
                    next_tok, _ = self.find_or_add_token(nextstate, frame + 1, tot_cost)
                    tok.links = _Link(next_tok, ilabel, olabel, graph_cost, ac_cost, tok.links)
        return next_cutoff

    def process_nonemitting(self, cutoff):
        frame = len(self.active_toks) - 2
        items = self.toks.items()
        if not items and not self.warned:
            self.warned = True
            self.warnings.append("Error, no surviving tokens: frame is %d" % frame)
        neps = self._neps
        queue = [(s, t) for s, t in items if neps[s] != 0]
        while queue:
            state, tok = queue.pop()
            cur_cost = tok.tot_cost
            if cur_cost >= cutoff:
                continue
            tok.links = None
            for ilabel, olabel, w, nextstate in self._arcs[state]:
                if ilabel != 0:
                    continue
                graph_cost = _F(w)
                tot_cost = _F(cur_cost + graph_cost)
                if tot_cost < cutoff:
                    new_tok, changed = self.find_or_add_token(nextstate, frame + 1, tot_cost)
                    tok.links = _Link(new_tok, 0, olabel, graph_cost, _F(0), tok.links)
                    if changed and neps[nextstate] != 0:
                        queue.append((nextstate, new_tok))

    # -- pruning ---------------------------------------------------------------------------
    def _prune_links_of(self, tok):
        """Removes tok's links beyond the lattice beam; returns (min extra
        cost of the kept links, whether a link was removed)."""
        tok_extra_cost = _INF
        pruned = False
        kept = []
        link = tok.links
        while link is not None:
            nt = link.next_tok
            link_extra_cost = _F(nt.extra_cost + _F(
                _F(_F(tok.tot_cost + link.acoustic_cost) + link.graph_cost) - nt.tot_cost))
            if link_extra_cost > self.lattice_beam:
                pruned = True
            else:
                if link_extra_cost < 0:
                    link_extra_cost = _F(0)
                if link_extra_cost < tok_extra_cost:
                    tok_extra_cost = link_extra_cost
                kept.append(link)
            link = link.next
        if pruned:
            head = None
            for link in reversed(kept):
                link.next = head
                head = link
            tok.links = head
        return tok_extra_cost, pruned

    def prune_forward_links(self, frame_plus_one, delta):
        """(extra_costs_changed, links_pruned)."""
        if self.active_toks[frame_plus_one] is None and not self.warned:
            self.warned = True
            self.warnings.append("No tokens alive [doing pruning].. warning first time "
                                 "only for each utterance")
        extra_costs_changed = links_pruned = False
        changed = True
        while changed:
            changed = False
            tok = self.active_toks[frame_plus_one]
            while tok is not None:
                tok_extra_cost, pruned = self._prune_links_of(tok)
                links_pruned = links_pruned or pruned
                with np.errstate(invalid="ignore"):   # inf - inf: NaN, as in C
                    if abs(_F(tok_extra_cost - tok.extra_cost)) > delta:
                        changed = True
                tok.extra_cost = tok_extra_cost
                tok = tok.next
            if changed:
                extra_costs_changed = True
        return extra_costs_changed, links_pruned

    def compute_final_costs(self):
        """(final_costs {token: cost}, final_relative_cost, final_best_cost)."""
        final_costs = {}
        best_cost = best_cost_with_final = _INF
        for state, tok in self.toks.items():
            final_cost = self._final[state]
            cost = tok.tot_cost
            cost_with_final = _F(cost + final_cost)
            best_cost = min(cost, best_cost)
            best_cost_with_final = min(cost_with_final, best_cost_with_final)
            if final_cost != _INF:
                final_costs[tok] = final_cost
        if best_cost == _INF and best_cost_with_final == _INF:
            relative = _INF
        else:
            relative = _F(best_cost_with_final - best_cost)
        best = best_cost_with_final if best_cost_with_final != _INF else best_cost
        return final_costs, relative, best

    def prune_forward_links_final(self):
        frame_plus_one = len(self.active_toks) - 1
        if self.active_toks[frame_plus_one] is None:
            self.warnings.append("No tokens alive at end of file")
        self.final_costs, self.final_relative_cost, self.final_best_cost = \
            self.compute_final_costs()
        self.decoding_finalized = True
        self.toks.clear()
        changed = True
        while changed:
            changed = False
            tok = self.active_toks[frame_plus_one]
            while tok is not None:
                if not self.final_costs:
                    final_cost = _F(0)
                else:
                    final_cost = self.final_costs.get(tok, _INF)
                start_extra = _F(_F(tok.tot_cost + final_cost) - self.final_best_cost)
                links_extra, _ = self._prune_links_of(tok)
                tok_extra_cost = min(start_extra, links_extra)
                if tok_extra_cost > self.lattice_beam:
                    tok_extra_cost = _INF
                if not _approx_equal(tok.extra_cost, tok_extra_cost):
                    changed = True
                tok.extra_cost = tok_extra_cost
                tok = tok.next

    def prune_tokens_for_frame(self, frame_plus_one):
        tok = self.active_toks[frame_plus_one]
        if tok is None:
            self.warnings.append("No tokens alive [doing pruning]")
        prev, head = None, tok
        while tok is not None:
            nxt = tok.next
            if tok.extra_cost == _INF:
                if prev is not None:
                    prev.next = nxt
                else:
                    head = nxt
                self.num_toks -= 1
            else:
                prev = tok
            tok = nxt
        self.active_toks[frame_plus_one] = head

    def prune_active_tokens(self, delta):
        cur_frame_plus_one = self.num_frames_decoded()
        for f in range(cur_frame_plus_one - 1, -1, -1):
            if self.must_prune_forward_links[f]:
                extra_costs_changed, links_pruned = self.prune_forward_links(f, delta)
                if extra_costs_changed and f > 0:
                    self.must_prune_forward_links[f - 1] = True
                if links_pruned:
                    self.must_prune_tokens[f] = True
                self.must_prune_forward_links[f] = False
            if f + 1 < cur_frame_plus_one and self.must_prune_tokens[f + 1]:
                self.prune_tokens_for_frame(f + 1)
                self.must_prune_tokens[f + 1] = False

    # -- results ---------------------------------------------------------------------------
    @property
    def warnings(self):
        w = getattr(self, "_warnings", None)
        if w is None:
            w = self._warnings = []
        return w

    def reached_final(self):
        return self.final_relative_cost != _INF

    def token_lattice(self):
        """The surviving tokens and links as a :class:`TokenLattice`."""
        frames = []
        for head in self.active_toks:
            toks = []
            tok = head
            while tok is not None:
                toks.append(tok)
                tok = tok.next
            frames.append(toks)
        index = {}
        for toks in frames:
            for tok in toks:
                index[tok] = len(index)
        frame_begin = np.zeros(len(frames) + 1, dtype=np.int64)
        link_begin = [0]
        next_tok, ilabel, olabel, graph_cost, acoustic_cost = [], [], [], [], []
        final_cost = []
        for f, toks in enumerate(frames):
            frame_begin[f + 1] = frame_begin[f] + len(toks)
            for tok in toks:
                link = tok.links
                while link is not None:
                    next_tok.append(index[link.next_tok])
                    ilabel.append(link.ilabel)
                    olabel.append(link.olabel)
                    graph_cost.append(link.graph_cost)
                    acoustic_cost.append(link.acoustic_cost)
                    link = link.next
                link_begin.append(len(next_tok))
                final_cost.append(self.final_costs.get(tok, _INF))
        return TokenLattice(frame_begin, np.array(link_begin, dtype=np.int64),
                            np.array(next_tok, dtype=np.int32),
                            np.array(ilabel, dtype=np.int32),
                            np.array(olabel, dtype=np.int32),
                            np.array(graph_cost, dtype=np.float32),
                            np.array(acoustic_cost, dtype=np.float32),
                            np.array(self.cost_offsets, dtype=np.float32),
                            np.array(final_cost, dtype=np.float32),
                            bool(self.final_costs))
