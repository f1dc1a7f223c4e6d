# cython: language_level=3
"""Filling a Python list made by ``PyList_New(n)`` (its slots still empty)
from C, without the generic item assignment (shared as inline C by the
compiler and steps kernels, which build such lists once per step or
command)."""

from cpython.list cimport PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM


cdef inline void set_pair_item(list out, Py_ssize_t i, object a, object b):
    """``out[i] = (a, b)`` for an empty slot ``i`` of ``out``."""
    cdef tuple t = PyTuple_New(2)
    Py_INCREF(a)
    PyTuple_SET_ITEM(t, 0, a)
    Py_INCREF(b)
    PyTuple_SET_ITEM(t, 1, b)
    Py_INCREF(t)
    PyList_SET_ITEM(out, i, t)
