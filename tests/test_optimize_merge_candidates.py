"""Variable merging's candidate scan: the compiled kernels
(pynnet3/_fast/variable_merging_kernel.pyx: from the commands, and from the
analysis' copy of their arguments) list the same (command, s1, s2)
candidates as the Python twin on every reference computation (ours
unoptimized and optimized, Kaldi's optimized), under each combination of the
three merging options."""

import itertools

import pytest

from test_optimize_renumber_fast import _computations, _id

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.components.base import ComponentProperty as P
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize import analysis
from pynnet3.optimize.variable_merging import merge_candidates_py
from reference_cases import COMPILE_CASES as CASES

fast = pytest.importorskip("pynnet3._fast.variable_merging_kernel")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_candidates_match_twin(case):
    nnet = Nnet.read(str(case / "model.raw"))
    props = [int(nnet.get_component(i).properties()) for i in range(nnet.num_components())]
    bits = (int(P.kPropagateInPlace), int(P.kBackpropInPlace))
    for computation in _computations(case):
        for flags in itertools.product((True, False), repeat=3):
            a = fast.merge_candidates(computation.commands, props, *flags, *bits)
            b = merge_candidates_py(computation.commands, props, *flags, *bits)
            assert a == b, flags
            if analysis.Analyzer is not analysis.AnalyzerPy:
                analyzer = analysis.Analyzer().init(nnet, computation)
                c = fast.merge_candidates_of_analysis(analyzer, props, *flags, *bits)
                assert c == b, flags
