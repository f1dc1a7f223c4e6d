"""The ONNX lowering of compiled computations, against Kaldi (issue 18).

- every reference component (kaldi-ref/components/compN, and the copies in
  tests/data): its Propagate lowered alone and run in onnxruntime gives
  Kaldi's ``out`` for ``in``, in both entries of a batch of two;
- every random network whose request has no derivatives
  (kaldi-ref/random/caseN, tests/data/compile): the whole optimized
  computation exported (default-domain operators only, onnx's full check)
  gives Kaldi's outputs.ark; a request with derivatives is refused;
- training-only parts are refused with an error naming them.

Tolerance: max |ours - kaldi| <= 1e-4 * max(1, max |kaldi|).
"""

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")

from conftest import KALDI_REF, TEST_DATA  # noqa: E402
from kaldi_component_cases import component_type_of, read_component, read_data  # noqa: E402
from pynnet3.compiler.request import ComputationRequest  # noqa: E402
from pynnet3.errors import ComputationError  # noqa: E402
from pynnet3.io.table import read_table  # noqa: E402
from pynnet3.nnet.nnet import Nnet  # noqa: E402
from pynnet3.onnx.components import NotLowerable, lower_propagate  # noqa: E402
from pynnet3.onnx.computation import request_model  # noqa: E402
from pynnet3.onnx.graph import GraphBuilder  # noqa: E402

TOLERANCE = 1e-4


def relative_error(ours, kaldi):
    ours = np.asarray(ours, np.float64)
    assert ours.shape == kaldi.shape
    finite = np.isfinite(kaldi)
    assert np.array_equal(finite, np.isfinite(ours)), "inf/NaN pattern differs"
    if not finite.any():
        return 0.0
    return float(np.abs(ours[finite] - kaldi[finite]).max()) / max(
        1.0, float(np.abs(kaldi[finite]).max()))


def session(model):
    onnx.checker.check_model(model, full_check=True)
    for node in model.graph.node:
        assert node.domain in ("", "ai.onnx"), node.domain
    return onnxruntime.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])


# -- single components ------------------------------------------------------------------------

def _component_cases():
    out = []
    for root, prefix in ((KALDI_REF / "components", ""), (TEST_DATA / "components", "data:")):
        if root.is_dir():
            out += [pytest.param(d, id=prefix + d.name)
                    for d in sorted(root.glob("comp*"), key=lambda p: int(p.name[4:]))
                    if (d / "data.ark").is_file()]
    return out


@pytest.mark.parametrize("case", _component_cases())
def test_component_propagate_matches_kaldi(case):
    component = read_component(case / "component.txt")
    data = read_data(case)
    x, kaldi = data["in"], data["out"]
    g = GraphBuilder()
    g.add_input("x", 1, ["batch", x.shape[0], x.shape[1]])
    y = lower_propagate(g, component, "x", None, component_type_of(case), kaldi.shape[0],
                        lambda: None)
    g.add_output("y", y, 1, ["batch", kaldi.shape[0], kaldi.shape[1]])
    out = session(g.model()).run(None, {"x": np.stack([x, x])})[0]
    assert relative_error(out[0], kaldi) <= TOLERANCE
    # the second batch entry is the same computation (the last bits may
    # differ: the product's rows fall into other blocks of the GEMM)
    assert relative_error(out[1], kaldi) <= TOLERANCE


# -- whole computations -----------------------------------------------------------------------

def _inference_only(case):
    text = (case / "request.txt").read_text()
    return (all(h == "F" for h in re.findall(r"<HasDeriv> (\w)", text))
            and "<NeedModelDerivative> F" in text)


def _computation_cases():
    out = []
    for root, prefix in ((KALDI_REF / "random", ""), (TEST_DATA / "compile", "data:")):
        if root.is_dir():
            out += [pytest.param(d, id=prefix + d.name)
                    for d in sorted(root.glob("case*"), key=lambda p: int(p.name[4:]))
                    if (d / "outputs.ark").is_file() and _inference_only(d)]
    return out


@pytest.mark.parametrize("case", _computation_cases())
def test_inference_request_matches_kaldi(case):
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    model = request_model(nnet, request)
    assert {p.key for p in model.metadata_props} >= {"nnet3.request"}
    inputs = dict(read_table("ark:%s" % (case / "inputs.ark"), "matrix"))
    feeds = {name: np.stack([value, value]) for name, value in inputs.items()}
    sess = session(model)
    names = [o.name for o in sess.get_outputs()]
    outs = dict(zip(names, sess.run(names, feeds)))
    for name, kaldi in read_table("ark:%s" % (case / "outputs.ark"), "matrix"):
        assert relative_error(outs[name][0], kaldi) <= TOLERANCE, name
        assert relative_error(outs[name][1], kaldi) <= TOLERANCE, name


def _a_random_case():
    cases = sorted(KALDI_REF.glob("random/case*")) + sorted(TEST_DATA.glob("compile/case*"))
    if not cases:
        pytest.skip("no reference computations")
    return cases[0]


def test_request_with_derivatives_is_refused():
    case = _a_random_case()
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    request.outputs[0].has_deriv = True
    with pytest.raises(ComputationError, match="derivatives"):
        request_model(nnet, request)


def test_backward_commands_are_refused():
    from pynnet3 import compile as compile_
    from pynnet3.onnx.computation import computation_graph
    case = _a_random_case()
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    request.outputs[0].has_deriv = True
    computation = compile_(nnet, request)
    with pytest.raises(NotLowerable, match="derivative of output|backward pass"):
        computation_graph(nnet, computation)


def test_training_mode_dropout_is_refused_naming_the_node():
    nnet = Nnet.from_config(
        "input-node name=input dim=3\n"
        "component name=drop type=DropoutComponent dim=3 dropout-proportion=0.5\n"
        "component-node name=drop component=drop input=input\n"
        "output-node name=output input=drop\n")
    from pynnet3.compiler.request import IoSpecification
    request = ComputationRequest(inputs=[IoSpecification.from_t_range("input", 0, 4)],
                                 outputs=[IoSpecification.from_t_range("output", 0, 4)])
    with pytest.raises(NotLowerable, match="node 'drop'.*DropoutComponent.*training mode"):
        request_model(nnet, request)
