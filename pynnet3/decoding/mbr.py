"""Kaldi's MinimumBayesRisk (lat/sausages.cc): minimum-Bayes-risk decoding of
a compact lattice, after Xu, Povey, Mangu and Zhu, "Minimum Bayes Risk
decoding and system combination based on a recursion for edit distance"
(Computer Speech and Language, 2011).

Starting from the lattice's best path, it alternates two steps until the
expected edit distance stops improving: (1) with the current hypothesis
padded with epsilon bins between and around its words, compute by forward
and backward recursions the expected (approximate) edit distance between
the lattice's paths and the hypothesis (the Bayes risk) and, for every bin,
the posterior of each word (or epsilon) aligned to it (a "sausage", or
confusion network); (2) replace each bin's word by its most likely one.
The result is the final hypothesis without epsilons, its Bayes risk, the
sausage statistics and the average start and end frames of each bin (and of
each output word).

The arithmetic is Kaldi's: double-precision recursions over float arc
log-likelihoods (minus graph cost minus acoustic cost, summed in float),
posteriors stored as float, times averaged in double and stored as float,
the one-best times' overlap fix in float. The lattice is first given a
single final state (Kaldi's CreateSuperFinal) and topologically sorted as
OpenFst's TopSort does; Kaldi sorts only when the lattice's stored OpenFst
properties do not say it is sorted (true of lattice-prune's output, not of
the decoder's), pynnet3 when it is not sorted, which renumbers the same
lattices except for a decoder lattice that happens to be sorted already.
The initial best path is OpenFst's ShortestPath over float costs (graph +
acoustic cost of each arc, in float), states taken in order.
"""

import logging
import math

from ..common.floats import f32
from ..errors import PynnetError
from .lattice_functions import compact_lattice_state_times, is_top_sorted, top_sort

__all__ = ["MinimumBayesRisk", "create_super_final"]

logger = logging.getLogger("pynnet3")

_DELTA = f32(1.0e-05)           # Kaldi's delta() is a BaseFloat
_INS_DEL_COST = 1.0 + _DELTA     # l(a, b, penalize=true) for a != b
_MIN_LOG_DIFF = math.log(2.220446049250313e-16)   # log(DBL_EPSILON)


def _log_add(x, y):
    """Kaldi's LogAdd for doubles."""
    if x < y:
        diff = x - y
        x = y
    else:
        diff = y - x
    if diff >= _MIN_LOG_DIFF:
        return x + math.log1p(math.exp(diff))
    return x


def create_super_final(clat):
    """Kaldi's CreateSuperFinal on a CompactLattice, in place: unless there
    is already a single final state with weight One and no arcs out, a new
    state (final, weight One) is added and every final state's final weight
    (with its string) moves onto an epsilon arc to it. Returns that state."""
    finals = [s for s, f in enumerate(clat.final) if f is not None]
    if len(finals) == 1:
        f = clat.final[finals[0]]
        if f[0] == 0.0 and f[1] == 0.0 and not f[2] and not clat.arcs[finals[0]]:
            return finals[0]
    super_final = clat.num_states
    clat.arcs.append([])
    clat.final.append((0.0, 0.0, ()))
    for s in finals:
        w1, w2, string = clat.final[s]
        clat.final[s] = None
        clat.arcs[s].append((0, w1, w2, string, super_final))
    return super_final


class MinimumBayesRisk:
    """MBR decoding of one CompactLattice (already scaled as wanted; not
    modified). ``words``: the starting hypothesis (default: the lattice's
    best path); ``decode_mbr=False`` keeps it (only the statistics are
    computed); ``print_silence`` keeps the epsilon bins in the output.
    Results: :attr:`one_best` (words, no epsilons),
    :attr:`bayes_risk` (float), :attr:`sausage_stats` (per bin, (word,
    posterior) pairs, most likely first), :attr:`sausage_times` and
    :attr:`one_best_times` ((start, end) frame pairs as floats)."""

    def __init__(self, clat, words=None, decode_mbr=True, print_silence=False):
        self.decode_mbr = decode_mbr
        self.print_silence = print_silence
        lat = type(clat)()
        lat.start = clat.start
        lat.arcs = [list(a) for a in clat.arcs]
        lat.final = list(clat.final)
        self._prepare(lat)
        self.R = self._best_path(lat) if words is None else list(words)
        self.sausage_times = []
        self.L = 0.0
        self.gamma = []
        self.times = []
        self.one_best_times = []
        self._mbr_decode()

    # -- results -------------------------------------------------------------------
    @property
    def one_best(self):
        return self.R

    @property
    def bayes_risk(self):
        return f32(self.L)

    @property
    def sausage_stats(self):
        return self.gamma

    # -- preparation (PrepareLatticeAndInitStats) --------------------------------
    def _prepare(self, lat):
        if lat.start is None:
            raise PynnetError("cannot do MBR decoding of an empty lattice")
        create_super_final(lat)
        if not is_top_sorted(lat) and not top_sort(lat):
            raise PynnetError("Cycles detected in lattice.")
        times, _ = compact_lattice_state_times(lat)
        self.state_times = [0] + times       # 1-based states from here on
        n = lat.num_states
        self.pre = [[] for _ in range(n + 1)]
        self.arcs = []                       # (word, start node, end node, loglike)
        for s in range(n):
            for word, x, y, _string, t in lat.arcs[s]:
                self.pre[t + 1].append(len(self.arcs))
                self.arcs.append((word, s + 1, t + 1, -f32(x + y)))

    @staticmethod
    def _best_path(lat):
        """Words of OpenFst's ShortestPath over float arc costs (graph +
        acoustic in float; distances in float; a state's distance improves
        only on a strictly smaller cost; states in order, the lattice being
        sorted)."""
        n = lat.num_states
        inf = math.inf
        dist = [inf] * n
        back = [None] * n
        dist[lat.start] = 0.0
        best_final, final_state = inf, None
        for s in range(n):
            d = dist[s]
            if d == inf:
                continue
            f = lat.final[s]
            if f is not None:
                c = f32(d + f32(f[0] + f[1]))
                if c < best_final:
                    best_final, final_state = c, s
            for i, (_word, x, y, _string, t) in enumerate(lat.arcs[s]):
                c = f32(d + f32(x + y))
                if c < dist[t]:
                    dist[t], back[t] = c, (s, i)
        if final_state is None:
            raise PynnetError("the lattice has no successful path")
        words = []
        s = final_state
        while back[s] is not None:
            prev, i = back[s]
            word = lat.arcs[prev][i][0]
            if word != 0:
                words.append(word)
            s = prev
        words.reverse()
        return words

    # -- the decoding loop (MbrDecode) ----------------------------------------------
    def _mbr_decode(self):
        counter = 0
        while True:
            self.R = _normalize_eps(self.R)
            self._acc_stats()
            delta_q = 0.0
            self.one_best_times = []
            for q in range(len(self.R)):
                bins = self.gamma[q]
                if self.decode_mbr:
                    old_gamma, new_gamma = 0.0, bins[0][1]
                    rq, rhat = self.R[q], bins[0][0]
                    for word, post in bins:
                        if word == rq:
                            old_gamma = post
                    delta_q += old_gamma - new_gamma
                    self.R[q] = rhat
                if self.R[q] != 0 or self.print_silence:
                    chosen = 0
                    for j, (word, _post) in enumerate(bins):
                        if word == self.R[q]:
                            chosen = j
                            break
                    self.one_best_times.append(self.times[q][chosen])
                    self._fix_overlap()
            if delta_q == 0:
                break
            if counter > 100:
                logger.warning("Iterating too many times in MbrDecode; stopping.")
                break
            counter += 1
        if not self.print_silence:
            self.R = [w for w in self.R if w != 0]

    def _fix_overlap(self):
        """Kaldi's redistribution (in float) of the time between the last two
        one-best words when they overlap."""
        times = self.one_best_times
        i = len(times)
        if i < 2 or not times[i - 2][1] > times[i - 1][0]:
            return
        (b1, e1), (b2, e2) = times[i - 2], times[i - 1]
        prev_right = times[i - 3][1] if i > 2 else 0.0
        left = max(prev_right, min(b1, b2))
        right = max(e1, e2)
        first_dur = f32(e1 - b1)
        second_dur = f32(e2 - b2)
        if first_dur > 0:
            mid = f32(left + f32(f32(f32(right - left) * first_dur)
                                   / f32(first_dur + second_dur)))
        else:
            mid = left
        times[i - 2] = (left, mid)
        times[i - 1] = (mid, right)

    # -- the recursions ----------------------------------------------------------------
    def _edit_distance(self, N, Q, alpha, alpha_dash):
        """Forward recursion (Figure 6 of the paper): fills ``alpha`` (log
        forward probabilities) and ``alpha_dash`` (expected edit distance of
        the paths into each state against each prefix of R); returns the
        expected edit distance of the whole lattice against R."""
        R, arcs, pre = self.R, self.arcs, self.pre
        alpha[1] = 0.0
        row = alpha_dash[1]
        row[0] = 0.0
        for q in range(1, Q + 1):
            row[q] = row[q - 1] + (0.0 if R[q - 1] == 0 else 1.0)
        arc_row = [0.0] * (Q + 1)
        for n in range(2, N + 1):
            alpha_n = -math.inf
            for k in pre[n]:
                word, s_a, _, p_a = arcs[k]
                alpha_n = _log_add(alpha_n, alpha[s_a] + p_a)
            alpha[n] = alpha_n
            out = alpha_dash[n]
            for k in pre[n]:
                w_a, s_a, _, p_a = arcs[k]
                src = alpha_dash[s_a]
                weight = math.exp(alpha[s_a] + p_a - alpha_n)
                del_cost = 0.0 if w_a == 0 else _INS_DEL_COST
                prev = src[0] + del_cost
                arc_row[0] = prev
                out[0] += weight * prev
                for q in range(1, Q + 1):
                    r_q = R[q - 1]
                    a1 = src[q - 1] + (0.0 if w_a == r_q else 1.0)
                    a2 = src[q] + del_cost
                    a3 = prev + (0.0 if r_q == 0 else 1.0)
                    prev = min(a1, min(a2, a3))
                    arc_row[q] = prev
                    out[q] += weight * prev
        return alpha_dash[N][Q]

    def _acc_stats(self):
        """Backward recursion (Figure 5 of the paper): the Bayes risk L, the
        sausage posteriors ``gamma`` and the average times of each bin."""
        N = len(self.pre) - 1
        Q = len(self.R)
        R, arcs, pre, state_times = self.R, self.arcs, self.pre, self.state_times
        alpha = [0.0] * (N + 1)
        alpha_dash = [[0.0] * (Q + 1) for _ in range(N + 1)]
        risk = self._edit_distance(N, Q, alpha, alpha_dash)
        if self.L != 0 and risk > self.L:
            logger.warning("Edit distance increased: %g > %g", risk, self.L)
        self.L = risk
        beta_dash = [[0.0] * (Q + 1) for _ in range(N + 1)]
        beta_dash[N][Q] = 1.0
        gamma = [dict() for _ in range(Q + 1)]
        tau_b = [dict() for _ in range(Q + 1)]
        tau_e = [dict() for _ in range(Q + 1)]
        arc_row = [0.0] * (Q + 1)
        choice = [0] * (Q + 1)
        for n in range(N, 1, -1):
            t_n = state_times[n]
            beta_n = beta_dash[n]
            for k in pre[n]:
                w_a, s_a, _, p_a = arcs[k]
                src = alpha_dash[s_a]
                del_cost = 0.0 if w_a == 0 else _INS_DEL_COST
                prev = src[0] + del_cost
                arc_row[0] = prev
                for q in range(1, Q + 1):
                    r_q = R[q - 1]
                    a1 = src[q - 1] + (0.0 if w_a == r_q else 1.0)
                    a2 = src[q] + del_cost
                    a3 = prev + (0.0 if r_q == 0 else 1.0)
                    if a1 <= a2:
                        if a1 <= a3:
                            choice[q], prev = 1, a1
                        else:
                            choice[q], prev = 3, a3
                    elif a2 <= a3:
                        choice[q], prev = 2, a2
                    else:
                        choice[q], prev = 3, a3
                    arc_row[q] = prev
                weight = math.exp(alpha[s_a] + p_a - alpha[n])
                beta_arc = [0.0] * (Q + 1)
                beta_src = beta_dash[s_a]
                t_s = state_times[s_a]
                for q in range(Q, 0, -1):
                    beta_arc[q] += weight * beta_n[q]
                    b = beta_arc[q]
                    c = choice[q]
                    if c == 1:
                        beta_src[q - 1] += b
                        _add_to_map(w_a, b, gamma[q])
                        _add_to_map(w_a, t_s * b, tau_b[q])
                        _add_to_map(w_a, t_n * b, tau_e[q])
                    elif c == 2:
                        beta_src[q] += b
                    else:
                        beta_arc[q - 1] += b
                        _add_to_map(0, b, gamma[q])
                        _add_to_map(0, t_n * b, tau_b[q])
                        _add_to_map(0, t_n * b, tau_e[q])
                beta_arc[0] += weight * beta_n[0]
                beta_src[0] += beta_arc[0]
        beta_arc = [0.0] * (Q + 1)
        t_1 = state_times[1]
        for q in range(Q, 0, -1):
            beta_arc[q] += beta_dash[1][q]
            beta_arc[q - 1] += beta_arc[q]
            _add_to_map(0, beta_arc[q], gamma[q])
            _add_to_map(0, t_1 * beta_arc[q], tau_b[q])
            _add_to_map(0, t_1 * beta_arc[q], tau_e[q])
        for q in range(1, Q + 1):
            total = 0.0
            for word in sorted(gamma[q]):
                total += gamma[q][word]
            if abs(total - 1.0) > 0.1:
                logger.warning("sum of gamma[%d,s] is %g", q, total)
        self._store_gamma_and_times(Q, gamma, tau_b, tau_e)

    def _store_gamma_and_times(self, Q, gamma, tau_b, tau_e):
        """gamma as float posteriors sorted most likely first (ties: larger
        word first), and the bins' average times (Kaldi's conversions)."""
        self.gamma = []
        self.times = []
        sausage_times = []
        for q in range(1, Q + 1):
            bins = sorted(((w, f32(p)) for w, p in gamma[q].items()),
                          key=lambda wp: (-wp[1], -wp[0]))
            self.gamma.append(bins)
            t_b = t_e = 0.0
            these = []
            for word, post in bins:
                w_b, w_e = tau_b[q].get(word, 0.0), tau_e[q].get(word, 0.0)
                if w_b > w_e:
                    logger.warning("Times out of order")
                these.append((f32(w_b / post), f32(w_e / post)))
                t_b += w_b
                t_e += w_e
            self.times.append(these)
            start, end = f32(t_b), f32(t_e)
            if start > end:
                logger.warning("Times out of order")
            sausage_times.append([start, end])
            if q > 1 and sausage_times[q - 2][1] > sausage_times[q - 1][0]:
                mid = f32(0.5 * f32(sausage_times[q - 2][1] + sausage_times[q - 1][0]))
                sausage_times[q - 2][1] = sausage_times[q - 1][0] = mid
        self.sausage_times = [tuple(t) for t in sausage_times]


def _add_to_map(word, value, table):
    if value == 0:
        return
    table[word] = table.get(word, 0.0) + value


def _normalize_eps(words):
    """Kaldi's NormalizeEps: the words without epsilons, with an epsilon
    before, between and after them."""
    out = [0]
    for w in words:
        if w != 0:
            out.append(w)
            out.append(0)
    return out
