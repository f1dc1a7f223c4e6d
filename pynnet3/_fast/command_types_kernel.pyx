# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""The command list as bytes in C (owner and twin: ``command_type_bytes_py``
in ``pynnet3.optimize.command_types``).
"""

from cpython.long cimport PyLong_AsLongAndOverflow

from pynnet3._fast.slots cimport Slots, get_slot, slots_init

from pynnet3.compiler.computation import Command

cdef Slots _CMD     # direct slot reads of the commands (see slots.pxd)
slots_init(&_CMD, Command, ("command_type",))


def command_type_bytes(list commands):
    """bytes with one byte per command: its command type when that is an int
    in [0, 255), else 255 (a type no valid computation has)."""
    cdef Py_ssize_t n = len(commands), i
    cdef bytearray out = bytearray(n)
    cdef unsigned char* p = out
    cdef object t
    cdef long v
    cdef int overflow
    for i in range(n):
        t = get_slot(&_CMD, commands[i], 0, "command_type")
        p[i] = 255
        # (CommandType members are ints; read as C longs, not compared as
        # Python objects)
        if isinstance(t, int):
            v = PyLong_AsLongAndOverflow(t, &overflow)
            if overflow == 0 and 0 <= v < 255:
                p[i] = <unsigned char>v
    return bytes(out)
