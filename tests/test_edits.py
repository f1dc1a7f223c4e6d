"""Edit directives (Kaldi's ReadEditConfig) and the parameter utilities
nnet3-copy uses, against Kaldi's copy.NAME.txt outputs and on small networks
(the ``prepare_for_test`` variants exercise Kaldi's CollapseModel)."""

import re
import shlex

import numpy as np
import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.bin import nnet3_copy
from pynnet3.common.index import Index
from pynnet3.compiler.computation_io import print_computation
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.driver.compile_and_optimize import compile as compile_computation
from pynnet3.errors import ConfigError, PynnetError
from pynnet3.nnet import component_ops as utils
from pynnet3.nnet.edits import apply_edits_string, read_edit_config
from pynnet3.nnet.graph import nnet_is_recurrent
from pynnet3.nnet.nnet import Nnet, find_orphan_components, keep_only_output


def copy_variants():
    cases = []
    for d in sorted(KALDI_REF.glob("models/*")):
        for cmd in sorted(d.glob("copy.*.cmd")):
            name = cmd.name[len("copy."):-len(".cmd")]
            cases.append(pytest.param(d, name, id="%s/%s" % (d.name, name)))
    return cases


@pytest.mark.parametrize("d,name", copy_variants())
def test_copy_variant(d, name, tmp_path, monkeypatch):
    """nnet3-copy with the exact options Kaldi was run with; text output equal."""
    argv = shlex.split((d / ("copy.%s.cmd" % name)).read_text())
    assert argv[0] == "nnet3-copy"
    out = tmp_path / "out.txt"
    argv = ["--print-args=false"] + argv[1:-1] + [str(out)]
    monkeypatch.chdir(d)
    assert nnet3_copy.main(argv) == 0
    assert out.read_bytes() == (d / ("copy.%s.txt" % name)).read_bytes()


SIMPLE = """input-node name=input dim=6
input-node name=ivector dim=2
component name=a1 type=NaturalGradientAffineComponent input-dim=8 output-dim=7 learning-rate-factor=0.5
component-node name=a1 component=a1 input=Append(input, ReplaceIndex(ivector, t, 0))
component name=r1 type=RectifiedLinearComponent dim=7
component-node name=r1 component=r1 input=a1
component name=a2 type=AffineComponent input-dim=7 output-dim=5
component-node name=a2 component=a2 input=r1
component name=lsm type=LogSoftmaxComponent dim=5
component-node name=lsm component=lsm input=a2
output-node name=output input=lsm
component name=xent type=AffineComponent input-dim=7 output-dim=3
component-node name=xent component=xent input=r1
output-node name=output-xent input=xent
component name=unused type=SigmoidComponent dim=3
"""


@pytest.fixture
def nnet():
    np.random.seed(3)
    return Nnet.from_config(SIMPLE)


def test_learning_rates(nnet):
    apply_edits_string(nnet, "set-learning-rate name=a* learning-rate=0.01")
    assert nnet.get_component(0).learning_rate == pytest.approx(0.005)   # times the factor
    assert nnet.get_component(2).learning_rate == pytest.approx(0.01)
    assert nnet.get_component(4).learning_rate == pytest.approx(0.001)   # xent: no match
    apply_edits_string(nnet, "set-learning-rate-factor name=xent learning-rate-factor=3;"
                             "set-learning-rate learning-rate=0.1")
    assert nnet.get_component(4).learning_rate == pytest.approx(0.3)
    assert nnet.get_component(4).learning_rate_factor == 3.0
    utils.set_learning_rate(nnet, 1.0)
    assert nnet.get_component(0).learning_rate == pytest.approx(0.5)
    with pytest.raises(ConfigError, match="expected learning-rate to be set"):
        apply_edits_string(nnet, "set-learning-rate name=a1")


def test_rename_and_remove_outputs(nnet):
    apply_edits_string(nnet, "rename-node old-name=output new-name=output-renamed")
    assert nnet.get_node_index("output-renamed") == 10
    with pytest.raises(ConfigError, match="duplicate node name"):
        apply_edits_string(nnet, "rename-node old-name=output-renamed new-name=r1")
    with pytest.raises(ConfigError, match="no node called nope"):
        apply_edits_string(nnet, "rename-node old-name=nope new-name=x")
    with pytest.raises(ConfigError, match="could not make sense of this rename-node"):
        apply_edits_string(nnet, "rename-node old-name=r1")
    apply_edits_string(nnet, "remove-output-nodes name=output-x*;remove-orphans")
    assert nnet.component_names == ["a1", "r1", "a2", "lsm"]
    assert "xent" not in nnet.node_names and "output-xent" not in nnet.node_names
    assert nnet.get_config_lines()[-1] == ("output-node name=output-renamed input=lsm "
                                           "objective=linear")
    with pytest.raises(ConfigError, match="All outputs were removed"):
        apply_edits_string(nnet, "remove-output-nodes name=*")


def test_remove_orphans_keeps_inputs_unless_asked(nnet):
    apply_edits_string(nnet, "remove-output-nodes name=output;remove-orphan-nodes")
    assert nnet.get_node_index("input") >= 0 and nnet.get_node_index("lsm") == -1
    assert "lsm" in nnet.component_names     # orphan components not removed yet
    apply_edits_string(nnet, "remove-orphan-components")
    assert nnet.component_names == ["a1", "r1", "xent"]


def test_keep_only_output_is_kaldis_remove_xent(kaldi_ref, tmp_path):
    """What nnet3-compute and the decoders drop after reading a model equals
    Kaldi's nnet3-copy --edits='remove-output-nodes name=output-xent;remove-orphans'."""
    d = kaldi_ref / "models" / "tdnn_lstm"
    nnet = Nnet.read(str(d / "model.raw"))
    assert keep_only_output(nnet, "output")
    nnet.write(str(tmp_path / "copy.txt"), binary=False)
    assert (tmp_path / "copy.txt").read_bytes() == (d / "copy.edits_remove_xent.txt").read_bytes()
    assert not keep_only_output(nnet, "output")       # nothing more to drop


def _output_computation_text(nnet):
    request = ComputationRequest(
        inputs=[IoSpecification("input", [Index(0, t, 0) for t in range(5)]),
                IoSpecification("ivector", [Index(0, 0, 0)])],
        outputs=[IoSpecification("output", [Index(0, t, 0) for t in range(5)])])
    return print_computation(compile_computation(nnet, request), nnet)


def test_keep_only_output_keeps_inputs_and_the_computation(nnet):
    before = _output_computation_text(nnet)
    assert not keep_only_output(nnet, "r1")           # not an output node
    assert not keep_only_output(nnet, "nope")
    assert len(nnet.node_names) == 14 and len(nnet.component_names) == 6
    assert keep_only_output(nnet, "output")
    assert nnet.component_names == ["a1", "r1", "a2", "lsm"]
    assert "xent" not in nnet.node_names and "output-xent" not in nnet.node_names
    assert nnet.get_node_index("input") >= 0 and nnet.get_node_index("ivector") >= 0
    assert _output_computation_text(nnet) == before


def test_dropout_and_fixed_affine():
    nnet = Nnet.from_config("input-node name=input dim=4\n"
                            "component name=d type=DropoutComponent dim=4 dropout-proportion=0.5\n"
                            "component-node name=d component=d input=input\n"
                            "component name=a type=AffineComponent input-dim=4 output-dim=2\n"
                            "component-node name=a component=a input=d\n"
                            "output-node name=output input=a\n")
    before = nnet.get_component(1).linear_params.copy()
    apply_edits_string(nnet, "set-dropout-proportion proportion=0.25;convert-to-fixed-affine")
    assert nnet.get_component(0).dropout_proportion == 0.25
    assert nnet.get_component(1).type_name == "FixedAffineComponent"
    np.testing.assert_array_equal(nnet.get_component(1).linear_params, before)
    assert utils.num_parameters(nnet) == 0


def test_reduce_rank(nnet):
    w = nnet.get_component(0).linear_params.copy()
    apply_edits_string(nnet, "reduce-rank name=a1 rank=2")
    w2 = nnet.get_component(0).linear_params
    assert np.linalg.matrix_rank(w2, tol=1e-4) == 2
    u, s, vt = np.linalg.svd(w.astype(np.float64))
    best = (u[:, :2] * s[:2]) @ vt[:2]
    np.testing.assert_allclose(w2, best, atol=1e-5)
    with pytest.raises(ConfigError, match="requires 'name' and 'rank'"):
        apply_edits_string(nnet, "reduce-rank name=a1")
    with pytest.raises(ConfigError, match="Rank must be positive"):
        apply_edits_string(nnet, "reduce-rank name=a1 rank=0")


def test_svd_edits_skip_with_kaldi_warnings(nnet, caplog):
    """Both SVD edits skip a matching component that is not affine or is too
    small for the rank, each with Kaldi's warning, and change nothing."""
    affine = [nnet.get_component(nnet.get_component_index(n)) for n in ("a1", "a2")]
    before = [c.linear_params.copy() for c in affine]
    with caplog.at_level("WARNING", logger="pynnet3"):
        apply_edits_string(nnet, "reduce-rank name=* rank=1000")
        apply_edits_string(nnet, "apply-svd name=r1 bottleneck-dim=1000")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "Not reducing rank of component r1 as it is not an AffineComponent." in warnings
    assert any(re.fullmatch(r"Not reducing rank of component a1 with SVD to rank 1000 because "
                            r"its dimension is \d+ -> \d+", w) for w in warnings)
    assert "Not decomposing component r1 as it is not an AffineComponent." in warnings
    for c, w in zip(affine, before):
        np.testing.assert_array_equal(c.linear_params, w)


def test_apply_svd(nnet):
    a1 = nnet.get_component(0)
    w, b = a1.linear_params.copy(), a1.bias_params.copy()
    apply_edits_string(nnet, "apply-svd name=a1 bottleneck-dim=3 shrinkage-threshold=0.99")
    assert nnet.component_names == ["r1", "a2", "lsm", "xent", "a1_a", "a1_b"]
    lines = nnet.get_config_lines()
    assert ("component-node name=a1_a component=a1_a input=Append(input, ReplaceIndex(ivector, "
            "t, 0))") in lines
    assert "component-node name=a1_b component=a1_b input=a1_a" in lines
    assert "component-node name=r1 component=r1 input=a1_b" in lines
    ca, cb = nnet.get_component(4), nnet.get_component(5)
    assert ca.type_name == "LinearComponent" and cb.type_name == "NaturalGradientAffineComponent"
    assert ca.learning_rate_factor == 0.5 and cb.learning_rate_factor == 0.5
    u, s, vt = np.linalg.svd(w.astype(np.float64))
    np.testing.assert_allclose(cb.linear_params @ ca.params, (u[:, :3] * s[:3]) @ vt[:3],
                               atol=1e-5)
    np.testing.assert_array_equal(cb.bias_params, b)


def test_apply_svd_errors(nnet):
    with pytest.raises(ConfigError, match="requires 'name'"):
        apply_edits_string(nnet, "apply-svd bottleneck-dim=3")
    with pytest.raises(ConfigError, match="Either Bottleneck-dim or energy-threshold"):
        apply_edits_string(nnet, "apply-svd name=a1")
    with pytest.raises(ConfigError, match="less than 1"):
        apply_edits_string(nnet, "apply-svd name=a1 bottleneck-dim=3")


def test_edit_config_errors(nnet):
    with pytest.raises(ConfigError, match=r"edits.cfg:2: Directive 'frobnicate' is not "
                                          r"currently supported"):
        read_edit_config(nnet, "# comment\nfrobnicate name=x\n", "edits.cfg")
    with pytest.raises(ConfigError, match=r"Could not interpret 'foo=1'"):
        read_edit_config(nnet, "remove-orphans foo=1\n", "edits.cfg")


def test_parameter_utilities(nnet):
    n = utils.num_parameters(nnet)
    assert n == 8 * 7 + 7 + 7 * 5 + 5 + 7 * 3 + 3
    v = utils.vectorize_nnet(nnet)
    assert v.dtype == np.float32 and v.shape == (n,)
    np.testing.assert_array_equal(v[:56], nnet.get_component(0).linear_params.ravel())
    other = nnet.copy()
    utils.scale_nnet(other, 2.0)
    np.testing.assert_allclose(utils.vectorize_nnet(other), 2 * v, rtol=1e-6)
    assert utils.dot_product(nnet, other) == pytest.approx(2 * float(v @ v), rel=1e-4)
    utils.add_nnet(nnet, -2.0, other)
    assert np.abs(utils.vectorize_nnet(other)).max() < 1e-5
    utils.unvectorize_nnet(other, v)
    np.testing.assert_array_equal(utils.vectorize_nnet(other), v)
    with pytest.raises(PynnetError):
        utils.unvectorize_nnet(other, v[:-1])
    utils.set_nnet_as_gradient(other)
    assert all(c.is_gradient and c.learning_rate == 1.0 for c in other.components
               if c.is_updatable())
    assert utils.num_updatable_components(nnet) == 3
    assert find_orphan_components(nnet) == [nnet.get_component_index("unused")]
    assert not nnet_is_recurrent(nnet)
