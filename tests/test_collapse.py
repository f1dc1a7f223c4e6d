"""Kaldi's CollapseModel and ``--prepare-for-test`` (nnet3-copy, nnet3-am-copy).

- Every ``models/*/copy.prepare_for_test.cmd`` of kaldi-ref is run with the
  same options; the text output must equal Kaldi's byte for byte (this fixes
  the float32 summation order of the merged parameters). The same for
  ``kaldi-am-copy.prepare-for-test.txt.mdl`` (tdnn_lda, tdnnf_chain); a copy of
  tdnn_lda's lives in tests/data.
- A collapsed network computes what the original computes in test mode
  (compiled with pynnet3.compile, run by NnetComputer) on random inputs and
  random parameters, within float32 rounding.
- Each kind of collapse (dropout, batch-norm into affine/linear/tdnn, affine
  into affine, affine with fixed scale) on small networks: names, types,
  parameters, Descriptors, and what is left alone.
(The OpenBLAS arithmetic the collapser uses is tested in
test_numerics_openblas.py.)
"""

import os
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.bin import nnet3_am_copy, nnet3_copy
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.compute.computer import NnetComputer
from pynnet3.errors import NnetError
from pynnet3.nnet.collapse import CollapseModelConfig, collapse_model
from pynnet3.common.index import Index
from pynnet3.nnet.nnet import Nnet
from pynnet3.nnet.component_ops import (num_parameters, set_batchnorm_test_mode,
                                        set_dropout_test_mode, unvectorize_nnet)
from pynnet3.numerics.openblas import sgemm

DATA = TEST_DATA / "collapse"
MDL_DATA = TEST_DATA / "mdl" / "tdnn_lda"
ALL = CollapseModelConfig(collapse_dropout=True, collapse_batchnorm=True)


# -- Kaldi's outputs ------------------------------------------------------------------------

def _copy_cases():
    return [pytest.param(cmd.parent, id=cmd.parent.name)
            for cmd in sorted(KALDI_REF.glob("models/*/copy.prepare_for_test.cmd"))]


@pytest.mark.parametrize("model_dir", _copy_cases())
def test_nnet3_copy_prepare_for_test_matches_kaldi(model_dir, tmp_path, monkeypatch):
    argv = shlex.split((model_dir / "copy.prepare_for_test.cmd").read_text())
    assert argv[0] == "nnet3-copy" and "--prepare-for-test=true" in argv
    out = tmp_path / "out.txt"
    monkeypatch.chdir(model_dir)
    assert nnet3_copy.main(["--print-args=false"] + argv[1:-1] + [str(out)]) == 0
    assert out.read_bytes() == (model_dir / "copy.prepare_for_test.txt").read_bytes()


def _am_cases():
    cases = [pytest.param(p.parent, p, id="kaldi-ref/" + p.parent.name)
             for p in sorted(KALDI_REF.glob("models/*/kaldi-am-copy.prepare-for-test.txt.mdl"))]
    cases.append(pytest.param(MDL_DATA, DATA / "tdnn_lda.prepare-for-test.txt.mdl",
                              id="tests-data/tdnn_lda"))
    return cases


@pytest.mark.parametrize("model_dir,reference", _am_cases())
def test_nnet3_am_copy_prepare_for_test_matches_kaldi(model_dir, reference, tmp_path):
    out = tmp_path / "out.mdl"
    assert nnet3_am_copy.main(["--print-args=false", "--binary=false",
                               "--prepare-for-test=true", str(model_dir / "final.mdl"),
                               str(out)]) == 0
    assert out.read_bytes() == reference.read_bytes()


def test_raw_copy_equals_network_inside_am_copy(tmp_path):
    """nnet3-copy --prepare-for-test on the network of a .mdl writes exactly
    the network part of nnet3-am-copy --prepare-for-test's text output."""
    out = tmp_path / "out.txt"
    assert nnet3_copy.main(["--print-args=false", "--binary=false", "--prepare-for-test",
                            str(MDL_DATA / "final.mdl"), str(out)]) == 0
    ours = out.read_bytes()
    reference = (DATA / "tdnn_lda.prepare-for-test.txt.mdl").read_bytes()
    start = reference.index(b"<Nnet3>")
    end = reference.index(b"</Nnet3> ") + len(b"</Nnet3> ")
    assert ours == reference[start:end]
    assert b"component=lda.tdnn1.affine" in ours and b"<ComponentName> lda " not in ours


def test_collapse_logs_kaldi_lines(caplog):
    nnet = Nnet.read(str(MDL_DATA / "kaldi-am-copy.raw.raw"))
    set_batchnorm_test_mode(nnet, True)
    with caplog.at_level("INFO", logger="pynnet3"):
        collapse_model(nnet)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["Removed 1 orphan nodes.", "Removing 2 orphan components.",
                        "Added 1 components, removed 2"]


# -- numbers: collapsed and original networks compute the same ------------------------------

def _outputs(nnet, inputs, output_names, num_frames):
    """Runs a compiled computation: ``inputs`` maps an input node to
    (first t, matrix); the outputs are wanted for t = 0 .. num_frames-1."""
    request = ComputationRequest()
    for name, (t0, value) in inputs.items():
        request.inputs.append(IoSpecification.from_t_range(name, t0, t0 + value.shape[0]))
    for name in output_names:
        request.outputs.append(IoSpecification.from_t_range(name, 0, num_frames))
    computer = NnetComputer(compile(nnet, request), nnet, undefined_fill=np.nan)
    for name, (_, value) in inputs.items():
        computer.accept_input(name, value)
    computer.run()
    return {name: np.array(computer.get_output(name)) for name in output_names}


def _random_inputs(nnet, rng, num_frames, context=30):
    inputs = {}
    for n in range(nnet.num_nodes()):
        if nnet.is_input_node(n):
            name = nnet.node_names[n]
            rows = 1 if name == "ivector" else num_frames + 2 * context
            t0 = 0 if name == "ivector" else -context
            inputs[name] = (t0, rng.standard_normal((rows, nnet.input_dim(name)))
                            .astype(np.float32))
    return inputs


def _output_names(nnet):
    return [nnet.node_names[n] for n in range(nnet.num_nodes()) if nnet.is_output_node(n)]


def _assert_same_outputs(original, collapsed, rng, num_frames=6):
    inputs = _random_inputs(original, rng, num_frames)
    names = _output_names(original)
    assert names == _output_names(collapsed)
    a = _outputs(original, inputs, names, num_frames)
    b = _outputs(collapsed, inputs, names, num_frames)
    for name in names:
        scale = max(1.0, float(np.abs(a[name]).max()))
        assert np.abs(a[name] - b[name]).max() <= 1e-5 * scale, name


def _numeric_models():
    names = ("tdnn_lda", "tdnn_lstm", "tdnnf_chain")
    models = [pytest.param(KALDI_REF / "models" / n / "model.raw", id=n) for n in names
              if (KALDI_REF / "models" / n / "model.raw").is_file()]
    models.append(pytest.param(MDL_DATA / "kaldi-am-copy.raw.raw", id="tests-data/tdnn_lda"))
    return models


@pytest.mark.parametrize("path", _numeric_models())
def test_collapsed_model_computes_the_same(path):
    nnet = Nnet.read(str(path))
    set_batchnorm_test_mode(nnet, True)
    set_dropout_test_mode(nnet, True)
    rng = np.random.default_rng(5)
    # Random parameters: the references' output layers are zero.
    unvectorize_nnet(nnet, (0.2 * rng.standard_normal(num_parameters(nnet))).astype(np.float32))
    collapsed = collapse_model(nnet.copy())
    assert collapsed.num_components() < nnet.num_components()
    _assert_same_outputs(nnet, collapsed, rng)


# -- each kind of collapse -------------------------------------------------------------------

def _net(lines):
    return Nnet.from_config("\n".join(lines) + "\n")


def _set_batchnorm_stats(comp, rng):
    comp.count = 100.0
    comp.stats_sum = rng.standard_normal(comp.block_dim) * 100.0
    comp.stats_sumsq = comp.stats_sum * comp.stats_sum / 100.0 + \
        rng.uniform(10.0, 200.0, comp.block_dim)
    comp.set_test_mode(True)


def _component(nnet, name):
    index = nnet.get_component_index(name)
    assert index >= 0, "no component %s in %s" % (name, nnet.component_names)
    return nnet.get_component(index)


def _node_component(nnet, node):
    return nnet.component_names[nnet.nodes[nnet.get_node_index(node)].component_index]


def test_batchnorm_folds_into_affine_linear_and_tdnn():
    rng = np.random.default_rng(0)
    nnet = _net([
        "input-node name=input dim=6",
        "component name=a0 type=AffineComponent input-dim=6 output-dim=8",
        "component-node name=a0 component=a0 input=input",
        "component name=relu type=RectifiedLinearComponent dim=8",
        "component-node name=relu component=relu input=a0",
        "component name=bn type=BatchNormComponent dim=8 block-dim=4",
        "component-node name=bn component=bn input=relu",
        "component name=aff type=NaturalGradientAffineComponent input-dim=16 output-dim=5",
        "component-node name=aff component=aff input=Append(Offset(bn, -1), bn)",
        "component name=lin type=LinearComponent input-dim=8 output-dim=3",
        "component-node name=lin component=lin input=bn",
        "component name=tdnn type=TdnnComponent input-dim=8 output-dim=4 "
        "time-offsets=-1,1 use-bias=false",
        "component-node name=tdnn component=tdnn input=bn",
        "output-node name=output input=Append(aff, lin, tdnn)",
    ])
    _set_batchnorm_stats(_component(nnet, "bn"), rng)
    collapsed = collapse_model(nnet.copy(), ALL)
    assert _node_component(collapsed, "aff") == "bn.aff"
    assert _node_component(collapsed, "lin") == "bn.lin"
    assert _node_component(collapsed, "tdnn") == "bn.tdnn"
    assert _component(collapsed, "bn.aff").type_name == "NaturalGradientAffineComponent"
    new_lin = _component(collapsed, "bn.lin")
    assert new_lin.type_name == "AffineComponent"
    assert new_lin.learning_rate == _component(nnet, "lin").learning_rate
    assert _component(collapsed, "bn.tdnn").bias_params.shape == (4,)
    assert collapsed.get_node_index("bn") == -1 and collapsed.get_component_index("bn") == -1
    aff_input = collapsed.nodes[collapsed.get_node_index("aff") - 1].descriptor
    assert aff_input.write_config(collapsed.node_names) == "Append(Offset(relu, -1), relu)"
    _assert_same_outputs(nnet, collapsed, rng)
    # Off by default: the default configuration leaves batch-norm alone.
    untouched = collapse_model(nnet.copy())
    assert untouched.component_names == nnet.component_names


def test_batchnorm_collapse_needs_test_mode():
    nnet = _net([
        "input-node name=input dim=4",
        "component name=a0 type=AffineComponent input-dim=4 output-dim=4",
        "component-node name=a0 component=a0 input=input",
        "component name=bn type=BatchNormComponent dim=4",
        "component-node name=bn component=bn input=a0",
        "component name=aff type=AffineComponent input-dim=4 output-dim=2",
        "component-node name=aff component=aff input=bn",
        "output-node name=output input=aff",
    ])
    with pytest.raises(NnetError, match="test-mode"):
        collapse_model(nnet, ALL)


def test_dropout_collapses_as_kaldi_does():
    """DropoutComponent: the next layer's linear part is scaled by 1/(1-p)
    (Kaldi's choice, not the test-mode scale (1-p)); GeneralDropoutComponent:
    the next layer is kept as it is and the dropout node bypassed."""
    rng = np.random.default_rng(1)
    nnet = _net([
        "input-node name=input dim=5",
        "component name=a0 type=AffineComponent input-dim=5 output-dim=6",
        "component-node name=a0 component=a0 input=input",
        "component name=drop type=DropoutComponent dim=6 dropout-proportion=0.1",
        "component-node name=drop component=drop input=a0",
        "component name=aff type=AffineComponent input-dim=6 output-dim=6",
        "component-node name=aff component=aff input=drop",
        "component name=gdrop type=GeneralDropoutComponent dim=6 dropout-proportion=0.3",
        "component-node name=gdrop component=gdrop input=aff",
        "component name=tdnn type=TdnnComponent input-dim=6 output-dim=3 time-offsets=0,2",
        "component-node name=tdnn component=tdnn input=gdrop",
        "output-node name=output input=tdnn",
    ])
    set_dropout_test_mode(nnet, True)
    collapsed = collapse_model(nnet.copy(), CollapseModelConfig(collapse_dropout=True,
                                                                collapse_affine=False))
    assert _node_component(collapsed, "aff") == "aff.scale1.11"
    assert _node_component(collapsed, "tdnn") == "tdnn"
    assert collapsed.get_node_index("drop") == -1 and collapsed.get_node_index("gdrop") == -1
    factor = np.float32(1.0 / (1.0 - float(np.float32(0.1))))
    assert (_component(collapsed, "aff.scale1.11").linear_params
            == _component(nnet, "aff").linear_params * factor).all()
    # With the proportion at 0 the dropout is exactly the identity in test mode.
    _component(nnet, "drop").set_dropout_proportion(0.0)
    collapsed = collapse_model(nnet.copy(), CollapseModelConfig(collapse_dropout=True,
                                                                collapse_affine=False))
    assert _node_component(collapsed, "aff") == "aff"
    _assert_same_outputs(nnet, collapsed, rng)


def test_affine_chains_and_fixed_scale():
    rng = np.random.default_rng(2)
    nnet = _net([
        "input-node name=input dim=4",
        "component name=fixed type=FixedAffineComponent input-dim=4 output-dim=6",
        "component-node name=fixed component=fixed input=Offset(input, 2)",
        "component name=aff type=NaturalGradientAffineComponent input-dim=18 output-dim=20",
        "component-node name=aff component=aff input=Append(Offset(fixed, -3), fixed, "
        "Offset(fixed, 3))",
        "component name=scale type=FixedScaleComponent dim=20 scale=0.25",
        "component-node name=scale component=scale input=aff",
        "component name=reduce type=AffineComponent input-dim=20 output-dim=3",
        "component-node name=reduce component=reduce input=scale",
        "component name=last type=AffineComponent input-dim=3 output-dim=2",
        "component-node name=last component=last input=reduce",
        "output-node name=output input=last",
    ])
    collapsed = collapse_model(nnet.copy())
    # In one sweep: fixed into aff (block-diagonal over the three offsets),
    # that with the scale, that into reduce; "reduce" reduces the dimension,
    # so "last" stays; the intermediate components end up orphans.
    assert collapsed.component_names == ["last", "fixed.aff.scale.reduce"]
    assert _component(collapsed, "fixed.aff.scale.reduce").type_name == "AffineComponent"
    assert collapsed.get_config_lines() == [
        "input-node name=input dim=4",
        "component-node name=reduce component=fixed.aff.scale.reduce input=Append("
        "Offset(input, -1), Offset(input, 2), Offset(input, 5))",
        "component-node name=last component=last input=reduce",
        "output-node name=output input=last objective=linear"]
    _assert_same_outputs(nnet, collapsed, rng)


def test_affine_with_fixed_scale_keeps_its_type():
    nnet = _net([
        "input-node name=input dim=4",
        "component name=aff type=NaturalGradientAffineComponent input-dim=4 output-dim=3 "
        "max-change=0.75",
        "component-node name=aff component=aff input=input",
        "component name=s type=FixedScaleComponent dim=3 scale=0.5",
        "component-node name=s component=s input=aff",
        "output-node name=output input=s",
    ])
    collapsed = collapse_model(nnet.copy())
    assert collapsed.component_names == ["aff.s"]
    new, old = _component(collapsed, "aff.s"), _component(nnet, "aff")
    assert new.type_name == "NaturalGradientAffineComponent" and new.max_change == 0.75
    assert (new.linear_params == old.linear_params * np.float32(0.5)).all()
    assert (new.bias_params == old.bias_params * np.float32(0.5)).all()
    _assert_same_outputs(nnet, collapsed, np.random.default_rng(6))


def test_what_is_left_alone():
    nnet = _net([
        "input-node name=input dim=4",
        "component name=a type=AffineComponent input-dim=4 output-dim=4",
        "component-node name=a component=a input=input",
        "component name=b type=AffineComponent input-dim=4 output-dim=4",
        "component-node name=b component=b input=Sum(a, input)",
        "component name=c type=AffineComponent input-dim=8 output-dim=4",
        "component-node name=c component=c input=Append(a, b)",
        "component name=relu type=RectifiedLinearComponent dim=4",
        "component-node name=relu component=relu input=c",
        "component name=d type=AffineComponent input-dim=4 output-dim=4",
        "component-node name=d component=d input=IfDefined(Offset(relu, -1))",
        "output-node name=output input=Append(d, a)",
    ])
    before = nnet.to_bytes(binary=False)
    collapse_model(nnet, ALL)
    assert nnet.to_bytes(binary=False) == before


def test_existing_component_of_the_same_name_is_reused():
    nnet = _net([
        "input-node name=input dim=3",
        "component name=a type=AffineComponent input-dim=3 output-dim=4",
        "component-node name=a component=a input=input",
        "component name=b type=AffineComponent input-dim=4 output-dim=2",
        "component-node name=b1 component=b input=a",
        "component-node name=b2 component=b input=Offset(a, 1)",
        "output-node name=output input=Append(b1, b2)",
    ])
    collapsed = collapse_model(nnet.copy())
    assert collapsed.component_names == ["a.b"]
    assert _node_component(collapsed, "b1") == _node_component(collapsed, "b2") == "a.b"
    _assert_same_outputs(nnet, collapsed, np.random.default_rng(3))


# -- the OpenBLAS thread count of the collapser's products ----------------------------------

_LDA_AFFINE = """input-node name=input dim=220
component name=lda type=FixedAffineComponent input-dim=220 output-dim=220
component-node name=lda component=lda input=input
component name=affine type=NaturalGradientAffineComponent input-dim=220 output-dim=1024
component-node name=affine component=affine input=lda
output-node name=output input=affine
"""
KALDI_BIN = Path(os.environ.get("PYNNET3_KALDI_BIN", KALDI_REF.parent / "kaldi-bin")) / "kaldi"


def _lda_affine():
    return Nnet.from_config(_LDA_AFFINE)


def test_collapse_products_follow_the_blas_thread_count(monkeypatch):
    """An LDA into a 1024-dim affine layer (a chain recipe's first layer):
    OpenBLAS sums that product in another order with 1 thread than with 2,
    and the collapsed parameters follow the thread count asked for, or
    OpenBLAS's own count in the environment."""
    nnet = _lda_affine()
    w1 = nnet.get_component(nnet.get_component_index("lda")).linear_params
    w2 = nnet.get_component(nnet.get_component_index("affine")).linear_params
    merged = {}
    for threads in (1, 2):
        copy = nnet.copy()
        collapse_model(copy, blas_threads=threads)
        merged[threads] = copy.get_component(copy.get_component_index("lda.affine")).linear_params
        assert merged[threads].tobytes() == sgemm(w2, w1, threads=threads).tobytes()
    assert merged[1].tobytes() != merged[2].tobytes()
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    copy = nnet.copy()
    collapse_model(copy)
    assert copy.get_component(copy.get_component_index("lda.affine")).linear_params.tobytes() \
        == merged[1].tobytes()


@pytest.mark.skipif(not KALDI_BIN.is_file(), reason="no kaldi-bin")
@pytest.mark.parametrize("threads", ["1", "2"])
def test_prepare_for_test_is_kaldis_at_each_thread_count(threads, tmp_path, monkeypatch):
    """Kaldi's nnet3-copy --prepare-for-test on its Haswell kernels
    (OPENBLAS_CORETYPE=Haswell: the kernels pynnet3 reproduces) with 1 and 2
    threads, against ours in the same environment: the same text."""
    model = tmp_path / "model.raw"
    _lda_affine().write(str(model), True)
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell", OPENBLAS_NUM_THREADS=threads)
    kaldi = tmp_path / "kaldi.txt"
    subprocess.run([str(KALDI_BIN), "nnet3-copy", "--prepare-for-test=true", "--binary=false",
                    str(model), str(kaldi)], env=env, check=True, capture_output=True)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", threads)
    ours = tmp_path / "ours.txt"
    assert nnet3_copy.main(["--print-args=false", "--prepare-for-test=true", "--binary=false",
                            str(model), str(ours)]) == 0
    assert ours.read_bytes() == kaldi.read_bytes()
