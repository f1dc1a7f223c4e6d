"""pynnet3/_fast/constants.pxd, the constants the kernels share with the
Python code, block by block equal to the Python enums they copy (same names,
same values), and no kernel defines constants of its own that shadow them."""

import importlib
import re
from pathlib import Path

import pytest

FAST = Path(__file__).resolve().parent.parent / "pynnet3" / "_fast"

# block name in constants.pxd -> the Python names and values it copies
_DESCRIPTOR_OPCODES = ("F_NODE", "F_OFFSET", "F_SWITCH", "F_ROUND", "F_REPLACE_T", "F_REPLACE_X",
                       "S_SIMPLE", "S_OPTIONAL", "S_CONST", "S_SUM", "S_FAILOVER")


def _python_values(block, source):
    module_name, _, attr = source.rpartition(".")
    if block in ("CommandType", "NodeType", "AccessType"):
        enum = getattr(importlib.import_module(module_name), attr)
        return {m.name: int(m.value) for m in enum}
    if block == "ComponentProperty":
        cls = getattr(importlib.import_module(module_name), attr)
        return {k: v for k, v in vars(cls).items() if k.startswith("k")}
    module = importlib.import_module(source)
    if block == "ComputableInfo":
        return {k: getattr(module, k) for k in ("kUnknown", "kComputable", "kNotComputable",
                                                "kWillNotCompute")}
    if block == "DescriptorOpcode":
        return {k: getattr(module, k) for k in _DESCRIPTOR_OPCODES}
    raise AssertionError("constants.pxd has a block %s that no test checks" % block)


def _blocks():
    text = (FAST / "constants.pxd").read_text()
    blocks = re.findall(r"^# (\w+): ([\w.]+)\ncdef enum:\n((?:    \w+ = \w+\n)+)", text, re.M)
    out = []
    for name, source, body in blocks:
        values = {k: int(v, 0) for k, v in re.findall(r"^    (\w+) = (\w+)$", body, re.M)}
        out.append((name, source, values))
    return out


def test_every_block_is_read():
    text = (FAST / "constants.pxd").read_text()
    assert len(_blocks()) == text.count("cdef enum:") == 6


@pytest.mark.parametrize("block", _blocks(), ids=lambda b: b[0])
def test_block_equals_its_python_enum(block):
    name, source, values = block
    assert values == _python_values(name, source)


def test_kernels_define_none_of_the_shared_constants():
    shared = {k for _, _, values in _blocks() for k in values}
    for path in sorted(FAST.glob("*.p[yx][xd]")):
        if path.name == "constants.pxd":
            continue
        defined = set(re.findall(r"^\s+(\w+) = -?\w+\s*(?:#.*)?$", path.read_text(), re.M))
        defined |= set(re.findall(r"^DEF (\w+)", path.read_text(), re.M))
        assert not (defined & shared), (path.name, sorted(defined & shared))
