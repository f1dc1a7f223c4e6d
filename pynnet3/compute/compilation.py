"""The one place where the compute layer (nnet3-compute, nnet3-xvector-compute,
the Python API) turns ComputationRequests into computations.

:class:`ComputationCompiler` plays the role of Kaldi's
CachingOptimizingCompiler for these callers: one object per network and tool
run, asked for a computation per request, keeping every computation it made
so that each chunk shape is compiled once. Guarantee: the same request always
gives the same computation object (the cache never evicts), so execution
plans built on a computation (:mod:`pynnet3.compute.plan`) are reused too.
"""

import logging
import time

from ..compile import compile as compile_request

logger = logging.getLogger("pynnet3")

__all__ = ["ComputationCompiler"]


class ComputationCompiler:
    """Compiles requests for one network and caches the computations, keyed
    by the request's serialization (Kaldi's cache compares requests the same
    way: equal requests give the same computation)."""

    __slots__ = ("nnet", "_cache", "seconds_compiling")

    def __init__(self, nnet):
        self.nnet = nnet
        self._cache = {}
        self.seconds_compiling = 0.0

    def compile(self, request):
        """The computation for ``request`` (compiled on first use)."""
        key = request.to_bytes(binary=True)
        computation = self._cache.get(key)
        if computation is None:
            start = time.perf_counter()
            computation = compile_request(self.nnet, request)
            self.seconds_compiling += time.perf_counter() - start
            self._cache[key] = computation
        return computation

    def __len__(self):
        return len(self._cache)

    def log_summary(self):
        """Kaldi's closing line of the caching compiler."""
        logger.info("%g seconds taken in nnet3 compilation total (%d computations)",
                    self.seconds_compiling, len(self._cache))
