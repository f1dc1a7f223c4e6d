"""nnet3 acoustic models (.mdl): TransitionModel + AmNnetSimple, byte for byte.

For each model Kaldi built with a transition model (kaldi-ref models/tdnn_lda,
models/tdnnf_chain; tests/data/mdl/tdnn_lda when the oracle is absent):
binary->binary equals Kaldi's nnet3-am-copy output, text->binary equals
Kaldi's copy of the text file, binary->text equals Kaldi's text model,
``--raw=true`` equals Kaldi's raw copy and the
info equals ``nnet3-am-info``.
"""

import struct

import numpy as np
import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.errors import KaldiFormatError
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.model.am import AmNnetSimple, mdl_to_bytes, read_mdl, read_mdl_from, write_mdl
from pynnet3.hmm.transition import HmmState, HmmTopology, TransitionModel

MODELS = sorted(p.parent for p in KALDI_REF.glob("models/*/final.mdl")) + \
    sorted(p.parent for p in TEST_DATA.glob("mdl/*/final.mdl"))


def _id(path):
    return "/".join(path.parts[-2:])


@pytest.fixture(scope="module", params=MODELS, ids=_id)
def model_dir(request):
    return request.param


def test_binary_to_binary(model_dir):
    tm, am = read_mdl(str(model_dir / "final.mdl"))
    assert mdl_to_bytes(tm, am, True) == (model_dir / "kaldi-copy.bin-to-bin.mdl").read_bytes()


def test_text_to_binary(model_dir):
    tm, am = read_mdl(str(model_dir / "final.txt.mdl"))
    assert mdl_to_bytes(tm, am, True) == (model_dir / "kaldi-copy.txt-to-bin.mdl").read_bytes()


def test_binary_to_text(model_dir):
    tm, am = read_mdl(str(model_dir / "final.mdl"))
    assert mdl_to_bytes(tm, am, False) == (model_dir / "final.txt.mdl").read_bytes()


def test_write_mdl_writes_the_same_bytes(model_dir, tmp_path):
    # (No Kaldi text->text .mdl exists to compare with, and batch-norm
    # statistics are re-derived on every read, so repeated copies need not be
    # fixed points; the file writer must equal the in-memory serialization.)
    for src, binary in (("final.mdl", True), ("final.txt.mdl", False)):
        tm, am = read_mdl(str(model_dir / src))
        write_mdl(str(tmp_path / "m"), tm, am, binary)
        assert (tmp_path / "m").read_bytes() == mdl_to_bytes(tm, am, binary)


def test_raw_network_and_info(model_dir):
    tm, am = read_mdl(str(model_dir / "final.mdl"))
    stream = OutputStream(True)
    stream.write_header()
    am.nnet.write_to(stream)
    assert stream.getvalue() == (model_dir / "kaldi-am-copy.raw.raw").read_bytes()
    assert am.info() == (model_dir / "am-info.txt").read_text()


def test_priors_and_context(model_dir):
    tm, am = read_mdl(str(model_dir / "final.mdl"))
    info = (model_dir / "am-info.txt").read_text()
    assert "num-pdfs: %d" % am.num_pdfs() in info
    assert am.priors.dtype == np.float32 and am.priors.shape == (am.num_pdfs(),)
    assert "left-context: %d\nright-context: %d\n" % (am.left_context, am.right_context) in info
    assert tm.num_pdfs == am.num_pdfs()


def test_topology_file_equals_the_models_topology(model_dir):
    topo_path = model_dir / "topo"
    if not topo_path.exists():
        pytest.skip("no topo file")
    tm, _ = read_mdl(str(model_dir / "final.mdl"))
    topo = HmmTopology.read(str(topo_path))
    assert topo == tm.topo


def test_transition_model_tables_tdnn_lda():
    path = (KALDI_REF / "models/tdnn_lda/final.mdl")
    if not path.exists():
        path = TEST_DATA / "mdl/tdnn_lda/final.mdl"
    tm, _ = read_mdl(str(path))
    # 10 phones x 3 emitting states (self-loop + forward each): 60 transition-ids.
    assert tm.is_hmm() and tm.num_transition_states() == 30 and tm.num_transition_ids() == 60
    assert tm.num_phones() == 10 and tm.num_pdfs == 30
    for tid in range(1, 61):
        tstate = tm.transition_id_to_transition_state(tid)
        assert tstate == (tid + 1) // 2
        assert tm.is_self_loop(tid) == (tid % 2 == 1)
        assert tm.transition_id_to_pdf(tid) == tm.transition_state_to_forward_pdf(tstate)
        assert tm.transition_id_to_phone(tid) == (tstate - 1) // 3 + 1
        assert tm.pair_to_transition_id(tstate, tm.transition_id_to_transition_index(tid)) == tid
    assert abs(tm.get_transition_prob(1) - 0.75) < 1e-6
    assert abs(tm.get_non_self_loop_log_prob(1) - np.log(0.25)) < 1e-6
    assert abs(tm.get_transition_log_prob_ignoring_self_loops(2)) < 1e-6
    assert tm.is_final(6) and not tm.is_final(4)


# -- transition-model format variants ------------------------------------------

def _topology(non_hmm):
    topo = HmmTopology()
    topo.phones = [1, 2]
    topo.phone2idx = [-1, 0, 0]
    if non_hmm:
        topo.entries = [[HmmState(0, 1, [(0, 0.5), (1, 0.5)]), HmmState(-1)]]
    else:
        topo.entries = [[HmmState(0, None, [(0, 0.5), (1, 0.5)]), HmmState(-1)]]
    return topo


def _transition_model(non_hmm):
    tm = TransitionModel()
    tm.topo = _topology(non_hmm)
    tm.tuples = [(1, 0, 0, 1 if non_hmm else 0), (2, 0, 2, 3 if non_hmm else 2)]
    tm.compute_derived()
    tm.log_probs = np.log(np.array([1, 0.5, 0.5, 0.5, 0.5], np.float32)).astype(np.float32)
    tm.log_probs[0] = 0
    tm.compute_derived_of_probs()
    tm.check()
    return tm


def _bytes(obj, binary):
    out = OutputStream(binary)
    out.write_header()
    obj.write_to(out)
    return out.getvalue()


@pytest.mark.parametrize("non_hmm", [False, True])
@pytest.mark.parametrize("binary", [False, True])
def test_transition_model_round_trip(non_hmm, binary):
    tm = _transition_model(non_hmm)
    data = _bytes(tm, binary)
    assert (b"<Tuples>" in data) == non_hmm and (b"<Triples>" in data) == (not non_hmm)
    assert (b"<ForwardPdfClass>" in data) == (non_hmm and not binary)
    back = TransitionModel().read_from(InputStream.from_bytes(data))
    assert back.tuples == tm.tuples and back.topo == tm.topo
    assert _bytes(back, binary) == data
    assert back.id2pdf_id == ([0, 1, 0, 3, 2] if non_hmm else [0, 0, 0, 2, 2])


def test_tuples_of_an_hmm_are_written_as_triples():
    tm = _transition_model(False)
    data = _bytes(tm, True)
    # The same model stored the other accepted way: <Tuples> with 4 numbers.
    head, rest = data.split(b"<Triples> ")
    body, tail = rest.split(b"</Triples> ")
    ints = struct.unpack("<" + "xi" * 7, body)
    assert ints[0] == 2
    tuples = b"".join(b"\x04" + struct.pack("<i", v) for v in
                      (2, 1, 0, 0, 0, 2, 0, 2, 2))
    variant = head + b"<Tuples> " + tuples + b"</Tuples> " + tail
    back = TransitionModel().read_from(InputStream.from_bytes(variant))
    assert _bytes(back, True) == data


def test_text_topology_with_forward_and_self_loop_classes():
    text = (b"<Topology>\n<TopologyEntry>\n<ForPhones>\n1 2 3\n</ForPhones>\n"
            b"<State> 0 <ForwardPdfClass> 0 <SelfLoopPdfClass> 1 <Transition> 0 0.5 "
            b"<Transition> 1 0.5 </State>\n<State> 1 </State>\n</TopologyEntry>\n</Topology>\n")
    topo = HmmTopology().read_from(InputStream.from_bytes(text))
    assert not topo.is_hmm() and topo.phones == [1, 2, 3] and topo.num_pdf_classes(2) == 2
    again = _bytes(topo, False)
    assert again == (b"<Topology> \n<TopologyEntry> \n<ForPhones> \n1 2 3 \n</ForPhones> \n"
                     b"<State> 0 <ForwardPdfClass> 0 <SelfLoopPdfClass> 1 <Transition> 0 0.5 "
                     b"<Transition> 1 0.5 </State> \n<State> 1 </State> \n</TopologyEntry> \n"
                     b"</Topology> \n")
    binary = _bytes(topo, True)
    assert HmmTopology().read_from(InputStream.from_bytes(binary)) == topo


@pytest.mark.parametrize("text,message", [
    (b"<Topology> <TopologyEntry> <ForPhones> 1 </ForPhones> <State> 0 <PdfClass> 0 "
     b"<Transition> 0 0.5 <Transition> 1 0.5 </State> <State> 1 </State> </TopologyEntry> "
     b"<TopologyEntry> <ForPhones> 1 </ForPhones> <State> 0 <PdfClass> 0 <Transition> 1 1 "
     b"</State> <State> 1 </State> </TopologyEntry> </Topology>", "more than one"),
    (b"<Topology> <TopologyEntry> <ForPhones> 1 </ForPhones> <State> 0 <PdfClass> 0 "
     b"<Transition> 0 0.5 <Transition> 1 0.5 <Final> 1 </State> </TopologyEntry> </Topology>",
     "old-format"),
    (b"<Topology> <TopologyEntry> <ForPhones> 1 </ForPhones> <State> 1 </State> "
     b"</TopologyEntry> </Topology>", "in order"),
    (b"<Topology> <TopologyEntry> <ForPhones> 1 </ForPhones> <State> 0 <PdfClass> 0 "
     b"<Transition> 0 1 </State> </TopologyEntry> </Topology>", "only 1 state"),
    (b"<Topology> <TopologyEntry> <ForPhones> 1 </ForPhones> <State> 0 <PdfClass> 1 "
     b"<Transition> 0 0.5 <Transition> 1 0.5 </State> <State> 1 </State> </TopologyEntry> "
     b"</Topology>", "contiguous"),
    (b"<Topology> <TopologyEntry> <ForPhones> x </ForPhones>", "expected a phone"),
    (b"<Topology> <Foo>", "expected </Topology> or <TopologyEntry>"),
])
def test_bad_topologies(text, message):
    with pytest.raises(KaldiFormatError, match=message):
        HmmTopology().read_from(InputStream.from_bytes(text))


def test_bad_transition_models():
    good = _bytes(_transition_model(False), True)
    unsorted = good.replace(b"\x04\x01\x00\x00\x00\x04\x00\x00\x00\x00\x04\x00\x00\x00\x00"
                            b"\x04\x02\x00\x00\x00\x04\x00\x00\x00\x00\x04\x02\x00\x00\x00",
                            b"\x04\x02\x00\x00\x00\x04\x00\x00\x00\x00\x04\x02\x00\x00\x00"
                            b"\x04\x01\x00\x00\x00\x04\x00\x00\x00\x00\x04\x00\x00\x00\x00")
    assert unsorted != good
    with pytest.raises(KaldiFormatError, match="sorted"):
        TransitionModel().read_from(InputStream.from_bytes(unsorted))
    with pytest.raises(KaldiFormatError, match="expected <Triples> or <Tuples>"):
        TransitionModel().read_from(
            InputStream.from_bytes(good.replace(b"<Triples>", b"<Triplex>")))
    for cut in range(3, len(good) - 1, 7):
        with pytest.raises(KaldiFormatError):
            TransitionModel().read_from(InputStream.from_bytes(good[:cut]))
    tm = _transition_model(False)
    tm.log_probs = tm.log_probs[:-1]
    with pytest.raises(KaldiFormatError, match="log-probs"):
        TransitionModel().read_from(InputStream.from_bytes(_bytes(tm, True)))


def test_mdl_errors(tmp_path):
    model = MODELS[0]
    with pytest.raises(KaldiFormatError, match="<TransitionModel>"):
        read_mdl(str(model / "kaldi-am-copy.raw.raw"))
    data = (model / "final.mdl").read_bytes()
    for cut in (len(data) - 3, len(data) // 2, 1200):
        (tmp_path / "t.mdl").write_bytes(data[:cut])
        with pytest.raises(KaldiFormatError):
            read_mdl(str(tmp_path / "t.mdl"))


def test_am_nnet_simple_alone_round_trips(model_dir, tmp_path):
    tm, am = read_mdl(str(model_dir / "final.mdl"))
    am.write(str(tmp_path / "am"), binary=True)
    back = AmNnetSimple.read(str(tmp_path / "am"))
    assert np.array_equal(back.priors, am.priors)
    assert (back.left_context, back.right_context) == (am.left_context, am.right_context)
    stream = InputStream.from_bytes((model_dir / "final.mdl").read_bytes())
    tm2, am2 = read_mdl_from(stream)
    assert stream.at_eof()
