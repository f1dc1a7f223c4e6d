"""nnet3-latgen-faster-parallel: with worker processes, the same bytes as
nnet3-latgen-faster (lattices, words, alignments, in input order) and the
same per-utterance log lines; errors in a worker stop the tool cleanly."""

import io
import os
import re
from contextlib import redirect_stderr

import pytest

from pynnet3.bin import nnet3_latgen_faster, nnet3_latgen_faster_parallel
from pynnet3.bin._fork_pool import OrderedForkPool
from pynnet3.errors import PynnetError

DATA = os.path.join(os.path.dirname(__file__), "data", "decode", "tdnn_lda")


def run(tool, argv):
    err = io.StringIO()
    with redirect_stderr(err):
        status = tool.main(argv)
    return status, err.getvalue()


def argv(tmp_path, tag, *options):
    return list(options) + [
        "--online-ivectors=ark:" + os.path.join(DATA, "online-ivectors.ark"),
        "--online-ivector-period=10", "--acoustic-scale=0.1", "--beam=11",
        "--lattice-beam=6", "--allow-partial=true",
        "--word-symbol-table=" + os.path.join(DATA, "words.txt"),
        os.path.join(DATA, "final.mdl"), os.path.join(DATA, "HCLG.fst"),
        "ark:" + os.path.join(DATA, "feats.ark"), "ark:%s/lat.%s.ark" % (tmp_path, tag),
        "ark,t:%s/words.%s.txt" % (tmp_path, tag), "ark,t:%s/ali.%s.txt" % (tmp_path, tag)]


def utterance_lines(log):
    """The per-utterance lines (words and log-likelihoods), without the
    source location of the log lines."""
    return [re.sub(r"\(.*?\) ", "", line) for line in log.splitlines()
            if line.startswith("utt") or "Log-like per frame" in line]


@pytest.mark.parametrize("threads", ["--num-threads=2", "--num-threads=3 --num-threads-total=3",
                                     "--num-threads=1"])
def test_parallel_equals_sequential(tmp_path, threads):
    status, serial_log = run(nnet3_latgen_faster, argv(tmp_path, "serial"))
    assert status == 0, serial_log
    status, log = run(nnet3_latgen_faster_parallel, argv(tmp_path, "par", *threads.split()))
    assert status == 0, log
    for kind in ("lat.%s.ark", "words.%s.txt", "ali.%s.txt"):
        assert (tmp_path / (kind % "par")).read_bytes() == \
            (tmp_path / (kind % "serial")).read_bytes(), kind
    assert utterance_lines(log) == utterance_lines(serial_log)
    assert "Done 4 utterances, failed for 0" in log
    assert "real-time factor assuming 100 feature frames/sec" in log
    assert (tmp_path / "words.par.txt").read_text() == \
        open(os.path.join(DATA, "words.narrow.txt")).read()


def test_bad_thread_options(tmp_path):
    status, log = run(nnet3_latgen_faster_parallel,
                      argv(tmp_path, "x", "--num-threads=4", "--num-threads-total=2"))
    assert status == 255 and "num-threads-total" in log
    assert not (tmp_path / "lat.x.ark").exists()


def _fail_on(x):
    if x == 3:
        raise PynnetError("bad item %d" % x)
    return x * 10


def test_ordered_pool_keeps_order_and_reraises():
    pool = OrderedForkPool(_fail_on, 2, 3)
    got = []
    for x in (5, 1, 2):
        got.extend(pool.submit((x,)))
    got.extend(pool.drain())
    assert got == [50, 10, 20]
    with pytest.raises(PynnetError, match="bad item 3"):
        for x in (4, 3, 6):
            got.extend(pool.submit((x,)))
        got.extend(pool.drain())
    pool.terminate()


def test_worker_error_leaves_no_output(tmp_path):
    # Features of the wrong dimension: the network computation fails in a worker.
    from pynnet3.io.table import TableWriter
    import numpy as np
    with TableWriter("ark:%s" % (tmp_path / "bad.ark")) as w:
        w.write("utt1", np.zeros((20, 7), dtype=np.float32))
    args = argv(tmp_path, "bad", "--num-threads=2")
    args[-4] = "ark:%s" % (tmp_path / "bad.ark")
    status, log = run(nnet3_latgen_faster_parallel, args)
    assert status == 255, log
    assert "ERROR (nnet3-latgen-faster-parallel" in log
    assert not (tmp_path / "lat.bad.ark").exists()


def _sleeping_job(x):
    import time
    start = time.time()
    time.sleep(1.0)
    return x, start, time.time()


def test_ordered_pool_runs_jobs_at_once():
    """Two jobs sent to two workers overlap in time (each sleeps 1 s)."""
    pool = OrderedForkPool(_sleeping_job, 2, 2)
    got = []
    for x in range(2):
        got.extend(pool.submit((x,)))
    got.extend(pool.drain())
    pool.close()
    assert [x for x, _, _ in got] == [0, 1]
    (_, start0, end0), (_, start1, end1) = got
    assert max(start0, start1) < min(end0, end1)
