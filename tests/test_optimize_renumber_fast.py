"""Renumbering's per-command loops: the compiled kernels
(pynnet3/_fast/renumber_kernel.pyx) give the same results as the Python twin
(the *_py functions of pynnet3.optimize.renumber) on every reference computation (ours
unoptimized and optimized, Kaldi's optimized), and renumber_computation run
with either gives the same computation."""

import copy
import types

import pytest


import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.driver.compile_and_optimize import compile as compile_
from pynnet3.compiler.compiler import create_computation
from pynnet3.compiler.computation import (Command, CommandType as CT, NnetComputation,
                                         SubMatrixInfo)
from pynnet3.compiler.computation_io import read_computation_file
from pynnet3.compiler.request import ComputationRequest
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize import renumber
from reference_cases import COMPILE_CASES as CASES, case_id as _id

fast = pytest.importorskip("pynnet3._fast.renumber_kernel")


def _computations(case):
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    out = [create_computation(nnet, request), compile_(nnet, request)]
    if (case / "computation.opt.kaldi").exists():
        out.append(read_computation_file(str(case / "computation.opt.kaldi")))
    return out


def _positions(commands, chosen):
    where = {id(c): i for i, c in enumerate(commands)}
    return [where[id(c)] for c in chosen]


# The twins under the kernel's names (they are the *_py functions of renumber).
_LOOPS = ("scan_commands", "map_submatrix_fields", "without_no_ops", "scan_indexes_multi",
          "map_indexes_multi", "renumber_submatrices")
twin = types.SimpleNamespace(**{name: getattr(renumber, name + "_py") for name in _LOOPS})


def _renumber_with(impl, computation, monkeypatch):
    for name in _LOOPS:
        monkeypatch.setattr(renumber, name, getattr(impl, name))
    renumber.renumber_computation(computation)
    renumber.remove_no_ops(computation)
    return computation


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_kernels_match_twin(case, monkeypatch):
    for computation in _computations(case):
        n = len(computation.submatrices)
        used_fast, used_slow = bytearray(n), bytearray(n)
        got_fast = fast.scan_commands(computation.commands, used_fast)
        got_slow = renumber.scan_commands_py(computation.commands, used_slow)
        assert used_fast == used_slow
        for a, b in zip(got_fast, got_slow):
            assert _positions(computation.commands, a) == _positions(computation.commands, b)
        # An arbitrary (non-identity) map, so every rewritten field shows.
        mapping = [(7 * s + 3) % (n + 5) for s in range(n)]
        a, b = copy.deepcopy(computation.commands), copy.deepcopy(computation.commands)
        fast.map_submatrix_fields(a, mapping)
        renumber.map_submatrix_fields_py(b, mapping)
        assert a == b
        used_fast, used_slow = bytearray(n), bytearray(n)
        fast.scan_indexes_multi(computation.indexes_multi, used_fast)
        renumber.scan_indexes_multi_py(computation.indexes_multi, used_slow)
        assert used_fast == used_slow
        a, b = list(computation.indexes_multi), list(computation.indexes_multi)
        fast.map_indexes_multi(a, mapping)
        renumber.map_indexes_multi_py(b, mapping)
        assert a == b
        assert (_positions(computation.commands, fast.without_no_ops(computation.commands))
                == _positions(computation.commands, renumber.without_no_ops_py(computation.commands)))
        # Submatrix renumbering: with what the commands use, with every third
        # submatrix dropped, and with every record doubled (all duplicates).
        subs = computation.submatrices
        num_matrices = len(computation.matrices)
        used = bytearray(n)
        used[0] = 1
        renumber.scan_commands_py(computation.commands, used)
        renumber.scan_indexes_multi_py(computation.indexes_multi, used)
        thinned = bytearray(u if s % 3 else 0 for s, u in enumerate(used))
        thinned[0] = 1
        for subs_, used_ in ((subs, used), (subs, thinned),
                             (subs + subs[1:], used + used[1:])):
            # (each on its own copy: the kernel may renumber records that
            # nothing else holds in place)
            got = fast.renumber_submatrices(copy.deepcopy(subs_), used_, num_matrices)
            assert got == renumber.renumber_submatrices_py(copy.deepcopy(subs_), used_, num_matrices)
        # Whole renumbering, after duplicating every submatrix record (so
        # that the duplicates must collapse and every reference moves).
        doubled = copy.deepcopy(computation)
        doubled.submatrices = doubled.submatrices + doubled.submatrices[1:]
        half = len(computation.submatrices) - 1
        shifted = [0] + [s + half for s in range(1, n)]
        renumber.map_submatrix_fields_py(doubled.commands, shifted)
        x = _renumber_with(fast, copy.deepcopy(doubled), monkeypatch)
        y = _renumber_with(twin, copy.deepcopy(doubled), monkeypatch)
        # (Precomputed-index objects have no equality; renumbering leaves
        # them alone.)
        x.component_precomputed_indexes = y.component_precomputed_indexes = None
        assert x == y


def test_out_of_range_submatrix_is_an_error():
    computation = NnetComputation()
    computation.commands = [Command(CT.kSetConst, 5, alpha=0.0)]
    for impl in (fast, twin):
        with pytest.raises(IndexError, match="submatrix index 5"):
            impl.scan_commands(computation.commands, bytearray(3))
        with pytest.raises(IndexError, match="submatrix index 5"):
            impl.map_submatrix_fields(computation.commands, [0, 1, 2])
        with pytest.raises(IndexError, match="submatrix index 5"):
            impl.scan_indexes_multi([[(-1, -1), (5, 0)]], bytearray(3))
        with pytest.raises(IndexError, match="submatrix index 5"):
            impl.map_indexes_multi([[(-1, -1), (5, 0)]], [0, 1, 2])


def test_renumber_submatrices_by_hand():
    a = SubMatrixInfo(1, 0, 2, 0, 3)
    b = SubMatrixInfo(3, 1, 1, 0, 3)
    subs = [SubMatrixInfo(0, 0, 0, 0, 0), a, SubMatrixInfo(2, 0, 4, 0, 4),
            SubMatrixInfo(1, 0, 2, 0, 3), b, SubMatrixInfo(1, 0, 2, 0, 3)]
    used = bytearray([1, 1, 0, 1, 1, 0])
    for impl in (fast, twin):
        new_subs, old_to_new, matrix_used = impl.renumber_submatrices(subs, used, 4)
        # m2 is only named by the unused s2: m3 becomes m2; s3 is a copy of s1
        assert matrix_used == [True, True, False, True]
        assert old_to_new == [0, 1, -1, 1, 2, -1]
        assert new_subs == [subs[0], a, SubMatrixInfo(2, 1, 1, 0, 3)]
        assert new_subs[1] is a
