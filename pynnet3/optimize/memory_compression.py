"""Memory compression between the forward and backward pass: Kaldi's
OptimizeMemoryCompression (MemoryCompressionOptimizer, nnet-optimize-utils.cc).

In training, many forward values stay allocated only because the backward
pass reads them once, much later. This pass compresses such a matrix right
after its last forward access and decompresses it right before its first
backward access (kCompressMatrix / kDecompressMatrix around the
kNoOperationMarker that separates the passes):

- level >= 1: a matrix read only by one kBackprop of a
  RectifiedLinearComponent in the backward pass keeps just its sign (uint8,
  range 0); ReLU's backprop needs nothing else, so results are unchanged;
- level >= 2: any other matrix accessed in both passes is stored as int16 in
  [-10, 10] (values are then slightly perturbed; exact zeros stay zero);
- level 3 adds nothing beyond level 2 (as in Kaldi).

Matrices that are outputs of the computation are never compressed. Looped
computations (ending in kGotoLabel), computations without a backward pass and
computations with more than one kNoOperationMarker are left unchanged. Kaldi
executes the compression only on a GPU; pynnet3's NnetComputer executes it on
every backend with Kaldi's CuCompressedMatrix arithmetic.
"""

import logging

import numpy as np

from ..compiler.computation import Command
from ..compiler.computation import CommandType as C
from .analysis import Analyzer, kReadAccess, matrix_access_summary
from .command_types import command_type_bytes
from .computation_edit import get_whole_submatrices, insert_commands

log = logging.getLogger(__name__)

# Kaldi's CuCompressedMatrixType values.
kCompressedMatrixInt8 = 1
kCompressedMatrixUint8 = 2
kCompressedMatrixInt16 = 3
kCompressedMatrixUint16 = 4


class MemoryCompressionOptimizer:
    """Kaldi's MemoryCompressionOptimizer; use
    :func:`optimize_memory_compression`."""

    def __init__(self, nnet, memory_compression_level, middle_command, computation):
        self.nnet = nnet
        self.memory_compression_level = memory_compression_level
        self.middle_command = middle_command
        self.computation = computation
        self.compress_info = []   # (m, forward command, backward command, type, range, truncate)

    def optimize(self):
        self.analyzer = Analyzer()
        self.analyzer.init(self.nnet, self.computation)
        # Only a matrix accessed on both sides of the marker, and not an
        # output, can be compressed; the summary finds those without building
        # every matrix's access list.
        summary = matrix_access_summary(self.analyzer.matrix_accesses)
        middle = self.middle_command
        first, last, is_output = summary.first_access, summary.last_access, summary.is_output
        for m in range(1, len(self.computation.matrices)):
            if not is_output[m] and first[m] != -1 and first[m] < middle <= last[m]:
                self.process_matrix(m)
        if self.compress_info:
            self.modify_computation()

    def process_matrix(self, m):
        matrix_accesses = self.analyzer.matrix_accesses[m]
        if matrix_accesses.is_output:
            return
        accesses = matrix_accesses.accesses
        middle = self.middle_command
        pos = next((i for i, a in enumerate(accesses) if a.command_index >= middle),
                   len(accesses))
        if pos == len(accesses) or pos == 0:
            return    # not accessed in both passes
        backward, forward = accesses[pos], accesses[pos - 1]
        backward_is_last = pos + 1 == len(accesses)
        command = self.computation.commands[backward.command_index]
        if (self.memory_compression_level >= 1 and backward_is_last
                and backward.access_type == kReadAccess
                and command.command_type == C.kBackprop
                and self.nnet.components[command.arg1].type_name == "RectifiedLinearComponent"):
            self.compress_info.append((m, forward.command_index, backward.command_index,
                                       kCompressedMatrixUint8, 0.0, True))
            return
        if self.memory_compression_level >= 2:
            self.compress_info.append((m, forward.command_index, backward.command_index,
                                       kCompressedMatrixInt16, 10.0, True))

    def modify_computation(self):
        whole = get_whole_submatrices(self.computation)
        pairs = []
        for m, forward, backward, ctype, range_, truncate in self.compress_info:
            s = whole[m]
            pairs.append((forward + 1, Command(C.kCompressMatrix, s, ctype, 1 if truncate else 0,
                                               alpha=range_)))
            pairs.append((backward, Command(C.kDecompressMatrix, s)))
        insert_commands(self.computation, pairs)


def optimize_memory_compression(nnet, memory_compression_level, computation):
    """Kaldi's OptimizeMemoryCompression (see the module docstring)."""
    commands = computation.commands
    if memory_compression_level == 0 or not commands:
        return
    if commands[-1].command_type == C.kGotoLabel:
        return
    types = np.frombuffer(command_type_bytes(commands), dtype=np.uint8)
    markers = np.flatnonzero(types == int(C.kNoOperationMarker)).tolist()
    if not markers:
        return
    if len(markers) > 1:
        log.warning("Found more than one command of type kNoOperationMarker in non-looped "
                    "computation.")
        return
    # Only a matrix accessed after the marker, and not an output, can be
    # compressed; when everything after it only frees matrices or hands over
    # outputs (an inference computation), none is, and the analysis that
    # would find that is not needed.
    if np.isin(types[markers[0] + 1:], _NOTHING_TO_COMPRESS_AFTER).all():
        return
    MemoryCompressionOptimizer(nnet, memory_compression_level, markers[0],
                               computation).optimize()


_NOTHING_TO_COMPRESS_AFTER = np.array([int(C.kDeallocMatrix), int(C.kProvideOutput),
                                       int(C.kNoOperation), int(C.kNoOperationPermanent),
                                       int(C.kNoOperationMarker), int(C.kNoOperationLabel)],
                                      dtype=np.uint8)
