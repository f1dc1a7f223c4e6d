"""A compilation's temporaries do not stay in a tool's peak memory.

The caching compiler hands the heap's free pages back to the operating
system after each new compilation (pynnet3.common.heap), and the network
computer compiles every new chunk shape of an utterance before it runs the
first: the temporaries come and go before the computations' matrices exist.
On the chain BLSTM of scripts/bench_compute.py (nnet3-compute, 1 thread,
3 utterances) this took the peak RSS from 269.6 to 255.8 MB."""

import numpy as np
import pytest

import pynnet3
from pynnet3 import examples
from pynnet3.common import heap
from pynnet3.common.index import Index
from pynnet3.compiler.request import IoSpecification
from pynnet3.compute import computer as computer_module
from pynnet3.compute.utterance import (SimpleComputationOptions, SimpleNnetComputer,
                                       prepare_nnet_for_compute)
from pynnet3.driver import caching
from pynnet3.io.table import read_table


def _resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def test_release_free_heap_returns_pages_freed_inside_the_heap():
    if heap._TRIM is None:
        pytest.skip("no glibc malloc_trim here")
    # 64 KiB blocks (below glibc's mmap threshold: in the heap), every
    # eighth kept, so the freed ones lie between blocks still in use
    blocks = [bytearray(64 * 1024) for _ in range(1024)]
    kept = blocks[::8]
    del blocks
    before = _resident_bytes()
    assert heap.release_free_heap()
    released = before - _resident_bytes()
    assert released > 32 * 1024 * 1024, "released %d bytes of about 56 MiB freed" % released
    assert len(kept) == 128


def _counting_releases(monkeypatch):
    calls = []
    monkeypatch.setattr(caching, "release_free_heap", lambda: calls.append(1))
    return calls


def _request(num_frames, num_sequences=1):
    return pynnet3.ComputationRequest(
        inputs=[IoSpecification("input", [Index(n, t, 0) for n in range(num_sequences)
                                          for t in range(-20, num_frames + 20)]),
                IoSpecification("ivector", [Index(n, 0, 0)
                                            for n in range(num_sequences)])],
        outputs=[IoSpecification("output", [Index(n, t, 0)
                                            for n in range(num_sequences)
                                            for t in range(num_frames)])])


def test_compiler_releases_the_heap_once_per_new_compilation(monkeypatch):
    calls = _counting_releases(monkeypatch)
    compiler = caching.CachingOptimizingCompiler(pynnet3.Nnet.read(examples.path("tdnn_lda.raw")))
    compiler.compile(_request(30))
    assert len(calls) == 1
    compiler.compile(_request(30))                  # from the cache: nothing freed
    assert len(calls) == 1
    # four sequences: compiled for two and expanded (the two-sequence
    # computation is cached as well), one release for the whole call
    compiler.compile(_request(30, num_sequences=4))
    assert len(calls) == 2
    assert len(compiler.cache._entries) == 3


def test_one_thread_compiles_every_new_shape_before_the_first_run(monkeypatch):
    nnet = prepare_nnet_for_compute(pynnet3.Nnet.read(examples.path("tdnn_lda.raw")))
    feats = dict(read_table("ark:" + examples.path("feats.ark"), "matrix"))["utt3"]
    online_ivectors = dict(read_table("ark:" + examples.path("online-ivectors.ark"),
                                      "matrix"))["utt3"]
    opts = SimpleComputationOptions()
    opts.frames_per_chunk = 40
    computer = SimpleNnetComputer(nnet, opts)
    assert computer.num_threads == 1
    events = []
    compile_ = computer.compiler.compile
    monkeypatch.setattr(computer.compiler, "compile",
                        lambda request: events.append("compile") or compile_(request))
    run = computer_module.NnetComputer.run
    monkeypatch.setattr(computer_module.NnetComputer, "run",
                        lambda self: events.append("run") or run(self))
    num_frames = 40 * 3 + 7                 # whole chunks and a shorter last one
    output = computer.compute_utterance(feats[:num_frames], online_ivectors=online_ivectors,
                                        online_ivector_period=10)
    assert output.shape[0] == num_frames and np.isfinite(output).all()
    assert events.count("compile") == 2     # the whole chunks' shape, the last chunk's
    assert events.index("run") > max(i for i, e in enumerate(events) if e == "compile")
