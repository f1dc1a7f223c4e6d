"""The shipped example (``python -m pynnet3.examples``) and the single-chunk
utterance computation behind it (pynnet3/compute/utterance.py) against Kaldi.

- The examples, in-process and as ``scripts/run_example.sh``: every utterance
  matches Kaldi's shipped outputs (nnet3-compute, streaming, x-vectors,
  decoding); the archive it writes holds the same numbers; a wrong reference
  makes it fail; the files shipped are the ones listed, small, and in the
  package data; every .cmd names shipped files.
- Every nnet3-compute reference variant (kaldi-ref ``models/*/compute.*.cmd``
  plus the tdnn_lda subset in tests/data/example): each utterance that Kaldi
  computed as a single chunk (frames-per-chunk covers it) matches Kaldi's
  output; where Kaldi refused (no .ark, ERROR in the log) the first utterance
  (the one Kaldi died on) raises ComputationError.
- compute_simple_nnet_context equals the context nnet3-info printed.
- Kaldi's chunk rules (edge padding, i-vector choice, extra context at the
  utterance's edges, frames-per-chunk rounding) on hand-worked cases, and on a
  model whose output layer is made non-trivial: the whole-utterance chunk
  equals chunk-by-chunk computation for a feed-forward network.

The reference models' output layers have random non-zero parameters (the
corrected kaldi-ref), so Kaldi's outputs vary over frames and depend on every
layer: these comparisons check the hidden layers' arithmetic too.
"""

import io
import os
import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import KALDI_REF, REPO, TEST_DATA
import pynnet3.examples as example
import pynnet3.examples.run as example_run
from pynnet3.compute.utterance import (ChunkPlan, SimpleComputationOptions, SimpleNnetComputer,
                                       apply_exp, compute_utterance, prepare_nnet_for_compute)
from pynnet3.model.context import compute_simple_nnet_context
from pynnet3.errors import ComputationError, PynnetError, UsageError
from pynnet3.io.table import read_table
from pynnet3.model.am import read_mdl
from pynnet3.nnet.nnet import Nnet


def tolerance(kaldi):
    return 1e-3 * max(1.0, float(np.abs(kaldi).max(initial=0.0)))


def assert_matches(ours, kaldi, what):
    assert ours.shape == kaldi.shape, "%s: shape %s, Kaldi %s" % (what, ours.shape, kaldi.shape)
    err = float(np.abs(ours.astype(np.float64) - kaldi).max(initial=0.0))
    assert err <= tolerance(kaldi), "%s: max|ours-kaldi| = %g" % (what, err)


# -- the shipped example ----------------------------------------------------------------------

def _example_table(name, kind=None):
    return dict(read_table("ark:" + example.path(name), kind or "matrix"))


@pytest.fixture(scope="module")
def kaldi_outputs():
    return example_run.load_kaldi_outputs()


def test_example_compute_matches_kaldi(kaldi_outputs):
    checks, outputs = example_run.check_compute(kaldi_outputs)
    assert [c.utterance for c in checks] == ["utt1", "utt2", "utt3", "utt4"]
    assert [o.shape for o in outputs.values()] == [(7, 30), (50, 30), (173, 30), (301, 30)]
    for c in checks:
        assert c.ok, c.detail
        kaldi = kaldi_outputs["compute"][c.utterance]
        assert_matches(outputs[c.utterance], kaldi, c.utterance)
        # Kaldi's output depends on the input frame by frame (a constant output
        # would leave the hidden layers unchecked).
        assert np.ptp(kaldi, axis=0).min() > 1e-3


def test_example_streaming_xvector_and_decoding_match_kaldi(kaldi_outputs):
    for run in (example_run.check_streaming, example_run.check_xvector,
                example_run.check_decode):
        checks = run(kaldi_outputs)
        assert [c.utterance for c in checks] == ["utt1", "utt2", "utt3", "utt4"]
        assert all(c.ok for c in checks), [c.detail for c in checks]
    # the streaming check holds within 1e-5 of Kaldi's numbers, absolutely
    assert max(c.max_abs_diff for c in example_run.check_streaming(kaldi_outputs)) <= 1e-5


def test_example_main_writes_archive_and_reports(tmp_path):
    out = io.StringIO()
    path = tmp_path / "out.ark"
    assert example.main([str(path)], out=out) == 0
    written = dict(read_table("ark:" + str(path)))
    kaldi = _example_table("compute.apply_exp.ark")
    assert list(written) == list(kaldi)
    for utt in kaldi:
        assert_matches(written[utt], kaldi[utt], utt)
    lines = out.getvalue().splitlines()
    with open(example.path("tdnn_lda.info.txt")) as f:
        kaldi_header = f.read().splitlines()[:4]
    assert lines[1:5] == kaldi_header      # left/right-context, num-parameters, modulus
    assert "# nnet3-info output identical to Kaldi's" in lines
    assert lines[-1].startswith("OK: nnet3-compute 4/4, streaming 4/4, x-vector 4/4, "
                                "decoding 4/4 utterances agree with Kaldi")
    assert sum(line.endswith(" ok") for line in lines) == 16


@pytest.mark.parametrize("what", ["compute", "streaming", "xvector", "words"])
def test_example_main_fails_on_a_difference(monkeypatch, what):
    real_load = example_run.load_kaldi_outputs

    def load_wrong():
        kaldi = real_load()
        if what == "words":
            kaldi["words"]["utt3"] = [7]
        else:
            kaldi[what]["utt3"] = kaldi[what]["utt3"] + np.float32(0.01)
        return kaldi

    monkeypatch.setattr(example_run, "load_kaldi_outputs", load_wrong)
    out = io.StringIO()
    assert example.main([], out=out) == 1
    text = out.getvalue()
    assert any(line.startswith("utt3: ") and line.endswith("DIFFERS")
               for line in text.splitlines())
    assert text.splitlines()[-1].startswith("FAILED: ")


def test_run_example_script():
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(["bash", str(REPO / "scripts" / "run_example.sh")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("OK: nnet3-compute 4/4")


def test_example_files_are_listed_small_and_shipped():
    folder = Path(example.path("tdnn_lda.raw")).parent
    data = {p.name for p in folder.iterdir() if p.is_file() and p.suffix != ".py"}
    assert data == set(example.FILES)
    assert sum((folder / name).stat().st_size for name in data) < 2 << 20
    with pytest.raises(PynnetError, match="not an example file"):
        example.path("nonexistent.ark")
    # every shipped file is in the package data of pyproject.toml
    pyproject = (REPO / "pyproject.toml").read_text()
    for pattern in ("examples/*.ark", "examples/*.txt", "examples/*.cmd", "examples/*.log",
                    "examples/*.raw", "examples/*.mdl", "examples/*.fst"):
        assert '"%s"' % pattern in pyproject, pattern


def test_example_commands_name_shipped_files():
    """Every .cmd is run in the examples folder: the files it reads and
    writes are shipped under those names."""
    folder = Path(example.path("tdnn_lda.raw")).parent
    for cmd in sorted(folder.glob("*.cmd")):
        words = shlex.split(cmd.read_text())
        assert words[:2] == ["OPENBLAS_CORETYPE=Haswell", "OPENBLAS_NUM_THREADS=2"], cmd
        files = [re.fullmatch(r"(?:--[\w-]+=)?(?:(?:ark|scp)[\w,]*:)?([\w.-]+\.(?:ark|txt|raw|mdl|fst))", w)
                 for w in words[3:]]
        assert sum(f is not None for f in files) >= 3, cmd
        for f in files:
            if f is not None:
                assert (folder / f.group(1)).is_file(), (cmd.name, f.group(1))
        assert (folder / (cmd.stem + ".log")).is_file()


# -- Kaldi's nnet3-compute variants -------------------------------------------------------------

def _have_c_graph_builder():
    try:
        import pynnet3._fast.computation_graph_kernel  # noqa: F401
    except ImportError:
        return False
    return True


# The x-vector network's statistics pooling spans 10000 frames: building its
# computation graph (which is how Kaldi's refusals are reproduced) takes ~2 s
# with the C graph builder but 10-15 s per case with the pure-Python one.
_needs_c_builder = pytest.mark.skipif(
    not _have_c_graph_builder(),
    reason="x-vector graphs take 10-15 s each without the C graph builder "
           "(python setup.py build_ext --inplace)")


def _variant_cases():
    cmds = sorted(KALDI_REF.glob("models/*/compute.*.cmd")) if KALDI_REF.is_dir() else []
    cmds += sorted((TEST_DATA / "example").glob("*/compute.*.cmd"))
    return [pytest.param(c, marks=_needs_c_builder) if c.parent.name == "xvector" else c
            for c in cmds]


def _case_id(cmd):
    prefix = "data/" if TEST_DATA in cmd.parents else ""
    return prefix + cmd.parent.name + "/" + cmd.name[len("compute."):-len(".cmd")]


def _input_file(folder, name):
    """A file the command names, from its folder; the tests/data subset takes
    the model and inputs from the shipped example (and the .mdl from
    tests/data/mdl)."""
    path = folder / name
    if path.is_file():
        return path
    shipped = {"model.raw": "tdnn_lda.raw", "feats.ark": "feats.ark",
               "online-ivectors.ark": "online-ivectors.ark"}
    if folder.name == "tdnn_lda" and name in shipped:
        return Path(example.path(shipped[name]))
    if name == "final.mdl" and (TEST_DATA / "mdl" / folder.name / name).is_file():
        return TEST_DATA / "mdl" / folder.name / name
    pytest.skip("%s not available" % path)


def _parse_command(cmd_path):
    """(options dict, [model, features rspecifier, output wspecifier])."""
    words = shlex.split(cmd_path.read_text())
    assert words[0] == "nnet3-compute"
    opts, args = {}, []
    for w in words[1:]:
        if w.startswith("--"):
            key, _, value = w[2:].partition("=")
            opts[key] = value
        else:
            args.append(w)
    return opts, args


_OPTION_FIELDS = ("frames-per-chunk", "extra-left-context", "extra-right-context",
                  "extra-left-context-initial", "extra-right-context-final",
                  "frame-subsampling-factor")
_HANDLED = set(_OPTION_FIELDS) | {"online-ivectors", "online-ivector-period", "apply-exp",
                                  "use-priors"}

# Models whose context takes long to work out (Kaldi's window doubling up to
# 640 frames over 11 time shifts); their variants use nnet3-info's numbers.
_SLOW_CONTEXT = {"xvector"}
_loaded = {}


def _load_model(folder, model_name, use_priors):
    key = (str(folder), model_name, use_priors)
    if key not in _loaded:
        path = _input_file(folder, model_name)
        if use_priors:
            _, am = read_mdl(str(path))
            nnet, priors = am.nnet, am.priors
        else:
            nnet, priors = Nnet.read(str(path)), None
        prepare_nnet_for_compute(nnet)
        context = None
        if folder.name in _SLOW_CONTEXT:
            info = (folder / "info.txt").read_text().splitlines()
            context = (int(info[0].split()[1]), int(info[1].split()[1]))
        _loaded[key] = (nnet, priors, context)
    return _loaded[key]


@pytest.mark.parametrize("cmd", _variant_cases(), ids=_case_id)
def test_nnet3_compute_single_chunk(cmd):
    folder = cmd.parent
    opts, args = _parse_command(cmd)
    assert not set(opts) - _HANDLED, "unhandled options %s" % (set(opts) - _HANDLED)
    options = SimpleComputationOptions()
    for name in _OPTION_FIELDS:
        if name in opts:
            setattr(options, name.replace("-", "_"), int(opts[name]))
    use_priors = opts.get("use-priors") == "true"
    nnet, priors, context = _load_model(folder, args[0], use_priors)
    assert args[1].startswith("ark:")
    feats = dict(read_table("ark:" + str(_input_file(folder, args[1][4:]))))
    ivectors = None
    if "online-ivectors" in opts:
        ivectors = dict(read_table("ark:" + str(_input_file(folder, opts["online-ivectors"][4:]))))
    period = int(opts.get("online-ivector-period", 0))
    computer = SimpleNnetComputer(nnet, options, priors, context=context)
    ark = folder / ("compute.%s.ark" % cmd.name[len("compute."):-len(".cmd")])

    def ours(utt):
        out = computer.compute_utterance(feats[utt], online_ivectors=(
            ivectors[utt] if ivectors is not None else None), online_ivector_period=period)
        return apply_exp(out) if opts.get("apply-exp") == "true" else out

    if not ark.is_file():
        # Kaldi refused: it died on the first utterance.
        log = cmd.with_suffix(".log").read_text()
        assert "ERROR" in log and "Not all outputs were computable" in log
        first = next(iter(feats))
        assert computer.covers_utterance(feats[first].shape[0])
        with pytest.raises(ComputationError, match="not computable|Not all outputs"):
            ours(first)
        return
    kaldi = dict(read_table("ark:" + str(ark)))
    assert list(kaldi) == list(feats)
    checked = 0
    for utt, value in kaldi.items():
        assert value.shape[0] == computer.num_subsampled_frames(feats[utt].shape[0])
        if computer.covers_utterance(feats[utt].shape[0]):
            assert_matches(ours(utt), value, utt)
            checked += 1
    assert checked > 0, "no utterance of this variant is a single chunk"


MODEL_DIRS = ([p.parent for p in sorted(KALDI_REF.glob("models/*/model.raw"))
               if p.parent.name not in _SLOW_CONTEXT] if KALDI_REF.is_dir() else [])


@pytest.mark.parametrize("folder", MODEL_DIRS, ids=lambda p: p.name)
def test_context_matches_nnet3_info(folder):
    info = (folder / "info.txt").read_text().splitlines()
    assert info[0].startswith("left-context: ") and info[1].startswith("right-context: ")
    expected = (int(info[0].split()[1]), int(info[1].split()[1]))
    assert compute_simple_nnet_context(Nnet.read(str(folder / "model.raw"))) == expected


def test_context_of_the_example_model():
    nnet = Nnet.read(example.path("tdnn_lda.raw"))
    assert compute_simple_nnet_context(nnet) == (8, 8)


# -- Kaldi's chunk rules, hand-worked --------------------------------------------------------------

@pytest.fixture(scope="module")
def example_nnet():
    return prepare_nnet_for_compute(Nnet.read(example.path("tdnn_lda.raw")))


def _computer(nnet, **kw):
    return SimpleNnetComputer(nnet, SimpleComputationOptions(**kw), context=(8, 8))


def test_chunk_plan(example_nnet):
    c = _computer(example_nnet, frames_per_chunk=17, extra_left_context=5,
                  extra_right_context=3)
    # First chunk of a 50-frame utterance: 13 frames of left padding.
    assert c.chunk_plan(50, 0, 17) == ChunkPlan(0, 17, 0, 16, -13, 17 + 13 + 11)
    # Last chunk (frames 34..49).
    assert c.chunk_plan(50, 34, 16) == ChunkPlan(34, 16, 34, 49, 21, 16 + 13 + 11)
    c = _computer(example_nnet, frames_per_chunk=20, extra_left_context=10,
                  extra_right_context=4, extra_left_context_initial=0,
                  extra_right_context_final=0)
    assert c.chunk_plan(50, 0, 20) == ChunkPlan(0, 20, 0, 19, -8, 20 + 8 + 12)    # initial
    assert c.chunk_plan(50, 20, 20) == ChunkPlan(20, 20, 20, 39, 2, 20 + 18 + 12)
    assert c.chunk_plan(50, 40, 10) == ChunkPlan(40, 10, 40, 49, 22, 10 + 18 + 8)  # final
    # Subsampling by 3: outputs at t = 0, 3, ..., 48 for 50 frames (17 of them).
    c = _computer(example_nnet, frame_subsampling_factor=3, frames_per_chunk=1000)
    assert c.num_subsampled_frames(50) == 17
    assert c.chunk_plan(50, 0, 17) == ChunkPlan(0, 17, 0, 48, -8, 48 + 8 + 8 + 1)
    with pytest.raises(UsageError):
        c.chunk_plan(50, 10, 8)


def test_frames_per_chunk_rounding():
    opts = SimpleComputationOptions(frame_subsampling_factor=3, frames_per_chunk=50)
    assert opts.fixed_frames_per_chunk(1) == 51
    assert opts.fixed_frames_per_chunk(2) == 54
    assert SimpleComputationOptions(frames_per_chunk=30,
                                    frame_subsampling_factor=3).fixed_frames_per_chunk(1) == 30
    with pytest.raises(UsageError):
        SimpleComputationOptions(frames_per_chunk=0).fixed_frames_per_chunk(1)


def test_chunk_features_repeat_edge_frames():
    feats = np.arange(5 * 2, dtype=np.float32).reshape(5, 2)
    plan = ChunkPlan(0, 5, 0, 4, -2, 9)
    rows = SimpleNnetComputer.chunk_features(feats, plan)
    np.testing.assert_array_equal(rows, feats[[0, 0, 0, 1, 2, 3, 4, 4, 4]])


def test_chunk_ivector_choice():
    ivectors = np.arange(4 * 3, dtype=np.float32).reshape(4, 3)   # frames 0, 10, 20, 30
    pick = SimpleNnetComputer.chunk_ivector
    # Middle of output frames 0..16 is 8: row 0; of 17..33 it is 25: row 2.
    np.testing.assert_array_equal(pick(ChunkPlan(0, 17, 0, 16, -8, 33), None, ivectors, 10),
                                  ivectors[0])
    np.testing.assert_array_equal(pick(ChunkPlan(17, 17, 17, 33, 9, 33), None, ivectors, 10),
                                  ivectors[2])
    # Past the last row by up to 50 frames: the last row; further: an error.
    np.testing.assert_array_equal(pick(ChunkPlan(0, 161, 0, 160, -8, 177), None, ivectors, 10),
                                  ivectors[3])
    with pytest.raises(UsageError, match="Could not get iVector for frame 90"):
        pick(ChunkPlan(0, 181, 0, 180, -8, 197), None, ivectors, 10)
    # A batch i-vector is used as it is.
    np.testing.assert_array_equal(pick(ChunkPlan(0, 1, 0, 0, 0, 1), ivectors[1]), ivectors[1])
    assert pick(ChunkPlan(0, 1, 0, 0, 0, 1)) is None


def test_dimension_errors(example_nnet):
    c = _computer(example_nnet, frames_per_chunk=1000)
    feats = np.zeros((10, 13), np.float32)
    with pytest.raises(UsageError, match="'input' features with dimension 13 but you "
                                         "provided 12"):
        c.compute_utterance(np.zeros((10, 12), np.float32), ivector=np.zeros(10, np.float32))
    with pytest.raises(UsageError, match="'ivector' features with dimension 10 but you "
                                         "provided 0"):
        c.compute_utterance(feats)
    with pytest.raises(UsageError, match="online-ivector-period"):
        c.compute_utterance(feats, online_ivectors=np.zeros((1, 10), np.float32))
    with pytest.raises(UsageError, match="Zero-length"):
        c.compute_utterance(np.zeros((0, 13), np.float32), ivector=np.zeros(10, np.float32))


@pytest.fixture(scope="module")
def informative_nnet():
    """The example model with a different random output layer."""
    nnet = Nnet.read(example.path("tdnn_lda.raw"))
    affine = nnet.get_component(nnet.get_component_index("output.affine"))
    rng = np.random.default_rng(0)
    affine.linear_params = rng.standard_normal(affine.linear_params.shape).astype(np.float32)
    affine.bias_params = rng.standard_normal(affine.bias_params.shape).astype(np.float32)
    return prepare_nnet_for_compute(nnet)


def test_whole_utterance_equals_chunks(informative_nnet):
    """A feed-forward network sees the same (padded) input frames for an output
    frame whether the utterance is one chunk or many, so chunking changes
    nothing; padding and context errors would show at the chunk edges."""
    feats = _example_table("feats.ark")["utt2"]
    ivector = _example_table("online-ivectors.ark")["utt2"][2]
    whole = _computer(informative_nnet, frames_per_chunk=1000).compute_utterance(
        feats, ivector=ivector)
    assert whole.shape == (50, 30) and whole.std(axis=0).max() > 0.1
    c = _computer(informative_nnet, frames_per_chunk=17)
    step = c.subsampled_frames_per_chunk()
    pieces = [c.compute_chunk(feats, s, min(step, 50 - s), ivector=ivector)
              for s in range(0, 50, step)]
    # Chunks of other sizes only change BLAS summation order.
    np.testing.assert_allclose(np.concatenate(pieces), whole, rtol=1e-5, atol=1e-5)
    # Subsampling picks every third frame of the same outputs.
    sub = _computer(informative_nnet, frame_subsampling_factor=3,
                    frames_per_chunk=1000).compute_utterance(feats, ivector=ivector)
    np.testing.assert_allclose(sub, whole[::3], rtol=1e-5, atol=1e-5)


def test_priors_and_acoustic_scale(informative_nnet):
    feats = _example_table("feats.ark")["utt1"]
    ivector = _example_table("online-ivectors.ark")["utt1"][0]
    plain = compute_utterance(informative_nnet, feats, SimpleComputationOptions(),
                              ivector=ivector)
    priors = np.linspace(0.01, 0.1, 30).astype(np.float32)
    opts = SimpleComputationOptions(acoustic_scale=0.1)
    scaled = compute_utterance(informative_nnet, feats, opts, ivector=ivector, priors=priors)
    np.testing.assert_allclose(scaled, 0.1 * (plain - np.log(priors)), rtol=1e-5, atol=1e-6)
    exp = compute_utterance(informative_nnet, feats, ivector=ivector, apply_exp_to_output=True)
    np.testing.assert_allclose(exp, np.exp(plain), rtol=1e-6)
    np.testing.assert_allclose(exp.sum(axis=1), 1.0, rtol=1e-5)    # log-softmax output
