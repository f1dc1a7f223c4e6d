"""The records an analysis of a computation returns (Kaldi's nnet-analyze.h:
AccessType, Access, CommandAttributes, MatrixAccesses) and its error: what the
readable analysis (:mod:`.analysis`) and its kernel
(``pynnet3/_fast/analysis_kernel.pyx``) share. See :mod:`.analysis` for what
they mean.
"""

from enum import IntEnum
from typing import NamedTuple

from ..errors import ComputationError

__all__ = ["AnalysisError", "AccessType", "kReadAccess", "kWriteAccess", "kReadWriteAccess",
           "Access", "CommandAttributes", "MatrixAccesses", "MatrixAccessSummary"]


class AnalysisError(ComputationError):
    """A computation the analysis cannot describe; ``command_index`` and
    ``matrix_index`` name the command and matrix involved (None if not
    applicable)."""

    def __init__(self, message, command_index=None, matrix_index=None):
        super().__init__(message)
        self.detail = message
        self.command_index = command_index
        self.matrix_index = matrix_index


class AccessType(IntEnum):
    kReadAccess = 0
    kWriteAccess = 1
    kReadWriteAccess = 2


kReadAccess = AccessType.kReadAccess
kWriteAccess = AccessType.kWriteAccess
kReadWriteAccess = AccessType.kReadWriteAccess


class Access(NamedTuple):
    """One access of a command to a variable or matrix. Tuples order by
    command_index first; a list of accesses never holds one command twice."""

    command_index: int
    access_type: AccessType


class CommandAttributes:
    """What one command reads and writes; every list is sorted and unique."""

    __slots__ = ("variables_read", "variables_written", "submatrices_read",
                 "submatrices_written", "matrices_read", "matrices_written",
                 "has_side_effects")

    def __init__(self):
        self.variables_read = []
        self.variables_written = []
        self.submatrices_read = []
        self.submatrices_written = []
        self.matrices_read = []
        self.matrices_written = []
        self.has_side_effects = False

    def __eq__(self, other):
        if not isinstance(other, CommandAttributes):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __repr__(self):
        return "CommandAttributes(%s)" % ", ".join(
            "%s=%r" % (n, getattr(self, n)) for n in self.__slots__)


class MatrixAccesses:
    """How one matrix is allocated, accessed and released. allocate_command
    is the kAllocMatrix/kSwapMatrix (or first kAcceptInput) command or -1;
    deallocate_command the kDeallocMatrix/kSwapMatrix command or -1;
    accesses is sorted by command, one per command."""

    __slots__ = ("allocate_command", "deallocate_command", "accesses", "is_input",
                 "is_output")

    def __init__(self, allocate_command=-1, deallocate_command=-1, accesses=None,
                 is_input=False, is_output=False):
        self.allocate_command = allocate_command
        self.deallocate_command = deallocate_command
        self.accesses = [] if accesses is None else accesses
        self.is_input = is_input
        self.is_output = is_output

    def __eq__(self, other):
        if not hasattr(other, "accesses"):
            return NotImplemented
        return (self.allocate_command == other.allocate_command
                and self.deallocate_command == other.deallocate_command
                and list(self.accesses) == list(other.accesses)
                and self.is_input == other.is_input and self.is_output == other.is_output)

    def __repr__(self):
        return ("MatrixAccesses(allocate_command=%d, deallocate_command=%d, accesses=%r, "
                "is_input=%r, is_output=%r)" % (self.allocate_command, self.deallocate_command,
                                                list(self.accesses), self.is_input,
                                                self.is_output))


class MatrixAccessSummary(NamedTuple):
    """Per matrix (one list entry each, index 0 included), the parts of its
    MatrixAccesses that passes ask about most: the allocating and freeing
    commands, the commands of its first, second and last access (-1 where
    there is none), and whether it is an input or an output."""

    allocate_command: list
    deallocate_command: list
    first_access: list
    second_access: list
    last_access: list
    is_input: list
    is_output: list
