"""Spliced inputs multiplied without being built (pynnet3.compute.shifted_splice):
the x-vector extractor's TDNN layers read ``Append(x, Offset(x, 2), Offset(x, 4))``
style inputs that Kaldi's optimizer builds in place; the default plan
allocates those matrices only as wide as x, skips the copies, and gives
the numbers of the unfused commands within float32 rounding."""

import numpy as np
import pytest

from conftest import TEST_DATA, run_with_plan
from pynnet3.common.index import Index
from pynnet3.compiler.computation import CommandType as T
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.compute.backend import get_backend
from pynnet3.compute import shifted_splice
from pynnet3.compute.plan import ExecutionPlan
from pynnet3.compute.shifted_splice import find_shifted_splices, shifted_products
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.nnet.nnet import Nnet


def _xvector_computation(num_frames=150):
    nnet = Nnet.read(str(TEST_DATA / "compute" / "xvector" / "extract.raw"))
    request = ComputationRequest()
    request.inputs = [IoSpecification.from_t_range("input", 0, num_frames)]
    request.outputs = [IoSpecification("output", [Index(0, 0, 0)])]
    return nnet, compile(nnet, request)


def test_splices_are_found_and_their_matrices_narrowed():
    nnet, computation = _xvector_computation()
    splices = find_shifted_splices(computation, nnet)
    assert splices, "the extractor's in-place spliced inputs were not found"
    for p, splice in splices.items():
        c = computation.commands[p]
        assert c.command_type == T.kPropagate
        info = computation.matrices[splice.matrix]
        assert info.num_cols == splice.width * len(splice.shifts) and splice.shifts[0] == 0
        assert all(computation.commands[j].command_type == T.kMatrixCopy
                   for j in splice.copies)
    plan = ExecutionPlan(computation, nnet, get_backend("numpy"))
    unfused = ExecutionPlan(computation, nnet, get_backend("numpy"), elide_zeroing=False)
    assert plan.narrowed == {s.matrix: s.width for s in splices.values()}
    assert not unfused.narrowed
    assert plan.arena.size < unfused.arena.size
    assert all(j in plan.fusions.skip for s in splices.values() for j in s.copies)


def test_fused_numbers_are_the_unfused_ones_within_rounding():
    """Memory handed out full of NaN: nothing reads what the narrowed
    matrices no longer hold; debug mode runs the commands one by one at
    full width and gives the unfused numbers exactly."""
    nnet, computation = _xvector_computation()
    features = np.random.default_rng(1).standard_normal(
        (150, nnet.input_dim("input"))).astype(np.float32)
    backend = get_backend("numpy")
    fused = run_with_plan(computation, nnet, ExecutionPlan(computation, nnet, backend), features)
    unfused = run_with_plan(computation, nnet,
                            ExecutionPlan(computation, nnet, backend, elide_zeroing=False),
                            features)
    assert np.isfinite(fused).all()
    np.testing.assert_allclose(fused, unfused, rtol=1e-5, atol=1e-5)
    plain = run_with_plan(computation, nnet, None, features)
    debugged = run_with_plan(computation, nnet, ExecutionPlan(computation, nnet, backend),
                             features, debug=True)
    assert np.array_equal(debugged, plain)


@pytest.mark.parametrize("out_cols", [5, 1200])
def test_shifted_products_sum_the_blocks(out_cols):
    # 1200 output columns: the scratch holds fewer rows than the 600, so the
    # sums go block by block
    assert (shifted_splice._SCRATCH_BYTES // (4 * 1200) < 600
            and shifted_splice._MIN_ROWS_PER_STEP < 600)
    rng = np.random.default_rng(2)
    base = rng.standard_normal((700, 8)).astype(np.float32)
    params = rng.standard_normal((out_cols, 24)).astype(np.float32)

    class Splice:
        width, row_offset, num_rows, shifts = 8, 3, 600, [0, 40, 97]

    out = np.full((600, out_cols), np.nan, np.float32)
    shifted_products(params, base, Splice, out)
    spliced = np.concatenate([base[3 + s:603 + s] for s in Splice.shifts], axis=1)
    np.testing.assert_allclose(out, spliced.astype(np.float64) @ params.T.astype(np.float64),
                               rtol=1e-4, atol=1e-4)
