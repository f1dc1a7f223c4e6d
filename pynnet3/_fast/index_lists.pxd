# cython: language_level=3
"""Reading Index lists into C vectors, and the small integer helpers the
index-list kernels of non-simple components share (shared as inline C by
convolution_computation_kernel, statistics_kernel, dropout_kernel and
backprop_truncation_kernel).

The contract of those kernels: every function takes lists of (n, t, x) tuples (Index objects) and
returns exactly what its Python twin returns, or ``None`` when the input is
anything but the ordinary case (an Index that is not a 3-tuple of ints, a
value outside the packable range, an empty list, indexes the twin would
reject). On ``None`` the caller runs the Python twin, which gives the result
or raises the descriptive ComputationError. A test compares each kernel
with its twin on random inputs.
"""

cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport int64_t
from libcpp.algorithm cimport lower_bound
from libcpp.vector cimport vector

cdef extern from *:
    """
    #define PYNNET3_TWO32 ((long long)4294967296LL)
    """
    const int64_t TWO32 "PYNNET3_TWO32"   # 2^32: (n, x) keys are n * TWO32 + x


cdef extern from *:
    """
    /* An exact int as a C long long: the one-digit fast path of CPython's
       int layout (|v| < 2^30), else PyLong_AsLongLongAndOverflow. Returns 0
       if v is not an exact int or does not fit. */
    static CYTHON_INLINE int pynnet3_exact_int(PyObject *v, long long *out) {
        int overflow = 0;
        long long value;
        if (!PyLong_CheckExact(v)) return 0;
    #if PY_VERSION_HEX >= 0x030C0000
        if (PyUnstable_Long_IsCompact((PyLongObject *)v)) {
            *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
            return 1;
        }
    #else
        {
            Py_ssize_t size = Py_SIZE(v);
            if (size == 0) { *out = 0; return 1; }
            if (size == 1) { *out = (long long)((PyLongObject *)v)->ob_digit[0]; return 1; }
            if (size == -1) { *out = -(long long)((PyLongObject *)v)->ob_digit[0]; return 1; }
        }
    #endif
        value = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow != 0 || (value == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
        *out = value;
        return 1;
    }
    """
    bint pynnet3_exact_int(object v, long long *out) noexcept


cdef inline bint read_int32(object v, int64_t *out) noexcept:
    """``v`` as an int in int32 range; False if it is anything else (the
    caller falls back to Python)."""
    cdef long long value
    if not pynnet3_exact_int(v, &value) or value < -2147483648 or value > 2147483647:
        return False
    out[0] = value
    return True


cdef inline int read_indexes(list indexes, vector[int64_t] &ns, vector[int64_t] &ts,
                      vector[int64_t] &xs) except -1:
    """Fills ns/ts/xs from a list of (n, t, x) tuples; returns 0, or 1 if an
    item is not a 3-tuple of ints in int32 range (the caller falls back)."""
    cdef Py_ssize_t i, size = PyList_GET_SIZE(indexes)
    cdef object item
    ns.resize(size)
    ts.resize(size)
    xs.resize(size)
    for i in range(size):
        item = <object>PyList_GET_ITEM(indexes, i)
        if not PyTuple_Check(item) or PyTuple_GET_SIZE(item) != 3:
            return 1
        if not (read_int32(<object>PyTuple_GET_ITEM(item, 0), &ns[i])
                and read_int32(<object>PyTuple_GET_ITEM(item, 1), &ts[i])
                and read_int32(<object>PyTuple_GET_ITEM(item, 2), &xs[i])):
            return 1
    return 0


cdef inline int64_t nx_key(int64_t n, int64_t x) noexcept nogil:
    """(n, x) as one int64 whose order is the tuple order (both in int32 range)."""
    return n * TWO32 + x


cdef inline Py_ssize_t lower_bound_key(vector[int64_t] &sorted_keys, int64_t key) noexcept nogil:
    """Where ``key`` goes in ``sorted_keys``: the position of the first key not less than it."""
    return lower_bound(sorted_keys.begin(), sorted_keys.end(), key) - sorted_keys.begin()


cdef inline Py_ssize_t find_key(vector[int64_t] &sorted_keys, int64_t key) noexcept nogil:
    """Position of ``key`` in ``sorted_keys`` (binary search), or -1."""
    cdef Py_ssize_t lo = lower_bound_key(sorted_keys, key)
    if lo < <Py_ssize_t>sorted_keys.size() and sorted_keys[lo] == key:
        return lo
    return -1


@cython.cdivision(True)
cdef inline int64_t gcd(int64_t a, int64_t b) noexcept nogil:
    """gcd of non-negative a, b (C division is exact for them)."""
    cdef int64_t r
    while b != 0:
        r = a % b
        a = b
        b = r
    return a


@cython.cdivision(True)
cdef inline int64_t c_mod(int64_t a, int64_t b) noexcept nogil:
    """a % b for a >= 0, b > 0."""
    return a % b


@cython.cdivision(True)
cdef inline int64_t c_div(int64_t a, int64_t b) noexcept nogil:
    """a // b for a >= 0, b > 0."""
    return a // b
