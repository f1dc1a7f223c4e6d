"""LimitDerivativeTimes (pynnet3.optimize.deriv_times) on Kaldi's random cases.

For every random/ case with a backward pass, derivatives are limited to the
middle third of the output time span. The limited computation must give what
the *unlimited* computation gives when every command the pass narrows sees
the derivative rows it drops as zero and may not write them: rows whose t lies
outside [min_deriv_time, max_deriv_time] for row-table commands, rows before
the first / after the last in-range row for whole-block commands; the commands
it leaves whole (e.g. backprops of non-simple components) see and write them
as usual. Outputs, input derivatives and parameter gradients must agree. Forward outputs must equal
Kaldi's. Through the optimizer driver (``max_deriv_time_relative``) the
result must be the same as limiting first and optimizing afterwards.
"""

import numpy as np
import pytest

from conftest import KALDI_REF
from pynnet3.compiler.request import ComputationRequest
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.compiler.computation import CommandType
from pynnet3.compiler.computation_io import print_computation
from pynnet3.components.base import ComponentProperty as P
from pynnet3.compute.computer import NnetComputer
from pynnet3.nnet.nnet import Nnet
from pynnet3.nnet.component_ops import scale_nnet, set_nnet_as_gradient
from pynnet3.optimize.deriv_times import INT32_MAX, INT32_MIN, limit_derivative_times
from pynnet3.optimize.options import NnetOptimizeOptions
from test_computer_kaldi import assert_close, read_ark


def _cases():
    if not KALDI_REF.is_dir():
        return []
    cases = sorted(KALDI_REF.glob("random/case*"), key=lambda p: int(p.name[4:]))
    return [c for c in cases if (c / "output_derivs.ark").is_file()]


CASES = _cases()


class _ZeroingComputer(NnetComputer):
    """Runs the unlimited computation as Kaldi's limited one sees it. A
    derivative matrix's rows are *outside* when their t is out of range
    (per-row: what the row-table commands test) and *off-block* when they lie
    before the first or after the last in-range row (what the narrowed
    whole-block commands, kMatrixCopy/kMatrixAdd and simple backprops, drop).
    Each command the pass narrows reads its kind of dropped rows as zero and
    its writes to them are discarded; the commands it leaves whole
    (allocation, kSetConst, swaps, propagates, backprops of non-simple
    components and of memo-using ones only partly in range) run unchanged."""

    def __init__(self, computation, nnet, gradient, lo, hi):
        super().__init__(computation, nnet, nnet_to_update=gradient)
        self._outside, self._off_block = {}, {}
        for m, info in enumerate(computation.matrix_debug_info):
            if m and info.is_deriv:
                t = np.array([idx[1] for _, idx in info.cindexes])
                outside = (t < lo) | (t > hi)
                if outside.any():
                    self._outside[m] = outside
                    inside = np.flatnonzero(~outside)
                    block = np.ones(len(t), bool)
                    if len(inside):
                        block[inside[0]:inside[-1] + 1] = False
                    self._off_block[m] = block
        self._lo, self._hi = lo, hi
        for key, handler in list(self._dispatch.items()):
            if key in _PER_ROW:
                self._dispatch[key] = self._masked(handler, self._outside)
            elif key in _PER_BLOCK:
                self._dispatch[key] = self._masked(handler, self._off_block)

    def _runs_whole(self, c):
        if c.command_type not in (CommandType.kBackprop, CommandType.kBackpropNoModelUpdate):
            return False
        props = self.nnet.components[c.arg1].properties()
        if not props & P.kSimpleComponent:
            return True
        sub = self.computation.submatrices[c.arg5]
        dropped = self._off_block.get(sub.matrix_index)
        if dropped is None:
            return False
        n = int(dropped[sub.row_offset:sub.row_offset + sub.num_rows].sum())
        return bool(props & P.kUsesMemo) and 0 < n < sub.num_rows

    def _masked(self, handler, masks):
        def run(c):
            if self._runs_whole(c):
                handler(c)
                return
            saved = {}
            for m, dropped in masks.items():
                mat = self.matrices[m]
                if mat is not None:
                    saved[m] = mat[dropped].copy()
                    mat[dropped] = 0.0
            handler(c)
            for m, rows in saved.items():
                self.matrices[m][masks[m]] = rows
        return run


_PER_ROW = frozenset((CommandType.kCopyRows, CommandType.kAddRows, CommandType.kCopyRowsMulti,
                      CommandType.kCopyToRowsMulti, CommandType.kAddRowsMulti,
                      CommandType.kAddToRowsMulti, CommandType.kAddRowRanges))
_PER_BLOCK = frozenset((CommandType.kMatrixCopy, CommandType.kMatrixAdd, CommandType.kBackprop,
                        CommandType.kBackpropNoModelUpdate))


def _run(computer, case, gradient):
    for name, value in read_ark(case / "inputs.ark").items():
        computer.accept_input(name, value)
    computer.run()
    outputs = {name: computer.get_output(name) for name in read_ark(case / "outputs.ark")}
    for name, value in read_ark(case / "output_derivs.ark").items():
        computer.accept_input(name, value)
    computer.run()
    derivs = {}
    if (case / "input_derivs.ark").is_file():
        derivs = {name: computer.get_output(name)
                  for name in read_ark(case / "input_derivs.ark")}
    grads = [c.vectorize() for c in gradient.components if c.num_parameters()]
    return outputs, derivs, grads


def _gradient(nnet):
    g = nnet.copy()
    scale_nnet(g, 0.0)
    set_nnet_as_gradient(g)
    return g


def _range(request):
    ts = [idx.t for io in request.outputs for idx in io.indexes]
    lo, hi = min(ts), max(ts)
    span = hi - lo
    return lo + span // 3, hi - span // 3


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_limited_derivatives_equal_zeroed_unlimited(case):
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    lo, hi = _range(request)
    plain = compile(nnet, request, optimize=False)
    limited = compile(nnet, request, optimize=False)
    limit_derivative_times(nnet, lo, hi, limited)

    g_ref = _gradient(nnet)
    ref = _run(_ZeroingComputer(plain, nnet, g_ref, lo, hi), case, g_ref)
    g = _gradient(nnet)
    got = _run(NnetComputer(limited, nnet, nnet_to_update=g), case, g)
    kaldi_outputs = read_ark(case / "outputs.ark")
    for name, value in got[0].items():
        assert_close(value, kaldi_outputs[name], "output '%s'" % name)
    for name, value in got[1].items():
        assert_close(value, ref[1][name], "derivative of input '%s'" % name)
    for i, (a, b) in enumerate(zip(got[2], ref[2])):
        assert_close(a, b, "gradient of updatable component %d" % i)


def test_no_limit_leaves_the_computation_alone():
    case = CASES[0] if CASES else pytest.skip("kaldi-ref not found")
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    a = compile(nnet, request, optimize=False)
    b = compile(nnet, request, optimize=False)
    limit_derivative_times(nnet, INT32_MIN, INT32_MAX, b)
    assert print_computation(a, nnet) == print_computation(b, nnet)


def test_limiting_removes_work_outside_the_range():
    """On a recurrent case, limiting to a single frame leaves fewer backprop
    commands and smaller derivative matrices than the unlimited computation."""
    recurrent = [c for c in CASES
                 if any("IfDefined" in f.read_text() for f in c.glob("config.*"))]
    if not recurrent:
        pytest.skip("no recurrent case with a backward pass")
    case = recurrent[0]
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    plain = compile(nnet, request, optimize=False)
    limited = compile(nnet, request, optimize=False)
    t = [idx.t for io in request.outputs for idx in io.indexes][0]
    limit_derivative_times(nnet, t, t, limited)

    def backprops(comp):
        return sum(c.command_type == CommandType.kBackprop for c in comp.commands)

    def deriv_rows(comp):
        return sum(m.num_rows for m, d in zip(comp.matrices, comp.matrix_debug_info)
                   if d.is_deriv)

    assert backprops(limited) < backprops(plain)
    assert deriv_rows(limited) < deriv_rows(plain)


DRIVER_CASES = CASES[::3]


@pytest.mark.parametrize("case", DRIVER_CASES, ids=[c.name for c in DRIVER_CASES])
def test_through_the_driver_with_relative_max(case):
    """Kaldi's Optimize() limits first (max_deriv_time = max-deriv-time-relative
    + the request's last output t), then runs every other pass: the result,
    checked after every pass, gives the numbers of the limited unoptimized
    computation."""
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    lo, hi = _range(request)
    max_t = max(idx.t for io in request.outputs for idx in io.indexes)
    options = NnetOptimizeOptions(min_deriv_time=lo, max_deriv_time_relative=hi - max_t)
    optimized = compile(nnet, request, options=options, check=True)
    limited = compile(nnet, request, optimize=False)
    limit_derivative_times(nnet, lo, hi, limited)
    g_ref = _gradient(nnet)
    ref = _run(NnetComputer(limited, nnet, nnet_to_update=g_ref), case, g_ref)
    g = _gradient(nnet)
    got = _run(NnetComputer(optimized, nnet, nnet_to_update=g, undefined_fill=np.nan), case, g)
    for a, b in zip((got[0], got[1]), (ref[0], ref[1])):
        for name in b:
            assert_close(a[name], b[name], name)
    for i, (a, b) in enumerate(zip(got[2], ref[2])):
        assert_close(a, b, "gradient of updatable component %d" % i)
