"""Copying commands and making submatrix records by filling slots
(pynnet3/_fast/shortcut_kernel.pyx) gives what the twins (copy_commands_py,
make_submatrices_py in pynnet3.compiler.shortcut) give: equal, new records of
the same classes."""

import types

import pytest

from pynnet3.compiler.computation import Command, CommandType as CT, SubMatrixInfo
from pynnet3.compiler.shortcut import copy_commands_py, make_submatrices_py

fast = pytest.importorskip("pynnet3._fast.shortcut_kernel")


class _SubCommand(Command):
    __slots__ = ()


def test_copy_commands():
    commands = [Command(CT.kPropagate, 1, 0, 2, 3, 4, 1, -1, 1.0),
                Command(CT.kMatrixCopy, 5, 6, alpha=0.5), _SubCommand(CT.kSetConst, 7, alpha=0.0),
                types.SimpleNamespace(command_type=CT.kAllocMatrix, arg1=1, arg2=-1, arg3=-1,
                                      arg4=-1, arg5=-1, arg6=-1, arg7=-1, alpha=1.0)]
    got, want = fast.copy_commands(commands), copy_commands_py(commands)
    assert got == want
    assert all(type(g) is Command for g in got)
    assert all(g is not c for g, c in zip(got, commands))
    got[0].arg1 = 9
    assert commands[0].arg1 == 1


def test_make_submatrices():
    fields = ([1, 2, 2], [0, 3, 0], [4, 1, 2], [0, 0, 5], [8, 8, 3])
    got = fast.make_submatrices(*fields)
    assert got == make_submatrices_py(*fields)
    assert got[1] == SubMatrixInfo(2, 3, 1, 0, 8) and type(got[1]) is SubMatrixInfo
    for impl in (fast.make_submatrices, make_submatrices_py):
        with pytest.raises(ValueError, match="different lengths"):
            impl([1], [0], [1], [0], [])
