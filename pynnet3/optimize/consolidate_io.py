"""Kaldi's ConsolidateIoOperations (nnet-optimize.cc).

Within each segment of a computation (the commands between kNoOperationMarker
commands), every kAcceptInput moves to the start and every kProvideOutput to
the end, each group keeping its relative order, and the markers stay where
they were. The executor relies on this: inputs are accepted before anything
reads them and outputs are handed over only once they are final.
"""

import numpy as np

from ..compiler.computation import CommandType as C
from .command_types import command_type_bytes


def consolidate_io_operations(nnet, computation):
    """Reorders ``computation.commands`` in place (see the module docstring)."""
    commands = computation.commands
    types = np.frombuffer(command_type_bytes(commands), dtype=np.uint8)
    is_marker = types == int(C.kNoOperationMarker)
    # Sort key: segment, then 0 for inputs, 1 for the rest, 2 for outputs; a
    # marker (segment = markers before it) is last in its segment by
    # position, so with key 2 the stable sort keeps it after the outputs.
    segment = np.cumsum(is_marker) - is_marker
    group = np.ones(len(types), dtype=np.int64)
    group[types == int(C.kAcceptInput)] = 0
    group[(types == int(C.kProvideOutput)) | is_marker] = 2
    order = np.argsort(segment * 3 + group, kind="stable")
    if (order[1:] > order[:-1]).all():
        return      # already in that order
    computation.commands = [commands[i] for i in order.tolist()]
