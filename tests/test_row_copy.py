"""Row copies without temporaries (pynnet3.compute.row_copy): the kernel
against its twin and NumPy's copies, bit for bit, and the memory they
spare (the computer's kCopyRows, kCopyRowsMulti and kMatrixCopy)."""

import tracemalloc

import numpy as np
import pytest

from pynnet3.compute import row_copy
from pynnet3.compute.backend import Backend

needs_kernel = pytest.mark.skipif(row_copy._kernel is None, reason="kernel not built")


def _peak_bytes(fn):
    """The largest memory NumPy and Python allocated while ``fn`` ran."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


@needs_kernel
@pytest.mark.parametrize("seed", range(6))
def test_copy_rows_kernel_equals_twin_and_numpy(seed):
    rng = np.random.default_rng(seed)
    cols = int(rng.integers(1, 40))
    src = rng.standard_normal((int(rng.integers(1, 30)), cols)).astype(np.float32)
    n = int(rng.integers(0, 25))
    rows = rng.integers(-1, src.shape[0], size=n).astype(np.int64)
    expected = np.where((rows >= 0)[:, None], src[np.maximum(rows, 0)], np.float32(0.0))
    for fn in (row_copy.copy_rows, row_copy.copy_rows_py):
        # the destination a column range of a wider matrix, full of NaN first
        wide = np.full((n, cols + 3), np.nan, np.float32)
        fn(wide[:, 1:1 + cols], src, rows)
        assert np.array_equal(wide[:, 1:1 + cols], expected)
        assert np.isnan(wide[:, [0, -2, -1]]).all()
    # columns that are not adjacent (the element loop): the same numbers
    spaced = np.zeros((src.shape[0], 2 * cols), np.float32)
    spaced[:, ::2] = src
    out = np.empty((n, 2 * cols), np.float32)
    row_copy.copy_rows(out[:, ::2], spaced[:, ::2], rows)
    assert np.array_equal(out[:, ::2], expected)


@needs_kernel
def test_copy_rows_to_positions():
    src = np.arange(12, dtype=np.float32).reshape(4, 3)
    rows, positions = np.array([3, -1, 0], np.int64), np.array([4, 0, 2], np.int64)
    for fn in (row_copy.copy_rows, row_copy.copy_rows_py):
        dest = np.full((5, 3), 7.0, np.float32)
        fn(dest, src, rows, positions)
        assert dest.tolist() == [[0, 0, 0], [7, 7, 7], [0, 1, 2], [7, 7, 7], [9, 10, 11]]


@needs_kernel
def test_copy_matrix_between_interleaved_column_ranges():
    m = np.arange(5 * 8, dtype=np.float32).reshape(5, 8)
    expected = m.copy()
    expected[:, 0:5] = m[:, 3:8].copy()
    row_copy.copy_matrix(m[:, 0:5], m[:, 3:8])    # the ranges overlap in each row
    assert np.array_equal(m, expected)


@needs_kernel
@pytest.mark.parametrize("shape", [(1, 7), (7, 1), (16, 16), (33, 70), (300, 17), (5, 160)])
def test_copy_matrix_into_column_major_tile_by_tile(shape):
    """A row-major source into a column-major destination (how the weight
    matrices are laid out for the products) goes tile by tile: every value
    lands where NumPy's copy puts it, tails and row-sliced sources too."""
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    wide = rng.standard_normal((shape[0] + 3, shape[1] + 5)).astype(np.float32)
    for src in (wide[:shape[0], :shape[1]], wide[3:, 5:], wide[::-1][:shape[0], :shape[1]]):
        dest = np.full(shape, np.nan, np.float32, order="F")
        row_copy.copy_matrix(dest, src)
        assert dest.flags.f_contiguous and np.array_equal(dest, src)
    # a column range of a column-major matrix as destination
    big = np.zeros((shape[0], shape[1] + 4), np.float32, order="F")
    row_copy.copy_matrix(big[:, 2:2 + shape[1]], wide[:shape[0], :shape[1]])
    assert np.array_equal(big[:, 2:2 + shape[1]], wide[:shape[0], :shape[1]])
    assert not big[:, :2].any() and not big[:, 2 + shape[1]:].any()


@needs_kernel
def test_copies_between_memory_really_shared_read_the_untouched_source():
    m = np.arange(6 * 4, dtype=np.float32).reshape(6, 4)
    expected = m.copy()
    expected[1:] = m[:-1].copy()
    row_copy.copy_matrix(m[1:], m[:-1])     # each row's source is overwritten first
    assert np.array_equal(m, expected)
    m = np.arange(6 * 4, dtype=np.float32).reshape(6, 4)
    expected = m.copy()
    expected[[0, 1, 2]] = m[[2, 3, 0]].copy()
    row_copy.copy_rows(m, m, np.array([2, 3, 0], np.int64))   # row 0 is read after it is written
    assert np.array_equal(m[:3], expected[:3])


@needs_kernel
def test_backend_copies_make_no_temporary():
    """NumPy's gather (``dest[...] = src[rows]``) and a copy between two
    column ranges of one matrix each allocate the whole copied block; the
    backend's copies allocate nothing of that size."""
    backend = Backend()
    block = 2000 * 1000 * 4
    src = np.random.default_rng(0).standard_normal((2000, 1000)).astype(np.float32)
    dest = np.empty_like(src)
    rows = backend.prepare_rows(np.arange(1999, -1, -1))
    assert _peak_bytes(lambda: dest.__setitem__(Ellipsis, src[rows.src_rows])) >= block
    assert _peak_bytes(lambda: backend.copy_rows(dest, src, rows)) < block // 20
    assert np.array_equal(dest, src[::-1])

    both = np.zeros((2000, 2000), np.float32)
    both[:, 1000:] = src
    left, right = both[:, :1000], both[:, 1000:]
    assert _peak_bytes(lambda: left.__setitem__(Ellipsis, right)) >= block
    left[...] = 0.0
    assert _peak_bytes(lambda: backend.copy_matrix(left, right)) < block // 20
    assert np.array_equal(left, src)

    multi = backend.prepare_multi([(0, 5), (-1, -1), (1, 0)])
    out = np.full((3, 1000), np.nan, np.float32)
    backend.copy_rows_multi(out, [src, src[::-1]], multi)
    assert np.array_equal(out, np.stack([src[5], np.zeros(1000, np.float32), src[-1]]))
