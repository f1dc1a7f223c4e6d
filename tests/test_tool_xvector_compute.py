"""nnet3-xvector-compute against Kaldi: every variant in
kaldi-ref/models/xvector/xvector-variants.txt, run as xvector.VARIANT.cmd says,
writes x-vectors agreeing with Kaldi's xvector.VARIANT.ark (same keys,
dims, max |ours - kaldi| <= 1e-3 * max(1, max |kaldi|)). A copy of the
xvector case lives in tests/data/compute/xvector."""

import numpy as np
import pytest

from pynnet3.bin import nnet3_xvector_compute
from pynnet3.io.table import TableWriter, read_table

from conftest import KALDI_REF, skip_if_blas_kernels_forced
from test_tool_nnet3_compute import DATA, assert_matches, run_kaldi_command

_REF = sorted((KALDI_REF / "models" / "xvector").glob("xvector.*.cmd"))
CASES = _REF or sorted((DATA / "xvector").glob("xvector.*.cmd"))


@pytest.mark.parametrize("cmd", CASES, ids=lambda p: p.name[len("xvector."):-len(".cmd")])
def test_variant_agrees_with_kaldi(cmd, tmp_path, monkeypatch, capsys):
    status, ours, kaldi_ark, err = run_kaldi_command(cmd, nnet3_xvector_compute, tmp_path,
                                                      monkeypatch, capsys)
    assert status == 0, err
    kaldi = dict(read_table("ark:" + str(kaldi_ark), "vector"))
    assert_matches(dict(read_table("ark:" + str(ours), "vector")), kaldi, cmd.name)
    assert "Done %d utterances, failed for 0" % len(kaldi) in err


def test_short_utterance_without_padding(tmp_path, capsys):
    model = DATA / "xvector" / "extract.raw"
    feats = dict(read_table("ark:%s" % (DATA / "xvector" / "feats.ark")))
    with TableWriter("ark:%s" % (tmp_path / "f.ark")) as w:
        for k, v in feats.items():
            w.write(k, v)
        w.write("empty", np.zeros((0, next(iter(feats.values())).shape[1]), np.float32))
    status = nnet3_xvector_compute.main([
        "--pad-input=false", "--min-chunk-size=100", str(model),
        "ark:%s" % (tmp_path / "f.ark"), "ark,t:%s" % (tmp_path / "x.ark")])
    err = capsys.readouterr().err
    assert status == 0, err
    short = [k for k, v in feats.items() if v.shape[0] < 100]
    for utt in short:
        assert "Minimum chunk size of 100 is greater than the number of rows in " \
               "utterance: %s" % utt in err
    assert "Zero-length utterance: empty" in err
    done = dict(read_table("ark:%s" % (tmp_path / "x.ark"), "vector"))
    assert sorted(done) == sorted(set(feats) - set(short))
    assert "failed for %d" % (len(short) + 1) in err


def test_cached_compiler_in_and_out(tmp_path, capsys):
    """--cached-compiler-in reads Kaldi's cache (nothing is compiled again and
    the x-vectors are Kaldi's); --cached-compiler-out writes Kaldi's file
    byte for byte, whether the cache was read or built here."""
    xv = DATA / "xvector"
    kaldi_cache = xv / "kaldi-compiler-cache.bin"
    args = [str(xv / "extract.raw"), "ark:%s" % (xv / "feats.ark")]
    status = nnet3_xvector_compute.main([
        "--cached-compiler-in=%s" % kaldi_cache,
        "--cached-compiler-out=%s" % (tmp_path / "a.bin")] + args
        + ["ark:%s" % (tmp_path / "a.ark")])
    err = capsys.readouterr().err
    assert status == 0, err
    assert "Reading cache from" in err and "0 compilation" in err
    assert (tmp_path / "a.bin").read_bytes() == kaldi_cache.read_bytes()
    assert_matches(dict(read_table("ark:%s" % (tmp_path / "a.ark"), "vector")),
                   dict(read_table("ark:%s" % (xv / "xvector.default.ark"), "vector")),
                   "cached")
    status = nnet3_xvector_compute.main(["--cached-compiler-out=%s" % (tmp_path / "b.bin")]
                                        + args + ["ark:/dev/null"])
    assert status == 0, capsys.readouterr().err
    assert (tmp_path / "b.bin").read_bytes() == kaldi_cache.read_bytes()


def _xvector_inputs(tmp_path):
    """The x-vector test data's utterances, a copy of each cut to 60 frames
    (skipped without padding) and an empty one."""
    feats = dict(read_table("ark:%s" % (DATA / "xvector" / "feats.ark")))
    with TableWriter("ark:%s" % (tmp_path / "f.ark")) as w:
        for k, v in feats.items():
            w.write(k, v)
            w.write(k + "-short", v[:60])
        w.write("empty", np.zeros((0, next(iter(feats.values())).shape[1]), np.float32))
    return feats


def test_threads_give_the_same_xvectors(tmp_path, capsys, monkeypatch):
    """With OPENBLAS_NUM_THREADS=2 (BLAS arithmetic) utterances run on the
    computer's two threads: the archive is the one thread's, byte for
    byte, skipped utterances and counts included."""
    import threading
    from pynnet3.compute import blas_threads
    from pynnet3.compute.xvector import XvectorComputer
    if not blas_threads.available():
        pytest.skip("NumPy's BLAS thread count cannot be changed here: no computer threads")
    skip_if_blas_kernels_forced()
    feats = _xvector_inputs(tmp_path)
    compute_chunk = XvectorComputer._compute_chunk
    names = set()

    def recorded(self, features, entry):
        names.add(threading.current_thread().name.split("_")[0])
        return compute_chunk(self, features, entry)

    monkeypatch.setattr(XvectorComputer, "_compute_chunk", recorded)
    outputs = {}
    for threads in ("1", "2"):
        names.clear()
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", threads)
        out = tmp_path / ("x%s.ark" % threads)
        status = nnet3_xvector_compute.main([
            "--pad-input=false", "--min-chunk-size=100", str(DATA / "xvector" / "extract.raw"),
            "ark:%s" % (tmp_path / "f.ark"), "ark:%s" % out])
        err = capsys.readouterr().err
        assert status == 0, err
        done = sum(v.shape[0] >= 100 for v in feats.values())
        assert "Done %d utterances, failed for %d" % (done, 2 * len(feats) + 1 - done) in err
        outputs[threads] = out.read_bytes()
        assert names == ({"MainThread"} if threads == "1" else {"pynnet3-xvector"}), names
    assert outputs["1"] == outputs["2"]
    assert list(dict(read_table("ark:%s" % (tmp_path / "x2.ark"), "vector"))) == \
        [k for k, v in feats.items() if v.shape[0] >= 100]


def test_a_failure_on_a_thread_ends_the_tool(tmp_path, capsys, monkeypatch):
    """An error in an utterance computed on one of the computer's threads
    ends the tool with Kaldi's exit status and no output file."""
    from pynnet3.compute.xvector import XvectorComputer
    from pynnet3.errors import NnetError
    feats = _xvector_inputs(tmp_path)
    bad = next(v for v in feats.values() if v.shape[0] >= 100)
    compute_chunk = XvectorComputer._compute_chunk

    def failing(self, features, entry):
        if features.shape[0] == bad.shape[0] and np.array_equal(features, bad):
            raise NnetError("injected failure")
        return compute_chunk(self, features, entry)

    monkeypatch.setattr(XvectorComputer, "_compute_chunk", failing)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    out = tmp_path / "x.ark"
    status = nnet3_xvector_compute.main([str(DATA / "xvector" / "extract.raw"),
                                         "ark:%s" % (tmp_path / "f.ark"), "ark:%s" % out])
    err = capsys.readouterr().err
    assert status == 255, err       # Kaldi's main returns -1 after an ERROR
    assert "injected failure" in err
    assert not out.exists()
    assert not list(tmp_path.glob(".tmp.*"))


def test_utterances_of_many_lengths_share_one_arena():
    """Whole utterances of many lengths (as nnet3-xvector-compute meets
    them): the computer keeps the most recently used 64 lengths' plans
    (the compiler's cache capacity), all in one arena whose old arrays
    are let go when it grows, so its memory is that of the longest, not
    the sum (each length's own arena took the
    x-vector bench model to 1.5 GB over 150 lengths, against Kaldi's 127
    MB); the x-vectors equal a fresh computer's."""
    from pynnet3.compute.utterance import prepare_nnet_for_compute
    from pynnet3.compute.xvector import XvectorComputer
    from pynnet3.nnet.nnet import Nnet
    nnet = Nnet.read(str(DATA / "xvector" / "extract.raw"))
    prepare_nnet_for_compute(nnet)
    computer = XvectorComputer(nnet)
    rng = np.random.default_rng(0)
    feats = [rng.standard_normal((120 + n, nnet.input_dim("input"))).astype(np.float32)
             for n in range(70)]
    xvectors = [computer.compute(f) for f in feats]
    assert len(computer._shapes) == 64
    assert len(computer._workspaces) == 1
    arenas = {id(plan.workspace) for _, plans in computer._shapes.values()
              for plan in plans.values()}
    assert len(arenas) == 1
    # and the plans hold views of that arena's current array only
    (workspace,) = computer._workspaces.values()
    assert {id(plan._views_array) for _, plans in computer._shapes.values()
            for plan in plans.values() if plan._views_array is not None} == {id(workspace._array)}
    for f, x in list(zip(feats, xvectors))[::10]:
        assert np.array_equal(XvectorComputer(nnet).compute(f), x)


def test_xvector_computer_lays_weights_out_for_its_products(monkeypatch):
    """The x-vector computer stores the weight matrices column-major, as
    nnet3-compute's computer does (the products' weight operands are then
    plain row-major blocks: 5% less CPU on the x-vector bench model), and
    its x-vectors are those of the network as read, within float rounding."""
    from pynnet3.compute import xvector
    from pynnet3.compute.utterance import prepare_nnet_for_compute
    from pynnet3.components.affine import AffineComponent
    from pynnet3.nnet.nnet import Nnet
    nnet = prepare_nnet_for_compute(Nnet.read(str(DATA / "xvector" / "extract.raw")))
    plain = nnet.copy()
    computer = xvector.XvectorComputer(nnet)
    affine = [c for c in nnet.components if isinstance(c, AffineComponent)]
    assert affine and all(c.linear_params.flags.f_contiguous for c in affine)
    rng = np.random.default_rng(1)
    f = rng.standard_normal((150, nnet.input_dim("input"))).astype(np.float32)
    # the x-vector with the weights as read (row-major)
    monkeypatch.setattr(xvector, "lay_out_for_products", lambda n: 0)
    unlaid = xvector.XvectorComputer(plain).compute(f)
    assert not all(c.linear_params.flags.f_contiguous for c in plain.components
                   if isinstance(c, AffineComponent))
    np.testing.assert_allclose(computer.compute(f), unlaid, rtol=1e-4, atol=1e-5)
