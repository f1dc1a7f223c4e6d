"""Shared fixtures: where Kaldi's reference data lives.

``kaldi_ref`` is ../shared/kaldi-ref beside the checkout (the full oracle).
Outside CI a missing oracle skips the tests that need it; under CI (CI=true)
its absence is a failure. ``test_data`` is tests/data, the small subset of the
oracle that ships with the repository so a fresh clone still tests something.
"""

import os
from pathlib import Path

import pytest

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
