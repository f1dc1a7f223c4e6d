"""The network's threads in nnet3-compute and nnet3-xvector-compute.

With BLAS arithmetic a computer runs its computations on as many threads of
its own as OpenBLAS would start, each with single-threaded BLAS (see
:mod:`pynnet3.compute.threads`); Kaldi's exact arithmetic follows Kaldi's
own BLAS threads and so runs on the calling thread.
"""

import contextlib

from ..compute import blas_threads as blas_control
from ..numerics.openblas_plan import openblas_threads_from_environment
from ._malloc_arenas import share_one_malloc_arena

__all__ = ["network_threads", "running"]


def network_threads(opts):
    """How many threads the tool's computer should run on (``opts``: the
    parsed options, with ``kaldi_exact_arithmetic``)."""
    return 1 if opts.kaldi_exact_arithmetic else openblas_threads_from_environment()


@contextlib.contextmanager
def running(computer):
    """Around a tool's loop over its utterances. Where ``computer`` has
    threads of its own (``num_threads`` > 1, which a GPU backend never has):
    one malloc arena for the process, asked before its threads start, and
    BLAS held at one thread on this thread too. At the end, or after an
    error, the computer is closed: what was submitted behind a failure
    does not run."""
    threaded = computer.num_threads > 1
    if threaded:
        share_one_malloc_arena()
    try:
        with blas_control.single_threaded() if threaded else contextlib.nullcontext():
            yield computer
    finally:
        computer.close()
