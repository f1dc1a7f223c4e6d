# Reading fields of the computation's __slots__ dataclass records (Command,
# SubMatrixInfo, MatrixInfo) straight from their slots, for the optimizer's
# kernels that visit every command or submatrix several times per
# optimization. A slot read is a pointer load; ``obj.field`` from Cython goes
# through the generic attribute lookup (type MRO, member descriptor), which
# profiles showed as a fifth of the analysis' time. Used only on instances
# of exactly the class the offsets were taken from, else (a subclass, another
# type, an unset slot) the field is read by name, so the result is always
# what ``getattr`` gives. compiler_core's _RecordMaker writes slots the same
# way.

from cpython.object cimport PyObject, PyTypeObject


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    PyTypeObject *Py_TYPE(object)


ctypedef struct Slots:
    PyTypeObject *tp        # NULL: always read by name
    Py_ssize_t offset[9]


cdef inline int slots_init(Slots *s, object cls, tuple names) except -1:
    """Takes the slot offsets of ``names`` (at most 9) in ``cls``; leaves
    ``s`` reading by name unless every one is a plain member slot."""
    cdef int i
    s.tp = NULL
    if len(names) > 9:
        raise ValueError("at most 9 slots")
    for i in range(len(names)):
        descr = cls.__dict__.get(names[i])
        if descr is None or type(descr).__name__ != "member_descriptor":
            return 0
        s.offset[i] = (<PyMemberDescrObject *>descr).d_member.offset
    s.tp = <PyTypeObject *>cls
    return 0


cdef inline object get_slot(const Slots *s, object obj, int i, str name):
    """``getattr(obj, name)``, where ``name`` is field ``i`` of ``s``."""
    cdef PyObject *p
    if s.tp != NULL and Py_TYPE(obj) == s.tp:
        p = (<PyObject **>((<char *><PyObject *>obj) + s.offset[i]))[0]
        if p != NULL:
            return <object>p
    return getattr(obj, name)
