"""Row-op passes (pynnet3.optimize.row_ops): SnipRowOps, SplitRowOps,
ReplaceRowWithMatrixOps.

- On every random/ case (and the shipped copies in tests/data), each pass
  alone, then all three in Kaldi's order, applied to the unoptimized
  computation and followed by renumbering, gives Kaldi's outputs, input
  derivatives and gradients (new memory NaN-filled, so a pass that stops
  writing a row that is read fails). The passes must change a good share of
  the cases (measured counts are asserted as lower bounds).
- Hand-made computations pin down each rule, including the cases where Kaldi
  refuses to rewrite (kCopyRows is never snipped: its -1 rows write zeros).
"""

import numpy as np
import pytest

from pynnet3.compiler.request import ComputationRequest
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.compiler.computation import Command, CommandType, NnetComputation
from pynnet3.compute.computer import NnetComputer
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize.renumber import renumber_computation
from pynnet3.optimize.row_ops import (replace_row_with_matrix_ops, snip_row_ops,
                                      split_row_ops)
from test_computer_kaldi import case_dirs, case_id, run_and_check

T = CommandType
CASES = [c for c in case_dirs() if (c / "request.txt").is_file()]
PASSES = {"snip": [snip_row_ops], "split": [split_row_ops],
          "replace": [replace_row_with_matrix_ops],
          "all": [snip_row_ops, split_row_ops, replace_row_with_matrix_ops]}


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_row_op_passes_keep_kaldis_numbers(case):
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    for name, passes in PASSES.items():
        computation = compile(nnet, request, optimize=False)
        changed = False
        for p in passes:
            changed |= p(computation)
        if changed:
            renumber_computation(computation)
            run_and_check(case, computation, nnet, undefined_fill=np.nan)


def test_row_op_passes_change_many_cases():
    cases = [c for c in CASES if "random" in c.parts]
    if len(cases) < 250:
        pytest.skip("needs the full kaldi-ref random/ set")
    changed = {name: 0 for name in ("snip", "split", "replace")}
    for case in cases:
        nnet = Nnet.read(str(case / "model.raw"))
        request = ComputationRequest.read(str(case / "request.txt"))
        for name in changed:
            changed[name] += PASSES[name][0](compile(nnet, request, optimize=False))
    # measured on the 250 random cases: snip 96, split 16, replace 95
    assert changed == {"snip": 96, "split": 16, "replace": 95}, changed


# -- hand-made computations ---------------------------------------------------------------

def _computation(rows_a, rows_b, cols=2):
    comp = NnetComputation()
    a = comp.new_matrix(rows_a, cols)
    b = comp.new_matrix(rows_b, cols)
    return comp, a, b


def _sub(comp, s):
    info = comp.submatrices[s]
    return (info.matrix_index, info.row_offset, info.num_rows, info.col_offset, info.num_cols)


def test_snip_add_rows_cuts_leading_and_trailing_minus_ones():
    comp, a, b = _computation(5, 3)
    comp.indexes.append([-1, 2, -1, 0, -1])
    comp.commands = [Command(T.kAddRows, a, b, 0, alpha=0.5)]
    assert snip_row_ops(comp)
    c = comp.commands[0]
    assert _sub(comp, c.arg1) == (1, 1, 3, 0, 2)
    assert comp.indexes[c.arg3] == [2, -1, 0] and c.alpha == 0.5
    assert not snip_row_ops(comp)      # nothing left to snip


def test_snip_leaves_copy_rows_and_copy_rows_multi_alone():
    comp, a, b = _computation(4, 3)
    comp.indexes.append([-1, 2, 1, -1])
    comp.indexes_multi.append([(-1, -1), (b, 0), (-1, -1), (-1, -1)])
    comp.commands = [Command(T.kCopyRows, a, b, 0), Command(T.kCopyRowsMulti, a, 0)]
    assert not snip_row_ops(comp)


def test_snip_ranges_and_multi():
    comp, a, b = _computation(4, 6)
    comp.indexes_ranges.append([(3, 3), (0, 2), (2, 5), (0, 0)])
    comp.indexes_multi.append([(-1, -1), (-1, -1), (b, 4), (b, 1)])
    comp.commands = [Command(T.kAddRowRanges, a, b, 0), Command(T.kAddToRowsMulti, a, 0)]
    assert snip_row_ops(comp)
    r, m = comp.commands
    assert _sub(comp, r.arg1) == (1, 1, 2, 0, 2) and comp.indexes_ranges[r.arg3] == [(0, 2),
                                                                                    (2, 5)]
    assert _sub(comp, m.arg1) == (1, 2, 2, 0, 2) and comp.indexes_multi[m.arg2] == [(b, 4),
                                                                                   (b, 1)]


def test_replace_consecutive_rows_with_a_matrix_op():
    comp, a, b = _computation(5, 6)
    comp.indexes += [[-1, 3, 4, 5, -1], [1, 0, 2, -1, -1]]
    comp.commands = [Command(T.kCopyRows, a, b, 0), Command(T.kAddRows, a, b, 1)]
    assert replace_row_with_matrix_ops(comp)
    c0, c1 = comp.commands
    assert c0.command_type == T.kMatrixCopy and c1.command_type == T.kAddRows
    assert _sub(comp, c0.arg1) == (1, 1, 3, 0, 2) and _sub(comp, c0.arg2) == (2, 3, 3, 0, 2)
    assert c0.arg3 == 0     # Kaldi leaves the old table number in arg3


def test_split_multi_into_two_matrix_ops_and_a_row_op():
    comp, a, b = _computation(5, 4)
    c = comp.new_matrix(6, 2)
    comp.indexes_multi.append([(b, 1), (b, 2), (c, 4), (c, 0), (c, 2)])
    comp.commands = [Command(T.kAcceptInput, b, 0), Command(T.kAddRowsMulti, a, 0, alpha=2.0),
                     Command(T.kProvideOutput, a, 1)]
    assert split_row_ops(comp)
    t = [x.command_type for x in comp.commands]
    assert t == [T.kAcceptInput, T.kMatrixAdd, T.kAddRows, T.kProvideOutput]
    add, rows = comp.commands[1], comp.commands[2]
    assert _sub(comp, add.arg1) == (1, 0, 2, 0, 2) and _sub(comp, add.arg2) == (2, 1, 2, 0, 2)
    assert _sub(comp, rows.arg1) == (1, 2, 3, 0, 2) and _sub(comp, rows.arg2) == (3, 0, 5, 0, 2)
    assert comp.indexes[rows.arg3] == [4, 0, 2] and add.alpha == rows.alpha == 2.0


def test_split_to_rows_multi_swaps_and_inverts():
    comp, a, b = _computation(3, 4)
    comp.indexes_multi += [[(b, 3), (b, 1), (b, 2)], [(b, 2), (b, 0), (b, 1)]]
    comp.commands = [Command(T.kAddToRowsMulti, a, 0), Command(T.kCopyToRowsMulti, a, 1)]
    assert split_row_ops(comp)
    add, copy = comp.commands
    # AddToRowsMulti: source is a, destination rows 1..3 of b, inverted table
    assert add.command_type == T.kAddRows
    assert _sub(comp, add.arg1) == (2, 1, 3, 0, 2) and _sub(comp, add.arg2) == (1, 0, 3, 0, 2)
    assert comp.indexes[add.arg3] == [1, 2, 0]
    # CopyToRowsMulti with non-consecutive rows stays (kCopyRows would zero rows)
    assert copy.command_type == T.kCopyToRowsMulti


def test_split_refuses_sparse_or_many_source_tables():
    comp, a, b = _computation(3, 9)
    c = comp.new_matrix(9, 2)
    d = comp.new_matrix(9, 2)
    comp.indexes_multi += [[(b, 0), (b, 4), (b, 8)],        # rows too sparse (9 > 2 x 3)
                           [(b, 0), (-1, -1), (b, 1)],      # a -1 pair
                           [(b, 0), (c, 1), (d, 1)]]        # three sources
    comp.commands = [Command(T.kCopyRowsMulti, a, i) for i in range(3)]
    assert not split_row_ops(comp)


def test_split_keeps_a_goto_pointing_at_its_label():
    comp, a, b = _computation(2, 2)
    c = comp.new_matrix(2, 2)
    comp.indexes_multi.append([(b, 0), (c, 1)])
    comp.commands = [Command(T.kAcceptInput, b, 0), Command(T.kAcceptInput, c, 0),
                     Command(T.kCopyRowsMulti, a, 0), Command(T.kNoOperationLabel),
                     Command(T.kGotoLabel, 3)]
    assert split_row_ops(comp)
    assert comp.commands[-1].arg1 == 4 and comp.commands[4].command_type == T.kNoOperationLabel


def test_split_result_runs_like_the_original():
    class _Names:
        node_names = ["b", "c", "a"]
        component_names = []

        def get_node_index(self, name):
            return self.node_names.index(name)

    comp, a, b = _computation(5, 4)
    c = comp.new_matrix(6, 2)
    comp.indexes_multi.append([(b, 1), (b, 2), (c, 4), (c, 0), (c, 2)])
    comp.commands = [Command(T.kAcceptInput, b, 0), Command(T.kAcceptInput, c, 1),
                     Command(T.kAllocMatrix, a), Command(T.kSetConst, a, alpha=1.0),
                     Command(T.kAddRowsMulti, a, 0, alpha=2.0), Command(T.kProvideOutput, a, 2)]
    rng = np.random.default_rng(0)
    xb, xc = rng.standard_normal((4, 2), np.float32), rng.standard_normal((6, 2), np.float32)
    results = []
    for transform in (False, True):
        import copy
        this = copy.deepcopy(comp)
        if transform:
            assert split_row_ops(this)
        computer = NnetComputer(this, _Names())
        computer.accept_input("b", xb)
        computer.accept_input("c", xc)
        computer.run()
        results.append(computer.get_output("a"))
    np.testing.assert_array_equal(results[0], results[1])
