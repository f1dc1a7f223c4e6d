"""Recurrent affine products with their input half multiplied ahead
(pynnet3.compute.hoisted_products): the BLSTM of tests/data (Kaldi's
lstm-layer, both directions, four gate affines per step on
``Append(lda, IfDefined(Offset(r, -3)))`` or ``Offset(r, 3)``) runs its
steps from a scratch block of the arena, within float32 rounding of the
unfused commands."""

import numpy as np
import pytest

from conftest import TEST_DATA, run_with_plan
from pynnet3.common.index import Index
from pynnet3.compiler.computation import CommandType as T
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.components.affine import AffineTransform
from pynnet3.components.products import GEMM_MIN_ROWS, few_rows_product
from pynnet3.compute import hoisted_products
from pynnet3.compute.backend import get_backend
from pynnet3.compute.hoisted_products import HoistedStep, Segment, _blocks, find_hoisted_products
from pynnet3.compute.plan import ExecutionPlan
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.nnet.nnet import Nnet

MODEL = TEST_DATA / "compute" / "blstm" / "model.raw"


def _computation(num_frames=60, num_sequences=2):
    nnet = Nnet.read(str(MODEL))
    request = ComputationRequest()
    request.inputs = [IoSpecification("input", [Index(n, t, 0) for n in range(num_sequences)
                                                for t in range(-10, num_frames + 10)])]
    request.outputs = [IoSpecification("output", [Index(n, t, 0) for n in range(num_sequences)
                                                  for t in range(num_frames)])]
    return nnet, compile(nnet, request)


def _run(computation, nnet, plan, debug=False):
    """The output for the same features (2 sequences of 80 input frames)."""
    features = np.random.default_rng(3).standard_normal(
        (2 * 80, nnet.input_dim("input"))).astype(np.float32)
    return run_with_plan(computation, nnet, plan, features, debug)


def test_both_directions_are_found_in_blocks():
    nnet, computation = _computation()
    steps, scratches = find_hoisted_products(computation, nnet)
    assert steps, "the BLSTM's gate affines were not hoisted"
    names = set()
    subs = computation.submatrices
    for p, step in steps.items():
        c = computation.commands[p]
        assert c.command_type == T.kPropagate
        component = nnet.components[c.arg1]
        assert isinstance(component, AffineTransform)
        names.add(nnet.component_names[c.arg1])
        end = 0
        for f in step.segments:
            if f.ready == p:            # the input's own columns
                assert f.matrix == subs[c.arg3].matrix_index
            else:
                copy = computation.commands[f.ready]
                assert copy.command_type == T.kMatrixCopy and f.ready < p
                assert subs[copy.arg1].matrix_index == subs[c.arg3].matrix_index
                assert subs[copy.arg2].matrix_index == f.matrix
            assert f.col_offset == end
            end += f.width
        assert end == component.input_dim()
        block = step.block
        assert step in block.steps and len(block.steps) > 1
        # x(t) is hoisted, never the recurrent r(t -/+ 3)
        assert 0 < block.width < component.input_dim()
        assert block.num_rows <= hoisted_products._MAX_ROWS
        assert block.num_rows * (block.width + component.output_dim()) <= \
            scratches[block.scratch][1]
    assert any("forward" in n for n in names) and any("backward" in n for n in names)
    plan = ExecutionPlan(computation, nnet, get_backend("numpy"))
    assert set(steps) <= set(plan.fusions.ops)
    assert len(plan.arena.scratch_offsets) == len(scratches)
    unfused = ExecutionPlan(computation, nnet, get_backend("numpy"), elide_zeroing=False)
    assert not unfused.scratches and unfused.fusions is None


@pytest.mark.parametrize("max_rows", [None, 4])
def test_hoisted_numbers_are_the_unfused_ones_within_rounding(max_rows, monkeypatch):
    """Arena memory handed out full of NaN, so a step that read scratch
    rows its block did not compute would show; 4 rows a block: many blocks
    per group, each computed at its first step."""
    if max_rows is not None:
        monkeypatch.setattr(hoisted_products, "_MAX_ROWS", max_rows)
    nnet, computation = _computation()
    backend = get_backend("numpy")
    plan = ExecutionPlan(computation, nnet, backend)
    if max_rows is not None:
        blocks = {id(s.block) for s in find_hoisted_products(computation, nnet)[0].values()}
        assert len(blocks) > 20
    fused = _run(computation, nnet, plan)
    again = _run(computation, nnet, plan)
    unfused = _run(computation, nnet, ExecutionPlan(computation, nnet, backend,
                                                     elide_zeroing=False))
    assert np.isfinite(fused).all()
    np.testing.assert_allclose(fused, unfused, rtol=1e-5, atol=1e-5)
    assert np.array_equal(fused, again)
    plain = _run(computation, nnet, None)
    assert np.array_equal(_run(computation, nnet, plan, debug=True), plain)


def test_a_step_whose_copy_scales_is_not_hoisted():
    """A copy with alpha != 1 does not put its source's rows into the input
    as they are: they are not hoisted, and the numbers still agree."""
    nnet, computation = _computation()
    steps, _ = find_hoisted_products(computation, nnet)
    victim = sorted(steps)[len(steps) // 2]
    copy = next(f.ready for f in steps[victim].segments if f.ready != victim)
    computation.commands[copy].alpha = 0.5
    after, _ = find_hoisted_products(computation, nnet)
    assert after and (victim not in after
                      or all(f.ready != copy for f in after[victim].segments))
    backend = get_backend("numpy")
    fused = _run(computation, nnet, ExecutionPlan(computation, nnet, backend))
    unfused = _run(computation, nnet, ExecutionPlan(computation, nnet, backend,
                                                     elide_zeroing=False))
    np.testing.assert_allclose(fused, unfused, rtol=1e-5, atol=1e-5)


class _FakeWriters:
    """``writes``: (matrix, command) pairs, each writing all of the matrix."""

    def __init__(self, writes):
        self.writes = writes

    def between(self, f, first, last):
        return any(m == f.matrix and first <= i <= last for m, i in self.writes)


def _steps(x_layout=((0, 4),)):
    """Six steps: product at 10k + 5, x copied from matrix 1 at 10k + 3,
    the recurrent state from matrix 2 at 10k + 4, which each product's
    successors write at 10k + 6."""
    out = []
    for k in range(6):
        segments = [Segment(10 * k + 3, col, width, 1, 2 * k, 2, col)
                    for col, width in x_layout]
        segments.append(Segment(10 * k + 4, 4, 2, 2, 0, 2, 0))
        out.append(HoistedStep(10 * k + 5, 2, segments))
    return out


RECURRENT = [(2, 10 * k + 6) for k in range(6)]


def test_blocks_hoist_x_and_stop_where_it_changes():
    blocks = _blocks(_steps(), _FakeWriters(RECURRENT), 100)
    assert [len(b.steps) for b in blocks] == [6] and blocks[0].width == 4
    assert [s.block_row for s in blocks[0].steps] == [0, 2, 4, 6, 8, 10]
    assert [len(b.steps) for b in _blocks(_steps(), _FakeWriters(RECURRENT), 5)] == [2, 2, 2]
    # x's matrix written after the 3rd step's product: the 4th starts a block
    blocks = _blocks(_steps(), _FakeWriters(RECURRENT + [(1, 30)]), 100)
    assert [[s.propagate for s in b.steps] for b in blocks] == [[5, 15, 25], [35, 45, 55]]
    assert [b.width for b in blocks] == [4, 4]
    # x's matrix written (or freed) between the first step's copy and its
    # product, where the block is computed: the first step's rows come from
    # its input, the others' from x's matrix, which the write did not change
    blocks = _blocks(_steps(), _FakeWriters(RECURRENT + [(1, 4)]), 100)
    assert [len(b.steps) for b in blocks] == [6] and blocks[0].width == 4
    # ... but for the second step it did: no block
    blocks = _blocks(_steps(), _FakeWriters(RECURRENT + [(1, 8)]), 100)
    assert [len(b.steps) for b in blocks] == [1, 5] and blocks[1].width == 4
    # another layout of the same columns does not join a block
    steps = _steps()
    steps[3:] = _steps(((0, 2), (2, 2)))[3:]
    assert [len(b.steps) for b in _blocks(steps, _FakeWriters(RECURRENT), 100)] == [3, 3]


def test_a_plan_like_another_shares_all_but_its_arena():
    """Plans of one computation for several threads: the second shares the
    first's submatrices, fusions and scratch layout, has an arena of its
    own, and gives the same bits."""
    nnet, computation = _computation()
    backend = get_backend("numpy")
    first = ExecutionPlan(computation, nnet, backend, outputs_in_arena=True)
    second = ExecutionPlan(computation, nnet, backend, like=first)
    assert second.slices is first.slices and second.fusions is first.fusions
    assert second.scratches is first.scratches and second.rows_cache is first.rows_cache
    assert second.workspace is not first.workspace
    # outputs_in_arena differs: the arenas are planned apart
    assert second.arena.offsets != first.arena.offsets
    assert np.array_equal(_run(computation, nnet, first), _run(computation, nnet, second))
    other, _ = _computation(num_frames=30)
    with pytest.raises(ValueError):
        ExecutionPlan(other, nnet, backend, like=first)


@pytest.mark.parametrize("rows", [0, 1, 2, 7, 8, 20])
def test_few_rows_product_is_the_matrix_product(rows):
    """Under GEMM_MIN_ROWS rows a NumPy product goes row by row (BLAS packs
    the whole weight matrix for any matrix product); the numbers are the
    product's within float32 rounding."""
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 300)).astype(np.float32)
    w = rng.standard_normal((300, 500)).astype(np.float32)
    out = np.full((rows, 500), np.nan, np.float32)
    few_rows_product(np, x, w, out)
    np.testing.assert_allclose(out, x.astype(np.float64) @ w.astype(np.float64),
                               rtol=1e-4, atol=1e-3)
    assert 2 < GEMM_MIN_ROWS <= 16
