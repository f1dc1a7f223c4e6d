"""Kaldi tables: archives and script files named by rspecifiers/wspecifiers.

An *rspecifier* says where to read a table (a sequence of key/object pairs):

  ``ark:foo.ark``      an archive: ``key`` then one space then the object, where
                       a binary object starts with Kaldi's ``\\0B`` header
  ``scp:foo.scp``      a script file: lines ``key rxfilename`` (an rxfilename may
                       be ``file:offset`` and may end in a range ``[r1:r2,c1:c2]``)
  options before the colon, comma-separated: ``o``/``no`` (each key asked once),
  ``s``/``ns`` (keys sorted), ``cs``/``ncs`` (asked in sorted order), ``p``/``np``
  (permissive: unreadable entries are skipped / treated as absent), ``b``/``t``
  (ignored, accepted for symmetry), ``bg`` (background reading: accepted).

A *wspecifier* says where to write one:

  ``ark:foo.ark`` (binary), ``ark,t:foo.ark`` (text), ``scp:foo.scp`` (each
  object to the wxfilename the existing script file gives for its key),
  ``ark,scp:foo.ark,foo.scp`` (an archive plus a script file of
  ``key foo.ark:offset`` lines); options ``b``, ``t``, ``f``/``nf`` (flush after
  each object), ``p`` (permissive: keys missing from a script are skipped).

rxfilenames and wxfilenames are Kaldi's (files, ``-``, pipes, ``file:offset``;
see :mod:`pynnet3.io.files`).

Object *kinds* (Kaldi's holders): ``matrix``, ``double_matrix``, ``vector``,
``double_vector``, ``int32``, ``float``, ``double``, ``bool``, ``int32_vector``,
``int32_vector_vector``, ``token``, ``token_vector``. Matrices read as float32
(double ones as float64) and accept every binary matrix form (FM, DM, CM, CM2,
CM3); vectors read as float32/float64 NumPy arrays.

Guarantees:
- :class:`TableWriter` writes exactly the bytes Kaldi's TableWriter writes for
  the same keys and values (binary and text), including ``ark,scp`` offsets.
- Readers accept everything Kaldi's readers accept for these kinds; a bad
  rspecifier, archive or script raises :class:`PynnetError` /
  :class:`KaldiFormatError` naming the file, the key and the byte offset.
"""

import logging
import re
from dataclasses import dataclass

import numpy as np

from ..errors import KaldiFormatError, PynnetError
from .files import OutputSink, read_buffer
from .stream import InputStream, OutputStream, format_float

_log = logging.getLogger(__name__)

_WS = b" \t\n\r\x0b\x0c"
_KEY_RE = re.compile(rb"[ \t\n\r\x0b\x0c]*([^ \t\n\r\x0b\x0c]+)")
_SPLIT_OPTS_RE = re.compile(r"[, ]")


# -- rspecifier / wspecifier classification -------------------------------------

@dataclass(slots=True)
class RspecifierOptions:
    once: bool = False
    sorted: bool = False
    called_sorted: bool = False
    permissive: bool = False
    background: bool = False


@dataclass(slots=True)
class WspecifierOptions:
    binary: bool = True
    flush: bool = False
    permissive: bool = False


_R_FLAGS = {"o": ("once", True), "no": ("once", False), "p": ("permissive", True),
            "np": ("permissive", False), "s": ("sorted", True), "ns": ("sorted", False),
            "cs": ("called_sorted", True), "ncs": ("called_sorted", False),
            "bg": ("background", True)}
_W_FLAGS = {"b": ("binary", True), "t": ("binary", False), "f": ("flush", True),
            "nf": ("flush", False), "p": ("permissive", True)}


def classify_rspecifier(rspecifier):
    """``(kind, rxfilename, options)`` with kind ``"ark"``, ``"scp"`` or None
    (not an rspecifier), following Kaldi's ClassifyRspecifier exactly."""
    opts = RspecifierOptions()
    pos = rspecifier.find(":")
    if pos < 0 or rspecifier[-1:].isspace():
        return None, "", opts
    kind = None
    for word in _SPLIT_OPTS_RE.split(rspecifier[:pos]):
        if word in ("b", "t"):
            continue
        if word in _R_FLAGS:
            attr, value = _R_FLAGS[word]
            setattr(opts, attr, value)
        elif word in ("ark", "scp"):
            if kind is not None:
                return None, "", opts
            kind = word
        else:
            return None, "", opts
    if kind is None:
        return None, "", opts
    return kind, rspecifier[pos + 1:], opts


def classify_wspecifier(wspecifier):
    """``(kind, archive_wxfilename, script_wxfilename, options)`` with kind
    ``"ark"``, ``"scp"``, ``"both"`` or None, as Kaldi's ClassifyWspecifier."""
    opts = WspecifierOptions()
    pos = wspecifier.find(":")
    if pos < 0 or wspecifier[-1:].isspace():
        return None, "", "", opts
    kind = None
    for word in _SPLIT_OPTS_RE.split(wspecifier[:pos]):
        if word in _W_FLAGS:
            attr, value = _W_FLAGS[word]
            setattr(opts, attr, value)
        elif word == "ark":
            if kind is not None:
                return None, "", "", opts
            kind = "ark"
        elif word == "scp":
            if kind is None:
                kind = "scp"
            elif kind == "ark":
                kind = "both"
            else:
                return None, "", "", opts
        else:
            return None, "", "", opts
    rest = wspecifier[pos + 1:]
    if kind == "ark":
        return kind, rest, "", opts
    if kind == "scp":
        return kind, "", rest, opts
    if kind == "both":
        comma = rest.find(",")
        if comma < 0:
            return None, "", "", opts
        return kind, rest[:comma], rest[comma + 1:], opts
    return None, "", "", opts


def is_token(key):
    """Kaldi's IsToken: non-empty, no whitespace or control characters."""
    if not key:
        return False
    for ch in key:
        o = ord(ch)
        if o < 128 and (o <= 32 or o == 127):
            return False
    return True


# -- holders: how one object of each kind is read and written ------------------

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


class _Holder:
    """How one kind of table object is read and written (Kaldi's Holder)."""

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


def _read_int32_vector(stream):
    if stream.binary:
        n = stream.read_int32()
        if n < 0:
            raise stream.error("negative vector size %d" % n)
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
        n = stream.read_int32()
        if n < 0:
            raise stream.error("negative vector size %d" % n)
        result = []
        for _ in range(n):
            m = stream.read_int32()
            if m < 0:
                raise stream.error("negative vector size %d" % m)
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
        n = stream.read_int32()
        if n < 0:
            raise stream.error("negative vector size %d" % n)
        rec = np.frombuffer(stream._read_raw(10 * n, "int32 pair vector"),
                            dtype=[("s1", "u1"), ("v1", "<i4"), ("s2", "u1"), ("v2", "<i4")])
        if n and not (np.all(rec["s1"] == 4) and np.all(rec["s2"] == 4)):
            raise stream.error("int32 pair vector element without size byte 4")
        return list(zip(rec["v1"].tolist(), rec["v2"].tolist()))
    line = _text_line(stream)
    result = []
    for group in line.split(b";") if line.strip() else []:
        words = group.split()
        try:
            if len(words) != 2:
                raise ValueError
            result.append((int(words[0]), int(words[1])))
        except ValueError:
            raise stream.error("expected pairs of integers separated by ';', got '%s'"
                               % line.decode("latin-1")[:60]) from None
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
        n = stream.read_int32()
        if n < 0:
            raise stream.error("negative vector size %d" % n)
        return [(stream.read_float(), stream.read_float()) for _ in range(n)]
    line = _text_line(stream)
    result = []
    for group in line.split(b";") if line.strip() else []:
        words = group.split()
        try:
            if len(words) != 2:
                raise ValueError
            result.append((float(np.float32(words[0])), float(np.float32(words[1]))))
        except ValueError:
            raise stream.error("expected pairs of numbers separated by ';', got '%s'"
                               % line.decode("latin-1")[:60]) from None
    return result


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
        n = stream.read_int32()
        if n < 0:
            raise stream.error("negative posterior size %d" % n)
        result = []
        for _ in range(n):
            m = stream.read_int32()
            if m < 0:
                raise stream.error("negative posterior size %d" % m)
            result.append([(stream.read_int32(), stream.read_float()) for _ in range(m)])
        return result
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
            from .compressed import read_compressed_matrix
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
    m = _KEY_RE.match(stream.data, stream.pos)
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
    "matrix": _Holder("matrix", lambda s: s.read_matrix(np.float32),
                      lambda o, v: o.write_matrix(v), extract_range=_matrix_range),
    "double_matrix": _Holder("double_matrix", lambda s: s.read_matrix(np.float64),
                             lambda o, v: o.write_matrix(v, double=True),
                             extract_range=_matrix_range),
    "vector": _Holder("vector", lambda s: s.read_vector(np.float32),
                      lambda o, v: o.write_vector(v), extract_range=_vector_range),
    "double_vector": _Holder("double_vector", lambda s: s.read_vector(np.float64),
                             lambda o, v: o.write_vector(v, double=True),
                             extract_range=_vector_range),
    "int32": _Holder("int32", *_basic("read_int32", "write_int32", "an integer")),
    "float": _Holder("float", *_basic("read_float", "write_float", "a float")),
    "double": _Holder("double", *_basic("read_double", "write_double", "a double")),
    "bool": _Holder("bool", *_basic(_read_bool_word, "write_bool", "a bool")),
    "int32_vector": _Holder("int32_vector", _read_int32_vector, _write_int32_vector),
    "int32_vector_vector": _Holder("int32_vector_vector", _read_int32_vector_vector,
                                   _write_int32_vector_vector),
    "int32_pair_vector": _Holder("int32_pair_vector", _read_int32_pair_vector,
                                 _write_int32_pair_vector),
    "float_pair_vector": _Holder("float_pair_vector", _read_float_pair_vector,
                                 _write_float_pair_vector),
    "posterior": _Holder("posterior", _read_posterior, _write_posterior),
    "general_matrix": _Holder("general_matrix", _read_general_matrix,
                              _write_general_matrix, extract_range=_general_matrix_range),
    "token": _Holder("token", _read_token, _write_token, has_header=False),
    "token_vector": _Holder("token_vector", _read_token_vector, _write_token_vector,
                            has_header=False),
}


def _holder(kind):
    try:
        return HOLDERS[kind]
    except KeyError:
        raise PynnetError("unknown table object kind '%s' (known: %s)"
                          % (kind, ", ".join(sorted(HOLDERS)))) from None


def infer_kind(value):
    """The holder kind a Python/NumPy value is written as by default."""
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


# -- reading -------------------------------------------------------------------

def _split_scp_line(line):
    """Kaldi's SplitStringOnFirstSpace: (key, rest) with rest trimmed."""
    parts = line.strip(" \t\n\r\x0c\x0b").split(None, 1)
    if len(parts) < 2:
        return (parts[0] if parts else ""), ""
    return parts[0], parts[1].strip(" \t\n\r\x0c\x0b")


def _split_range(rest):
    """``file:offset[range]`` -> (rxfilename, range or '') as Kaldi's
    ExtractRangeSpecifier; None if malformed."""
    if not rest.endswith("]"):
        return rest, ""
    pieces = rest.split("[")
    if len(pieces) == 2 and pieces[0] and len(pieces[1]) > 1:
        return pieces[0], pieces[1][:-1]
    return None


def read_script_file(rxfilename):
    """The ``(key, rest)`` pairs of a script file, Kaldi's ReadScriptFile."""
    data, offset = read_buffer(rxfilename)
    text = bytes(data[offset:])
    if text[:2] == b"\0B":
        raise KaldiFormatError("script file appears to be binary", rxfilename, 0)
    entries = []
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for number, raw in enumerate(lines, 1):
        line = raw.decode("utf-8", "surrogateescape")
        key, rest = _split_scp_line(line)
        if not key or not rest:
            raise PynnetError("%s:%d: invalid script-file line '%s' (expected "
                              "'key rxfilename')" % (rxfilename, number, line))
        entries.append((key, rest))
    return entries


class _ObjectLoader:
    """Loads objects named by scp rxfilenames, keeping the most recent file's
    buffer so consecutive offsets into one archive map it only once."""

    __slots__ = ("holder", "_path", "_data")

    def __init__(self, holder):
        self.holder = holder
        self._path = None
        self._data = None

    def load(self, rxfilename_with_range, source):
        split = _split_range(rxfilename_with_range)
        if split is None:
            raise PynnetError("%s: cannot make sense of '%s' (bad range specifier?)"
                              % (source, rxfilename_with_range))
        rxfilename, range_text = split
        path, offset = _path_and_offset(rxfilename)
        if path is not None and path == self._path:
            data = self._data
            if offset > len(data):
                raise KaldiFormatError("offset %d is past the end of the file (%d bytes)"
                                       % (offset, len(data)), path)
        else:
            data, offset = read_buffer(rxfilename)
            self.close()
            if path is not None:
                self._path, self._data = path, data
        stream = InputStream(data, False, rxfilename, offset)
        value = self.holder.read_object(stream)
        if range_text:
            if self.holder.extract_range is None:
                raise PynnetError("%s: a range '[%s]' is not allowed for %s objects"
                                  % (source, range_text, self.holder.name))
            value = self.holder.extract_range(value, range_text, stream.error)
        return value

    def close(self):
        data = self._data
        self._path = self._data = None
        if data is not None and hasattr(data, "close"):
            data.close()


def _path_and_offset(rxfilename):
    from .files import _OFFSET_RE, classify_rxfilename
    kind = classify_rxfilename(rxfilename)
    if kind == "file":
        return rxfilename, 0
    if kind == "offset":
        path, offset = _OFFSET_RE.match(rxfilename).groups()
        return path, int(offset)
    return None, 0


def _archive_entries(stream, holder, archive):
    """Yields (key, value, offset) from an archive stream until its end."""
    data = stream.data
    n = len(data)
    while True:
        m = _KEY_RE.match(data, stream.pos)
        if m is None:
            return
        key = m.group(1).decode("utf-8", "surrogateescape")
        end = m.end()
        if end >= n or data[end] not in b" \t\n":
            got = "end of file" if end >= n else repr(chr(data[end]))
            raise KaldiFormatError("invalid archive: expected a space after key '%s', got %s"
                                   % (printable_key(key), got), archive, end)
        stream.pos = end if data[end] == 10 else end + 1
        start = stream.pos
        try:
            value = holder.read_object(stream)
        except KaldiFormatError as e:
            raise KaldiFormatError("reading %s object for key '%s' (starting at byte %d): %s"
                                   % (holder.name, printable_key(key), start, e.detail),
                                   archive, e.offset) from None
        yield key, value, start


class SequentialTableReader:
    """Iterates ``(key, value)`` over a table, like Kaldi's
    SequentialTableReader. Use as an iterator (and optionally a context
    manager); :meth:`close` releases the files."""

    def __init__(self, rspecifier, kind="matrix"):
        self.rspecifier = rspecifier
        self.holder = _holder(kind)
        self.kind, self.rxfilename, self.opts = classify_rspecifier(rspecifier)
        if self.kind is None:
            raise PynnetError("invalid rspecifier '%s' (expected e.g. ark:file.ark or "
                              "scp:file.scp)" % rspecifier)
        self._loader = None
        self._data = None
        # How many objects the table holds, when known before reading them
        # (a script file); None for an archive.
        self.num_entries = None
        if self.kind == "ark":
            self._data, offset = read_buffer(self.rxfilename)
            self._stream = InputStream(self._data, False, self.rxfilename or "-", offset)
        else:
            self._entries = read_script_file(self.rxfilename)
            self.num_entries = len(self._entries)
            self._loader = _ObjectLoader(self.holder)

    def __iter__(self):
        try:
            if self.kind == "ark":
                yield from self._iter_archive()
            else:
                yield from self._iter_script()
        finally:
            self.close()

    def _iter_archive(self):
        archive = self.rxfilename or "-"
        entries = _archive_entries(self._stream, self.holder, archive)
        while True:
            try:
                item = next(entries)
            except StopIteration:
                return
            except PynnetError as e:
                if self.opts.permissive:
                    _log.warning("%s (stopping: permissive mode)", e)
                    return
                raise
            yield item[0], item[1]

    def _iter_script(self):
        for key, rest in self._entries:
            try:
                value = self._loader.load(rest, self.rxfilename)
            except PynnetError as e:
                if self.opts.permissive:
                    _log.warning("skipping key %s: %s", key, e)
                    continue
                raise PynnetError("reading key '%s' of %s: %s" % (key, self.rspecifier, e)) \
                    from None
            yield key, value

    def close(self):
        if self._loader is not None:
            self._loader.close()
        data, self._data = self._data, None
        if data is not None and hasattr(data, "close"):
            data.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_table(rspecifier, kind="matrix"):
    """Iterates ``(key, value)`` over the table an rspecifier names."""
    return iter(SequentialTableReader(rspecifier, kind))


class RandomAccessTableReader:
    """Looks objects up by key, like Kaldi's RandomAccessTableReader.

    An archive is read forward only as far as needed and what was read is
    kept (under the ``o`` option a value is dropped once returned); a script
    file is indexed when opened and each object loaded when asked for.
    """

    def __init__(self, rspecifier, kind="matrix"):
        self.rspecifier = rspecifier
        self.holder = _holder(kind)
        self.kind, self.rxfilename, self.opts = classify_rspecifier(rspecifier)
        if self.kind is None:
            raise PynnetError("invalid rspecifier '%s' (expected e.g. ark:file.ark or "
                              "scp:file.scp)" % rspecifier)
        self._values = {}
        self._failed = set()
        self._data = None
        self._loader = None
        if self.kind == "ark":
            self._data, offset = read_buffer(self.rxfilename)
            stream = InputStream(self._data, False, self.rxfilename or "-", offset)
            self._entries = _archive_entries(stream, self.holder, self.rxfilename or "-")
        else:
            self._script = {}
            for key, rest in read_script_file(self.rxfilename):
                if key in self._script:
                    raise PynnetError("script file %s has key '%s' twice"
                                      % (self.rxfilename, key))
                self._script[key] = rest
            self._loader = _ObjectLoader(self.holder)

    def _find(self, key):
        """True if ``key`` is now in self._values."""
        if key in self._values:
            return True
        if self.kind == "scp":
            if key not in self._script or key in self._failed:
                return False
            try:
                self._values[key] = self._loader.load(self._script[key], self.rxfilename)
            except PynnetError as e:
                if self.opts.permissive:
                    _log.warning("cannot load key %s: %s", key, e)
                    self._failed.add(key)
                    return False
                raise PynnetError("reading key '%s' of %s: %s" % (key, self.rspecifier, e)) \
                    from None
            return True
        while self._entries is not None:
            try:
                k, value, _ = next(self._entries)
            except StopIteration:
                self._entries = None
                break
            except PynnetError as e:
                self._entries = None
                if self.opts.permissive:
                    _log.warning("%s (stopping: permissive mode)", e)
                    break
                raise
            if k in self._values or k in self._failed:
                raise PynnetError("archive %s has key '%s' twice"
                                  % (self.rxfilename, printable_key(k)))
            self._values[k] = value
            if k == key:
                return True
        return False

    def has_key(self, key):
        return self._find(key)

    __contains__ = has_key

    def value(self, key):
        """The object for ``key``; PynnetError if the table has none."""
        if not self._find(key):
            raise PynnetError("no key '%s' in table %s" % (key, self.rspecifier))
        if self.opts.once:
            self._failed.add(key)
            return self._values.pop(key)
        return self._values[key]

    __getitem__ = value

    def close(self):
        self._entries = None
        if self._loader is not None:
            self._loader.close()
        data, self._data = self._data, None
        if data is not None and hasattr(data, "close"):
            data.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RandomAccessTableReaderMapped:
    """Kaldi's RandomAccessTableReaderMapped: objects looked up by utterance
    through an optional utterance-to-key map (``utt2spk_rspecifier``, a table
    of tokens such as ``ark:data/utt2spk``), so that per-speaker objects
    (i-vectors) are found by utterance. Without the map it is a plain
    :class:`RandomAccessTableReader`. An utterance missing from the map is an
    error (Kaldi's wording), a speaker missing from the table is not there."""

    def __init__(self, rspecifier, utt2spk_rspecifier="", kind="matrix"):
        self.reader = RandomAccessTableReader(rspecifier, kind)
        self.utt2spk_rspecifier = utt2spk_rspecifier
        self.map_reader = None
        if utt2spk_rspecifier:
            try:
                self.map_reader = RandomAccessTableReader(utt2spk_rspecifier, "token")
            except BaseException:
                self.reader.close()
                raise

    def _key(self, utt):
        if self.map_reader is None:
            return utt
        if not self.map_reader.has_key(utt):
            raise PynnetError("Attempting to read key %s, which is not present in utt2spk "
                              "map or similar map being read from %s"
                              % (utt, self.utt2spk_rspecifier))
        return self.map_reader.value(utt)

    def has_key(self, utt):
        return self.reader.has_key(self._key(utt))

    __contains__ = has_key

    def value(self, utt):
        return self.reader.value(self._key(utt))

    __getitem__ = value

    def close(self):
        self.reader.close()
        if self.map_reader is not None:
            self.map_reader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- writing -------------------------------------------------------------------

class TableWriter:
    """Writes ``(key, value)`` pairs to the table a wspecifier names, byte for
    byte as Kaldi's TableWriter. ``kind`` fixes the holder; None infers it
    from each value (:func:`infer_kind`). Use as a context manager or call
    :meth:`close`: an archive file appears under its name only when closed
    without error."""

    def __init__(self, wspecifier, kind=None):
        self.wspecifier = wspecifier
        self.holder = None if kind is None else _holder(kind)
        self.kind, ark, scp, self.opts = classify_wspecifier(wspecifier)
        if self.kind is None:
            raise PynnetError("invalid wspecifier '%s' (expected e.g. ark:file.ark, "
                              "ark,t:-, scp:file.scp or ark,scp:a.ark,a.scp)" % wspecifier)
        self.archive_wxfilename = ark
        self.script_wxfilename = scp
        self._archive = None
        self._script_out = None
        self._script_map = None
        if self.kind == "scp":
            self._script_map = dict(read_script_file(scp))
        else:
            self._archive = OutputSink(ark)
        if self.kind == "both":
            try:
                self._script_out = OutputSink(scp)
            except BaseException:
                self._archive.abort()
                raise

    def write(self, key, value, kind=None):
        if not is_token(key):
            raise PynnetError("invalid table key '%s' (empty or contains whitespace)"
                              % printable_key(key))
        holder = _holder(kind) if kind else self.holder or _holder(infer_kind(value))
        body = holder.object_pieces(value, self.opts.binary)
        if self.kind == "scp":
            wx = self._script_map.get(key)
            if wx is None:
                if self.opts.permissive:
                    return
                raise PynnetError("script file %s has no entry for key '%s'"
                                  % (self.script_wxfilename, key))
            sink = OutputSink(wx)
            try:
                for piece in body:
                    sink.write(piece)
                sink.close()
            except BaseException:
                sink.abort()
                raise
            return
        self._archive.write(key.encode("utf-8", "surrogateescape") + b" ")
        if self._script_out is not None:
            self._script_out.write(("%s %s:%d\n" % (key, self.archive_wxfilename,
                                                    self._archive.tell())).encode())
        for piece in body:
            self._archive.write(piece)
        if self.opts.flush:
            self._archive.flush()
            if self._script_out is not None:
                self._script_out.flush()

    def close(self):
        """Finishes the table: the archive (and script file) appear under
        their names.

        Returns:
            None.
        """
        for sink in (self._archive, self._script_out):
            if sink is not None:
                sink.close()

    def abort(self):
        """Discards what was written (files are not created).

        Returns:
            None.
        """
        for sink in (self._archive, self._script_out):
            if sink is not None:
                sink.abort()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()


class TableWriters:
    """A tool's output tables, which succeed or fail together: as a context
    manager, every table opened with :meth:`open` is closed when the block
    ends normally and aborted (no half-written output file) when it raises."""

    def __init__(self):
        self._writers = []

    def open(self, wspecifier, kind):
        """A :class:`TableWriter` for ``wspecifier``, or None when it is empty
        (an optional output the command line left out)."""
        if not wspecifier:
            return None
        writer = TableWriter(wspecifier, kind)
        self._writers.append(writer)
        return writer

    def close(self):
        for writer in self._writers:
            writer.close()

    def abort(self):
        for writer in self._writers:
            writer.abort()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
