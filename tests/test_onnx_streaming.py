"""Streaming exports (nnet3-to-onnx --streaming=true) against pynnet3's own
looped computation (Kaldi's DecodableNnetSimpleLooped), chunk by chunk
(issue 18).

For the recurrent reference models (and the others, which the looped
computation also runs): the model stepped chunk after chunk by hand (first
call: two chunks; then one per call, the state fed back) gives, for every
chunk, pynnet3's looped output rows within 1e-4 * max(1, max|ref|); and
nnet3-compute-onnx on the streaming model writes the looped decodable's
whole-utterance outputs, with several utterances per run too.
"""

import numpy as np
import pytest

pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")

import pynnet3  # noqa: E402
from conftest import KALDI_REF, TEST_DATA  # noqa: E402
from pynnet3.bin import nnet3_compute_onnx, nnet3_to_onnx  # noqa: E402
from pynnet3.compute.decodable_simple_looped import DecodableNnetSimpleLooped, DecodableNnetSimpleLoopedInfo, looped_chunk_ivector
from pynnet3.driver.compile_looped import NnetSimpleLoopedComputationOptions
from pynnet3.compute.utterance import prepare_nnet_for_compute  # noqa: E402
from pynnet3.io.table import read_table  # noqa: E402

TOLERANCE = 1e-4

# (model, frames-per-chunk, extra-left-context-initial, frame-subsampling-factor)
SETUPS = [("gru", 6, 0, 1), ("gru", 24, 3, 1), ("tdnn_lstm", 21, 0, 1),
          ("tdnn_lstm", 21, 5, 3), ("blstm", 20, 0, 1), ("misc_layers", 10, 0, 1),
          ("tdnnf_chain", 21, 0, 3), ("cnn_tdnn_attention", 24, 0, 1)]


def _folder(name):
    for folder in (KALDI_REF / "models" / name, TEST_DATA / "looped" / name):
        if (folder / "model.raw").is_file() and (folder / "feats.ark").is_file():
            return folder
    return None


PARAMS = [pytest.param(s, id="%s-chunk%d-init%d-sub%d" % s) for s in SETUPS
          if _folder(s[0]) is not None]


def _looped(folder, frames_per_chunk, extra_left, subsampling):
    nnet = pynnet3.Nnet.read(str(folder / "model.raw"))
    prepare_nnet_for_compute(nnet)
    opts = NnetSimpleLoopedComputationOptions(
        frames_per_chunk=frames_per_chunk, extra_left_context_initial=extra_left,
        frame_subsampling_factor=subsampling, acoustic_scale=1.0)
    return DecodableNnetSimpleLoopedInfo(opts, nnet, prepared=True)


def _inputs(folder):
    feats = dict(read_table("ark:%s" % (folder / "feats.ark"), "matrix"))
    path = folder / "online-ivectors.ark"
    ivectors = dict(read_table("ark:%s" % path, "matrix")) if path.is_file() else None
    return feats, ivectors


def _export(folder, tmp_path, monkeypatch, frames_per_chunk, extra_left, subsampling):
    monkeypatch.chdir(folder)
    path = tmp_path / "stream.onnx"
    assert nnet3_to_onnx.main(["--streaming=true", "--frames-per-chunk=%d" % frames_per_chunk,
                               "--extra-left-context-initial=%d" % extra_left,
                               "--frame-subsampling-factor=%d" % subsampling,
                               "model.raw", str(path)]) == 0
    return path


def _close(ours, ref):
    return float(np.abs(ours - ref).max(initial=0.0)) <= TOLERANCE * max(
        1.0, float(np.abs(ref).max(initial=0.0)))


@pytest.mark.parametrize("setup", PARAMS)
def test_steps_match_looped_computation_chunk_by_chunk(setup, tmp_path, monkeypatch):
    name, fpc, extra_left, sub = setup
    folder = _folder(name)
    path = _export(folder, tmp_path, monkeypatch, fpc, extra_left, sub)
    info = _looped(folder, fpc, extra_left, sub)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    states = [i for i in session.get_inputs() if i.name.startswith("state/")]
    assert meta["pynnet3.streaming.states"].split() == [s.name[len("state/"):]
                                                         for s in states]
    names = [o.name for o in session.get_outputs()]
    assert names[0] == "output"
    assert names[1:] == ["next_" + s.name for s in states]
    per_chunk = info.frames_per_chunk // sub
    feats, ivectors = _inputs(folder)
    for utt, x in feats.items():
        ref = DecodableNnetSimpleLooped(
            info, x, online_ivectors=None if ivectors is None else ivectors[utt],
            online_ivector_period=10).get_all_outputs()
        num_chunks = max(2, -(-ref.shape[0] // per_chunk))
        state = {s.name: np.zeros([1] + s.shape[1:], np.float32) for s in states}

        def chunk(k):
            begin, end = info.chunk_input_range(k)
            rows = x[np.clip(np.arange(begin, end), 0, x.shape[0] - 1)]
            if not info.has_ivectors:
                return rows, None
            vector = looped_chunk_ivector(end, None, ivectors[utt], 10)
            return rows, np.tile(vector, (info.num_ivectors(k), 1))

        done = 0
        for k in range(num_chunks):
            if k == 1:
                continue
            rows, ivec = chunk(k)
            if k == 0:
                rows2, ivec2 = chunk(1)
                rows = np.concatenate([rows, rows2])
                ivec = None if ivec is None else np.concatenate([ivec, ivec2])
            feed = {"input": rows[None].astype(np.float32)}
            if ivec is not None:
                feed["ivector"] = ivec[None].astype(np.float32)
            feed.update(state)
            results = session.run(None, feed)
            out = results[0][0]
            assert out.shape[0] == (2 if k == 0 else 1) * per_chunk
            state = {n[len("next_"):]: v for n, v in zip(names[1:], results[1:])}
            wanted = ref[done:done + out.shape[0]]
            assert _close(out[:wanted.shape[0]], wanted), (utt, k)
            done += out.shape[0]


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("setup", PARAMS[:3])
def test_nnet3_compute_onnx_runs_a_streaming_model(setup, batch, tmp_path, monkeypatch,
                                                   capsys):
    name, fpc, extra_left, sub = setup
    folder = _folder(name)
    path = _export(folder, tmp_path, monkeypatch, fpc, extra_left, sub)
    info = _looped(folder, fpc, extra_left, sub)
    feats, ivectors = _inputs(folder)
    argv = ["--batch-size=%d" % batch]
    if ivectors is not None:
        argv += ["--online-ivectors=ark:online-ivectors.ark", "--online-ivector-period=10"]
    out = tmp_path / "out.ark"
    assert nnet3_compute_onnx.main(argv + [str(path), "ark:feats.ark", "ark:%s" % out]) == 0
    ours = dict(read_table("ark:%s" % out, "matrix"))
    assert list(ours) == list(feats)
    for utt, x in feats.items():
        ref = DecodableNnetSimpleLooped(
            info, x, online_ivectors=None if ivectors is None else ivectors[utt],
            online_ivector_period=10).get_all_outputs()
        assert ours[utt].shape == ref.shape and _close(ours[utt], ref), utt


def test_streaming_model_has_no_chunk_right_context(tmp_path, monkeypatch, capsys):
    if not PARAMS:
        pytest.skip("no reference model")
    name, fpc, extra_left, sub = PARAMS[0].values[0]
    folder = _folder(name)
    path = _export(folder, tmp_path, monkeypatch, fpc, extra_left, sub)
    status = nnet3_compute_onnx.main(["--extra-right-context=3", str(path), "ark:feats.ark",
                                      "ark:%s" % (tmp_path / "o.ark")])
    assert status == 255
    assert "--extra-right-context=3" in capsys.readouterr().err
    status = nnet3_to_onnx.main(["--streaming=true", "--extra-right-context=3", "model.raw",
                                 str(tmp_path / "x.onnx")])
    assert status == 255
