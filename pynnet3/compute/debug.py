"""Kaldi's NnetComputer debug mode (``--computation.debug``, or
``--verbose`` >= 5): the computation's preamble is logged once, then after
every command a line ``<command>\t|\tm<i>: <before>-><after> ...\t|\t time: <s>
secs`` giving, for each matrix (and each partial submatrix) the command
writes, its root-mean-square value before and after the command (Kaldi's
MatrixStddev), as Kaldi's DebugBeforeExecute / DebugAfterExecute do.
"""

import logging
import math

import numpy as np

from ..compiler.computation_io import command_strings, submatrix_strings
from ..optimize.analysis import ComputationVariables, compute_command_attributes

logger = logging.getLogger("pynnet3")

__all__ = ["CommandDebugger"]


def matrix_stddev(m):
    """Kaldi's NnetComputer::MatrixStddev: sqrt(sum of squares / size)."""
    if m is None or m.shape[0] == 0 or m.shape[1] == 0:
        return 0.0
    # A matrix the command is about to write may still hold the memory it
    # was allocated with (Kaldi's kUndefined): any bits, signalling NaNs
    # included, whose cast and square would warn. Its value is printed as
    # Kaldi prints it, whatever it is.
    with np.errstate(invalid="ignore", over="ignore"):
        m64 = np.asarray(m, dtype=np.float64)
        return math.sqrt(float((m64 * m64).sum()) / m.size)


class CommandDebugger:
    """Logs every command a computer runs (see the module docstring)."""

    __slots__ = ("computer", "attributes", "strings", "submatrix_strings", "_before")

    def __init__(self, computer):
        computation, nnet = computer.computation, computer.nnet
        variables = ComputationVariables()
        variables.init(computation)
        self.computer = computer
        self.attributes = compute_command_attributes(nnet, computation, variables)
        preamble, self.strings = command_strings(computation, nnet)
        self.submatrix_strings = submatrix_strings(computation)
        self._before = None
        logger.info("%s", preamble)

    def _written(self, pc):
        c = self.computer
        attrs = self.attributes[pc]
        mats = [(m, c.matrices[m]) for m in attrs.matrices_written]
        subs = [(s, c._sub(s)) for s in attrs.submatrices_written
                if not c.computation.is_whole_matrix(s)
                and c.matrices[c._matrix_of(s)] is not None]
        return ([(m, matrix_stddev(v)) for m, v in mats],
                [(s, matrix_stddev(v)) for s, v in subs])

    def before(self, pc):
        self._before = self._written(pc)

    def after(self, pc, seconds):
        mats, subs = self._written(pc)
        old_mats, old_subs = self._before
        old_m, old_s = dict(old_mats), dict(old_subs)
        parts = [self.strings[pc], "\t|\t"]
        parts += ["m%d: %g->%g " % (m, old_m.get(m, 0.0), v) for m, v in mats]
        parts += ["%s: %g->%g " % (self.submatrix_strings[s], old_s.get(s, 0.0), v)
                  for s, v in subs]
        parts.append("\t|\t time: %g secs" % seconds)
        logger.info("%s", "".join(parts))
