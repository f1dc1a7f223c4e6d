"""The unoptimized computation: for every reference request our compile()
prints exactly as Kaldi's NnetComputation::Print of its unoptimized
computation (computation.plain.txt); the readable Python pipeline produces the
same computation as the Cython one; simple-network contexts equal nnet3-info's."""

import re

import pytest
from conftest import KALDI_REF, TEST_DATA

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.driver.compile_and_optimize import compile as compile_
from pynnet3.compiler.compiler import create_computation
from pynnet3.compiler.computation import CommandType
from pynnet3.compiler.computation_io import print_computation
from pynnet3.model.context import compute_simple_nnet_context
from pynnet3.nnet.nnet import is_simple_nnet
from pynnet3.compiler.request import ComputationRequest
from pynnet3.errors import NnetError
from pynnet3.nnet.nnet import Nnet
from reference_cases import COMPILE_CASES as CASES, case_id as _id, load_case as _load


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_plain_computation_prints_like_kaldi(case):
    nnet, request = _load(case)
    computation = compile_(nnet, request, optimize=False)
    expected = (case / "computation.plain.txt").read_text()
    assert print_computation(computation, nnet) == expected
    # the structural facts the printer relies on
    commands = computation.commands
    markers = [i for i, c in enumerate(commands)
               if c.command_type == CommandType.kNoOperationMarker]
    assert len(markers) == 1
    assert len(computation.matrix_debug_info) == len(computation.matrices)


@pytest.mark.parametrize("case", CASES[::3] + sorted(TEST_DATA.glob("compile/case*")), ids=_id)
def test_python_pipeline_equals_cython_pipeline(case):
    pytest.importorskip("pynnet3._fast.compiler_kernel")
    nnet, request = _load(case)
    fast = create_computation(nnet, request, use_kernel=True)
    slow = create_computation(nnet, request, use_kernel=False)
    assert fast.commands == slow.commands
    assert fast.matrices == slow.matrices
    assert fast.submatrices == slow.submatrices
    assert fast.indexes == slow.indexes
    assert fast.indexes_multi == slow.indexes_multi
    assert fast.indexes_ranges == slow.indexes_ranges
    assert fast.matrix_debug_info == slow.matrix_debug_info
    assert print_computation(fast, nnet) == print_computation(slow, nnet)


def test_without_debug_info():
    nnet, request = _load(TEST_DATA / "compile" / "case0")
    for fast in (True, False):
        computation = create_computation(nnet, request, output_debug_info=False, use_kernel=fast)
        assert computation.matrix_debug_info == []


INFOS = (sorted(KALDI_REF.glob("random/case*/info.txt"))
         + sorted(KALDI_REF.glob("models/*/info.txt")))


@pytest.mark.parametrize("info", INFOS, ids=lambda p: "/".join(p.parts[-3:-1]))
def test_simple_nnet_context_matches_nnet3_info(info):
    nnet = Nnet.read(str(info.parent / "model.raw"))
    text = info.read_text()
    match = re.search(r"^left-context: (\d+)\nright-context: (\d+)$", text, re.M)
    assert is_simple_nnet(nnet) == (match is not None)
    if match is None:
        with pytest.raises(NnetError, match="not 'simple'"):
            compute_simple_nnet_context(nnet)
    else:
        assert compute_simple_nnet_context(nnet) == (int(match.group(1)), int(match.group(2)))


@pytest.mark.parametrize("name", ["case134", "case24", "case102"])
def test_multi_segment_computation(name):
    """A two-segment ('online') computation: one marker between the segments'
    forward commands plus the usual one; both pipelines agree."""
    pytest.importorskip("pynnet3._fast.compiler_kernel")
    from pynnet3.compiler.request import IoSpecification
    from pynnet3.common.index import Index
    nnet, request = _load(TEST_DATA / "compile" / name)
    times = [i.t for i in request.inputs[0].indexes]
    shift = max(times) - min(times) + 1

    def spec(s, dt):
        return IoSpecification(s.name, [Index(i.n, i.t + dt, i.x) for i in s.indexes])
    segments = [ComputationRequest([spec(s, dt) for s in request.inputs],
                                   [spec(s, dt) for s in request.outputs])
                for dt in (0, shift)]
    fast = create_computation(nnet, segments, use_kernel=True)
    slow = create_computation(nnet, segments, use_kernel=False)
    assert print_computation(fast, nnet) == print_computation(slow, nnet)
    markers = [c for c in fast.commands if c.command_type == CommandType.kNoOperationMarker]
    assert len(markers) == 2
    accepts = [c.arg2 for c in fast.commands if c.command_type == CommandType.kAcceptInput]
    assert len(accepts) == 2 * len(request.inputs)
