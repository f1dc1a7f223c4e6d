"""NnetComputation Print / Read / Write against Kaldi's files.

For every Kaldi-made optimized computation (random/caseN, models/zoo*/requestN
and the copies in tests/data/computer): reading ``computation.opt.kaldi`` and
printing it gives ``computation.opt.txt`` exactly, and writing it back gives
the file's bytes exactly (the same binary/text mode).
"""

import pytest

import pynnet3.components  # noqa: F401  (registers precomputed-indexes types)
from conftest import KALDI_REF, TEST_DATA
from pynnet3.compiler.computation import Command, CommandType, NnetComputation
from pynnet3.compiler.computation_io import (computation_to_bytes, print_computation,
                                            print_indexes, print_integer_vector,
                                            read_computation, read_computation_file)
from pynnet3.errors import KaldiFormatError
from pynnet3.io.stream import InputStream
from pynnet3.common.index import Index
from pynnet3.nnet.nnet import Nnet


def _case_dirs():
    dirs = []
    if KALDI_REF.is_dir():
        dirs += sorted(KALDI_REF.glob("random/case*"), key=lambda p: int(p.name[4:]))
        dirs += sorted(KALDI_REF.glob("models/*/request*"))
    dirs += sorted((TEST_DATA / "computer").glob("case*"))
    return [d for d in dirs if (d / "computation.opt.kaldi").is_file()]


CASES = _case_dirs()


def _case_id(path):
    return "/".join(path.parts[-2:]) if "computer" not in path.parts else "data/" + path.name


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_kaldi_computation_print_and_roundtrip(case):
    data = (case / "computation.opt.kaldi").read_bytes()
    computation = read_computation_file(str(case / "computation.opt.kaldi"))
    nnet = Nnet.read(str(case / "model.raw"))
    assert print_computation(computation, nnet) == (case / "computation.opt.txt").read_text()
    assert computation_to_bytes(computation, binary=data[:2] == b"\0B") == data


@pytest.mark.parametrize("case", CASES[:40], ids=[_case_id(c) for c in CASES[:40]])
def test_text_form_roundtrips_to_the_same_binary(case):
    data = (case / "computation.opt.kaldi").read_bytes()
    computation = read_computation_file(str(case / "computation.opt.kaldi"))
    text = computation_to_bytes(computation, binary=False)
    again = read_computation(InputStream.from_bytes(text))
    assert computation_to_bytes(again, binary=data[:2] == b"\0B") == data


def test_print_integer_vector_matches_kaldi_forms():
    # Kaldi's PrintIntegerVector: runs of equal values "vxN", consecutive runs
    # "a:b", runs of two written out, -1 runs as "-1xN".
    assert print_integer_vector([]) == "[ ]"
    assert print_integer_vector([5]) == "[5]"
    assert print_integer_vector([0, 1, 2, 3]) == "[0:3]"
    assert print_integer_vector([-1, -1, -1, -1, 0, 1, 2]) == "[-1x4, 0:2]"
    assert print_integer_vector([3, 7]) == "[3, 7]"
    assert print_integer_vector([0, 1, 5, 5, 5, 2]) == "[0, 1, 5x3, 2]"
    assert print_integer_vector([4, 4]) == "[4, 4]"


def test_print_indexes_compresses_t_runs_and_summarizes_long_lists():
    assert print_indexes([Index(0, t) for t in range(-2, 10)]) == "[(0,-2:9)]"
    assert print_indexes([Index(0, 1, 2), Index(1, 1)]) == "[(0,1,2), (1,1)]"
    long = print_indexes([Index(n, 0) for n in range(100)])
    assert len(long) == 205 and " ... " in long


class _Names:
    node_names = ["input", "foo_input", "foo", "output"]
    component_names = ["foo"]


def test_print_of_a_hand_made_computation():
    comp = NnetComputation()
    a = comp.new_matrix(4, 3)
    b = comp.new_matrix(4, 3)
    part = comp.new_submatrix(2, 1, 2, 0, 2)
    comp.indexes.append([0, 0, -1, 3])
    comp.indexes_ranges.append([(0, 2), (-1, -1)])
    comp.indexes_multi.append([(a, 1), (-1, -1), (part, 0)])
    T = CommandType
    comp.commands = [
        Command(T.kAcceptInput, a, 0),
        Command(T.kAllocMatrix, b),
        Command(T.kSetConst, b, alpha=0.5),
        Command(T.kCopyRows, b, a, 0),
        Command(T.kMatrixAdd, part, part, alpha=-1.0),
        Command(T.kAddRowRanges, b, a, 0),
        Command(T.kCopyRowsMulti, b, 0),
        Command(T.kPropagate, 0, 0, a, b, 0, 0),
        Command(T.kCompressMatrix, a, 2, 0, alpha=0.0),
        Command(T.kDecompressMatrix, a),
        Command(T.kProvideOutput, b, 3),
        Command(T.kNoOperationLabel),
        Command(T.kGotoLabel, 11),
    ]
    text = print_computation(comp, _Names())
    assert text.splitlines() == [
        "matrix m1(4, 3), m2(4, 3)",
        "# begin forward commands",
        "c0: m1 = user input [for node: 'input']",
        "c1: m2 = undefined(4,3)",
        "c2: m2.set(0.5) [dim = 4 x 3];",
        "c3: m2.CopyRows(1, m1[0, 0, -1, 3])",
        "c4: m2(1:2, 0:1) += -1 * m2(1:2, 0:1)",
        "c5: m2.AddRowRanges(1, m1, [0:1,null])",
        "c6: m2.CopyRowsMulti(1, [m1(1,:),NULL,m2(1,0:1)])",
        "c7: foo.Propagate(NULL, m1, &m2)",
        "c8: CompressMatrix(m1, 0, uint8, false)",
        "c9: DecompressMatrix(m1)",
        "c10: output m2 to user [for node: 'output']",
        "c11: [label for goto statement]",
        "c12: goto c11",
    ]


def test_truncated_or_corrupt_file_raises_format_error():
    case = CASES[0]
    data = (case / "computation.opt.kaldi").read_bytes()
    for cut in (10, len(data) // 3, len(data) - 5):
        with pytest.raises(KaldiFormatError):
            read_computation(InputStream.from_bytes(data[:cut], "cut.kaldi"))
    with pytest.raises(KaldiFormatError, match="NnetComputation"):
        read_computation(InputStream.from_bytes(b"\0B<Nnet3> ", "bad.kaldi"))


def test_command_referring_to_missing_submatrix_is_rejected():
    comp = NnetComputation()
    comp.new_matrix(2, 2)
    comp.commands = [Command(CommandType.kAllocMatrix, 7)]
    data = computation_to_bytes(comp)
    with pytest.raises(KaldiFormatError, match="submatrix"):
        read_computation(InputStream.from_bytes(data, "bad.kaldi"))
