"""Text-mode number formatting edge cases, as glibc's C++ streams print them."""

import numpy as np

from pynnet3.io.stream import OutputStream, format_float


def test_nan_and_inf_print_like_glibc():
    neg_nan = np.float32(np.copysign(np.float32(np.nan), -1.0))
    assert format_float(np.float32(np.nan)) == "nan"
    assert format_float(neg_nan) == "-nan"
    assert format_float(np.float32(np.inf)) == "inf"
    assert format_float(np.float32(-np.inf)) == "-inf"
    out = OutputStream(binary=False)
    out.write_vector(np.array([1.5, np.nan, neg_nan, -np.inf, 1e-10], dtype=np.float32))
    assert out.getvalue() == b" [ 1.5 nan -nan -inf 1e-10 ]\n"


def test_precision_seven_general_format():
    assert format_float(0.1) == "0.1"
    assert format_float(1.0 / 3.0) == "0.3333333"
    assert format_float(123456789.0) == "1.234568e+08"
    assert format_float(-0.0) == "-0"
