"""Kaldi's ConvertAdditionToAssignment (nnet-optimize.cc).

An adding command (kMatrixAdd, kAddRows, kAddRowsMulti, kAddToRowsMulti)
whose every written submatrix is first really touched (zeroing aside) by
this very command adds to zeros, so it can copy instead. That lets the
zeroing go later (RemoveUnnecessaryZeroing) and lets assignments be merged.
kAddToRowsMulti is converted only with alpha 1, since kCopyToRowsMulti has
no scale.
"""

from ..compile.computation import CommandType as C
from .analysis import Analyzer, ComputationAnalysis
from .computation_edit import commands_of_types

_COPY_OF = {C.kMatrixAdd: C.kMatrixCopy, C.kAddRows: C.kCopyRows,
            C.kAddRowsMulti: C.kCopyRowsMulti, C.kAddToRowsMulti: C.kCopyToRowsMulti}


def convert_addition_to_assignment(nnet, computation):
    """Rewrites adding commands into copies where that is exact."""
    analyzer = Analyzer().init(nnet, computation)
    analysis = ComputationAnalysis(computation, analyzer)
    commands = computation.commands
    for index in commands_of_types(computation, _COPY_OF):
        c = commands[index]
        copy_type = _COPY_OF[c.command_type]
        written = analyzer.command_attributes[index].submatrices_written
        assert written, "adding command %d writes nothing" % index
        if all(analysis.first_nontrivial_access(s) == index for s in written):
            if c.command_type != C.kAddToRowsMulti or c.alpha == 1.0:
                c.command_type = copy_type
