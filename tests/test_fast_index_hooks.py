"""The C index hooks of non-simple components (the kernels
convolution_computation_kernel, statistics_kernel, dropout_kernel and
backprop_truncation_kernel in pynnet3/_fast) equal their Python twins on
random inputs: the convolution/TDNN grid helpers of
convolution_computation.py, the (n, x, t) sort, the statistics components'
precompute_indexes, GeneralDropout's mask rows and BackpropTruncation's
zeroing rows. Each kernel either gives the twin's exact result or
declines (None) exactly where the twin raises, and it does not decline on
ordinary input (so the fast path is really the one the compiler runs)."""

import random

import numpy as np
import pytest

from pynnet3.components import convolution_computation as cm
from pynnet3.components.backprop_truncation import zeroing_rows
from pynnet3.components.dropout import dropout_mask_rows
from pynnet3.components.statistics import (StatisticsExtractionComponent,
                                           StatisticsPoolingComponent, _nxt_key)
from pynnet3.components.tdnn import _modify_computation_io
from pynnet3.errors import ComputationError
from pynnet3.common.index import Index, kNoTime

conv_kernel = pytest.importorskip("pynnet3._fast.convolution_computation_kernel")
stats_kernel = pytest.importorskip("pynnet3._fast.statistics_kernel")
dropout_kernel = pytest.importorskip("pynnet3._fast.dropout_kernel")
truncation_kernel = pytest.importorskip("pynnet3._fast.backprop_truncation_kernel")


def _io_tuple(io):
    return (io.num_images, io.start_t_in, io.t_step_in, io.num_t_in, io.reorder_t_in,
            io.start_t_out, io.t_step_out, io.num_t_out)


def _grid_case(rng):
    """Random input/output Index lists on (roughly) regular time grids, in
    random order, with some holes, kNoTime Indexes and duplicate images."""
    images = sorted({(rng.randrange(-3, 4), rng.randrange(-2, 3))
                     for _ in range(rng.randrange(1, 5))})
    step_out = rng.choice([1, 1, 2, 3])
    step_in = rng.choice([1, step_out]) if step_out > 1 else 1
    start_in = rng.randrange(-20, 20)
    num_in = rng.randrange(1, 30)
    start_out = start_in + rng.randrange(0, 4)
    num_out = rng.randrange(1, 12)
    inputs = [Index(n, start_in + k * step_in, x) for n, x in images for k in range(num_in)
              if rng.random() > 0.15]
    outputs = [Index(n, start_out + k * step_out, x) for n, x in images
               for k in range(num_out) if rng.random() > 0.15]
    if rng.random() < 0.2:
        inputs.append(Index(images[0][0], kNoTime, images[0][1]))
    if rng.random() < 0.2:
        outputs.append(Index(99, start_out, 99))        # an image the input lacks
    if rng.random() < 0.2 and inputs:
        inputs.append(inputs[0])                        # a duplicate
    rng.shuffle(inputs)
    rng.shuffle(outputs)
    return inputs, outputs


def _twin_or_error(fn, *args):
    try:
        return fn(*args)
    except ComputationError:
        return ComputationError


def test_computation_io_twins_agree():
    rng = random.Random(11)
    declined = 0
    for _ in range(400):
        inputs, outputs = _grid_case(rng)
        if rng.random() < 0.05:
            inputs = []
        if rng.random() < 0.05:
            outputs = [Index(0, kNoTime, 0)]
        expected = _twin_or_error(cm.get_computation_io_py, inputs, outputs)
        got = conv_kernel.computation_io(inputs, outputs)
        if expected is ComputationError:
            assert got is None
            declined += 1
            continue
        assert got == (expected.num_images, expected.start_t_in, expected.t_step_in,
                       expected.num_t_in, expected.start_t_out, expected.t_step_out,
                       expected.num_t_out)
        assert cm.get_computation_io(inputs, outputs) == expected
    assert 0 < declined < 100


def test_indexes_for_computation_twins_agree():
    rng = random.Random(12)
    compared = 0
    for _ in range(400):
        inputs, outputs = _grid_case(rng)
        io = _twin_or_error(cm.get_computation_io_py, inputs, outputs)
        if io is ComputationError:
            continue
        choice = rng.randrange(3)
        if choice == 1:
            io = _twin_or_error(_modify_computation_io, io)  # TDNN: reorder_t_in, padding
            if io is ComputationError:
                continue
        elif choice == 2:
            io.start_t_in -= io.t_step_in or 1           # a padded input grid
            io.num_t_in += 2
        expected = _twin_or_error(cm.get_indexes_for_computation_py, io, inputs, outputs)
        got = conv_kernel.indexes_for_computation(_io_tuple(io), inputs, outputs)
        if expected is ComputationError:
            assert got is None
            continue
        assert got is not None
        assert got == expected
        assert all(type(i) is Index for lst in got for i in lst)
        assert cm.get_indexes_for_computation(io, inputs, outputs) == expected
        compared += 1
    assert compared > 300


def test_grid_kernels_decline_odd_input():
    io = (1, 0, 1, 3, 1, 0, 1, 3)
    assert conv_kernel.computation_io([(0, 1.0, 0)], [Index(0, 0, 0)]) is None
    assert conv_kernel.computation_io([Index(0, 2**40, 0)], [Index(0, 0, 0)]) is None
    assert conv_kernel.indexes_for_computation(io, [Index(0, 0, 0)], [Index(0, 0, 0)]) is not None
    assert conv_kernel.indexes_for_computation(io, [Index(True, 0, 0)], [Index(0, 0, 0)]) is None
    assert conv_kernel.indexes_for_computation((1, 0, 0, 2, 1, 0, 1, 1), [Index(0, 0, 0)],
                                        [Index(0, 0, 0)]) is None      # zero step, 2 times
    assert conv_kernel.indexes_for_computation((2, 0, 1, 3, 1, 0, 1, 3), [Index(0, 0, 0)],
                                        [Index(0, 0, 0)]) is None      # image count differs
    # plain tuples are accepted and come back as Index objects
    got = conv_kernel.indexes_for_computation(io, [(0, 0, 0), (0, 2, 0)], [(0, 1, 0)])
    assert got == cm.get_indexes_for_computation_py(_io_from_tuple(io), [(0, 0, 0), (0, 2, 0)],
                                                    [(0, 1, 0)])
    assert all(type(i) is Index for lst in got for i in lst)


def _io_from_tuple(t):
    io = cm.ConvolutionComputationIo()
    (io.num_images, io.start_t_in, io.t_step_in, io.num_t_in, io.reorder_t_in,
     io.start_t_out, io.t_step_out, io.num_t_out) = t
    return io


def test_sort_nxt_twins_agree():
    rng = random.Random(13)
    for size in (0, 1, 5, 50, 500):
        indexes = [Index(rng.randrange(-3, 3), rng.choice([kNoTime, rng.randrange(-50, 50)]),
                         rng.randrange(-2, 2)) for _ in range(size)]
        got = stats_kernel.sort_nxt(indexes)
        assert got == sorted(indexes, key=_nxt_key)
        assert [id(i) for i in got] == [id(i) for i in sorted(indexes, key=_nxt_key)]
    assert stats_kernel.sort_nxt([Index(0, 0, 0), (0, 0)]) is None


def _stats_lists(rng, out_period, in_period, window):
    """Input and output Index lists as a compiled statistics component sees
    them (sorted by n, x, t), sometimes broken."""
    images = sorted({(rng.randrange(0, 3), rng.randrange(0, 2))
                     for _ in range(rng.randrange(1, 4))})
    start = rng.randrange(-30, 10)
    num = rng.randrange(1, 40)
    inputs = [Index(n, t, x) for n, x in images
              for t in range(start - start % in_period, start + num, in_period)
              if rng.random() > 0.1]
    outputs = [Index(n, t, x) for n, x in images
               for t in range(start - start % window, start + num, window)
               if rng.random() > 0.1]
    if rng.random() < 0.3:
        rng.shuffle(inputs)       # unsorted: the hooks must refuse
    if rng.random() < 0.1:
        outputs.append(Index(7, 0, 7))      # an output with no inputs
    if rng.random() < 0.1 and inputs:
        inputs.append(inputs[0])            # a duplicate input
    return sorted(inputs, key=_nxt_key) if rng.random() < 0.5 else inputs, \
        sorted(outputs, key=_nxt_key)


def _same_precomputed(a, b):
    return all(np.array_equal(getattr(a, k), getattr(b, k)) and
               getattr(a, k).dtype == getattr(b, k).dtype for k in vars(a))


@pytest.mark.parametrize("need_backprop", [True, False])
def test_statistics_extraction_twins_agree(need_backprop):
    rng = random.Random(14)
    accepted = 0
    for _ in range(300):
        in_period = rng.choice([1, 2, 3])
        out_period = in_period * rng.choice([1, 2, 3])
        comp = StatisticsExtractionComponent(4, in_period, out_period, True)
        inputs, outputs = _stats_lists(rng, out_period, in_period, out_period)
        expected = _twin_or_error(comp.precompute_indexes_py, None, inputs, outputs,
                                  need_backprop)
        got = stats_kernel.statistics_extraction_indexes(inputs, outputs, in_period, out_period)
        if expected is ComputationError:
            assert got is None
            with pytest.raises(ComputationError):
                comp.precompute_indexes(None, inputs, outputs, need_backprop)
            continue
        accepted += 1
        assert got is not None
        pre = comp.precompute_indexes(None, inputs, outputs, need_backprop)
        assert _same_precomputed(pre, expected)
    assert accepted > 50


@pytest.mark.parametrize("need_backprop", [True, False])
def test_statistics_pooling_twins_agree(need_backprop):
    rng = random.Random(15)
    accepted = 0
    for _ in range(300):
        comp = StatisticsPoolingComponent()
        comp.input_dim_ = 9
        comp.input_period = rng.choice([1, 2, 3])
        comp.left_context = comp.input_period * rng.randrange(0, 4)
        comp.right_context = comp.input_period * rng.randrange(1, 6)
        inputs, outputs = _stats_lists(rng, comp.input_period, comp.input_period,
                                       comp.input_period * rng.choice([1, 2]))
        expected = _twin_or_error(comp.precompute_indexes_py, None, inputs, outputs,
                                  need_backprop)
        got = stats_kernel.statistics_pooling_indexes(inputs, outputs, comp.input_period,
                                              comp.left_context, comp.right_context)
        if expected is ComputationError:
            assert got is None
            with pytest.raises(ComputationError):
                comp.precompute_indexes(None, inputs, outputs, need_backprop)
            continue
        accepted += 1
        assert got is not None
        pre = comp.precompute_indexes(None, inputs, outputs, need_backprop)
        assert _same_precomputed(pre, expected)
    assert accepted > 50


def test_dropout_mask_rows_twins_agree():
    rng = random.Random(16)
    for size in (0, 1, 7, 150, 600):
        indexes = [Index(rng.randrange(-4, 4), rng.randrange(-60, 60), rng.randrange(0, 2))
                   for _ in range(size)]
        for time_period in (0, 1, 3, 7):
            rows, count = dropout_kernel.dropout_mask_rows(indexes, time_period)
            rows_py, count_py = dropout_mask_rows(indexes, time_period)
            assert count == count_py
            assert rows.dtype == rows_py.dtype == np.int32
            assert np.array_equal(rows, rows_py)
    assert dropout_kernel.dropout_mask_rows([Index(0, 0, 0)], -1) is None
    assert dropout_kernel.dropout_mask_rows([(0, 0)], 0) is None


def test_backprop_truncation_zeroing_twins_agree():
    rng = random.Random(17)
    for size in (0, 1, 9, 300):
        indexes = [Index(rng.randrange(0, 5), rng.randrange(-80, 80), 0) for _ in range(size)]
        for zi, ri in ((20, 1), (7, 3), (1, 1), (5, -2)):
            zeroing, count = truncation_kernel.backprop_truncation_zeroing(indexes, zi, ri)
            zeroing_py, count_py = zeroing_rows(indexes, zi, ri)
            assert count == count_py
            assert zeroing.dtype == zeroing_py.dtype == np.float32
            assert np.array_equal(zeroing, zeroing_py)
    assert truncation_kernel.backprop_truncation_zeroing([Index(0, 0, 0)], 0, 1) is None
