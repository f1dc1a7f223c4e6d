"""The Kaldi oracle must be there under CI (elsewhere its tests skip)."""

from conftest import kaldi_ref_dir


def test_kaldi_ref_has_the_expected_folders():
    ref = kaldi_ref_dir()
    for name in ("models", "random", "components", "descriptors", "bad", "bench"):
        assert (ref / name).is_dir(), name
