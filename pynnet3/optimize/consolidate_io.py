"""Kaldi's ConsolidateIoOperations (nnet-optimize.cc).

Within each segment of a computation (the commands between kNoOperationMarker
commands), every kAcceptInput moves to the start and every kProvideOutput to
the end, each group keeping its relative order, and the markers stay where
they were. The executor relies on this: inputs are accepted before anything
reads them and outputs are handed over only once they are final.
"""

from ..compile.computation import CommandType as C


def consolidate_io_operations(nnet, computation):
    """Reorders ``computation.commands`` in place (see the module docstring)."""
    reordered = []
    left, middle, right = [], [], []
    marker, accept, provide = (int(C.kNoOperationMarker), int(C.kAcceptInput),
                               int(C.kProvideOutput))
    for c in computation.commands:
        t = c.command_type
        if t == marker:
            reordered += left + middle + right
            reordered.append(c)
            left, middle, right = [], [], []
        elif t == accept:
            left.append(c)
        elif t == provide:
            right.append(c)
        else:
            middle.append(c)
    reordered += left + middle + right
    computation.commands = reordered
