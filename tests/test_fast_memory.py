"""The compiled kernels give back the memory they take: analysing a
computation again and again leaves glibc's heap where it was.

Until 2026-11-27 the analysis kernel's CommandAttributesList kept its lists
in C arrays of C++ vectors, which Cython never destroys: every analysis (the
checker, and each optimization pass that analyses) leaked them, 10 MB per
compiled computation of the chain BLSTM in scripts/bench_compute.py.
Measured with glibc's mallinfo2 (C allocations, which tracemalloc does not
see); skipped where the C library has none."""

import ctypes
import gc

import pytest

import pynnet3
from pynnet3 import examples
from pynnet3.compiler.request import IoSpecification

fast = pytest.importorskip("pynnet3._fast.analysis_kernel")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _malloc_in_use():
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        pytest.skip("no glibc mallinfo2 here")
    mallinfo2.restype = _MallInfo2
    gc.collect()
    info = mallinfo2()
    return info.uordblks + info.hblkhd


def test_analysing_a_computation_repeatedly_does_not_grow_the_heap():
    nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
    request = pynnet3.ComputationRequest(
        inputs=[IoSpecification.from_t_range("input", -20, 420),
                IoSpecification.from_t_range("ivector", 0, 1)],
        outputs=[IoSpecification.from_t_range("output", 0, 400)])
    computation = pynnet3.compile(nnet, request, optimize=False)
    fast.Analyzer().init(nnet, computation)       # first-use allocations
    before = _malloc_in_use()
    for _ in range(200):
        fast.Analyzer().init(nnet, computation)
    grown = _malloc_in_use() - before
    assert grown < 256 * 1024, "200 analyses left %d bytes allocated" % grown


def test_compiling_and_optimizing_repeatedly_does_not_grow_the_heap():
    """The whole compilation (graph, steps, computation, checks, every
    optimization pass), each time from scratch as for a new chunk shape."""
    nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
    request = pynnet3.ComputationRequest(
        inputs=[IoSpecification.from_t_range("input", -20, 220),
                IoSpecification.from_t_range("ivector", 0, 1)],
        outputs=[IoSpecification.from_t_range("output", 0, 200)])
    pynnet3.compile(nnet, request)       # first-use allocations
    before = _malloc_in_use()
    for _ in range(30):
        pynnet3.compile(nnet, request)
    grown = _malloc_in_use() - before
    assert grown < 256 * 1024, "30 compilations left %d bytes allocated" % grown
