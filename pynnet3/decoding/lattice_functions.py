"""Kaldi's lattice functions (lat/lattice-functions.cc) that the lattice
tools need, on both lattice kinds of :mod:`pynnet3.decoding.lattice`:
topological sorting as OpenFst's TopSort, beam pruning (PruneLattice), the
times of a compact lattice's states (CompactLatticeStateTimes) and how many
arcs cross each frame (CompactLatticeDepthPerFrame).

Arc tuples of both kinds have the next state at index 4 and the two costs at
indices 1, 2 (CompactLattice: label, graph, acoustic, string, next) or 2, 3
(Lattice: ilabel, olabel, graph, acoustic, next); a cost of a weight is the
sum of its two costs in double (Kaldi's ConvertToCost), infinite for the
zero weight.
"""

import logging
import math

from ..errors import PynnetError
from .lattice import CompactLattice, Lattice

__all__ = ["is_top_sorted", "top_sort", "top_sort_compact_lattice_if_needed",
           "prune_lattice", "compact_lattice_state_times", "compact_lattice_depth_per_frame"]

logger = logging.getLogger("pynnet3")


def _cost_fields(fst):
    """The indices of the two costs in the arc tuples of ``fst``."""
    if isinstance(fst, CompactLattice):
        return 1, 2
    if isinstance(fst, Lattice):
        return 2, 3
    raise TypeError("expected a Lattice or a CompactLattice, got %s" % type(fst).__name__)


def is_top_sorted(fst):
    """OpenFst's kTopSorted property, computed: every arc goes to a later
    state."""
    return all(a[4] > s for s, arcs in enumerate(fst.arcs) for a in arcs)


def top_sort(fst):
    """OpenFst's TopSort in place: states renumbered in the order a
    depth-first search from the start state (then from each unvisited state
    in order) finishes them, reversed; arcs keep their order. Returns False
    (leaving ``fst`` unchanged) if it has a cycle."""
    # CompactLattice.top_order reads only the start state and the arcs' next
    # states (index 4 in both kinds), so it serves a Lattice as well.
    order = CompactLattice.top_order(fst)
    if order is None:
        return False
    if order == list(range(fst.num_states)):
        return True
    new_id = [0] * fst.num_states
    for position, s in enumerate(order):
        new_id[s] = position
    fst.arcs = [[a[:4] + (new_id[a[4]],) for a in fst.arcs[s]] for s in order]
    fst.final = [fst.final[s] for s in order]
    if fst.start is not None:
        fst.start = new_id[fst.start]
    return True


def top_sort_compact_lattice_if_needed(clat):
    """Kaldi's TopSortCompactLatticeIfNeeded (an error if there is a cycle)."""
    if not is_top_sorted(clat) and not top_sort(clat):
        raise PynnetError("Topological sorting failed")


def prune_lattice(beam, lat):
    """Kaldi's PruneLattice, in place, on either lattice kind: removes every
    arc and final weight not on a path whose cost (sum of both costs, in
    double) is within ``beam`` of the best path's, then the states no longer
    on a path from the start to a final state (OpenFst's Connect). The
    lattice is first topologically sorted if it is not. Returns False (a
    WARNING is logged for a cycle) if the lattice has a cycle or ends up
    empty, as Kaldi's does."""
    if not beam > 0.0:
        raise PynnetError("lattice pruning needs a positive beam, got %g" % beam)
    if not is_top_sorted(lat) and not top_sort(lat):
        logger.warning("Cycles detected in lattice")
        return False
    n = lat.num_states
    if n == 0 or lat.start is None:
        return False
    i1, i2 = _cost_fields(lat)
    inf = math.inf
    forward = [inf] * n
    forward[lat.start] = 0.0
    best_final = inf
    for s in range(n):
        here = forward[s]
        for a in lat.arcs[s]:
            c = here + (a[i1] + a[i2])
            if c < forward[a[4]]:
                forward[a[4]] = c
        f = lat.final[s]
        if f is not None:
            c = here + (f[0] + f[1])
            if c < best_final:
                best_final = c
    cutoff = best_final + beam
    # Backwards: the backward cost of each state from all its arcs (pruned
    # or not, as Kaldi's), dropping arcs and final weights outside the beam.
    backward = forward  # as Kaldi's, one array: forward[s] is read before s is overwritten
    for s in range(n - 1, -1, -1):
        here_forward = forward[s]
        f = lat.final[s]
        here_backward = inf if f is None else f[0] + f[1]
        if f is not None and here_backward + here_forward > cutoff:
            lat.final[s] = None
        kept = []
        for a in lat.arcs[s]:
            arc_backward = (a[i1] + a[i2]) + backward[a[4]]
            if arc_backward < here_backward:
                here_backward = arc_backward
            if not here_forward + arc_backward > cutoff:
                kept.append(a)
        lat.arcs[s] = kept
        backward[s] = here_backward
    lat.connect()
    return lat.num_states > 0


def compact_lattice_state_times(clat):
    """Kaldi's CompactLatticeStateTimes: (times, length): the frame at which
    each state of a topologically sorted compact lattice (start state 0)
    is reached, from the lengths of the arcs' transition-id strings, and the
    utterance length (0 with a WARNING when no state is final; the largest,
    with a WARNING, when final states disagree)."""
    if not is_top_sorted(clat):
        raise PynnetError("Input lattice must be topologically sorted.")
    if clat.start != 0:
        raise PynnetError("compact lattice must start at state 0, not %s" % clat.start)
    n = clat.num_states
    times = [-1] * n
    times[0] = 0
    utt_len = -1
    for s in range(n):
        now = times[s]
        for a in clat.arcs[s]:
            t = now + len(a[3])
            if times[a[4]] == -1:
                times[a[4]] = t
            elif times[a[4]] != t:
                raise PynnetError("compact lattice state %d is reached at frames %d and %d "
                                  "(arcs' strings of different lengths)"
                                  % (a[4], times[a[4]], t))
        f = clat.final[s]
        if f is not None:
            length = now + len(f[2])
            if utt_len == -1:
                utt_len = length
            elif length != utt_len:
                logger.warning("Utterance does not seem to have a consistent length.")
                utt_len = max(utt_len, length)
    if utt_len == -1:
        logger.warning("Utterance does not have a final-state.")
        return times, 0
    return times, utt_len


def compact_lattice_depth_per_frame(clat):
    """Kaldi's CompactLatticeDepthPerFrame: for each frame, how many arcs
    (and final weights) of the topologically sorted compact lattice span it;
    empty for an empty lattice."""
    if not is_top_sorted(clat):
        raise PynnetError("Lattice input to CompactLatticeDepthPerFrame was not "
                          "topologically sorted.")
    if clat.start is None:
        return []
    times, length = compact_lattice_state_times(clat)
    if length <= 0:
        return []
    depth = [0] * length
    for s in range(clat.num_states):
        start = times[s]
        spans = [len(a[3]) for a in clat.arcs[s]]
        if clat.final[s] is not None:
            spans.append(len(clat.final[s][2]))
        for span in spans:
            if start + span > length:
                raise PynnetError("compact lattice state %d has an arc past the "
                                  "utterance's end (frame %d of %d)"
                                  % (s, start + span, length))
            for t in range(start, start + span):
                depth[t] += 1
    return depth
