"""The optimizer's driver: Kaldi's Optimize() (nnet-optimize.cc).

:func:`optimize` rewrites a compiled NnetComputation in place, running the
passes in Kaldi's order and under Kaldi's option gates, so that with the same
options the result is the computation Kaldi's tools run. Every pass preserves
what the computation computes (outputs, input derivatives, model gradients);
ConsolidateIoOperations always runs, because the I/O commands must come first
and last in each segment for a computation to be runnable.

With ``check=True`` (Kaldi: ``--verbose >= 3``) the ComputationChecker runs
before the first pass and after every pass, so that a pass that breaks a
computation is named by the check that follows it, and the peak memory
before and after optimization is logged, as Kaldi does.
"""

import gc
import logging

from ..errors import ComputationError
from . import (addition, extend_matrices, model_update, renumber, row_ops, sizing,
               variable_merging, zeroing)
from .analysis import get_max_memory_use
from .checker import check_computation
from .consolidate_io import consolidate_io_operations
from .deriv_times import limit_derivative_times
from .computation_edit import fix_goto_label
from .looped_optimizer import optimize_looped_computation
from .memory_compression import optimize_memory_compression
from .options import INT32_MAX, INT32_MIN, NnetOptimizeOptions

log = logging.getLogger(__name__)


def max_output_time_in_request(request):
    """The largest ``t`` among the indexes of the request's outputs (Kaldi's
    MaxOutputTimeInRequest); a request without output indexes is an error."""
    best = None
    for io in request.outputs:
        for index in io.indexes:
            t = index[1]
            if best is None or t > best:
                best = t
    if best is None:
        raise ComputationError("Failed to find any output indexes in computation request.")
    return best


def _checker(nnet, check):
    if not check:
        return lambda computation, check_rewrite, after: None

    def run(computation, check_rewrite, after):
        try:
            check_computation(nnet, computation, check_rewrite)
        except ComputationError as e:
            raise ComputationError("computation check failed after %s: %s" % (after, e)) \
                from e
    return run


def optimize(options, nnet, max_output_time_in_request, computation, check=False):
    """Optimizes ``computation`` (compiled for ``nnet``) in place, as Kaldi's
    Optimize(config, nnet, max_output_time_in_request, computation).

    ``options`` is an NnetOptimizeOptions (None: Kaldi's defaults);
    ``max_output_time_in_request`` only matters when
    ``max_deriv_time_relative`` is set (see :func:`max_output_time_in_request`).
    Returns ``computation``.
    """
    # The passes allocate many small objects (commands, submatrix records,
    # access lists) and create no reference cycles, so Python's cyclic
    # garbage collector only costs time here (it rescans every live object,
    # up to ~40% of optimize time on large computations).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _optimize(options, nnet, max_output_time_in_request, computation, check)
    finally:
        if enabled:
            gc.enable()


def _optimize(options, nnet, max_output_time_in_request, computation, check):

    opts = options if options is not None else NnetOptimizeOptions()
    checked = _checker(nnet, check)
    checked(computation, True, "compilation")
    if check:
        log.info("Before optimization, max memory use (bytes) = %d",
                 get_max_memory_use(computation))
    on = opts.optimize

    # Derivative-time limits come first: later passes rely on matrices that
    # the limiter may shrink not having been merged yet.
    max_deriv_time = opts.max_deriv_time
    if opts.max_deriv_time_relative != INT32_MAX:
        max_deriv_time = opts.max_deriv_time_relative + max_output_time_in_request
    if opts.min_deriv_time != INT32_MIN or max_deriv_time != INT32_MAX:
        limit_derivative_times(nnet, opts.min_deriv_time, max_deriv_time, computation)
        checked(computation, True, "limit_derivative_times")

    if on and opts.consolidate_model_update:
        model_update.consolidate_model_update(nnet, computation)
        checked(computation, True, "consolidate_model_update")

    if on and opts.convert_addition:
        addition.convert_addition_to_assignment(nnet, computation)
        checked(computation, True, "convert_addition_to_assignment")

    if on and (opts.snip_row_ops or opts.optimize_row_ops or opts.split_row_ops):
        must_renumber = False
        if opts.snip_row_ops and row_ops.snip_row_ops(computation):
            must_renumber = True
        if opts.split_row_ops and row_ops.split_row_ops(computation):
            must_renumber = True
        if opts.optimize_row_ops and row_ops.replace_row_with_matrix_ops(computation):
            must_renumber = True
        if must_renumber:
            renumber.renumber_computation(computation)
            checked(computation, False, "row-op optimizations")

    if on and opts.extend_matrices and not opts.optimize_looped_computation:
        extend_matrices.extend_matrices(computation)
        checked(computation, False, "extend_matrices")

    if on and (opts.remove_assignments or opts.backprop_in_place
               or opts.propagate_in_place):
        variable_merging.variable_merging_optimization(opts, nnet, computation)
        checked(computation, False, "variable_merging_optimization")

    if on and opts.initialize_undefined:
        zeroing.remove_unnecessary_zeroing(nnet, computation)
        checked(computation, False, "remove_unnecessary_zeroing")

    if (on and opts.move_sizing_commands) or opts.optimize_looped_computation:
        sizing.move_sizing_commands(nnet, computation)
        checked(computation, False, "move_sizing_commands")

    # Not gated by 'optimize': a looped computation cannot run without it. It
    # must precede remove_unnecessary_allocation.
    if opts.optimize_looped_computation:
        optimize_looped_computation(nnet, computation)
        checked(computation, False, "optimize_looped_computation")

    if on and opts.allocate_from_other and not opts.optimize_looped_computation:
        sizing.remove_unnecessary_allocation(nnet, computation)
        checked(computation, False, "remove_unnecessary_allocation")

    consolidate_io_operations(nnet, computation)

    if opts.optimize_looped_computation:
        fix_goto_label(computation)

    if opts.memory_compression_level > 0 and not opts.optimize_looped_computation:
        optimize_memory_compression(nnet, opts.memory_compression_level, computation)
        checked(computation, False, "optimize_memory_compression")

    checked(computation, False, "optimization")
    if check:
        log.info("After optimization, max memory use (bytes) = %d",
                 get_max_memory_use(computation))
    return computation
