"""Kaldi's ConvertAdditionToAssignment (nnet-optimize.cc).

An adding command (kMatrixAdd, kAddRows, kAddRowsMulti, kAddToRowsMulti)
whose every written submatrix is first really touched (zeroing aside) by
this very command adds to zeros, so it can copy instead. That lets the
zeroing go later (RemoveUnnecessaryZeroing) and lets assignments be merged.
kAddToRowsMulti is converted only with alpha 1, since kCopyToRowsMulti has
no scale.

Which commands qualify is decided in C (``additions_to_convert`` in
``pynnet3/_fast/addition_kernel.pyx``) when the compiled analysis is in use;
:func:`additions_to_convert_py` is its twin.
"""

from .. import _fast
from ..compiler.computation import CommandType as C
from .analysis import Analyzer, AnalyzerPy, ComputationAnalysis
from .command_types import commands_of_types

_COPY_OF = {C.kMatrixAdd: C.kMatrixCopy, C.kAddRows: C.kCopyRows,
            C.kAddRowsMulti: C.kCopyRowsMulti, C.kAddToRowsMulti: C.kCopyToRowsMulti}

# The decision's kernel, which reads the compiled analysis' arrays (so it runs
# only on the kernel's Analyzer).
_kernel = _fast.load("addition_kernel")


def additions_to_convert_py(analyzer, computation):
    """The adding commands, in order, whose every written submatrix is first
    non-trivially accessed (zeroing aside) by the command itself."""
    analysis = ComputationAnalysis(computation, analyzer)
    out = []
    for index in commands_of_types(computation, _COPY_OF):
        written = analyzer.command_attributes[index].submatrices_written
        assert written, "adding command %d writes nothing" % index
        if all(analysis.first_nontrivial_access(s) == index for s in written):
            out.append(index)
    return out


def convert_addition_to_assignment(nnet, computation):
    """Rewrites adding commands into copies where that is exact. (Converting
    one command changes no other's answer: only zeroings are skipped when
    looking for a first non-trivial access.)"""
    analyzer = Analyzer().init(nnet, computation)
    find = (_kernel.additions_to_convert
            if _kernel is not None and not isinstance(analyzer, AnalyzerPy)
            else additions_to_convert_py)
    commands = computation.commands
    for index in find(analyzer, computation):
        c = commands[index]
        if c.command_type != C.kAddToRowsMulti or c.alpha == 1.0:
            c.command_type = _COPY_OF[c.command_type]
