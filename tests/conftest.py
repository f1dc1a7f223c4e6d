"""Shared fixtures: where Kaldi's reference data lives.

``kaldi_ref`` is ../shared/kaldi-ref beside the checkout (the full oracle).
Outside CI a missing oracle skips the tests that need it; under CI (CI=true)
its absence is a failure. ``test_data`` is tests/data, the small subset of the
oracle that ships with the repository so a fresh clone still tests something.
"""

import os
from pathlib import Path

import numpy as np
import pytest

from pynnet3.common.index import Index
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.compute.computer import NnetComputer

REPO = Path(__file__).resolve().parent.parent
KALDI_REF = Path(os.environ.get("PYNNET3_KALDI_REF", REPO.parent / "shared" / "kaldi-ref"))
TEST_DATA = REPO / "tests" / "data"


def kaldi_ref_dir():
    """The kaldi-ref folder, or None (skip) / failure under CI when absent."""
    if KALDI_REF.is_dir():
        return KALDI_REF
    if os.environ.get("CI"):
        pytest.fail("kaldi-ref not found at %s (required under CI)" % KALDI_REF)
    pytest.skip("kaldi-ref not found at %s" % KALDI_REF)


@pytest.fixture(scope="session")
def kaldi_ref():
    return kaldi_ref_dir()


@pytest.fixture(scope="session")
def test_data():
    return TEST_DATA


@pytest.fixture(autouse=True)
def _oracle_blas_threads(monkeypatch):
    """kaldi-ref's outputs were made with 2 OpenBLAS threads, and code that
    follows OpenBLAS's thread count from the environment (CollapseModel's
    products, Kaldi-exact arithmetic's default) gives their bits only with
    that count: every test runs with OPENBLAS_NUM_THREADS=2 unless it sets
    its own (child processes inherit it)."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")


def skip_if_blas_kernels_forced():
    """Skips a test that compares N computer threads' bits with one
    thread's where OPENBLAS_CORETYPE forces NumPy's OpenBLAS kernels: with
    its Haswell kernels (2026-11-28) a row's last bits depend on how many
    rows share its product, so the threads' other cut of the chunks into
    computations gives other bits (the README says so)."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        pytest.skip("OPENBLAS_CORETYPE=%s forces kernels whose rounding of a row depends on "
                    "the rows in its product: N threads' bits are then not one thread's"
                    % os.environ["OPENBLAS_CORETYPE"])


def run_with_plan(computation, nnet, plan, features, debug=False):
    """The output of a computation from node 'input' to node 'output', run
    with ``plan`` (None: unplanned) and new memory full of NaN, so that a
    read of a value nothing wrote shows in the output."""
    computer = NnetComputer(computation, nnet, plan=plan, undefined_fill=np.nan, debug=debug)
    computer.accept_input("input", features)
    computer.run()
    return computer.get_output("output")


def example_request(num_frames, num_sequences=1):
    """A request for the shipped example network (tdnn_lda): ``num_frames``
    outputs of each of ``num_sequences`` sequences n = 0, 1, ..., with 20
    frames of input context on each side and one i-vector per sequence."""
    sequences = range(num_sequences)
    return ComputationRequest(
        inputs=[IoSpecification("input", [Index(n, t, 0) for n in sequences
                                          for t in range(-20, num_frames + 20)]),
                IoSpecification("ivector", [Index(n, 0, 0) for n in sequences])],
        outputs=[IoSpecification("output", [Index(n, t, 0) for n in sequences
                                            for t in range(num_frames)])])


# -- quick reports for failing comparisons of large files --------------------------

#: Above this many bytes/characters, a failing ``==`` reports where the two
#: first differ instead of pytest's full diff (which, for a model file of a few
#: megabytes, can take longer than the whole suite).
LARGE_COMPARISON = 4096


def first_difference(left, right):
    """Offset of the first element where ``left`` and ``right`` (bytes or str)
    differ; the shorter length when one is a prefix of the other."""
    n = min(len(left), len(right))
    if isinstance(left, str):
        left, right = left.encode("utf-32-le"), right.encode("utf-32-le")
        a = np.frombuffer(left, dtype=np.uint32, count=n)
        b = np.frombuffer(right, dtype=np.uint32, count=n)
    else:
        a = np.frombuffer(left, dtype=np.uint8, count=n)
        b = np.frombuffer(right, dtype=np.uint8, count=n)
    diff = np.flatnonzero(a != b)
    return int(diff[0]) if diff.size else n


def describe_difference(left, right, context=60):
    """A few lines saying where two long bytes/str values first differ: the
    offset, the line number, and a short excerpt of each side."""
    at = first_difference(left, right)
    newline = b"\n" if isinstance(left, bytes) else "\n"
    line = left.count(newline, 0, at) + 1
    lo = max(0, at - context)
    return ["values differ (lengths %d and %d); first difference at offset %d (line %d):"
            % (len(left), len(right), at, line),
            "  left:  %r" % (left[lo:at + context],),
            "  right: %r" % (right[lo:at + context],)]


def pytest_assertrepr_compare(op, left, right):
    if op == "==" and type(left) is type(right) and isinstance(left, (bytes, str)) \
            and max(len(left), len(right)) > LARGE_COMPARISON:
        return describe_difference(left, right)
    return None
