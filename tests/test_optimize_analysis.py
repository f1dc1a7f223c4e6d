"""The analysis (Kaldi's nnet-analyze): the compiled implementation gives the
same variables, command attributes, variable and matrix accesses and
ComputationAnalysis answers as the readable Python twin, on every reference
computation (ours unoptimized and optimized, Kaldi's optimized); and a hand-made
computation gives the answers Kaldi's definitions imply."""

import pytest
from conftest import KALDI_REF

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.driver.compile_and_optimize import compile as compile_
from pynnet3.compiler.compiler import create_computation
from pynnet3.compiler.computation import Command, CommandType as CT, NnetComputation
from pynnet3.compiler.computation_io import read_computation_file
from pynnet3.compiler.request import ComputationRequest
from pynnet3.errors import ComputationError
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize import analysis, analysis_types
from pynnet3.optimize import analysis as twin
from pynnet3.optimize.command_types import command_type_bytes_py
from reference_cases import COMPILE_CASES as CASES, case_id as _id

fast = pytest.importorskip("pynnet3._fast.analysis_kernel")


def _computations(case):
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    out = [("plain", create_computation(nnet, request)),
           ("ours-opt", compile_(nnet, request))]
    if (case / "computation.opt.kaldi").exists():
        out.append(("kaldi-opt", read_computation_file(str(case / "computation.opt.kaldi"))))
    return nnet, out


def assert_same_analysis(nnet, computation):
    slow = twin.AnalyzerPy().init(nnet, computation)
    quick = fast.Analyzer().init(nnet, computation)
    num_variables = slow.variables.num_variables()
    assert quick.variables.num_variables() == num_variables
    for s in range(len(computation.submatrices)):
        a, b = [], []
        slow.variables.append_variables_for_submatrix(s, a)
        quick.variables.append_variables_for_submatrix(s, b)
        assert a == b, s
    for m in range(1, len(computation.matrices)):
        a, b = [], []
        slow.variables.append_variables_for_matrix(m, a)
        quick.variables.append_variables_for_matrix(m, b)
        assert a == b, m
    for v in range(num_variables):
        assert slow.variables.describe_variable(v) == quick.variables.describe_variable(v)
        assert slow.variables.variable_info(v) == quick.variables.variable_info(v)
        assert (slow.variables.get_matrix_for_variable(v)
                == quick.variables.get_matrix_for_variable(v))
    assert len(quick.command_attributes) == len(slow.command_attributes)
    assert list(quick.command_attributes) == slow.command_attributes
    assert [list(x) for x in quick.variable_accesses] == slow.variable_accesses
    assert list(quick.matrix_accesses) == slow.matrix_accesses
    assert (fast.compute_matrix_to_submatrix(computation)
            == twin.compute_matrix_to_submatrix_py(computation))
    assert (fast.matrix_access_summary(quick.matrix_accesses)
            == twin.matrix_access_summary_py(slow.matrix_accesses))
    types = command_type_bytes_py(computation.commands)
    compress = int(CT.kCompressMatrix)
    assert (fast.undefined_variable_candidates(quick.variable_accesses, types, compress)
            == twin.undefined_variable_candidates_py(slow.variable_accesses, types, compress))
    assert (fast.rewritten_variable_candidates(quick.variable_accesses)
            == twin.rewritten_variable_candidates_py(slow.variable_accesses))
    slow_a = twin.ComputationAnalysisPy(computation, slow)
    quick_a = fast.ComputationAnalysis(computation, quick)
    num_commands = len(computation.commands)
    probes = sorted({0, num_commands // 3, num_commands // 2, num_commands - 1})
    for s in range(1, len(computation.submatrices)):
        for name in ("first_nontrivial_access", "first_access", "last_access",
                     "last_write_access"):
            assert getattr(slow_a, name)(s) == getattr(quick_a, name)(s), (name, s)
        for c in probes:
            assert (slow_a.data_invalidated_command(c, s)
                    == quick_a.data_invalidated_command(c, s)), (c, s)
    for m in range(1, len(computation.matrices)):
        assert (slow_a.first_nontrivial_matrix_access(m)
                == quick_a.first_nontrivial_matrix_access(m))
        assert slow_a.last_matrix_access(m) == quick_a.last_matrix_access(m)
    return slow


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_twins_agree_on_reference_computations(case):
    nnet, computations = _computations(case)
    for _, computation in computations:
        slow = assert_same_analysis(nnet, computation)
        # Kaldi's invariants: every list sorted and unique, one access per command
        for attr in slow.command_attributes:
            for name in ("variables_read", "variables_written", "matrices_read",
                         "matrices_written", "submatrices_read", "submatrices_written"):
                values = getattr(attr, name)
                assert values == sorted(set(values))
        for accesses in slow.variable_accesses:
            commands = [a.command_index for a in accesses]
            assert commands == sorted(set(commands))


def test_public_module_uses_the_compiled_analysis():
    assert analysis.Analyzer is fast.Analyzer
    assert analysis.ComputationAnalysis is fast.ComputationAnalysis
    assert analysis.get_max_memory_use is twin.get_max_memory_use


class _Comp:
    def __init__(self, props):
        self._props = props

    def properties(self):
        return self._props


class _Nnet:
    """The two calls the analysis makes on a network."""

    def __init__(self, props):
        self.components = [_Comp(p) for p in props]

    def num_components(self):
        return len(self.components)

    def get_component(self, i):
        return self.components[i]


def _toy():
    """m1 (4x6) with a left half s3 = m1(:,0:2) and a row block s4 = m1(2:3,:);
    m2 (4x3). c0 alloc m1; c1 zero m1; c2 m1[:,0:2] = input-like copy from m2
    (alloc'd and accepted first); c3 propagate s3 -> m2 (simple component 0);
    c4 output m2; c5 dealloc m1."""
    comp = NnetComputation()
    s1 = comp.new_matrix(4, 6)
    s2 = comp.new_matrix(4, 3)
    s3 = comp.new_submatrix(1, 0, 4, 0, 3)
    s4 = comp.new_submatrix(1, 2, 2, 0, 6)
    comp.commands = [
        Command(CT.kAcceptInput, s2, 0),
        Command(CT.kAllocMatrix, s1),
        Command(CT.kSetConst, s1, alpha=0.0),
        Command(CT.kMatrixCopy, s3, s2),
        Command(CT.kPropagate, 0, 0, s3, s2, 0, 0),
        Command(CT.kMatrixAdd, s4, s4, alpha=2.0),
        Command(CT.kProvideOutput, s2, 1),
        Command(CT.kDeallocMatrix, s1),
    ]
    return comp, (s1, s2, s3, s4)


@pytest.mark.parametrize("impl", [twin, fast], ids=["python", "cython"])
def test_toy_computation_answers(impl):
    comp, (s1, s2, s3, s4) = _toy()
    nnet = _Nnet([0x001 | 0x008])   # simple, kPropagateAdds
    a = impl.Analyzer().init(nnet, comp)
    v = a.variables
    # m1 rows split at 0,2,4; columns at 0,3,6 -> 4 variables; m2 -> 1
    assert v.num_variables() == 5
    assert [v.describe_variable(i) for i in range(5)] == [
        "m1(0:1,0:2)", "m1(0:1,3:5)", "m1(2:3,0:2)", "m1(2:3,3:5)", "m2"]
    out = []
    v.append_variables_for_submatrix(s3, out)
    assert out == [0, 2]
    out = []
    v.append_variables_for_submatrix(s4, out)
    assert out == [2, 3]
    assert v.get_matrix_for_variable(4) == 2
    attrs = list(a.command_attributes)
    # partial write (copy into s3) reads the matrix too, but not the variables
    assert attrs[3].variables_written == [0, 2] and attrs[3].variables_read == [4]
    assert attrs[3].matrices_read == [1, 2] and attrs[3].matrices_written == [1]
    # kPropagateAdds: output is read-write
    assert attrs[4].variables_read == [0, 2, 4] and attrs[4].variables_written == [4]
    assert not any(x.has_side_effects for x in attrs)
    R, W, RW = analysis_types.kReadAccess, analysis_types.kWriteAccess, analysis_types.kReadWriteAccess
    assert list(a.variable_accesses[2]) == [(2, W), (3, W), (4, R), (5, RW)]
    assert list(a.variable_accesses[1]) == [(2, W)]
    m1 = a.matrix_accesses[1]
    assert (m1.allocate_command, m1.deallocate_command, m1.is_input, m1.is_output) == \
        (1, 7, False, False)
    assert list(m1.accesses) == [(2, W), (3, RW), (4, R), (5, RW)]
    m2 = a.matrix_accesses[2]
    assert (m2.allocate_command, m2.is_input, m2.is_output) == (0, True, True)
    assert list(m2.accesses) == [(0, W), (3, R), (4, RW), (6, R)]
    summary = impl.matrix_access_summary(a.matrix_accesses)
    assert summary == analysis_types.MatrixAccessSummary(
        allocate_command=[-1, 1, 0], deallocate_command=[-1, 7, -1],
        first_access=[-1, 2, 0], second_access=[-1, 3, 3], last_access=[-1, 5, 6],
        is_input=[False, False, True], is_output=[False, False, True])
    # v2 and m2 are read-written after a read; every variable is first written
    assert impl.rewritten_variable_candidates(a.variable_accesses) == [2, 4]
    types = command_type_bytes_py(comp.commands)
    assert impl.undefined_variable_candidates(a.variable_accesses, types,
                                              int(CT.kCompressMatrix)) == []
    ca = impl.ComputationAnalysis(comp, a)
    assert ca.first_access(s3) == 2
    assert ca.first_nontrivial_access(s3) == 3
    assert ca.first_nontrivial_access(s1) == 3
    assert ca.last_access(s3) == 5
    assert ca.last_write_access(s3) == 5
    assert ca.last_write_access(s2) == len(comp.commands)   # an output
    assert ca.data_invalidated_command(3, s3) == 5
    assert ca.data_invalidated_command(5, s3) == 7          # the deallocation
    assert ca.first_nontrivial_matrix_access(1) == 3
    assert ca.last_matrix_access(1) == 5


@pytest.mark.parametrize("impl", [twin, fast], ids=["python", "cython"])
def test_undefined_candidates_without_the_zeroing(impl):
    comp, _ = _toy()
    comp.commands[2].command_type = CT.kNoOperation
    a = impl.Analyzer().init(_Nnet([0x001 | 0x008]), comp)
    types = command_type_bytes_py(comp.commands)
    # v1 is never accessed now; v3 is first read-written (by the kMatrixAdd, c5)
    assert impl.undefined_variable_candidates(a.variable_accesses, types,
                                              int(CT.kCompressMatrix)) == [1, 3]
    # a first access by a command of the exempt type does not count
    assert impl.undefined_variable_candidates(a.variable_accesses, types,
                                              int(CT.kMatrixAdd)) == [1]


@pytest.mark.parametrize("impl", [twin, fast], ids=["python", "cython"])
def test_structural_faults_are_errors(impl):
    nnet = _Nnet([0x001])
    comp, (s1, s2, s3, s4) = _toy()
    comp.commands.insert(2, Command(CT.kAllocMatrix, s1))
    with pytest.raises(ComputationError, match=r"m1 initialized twice.*c1 and c2"):
        impl.Analyzer().init(nnet, comp)
    comp, (s1, s2, s3, s4) = _toy()
    comp.commands[1] = Command(CT.kAllocMatrix, s3)
    with pytest.raises(ComputationError, match=r"c1 does not operate on a whole matrix"):
        impl.Analyzer().init(nnet, comp)
    comp, _ = _toy()
    comp.new_submatrix(1, 3, 2, 0, 6)
    with pytest.raises(ComputationError, match=r"submatrix 5 = m1\(3:4, 0:5\).*outside"):
        impl.Analyzer().init(nnet, comp)
    comp, _ = _toy()
    comp.commands[3] = Command(CT.kMatrixCopy, 99, s2)
    with pytest.raises(ComputationError, match=r"c3: submatrix index 99 out of range"):
        impl.Analyzer().init(nnet, comp)
    comp.commands[3] = Command(CT.kMatrixCopy, -1, s2)
    with pytest.raises(ComputationError, match=r"c3: submatrix index -1 out of range"):
        impl.Analyzer().init(nnet, comp)
    comp, _ = _toy()
    comp.commands.append(Command(99))
    with pytest.raises(ComputationError, match=r"c8 has unknown command type"):
        impl.Analyzer().init(nnet, comp)


def test_helpers():
    comp, (s1, s2, s3, s4) = _toy()
    assert analysis.compute_matrix_to_submatrix(comp) == [[], [s1, s3, s4], [s2]]
    assert analysis.get_commands_of_type(comp, CT.kSetConst) == [2]
    # m2 (4x3) accepted, then m1 (4x6) allocated: 48 + 96 bytes at peak
    assert analysis.get_max_memory_use(comp) == 4 * (12 + 24)
    assert analysis.indexes_multi_to_submatrix_indexes([(3, 0), (-1, -1), (1, 2), (3, 1)]) \
        == [1, 3]


BENCH = [p for p in sorted(KALDI_REF.glob("bench/*/request.txt"))
         if not p.parent.name.startswith("blstm_small")]   # 254k commands: ~10 s, too slow


@pytest.mark.parametrize("request_path", BENCH, ids=lambda p: p.parent.name)
def test_twins_agree_on_bench_requests(request_path, monkeypatch):
    """Full-size networks (bench/models/*/final.config through our nnet3-init)."""
    config_dir = KALDI_REF / "bench" / "models" / request_path.parent.name.split(".")[0]
    monkeypatch.chdir(config_dir)          # final.config names configs/lda.mat
    nnet = Nnet.from_config(str(config_dir / "final.config"))
    request = ComputationRequest.read(str(request_path))
    for computation in (create_computation(nnet, request), compile_(nnet, request)):
        assert_same_analysis(nnet, computation)
