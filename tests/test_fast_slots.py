"""The kernels that read the computation's records straight from their slots
(pynnet3/_fast/slots.pxd) give the same answers when the records are not of
exactly the dataclass they took the offsets from (a subclass, or any object
with the same fields): those are read by name."""

import copy
import types

import pytest

from reference_cases import COMPILE_CASES as CASES

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.driver.compile_and_optimize import compile as compile_
from pynnet3.compiler.computation import Command, SubMatrixInfo
from pynnet3.compiler.request import ComputationRequest
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize import analysis, renumber

command_types_kernel = pytest.importorskip("pynnet3._fast.command_types_kernel")
renumber_kernel = pytest.importorskip("pynnet3._fast.renumber_kernel")
if analysis.Analyzer is analysis.AnalyzerPy:
    pytest.skip("the compiled analysis is not in use", allow_module_level=True)


class _SubCommand(Command):
    __slots__ = ("note",)


def _as_subclass(c):
    out = _SubCommand(c.command_type, c.arg1, c.arg2, c.arg3, c.arg4, c.arg5, c.arg6,
                      c.arg7, c.alpha)
    out.note = None
    return out


def _as_namespace(c):
    return types.SimpleNamespace(command_type=c.command_type, arg1=c.arg1, arg2=c.arg2,
                                 arg3=c.arg3, arg4=c.arg4, arg5=c.arg5, arg6=c.arg6,
                                 arg7=c.arg7, alpha=c.alpha)


def _attributes(a):
    return ([vars_of(x) for x in a.command_attributes],
            [list(x) for x in a.variable_accesses],
            [(x.allocate_command, x.deallocate_command, x.accesses, x.is_input, x.is_output)
             for x in a.matrix_accesses])


def vars_of(attrs):
    return (attrs.variables_read, attrs.variables_written, attrs.submatrices_read,
            attrs.submatrices_written, attrs.matrices_read, attrs.matrices_written,
            attrs.has_side_effects)


@pytest.mark.skipif(not CASES, reason="no reference cases")
@pytest.mark.parametrize("convert", [_as_subclass, _as_namespace])
def test_records_of_other_types_are_read_by_name(convert):
    case = CASES[0]
    nnet = Nnet.read(str(case / "model.raw"))
    computation = compile_(nnet, ComputationRequest.read(str(case / "request.txt")),
                           optimize=False)
    other = copy.deepcopy(computation)
    other.commands = [convert(c) for c in other.commands]
    other.submatrices = [types.SimpleNamespace(**{f: getattr(s, f) for f in (
        "matrix_index", "row_offset", "num_rows", "col_offset", "num_cols")})
        for s in other.submatrices]
    assert (command_types_kernel.command_type_bytes(other.commands)
            == command_types_kernel.command_type_bytes(computation.commands))
    assert _attributes(analysis.Analyzer().init(nnet, other)) == \
        _attributes(analysis.Analyzer().init(nnet, computation))
    n = len(computation.submatrices)
    used_a, used_b = bytearray(n), bytearray(n)
    renumber_kernel.scan_commands(other.commands, used_a)
    renumber.scan_commands_py(computation.commands, used_b)
    assert used_a == used_b
    subs = [SubMatrixInfo(s.matrix_index, s.row_offset, s.num_rows, s.col_offset, s.num_cols)
            for s in other.submatrices]
    used_a[0] = 1
    got = renumber_kernel.renumber_submatrices(other.submatrices, used_a, len(other.matrices))
    assert got[1:] == renumber.renumber_submatrices_py(subs, used_a, len(other.matrices))[1:]
