"""Index and Cindex, nnet3's names for a row of a matrix.

An Index is (n, t, x): n the sequence within a minibatch, t the time, x an
extra coordinate (mostly 0). A Cindex is (node_index, Index). Both are plain
tuples and hashable. CAUTION: tuple comparison orders an Index by (n, t, x),
but Kaldi's Index::operator< orders by t, then x, then n; sort with
``key=index_key`` / ``key=cindex_key`` to get Kaldi's order.
"""

from typing import NamedTuple

# Kaldi's kNoTime: a t value meaning "no time index" (used for padding).
kNoTime = -2**31


class Index(NamedTuple):
    n: int = 0
    t: int = 0
    x: int = 0

    def __str__(self):
        # Kaldi prints an Index as (n,t,x) with omitted zeros, e.g. "(0,5)" ;
        # see print_index in compile/printing for the exact rules.
        return "(%d,%d,%d)" % (self.n, self.t, self.x)


class Cindex(NamedTuple):
    node: int
    index: Index


def index_key(index):
    """Sort key giving Kaldi's Index order (t, then x, then n)."""
    return (index[1], index[2], index[0])


def cindex_key(cindex):
    """Sort key giving Kaldi's Cindex order (node, then the Index order)."""
    index = cindex[1]
    return (cindex[0], index[1], index[2], index[0])
