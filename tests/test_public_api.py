"""The public API's safe defaults, on the shipped examples:

- the top-level namespace is exactly the documented list (no internals);
- streaming (DecodableNnetLoopedOnline) with the documented call sequence
  (accept_features ...; input_finished(); get_new_outputs()) gives Kaldi's
  nnet3-compute numbers within 1e-5, every frame exactly once, whatever the
  piece size; nothing is scaled unless asked by name
  (get_new_scaled_log_likelihoods); the network is prepared on a copy as
  Kaldi's tools prepare it, the caller's network untouched;
- library warnings are Kaldi-style lines, and stay out of the way once the
  program configures logging.
"""

import subprocess
import sys

import numpy as np
import pytest

import pynnet3
from pynnet3 import examples

PUBLIC = ["AmNnetSimple", "ComputationRequest", "DecodableNnetLoopedOnline", "Decoder",
          "Nnet", "NnetComputer", "PynnetError", "TableWriter", "compile", "compute_table",
          "compute_utterance", "compute_xvector", "decode", "draw", "nnet_info", "open_table",
          "prepare_for_test", "read_object", "read_table", "write_object", "write_table"]


def test_top_level_namespace_is_the_documented_list():
    assert sorted(pynnet3.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(pynnet3, name) is not None
    for internal in ("Index", "Cindex", "Descriptor", "scale_nnet", "vectorize_nnet",
                     "NnetOptimizeOptions", "CachingOptimizingCompiler", "IoSpecification",
                     "DecodableNnetSimpleLooped", "KaldiFormatError"):
        with pytest.raises(AttributeError):
            getattr(pynnet3, internal)
    assert pynnet3.examples.path("feats.ark").endswith("feats.ark")


@pytest.fixture(scope="module")
def example():
    read = lambda name: dict(pynnet3.read_table("ark:" + examples.path(name)))  # noqa: E731
    return {"nnet": pynnet3.Nnet.read(examples.path("tdnn_lda.raw")),
            "feats": read("feats.ark"), "ivectors": read("ivectors.ark"),
            "kaldi": read("compute.ivectors.ark")}


def _stream(stream, feats, ivector, piece):
    pieces = []
    for start in range(0, len(feats), piece):
        stream.accept_features(feats[start:start + piece], ivector)
        pieces.append(stream.get_new_outputs())
    stream.input_finished()
    pieces.append(stream.get_new_outputs())
    return pieces


@pytest.mark.parametrize("piece", [1, 7, 25, 1000])
def test_streaming_gives_kaldis_numbers_with_the_documented_calls(example, piece):
    info = None
    for utt, feats in example["feats"].items():
        stream = pynnet3.DecodableNnetLoopedOnline(info or example["nnet"], **(
            {} if info else {"frames_per_chunk": 20}))
        info = stream.info
        pieces = _stream(stream, feats, example["ivectors"][utt], piece)
        output = np.concatenate(pieces)
        assert output.shape == example["kaldi"][utt].shape
        assert np.abs(output - example["kaldi"][utt]).max() <= 1e-5, utt
        # nothing is delivered twice, nothing more after the end
        assert stream.get_new_outputs().shape == (0, 30)
        assert stream.is_last_frame(len(feats) - 1)


def test_frames_wait_for_right_context_then_come_with_input_finished(example):
    feats, ivector = example["feats"]["utt1"], example["ivectors"]["utt1"]
    stream = pynnet3.DecodableNnetLoopedOnline(example["nnet"], frames_per_chunk=20)
    stream.accept_features(feats, ivector)
    assert len(stream.get_new_outputs()) == 0          # 7 frames, right context 8
    stream.input_finished()
    first = stream.get_new_outputs()
    assert len(first) == 7
    # the flag does the same in one call; one i-vector per frame as well
    one_call = pynnet3.DecodableNnetLoopedOnline(stream.info)
    one_call.accept_features(feats, np.tile(ivector, (len(feats), 1)), input_finished=True)
    np.testing.assert_array_equal(one_call.get_new_outputs(), first)


def test_scaled_log_likelihoods_only_by_name(example):
    am = pynnet3.AmNnetSimple.read(examples.path("final.mdl"))
    feats, ivector = example["feats"]["utt2"], example["ivectors"]["utt2"]
    kaldi = example["kaldi"]["utt2"]
    stream = pynnet3.DecodableNnetLoopedOnline(am, frames_per_chunk=20)
    assert stream.info.opts.acoustic_scale == pytest.approx(0.1)   # Kaldi's default
    stream.accept_features(feats, ivector, input_finished=True)
    output = stream.get_new_outputs()           # the network's numbers, priors or not
    assert np.abs(output - kaldi).max() <= 1e-5
    stream = pynnet3.DecodableNnetLoopedOnline(am, frames_per_chunk=20, acoustic_scale=0.5)
    stream.accept_features(feats, ivector, input_finished=True)
    scaled = stream.get_new_scaled_log_likelihoods()
    want = 0.5 * (kaldi - np.log(am.priors))
    assert np.abs(scaled - want).max() <= 1e-5
    assert stream.get_new_outputs().shape == (0, 30)       # one position for both


def test_the_callers_network_is_left_alone(example):
    nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
    before = nnet.to_bytes()
    stream = pynnet3.DecodableNnetLoopedOnline(nnet, frames_per_chunk=20)
    assert stream.info.nnet is not nnet and nnet.to_bytes() == before
    # prepared=True uses it as given (and, as Kaldi, changes its i-vector period)
    prepared = pynnet3.prepare_for_test(nnet)
    stream = pynnet3.DecodableNnetLoopedOnline(prepared, frames_per_chunk=20, prepared=True)
    assert stream.info.nnet is prepared


def test_decoder_leaves_the_callers_model_alone(example):
    am = pynnet3.AmNnetSimple.read(examples.path("final.mdl"))
    before = am.nnet.to_bytes()
    decoder = pynnet3.Decoder(am, examples.path("HCLG.fst"), beam=8, lattice_beam=4,
                              max_active=200)
    online = dict(pynnet3.read_table("ark:" + examples.path("online-ivectors.ark")))
    result = decoder(example["feats"]["utt2"], online_ivectors=online["utt2"],
                     online_ivector_period=10)
    assert result.words == [9] and am.nnet.to_bytes() == before
    with pytest.raises(pynnet3.PynnetError, match="no transition model"):
        pynnet3.Decoder(pynnet3.AmNnetSimple(am.nnet, am.priors), examples.path("HCLG.fst"))


def test_streaming_errors(example):
    feats, ivector = example["feats"]["utt1"], example["ivectors"]["utt1"]
    stream = pynnet3.DecodableNnetLoopedOnline(example["nnet"], frames_per_chunk=20)
    with pytest.raises(pynnet3.PynnetError, match="Neural net expects iVectors"):
        stream.accept_features(feats)
    with pytest.raises(pynnet3.PynnetError, match="Input feature dimension mismatch"):
        stream.accept_features(feats[:, :5], ivector)
    with pytest.raises(pynnet3.PynnetError, match="Ivector feature dimension mismatch"):
        stream.accept_features(feats, ivector[:3])
    stream.accept_features(feats, ivector, input_finished=True)
    with pytest.raises(pynnet3.PynnetError, match="after input_finished"):
        stream.accept_features(feats, ivector)
    with pytest.raises(pynnet3.PynnetError, match="unknown option.*frames_per_chunck"):
        pynnet3.DecodableNnetLoopedOnline(example["nnet"], frames_per_chunck=20)
    with pytest.raises(pynnet3.PynnetError, match="shared DecodableNnetSimpleLoopedInfo"):
        pynnet3.DecodableNnetLoopedOnline(stream.info, frames_per_chunk=20)
    waiting = pynnet3.DecodableNnetLoopedOnline(stream.info)
    waiting.accept_features(feats, ivector)
    with pytest.raises(pynnet3.PynnetError, match="not ready.*input_finished"):
        waiting.get_output_for_frame(0)


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)


XVECTOR = ("import pynnet3; from pynnet3 import examples; "
           "feats = next(pynnet3.read_table('ark:' + examples.path('xvector-feats.ark')))[1]; "
           "pynnet3.compute_xvector(examples.path('xvector.raw'), feats)")


def test_library_warnings_are_kaldi_lines():
    proc = _run(XVECTOR)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 7
    assert all(line.startswith("WARNING (-c[5.5]:check():nnet.py:") and
               line.endswith(" is never used to compute any output.") for line in lines)
    # INFO (Kaldi's LOG) lines only when asked for
    proc = _run("import logging; logging.getLogger('pynnet3').setLevel(logging.INFO); "
                + XVECTOR)
    assert any(line.startswith("LOG (-c[5.5]:") and "orphan" in line
               for line in proc.stderr.splitlines())
    # a program with its own logging gets the records once, in its format
    proc = _run("import logging; logging.basicConfig(format='mine: %(message)s'); " + XVECTOR)
    lines = proc.stderr.splitlines()
    assert len(lines) == 7 and all(line.startswith("mine: Node ") for line in lines)
