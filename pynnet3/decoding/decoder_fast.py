"""The Cython LatticeFasterDecoder (pynnet3/_fast/lattice_faster_decoder_kernel.pyx) with
the same interface as its plain-Python twin
(:class:`pynnet3.decoding.lattice_faster_decoder.LatticeFasterDecoderPy`)."""

import numpy as np

from .._fast.lattice_faster_decoder_kernel import LatticeFasterDecoderCore
from .config import LatticeFasterDecoderConfig
from .token_lattice import TokenLattice

__all__ = ["LatticeFasterDecoder"]


class LatticeFasterDecoder:
    """Kaldi's LatticeFasterDecoder over a StdFst (see decoder_py for the
    algorithm); ``decode(loglikes, tid_to_pdf)`` then
    :meth:`token_lattice`, :meth:`reached_final`, ``warnings``."""

    def __init__(self, fst, config=None):
        self.fst = fst
        self.config = config if config is not None else LatticeFasterDecoderConfig()
        self.config.check()
        self._core = LatticeFasterDecoderCore(fst, self.config)

    def decode(self, loglikes, tid_to_pdf):
        return self._core.decode(np.ascontiguousarray(loglikes, dtype=np.float32),
                                 np.ascontiguousarray(tid_to_pdf, dtype=np.int32))

    @property
    def warnings(self):
        return self._core.warnings

    def reached_final(self):
        return self._core.reached_final()

    def token_lattice(self):
        return TokenLattice(*self._core.token_lattice_arrays())
