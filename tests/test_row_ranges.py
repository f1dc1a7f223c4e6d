"""The AddRowRanges kernel against its Python twin (bit for bit) and
against a float64 reference (close)."""

import numpy as np
import pytest

from pynnet3.components import row_ranges
from pynnet3.errors import ComputationError


@pytest.mark.parametrize("seed", range(8))
def test_kernel_equals_twin(seed):
    rng = np.random.default_rng(seed)
    # widths below and above the kernel's 4- and 16-column vector steps
    width = int(rng.integers(1, 9) if seed % 2 else rng.integers(9, 70))
    src = rng.standard_normal((rng.integers(1, 60), width)).astype(np.float32)
    n = rng.integers(0, 20)
    a = rng.integers(-1, src.shape[0] + 1, size=n)
    b = rng.integers(-1, src.shape[0] + 1, size=n)
    ranges = np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1).clip(0, src.shape[0])
    ranges[::4] = (-1, -1)                        # Kaldi's empty range
    dst0 = rng.standard_normal((n, src.shape[1])).astype(np.float32)
    fast, twin = dst0.copy(), dst0.copy()
    row_ranges.add_row_ranges(src, ranges, fast)
    row_ranges.add_row_ranges_py(src, ranges, twin)
    assert np.array_equal(fast, twin)
    ref = dst0.astype(np.float64)
    for r, (lo, hi) in enumerate(ranges):
        if hi > lo:
            ref[r] += src[lo:hi].astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-5)
    # a strided destination (a column range) works the same
    wide = np.zeros((n, src.shape[1] + 2), np.float32)
    narrow = np.zeros((n, src.shape[1]), np.float32)
    row_ranges.add_row_ranges(src, ranges, wide[:, 1:-1])
    row_ranges.add_row_ranges(src, ranges, narrow)
    assert np.array_equal(wide[:, 1:-1], narrow) and not wide[:, [0, -1]].any()
    # a source whose columns are not adjacent takes the element loop: same bits
    spaced = np.zeros((src.shape[0], 2 * src.shape[1]), np.float32)
    spaced[:, ::2] = src
    strided = dst0.copy()
    row_ranges.add_row_ranges(spaced[:, ::2], ranges, strided)
    assert np.array_equal(strided, fast)
    # squares (statistics extraction): each rounded to float32, then added
    squares, twin_squares, spaced_squares = dst0.copy(), dst0.copy(), dst0.copy()
    row_ranges.add_row_ranges(src, ranges, squares, squared=True)
    row_ranges.add_row_ranges_py(src, ranges, twin_squares, squared=True)
    row_ranges.add_row_ranges(spaced[:, ::2], ranges, spaced_squares, squared=True)
    copy_then_add = dst0.copy()
    row_ranges.add_row_ranges_py(src * src, ranges, copy_then_add)
    assert np.array_equal(squares, twin_squares)
    assert np.array_equal(squares, spaced_squares)
    assert np.array_equal(squares, copy_then_add)
    # onto zeros: the bits of zeroing first, whatever dst held (a -0.0 in
    # the source gives +0.0, as 0 + -0 does; compared as bits)
    src[rng.random(src.shape) < 0.1] = -0.0
    spaced[:, ::2] = src
    for squared in (True, False):
        zeroed = np.zeros_like(dst0)
        row_ranges.add_row_ranges(src, ranges, zeroed, squared=squared)
        for kernel in (row_ranges.add_row_ranges, row_ranges.add_row_ranges_py):
            for target in (dst0.copy(), np.full_like(dst0, np.nan)):
                kernel(src, ranges, target, squared=squared, onto_zeros=True)
                assert np.array_equal(target.view(np.uint32), zeroed.view(np.uint32))
                kernel(spaced[:, ::2], ranges, target, squared=squared, onto_zeros=True)
                assert np.array_equal(target.view(np.uint32), zeroed.view(np.uint32))


def test_ranges_outside_the_source_are_refused():
    src = np.zeros((3, 2), np.float32)
    with pytest.raises(ComputationError, match="outside the 3 source rows"):
        row_ranges.add_row_ranges(src, [[0, 4]], np.zeros((1, 2), np.float32))
    with pytest.raises(ComputationError, match="2 ranges for 1 destination rows"):
        row_ranges.add_row_ranges(src, [[0, 1], [1, 2]], np.zeros((1, 2), np.float32))
