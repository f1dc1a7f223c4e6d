"""A failing comparison of two large files reports where they first differ,
quickly, instead of pytest's full diff (see tests/conftest.py)."""

from conftest import LARGE_COMPARISON, describe_difference, first_difference, \
    pytest_assertrepr_compare


def test_first_difference_bytes_and_str():
    assert first_difference(b"abcdef", b"abcxef") == 3
    assert first_difference(b"abc", b"abcdef") == 3
    assert first_difference("héllo", "hélxo") == 3


def test_large_values_get_a_short_report():
    # (pytest's own diff of values this size takes minutes)
    left = b"x" * 3_000_000 + b"\n<Tok> 1.0 [\n 0.25" + b"y" * 3_000_000
    right = b"x" * 3_000_000 + b"\n<Tok> 1.0 [\n 0.26" + b"y" * 3_000_000
    report = pytest_assertrepr_compare("==", left, right)
    assert report[0].startswith("values differ (lengths 6000018 and 6000018); "
                                "first difference at offset 3000017 (line 3)")
    assert b"0.25" in eval(report[1].split(":", 1)[1]) and b"0.26" in eval(report[2].split(":", 1)[1])


def test_small_values_keep_pytests_report():
    assert pytest_assertrepr_compare("==", b"a" * LARGE_COMPARISON, b"b") is None
    assert pytest_assertrepr_compare("==", 1, 2) is None
    assert describe_difference("ab\ncd", "ab\nce")[0].endswith("(line 2):")
