"""The Python API of the compile-and-run issue, on a reference case: read,
compile, run forward and backward, gradients. The gradient helpers are
Kaldi's nnet-utils functions, imported from their module (the top-level
namespace keeps only what most users need)."""

import numpy as np
import pytest

import pynnet3
from conftest import KALDI_REF, TEST_DATA
from pynnet3.components import Component
from pynnet3.io.table import read_table
from pynnet3.nnet.component_ops import scale_nnet, set_nnet_as_gradient, vectorize_nnet


def _case_dirs():
    dirs = sorted((TEST_DATA / "computer").glob("case*"))
    dirs += [KALDI_REF / "random" / "case0", KALDI_REF / "random" / "case3"]
    return [d for d in dirs if (d / "output_derivs.ark").exists()][:4]


def _close(ours, kaldi):
    kaldi = np.asarray(kaldi)
    scale = max(1.0, float(np.abs(kaldi).max())) if kaldi.size else 1.0
    return float(np.abs(np.asarray(ours) - kaldi).max(initial=0.0)) <= 1e-3 * scale


@pytest.mark.parametrize("case", _case_dirs(), ids=lambda d: d.parent.name + "/" + d.name)
def test_issue_api_forward_backward_gradient(case):
    nnet = pynnet3.Nnet.read(str(case / "model.raw"))
    request = pynnet3.ComputationRequest.read(str(case / "request.txt"))
    computation = pynnet3.compile(nnet, request, optimize=False)
    grad = nnet.copy()
    scale_nnet(grad, 0.0)
    set_nnet_as_gradient(grad)
    computer = pynnet3.NnetComputer(computation, nnet, nnet_to_update=grad, backend="numpy")
    for name, matrix in read_table("ark:%s" % (case / "inputs.ark"), "matrix"):
        computer.accept_input(name, matrix)
    computer.run()
    for name, matrix in read_table("ark:%s" % (case / "outputs.ark"), "matrix"):
        assert _close(computer.get_output(name), matrix), name
    for name, matrix in read_table("ark:%s" % (case / "output_derivs.ark"), "matrix"):
        computer.accept_input(name, matrix)
    computer.run()
    if (case / "input_derivs.ark").exists():
        for name, matrix in read_table("ark:%s" % (case / "input_derivs.ark"), "matrix"):
            assert _close(computer.get_output(name), matrix), name
    if request.need_model_derivative and (case / "gradient.raw").exists():
        kaldi_grad = pynnet3.Nnet.read(str(case / "gradient.raw"))
        assert _close(vectorize_nnet(grad), vectorize_nnet(kaldi_grad))


def test_component_gradient_api():
    comps = sorted((TEST_DATA / "components").glob("comp*/component.txt"))
    c = next(Component.read(str(p)) for p in comps
             if Component.read(str(p)).is_updatable())
    g = c.copy()
    g.scale(0.0)
    g.set_as_gradient()
    v = g.vectorize()
    assert v.dtype == np.float32 and v.shape == (c.num_parameters(),) and not v.any()
    assert g.is_gradient and g.learning_rate == 1.0


def _mdl_dirs():
    dirs = [KALDI_REF / "models" / name for name in ("tdnn_lda", "tdnnf_chain")]
    return [d for d in dirs if d.is_dir()] or [TEST_DATA / "mdl" / "tdnn_lda"]


@pytest.mark.parametrize("d", _mdl_dirs(), ids=lambda d: d.name)
def test_am_nnet_simple_reads_and_writes_a_whole_mdl(d, tmp_path):
    am = pynnet3.AmNnetSimple.read(str(d / "final.mdl"))
    assert am.transition_model is not None and am.priors.shape[0] == am.num_pdfs()
    am.write(str(tmp_path / "copy.mdl"))
    expected = d / "kaldi-copy.bin-to-bin.mdl"
    if not expected.exists():
        expected = d / "final.mdl"
    assert (tmp_path / "copy.mdl").read_bytes() == expected.read_bytes()
