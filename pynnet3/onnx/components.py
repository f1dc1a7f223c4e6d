"""Each component type's Propagate as default-domain ONNX operators.

:func:`lower_propagate` turns one kPropagate of a component into ONNX nodes
over ``[batch, rows, cols]`` tensors: the input value ``x`` (None for a
component without input), the component's precomputed indexes (for the
non-simple types: statistics, TDNN, convolution, attention, distribute...),
and, for the components whose Propagate adds to its output (Kaldi's
kPropagateAdds), the output's previous value (None when it is all
zeros). It returns the output's new value. The formulas are those of the components' own ``propagate`` (the
readable specification this module follows line by line; tests compare the
two on Kaldi's reference components).

Random components in training mode (dropout masks drawn at run time) cannot
be exported: :class:`NotLowerable` names the node and says why.
"""

import math

import numpy as np

from ..errors import ComputationError
from ..components.scale_offset import _nonzero
from ..components.normalize import SQUARED_NORM_FLOOR

__all__ = ["lower_propagate", "NotLowerable", "LOWERINGS", "row_range_sums"]

_F32 = np.float32


class NotLowerable(ComputationError):
    """A component (or command) only a training computation can contain."""


class PropagateContext:
    """What one lowering sees: the graph, the node's name (for errors), the
    output's row count (static, or None in a length-generic graph) and a
    callable giving the output's previous value."""

    __slots__ = ("g", "node_name", "out_rows", "old", "row_count_of")

    def __init__(self, g, node_name, out_rows, old, row_count_of=None):
        self.g = g
        self.node_name = node_name
        self.out_rows = out_rows
        self.old = old
        self.row_count_of = row_count_of

    def plus_old(self, y):
        """``y`` added to the output's previous value (Kaldi's
        kPropagateAdds); ``old()`` gives None for an all-zero output."""
        old = self.old()
        return y if old is None else self.g.add(old, y)

    def refuse(self, component, why):
        raise NotLowerable("cannot export node '%s' (%s) to ONNX: %s"
                           % (self.node_name, component.type_name, why))

    def constant_rows(self, row, like=None):
        """``row`` (a vector) repeated for every output row: from the static
        row count, or as many rows as ``like`` has."""
        g = self.g
        row = np.asarray(row, np.float32).reshape(1, 1, -1)
        if self.out_rows is not None:
            return g.op("Expand", [g.const(row, "row"), g.batch_shape(self.out_rows, 1)],
                        "rows")
        if like is None:
            raise ComputationError("internal error: a constant output without a row count")
        return g.rows_like(like, g.const(row, "row"))


def lower_propagate(g, component, x, indexes, node_name, out_rows, old):
    """The new value of a kPropagate's output (see the module docstring).
    ``old()`` gives the output's previous value (only called for components
    that add to it)."""
    fn = LOWERINGS.get(component.type_name)
    if fn is None:
        raise NotLowerable("cannot export node '%s' to ONNX: no lowering for component type "
                           "%s" % (node_name, component.type_name))
    return fn(PropagateContext(g, node_name, out_rows, old), component, x, indexes)


# -- helpers --------------------------------------------------------------------------------

def _cols(g, x, start, end):
    return g.slice(x, 2, start, end)


def _blocks(g, x, cols, block_dim):
    """[B, R, cols] seen as [B, R, cols / block_dim, block_dim] (no -1 in
    the shape: a reshape with -1 fails on zero rows)."""
    return g.reshape(x, [0, 0, cols // block_dim, block_dim])


def _unblock(g, x4, cols):
    return g.reshape(x4, [0, 0, cols])


def _add_bias(g, y, bias):
    bias = np.asarray(bias, np.float32)
    if bias.size == 0:
        return y
    return g.add(y, g.const(bias, "bias"))


def _reduce_sum(g, x, axis, keepdims=0):
    return g.op("ReduceSum", [x, g.ints([axis])], "rsum", keepdims=keepdims)


def row_range_sums(g, x, ranges):
    """Row i of the result is the sum of x's rows [begin_i, end_i) (an empty
    range gives zeros): Kaldi's AddRowRanges onto zeros. Ranges of one row
    are a gather; equal, back-to-back ranges a reshape and sum; ranges that
    all start at row 0 a float32 prefix sum (Kaldi's own order: each sum is
    taken from 0 in row order); anything else a float64 prefix sum (more
    accurate than Kaldi's float32 loop)."""
    ranges = np.asarray(ranges, np.int64).reshape(-1, 2)
    begin, end = ranges[:, 0].copy(), ranges[:, 1].copy()
    empty = end <= begin
    begin[empty] = 0
    end[empty] = 0
    lengths = end - begin
    if not empty.any() and (lengths == 1).all():
        return g.gather_rows(x, begin)
    if not empty.any():
        length = int(lengths[0])
        if (lengths == length).all() and np.array_equal(
                begin, begin[0] + length * np.arange(begin.size)):
            part = g.slice(x, 1, int(begin[0]), int(end[-1]))
            return _reduce_sum(g, g.reshape(part, [0, begin.size, length, -1]), 2)
    if not begin.any():
        cum = g.op("CumSum", [g.pad_rows(x, 1, 0), g.const(np.asarray(1, np.int64), "axis")],
                   "cumsum")
        return g.op("Gather", [cum, g.const(end, "ends")], "gather", axis=1)
    cum = g.op("CumSum", [g.pad_rows(g.op("Cast", [x], "f64", to=11), 1, 0),
                          g.const(np.asarray(1, np.int64), "axis")], "cumsum")
    total = g.op("Sub", [g.op("Gather", [cum, g.const(end, "ends")], "gather", axis=1),
                         g.op("Gather", [cum, g.const(begin, "begins")], "gather", axis=1)])
    return g.op("Cast", [total], "f32", to=1)


# -- affine family ----------------------------------------------------------------------------

def _affine(ctx, c, x, indexes):
    return ctx.g.affine(x, c.linear_params, c.bias_params, ctx.out_rows)


def _linear(ctx, c, x, indexes):
    # kPropagateAdds: out += x W^T
    return ctx.plus_old(ctx.g.matmul_t(x, c.params))


def _repeated_affine(ctx, c, x, indexes):
    g = ctx.g
    block_out, block_in = c.linear_params.shape
    y = g.matmul_t(_blocks(g, x, c.input_dim(), block_in), c.linear_params)
    return _unblock(g, _add_bias(g, y, c.bias_params), c.output_dim())


def _block_affine(ctx, c, x, indexes):
    g = ctx.g
    nb = c.num_blocks
    rows_per_block = c.linear_params.shape[0] // nb
    cols_per_block = c.linear_params.shape[1]
    # [B, R, nb, 1, in] x [nb, in, out] -> [B, R, nb, 1, out]
    w = np.stack([c.linear_params[b * rows_per_block:(b + 1) * rows_per_block].T
                  for b in range(nb)]).astype(np.float32)
    x5 = g.reshape(x, [0, 0, nb, 1, cols_per_block])
    y = g.op("MatMul", [x5, g.const(w, "w")], "matmul")
    return _add_bias(g, g.reshape(y, [0, 0, c.output_dim()]), c.bias_params)


# -- element-wise and per-row -------------------------------------------------------------------

def _per_element_scale(ctx, c, x, indexes):
    return ctx.g.op("Mul", [x, ctx.g.const(c.scales, "scales")])


def _per_element_offset(ctx, c, x, indexes):
    tiled = np.tile(c.offsets, c.dim // c.offsets.shape[0])
    return ctx.g.add(x, ctx.g.const(tiled, "offsets"))


def _fixed_bias(ctx, c, x, indexes):
    return ctx.g.add(x, ctx.g.const(c.bias, "bias"))


def _scale_and_offset(ctx, c, x, indexes):
    scales = _nonzero(np, np.asarray(c.scales, np.float32))
    reps = c.dim // c.scales.shape[0]
    y = ctx.g.op("Mul", [x, ctx.g.const(np.tile(scales, reps), "scales")])
    return ctx.g.add(y, ctx.g.const(np.tile(c.offsets, reps), "offsets"))


def _constant_function(ctx, c, x, indexes):
    return ctx.constant_rows(c.output, like=x)


def _constant(ctx, c, x, indexes):
    return ctx.constant_rows(c.output, like=x)


def _sigmoid(ctx, c, x, indexes):
    return ctx.g.op("Sigmoid", [x])


def _tanh(ctx, c, x, indexes):
    return ctx.g.op("Tanh", [x])


def _relu(ctx, c, x, indexes):
    return ctx.g.op("Relu", [x])


def _softmax(ctx, c, x, indexes):
    g = ctx.g
    return g.op("Max", [g.op("Softmax", [x], axis=-1), g.scalar(1.0e-20)])


def _log_softmax(ctx, c, x, indexes):
    return ctx.g.op("LogSoftmax", [x], axis=-1)


def _identity(ctx, c, x, indexes):
    return x


def _backprop_truncation(ctx, c, x, indexes):
    return ctx.g.scale(x, c.scale_value)


def _dropout(ctx, c, x, indexes):
    if not c.test_mode:
        ctx.refuse(c, "dropout in training mode draws random masks (put the network in "
                      "test mode, as nnet3-compute does)")
    return ctx.g.scale(x, _F32(1.0) - _F32(c.dropout_proportion))


def _general_dropout(ctx, c, x, indexes):
    if not c._is_identity():
        ctx.refuse(c, "dropout in training mode draws random masks (put the network in "
                      "test mode, as nnet3-compute does)")
    return x


def _specaugment_time_mask(ctx, c, x, indexes):
    if not c._is_identity():
        ctx.refuse(c, "SpecAugment in training mode draws random masks (put the network in "
                      "test mode, as nnet3-compute does)")
    return x


def _dropout_mask(ctx, c, x, indexes):
    p = _F32(c.dropout_proportion)
    if p == 0:
        value = _F32(1.0)
    elif c.test_mode:
        value = _F32(1.0) if c.continuous else _F32(1.0) - p
    else:
        ctx.refuse(c, "dropout masks in training mode are random (put the network in test "
                      "mode, as nnet3-compute does)")
    return ctx.constant_rows(np.full(c.output_dim(), value, np.float32), like=x)


def _normalize(ctx, c, x, indexes):
    g = ctx.g
    x4 = _blocks(g, x, c.input_dim(), c.block_dim)
    sumsq = _reduce_sum(g, g.op("Mul", [x4, x4]), 3, keepdims=1)
    scale = g.op("Pow", [g.op("Max", [g.scale(sumsq, _F32(1.0) / c._d_scaled()),
                                      g.scalar(SQUARED_NORM_FLOOR)]), g.scalar(-0.5)])
    y = g.op("Mul", [x4, scale])
    if c.add_log_stddev:
        log_rms = g.add(g.op("Neg", [g.op("Log", [scale])]),
                        g.scalar(_F32(math.log(c.target_rms))))
        y = g.concat([y, log_rms], 3)
    return _unblock(g, y, c.output_dim())


def _batch_norm(ctx, c, x, indexes):
    g = ctx.g
    x4 = _blocks(g, x, c.dim, c.block_dim)
    if c.test_mode:
        if c.offset is None or c.offset.shape[0] != c.block_dim:
            raise ComputationError("node '%s': test mode set in BatchNormComponent, but no "
                                   "stats" % ctx.node_name)
        y = g.add(g.op("Mul", [x4, g.const(c.scale_vec, "scale")]), g.const(c.offset, "offset"))
        return _unblock(g, y, c.dim)
    # Training mode: the statistics of this computation's rows (per batch
    # entry, each a whole computation), as the component's propagate.
    flat = g.reshape(x4, [0, -1, c.block_dim])
    mean = g.op("ReduceMean", [flat], "mean", axes=[1], keepdims=1)
    uvar = g.op("ReduceMean", [g.op("Mul", [flat, flat])], "uvar", axes=[1], keepdims=1)
    var_scale = _F32(1.0 / (c.target_rms * c.target_rms))
    scale = g.op("Sub", [g.scale(uvar, var_scale),
                         g.scale(g.op("Mul", [mean, mean]), var_scale)])
    scale = g.add(g.op("Relu", [scale]), g.scalar(_F32(var_scale * c.epsilon)))
    scale = g.op("Pow", [scale, g.scalar(-0.5)])
    y = g.op("Mul", [g.op("Sub", [flat, mean]), scale])
    return g.reshape(y, [0, -1, c.dim])


def _pnorm(ctx, c, x, indexes):
    g = ctx.g
    groups = g.reshape(x, [0, 0, c.out_dim, c.in_dim // c.out_dim])
    return g.op("Sqrt", [_reduce_sum(g, g.op("Mul", [groups, groups]), 3)])


def _sum_group(ctx, c, x, indexes):
    g = ctx.g
    if len(set(c.sizes)) == 1:
        return _reduce_sum(g, g.reshape(x, [0, 0, c.out_dim, c.sizes[0]]), 3)
    ones = np.zeros((c.in_dim, c.out_dim), np.float32)
    ones[np.arange(c.in_dim), c.reverse_indexes] = 1.0
    return g.op("MatMul", [x, g.const(ones, "groups")])


def _sum_block(ctx, c, x, indexes):
    g = ctx.g
    blocks = g.reshape(x, [0, 0, c.in_dim // c.out_dim, c.out_dim])
    return ctx.plus_old(g.scale(_reduce_sum(g, blocks, 2), c.scale_value))


def _elementwise_product(ctx, c, x, indexes):
    g = ctx.g
    d = c.out_dim
    y = _cols(g, x, 0, d)
    for i in range(1, c.in_dim // d):
        y = g.op("Mul", [y, _cols(g, x, i * d, (i + 1) * d)])
    return y


def _permute(ctx, c, x, indexes):
    return ctx.g.op("Gather", [x, ctx.g.const(np.asarray(c.column_map, np.int64), "map")],
                    axis=2)


# -- recurrent cells ----------------------------------------------------------------------------

def _lstm_nonlinearity(ctx, c, x, indexes):
    g = ctx.g
    d = c.cell_dim()
    i_part, f_part, c_part, o_part, c_prev = [_cols(g, x, k * d, (k + 1) * d) for k in range(5)]
    w_ic, w_fc, w_oc = (g.const(c.params[k], "peephole") for k in range(3))
    i_t = g.op("Sigmoid", [g.add(i_part, g.op("Mul", [c_prev, w_ic]))])
    f_t = g.op("Sigmoid", [g.add(f_part, g.op("Mul", [c_prev, w_fc]))])
    if c.use_dropout:
        i_scale, f_scale, o_scale = (_cols(g, x, 5 * d + k, 5 * d + k + 1) for k in range(3))
        f_t = g.op("Mul", [f_t, f_scale])
        i_t = g.op("Mul", [i_t, i_scale])
    c_t = g.add(g.op("Mul", [f_t, c_prev]), g.op("Mul", [i_t, g.op("Tanh", [c_part])]))
    o_t = g.op("Sigmoid", [g.add(o_part, g.op("Mul", [c_t, w_oc]))])
    if c.use_dropout:
        o_t = g.op("Mul", [o_t, o_scale])
    m_t = g.op("Mul", [o_t, g.op("Tanh", [c_t])])
    return g.concat([c_t, m_t], 2)


def _gru_output(g, h_t, z_t, c_prev):
    # c_t = h_t - z_t h_t + z_t c_{t-1}
    return g.add(g.op("Sub", [h_t, g.op("Mul", [z_t, h_t])]), g.op("Mul", [z_t, c_prev]))


def _gru_nonlinearity(ctx, c, x, indexes):
    g = ctx.g
    cd, rd = c.cell_dim, c.recurrent_dim
    cols = c.input_dim()
    z_t = _cols(g, x, 0, cd)
    r_t = _cols(g, x, cd, cd + rd)
    hpart = _cols(g, x, cd + rd, 2 * cd + rd)
    c_prev = _cols(g, x, 2 * cd + rd, 3 * cd + rd)
    s_prev = _cols(g, x, cols - rd, cols)
    h_t = g.op("Tanh", [g.add(hpart, g.matmul_t(g.op("Mul", [r_t, s_prev]), c.w_h))])
    return g.concat([h_t, _gru_output(g, h_t, z_t, c_prev)], 2)


def _output_gru_nonlinearity(ctx, c, x, indexes):
    g = ctx.g
    cd = c.cell_dim
    z_t, hpart, c_prev = (_cols(g, x, k * cd, (k + 1) * cd) for k in range(3))
    h_t = g.op("Tanh", [g.add(g.op("Mul", [c_prev, g.const(c.w_h, "w_h")]), hpart)])
    return g.concat([h_t, _gru_output(g, h_t, z_t, c_prev)], 2)


# -- composite, old convolution and max-pooling -------------------------------------------------

def _composite(ctx, c, x, indexes):
    g = ctx.g
    value = x
    last = len(c.components) - 1
    for i, sub in enumerate(c.components):
        if i < last:
            # an inner component writes (or adds) into fresh zeros
            inner = PropagateContext(g, ctx.node_name, ctx.out_rows, lambda: None)
        else:
            inner = PropagateContext(g, ctx.node_name, ctx.out_rows, ctx.old)
        fn = LOWERINGS.get(sub.type_name)
        if fn is None:
            raise NotLowerable("cannot export node '%s' to ONNX: no lowering for component "
                               "type %s (inside a CompositeComponent)"
                               % (ctx.node_name, sub.type_name))
        value = fn(inner, sub, value, None)
    return value


def _gathered_columns(g, x, cols):
    """The columns of ``x`` that the component's 2-d column map ``cols``
    names, as a tensor [.., .., rows of ``cols``, columns of ``cols``]."""
    num_rows, num_cols = cols.shape
    gathered = g.op("Gather", [x, g.const(cols.reshape(-1), "cols")], axis=2)
    return g.reshape(gathered, [0, 0, num_rows, num_cols])


def _convolution(ctx, c, x, indexes):
    g = ctx.g
    patches = _gathered_columns(g, x, c._column_map())
    y = _add_bias(g, g.matmul_t(patches, c.filter_params), c.bias_params)
    return ctx.plus_old(g.reshape(y, [0, 0, c.output_dim()]))


def _maxpooling(ctx, c, x, indexes):
    g = ctx.g
    members = _gathered_columns(g, x, c._column_map())
    # Kaldi starts from -1e20 and keeps the larger value
    return g.op("Max", [g.op("ReduceMax", [members], axes=[2], keepdims=0),
                        g.scalar(-1e20)])


# -- components with precomputed indexes ----------------------------------------------------------

def _statistics_extraction(ctx, c, x, indexes):
    g = ctx.g
    counts = g.const(np.asarray(indexes.counts, np.float32).reshape(1, -1, 1), "counts")
    counts = g.op("Expand", [counts, g.batch_shape(len(indexes.counts), 1)])
    parts = [counts, row_range_sums(g, x, indexes.forward_indexes)]
    if c.include_variance:
        parts.append(row_range_sums(g, g.op("Mul", [x, x]), indexes.forward_indexes))
    return g.concat(parts, 2)


def statistics_pooling_output(g, c, counts, sums):
    """StatisticsPooling's output from the pooled counts ([B, R, 1]) and
    sums of the other columns ([B, R, input_dim - 1])."""
    nlc = c.num_log_count_features
    d = c.input_dim_
    # Kaldi multiplies by the counts' reciprocals
    stats = g.op("Mul", [sums, g.op("Reciprocal", [counts])])
    parts = []
    if nlc > 0:
        log_count = g.op("Log", [counts])
        parts.append(log_count if nlc == 1 else g.op("Expand", [log_count, g.ints([1, 1, nlc])]))
    if c.output_stddevs:
        f = (d - 1) // 2
        mean = _cols(g, stats, 0, f)
        variance = g.op("Sub", [_cols(g, stats, f, 2 * f), g.op("Mul", [mean, mean])])
        stddev = g.op("Sqrt", [g.op("Max", [variance, g.scalar(c.variance_floor)])])
        parts += [mean, stddev]
    else:
        parts.append(stats)
    return g.concat(parts, 2)


def _statistics_pooling(ctx, c, x, indexes):
    g = ctx.g
    counts = row_range_sums(g, _cols(g, x, 0, 1), indexes.forward_indexes)
    sums = row_range_sums(g, _cols(g, x, 1, c.input_dim_), indexes.forward_indexes)
    return statistics_pooling_output(g, c, counts, sums)


def _tdnn(ctx, c, x, indexes):
    g = ctx.g
    rows = ctx.out_rows
    stride = indexes.row_stride
    offsets = list(indexes.row_offsets)
    d_in, d_out = c.input_dim(), c.output_dim()
    if len(offsets) > 1 and stride == 1 and d_out < d_in:
        # Narrower output than input: one product of every input row with
        # all offsets' weights, then the offsets' row ranges summed (moves
        # far fewer bytes than splicing the wide input rows).
        w = np.concatenate([c.linear_params[:, i * d_in:(i + 1) * d_in]
                            for i in range(len(offsets))], axis=0)
        products = g.matmul_t(x, w)
        y = None
        for i, off in enumerate(offsets):
            part = g.op("Slice", [products, g.ints([off, i * d_out]),
                                  g.ints([off + rows, (i + 1) * d_out]), g.ints([1, 2])])
            y = part if y is None else g.add(y, part)
    else:
        parts = [g.slice(x, 1, off, off + stride * (rows - 1) + 1, stride) for off in offsets]
        if c.bias_params.shape[0] != 0:
            return g.affine(g.concat(parts, 2), c.linear_params, c.bias_params, rows)
        y = g.matmul_t(g.concat(parts, 2), c.linear_params)
    if c.bias_params.shape[0] == 0:
        return ctx.plus_old(y)              # kPropagateAdds without a bias
    return _add_bias(g, y, c.bias_params)


def _time_height_convolution(ctx, c, x, indexes):
    g = ctx.g
    cc = indexes.computation
    ni, ho = cc.num_images, cc.height_out
    nfi, nfo = cc.num_filters_in, cc.num_filters_out
    # the input as (num_images * num_t_in) rows (frames appended for subsampling)
    inp = g.reshape(x, [0, cc.num_images * cc.num_t_in, -1])
    rows = cc.num_t_out * ni
    total = None
    for step in cc.steps:
        shift = step.input_time_shift * ni
        part = g.slice(inp, 1, shift, shift + rows)
        ncols = len(step.columns)
        pcols = ncols // ho
        if step.columns_are_contiguous:
            temp = _cols(g, part, step.first_column, step.first_column + ncols)
        else:
            heights = np.asarray(step.height_sources, np.int64)
            src = g.reshape(part, [0, 0, cc.height_in, nfi])
            temp = g.op("Gather", [src, g.const(heights, "heights")], axis=2)
            if step.zero_heights.size:
                mask = np.ones((1, 1, len(heights), 1), np.float32)
                mask[0, 0, np.asarray(step.zero_heights, np.int64), 0] = 0.0
                temp = g.op("Mul", [temp, g.const(mask, "mask")])
        temp = g.reshape(temp, [0, rows * ho, pcols])
        params = c.linear_params[:, step.params_start_col:step.params_start_col + pcols]
        prod = g.matmul_t(temp, params)
        total = prod if total is None else g.add(total, prod)
    y = g.reshape(total, [0, rows, ho, nfo])
    y = g.add(y, g.const(np.asarray(c.bias_params, np.float32), "bias"))
    return g.reshape(y, [0, rows, ho * nfo])


def _context_stack(g, m, shift_rows, num_out, context_dim):
    """The ``num_out`` rows of ``m`` that each context offset o reads (from
    row o * shift_rows on), stacked on a new axis 2: [B, num_out, context_dim, cols]."""
    return g.concat([g.op("Unsqueeze", [g.slice(m, 1, o * shift_rows, o * shift_rows + num_out),
                                        g.ints([2])])
                     for o in range(context_dim)], 2)


def _restricted_attention(ctx, c, x, indexes):
    g = ctx.g
    io = indexes.io
    num_out = ctx.out_rows
    rows_left = (io.start_t_out - io.start_t_in) // io.t_step_in * io.num_images
    context_dim = c.context_dim
    shift_rows = None
    din, dout = c._input_dim_per_head(), c._output_dim_per_head()
    k, v = c.key_dim, c.value_dim
    old = ctx.old()
    heads = []
    for h in range(c.num_heads):
        part = _cols(g, x, h * din, (h + 1) * din)
        keys = _cols(g, part, 0, k)
        values = _cols(g, part, k, k + v)
        queries = g.slice(_cols(g, part, k + v, din), 1, rows_left, rows_left + num_out)
        q_key = _cols(g, queries, 0, k)
        q_context = _cols(g, queries, k, k + context_dim)
        if shift_rows is None:
            extra = io.num_t_in * io.num_images - num_out
            shift_rows = extra // (context_dim - 1)
        key_stack = _context_stack(g, keys, shift_rows, num_out, context_dim)  # [B, R, ctx, k]
        dots = _reduce_sum(g, g.op("Mul", [g.op("Unsqueeze", [q_key, g.ints([2])]),
                                           key_stack]), 3)          # [B, R, ctx]
        b = g.add(g.scale(dots, c.key_scale), q_context)
        weights = g.op("Softmax", [b], axis=-1)
        value_stack = _context_stack(g, values, shift_rows, num_out,
                                     context_dim)                    # [B, R, ctx, v]
        weighted = _reduce_sum(g, g.op("Mul", [g.op("Unsqueeze", [weights, g.ints([3])]),
                                               value_stack]), 2)     # [B, R, v]
        # the value part is added to the output, the context part set
        out_values = (weighted if old is None
                      else g.add(_cols(g, old, h * dout, h * dout + v), weighted))
        heads.append(out_values)
        if c.output_context:
            heads.append(weights)
    return g.concat(heads, 2)


def _distribute(ctx, c, x, indexes):
    g = ctx.g
    num_blocks = c.input_dim_ // c.output_dim_
    pairs = np.asarray(indexes.pairs, np.int64).reshape(-1, 2)
    rows = pairs[:, 0] * num_blocks + pairs[:, 1] // c.output_dim_
    flat = g.reshape(x, [0, -1, c.output_dim_])
    return g.gather_rows(flat, rows)


LOWERINGS = {
    "AffineComponent": _affine,
    "NaturalGradientAffineComponent": _affine,
    "FixedAffineComponent": _affine,
    "LinearComponent": _linear,
    "RepeatedAffineComponent": _repeated_affine,
    "NaturalGradientRepeatedAffineComponent": _repeated_affine,
    "BlockAffineComponent": _block_affine,
    "PerElementScaleComponent": _per_element_scale,
    "NaturalGradientPerElementScaleComponent": _per_element_scale,
    "FixedScaleComponent": _per_element_scale,
    "PerElementOffsetComponent": _per_element_offset,
    "FixedBiasComponent": _fixed_bias,
    "ScaleAndOffsetComponent": _scale_and_offset,
    "ConstantFunctionComponent": _constant_function,
    "ConstantComponent": _constant,
    "SigmoidComponent": _sigmoid,
    "TanhComponent": _tanh,
    "RectifiedLinearComponent": _relu,
    "SoftmaxComponent": _softmax,
    "LogSoftmaxComponent": _log_softmax,
    "NoOpComponent": _identity,
    "ClipGradientComponent": _identity,
    "BackpropTruncationComponent": _backprop_truncation,
    "DropoutComponent": _dropout,
    "GeneralDropoutComponent": _general_dropout,
    "SpecAugmentTimeMaskComponent": _specaugment_time_mask,
    "DropoutMaskComponent": _dropout_mask,
    "NormalizeComponent": _normalize,
    "BatchNormComponent": _batch_norm,
    "PnormComponent": _pnorm,
    "SumGroupComponent": _sum_group,
    "SumBlockComponent": _sum_block,
    "ElementwiseProductComponent": _elementwise_product,
    "PermuteComponent": _permute,
    "LstmNonlinearityComponent": _lstm_nonlinearity,
    "GruNonlinearityComponent": _gru_nonlinearity,
    "OutputGruNonlinearityComponent": _output_gru_nonlinearity,
    "CompositeComponent": _composite,
    "ConvolutionComponent": _convolution,
    "MaxpoolingComponent": _maxpooling,
    "StatisticsExtractionComponent": _statistics_extraction,
    "StatisticsPoolingComponent": _statistics_pooling,
    "TdnnComponent": _tdnn,
    "TimeHeightConvolutionComponent": _time_height_convolution,
    "RestrictedAttentionComponent": _restricted_attention,
    "DistributeComponent": _distribute,
}
