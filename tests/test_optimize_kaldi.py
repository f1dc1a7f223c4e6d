"""The optimizer against Kaldi, on every reference case.

For every case (random/caseN, models/zoo*/requestN, and the copies in
tests/data/computer): the computation that ``compile(nnet, request)``
optimizes with Kaldi's default options, with the ComputationChecker run after
every pass, gives Kaldi's outputs, input derivatives and parameter gradients
(newly allocated memory filled with NaN, so reading undefined data fails).
Each case is also compiled with one optimization switched off (rotating over
the switches, so every switch is off on about 1/16 of the cases while the
suite stays fast), which must give the same numbers.

How many optimized computations print exactly as Kaldi's
``computation.opt.txt``, and how many serialize byte for byte as Kaldi's
``computation.opt.kaldi``, is counted; the counts may not fall below what the
optimizer reached when this test was written.
"""

import numpy as np
import pytest

from conftest import KALDI_REF
from pynnet3.compiler.request import ComputationRequest
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.compiler.computation_io import computation_to_bytes, print_computation
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize.options import NnetOptimizeOptions
from test_computer_kaldi import case_dirs, case_id, run_and_check

CASES = [c for c in case_dirs() if (c / "request.txt").is_file()]

# One switch off at a time (memory compression is a level: 0 is off).
SWITCHES = ["optimize", "consolidate_model_update", "propagate_in_place",
            "backprop_in_place", "optimize_row_ops", "split_row_ops", "extend_matrices",
            "convert_addition", "remove_assignments", "allow_left_merge",
            "allow_right_merge", "initialize_undefined", "move_sizing_commands",
            "allocate_from_other", "snip_row_ops", "memory_compression_level"]

# random/ + zoo cases of kaldi-ref whose optimized computation prints exactly
# as Kaldi's computation.opt.txt and is written byte for byte as Kaldi's
# computation.opt.kaldi (measured: all of them; must not regress).
MIN_IDENTICAL_KALDI_REF = 256


def _load(case):
    return (Nnet.read(str(case / "model.raw")),
            ComputationRequest.read(str(case / "request.txt")))


def _check_numbers(case, computation, nnet):
    done = run_and_check(case, computation, nnet, undefined_fill=np.nan)
    assert "forward" in done
    if (case / "input_derivs.ark").is_file():
        assert "input-deriv" in done


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_optimized_computation_matches_kaldi(case):
    nnet, request = _load(case)
    computation = compile(nnet, request, check=True)
    _check_numbers(case, computation, nnet)


@pytest.mark.parametrize("number,case", list(enumerate(CASES)),
                         ids=["%s-no-%s" % (case_id(c), SWITCHES[i % len(SWITCHES)])
                              for i, c in enumerate(CASES)])
def test_each_optimization_off_gives_the_same_numbers(number, case):
    switch = SWITCHES[number % len(SWITCHES)]
    options = NnetOptimizeOptions(**{switch: 0 if switch == "memory_compression_level"
                                     else False})
    nnet, request = _load(case)
    computation = compile(nnet, request, options=options, check=True)
    _check_numbers(case, computation, nnet)


def _as_kaldi(case):
    """(prints as Kaldi's computation.opt.txt, writes Kaldi's computation.opt.kaldi)."""
    nnet, request = _load(case)
    computation = compile(nnet, request)
    with open(case / "computation.opt.txt") as f:
        printed = print_computation(computation, nnet) == f.read()
    kaldi = (case / "computation.opt.kaldi").read_bytes()
    written = computation_to_bytes(computation, binary=kaldi[:2] == b"\0B") == kaldi
    return printed, written


def test_shipped_cases_print_as_kaldi():
    cases = [c for c in CASES if "computer" in c.parts]
    assert cases
    different = [case_id(c) for c in cases if _as_kaldi(c) != (True, True)]
    assert not different, "optimized computations print or write differently: %s" % different


def test_identical_prints_do_not_regress(kaldi_ref):
    cases = [c for c in CASES if KALDI_REF in c.parents]
    results = [_as_kaldi(c) for c in cases]
    printed = sum(p for p, _ in results)
    written = sum(w for _, w in results)
    assert printed >= MIN_IDENTICAL_KALDI_REF and written >= MIN_IDENTICAL_KALDI_REF, (
        "of %d optimized computations, %d print and %d write as Kaldi's (were %d)"
        % (len(cases), printed, written, MIN_IDENTICAL_KALDI_REF))
