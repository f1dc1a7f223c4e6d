"""Kaldi's alignment helpers (hmm/hmm-utils.cc) over a TransitionModel:
splitting an alignment (a sequence of transition-ids) into phones."""

from ..errors import PynnetError
from .transition import kNoPdf

__all__ = ["is_reordered", "split_to_phones"]


def is_reordered(trans_model, alignment):
    """Kaldi's IsReordered: whether the alignment has each HMM state's
    self-loops after (True) rather than before its forward transition,
    judged at the first change of transition state (or, with only one, from
    the first and last transition-ids)."""
    tid_state = trans_model.transition_id_to_transition_state
    is_loop = trans_model.is_self_loop
    for a, b in zip(alignment, alignment[1:]):
        if tid_state(a) != tid_state(b):
            loop_a, loop_b = is_loop(a), is_loop(b)
            if loop_a and loop_b:
                raise PynnetError("invalid alignment: self-loop transition-ids %d and %d of "
                                  "different states follow each other" % (a, b))
            if loop_a:
                return True
            if loop_b:
                return False
    if not alignment:
        return False
    if is_loop(alignment[0]):
        return False
    return bool(is_loop(alignment[-1]))


def split_to_phones(trans_model, alignment):
    """Kaldi's SplitToPhones: (pieces, ok): the alignment cut into one list
    of transition-ids per phone instance, and whether the alignment looked
    consistent (each piece ends with a final transition and, where the
    phone's first HMM state emits, starts in that state). A piece ends after
    a transition to the final state (and, for reordered alignments, the
    self-loops that follow it), where the phone changes without one, or at
    the end."""
    if not alignment:
        return [], True
    reordered = is_reordered(trans_model, alignment)
    tid_state = trans_model.transition_id_to_transition_state
    state_phone = trans_model.transition_state_to_phone
    ends = []
    ok = True
    n = len(alignment)
    i = 0
    while i < n:
        tid = alignment[i]
        if trans_model.is_final(tid):
            if reordered:
                while i + 1 < n and trans_model.is_self_loop(alignment[i + 1]):
                    if tid_state(alignment[i]) != tid_state(alignment[i + 1]):
                        raise PynnetError("invalid alignment: self-loop %d follows "
                                          "transition-id %d of another state"
                                          % (alignment[i + 1], alignment[i]))
                    i += 1
            ends.append(i + 1)
        elif i + 1 == n:
            ok = False
            ends.append(i + 1)
        else:
            this_state, next_state = tid_state(tid), tid_state(alignment[i + 1])
            if this_state != next_state and state_phone(this_state) != state_phone(next_state):
                ok = False
                ends.append(i + 1)
        i += 1
    pieces = []
    begin = 0
    for end in ends:
        tstate = tid_state(alignment[begin])
        phone = state_phone(tstate)
        first_state = trans_model.topo.topology_for_phone(phone)[0]
        if first_state.forward_pdf_class != kNoPdf and \
                trans_model.transition_state_to_hmm_state(tstate) != 0:
            ok = False
        pieces.append(alignment[begin:end])
        begin = end
    return pieces, ok
