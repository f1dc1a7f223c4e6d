"""Index and Cindex, nnet3's names for a row of a matrix.

An Index is (n, t, x): n the sequence within a minibatch, t the time, x an
extra coordinate (mostly 0). A Cindex is (node_index, Index). Both are plain
tuples, hashable and ordered as Kaldi orders them (n, then t, then x).
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
