"""Sigmoid, Tanh, RectifiedLinear, Softmax and LogSoftmax components against
Kaldi (kaldi-ref/components cases) and against Kaldi's documented behaviour
of their statistics and self-repair."""

import numpy as np
import pytest

from kaldi_component_cases import (KaldiCaseTests, component_bytes, component_from_config,
                                   finite_difference_check, roundtrip)
from pynnet3.components import Component, kaldi_random
from pynnet3.components.base import P
from pynnet3.components.nonlinear import (LogSoftmaxComponent, RectifiedLinearComponent,
                                          SigmoidComponent, SoftmaxComponent, TanhComponent)
from pynnet3.errors import ConfigError, KaldiFormatError, NnetError
from pynnet3.io.stream import InputStream

TYPES = ("SigmoidComponent", "TanhComponent", "RectifiedLinearComponent", "SoftmaxComponent",
         "LogSoftmaxComponent")


class TestKaldiCases(KaldiCaseTests):
    TYPES = TYPES


# -- construction ----------------------------------------------------------------------

def test_config_keys_and_defaults():
    c = component_from_config("type=RectifiedLinearComponent dim=12 block-dim=4 "
                              "self-repair-scale=1e-05 self-repair-lower-threshold=0.1 "
                              "self-repair-upper-threshold=0.9")
    assert (c.dim, c.block_dim) == (12, 4)
    assert c.info() == ("RectifiedLinearComponent, dim=12, block-dim=4, "
                        "self-repair-lower-threshold=0.1, self-repair-upper-threshold=0.9, "
                        "self-repair-scale=1e-05")
    assert c.properties() & P.kInputContiguous
    text = component_bytes(c, False).decode()
    assert text.startswith("<RectifiedLinearComponent> <Dim> 12 <BlockDim> 4 <ValueAvg>  [ ]")
    assert text.endswith("<SelfRepairLowerThreshold> 0.1 <SelfRepairUpperThreshold> 0.9 "
                         "<SelfRepairScale> 1e-05 </RectifiedLinearComponent> ")
    for binary in (True, False):
        back = roundtrip(c, binary)
        assert component_bytes(back, binary) == component_bytes(c, binary)
    plain = component_from_config("type=SigmoidComponent dim=5")
    assert plain.info() == "SigmoidComponent, dim=5"
    assert (plain.block_dim, plain.self_repair_scale) == (5, 0.0)


@pytest.mark.parametrize("line", [
    "type=SigmoidComponent",
    "type=TanhComponent dim=0",
    "type=RectifiedLinearComponent dim=10 block-dim=3",
    "type=SoftmaxComponent dim=10 foo=1",
    "type=LogSoftmaxComponent dim=abc",
])
def test_bad_config_raises_config_error(line):
    with pytest.raises(ConfigError):
        component_from_config(line)


def test_reads_old_layouts_without_optional_tokens():
    # before OderivRms and the self-repair counters existed
    old = (b"<TanhComponent> <Dim> 3 <ValueAvg> [ 0.5 0.25 1 ] <DerivAvg> [ 0.5 0.5 0.5 ] "
           b"<Count> 2 </TanhComponent> ")
    c = Component.read_new(InputStream.from_bytes(old))
    assert c.count == 2.0 and c.oderiv_count == 0.0
    np.testing.assert_array_equal(c.value_sum, [1.0, 0.5, 2.0])
    text = component_bytes(c, False).decode()
    assert text == ("<TanhComponent> <Dim> 3 <ValueAvg>  [ 0.5 0.25 1 ]\n<DerivAvg>  "
                    "[ 0.5 0.5 0.5 ]\n<Count> 2 <OderivRms>  [ ]\n<OderivCount> 0 "
                    "<NumDimsSelfRepaired> 0 <NumDimsProcessed> 0 </TanhComponent> ")


@pytest.mark.parametrize("data", [
    b"<SigmoidComponent> <Dim> 3 <ValueAvg> [ ] <DerivAvg> [ ] <Count> 0 </TanhComponent> ",
    b"<SigmoidComponent> <Dim> 3 <DerivAvg> [ ] ",
    b"<SigmoidComponent> <Dim> 3 <ValueAvg> [ ] <DerivAvg> [ ] <Count> x ",
    b"<SigmoidComponent> <Dim> -3 <ValueAvg> [ ] <DerivAvg> [ ] <Count> 0 </SigmoidComponent> ",
])
def test_bad_files_raise_format_error(data):
    with pytest.raises(KaldiFormatError):
        Component.read_new(InputStream.from_bytes(data, "bad.txt"))


# -- statistics ------------------------------------------------------------------------

def test_store_stats_then_write_is_kaldis_normalized_form(monkeypatch):
    monkeypatch.setattr(kaldi_random, "rand_int", lambda lo, hi: 1)  # never skip
    c = TanhComponent(dim=2)
    y = np.array([[0.5, -0.5], [0.0, 1.0]], np.float32)
    c.store_stats(None, y, None)
    c.store_stats(None, y, None)
    assert c.count == 4.0
    np.testing.assert_allclose(c.value_sum, [1.0, 1.0])
    np.testing.assert_allclose(c.deriv_sum, 2 * np.array([0.75 + 1.0, 0.75 + 0.0]))
    text = component_bytes(c, False).decode()
    assert "<ValueAvg>  [ 0.25 0.25 ]\n<DerivAvg>  [ 0.875 0.375 ]\n<Count> 4 " in text
    info = c.info()
    assert info == ("TanhComponent, dim=2, count=4, self-repaired-proportion=0, "
                    "value-avg=[ 0.25 0.25 ], deriv-avg=[ 0.88 0.38 ]")
    back = roundtrip(c, True)
    np.testing.assert_allclose(back.value_sum, c.value_sum)
    assert back.info() == info
    c.zero_stats()
    assert c.count == 0.0 and c.value_sum.tolist() == [0.0, 0.0]


def test_stats_are_skipped_on_about_half_the_minibatches(monkeypatch):
    monkeypatch.setattr(kaldi_random, "rand_int", lambda lo, hi: 0)  # Kaldi's "skip" draw
    c = SigmoidComponent(dim=1)
    y = np.full((3, 1), 0.5, np.float32)
    c.store_stats(None, y, None)  # the first minibatch is always stored
    c.store_stats(None, y, None)
    assert c.count == 3.0


def test_backprop_stats_and_info(monkeypatch):
    monkeypatch.setattr(kaldi_random, "rand_int", lambda lo, hi: 1)
    c = SoftmaxComponent(dim=2)
    out_deriv = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
    y = np.array([[0.5, 0.5], [0.25, 0.75]], np.float32)
    c.store_stats(None, y, None)
    c.backprop("", None, None, y, out_deriv, None, c, None)  # stats even without in_deriv
    assert c.oderiv_count == 2.0
    np.testing.assert_allclose(c.oderiv_sumsq, [9.0, 16.0])
    text = component_bytes(c, False).decode()
    assert "<OderivRms>  [ 2.12132 2.828427 ]\n<OderivCount> 2 " in text
    assert c.info().endswith(", oderiv-rms=[ 2.1 2.8 ], oderiv-count=2")
    # the value stats only (Kaldi stores no derivative stats for softmax)
    assert c.deriv_sum.shape == (0,)
    assert ", value-avg=[ 0.38 0.62 ]" in c.info()


def test_scale_and_add_follow_kaldi():
    a, b = SigmoidComponent(dim=2), SigmoidComponent(dim=2)
    b.store_stats_internal(np.array([[1.0, 2.0]], np.float32), np.array([[0.5, 0.5]], np.float32))
    a.add(2.0, b)
    assert a.count == 2.0 and a.value_sum.tolist() == [2.0, 4.0]
    a.scale(0.5)
    assert a.count == 1.0 and a.deriv_sum.tolist() == [0.5, 0.5]
    with pytest.raises(NnetError):
        a.add(1.0, ToyOther())


class ToyOther(Component):
    pass


# -- self-repair -------------------------------------------------------------------------

def _with_stats(cls, deriv_avg, count=10.0, **kw):
    c = cls(dim=len(deriv_avg), **kw)
    c.count = count
    c.value_sum = np.zeros(len(deriv_avg))
    c.deriv_sum = np.asarray(deriv_avg, np.float64) * count
    return c


def test_sigmoid_self_repair(monkeypatch):
    monkeypatch.setattr(kaldi_random, "rand_uniform", lambda: 0.25)
    c = _with_stats(SigmoidComponent, [0.01, 0.2], self_repair_scale=0.01)
    y = np.array([[0.9, 0.9], [0.1, 0.1]], np.float32)
    od = np.zeros_like(y)
    in_deriv = np.zeros_like(y)
    c.backprop("", None, None, y, od, None, c, in_deriv)
    # only unit 0 (average derivative 0.01 < 0.05) gets -scale/0.5 * (2y - 1)
    np.testing.assert_allclose(in_deriv, [[-0.02 * 0.8, 0.0], [0.02 * 0.8, 0.0]], rtol=1e-6)
    assert c.num_dims_processed == 2 and c.num_dims_self_repaired == 1
    assert ", self-repaired-proportion=0.5" in c.info()
    # not repaired when the draw says so (but still counted as processed)
    monkeypatch.setattr(kaldi_random, "rand_uniform", lambda: 0.75)
    in_deriv[...] = 0
    c.backprop("", None, None, y, od, c, c, in_deriv)
    assert not in_deriv.any() and c.num_dims_processed == 4
    # without to_update there is no repair and no counting
    c.backprop("", None, None, y, od, None, None, in_deriv)
    assert c.num_dims_processed == 4


def test_tanh_self_repair(monkeypatch):
    monkeypatch.setattr(kaldi_random, "rand_uniform", lambda: 0.25)
    c = _with_stats(TanhComponent, [0.5, 0.1], self_repair_scale=0.05)
    y = np.array([[0.5, -0.5]], np.float32)
    in_deriv = np.zeros_like(y)
    c.backprop("", None, None, y, np.zeros_like(y), None, c, in_deriv)
    np.testing.assert_allclose(in_deriv, [[0.0, 0.1 * 0.5]], rtol=1e-6)


def test_relu_self_repair_with_blocks(monkeypatch):
    monkeypatch.setattr(kaldi_random, "rand_uniform", lambda: 0.25)
    # block-dim 2: per position, the average over the 2 blocks of the deriv stats
    c = _with_stats(RectifiedLinearComponent, [0.01, 0.5, 0.03, 0.99], block_dim=2,
                    self_repair_scale=0.01)
    assert c.properties() & P.kInputContiguous
    y = np.zeros((1, 4), np.float32)
    in_deriv = np.zeros_like(y)
    c.backprop("", None, None, y, np.zeros_like(y), None, c, in_deriv)
    # position 0 average 0.02 < 0.05: +scale/0.5; position 1 average 0.745: none
    np.testing.assert_allclose(in_deriv, [[0.02, 0.0, 0.02, 0.0]], rtol=1e-6)
    assert c.num_dims_processed == 2 and c.num_dims_self_repaired == 1
    c2 = _with_stats(RectifiedLinearComponent, [0.97, 0.5], self_repair_scale=0.01)
    in_deriv = np.zeros((1, 2), np.float32)
    c2.backprop("", None, None, np.ones((1, 2), np.float32), np.zeros((1, 2), np.float32),
                None, c2, in_deriv)
    np.testing.assert_allclose(in_deriv, [[-0.02, 0.0]], rtol=1e-6)


def test_self_repair_scale_out_of_kaldi_range_is_an_error(monkeypatch):
    monkeypatch.setattr(kaldi_random, "rand_uniform", lambda: 0.25)
    c = _with_stats(SigmoidComponent, [0.01], self_repair_scale=0.5)
    y = np.zeros((1, 1), np.float32)
    with pytest.raises(NnetError):
        c.backprop("", None, None, y, y, None, c, np.zeros_like(y))


# -- math ---------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [SigmoidComponent, TanhComponent, SoftmaxComponent,
                                 LogSoftmaxComponent])
def test_backprop_is_the_derivative(cls):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    finite_difference_check(cls(dim=5), x, rng.standard_normal((6, 5)).astype(np.float32))


def test_propagate_in_place_and_extremes():
    x = np.array([[-200.0, 0.0, 200.0]], np.float32)
    for cls in (SigmoidComponent, TanhComponent, RectifiedLinearComponent, SoftmaxComponent):
        c = cls(dim=3)
        expect = np.zeros_like(x)
        c.propagate(None, x.copy(), expect)
        inplace = x.copy()
        c.propagate(None, inplace, inplace)
        np.testing.assert_array_equal(inplace, expect)
        assert np.isfinite(expect).all()
    sm = np.zeros_like(x)
    SoftmaxComponent(dim=3).propagate(None, x, sm)
    assert sm[0, 0] == np.float32(1e-20)  # Kaldi's floor
