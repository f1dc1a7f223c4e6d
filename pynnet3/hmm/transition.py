"""Kaldi's HmmTopology and TransitionModel: the first half of an nnet3 ``.mdl``.

A ``.mdl`` file is ``TransitionModel::Write`` followed by
``AmNnetSimple::Write`` (see :mod:`pynnet3.model.am`). The transition model
maps transition-ids (what alignments and decoding graphs contain) to phones,
HMM states and pdf-ids (the rows of the network's output).

On disk:

  <TransitionModel> <Topology> ...topology... </Topology>
  <Triples> N  (phone hmm-state pdf) * N  </Triples>           (plain HMMs)
  <Tuples> N   (phone hmm-state forward-pdf self-loop-pdf) * N </Tuples>
  <LogProbs> [vector of num-transition-ids + 1 floats] </LogProbs>
  </TransitionModel>

The binary topology is ``phones`` and ``phone2idx`` integer vectors, an
optional ``-1`` marking separate self-loop pdf-classes, then the entries; the
text topology is the human-readable ``<TopologyEntry>`` form (also what a
``topo`` file contains). Reading accepts both ``<Triples>`` and ``<Tuples>``
and both topology variants, as Kaldi does; writing chooses the form from the
content exactly like Kaldi, so read-then-write reproduces Kaldi's bytes.

Guarantees: :meth:`HmmTopology.read_from` and :meth:`TransitionModel.read_from`
check what Kaldi's ``Check()`` functions check and raise
:class:`KaldiFormatError` (naming source and offset) instead of asserting.
"""

import math

import numpy as np

from ..errors import KaldiFormatError
from ..io.files import open_input, write_object

kNoPdf = -1


class HmmState:
    """One state of a phone's HMM: its pdf-classes (``kNoPdf`` for the final,
    non-emitting state) and ``transitions`` as (destination state, prob)."""

    __slots__ = ("forward_pdf_class", "self_loop_pdf_class", "transitions")

    def __init__(self, forward_pdf_class=kNoPdf, self_loop_pdf_class=None, transitions=None):
        self.forward_pdf_class = forward_pdf_class
        self.self_loop_pdf_class = (forward_pdf_class if self_loop_pdf_class is None
                                    else self_loop_pdf_class)
        self.transitions = [] if transitions is None else transitions

    def __eq__(self, other):
        return (isinstance(other, HmmState)
                and self.forward_pdf_class == other.forward_pdf_class
                and self.self_loop_pdf_class == other.self_loop_pdf_class
                and self.transitions == other.transitions)

    def __repr__(self):
        return "HmmState(%d, %d, %r)" % (self.forward_pdf_class, self.self_loop_pdf_class,
                                        self.transitions)


class HmmTopology:
    """Kaldi's HmmTopology: ``phones`` (sorted), ``phone2idx`` (phone -> entry
    index, -1 where none) and ``entries`` (lists of :class:`HmmState`)."""

    __slots__ = ("phones", "phone2idx", "entries")

    def __init__(self):
        self.phones = []
        self.phone2idx = []
        self.entries = []

    @classmethod
    def read(cls, rxfilename):
        """Reads a topology file (e.g. ``lang/topo``, text) or binary object."""
        return cls().read_from(open_input(rxfilename))

    def write(self, wxfilename, binary=True):
        write_object(wxfilename, binary, self.write_to)

    def __eq__(self, other):
        return (isinstance(other, HmmTopology) and self.phones == other.phones
                and self.phone2idx == other.phone2idx and self.entries == other.entries)

    # -- queries -----------------------------------------------------------------
    def is_hmm(self):
        """True if every state's self-loop pdf-class equals its forward one."""
        return all(s.forward_pdf_class == s.self_loop_pdf_class
                   for p in self.phones for s in self.topology_for_phone(p))

    def topology_for_phone(self, phone):
        if not 0 <= phone < len(self.phone2idx) or self.phone2idx[phone] == -1:
            raise KaldiFormatError("phone %d is not covered by the topology" % phone)
        return self.entries[self.phone2idx[phone]]

    def num_pdf_classes(self, phone):
        entry = self.topology_for_phone(phone)
        return 1 + max(max(s.forward_pdf_class, s.self_loop_pdf_class) for s in entry)

    # -- I/O ---------------------------------------------------------------------
    def read_from(self, stream):
        """Kaldi's HmmTopology::Read (text or binary per ``stream.binary``)."""
        start = stream.pos
        stream.expect_token("<Topology>")
        if stream.binary:
            self._read_binary(stream)
        else:
            self._read_text(stream)
        self.check(stream.source, start)
        return self

    def _read_text(self, stream):
        self.phones, self.phone2idx, self.entries = [], [], []
        while True:
            at = stream.pos
            token = stream.read_token()
            if token == "</Topology>":
                break
            if token != "<TopologyEntry>":
                raise stream.error("expected </Topology> or <TopologyEntry>, got %s" % token, at)
            stream.expect_token("<ForPhones>")
            phones = []
            while True:
                at = stream.pos
                word = stream.read_token()
                if word == "</ForPhones>":
                    break
                try:
                    phones.append(int(word))
                except ValueError:
                    raise stream.error("expected a phone (integer) or </ForPhones>, got %s"
                                       % word, at) from None
            entry = []
            at = stream.pos
            token = stream.read_token()
            while token != "</TopologyEntry>":
                if token != "<State>":
                    raise stream.error("expected </TopologyEntry> or <State>, got %s"
                                       % token, at)
                at = stream.pos
                state = stream.read_int32()
                if state != len(entry):
                    raise stream.error("states must be numbered in order from 0: expected "
                                       "%d, got %d" % (len(entry), state), at)
                at = stream.pos
                token = stream.read_token()
                if token == "<PdfClass>":
                    hmm_state = HmmState(stream.read_int32())
                    at = stream.pos
                    token = stream.read_token()
                    if token == "<SelfLoopPdfClass>":
                        raise stream.error("pdf classes must be given by <PdfClass> or by a "
                                           "<ForwardPdfClass>/<SelfLoopPdfClass> pair", at)
                elif token == "<ForwardPdfClass>":
                    forward = stream.read_int32()
                    at = stream.pos
                    stream.expect_token("<SelfLoopPdfClass>")
                    self_loop = stream.read_int32()
                    if (forward == kNoPdf) != (self_loop == kNoPdf):
                        raise stream.error("forward and self-loop pdf classes must both be "
                                           "-1 or both be valid", at)
                    hmm_state = HmmState(forward, self_loop)
                    at = stream.pos
                    token = stream.read_token()
                else:
                    hmm_state = HmmState(kNoPdf)
                entry.append(hmm_state)
                while token == "<Transition>":
                    dst = stream.read_int32()
                    prob = stream.read_float()
                    hmm_state.transitions.append((dst, prob))
                    at = stream.pos
                    token = stream.read_token()
                if token == "<Final>":
                    raise stream.error("this is an old-format topology (<Final> in a state), "
                                       "which Kaldi no longer reads", at)
                if token != "</State>":
                    raise stream.error("expected </State>, got %s" % token, at)
                at = stream.pos
                token = stream.read_token()
            index = len(self.entries)
            self.entries.append(entry)
            for phone in phones:
                if phone <= 0:
                    raise stream.error("phones in a topology must be positive, got %d" % phone)
                if len(self.phone2idx) <= phone:
                    self.phone2idx.extend([-1] * (phone + 1 - len(self.phone2idx)))
                if self.phone2idx[phone] != -1:
                    raise stream.error("phone %d appears in more than one topology entry"
                                       % phone)
                self.phone2idx[phone] = index
                self.phones.append(phone)
        self.phones.sort()

    def _read_binary(self, stream):
        self.phones = stream.read_int_vector()
        self.phone2idx = stream.read_int_vector()
        at = stream.pos
        size = stream.read_int32()
        is_hmm = True
        if size == -1:
            is_hmm = False
            at = stream.pos
            size = stream.read_int32()
        if not 0 <= size <= len(stream.data):
            raise stream.error("invalid number of topology entries %d" % size, at)
        self.entries = []
        for _ in range(size):
            at = stream.pos
            num_states = stream.read_int32()
            if not 0 <= num_states <= len(stream.data):
                raise stream.error("invalid number of HMM states %d" % num_states, at)
            entry = []
            for _ in range(num_states):
                forward = stream.read_int32()
                self_loop = forward if is_hmm else stream.read_int32()
                at = stream.pos
                num_trans = stream.read_int32()
                if not 0 <= num_trans <= len(stream.data):
                    raise stream.error("invalid number of transitions %d" % num_trans, at)
                trans = [(stream.read_int32(), stream.read_float()) for _ in range(num_trans)]
                entry.append(HmmState(forward, self_loop, trans))
            self.entries.append(entry)
        stream.expect_token("</Topology>")

    def write_to(self, stream):
        """Kaldi's HmmTopology::Write."""
        is_hmm = self.is_hmm()
        stream.write_token("<Topology>")
        if not stream.binary:
            stream.write_raw(b"\n")
            for i, entry in enumerate(self.entries):
                stream.write_token("<TopologyEntry>")
                stream.write_raw(b"\n")
                stream.write_token("<ForPhones>")
                stream.write_raw(b"\n")
                stream.write_raw(b"".join(b"%d " % p for p, idx in enumerate(self.phone2idx)
                                          if idx == i) + b"\n")
                stream.write_token("</ForPhones>")
                stream.write_raw(b"\n")
                for j, state in enumerate(entry):
                    stream.write_token("<State>")
                    stream.write_int32(j)
                    if state.forward_pdf_class != kNoPdf:
                        if is_hmm:
                            stream.write_token("<PdfClass>")
                            stream.write_int32(state.forward_pdf_class)
                        else:
                            stream.write_token("<ForwardPdfClass>")
                            stream.write_int32(state.forward_pdf_class)
                            stream.write_token("<SelfLoopPdfClass>")
                            stream.write_int32(state.self_loop_pdf_class)
                    for dst, prob in state.transitions:
                        stream.write_token("<Transition>")
                        stream.write_int32(dst)
                        stream.write_float(prob)
                    stream.write_token("</State>")
                    stream.write_raw(b"\n")
                stream.write_token("</TopologyEntry>")
                stream.write_raw(b"\n")
        else:
            stream.write_int_vector(self.phones)
            stream.write_int_vector(self.phone2idx)
            if not is_hmm:
                stream.write_int32(-1)
            stream.write_int32(len(self.entries))
            for entry in self.entries:
                stream.write_int32(len(entry))
                for state in entry:
                    stream.write_int32(state.forward_pdf_class)
                    if not is_hmm:
                        stream.write_int32(state.self_loop_pdf_class)
                    stream.write_int32(len(state.transitions))
                    for dst, prob in state.transitions:
                        stream.write_int32(dst)
                        stream.write_float(prob)
        stream.write_token("</Topology>")
        if not stream.binary:
            stream.write_raw(b"\n")

    # -- consistency -------------------------------------------------------------
    def check(self, source=None, offset=None):
        """Kaldi's HmmTopology::Check; raises KaldiFormatError."""
        def fail(message):
            raise KaldiFormatError("invalid HMM topology: " + message, source, offset)

        if not self.entries or not self.phones or not self.phone2idx:
            fail("empty topology")
        if self.phones != sorted(set(self.phones)):
            fail("the phone list is not sorted and unique")
        seen = [False] * len(self.entries)
        for phone in self.phones:
            if not 0 <= phone < len(self.phone2idx) or \
                    not 0 <= self.phone2idx[phone] < len(self.entries):
                fail("phone %d has no valid topology entry" % phone)
            seen[self.phone2idx[phone]] = True
        for i, entry in enumerate(self.entries):
            if not seen[i]:
                fail("topology entry %d has no phones" % i)
            num_states = len(entry)
            if num_states <= 1:
                fail("entry %d has only %d state(s); it needs an emitting state and a "
                     "final state" % (i, num_states))
            if entry[-1].transitions:
                fail("entry %d: the last state must have no transitions" % i)
            if entry[-1].forward_pdf_class != kNoPdf:
                fail("entry %d: the last state must not be emitting" % i)
            has_trans_in = [False] * num_states
            pdf_classes = set()
            for j, state in enumerate(entry):
                if (state.forward_pdf_class == kNoPdf) != (state.self_loop_pdf_class == kNoPdf):
                    fail("entry %d state %d: only one of the pdf classes is -1" % (i, j))
                if state.forward_pdf_class != kNoPdf:
                    pdf_classes.add(state.forward_pdf_class)
                    pdf_classes.add(state.self_loop_pdf_class)
                total = np.float32(0)
                dsts = set()
                for dst, prob in state.transitions:
                    total = np.float32(total + np.float32(prob))
                    if not prob > 0.0:
                        fail("entry %d state %d: transition probability %g is not positive"
                             % (i, j, prob))
                    if dst == num_states - 1 and state.forward_pdf_class == kNoPdf:
                        fail("entry %d state %d: a non-emitting state may not have a "
                             "transition to the final state" % (i, j))
                    if not 0 <= dst < num_states:
                        fail("entry %d state %d: invalid destination state %d" % (i, j, dst))
                    if dst in dsts:
                        fail("entry %d state %d: duplicate transition to state %d"
                             % (i, j, dst))
                    if dst == j and state.self_loop_pdf_class == kNoPdf:
                        fail("entry %d state %d: a non-emitting state cannot have a "
                             "self-loop" % (i, j))
                    dsts.add(dst)
                    has_trans_in[dst] = True
                if j + 1 < num_states and not total > 0.0:
                    fail("entry %d state %d: a non-final state must have transitions out"
                         % (i, j))
            for j in range(1, num_states):
                if not has_trans_in[j]:
                    fail("entry %d: state %d has no input transitions" % (i, j))
            if not pdf_classes or min(pdf_classes) != 0 or \
                    max(pdf_classes) != len(pdf_classes) - 1:
                fail("entry %d: pdf classes must be contiguous and start from zero" % i)


class TransitionModel:
    """Kaldi's TransitionModel: a topology, the sorted ``tuples``
    (phone, hmm_state, forward_pdf, self_loop_pdf) that define the transition
    states (1-based), and ``log_probs`` (float32, index 0 unused, one per
    transition-id). Derived tables are rebuilt by :meth:`compute_derived`.
    """

    __slots__ = ("topo", "tuples", "log_probs", "state2id", "id2state", "id2pdf_id",
                 "num_pdfs", "non_self_loop_log_probs")

    def __init__(self):
        self.topo = HmmTopology()
        self.tuples = []
        self.log_probs = np.zeros(0, dtype=np.float32)
        self.state2id = []
        self.id2state = []
        self.id2pdf_id = []
        self.num_pdfs = 0
        self.non_self_loop_log_probs = np.zeros(0, dtype=np.float32)

    @classmethod
    def read(cls, rxfilename):
        return cls().read_from(open_input(rxfilename))

    def write(self, wxfilename, binary=True):
        write_object(wxfilename, binary, self.write_to)

    # -- I/O ---------------------------------------------------------------------
    def read_from(self, stream):
        """Kaldi's TransitionModel::Read; returns self."""
        start = stream.pos
        stream.expect_token("<TransitionModel>")
        self.topo = HmmTopology().read_from(stream)
        at = stream.pos
        token = stream.read_token()
        if token not in ("<Triples>", "<Tuples>"):
            raise stream.error("expected <Triples> or <Tuples>, got %s" % token, at)
        at = stream.pos
        size = stream.read_int32()
        if not 0 <= size <= len(stream.data):
            raise stream.error("invalid number of transition-model tuples %d" % size, at)
        tuples = []
        four = token == "<Tuples>"
        for _ in range(size):
            phone = stream.read_int32()
            hmm_state = stream.read_int32()
            forward = stream.read_int32()
            self_loop = stream.read_int32() if four else forward
            tuples.append((phone, hmm_state, forward, self_loop))
        self.tuples = tuples
        at = stream.pos
        token = stream.read_token()
        if token not in ("</Triples>", "</Tuples>"):
            raise stream.error("expected </Triples> or </Tuples>, got %s" % token, at)
        self.compute_derived(stream.source, start)
        stream.expect_token("<LogProbs>")
        self.log_probs = stream.read_vector(np.float32)
        stream.expect_token("</LogProbs>")
        stream.expect_token("</TransitionModel>")
        self.compute_derived_of_probs()
        self.check(stream.source, start)
        return self

    def write_to(self, stream):
        """Kaldi's TransitionModel::Write."""
        is_hmm = self.topo.is_hmm()
        text = not stream.binary
        stream.write_token("<TransitionModel>")
        if text:
            stream.write_raw(b"\n")
        self.topo.write_to(stream)
        stream.write_token("<Triples>" if is_hmm else "<Tuples>")
        stream.write_int32(len(self.tuples))
        if text:
            stream.write_raw(b"\n")
        for phone, hmm_state, forward, self_loop in self.tuples:
            stream.write_int32(phone)
            stream.write_int32(hmm_state)
            stream.write_int32(forward)
            if not is_hmm:
                stream.write_int32(self_loop)
            if text:
                stream.write_raw(b"\n")
        stream.write_token("</Triples>" if is_hmm else "</Tuples>")
        if text:
            stream.write_raw(b"\n")
        stream.write_token("<LogProbs>")
        if text:
            stream.write_raw(b"\n")
        stream.write_vector(self.log_probs)
        stream.write_token("</LogProbs>")
        if text:
            stream.write_raw(b"\n")
        stream.write_token("</TransitionModel>")
        if text:
            stream.write_raw(b"\n")

    # -- derived tables ----------------------------------------------------------
    def compute_derived(self, source=None, offset=None):
        """Kaldi's ComputeDerived: transition-state -> first transition-id,
        transition-id -> transition-state and -> pdf-id, and num_pdfs."""
        state2id = [0] * (len(self.tuples) + 2)
        cur = 1
        num_pdfs = 0
        for tstate in range(1, len(self.tuples) + 2):
            state2id[tstate] = cur
            if tstate <= len(self.tuples):
                phone, hmm_state, forward, self_loop = self.tuples[tstate - 1]
                num_pdfs = max(num_pdfs, 1 + forward, 1 + self_loop)
                entry = self._entry(phone, source, offset)
                if not 0 <= hmm_state < len(entry):
                    raise KaldiFormatError("transition-model tuple %d refers to HMM state %d "
                                           "of phone %d, which has %d states"
                                           % (tstate, hmm_state, phone, len(entry)),
                                           source, offset)
                cur += len(entry[hmm_state].transitions)
        id2state = [0] * cur
        id2pdf = [0] * cur
        for tstate in range(1, len(self.tuples) + 1):
            phone, hmm_state, forward, self_loop = self.tuples[tstate - 1]
            trans = self.topo.topology_for_phone(phone)[hmm_state].transitions
            for index in range(state2id[tstate + 1] - state2id[tstate]):
                tid = state2id[tstate] + index
                id2state[tid] = tstate
                id2pdf[tid] = self_loop if trans[index][0] == hmm_state else forward
        self.state2id, self.id2state, self.id2pdf_id = state2id, id2state, id2pdf
        self.num_pdfs = num_pdfs

    def _entry(self, phone, source, offset):
        topo = self.topo
        if not 0 <= phone < len(topo.phone2idx) or topo.phone2idx[phone] == -1:
            raise KaldiFormatError("transition-model tuple names phone %d, which the "
                                   "topology does not cover" % phone, source, offset)
        return topo.entries[topo.phone2idx[phone]]

    def compute_derived_of_probs(self):
        """Kaldi's ComputeDerivedOfProbs: log(1 - self-loop prob) per state."""
        out = np.zeros(self.num_transition_states() + 1, dtype=np.float32)
        with np.errstate(over="ignore"):
            for tstate in range(1, self.num_transition_states() + 1):
                tid = self.self_loop_of(tstate)
                if tid == 0:
                    continue
                self_loop_prob = np.float32(np.exp(np.float32(self.log_probs[tid])))
                non_self_loop = np.float32(1.0 - float(self_loop_prob))
                if not non_self_loop > 0.0:
                    non_self_loop = np.float32(1.0e-10)
                out[tstate] = np.float32(np.log(non_self_loop))
        self.non_self_loop_log_probs = out

    def check(self, source=None, offset=None):
        """Kaldi's TransitionModel::Check; raises KaldiFormatError."""
        def fail(message):
            raise KaldiFormatError("invalid transition model: " + message, source, offset)

        if self.num_transition_ids() == 0 or self.num_transition_states() == 0:
            fail("no transitions")
        if any(self.tuples[i] >= self.tuples[i + 1] for i in range(len(self.tuples) - 1)):
            fail("the tuples are not sorted and unique")
        if self.log_probs.shape[0] != self.num_transition_ids() + 1:
            fail("there are %d log-probs, expected %d (one per transition-id plus one)"
                 % (self.log_probs.shape[0], self.num_transition_ids() + 1))
        probs = self.log_probs[1:]
        if not np.all(np.isfinite(probs)) or np.any(probs > 0.0):
            fail("log-probs must be finite and not positive")

    # -- queries (Kaldi's names) -------------------------------------------------
    def num_transition_ids(self):
        return len(self.id2state) - 1 if self.id2state else 0

    def num_transition_states(self):
        return len(self.tuples)

    def num_phones(self):
        return self.topo.phones[-1] if self.topo.phones else 0

    def is_hmm(self):
        return self.topo.is_hmm()

    def transition_id_to_transition_state(self, tid):
        return self.id2state[tid]

    def transition_id_to_transition_index(self, tid):
        return tid - self.state2id[self.id2state[tid]]

    def transition_id_to_pdf(self, tid):
        return self.id2pdf_id[tid]

    def transition_id_to_phone(self, tid):
        return self.tuples[self.id2state[tid] - 1][0]

    def transition_id_to_hmm_state(self, tid):
        return self.tuples[self.id2state[tid] - 1][1]

    def transition_state_to_phone(self, tstate):
        return self.tuples[tstate - 1][0]

    def transition_state_to_hmm_state(self, tstate):
        return self.tuples[tstate - 1][1]

    def transition_state_to_forward_pdf(self, tstate):
        return self.tuples[tstate - 1][2]

    def transition_state_to_self_loop_pdf(self, tstate):
        return self.tuples[tstate - 1][3]

    def pair_to_transition_id(self, tstate, index):
        return self.state2id[tstate] + index

    def num_transition_indices(self, tstate):
        return self.state2id[tstate + 1] - self.state2id[tstate]

    def is_self_loop(self, tid):
        tstate = self.id2state[tid]
        phone, hmm_state = self.tuples[tstate - 1][:2]
        index = tid - self.state2id[tstate]
        return self.topo.topology_for_phone(phone)[hmm_state].transitions[index][0] == hmm_state

    def is_final(self, tid):
        tstate = self.id2state[tid]
        phone, hmm_state = self.tuples[tstate - 1][:2]
        index = tid - self.state2id[tstate]
        entry = self.topo.topology_for_phone(phone)
        return entry[hmm_state].transitions[index][0] == len(entry) - 1

    def self_loop_of(self, tstate):
        """The self-loop transition-id of a transition state, or 0 if none."""
        phone, hmm_state = self.tuples[tstate - 1][:2]
        for index, (dst, _) in enumerate(
                self.topo.topology_for_phone(phone)[hmm_state].transitions):
            if dst == hmm_state:
                return self.state2id[tstate] + index
        return 0

    def get_transition_log_prob(self, tid):
        return float(self.log_probs[tid])

    def get_transition_prob(self, tid):
        return float(np.float32(math.exp(float(self.log_probs[tid]))))

    def get_non_self_loop_log_prob(self, tstate):
        return float(self.non_self_loop_log_probs[tstate])

    def get_transition_log_prob_ignoring_self_loops(self, tid):
        return float(np.float32(self.log_probs[tid]
                                - self.non_self_loop_log_probs[self.id2state[tid]]))
