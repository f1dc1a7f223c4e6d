# cython: boundscheck=False, wraparound=False, cdivision=True
"""Kaldi's element-wise float loops that call the C library (expf, logf, pow),
compiled: the same glibc functions Kaldi's binaries call, in Kaldi's order.

Twin: :mod:`pynnet3.numerics.kaldi_libm` (the same calls through ctypes).
Arrays are float32 with contiguous rows; callers check shapes.
"""

from libc.math cimport INFINITY, expf, logf, pow


def exp_rows(const float[:, :] src, float[:, :] dest):
    """dest = expf(src) element by element (Kaldi's MatrixBase::Exp)."""
    cdef Py_ssize_t i, j
    if src.shape[0] != dest.shape[0] or src.shape[1] != dest.shape[1]:
        raise ValueError("exp_rows: shapes differ")
    with nogil:
        for i in range(src.shape[0]):
            for j in range(src.shape[1]):
                dest[i, j] = expf(src[i, j])


def sigmoid_rows(const float[:, :] src, float[:, :] dest):
    """Kaldi's VectorBase::Sigmoid (no MKL): for x > 0, 1.0 / (1.0 +
    expf(-x)), else e / (e + 1.0) with e = expf(x); the division and the sum
    are in double (Kaldi writes 1.0, a double), rounded to float once."""
    cdef Py_ssize_t i, j
    cdef float x, e
    if src.shape[0] != dest.shape[0] or src.shape[1] != dest.shape[1]:
        raise ValueError("sigmoid_rows: shapes differ")
    with nogil:
        for i in range(src.shape[0]):
            for j in range(src.shape[1]):
                x = src[i, j]
                if x > 0.0:
                    dest[i, j] = <float>(1.0 / (1.0 + <double>expf(-x)))
                else:
                    e = expf(x)
                    dest[i, j] = <float>(<double>e / (<double>e + 1.0))


def tanh_rows(const float[:, :] src, float[:, :] dest):
    """Kaldi's VectorBase::Tanh (no MKL): with e = expf(-|x|), e * e in
    float, then -1.0 + 2.0 / (1.0 + e*e) for x > 0 (1.0 - ... otherwise) in
    double, rounded to float once."""
    cdef Py_ssize_t i, j
    cdef float x, e, e2
    if src.shape[0] != dest.shape[0] or src.shape[1] != dest.shape[1]:
        raise ValueError("tanh_rows: shapes differ")
    with nogil:
        for i in range(src.shape[0]):
            for j in range(src.shape[1]):
                x = src[i, j]
                if x > 0.0:
                    e = expf(-x)
                    e2 = e * e
                    dest[i, j] = <float>(-1.0 + 2.0 / (1.0 + <double>e2))
                else:
                    e = expf(x)
                    e2 = e * e
                    dest[i, j] = <float>(1.0 - 2.0 / (1.0 + <double>e2))


def scalar_sigmoid_rows(const float[:, :] src, float[:, :] dest):
    """cu-math.cc's ScalarSigmoid (the CPU LSTM/GRU kernels' sigmoid), all in
    float: 1 / (1 + expf(-x)) for x > 0, else e / (e + 1) with e = expf(x)."""
    cdef Py_ssize_t i, j
    cdef float x, e, one = 1.0
    if src.shape[0] != dest.shape[0] or src.shape[1] != dest.shape[1]:
        raise ValueError("scalar_sigmoid_rows: shapes differ")
    with nogil:
        for i in range(src.shape[0]):
            for j in range(src.shape[1]):
                x = src[i, j]
                if x > 0:
                    e = expf(-x)
                    dest[i, j] = one / (one + e)
                else:
                    e = expf(x)
                    dest[i, j] = e / (e + one)


def scalar_tanh_rows(const float[:, :] src, float[:, :] dest):
    """cu-math.cc's ScalarTanh, all in float: with e = expf(-|x|),
    -1 + 2 / (1 + e*e) for x > 0, else 1 - 2 / (1 + e*e)."""
    cdef Py_ssize_t i, j
    cdef float x, e, e2, q, one = 1.0, two = 2.0
    if src.shape[0] != dest.shape[0] or src.shape[1] != dest.shape[1]:
        raise ValueError("scalar_tanh_rows: shapes differ")
    with nogil:
        for i in range(src.shape[0]):
            for j in range(src.shape[1]):
                x = src[i, j]
                if x > 0:
                    e = expf(-x)
                    e2 = e * e
                    q = two / (one + e2)
                    dest[i, j] = -one + q
                else:
                    e = expf(x)
                    e2 = e * e
                    q = two / (one + e2)
                    dest[i, j] = one - q


def log_vector(const float[:] src, float[:] dest):
    """dest = logf(src) element by element (Kaldi's VectorBase::ApplyLog,
    without its check for negative values, which callers make)."""
    cdef Py_ssize_t i
    if src.shape[0] != dest.shape[0]:
        raise ValueError("log_vector: sizes differ")
    with nogil:
        for i in range(src.shape[0]):
            dest[i] = logf(src[i])


def pow_vector(const float[:] src, float power, float[:] dest):
    """dest = pow(src, power) element by element as Kaldi's VectorBase::Pow
    computes it: the unqualified ``pow`` there is the C library's double
    ``pow`` (no float overload is in scope), rounded to float."""
    cdef Py_ssize_t i
    if src.shape[0] != dest.shape[0]:
        raise ValueError("pow_vector: sizes differ")
    with nogil:
        for i in range(src.shape[0]):
            dest[i] = <float>pow(<double>src[i], <double>power)


cdef inline float _kaldi_max(const float[:, :] src, Py_ssize_t i) noexcept nogil:
    """VectorBase::Max of row i: four at a time, then the rest; only ">" is
    used, so NaN never becomes the maximum and of -0 and +0 the pair logic
    keeps Kaldi's pick."""
    cdef Py_ssize_t j = 0, n = src.shape[1]
    cdef float mx = -INFINITY, a1, a2, a3, a4, b1, b2
    while j + 4 <= n:
        a1 = src[i, j]
        a2 = src[i, j + 1]
        a3 = src[i, j + 2]
        a4 = src[i, j + 3]
        if a1 > mx or a2 > mx or a3 > mx or a4 > mx:
            b1 = a1 if a1 > a2 else a2
            b2 = a3 if a3 > a4 else a4
            if b1 > mx:
                mx = b1
            if b2 > mx:
                mx = b2
        j += 4
    while j < n:
        if src[i, j] > mx:
            mx = src[i, j]
        j += 1
    return mx


def log_softmax_rows(const float[:, :] src, float[:, :] dest):
    """Kaldi's CuMatrixBase::LogSoftMaxPerRow on the CPU: for each row, its
    maximum (VectorBase::Max), x - max rounded, the float sum of expf of
    those in order, logf of the sum, and x - max - log-sum rounded again
    (VectorBase::ApplyLogSoftMax). ``dest`` may be ``src``."""
    cdef Py_ssize_t i, j, n = src.shape[1]
    cdef float mx, total
    if src.shape[0] != dest.shape[0] or src.shape[1] != dest.shape[1]:
        raise ValueError("log_softmax_rows: shapes differ")
    with nogil:
        for i in range(src.shape[0]):
            mx = _kaldi_max(src, i)
            total = 0.0
            for j in range(n):
                dest[i, j] = src[i, j] - mx
                total = total + expf(dest[i, j])
            total = logf(total)
            for j in range(n):
                dest[i, j] = dest[i, j] - total


def softmax_rows(const float[:, :] src, float[:, :] dest):
    """Kaldi's CuMatrixBase::SoftMaxPerRow on the CPU (VectorBase::
    ApplySoftMax per row): expf(x - max) stored, their float sum in order,
    then every element times float(1.0 / sum) (the division in double, the
    scaling a single float multiply, as sscal). ``dest`` may be ``src``."""
    cdef Py_ssize_t i, j, n = src.shape[1]
    cdef float mx, total, scale
    if src.shape[0] != dest.shape[0] or src.shape[1] != dest.shape[1]:
        raise ValueError("softmax_rows: shapes differ")
    with nogil:
        for i in range(src.shape[0]):
            mx = _kaldi_max(src, i)
            total = 0.0
            for j in range(n):
                dest[i, j] = expf(src[i, j] - mx)
                total = total + dest[i, j]
            scale = <float>(1.0 / <double>total)
            for j in range(n):
                dest[i, j] = dest[i, j] * scale
