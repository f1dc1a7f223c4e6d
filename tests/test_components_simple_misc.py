"""Pnorm, SumGroup, SumBlock, ElementwiseProduct, Permute, NoOp,
ClipGradient, Dropout and BackpropTruncation components against Kaldi
(kaldi-ref component cases) and against Kaldi's documented behaviour."""

import numpy as np
import pytest

from conftest import TEST_DATA
from kaldi_component_cases import (KaldiCaseTests, component_bytes, component_from_config,
                                   finite_difference_check, read_component, read_text_component,
                                   roundtrip)
from pynnet3.components import Component, kaldi_random
from pynnet3.components.backprop_truncation import (
    BackpropTruncationComponent, BackpropTruncationComponentPrecomputedIndexes)
from pynnet3.components.base import P, PrecomputedIndexes
from pynnet3.components.parameter_free import ClipGradientComponent, DropoutComponent
from pynnet3.errors import ConfigError, KaldiFormatError, NnetError
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.common.index import Index

TYPES = ("PnormComponent", "SumGroupComponent", "NoOpComponent", "ClipGradientComponent",
         "ElementwiseProductComponent", "DropoutComponent", "SumBlockComponent",
         "PermuteComponent")
FRAGMENTS = TEST_DATA / "components" / "model_fragments"


class TestKaldiCases(KaldiCaseTests):
    TYPES = TYPES


RNG = np.random.default_rng(7)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("line", [
    "type=PnormComponent input-dim=10",
    "type=PnormComponent input-dim=10 output-dim=3",
    "type=SumGroupComponent sizes=3,0",
    "type=SumGroupComponent input-dim=10 output-dim=4",
    "type=SumBlockComponent input-dim=10",
    "type=SumBlockComponent input-dim=10 output-dim=4",
    "type=ElementwiseProductComponent input-dim=10 output-dim=10",
    "type=PermuteComponent column-map=0,0,1",
    "type=PermuteComponent column-map=0,3",
    "type=PermuteComponent column-map=0,x",
    "type=NoOpComponent backprop-scale=2",
    "type=ClipGradientComponent dim=4 clipping-threshold=-1",
    "type=DropoutComponent dim=4",
    "type=DropoutComponent dim=4 dropout-proportion=1.5",
    "type=BackpropTruncationComponent dim=4 zeroing-interval=0",
    "type=BackpropTruncationComponent dim=4 scale=0",
    "type=NoOpComponent dim=4 unknown=3",
])
def test_bad_config_raises_config_error(line):
    with pytest.raises(ConfigError):
        component_from_config(line)


# -- Pnorm, SumGroup, SumBlock, ElementwiseProduct, Permute ------------------------------------

def test_pnorm():
    c = component_from_config("type=PnormComponent input-dim=6 output-dim=2")
    x = np.array([[3, 4, 0, 0, 0, 0]], np.float32)
    out = np.zeros((1, 2), np.float32)
    c.propagate(None, x, out)
    assert out.tolist() == [[5.0, 0.0]]
    in_deriv = np.full((1, 6), 9, np.float32)
    c.backprop("", None, x, out, np.ones((1, 2), np.float32), None, None, in_deriv)
    np.testing.assert_allclose(in_deriv, [[0.6, 0.8, 0, 0, 0, 0]])
    finite_difference_check(c, randn(4, 6), randn(4, 2))


def test_sum_group_unequal_sizes():
    c = component_from_config("type=SumGroupComponent sizes=1,3,2")
    assert (c.input_dim(), c.output_dim()) == (6, 3)
    assert component_bytes(c, False) == (b"<SumGroupComponent> <Sizes> [ 1 3 2 ]\n"
                                         b"</SumGroupComponent> ")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    out = np.zeros((2, 3), np.float32)
    c.propagate(None, x, out)
    assert out.tolist() == [[0, 6, 9], [6, 24, 21]]
    in_deriv = np.zeros((2, 6), np.float32)
    c.backprop("", None, x, out, np.array([[1, 2, 3], [4, 5, 6]], np.float32), None, None,
               in_deriv)
    assert in_deriv.tolist() == [[1, 2, 2, 2, 3, 3], [4, 5, 5, 5, 6, 6]]
    equal = component_from_config("type=SumGroupComponent input-dim=6 output-dim=2")
    assert equal.sizes == [3, 3]
    # Kaldi accepts a repeated opening tag where the closing one belongs
    odd = read_text_component(b"<SumGroupComponent> <Sizes> [ 2 2 ] <SumGroupComponent> ")
    assert odd.sizes == [2, 2]


def test_sum_block_adds():
    c = component_from_config("type=SumBlockComponent input-dim=6 output-dim=2 scale=0.5")
    assert c.properties() == int(P.kSimpleComponent | P.kPropagateAdds | P.kBackpropAdds)
    x = np.arange(6, dtype=np.float32)[None, :]
    out = np.ones((1, 2), np.float32)
    c.propagate(None, x, out)
    assert out.tolist() == [[1 + 0.5 * (0 + 2 + 4), 1 + 0.5 * (1 + 3 + 5)]]
    in_deriv = np.ones((1, 6), np.float32)
    c.backprop("", None, x, out, np.array([[2, 4]], np.float32), None, None, in_deriv)
    assert in_deriv.tolist() == [[2, 3, 2, 3, 2, 3]]


def test_elementwise_product():
    c = component_from_config("type=ElementwiseProductComponent input-dim=6 output-dim=2")
    finite_difference_check(c, randn(3, 6), randn(3, 2))
    x = np.array([[1, 2, 3, 4, 5, 6]], np.float32)
    out = np.zeros((1, 2), np.float32)
    c.propagate(None, x, out)
    assert out.tolist() == [[15, 48]]


def test_permute():
    c = component_from_config("type=PermuteComponent column-map=2,0,1")
    assert c.info() == "PermuteComponent, dim=3 , column-map=[ 2 0 1 ]"
    x = np.array([[10, 20, 30]], np.float32)
    out = np.zeros_like(x)
    c.propagate(None, x, out)
    assert out.tolist() == [[30, 10, 20]]
    in_deriv = np.zeros_like(x)
    c.backprop("", None, x, out, out, None, None, in_deriv)
    assert in_deriv.tolist() == x.tolist()
    assert component_bytes(c, False) == (b"<PermuteComponent> <ColumnMap> [ 2 0 1 ]\n"
                                         b"</PermuteComponent> ")


def test_permute_reads_old_float_map():
    out = OutputStream(True)
    out.write_token("<PermuteComponent>")
    out.write_token("<ColumnMap>")
    out.write_vector(np.array([1.0, 0.0, 5.0], np.float32))  # last entry forced to dim-1
    out.write_token("</PermuteComponent>")
    c = Component.read_new(InputStream(out.getvalue(), True, "old.bin"))
    assert c.column_map == [1, 0, 2]
    with pytest.raises(KaldiFormatError):
        read_text_component(b"<PermuteComponent> <ColumnMap> [ 0 0 ] </PermuteComponent> ")


# -- NoOp ----------------------------------------------------------------------------------------

def test_noop_backprop_scale_and_old_format():
    c = component_from_config("type=NoOpComponent dim=2 backprop-scale=0.5")
    assert c.info() == "NoOpComponent, dim=2, backprop-scale=0.5"
    od = np.array([[2, 4]], np.float32)
    in_deriv = np.zeros_like(od)
    c.backprop("", None, None, None, od, None, None, in_deriv)
    assert in_deriv.tolist() == [[1, 2]]
    old = read_text_component(b"<NoOpComponent> <Dim> 3 <ValueAvg> [ ] <DerivAvg> [ ] <Count> 0 "
                              b"<OderivRms> [ ] <OderivCount> 0 <NumDimsSelfRepaired> 0 "
                              b"<NumDimsProcessed> 0 </NoOpComponent> ")
    assert (old.dim, old.backprop_scale) == (3, 1.0)
    assert component_bytes(old, False) == (b"<NoOpComponent> <Dim> 3 <BackpropScale> 1 "
                                           b"</NoOpComponent> ")


# -- ClipGradient ----------------------------------------------------------------------------------

def test_clip_gradient_norm_based_counts():
    c = component_from_config("type=ClipGradientComponent dim=2 clipping-threshold=5 "
                              "norm-based-clipping=true self-repair-scale=0")
    od = np.array([[0.3, 0.4], [6, 8], [0, 1]], np.float32)
    in_deriv = np.zeros_like(od)
    c.backprop("", None, od, od, od, None, c, in_deriv)
    np.testing.assert_allclose(in_deriv, [[0.3, 0.4], [3, 4], [0, 1]], rtol=1e-6)
    assert (c.num_clipped, c.count, c.num_backpropped) == (1, 3, 1)
    # like Kaldi's ApplyFloor count, a row exactly at the threshold counts as clipped
    c.backprop("", None, od, od, np.array([[3, 4]], np.float32), None, c, in_deriv[:1])
    assert (c.num_clipped, c.count) == (2, 4)
    c.num_clipped, c.count, c.num_backpropped = 1, 3, 1
    assert c.info() == ("ClipGradientComponent, dim=2, norm-based-clipping=true, "
                        "clipping-threshold=5, clipped-proportion=0.333333")
    back = roundtrip(c, True)
    assert (back.num_clipped, back.count, back.num_backpropped) == (1, 3, 1)
    c.scale(0.5)
    assert (c.count, c.num_clipped) == (1, 0)  # int32 counters, truncated
    c.zero_stats()
    assert (c.count, c.num_clipped, c.num_backpropped) == (0, 0, 0)


def test_clip_gradient_elementwise_and_zero_threshold():
    c = component_from_config("type=ClipGradientComponent dim=3 clipping-threshold=1")
    od = np.array([[-3, 0.5, 2]], np.float32)
    in_deriv = np.zeros_like(od)
    c.backprop("", None, od, od, od, None, None, in_deriv)
    assert in_deriv.tolist() == [[-1, 0.5, 1]]
    z = component_from_config("type=ClipGradientComponent dim=3 clipping-threshold=0")
    z.backprop("", None, od, od, od, None, None, in_deriv)
    assert not in_deriv.any()


def test_clip_gradient_self_repair(monkeypatch):
    monkeypatch.setattr(kaldi_random, "rand_uniform", lambda: 0.25)
    c = ClipGradientComponent(dim=2, clipping_threshold=100.0, norm_based_clipping=True,
                              self_repair_clipped_proportion_threshold=0.1,
                              self_repair_target=0.5, self_repair_scale=0.1,
                              num_clipped=5, count=10)
    x = np.array([[2.0, -0.25]], np.float32)
    od = np.array([[0.0, 1.0]], np.float32)
    in_deriv = np.zeros_like(od)
    c.backprop("node", None, x, x, od, None, c, in_deriv)
    # repair term -(|x| - 0.5)+ * sign(x) = [-1.5, 0], scaled to norm
    # magnitude / 0.5 = 0.1 * (5/11) * 1 / 0.5 (this backprop already counted its
    # row: 5 clipped of 11); then the row is rescaled to its original norm 1
    raw = np.array([0.0, 1.0]) - 2 * 0.1 * (5 / 11) * np.array([1.5, 0.0]) / 1.5
    np.testing.assert_allclose(in_deriv[0], raw / np.linalg.norm(raw), rtol=1e-5)
    assert c.num_self_repaired == 1 and c.debug_info == "node"


def test_clip_gradient_reads_old_layout():
    old = read_text_component(b"<ClipGradientComponent> <Dim> 2 <ClippingThreshold> 3 "
                              b"<NormBasedClipping> F <NumElementsClipped> 4 "
                              b"<NumElementsProcessed> 8 </ClipGradientComponent> ")
    assert (old.self_repair_clipped_proportion_threshold, old.self_repair_scale) == (1.0, 0.0)
    assert old.info().endswith("clipped-proportion=0.5")
    assert component_bytes(old, False).endswith(b"<NumElementsClipped> 4 <NumElementsProcessed> "
                                                b"8 <NumSelfRepaired> 0 <NumBackpropped> 0 "
                                                b"</ClipGradientComponent> ")


# -- Dropout --------------------------------------------------------------------------------------

def test_dropout_modes():
    c = component_from_config("type=DropoutComponent dim=200 dropout-proportion=0.25")
    assert not c.test_mode and c.properties() & P.kRandomComponent
    kaldi_random.seed(3)
    x = np.ones((50, 200), np.float32)
    out = np.zeros_like(x)
    c.propagate(None, x, out)
    assert set(np.unique(out)) == {0.0, 1.0}
    assert abs(out.mean() - 0.75) < 0.02
    in_deriv = np.zeros_like(x)
    c.backprop("", None, x, out, np.full_like(x, 2), None, None, in_deriv)
    np.testing.assert_array_equal(in_deriv, 2 * out)
    per_frame = component_from_config("type=DropoutComponent dim=20 dropout-proportion=0.5 "
                                      "dropout-per-frame=true")
    out = np.zeros((40, 20), np.float32)
    per_frame.propagate(None, np.ones((40, 20), np.float32), out)
    assert all(len(set(row)) == 1 for row in out.tolist()) and 0 < out.mean() < 1
    c.set_test_mode(True)
    out = np.zeros((1, 200), np.float32)
    c.propagate(None, x[:1], out)
    np.testing.assert_allclose(out, 0.75)
    c.set_dropout_proportion(0.5)
    assert c.info() == "DropoutComponent, dim=200, dropout-proportion=0.5, dropout-per-frame=false"
    # where the input is zero Kaldi passes the derivative through
    in_deriv = np.zeros((1, 2), np.float32)
    DropoutComponent(2, 0.5).backprop("", None, np.array([[0, 2]], np.float32),
                                      np.array([[0, 1]], np.float32),
                                      np.array([[3, 3]], np.float32), None, None, in_deriv)
    assert in_deriv.tolist() == [[3, 1.5]]


def test_dropout_reads_old_layout():
    old = read_text_component(b"<DropoutComponent> <Dim> 4 <DropoutProportion> 0.5 "
                              b"</DropoutComponent> ")
    assert (old.dropout_per_frame, old.test_mode) == (False, False)
    assert component_bytes(old, False) == (b"<DropoutComponent> <Dim> 4 <DropoutProportion> 0.5 "
                                           b"<DropoutPerFrame> F <TestMode> F "
                                           b"</DropoutComponent> ")


# -- BackpropTruncation ---------------------------------------------------------------------------

def test_backprop_truncation_fragment_from_kaldi_model():
    c = read_component(FRAGMENTS / "bt_case21.src.bin")
    assert component_bytes(c, False) == (FRAGMENTS / "bt_case21.bin-to-txt").read_bytes()
    assert c.info() == (FRAGMENTS / "bt_case21.info").read_text().rstrip("\n")
    t = read_component(FRAGMENTS / "bt_case21.src.txt")
    assert component_bytes(t, False) == (FRAGMENTS / "bt_case21.bin-to-txt").read_bytes()
    assert c.properties() == int(P.kPropagateInPlace | P.kBackpropInPlace)


def test_backprop_truncation_config_defaults_and_old_layout():
    c = component_from_config("type=BackpropTruncationComponent dim=3")
    assert (c.scale_value, c.clipping_threshold, c.zeroing_threshold, c.zeroing_interval,
            c.recurrence_interval) == (1.0, 30.0, 15.0, 20, 1)
    old = read_text_component(b"<BackpropTruncationComponent> <Dim> 3 <ClippingThreshold> 30 "
                              b"<ZeroingThreshold> 15 <ZeroingInterval> 20 <RecurrenceInterval> 1 "
                              b"<NumElementsClipped> 0 <NumElementsZeroed> 0 "
                              b"<NumElementsProcessed> 0 <NumZeroingBoundaries> 0 "
                              b"</BackpropTruncationComponent> ")
    assert component_bytes(old, True) == component_bytes(c, True)


def test_backprop_truncation_zeroing_and_clipping():
    c = BackpropTruncationComponent(dim=2, scale=0.5, clipping_threshold=2.0,
                                    zeroing_threshold=1.0, zeroing_interval=4,
                                    recurrence_interval=1)
    outputs = [Index(0, t, 0) for t in range(-1, 5)] + [Index(1, 5, 0)]
    pre = c.precompute_indexes(None, outputs, outputs, True)
    # t crosses a multiple of 4 (shifted by n): t=0 and t=4 for n=0, t=5 for n=1
    assert pre.zeroing.tolist() == [0, -1, 0, 0, 0, -1, -1]
    assert pre.zeroing_sum == 3.0
    x = np.zeros((7, 2), np.float32)
    out = np.zeros_like(x)
    c.propagate(None, np.ones((7, 2), np.float32), out)
    assert (out == 0.5).all()
    od = np.array([[8, 0], [8, 0], [1, 0], [8, 0], [1, 0], [1, 0], [4, 0]], np.float32)
    in_deriv = np.zeros_like(od)
    grad = c.copy()
    c.backprop("", pre, x, out, od, None, grad, in_deriv)
    # scaled by 0.5, rows clipped to norm 2; rows at boundaries with norm > 1 zeroed
    assert in_deriv[:, 0].tolist() == [2, 0, 0.5, 2, 0.5, 0.5, 0]
    # (the last row, exactly at the clipping norm, counts as clipped, as in Kaldi)
    assert (grad.num_clipped, grad.count, grad.num_zeroed, grad.count_zeroing_boundaries) == \
        (4, 7, 2, 3)
    assert ", clipped-proportion=0.571429," in grad.info()
    assert grad.info().endswith("zeroed-proportion=0.666667, count-zeroing-boundaries=3")
    with pytest.raises(NnetError):
        c.backprop("", None, x, out, od, None, None, in_deriv)


@pytest.mark.parametrize("binary", [True, False])
def test_backprop_truncation_precomputed_indexes_serialize(binary):
    pre = BackpropTruncationComponentPrecomputedIndexes(np.array([0, -1, 0], np.float32), 1.0)
    out = OutputStream(binary)
    pre.write_to(out)
    data = out.getvalue()
    if not binary:
        assert data == (b"<BackpropTruncationComponentPrecomputedIndexes> <Zeroing>  [ 0 -1 0 ]\n"
                        b"<ZeroingSum> 1 </BackpropTruncationComponentPrecomputedIndexes> ")
    back = PrecomputedIndexes.read_new(InputStream(data, binary, "pre"))
    assert back.zeroing.tolist() == [0, -1, 0] and back.zeroing_sum == 1.0
