"""DistributeComponent: splits each input row into blocks spread over x.

Kaldi's nnet-general-component.cc. With ``input_dim = num_blocks *
output_dim``, the output Index (n, t, x) is block ``x mod num_blocks`` of the
input row (n, t, x div num_blocks) (floor division, so negative x works). It
is non-simple (it changes x) and precomputes, for each output row, the pair
(input row, first input column) — serialized as
``<DistributeComponentPrecomputedIndexes> <Pairs> [ row,col ... ]``.
"""

import numpy as np

from ..common.index import Index
from ..errors import ComputationError
from .base import Component, Field, PrecomputedIndexes, array_module


class DistributeComponentPrecomputedIndexes(PrecomputedIndexes):
    """Kaldi's DistributeComponentPrecomputedIndexes: ``pairs`` of
    (input row, input column offset), one per output row."""

    type_name = "DistributeComponentPrecomputedIndexes"

    def __init__(self, pairs=()):
        self.pairs = [tuple(p) for p in pairs]

    def __eq__(self, other):
        return (isinstance(other, DistributeComponentPrecomputedIndexes)
                and list(self.pairs) == list(other.pairs))

    def read_body(self, stream):
        stream.expect_token("<Pairs>")
        self.pairs = stream.read_int_pair_vector()
        stream.expect_token("</%s>" % self.type_name)

    def write_body(self, stream):
        stream.write_token("<Pairs>")
        stream.write_int_pair_vector(self.pairs)


class DistributeComponent(Component):
    """Kaldi's DistributeComponent (``input_dim`` a multiple of ``output_dim``)."""

    type_name = "DistributeComponent"

    # Kaldi's propagate copies (rows, or a vector into every row): so does ours.
    kaldi_exact = True
    layout = (
        Field("<InputDim>", "int", "input_dim_"),
        Field("<OutputDim>", "int", "output_dim_"),
    )

    def properties(self):
        return 0

    def input_dim(self):
        return self.input_dim_

    def output_dim(self):
        return self.output_dim_

    @staticmethod
    def _problem(input_dim, output_dim):
        if input_dim <= 0 or output_dim <= 0 or input_dim % output_dim != 0:
            return ("input-dim (%d) and output-dim (%d) must be positive and input-dim a "
                    "multiple of output-dim" % (input_dim, output_dim))
        return None

    def init_from_config(self, cfl):
        input_dim = cfl.get_int("input-dim")
        output_dim = cfl.get_int("output-dim")
        if input_dim is None or output_dim is None:
            raise cfl.error("invalid initializer for DistributeComponent: input-dim and "
                            "output-dim are required")
        problem = self._problem(input_dim, output_dim)
        if problem:
            raise cfl.error("DistributeComponent: " + problem)
        self.input_dim_, self.output_dim_ = input_dim, output_dim

    def read_body(self, stream):
        start = stream.pos
        super().read_body(stream)
        problem = self._problem(self.input_dim_, self.output_dim_)
        if problem:
            raise stream.error("DistributeComponent: " + problem, start)

    # -- index hooks ------------------------------------------------------------------
    def _input_index_and_block(self, output_index):
        num_blocks = self.input_dim_ // self.output_dim_
        n, t, x = output_index
        input_x = x // num_blocks       # floor division, as Kaldi's for negative x
        return Index(n, t, input_x), x - input_x * num_blocks

    def get_input_indexes(self, misc_info, output_index):
        return [self._input_index_and_block(output_index)[0]]

    def is_computable(self, misc_info, output_index, input_index_set, used_inputs=None):
        input_index = self._input_index_and_block(output_index)[0]
        if not input_index_set(input_index):
            return False
        if used_inputs is not None:
            used_inputs.append(input_index)
        return True

    def precompute_indexes(self, misc_info, input_indexes, output_indexes, need_backprop):
        row_of = {}
        for i, index in enumerate(input_indexes):
            row_of[tuple(index)] = i     # the last occurrence wins, as in Kaldi
        block_size = self.output_dim_
        pairs = []
        for index in output_indexes:
            input_index, block = self._input_index_and_block(index)
            row = row_of.get(tuple(input_index))
            if row is None:
                raise ComputationError("DistributeComponent: input index %s of output index "
                                       "%s not found" % (tuple(input_index), tuple(index)))
            pairs.append((row, block * block_size))
        return DistributeComponentPrecomputedIndexes(pairs)

    # -- computation ----------------------------------------------------------------------
    def _locations(self, xp, indexes, num_output_rows):
        if len(indexes.pairs) != num_output_rows:
            raise ComputationError("DistributeComponent: %d precomputed pairs for %d output "
                                   "rows" % (len(indexes.pairs), num_output_rows))
        pairs = np.asarray(indexes.pairs, dtype=np.int64).reshape(-1, 2)
        rows = xp.asarray(pairs[:, :1])
        cols = xp.asarray(pairs[:, 1:] + np.arange(self.output_dim_)[None, :])
        return rows, cols

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        rows, cols = self._locations(xp, indexes, out.shape[0])
        out[...] = in_value[rows, cols]
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module(out_deriv)
        num_blocks = self.input_dim_ // self.output_dim_
        if out_deriv.shape[0] != in_deriv.shape[0] * num_blocks:
            # Some input elements are never used; their derivative is zero.
            in_deriv[...] = 0
        rows, cols = self._locations(xp, indexes, out_deriv.shape[0])
        in_deriv[rows, cols] = out_deriv
