"""ReplaceRowWithMatrixOps' and SnipRowOps' index-list tests: the compiled kernels
(pynnet3/_fast/row_ops_kernel.pyx) agree with the Python twins on every index table
of every reference computation (ours unoptimized and optimized, Kaldi's
optimized) and on hand-made lists."""

import pytest

from test_optimize_renumber_fast import _computations, _id

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.optimize.row_ops import consecutive_block_py, leading_trailing_counts_py
from reference_cases import COMPILE_CASES as CASES

fast = pytest.importorskip("pynnet3._fast.row_ops_kernel")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_blocks_match_twin(case):
    for computation in _computations(case):
        for indexes in computation.indexes:
            assert fast.consecutive_block(indexes) == consecutive_block_py(indexes)


@pytest.mark.parametrize("indexes,expected", [
    ([], None), ([-1, -1], None), ([3, 4, 5], (0, 3, 3)), ([-1, 2, 3, -1], (1, 2, 2)),
    ([-1, 2, 4], None), ([0, 1, -1, 2], None), ((5, 6), (0, 5, 2)), ([7], (0, 7, 1))])
def test_hand_made(indexes, expected):
    assert fast.consecutive_block(indexes) == expected
    assert consecutive_block_py(indexes) == expected


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_leading_trailing_match_twin(case):
    for computation in _computations(case):
        for kind, tables in enumerate((computation.indexes, computation.indexes_multi,
                                       computation.indexes_ranges)):
            for rows in tables:
                assert (fast.leading_trailing_counts(rows, kind)
                        == leading_trailing_counts_py(rows, kind))


@pytest.mark.parametrize("rows,kind,expected", [
    ([-1, 3, -1, -1], 0, (1, 2)), ([-1, -1], 0, (2, 0)), ([], 0, (0, 0)), ([4], 0, (0, 0)),
    ([(-1, -1), (2, 0), (-1, -1)], 1, (1, 1)), ([(3, 3), (0, 2)], 2, (1, 0))])
def test_leading_trailing_hand_made(rows, kind, expected):
    assert fast.leading_trailing_counts(rows, kind) == expected
    assert leading_trailing_counts_py(rows, kind) == expected
