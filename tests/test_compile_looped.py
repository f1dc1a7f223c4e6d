"""Looped computations: pynnet3.driver.compile_looped, pynnet3.optimize.looped_optimizer and
pynnet3.compute.decodable_simple_looped.

- Kaldi's numbers: for the GRU model (recurrent, no i-vectors), the looped
  decodable's output (extra-left-context-initial 0, acoustic scale 1) equals
  Kaldi's ``nnet3-compute --frames-per-chunk=1000`` output (one chunk per
  utterance, ``compute.apply_exp.ark``, after exp), for chunk sizes 20 and 1.
- Whole-utterance equivalence: for models without right recurrence
  (tdnn_lstm with a batch i-vector, TDNN-F with frame subsampling 3), the
  looped output equals the non-looped computation over the whole utterance
  with the same edge padding.
- Streaming: DecodableNnetLoopedOnline fed in pieces of random size gives the
  same frames as the whole-utterance decodable, and only when their right
  context has arrived.
- Shape: the looped computation ends in kGotoLabel pointing at the single
  kNoOperationLabel, preceded by the matrix swaps and the next chunk's inputs.
- The requests, the i-vector period rewrite and the chunk size follow Kaldi's
  rules.
"""

import numpy as np
import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.compiler.computation import CommandType
from pynnet3.model.context import compute_simple_nnet_context
from pynnet3.driver.compile_looped import (NnetSimpleLoopedComputationOptions, compile_looped,
                                    create_looped_computation_request,
                                    extrapolate_computation_request, get_chunk_size,
                                    modify_nnet_ivector_period)
from pynnet3.compute.computer import NnetComputer
from pynnet3.compute.decodable_simple_looped import (DecodableNnetLoopedOnline, DecodableNnetSimpleLooped,
                                    DecodableNnetSimpleLoopedInfo)
from pynnet3.compute.utterance import prepare_nnet_for_compute
from pynnet3.common.index import Index
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize.computation_edit import fix_goto_label
from pynnet3.optimize.options import NnetOptimizeOptions
from test_computer_kaldi import assert_close, read_ark

T = CommandType
GRU = (KALDI_REF / "models" / "gru") if (KALDI_REF / "models" / "gru").is_dir() \
    else TEST_DATA / "looped" / "gru"


def _model(name):
    folder = KALDI_REF / "models" / name
    if not folder.is_dir():
        pytest.skip("kaldi-ref models/%s not found" % name)
    return folder


def _load(folder):
    return prepare_nnet_for_compute(Nnet.read(str(folder / "model.raw")))


def _info(nnet, **opts):
    opts.setdefault("acoustic_scale", 1.0)
    return DecodableNnetSimpleLoopedInfo(NnetSimpleLoopedComputationOptions(**opts), nnet)


@pytest.fixture(scope="module")
def gru_info():
    return _info(_load(GRU), frames_per_chunk=20)


def test_looped_gru_equals_kaldis_whole_utterance_output(gru_info):
    kaldi = read_ark(GRU / "compute.apply_exp.ark")
    for utt, feats in read_ark(GRU / "feats.ark").items():
        ours = DecodableNnetSimpleLooped(gru_info, feats).get_all_outputs()
        assert_close(np.exp(ours), kaldi[utt], "looped output of %s" % utt)


def test_frame_by_frame_chunks_equal_kaldis_output():
    info = _info(_load(GRU), frames_per_chunk=1)
    assert info.frames_per_chunk == 1
    kaldi = read_ark(GRU / "compute.apply_exp.ark")
    feats = read_ark(GRU / "feats.ark")
    for utt in ("utt1", "utt2"):
        ours = DecodableNnetSimpleLooped(info, feats[utt]).get_all_outputs()
        assert_close(np.exp(ours), kaldi[utt], "frame-by-frame output of %s" % utt)


def _whole_utterance(nnet, feats, left, right, sf, ivector=None):
    """The non-looped computation over the whole utterance, inputs padded by
    edge copies to [-left, N + right), outputs every ``sf`` frames."""
    n = feats.shape[0]
    inputs = [IoSpecification("input", [Index(0, t, 0) for t in range(-left, n + right)])]
    if ivector is not None:
        inputs.append(IoSpecification("ivector", [Index(0, 0, 0)]))
    request = ComputationRequest(inputs=inputs, outputs=[
        IoSpecification("output", [Index(0, t, 0) for t in range(0, n, sf)])])
    computer = NnetComputer(compile(nnet, request), nnet)
    computer.accept_input("input", feats[np.clip(np.arange(-left, n + right), 0, n - 1)])
    if ivector is not None:
        computer.accept_input("ivector", ivector[None])
    computer.run()
    return computer.get_output("output")


@pytest.mark.parametrize("name,frames_per_chunk,sf,initial", [
    ("tdnn_lstm", 20, 1, 0), ("tdnn_lstm", 7, 1, 4), ("tdnnf_chain", 30, 3, 0)])
def test_looped_equals_the_whole_utterance_computation(name, frames_per_chunk, sf, initial):
    folder = _model(name)
    nnet = _load(folder)
    reference_nnet = nnet.copy()      # the info rewrites the i-vector period in place
    info = _info(nnet, frames_per_chunk=frames_per_chunk, frame_subsampling_factor=sf,
                 extra_left_context_initial=initial)
    _, right = compute_simple_nnet_context(reference_nnet)
    rng = np.random.default_rng(0)
    dim = reference_nnet.input_dim("ivector")
    for utt, feats in list(read_ark(folder / "feats.ark").items())[:3]:
        ivector = rng.standard_normal(dim).astype(np.float32) if dim > 0 else None
        ours = DecodableNnetSimpleLooped(info, feats, ivector=ivector).get_all_outputs()
        want = _whole_utterance(reference_nnet, feats, info.frames_left_context, right, sf,
                                ivector)
        assert_close(ours, want, "%s %s" % (name, utt))


def test_streaming_gives_the_same_frames_when_they_are_ready(gru_info):
    feats = read_ark(GRU / "feats.ark")["utt3"]
    want = DecodableNnetSimpleLooped(gru_info, feats).get_all_outputs()
    stream = DecodableNnetLoopedOnline(gru_info)
    rng = np.random.default_rng(1)
    got, pos = [], 0
    while pos < feats.shape[0]:
        step = int(rng.integers(1, 30))
        stream.accept_features(feats[pos:pos + step])
        pos += step
        ready = stream.num_frames_ready()
        # a chunk is ready once its right context has arrived
        expect = max(0, min(pos, feats.shape[0]) - gru_info.frames_right_context) \
            // gru_info.frames_per_chunk * gru_info.frames_per_chunk
        assert ready == expect
        got.append(stream.get_new_outputs())
    stream.input_finished()
    assert stream.num_frames_ready() == feats.shape[0]
    assert stream.is_last_frame(feats.shape[0] - 1)
    got.append(stream.get_new_outputs())
    np.testing.assert_array_equal(np.concatenate(got), want)


def test_looped_computation_has_kaldis_shape(gru_info):
    commands = gru_info.computation.commands
    labels = [i for i, c in enumerate(commands) if c.command_type == T.kNoOperationLabel]
    assert len(labels) == 1
    assert commands[-1].command_type == T.kGotoLabel and commands[-1].arg1 == labels[0]
    # before the goto: the swaps handing state to the next period, before them
    # the next chunk's input and the segment marker
    tail = [c.command_type for c in commands[labels[0]:-1]]
    last_marker = max(i for i, t in enumerate(tail) if t == T.kNoOperationMarker)
    after = tail[last_marker + 1:]
    assert T.kAcceptInput in after and T.kSwapMatrix in after
    assert after.index(T.kSwapMatrix) > max(i for i, t in enumerate(after)
                                            if t == T.kAcceptInput)
    assert all(t == T.kSwapMatrix for t in after[after.index(T.kSwapMatrix):])
    assert not any(c.command_type in (T.kCompressMatrix, T.kBackprop) for c in commands)


def test_looped_compilation_passes_the_checker():
    nnet = _load(_model("tdnn_lstm"))
    left, right = compute_simple_nnet_context(nnet)
    modify_nnet_ivector_period(20, nnet)
    requests = create_looped_computation_request(nnet, 20, 1, 20, left, right, 1)
    computation = compile_looped(nnet, NnetOptimizeOptions(), *requests, check=True)
    assert computation.commands[-1].command_type == T.kGotoLabel


def test_fix_goto_label_finds_the_label_again(gru_info):
    import copy
    computation = copy.deepcopy(gru_info.computation)
    label = computation.commands[-1].arg1
    computation.commands[-1].arg1 = 0
    fix_goto_label(computation)
    assert computation.commands[-1].arg1 == label


def test_requests_follow_kaldis_rules():
    nnet = _load(_model("tdnn_lstm"))
    left, right = compute_simple_nnet_context(nnet)
    assert get_chunk_size(nnet, 3, 20) == 21
    modify_nnet_ivector_period(20, nnet)
    # Round(ivector, 20) makes the network's modulus 20
    assert nnet.modulus() == 20 and get_chunk_size(nnet, 3, 20) == 60
    assert "Round(ivector, 20)" in "\n".join(nnet.get_config_lines())
    assert "ReplaceIndex" not in "\n".join(nnet.get_config_lines())
    r1, r2, r3 = create_looped_computation_request(nnet, 20, 1, 20, left, right, 1)
    assert [i.t for i in r1.inputs[0].indexes] == list(range(-left, 20 + right))
    assert [i.t for i in r2.inputs[0].indexes] == list(range(20 + right, 40 + right))
    assert [i.t for i in r1.outputs[0].indexes] == list(range(20))
    assert [i.t for i in r3.outputs[0].indexes] == list(range(40, 60))
    # each chunk asks only for the i-vectors earlier chunks did not ask for
    assert [i.t for i in r1.inputs[1].indexes] == [-20, 0, 20]
    assert [i.t for i in r2.inputs[1].indexes] == [40]
    r4 = extrapolate_computation_request(r2, r3)
    assert [i.t for i in r4.outputs[0].indexes] == list(range(60, 80))
    assert extrapolate_computation_request(r1, r2) is None     # chunk 1 is longer


def test_online_ivectors_are_taken_per_chunk():
    folder = _model("tdnn_lstm")
    info = _info(_load(folder), frames_per_chunk=20)
    feats = read_ark(folder / "feats.ark")["utt3"]
    online = read_ark(folder / "online-ivectors.ark")["utt3"]
    got = DecodableNnetSimpleLooped(info, feats, online_ivectors=online,
                                    online_ivector_period=10).get_all_outputs()
    # chunk k takes the i-vector of its last input frame (row frame // 10):
    # the same as a batch i-vector equal to that row, chunk by chunk
    for k in range(3):
        end = info.chunk_input_range(k)[1]
        row = online[min(end // 10, len(online) - 1)]
        batch = DecodableNnetSimpleLooped(info, feats, ivector=row).get_all_outputs()
        if k == 0:
            np.testing.assert_array_equal(got[:20], batch[:20])
        else:
            assert not np.array_equal(got[20 * k:20 * (k + 1)], batch[20 * k:20 * (k + 1)])
    # the streaming decodable with constant i-vector rows = the batch i-vector
    stream = DecodableNnetLoopedOnline(info)
    stream.accept_features(feats, np.tile(online[0], (len(feats), 1)))
    stream.input_finished()
    batch = DecodableNnetSimpleLooped(info, feats, ivector=online[0]).get_all_outputs()
    np.testing.assert_array_equal(stream.get_new_outputs(), batch)


def test_am_decodable_subtracts_priors_and_maps_transition_ids():
    from pynnet3.compute.decodable_simple_looped import DecodableAmNnetSimpleLooped
    from pynnet3.model.am import read_mdl
    folder = _model("tdnn_lda")
    trans_model, am = read_mdl(str(folder / "final.mdl"))
    prepare_nnet_for_compute(am.nnet)
    raw_nnet = am.nnet.copy()
    opts = dict(frames_per_chunk=20, acoustic_scale=0.5)
    with_priors = _info(am, **opts)
    without = _info(raw_nnet, **opts)
    feats = read_ark(folder / "feats.ark")["utt2"]
    ivectors = read_ark(folder / "online-ivectors.ark")["utt2"]
    decodable = DecodableAmNnetSimpleLooped(with_priors, trans_model, feats,
                                            online_ivectors=ivectors, online_ivector_period=10)
    raw = DecodableNnetSimpleLooped(without, feats, online_ivectors=ivectors,
                                    online_ivector_period=10).get_all_outputs()
    log_priors = np.log(np.asarray(am.priors, np.float32))
    assert decodable.num_frames_ready() == feats.shape[0]
    assert decodable.num_indices() == trans_model.num_transition_ids()
    for frame in range(0, feats.shape[0], 7):
        for tid in range(1, trans_model.num_transition_ids() + 1, 5):
            pdf = trans_model.transition_id_to_pdf(tid)
            want = (raw[frame, pdf] / np.float32(0.5) - log_priors[pdf]) * np.float32(0.5)
            assert abs(decodable.log_likelihood(frame, tid) - want) <= 1e-4 * max(1, abs(want))
    assert decodable.is_last_frame(feats.shape[0] - 1) and not decodable.is_last_frame(0)
