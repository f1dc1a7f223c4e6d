"""Block-structured affine components: RepeatedAffineComponent,
NaturalGradientRepeatedAffineComponent, BlockAffineComponent.

- RepeatedAffineComponent applies ONE small affine map (W, b) to each of
  ``num-repeats`` consecutive blocks of the input: block ``k`` of the output
  is ``W x_k + b``.
- BlockAffineComponent has a different map per block (a block-diagonal W):
  block ``k`` of the output is ``W_k x_k + b_k``; Kaldi stores the W_k stacked
  vertically in one (output-dim x input-dim/num-blocks) matrix.

I/O is byte-identical to Kaldi's; ``info()`` is Kaldi's Info(); the update is
the plain learning-rate gradient step (the natural-gradient variant's
preconditioner is not applied).
"""

import numpy as np

from ..common.floats import f32
from ..common.parameter_stats import matrix_stats, vector_stats
from .affine import (ParameterArrays, ReadSteps, add_scaled, check_positive, gaussian,
                     read_legacy_is_gradient, row_sum)
from .base import Field, P, UpdatableComponent, array_module

_LINEAR = Field("<LinearParams>", "matrix", "linear_params")
_BIAS = Field("<BiasParams>", "vector", "bias_params")


class RepeatedAffineComponent(ReadSteps, ParameterArrays, UpdatableComponent):
    """One (W, b) shared by ``num_repeats`` input/output blocks."""

    type_name = "RepeatedAffineComponent"
    param_attrs = ("linear_params", "bias_params")
    layout = UpdatableComponent.UPDATABLE_COMMON + (
        Field("<NumRepeats>", "int", "num_repeats"), _LINEAR, _BIAS)
    read_steps = layout + (read_legacy_is_gradient,)

    def __init__(self):
        super().__init__()
        self.num_repeats = 1
        self.linear_params = np.zeros((0, 0), np.float32)
        self.bias_params = np.zeros(0, np.float32)

    def check(self):
        if self.num_repeats <= 0:
            return "<NumRepeats> must be positive, got %d" % self.num_repeats
        if self.bias_params.shape[0] != self.linear_params.shape[0]:
            return ("<BiasParams> has dimension %d but <LinearParams> has %d rows"
                    % (self.bias_params.shape[0], self.linear_params.shape[0]))
        self.set_natural_gradient_configs()
        return None

    def set_natural_gradient_configs(self):
        """Kaldi's SetNaturalGradientConfigs (nothing for the plain type)."""

    def init_from_config(self, cfl):
        """Keys: the learning-rate keys; num-repeats, input-dim, output-dim
        (required, num-repeats dividing both); param-stddev
        (1/sqrt(input-dim/num-repeats)), bias-mean (0), bias-stddev (0)."""
        self.__init__()
        self.init_updatable_common(cfl)
        if self.max_change < 0.0 or self.l2_regularize < 0.0:
            raise cfl.error("max-change and l2-regularize must be >= 0")
        num_repeats = cfl.require("num-repeats", "int")
        input_dim = cfl.require("input-dim", "int")
        output_dim = cfl.require("output-dim", "int")
        check_positive(cfl, num_repeats=num_repeats, input_dim=input_dim,
                       output_dim=output_dim)
        if input_dim % num_repeats != 0:
            raise cfl.error("num-repeats must divide input-dim")
        if output_dim % num_repeats != 0:
            raise cfl.error("num-repeats must divide output-dim")
        block_in, block_out = input_dim // num_repeats, output_dim // num_repeats
        param_stddev = f32(cfl.get_float("param-stddev", 1.0 / np.sqrt(block_in)))
        bias_mean = f32(cfl.get_float("bias-mean", 0.0))
        bias_stddev = f32(cfl.get_float("bias-stddev", 0.0))
        if param_stddev < 0.0:
            raise cfl.error("param-stddev must be >= 0")
        self.num_repeats = num_repeats
        self.linear_params = gaussian((block_out, block_in), param_stddev)
        self.bias_params = gaussian(block_out, bias_stddev, bias_mean)
        self.set_natural_gradient_configs()

    def properties(self):
        return int(P.kSimpleComponent | P.kUpdatableComponent | P.kBackpropNeedsInput
                   | P.kBackpropAdds | P.kInputContiguous | P.kOutputContiguous)

    def input_dim(self):
        return int(self.linear_params.shape[1]) * self.num_repeats

    def output_dim(self):
        return int(self.linear_params.shape[0]) * self.num_repeats

    def info(self):
        return (self.updatable_info() + ", num-repeats=%d" % self.num_repeats
                + matrix_stats("linear-params", self.linear_params)
                + vector_stats("bias", self.bias_params, True))

    def _blocks(self, mat, width):
        """``mat`` viewed as (rows * num_repeats, width): one row per block."""
        return mat.reshape(mat.shape[0] * self.num_repeats, width)

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        block_out, block_in = self.linear_params.shape
        result = xp.matmul(self._blocks(in_value, block_in), xp.asarray(self.linear_params).T)
        result += xp.asarray(self.bias_params)
        out[...] = result.reshape(out.shape)
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: in and out seen as one row per repeat, the bias into every
        # row, then one AddMatMat onto it.
        block_out, block_in = self.linear_params.shape
        result = np.empty((out.shape[0] * self.num_repeats, block_out), np.float32)
        result[...] = self.bias_params
        kaldi.add_mat_mat(result, 1.0, np.ascontiguousarray(self._blocks(in_value, block_in)),
                          False, self.linear_params, True, 1.0)
        out[...] = result.reshape(out.shape)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(out_deriv)
        block_out, block_in = self.linear_params.shape
        if in_deriv is not None:
            d = xp.matmul(self._blocks(out_deriv, block_out), xp.asarray(self.linear_params))
            in_deriv += d.reshape(in_deriv.shape)
        if to_update is not None:
            to_update.update(in_value, out_deriv)

    def update(self, in_value, out_deriv):
        """The learning-rate step on W and b from the per-block gradients
        (also when this is a natural-gradient component: no preconditioning)."""
        xp = array_module(out_deriv)
        block_out, block_in = self.linear_params.shape
        out_blocks = self._blocks(out_deriv, block_out)
        add_scaled(self.linear_params, self.learning_rate,
                   xp.matmul(out_blocks.T, self._blocks(in_value, block_in)))
        add_scaled(self.bias_params, self.learning_rate, row_sum(xp, out_blocks))


class NaturalGradientRepeatedAffineComponent(RepeatedAffineComponent):
    """RepeatedAffineComponent whose Kaldi update preconditions the input side
    (rank min(40, block-input-dim/2), at least 1; update period 4; neither is
    stored in files)."""

    type_name = "NaturalGradientRepeatedAffineComponent"

    def set_natural_gradient_configs(self):
        rank_in = min(40, int(self.linear_params.shape[1]) // 2)
        self.rank_in = max(rank_in, 1)
        self.update_period = 4


class BlockAffineComponent(ReadSteps, ParameterArrays, UpdatableComponent):
    """Block-diagonal affine map with ``num_blocks`` independent blocks."""

    type_name = "BlockAffineComponent"
    param_attrs = ("linear_params", "bias_params")
    layout = UpdatableComponent.UPDATABLE_COMMON + (
        Field("<NumBlocks>", "int", "num_blocks"), _LINEAR, _BIAS)
    read_steps = layout + (read_legacy_is_gradient,)

    def __init__(self):
        super().__init__()
        self.num_blocks = 1
        self.linear_params = np.zeros((0, 0), np.float32)
        self.bias_params = np.zeros(0, np.float32)

    @classmethod
    def from_repeated_affine(cls, rac):
        """Kaldi's BlockAffineComponent(const RepeatedAffineComponent&): the
        shared block copied into every diagonal block."""
        ans = cls()
        for attr in ("learning_rate", "learning_rate_factor", "is_gradient", "max_change",
                     "l2_regularize"):
            setattr(ans, attr, getattr(rac, attr))
        ans.num_blocks = rac.num_repeats
        ans.linear_params = np.tile(np.asarray(rac.linear_params), (rac.num_repeats, 1))
        ans.bias_params = np.tile(np.asarray(rac.bias_params), rac.num_repeats)
        return ans

    def check(self):
        if self.num_blocks <= 0:
            return "<NumBlocks> must be positive, got %d" % self.num_blocks
        if self.linear_params.shape[0] % self.num_blocks != 0:
            return ("<LinearParams> has %d rows, not a multiple of <NumBlocks> %d"
                    % (self.linear_params.shape[0], self.num_blocks))
        if self.bias_params.shape[0] != self.linear_params.shape[0]:
            return ("<BiasParams> has dimension %d but <LinearParams> has %d rows"
                    % (self.bias_params.shape[0], self.linear_params.shape[0]))
        return None

    def init_from_config(self, cfl):
        """Keys: input-dim, output-dim, num-blocks (required, num-blocks
        dividing both); the learning-rate keys; param-stddev
        (1/sqrt(input-dim/num-blocks)), bias-stddev (1.0), bias-mean (0)."""
        self.__init__()
        input_dim = cfl.require("input-dim", "int")
        output_dim = cfl.require("output-dim", "int")
        num_blocks = cfl.require("num-blocks", "int")
        self.init_updatable_common(cfl)
        if self.max_change < 0.0 or self.l2_regularize < 0.0:
            raise cfl.error("max-change and l2-regularize must be >= 0")
        check_positive(cfl, input_dim=input_dim, output_dim=output_dim, num_blocks=num_blocks)
        if input_dim % num_blocks != 0 or output_dim % num_blocks != 0:
            raise cfl.error("num-blocks must divide input-dim and output-dim")
        param_stddev = f32(cfl.get_float("param-stddev", 1.0 / np.sqrt(input_dim // num_blocks)))
        bias_stddev = f32(cfl.get_float("bias-stddev", 1.0))
        bias_mean = f32(cfl.get_float("bias-mean", 0.0))
        if param_stddev < 0.0 or bias_stddev < 0.0:
            raise cfl.error("param-stddev and bias-stddev must be >= 0")
        self.num_blocks = num_blocks
        self.linear_params = gaussian((output_dim, input_dim // num_blocks), param_stddev)
        self.bias_params = gaussian(output_dim, bias_stddev, bias_mean)

    def properties(self):
        return int(P.kSimpleComponent | P.kUpdatableComponent | P.kBackpropNeedsInput
                   | P.kBackpropAdds)

    def input_dim(self):
        return int(self.linear_params.shape[1]) * self.num_blocks

    def output_dim(self):
        return int(self.linear_params.shape[0])

    def info(self):
        return (self.updatable_info() + ", num-blocks=%d" % self.num_blocks
                + matrix_stats("linear-params", self.linear_params)
                + vector_stats("bias", self.bias_params, True))

    def _block_params(self, xp):
        """W as (num_blocks, rows per block, cols per block)."""
        rows, cols = self.linear_params.shape
        return xp.asarray(self.linear_params).reshape(self.num_blocks, rows // self.num_blocks,
                                                      cols)

    def _split(self, mat, width):
        """(N, num_blocks*width) -> (num_blocks, N, width)."""
        return mat.reshape(mat.shape[0], self.num_blocks, width).transpose(1, 0, 2)

    @staticmethod
    def _join(blocks):
        """(num_blocks, N, width) -> (N, num_blocks*width)."""
        nb, n, width = blocks.shape
        return blocks.transpose(1, 0, 2).reshape(n, nb * width)

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        w = self._block_params(xp)
        result = self._join(xp.matmul(self._split(in_value, w.shape[2]), w.transpose(0, 2, 1)))
        result += xp.asarray(self.bias_params)
        out[...] = result
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: the bias into every row, then (AddMatMatBatched on the CPU)
        # one AddMatMat per block, on the block's column ranges.
        rows_per_block = self.linear_params.shape[0] // self.num_blocks
        cols_per_block = self.linear_params.shape[1]
        out[...] = self.bias_params
        for b in range(self.num_blocks):
            kaldi.add_mat_mat(out[:, b * rows_per_block:(b + 1) * rows_per_block], 1.0,
                              in_value[:, b * cols_per_block:(b + 1) * cols_per_block], False,
                              self.linear_params[b * rows_per_block:(b + 1) * rows_per_block],
                              True, 1.0)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(out_deriv)
        w = self._block_params(xp)
        d_blocks = self._split(out_deriv, w.shape[1])
        if in_deriv is not None:
            in_deriv += self._join(xp.matmul(d_blocks, w))
        if to_update is not None:
            grad = xp.matmul(d_blocks.transpose(0, 2, 1), self._split(in_value, w.shape[2]))
            add_scaled(to_update.linear_params, to_update.learning_rate,
                       grad.reshape(to_update.linear_params.shape))
            add_scaled(to_update.bias_params, to_update.learning_rate, row_sum(xp, out_deriv))
