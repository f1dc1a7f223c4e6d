"""Nnet reading and writing, byte for byte against Kaldi (nnet3-copy).

For every reference network: binary -> binary equals kaldi-copy.bin-to-bin.raw
(or model.raw), binary -> text equals model.txt, text -> binary equals
kaldi-copy.txt-to-bin.raw, text -> text equals kaldi-copy.txt-to-txt.txt.
"""

import re

import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.errors import KaldiFormatError, NnetError, PynnetError
from pynnet3.io.stream import OutputStream
from pynnet3.nnet.nnet import Nnet
from pynnet3.nnet.node import NodeType, kDescriptor
from pynnet3.nnet import component_ops as utils


def _case_key(path):
    m = re.search(r"(\d+)$", path.name)
    return (path.parent.name, int(m.group(1)) if m else -1, path.name)


def model_dirs():
    """Reference networks: kaldi-ref's models/ and random/ when present, else
    the bundled subset in tests/data/models."""
    dirs = sorted((d for d in KALDI_REF.glob("models/*") if (d / "model.raw").is_file()),
                  key=_case_key)
    dirs += sorted(KALDI_REF.glob("random/case*"), key=_case_key)
    if not dirs:
        dirs = sorted((d for d in (TEST_DATA / "models").glob("*")
                       if (d / "model.raw").is_file()), key=_case_key)
        dirs += sorted((TEST_DATA / "models" / "random").glob("case*"), key=_case_key)
    return [pytest.param(d, id="%s/%s" % (d.parent.name, d.name)) for d in dirs]


def _bin_ref(d):
    p = d / "kaldi-copy.bin-to-bin.raw"
    return (p if p.is_file() else d / "model.raw").read_bytes()


@pytest.mark.parametrize("d", model_dirs())
def test_binary_roundtrip(d):
    nnet = Nnet.read(str(d / "model.raw"))
    # nnet3-copy always sets batch-norm test mode (false by default) before writing
    utils.set_batchnorm_test_mode(nnet, False)
    assert nnet.to_bytes(binary=True) == _bin_ref(d)
    if (d / "model.txt").is_file():
        assert nnet.to_bytes(binary=False) == (d / "model.txt").read_bytes()


@pytest.mark.parametrize("d", [p for p in model_dirs()
                               if (p.values[0] / "model.txt").is_file()])
def test_text_roundtrip(d):
    nnet = Nnet.read(str(d / "model.txt"))
    utils.set_batchnorm_test_mode(nnet, False)
    t2b = d / "kaldi-copy.txt-to-bin.raw"
    t2t = d / "kaldi-copy.txt-to-txt.txt"
    if t2b.is_file():
        assert nnet.to_bytes(binary=True) == t2b.read_bytes()
    expected = t2t.read_bytes() if t2t.is_file() else (d / "model.txt").read_bytes()
    assert nnet.to_bytes(binary=False) == expected


SIMPLE = TEST_DATA / "models" / "random" / "case13"     # one AffineComponent


def test_write_to_file_and_read_back(tmp_path):
    src = SIMPLE / "model.raw"
    nnet = Nnet.read(str(src))
    out = tmp_path / "copy.raw"
    nnet.write(str(out), binary=True)
    assert out.read_bytes() == src.read_bytes()
    nnet.write(str(tmp_path / "copy.txt"), binary=False)
    again = Nnet.read(str(tmp_path / "copy.txt"))
    assert again.get_config_lines() == nnet.get_config_lines()
    # path:offset rxfilenames (what scp files hold)
    blob = tmp_path / "blob"
    blob.write_bytes(b"junk" + src.read_bytes())
    assert Nnet.read("%s:4" % blob).to_bytes() == src.read_bytes()


def test_node_layout_zoo1():
    nnet = Nnet.read(str(TEST_DATA / "models" / "zoo1" / "model.raw"))
    assert nnet.node_names[:4] == ["input", "ivector", "fixaff_input", "fixaff"]
    assert [t.name for t in (nnet.nodes[i].node_type for i in range(4))] == [
        "kInput", "kInput", "kDescriptor", "kComponent"]
    i = nnet.get_node_index("fixaff")
    assert nnet.is_component_node(i) and nnet.is_component_input_node(i - 1)
    assert not nnet.is_output_node(i - 1)
    assert nnet.nodes[i].component_index == nnet.get_component_index("fixaff")
    out = nnet.get_node_index("output2")
    assert nnet.is_output_node(out) and nnet.nodes[out].node_type == kDescriptor
    assert nnet.nodes[out].objective_type.name == "kQuadratic"
    assert nnet.output_dim("output2") == 13 and nnet.input_dim("ivector") == 3
    assert nnet.input_dim("output") == -1 and nnet.output_dim("input") == -1
    assert nnet.get_node_index("nope") == -1 and nnet.get_component_index("nope") == -1
    dr = nnet.get_node_index("dr")
    assert nnet.is_dim_range_node(dr) and nnet.node_dim(dr) == 5
    assert nnet.nodes[dr].node_index == nnet.get_node_index("specaug")
    assert nnet.modulus() == 6
    assert nnet.num_nodes() == len(nnet.node_names) and nnet.num_components() == 23


def test_copy_is_deep():
    nnet = Nnet.read(str(SIMPLE / "model.raw"))
    other = nnet.copy()
    assert other.to_bytes() == nnet.to_bytes()
    utils.scale_nnet(other, 0.5)
    other.set_node_name(0, "renamed")
    assert other.to_bytes() != nnet.to_bytes()
    assert nnet.node_names[0] == "input"
    assert Nnet.read(str(SIMPLE / "model.raw")).to_bytes() == nnet.to_bytes()


def _simple_text():
    return (SIMPLE / "model.txt").read_bytes()


def test_unknown_component_type(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(_simple_text().replace(b"<AffineComponent>", b"<AffineComponnet>", 1))
    with pytest.raises(KaldiFormatError) as info:
        Nnet.read(str(bad))
    msg = str(info.value)
    assert "bad.txt" in msg and "AffineComponnet" in msg and "byte offset" in msg


def test_truncated_files(tmp_path):
    data = (SIMPLE / "model.raw").read_bytes()
    for cut in (1, 5, 200, len(data) // 2, len(data) - 3):
        p = tmp_path / ("cut%d.raw" % cut)
        p.write_bytes(data[:cut])
        with pytest.raises(KaldiFormatError) as info:
            Nnet.read(str(p))
        assert str(p) in str(info.value)
    text = _simple_text()
    for cut in (10, len(text) // 3, len(text) - 10):
        p = tmp_path / ("cut%d.txt" % cut)
        p.write_bytes(text[:cut])
        with pytest.raises(PynnetError):
            Nnet.read(str(p))


def test_reference_truncated_raw():
    with pytest.raises(KaldiFormatError, match="truncated"):
        Nnet.read(str(TEST_DATA / "models" / "bad" / "truncated.raw"))


def test_bad_config_section(tmp_path):
    text = _simple_text()
    p = tmp_path / "m.txt"
    p.write_bytes(text.replace(b"input=affine1_node", b"input=affine1_nodex", 1))
    with pytest.raises(PynnetError) as info:
        Nnet.read(str(p))
    assert "affine1_nodex" in str(info.value) and "m.txt" in str(info.value)
    assert ":4" in str(info.value)    # the line of the file
    p.write_bytes(text.replace(b"<Nnet3> \n", b"<Nnet3> junk\n", 1))
    with pytest.raises(KaldiFormatError, match="newline after <Nnet3>"):
        Nnet.read(str(p))
    p.write_bytes(text.replace(b"<NumComponents> 1", b"<NumComponents> 2", 1))
    with pytest.raises(KaldiFormatError, match="<ComponentName>"):
        Nnet.read(str(p))


def test_no_delay_cycle_model_refused():
    with pytest.raises(NnetError, match="cycle without a time delay: a -> a"):
        Nnet.read(str(TEST_DATA / "models" / "bad" / "no-delay-cycle.raw"))


def test_write_to_stream_text_layout():
    nnet = Nnet.from_config("input-node name=input dim=3\noutput-node name=output input=input\n")
    s = OutputStream(False)
    nnet.write_to(s)
    assert s.getvalue() == (b"<Nnet3> \ninput-node name=input dim=3\n"
                            b"output-node name=output input=input objective=linear\n\n"
                            b"<NumComponents> 0 \n</Nnet3> ")
    b = nnet.to_bytes(True)
    assert b.startswith(b"\0B<Nnet3> \n") and b.endswith(b"<NumComponents> \x04\0\0\0\0</Nnet3> ")
    assert Nnet.from_bytes(b).to_bytes(True) == b
    assert NodeType(nnet.nodes[1].node_type) == kDescriptor
