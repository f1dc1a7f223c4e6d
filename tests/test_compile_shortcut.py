"""Shortcut compilation (pynnet3.compiler.shortcut): a request with N > 2
regular sequences is compiled for two and expanded.

- Every reference case whose request Kaldi would compile through the shortcut
  (random/ and tests/data/computer, N = 3 or 4): the expanded computation,
  from our optimized two-sequence computation, gives Kaldi's outputs, input
  derivatives and gradients (matrices start as NaN, so reading unwritten rows
  fails).
- models/ networks (convolution, attention and batch-norm, whose precomputed
  indexes must be recomputed for N sequences; LSTM, BLSTM and GRU recurrences;
  the misc layers), with five-sequence training requests laid out n-major and
  t-major: the shortcut computation's outputs, input derivatives and
  gradients equal the regular computation's.
- RequestIsDecomposable says no exactly where Kaldi does.
"""

import numpy as np
import pytest

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.driver.caching import CachingOptimizingCompiler
from pynnet3.compiler.computation import CommandType
from pynnet3.compiler.computation_io import computation_to_bytes, read_computation
from pynnet3.compiler.shortcut import (compile_via_shortcut, expand_computation,
                                      find_n_stride, request_is_decomposable)
from pynnet3.compute.computer import NnetComputer
from pynnet3.errors import ComputationError
from pynnet3.io.stream import InputStream
from pynnet3.common.index import Index
from pynnet3.nnet.nnet import Nnet
from pynnet3.nnet.component_ops import scale_nnet, set_dropout_test_mode, set_nnet_as_gradient
from pynnet3.optimize.checker import check_computation
from test_computer_kaldi import assert_close, case_dirs, case_id, run_and_check


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

# convolution, attention, batch-norm (precomputed indexes to recompute);
# recurrences (a matrix per time step); GRU and the misc layers
MODELS = ["cnn_tdnn_attention", "tdnn_lstm", "blstm", "gru", "misc_layers"]


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


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("n_major", [True, False], ids=["n-major", "t-major"])
def test_shortcut_equals_regular_compilation_on_a_model(kaldi_ref, model, n_major):
    nnet = Nnet.read(str(kaldi_ref / "models" / model / "model.raw"))
    set_dropout_test_mode(nnet, True)
    num_n, frames = 5, 8
    compiler = CachingOptimizingCompiler(nnet)
    left, right = compiler.get_simple_nnet_context()
    inputs = [_specification("input", num_n, range(-left, frames + right), n_major, True)]
    if nnet.get_node_index("ivector") >= 0:
        inputs.append(_specification("ivector", num_n, [0], n_major, False))
    request = ComputationRequest(
        inputs=inputs,
        outputs=[_specification("output", num_n, range(frames), n_major, True)],
        need_model_derivative=True)
    shortcut = compiler.compile(request)
    assert len(compiler.cache) == 2            # the two-sequence request and this one
    if model == "cnn_tdnn_attention":
        assert any(c.arg2 > 0 for c in shortcut.commands
                   if c.command_type == CommandType.kPropagate)   # precomputed indexes
    regular = compile(nnet, request)
    rng = np.random.default_rng(7)
    values = {spec.name: rng.standard_normal(
        (len(spec.indexes), nnet.input_dim(spec.name))).astype(np.float32)
        for spec in request.inputs}
    deriv = rng.standard_normal((len(request.outputs[0].indexes),
                                 nnet.output_dim("output"))).astype(np.float32)
    ours = _run(shortcut, nnet, values, deriv)
    theirs = _run(regular, nnet, values, deriv)
    # the tolerance of the Kaldi comparisons: float32 sums in another order
    # (the regular computation's model update is consolidated differently)
    assert_close(ours[0], theirs[0], "output")
    assert_close(ours[1]["input"], theirs[1]["input"], "input derivative")
    assert len(ours[2]) == len(theirs[2]) > 0
    for i, (a, b) in enumerate(zip(ours[2], theirs[2])):
        assert_close(a, b, "gradient of updatable component %d" % i)


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


def test_row_by_row_and_array_n_strides_agree():
    from pynnet3.compiler.shortcut import _find_n_stride_arrays, _find_n_stride_rows
    rng = np.random.default_rng(3)
    found = 0
    for trial in range(400):
        num_n, frames = int(rng.integers(2, 5)), int(rng.integers(1, 5))
        if trial % 2:
            rows = [(n, t, 0) for t in range(frames) for n in range(num_n)]
        else:
            rows = [(n, t, 0) for n in range(num_n) for t in range(frames)]
        if trial % 3 == 0:      # damage it
            i = int(rng.integers(len(rows)))
            rows[i] = (int(rng.integers(0, num_n + 1)), rows[i][1] + int(rng.integers(0, 2)), 0)
        n = [r[0] for r in rows]
        key = [(5,) + r[1:] for r in rows]
        arrays = (np.array(n, dtype=np.int64), np.array(key, dtype=np.int64))
        expected = _find_n_stride_arrays(*arrays)
        assert _find_n_stride_rows(n, key) == expected, rows
        found += expected > 0
    assert 100 < found < 400


def test_expanded_index_lists_share_objects_and_keep_values():
    from pynnet3.compiler.shortcut import _index_lists
    no_time = -2 ** 31
    a = np.array([[0, no_time, 0], [1, 5, 0], [2, 5, 0]], dtype=np.int64)
    b = np.array([[2, 5, 0], [0, no_time, 0]], dtype=np.int64)
    far = np.array([[0, 0, 0], [0, 2 ** 30, 2 ** 30], [1, -2 ** 30, 0]], dtype=np.int64)
    la, lb = _index_lists([a, b])
    assert la == [Index(0, no_time, 0), Index(1, 5, 0), Index(2, 5, 0)]
    assert lb == [Index(2, 5, 0), Index(0, no_time, 0)]
    assert lb[0] is la[2] and type(lb[0]) is Index
    assert _index_lists([far])[0] == [Index(*r) for r in far.tolist()]
    # more (n, t, x) combinations than it marks: the sorting path
    many = np.stack([np.arange(300), np.arange(300) * 7, -np.arange(300)], axis=1)
    assert _index_lists([many])[0] == [Index(*r) for r in many.tolist()]
