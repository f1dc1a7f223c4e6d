"""The one place where the compute layer (nnet3-compute,
nnet3-xvector-compute, the Python API) gets a compiler: Kaldi's
CachingOptimizingCompiler (:mod:`pynnet3.driver.caching`), one per network
and tool run, as Kaldi's tools make one. Each request is compiled, checked
and optimized once (``optimize_options``: NnetOptimizeOptions, the tools'
``--optimization.*``; ``compiler_options``: CachingOptimizingCompilerOptions,
``--use-shortcut`` / ``--cache-capacity`` where a tool has them).
"""

import logging

from ..driver.caching import CachingOptimizingCompiler

logger = logging.getLogger("pynnet3")

__all__ = ["make_compiler", "log_compiler_summary"]


def make_compiler(nnet, optimize_options=None, compiler_options=None):
    """The compiler the compute layer uses for ``nnet`` (an object with
    ``compile(request) -> NnetComputation``)."""
    return CachingOptimizingCompiler(nnet, optimize_options, compiler_options)


def log_compiler_summary(compiler):
    """Kaldi's closing line of the caching compiler (time spent compiling)."""
    logger.info("%s", compiler.timing_summary())
