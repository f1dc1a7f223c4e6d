"""nnet3-to-onnx, nnet3-compute-onnx and nnet3-xvector-compute-onnx against
Kaldi (issue 18).

For every ``compute.VARIANT.cmd`` of kaldi-ref/models (or the copies in
tests/data/compute): nnet3-to-onnx with the command's chunk options, then
nnet3-compute-onnx with the command's own options on the .onnx, must write
Kaldi's archive within 1e-4 * max(1, max|kaldi|) per utterance; where Kaldi
refused, we refuse (exit 255, an ERROR line, no archive). The x-vector
commands (``xvector.VARIANT.cmd``) likewise with nnet3-to-onnx --xvector=true
and nnet3-xvector-compute-onnx. Some variants also with --any-length=true
(the length-generic graph) and with --batch-size > 1.

Plus: the options recorded in the model rule (a different chunk option, or
--use-priors, is an error naming it), the metadata, the tools' usage.
"""

import shlex

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from conftest import KALDI_REF, TEST_DATA  # noqa: E402
from pynnet3.bin import (nnet3_compute_onnx, nnet3_to_onnx,  # noqa: E402
                         nnet3_xvector_compute_onnx)
from pynnet3.io.table import read_table  # noqa: E402

TOLERANCE = 1e-4
EXPORT_OPTIONS = ("frames-per-chunk", "extra-left-context", "extra-right-context",
                  "extra-left-context-initial", "extra-right-context-final",
                  "frame-subsampling-factor", "online-ivector-period", "use-priors")


def _cases(pattern):
    root = KALDI_REF / "models"
    if not root.is_dir():
        root = TEST_DATA / "compute"
    return sorted(root.glob("*/" + pattern))


COMPUTE = _cases("compute.*.cmd")
XVECTOR = _cases("xvector.*.cmd")


def _case_id(cmd):
    return "%s-%s" % (cmd.parent.name, cmd.stem)


def run(tool, argv, monkeypatch, folder, capsys):
    monkeypatch.chdir(folder)
    status = tool.main(argv)
    return status, capsys.readouterr().err


def export_and_run(cmd, tmp_path, monkeypatch, capsys, extra_export=(), extra_run=()):
    """(status, our archive, Kaldi's archive, stderr) of exporting and
    running the Kaldi command ``cmd`` with the ONNX tools."""
    words = shlex.split(cmd.read_text())
    tool, args = words[0], words[1:]
    options = [a for a in args if a.startswith("--")]
    nnet, rspec, wspec = [a for a in args if not a.startswith("--")]
    xvector = tool == "nnet3-xvector-compute"
    export = (["--xvector=true"] if xvector
              else [o for o in options if o[2:].split("=")[0] in EXPORT_OPTIONS])
    onnx_path = tmp_path / "model.onnx"
    status, err = run(nnet3_to_onnx, export + list(extra_export) + [nnet, str(onnx_path)],
                      monkeypatch, cmd.parent, capsys)
    assert status == 0, err
    ours = tmp_path / "out.ark"
    runner = nnet3_xvector_compute_onnx if xvector else nnet3_compute_onnx
    status, err = run(runner, options + list(extra_run) + [str(onnx_path), rspec,
                                                            "ark:%s" % ours],
                      monkeypatch, cmd.parent, capsys)
    return status, ours, cmd.parent / wspec.split(":", 1)[1], err


def assert_archive_matches(ours, kaldi, kind):
    kaldi = dict(read_table("ark:%s" % kaldi, kind))
    ours = dict(read_table("ark:%s" % ours, kind))
    assert list(ours) == list(kaldi)
    for utt, value in kaldi.items():
        assert ours[utt].shape == value.shape, utt
        err = float(np.abs(ours[utt].astype(np.float64) - value).max())
        assert err <= TOLERANCE * max(1.0, float(np.abs(value).max())), (utt, err)


def check_case(cmd, tmp_path, monkeypatch, capsys, **kwargs):
    status, ours, kaldi, err = export_and_run(cmd, tmp_path, monkeypatch, capsys, **kwargs)
    if not kaldi.is_file():
        assert "ERROR" in cmd.with_suffix(".log").read_text()
        assert status == 255, err
        assert "Not all outputs were computable" in err
        assert not ours.exists()
        return
    assert status == 0, err
    kind = "vector" if cmd.name.startswith("xvector.") else "matrix"
    assert_archive_matches(ours, kaldi, kind)


@pytest.mark.parametrize("cmd", COMPUTE + XVECTOR, ids=_case_id)
def test_kaldi_command_through_onnx(cmd, tmp_path, monkeypatch, capsys):
    check_case(cmd, tmp_path, monkeypatch, capsys)


ANY_LENGTH = [c for c in COMPUTE if c.stem in ("compute.chunk20_ctx_initial_final",
                                               "compute.subsample3")]


@pytest.mark.parametrize("cmd", ANY_LENGTH, ids=_case_id)
def test_length_generic_export(cmd, tmp_path, monkeypatch, capsys):
    """The graph for chunks of any length gives Kaldi's numbers too."""
    check_case(cmd, tmp_path, monkeypatch, capsys, extra_export=["--any-length=true"])


BATCHED = [c for c in COMPUTE if c.stem == "compute.default"]


@pytest.mark.parametrize("cmd", BATCHED, ids=_case_id)
def test_several_utterances_per_run(cmd, tmp_path, monkeypatch, capsys):
    check_case(cmd, tmp_path, monkeypatch, capsys, extra_run=["--batch-size=3"])


# -- the model's options rule -----------------------------------------------------------------

def _tdnn_lda():
    for folder in (KALDI_REF / "models" / "tdnn_lda", TEST_DATA / "compute" / "tdnn_lda"):
        if (folder / "final.mdl").is_file():
            return folder
    pytest.skip("no tdnn_lda model")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """tdnn_lda exported with --frames-per-chunk=17 --extra-left-context=5
    and the .mdl's priors."""
    import os
    folder = _tdnn_lda()
    out = tmp_path_factory.mktemp("onnx") / "model.onnx"
    here = os.getcwd()
    os.chdir(folder)
    try:
        assert nnet3_to_onnx.main(["--frames-per-chunk=17", "--extra-left-context=5",
                                   "--online-ivector-period=10", "--use-priors=true",
                                   "final.mdl", str(out)]) == 0
    finally:
        os.chdir(here)
    return folder, out


def test_metadata_records_options_and_context(exported):
    import onnx
    _, path = exported
    model = onnx.load(str(path))
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["pynnet3.model-kind"] == "chunk"
    assert meta["frames-per-chunk"] == "17" and meta["extra-left-context"] == "5"
    assert meta["extra-left-context-initial"] == "-1"
    assert meta["online-ivector-period"] == "10" and meta["use-priors"] == "true"
    assert int(meta["nnet3.left-context"]) > 0 and meta["nnet3.modulus"] == "1"
    assert [i.name for i in model.graph.input] == ["input", "ivector"]
    assert [o.name for o in model.graph.output] == ["output"]
    batch = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch.dim_param == "batch"
    assert all(op.domain in ("", "ai.onnx") for op in model.opset_import)


@pytest.mark.parametrize("option, value", [("frames-per-chunk", 50),
                                           ("extra-left-context", 0),
                                           ("extra-right-context", 2),
                                           ("frame-subsampling-factor", 3),
                                           ("online-ivector-period", 5)])
def test_other_chunk_options_are_refused(exported, tmp_path, monkeypatch, capsys, option,
                                         value):
    folder, path = exported
    status, err = run(nnet3_compute_onnx, ["--%s=%d" % (option, value),
                                           "--online-ivectors=ark:online-ivectors.ark",
                                           str(path), "ark:feats.ark",
                                           "ark:%s" % (tmp_path / "o.ark")],
                      monkeypatch, folder, capsys)
    assert status == 255
    assert ("--%s=%d" % (option, value)) in err and "ERROR" in err
    assert not (tmp_path / "o.ark").exists()


def test_equal_options_and_recorded_period_are_accepted(exported, tmp_path, monkeypatch,
                                                        capsys):
    """The recorded --online-ivector-period is used when none is given;
    the model's outputs equal nnet3-compute --use-priors on the .mdl."""
    from pynnet3.bin import nnet3_compute
    folder, path = exported
    ours, ref = tmp_path / "o.ark", tmp_path / "ref.ark"
    status, err = run(nnet3_compute_onnx, ["--frames-per-chunk=17", "--use-priors=true",
                                           "--online-ivectors=ark:online-ivectors.ark",
                                           str(path), "ark:feats.ark", "ark:%s" % ours],
                      monkeypatch, folder, capsys)
    assert status == 0, err
    status, err = run(nnet3_compute, ["--frames-per-chunk=17", "--extra-left-context=5",
                                      "--use-priors=true", "--online-ivector-period=10",
                                      "--online-ivectors=ark:online-ivectors.ark",
                                      "final.mdl", "ark:feats.ark", "ark:%s" % ref],
                      monkeypatch, folder, capsys)
    assert status == 0, err
    assert_archive_matches(ours, ref, "matrix")


def test_use_priors_must_match_the_export(exported, tmp_path, monkeypatch, capsys):
    folder, path = exported
    status, err = run(nnet3_compute_onnx, ["--use-priors=false",
                                           "--online-ivectors=ark:online-ivectors.ark",
                                           str(path), "ark:feats.ark",
                                           "ark:%s" % (tmp_path / "o.ark")],
                      monkeypatch, folder, capsys)
    assert status == 255 and "--use-priors=false" in err and "exported with" in err


def test_kaldi_exact_arithmetic_is_refused(exported, tmp_path, monkeypatch, capsys):
    folder, path = exported
    status, err = run(nnet3_compute_onnx, ["--kaldi-exact-arithmetic=true", str(path),
                                           "ark:feats.ark", "ark:%s" % (tmp_path / "o.ark")],
                      monkeypatch, folder, capsys)
    assert status == 255 and "--kaldi-exact-arithmetic" in err


def test_use_priors_needs_an_mdl(tmp_path, monkeypatch, capsys):
    folder = _tdnn_lda()
    status, err = run(nnet3_to_onnx, ["--use-priors=true", "model.raw",
                                      str(tmp_path / "m.onnx")], monkeypatch, folder, capsys)
    assert status == 255 and "ERROR" in err
    assert not (tmp_path / "m.onnx").exists()


def test_wrong_argument_count_prints_usage(capsys):
    assert nnet3_to_onnx.main(["only-one"]) == 1
    assert "Usage: nnet3-to-onnx" in capsys.readouterr().err
    assert nnet3_compute_onnx.main(["a", "b"]) == 1
    assert "Usage: nnet3-compute-onnx" in capsys.readouterr().err
    assert nnet3_xvector_compute_onnx.main([]) == 1


def test_a_chunk_model_is_not_an_xvector_model(exported, tmp_path, monkeypatch, capsys):
    folder, path = exported
    status, err = run(nnet3_xvector_compute_onnx, [str(path), "ark:feats.ark",
                                                   "ark:%s" % (tmp_path / "o.ark")],
                      monkeypatch, folder, capsys)
    assert status == 255 and "not a model exported for nnet3-xvector-compute-onnx" in err
