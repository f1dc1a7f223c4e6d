"""CompositeComponent against Kaldi, and its chunked computation.

Every reference case gets the four nnet3-copy directions byte for byte,
Info(), Properties(), forward, input derivative and gradient against Kaldi.
"""

import numpy as np
import pytest

from kaldi_component_cases import UpdatableCaseTests
from pynnet3.components import Component
from pynnet3.components.base import P
from pynnet3.errors import ConfigError, KaldiFormatError
from pynnet3.io.stream import InputStream
from pynnet3.common.config_line import ConfigLine


class TestKaldiCases(UpdatableCaseTests):
    TYPES = ("CompositeComponent",)
    LINEAR = False  # composites with nonlinearities


def _composite(line):
    return Component.from_config_line(ConfigLine(line))


CONFIG = ("type=CompositeComponent num-components=4 max-rows-process=%d "
          "component1='type=BlockAffineComponent input-dim=12 output-dim=8 num-blocks=4' "
          "component2='type=TanhComponent dim=8' "
          "component3='type=RepeatedAffineComponent input-dim=8 output-dim=6 num-repeats=2' "
          "component4='type=NaturalGradientAffineComponent input-dim=6 output-dim=5'")


def test_chunking_gives_the_same_numbers():
    whole = _composite(CONFIG % 0)
    chunked = whole.copy()
    chunked.max_rows_process = 3
    rng = np.random.default_rng(5)
    x = rng.standard_normal((10, 12)).astype(np.float32)
    d = rng.standard_normal((10, 5)).astype(np.float32)
    results = []
    for comp in (whole, chunked):
        out = np.zeros((10, 5), np.float32)
        comp.propagate(None, x, out)
        grad = comp.copy()
        grad.set_as_gradient()
        grad.scale(0.0)
        in_deriv = np.zeros_like(x)
        comp.backprop("", None, x, out, d, None, grad, in_deriv)
        results.append((out, in_deriv, grad.vectorize()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # The tanh statistics were stored by backprop, for all rows.
    assert results[0][2].size == whole.num_parameters()


def test_config_properties_and_parameters():
    comp = _composite(CONFIG % 2048)
    assert comp.max_rows_process == 2048 and comp.num_components() == 4
    assert (comp.input_dim(), comp.output_dim()) == (12, 5)
    assert comp.properties() == int(P.kSimpleComponent | P.kUpdatableComponent
                                    | P.kBackpropNeedsInput | P.kBackpropAdds)
    n = comp.num_parameters()
    assert n == 8 * 3 + 8 + 3 * 4 + 3 + 6 * 5 + 5
    comp.set_underlying_learning_rate(0.5)
    assert all(c.learning_rate == 0.5 for c in comp.components if c.is_updatable())
    comp.set_as_gradient()
    assert comp.is_gradient and all(c.is_gradient for c in comp.components
                                    if c.is_updatable())


@pytest.mark.parametrize("line, message", [
    ("type=CompositeComponent component1='type=TanhComponent dim=3'", "num-components"),
    ("type=CompositeComponent num-components=2 component1='type=TanhComponent dim=3'",
     "component2"),
    ("type=CompositeComponent num-components=1 component1='type=CompositeComponent "
     "num-components=1'", "may not contain a CompositeComponent"),
    ("type=CompositeComponent num-components=2 component1='type=TanhComponent dim=3' "
     "component2='type=TanhComponent dim=4'", "input-dim 4"),
    ("type=CompositeComponent num-components=1 component1='type=NoSuchComponent dim=3'",
     "unknown component type"),
    ("type=CompositeComponent num-components=1 component1='type=TanhComponent dim=3 foo=1'",
     "foo"),
    ("type=CompositeComponent num-components=1 component1='type=TanhComponent dim=3' "
     "learning-rate=0.1", "learning-rate"),
])
def test_config_errors(line, message):
    with pytest.raises(ConfigError, match=message):
        _composite(line)


def test_read_without_learning_rate_and_errors():
    text = ("<CompositeComponent> <MaxRowsProcess> 5 <NumComponents> 1 "
            "<FixedBiasComponent> <Bias> [ 1 2 ] </FixedBiasComponent> </CompositeComponent>")
    comp = Component.read_new(InputStream(text.encode(), False, "t"))
    assert comp.learning_rate == 0.001 and comp.max_rows_process == 5
    assert comp.info() == ("CompositeComponent sub-component1 = { FixedBiasComponent, "
                           "input-dim=2, output-dim=2, bias-{mean,stddev}=1.5,0.5 }")
    with pytest.raises(KaldiFormatError, match="NumComponents"):
        Component.read_new(InputStream(text.replace("> 1 <Fixed", "> -1 <Fixed").encode(),
                                       False, "t"))
    with pytest.raises(KaldiFormatError, match="at least one"):
        Component.read_new(InputStream(
            b"<CompositeComponent> <MaxRowsProcess> 5 <NumComponents> 0 </CompositeComponent>",
            False, "t"))
