"""Debug info built on first access (LazyMatrixDebugInfo, made by the compiled
compiler): ExtendMatrices pads an unbuilt list by wrapping its recipe, giving
the list it gives an eager one, and the ComputationChecker checks an unbuilt
list's row count and smallest n without building it."""

import copy

import pytest

from reference_cases import COMPILE_CASES as CASES, load_case

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.driver.compile_and_optimize import compile as compile_
from pynnet3.compiler.computation import LazyMatrixDebugInfo, MatrixDebugInfo
from pynnet3.optimize.checker import ComputationCheckError, check_computation
from pynnet3.optimize import row_ops
from pynnet3.optimize.addition import convert_addition_to_assignment
from pynnet3.optimize.extend_matrices import _padded_cindexes, extend_matrices
from pynnet3.optimize.model_update import consolidate_model_update
from pynnet3.optimize.renumber import renumber_computation

pytest.importorskip("pynnet3._fast.compiler_kernel")


def _eager(computation):
    out = copy.copy(computation)
    out.matrix_debug_info = [MatrixDebugInfo(d.is_deriv, list(d.cindexes))
                             for d in computation.matrix_debug_info]
    return out


def _passes_before_extension(nnet, computation):
    """What Optimize() runs before ExtendMatrices (it makes the copies that
    ExtendMatrices looks for)."""
    consolidate_model_update(nnet, computation)
    convert_addition_to_assignment(nnet, computation)
    changed = row_ops.snip_row_ops(computation)
    changed = row_ops.split_row_ops(computation) or changed
    if row_ops.replace_row_with_matrix_ops(computation) or changed:
        renumber_computation(computation)


def test_extend_matrices_pads_unbuilt_debug_info_as_built_one():
    padded = 0
    for case in CASES:
        nnet, request = load_case(case)
        lazy = compile_(nnet, request, optimize=False)
        if not any(isinstance(d, LazyMatrixDebugInfo) for d in lazy.matrix_debug_info):
            pytest.skip("the compiler made no lazy debug info")
        # (a second compilation: copying the first would build its lists)
        eager = _eager(compile_(nnet, request, optimize=False))
        _passes_before_extension(nnet, lazy)
        _passes_before_extension(nnet, eager)
        extend_matrices(lazy)
        extend_matrices(eager)
        pending = [d for d in lazy.matrix_debug_info
                   if isinstance(d, LazyMatrixDebugInfo) and d.pending() is not None]
        padded += sum(1 for d in pending if d.pending()[2] is _padded_cindexes)
        check_computation(nnet, lazy)       # (reads only the pending summaries)
        assert all(d.pending() is not None for d in pending)
        assert lazy.matrix_debug_info == eager.matrix_debug_info
        if padded >= 3:
            return
    assert padded > 0, "no reference case extends a matrix with unbuilt debug info"


def test_checker_reads_unbuilt_row_count():
    nnet, request = load_case(CASES[0])
    computation = compile_(nnet, request, optimize=False)
    check_computation(nnet, computation)
    m = next(i for i, d in enumerate(computation.matrix_debug_info)
             if isinstance(d, LazyMatrixDebugInfo) and d.pending() is not None
             and d.pending()[0] > 0)
    info = computation.matrix_debug_info[m]
    num_rows, min_n, build, args = info.pending()
    computation.matrix_debug_info[m] = LazyMatrixDebugInfo(info.is_deriv, num_rows + 1,
                                                           min_n, build, args)
    with pytest.raises(ComputationCheckError, match="wrong num-rows"):
        check_computation(nnet, computation)
    computation.matrix_debug_info[m] = LazyMatrixDebugInfo(info.is_deriv, num_rows, -1,
                                                           build, args)
    with pytest.raises(ComputationCheckError, match="negative n"):
        check_computation(nnet, computation)
