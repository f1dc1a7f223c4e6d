"""Shortcut compilation (pynnet3.compile.shortcut): a request with N > 2
regular sequences is compiled for two and expanded.

- Every reference case whose request Kaldi would compile through the shortcut
  (random/ and tests/data/computer, N = 3 or 4): the expanded computation,
  from our optimized two-sequence computation, gives Kaldi's outputs, input
  derivatives and gradients (matrices start as NaN, so reading unwritten rows
  fails).
- A models/ network with convolution, attention and batch-norm (precomputed
  indexes that must be recomputed for N sequences), with requests laid out
  n-major and t-major: the shortcut computation's outputs, input derivatives
  and gradients equal the regular computation's.
- RequestIsDecomposable says no exactly where Kaldi does.
"""

import numpy as np
import pytest

import pynnet3.components  # noqa: F401  (registers component types)
from conftest import KALDI_REF
from pynnet3.compile import ComputationRequest, IoSpecification, compile
from pynnet3.compile.caching import CachingOptimizingCompiler
from pynnet3.compile.computation import CommandType
from pynnet3.compile.computation_io import computation_to_bytes, read_computation
from pynnet3.compile.shortcut import (compile_via_shortcut, expand_computation,
                                      find_n_stride, request_is_decomposable)
from pynnet3.compute.computer import NnetComputer
from pynnet3.errors import ComputationError
from pynnet3.io.stream import InputStream
from pynnet3.nnet.index import Index
from pynnet3.nnet.nnet import Nnet
from pynnet3.nnet.utils import scale_nnet, set_dropout_test_mode, set_nnet_as_gradient
from pynnet3.optimize.checker import check_computation
from test_computer_kaldi import case_dirs, case_id, run_and_check


def _decomposable_cases():
    ans = []
    for case in case_dirs():
        if not (case / "request.txt").is_file():
            continue
        request = ComputationRequest.read(str(case / "request.txt"))
        if request_is_decomposable(request) is not None:
            ans.append(case)
    return ans


CASES = _decomposable_cases()


def test_there_are_shortcut_cases():
    # tests/data/computer alone has three (case48, case185, case214)
    assert len(CASES) >= 3


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_shortcut_computation_matches_kaldi(case):
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    minis = []

    def compile_mini(mini_request):
        minis.append(compile(nnet, mini_request))
        return minis[-1]

    computation = compile_via_shortcut(nnet, request, compile_mini)
    mini = minis[0]
    num_n = request.inputs[0].indexes[-1].n + 1
    assert [c.command_type for c in computation.commands] == \
        [c.command_type for c in mini.commands]
    assert [m.num_rows for m in computation.matrices[1:]] == \
        [m.num_rows // 2 * num_n for m in mini.matrices[1:]]
    done = run_and_check(case, computation, nnet, undefined_fill=np.nan)
    assert "forward" in done
    if (case / "input_derivs.ark").is_file():
        assert "input-deriv" in done
    # Kaldi checks expanded computations at --verbose >= 3; the checker reads
    # the debug info, which is built on first access
    check_computation(nnet, computation)
    for m, info in enumerate(computation.matrix_debug_info[1:], 1):
        assert len(info.cindexes) == computation.matrices[m].num_rows
        assert {index.n for _, index in info.cindexes} == set(range(num_n))
    data = computation_to_bytes(computation)
    again = read_computation(InputStream.from_bytes(data, "expanded"))
    assert again.matrix_debug_info == computation.matrix_debug_info
    assert computation_to_bytes(again) == data


# -- a models/ network, shortcut against regular compilation ------------------------------

MODEL = KALDI_REF / "models" / "cnn_tdnn_attention"


def _specification(name, num_n, times, n_major, has_deriv):
    if n_major:
        indexes = [Index(n, t, 0) for n in range(num_n) for t in times]
    else:
        indexes = [Index(n, t, 0) for t in times for n in range(num_n)]
    return IoSpecification(name, indexes, has_deriv)


def _run(computation, nnet, inputs, output_deriv, deriv_inputs=("input",)):
    gradient = nnet.copy()
    scale_nnet(gradient, 0.0)
    set_nnet_as_gradient(gradient)
    computer = NnetComputer(computation, nnet, nnet_to_update=gradient,
                            undefined_fill=np.nan)
    for name, value in inputs.items():
        computer.accept_input(name, value)
    computer.run()
    output = computer.get_output("output").copy()
    computer.accept_input("output", output_deriv)
    computer.run()
    derivs = {name: computer.get_output(name).copy() for name in deriv_inputs}
    return output, derivs, [c.vectorize() for c in gradient.components
                            if c.num_parameters()]


@pytest.mark.parametrize("n_major", [True, False], ids=["n-major", "t-major"])
def test_shortcut_equals_regular_compilation_on_a_model(kaldi_ref, n_major):
    nnet = Nnet.read(str(MODEL / "model.raw"))
    set_dropout_test_mode(nnet, True)
    num_n, frames = 5, 8
    request = ComputationRequest(
        inputs=[_specification("input", num_n, range(-13, frames + 9), n_major, True),
                _specification("ivector", num_n, [0], n_major, False)],
        outputs=[_specification("output", num_n, range(frames), n_major, True)],
        need_model_derivative=True)
    compiler = CachingOptimizingCompiler(nnet)
    shortcut = compiler.compile(request)
    assert len(compiler.cache) == 2            # the two-sequence request and this one
    assert any(c.arg2 > 0 for c in shortcut.commands
               if c.command_type == CommandType.kPropagate)   # precomputed indexes
    regular = compile(nnet, request)
    rng = np.random.default_rng(7)
    inputs = {spec.name: rng.standard_normal(
        (len(spec.indexes), nnet.input_dim(spec.name))).astype(np.float32)
        for spec in request.inputs}
    deriv = rng.standard_normal((len(request.outputs[0].indexes),
                                 nnet.output_dim("output"))).astype(np.float32)
    ours = _run(shortcut, nnet, inputs, deriv)
    theirs = _run(regular, nnet, inputs, deriv)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours[1]["input"], theirs[1]["input"], rtol=1e-4, atol=1e-5)
    for a, b in zip(ours[2], theirs[2]):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


# -- when the shortcut applies ------------------------------------------------------------

def _request(*specs):
    return ComputationRequest(inputs=[specs[0]], outputs=list(specs[1:]))


def test_find_n_stride_layouts():
    t_major = [Index(n, t, 0) for t in range(5) for n in range(3)]
    n_major = [Index(n, t, 0) for n in range(3) for t in range(5)]
    # two interleaved halves per block, as a subsampling layer of a convnet gives
    blocks = [Index(n, t, x) for t in range(2) for n in range(3) for x in range(2)]
    assert find_n_stride(t_major) == 1
    assert find_n_stride(n_major) == 5
    assert find_n_stride(blocks) == 2
    assert find_n_stride([Index(0, t, 0) for t in range(4)]) == 0      # one sequence
    assert find_n_stride(n_major[:-1]) == 0                            # ragged
    swapped = list(t_major)
    swapped[3], swapped[4] = swapped[4], swapped[3]
    assert find_n_stride(swapped) == 0
    cindexes = [(7, index) for index in n_major]
    assert find_n_stride(cindexes, cindexes=True) == 5


def test_mini_request_keeps_layout_and_flags():
    spec = IoSpecification("input", [Index(n, t, 0) for n in range(4) for t in range(3)], True)
    out = IoSpecification("output", [Index(n, t, 0) for t in range(2) for n in range(4)], True)
    request = _request(spec, out)
    request.need_model_derivative = True
    request.store_component_stats = True
    mini, num_n = request_is_decomposable(request)
    assert num_n == 4
    assert mini.inputs[0].indexes == [Index(n, t, 0) for n in range(2) for t in range(3)]
    assert mini.outputs[0].indexes == [Index(n, t, 0) for t in range(2) for n in range(2)]
    assert mini.inputs[0].has_deriv and mini.outputs[0].has_deriv
    assert mini.need_model_derivative and mini.store_component_stats


def test_not_decomposable_where_kaldi_says_no():
    def spec(name, num_n, frames=3):
        return IoSpecification(name, [Index(n, t, 0) for n in range(num_n)
                                      for t in range(frames)])
    assert request_is_decomposable(_request(spec("input", 2), spec("output", 2))) is None
    assert request_is_decomposable(_request(spec("input", 4), spec("output", 3))) is None
    ragged = spec("output", 4)
    ragged.indexes.pop(5)
    assert request_is_decomposable(_request(spec("input", 4), ragged)) is None
    # numbered from 1: the first Index must have n == 0
    shifted = IoSpecification("output", [Index(n + 1, t, 0) for n in range(4)
                                         for t in range(3)])
    assert request_is_decomposable(_request(spec("input", 5), shifted)) is None
    assert request_is_decomposable(_request(spec("input", 3), spec("output", 3))) is not None


def test_irregular_computation_is_refused_with_kaldi_advice():
    case = CASES[0]
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    mini_request, num_n = request_is_decomposable(request)
    mini = compile(nnet, mini_request)
    node, index = mini.matrix_debug_info[1].cindexes[0]
    mini.matrix_debug_info[1].cindexes[0] = (node, Index(1, index.t, index.x))
    with pytest.raises(ComputationError, match="use-shortcut=false"):
        expand_computation(nnet, None, mini, True, num_n)
