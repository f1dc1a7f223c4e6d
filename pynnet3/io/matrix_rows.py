"""A matrix that is written as it is computed.

nnet3-compute's output for an utterance is num_frames x output_dim floats
(24 MB for 1000 frames of a 6024-pdf model). Given as :class:`MatrixRows`,
the table writer writes each block of rows as the network delivers it, so
the whole matrix never has to be in memory at once.
"""

import numpy as np

from ..errors import PynnetError

__all__ = ["MatrixRows"]


class MatrixRows:
    """A ``num_rows`` x ``num_cols`` float32 matrix given as ``blocks``: an
    iterable of 2-D arrays of consecutive rows, in order.

    Guarantee: written to a table, it gives byte for byte what the matrix
    its blocks stack to gives. Each block is written before the next one is
    asked for, so a block may be a view of memory its producer reuses
    afterwards. Blocks that do not add up to the promised shape fail the
    write with an error naming both shapes. The blocks can be consumed once.
    """

    __slots__ = ("num_rows", "num_cols", "blocks")

    def __init__(self, num_rows, num_cols, blocks):
        self.num_rows = int(num_rows)
        self.num_cols = int(num_cols)
        self.blocks = blocks

    @property
    def shape(self):
        return (self.num_rows, self.num_cols)

    def map(self, fn):
        """The same rows with ``fn`` applied to each block (lazily)."""
        return MatrixRows(self.num_rows, self.num_cols, (fn(block) for block in self.blocks))

    def checked_blocks(self):
        """The blocks as float32 arrays, checked against the promised shape."""
        done = 0
        for block in self.blocks:
            block = np.asarray(block, dtype=np.float32)
            if (block.ndim != 2 or block.shape[1] != self.num_cols
                    or done + block.shape[0] > self.num_rows):
                raise PynnetError("a %d x %d matrix written by blocks of rows got a block of "
                                  "shape %s after %d rows"
                                  % (self.num_rows, self.num_cols, block.shape, done))
            done += block.shape[0]
            yield block
        if done != self.num_rows:
            raise PynnetError("a %d x %d matrix written by blocks of rows got only %d rows"
                              % (self.num_rows, self.num_cols, done))

    def stack(self):
        """The whole matrix (a new array)."""
        out = np.empty(self.shape, dtype=np.float32)
        done = 0
        for block in self.checked_blocks():
            out[done:done + block.shape[0]] = block
            done += block.shape[0]
        return out
