"""A sum of matrix products into one output: the direct way to multiply a
layer's input when its weight matrix is cut into blocks, one per time
offset or spliced part (a TdnnComponent's offsets, a spliced input
multiplied without being built, the rows F(2, 3) leaves over).

Guarantee: ``out`` gets the products added in the order given, for NumPy
and CuPy arrays alike; each product is BLAS's, one matrix product per block
of rows, so a different scratch size can change only the last bits (where
BLAS picks another kernel for a block's shape).
"""

import numpy as np

__all__ = ["few_rows_product", "sum_of_products"]

# A NumPy product with 2 to this many rows minus one is one matrix-vector
# product per row: OpenBLAS's matrix product packs the whole weight matrix
# first, whatever the rows (256 x 4096 weights: 0.35-0.40 ms for 2 to 12
# rows, against 0.042 ms a row for matrix-vector products; AMD EPYC, Zen 4).
# Recurrent layers' steps, one row per chunk, are such products.
GEMM_MIN_ROWS = 8


def few_rows_product(xp, rows, weights, out):
    """``out = rows @ weights`` (``xp``: their array module), row by row
    where the rows are few (see :data:`GEMM_MIN_ROWS`; NumPy only): each
    row is the same sum, within float32 rounding of the matrix product."""
    if xp is np and 1 < rows.shape[0] < GEMM_MIN_ROWS:
        for i in range(rows.shape[0]):
            np.matmul(rows[i], weights, out=out[i])
    else:
        xp.matmul(rows, weights, out=out)


def sum_of_products(xp, pairs, out, overwrite=True, max_scratch_rows=None):
    """``out (+)= sum_k rows_k @ weights_k`` for ``pairs`` of ``(rows_k,
    weights_k)`` (each ``rows_k`` with ``out``'s row count; ``xp``: their
    array module). ``overwrite``: the first product is written straight
    into ``out`` (else every product is added to what is there). The
    others go through one scratch of at most ``max_scratch_rows`` rows
    (None: all of ``out``'s), a block of rows at a time."""
    rows = out.shape[0]
    if overwrite:
        first_rows, first_weights = pairs[0]
        xp.matmul(first_rows, first_weights, out=out)
        pairs = pairs[1:]
    if not pairs or rows == 0:
        return
    step = rows if max_scratch_rows is None else max(1, min(rows, max_scratch_rows))
    scratch = xp.empty((step, out.shape[1]), dtype=out.dtype)
    for part, weights in pairs:
        for start in range(0, rows, step):
            stop = min(rows, start + step)
            product = scratch[:stop - start]
            xp.matmul(part[start:stop], weights, out=product)
            out[start:stop] += product
