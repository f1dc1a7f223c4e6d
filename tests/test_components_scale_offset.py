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

from kaldi_component_cases import (cases_of_types, check_copies, check_forward_backward,
                                   check_gradient, check_info, check_linearity,
                                   check_properties, params_for)
from pynnet3.components import Component
from pynnet3.components.base import P
from pynnet3.components.scale_offset import (ConstantFunctionComponent,
                                             PerElementOffsetComponent,
                                             ScaleAndOffsetComponent)
from pynnet3.errors import KaldiFormatError
from pynnet3.io.stream import InputStream, OutputStream

TYPES = ("PerElementScaleComponent", "NaturalGradientPerElementScaleComponent",
         "PerElementOffsetComponent", "FixedScaleComponent", "FixedBiasComponent",
         "ScaleAndOffsetComponent", "ConstantFunctionComponent")
CASES = cases_of_types(TYPES)
CASE_PARAMS = params_for(CASES)


def test_every_type_has_shipped_cases():
    shipped = {Component.read(str(p / "component.txt")).type_name
               for ident, p in CASES if ident.startswith("data:")}
    assert shipped >= set(TYPES)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_copy_directions(case):
    check_copies(case)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_info(case):
    check_info(case)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_properties(case):
    check_properties(case)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_forward_backward(case):
    check_forward_backward(case)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_gradient(case):
    if not check_gradient(case):
        pytest.skip("Kaldi's gradient here sums over row padding (uninitialized memory); "
                    "only its structure was checked")


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_derivatives_self_consistent(case):
    check_linearity(case)


def _read_text(text):
    return Component.read_new(InputStream(text.encode(), False, "test"))


def _text(comp):
    out = OutputStream(False)
    comp.write_to(out)
    return out.getvalue().decode()


def test_per_element_offset_old_form_without_dim():
    comp = _read_text("<PerElementOffsetComponent> <LearningRate> 0.1 <Offsets> [ 1 2 3 ]\n"
                      "<IsGradient> T </PerElementOffsetComponent>")
    assert comp.dim == 3 and comp.use_natural_gradient and comp.is_gradient
    assert _text(comp) == ("<PerElementOffsetComponent> <IsGradient> T <LearningRate> 0.1 "
                           "<Offsets>  [ 1 2 3 ]\n<Dim> 3 <UseNaturalGradient> T "
                           "</PerElementOffsetComponent> ")


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
    comp = _read_text("<ConstantFunctionComponent> <LearningRate> 0.1 <InputDim> 3 "
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
        _read_text("<ScaleAndOffsetComponent> <LearningRate> 0.1 <Dim> 5 <Scales> [ 1 1 ]\n"
                   "<Offsets> [ 0 0 ]\n<UseNaturalGradient> T <Rank> 20 "
                   "</ScaleAndOffsetComponent>")
    with pytest.raises(KaldiFormatError, match="InputDim"):
        _read_text("<ConstantFunctionComponent> <LearningRate> 0.1 <Output> [ 1 ] "
                   "</ConstantFunctionComponent>")
    with pytest.raises(KaldiFormatError):
        _read_text("<FixedScaleComponent> <Scales> [ 1 x ] </FixedScaleComponent>")
