"""Kaldi's pushing and minimization of a determinized :class:`CompactLattice`
(lat/push-lattice.cc, lat/minimize-lattice.cc), which
DeterminizeLatticePhonePruned applies with ``--minimize=true``.

- :func:`push_compact_lattice_strings`: each state's arcs (and final weight)
  give up the longest transition-id prefix that every path out of it shares
  (the "shift", computed from the last state back; the start state keeps
  its strings), which moves transition-ids towards the start.
- :func:`push_compact_lattice_weights`: weights pushed towards the start so
  that the best path from each state onwards has cost zero (the start state
  keeps the leftover).
- :func:`minimize_compact_lattice`: states merged, from the last one back,
  into the first later state with the same final weight (within ``delta``)
  and the same arcs (labels, mapped next states, strings equal, weights
  within ``delta``); candidates are found through Kaldi's state hash.

All three top-sort the lattice first (OpenFst's TopSort) when it is not, so
the result is Kaldi's state numbering and arc order. Compact lattices are
small (thousands of arcs), so these are plain Python.
"""

import logging
import math

from ..common.floats import f32
from .lattice_ops import approx_equal, compare_weights, std_sort, times, top_sort

__all__ = ["push_compact_lattice_strings", "push_compact_lattice_weights",
           "minimize_compact_lattice"]

logger = logging.getLogger(__name__)

_INF = math.inf
_MASK = 2**64 - 1          # size_t arithmetic


def _top_sorted(clat):
    if all(a[4] > s for s in range(clat.num_states) for a in clat.arcs[s]):
        return True
    if top_sort(clat):
        return True
    logger.warning("Topological sorting of state-level lattice failed (probably your lexicon "
                   "has empty words or your LM has epsilon cycles; this  is a bad idea.)")
    return False


# -- strings -----------------------------------------------------------------------------------

def _get_string(clat, state, arc_index, length):
    """The first ``length`` transition-ids of the path leaving ``state`` by
    arc ``arc_index`` (None: by its final weight when final, else by its
    first arc), following first arcs beyond it."""
    out = []
    while len(out) < length:
        final = clat.final[state]
        if arc_index is None and final is not None:
            out.extend(final[2][:length - len(out)])
            break
        arc = clat.arcs[state][arc_index or 0]
        out.extend(arc[3][:length - len(out)])
        state, arc_index = arc[4], None
    return out


def _reduce_shift_for_conflicts(clat, state, shift):
    """The shift cut down to what all paths out of ``state`` share."""
    final = clat.final[state]
    num_arcs = len(clat.arcs[state])
    if num_arcs + (final is not None) <= 1 or shift <= 0:
        return shift
    if final is not None:
        string = list(final[2][:shift])
        first_arc = 0
    else:
        string = _get_string(clat, state, 0, shift)
        first_arc = 1
    for a in range(first_arc, num_arcs):
        other = _get_string(clat, state, a, shift)
        for i in range(shift):
            if string[i] != other[i]:
                shift = i
                del string[i:]
                break
    return shift


def push_compact_lattice_strings(clat):
    """Kaldi's PushCompactLatticeStrings, in place; False if the lattice is
    cyclic."""
    if not _top_sorted(clat):
        return False
    n = clat.num_states
    shift = [0] * n
    for s in range(n - 1, clat.start, -1):
        arcs, final = clat.arcs[s], clat.final[s]
        if not arcs:
            shift[s] = len(final[2]) if final is not None else 0
            continue
        this = 2**31 - 1
        if final is not None:
            this = min(this, len(final[2]))
        for arc in arcs:
            this = min(this, shift[arc[4]] + len(arc[3]))
        shift[s] = _reduce_shift_for_conflicts(clat, s, this)
    for s in range(n):
        k = shift[s]
        new_arcs = []
        for label, w1, w2, string, t in clat.arcs[s]:
            full = tuple(string) + tuple(_get_string(clat, t, None, shift[t]))
            new_arcs.append((label, w1, w2, full[k:], t))
        clat.arcs[s] = new_arcs
        final = clat.final[s]
        if final is not None:
            clat.final[s] = (final[0], final[1], tuple(final[2][k:]))
    return True


# -- weights -----------------------------------------------------------------------------------

def _divide(a1, a2, b1, b2):
    """Kaldi's Divide on LatticeWeight (None is Zero)."""
    x, y = f32(a1 - b1), f32(a2 - b2)
    if x != x or y != y or x == -_INF or y == -_INF:
        logger.warning("LatticeWeightTpl::Divide, NaN or invalid number produced. [dividing "
                       "by zero?]  Returning zero")
        return None
    if x == _INF or y == _INF:
        return None
    return x, y


def push_compact_lattice_weights(clat):
    """Kaldi's PushCompactLatticeWeights, in place; False if the lattice is
    cyclic."""
    if not _top_sorted(clat):
        return False
    n = clat.num_states
    if n == 0:
        logger.warning("Pushing weights of empty compact lattice")
        return True
    zero = (_INF, _INF)
    to_end = [zero] * n
    for s in range(n - 1, -1, -1):
        final = clat.final[s]
        best = (final[0], final[1]) if final is not None else zero
        for arc in clat.arcs[s]:
            w = times(arc[1], arc[2], *to_end[arc[4]])
            if compare_weights(best[0], best[1], w[0], w[1]) < 0:
                best = w
        if best == zero:
            logger.warning("Lattice has non-coaccessible states.")
        to_end[s] = best
    to_end[0] = (0.0, 0.0)     # the start state keeps the leftover weight
    for s in range(n):
        here = to_end[s]
        if here == zero:
            continue
        arcs = []
        for label, w1, w2, string, t in clat.arcs[s]:
            if to_end[t] != zero:
                d = _divide(to_end[t][0], to_end[t][1], here[0], here[1])
                w1, w2 = times(w1, w2, *(d if d is not None else zero))
            arcs.append((label, w1, w2, string, t))
        clat.arcs[s] = arcs
        final = clat.final[s]
        if final is not None:
            d = _divide(final[0], final[1], here[0], here[1])
            d = d if d is not None else zero
            clat.final[s] = (d[0], d[1], final[2])
    return True


# -- minimization ------------------------------------------------------------------------------

def _string_hash(string):
    """Kaldi's VectorHasher (prime 7853, size_t), never 0 (then 53281)."""
    h = 0
    for x in string:
        h = (h * 7853 + x) & _MASK
    return h if h else 53281


def _state_hashes(clat):
    n = clat.num_states
    hashes = [0] * n
    for s in range(n - 1, -1, -1):
        final = clat.final[s]
        h = 33317 if final is None else (607 * _string_hash(final[2])) & _MASK
        for label, _, _, string, t in clat.arcs[s]:
            next_hash = hashes[t] if t > s else 1
            h = (h + 1447 * (label or 51907) * (1 + _string_hash(string) * next_hash)) & _MASK
        hashes[s] = h
    return hashes


def _arc_order(arc):
    return arc[0], arc[4]


def _equivalent(clat, s, t, state_map, delta):
    fs, ft = clat.final[s], clat.final[t]
    if (fs is None) != (ft is None):
        return False
    if fs is not None and not (fs[2] == ft[2] and approx_equal(fs[0], fs[1], ft[0], ft[1],
                                                               delta)):
        return False
    if len(clat.arcs[s]) != len(clat.arcs[t]):
        return False
    sorted_arcs = []
    for state in (s, t):
        arcs = [a[:4] + (state_map[a[4]],) for a in clat.arcs[state] if a[4] != state]
        std_sort(arcs, _arc_order)
        sorted_arcs.append(arcs)
    for a, b in zip(*sorted_arcs):
        if a[4] != b[4] or a[0] != b[0]:
            return False
        if not (a[3] == b[3] and approx_equal(a[1], a[2], b[1], b[2], delta)):
            return False
    return True


def minimize_compact_lattice(clat, delta):
    """Kaldi's MinimizeCompactLattice, in place (merged states removed by
    Connect); False if the lattice is cyclic."""
    if not _top_sorted(clat):
        return False
    hashes = _state_hashes(clat)
    n = clat.num_states
    groups = {}
    for s in range(n):
        groups.setdefault(hashes[s], []).append(s)
    largest = max((len(g) for g in groups.values()), default=0)
    if largest > 1000:
        logger.warning("Largest equivalence group (using hash) is %d, minimization might be "
                       "slow.", largest)
    state_map = list(range(n))
    for s in range(n - 1, -1, -1):
        for t in groups[hashes[s]]:
            if t > s and state_map[t] == t and _equivalent(clat, s, t, state_map, delta):
                state_map[s] = t
                break
    if all(state_map[s] == s for s in range(n)):
        return True
    clat.start = state_map[clat.start]
    for s in range(n):
        if state_map[s] == s:
            clat.arcs[s] = [a[:4] + (state_map[a[4]],) for a in clat.arcs[s]]
    clat.connect()
    return True
