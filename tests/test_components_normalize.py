"""NormalizeComponent and BatchNormComponent against Kaldi (kaldi-ref
component cases, batch-norm components with statistics taken from kaldi-ref
models) and against the math Kaldi documents for them."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

from conftest import TEST_DATA
from kaldi_component_cases import (DIRECTIONS, KaldiCaseTests, component_bytes,
                                   component_from_config, finite_difference_check,
                                   read_component, roundtrip)
from pynnet3.components import Component
from pynnet3.components.base import P
from pynnet3.components.normalize import BatchNormComponent, NormalizeComponent
from pynnet3.errors import ConfigError, KaldiFormatError, NnetError
from pynnet3.io.stream import InputStream, OutputStream

FRAGMENTS = TEST_DATA / "components" / "model_fragments"


class TestKaldiCases(KaldiCaseTests):
    TYPES = ("NormalizeComponent", "BatchNormComponent")


# -- batch-norm statistics as Kaldi's nnet3-copy rewrites them -------------------------------

@pytest.mark.parametrize("src,dst", DIRECTIONS, ids=["%s-to-%s" % d for d in DIRECTIONS])
@pytest.mark.parametrize("name", ["bn_ivector", "bn_cnn1"])
def test_batchnorm_with_stats_copies_like_kaldi(name, src, dst):
    """Kaldi stores mean/variance, keeps sums, and rewrites them in float: the
    copy differs from the original in the last bits, and ours must too."""
    comp = read_component(FRAGMENTS / ("%s.src.%s" % (name, src)))
    expected = (FRAGMENTS / ("%s.%s-to-%s" % (name, src, dst))).read_bytes()
    assert component_bytes(comp, dst == "bin") == expected


@pytest.mark.parametrize("name", ["bn_ivector", "bn_cnn1"])
def test_batchnorm_with_stats_info(name):
    comp = read_component(FRAGMENTS / ("%s.src.bin" % name))
    assert comp.info() == (FRAGMENTS / ("%s.info" % name)).read_text().rstrip("\n")


def test_kaldi_copy_changes_batchnorm_stats():
    # the premise of the test above: a genuine (tiny) change in the bytes
    src = (FRAGMENTS / "bn_ivector.src.bin").read_bytes()
    assert src != (FRAGMENTS / "bn_ivector.bin-to-bin").read_bytes()


# -- configuration ---------------------------------------------------------------------------

def test_batchnorm_config_matches_kaldi_layout():
    comp = component_from_config("type=BatchNormComponent dim=40 target-rms=0.025")
    kaldi = (FRAGMENTS / "bn_ivector.src.txt").read_bytes()
    ours = component_bytes(comp, False)
    head = kaldi[:kaldi.index(b"<Count>")]
    assert ours.startswith(head)
    assert ours[len(head):] == (b"<Count> 0 <StatsMean>  [ " + b"0 " * 40 + b"]\n<StatsVar>  [ "
                                + b"0 " * 40 + b"]\n</BatchNormComponent> ")
    assert comp.properties() == int(P.kSimpleComponent | P.kBackpropNeedsOutput
                                    | P.kPropagateInPlace | P.kBackpropInPlace | P.kUsesMemo
                                    | P.kStoresStats)
    c = component_from_config("type=BatchNormComponent dim=12 block-dim=4 epsilon=0.1 "
                              "target-rms=2")
    assert c.info() == ("BatchNormComponent, dim=12, block-dim=4, epsilon=0.1, target-rms=2, "
                        "count=0, test-mode=false")


@pytest.mark.parametrize("line", [
    "type=BatchNormComponent",
    "type=BatchNormComponent dim=10 block-dim=3",
    "type=BatchNormComponent dim=10 epsilon=0",
    "type=BatchNormComponent dim=10 bogus=1",
    "type=NormalizeComponent",
    "type=NormalizeComponent dim=10 block-dim=4",
    "type=NormalizeComponent dim=10 target-rms=0",
    "type=NormalizeComponent dim=10 input-dim=10",  # Kaldi reads only one of them
])
def test_bad_config_raises_config_error(line):
    with pytest.raises(ConfigError):
        component_from_config(line)


def test_normalize_config_and_layout():
    c = component_from_config("type=NormalizeComponent input-dim=6 block-dim=3 "
                              "add-log-stddev=true")
    assert (c.input_dim(), c.output_dim()) == (6, 8)
    assert c.properties() == int(P.kSimpleComponent | P.kBackpropNeedsInput | P.kBackpropAdds
                                 | P.kInputContiguous | P.kOutputContiguous)
    assert component_bytes(c, False) == (b"<NormalizeComponent> <InputDim> 6 <BlockDim> 3 "
                                         b"<TargetRms> 1 <AddLogStddev> T </NormalizeComponent> ")
    assert c.info() == ("NormalizeComponent, input-dim=6, output-dim=8, target-rms=1, "
                        "add-log-stddev=true, block-dim=3")


def test_normalize_reads_old_layouts():
    old = (b"<NormalizeComponent> <Dim> 4 <ValueAvg> [ 1 2 3 4 ] <DerivAvg> [ 1 1 1 1 ] "
           b"<Count> 7 </NormalizeComponent> ")
    c = Component.read_new(InputStream.from_bytes(old))
    assert (c.dim, c.block_dim, c.target_rms, c.add_log_stddev) == (4, 4, 1.0, False)
    assert component_bytes(c, False) == (b"<NormalizeComponent> <InputDim> 4 <TargetRms> 1 "
                                         b"<AddLogStddev> F </NormalizeComponent> ")


@pytest.mark.parametrize("data", [
    b"<NormalizeComponent> <Foo> 4 </NormalizeComponent> ",
    b"<NormalizeComponent> <InputDim> 4 <TargetRms> 1 <AddLogStddev> F <Bar> ",
    b"<BatchNormComponent> <Dim> 4 <BlockDim> 3 <Epsilon> 1 <TargetRms> 1 <TestMode> F "
    b"<Count> 0 <StatsMean> [ 0 0 0 ] <StatsVar> [ 0 0 0 ] </BatchNormComponent> ",
    b"<BatchNormComponent> <Dim> 4 <BlockDim> 4 <Epsilon> 1 <TargetRms> 1 <TestMode> F "
    b"<Count> 0 <StatsMean> [ 0 0 0 0 ] </BatchNormComponent> ",
])
def test_bad_files_raise_format_error(data):
    with pytest.raises(KaldiFormatError):
        Component.read_new(InputStream.from_bytes(data, "bad.txt"))


# -- NormalizeComponent math --------------------------------------------------------------------

@pytest.mark.parametrize("block_dim,log", [(6, False), (3, False), (6, True), (2, True)])
def test_normalize_backprop_is_the_derivative(block_dim, log):
    c = NormalizeComponent(6, block_dim, target_rms=0.7, add_log_stddev=log)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    od = rng.standard_normal((5, c.output_dim())).astype(np.float32)
    finite_difference_check(c, x, od)
    out = np.zeros((5, c.output_dim()), np.float32)
    c.propagate(None, x, out)
    blocks = out.reshape(-1, block_dim + log)
    rms = np.sqrt((blocks[:, :block_dim] ** 2).mean(axis=1))
    np.testing.assert_allclose(rms, 0.7, rtol=1e-5)


def test_normalize_backprop_adds_and_in_place():
    c = NormalizeComponent(4)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    od = rng.standard_normal((3, 4)).astype(np.float32)
    fresh = np.zeros_like(x)
    c.backprop("", None, x, None, od, None, None, fresh)
    added = np.ones_like(x)
    c.backprop("", None, x, None, od, None, None, added)
    np.testing.assert_allclose(added, fresh + 1, rtol=1e-6)
    shared = od.copy()  # kBackpropInPlace: in_deriv is out_deriv
    c.backprop("", None, x, None, shared, None, None, shared)
    np.testing.assert_allclose(shared, fresh, rtol=1e-6)


def test_normalize_zero_input_gives_zero():
    c = NormalizeComponent(3, add_log_stddev=True)
    out = np.ones((1, 4), np.float32)
    c.propagate(None, np.zeros((1, 3), np.float32), out)
    assert out[0, :3].tolist() == [0.0, 0.0, 0.0] and np.isfinite(out).all()


# -- BatchNormComponent math ----------------------------------------------------------------------

def test_batchnorm_training_normalizes_and_stores_stats():
    c = BatchNormComponent(6, 3, epsilon=1e-3, target_rms=2.0)
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((8, 6)) * 3 + 1).astype(np.float32)
    out = np.zeros_like(x)
    memo = c.propagate(None, x, out)
    blocks = out.reshape(-1, 3)
    np.testing.assert_allclose(blocks.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(blocks.std(axis=0), 2.0, rtol=1e-3)
    c.store_stats(x, out, memo)
    assert c.count == 16.0
    np.testing.assert_allclose(c.stats_sum, x.reshape(-1, 3).sum(axis=0), rtol=1e-5)
    # test mode with these stats reproduces the training-mode transform of this batch
    c.set_test_mode(True)
    assert not c.properties() & (P.kUsesMemo | P.kStoresStats)
    out2 = np.zeros_like(x)
    assert c.propagate(None, x, out2) is None
    np.testing.assert_allclose(out2, out, rtol=1e-4, atol=1e-4)
    with pytest.raises(NnetError):
        c.store_stats(x, out2, None)
    c.zero_stats()  # kept in test mode: they are the transform
    assert c.count == 16.0
    back = roundtrip(c, True)
    assert back.info() == c.info()


def test_batchnorm_training_backprop_is_the_derivative():
    c = BatchNormComponent(4, 2, epsilon=0.1, target_rms=1.5)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    finite_difference_check(c, x, rng.standard_normal((5, 4)).astype(np.float32))
    with pytest.raises(NnetError):
        c.backprop("", None, x, x, x, None, None, np.zeros_like(x))


def test_batchnorm_test_mode_backprop_scales():
    c = read_component(FRAGMENTS / "bn_cnn1.src.bin")
    c.set_test_mode(True)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 160)).astype(np.float32)
    finite_difference_check(c, x, rng.standard_normal((3, 160)).astype(np.float32))


def test_batchnorm_scale_add_zero_stats():
    c = read_component(FRAGMENTS / "bn_ivector.src.bin")
    d = c.copy()
    c.add(1.0, d)
    assert c.count == 2 * d.count
    c.scale(0.5)
    np.testing.assert_allclose(c.stats_sum, d.stats_sum)
    c.zero_stats()
    assert c.count == 0.0 and not c.stats_sumsq.any()
    c.scale(0.0)
    assert c.count == 0.0


def test_batchnorm_test_mode_without_stats_invents_them_like_kaldi():
    c = component_from_config("type=BatchNormComponent dim=4 test-mode=true")
    assert c.count == 1.0 and c.scale_vec.shape == (4,)
    out = np.zeros((2, 4), np.float32)
    c.propagate(None, np.ones((2, 4), np.float32), out)
    assert np.isfinite(out).all()


def test_batchnorm_invented_stats_do_not_import_numpy_random():
    """Making up the counts of a 1536-dim batch-norm draws from Python's
    generator: importing numpy.random would add about 7 MB to the process
    (a decode with a model fresh from nnet3-init)."""
    code = ("import sys\n"
            "from pynnet3.components import kaldi_random\n"
            "from pynnet3.components import Component\n"
            "from pynnet3.common.config_line import ConfigLine\n"
            "line = ConfigLine('component name=x type=BatchNormComponent dim=1536 test-mode=true')\n"
            "line.get_str('name')\n"
            "c = Component.from_config_line(line)\n"
            "kaldi_random.seed(5)\n"
            "a = kaldi_random.normal_vector(1536)\n"
            "kaldi_random.seed(5)\n"
            "assert (a == kaldi_random.normal_vector(1536)).all()\n"
            "assert c.count == 1.0 and 'numpy.random' not in sys.modules, sorted(sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("count, mean, var", [
    ("1", "1e300 2", "1 1e300"), ("1e-300", "1 2", "3 4"), ("1e10", "1e300 -1e300", "1e300 1")])
def test_batchnorm_huge_stats_overflow_quietly_like_cpp(count, mean, var):
    """Stats beyond float range (fuzzed files) become inf/nan silently, as
    C++'s double -> float casts and float arithmetic make them."""
    text = ("<BatchNormComponent> <Dim> 2 <BlockDim> 2 <Epsilon> 0.001 <TargetRms> 1 "
            "<TestMode> T <Count> %s <StatsMean> [ %s ] <StatsVar> [ %s ] "
            "</BatchNormComponent>" % (count, mean, var)).encode()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        comp = Component.read_new(InputStream(text, False))
        comp.info()
        comp.write_to(OutputStream(True))
    assert not np.all(np.isfinite(comp.scale_vec))
