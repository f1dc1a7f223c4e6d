"""Element-wise passes fused into one, for the default (NumPy) arithmetic.

Kaldi runs a TDNN layer's bias, ReLU and test-mode batch norm as three
passes over the layer's output, and the scaled bypass of a TDNN-F layer
(``Sum(Scale(0.66, a), b)``) as a scaled copy then an addition; these do
each in one pass:

- :func:`bias_relu_scale_offset`: ``m = max(m + bias, 0) * scale + offset``
  in place (each of bias, scale, offset optional; max(v, 0) keeps NaN and
  gives +0 for every v <= 0, as NumPy's ``maximum(v, +0)`` on x86-64);
- :func:`scaled_copy_add`: ``dest = alpha * src[rows] + beta * add``.

Each runs the Cython kernel ``pynnet3/_fast/fused_elementwise_kernel.pyx`` when
built, else its twin ``*_py`` here, NumPy operations in the same order
with the same float32 roundings: kernel and twin give the same bits, and
both give the bits of the unfused NumPy passes they replace. Matrices are
float32 NumPy arrays whose rows are contiguous (a column range of a wider
matrix is fine); a matrix that is not runs the twin.
"""

import numpy as np

from .. import _fast
from ..errors import ComputationError

__all__ = ["bias_relu_scale_offset", "bias_relu_scale_offset_py", "scaled_copy_add",
           "scaled_copy_add_py"]

_kernel = _fast.load("fused_elementwise_kernel")
_F32 = np.float32


def _rows_contiguous(*mats):
    return all(m.dtype == _F32 and (m.shape[1] <= 1 or m.strides[1] == 4) for m in mats)


def _vector(v, cols, what):
    if v is None:
        return None
    v = np.ascontiguousarray(v, dtype=_F32)
    if v.shape != (cols,):
        raise ComputationError("fused pass: %s has dimension %d, the matrix %d columns"
                               % (what, v.shape[0] if v.ndim == 1 else -1, cols))
    return v


def bias_relu_scale_offset_py(mat, bias=None, scale=None, offset=None):
    """The twin: NumPy passes in the kernel's order."""
    if bias is not None:
        mat += bias
    # max(v, 0) as NumPy's maximum(v, +0) gives it on x86-64: NaN stays,
    # positive values stay, the rest (negatives, -0, +0) becomes +0
    np.copyto(mat, _F32(0.0), where=~((mat > 0) | np.isnan(mat)))
    if scale is not None:
        mat *= scale
    if offset is not None:
        mat += offset


def bias_relu_scale_offset(mat, bias=None, scale=None, offset=None):
    """``mat = max(mat + bias, 0) * scale + offset`` in place, one pass
    (a None vector is left out: no bias, no scale, no offset)."""
    cols = mat.shape[1]
    bias, scale, offset = (_vector(bias, cols, "bias"), _vector(scale, cols, "scale"),
                           _vector(offset, cols, "offset"))
    if _kernel is None or not _rows_contiguous(mat):
        bias_relu_scale_offset_py(mat, bias, scale, offset)
    else:
        _kernel.bias_relu_scale_offset(mat, bias, scale, offset)


def scaled_copy_add_py(dest, src, rows, alpha, add, beta):
    """The twin: NumPy passes in the kernel's order."""
    alpha, beta = _F32(alpha), _F32(beta)
    part = src if rows is None else src[rows]
    if alpha != 1:
        part = part * alpha
    other = add if beta == 1 else add * beta
    np.add(part, other, out=dest)


def scaled_copy_add(dest, src, rows, alpha, add, beta):
    """``dest[i] = alpha * src[rows[i]] + beta * add[i]`` (``rows`` None:
    ``src[i]``), one pass. ``src`` may be ``dest`` itself when ``rows`` is
    None; ``add`` must not overlap ``dest``; ``rows`` holds valid rows of
    ``src`` (no -1)."""
    n, cols = dest.shape
    if add.shape != dest.shape or src.shape[1] != cols or (
            rows is None and src.shape[0] != n) or (rows is not None and rows.shape != (n,)):
        raise ComputationError("fused pass: cannot add a %dx%d matrix and %s rows of a %dx%d "
                               "matrix into a %dx%d one" % (add.shape + (
                                   n if rows is None else rows.shape[0],) + src.shape
                                   + dest.shape))
    if rows is not None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if n and (rows.min() < 0 or rows.max() >= src.shape[0]):
            raise ComputationError("fused pass: row index out of range for a source of %d "
                                   "rows" % src.shape[0])
    if _kernel is None or not _rows_contiguous(dest, src, add):
        scaled_copy_add_py(dest, src, rows, alpha, add, beta)
    else:
        _kernel.scaled_copy_add(dest, src, rows, alpha, add, beta)
