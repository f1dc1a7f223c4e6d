"""Nnet::Info() (nnet3-info's output) against Kaldi's info.txt for every
reference network, the left-context/right-context lines included."""

import re

import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.model.info import nnet_info
from pynnet3.nnet.nnet import Nnet
from pynnet3.nnet.component_ops import num_parameters
from pynnet3.nnet.nnet import is_simple_nnet


def _key(path):
    m = re.search(r"(\d+)$", path.name)
    return (path.parent.name, int(m.group(1)) if m else -1, path.name)


def info_cases():
    dirs = [d for d in KALDI_REF.glob("models/*") if (d / "info.txt").is_file()
            and (d / "model.raw").is_file()]
    dirs += list(KALDI_REF.glob("random/case*"))
    if not dirs:
        dirs = [d for d in (TEST_DATA / "models").glob("*") if (d / "info.txt").is_file()]
        dirs += list((TEST_DATA / "models" / "random").glob("case*"))
    return [pytest.param(d, id="%s/%s" % (d.parent.name, d.name))
            for d in sorted(dirs, key=_key)]


@pytest.mark.parametrize("d", info_cases())
def test_info_matches_kaldi(d):
    nnet = Nnet.read(str(d / "model.raw"))
    ours = nnet_info(nnet)
    assert ours == (d / "info.txt").read_text()


def test_info_layout_and_given_context():
    nnet = Nnet.from_config("input-node name=input dim=3\n"
                            "component name=a type=AffineComponent input-dim=6 output-dim=2\n"
                            "component-node name=a component=a input=Append(input, "
                            "Offset(input, 2))\noutput-node name=output input=a\n")
    text = nnet_info(nnet, context=(0, 2))
    lines = text.splitlines()
    assert lines[:4] == ["left-context: 0", "right-context: 2", "num-parameters: 14",
                         "modulus: 1"]
    assert lines[4:7] == [
        "input-node name=input dim=3",
        "component-node name=a component=a input=Append(input, Offset(input, 2)) "
        "input-dim=6 output-dim=2",
        "output-node name=output input=a dim=2 objective=linear"]
    assert lines[7].startswith("component name=a type=AffineComponent, input-dim=6, "
                               "output-dim=2, learning-rate=0.001")
    assert text.endswith("\n") and len(lines) == 8
    assert num_parameters(nnet) == 14 and is_simple_nnet(nnet)


def test_context_lines_only_for_simple_networks():
    nnet = Nnet.from_config("input-node name=x dim=3\noutput-node name=output input=x\n")
    assert not is_simple_nnet(nnet)
    assert nnet_info(nnet, context=(1, 1)).startswith("num-parameters: 0\nmodulus: 1\n")
    two_inputs = Nnet.from_config("input-node name=input dim=3\ninput-node name=ivector dim=2\n"
                                  "input-node name=other dim=2\n"
                                  "output-node name=output input=Append(input, ivector, other)\n")
    assert is_simple_nnet(two_inputs)     # Kaldi only asks for an "ivector" input too
    no_ivector = Nnet.from_config("input-node name=input dim=3\ninput-node name=other dim=2\n"
                                  "output-node name=output input=Append(input, other)\n")
    assert not is_simple_nnet(no_ivector)
    iv = Nnet.from_config("input-node name=input dim=3\ninput-node name=ivector dim=2\n"
                          "output-node name=output input=Append(input, ivector)\n")
    assert is_simple_nnet(iv)
