# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""Copying and making the computation's records (Command, SubMatrixInfo) by
filling their slots directly (twins: ``copy_commands_py`` and
``make_submatrices_py`` in ``pynnet3.compiler.shortcut``).

The shortcut expansion copies every command of the two-sequence computation
and makes every submatrix of the expanded one; through the dataclass
``__init__`` that is about a microsecond per record. As compiler_core's
_RecordMaker does, a record of exactly the dataclass is allocated empty and
its slots are set; any other object goes through the class.
"""

from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF

from pynnet3._fast.slots cimport Py_TYPE, Slots, get_slot, slots_init

from pynnet3.compiler.computation import Command, SubMatrixInfo


cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject *type, Py_ssize_t nitems)


cdef Slots _CMD, _SUB
slots_init(&_CMD, Command, ("command_type", "arg1", "arg2", "arg3", "arg4", "arg5", "arg6",
                            "arg7", "alpha"))
slots_init(&_SUB, SubMatrixInfo, ("matrix_index", "row_offset", "num_rows", "col_offset",
                                  "num_cols"))


cdef inline PyObject **_slot(const Slots *s, object obj, int i) noexcept:
    return <PyObject **>((<char *><PyObject *>obj) + s.offset[i])


def copy_commands(list commands):
    """A new Command with the same fields for each command, in order."""
    cdef Py_ssize_t i, n = len(commands)
    cdef int k
    cdef list out = PyList_New(n)
    cdef PyObject *value
    cdef object c, new
    cdef bint direct
    for i in range(n):
        c = commands[i]
        direct = _CMD.tp != NULL and Py_TYPE(c) == _CMD.tp
        if direct:
            for k in range(9):
                if _slot(&_CMD, c, k)[0] == NULL:
                    direct = False
                    break
        if direct:
            new = PyType_GenericAlloc(_CMD.tp, 0)
            for k in range(9):
                value = _slot(&_CMD, c, k)[0]
                Py_INCREF(<object>value)
                _slot(&_CMD, new, k)[0] = value
        else:
            new = Command(c.command_type, c.arg1, c.arg2, c.arg3, c.arg4, c.arg5, c.arg6,
                          c.arg7, c.alpha)
        Py_INCREF(new)
        PyList_SET_ITEM(out, i, new)
    return out


def make_submatrices(list matrix_index, list row_offset, list num_rows, list col_offset,
                     list num_cols):
    """[SubMatrixInfo(matrix_index[i], row_offset[i], num_rows[i],
    col_offset[i], num_cols[i])] for each i (the lists have equal lengths)."""
    cdef Py_ssize_t i, n = len(matrix_index)
    if not (len(row_offset) == len(num_rows) == len(col_offset) == len(num_cols) == n):
        raise ValueError("make_submatrices: lists of different lengths")
    cdef list out = PyList_New(n)
    cdef object new, value
    cdef int k
    cdef tuple fields
    for i in range(n):
        fields = (matrix_index[i], row_offset[i], num_rows[i], col_offset[i], num_cols[i])
        if _SUB.tp != NULL:
            new = PyType_GenericAlloc(_SUB.tp, 0)
            for k in range(5):
                value = fields[k]
                Py_INCREF(value)
                _slot(&_SUB, new, k)[0] = <PyObject *>value
        else:
            new = SubMatrixInfo(*fields)
        Py_INCREF(new)
        PyList_SET_ITEM(out, i, new)
    return out
