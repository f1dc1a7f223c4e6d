"""The command list as bytes: one byte per command, its CommandType. Passes
and the ComputationChecker ask where commands of some types are with
``bytes.find`` or a NumPy table lookup over these bytes instead of an
interpreted loop over every command (the last forward/backward marker, any
compression at all, the commands a pass rewrites).
"""

import numpy as np

from .. import _fast

__all__ = ["command_type_bytes", "commands_of_types"]


def command_type_bytes_py(commands):
    """bytes with one byte per command: its command type when that is an int
    in [0, 255), else 255 (a type no valid computation has). The twin of
    ``pynnet3/_fast/command_types_kernel.pyx``."""
    return bytes(c.command_type if isinstance(c.command_type, int)
                 and 0 <= c.command_type < 255 else 255 for c in commands)


# The kernel's when it is loaded (the one pynnet3._fast.load policy), else the twin.
_kernel = _fast.load("command_types_kernel")
command_type_bytes = _kernel.command_type_bytes if _kernel is not None else command_type_bytes_py


def commands_of_types(computation, command_types):
    """Indexes, in order, of the commands whose type is one of
    ``command_types``. The types are scanned as bytes (one compiled pass over
    the commands, then a NumPy table lookup), so a pass that only touches a
    few kinds of commands does not visit every command in Python."""
    if not command_types:
        return []
    types = np.frombuffer(command_type_bytes(computation.commands), dtype=np.uint8)
    wanted = np.zeros(256, dtype=bool)
    wanted[[int(t) for t in command_types]] = True
    return np.flatnonzero(wanted[types]).tolist()
