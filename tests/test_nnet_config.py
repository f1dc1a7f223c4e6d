"""nnet3-init semantics (Kaldi's Nnet::ReadConfig): building networks from
config lines, extending and replacing, and refusing bad configs clearly."""

import os
import re

import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.errors import ConfigError, DescriptorError, NnetError, PynnetError
from pynnet3.nnet.nnet import Nnet


def skeleton(data):
    """Model text with parameter values masked: each [...] becomes its shape
    (numbers per row), and batch-norm's <Count> (the reference networks were
    given statistics after nnet3-init) becomes '#'."""
    text = data.decode() if isinstance(data, bytes) else data

    def shape(m):
        rows = [r for r in m.group(1).split("\n") if r.strip()]
        return "[%s]" % ",".join(str(len(r.split())) for r in rows)

    text = re.sub(r"\[([^\]]*)\]", shape, text)
    return re.sub(r"(<BatchNormComponent>.*?<Count> )\S+", r"\1#", text, flags=re.S)


def _key(path):
    m = re.search(r"(\d+)$", path.name)
    return int(m.group(1)) if m else -1


def random_cases():
    dirs = [d for d in sorted(KALDI_REF.glob("random/case*"), key=_key)
            if (d / "model.txt").is_file()]
    if not dirs:
        dirs = [d for d in sorted((TEST_DATA / "models" / "random").glob("case*"), key=_key)
                if (d / "model.txt").is_file()]
    return [pytest.param(d, id=d.name) for d in dirs]


def model_cases():
    dirs = sorted(d for d in KALDI_REF.glob("models/*") if (d / "final.config").is_file())
    if not dirs:
        dirs = sorted(d for d in (TEST_DATA / "models").glob("*")
                      if (d / "final.config").is_file())
    return [pytest.param(d, id=d.name) for d in dirs]


@pytest.mark.parametrize("d", random_cases())
def test_random_config_sequence(d):
    """config.0, config.1, ... applied in order give Kaldi's network."""
    nnet = Nnet()
    j = 0
    while (d / ("config.%d" % j)).is_file():
        nnet.read_config((d / ("config.%d" % j)).read_text(), str(d / ("config.%d" % j)))
        j += 1
    assert j > 0
    assert skeleton(nnet.to_bytes(binary=False)) == skeleton((d / "model.txt").read_bytes())


@pytest.mark.parametrize("d", model_cases())
def test_model_final_config(d, monkeypatch):
    monkeypatch.chdir(d)          # matrix= paths in final.config are relative
    nnet = Nnet.from_config("final.config")
    assert skeleton(nnet.to_bytes(binary=False)) == skeleton((d / "model.txt").read_bytes())


BASE = """# a comment
input-node name=input dim=4

component name=a type=AffineComponent input-dim=4 output-dim=3   # trailing comment
component-node name=a component=a input=input
component name=r type=RectifiedLinearComponent dim=3
component-node name=r component=r input=a
output-node name=output input=r
"""


def test_basic_layout_and_defaults():
    nnet = Nnet.from_config(BASE)
    assert nnet.node_names == ["input", "a_input", "a", "r_input", "r", "output"]
    assert nnet.component_names == ["a", "r"]
    assert nnet.get_config_lines() == [
        "input-node name=input dim=4",
        "component-node name=a component=a input=input",
        "component-node name=r component=r input=a",
        "output-node name=output input=r objective=linear"]


def test_forward_references_and_dim_range():
    nnet = Nnet.from_config("""
output-node name=output input=Append(d, Offset(a, -1)) objective=quadratic
dim-range-node name=d input-node=a dim-offset=1 dim=2
component-node name=a component=a input=input
component name=a type=AffineComponent input-dim=4 output-dim=3
input-node name=input dim=4
""")
    assert nnet.node_names == ["output", "d", "a_input", "a", "input"]
    assert nnet.output_dim("output") == 5
    assert nnet.get_config_lines()[0] == ("output-node name=output input=Append(d, Offset(a, -1)) "
                                          "objective=quadratic")


def test_adding_to_existing_network_replaces_and_moves_nodes():
    nnet = Nnet.from_config(BASE)
    old_a = nnet.get_component(0)
    nnet.read_config("""
component name=r type=SigmoidComponent dim=3
component name=b type=AffineComponent input-dim=3 output-dim=3
component-node name=b component=b input=r
output-node name=output input=b
component-node name=a component=a input=Offset(input, 1)
""")
    # components: replaced in place, new ones appended
    assert nnet.component_names == ["a", "r", "b"]
    assert nnet.get_component(0) is old_a
    assert nnet.get_component(1).type_name == "SigmoidComponent"
    # nodes: a redefined node drops its old line and is placed with the new lines
    assert nnet.get_config_lines() == [
        "input-node name=input dim=4",
        "component-node name=r component=r input=a",
        "component-node name=b component=b input=r",
        "output-node name=output input=b objective=linear",
        "component-node name=a component=a input=Offset(input, 1)"]
    assert nnet.node_names == ["input", "r_input", "r", "b_input", "b", "output",
                               "a_input", "a"]


@pytest.mark.parametrize("extra,error,pattern", [
    ("component name=a type=AffineComponent input-dim=4 output-dim=3\n", ConfigError,
     r"cfg:4: Component name a appears twice in the same config file"),
    ("output-node name=r input=a\n", ConfigError,
     r"cfg:6: Node name r appears twice in the same config file"),
    ("foo-node name=z\n", ConfigError, r"cfg:4: Invalid config-file line \('foo-node' not expected"),
    ("output-node input=a\n", ConfigError, r"cfg:4: Config line has no field 'name=xxx'"),
    ("output-node name=9x input=a\n", ConfigError, r"Name '9x' is not allowable"),
    ("output-node name=o input=a objective=cubic\n", ConfigError, r"Invalid objective type: cubic"),
    ("output-node name=o input=a foo=1\n", ConfigError, r"cfg:4: Unused values 'foo=1'"),
    ("output-node name=o\n", ConfigError, r"Expected input=<input-descriptor>"),
    ("output-node name=o input=Append(a, q)\n", DescriptorError,
     r"cfg:4: .*Expected a Descriptor, got instead q"),
    ("output-node name=o input=a_input\n", DescriptorError, r"got instead a_input"),
    ("component-node name=z component=nope input=a\n", ConfigError, r"No component named 'nope'"),
    ("input-node name=i2\n", ConfigError, r"Expected field dim=<input-dim>"),
    ("input-node name=i2 dim=0\n", ConfigError, r"Invalid dimension"),
    ("input-node name=i2 dim=x\n", ConfigError, r"expected an integer"),
    ("dim-range-node name=z input-node=a dim-offset=2 dim=2\n", NnetError,
     r"Invalid node dimensions for DimRange node: z: input-dim=3, dim=2, dim-offset=2"),
    ("dim-range-node name=z input-node=output dim-offset=0 dim=2\n", ConfigError,
     r"invalid input-node output"),
    ("dim-range-node name=z input-node=a dim=2\n", ConfigError, r"Expected dim-offset"),
    ("component name=z type=FooComponent\n", ConfigError,
     r"cfg:4: Unknown component-type 'FooComponent'"),
    ("component name=z dim=3\n", ConfigError, r"Expected field type=<component-type>"),
    ("component name=z type=SigmoidComponent dim=3 dimm=2\n", ConfigError, r"dimm=2"),
    ("output-node name=o input=Sum(a, input)\n", NnetError,
     r"Sum expression with inconsistent dimension: 3 vs. 4"),
    ("component-node name=z component=a input=a\n", NnetError,
     r"Dimension mismatch for network-node z: input-dim 3 versus component-input-dim 4"),
])
def test_config_errors(extra, error, pattern):
    text = ("input-node name=input dim=4\ncomponent name=a type=AffineComponent input-dim=4 "
            "output-dim=3\ncomponent-node name=a component=a input=input\n" + extra +
            "component name=r type=SigmoidComponent dim=3\n"
            "component-node name=r component=r input=a\noutput-node name=output input=r\n")
    with pytest.raises(error) as info:
        Nnet.from_config(text, "cfg")
    assert re.search(pattern, str(info.value)), str(info.value)


def test_error_leaves_network_unchanged():
    nnet = Nnet.from_config(BASE)
    before = nnet.to_bytes()
    with pytest.raises(PynnetError):
        nnet.read_config("component name=r type=SigmoidComponent dim=3\n"
                         "output-node name=output input=nonexistent\n")
    assert nnet.to_bytes() == before


def test_adding_two_components_with_same_name_in_one_config_after_existing():
    nnet = Nnet.from_config(BASE)
    with pytest.raises(ConfigError, match="appears twice"):
        nnet.read_config("component name=x type=SigmoidComponent dim=3\n"
                         "component name=x type=SigmoidComponent dim=3\n")


def test_no_outputs_or_inputs():
    with pytest.raises(NnetError, match="no output nodes"):
        Nnet.from_config("input-node name=input dim=3\n")
    with pytest.raises(NnetError, match="no input nodes"):
        Nnet.from_config("component name=c type=ConstantFunctionComponent input-dim=1 "
                         "output-dim=2\ncomponent-node name=c component=c input=Const(1, 1)\n"
                         "output-node name=output input=c\n")


def test_cycles():
    # a recurrence through a delay is fine; without one it is refused.
    ok = ("input-node name=input dim=4\n"
          "component name=a type=AffineComponent input-dim=7 output-dim=3\n"
          "component-node name=a component=a input=Append(input, IfDefined(Offset(a, -1)))\n"
          "output-node name=output input=a\n")
    Nnet.from_config(ok)
    for bad, cycle in [("Append(input, a)", "a -> a"),
                       ("Append(input, Sum(Scale(2, a), Failover(a, a)))", "a -> a"),
                       ("Append(input, IfDefined(b))", "(a -> b -> a|b -> a -> b)")]:
        text = (ok.replace("Append(input, IfDefined(Offset(a, -1)))", bad) +
                "component name=b type=SigmoidComponent dim=3\n"
                "component-node name=b component=b input=a\n")
        with pytest.raises(NnetError, match="cycle without a time delay: " + cycle):
            Nnet.from_config(text)


def bad_cases():
    names = ["bad-descriptor", "dim-mismatch", "missing-key", "no-delay-cycle",
             "unknown-key", "unknown-node", "unknown-type"]
    base = KALDI_REF / "bad" if (KALDI_REF / "bad").is_dir() else TEST_DATA / "models" / "bad"
    return [pytest.param(base / (n + ".config"), id=n) for n in names]


BAD_EXPECT = {
    "bad-descriptor": (DescriptorError, r":3: .*Expected a Descriptor, got instead end of input"),
    "dim-mismatch": (NnetError, r"Dimension mismatch for network-node a: input-dim 4 versus "
                                r"component-input-dim 5"),
    "missing-key": (ConfigError, r":2: .*output-dim"),
    "no-delay-cycle": (NnetError, r"cycle without a time delay: a -> a"),
    "unknown-key": (ConfigError, r":2: .*learning-rat=0\.1"),
    "unknown-node": (DescriptorError, r":3: .*Expected a Descriptor, got instead inptu"),
    "unknown-type": (ConfigError, r":2: Unknown component-type 'FooComponent'"),
}


@pytest.mark.parametrize("path", bad_cases())
def test_reference_bad_configs(path):
    error, pattern = BAD_EXPECT[path.stem]
    with pytest.raises(error) as info:
        Nnet.from_config(str(path))
    assert re.search(pattern, str(info.value)), str(info.value)
    assert str(path) in str(info.value)


def test_from_config_text_vs_path(tmp_path):
    p = tmp_path / "x.config"
    p.write_text(BASE)
    assert Nnet.from_config(str(p)).to_bytes(False).split(b"<NumComponents>")[0] == \
        Nnet.from_config(BASE).to_bytes(False).split(b"<NumComponents>")[0]
    with pytest.raises(ConfigError, match=re.escape(str(p)) + ":99"):
        p.write_text(BASE + "\n" * 90 + "bogus name=x\n")
        Nnet.from_config(str(p))
