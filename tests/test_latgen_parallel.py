"""nnet3-latgen-faster-parallel: with worker threads, the same bytes as
nnet3-latgen-faster (lattices, words, alignments, in input order) and the
same per-utterance log lines where the serial tool's decoder history does not
matter (these 4 utterances); each utterance decoded as by a new decoder, as
Kaldi's parallel tool does; errors in a worker stop the tool cleanly; the
task sequencer keeps order, bounds what is pending, runs jobs at once and
never waits forever."""

import io
import logging
import os
import re
import threading
import time
from contextlib import redirect_stderr

import numpy as np
import pytest

from pynnet3.bin import nnet3_latgen_faster, nnet3_latgen_faster_parallel
from pynnet3.bin._task_sequencer import TaskSequencer
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


@pytest.mark.parametrize("threads", ["--num-threads=2", "--num-threads=1"])
def test_every_utterance_is_decoded_as_by_a_new_decoder(tmp_path, threads, monkeypatch):
    """As Kaldi's nnet3-latgen-faster-parallel: every utterance is decoded
    by a decoder that is new or renewed (the same, see the next test), so
    that its result depends neither on the utterances decoded before it nor
    on which thread took it; each thread keeps one decoder object."""
    from pynnet3.bin import _latgen
    decodes = []        # (decoder, whether it was new or renewed)
    made = []           # kept alive, so that ids are not reused
    make = _latgen.make_decoder

    def recording_make_decoder(fst, config):
        decoder = make(fst, config)
        state = {"as_new": True}
        decode, renew = decoder.decode, decoder.renew

        def recording_decode(loglikes, tid_to_pdf):
            decodes.append((id(decoder), state["as_new"]))
            state["as_new"] = False
            return decode(loglikes, tid_to_pdf)

        def recording_renew():
            state["as_new"] = True
            renew()

        decoder.decode, decoder.renew = recording_decode, recording_renew
        made.append(decoder)
        return decoder

    monkeypatch.setattr(_latgen, "make_decoder", recording_make_decoder)
    status, log = run(nnet3_latgen_faster_parallel, argv(tmp_path, "par", *threads.split()))
    assert status == 0, log
    assert len(decodes) == 4 and all(as_new for _, as_new in decodes), decodes
    assert len(made) <= int(threads.split("=")[1]), len(made)
    assert (tmp_path / "words.par.txt").read_text() == \
        open(os.path.join(DATA, "words.narrow.txt")).read()


def test_renewed_decoder_decodes_as_a_new_one(kaldi_ref):
    """LatticeFasterDecoder.renew: after decoding one utterance, a renewed
    decoder gives the token lattice (tokens, links and their order) that a
    new decoder gives for the next, where a decoder merely kept gives
    another order (its hash table kept the size the first utterance needed;
    decode/large's graph has 142,458 states, so the size matters)."""
    from pynnet3.decoding.config import LatticeFasterDecoderConfig
    from pynnet3.decoding.decodable import (DecodableAmNnetSimple, decodable_nnet_computer,
                                            transition_id_to_pdf_table)
    from pynnet3.decoding.fst import read_fst
    from pynnet3.decoding.lattice_faster_decoder import make_decoder
    from pynnet3.io.table import RandomAccessTableReader, SequentialTableReader
    from pynnet3.model.am import read_mdl
    large = os.path.join(str(kaldi_ref), "decode", "large")
    trans_model, am_nnet = read_mdl(os.path.join(large, "model", "final.mdl"))
    computer = decodable_nnet_computer(am_nnet)
    tid_to_pdf = transition_id_to_pdf_table(trans_model)
    fst = read_fst(os.path.join(large, "graph", "HCLG.fst"))
    ivectors = RandomAccessTableReader("ark:" + os.path.join(large, "online-ivectors.ark"))
    scores = []
    for utt, feats in SequentialTableReader("ark:" + os.path.join(large, "feats.ark")):
        decodable = DecodableAmNnetSimple(computer, tid_to_pdf, feats[:300],
                                          online_ivectors=ivectors.value(utt),
                                          online_ivector_period=10)
        scores.append(decodable.loglikes * np.float32(0.1))
        if len(scores) == 2:
            break
    config = LatticeFasterDecoderConfig(beam=11, lattice_beam=6, max_active=3000)

    def token_lattice(decoder):
        lattice = decoder.token_lattice()
        return [getattr(lattice, field) for field in lattice.__slots__]

    new = make_decoder(fst, config)
    new.decode(scores[1], tid_to_pdf)
    expected = token_lattice(new)
    used = make_decoder(fst, config)
    used.decode(scores[0], tid_to_pdf)
    used.decode(scores[1], tid_to_pdf)
    kept = token_lattice(used)
    assert not all(np.array_equal(a, b) for a, b in zip(kept, expected))
    used.decode(scores[0], tid_to_pdf)
    used.renew()
    used.decode(scores[1], tid_to_pdf)
    renewed = token_lattice(used)
    for field, a, b in zip(new.token_lattice().__slots__, renewed, expected):
        assert np.array_equal(a, b), field


@pytest.mark.parametrize("threads, expected", [("--num-threads=2", 1), ("--num-threads=1", 0)])
def test_decoding_threads_share_one_malloc_arena(tmp_path, threads, expected, monkeypatch):
    """With decoding threads the tool asks for one malloc arena, before any
    of them starts; decoding in the main thread leaves the allocator alone."""
    calls = []
    monkeypatch.setattr(nnet3_latgen_faster_parallel, "share_one_malloc_arena",
                        lambda: calls.append(threading.active_count()))
    before = threading.active_count()
    status, log = run(nnet3_latgen_faster_parallel, argv(tmp_path, "par", threads))
    assert status == 0, log
    assert calls == [before] * expected


def test_bad_thread_options(tmp_path):
    status, log = run(nnet3_latgen_faster_parallel,
                      argv(tmp_path, "x", "--num-threads=4", "--num-threads-total=2"))
    assert status == 255 and "num-threads-total" in log
    assert not (tmp_path / "lat.x.ark").exists()


def _fail_on(x):
    if x == 3:
        raise PynnetError("bad item %d" % x)
    return x * 10


def test_sequencer_keeps_order_and_reraises():
    seq = TaskSequencer(2, 3)
    got = []
    for x in (5, 1, 2):
        got.extend(seq.submit(_fail_on, x))
    got.extend(seq.drain())
    assert got == [50, 10, 20]
    with pytest.raises(PynnetError, match="bad item 3"):
        for x in (4, 3, 6):
            got.extend(seq.submit(_fail_on, x))
        got.extend(seq.drain())
    seq.abort()
    assert got == [50, 10, 20, 40]


def test_sequencer_order_when_later_jobs_finish_first():
    def job(x):
        time.sleep(0.05 * (5 - x))
        return x
    with TaskSequencer(3, 4) as seq:
        got = []
        for x in range(6):
            got.extend(seq.submit(job, x))
        got.extend(seq.drain())
    assert got == list(range(6))


def test_sequencer_bounds_pending_jobs():
    """With max_pending 3, the fourth submit waits for the first result."""
    started = []
    lock = threading.Lock()

    def job(x):
        with lock:
            started.append(x)
        return x
    with TaskSequencer(2, 3) as seq:
        handed = []
        for x in range(10):
            for r in seq.submit(job, x):
                handed.append(r)
            assert x + 1 - len(handed) < 3
        handed.extend(seq.drain())
    assert handed == list(range(10))


def _sleeping_job(x):
    start = time.time()
    time.sleep(1.0)
    return x, start, time.time()


def test_sequencer_runs_jobs_at_once():
    """Two jobs on two threads overlap in time (each sleeps 1 s, GIL free)."""
    with TaskSequencer(2, 2) as seq:
        got = []
        for x in range(2):
            got.extend(seq.submit(_sleeping_job, x))
        got.extend(seq.drain())
    assert [x for x, _, _ in got] == [0, 1]
    (_, start0, end0), (_, start1, end1) = got
    assert max(start0, start1) < min(end0, end1)


def test_sequencer_abort_cancels_waiting_jobs_and_returns():
    """A failure while jobs are queued: abort drops the queued jobs, waits
    only for the running one, and returns (no hang)."""
    ran = []

    def job(x):
        ran.append(x)
        if x == 0:
            raise PynnetError("first job fails")
        time.sleep(0.2)
        return x
    start = time.time()
    seq = TaskSequencer(1, 50)
    with pytest.raises(PynnetError, match="first job fails"):
        for x in range(30):
            list(seq.submit(job, x))
        list(seq.drain())
    seq.abort()
    assert time.time() - start < 5
    assert len(ran) < 30


def test_sequencer_logs_in_job_order():
    """Log records made in the workers come out in job order, just before
    each job's result, even when the jobs finish in another order."""
    logger = logging.getLogger("pynnet3.test_sequencer")
    lines = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())
    handler = Collect()
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.INFO)
    try:
        def job(x):
            time.sleep(0.05 * (4 - x))
            logger.info("job %d", x)
            return x
        with TaskSequencer(4, 4) as seq:
            for x in range(4):
                for r in seq.submit(job, x):
                    lines.append("result %d" % r)
            for r in seq.drain():
                lines.append("result %d" % r)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    assert lines == ["job 0", "result 0", "job 1", "result 1", "job 2", "result 2",
                     "job 3", "result 3"]


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
