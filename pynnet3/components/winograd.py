"""Products of a three-tap time convolution with fewer multiplications:
Winograd's minimal filtering F(2, 3).

A TDNN layer's product with three evenly spaced time offsets (an affine
layer's input spliced as ``Append(x, Offset(x, s), Offset(x, 2 s))``, or a
TdnnComponent's) is

    out[i] = sum_k x[first + k * step + i * stride] @ W_k      (k = 0, 1, 2)

with ``step`` a multiple of ``stride``. In blocks of ``b = step / stride``
output rows, ``Y_j = sum_k D_{j + k} @ W_k`` where ``D_m`` is the m-th block of
``b`` input rows: a one-dimensional convolution over blocks. F(2, 3)
computes two output blocks from 4 products instead of 6:

    M0 = (D0 - D2) W0          M1 = (D1 + D2) / 2 (W0 + W1 + W2)
    M2 = (D2 - D1) / 2 (W0 - W1 + W2)          M3 = (D1 - D3) W2
    Y0 = M0 + M1 + M2          Y1 = M1 - M2 - M3

(halving is exact in floating point, subnormal numbers aside, so it goes
with the inputs' transform, and the weights' takes one pass less).

Guarantee: in exact arithmetic the same sums; in float32 within rounding of
the direct products (the transforms add a few roundings of the inputs' and
weights' size: on the x-vector's 512 x 1536 layer the largest error against
a float64 product was 4.5e-7 of the output's scale, against 2.8e-7 direct).
The blocks are taken two at a time over as many rows as pair up; the last
rows (fewer than 2 b) get the direct products. Only for NumPy arrays, and
only where the products are large enough to gain: :func:`usable` says.

Not kept: F(2, 2) for two offsets (3 products for 4), on the TDNN-F layers.
Its transforms are as many memory passes for fewer saved products; in whole
runs it gained 7% on one run of the 1536 <-> 160 TDNN-F and nothing on
another, lost 5% on the 768 <-> 96 chain TDNN-F, and its scratch added
6-8 MB to the peak memory.
"""

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .products import sum_of_products

__all__ = ["usable", "convolution_products"]

# At least this many rows in each of the 4 products (half the output rows):
# below it BLAS's speed drops with the rows and the transforms cost more
# than the products they save (60-row x-vector blocks: no gain).
MIN_PRODUCT_ROWS = 64
# The products saved grow with input-dim x output-dim, the transforms'
# passes with input-dim + output-dim: only where
# input-dim * output-dim / (input-dim + output-dim) is at least this (the
# x-vector's 512 -> 512 layers: 256).
MIN_DIM_RATIO = 64
# The two transformed weight matrices are made for each call (kept, they
# would hold two more matrices per layer for the whole run): at most this
# many elements each. The TDNN-LSTM's 1024 x 1024 blocks (4 MB each) gained
# nothing in time and added 7 MB to the peak memory.
MAX_WEIGHT_ELEMENTS = 512 * 512
# The transformed inputs and the products of one group of tiles take at
# most this many bytes (so they stay in cache between the passes), but each
# group has at least MIN_PRODUCT_ROWS rows per product. With 8 MiB the
# x-vector's products take all their ~494 rows at once (103 GFLOPS, against
# 95 in 128-row groups with 2 MiB): 1.175 against 1.205 s in 10 pairs, 9
# faster, for 3 MB more peak memory.
_SCRATCH_BYTES = 8 << 20


def usable(offsets, stride, num_rows, input_dim, output_dim):
    """Whether :func:`convolution_products` applies and gains (for NumPy
    arrays; the caller checks that): 3 start rows ``offsets`` evenly spaced
    by ``step`` rows (a multiple of ``stride``), wide enough products
    (:data:`MIN_DIM_RATIO`) with weight blocks that are not too large
    (:data:`MAX_WEIGHT_ELEMENTS`), and enough rows."""
    if len(offsets) != 3:
        return False
    step = offsets[1] - offsets[0]
    if offsets[2] - offsets[1] != step or step <= 0 or stride <= 0 or step % stride:
        return False
    if not (MIN_DIM_RATIO * (input_dim + output_dim) <= input_dim * output_dim
            <= MAX_WEIGHT_ELEMENTS):
        return False
    block = step // stride
    return (num_rows // (2 * block)) * block >= MIN_PRODUCT_ROWS


def convolution_products(weights, source, offsets, stride, out, accumulate=False):
    """``out[i] (+)= sum_k source[offsets[k] + i stride] @ weights[k]`` for
    every row i of ``out`` (``weights``: 3 matrices of input-dim x
    output-dim; ``accumulate``: add to ``out`` instead of overwriting it).
    Requires :func:`usable`."""
    first, step = offsets[0], offsets[1] - offsets[0]
    rows, out_dim = out.shape
    d = source.shape[1]
    block = step // stride
    num_tiles = rows // (2 * block)
    # tiles per group: the group's scratch within _SCRATCH_BYTES
    row_bytes = 4 * (source.itemsize * d + out.itemsize * out_dim)
    group = max(-(-MIN_PRODUCT_ROWS // block), _SCRATCH_BYTES // (row_bytes * block))
    group = min(group, num_tiles)
    u = _transformed_weights(weights, np.result_type(source, weights[0]))
    t = np.empty((4, group * block, d), dtype=source.dtype)
    m = np.empty((4, group * block, out_dim), dtype=out.dtype)
    rs, cs = source.strides
    ors, ocs = out.strides
    for start in range(0, num_tiles, group):
        tiles = min(group, num_tiles - start)
        n = tiles * block
        origin = first + start * 2 * step
        # block q of each tile: D_q, (tiles, block, d)
        d0, d1, d2, d3 = [as_strided(source[origin + q * step:], shape=(tiles, block, d),
                                     strides=(2 * step * rs, stride * rs, cs))
                          for q in range(4)]
        t0, t1, t2, t3 = [t[q, :n].reshape(tiles, block, d) for q in range(4)]
        np.subtract(d0, d2, out=t0)
        np.add(d1, d2, out=t1)
        t1 *= 0.5
        np.subtract(d2, d1, out=t2)
        t2 *= 0.5
        np.subtract(d1, d3, out=t3)
        for q in range(4):
            np.matmul(t[q, :n], u[q], out=m[q, :n])
        m0, m1, m2, m3 = [m[q, :n].reshape(tiles, block, out_dim) for q in range(4)]
        # output blocks 2 j and 2 j + 1 of each tile: (tiles, block, out_dim)
        base = out[start * 2 * block:]
        even = as_strided(base, shape=(tiles, block, out_dim), strides=(2 * block * ors, ors, ocs))
        odd = as_strided(base[block:], shape=(tiles, block, out_dim),
                         strides=(2 * block * ors, ors, ocs))
        if accumulate:
            even += m0
            even += m1
            even += m2
            odd += m1
            odd -= m2
            odd -= m3
        else:
            np.add(m0, m1, out=even)
            even += m2
            np.subtract(m1, m2, out=odd)
            odd -= m3
    done = num_tiles * 2 * block
    if done < rows:
        _direct(weights, source, [o + done * stride for o in offsets], stride, out[done:],
                accumulate)


def _transformed_weights(weights, dtype):
    """The 4 weight matrices of the products (see the module docstring); the
    sums in ``dtype``, the products' precision."""
    plus = np.add(weights[0], weights[2], dtype=dtype)
    minus = np.subtract(plus, weights[1])
    plus += weights[1]
    return [weights[0], plus, minus, weights[2]]


def _direct(weights, source, offsets, stride, out, accumulate):
    """The same products, one per offset (the rows that do not pair up)."""
    rows = out.shape[0]
    parts = [source[start:start + stride * (rows - 1) + 1:stride] for start in offsets]
    sum_of_products(np, list(zip(parts, weights)), out, overwrite=not accumulate)
