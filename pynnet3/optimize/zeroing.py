"""Kaldi's RemoveUnnecessaryZeroing (nnet-optimize.cc).

A matrix whose first access is a zeroing (kSetConst, alpha 0) does not need
it when every one of its variables is next accessed by a pure write (so the
zeros are never read). The zeroing becomes a no-op; it is kept for an output
matrix with a variable nothing else touches (the user reads those zeros, e.g.
derivatives that derivative-time limits made always zero).
"""

from ..compile.computation import CommandType as C
from .analysis import Analyzer, kWriteAccess
from .computation_edit import commands_of_types


def remove_unnecessary_zeroing(nnet, computation):
    """Turns needless zeroing commands into kNoOperation (they are removed
    later, by the next renumbering or RemoveNoOps)."""
    a = Analyzer().init(nnet, computation)
    # Only a matrix that some zeroing command touches can have a zeroing as
    # its first access; looking at those alone skips building the access
    # lists of all the others.
    subs = computation.submatrices
    commands = computation.commands
    zeroed = sorted({subs[commands[i].arg1].matrix_index
                     for i in commands_of_types(computation, (C.kSetConst,))
                     if commands[i].alpha == 0.0})
    vfm = []
    for m in zeroed:
        accesses = a.matrix_accesses[m]
        if not accesses.accesses:
            continue
        command = computation.commands[accesses.accesses[0].command_index]
        if not (command.command_type == C.kSetConst and command.alpha == 0.0):
            continue
        vfm.clear()
        a.variables.append_variables_for_matrix(m, vfm)
        needed = False
        for v in vfm:
            va = a.variable_accesses[v]
            if len(va) > 1 and va[1].access_type != kWriteAccess:
                needed = True
                break
            if len(va) == 1 and accesses.is_output:
                needed = True
                break
        if not needed:
            command.command_type = C.kNoOperation
