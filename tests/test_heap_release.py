"""A compilation's temporaries do not stay in a tool's peak memory.

The caching compiler gives the heap's free pages back to the operating
system after a compilation that grew resident memory by 16 MiB or more, or
(rationed) that left 4 MiB or more free in the heap (pynnet3.common.heap),
and the network computer compiles every new chunk shape of an utterance
before it runs the first: the temporaries come and go before the
computations' matrices exist. On the chain BLSTM of
scripts/bench_compute.py (nnet3-compute, 1 thread, 3 utterances) this took
the peak RSS from 270.3 to 255.8 MiB; on its TDNN-F with subsampling the
leftovers rule took it from 140.3 to 136.9 MB."""

import contextlib

import numpy as np
import pytest

import pynnet3
from conftest import example_request
from pynnet3 import examples
from pynnet3.common import heap
from pynnet3.compute import computer as computer_module
from pynnet3.compute.utterance import (SimpleComputationOptions, SimpleNnetComputer,
                                       prepare_nnet_for_compute)
from pynnet3.driver import caching
from pynnet3.io.table import read_table


def _fragmented_garbage(megabytes):
    """Allocates ``megabytes`` MiB in 64 KiB blocks (below glibc's mmap
    threshold: in the heap) and frees all but every eighth, so that the
    freed blocks lie between blocks still in use; returns those kept."""
    blocks = [bytearray(64 * 1024) for _ in range(megabytes * 16)]
    return blocks[::8]


def _skip_without_trim():
    if heap._TRIM is None or heap.resident_bytes() is None:
        pytest.skip("no glibc malloc_trim or /proc/self/statm here")


def test_release_free_heap_returns_pages_freed_inside_the_heap():
    _skip_without_trim()
    kept = _fragmented_garbage(64)
    before = heap.resident_bytes()
    assert heap.release_free_heap()
    released = before - heap.resident_bytes()
    assert released > 32 << 20, "released %d bytes of 56 MiB freed" % released
    assert len(kept) == 128


def test_growth_is_given_back_only_from_the_threshold_on():
    _skip_without_trim()
    heap.release_free_heap()
    start = heap.resident_bytes()
    # more than it grows, and the leftovers rule off
    with heap.GivingBack(min_growth=1 << 40, min_free=1 << 40).around():
        kept = _fragmented_garbage(64)
    assert heap.resident_bytes() - start > 48 << 20, "the freed blocks were given back"
    del kept
    heap.release_free_heap()
    start = heap.resident_bytes()
    with heap.GivingBack(min_growth=16 << 20, min_free=1 << 40).around():
        kept = _fragmented_garbage(64)
    grown = heap.resident_bytes() - start
    assert grown < 24 << 20, "%d bytes still resident of 56 MiB freed" % grown


def test_leftovers_are_given_back_after_the_1st_2nd_4th_8th_work(monkeypatch):
    """Works that leave 4 MiB or more free in the heap without growing
    resident memory by 16 MiB: given back after works 1, 2, 4 and 8 of 9,
    and the first of them gives the pages back for real."""
    _skip_without_trim()
    if heap.free_heap_bytes() is None:
        pytest.skip("no glibc mallinfo2 here")
    heap.release_free_heap()
    giving_back = heap.GivingBack(min_growth=1 << 40, min_free=4 << 20)
    start = heap.resident_bytes()
    with giving_back.around():
        kept = _fragmented_garbage(32)
    grown = heap.resident_bytes() - start
    assert grown < 12 << 20, "%d bytes still resident of 28 MiB freed" % grown
    released_after = []
    monkeypatch.setattr(heap, "release_free_heap",
                        lambda: released_after.append(giving_back.works))
    for _ in range(8):
        with giving_back.around():
            kept += _fragmented_garbage(8)
    assert released_after == [2, 4, 8]
    assert giving_back.leftover_releases == 4 and len(kept) == 64 + 8 * 16


def test_each_compilation_is_one_work_of_the_compilers_giving_back(monkeypatch):
    """Every computation compiled, the shortcut's two-sequence one
    included, is measured; a cache hit allocates nothing and is not."""
    calls = []

    @contextlib.contextmanager
    def recording():
        calls.append("enter")
        yield
        calls.append("exit")

    compiler = caching.CachingOptimizingCompiler(pynnet3.Nnet.read(examples.path("tdnn_lda.raw")))
    monkeypatch.setattr(compiler._giving_back, "around", recording)
    compiler.compile(example_request(30))
    assert calls == ["enter", "exit"]
    compiler.compile(example_request(30))               # from the cache
    assert calls == ["enter", "exit"]
    # four sequences: compiled for two (cached as well) and expanded
    compiler.compile(example_request(30, num_sequences=4))
    assert calls == ["enter", "exit", "enter", "enter", "exit", "exit"]
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
