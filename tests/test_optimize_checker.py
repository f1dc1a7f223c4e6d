"""The ComputationChecker (Kaldi's CheckComputation): every reference
computation passes (ours unoptimized, with the rewrite check; ours and
Kaldi's optimized); deliberately broken ones are rejected with a message naming the
command as Kaldi prints it and the matrix."""

import copy

import pytest
from conftest import KALDI_REF, TEST_DATA

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.driver.compile_and_optimize import compile as compile_
from pynnet3.compiler.compiler import create_computation
from pynnet3.compiler.computation import Command, CommandType as CT
from pynnet3.compiler.computation_io import command_string, read_computation_file

from pynnet3.errors import ComputationError
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize.checker import (CheckComputationOptions, ComputationCheckError,
                                      ComputationChecker, check_computation)
from reference_cases import COMPILE_CASES as CASES, case_id as _id, load_case as _load


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_reference_computations_pass(case):
    nnet, request = _load(case)
    check_computation(nnet, create_computation(nnet, request), check_rewrite=True)
    check_computation(nnet, compile_(nnet, request))          # ours, optimized
    if (case / "computation.opt.kaldi").exists():
        check_computation(nnet, read_computation_file(str(case / "computation.opt.kaldi")))


@pytest.fixture
def case0():
    """tests/data/compile/case0: affine + attention, forward and backward
    (c18 m2.AddRows(1, m1[0:11]); c19 affine.Propagate(NULL, m2, &m3);
    c20 m5.AddRows(1, m3[...]); c24 the marker; c27 attention.Backprop)."""
    nnet, request = _load(TEST_DATA / "compile" / "case0")
    computation = create_computation(nnet, request)
    check_computation(nnet, computation, check_rewrite=True)
    return nnet, computation


def _rejected(nnet, computation, check, command_index, matrix_index, pattern):
    with pytest.raises(ComputationCheckError, match=pattern) as info:
        check_computation(nnet, computation)
    e = info.value
    assert isinstance(e, ComputationError)
    assert e.check == check
    assert e.command_index == command_index
    assert e.matrix_index == matrix_index
    assert command_string(computation, nnet, command_index) in str(e)
    assert "m%d" % matrix_index in str(e)
    return e


def test_read_before_write(case0):
    nnet, comp = case0
    assert comp.commands[2].command_type == CT.kSetConst      # m2.set(0)
    comp.commands[2] = Command(CT.kNoOperation)
    e = _rejected(nnet, comp, "undefined", 18, 2, "m2 is read before it is written")
    assert "c18: m2.AddRows(1, m1[0:11])" in str(e)


def test_use_after_deallocation(case0):
    nnet, comp = case0
    dealloc = next(i for i, c in enumerate(comp.commands)
                   if c.command_type == CT.kDeallocMatrix
                   and comp.submatrices[c.arg1].matrix_index == 3)
    comp.commands[17] = comp.commands[dealloc]                # free m3 before its use
    comp.commands[dealloc] = Command(CT.kNoOperation)
    _rejected(nnet, comp, "matrix-accesses", 20, 3,
              r"m3 is accessed after it is destroyed \(by command c17\)")


def test_wrong_dimensions(case0):
    nnet, comp = case0
    c = comp.commands[19]
    assert c.command_type == CT.kPropagate
    narrow = comp.new_submatrix(comp.submatrices[c.arg4].matrix_index, 0, 12, 0, 100)
    comp.commands[19] = copy.copy(c)
    comp.commands[19].arg4 = narrow
    _rejected(nnet, comp, "indexes", 19, 3, "output-dim mismatch: submatrix has 100 columns")


def test_backward_before_marker(case0):
    nnet, comp = case0
    assert comp.commands[24].command_type == CT.kNoOperationMarker
    assert comp.commands[27].command_type == CT.kBackprop
    comp.commands[24], comp.commands[27] = comp.commands[27], comp.commands[24]
    e = _rejected(nnet, comp, "order", 24, 8, "backprop occurs before the kNoOperationMarker")
    assert "attention.Backprop" in str(e)


def test_row_index_out_of_range(case0):
    nnet, comp = case0
    c = comp.commands[20]
    assert c.command_type == CT.kAddRows
    comp.indexes[c.arg3] = list(comp.indexes[c.arg3])
    comp.indexes[c.arg3][0] = 12                              # m3 has 12 rows
    _rejected(nnet, comp, "indexes", 20, 3, "row-index out of range")


def test_submatrix_index_out_of_range(case0):
    nnet, comp = case0
    comp.commands[19] = copy.copy(comp.commands[19])
    comp.commands[19].arg3 = len(comp.submatrices)
    with pytest.raises(ComputationCheckError, match=r"submatrix indexes out of range.*c19") \
            as info:
        check_computation(nnet, comp)
    assert info.value.command_index == 19


def test_rewrite_check(case0):
    nnet, comp = case0
    # m3 is read by c20; writing it again afterwards is what only an optimized
    # computation may do
    comp.commands[17] = Command(CT.kNoOperation)
    comp.commands.insert(21, Command(CT.kSetConst, comp.commands[19].arg4, alpha=0.0))
    # keep the indexes of the commands used above valid: the marker moved to c25
    with pytest.raises(ComputationCheckError, match="modified after being read") as info:
        ComputationChecker(CheckComputationOptions(check_rewrite=True), nnet, comp).check()
    assert info.value.command_index == 21 and info.value.matrix_index == 3
    check_computation(nnet, comp, check_rewrite=False)


def test_never_accessed_matrix(case0):
    nnet, comp = case0
    s = comp.new_matrix(3, 4)
    comp.matrix_debug_info = []
    comp.commands.insert(0, Command(CT.kAllocMatrix, s))
    comp.commands.append(Command(CT.kDeallocMatrix, s))
    with pytest.raises(ComputationCheckError, match=r"matrix m11 is never accessed.*c0: m11"):
        check_computation(nnet, comp)


def test_write_never_read_warns_once(case0, caplog, monkeypatch):
    from pynnet3.optimize import checker
    monkeypatch.setattr(checker, "_warned_only_constant", False)
    nnet, comp = case0
    comp.matrix_debug_info = []
    for _ in range(2):
        s = comp.new_matrix(3, 4)
        comp.commands[17:17] = [Command(CT.kAllocMatrix, s),
                                Command(CT.kSetConst, s, alpha=0.0)]
        comp.commands.append(Command(CT.kDeallocMatrix, s))
    with caplog.at_level("WARNING", logger="pynnet3"):
        check_computation(nnet, comp)       # legal, as in Kaldi
        check_computation(nnet, comp)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ["Matrix m11 is only set to a constant value (command c20), but then "
                        "never accessed.  Will warn only once."]


def test_looped_computation_swaps_read_as_deallocation():
    """A computation ending in kGotoLabel: the swap before the goto hands a
    matrix to the next iteration; Kaldi's checker reads it as deallocation."""
    nnet, request = _load(TEST_DATA / "compile" / "case56")   # forward only
    comp = create_computation(nnet, request)
    marker = next(i for i, c in enumerate(comp.commands)
                  if c.command_type == CT.kNoOperationMarker)
    forward = comp.commands[:marker]
    m3 = next(c.arg4 for c in forward if c.command_type == CT.kPropagate)
    comp.matrix_debug_info = []
    saved = comp.new_matrix(comp.submatrices[m3].num_rows, comp.submatrices[m3].num_cols)
    comp.commands = ([Command(CT.kNoOperationLabel), Command(CT.kAllocMatrix, saved),
                      Command(CT.kSetConst, saved, alpha=0.0)]
                     + forward + [Command(CT.kNoOperationMarker),
                                  Command(CT.kMatrixCopy, saved, m3),
                                  Command(CT.kSwapMatrix, m3, saved),
                                  Command(CT.kGotoLabel, 0)])
    with pytest.raises(ComputationCheckError, match="initialized twice") as info:
        # read as a plain computation, the swap allocates m3 a second time
        ComputationChecker(CheckComputationOptions(), nnet, comp).check()
    assert info.value.matrix_index == comp.submatrices[m3].matrix_index
    check_computation(nnet, comp)
    # the goto must point at a label
    comp.commands[-1] = Command(CT.kGotoLabel, 1)
    with pytest.raises(ComputationCheckError, match="invalid destination"):
        check_computation(nnet, comp)


def _verdict(nnet, comp):
    try:
        check_computation(nnet, comp)
    except ComputationCheckError as e:
        return e.check, e.command_index, e.matrix_index, str(e)
    return None


@pytest.mark.parametrize("case", sorted(TEST_DATA.glob("compile/case*")), ids=_id)
def test_checker_on_the_python_analysis(case, monkeypatch):
    """The checker gives the same verdicts over the Python twin of the
    analysis: on the reference computations, and on each computation made by
    dropping one zeroing command."""
    from pynnet3.optimize import analysis, checker
    nnet, request = _load(case)
    comp = create_computation(nnet, request)
    broken = []
    for i, c in enumerate(comp.commands):
        if c.command_type == CT.kSetConst:
            b = copy.copy(comp)
            b.commands = list(comp.commands)
            b.commands[i] = Command(CT.kNoOperation)
            broken.append(b)
    compiled = [_verdict(nnet, b) for b in broken]
    assert any(v is not None for v in compiled)
    for name in ("Analyzer", "matrix_access_summary", "undefined_variable_candidates",
                 "rewritten_variable_candidates"):
        twin = name + ("Py" if name[0].isupper() else "_py")
        monkeypatch.setattr(checker, name, getattr(analysis, twin))
    check_computation(nnet, comp, check_rewrite=True)
    check_computation(nnet, read_computation_file(str(case / "computation.opt.kaldi")))
    assert [_verdict(nnet, b) for b in broken] == compiled


LOOPED_MODELS = [p for p in (KALDI_REF / "models" / name / "model.raw"
                             for name in ("tdnn_lda", "tdnn_lstm", "misc_layers"))
                 if p.exists()]


@pytest.mark.parametrize("model", LOOPED_MODELS, ids=lambda p: p.parent.name)
def test_looped_computations_pass(model):
    """Computations from compile_looped (several segments, markers between
    them, ending in kGotoLabel) pass, the swaps read as deallocations."""
    from pynnet3.driver import compile_looped as looped
    from pynnet3.optimize.options import NnetOptimizeOptions
    nnet = Nnet.read(str(model))
    period = 10 if nnet.get_node_index("ivector") != -1 else 1
    requests = looped.create_looped_computation_request_simple(nnet, 30, 3, period, 0, 0, 1)
    comp = looped.compile_looped(nnet, NnetOptimizeOptions(), *requests)
    assert comp.commands[-1].command_type == CT.kGotoLabel
    check_computation(nnet, comp)
