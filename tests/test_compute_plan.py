"""ExecutionPlan: a computation run with a plan that elides unneeded zeroing
and reuses its matrices gives Kaldi's outputs, also when the plan is reused
for a second run and the memory it hands out is filled with NaN (so a read
of memory whose zeroing was wrongly skipped would show)."""

import numpy as np
import pytest

from pynnet3.driver.compile_and_optimize import compile
from pynnet3.compiler.request import ComputationRequest
from pynnet3.compute.backend import get_backend
from pynnet3.compute.computer import NnetComputer
from pynnet3.compute.plan import ExecutionPlan
from pynnet3.nnet.nnet import Nnet
from pynnet3.nnet.component_ops import scale_nnet, set_nnet_as_gradient

from test_computer_kaldi import assert_close, case_dirs, case_id, read_ark

CASES = [c for c in case_dirs() if (c / "request.txt").is_file()][::4]


def _forward(plan, computation, nnet, case, gradient):
    computer = NnetComputer(computation, nnet, nnet_to_update=gradient, plan=plan,
                            undefined_fill=np.nan)
    for name, value in read_ark(case / "inputs.ark").items():
        computer.accept_input(name, value)
    computer.run()
    return {name: computer.get_output(name) for name in read_ark(case / "outputs.ark")}


@pytest.mark.parametrize("optimize", [False, True], ids=["plain", "optimized"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_plan_with_elided_zeroing_matches_kaldi(case, optimize):
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    request.need_model_derivative = False
    for io in request.inputs + request.outputs:
        io.has_deriv = False
    computation = compile(nnet, request, optimize=optimize)
    plan = ExecutionPlan(computation, nnet, get_backend("numpy"))
    gradient = nnet.copy()
    scale_nnet(gradient, 0.0)
    set_nnet_as_gradient(gradient)
    kaldi = read_ark(case / "outputs.ark")
    for _ in range(2):                      # the second run reuses the pooled matrices
        ours = _forward(plan, computation, nnet, case, gradient)
        for name, value in kaldi.items():
            assert_close(ours[name], value, "output '%s'" % name)


def test_zeroing_is_elided_where_the_next_write_covers_the_matrix():
    case = next((c for c in CASES if (c / "request.txt").is_file()), None)
    if case is None:
        pytest.skip("no reference case")
    nnet = Nnet.read(str(case / "model.raw"))
    computation = compile(nnet, ComputationRequest.read(str(case / "request.txt")),
                          optimize=False)
    plan = ExecutionPlan(computation, nnet, get_backend("numpy"))
    kept = ExecutionPlan(computation, nnet, get_backend("numpy"), elide_zeroing=False)
    assert plan.skip_zeroing and not kept.skip_zeroing and not kept.add_as_copy
    assert plan.add_as_copy <= set(range(len(computation.commands)))


def test_statistics_extraction_zeroes_its_own_output():
    """StatisticsExtractionComponent declares kPropagateAdds but zeroes its
    output itself (Kaldi's too): the compiler's zeroing before it is
    skipped, and with memory handed out full of NaN the x-vector is the one
    every zeroing gives."""
    from conftest import TEST_DATA
    from pynnet3.common.index import Index
    from pynnet3.compiler.computation import CommandType as T
    from pynnet3.compiler.request import IoSpecification
    from pynnet3.components.statistics import StatisticsExtractionComponent
    nnet = Nnet.read(str(TEST_DATA / "compute" / "xvector" / "extract.raw"))
    request = ComputationRequest()
    request.inputs = [IoSpecification.from_t_range("input", 0, 150)]
    request.outputs = [IoSpecification("output", [Index(0, 0, 0)])]
    computation = compile(nnet, request)
    plan = ExecutionPlan(computation, nnet, get_backend("numpy"))
    kept = ExecutionPlan(computation, nnet, get_backend("numpy"), elide_zeroing=False)
    commands = computation.commands
    before_extraction = [
        i for i, c in enumerate(commands[:-1]) if c.command_type == T.kSetConst
        and commands[i + 1].command_type == T.kPropagate
        and isinstance(nnet.components[commands[i + 1].arg1], StatisticsExtractionComponent)]
    assert before_extraction and set(before_extraction) <= plan.skip_zeroing
    features = np.random.default_rng(0).standard_normal(
        (150, nnet.input_dim("input"))).astype(np.float32)
    outputs = []
    for p in (plan, kept):
        computer = NnetComputer(computation, nnet, plan=p, undefined_fill=np.nan)
        computer.accept_input("input", features)
        computer.run()
        outputs.append(computer.get_output("output"))
    # (the fused plan multiplies the spliced inputs from their shifted rows:
    # the same numbers within float32 rounding, see shifted_splice.py)
    assert np.isfinite(outputs[0]).all()
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-5)
