"""Restricted self-attention over a window of time steps.

Kaldi's RestrictedAttentionComponent (nnet-attention-component, attention.cc)
and its precomputed indexes.

Each head's input block is (key, value, query) with query = (key-part,
context-part); output t attends to the inputs at t + time_stride * o for
o in [-num_left_inputs, num_right_inputs] (context_dim = their number):
    b[o] = key_scale * query_key . key[t + o*stride] + query_context[o]
    c = softmax(b);  output = sum_o c[o] * value[t + o*stride]  (+ c itself
    appended when output_context).
Inputs are laid out on a regular (t, image) grid: t has the larger stride,
images are the distinct (n, x) pairs; ReorderIndexes pads the grid with
kNoTime placeholders (zero rows at the input, ignored at the output).

Guarantees: serialization, Info() and Properties() equal Kaldi's; the index
hooks and precomputed indexes reproduce Kaldi's grid; propagate/backprop
follow Kaldi's arithmetic (propagate adds the value part to ``out`` and
sets the context part, as Kaldi does). StoreStats keeps Kaldi's entropy and
posterior statistics on a random two thirds of the minibatches.
"""

import math

import numpy as np

from . import kaldi_random
from ..common.floats import kaldi_str
from ..common.index import Index, kNoTime
from ..errors import ComputationError
from ..numerics.openblas import sdot_rows
from .base import Component, Field, P, PrecomputedIndexes, array_module, to_host
from .convolution_computation import ConvolutionComputationIo, get_computation_io, get_nx_list


class RestrictedAttentionComponentPrecomputedIndexes(PrecomputedIndexes):
    """The (t, image) grid of one propagate: a ConvolutionComputationIo."""

    type_name = "RestrictedAttentionComponentPrecomputedIndexes"

    def __init__(self, io=None):
        self.io = ConvolutionComputationIo() if io is None else io

    def read_body(self, stream):
        stream.expect_token("<Io>")
        self.io = ConvolutionComputationIo.read(stream)
        stream.expect_token("</%s>" % self.type_name)

    def write_body(self, stream):
        stream.write_token("<Io>")
        self.io.write(stream)


# ---------------------------------------------------------------------------
# The attention math on one head (Kaldi's attention.cc)
# ---------------------------------------------------------------------------

def _head_dims(keys, queries, values):
    """(output rows, key dim, context dim, value dim, row shift) of one head:
    output row i attends to key and value rows i + o * shift for each
    context position o."""
    num_out = queries.shape[0]
    key_dim = keys.shape[1]
    context_dim = queries.shape[1] - key_dim
    extra = keys.shape[0] - num_out
    if context_dim < 2 or extra <= 0 or extra % (context_dim - 1) != 0:
        raise ComputationError("attention: %d input rows and %d output rows do not fit "
                               "context-dim %d" % (keys.shape[0], num_out, context_dim))
    return num_out, key_dim, context_dim, values.shape[1], extra // (context_dim - 1)


def attention_forward(xp, key_scale, keys, queries, values, c, output):
    """Kaldi's AttentionForward: fills ``c`` (softmax weights), adds the
    weighted values to output[:, :value_dim] and, if ``output`` is wider,
    copies ``c`` into its last context_dim columns."""
    num_out, key_dim, context_dim, value_dim, shift = _head_dims(keys, queries, values)
    q_key = queries[:, :key_dim]
    b = xp.empty((num_out, context_dim), dtype=np.float32)
    for o in range(context_dim):
        b[:, o] = (q_key * keys[o * shift:o * shift + num_out]).sum(axis=1)
    b *= np.float32(key_scale)
    b += queries[:, key_dim:]
    b -= b.max(axis=1, keepdims=True)
    e = xp.exp(b)
    c[...] = e / e.sum(axis=1, keepdims=True)
    out_values = output[:, :value_dim]
    for o in range(context_dim):
        out_values += c[:, o:o + 1] * values[o * shift:o * shift + num_out]
    if output.shape[1] == value_dim + context_dim:
        output[:, value_dim:] = c


def attention_forward_kaldi_exact(kaldi, key_scale, keys, queries, values, c, output):
    """attention_forward with Kaldi's CPU arithmetic (``kaldi``: a
    :class:`pynnet3.numerics.kaldi_cpu.KaldiCpu`): each context column of c
    is 0 + key_scale * sdot(query keys, keys) (AddDiagMatMat), plus the
    query's context part (AddMat), then SoftMaxPerRow; the values are added
    one context position at a time with a saxpy per row scaled by c
    (AddDiagVecMat)."""
    num_out, key_dim, context_dim, value_dim, shift = _head_dims(keys, queries, values)
    q_key = queries[:, :key_dim]
    scale = np.float32(key_scale)
    b = np.empty((num_out, context_dim), dtype=np.float32)
    for o in range(context_dim):
        b[:, o] = scale * sdot_rows(q_key, keys[o * shift:o * shift + num_out]) \
            + np.float32(0.0)
    kaldi.axpy_rows(b, 1.0, queries[:, key_dim:])
    kaldi.softmax_per_row(b, b)
    c[...] = b
    out_values = output[:, :value_dim]
    for o in range(context_dim):
        kaldi.axpy_rows(out_values, b[:, o], values[o * shift:o * shift + num_out])
    if output.shape[1] == value_dim + context_dim:
        output[:, value_dim:] = b


def attention_backward(xp, key_scale, keys, queries, values, c, output_deriv,
                       keys_deriv, queries_deriv, values_deriv):
    """Kaldi's AttentionBackward: adds to the key, query and value derivatives."""
    num_out, key_dim, context_dim, value_dim, shift = _head_dims(keys, queries, values)
    out_values_deriv = output_deriv[:, :value_dim]
    c_deriv = xp.empty((num_out, context_dim), dtype=np.float32)
    for o in range(context_dim):
        c_deriv[:, o] = (out_values_deriv * values[o * shift:o * shift + num_out]).sum(axis=1)
    if output_deriv.shape[1] == value_dim + context_dim:
        c_deriv += output_deriv[:, value_dim:]
    # Through the softmax: d b = c * (d c - sum(c * d c)).
    c_deriv = c * (c_deriv - (c * c_deriv).sum(axis=1, keepdims=True))
    q_key = queries[:, :key_dim]
    queries_deriv[:, key_dim:] += c_deriv
    q_key_deriv = queries_deriv[:, :key_dim]
    scale = np.float32(key_scale)
    for o in range(context_dim):
        rows = slice(o * shift, o * shift + num_out)
        q_key_deriv += scale * c_deriv[:, o:o + 1] * keys[rows]
        keys_deriv[rows] += scale * c_deriv[:, o:o + 1] * q_key
        values_deriv[rows] += c[:, o:o + 1] * out_values_deriv


# ---------------------------------------------------------------------------
# RestrictedAttentionComponent
# ---------------------------------------------------------------------------

class RestrictedAttentionComponent(Component):
    """Multi-head self-attention restricted to a window of time offsets.

    Input dim: num_heads * (key_dim + value_dim + key_dim + context_dim);
    output dim: num_heads * (value_dim + (context_dim if output_context)).
    Not updatable; statistics: ``entropy_stats`` (per head),
    ``posterior_stats`` (num_heads x context_dim), ``stats_count``.
    The memo of propagate is ``c``: (num output rows x num_heads *
    context_dim) softmax weights.
    """

    type_name = "RestrictedAttentionComponent"
    layout = tuple(Field(token, "int", attr) for token, attr in (
        ("<NumHeads>", "num_heads"), ("<KeyDim>", "key_dim"), ("<ValueDim>", "value_dim"),
        ("<NumLeftInputs>", "num_left_inputs"), ("<NumRightInputs>", "num_right_inputs"),
        ("<TimeStride>", "time_stride"),
        ("<NumLeftInputsRequired>", "num_left_inputs_required"),
        ("<NumRightInputsRequired>", "num_right_inputs_required"))) + (
        Field("<OutputContext>", "bool", "output_context"),
        Field("<KeyScale>", "float", "key_scale"),
        Field("<StatsCount>", "double", "stats_count"),
        Field("<EntropyStats>", "double_vector", "entropy_stats"),
        Field("<PosteriorStats>", "double_matrix", "posterior_stats"),
    )

    def properties(self):
        return (P.kReordersIndexes | P.kBackpropNeedsInput | P.kPropagateAdds
                | P.kBackpropAdds | P.kStoresStats | P.kUsesMemo)

    def _query_dim(self):
        return self.key_dim + self.context_dim

    def _input_dim_per_head(self):
        return self.key_dim + self.value_dim + self._query_dim()

    def _output_dim_per_head(self):
        return self.value_dim + (self.context_dim if self.output_context else 0)

    def input_dim(self):
        return self.num_heads * self._input_dim_per_head()

    def output_dim(self):
        return self.num_heads * self._output_dim_per_head()

    def _problem(self):
        """What is wrong with the configuration (Kaldi's Check()), or None."""
        if not (self.num_heads > 0 and self.key_dim > 0 and self.value_dim > 0):
            return "num-heads, key-dim and value-dim must be > 0"
        if not (self.num_left_inputs >= 0 and self.num_right_inputs >= 0
                and self.num_left_inputs + self.num_right_inputs > 0):
            return "num-left-inputs and num-right-inputs must be >= 0 with a positive sum"
        if self.time_stride <= 0:
            return "time-stride must be > 0"
        if not (0 <= self.num_left_inputs_required <= self.num_left_inputs
                and 0 <= self.num_right_inputs_required <= self.num_right_inputs):
            return ("num-left-inputs-required / num-right-inputs-required must be between 0 "
                    "and num-left-inputs / num-right-inputs")
        if not 0.0 < self.key_scale <= 1.0:
            return "key-scale must be in (0, 1]"
        if self.stats_count < 0.0:
            return "negative stats count"
        return None

    def init_from_config(self, cfl):
        for key in ("key-dim", "value-dim", "num-left-inputs", "num-right-inputs"):
            if not cfl.has(key):
                raise cfl.error("All of the values key-dim, value-dim, num-left-inputs and "
                                "num-right-inputs must be defined.")
        self.key_dim = cfl.get_int("key-dim")
        self.value_dim = cfl.get_int("value-dim")
        self.num_left_inputs = cfl.get_int("num-left-inputs")
        self.num_right_inputs = cfl.get_int("num-right-inputs")
        self.num_heads = cfl.get_int("num-heads", 1)
        self.time_stride = cfl.get_int("time-stride", 1)
        self.num_left_inputs_required = cfl.get_int("num-left-inputs-required", -1)
        self.num_right_inputs_required = cfl.get_int("num-right-inputs-required", -1)
        self.output_context = cfl.get_bool("output-context", True)
        key_scale = float(np.float32(cfl.get_float("key-scale", -1.0)))
        if key_scale < 0.0:
            if self.key_dim <= 0:
                raise cfl.error("key-dim must be > 0")
            key_scale = 1.0 / math.sqrt(self.key_dim)
        self.key_scale = float(np.float32(key_scale))
        if self.num_left_inputs_required < 0:
            self.num_left_inputs_required = self.num_left_inputs
        if self.num_right_inputs_required < 0:
            self.num_right_inputs_required = self.num_right_inputs
        self.context_dim = self.num_left_inputs + 1 + self.num_right_inputs
        self.stats_count = 0.0
        self.entropy_stats = np.zeros(0, dtype=np.float64)
        self.posterior_stats = np.zeros((0, 0), dtype=np.float64)
        problem = self._problem()
        if problem:
            raise cfl.error("Config line contains invalid values: " + problem)

    def read_body(self, stream):
        super().read_body(stream)
        self.context_dim = self.num_left_inputs + 1 + self.num_right_inputs
        problem = self._problem()
        if problem:
            raise stream.error("RestrictedAttentionComponent: " + problem)

    def info(self):
        s = ("%s, input-dim=%d, output-dim=%d, num-heads=%d, time-stride=%d, key-dim=%d, "
             "value-dim=%d, num-left-inputs=%d, num-right-inputs=%d, context-dim=%d, "
             "num-left-inputs-required=%d, num-right-inputs-required=%d, output-context=%s, "
             "key-scale=%s" % (self.type_name, self.input_dim(), self.output_dim(),
                               self.num_heads, self.time_stride, self.key_dim, self.value_dim,
                               self.num_left_inputs, self.num_right_inputs, self.context_dim,
                               self.num_left_inputs_required, self.num_right_inputs_required,
                               "true" if self.output_context else "false",
                               kaldi_str(self.key_scale)))
        if self.stats_count != 0.0:
            s += ", entropy="
            for value in self.entropy_stats.tolist():
                s += kaldi_str(value / self.stats_count) + ","
            for i in range(min(self.num_heads, 5, self.posterior_stats.shape[0])):
                s += " posterior-stats[%d]=" % i
                for value in self.posterior_stats[i].tolist():
                    s += kaldi_str(value / self.stats_count) + ","
            s += " stats-count=" + kaldi_str(self.stats_count)
        return s

    # -- statistics ---------------------------------------------------------------
    def store_stats(self, in_value, out_value, memo):
        if memo is None:
            raise ComputationError("RestrictedAttentionComponent: store_stats needs the memo")
        if self.entropy_stats.shape[0] != self.num_heads:
            self.entropy_stats = np.zeros(self.num_heads, dtype=np.float64)
            self.posterior_stats = np.zeros((self.num_heads, self.context_dim), dtype=np.float64)
            self.stats_count = 0.0
        # Kaldi stores stats for only two in three minibatches, to save time.
        if kaldi_random.rand_int(0, 2) == 0:
            return
        xp = array_module(memo)
        c = memo
        col_sums = to_host(c.sum(axis=0, dtype=np.float32)).astype(np.float64)
        self.posterior_stats += col_sums.reshape(self.num_heads, self.context_dim)
        log_c = xp.log(xp.maximum(c, np.float32(1.0e-20)))
        neg_c_log_c = to_host((-(c * log_c)).sum(axis=0, dtype=np.float32))
        entropy = neg_c_log_c.reshape(self.num_heads, self.context_dim).sum(axis=1)
        self.entropy_stats += entropy.astype(np.float32).astype(np.float64)
        self.stats_count += c.shape[0]

    def zero_stats(self):
        self.entropy_stats[...] = 0.0
        self.posterior_stats[...] = 0.0
        self.stats_count = 0.0

    def scale(self, alpha):
        self.entropy_stats *= alpha
        self.posterior_stats *= alpha
        self.stats_count *= alpha

    def add(self, alpha, other):
        if self.entropy_stats.shape[0] == 0 and other.entropy_stats.shape[0] != 0:
            self.entropy_stats = np.zeros_like(other.entropy_stats)
        if self.posterior_stats.shape[0] == 0 and other.posterior_stats.shape[0] != 0:
            self.posterior_stats = np.zeros_like(other.posterior_stats)
        if other.entropy_stats.shape[0] != 0:
            self.entropy_stats += alpha * other.entropy_stats
        if other.posterior_stats.shape[0] != 0:
            self.posterior_stats += alpha * other.posterior_stats
        self.stats_count += alpha * other.stats_count

    # -- index hooks ------------------------------------------------------------
    def get_input_indexes(self, misc_info, output_index):
        if output_index.t == kNoTime:
            raise ComputationError("RestrictedAttentionComponent: output Index has no time")
        first = output_index.t - self.time_stride * self.num_left_inputs
        return [output_index._replace(t=first + i * self.time_stride)
                for i in range(self.context_dim)]

    def is_computable(self, misc_info, output_index, input_index_set, used_inputs=None):
        if output_index.t == kNoTime:
            raise ComputationError("RestrictedAttentionComponent: output Index has no time")
        t0 = output_index.t
        stride = self.time_stride
        if used_inputs is None:
            for offset in range(-self.num_left_inputs_required,
                                self.num_right_inputs_required + 1):
                if not input_index_set(output_index._replace(t=t0 + offset * stride)):
                    return False
            return True
        used = []
        for offset in range(-self.num_left_inputs, self.num_right_inputs + 1):
            index = output_index._replace(t=t0 + offset * stride)
            if input_index_set(index):
                used.append(index)
            elif -self.num_left_inputs_required <= offset <= self.num_right_inputs_required:
                return False
        used_inputs.extend(used)
        return True

    def get_computation_structure(self, input_indexes, output_indexes):
        """Kaldi's GetComputationStructure: the grid (a ConvolutionComputationIo)
        covering the inputs and outputs, with equal t steps dividing
        time_stride, the input extended to all requested (not only required)
        context."""
        io = get_computation_io(input_indexes, output_indexes)
        if io.t_step_out == 0:
            io.t_step_out = self.time_stride
        if io.t_step_in == 0:
            io.t_step_in = self.time_stride
        t_step = math.gcd(math.gcd(io.t_step_out, io.t_step_in), self.time_stride)
        multiple_out = io.t_step_out // t_step
        multiple_in = io.t_step_in // t_step
        io.t_step_in = t_step
        io.t_step_out = t_step
        io.num_t_out = 1 + multiple_out * (io.num_t_out - 1)
        io.num_t_in = 1 + multiple_in * (io.num_t_in - 1)
        stride = self.time_stride
        first_requested = io.start_t_out - stride * self.num_left_inputs
        first_required = io.start_t_out - stride * self.num_left_inputs_required
        last_t_out = io.start_t_out + (io.num_t_out - 1) * t_step
        last_t_in = io.start_t_in + (io.num_t_in - 1) * t_step
        last_requested = last_t_out + stride * self.num_right_inputs
        last_required = last_t_out + stride * self.num_right_inputs_required
        if not (io.start_t_in >= first_requested and last_t_in <= last_requested
                and io.start_t_in <= first_required and last_t_in >= last_required):
            raise ComputationError(
                "RestrictedAttentionComponent: input times %d..%d do not match the context "
                "needed by outputs %d..%d (requested %d..%d, required %d..%d)"
                % (io.start_t_in, last_t_in, io.start_t_out, last_t_out, first_requested,
                   last_requested, first_required, last_required))
        # Requested-but-not-required inputs become zero-padding rows.
        io.start_t_in = first_requested
        io.num_t_in = 1 + (last_requested - first_requested) // t_step
        return io

    @staticmethod
    def _create_indexes(n_x_pairs, t_start, t_step, num_t, present):
        out = []
        for t in range(t_start, t_start + t_step * num_t, t_step):
            for n, x in n_x_pairs:
                index = Index(n, t, x)
                out.append(index if index in present else Index(n, kNoTime, x))
        return out

    def reorder_indexes(self, input_indexes, output_indexes):
        io = self.get_computation_structure(input_indexes, output_indexes)
        n_x_pairs = get_nx_list(input_indexes)
        if len(n_x_pairs) != io.num_images:
            raise ComputationError("RestrictedAttentionComponent: inconsistent images")
        new_in = self._create_indexes(n_x_pairs, io.start_t_in, io.t_step_in, io.num_t_in,
                                      set(input_indexes))
        new_out = self._create_indexes(n_x_pairs, io.start_t_out, io.t_step_out, io.num_t_out,
                                       set(output_indexes))
        return new_in, new_out

    def precompute_indexes(self, misc_info, input_indexes, output_indexes, need_backprop):
        return RestrictedAttentionComponentPrecomputedIndexes(
            self.get_computation_structure(input_indexes, output_indexes))

    # -- computation --------------------------------------------------------------
    def _check_rows(self, io, num_in, num_out):
        if num_in != io.num_t_in * io.num_images or num_out != io.num_t_out * io.num_images:
            raise ComputationError("RestrictedAttentionComponent: %d input / %d output rows, "
                                   "expected %d / %d from the precomputed indexes"
                                   % (num_in, num_out, io.num_t_in * io.num_images,
                                      io.num_t_out * io.num_images))
        if io.t_step_in != io.t_step_out or (io.start_t_out - io.start_t_in) % io.t_step_in:
            raise ComputationError("RestrictedAttentionComponent: irregular time grid")
        rows_left = (io.start_t_out - io.start_t_in) // io.t_step_in * io.num_images
        if rows_left < 0:
            raise ComputationError("RestrictedAttentionComponent: outputs start before inputs")
        return rows_left

    def _propagate_heads(self, indexes, in_value, out, xp, forward, backend):
        """Runs ``forward(backend, key_scale, keys, queries, values, c, out)``
        (attention_forward or attention_forward_kaldi_exact) on each head;
        returns c, the softmax weights of all heads (the memo)."""
        if indexes is None:
            raise ComputationError("RestrictedAttentionComponent: propagate needs precomputed "
                                   "indexes")
        num_out = out.shape[0]
        rows_left = self._check_rows(indexes.io, in_value.shape[0], num_out)
        c = xp.zeros((num_out, self.context_dim * self.num_heads), dtype=np.float32)
        din, dout = self._input_dim_per_head(), self._output_dim_per_head()
        k, v = self.key_dim, self.value_dim
        for h in range(self.num_heads):
            part = in_value[:, h * din:(h + 1) * din]
            forward(backend, self.key_scale, part[:, :k],
                    part[rows_left:rows_left + num_out, k + v:], part[:, k:k + v],
                    c[:, h * self.context_dim:(h + 1) * self.context_dim],
                    out[:, h * dout:(h + 1) * dout])
        return c

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        return self._propagate_heads(indexes, in_value, out, xp, attention_forward, xp)

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        return self._propagate_heads(indexes, in_value, out, np, attention_forward_kaldi_exact,
                                     kaldi)

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        if indexes is None or memo is None:
            raise ComputationError("RestrictedAttentionComponent: backprop needs the precomputed "
                                   "indexes and the propagate memo")
        xp = array_module(in_value)
        io = indexes.io
        num_out = out_deriv.shape[0]
        rows_left = self._check_rows(io, in_value.shape[0], num_out)
        din, dout = self._input_dim_per_head(), self._output_dim_per_head()
        k, v = self.key_dim, self.value_dim
        for h in range(self.num_heads):
            part = in_value[:, h * din:(h + 1) * din]
            dpart = in_deriv[:, h * din:(h + 1) * din]
            attention_backward(xp, self.key_scale, part[:, :k],
                               part[rows_left:rows_left + num_out, k + v:],
                               part[:, k:k + v],
                               memo[:, h * self.context_dim:(h + 1) * self.context_dim],
                               out_deriv[:, h * dout:(h + 1) * dout],
                               dpart[:, :k], dpart[rows_left:rows_left + num_out, k + v:],
                               dpart[:, k:k + v])
