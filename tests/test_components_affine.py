"""Affine-family components against Kaldi: AffineComponent, LinearComponent,
NaturalGradientAffineComponent, FixedAffineComponent, RepeatedAffineComponent,
BlockAffineComponent, NaturalGradientRepeatedAffineComponent.

Every reference case (kaldi-ref/components and tests/data/components) gets:
the four nnet3-copy directions byte for byte, Info(), Properties(), forward,
input derivative and gradient against Kaldi's numbers, and a finite-difference
self-check of the derivatives.
"""

import numpy as np
import pytest

from kaldi_component_cases import UpdatableCaseTests, component_text, read_text_component
from pynnet3.components.affine import (AffineComponent, FixedAffineComponent,
                                       NaturalGradientAffineComponent)
from pynnet3.components.repeated_affine import BlockAffineComponent, RepeatedAffineComponent
from pynnet3.errors import KaldiFormatError

TYPES = ("AffineComponent", "LinearComponent", "NaturalGradientAffineComponent",
         "FixedAffineComponent", "RepeatedAffineComponent", "BlockAffineComponent",
         "NaturalGradientRepeatedAffineComponent")


class TestKaldiCases(UpdatableCaseTests):
    TYPES = TYPES


# -- older file forms Kaldi still reads -----------------------------------------------

def test_affine_reads_legacy_is_gradient_after_params():
    comp = read_text_component("<AffineComponent> <LearningRate> 0.5 <LinearParams> [\n"
                               " 1 2\n 3 4 ]\n<BiasParams> [ 5 6 ]\n<IsGradient> T "
                               "</AffineComponent>")
    assert comp.is_gradient and comp.learning_rate == 0.5
    assert component_text(comp) == ("<AffineComponent> <IsGradient> T <LearningRate> 0.5 "
                                    "<LinearParams>  [\n  1 2 \n  3 4 ]\n<BiasParams>  [ 5 6 ]\n"
                                    "</AffineComponent> ")


def test_affine_orthonormal_constraint_round_trip():
    comp = read_text_component("<AffineComponent> <MaxChange> 0.75 <LearningRate> 0.001 "
                               "<LinearParams> [\n 1 0 ]\n<BiasParams> [ 2 ]\n"
                               "<OrthonormalConstraint> -1 </AffineComponent>")
    assert comp.orthonormal_constraint == -1.0 and comp.max_change == 0.75
    assert "orthonormal-constraint=-1" in comp.info()
    assert "<OrthonormalConstraint> -1 </AffineComponent>" in component_text(comp)


def test_natural_gradient_affine_reads_old_tokens():
    text = ("<NaturalGradientAffineComponent> <LearningRate> 0.01 <LinearParams> [\n 1 2 ]\n"
            "<BiasParams> [ 3 ]\n<RankIn> 1 <RankOut> 1 <UpdatePeriod> 4 "
            "<NumSamplesHistory> 2000 <Alpha> 4 <MaxChangePerSample> 0.075 <IsGradient> F "
            "<UpdateCount> 0 <ActiveScalingCount> 0 <MaxChangeScaleStats> 0 "
            "<NaturalGradientAffineComponent>")
    comp = read_text_component(text)
    assert isinstance(comp, NaturalGradientAffineComponent)
    assert (comp.rank_in, comp.rank_out, comp.update_period) == (1, 1, 4)
    assert component_text(comp).endswith("<Alpha> 4 </NaturalGradientAffineComponent> ")


def test_natural_gradient_per_element_scale_reads_max_change_per_minibatch():
    comp = read_text_component("<NaturalGradientPerElementScaleComponent> <LearningRate> 0.1 "
                               "<Params> [ 1 2 ] <IsGradient> F <Rank> 8 <UpdatePeriod> 10 "
                               "<NumSamplesHistory> 2000 <Alpha> 4 <MaxChangePerMinibatch> 0.1 "
                               "</NaturalGradientPerElementScaleComponent>")
    assert comp.rank == 8 and "<MaxChangePerMinibatch>" not in component_text(comp)


def test_bad_files_raise_format_errors():
    with pytest.raises(KaldiFormatError, match="BiasParams"):
        read_text_component("<AffineComponent> <LearningRate> 0.1 <LinearParams> [\n 1 2 ]\n"
                            "<BiasParams> [ 1 2 ]\n</AffineComponent>")
    with pytest.raises(KaldiFormatError, match="LinearParams"):
        read_text_component("<AffineComponent> <LearningRate> 0.1 <Linear> [ ] "
                            "</AffineComponent>")
    with pytest.raises(KaldiFormatError, match="NumBlocks"):
        read_text_component("<BlockAffineComponent> <LearningRate> 0.1 <NumBlocks> 2 "
                            "<LinearParams> [\n 1 2 ]\n<BiasParams> [ 1 ]\n"
                            "</BlockAffineComponent>")
    with pytest.raises(KaldiFormatError):
        read_text_component("<RepeatedAffineComponent> <LearningRate> 0.1 <NumRepeats> 2 "
                            "<LinearParams> [\n 1 2 ]\n<BiasParams> [ 1")


# -- parameters interface --------------------------------------------------------------

def test_vectorize_order_scale_add_dot():
    comp = AffineComponent(np.arange(6, dtype=np.float32).reshape(2, 3), [10, 20])
    v = comp.vectorize()
    np.testing.assert_array_equal(v, [0, 1, 2, 3, 4, 5, 10, 20])
    assert comp.num_parameters() == 8
    other = comp.copy()
    other.scale(2.0)
    comp.add(0.5, other)
    np.testing.assert_array_equal(comp.vectorize(), 2 * v)
    assert comp.dot_product(other) == pytest.approx(float((2 * v) @ (2 * v)))
    comp.unvectorize(np.zeros(8, np.float32))
    assert comp.dot_product(comp) == 0.0
    comp.linear_params[0, 0] = np.nan
    comp.scale(0.0)
    assert not np.isnan(comp.vectorize()).any()


def test_update_steps_with_learning_rate_when_not_gradient():
    """A natural-gradient component not set as gradient takes the plain
    learning-rate step (no preconditioning)."""
    comp = NaturalGradientAffineComponent(np.zeros((2, 3), np.float32), np.zeros(2, np.float32))
    comp.learning_rate = 0.5
    x = np.ones((4, 3), np.float32)
    d = np.ones((4, 2), np.float32)
    comp.backprop("", None, x, None, d, None, comp, None)
    np.testing.assert_allclose(comp.linear_params, np.full((2, 3), 2.0))
    np.testing.assert_allclose(comp.bias_params, [2.0, 2.0])


def test_block_affine_from_repeated_matches_it():
    rac = RepeatedAffineComponent()
    rac.num_repeats = 3
    rac.linear_params = np.arange(8, dtype=np.float32).reshape(2, 4)
    rac.bias_params = np.array([1, -1], np.float32)
    block = BlockAffineComponent.from_repeated_affine(rac)
    assert (block.input_dim(), block.output_dim()) == (rac.input_dim(), rac.output_dim())
    x = np.random.default_rng(1).standard_normal((5, 12)).astype(np.float32)
    a = np.zeros((5, 6), np.float32)
    b = np.zeros((5, 6), np.float32)
    rac.propagate(None, x, a)
    block.propagate(None, x, b)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_fixed_affine_from_affine():
    aff = AffineComponent(np.ones((2, 3), np.float32), [1, 2])
    fixed = FixedAffineComponent.from_affine(aff)
    assert fixed.info().startswith("FixedAffineComponent, input-dim=3, output-dim=2")
    assert fixed.properties() == 0x21


def test_propagate_into_views():
    """Outputs may be column ranges of a bigger matrix (sub-matrix views)."""
    comp = AffineComponent(np.eye(2, dtype=np.float32), [1, 1])
    big = np.zeros((3, 5), np.float32)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    comp.propagate(None, x, big[:, 1:3])
    np.testing.assert_array_equal(big[:, 1:3], x + 1)
    assert not big[:, [0, 3, 4]].any()
