"""The oracle's OpenBLAS arithmetic (pynnet3.numerics.openblas*).

- The fused multiply-add of the twin rounds once.
- sgemm has the bits of the oracle's OpenBLAS 0.3.21 (Debian's build,
  Haswell kernels) on products that take its serial and threaded drivers,
  every transpose combination, alpha and beta values and 1-4 threads: the
  digests below were computed by that library on the oracle's machine
  class; the Cython kernel and the NumPy twin must both give them.
- The kernel equals the twin on random shapes (both drivers, transposes,
  beta 0 / 1 / other, several k blocks, the libm fmaf path), and writes a
  column range of a wider matrix in place.
- The drivers' kernel calls cover every element once; the Haswell kernel's
  paired accumulators fall where it puts them.
- sgemv (Kaldi's AddMatVec) agrees with exact products to float32 accuracy
  and has that library's bits.
"""

import hashlib
from fractions import Fraction

import numpy as np
import pytest

from pynnet3 import _fast
from pynnet3.errors import NnetError
from pynnet3.numerics import openblas, openblas_plan

_kernel = _fast.load("openblas_kernel")
needs_kernel = pytest.mark.skipif(_kernel is None, reason="openblas_sgemm is not built")


def _exact_fma32(a, b, c):
    """round-to-nearest-even float32 of the exact a*b + c."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    lo = np.float32(float(exact))
    best = None
    for cand in (np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))):
        err = abs(Fraction(float(cand)) - exact)
        key = (err, int(np.array(cand).view(np.int32)) & 1)
        if best is None or key < best[0]:
            best = (key, cand)
    return best[1]


def test_fma32_rounds_once():
    # 1+2^-23 + (1+2^-18) * 2^-24 (1-2^-18): just below a float32 tie, on it in double.
    a = np.float32(1 + 2.0 ** -18)
    b = np.float32(2.0 ** -24 * (1 - 2.0 ** -18))
    c = np.float32(1 + 2.0 ** -23)
    assert openblas.fma32(a, b, c) == np.float32(1 + 2.0 ** -23)
    assert openblas.fma32(-a, b, -c) == -np.float32(1 + 2.0 ** -23)
    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal(300).astype(np.float32) for _ in range(3))
    ours = openblas.fma32(a, b, c)
    assert all(o == _exact_fma32(x, y, z) for o, x, y, z in zip(ours, a, b, c))


def _lcg_matrix(rows, cols, seed):
    """Float32 values in [-1, 1) from an integer hash: the same bits on every
    platform and NumPy version (the stored digests below depend on them)."""
    i = np.arange(rows * cols, dtype=np.uint64) + np.uint64(seed) * np.uint64(1000003)
    x = (i * np.uint64(2654435761) + np.uint64(12345)) % np.uint64(2 ** 32)
    return ((x >> np.uint64(8)).astype(np.float64) / 2.0 ** 23 - 1.0) \
        .astype(np.float32).reshape(rows, cols)


def _block_diagonal(blocks, size, seed):
    b = np.zeros((blocks * size, blocks * size), np.float32)
    for t in range(blocks):
        b[t * size:(t + 1) * size, t * size:(t + 1) * size] = _lcg_matrix(size, size, seed + t)
    return b


def _digest(matrix):
    return hashlib.sha256(matrix.astype("<f4").tobytes()).hexdigest()[:16]


def _both(a, b):
    """The twin's and (when built) the kernel's product A B."""
    results = [openblas.sgemm_py(a, b)]
    if _kernel is not None:
        results.append(openblas.sgemm(a, b))
    return results


# sha256 (first 16 hex digits) of the float32 bytes of A B as OpenBLAS 0.3.21
# (Debian's DYNAMIC_ARCH build, Haswell kernels, OPENBLAS_NUM_THREADS=2)
# computed it on the oracle's machine class: serial and threaded drivers,
# one and several row blocks, k split in 1-4 blocks, a block-diagonal B.
_SGEMM_DIGESTS = [
    (64, 49, 49, False, "e5838a8d61d655a4"),
    (5, 40, 37, False, "e6594c058190328e"),
    (7, 33, 18, False, "27f9babfc2b6b508"),
    (3, 20, 21, False, "fd7e69b4b31c6a86"),
    (2, 3, 1, False, "296e620f1597b4fa"),
    (64, 147, 147, True, "ded15baf12551fb3"),
    (100, 20, 100, False, "28cd112a70036092"),
    (24, 30, 341, False, "be2f40f4efbb78f8"),
    (1, 300, 700, False, "88dfc05c4db0d251"),
    (30, 700, 60, False, "699beee068e6e5c6"),
    (17, 1000, 64, False, "7c25366887e1b5ea"),
    (500, 300, 3, False, "864b8130d675091e"),
    (2, 900, 200, False, "b570cb6e2f8cf436"),
]


@pytest.mark.parametrize("m,k,n,block_diagonal,digest", _SGEMM_DIGESTS,
                         ids=["%dx%dx%d" % case[:3] for case in _SGEMM_DIGESTS])
def test_sgemm_has_openblas_haswell_bits(m, k, n, block_diagonal, digest):
    a = _lcg_matrix(m, k, 1)
    b = _block_diagonal(3, k // 3, 2) if block_diagonal else _lcg_matrix(k, n, 2)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = 4e-7 * k * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    for ours in _both(a, b):
        assert ours.dtype == np.float32 and ours.shape == (m, n)
        assert (np.abs(ours - exact) <= bound).all()
        assert _digest(ours) == digest


# C = beta C + alpha op(A) op(B) from that library, with A = lcg(1), B =
# lcg(2), C = lcg(3) shaped as the transposes ask:
# (rows, k, cols, trans_a, trans_b, alpha, beta, threads, digest).
_GEMM_DIGESTS = [
    (70, 192, 64, False, True, 1.0, 1.0, 2, "87c1ff556220513f"),    # a TDNN layer
    (70, 192, 64, False, True, 1.0, 1.0, 1, "a8991ced0239d61e"),
    (57, 49, 49, False, True, 1.0, 1.0, 2, "35cfb5edbf82049f"),
    (53, 64, 30, False, True, 1.0, 1.0, 2, "96689d95a3be0081"),
    (30, 700, 60, True, False, 0.5, 0.0, 2, "a011bd7185f96bf2"),
    (17, 1000, 64, True, True, -1.0, 0.25, 1, "27f1072741279253"),
    (130, 641, 100, False, True, 2.0, 1.0, 3, "0481f64b6facdd31"),
    (300, 321, 13, False, False, 1.0, 1.0, 4, "7fac44d53a8f88f4"),
    (5, 40, 37, False, False, 1.0, 0.0, 2, "e6594c058190328e"),
]


@pytest.mark.parametrize("m,k,n,trans_a,trans_b,alpha,beta,threads,digest", _GEMM_DIGESTS,
                         ids=["%dx%dx%d-%s%s-a%g-b%g-t%d" % (
                             c[0], c[1], c[2], "T" if c[3] else "N", "T" if c[4] else "N",
                             c[5], c[6], c[7]) for c in _GEMM_DIGESTS])
def test_add_mat_mat_has_openblas_haswell_bits(m, k, n, trans_a, trans_b, alpha, beta,
                                               threads, digest):
    a = _lcg_matrix(k, m, 1) if trans_a else _lcg_matrix(m, k, 1)
    b = _lcg_matrix(n, k, 2) if trans_b else _lcg_matrix(k, n, 2)
    c = _lcg_matrix(m, n, 3)
    twin = openblas.sgemm_py(a, b, c, alpha, beta, trans_a, trans_b, threads)
    assert _digest(twin) == digest
    if _kernel is not None:
        ours = c.copy()
        assert openblas.add_mat_mat(ours, alpha, a, trans_a, b, trans_b, beta, threads) is ours
        assert _digest(ours) == digest


def _random_case(rng):
    rows = int(rng.choice([1, 2, 5, 17, 50, 70, 130]))
    cols = int(rng.choice([1, 3, 8, 13, 30, 49, 64, 100]))
    k = int(rng.choice([1, 7, 8, 9, 49, 192, 321, 700]))
    trans_a, trans_b = bool(rng.integers(2)), bool(rng.integers(2))
    a = rng.standard_normal((k, rows) if trans_a else (rows, k)).astype(np.float32)
    b = rng.standard_normal((cols, k) if trans_b else (k, cols)).astype(np.float32)
    c = rng.standard_normal((rows, cols)).astype(np.float32)
    alpha = float(rng.choice([1.0, -1.0, 0.3]))
    beta = float(rng.choice([0.0, 1.0, 0.7]))
    return a, trans_a, b, trans_b, c, alpha, beta


@needs_kernel
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_kernel_equals_twin_on_random_shapes(threads):
    rng = np.random.default_rng(100 + threads)
    for _ in range(25):
        a, trans_a, b, trans_b, c, alpha, beta = _random_case(rng)
        twin = openblas.sgemm_py(a, b, c, alpha, beta, trans_a, trans_b, threads)
        ours = c.copy()
        openblas.add_mat_mat(ours, alpha, a, trans_a, b, trans_b, beta, threads)
        assert np.array_equal(ours.view(np.int32), twin.view(np.int32)), \
            (a.shape, trans_a, b.shape, trans_b, alpha, beta)


@needs_kernel
def test_kernel_portable_fmaf_path_equals_vector_path():
    rng = np.random.default_rng(7)
    for _ in range(10):
        a, trans_a, b, trans_b, c, alpha, _ = _random_case(rng)
        op_a = np.ascontiguousarray(a.T if trans_a else a)
        op_b = np.ascontiguousarray(b.T if trans_b else b)
        plan = openblas_plan.gemm_plan(op_a.shape[0], op_b.shape[1], op_a.shape[1])
        vector, portable = c.copy(), c.copy()
        _kernel.sgemm_blocks(op_a, op_b, plan.paired, plan.k_steps, alpha, vector)
        _kernel.sgemm_blocks(op_a, op_b, plan.paired, plan.k_steps, alpha, portable,
                             portable=True)
        assert np.array_equal(vector.view(np.int32), portable.view(np.int32))


def test_add_mat_mat_writes_a_column_range_in_place():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((20, 49)).astype(np.float32)
    w = rng.standard_normal((30, 49)).astype(np.float32)
    wide = rng.standard_normal((20, 50)).astype(np.float32)
    before = wide.copy()
    view = wide[:, 10:40]
    expected = openblas.sgemm_py(a, w, view, 1.0, 1.0, trans_b=True)
    openblas.add_mat_mat(view, 1.0, a, False, w, True, 1.0)
    assert np.array_equal(wide[:, 10:40], expected)
    assert np.array_equal(wide[:, :10], before[:, :10])
    assert np.array_equal(wide[:, 40:], before[:, 40:])


def test_add_mat_mat_beta_zero_clears_nan_and_rejects_bad_shapes():
    c = np.full((3, 2), np.nan, np.float32)
    a = np.ones((3, 4), np.float32)
    b = np.ones((4, 2), np.float32)
    openblas.add_mat_mat(c, 1.0, a, False, b, False, 0.0)
    assert (c == 4.0).all()
    openblas.add_mat_mat(c, 0.0, a, False, b, False, 0.5)
    assert (c == 2.0).all()
    with pytest.raises(NnetError, match="cannot add a 3x4 times 2x4"):
        openblas.add_mat_mat(c, 1.0, a, False, b, True, 1.0)


def test_sgemm_pairs_accumulators_where_the_haswell_kernel_does():
    # 64 x 49 times 49 x 49 (tdnn_lda's LDA collapse) runs serially in one kernel
    # call: rows in five groups of 12 and one of 4; in the groups of 12 the first
    # and the last 8-column blocks of the left 6 rows are summed in two
    # accumulators (even and odd k), in the group of 4 every full 8-column block.
    paired = np.zeros((64, 49), bool)
    for call in openblas_plan.serial_kernel_calls(49, 64):
        openblas_plan.mark_paired(paired, *call)
    expected = np.zeros((64, 49), bool)
    for r in range(0, 60, 12):
        expected[r:r + 6, 0:8] = expected[r:r + 6, 40:48] = True
    expected[60:64, 0:48] = True
    assert (paired == expected).all()
    assert (openblas_plan.gemm_plan(64, 49, 49).paired == expected).all()
    a, b = _lcg_matrix(64, 49, 1), _lcg_matrix(49, 49, 2)
    single, two = openblas.fma_chains(a, b)
    for ours in _both(a, b):
        assert (ours[~paired] == single[~paired]).all() and (ours[paired] == two[paired]).all()
    assert (single[paired] != two[paired]).any()


@pytest.mark.parametrize("m,n", [(49, 64), (1, 1), (3, 500), (200, 2), (341, 24), (700, 1),
                                 (60, 30), (16, 12), (23, 13), (641, 95), (7, 2000)])
@pytest.mark.parametrize("threads", [2, 3, 4])
def test_sgemm_drivers_cover_every_element_once(m, n, threads):
    for calls in (openblas_plan.serial_kernel_calls(m, n),
                  openblas_plan.threaded_kernel_calls(m, n, threads)):
        if calls is None:
            continue
        seen = np.zeros((n, m), int)
        for ms, mlen, ns, nlen in calls:
            seen[ns:ns + nlen, ms:ms + mlen] += 1
        assert (seen == 1).all()


def test_k_steps_halve_a_remainder_under_two_blocks():
    assert openblas_plan.k_steps(320, False) == [(0, 320)]
    assert openblas_plan.k_steps(321, False) == [(0, 160), (160, 161)]
    assert openblas_plan.k_steps(321, True) == [(0, 161), (161, 160)]
    assert openblas_plan.k_steps(1000, False) == [(0, 320), (320, 320), (640, 184), (824, 176)]


@pytest.mark.parametrize("rows,cols", [(64, 49), (5, 4), (7, 8), (6, 8), (9, 13),
                                       (3, 30), (3000, 6), (20, 4100), (301, 50)])
def test_sgemv_add_is_a_float32_product(rows, cols):
    rng = np.random.default_rng(rows * 10000 + cols)
    mat = rng.standard_normal((rows, cols)).astype(np.float32)
    x = rng.standard_normal(cols).astype(np.float32)
    y = rng.standard_normal(rows).astype(np.float32)
    y_before = y.copy()
    ours = openblas.sgemv_add(mat, x, y)
    assert (y == y_before).all()    # a new vector is returned
    exact = y.astype(np.float64) + mat.astype(np.float64) @ x.astype(np.float64)
    bound = 4e-7 * (cols + 1) * (np.abs(y) + np.abs(mat).astype(np.float64) @ np.abs(x))
    assert ours.dtype == np.float32 and ours.shape == (rows,)
    assert (np.abs(ours - exact) <= bound).all()


# The same for y + M x (sgemv): 4x4 row groups, pairs and single rows, narrow
# widths, 1-3 tail columns, column blocks over 4096 and two threads.
_SGEMV_DIGESTS = [
    (64, 49, "8653705d25665d8a"), (5, 4, "433621696b426f1e"), (7, 8, "8826526d42a57b8b"),
    (6, 8, "1d2a47637ab64f4d"), (9, 13, "0c40705c9e2a01e1"), (3, 30, "4b6cf56dbdfc90c4"),
    (3000, 6, "186802af58052596"), (20, 4100, "ec529d3e70b9ac48"),
    (301, 50, "47374506f5ff07a5"), (13, 3, "4ed1ede6efbae419"), (11, 2, "b4258d5dc9e141eb"),
]


@pytest.mark.parametrize("rows,cols,digest", _SGEMV_DIGESTS,
                         ids=["%dx%d" % case[:2] for case in _SGEMV_DIGESTS])
def test_sgemv_add_has_openblas_haswell_bits(rows, cols, digest):
    mat = _lcg_matrix(rows, cols, 1)
    x = _lcg_matrix(1, cols, 2)[0]
    y = _lcg_matrix(1, rows, 3)[0]
    assert _digest(openblas.sgemv_add(mat, x, y)) == digest
