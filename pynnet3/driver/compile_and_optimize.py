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
    """Compiles a request for a network into the computation Kaldi's tools
    run: Kaldi's Compiler::CreateComputation, then Optimize(). The optimized
    computation prints as Kaldi's (:func:`~pynnet3.compiler.computation_io.print_computation`) and its
    outputs are Kaldi's numbers when run with :class:`pynnet3.NnetComputer`.

    Args:
        nnet: the Nnet (run as given: batch-norm in training mode unless
            prepared, see :func:`pynnet3.prepare_for_test`).
        request: a ComputationRequest, or a list of them for a
            multi-segment ('online') computation.
        optimize: optimize as Kaldi's tools do (True), or return Kaldi's
            unoptimized computation (False).
        options: Kaldi's NnetOptimizeOptions (the tools'
            ``--optimization.*`` options); None: Kaldi's defaults.
        output_debug_info: keep the matrices' debug info (the Cindexes
            shown by ``print``).
        check: run Kaldi's ComputationChecker after every optimization pass.

    Returns:
        An NnetComputation: ``commands``, ``matrices``, ...;
        ``print_computation(computation, nnet)`` (pynnet3.compiler.computation_io)
        gives its text as Kaldi's NnetComputation::Print.

    Raises:
        ComputationError: an output cannot be computed from the inputs given
            (names the outputs and the missing inputs).

    Example::

        import pynnet3
        from pynnet3 import examples
        from pynnet3.compiler.computation_io import print_computation
        from pynnet3.compiler.request import IoSpecification

        nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
        request = pynnet3.ComputationRequest(
            inputs=[IoSpecification.from_t_range("input", -8, 18),
                    IoSpecification.from_t_range("ivector", 0, 1)],
            outputs=[IoSpecification.from_t_range("output", 0, 10)])
        plain = pynnet3.compile(nnet, request, optimize=False)
        computation = pynnet3.compile(nnet, request)
        print(len(plain.commands), "commands ->", len(computation.commands), "optimized")
        print(print_computation(computation, nnet).splitlines()[0])
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
