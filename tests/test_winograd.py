"""Three-tap time convolutions by Winograd's minimal filtering F(2, 3)
(pynnet3.components.winograd): the same sums as the direct products within
float32 rounding, for every row geometry the callers give it (shifted
splices: stride 1; TdnnComponent: strides from time subsampling, blocks of
interleaved sequences), overwriting or adding, on strided views; and the
TdnnComponent and the x-vector's spliced layers take it."""

import numpy as np
import pytest

from kaldi_component_cases import component_from_line
from pynnet3.components import winograd
from pynnet3.components.tdnn import TdnnComponentPrecomputedIndexes


def _reference(weights, source, first, step, stride, rows, initial=None):
    out = np.zeros((rows, weights[0].shape[1])) if initial is None else initial.astype(np.float64)
    for k, w in enumerate(weights):
        start = first + k * step
        part = source[start:start + stride * (rows - 1) + 1:stride]
        out = out + part.astype(np.float64) @ w.astype(np.float64)
    return out


@pytest.mark.parametrize("step,stride", [(1, 1), (2, 1), (3, 1), (3, 3), (6, 3), (4, 2)])
@pytest.mark.parametrize("rows", [256, 301, 1001])
@pytest.mark.parametrize("accumulate", [False, True])
def test_products_are_the_direct_sums(step, stride, rows, accumulate):
    rng = np.random.default_rng(rows + 7 * step + stride)
    d, out_dim, first = 130, 150, 5
    # the source is a column block of a wider matrix, the output too: strided rows
    wide = rng.standard_normal((first + 2 * step + (rows - 1) * stride + 1, d + 20))
    source = wide.astype(np.float32)[:, 10:10 + d]
    weights = [rng.standard_normal((d, out_dim)).astype(np.float32) for _ in range(3)]
    initial = rng.standard_normal((rows, out_dim)).astype(np.float32)
    holder = np.full((rows, out_dim + 3), np.nan, np.float32)
    out = holder[:, 1:1 + out_dim]
    out[...] = initial
    offsets = [first, first + step, first + 2 * step]
    assert winograd.usable(offsets, stride, rows, d, out_dim)
    winograd.convolution_products(weights, source, offsets, stride, out,
                                  accumulate=accumulate)
    expected = _reference(weights, source, first, step, stride, rows,
                          initial if accumulate else None)
    scale = np.abs(expected).max()
    assert np.abs(out - expected).max() < 2e-6 * scale
    # nothing outside the output block was written
    assert np.isnan(holder[:, 0]).all() and np.isnan(holder[:, 1 + out_dim:]).all()


def test_scratch_groups_and_remainder_rows():
    """More tiles than one scratch group holds, and rows that do not pair up."""
    rng = np.random.default_rng(3)
    d = out_dim = 256
    step, rows = 3, 2 * 3 * 700 + 5          # 700 tiles of 2 blocks, 5 rows left
    assert winograd._SCRATCH_BYTES // (16 * (d + out_dim) * step) < 700   # float32
    source = rng.standard_normal((2 * step + rows, d)).astype(np.float32)
    weights = [rng.standard_normal((d, out_dim)).astype(np.float32) for _ in range(3)]
    out = np.full((rows, out_dim), np.nan, np.float32)
    winograd.convolution_products(weights, source, [0, step, 2 * step], 1, out)
    expected = _reference(weights, source, 0, step, 1, rows)
    assert np.abs(out - expected).max() < 2e-6 * np.abs(expected).max()


def test_float64_operands_stay_float64():
    """An API user's float64 input and output (float32 weights) are
    transformed and multiplied in float64, as the direct products would be."""
    rng = np.random.default_rng(4)
    rows, d, out_dim = 300, 140, 130
    source = rng.standard_normal((rows + 4, d))
    weights = [rng.standard_normal((d, out_dim)).astype(np.float32) for _ in range(3)]
    out = np.empty((rows, out_dim))
    winograd.convolution_products(weights, source, [0, 2, 4], 1, out)
    expected = _reference(weights, source, 0, 2, 1, rows)
    assert np.abs(out - expected).max() < 1e-12 * np.abs(expected).max()


@pytest.mark.parametrize("args,why", [
    (([0, 1], 1, 1000, 512, 512), "two offsets"),
    (([0, 1, 3], 1, 1000, 512, 512), "offsets not evenly spaced"),
    (([4, 2, 0], 1, 1000, 512, 512), "offsets going down"),
    (([0, 3, 6], 2, 1000, 512, 512), "step not a multiple of the stride"),
    (([0, 0, 0], 1, 1000, 512, 512), "no step"),
    (([0, 1, 2], 1, 127, 512, 512), "fewer than 64 rows per product"),
    (([0, 1, 2], 1, 1000, 768, 40), "a narrow product"),
    (([0, 1, 2], 1, 1000, 1024, 1024), "weight blocks too large to transform per call"),
])
def test_not_usable(args, why):
    assert not winograd.usable(*args), why


@pytest.mark.parametrize("has_bias", [True, False])
def test_tdnn_component_takes_it(monkeypatch, has_bias):
    """A TdnnComponent with offsets -3, 0, 3 (row stride 3: time subsampling)
    goes through F(2, 3) and gives the direct sums; without a bias it adds
    to the output, as Kaldi's kPropagateAdds."""
    component = component_from_line(
        "component name=t type=TdnnComponent input-dim=160 output-dim=200 "
        "time-offsets=-3,0,3 bias-stddev=1 use-bias=%s" % ("true" if has_bias else "false"))
    rng = np.random.default_rng(5)
    rows, stride = 400, 3
    in_value = rng.standard_normal((6 + stride * (rows - 1) + 1 + 4, 160)).astype(np.float32)
    indexes = TdnnComponentPrecomputedIndexes(stride, [2, 5, 8])
    taken = []
    real = winograd.convolution_products
    monkeypatch.setattr(winograd, "convolution_products",
                        lambda *a, **k: taken.append(1) or real(*a, **k))
    initial = rng.standard_normal((rows, 200)).astype(np.float32)
    out = initial.copy()
    component.propagate(indexes, in_value, out)
    assert taken
    params = np.asarray(component.linear_params)
    weights = [params[:, i * 160:(i + 1) * 160].T for i in range(3)]
    expected = _reference(weights, in_value, 2, 3, stride, rows,
                          None if has_bias else initial)
    if has_bias:
        expected = expected + np.asarray(component.bias_params, np.float64)
    assert np.abs(out - expected).max() < 2e-6 * np.abs(expected).max()
