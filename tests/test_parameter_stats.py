"""Kaldi's parameter-statistics text (PrintParameterStats / SummarizeVector).

Whole Info() lines are checked against Kaldi in the component tests; these
cases pin the formatting rules themselves.
"""

import numpy as np
import pytest

from pynnet3.common import parameter_stats as ps


@pytest.mark.parametrize("value, text", [
    (12.4, "12"), (9999.4, "9999"), (10000.0, "10000.0"), (-25.5, "-26"),
    (0.995, "1.0"), (0.994, "0.99"), (1.04, "1.0"), (-3.25, "-3.2"),
    (0.0123, "0.01"), (0.0099, "0.01"), (0.004, "0.004"), (0.0, "0"), (-0.00012, "-0.0001"),
    (float("inf"), "inf"),
])
def test_format_float_succinctly(value, text):
    assert ps.format_float_succinctly(value) == text


def test_short_vector_printed_whole():
    assert ps.summarize_vector([0.5, 1, -0.03, 20]) == "[ 0.50 1.0 -0.03 20 ]"
    assert ps.summarize_vector([]) == "[ ]"


def test_long_vector_percentiles():
    v = np.arange(1, 21, dtype=np.float32)
    assert ps.summarize_vector(v) == ("[percentiles(0,1,2,5 10,20,50,80,90 95,98,99,100)="
                                      "(1.0,1.0,1.0,1.0 2.0,4.0,10,16,18 19,19,19,20), "
                                      "mean=10.5, stddev=5.77]")


def test_vector_and_matrix_stats():
    assert ps.vector_stats("bias", [1, 2, 3, 4], True) == ", bias-{mean,stddev}=2.5,1.118"
    assert ps.vector_stats("offsets", [3, 4]) == ", offsets-rms=3.536"
    m = np.array([[3, 4], [0, 0], [1, 0]], np.float32)
    assert ps.matrix_stats("w", m, include_row_norms=True, include_column_norms=True) == (
        ", w-rms=2.082, w-row-norms=[ 5.0 0 1.0 ], w-col-norms=[ 3.2 4.0 ]")
    assert ps.matrix_stats("w", m, include_mean=True) == ", w-{mean,stddev}=1.333,1.599"


def test_constant_vector_can_give_kaldis_negative_nan():
    # In float, sum(x^2)/n - mean^2 rounds below zero for these constants; the
    # square root is the x86 default NaN, which glibc prints as "-nan".
    assert ps.vector_stats("x", np.full(3, 1.7, np.float32), True) == ", x-{mean,stddev}=1.7,-nan"
    assert ps.vector_stats("x", np.full(4, 1.0, np.float32), True) == ", x-{mean,stddev}=1,0"


def test_singular_values_with_verbose_level():
    m = np.diag(np.arange(1, 4, dtype=np.float32))
    assert "singular-values" not in ps.matrix_stats("p", m)
    assert ps.matrix_stats("p", m, include_singular_values=True).endswith(
        ", p-singular-values=[ 3.0 2.0 1.0 ]")
    ps.set_verbose_level(2)
    try:
        from pynnet3.components.affine import LinearComponent
        assert "params-singular-values=[ 3.0 2.0 1.0 ]" in LinearComponent(m).info()
    finally:
        ps.set_verbose_level(0)


def test_sums_follow_blas_order():
    """The reductions differ from exact sums only by float rounding."""
    rng = np.random.default_rng(3)
    m = rng.standard_normal((37, 150)).astype(np.float32)
    rows = ps._sdot_unit_rows(m, m)
    cols = ps._sdot_strided_cols(m)
    np.testing.assert_allclose(rows, (m.astype(np.float64) ** 2).sum(1), rtol=1e-5)
    np.testing.assert_allclose(cols, (m.astype(np.float64) ** 2).sum(0), rtol=1e-5)
    v = m.ravel()
    assert ps._vector_sum(v) == pytest.approx(float(v.astype(np.float64).sum()), abs=1e-3)
