# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""The decision of RemoveUnnecessaryZeroing (which zeroings nothing reads), in C (owner and twin: ``unnecessary_zeroings_py`` in ``pynnet3.optimize.zeroing``).

It reads the analysis' C arrays (``analysis_kernel.pxd``) instead of building a
Python list of Access per matrix asked about; the pass itself (in Python) applies what is
decided here.
"""

from pynnet3._fast.analysis_kernel cimport (W, AccessLists, Analyzer, ComputationVariables, MatrixAccessesList)
from pynnet3._fast.constants cimport *


def unnecessary_zeroings(Analyzer analyzer, list commands):
    """The zeroing commands (kSetConst, alpha 0) that are the first access to
    their matrix and whose zeros nothing reads: every variable of the matrix
    is next accessed by a pure write, or (an output matrix) by something. In
    matrix order; ``analyzer`` must be of the computation of ``commands``."""
    cdef MatrixAccessesList ma = analyzer.matrix_accesses
    cdef AccessLists acc = ma.accesses
    cdef AccessLists va = analyzer.variable_accesses
    cdef ComputationVariables variables = analyzer.variables
    cdef list out = []
    cdef int m, c, v, n
    cdef bint needed
    for m in range(1, ma.num_matrices):
        if acc.start[m] == acc.start[m + 1]:
            continue
        c = acc.cmd[acc.start[m]]
        command = commands[c]
        if not (<int>command.command_type == kSetConst and command.alpha == 0.0):
            continue
        needed = False
        for v in range(variables.matrix_to_variable_index[m],
                       variables.matrix_to_variable_index[m + 1]):
            n = va.start[v + 1] - va.start[v]
            if (n > 1 and va.kind[va.start[v] + 1] != W) or (n == 1 and ma.is_output[m]):
                needed = True
                break
        if not needed:
            out.append(c)
    return out
