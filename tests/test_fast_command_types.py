"""pynnet3/_fast/command_types.pxd numbers commands as CommandType does."""

import re
from pathlib import Path

from pynnet3.compiler.computation import CommandType


def test_pxd_enum_matches_command_type():
    pxd = (Path(__file__).resolve().parent.parent / "pynnet3" / "_fast"
           / "command_types.pxd").read_text()
    values = dict((name, int(v)) for name, v in re.findall(r"^\s+(k\w+) = (\d+)$", pxd, re.M))
    assert values == {c.name: c.value for c in CommandType}
