"""TdnnComponent: an affine transform over frames spliced at fixed time offsets.

Kaldi's nnet-tdnn-component.cc. For an output Index (n, t, x) the input is
the concatenation of the input rows (n, t + o, x) for each o in
``time_offsets``; the parameters are ``linear_params`` (output-dim x
len(time_offsets) * input-dim, offset index with the larger stride) and an
optional bias. All offsets are required.

It is non-simple: its input and output Indexes are reordered into a regular
grid (t with the largest stride; with time subsampling, blocks of
``reorder_t_in`` consecutive input times), so that each offset's input is a
strided row-range of the input matrix. The precomputed indexes are just
``row_stride`` and one start row per offset
(``<TdnnComponentPrecomputedIndexes>``).

Updates are the plain gradient (``is_gradient`` or not natural-gradient) or a
plain learning-rate step; the natural-gradient and orthonormal-constraint
options are kept so files round-trip and Info() matches Kaldi.
"""

import numpy as np

from ..common.floats import f32, kaldi_str
from ..common.index import Index, kNoTime
from ..common.parameter_stats import get_verbose_level, matrix_stats, vector_stats
from ..errors import ComputationError
from . import winograd
from .affine import ParameterArrays
from .base import (Field, P, PrecomputedIndexes, UpdatableComponent, array_module, read_layout,
                   write_layout)
from .convolution_computation import get_computation_io, get_indexes_for_computation
from .convolution_model import split_ints
from .products import sum_of_products


def _randn(shape, stddev):
    if stddev == 0.0:
        return np.zeros(shape, dtype=np.float32)
    return (np.random.standard_normal(shape) * stddev).astype(np.float32)


class TdnnComponentPrecomputedIndexes(PrecomputedIndexes):
    """Kaldi's TdnnComponent::PrecomputedIndexes: ``row_stride`` and
    ``row_offsets`` (start input row of each time offset)."""

    type_name = "TdnnComponentPrecomputedIndexes"
    layout = (
        Field("<RowStride>", "int", "row_stride"),
        Field("<RowOffsets>", "int_vector", "row_offsets"),
    )

    def __init__(self, row_stride=1, row_offsets=()):
        self.row_stride = row_stride
        self.row_offsets = list(row_offsets)

    def __eq__(self, other):
        return (isinstance(other, TdnnComponentPrecomputedIndexes)
                and self.row_stride == other.row_stride
                and list(self.row_offsets) == list(other.row_offsets))


def _modify_computation_io(io):
    """Kaldi's TdnnComponent::ModifyComputationIo: fix zero time steps and
    set reorder_t_in for subsampling, padding num_t_in to a multiple of it."""
    if io.t_step_out == 0:
        if io.t_step_in == 0:
            io.t_step_in = 1
        io.t_step_out = io.t_step_in
    if io.t_step_in == 0 or io.t_step_out % io.t_step_in != 0:
        raise ComputationError("TdnnComponent: output time step %d is not a multiple of the "
                               "input time step %d" % (io.t_step_out, io.t_step_in))
    io.reorder_t_in = io.t_step_out // io.t_step_in
    n = io.reorder_t_in
    io.num_t_in = n * ((io.num_t_in + n - 1) // n)
    return io


def _input_part(mat, num_output_rows, row_stride, row_offset):
    """Kaldi's GetInputPart: rows row_offset, row_offset + stride, ... of mat."""
    if not (row_offset >= 0 and row_stride >= 1 and
            mat.shape[0] >= row_offset + row_stride * num_output_rows - (row_stride - 1)):
        raise ComputationError("TdnnComponent: input matrix with %d rows too small for %d "
                               "output rows (stride %d, offset %d)"
                               % (mat.shape[0], num_output_rows, row_stride, row_offset))
    return mat[row_offset:row_offset + row_stride * (num_output_rows - 1) + 1:row_stride]


class TdnnComponent(ParameterArrays, UpdatableComponent):
    """Kaldi's TdnnComponent.

    State: ``time_offsets`` (list of distinct ints), ``linear_params``,
    ``bias_params`` (empty when there is no bias), ``orthonormal_constraint``,
    ``use_natural_gradient``, ``num_samples_history``, ``alpha_in``,
    ``alpha_out``, ``rank_in``, ``rank_out`` (update period is always 4).
    """

    type_name = "TdnnComponent"
    layout = UpdatableComponent.UPDATABLE_COMMON + (
        Field("<TimeOffsets>", "int_vector", "time_offsets"),
        Field("<LinearParams>", "matrix", "linear_params"),
        Field("<BiasParams>", "vector", "bias_params"),
        Field("<OrthonormalConstraint>", "float", "orthonormal_constraint"),
        Field("<UseNaturalGradient>", "bool", "use_natural_gradient"),
        Field("<NumSamplesHistory>", "float", "num_samples_history"),
    )
    update_period = 4
    param_attrs = ("linear_params", "bias_params")

    # -- description ----------------------------------------------------------
    def properties(self):
        p = P.kUpdatableComponent | P.kReordersIndexes | P.kBackpropAdds | P.kBackpropNeedsInput
        if self.bias_params.shape[0] == 0:
            p |= P.kPropagateAdds
        return int(p)

    def input_dim(self):
        return self.linear_params.shape[1] // len(self.time_offsets)

    def output_dim(self):
        return self.linear_params.shape[0]

    def info(self):
        s = self.updatable_info()
        if self.orthonormal_constraint != 0.0:
            s += ", orthonormal-constraint=" + kaldi_str(self.orthonormal_constraint)
        s += ", time-offsets=" + ",".join(str(t) for t in self.time_offsets)
        s += matrix_stats("linear-params", self.linear_params, False, True, True,
                          get_verbose_level() >= 2)
        if self.bias_params.shape[0] == 0:
            s += ", has-bias=false"
        else:
            s += vector_stats("bias", self.bias_params, include_mean=True)
        if not self.use_natural_gradient:
            s += ", use-natural-gradient=false"
        else:
            s += (", rank-in=%d, rank-out=%d, num-samples-history=%s, update-period=%d, "
                  "alpha-in=%s, alpha-out=%s" % (
                      self.rank_in, self.rank_out, kaldi_str(self.num_samples_history),
                      self.update_period, kaldi_str(self.alpha_in), kaldi_str(self.alpha_out)))
        return s

    # -- initialization ---------------------------------------------------------
    def init_from_config(self, cfl):
        self.init_updatable_common(cfl)
        text = cfl.get_str("time-offsets")
        input_dim = cfl.get_int("input-dim")
        output_dim = cfl.get_int("output-dim")
        offsets = split_ints(text) if text is not None else None
        if (text is None or input_dim is None or output_dim is None or input_dim <= 0
                or output_dim <= 0 or not offsets):
            raise cfl.error("bad initializer: there is a problem with time-offsets, input-dim "
                            "or output-dim (not defined?)")
        if len(set(offsets)) != len(offsets):
            raise cfl.error("bad initializer: repeated time-offsets")
        self.time_offsets = offsets
        self.orthonormal_constraint = 0.0
        param_stddev = cfl.get_float("param-stddev", -1.0)
        bias_stddev = f32(cfl.get_float("bias-stddev", 1.0))
        bias_mean = f32(cfl.get_float("bias-mean", 0.0))
        use_bias = cfl.get_bool("use-bias", True)
        self.orthonormal_constraint = f32(cfl.get_float("orthonormal-constraint", 0.0))
        if param_stddev < 0.0:
            param_stddev = 1.0 / np.sqrt(input_dim * len(offsets))
        param_stddev = f32(param_stddev)
        self.linear_params = _randn((output_dim, input_dim * len(offsets)), param_stddev)
        if use_bias:
            self.bias_params = (_randn(output_dim, bias_stddev)
                                + np.float32(bias_mean)).astype(np.float32)
        else:
            self.bias_params = np.zeros(0, dtype=np.float32)

        self.use_natural_gradient = cfl.get_bool("use-natural-gradient", True)
        rank_in = cfl.get_int("rank-in", -1)
        rank_out = cfl.get_int("rank-out", -1)
        self.alpha_in = f32(cfl.get_float("alpha-in", 4.0))
        self.alpha_out = f32(cfl.get_float("alpha-out", 4.0))
        self.num_samples_history = f32(cfl.get_float("num-samples-history", 2000.0))
        spliced = input_dim * len(offsets)
        self.rank_in = rank_in if rank_in >= 0 else min(20, (spliced + 1) // 2)
        self.rank_out = rank_out if rank_out >= 0 else min(80, (output_dim + 1) // 2)
        problem = self._natural_gradient_problem()
        if problem:
            raise cfl.error(problem)

    def _natural_gradient_problem(self):
        if self.rank_in <= 0 or self.rank_out <= 0:
            return "rank-in and rank-out must be positive"
        if not 0.0 < self.num_samples_history < 1.0e6:
            return "num-samples-history must be in (0, 1e6)"
        if self.alpha_in < 0.0 or self.alpha_out < 0.0:
            return "alpha-in and alpha-out must be >= 0"
        return None

    # -- serialization ------------------------------------------------------------
    def read_body(self, stream):
        start = stream.pos
        read_layout(self, stream, self.layout)
        # <AlphaInOut> a b, or the older <Alpha> a (both directions).
        token_pos = stream.pos
        token = stream.read_token()
        if token == "<AlphaInOut>":
            self.alpha_in = stream.read_float()
            self.alpha_out = stream.read_float()
        elif token == "<Alpha>":
            self.alpha_in = self.alpha_out = stream.read_float()
        else:
            raise stream.error("expected token <AlphaInOut> or <Alpha>, got '%s'" % token,
                               token_pos)
        stream.expect_token("<RankInOut>")
        self.rank_in = stream.read_int32()
        self.rank_out = stream.read_int32()
        stream.expect_token("</%s>" % self.type_name)
        rows, cols = self.linear_params.shape
        offsets = self.time_offsets
        if (rows <= 0 or not offsets or len(set(offsets)) != len(offsets)
                or cols % len(offsets) != 0
                or self.bias_params.shape[0] not in (0, rows)):
            raise stream.error("TdnnComponent: inconsistent time offsets %s, linear params "
                               "%dx%d and bias dim %d" % (offsets, rows, cols,
                                                          self.bias_params.shape[0]), start)
        problem = self._natural_gradient_problem()
        if problem:
            raise stream.error("TdnnComponent: " + problem, start)

    def write_body(self, stream):
        write_layout(self, stream, self.layout)
        stream.write_token("<AlphaInOut>")
        stream.write_float(self.alpha_in)
        stream.write_float(self.alpha_out)
        stream.write_token("<RankInOut>")
        stream.write_int32(self.rank_in)
        stream.write_int32(self.rank_out)

    # -- index hooks ------------------------------------------------------------------
    def get_input_indexes(self, misc_info, output_index):
        n, t, x = output_index
        if t == kNoTime:
            raise ComputationError("TdnnComponent: output index has no time")
        return [Index(n, t + off, x) for off in self.time_offsets]

    def is_computable(self, misc_info, output_index, input_index_set, used_inputs=None):
        n, t, x = output_index
        if t == kNoTime:
            raise ComputationError("TdnnComponent: output index has no time")
        inputs = [Index(n, t + off, x) for off in self.time_offsets]
        if not all(input_index_set(i) for i in inputs):
            return False
        if used_inputs is not None:
            used_inputs.extend(inputs)
        return True

    def reorder_indexes(self, input_indexes, output_indexes):
        io = _modify_computation_io(get_computation_io(input_indexes, output_indexes))
        return get_indexes_for_computation(io, input_indexes, output_indexes)

    def precompute_indexes(self, misc_info, input_indexes, output_indexes, need_backprop):
        io = _modify_computation_io(get_computation_io(input_indexes, output_indexes))
        inputs, outputs = get_indexes_for_computation(io, input_indexes, output_indexes)
        if (inputs != (input_indexes if type(input_indexes) is list else list(input_indexes))
                or outputs != (output_indexes if type(output_indexes) is list
                               else list(output_indexes))):
            raise ComputationError("TdnnComponent: indexes were not reordered with "
                                   "reorder_indexes before precomputing")
        n = io.reorder_t_in
        row_offsets = []
        for off in self.time_offsets:
            required_t = io.start_t_out + off
            input_t = (required_t - io.start_t_in) // io.t_step_in
            if required_t != io.start_t_in + io.t_step_in * input_t:
                raise ComputationError("TdnnComponent: time %d not on the input grid"
                                       % required_t)
            # With reorder_t_in = n, input times come in blocks of n per image.
            row_offsets.append((input_t // n) * n * io.num_images + input_t % n)
        return TdnnComponentPrecomputedIndexes(io.reorder_t_in, row_offsets)

    # -- computation ----------------------------------------------------------------------
    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        has_bias = self.bias_params.shape[0] != 0
        # Without a bias Kaldi adds the products to what is in ``out``
        # (kPropagateAdds); with one it overwrites it.
        self._products(xp, indexes, in_value, out, overwrite=has_bias)
        if has_bias:
            out += xp.asarray(self.bias_params)
        return None

    def propagate_overwriting(self, indexes, in_value, out):
        """Propagate into an ``out`` whose old values do not count (without
        a bias: as if it held zeros), one pass less than zeroing it."""
        xp = array_module(in_value)
        self._products(xp, indexes, in_value, out, overwrite=True)
        if self.bias_params.shape[0] != 0:
            out += xp.asarray(self.bias_params)
        return None

    def propagate_deferring_bias(self, indexes, in_value, out):
        """Propagate of a component with a bias, except that the bias is not
        added: returns it, for the caller to add (fused with what follows)."""
        xp = array_module(in_value)
        self._products(xp, indexes, in_value, out, overwrite=True)
        return xp.asarray(self.bias_params)

    def _products(self, xp, indexes, in_value, out, overwrite):
        """out (+)= the sum over time offsets of the input part times that
        offset's weight block (transposed); ``overwrite``: out = the sum."""
        if len(indexes.row_offsets) != len(self.time_offsets):
            raise ComputationError("TdnnComponent: precomputed indexes have %d offsets, "
                                   "component has %d" % (len(indexes.row_offsets),
                                                         len(self.time_offsets)))
        params = xp.asarray(self.linear_params)
        d = self.input_dim()
        rows, out_dim = out.shape
        parts = [_input_part(in_value, rows, indexes.row_stride, row_offset)
                 for row_offset in indexes.row_offsets]
        offsets = indexes.row_offsets
        if (isinstance(in_value, np.ndarray)
                and winograd.usable(offsets, indexes.row_stride, rows, d, out_dim)):
            # three evenly spaced time offsets: fewer products (winograd.py);
            # the parts above checked the input's rows
            winograd.convolution_products([params[:, i * d:(i + 1) * d].T
                                           for i in range(len(offsets))], in_value, offsets,
                                          indexes.row_stride, out, accumulate=not overwrite)
            return
        if len(parts) > 1 and len(parts) * d <= out_dim:
            # Narrow input (a TDNN-F layer's affine part): the parts side by
            # side make one product with the whole weight matrix.
            spliced = xp.empty((rows, len(parts) * d), dtype=out.dtype)
            for i, part in enumerate(parts):
                spliced[:, i * d:(i + 1) * d] = part
            parts, blocks = [spliced], [params.T]
        else:
            blocks = [params[:, i * d:(i + 1) * d].T for i in range(len(parts))]
        sum_of_products(xp, list(zip(parts, blocks)), out, overwrite=overwrite)

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: bias into every row (if any), then one AddMatMat per time
        # offset, onto what is there, in the order of the offsets.
        if len(indexes.row_offsets) != len(self.time_offsets):
            raise ComputationError("TdnnComponent: precomputed indexes have %d offsets, "
                                   "component has %d" % (len(indexes.row_offsets),
                                                         len(self.time_offsets)))
        d = self.input_dim()
        rows = out.shape[0]
        if self.bias_params.shape[0] != 0:
            out[...] = self.bias_params
        for i, row_offset in enumerate(indexes.row_offsets):
            part = _input_part(in_value, rows, indexes.row_stride, row_offset)
            kaldi.add_mat_mat(out, 1.0, part, False, self.linear_params[:, i * d:(i + 1) * d],
                              True, 1.0)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(out_deriv)
        d = self.input_dim()
        rows = out_deriv.shape[0]
        if in_deriv is not None:
            params = xp.asarray(self.linear_params)
            for i, row_offset in enumerate(indexes.row_offsets):
                part = _input_part(in_deriv, rows, indexes.row_stride, row_offset)
                part += out_deriv @ params[:, i * d:(i + 1) * d]
        if to_update is not None:
            if to_update.learning_rate == 0.0:
                return
            to_update._update_simple(indexes, in_value, out_deriv)

    def _update_simple(self, indexes, in_value, out_deriv):
        """Plain gradient step: params += learning_rate * gradient."""
        xp = array_module(in_value)
        lr = np.float32(self.learning_rate)
        params = xp.asarray(self.linear_params)
        bias = xp.asarray(self.bias_params)
        if bias.shape[0] != 0:
            bias += lr * out_deriv.sum(axis=0)
        d = in_value.shape[1]
        rows = out_deriv.shape[0]
        for i, row_offset in enumerate(indexes.row_offsets):
            part = _input_part(in_value, rows, indexes.row_stride, row_offset)
            params[:, i * d:(i + 1) * d] += lr * (out_deriv.T @ part)
        if not isinstance(params, np.ndarray):
            self.linear_params = params.get()
            self.bias_params = bias.get()

    # -- parameters (scale, add, vectorize...: ParameterArrays) -------------------------
    def dot_product(self, other):
        ans = np.vdot(self.linear_params.astype(np.float64),
                      other.linear_params.astype(np.float64))
        if self.bias_params.shape[0] != 0:
            ans += np.dot(self.bias_params.astype(np.float64),
                          other.bias_params.astype(np.float64))
        return float(ans)
