"""The decisions of ConvertAdditionToAssignment and RemoveUnnecessaryZeroing
in C (pynnet3/_fast/addition_kernel.pyx, zeroing_kernel.pyx) are the Python twins' on every
reference computation (ours unoptimized, after the addition pass, and
optimized; Kaldi's optimized)."""

import pytest

from test_optimize_renumber_fast import _computations

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize import analysis
from pynnet3.optimize.addition import additions_to_convert_py, convert_addition_to_assignment
from pynnet3.optimize.zeroing import unnecessary_zeroings_py
from reference_cases import COMPILE_CASES as CASES, case_id as _id

addition_kernel = pytest.importorskip("pynnet3._fast.addition_kernel")
zeroing_kernel = pytest.importorskip("pynnet3._fast.zeroing_kernel")
if analysis.Analyzer is analysis.AnalyzerPy:
    pytest.skip("the compiled analysis is not in use", allow_module_level=True)

@pytest.mark.parametrize("case", CASES, ids=_id)
def test_decisions_match_twin(case):
    nnet = Nnet.read(str(case / "model.raw"))
    computations = _computations(case)
    converted = _computations(case)[0]
    convert_addition_to_assignment(nnet, converted)
    for computation in computations + [converted]:
        a = analysis.Analyzer().init(nnet, computation)
        assert (addition_kernel.additions_to_convert(a, computation)
                == additions_to_convert_py(a, computation))
        assert (zeroing_kernel.unnecessary_zeroings(a, computation.commands)
                == unnecessary_zeroings_py(a, computation.commands, computation))


def test_the_cases_exercise_both():
    """The comparisons above are not all of empty lists: some case has a
    convertible addition and (after the addition pass) a removable zeroing."""
    if not CASES:
        pytest.skip("no reference cases")
    found_addition = found_zeroing = False
    for case in CASES:
        nnet = Nnet.read(str(case / "model.raw"))
        computation = _computations(case)[0]
        a = analysis.Analyzer().init(nnet, computation)
        found_addition = found_addition or bool(addition_kernel.additions_to_convert(a, computation))
        convert_addition_to_assignment(nnet, computation)
        a = analysis.Analyzer().init(nnet, computation)
        found_zeroing = found_zeroing or bool(zeroing_kernel.unnecessary_zeroings(a, computation.commands))
        if found_addition and found_zeroing:
            return
    pytest.fail("no case converts an addition and removes a zeroing")
