"""Kaldi's holders (util/kaldi-holder.h): how one object of each table kind is
read and written, and the registry of kinds the tables (:mod:`.table`) use.

Kinds: ``matrix``, ``double_matrix``, ``vector``, ``double_vector``,
``int32``, ``float``, ``double``, ``bool``, ``int32_vector``,
``int32_vector_vector``, ``int32_pair_vector``, ``float_pair_vector``,
``posterior``, ``general_matrix``, ``token``, ``token_vector``; other
packages add theirs with :func:`register_holder` (the decoding package:
``lattice``, ``compact_lattice``). Matrices read as float32 (double ones as
float64) and accept every binary matrix form (FM, DM, CM, CM2, CM3); vectors
read as float32/float64 NumPy arrays.

Guarantees: each holder writes the bytes Kaldi's holder writes and reads
everything it reads, raising KaldiFormatError with the offset otherwise.
"""

import logging
import re

import numpy as np

from ..errors import PynnetError
from .compressed import read_compressed_matrix
from .matrix_rows import MatrixRows
from .stream import OutputStream, format_float

_log = logging.getLogger(__name__)

# A whitespace-delimited token after optional whitespace (a table key, or a
# token object).
TOKEN_RE = re.compile(rb"[ \t\n\r\x0b\x0c]*([^ \t\n\r\x0b\x0c]+)")

__all__ = ["Holder", "HOLDERS", "register_holder", "holder_for", "infer_kind", "is_token",
           "printable_key", "TOKEN_RE"]


def is_token(key):
    """Kaldi's IsToken: non-empty, no whitespace or control characters."""
    if not key:
        return False
    for ch in key:
        o = ord(ch)
        if o < 128 and (o <= 32 or o == 127):
            return False
    return True


def printable_key(key):
    """``key`` for an error message: characters that are not printable (a
    NUL from a binary file read as an archive, control characters) are
    written as ``\\xNN`` escapes, so a message stays one line of text."""
    if key.isprintable():
        return key

    def escape(c):
        code = ord(c)
        if 0xDC80 <= code <= 0xDCFF:       # a byte that is not UTF-8 (surrogateescape)
            code -= 0xDC00
        return "\\x%02x" % code if code < 256 else "\\u%04x" % code

    return "".join(c if c.isprintable() else escape(c) for c in key)


# -- holders: how one object of each kind is read and written ------------------

def _take_header(stream):
    """Kaldi's InitKaldiInputStream: consumes ``\\0B`` and sets the mode."""
    data, pos = stream.data, stream.pos
    if data[pos:pos + 1] == b"\0":
        if data[pos + 1:pos + 2] != b"B":
            raise stream.error("object starts with \\0 but not \\0B (bad binary header)")
        stream.pos = pos + 2
        stream.binary = True
    else:
        stream.binary = False


def _text_line_end(stream, what):
    """Skips spaces/tabs; requires and consumes the newline Kaldi's basic
    holders put after a text-mode value."""
    data = stream.data
    pos = stream.pos
    while pos < len(data) and data[pos] in b" \t\r\x0b\x0c":
        pos += 1
    if pos < len(data) and data[pos] != 10:
        raise stream.error("expected a newline after %s, got '%s'"
                           % (what, chr(data[pos])), pos)
    stream.pos = min(pos + 1, len(data))


def _text_line(stream):
    data = stream.data
    end = data.find(b"\n", stream.pos)
    if end < 0:
        end = len(data)
    line = bytes(data[stream.pos:end])
    stream.pos = min(end + 1, len(data))
    return line


class Holder:
    """How one kind of table object is read and written (Kaldi's Holder):
    ``read(stream)`` after the header, ``write(out, value)``; a holder of a kind
    with its own framing (lattices) overrides :meth:`read_object` and
    :meth:`object_bytes`."""

    __slots__ = ("name", "read", "write", "has_header", "extract_range")

    def __init__(self, name, read, write, has_header=True, extract_range=None):
        self.name = name
        self.read = read          # (InputStream after the header) -> value
        self.write = write        # (OutputStream, value) -> None
        self.has_header = has_header
        self.extract_range = extract_range

    def read_object(self, stream):
        if self.has_header:
            _take_header(stream)
        else:
            stream.binary = False
        return self.read(stream)

    def object_bytes(self, value, binary):
        return b"".join(self.object_pieces(value, binary))

    def object_pieces(self, value, binary):
        """The object's bytes as a list of bytes-like pieces, to write one
        after the other (a matrix's data is its own memory, not a copy). A
        holder without a ``write`` function gives its ``object_bytes``."""
        if self.write is None:
            return [self.object_bytes(value, binary)]
        out = OutputStream(binary and self.has_header)
        if self.has_header:
            out.write_header()
        self.write(out, value)
        return out.chunks()


def _parse_range(range_text, dims, stream_error):
    """Kaldi's ParseMatrixRangeSpecifier (one or two ``a:b`` parts)."""
    parts = range_text.split(",")
    if not 1 <= len(parts) <= len(dims) or any(p == "" for p in parts):
        raise stream_error("invalid range specifier '%s'" % range_text)
    result = []
    tolerance = 3  # Kaldi allows rows to run 3 past the end (feature framing).
    for i, dim in enumerate(dims):
        part = parts[i] if i < len(parts) else ":"
        if part == ":":
            lo, hi = 0, dim - 1
        else:
            bounds = part.split(":")
            try:
                lo, hi = (int(b) for b in bounds)
                if len(bounds) != 2:
                    raise ValueError
            except ValueError:
                raise stream_error("invalid range specifier '%s'" % range_text) from None
        limit = dim + tolerance if i == 0 else dim
        if not (0 <= lo <= hi < limit):
            raise stream_error("invalid range specifier '%s' for an object of size %s"
                               % (range_text, "x".join(str(d) for d in dims)))
        if hi >= dim:
            _log.warning("Range %d:%d goes beyond the dimension %d", lo, hi, dim)
        result.append((lo, min(hi, dim - 1) + 1))
    return result


def _matrix_range(value, range_text, stream_error):
    (r0, r1), (c0, c1) = _parse_range(range_text, value.shape, stream_error)
    return np.ascontiguousarray(value[r0:r1, c0:c1])


def _vector_range(value, range_text, stream_error):
    if "," in range_text:
        raise stream_error("invalid range specifier for vector: '%s'" % range_text)
    ((a, b),) = _parse_range(range_text, value.shape, stream_error)
    return value[a:b].copy()


def _read_size(stream, what):
    """A binary int32 count, which must not be negative."""
    n = stream.read_int32()
    if n < 0:
        raise stream.error("negative %s size %d" % (what, n))
    return n


def _read_int32_vector(stream):
    if stream.binary:
        n = _read_size(stream, "vector")
        raw = stream._read_raw(5 * n, "int32 vector")
        rec = np.frombuffer(raw, dtype=[("size", "u1"), ("value", "<i4")])
        if n and not np.all(rec["size"] == 4):
            raise stream.error("int32 vector element without size byte 4")
        return rec["value"].tolist()
    line = _text_line(stream)
    try:
        return [int(w) for w in line.split()]
    except ValueError:
        raise stream.error("expected integers, got '%s'" % line.decode("latin-1")[:60]) from None


def _write_int32_vector(out, values):
    values = [int(v) for v in values]
    if out.binary:
        out.write_int32(len(values))
        rec = np.empty(len(values), dtype=[("size", "u1"), ("value", "<i4")])
        rec["size"] = 4
        rec["value"] = values
        out.write_raw(rec.tobytes())
    else:
        out.write_raw(b"".join(b"%d " % v for v in values) + b"\n")


def _read_int32_vector_vector(stream):
    if stream.binary:
        result = []
        for _ in range(_read_size(stream, "vector")):
            m = _read_size(stream, "vector")
            rec = np.frombuffer(stream._read_raw(5 * m, "int32 vector"),
                                dtype=[("size", "u1"), ("value", "<i4")])
            if m and not np.all(rec["size"] == 4):
                raise stream.error("int32 vector element without size byte 4")
            result.append(rec["value"].tolist())
        return result
    line = _text_line(stream)
    result, current = [], []
    for word in line.replace(b";", b" ; ").split():
        if word == b";":
            result.append(current)
            current = []
        else:
            try:
                current.append(int(word))
            except ValueError:
                raise stream.error("expected an integer, got '%s'"
                                   % word.decode("latin-1")) from None
    if current:
        raise stream.error("no semicolon before newline in integer vector-of-vectors")
    return result


def _write_int32_vector_vector(out, values):
    if out.binary:
        out.write_int32(len(values))
        for v in values:
            _write_int32_vector(out, v)
    else:
        out.write_raw(b"".join(b"".join(b"%d " % int(x) for x in v) + b"; "
                               for v in values) + b"\n")


def _read_int32_pair_vector(stream):
    """Kaldi's BasicPairVectorHolder<int32>: binary, a count then the pairs'
    integers (each with its size byte); text, ``a b ; c d ; ...`` on a line."""
    if stream.binary:
        n = _read_size(stream, "vector")
        rec = np.frombuffer(stream._read_raw(10 * n, "int32 pair vector"),
                            dtype=[("s1", "u1"), ("v1", "<i4"), ("s2", "u1"), ("v2", "<i4")])
        if n and not (np.all(rec["s1"] == 4) and np.all(rec["s2"] == 4)):
            raise stream.error("int32 pair vector element without size byte 4")
        return list(zip(rec["v1"].tolist(), rec["v2"].tolist()))
    return _read_text_pairs(stream, int, "integers")


def _read_text_pairs(stream, convert, what):
    """A text pair vector, ``a b ; c d ; ...`` on one line, each value
    converted with ``convert``."""
    line = _text_line(stream)
    result = []
    for group in line.split(b";") if line.strip() else []:
        words = group.split()
        try:
            if len(words) != 2:
                raise ValueError
            result.append((convert(words[0]), convert(words[1])))
        except ValueError:
            raise stream.error("expected pairs of %s separated by ';', got '%s'"
                               % (what, line.decode("latin-1")[:60])) from None
    return result


def _write_int32_pair_vector(out, pairs):
    if out.binary:
        out.write_int32(len(pairs))
        rec = np.empty(len(pairs), dtype=[("s1", "u1"), ("v1", "<i4"), ("s2", "u1"),
                                          ("v2", "<i4")])
        rec["s1"] = rec["s2"] = 4
        if pairs:
            rec["v1"], rec["v2"] = zip(*pairs)
        out.write_raw(rec.tobytes())
    else:
        out.write_raw(b"; ".join(b"%d %d " % (int(a), int(b)) for a, b in pairs) + b"\n")


def _read_float_pair_vector(stream):
    """Kaldi's BasicPairVectorHolder<BaseFloat> (as the int32 one, floats)."""
    if stream.binary:
        n = _read_size(stream, "vector")
        return [(stream.read_float(), stream.read_float()) for _ in range(n)]
    return _read_text_pairs(stream, lambda word: float(np.float32(word)), "numbers")


def _write_float_pair_vector(out, pairs):
    if out.binary:
        out.write_int32(len(pairs))
        for a, b in pairs:
            out.write_float(a)
            out.write_float(b)
    else:
        for i, (a, b) in enumerate(pairs):
            if i:
                out.write_raw(b"; ")
            out.write_float(a)
            out.write_float(b)
        out.write_raw(b"\n")


def _read_posterior(stream):
    """Kaldi's PosteriorHolder: per frame, (int32, float) pairs; binary, counts
    and values with size bytes; text, ``[ id post id post ] [ ... ]`` on a line."""
    if stream.binary:
        return [[(stream.read_int32(), stream.read_float())
                 for _ in range(_read_size(stream, "posterior"))]
                for _ in range(_read_size(stream, "posterior"))]
    line = _text_line(stream)
    result, current = [], None
    words = line.split()
    i = 0
    try:
        while i < len(words):
            word = words[i]
            if word == b"[" and current is None:
                current = []
                i += 1
            elif word == b"]" and current is not None:
                result.append(current)
                current = None
                i += 1
            elif current is not None and i + 1 < len(words):
                current.append((int(word), float(np.float32(words[i + 1]))))
                i += 2
            else:
                raise ValueError
        if current is not None:
            raise ValueError
    except ValueError:
        raise stream.error("bad posterior line '%s'" % line.decode("latin-1")[:60]) from None
    return result


def _write_posterior(out, post):
    if out.binary:
        out.write_int32(len(post))
        for frame in post:
            out.write_int32(len(frame))
            for index, value in frame:
                out.write_int32(index)
                out.write_float(value)
    else:
        out.write_raw(b"".join(
            b"[ " + b"".join(b"%d %s " % (int(i), format_float(v).encode()) for i, v in frame)
            + b"] " for frame in post) + b"\n")


class CompressedMatrixBytes:
    """A compressed matrix kept as it was read (what Kaldi's GeneralMatrix
    holds for a CompressedMatrix, so that copying it writes the same bytes):
    ``raw`` is its binary form from the token (``CM``, ``CM2``, ``CM3``) on,
    ``matrix`` its decompressed float32 values."""

    __slots__ = ("raw", "matrix")

    def __init__(self, raw, matrix):
        self.raw = raw
        self.matrix = matrix


def _read_general_matrix(stream):
    """Kaldi's GeneralMatrix holder: a compressed matrix in a binary archive
    stays compressed (:class:`CompressedMatrixBytes`); anything else is read
    as a float32 matrix."""
    if stream.binary:
        start = stream.pos
        token = stream.read_token()
        if token in ("CM", "CM2", "CM3"):
            matrix = read_compressed_matrix(stream, token, start)
            return CompressedMatrixBytes(bytes(stream.data[start:stream.pos]), matrix)
        stream.pos = start
    return stream.read_matrix(np.float32)


def _general_matrix_range(value, range_text, stream_error):
    """A row/column range of a general matrix: a plain float32 matrix (as
    Kaldi's ExtractObjectRange for GeneralMatrix, which decompresses)."""
    if isinstance(value, CompressedMatrixBytes):
        value = value.matrix
    return _matrix_range(value, range_text, stream_error)


def _write_general_matrix(out, value):
    if isinstance(value, CompressedMatrixBytes):
        if out.binary:
            out.write_raw(value.raw)
        else:
            out.write_matrix(value.matrix)
    else:
        out.write_matrix(np.asarray(value, dtype=np.float32))


def _read_bool_word(stream):
    """A text/binary T or F without eating what follows (ReadBasicType<bool>)."""
    stream.skip_whitespace() if not stream.binary else None
    c = stream.data[stream.pos:stream.pos + 1]
    if c not in (b"T", b"F"):
        raise stream.error("expected a bool (T or F)")
    stream.pos += 1
    return c == b"T"


def _basic(read_name, write_name, what):
    def read(stream):
        if not stream.binary:
            data, pos = stream.data, stream.pos
            while pos < len(data) and data[pos] in b" \t\r\x0b\x0c":
                pos += 1
            stream.pos = pos
            if pos < len(data) and data[pos] == 10:
                raise stream.error("found a newline but expected %s" % what)
        value = read_name(stream) if callable(read_name) else getattr(stream, read_name)()
        if not stream.binary:
            _text_line_end(stream, what)
        return value

    def write(out, value):
        getattr(out, write_name)(value)
        if not out.binary:
            out.write_raw(b"\n")
    return read, write


def _read_token(stream):
    m = TOKEN_RE.match(stream.data, stream.pos)
    if m is None:
        raise stream.error("expected a token, got end of file")
    stream.pos = m.end()
    _text_line_end(stream, "a token")
    return m.group(1).decode("utf-8", "surrogateescape")


def _write_token(out, value):
    if not is_token(value):
        raise PynnetError("invalid token '%s' (empty or contains whitespace)" % value)
    out.write_raw(value.encode("utf-8", "surrogateescape") + b"\n")


def _read_token_vector(stream):
    return [w.decode("utf-8", "surrogateescape") for w in _text_line(stream).split()]


def _write_token_vector(out, values):
    for v in values:
        if not is_token(v):
            raise PynnetError("invalid token '%s' (empty or contains whitespace)" % v)
    out.write_raw(b"".join(v.encode("utf-8", "surrogateescape") + b" " for v in values) + b"\n")


HOLDERS = {
    "matrix": Holder("matrix", lambda s: s.read_matrix(np.float32),
                      lambda o, v: o.write_matrix(v), extract_range=_matrix_range),
    "double_matrix": Holder("double_matrix", lambda s: s.read_matrix(np.float64),
                             lambda o, v: o.write_matrix(v, double=True),
                             extract_range=_matrix_range),
    "vector": Holder("vector", lambda s: s.read_vector(np.float32),
                      lambda o, v: o.write_vector(v), extract_range=_vector_range),
    "double_vector": Holder("double_vector", lambda s: s.read_vector(np.float64),
                             lambda o, v: o.write_vector(v, double=True),
                             extract_range=_vector_range),
    "int32": Holder("int32", *_basic("read_int32", "write_int32", "an integer")),
    "float": Holder("float", *_basic("read_float", "write_float", "a float")),
    "double": Holder("double", *_basic("read_double", "write_double", "a double")),
    "bool": Holder("bool", *_basic(_read_bool_word, "write_bool", "a bool")),
    "int32_vector": Holder("int32_vector", _read_int32_vector, _write_int32_vector),
    "int32_vector_vector": Holder("int32_vector_vector", _read_int32_vector_vector,
                                   _write_int32_vector_vector),
    "int32_pair_vector": Holder("int32_pair_vector", _read_int32_pair_vector,
                                 _write_int32_pair_vector),
    "float_pair_vector": Holder("float_pair_vector", _read_float_pair_vector,
                                 _write_float_pair_vector),
    "posterior": Holder("posterior", _read_posterior, _write_posterior),
    "general_matrix": Holder("general_matrix", _read_general_matrix,
                              _write_general_matrix, extract_range=_general_matrix_range),
    "token": Holder("token", _read_token, _write_token, has_header=False),
    "token_vector": Holder("token_vector", _read_token_vector, _write_token_vector,
                            has_header=False),
}


def register_holder(holder):
    """Makes ``holder.name`` a table object kind that every table reader and
    writer accepts (as Kaldi's templates take any Holder); a holder of the
    same name is replaced. Packages above io register theirs when imported
    (pynnet3.decoding.lattice_holders: "lattice", "compact_lattice")."""
    HOLDERS[holder.name] = holder


def holder_for(kind):
    """The Holder of table object kind ``kind``."""
    try:
        return HOLDERS[kind]
    except KeyError:
        raise PynnetError("unknown table object kind '%s' (known: %s)"
                          % (kind, ", ".join(sorted(HOLDERS)))) from None


def infer_kind(value):
    """The holder kind a Python/NumPy value is written as by default."""
    if isinstance(value, MatrixRows):
        return "matrix"
    if isinstance(value, np.ndarray):
        if value.ndim == 2:
            return "double_matrix" if value.dtype == np.float64 else "matrix"
        if value.ndim == 1:
            if np.issubdtype(value.dtype, np.integer):
                return "int32_vector"
            return "double_vector" if value.dtype == np.float64 else "vector"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int32"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, str):
        return "token"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value) and value:
            return "token_vector"
        if all(isinstance(v, (list, tuple)) for v in value) and value:
            return "int32_vector_vector"
        return "int32_vector"
    raise PynnetError("cannot tell how to write a value of type %s to a table; "
                      "pass kind=..." % type(value).__name__)
