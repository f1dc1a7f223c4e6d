"""Backend row kernels and compression against plain-Python twins.

Each twin is the readable statement of Kaldi's CuMatrix semantics (row loops,
-1 / NULL meaning "no row"); the kernels must agree with it on random tables,
including repeated rows, -1 entries, views with column offsets, and alpha.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynnet3.compute.backend import Backend, get_backend
from pynnet3.errors import ComputationError

B = Backend()


def _rand(rng, rows, cols):
    return rng.standard_normal((rows, cols)).astype(np.float32)


# -- twins ---------------------------------------------------------------------------

def twin_copy_rows(dest, src, idx):
    for i, r in enumerate(idx):
        dest[i] = src[r] if r >= 0 else 0.0


def twin_add_rows(dest, alpha, src, idx):
    for i, r in enumerate(idx):
        if r >= 0:
            dest[i] += np.float32(alpha) * src[r]


def twin_add_row_ranges(dest, alpha, src, pairs):
    for i, (b, e) in enumerate(pairs):
        for j in range(b, e):
            dest[i] += np.float32(alpha) * src[j]


def twin_copy_rows_multi(dest, mats, pairs):
    for i, (s, r) in enumerate(pairs):
        dest[i] = mats[s][r] if s >= 0 else 0.0


def twin_add_rows_multi(dest, alpha, mats, pairs):
    for i, (s, r) in enumerate(pairs):
        if s >= 0:
            dest[i] += np.float32(alpha) * mats[s][r]


def twin_copy_to_rows_multi(src, mats, pairs):
    for i, (s, r) in enumerate(pairs):
        if s >= 0:
            mats[s][r] = src[i]


def twin_add_to_rows_multi(alpha, src, mats, pairs):
    for i, (s, r) in enumerate(pairs):
        if s >= 0:
            mats[s][r] += np.float32(alpha) * src[i]


# -- strategies --------------------------------------------------------------------------

seeds = st.integers(0, 2**31 - 1)
alphas = st.sampled_from([1.0, -1.0, 0.5, 2.0])


@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(1, 12), st.integers(1, 12), st.floats(0.0, 0.6))
def test_copy_rows_and_add_rows(seed, n_src, n_dest, missing):
    rng = np.random.default_rng(seed)
    src_full = _rand(rng, n_src, 7)
    src = src_full[:, 1:6]          # a view with a column offset, as submatrices are
    idx = rng.integers(0, n_src, n_dest)
    idx[rng.random(n_dest) < missing] = -1
    rows = B.prepare_rows(idx.tolist())
    for alpha in (1.0, -0.5):
        base = _rand(rng, n_dest, 9)
        ours, twin = base.copy(), base.copy()
        B.add_rows(ours[:, 2:7], alpha, src, rows)
        twin_add_rows(twin[:, 2:7], alpha, src, idx)
        np.testing.assert_allclose(ours, twin, rtol=1e-6, atol=1e-6)
    ours, twin = base.copy(), base.copy()
    B.copy_rows(ours[:, 2:7], src, rows)
    twin_copy_rows(twin[:, 2:7], src, idx)
    np.testing.assert_array_equal(ours, twin)


def test_copy_rows_identity_range_uses_the_slice():
    src = np.arange(20, dtype=np.float32).reshape(10, 2)
    rows = B.prepare_rows([3, 4, 5])
    assert rows.identity_offset == 3
    dest = np.zeros((3, 2), np.float32)
    B.copy_rows(dest, src, rows)
    np.testing.assert_array_equal(dest, src[3:6])


@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(1, 10), st.integers(1, 10), alphas)
def test_add_row_ranges(seed, n_src, n_dest, alpha):
    rng = np.random.default_rng(seed)
    src = _rand(rng, n_src, 4)
    pairs = []
    for _ in range(n_dest):
        if rng.random() < 0.2:
            pairs.append((-1, -1))
        else:
            b = int(rng.integers(0, n_src))
            pairs.append((b, int(rng.integers(b, n_src + 1))))
    base = _rand(rng, n_dest, 4)
    ours, twin = base.copy(), base.copy()
    B.add_row_ranges(ours, alpha, src, B.prepare_ranges(pairs))
    twin_add_row_ranges(twin, alpha, src, [(max(b, 0), max(e, 0)) for b, e in pairs])
    np.testing.assert_allclose(ours, twin, rtol=1e-5, atol=1e-5)


def _multi_setup(rng, n_dest, repeat_ok):
    # Three "submatrices" (1, 2, 3): 2 and 3 are views into one matrix.
    big = _rand(rng, 8, 6)
    mats = {1: _rand(rng, 5, 4), 2: big[0:4, 1:5], 3: big[4:8, 2:6]}
    pairs = []
    used = set()
    for _ in range(n_dest):
        if rng.random() < 0.2:
            pairs.append((-1, -1))
            continue
        s = int(rng.integers(1, 4))
        r = int(rng.integers(0, mats[s].shape[0]))
        if not repeat_ok and (s, r) in used:
            pairs.append((-1, -1))
            continue
        used.add((s, r))
        pairs.append((s, r))
    return big, mats, pairs


def _copy_mats(big, mats):
    big2 = big.copy()
    return big2, {1: mats[1].copy(), 2: big2[0:4, 1:5], 3: big2[4:8, 2:6]}


@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(1, 12), alphas)
def test_multi_row_kernels(seed, n_dest, alpha):
    rng = np.random.default_rng(seed)
    big, mats, pairs = _multi_setup(rng, n_dest, repeat_ok=True)
    multi = B.prepare_multi(pairs)
    base = _rand(rng, n_dest, 4)

    ours, twin = base.copy(), base.copy()
    B.copy_rows_multi(ours, mats, multi)
    twin_copy_rows_multi(twin, mats, pairs)
    np.testing.assert_array_equal(ours, twin)

    ours, twin = base.copy(), base.copy()
    B.add_rows_multi(ours, alpha, mats, multi)
    twin_add_rows_multi(twin, alpha, mats, pairs)
    np.testing.assert_allclose(ours, twin, rtol=1e-6, atol=1e-6)

    # AddToRows accumulates repeated targets.
    b1, m1 = _copy_mats(big, mats)
    b2, m2 = _copy_mats(big, mats)
    B.add_to_rows_multi(alpha, base, m1, multi)
    twin_add_to_rows_multi(alpha, base, m2, pairs)
    np.testing.assert_allclose(b1, b2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m1[1], m2[1], rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(seeds, st.integers(1, 12))
def test_copy_to_rows_multi(seed, n_dest):
    rng = np.random.default_rng(seed)
    big, mats, pairs = _multi_setup(rng, n_dest, repeat_ok=False)
    multi = B.prepare_multi(pairs)
    src = _rand(rng, n_dest, 4)
    b1, m1 = _copy_mats(big, mats)
    b2, m2 = _copy_mats(big, mats)
    B.copy_to_rows_multi(src, m1, multi)
    twin_copy_to_rows_multi(src, m2, pairs)
    np.testing.assert_array_equal(b1, b2)
    np.testing.assert_array_equal(m1[1], m2[1])


# -- compression -----------------------------------------------------------------------------

def test_uint8_sign_compression_keeps_only_positive():
    m = np.array([[-1.5, 0.0, 2.0], [1e-8, -0.0, 300.0]], np.float32)
    c = B.compress(m, 2, 0.0, True)
    np.testing.assert_array_equal(B.decompress(c), [[0, 0, 1], [1, 0, 1]])


@pytest.mark.parametrize("ctype,lo,hi", [(1, -128, 127), (2, 0, 255), (3, -32768, 32767),
                                         (4, 0, 65535)])
def test_range_compression_rounds_and_truncates(ctype, lo, hi):
    rng = np.random.default_rng(ctype)
    m = (rng.standard_normal((5, 7)) * 3).astype(np.float32)
    rng_ = 4.0
    scale = np.float32(np.float32(rng_) / np.float32(hi))
    out = B.decompress(B.compress(m, ctype, rng_, True))
    q = np.clip(np.rint(m * np.float32(1.0 / float(scale))), lo, hi)
    np.testing.assert_array_equal(out, (q * scale).astype(np.float32))
    # inside the range the error is at most half a step
    inside = (m >= (lo / hi) * rng_) & (m <= rng_)
    assert np.all(np.abs(out - m)[inside] <= scale / 2 + 1e-6)
    assert out.dtype == np.float32 and out.flags.c_contiguous


def test_rounding_is_half_to_even():
    # range 127 for int8 makes the scale exactly 1.
    m = np.array([[0.5, 1.5, 2.5, -0.5, -1.5]], np.float32)
    out = B.decompress(B.compress(m, 1, 127.0, True))
    np.testing.assert_array_equal(out, [[0, 2, 2, -0, -2]])


def test_no_truncate_wraps_like_c():
    m = np.array([[130.0]], np.float32)
    out = B.decompress(B.compress(m, 1, 127.0, False))
    assert out[0, 0] == -126.0
    assert B.decompress(B.compress(m, 1, 127.0, True))[0, 0] == 127.0


def test_bad_compression_arguments_raise():
    m = np.ones((2, 2), np.float32)
    with pytest.raises(ComputationError, match="type"):
        B.compress(m, 9, 1.0, True)
    with pytest.raises(ComputationError, match="sign"):
        B.compress(m, 1, 0.0, True)


def test_get_backend():
    assert get_backend("numpy").xp is np
    assert get_backend(B) is B
    with pytest.raises(ComputationError, match="unknown backend"):
        get_backend("tpu")


def test_allocation_is_float32_c_contiguous():
    m = B.empty(3, 5)
    assert m.dtype == np.float32 and m.flags.c_contiguous and m.shape == (3, 5)
    assert np.isnan(B.empty(2, 2, fill=np.nan)).all()
    h = B.from_host(np.arange(6, dtype=np.float64).reshape(2, 3)[:, ::-1])
    assert h.dtype == np.float32 and h.flags.c_contiguous
