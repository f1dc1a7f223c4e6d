"""Kaldi's element-wise float loops that call the C library.

Kaldi's ``Exp(float)`` and ``Log(float)`` are the C library's ``expf`` and
``logf`` (base/kaldi-math.h), and its vectors' ``Pow`` calls the C
library's double ``pow`` on float arguments; NumPy's float32 exp, log and
power are its own vectorized approximations, which differ from glibc's in
the last bit now and then (for power, in about one element in five). The
readable twins (``*_py``) call the C library's functions through ctypes, one
element at a time, in Kaldi's order; the Cython kernel
``pynnet3._fast.kaldi_libm_kernel`` does the same compiled and is tested
against them. The names without ``_py`` are the kernel's when it is loaded.
"""

import ctypes
import ctypes.util

import numpy as np

from .. import _fast
from ..errors import PynnetError

__all__ = ["expf", "logf", "exp_rows", "log_vector", "pow_vector", "sigmoid_rows",
           "tanh_rows", "scalar_sigmoid_rows", "scalar_tanh_rows", "log_softmax_rows",
           "softmax_rows"]

_F32 = np.float32


_C = None


def _c_functions():
    """The C library's (expf, logf, pow) through ctypes, loaded at the first
    call (finding the library runs ldconfig: a few ms every tool's start
    would pay for twins it seldom calls)."""
    global _C
    if _C is None:
        name = ctypes.util.find_library("m")
        try:
            libm = ctypes.CDLL(name)
        except OSError as e:
            raise PynnetError("cannot load the C math library (%s) for Kaldi's expf/logf: %s"
                              % (name, e)) from None
        expf_, logf_, pow_ = libm.expf, libm.logf, libm.pow
        expf_.restype, expf_.argtypes = ctypes.c_float, [ctypes.c_float]
        logf_.restype, logf_.argtypes = ctypes.c_float, [ctypes.c_float]
        pow_.restype, pow_.argtypes = ctypes.c_double, [ctypes.c_double, ctypes.c_double]
        _C = (expf_, logf_, pow_)
    return _C


def expf(x):
    """The C library's expf of a float32, as a float32."""
    return _F32(_c_functions()[0](_F32(x)))


def logf(x):
    """The C library's logf of a float32, as a float32."""
    return _F32(_c_functions()[1](_F32(x)))


def exp_rows_py(src, dest):
    """dest = expf(src) element by element (Kaldi's MatrixBase::Exp)."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dest[i, j] = expf(src[i, j])


def sigmoid_rows_py(src, dest):
    """Kaldi's VectorBase::Sigmoid: 1.0 / (1.0 + expf(-x)) for x > 0, else
    e / (e + 1.0) with e = expf(x); sum and division in double, then float."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            x = _F32(src[i, j])
            if x > 0:
                dest[i, j] = _F32(1.0 / (1.0 + float(expf(-x))))
            else:
                e = float(expf(x))
                dest[i, j] = _F32(e / (e + 1.0))


def tanh_rows_py(src, dest):
    """Kaldi's VectorBase::Tanh: e = expf(-|x|), e * e in float, then
    -1.0 + 2.0 / (1.0 + e*e) (x > 0) or 1.0 - 2.0 / (1.0 + e*e) in double,
    then float."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            x = _F32(src[i, j])
            if x > 0:
                e = expf(-x)
                dest[i, j] = _F32(-1.0 + 2.0 / (1.0 + float(_F32(e * e))))
            else:
                e = expf(x)
                dest[i, j] = _F32(1.0 - 2.0 / (1.0 + float(_F32(e * e))))


def scalar_sigmoid_rows_py(src, dest):
    """cu-math.cc's ScalarSigmoid, in float32 throughout."""
    one = _F32(1.0)
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            x = _F32(src[i, j])
            if x > 0:
                dest[i, j] = one / (one + expf(-x))
            else:
                e = expf(x)
                dest[i, j] = e / (e + one)


def scalar_tanh_rows_py(src, dest):
    """cu-math.cc's ScalarTanh, in float32 throughout."""
    one, two = _F32(1.0), _F32(2.0)
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            x = _F32(src[i, j])
            if x > 0:
                e = expf(-x)
                dest[i, j] = -one + two / (one + e * e)
            else:
                e = expf(x)
                dest[i, j] = one - two / (one + e * e)


def log_vector_py(src, dest):
    """dest = logf(src) element by element (Kaldi's VectorBase::ApplyLog)."""
    for i in range(src.shape[0]):
        dest[i] = logf(src[i])


def pow_vector_py(src, power, dest):
    """dest = float(pow(double(src), double(power))) element by element
    (Kaldi's VectorBase::Pow)."""
    c_pow = _c_functions()[2]
    for i in range(src.shape[0]):
        dest[i] = _F32(c_pow(float(src[i]), float(_F32(power))))


def _kaldi_max(row):
    """VectorBase::Max: four elements at a time (the larger of each pair,
    the second when they compare equal), then the rest; only ">" is used,
    so NaN is never the maximum; -inf for an empty or all-NaN row."""
    best = _F32(-np.inf)
    n = len(row)
    j = 0
    while j + 4 <= n:
        a1, a2, a3, a4 = row[j:j + 4]
        if a1 > best or a2 > best or a3 > best or a4 > best:
            b1 = a1 if a1 > a2 else a2
            b2 = a3 if a3 > a4 else a4
            if b1 > best:
                best = b1
            if b2 > best:
                best = b2
        j += 4
    for value in row[j:]:
        if value > best:
            best = value
    return best


def log_softmax_rows_py(src, dest):
    """Kaldi's LogSoftMaxPerRow on the CPU (VectorBase::ApplyLogSoftMax per
    row): x - max, the float32 sum of expf in order, logf of it, subtracted."""
    for i in range(src.shape[0]):
        row = np.array(src[i], dtype=_F32)
        shifted = row - _kaldi_max(row)
        total = _F32(0.0)
        for value in shifted:
            total = _F32(total + expf(value))
        dest[i] = shifted - logf(total)


def softmax_rows_py(src, dest):
    """Kaldi's SoftMaxPerRow on the CPU (VectorBase::ApplySoftMax per row):
    expf(x - max), their float32 sum in order, then times float(1.0 / sum)."""
    for i in range(src.shape[0]):
        row = np.array(src[i], dtype=_F32)
        mx = _kaldi_max(row)
        exps = np.array([expf(value - mx) for value in row], dtype=_F32)
        total = _F32(0.0)
        for value in exps:
            total = _F32(total + value)
        dest[i] = exps * _F32(1.0 / float(total))


# The kernel's loops when it is loaded (the one pynnet3._fast.load policy),
# else the twins above: the same library calls in the same order.
_kernel = _fast.load("kaldi_libm_kernel")
(exp_rows, sigmoid_rows, tanh_rows, scalar_sigmoid_rows, scalar_tanh_rows, log_vector, pow_vector,
 log_softmax_rows, softmax_rows) = _fast.select(
    _kernel, exp_rows_py, sigmoid_rows_py, tanh_rows_py, scalar_sigmoid_rows_py,
    scalar_tanh_rows_py, log_vector_py, pow_vector_py, log_softmax_rows_py, softmax_rows_py)
