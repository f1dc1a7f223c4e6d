"""Per-element scale/offset components against Kaldi: PerElementScaleComponent,
NaturalGradientPerElementScaleComponent, PerElementOffsetComponent,
FixedScaleComponent, FixedBiasComponent, ScaleAndOffsetComponent,
ConstantFunctionComponent.

Every reference case gets the four nnet3-copy directions byte for byte,
Info(), Properties(), forward, input derivative and gradient against Kaldi,
and a finite-difference self-check of the derivatives.
"""

import numpy as np
import pytest

from kaldi_component_cases import UpdatableCaseTests, component_text, read_text_component
from pynnet3.components.base import P
from pynnet3.components.scale_offset import (ConstantFunctionComponent,
                                             PerElementOffsetComponent,
                                             ScaleAndOffsetComponent)
from pynnet3.errors import KaldiFormatError

TYPES = ("PerElementScaleComponent", "NaturalGradientPerElementScaleComponent",
         "PerElementOffsetComponent", "FixedScaleComponent", "FixedBiasComponent",
         "ScaleAndOffsetComponent", "ConstantFunctionComponent")


class TestKaldiCases(UpdatableCaseTests):
    TYPES = TYPES


def test_per_element_offset_old_form_without_dim():
    comp = read_text_component("<PerElementOffsetComponent> <LearningRate> 0.1 "
                               "<Offsets> [ 1 2 3 ]\n<IsGradient> T </PerElementOffsetComponent>")
    assert comp.dim == 3 and comp.use_natural_gradient and comp.is_gradient
    assert component_text(comp) == ("<PerElementOffsetComponent> <IsGradient> T "
                                    "<LearningRate> 0.1 <Offsets>  [ 1 2 3 ]\n<Dim> 3 "
                                    "<UseNaturalGradient> T </PerElementOffsetComponent> ")


def test_per_element_offset_blocks():
    comp = PerElementOffsetComponent([1, 2])
    comp.dim = 6
    assert comp.properties() & P.kOutputContiguous
    x = np.zeros((2, 6), np.float32)
    out = np.empty_like(x)
    comp.propagate(None, x, out)
    np.testing.assert_array_equal(out, [[1, 2, 1, 2, 1, 2]] * 2)
    grad = comp.copy()
    grad.set_as_gradient()
    grad.scale(0.0)
    comp.backprop("", None, None, None, np.ones((2, 6), np.float32), None, grad, None)
    np.testing.assert_array_equal(grad.offsets, [6, 6])


def test_scale_and_offset_keeps_scales_away_from_zero():
    comp = ScaleAndOffsetComponent()
    comp.dim = 2
    comp.scales = np.array([0.0, -1e-6], np.float32)
    comp.offsets = np.zeros(2, np.float32)
    out = np.empty((1, 2), np.float32)
    comp.propagate(None, np.ones((1, 2), np.float32), out)
    np.testing.assert_allclose(out, [[1e-4, -1e-4]])


def test_constant_function_not_updatable_has_no_parameters():
    comp = read_text_component("<ConstantFunctionComponent> <LearningRate> 0.1 <InputDim> 3 "
                               "<Output> [ 1 2 ] <IsUpdatable> F <UseNaturalGradient> T "
                               "</ConstantFunctionComponent>")
    assert not comp.properties() & P.kUpdatableComponent
    assert comp.num_parameters() == 0 and comp.vectorize().size == 0
    comp.scale(0.0)
    np.testing.assert_array_equal(comp.output, [1, 2])
    out = np.zeros((2, 2), np.float32)
    comp.propagate(None, np.zeros((2, 3), np.float32), out)
    np.testing.assert_array_equal(out, [[1, 2], [1, 2]])
    assert isinstance(comp, ConstantFunctionComponent)


def test_bad_files_raise_format_errors():
    with pytest.raises(KaldiFormatError, match="Dim"):
        read_text_component("<ScaleAndOffsetComponent> <LearningRate> 0.1 <Dim> 5 "
                            "<Scales> [ 1 1 ]\n<Offsets> [ 0 0 ]\n<UseNaturalGradient> T "
                            "<Rank> 20 </ScaleAndOffsetComponent>")
    with pytest.raises(KaldiFormatError, match="InputDim"):
        read_text_component("<ConstantFunctionComponent> <LearningRate> 0.1 <Output> [ 1 ] "
                            "</ConstantFunctionComponent>")
    with pytest.raises(KaldiFormatError):
        read_text_component("<FixedScaleComponent> <Scales> [ 1 x ] </FixedScaleComponent>")
