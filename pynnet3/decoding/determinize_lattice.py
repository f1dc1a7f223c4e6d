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

Two implementations of every step run through one pipeline
(:func:`_determinize_lattice_pruned`, the wrapper): the C kernel
(pynnet3/_fast/determinize_lattice_kernel.pyx: a CLattice with invert, TopSort,
ArcSort, phone insertion and deletion, PruneLattice, Connect, and the
determinizer) and the plain-Python twins (this module's steps and
:class:`~.lattice_determinizer.LatticeDeterminizerPruned`), which specify it
and are cross-checked against it in the tests. The kernel is chosen by the one
``pynnet3._fast.load`` policy (``use_kernel=False`` runs the twins).
Without ``word_determinize`` the result is Kaldi's ConvertLattice of the (phone-determinized) lattice
(:mod:`.lattice_ops`); with ``minimize`` it is pushed and minimized
(:mod:`.push_minimize`).
"""

from dataclasses import dataclass, field
import logging
import math

import numpy as np

from .. import _fast
from ..errors import PynnetError
from .lattice import CompactLattice, Lattice
from .lattice_determinizer import (K_DELTA, DeterminizeLatticePrunedOptions,
                                   LatticeDeterminizerPruned, weight_cost)
from .lattice_ops import arc_sort_ilabel, convert_lattice, invert, is_top_sorted, top_sort
from .push_minimize import (minimize_compact_lattice, push_compact_lattice_strings,
                            push_compact_lattice_weights)

__all__ = ["CompactLattice", "DeterminizeLatticePrunedOptions",
           "DeterminizeLatticePhonePrunedOptions", "determinize_lattice_pruned",
           "determinize_lattice_phone_pruned_wrapper", "prune_lattice", "top_sort",
           "K_DELTA"]

logger = logging.getLogger(__name__)

_F = np.float32
_INF = math.inf

# The kernel of the steps and the determinizer when it is loaded (the one
# pynnet3._fast.load policy).
_kernel = _fast.load("determinize_lattice_kernel")

# A raw lattice's arrays (pynnet3/_fast/token_lattice_kernel.pyx) as the C
# lattice the kernel's steps take; None without the kernel.
clattice_from_arrays = _kernel.CLattice.from_arrays if _kernel is not None else None

MAX_DETERMINIZE_TRIES = 10


def _opt(default, doc):
    """A field with Kaldi's documentation, as tools register it
    (pynnet3.bin._option_groups.register_options)."""
    return field(default=default, metadata={"doc": doc})


@dataclass(slots=True)
class DeterminizeLatticePhonePrunedOptions:
    """Kaldi's DeterminizeLatticePhonePrunedOptions (nnet3-latgen-faster's
    --delta, --max-mem, --phone-determinize, --word-determinize,
    --minimize)."""

    delta: float = _opt(float(K_DELTA), "Tolerance used in determinization")
    max_mem: int = _opt(50000000, "Maximum approximate memory usage in determinization (real "
                        "usage might be many times this).")
    phone_determinize: bool = _opt(True, "If true, do an initial pass of determinization on "
                                   "both phones and words (see also --word-determinize)")
    word_determinize: bool = _opt(True, "If true, do a second pass of determinization on words "
                                  "only (see also --phone-determinize)")
    minimize: bool = _opt(False, "If true, push and minimize after determinization.")


def log_determinization_events(events):
    """Logs what a determinizer reported, as Kaldi's LOG and WARNING lines:
    ("rebuild",) for each repository rebuild, ("empty subset",) for a subset
    whose closure has no state with an input symbol or a final weight,
    ("memory", max_mem, repo, arcs, elems, new_repo, effective_beam, beam)
    when the memory limit stopped it."""
    for event in events:
        if event[0] == "rebuild":
            logger.info("Rebuilding repository.")
        elif event[0] == "empty subset":
            logger.warning("empty subset")
        else:
            max_mem, repo, arcs, elems, new_repo, effective_beam, beam = event[1:]
            logger.warning("Did not reach requested beam in determinize-lattice: size exceeds "
                           "maximum %d bytes; (repo,arcs,elems) = (%d,%d,%d), after rebuilding, "
                           "repo size was %d, effective beam was %g vs. requested beam %g",
                           max_mem, repo, arcs, elems, new_repo, effective_beam, beam)


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
        self.core = _kernel.LatticeDeterminizerCore(ifst, float(beam), float(_F(opts.delta)),
                                            opts.max_mem, opts.max_loop, opts.max_states,
                                            opts.max_arcs)
        self.events = []

    def determinize(self):
        ok, effective_beam = self.core.determinize()
        self.events = self.core.events
        return ok, effective_beam

    def output_lattice(self):
        return self.core.output_lattice()

    def output_compact(self, connect=False):
        return self.core.output_compact(connect)


class _FastSteps:
    """The pipeline's steps in C (pynnet3/_fast/determinize_lattice_kernel.pyx) on
    a CLattice; the twins are :class:`_TwinSteps`'."""

    @staticmethod
    def load(lat):
        return lat if isinstance(lat, _kernel.CLattice) else _kernel.CLattice.from_lattice(lat)

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
            c = here + weight_cost(x, y)
            if cost[t] > c:
                cost[t] = c
        f = lat.final[s]
        c = here + (weight_cost(*f) if f is not None else _INF)
        if c < best_final:
            best_final = c
    cutoff = best_final + beam
    bad_state = n              # a non-final state without arcs; Connect removes it
    lat.add_states(1)
    for s in range(n - 1, -1, -1):
        forward = cost[s]
        f = lat.final[s]
        backward = weight_cost(*f) if f is not None else _INF
        if backward + forward > cutoff and backward != _INF:
            lat.final[s] = None
        arcs = []
        for arc in lat.arcs[s]:
            arc_backward = weight_cost(arc[2], arc[3]) + cost[arc[4]]
            if arc_backward < backward:
                backward = arc_backward
            if forward + arc_backward > cutoff:
                arc = arc[:4] + (bad_state,)
            arcs.append(arc)
        lat.arcs[s] = arcs
        cost[s] = backward
    lat.connect()
    return lat.num_states > 0


def _determinize_lattice_pruned(steps, lat, beam, compact, opts, connect=False):
    """determinize_lattice_pruned on ``steps``' lattices; ``connect``: a
    compact result is connected (OpenFst's Connect) as it is made."""
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
            return (det.output_compact(connect) if compact else det.output_lattice()), ok
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


def _steps(use_kernel):
    return _FastSteps if use_kernel and _kernel is not None else _TwinSteps


def determinize_lattice_pruned(lat, beam, compact, opts=None, use_kernel=True):
    """Kaldi's DeterminizeLatticePruned on a top-sorted :class:`Lattice`
    with the limits of ``opts`` (a :class:`DeterminizeLatticePrunedOptions`;
    default: none): returns (result, success); ``compact`` picks a
    CompactLattice or a Lattice; ``use_kernel``: in C when the kernel is
    loaded, else the plain-Python twins. When a limit leaves the effective beam under
    ``retry_cutoff`` times the beam, the input is pruned to a narrower beam
    (a copy; ``lat`` is not changed) and determinized again, as Kaldi's."""
    steps = _steps(use_kernel)
    opts = opts if opts is not None else DeterminizeLatticePrunedOptions()
    result, ok = _determinize_lattice_pruned(steps, steps.load(lat), beam, compact, opts)
    return (result if compact else steps.unload(result)), ok


def determinize_lattice_phone_pruned_wrapper(trans_model, lat, beam, opts=None,
                                             use_kernel=True):
    """Kaldi's DeterminizeLatticePhonePrunedWrapper with ``opts`` (a
    :class:`DeterminizeLatticePhonePrunedOptions`; default Kaldi's: phone
    then word determinization, ``max_mem`` 50,000,000, no minimization;
    without word determinization the (phone-determinized) lattice is
    converted as it is, as Kaldi's ConvertLattice does, and not minimized)
    on a raw lattice (transition-ids on input, words on output): a
    :class:`Lattice`, or with the kernel a CLattice (then it is changed, as
    the twin (the kernel not loaded, or ``use_kernel`` false) changes a
    Lattice). Returns (CompactLattice, success)."""
    steps = _steps(use_kernel)
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
        # (without minimization Kaldi's last step, Connect, is done as the
        # result is made)
        clat, ok2 = _determinize_lattice_pruned(steps, lat, beam, True, det_opts,
                                                connect=not opts.minimize)
        ok = ok and ok2
        if opts.minimize:
            # (Kaldi minimizes with the default delta, whatever --delta is)
            ok = push_compact_lattice_strings(clat) and ok
            ok = push_compact_lattice_weights(clat) and ok
            num_states = clat.num_states
            ok = minimize_compact_lattice(clat, float(K_DELTA)) and ok
            merged = clat.num_states < num_states      # (it connects what it merged)
            clat.connect()
            clat.connected = "rewritten" if merged else "pushed"
        else:
            clat.connected = "built"
    else:
        # the words (input side) label the arcs, transition-ids become strings
        clat = convert_lattice(steps.unload(lat), invert_labels=False)
        clat.connect()
        clat.connected = "built"
    return clat, ok
