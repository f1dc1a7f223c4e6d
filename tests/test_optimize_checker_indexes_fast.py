"""The checker's index check as a compiled yes/no question
(``indexes_look_valid`` in pynnet3/_fast/checker_kernel.pyx) agrees with its twin
(ComputationChecker.check_computation_indexes_py, which names the fault): on
every reference computation (ours unoptimized and optimized, Kaldi's
optimized) both find nothing, and on computations with one field broken at
random the kernel says yes only where the twin finds nothing."""

import copy
import random

import pytest

from test_optimize_renumber_fast import _computations, _id

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize.checker import (CheckComputationOptions, ComputationChecker,
                                      ComputationCheckError, _component_facts)
from reference_cases import COMPILE_CASES as CASES

fast = pytest.importorskip("pynnet3._fast.checker_kernel")

_FIELDS = ("arg1", "arg2", "arg3", "arg4", "arg5", "arg6", "arg7", "alpha", "command_type")


def _twin_passes(nnet, computation):
    try:
        ComputationChecker(CheckComputationOptions(), nnet,
                           computation).check_computation_indexes_py()
    except (ComputationCheckError, IndexError, TypeError, ValueError, AttributeError,
            KeyError):
        return False
    return True


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_agrees_with_twin(case):
    nnet = Nnet.read(str(case / "model.raw"))
    facts = _component_facts(nnet)
    rng = random.Random(case.name)
    for computation in _computations(case):
        assert fast.indexes_look_valid(computation, *facts)
        assert _twin_passes(nnet, computation)
        for _ in range(8):
            broken = copy.deepcopy(computation)
            c = rng.choice(broken.commands)
            field = rng.choice(_FIELDS)
            if field == "alpha":
                c.alpha = rng.choice((0.0, -1.0, 2.0, 1e4))
            elif field == "command_type":
                c.command_type = rng.randrange(0, 26)
            else:
                setattr(c, field, rng.randrange(-2, len(broken.submatrices) + 2))
            if fast.indexes_look_valid(broken, *facts):
                assert _twin_passes(nnet, broken), (field, c)
