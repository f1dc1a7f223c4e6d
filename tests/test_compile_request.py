"""ComputationRequest and Index/Cindex vector I/O against Kaldi's bytes."""

import struct

import pytest
from conftest import KALDI_REF, TEST_DATA

from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.errors import ComputationError, KaldiFormatError
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.common.index import Index
from pynnet3.common.index_io import (print_cindex, print_indexes, read_cindex_vector,
                                   read_index_vector, write_cindex_vector, write_index_vector)

REQUESTS = (sorted(KALDI_REF.glob("random/case*/request.txt"))
            + sorted(KALDI_REF.glob("models/*/request*/request.txt"))
            + sorted(KALDI_REF.glob("bench/*/request.txt"))
            + sorted(TEST_DATA.glob("compile/*/request.txt")))


def _id(path):
    return "/".join(path.parts[-3:-1])


@pytest.mark.parametrize("path", REQUESTS, ids=_id)
def test_request_text_round_trip(path):
    """Reading Kaldi's text request and writing it back gives Kaldi's bytes;
    the binary form reads back to the same request."""
    data = path.read_bytes()
    request = ComputationRequest.from_bytes(data, str(path))
    assert request.to_bytes(binary=False) == data
    again = ComputationRequest.from_bytes(request.to_bytes(binary=True))
    assert again == request
    assert all(isinstance(i, Index) for spec in request.inputs for i in spec.indexes)


def test_request_read_file(tmp_path):
    request = ComputationRequest(
        inputs=[IoSpecification.from_t_range("input", -2, 5)],
        outputs=[IoSpecification("output", [Index(0, 0, 0), Index(1, 0, 0)], True)],
        need_model_derivative=True)
    path = tmp_path / "req.bin"
    request.write(str(path), binary=True)
    assert path.read_bytes().startswith(b"\0B<ComputationRequest> ")
    assert ComputationRequest.read(str(path)) == request
    assert request.need_derivatives()
    assert request.index_for_input("input") == 0
    assert request.index_for_output("nope") == -1


def test_need_derivatives_without_output_derivative():
    request = ComputationRequest(inputs=[IoSpecification("input", [Index()], True)],
                                 outputs=[IoSpecification("output", [Index()])])
    with pytest.raises(ComputationError, match="no derivatives at the output"):
        request.need_derivatives()


def _binary_index_bytes(indexes):
    stream = OutputStream(True)
    write_index_vector(stream, indexes)
    return stream.getvalue()


def test_index_vector_binary_forms():
    """Kaldi's compressed forms: one signed byte for small t / t deltas with
    unchanged n and x, else byte 127 and three int32s."""
    def full(n, t, x):
        return b"\x7f" + b"".join(b"\x04" + struct.pack("<i", v) for v in (n, t, x))
    indexes = [Index(0, -3, 0), Index(0, -2, 0), Index(0, 120, 0), Index(1, 120, 0),
               Index(1, 0, 0), Index(1, -130, 0), Index(1, -129, 2)]
    expected = (b"<I1V> \x04" + struct.pack("<i", 7) + b"\xfd\x01\x7a" + full(1, 120, 0)
                + b"\x88" + full(1, -130, 0) + full(1, -129, 2))
    assert _binary_index_bytes(indexes) == expected
    stream = InputStream(expected, True)
    assert read_index_vector(stream) == indexes
    assert stream.pos == len(expected)


def test_cindex_vector_binary_forms():
    cindexes = [(3, Index(1, 0, 0)), (3, Index(2, 0, 0)), (3, Index(2, 5, 0)),
                (4, Index(0, 5, 0)), (4, Index(7, 5, 1))]
    stream = OutputStream(True)
    write_cindex_vector(stream, cindexes)
    data = stream.getvalue()
    node = lambda n: b"|\x04" + struct.pack("<i", n)  # noqa: E731
    def full(n, t, x):
        return b"\x7f" + b"".join(b"\x04" + struct.pack("<i", v) for v in (n, t, x))
    # an element after a change of node is still coded against the previous one
    assert data == (b"<I1V> \x04" + struct.pack("<i", 5) + node(3) + b"\x7e\x7e\x05"
                    + node(4) + full(0, 5, 0) + full(7, 5, 1))
    assert read_cindex_vector(InputStream(data, True)) == cindexes


def test_cindex_vector_text_form():
    cindexes = [(3, Index(0, 1, 0)), (3, Index(0, 2, 0)), (5, Index(1, 2, 3))]
    stream = OutputStream(False)
    write_cindex_vector(stream, cindexes)
    data = stream.getvalue()
    assert data == b"<I1V> 3 [3 :<I1> 0 1 0 <I1> 0 2 0 ][5 :<I1> 1 2 3 ]"
    assert read_cindex_vector(InputStream(data, False)) == cindexes


@pytest.mark.parametrize("path", sorted(KALDI_REF.glob("random/case1*/computation.opt.kaldi")),
                         ids=_id)
def test_cindex_vectors_in_kaldi_computations(path):
    """Every debug-info Cindex vector in Kaldi's binary computations reads and
    re-writes to the same bytes."""
    data = path.read_bytes()
    pos = 0
    count = 0
    while True:
        k = data.find(b"<Cindexes> ", pos)
        if k < 0:
            break
        stream = InputStream(data, True, str(path), k + len(b"<Cindexes> "))
        start = stream.pos
        vec = read_cindex_vector(stream)
        out = OutputStream(True)
        write_cindex_vector(out, vec)
        assert out.getvalue() == data[start:stream.pos]
        pos = stream.pos
        count += 1
    assert count > 0


@pytest.mark.parametrize("data, message", [
    (b"<ComputationRequest> <NumInputs> 1 <Inputs> <IoSpecification> input <NumIndexes> 2 "
     b"<Indexes> <I1V> 1 <I1> 0 0 0 <HasDeriv> F </IoSpecification>", "<NumIndexes> 2 but 1"),
    (b"<ComputationRequest> <NumInputs> x", "expected an integer"),
    (b"<ComputationRequest> <NumInputs> 1 <Inputs> <IoSpecification> input <NumIndexes> 1 "
     b"<Indexes> <I1V> -1", "size = -1"),
    (b"<ComputationRequest> <NumInputs> 1 <Inputs> <IoSpecification> input <NumIndexes> 1 "
     b"<Indexes> <I1V> 1 <I2> 0 0 0", "expected token <I1>"),
    (b"<Foo>", "expected token <ComputationRequest>"),
])
def test_bad_requests(data, message):
    with pytest.raises(KaldiFormatError, match=message):
        ComputationRequest.from_bytes(data, "bad.txt")


def test_bad_binary_index_vector():
    data = b"<I1V> \x04" + struct.pack("<i", 2) + b"\x01\x7e"
    with pytest.raises(KaldiFormatError, match="unexpected character 126"):
        read_index_vector(InputStream(data, True))
    with pytest.raises(KaldiFormatError, match="end of file"):
        read_index_vector(InputStream(data[:-1], True))


def test_print_forms():
    assert print_indexes([]) == "[ ]"
    assert print_indexes([Index(0, t, 0) for t in range(-2, 4)] + [Index(1, 7, 2)]) == \
        "[(0,-2:3), (1,7,2)]"
    long = [Index(n, 0, 0) for n in range(100)]
    text = print_indexes(long)
    assert len(text) == 205 and " ... " in text
    assert print_cindex((1, Index(0, 3, 0)), ["a", "b"]) == "b(0,3)"
    assert print_cindex((0, Index(2, 3, 4)), ["a", "b"]) == "a(2,3,4)"
