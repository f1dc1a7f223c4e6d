"""Compilation: ComputationRequest + Nnet -> NnetComputation.

``compile(nnet, request)`` returns Kaldi's *unoptimized* computation (what
Kaldi's Compiler::CreateComputation produces, with matrix debug info). The
optimizer is not part of this package yet: ``optimize=True`` raises
UsageError until it lands, so callers never silently get an unoptimized
computation they asked to be optimized.
"""

import sys
import types

from ..errors import UsageError
from .request import ComputationRequest, IoSpecification

__all__ = ["compile", "ComputationRequest", "IoSpecification"]


def compile(nnet, request, optimize=False, output_debug_info=True):
    """Compiles ``request`` (a ComputationRequest, or a list of them for a
    multi-segment 'online' computation) for ``nnet``.

    Returns an unoptimized NnetComputation identical to Kaldi's. Raises
    ComputationError if an output cannot be computed from the supplied inputs
    (the message names those outputs and the missing inputs), and UsageError
    for ``optimize=True`` (the optimizer is not available yet).
    """
    if optimize:
        raise UsageError("compile(optimize=True): the computation optimizer is not "
                         "available yet; call compile(nnet, request) for the unoptimized "
                         "computation")
    from .compiler import Compiler
    return Compiler(request, nnet).create_computation(output_debug_info)


class _CallableModule(types.ModuleType):
    """Lets ``pynnet3.compile(nnet, request)`` work: importing any submodule
    binds the name ``pynnet3.compile`` to this package, so the package itself
    is made callable as :func:`compile`."""

    def __call__(self, nnet, request, optimize=False, output_debug_info=True):
        return compile(nnet, request, optimize, output_debug_info)


sys.modules[__name__].__class__ = _CallableModule
