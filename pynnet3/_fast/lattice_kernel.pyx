# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The kernel of pynnet3/decoding/lattice.py: a CompactLattice's states in
OpenFst's binary vector-FST form, in C (twin:
:func:`pynnet3.decoding.lattice.compact_lattice_states_binary_py`; the tests
compare the two byte for byte).

Per state: the final weight (graph cost, acoustic cost as float32, the
string's length as int32, then the string's int32s; +inf, +inf and an empty
string when not final), the arc count as int64, then each arc: the label
twice (input and output), its weight as above and the next state. All
little-endian, as the twin's ``struct`` formats (``<``) write them.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef inline char *put_u32(char *p, uint32_t v) noexcept:
    p[0] = <char>(v & 0xff)
    p[1] = <char>((v >> 8) & 0xff)
    p[2] = <char>((v >> 16) & 0xff)
    p[3] = <char>((v >> 24) & 0xff)
    return p + 4


cdef inline char *put_i32(char *p, int32_t v) noexcept:
    return put_u32(p, <uint32_t>v)


cdef inline char *put_f32(char *p, float v) noexcept:
    cdef uint32_t bits
    memcpy(&bits, &v, 4)
    return put_u32(p, bits)


cdef inline char *put_i64(char *p, int64_t v) noexcept:
    cdef uint64_t u = <uint64_t>v
    p = put_u32(p, <uint32_t>(u & 0xffffffffu))
    return put_u32(p, <uint32_t>(u >> 32))


cdef inline tuple as_tuple(x):
    return <tuple>x if type(x) is tuple else tuple(x)


cdef inline char *put_weight(char *p, float w1, float w2, tuple string) except NULL:
    cdef Py_ssize_t i, n = len(string)
    p = put_f32(p, w1)
    p = put_f32(p, w2)
    p = put_i32(p, <int32_t>n)
    for i in range(n):
        p = put_i32(p, <int32_t>string[i])
    return p


def compact_lattice_states_binary(arcs, final):
    """(bytes, has_epsilons, weighted): the states of a CompactLattice whose
    ``arcs[s]`` are (label, w1, w2, string, nextstate) tuples and
    ``final[s]`` (w1, w2, string) or None, as OpenFst writes them after the
    header; whether an arc has label 0; whether an arc or final weight is
    not (0, 0, empty)."""
    cdef Py_ssize_t n = len(arcs), s, size = 0
    cdef tuple arc, f
    cdef bint has_eps = False, weighted = False
    if len(final) != n:
        raise ValueError("a compact lattice with %d arc lists but %d final weights"
                         % (n, len(final)))
    for s in range(n):
        size += 12 + (4 * len(final[s][2]) if final[s] is not None else 0) + 8
        for a in arcs[s]:
            size += 8 + 12 + 4 * len(a[3]) + 4
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef char *p = PyBytes_AS_STRING(out)
    cdef char *end = p + size
    cdef float w1, w2
    cdef int32_t label
    cdef tuple string
    for s in range(n):
        if final[s] is None:
            p = put_weight(p, INFINITY, INFINITY, ())
        else:
            f = as_tuple(final[s])
            w1, w2, string = f[0], f[1], as_tuple(f[2])
            p = put_weight(p, w1, w2, string)
            if w1 != 0 or w2 != 0 or len(string):
                weighted = True
        row = arcs[s]
        p = put_i64(p, len(row))
        for a in row:
            arc = as_tuple(a)
            label = arc[0]
            w1, w2, string = arc[1], arc[2], as_tuple(arc[3])
            p = put_i32(p, label)
            p = put_i32(p, label)
            p = put_weight(p, w1, w2, string)
            p = put_i32(p, <int32_t>arc[4])
            if label == 0:
                has_eps = True
            if w1 != 0 or w2 != 0 or len(string):
                weighted = True
    if p != end:
        raise RuntimeError("compact lattice writer: %d bytes written, %d expected"
                           % (p - (end - size), size))
    return out, has_eps, weighted
