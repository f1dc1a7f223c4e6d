"""Kaldi's RemoveUnnecessaryZeroing (nnet-optimize.cc).

A matrix whose first access is a zeroing (kSetConst, alpha 0) does not need
it when every one of its variables is next accessed by a pure write (so the
zeros are never read). The zeroing becomes a no-op; it is kept for an output
matrix with a variable nothing else touches (the user reads those zeros, e.g.
derivatives that derivative-time limits made always zero).

Which zeroings go is decided in C (``unnecessary_zeroings`` in
``pynnet3/_fast/zeroing_kernel.pyx``) when the compiled analysis is in use;
:func:`unnecessary_zeroings_py` is its twin.
"""

from .. import _fast
from ..compiler.computation import CommandType as C
from .analysis import Analyzer, AnalyzerPy, kWriteAccess
from .command_types import commands_of_types

# The decision's kernel, which reads the compiled analysis' arrays (so it runs
# only on the kernel's Analyzer).
_kernel = _fast.load("zeroing_kernel")


def unnecessary_zeroings_py(analyzer, commands, computation):
    """The zeroing commands that are their matrix's first access and whose
    zeros nothing reads, in matrix order."""
    # Only a matrix that some zeroing command touches can have a zeroing as
    # its first access; looking at those alone skips building the access
    # lists of all the others.
    subs = computation.submatrices
    zeroed = sorted({subs[commands[i].arg1].matrix_index
                     for i in commands_of_types(computation, (C.kSetConst,))
                     if commands[i].alpha == 0.0})
    out = []
    vfm = []
    for m in zeroed:
        accesses = analyzer.matrix_accesses[m]
        if not accesses.accesses:
            continue
        first = accesses.accesses[0].command_index
        command = commands[first]
        if not (command.command_type == C.kSetConst and command.alpha == 0.0):
            continue
        vfm.clear()
        analyzer.variables.append_variables_for_matrix(m, vfm)
        needed = False
        for v in vfm:
            va = analyzer.variable_accesses[v]
            if len(va) > 1 and va[1].access_type != kWriteAccess:
                needed = True
                break
            if len(va) == 1 and accesses.is_output:
                needed = True
                break
        if not needed:
            out.append(first)
    return out


def remove_unnecessary_zeroing(nnet, computation):
    """Turns needless zeroing commands into kNoOperation (they are removed
    later, by the next renumbering or RemoveNoOps). (Each zeroing is the
    first access of one matrix only, so removing one changes no other's
    answer.)"""
    analyzer = Analyzer().init(nnet, computation)
    commands = computation.commands
    if _kernel is not None and not isinstance(analyzer, AnalyzerPy):
        found = _kernel.unnecessary_zeroings(analyzer, commands)
    else:
        found = unnecessary_zeroings_py(analyzer, commands, computation)
    for index in found:
        commands[index].command_type = C.kNoOperation
