"""The command list as bytes (pynnet3.optimize.command_types): the kernel
(pynnet3/_fast/command_types_kernel.pyx) gives the same bytes as the Python twin on every
reference computation (ours unoptimized and optimized, Kaldi's optimized) and
on commands whose type is out of range or not an int."""

import pytest

from test_optimize_renumber_fast import _computations, _id

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.compiler.computation import Command, CommandType as CT
from pynnet3.optimize.command_types import command_type_bytes_py
from reference_cases import COMPILE_CASES as CASES

fast = pytest.importorskip("pynnet3._fast.command_types_kernel")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_command_types_match_twin(case):
    for computation in _computations(case):
        got = fast.command_type_bytes(computation.commands)
        assert got == command_type_bytes_py(computation.commands)
        assert list(got) == [int(c.command_type) for c in computation.commands]


def test_odd_command_types():
    commands = [Command(CT.kPropagate), Command(-1), Command(300), Command("x"),
                Command(CT.kGotoLabel)]
    expected = bytes([4, 255, 255, 255, 24])
    assert fast.command_type_bytes(commands) == expected
    assert command_type_bytes_py(commands) == expected
