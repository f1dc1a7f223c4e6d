# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""The decision of ConvertAdditionToAssignment (which adding commands can copy), in C (owner and twin: ``additions_to_convert_py`` in ``pynnet3.optimize.addition``).

It reads the analysis' C arrays (``analysis_kernel.pxd``) instead of building a
Python CommandAttributes per command asked about; the pass itself (in Python) applies what is
decided here.
"""

from pynnet3._fast.analysis_kernel cimport (SW, Analyzer, CommandAttributesList, ComputationAnalysis)
from pynnet3._fast.constants cimport *


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
