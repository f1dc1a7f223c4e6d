"""NnetComputer running computations compiled by pynnet3 itself.

The same checks as test_computer_kaldi.py (outputs, input derivatives,
parameter gradients against Kaldi's numbers, for every reference case), but the
computation comes from ``pynnet3.compile(nnet, request)`` on the case's
``request.txt``. Newly allocated matrices are filled with NaN, so a compiled
computation that reads memory it never wrote fails here instead of passing by
luck. The compiled computation also survives Write/Read (binary) unchanged:
same bytes and same printed form (this covers command types that Kaldi's
optimized files do not contain, e.g. AddRowsMulti).
"""

import numpy as np
import pytest

from pynnet3.compiler.request import ComputationRequest
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.compiler.computation_io import (computation_to_bytes, print_computation,
                                            read_computation)
from pynnet3.io.stream import InputStream
from pynnet3.nnet.nnet import Nnet
from test_computer_kaldi import case_dirs, case_id, run_and_check

CASES = [c for c in case_dirs() if (c / "request.txt").is_file()]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_compiled_computation_matches_kaldi(case):
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    computation = compile(nnet, request, optimize=False)
    data = computation_to_bytes(computation)
    again = read_computation(InputStream.from_bytes(data, "compiled"))
    assert computation_to_bytes(again) == data
    assert print_computation(again, nnet) == print_computation(computation, nnet)
    done = run_and_check(case, computation, nnet, undefined_fill=np.nan)
    assert "forward" in done
    if (case / "input_derivs.ark").is_file():
        assert "input-deriv" in done
