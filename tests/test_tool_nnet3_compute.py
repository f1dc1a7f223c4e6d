"""nnet3-compute against Kaldi: every model and every variant in
kaldi-ref/models/*/compute-variants.txt (and compute.mdl_priors), run as the
command in compute.VARIANT.cmd says (in that folder), must write an archive
that agrees with Kaldi's compute.VARIANT.ark: same keys in the same order,
same shapes, max |ours - kaldi| <= 1e-3 * max(1, max |kaldi|). Where Kaldi
refused (an ERROR in its log, no archive) we must refuse: exit status 1, an
ERROR line, no archive. A copy of the tdnn_lda case lives in tests/data so a
fresh clone checks something.

Plus the tool's own behaviour: usage, bad input as Kaldi handles it, the
summary lines, i-vectors by speaker (--utt2spk), --use-priors.
"""

import os
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

from pynnet3.bin import nnet3_compute
from pynnet3.io.table import TableWriter, read_table

from conftest import KALDI_REF, TEST_DATA, describe_difference

DATA = TEST_DATA / "compute"


def _cases(root):
    if not root.is_dir():
        return []
    return sorted(root.glob("*/compute.*.cmd"))


CASES = _cases(KALDI_REF / "models") or _cases(DATA)


def _case_id(cmd):
    return "%s-%s" % (cmd.parent.name, cmd.name[len("compute."):-len(".cmd")])


def assert_matches(ours, kaldi, what):
    assert set(ours) == set(kaldi) and list(ours) == list(kaldi), what
    for utt, value in kaldi.items():
        assert ours[utt].shape == value.shape, (what, utt)
        worst = float(np.abs(ours[utt].astype(np.float64) - value).max(initial=0.0))
        tol = 1e-3 * max(1.0, float(np.abs(value).max(initial=0.0)))
        assert worst <= tol, "%s %s: max|ours-kaldi| %g > %g" % (what, utt, worst, tol)


def run_kaldi_command(cmd, tool, tmp_path, monkeypatch, capsys, extra_options=()):
    """Runs the command of ``cmd`` (a .cmd file) with our ``tool`` in its
    folder, its output archive redirected to ``tmp_path`` (``extra_options``
    put before the command's own). Returns (status, our archive path,
    Kaldi's archive path, stderr)."""
    words = shlex.split(cmd.read_text())
    assert words[0] == tool.__name__.rsplit(".", 1)[1].replace("_", "-")
    out_spec = words[-1]
    assert out_spec.startswith("ark:")
    ours = tmp_path / "out.ark"
    monkeypatch.chdir(cmd.parent)
    status = tool.main(list(extra_options) + words[1:-1] + ["ark:" + str(ours)])
    err = capsys.readouterr().err
    return status, ours, cmd.parent / out_spec[4:], err


@pytest.mark.parametrize("batch", [1, 3], ids=["kaldi", "batch3"])
@pytest.mark.parametrize("cmd", CASES, ids=_case_id)
def test_variant_agrees_with_kaldi(cmd, batch, tmp_path, monkeypatch, capsys):
    """Also in our batched mode (--batch-size=3: chunks of three utterances
    in one computation), which must give the same archive."""
    extra = ["--batch-size=%d" % batch] if batch > 1 else []
    status, ours, kaldi_ark, err = run_kaldi_command(cmd, nnet3_compute, tmp_path,
                                                      monkeypatch, capsys, extra)
    if not kaldi_ark.is_file():
        log = cmd.with_suffix(".log").read_text()
        assert "ERROR" in log
        assert status == 255, err
        assert "ERROR (nnet3-compute" in err and "Not all outputs were computable" in err
        assert not ours.exists()
        return
    assert status == 0, err
    assert_matches(dict(read_table("ark:" + str(ours))),
                   dict(read_table("ark:" + str(kaldi_ark))), _case_id(cmd))
    assert "Done %d utterances, failed for 0" % len(dict(read_table("ark:" + str(ours)))) \
        in err
    assert "real-time factor assuming 100 frames/sec is" in err


# -- the tool's own behaviour (on the shipped tdnn_lda copy) ---------------------------------------

@pytest.fixture()
def lda(tmp_path):
    for name in ("model.raw", "feats.ark", "online-ivectors.ark"):
        shutil.copy(DATA / "tdnn_lda" / name, tmp_path / name)
    return tmp_path


def _run(argv, capsys):
    status = nnet3_compute.main([str(a) for a in argv])
    return status, capsys.readouterr().err


def _online(d):
    return ["--online-ivectors=ark:%s" % (d / "online-ivectors.ark"),
            "--online-ivector-period=10"]


def test_usage(capsys):
    status, err = _run([], capsys)
    assert status == 1
    assert "Usage: nnet3-compute [options] <nnet-in> <features-rspecifier> " \
           "<matrix-wspecifier>" in err
    for option in ("--extra-left-context-initial", "--frame-subsampling-factor",
                   "--acoustic-scale", "--ivectors", "--utt2spk", "--online-ivectors",
                   "--online-ivector-period", "--apply-exp", "--use-gpu", "--use-priors",
                   "--debug-computation", "--computation.debug", "--frames-per-chunk"):
        assert "  %s " % option in err
    assert "(float, default = 1)" in err       # nnet3-compute's acoustic scale


def test_missing_online_ivector_skips(lda, capsys):
    ivectors = dict(read_table("ark:%s" % (lda / "online-ivectors.ark")))
    del ivectors["utt2"]
    with TableWriter("ark:%s" % (lda / "iv.ark")) as w:
        for k, v in ivectors.items():
            w.write(k, v)
    status, err = _run(["--online-ivectors=ark:%s" % (lda / "iv.ark"),
                        "--online-ivector-period=10", lda / "model.raw",
                        "ark:%s" % (lda / "feats.ark"), "ark:%s" % (lda / "out.ark")], capsys)
    assert status == 0
    assert "WARNING (nnet3-compute" in err and "No online iVector available for " \
        "utterance utt2" in err
    assert "Done 3 utterances, failed for 1" in err
    assert list(dict(read_table("ark:%s" % (lda / "out.ark")))) == ["utt1", "utt3", "utt4"]


def test_ivectors_by_speaker(lda, capsys):
    """--ivectors with --utt2spk looks i-vectors up by speaker; the result
    equals giving each utterance its speaker's i-vector directly."""
    online = dict(read_table("ark:%s" % (lda / "online-ivectors.ark")))
    spk = {"utt1": "a", "utt2": "a", "utt3": "b", "utt4": "b"}
    (lda / "utt2spk").write_text("".join("%s %s\n" % kv for kv in spk.items()))
    with TableWriter("ark:%s" % (lda / "spk.ark")) as w:
        w.write("a", online["utt1"][0])
        w.write("b", online["utt3"][1])
    with TableWriter("ark:%s" % (lda / "utt.ark")) as w:
        for utt, s in spk.items():
            w.write(utt, online["utt1"][0] if s == "a" else online["utt3"][1])
    args = [lda / "model.raw", "ark:%s" % (lda / "feats.ark")]
    status, err = _run(["--ivectors=ark:%s" % (lda / "spk.ark"),
                        "--utt2spk=ark:%s" % (lda / "utt2spk")] + args
                       + ["ark:%s" % (lda / "a.ark")], capsys)
    assert status == 0, err
    status, err = _run(["--ivectors=ark:%s" % (lda / "utt.ark")] + args
                       + ["ark:%s" % (lda / "b.ark")], capsys)
    assert status == 0, err
    a = dict(read_table("ark:%s" % (lda / "a.ark")))
    b = dict(read_table("ark:%s" % (lda / "b.ark")))
    assert list(a) == list(spk)
    for utt in spk:
        np.testing.assert_array_equal(a[utt], b[utt])
    # An utterance missing from utt2spk is an error (Kaldi's wording).
    (lda / "utt2spk").write_text("utt1 a\n")
    status, err = _run(["--ivectors=ark:%s" % (lda / "spk.ark"),
                        "--utt2spk=ark:%s" % (lda / "utt2spk")] + args
                       + ["ark:%s" % (lda / "c.ark")], capsys)
    assert status == 255
    assert "Attempting to read key utt2, which is not present in utt2spk map" in err
    assert not (lda / "c.ark").exists()


def test_bad_inputs(lda, capsys):
    feats = "ark:%s" % (lda / "feats.ark")
    out = lda / "out.ark"
    # Wrong feature dimension: Kaldi's error, exit 1, no archive.
    with TableWriter("ark:%s" % (lda / "bad.ark")) as w:
        w.write("utt1", np.zeros((20, 12), np.float32))
    status, err = _run(_online(lda) + [lda / "model.raw", "ark:%s" % (lda / "bad.ark"),
                                       "ark:%s" % out], capsys)
    assert status == 255
    assert "Neural net expects 'input' features with dimension 13 but you provided 12" in err
    assert not out.exists()
    # An unreadable model.
    (lda / "junk.raw").write_bytes(b"\0Bjunk")
    status, err = _run(_online(lda) + [lda / "junk.raw", feats, "ark:%s" % out], capsys)
    assert status == 255 and "ERROR (nnet3-compute" in err and not out.exists()
    status, err = _run(_online(lda) + [lda / "missing.raw", feats, "ark:%s" % out], capsys)
    assert status == 255 and "missing.raw" in err and not out.exists()
    # A bad rspecifier.
    status, err = _run(_online(lda) + [lda / "model.raw", "feats.ark", "ark:%s" % out],
                       capsys)
    assert status == 255 and "rspecifier" in err and not out.exists()
    # An empty utterance is skipped with Kaldi's warning; with nothing done, exit 1.
    with TableWriter("ark:%s" % (lda / "empty.ark")) as w:
        w.write("utt1", np.zeros((0, 13), np.float32))
    status, err = _run(_online(lda) + [lda / "model.raw", "ark:%s" % (lda / "empty.ark"),
                                       "ark:%s" % out], capsys)
    assert status == 1
    assert "WARNING (nnet3-compute" in err and "Zero-length utterance: utt1" in err
    assert "Done 0 utterances, failed for 1" in err
    # --use-gpu takes only Kaldi's values.
    status, err = _run(["--use-gpu=maybe"] + _online(lda) + [lda / "model.raw", feats,
                                                             "ark:%s" % out], capsys)
    assert status == 255 and "--use-gpu=yes|no|optional|wait" in err


def test_use_priors_needs_an_mdl(lda, capsys):
    status, err = _run(["--use-priors=true"] + _online(lda) + [
        lda / "model.raw", "ark:%s" % (lda / "feats.ark"), "ark:%s" % (lda / "o.ark")], capsys)
    assert status == 255 and "ERROR (nnet3-compute" in err
    assert not (lda / "o.ark").exists()


def test_multi_chunk_equals_kaldi_chunking(lda, capsys):
    """A chunked run (17 frames, extra context) agrees with Kaldi's archive for
    the same options (shipped copy of kaldi-ref's chunk17_ctx variant)."""
    kaldi = DATA / "tdnn_lda" / "compute.chunk17_ctx.ark"
    status, err = _run(_online(lda) + ["--frames-per-chunk=17", "--extra-left-context=5",
                                       "--extra-right-context=3", lda / "model.raw",
                                       "ark:%s" % (lda / "feats.ark"),
                                       "ark,t:%s" % (lda / "t.ark")], capsys)
    assert status == 0, err
    assert_matches(dict(read_table("ark:%s" % (lda / "t.ark"))),
                   dict(read_table("ark:%s" % kaldi)), "chunk17_ctx")


def test_dev_null_output_stays_a_device(lda, capsys):
    """Recipes write ark:/dev/null; it must be written in place, not replaced
    by a renamed temporary file."""
    import os
    import stat
    status, err = _run(_online(lda) + [lda / "model.raw", "ark:%s" % (lda / "feats.ark"),
                                       "ark:/dev/null"], capsys)
    assert status == 0, err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_compute_threads_share_one_malloc_arena(lda, capsys, monkeypatch):
    """With threads of its own (OPENBLAS_NUM_THREADS > 1, BLAS arithmetic)
    the tool asks for one malloc arena before they start; with one thread or
    Kaldi's exact arithmetic it leaves the allocator alone."""
    from pynnet3.bin import _compute_threads
    calls = []
    monkeypatch.setattr(_compute_threads, "share_one_malloc_arena", lambda: calls.append(1))
    args = _online(lda) + [lda / "model.raw", "ark:%s" % (lda / "feats.ark"), "ark:/dev/null"]
    for threads, extra, expected in (("2", [], 1), ("1", [], 0),
                                     ("2", ["--kaldi-exact-arithmetic=true"], 0)):
        calls.clear()
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", threads)
        status, err = _run(extra + args, capsys)
        assert status == 0, err
        assert len(calls) == expected, (threads, extra)


def test_glibc_takes_the_one_arena_setting():
    import platform
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt's arena limit is glibc's")
    from pynnet3.bin._malloc_arenas import share_one_malloc_arena
    assert share_one_malloc_arena() is True


_RSS_SCRIPT = r"""
import resource, sys
import numpy as np
from pynnet3.bin import nnet3_compute
from pynnet3.io.table import TableWriter
n, d, model = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = np.random.default_rng(0)
with TableWriter("ark:%s/f.ark" % d) as w:
    w.write("long", rng.standard_normal((n, 13), dtype=np.float32))
with TableWriter("ark:%s/i.ark" % d) as w:
    w.write("long", rng.standard_normal(((n + 9) // 10, 10), dtype=np.float32))
del w
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
status = nnet3_compute.main(["--online-ivectors=ark:%s/i.ark" % d, "--online-ivector-period=10",
                             model, "ark:%s/f.ark" % d, "ark:%s/o.ark" % d])
print(status, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base)
"""


def test_long_utterance_memory_is_bounded_by_the_chunk(tmp_path):
    """A long utterance is computed chunk by chunk: the peak memory grows
    with the utterance's input and output matrices only, not with the
    computation (which one whole-utterance chunk would make ~100x larger).
    (Measured: 360,000 frames of this model peak at ~164 MB RSS.)"""
    import subprocess
    import sys
    growth = {}
    for n in (2000, 40000):
        d = tmp_path / str(n)
        d.mkdir()
        result = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(n), str(d),
                                 str(DATA / "tdnn_lda" / "model.raw")],
                                capture_output=True, text=True, timeout=300,
                                cwd=str(DATA.parent.parent.parent))
        assert result.returncode == 0, result.stderr
        status, kb = result.stdout.split()
        assert status == "0"
        growth[n] = int(kb) * 1024
    frames = 40000 - 2000
    # input (13 floats), output (30 floats) and the output's serialized copy
    utterance_bytes = frames * 4 * (13 + 2 * 30)
    assert growth[40000] - growth[2000] < 2 * utterance_bytes + (16 << 20), growth


@pytest.mark.parametrize("spec", ["ark", "ark,t"])
def test_output_is_written_as_it_is_computed(tmp_path, spec, capsys):
    """An utterance's output goes to the archive block by block as its
    chunks are computed: the whole output matrix is never in memory (traced
    peak below the features plus half the output), and the archive is byte
    for byte what writing the whole matrix gives, --apply-exp included."""
    import tracemalloc
    from pynnet3.compute.utterance import (SimpleNnetComputer, apply_exp,
                                           prepare_nnet_for_compute)
    from pynnet3.nnet.nnet import Nnet
    frames = 200000 if spec == "ark" else 3000
    rng = np.random.default_rng(5)
    feats = rng.standard_normal((frames, 13), dtype=np.float32)
    ivectors = rng.standard_normal(((frames + 9) // 10, 10), dtype=np.float32)
    with TableWriter("ark:%s" % (tmp_path / "f.ark")) as w:
        w.write("long", feats)
    with TableWriter("ark:%s" % (tmp_path / "i.ark")) as w:
        w.write("long", ivectors)
    model = DATA / "tdnn_lda" / "model.raw"
    options = ["--apply-exp=true", "--online-ivectors=ark:%s" % (tmp_path / "i.ark"),
               "--online-ivector-period=10"]
    out = "%s:%s" % (spec, tmp_path / "o.ark")
    tracemalloc.start()
    try:
        status, err = _run(options + [model, "ark:%s" % (tmp_path / "f.ark"), out], capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert status == 0, err
    nnet = prepare_nnet_for_compute(Nnet.read(str(model)))
    # the tool's threads (OPENBLAS_NUM_THREADS, 2 here), so the same chunks
    # go into the same computations whatever kernels OpenBLAS runs
    threads = int(os.environ["OPENBLAS_NUM_THREADS"])
    computer = SimpleNnetComputer(nnet, num_threads=threads)
    try:
        whole = apply_exp(computer.compute_utterance(
            feats, online_ivectors=ivectors, online_ivector_period=10))
    finally:
        computer.close()
    with TableWriter("%s:%s" % (spec, tmp_path / "whole.ark")) as w:
        w.write("long", whole)
    written, expected = (tmp_path / "o.ark").read_bytes(), (tmp_path / "whole.ark").read_bytes()
    same = written == expected          # (pytest's own diff of 50 MB would take hours)
    assert same, describe_difference(written, expected)
    if spec == "ark":
        assert peak < feats.nbytes + whole.nbytes // 2, (peak, feats.nbytes, whole.nbytes)


def test_output_rows_come_in_order_whatever_the_computation_order(lda):
    """Chunks computed out of row order (here: every computation reversed)
    are held until their turn: the blocks still stack to the output."""
    from pynnet3.compute.utterance import (SimpleComputationOptions, SimpleNnetComputer,
                                           prepare_nnet_for_compute)
    from pynnet3.nnet.nnet import Nnet
    nnet = prepare_nnet_for_compute(Nnet.read(str(lda / "model.raw")))
    rng = np.random.default_rng(2)
    feats = rng.standard_normal((437, 13), dtype=np.float32)
    ivectors = rng.standard_normal((44, 10), dtype=np.float32)

    class ReversedComputer(SimpleNnetComputer):
        def _batches(self, utterances):
            inputs, totals, batches = super()._batches(utterances)
            return inputs, totals, batches[::-1]

    options = SimpleComputationOptions(frames_per_chunk=20)
    expected = SimpleNnetComputer(nnet, options, max_chunks=3).compute_utterance(
        feats, online_ivectors=ivectors, online_ivector_period=10)
    computer = ReversedComputer(nnet, options, max_chunks=3)
    num_rows, blocks = computer.utterance_output_rows(feats, online_ivectors=ivectors,
                                                      online_ivector_period=10)
    got = np.concatenate([np.array(block) for block in blocks])
    assert num_rows == expected.shape[0] == got.shape[0]
    np.testing.assert_array_equal(got, expected)


def _threaded_computer(nnet, options, cls=None, **kw):
    from pynnet3.compute import blas_threads
    from pynnet3.compute.utterance import SimpleNnetComputer
    if not blas_threads.available():
        pytest.skip("NumPy's BLAS thread count cannot be changed here")
    computer = (cls or SimpleNnetComputer)(nnet, options, num_threads=2, **kw)
    assert computer.num_threads == 2
    return computer


def test_submitted_utterances_equal_one_at_a_time(lda):
    """Utterances submitted one after the other to a computer's threads, all
    before any block is read, come out as each computed alone on one
    thread (the same computations), bit for bit."""
    from pynnet3.compute import blas_threads
    from pynnet3.compute.utterance import (SimpleComputationOptions, SimpleNnetComputer,
                                           prepare_nnet_for_compute)
    from pynnet3.nnet.nnet import Nnet
    nnet = prepare_nnet_for_compute(Nnet.read(str(lda / "model.raw")))
    rng = np.random.default_rng(3)
    options = SimpleComputationOptions(frames_per_chunk=20)
    utterances = []
    for n in (437, 31, 200, 7):
        utterances.append((rng.standard_normal((n, 13), dtype=np.float32),
                           rng.standard_normal(((n + 9) // 10, 10), dtype=np.float32)))
    one = SimpleNnetComputer(nnet, options, max_chunks=3)
    threaded = _threaded_computer(nnet, options, max_chunks=3)
    submitted = [threaded.submit_utterance(f, online_ivectors=i, online_ivector_period=10)
                 for f, i in utterances]
    for (feats, ivectors), (num_rows, blocks) in zip(utterances, submitted):
        with blas_threads.single_threaded():        # as on a worker
            expected = one.compute_utterance(feats, online_ivectors=ivectors,
                                             online_ivector_period=10)
        got = np.concatenate([np.array(block) for block in blocks])
        assert num_rows == expected.shape[0]
        np.testing.assert_array_equal(got, expected)


def test_a_failed_computation_fails_its_utterance_and_stops_the_rest(lda):
    """An error in one of the threads' computations is raised where that
    utterance's blocks are read; that utterance's computations not yet
    started are cancelled, and the threads stay usable."""
    import threading
    from pynnet3.compute.utterance import (SimpleComputationOptions, SimpleNnetComputer,
                                           prepare_nnet_for_compute)
    from pynnet3.errors import ComputationError
    from pynnet3.nnet.nnet import Nnet
    nnet = prepare_nnet_for_compute(Nnet.read(str(lda / "model.raw")))
    rng = np.random.default_rng(4)
    feats = rng.standard_normal((300, 13), dtype=np.float32)
    failing_feats = feats.copy()
    ivectors = rng.standard_normal((30, 10), dtype=np.float32)
    started, release = [], threading.Event()

    class FailingComputer(SimpleNnetComputer):
        """The computations of ``failing_feats`` fail: the first at once,
        the others once the failure has been seen."""

        def _run_batch(self, inputs, batch):
            if inputs[0] is failing_feats:
                started.append(batch)
                if len(started) > 1:
                    release.wait(60)
                raise ComputationError("injected failure")
            return super()._run_batch(inputs, batch)

    options = SimpleComputationOptions(frames_per_chunk=20)
    computer = _threaded_computer(nnet, options, max_chunks=1, cls=FailingComputer)
    assert len(computer._batches([(feats, None, ivectors, 10)])[2]) == 15
    expected = computer.compute_utterance(feats, online_ivectors=ivectors,
                                          online_ivector_period=10)
    num_rows, blocks = computer.submit_utterance(failing_feats, online_ivectors=ivectors,
                                                 online_ivector_period=10)
    with pytest.raises(ComputationError, match="injected failure"):
        list(blocks)
    release.set()
    # The next utterance's computations queue behind any of the failed one's
    # left: once its blocks are read, every one of those that was not
    # cancelled has run.
    num_rows, blocks = computer.submit_utterance(feats, online_ivectors=ivectors,
                                                 online_ivector_period=10)
    np.testing.assert_array_equal(np.concatenate([np.array(b) for b in blocks]), expected)
    # 15 computations (one chunk each); only those already started ran (the
    # failed one and at most one more per thread): the rest were cancelled
    assert 1 <= len(started) <= 3


def test_threaded_tool_writes_what_one_thread_writes(lda, capsys, monkeypatch, tmp_path):
    """nnet3-compute on two threads of its own (utterances pipelined) writes
    the bytes it writes on one."""
    rng = np.random.default_rng(5)
    with TableWriter("ark:%s" % (tmp_path / "f.ark")) as w, \
            TableWriter("ark:%s" % (tmp_path / "i.ark")) as wi:
        for k, n in enumerate((120, 64, 333, 5, 90)):
            w.write("utt%d" % k, rng.standard_normal((n, 13), dtype=np.float32))
            wi.write("utt%d" % k, rng.standard_normal(((n + 9) // 10, 10), dtype=np.float32))
    outputs = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", threads)
        out = tmp_path / ("o%s.ark" % threads)
        status, err = _run(["--online-ivectors=ark:%s" % (tmp_path / "i.ark"),
                            "--online-ivector-period=10", "--frames-per-chunk=20",
                            "--chunks-per-computation=2", lda / "model.raw",
                            "ark:%s" % (tmp_path / "f.ark"), "ark:%s" % out], capsys)
        assert status == 0, err
        outputs[threads] = out.read_bytes()
    assert len(dict(read_table("ark:%s" % (tmp_path / "o2.ark")))) == 5
    assert outputs["1"] == outputs["2"]


def test_computation_debug_logs_every_command(lda, capsys):
    status, err = _run(["--computation.debug=true"] + _online(lda) + [
        lda / "model.raw", "ark:%s" % (lda / "feats.ark"), "ark:%s" % (lda / "o.ark")], capsys)
    assert status == 0, err
    lines = [line for line in err.splitlines() if "\t|\t time: " in line]
    assert lines and all(line.startswith("LOG (nnet3-compute") for line in lines)
    assert any("Propagate" in line for line in lines)


def test_progress_bar_only_on_a_terminal():
    import io
    from pynnet3.bin._progress import ProgressBar

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    bar = ProgressBar(3, "utterances", stream=tty)
    for _ in range(3):
        bar.step()
    bar.close()
    assert "3/3 utterances" in tty.getvalue() and tty.getvalue().endswith("\n")
    plain = io.StringIO()
    bar = ProgressBar(3, "utterances", stream=plain)
    bar.step()
    bar.close()
    assert plain.getvalue() == ""
    silent = Tty()
    bar = ProgressBar(None, "utterances", stream=silent)     # archive input: count unknown
    bar.step()
    bar.close()
    assert silent.getvalue() == ""


def test_kaldi_bad_case_wrong_feature_dim(kaldi_ref, tmp_path, capsys):
    """kaldi-ref bad/wrong-feat-dim (a 7-dimensional feature archive for
    models/tdnn_lda, whose network expects 13): Kaldi's ERROR message, Kaldi's
    exit status, no archive left behind."""
    bad = kaldi_ref / "bad"
    out = tmp_path / "out.ark"
    status, err = _run([kaldi_ref / "models" / "tdnn_lda" / "model.raw",
                        "ark:%s" % (bad / "wrong-dim-feats.ark"), "ark:%s" % out], capsys)
    kaldi_error = [line for line in (bad / "wrong-feat-dim.stderr").read_text().splitlines()
                   if line.startswith("ERROR")][0]
    assert status == int((bad / "wrong-feat-dim.exit").read_text()) == 255
    assert kaldi_error.split(") ", 1)[1] in err
    assert not out.exists()
