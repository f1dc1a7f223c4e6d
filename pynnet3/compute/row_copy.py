"""Kaldi's CopyRows and CopyFromMat on NumPy matrices without temporaries.

NumPy's ``dest[...] = src[rows]`` gathers the rows into a new array and
then copies it, and ``dest[...] = src`` copies through a new array whenever
the two matrices' memory ranges interleave (two column ranges of one
matrix, which the planned memory of a computation often gives). For a
network's largest matrices that temporary was a computation's peak memory
(3.5 MB of 6024-column output rows on a TDNN-F; 6.5 MB on a TDNN-LSTM).
These copy each row once, from source to destination:

- :func:`copy_rows`: ``dest[p(i)] = src[rows[i]]``, zeros where ``rows[i]``
  is negative (Kaldi's kCopyRows; with ``positions``, one group of
  kCopyRowsMulti);
- :func:`copy_matrix`: ``dest[...] = src`` (kMatrixCopy; also the weights'
  column-major copies of :mod:`pynnet3.compute.layout`, which the kernel
  moves a square tile at a time).

Each runs the Cython kernel ``pynnet3/_fast/row_copy_kernel.pyx`` when
built, else its twin ``*_py`` (NumPy's copies, with their temporaries).
Both are copies: the numbers are the source's, bit for bit. Source and
destination that really share memory (not merely interleave) are copied
through NumPy's temporary, as before: the result is always that of
copying from an untouched source.
"""

import numpy as np

from .. import _fast

__all__ = ["copy_rows", "copy_rows_py", "copy_matrix", "copy_matrix_py"]

_kernel = _fast.load("row_copy_kernel")


def _overlap(dest, src):
    # the exact test only where the memory ranges meet (about 0.5 us)
    return np.may_share_memory(dest, src) and np.shares_memory(dest, src)


def copy_rows_py(dest, src, rows, positions=None):
    """The twin of :func:`copy_rows`."""
    rows = np.asarray(rows)
    positions = np.arange(rows.shape[0]) if positions is None else np.asarray(positions)
    valid = rows >= 0
    dest[positions[valid]] = src[rows[valid]]
    dest[positions[~valid]] = 0.0


def copy_rows(dest, src, rows, positions=None):
    """``dest[positions[i]] = src[rows[i]]`` (``positions`` default: 0, 1,
    ...), and zeros in the rows whose ``rows[i]`` is negative. ``rows`` and
    ``positions`` are int64 arrays; the caller checks that they lie inside
    the matrices and that the column counts agree."""
    if _kernel is None or _overlap(dest, src):
        copy_rows_py(dest, src, rows, positions)
    else:
        _kernel.copy_rows(dest, src, rows, positions)


def copy_matrix_py(dest, src):
    """The twin of :func:`copy_matrix`."""
    dest[...] = src


def copy_matrix(dest, src):
    """``dest[...] = src`` for two float32 matrices of the same shape."""
    if _kernel is None or _overlap(dest, src):
        copy_matrix_py(dest, src)
    else:
        _kernel.copy_matrix(dest, src)
