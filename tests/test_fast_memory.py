"""The compiled kernels give back the memory they take: analysing a
computation again and again leaves glibc's heap where it was.

Until 2026-11-27 the analysis kernel's CommandAttributesList kept its lists
in C arrays of C++ vectors, which Cython never destroys: every analysis (the
checker, and each optimization pass that analyses) leaked them, 10 MB per
compiled computation of the chain BLSTM in scripts/bench_compute.py.
Measured with glibc's mallinfo2 (C allocations, which tracemalloc does not
see); skipped where the C library has none."""

import gc

import pytest

import pynnet3
from pynnet3 import examples
from pynnet3.common import heap
from conftest import example_request

fast = pytest.importorskip("pynnet3._fast.analysis_kernel")


def _malloc_in_use():
    gc.collect()
    info = heap.malloc_info()
    if info is None:
        pytest.skip("no glibc mallinfo2 here")
    return info.uordblks + info.hblkhd


def _heap_growth(action, times):
    """Bytes glibc's heap holds after ``times`` more calls of ``action``
    than after the first (which may set up what stays)."""
    action()
    before = _malloc_in_use()
    for _ in range(times):
        action()
    return _malloc_in_use() - before


def test_analysing_a_computation_repeatedly_does_not_grow_the_heap():
    nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
    computation = pynnet3.compile(nnet, example_request(400), optimize=False)
    grown = _heap_growth(lambda: fast.Analyzer().init(nnet, computation), 200)
    assert grown < 256 * 1024, "200 analyses left %d bytes allocated" % grown


def test_compiling_and_optimizing_repeatedly_does_not_grow_the_heap():
    """The whole compilation (graph, steps, computation, checks, every
    optimization pass), each time from scratch as for a new chunk shape."""
    nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
    request = example_request(200)
    grown = _heap_growth(lambda: pynnet3.compile(nnet, request), 30)
    assert grown < 256 * 1024, "30 compilations left %d bytes allocated" % grown
