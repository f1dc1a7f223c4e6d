"""Compilation and optimization in one call: ComputationRequest + Nnet ->
the NnetComputation Kaldi's tools run.

``compile(nnet, request)`` is Kaldi's Compiler::CreateComputation followed by
Optimize() with the given NnetOptimizeOptions (Kaldi's defaults when none are
given). ``optimize=False`` returns the unoptimized computation exactly as
Kaldi's compiler produces it (with matrix debug info). It is
``pynnet3.compile``.
"""

from ..compiler.compiler import Compiler
from ..optimize.optimizer import max_output_time_in_request, optimize as optimize_

__all__ = ["compile"]


def compile(nnet, request, optimize=True, options=None, output_debug_info=True,
            check=False):
    """Compiles ``request`` (a ComputationRequest, or a list of them for a
    multi-segment 'online' computation) for ``nnet``.

    With ``optimize`` (the default, as in Kaldi's tools) the computation is
    optimized with ``options`` (an NnetOptimizeOptions; None means Kaldi's
    defaults), running the ComputationChecker after every pass when
    ``check`` is true. Raises ComputationError if an output cannot be
    computed from the supplied inputs (the message names those outputs and
    the missing inputs).
    """
    computation = Compiler(request, nnet).create_computation(output_debug_info)
    if not optimize:
        return computation
    if isinstance(request, (list, tuple)):
        # Several segments (online compilation): Kaldi takes the last
        # request's value; it only matters for backprop, which such
        # computations do not have.
        max_t = max_output_time_in_request(request[-1])
    else:
        max_t = max_output_time_in_request(request)
    return optimize_(options, nnet, max_t, computation, check=check)
