"""Variable merging's round in C (``merge_round`` in
pynnet3/_fast/variable_merging_kernel.pyx) edits a computation exactly as the Python
twin (VariableMergingOptimizer.may_be_merged / do_merge) does: on every
reference computation (ours unoptimized and optimized, Kaldi's optimized), all
rounds until one merges nothing, with left and right merges allowed, and with
each alone."""

import copy

import pytest

from test_optimize_renumber_fast import _computations

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize import analysis
from pynnet3.optimize.options import NnetOptimizeOptions
from pynnet3.optimize.variable_merging import VariableMergingOptimizer
from reference_cases import COMPILE_CASES as CASES, case_id as _id

fast = pytest.importorskip("pynnet3._fast.variable_merging_kernel")
if analysis.Analyzer is analysis.AnalyzerPy:
    pytest.skip("the compiled analysis is not in use", allow_module_level=True)


def _merge_all(options, nnet, computation, use_kernel):
    rounds = 0
    while VariableMergingOptimizer(options, nnet, computation).merge_variables(use_kernel):
        rounds += 1
    # (Precomputed-index objects have no equality; merging leaves them alone.)
    computation.component_precomputed_indexes = None
    return rounds


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_round_matches_twin(case):
    nnet = Nnet.read(str(case / "model.raw"))
    for computation in _computations(case):
        for left, right in ((True, True), (True, False), (False, True)):
            options = NnetOptimizeOptions()
            options.allow_left_merge, options.allow_right_merge = left, right
            a, b = copy.deepcopy(computation), copy.deepcopy(computation)
            rounds_a = _merge_all(options, nnet, a, True)
            rounds_b = _merge_all(options, nnet, b, False)
            assert rounds_a == rounds_b
            assert a == b, (left, right)
