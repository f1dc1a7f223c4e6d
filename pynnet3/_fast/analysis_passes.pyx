# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""The decisions of two passes that only ask the analysis questions, in C:
ConvertAdditionToAssignment (twin: ``additions_to_convert_py`` in
``pynnet3.optimize.addition``) and RemoveUnnecessaryZeroing (twin:
``unnecessary_zeroings_py`` in ``pynnet3.optimize.zeroing``).

Both read the analysis' C arrays (``analysis.pxd``) instead of building a
Python CommandAttributes or list of Access per command or matrix asked about;
the passes themselves (in Python) apply what is decided here.
"""

from pynnet3._fast.analysis_kernel cimport (W, SW, AccessLists, Analyzer, CommandAttributesList,
                                     ComputationAnalysis, ComputationVariables,
                                     MatrixAccessesList)
from pynnet3._fast.command_types cimport *


def additions_to_convert(Analyzer analyzer, computation):
    """The adding commands (kMatrixAdd, kAddRows, kAddRowsMulti,
    kAddToRowsMulti), in order, whose every written submatrix is first
    non-trivially accessed by the command itself; ``analyzer`` must be of
    ``computation`` as it is now."""
    cdef CommandAttributesList attrs = analyzer.command_attributes
    cdef ComputationAnalysis analysis = ComputationAnalysis(computation, analyzer)
    cdef list out = []
    cdef int c, t, i, b, e
    cdef bint ok
    for c in range(attrs.num_commands):
        t = attrs.command_type[c]
        if not (t == kMatrixAdd or t == kAddRows or t == kAddRowsMulti
                or t == kAddToRowsMulti):
            continue
        b = attrs.start[SW][c]
        e = attrs.start[SW][c + 1]
        assert e > b, "adding command %d writes nothing" % c
        ok = True
        for i in range(b, e):
            if analysis.first_nontrivial_access_c(attrs.data[SW][i]) != c:
                ok = False
                break
        if ok:
            out.append(c)
    return out


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
