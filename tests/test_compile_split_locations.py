"""SplitLocations kernels: the Cython kernels equal the Python twin on random
inputs, the twin follows Kaldi's documented contract, and the libstdc++
hash-order emulation reproduces orders measured from g++ 12's
std::unordered_map<int, int>."""

import random

import numpy as np
import pytest

from pynnet3.compiler import split_locations as py

fast = pytest.importorskip("pynnet3._fast.split_locations_kernel")

# Iteration orders printed by a g++ 12 (libstdc++) program inserting these keys
# into a std::unordered_map<int, int> (the container Kaldi's GetSubmatCounts uses).
GXX_ORDERS = [
    ([1, 2, 3, 14, 27], [3, 2, 27, 14, 1]),
    (list(range(1, 15)), [14, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]),  # rehashed
    ([5, 18, 31, 44, 2], [2, 44, 31, 18, 5]),
]


@pytest.mark.parametrize("keys, expected", GXX_ORDERS)
def test_hash_order_matches_libstdcxx(keys, expected):
    s = py.StdUnorderedIntSet()
    for k in keys:
        s.add(k)
    assert list(s) == expected
    assert fast.hash_order(keys) == expected


def test_hash_order_twins_agree():
    rng = random.Random(5)
    for size in (1, 12, 13, 14, 29, 30, 100, 600, 3000):
        keys = [rng.randrange(200000) for _ in range(size)]
        s = py.StdUnorderedIntSet()
        for k in keys:
            s.add(k)
        assert list(s) == fast.hash_order(keys)
        assert sorted(s) == sorted(set(keys))


def _random_csr(rng):
    num_rows = rng.randint(0, 40)
    num_sub = rng.randint(1, 30)
    ptr, firsts, seconds = [0], [], []
    for _ in range(num_rows):
        for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 6])):
            firsts.append(rng.randint(1, num_sub))
            seconds.append(rng.randint(0, rng.choice([3, 50])))
        ptr.append(len(firsts))
    return (np.array(ptr, np.int64), np.array(firsts, np.int32), np.array(seconds, np.int32))


def test_kernels_twins_agree():
    rng = random.Random(11)
    for _ in range(1500):
        csr = _random_csr(rng)
        for name in ("split_locations_csr", "split_locations_backward_csr"):
            a = getattr(py, name)(*csr)
            b = getattr(fast, name)(*csr)
            assert len(a) == len(b)
            assert all(np.array_equal(x, y) for x, y in zip(a, b))
        for pairs in py.split_locations_csr_py(*csr):
            a = py.convert_pairs_to_indexes_py(pairs)
            b = fast.convert_pairs_to_indexes(pairs)
            assert (a is None) == (b is None)
            if a is not None:
                assert a[0] == b[0] and list(a[1]) == list(b[1])
                assert py.contiguous_ranges_py(a[1]) == fast.contiguous_ranges(a[1])


def test_split_locations_contract():
    """Every summed term lands in exactly one output vector at its row."""
    rng = random.Random(3)
    for _ in range(300):
        ptr, firsts, seconds = _random_csr(rng)
        rows = [sorted(zip(firsts[ptr[r]:ptr[r + 1]].tolist(), seconds[ptr[r]:ptr[r + 1]].tolist()))
                for r in range(len(ptr) - 1)]
        for split in (py.split_locations_csr_py(ptr, firsts, seconds),
                      py.split_locations_backward_csr_py(ptr, firsts, seconds)):
            got = [sorted((int(v[r, 0]), int(v[r, 1])) for v in split if v[r, 0] != -1)
                   for r in range(len(rows))]
            assert got == rows
        # backward pieces: unique pairs, or one submatrix with the contiguous property
        for v in py.split_locations_backward_csr_py(ptr, firsts, seconds):
            conv = py.convert_pairs_to_indexes_py(v)
            if conv is None:
                real = [tuple(p) for p in v.tolist() if p[0] != -1]
                assert len(real) == len(set(real))
            else:
                assert py.contiguous_ranges_py(conv[1]) is not None


def test_large_count_submatrices_get_their_own_lists():
    """A submatrix used by more than half of the rows gets a list of its own
    (so it compiles to one kAddRows), Kaldi's SeparateSubmatsWithLargeCounts."""
    lists = [[(5, r), (7, r)] for r in range(6)] + [[(9, 0), (5, 6)]]
    split = py.split_locations(lists)
    assert split[0] == [(7, r) for r in range(6)] + [(-1, -1)]
    assert split[1] == [(5, r) for r in range(6)] + [(5, 6)]
    assert split[2] == [(-1, -1)] * 6 + [(9, 0)]


def test_contiguous_property_and_pair_splitting():
    assert py.has_contiguous_property([0, 0, 1, 1, -1, 2]) == [(0, 2), (2, 4), (5, 6)]
    assert py.has_contiguous_property([0, 1, 0]) is None
    assert py.has_contiguous_property([-1, -1]) == []
    assert py.ensure_contiguous_property([0, 1, 0, -1, 1]) == [[0, 1, -1, -1, -1],
                                                              [-1, -1, 0, -1, 1]]
    assert py.split_pair_list([(1, 2), (1, 2), (-1, -1), (3, 4)]) == [
        [(1, 2), (-1, -1), (-1, -1), (3, 4)], [(-1, -1), (1, 2), (-1, -1), (-1, -1)]]
