"""Kaldi's serialization primitives, binary and text, over an in-memory buffer.

Kaldi writes every object as a sequence of *tokens* (``<LinearParams>``),
*basic types* (int32, float, bool...) and *vectors/matrices*, in one of two
modes chosen per file: binary (the file starts with ``\\0B``) or text.

Guarantees:
- :class:`OutputStream` produces exactly the bytes Kaldi produces for the same
  sequence of calls (text floats are printed like C++ ``ostream`` with
  precision 7, i.e. ``%.7g`` of the float32 value).
- :class:`InputStream` accepts everything Kaldi's readers accept for these
  primitives, and fails with a :class:`KaldiFormatError` naming the source and
  byte offset and what was expected, never with an unrelated exception.
"""

import math
import re
import struct

import numpy as np

from ..errors import KaldiFormatError
from .compressed import read_compressed_matrix
from .mapped import MappedFile
from .matrix_rows import MatrixRows

_WS = b" \t\n\r\x0b\x0c"
_TOKEN_RE = re.compile(rb"[ \t\n\r\x0b\x0c]*([^ \t\n\r\x0b\x0c]+)")
_SKIP_WS_RE = re.compile(rb"[ \t\n\r\x0b\x0c]*")

# One "a,b" of a text integer-pair vector as C++'s ``is >> a``, ',', ``is >> b``
# read it: whitespace may come before each number, none between a and ','.
_INT_PAIR_RE = re.compile(rb"[ \t\n\r\x0b\x0c]*([+-]?[0-9]+),[ \t\n\r\x0b\x0c]*([+-]?[0-9]+)")
_INT32 = struct.Struct("<i")
_UINT32 = struct.Struct("<I")
_INT64 = struct.Struct("<q")
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_INT16 = struct.Struct("<h")
_UINT16 = struct.Struct("<H")


def _format_nan(value):
    # glibc prints a NaN with its sign bit set as "-nan"; Python never does.
    return "-nan" if math.copysign(1.0, value) < 0 else "nan"


def format_float(value):
    """Text form of a float as Kaldi writes it (C++ ostream, precision 7)."""
    value = float(np.float32(value))
    return _format_nan(value) if value != value else "%.7g" % value


def format_double(value):
    """Text form of a double as Kaldi writes it (C++ ostream, precision 7)."""
    value = float(value)
    return _format_nan(value) if value != value else "%.7g" % value


def _format_array(values):
    if np.isnan(values).any():
        return " ".join([_format_nan(v) if v != v else "%.7g" % v for v in values.tolist()])
    return " ".join(["%.7g" % v for v in values.tolist()])


class InputStream:
    """Reads Kaldi primitives from ``data`` starting at ``pos``.

    ``source`` is a name for error messages (the rxfilename as given).
    """

    __slots__ = ("data", "pos", "binary", "source")

    def __init__(self, data, binary, source="<memory>", pos=0):
        self.data = data
        self.pos = pos
        self.binary = binary
        self.source = source

    @classmethod
    def from_bytes(cls, data, source="<memory>", pos=0):
        """Detects binary mode from Kaldi's ``\\0B`` header at ``pos``."""
        if data[pos:pos + 2] == b"\0B":
            return cls(data, True, source, pos + 2)
        return cls(data, False, source, pos)

    # -- errors -------------------------------------------------------------
    def error(self, message, offset=None):
        return KaldiFormatError(message, self.source, self.pos if offset is None else offset)

    def _describe_next(self):
        """A short description of what is at the current position, for errors."""
        if self.at_eof():
            return "end of file"
        m = _TOKEN_RE.match(self.data, self.pos)
        if m is None:
            return "end of file"
        text = m.group(1)[:40]
        try:
            return "'" + text.decode("latin-1") + "'"
        except Exception:  # pragma: no cover - latin-1 decodes everything
            return repr(text)

    def at_eof(self):
        """True if only whitespace remains."""
        m = _SKIP_WS_RE.match(self.data, self.pos)
        return m.end() >= len(self.data)

    def skip_whitespace(self):
        self.pos = _SKIP_WS_RE.match(self.data, self.pos).end()

    # -- tokens -------------------------------------------------------------
    def read_token(self):
        """Reads a whitespace-delimited token and the one whitespace after it."""
        m = _TOKEN_RE.match(self.data, self.pos)
        if m is None:
            raise self.error("expected a token, got end of file")
        end = m.end()
        if end < len(self.data):
            if self.data[end] not in _WS:  # pragma: no cover - regex stops at ws
                raise self.error("token not followed by whitespace", end)
            end += 1
        elif self.binary:
            raise self.error("token '%s' not followed by whitespace (file truncated?)"
                             % m.group(1).decode("latin-1"), end)
        self.pos = end
        try:
            return m.group(1).decode("ascii")
        except UnicodeDecodeError:
            raise self.error("expected a token, got non-text bytes %r" % m.group(1)[:20],
                             m.start(1)) from None

    def peek_token(self):
        """The next token without consuming it, or None at end of file."""
        m = _TOKEN_RE.match(self.data, self.pos)
        if m is None:
            return None
        return m.group(1).decode("latin-1")

    def expect_token(self, token):
        start = self.pos
        try:
            t = self.read_token()
        except KaldiFormatError:
            t = None
        if t != token:
            self.pos = start
            got = self._describe_next()
            raise self.error("expected token %s, got %s" % (token, got), start)

    def read_optional_token(self, token):
        """Consumes ``token`` if it is next; returns whether it was."""
        if self.peek_token() == token:
            self.read_token()
            return True
        return False

    # -- basic types --------------------------------------------------------
    def _read_sized(self, struct_, size_byte, what):
        start = self.pos
        data = self.data
        if start >= len(data):
            raise self.error("expected %s, got end of file" % what)
        got = data[start]
        got = got - 256 if got > 127 else got
        if got != size_byte:
            raise self.error("expected %s (size byte %d), got size byte %d"
                             % (what, size_byte, got))
        end = start + 1 + struct_.size
        if end > len(data):
            raise self.error("expected %s, got end of file" % what)
        self.pos = end
        return struct_.unpack_from(data, start + 1)[0]

    def _read_text_word(self, what):
        m = _TOKEN_RE.match(self.data, self.pos)
        if m is None:
            raise self.error("expected %s, got end of file" % what)
        self.pos = m.end()
        return m.group(1), m.start(1)

    def read_int32(self):
        if self.binary:
            return self._read_sized(_INT32, 4, "int32")
        word, at = self._read_text_word("an integer")
        try:
            value = int(word)
        except ValueError:
            raise self.error("expected an integer, got '%s'" % word.decode("latin-1"), at) from None
        if not -2**31 <= value < 2**31:
            raise self.error("integer %d out of int32 range" % value, at)
        return value

    def read_int64(self):
        if self.binary:
            return self._read_sized(_INT64, 8, "int64")
        word, at = self._read_text_word("an integer")
        try:
            return int(word)
        except ValueError:
            raise self.error("expected an integer, got '%s'" % word.decode("latin-1"), at) from None

    def read_uint32(self):
        if self.binary:
            return self._read_sized(_UINT32, -4, "uint32")
        return self.read_int64()

    def read_float(self):
        """A float32 as Kaldi's ReadBasicType<float> (binary accepts a double too)."""
        if self.binary:
            if self.pos < len(self.data) and self.data[self.pos] == 8:
                value = self._read_sized(_DOUBLE, 8, "float")
                with np.errstate(over="ignore"):  # C++'s cast: out of range -> inf
                    return float(np.float32(value))
            return self._read_sized(_FLOAT, 4, "float")
        # Beyond float32's largest value a C++ stream read fails (no rounding to
        # infinity); values that round down to it are fine.
        return float(np.float32(self._read_text_float("a float", 3.4028235677973366e38)))

    def read_double(self):
        if self.binary:
            if self.pos < len(self.data) and self.data[self.pos] == 4:
                return self._read_sized(_FLOAT, 4, "double")
            return self._read_sized(_DOUBLE, 8, "double")
        return self._read_text_float("a double")

    def _read_text_float(self, what, limit=1.7976931348623157e308):
        word, at = self._read_text_word(what)
        try:
            if b"_" in word:  # Python accepts digit separators; Kaldi does not
                raise ValueError
            value = float(word)
        except ValueError:
            raise self.error("expected %s, got '%s'" % (what, word.decode("latin-1")), at) from None
        if abs(value) > limit and value == value and \
                word.lower().lstrip(b"+-") not in (b"inf", b"infinity"):
            raise self.error("%s %s is out of range" % (what, word.decode("latin-1")), at)
        return value

    def read_bool(self):
        self.skip_whitespace()
        if self.pos >= len(self.data):
            raise self.error("expected a bool (T or F), got end of file")
        c = self.data[self.pos:self.pos + 1]
        if c not in (b"T", b"F"):
            raise self.error("expected a bool (T or F), got %s" % self._describe_next())
        self.pos += 1
        if not self.binary and self.pos < len(self.data) and self.data[self.pos] in _WS:
            self.pos += 1
        return c == b"T"

    # -- vectors and matrices -----------------------------------------------
    def _read_raw(self, nbytes, what):
        start = self.pos
        end = start + nbytes
        if nbytes < 0 or end > len(self.data):
            raise self.error("expected %d bytes of %s, file has only %d left"
                             % (nbytes, what, len(self.data) - start))
        self.pos = end
        return self.data[start:end]

    def _read_array(self, count, src_dtype, dtype, what):
        """``count`` little-endian elements straight out of the buffer, as a
        new (aligned, writable) array of ``dtype``: one copy, no slicing."""
        start = self.pos
        nbytes = count * np.dtype(src_dtype).itemsize
        if count < 0 or start + nbytes > len(self.data):
            raise self.error("expected %d bytes of %s, file has only %d left"
                             % (nbytes, what, len(self.data) - start))
        arr = np.frombuffer(self.data, dtype=src_dtype, count=count, offset=start)
        self.pos = start + nbytes
        with np.errstate(over="ignore", invalid="ignore"):  # double -> float as C++ casts
            out = arr.astype(dtype)  # astype always copies
        del arr
        if isinstance(self.data, MappedFile):
            # the copy is made: reading a model costs the model's memory, not twice that
            self.data.release_behind(self.pos)
        return out

    def _text_bracketed(self, what):
        """The bytes between the next '[' token and its matching ']'."""
        m = _TOKEN_RE.match(self.data, self.pos)
        if m is None or m.group(1) != b"[":
            raise self.error("expected '[' to start %s, got %s" % (what, self._describe_next()))
        start = m.end()
        end = self.data.find(b"]", start)
        if end < 0:
            raise self.error("no closing ']' for %s" % what, m.start(1))
        self.pos = end + 1
        if self.pos < len(self.data) and self.data[self.pos] == 10:  # "]\n"
            self.pos += 1
        return self.data[start:end], start

    def _parse_floats(self, text, at, dtype, what):
        words = text.split()
        try:
            with np.errstate(over="ignore"):
                values = np.array([float(w) for w in words], dtype=dtype)
        except ValueError:
            bad = next(w for w in words if not _is_float(w))
            raise self.error("expected a number in %s, got '%s'"
                             % (what, bad.decode("latin-1")[:40]), at) from None
        if b"_" in text:  # Python's float() accepts digit separators; Kaldi does not
            bad = next(w for w in words if b"_" in w)
            raise self.error("expected a number in %s, got '%s'"
                             % (what, bad.decode("latin-1")[:40]), at)
        if not np.all(np.isfinite(values)):
            # Kaldi accepts inf/infinity/nan spelled out, but a finite number
            # too large for the type is a read failure, not infinity.
            for w, v in zip(words, values.tolist()):
                if v in (float("inf"), float("-inf")) and \
                        w.lower().lstrip(b"+-") not in (b"inf", b"infinity"):
                    raise self.error("number %s in %s is out of range"
                                     % (w.decode("latin-1")[:40], what), at)
        return values

    def read_vector(self, dtype=np.float32):
        """A Kaldi Vector (FV or DV in binary, '[ ... ]' in text) as ``dtype``."""
        if self.binary:
            start = self.pos
            tok = self.read_token()
            if tok == "FV":
                src = "<f4"
            elif tok == "DV":
                src = "<f8"
            else:
                raise self.error("expected a vector (FV or DV), got '%s'" % tok, start)
            n = self.read_int32()
            if n < 0:
                raise self.error("negative vector size %d" % n, start)
            return self._read_array(n, src, dtype, "vector data")
        text, at = self._text_bracketed("a vector")
        return self._parse_floats(text, at, dtype, "vector")

    def read_double_vector(self):
        return self.read_vector(np.float64)

    def read_matrix(self, dtype=np.float32):
        """A Kaldi Matrix (FM, DM or compressed CM/CM2/CM3 in binary; text form)."""
        if self.binary:
            start = self.pos
            tok = self.read_token()
            if tok in ("FM", "DM"):
                rows = self.read_int32()
                cols = self.read_int32()
                if rows < 0 or cols < 0:
                    raise self.error("negative matrix size %dx%d" % (rows, cols), start)
                mat = self._read_array(rows * cols, "<f4" if tok == "FM" else "<f8", dtype,
                                       "matrix data")
                return mat.reshape(rows, cols)
            if tok in ("CM", "CM2", "CM3"):
                return read_compressed_matrix(self, tok, start).astype(dtype, copy=False)
            raise self.error("expected a matrix (FM, DM, CM, CM2 or CM3), got '%s'" % tok, start)
        text, at = self._text_bracketed("a matrix")
        rows = [line.split() for line in text.split(b"\n")]
        rows = [r for r in rows if r]
        if not rows:
            return np.zeros((0, 0), dtype=dtype)
        cols = len(rows[0])
        for i, r in enumerate(rows):
            if len(r) != cols:
                raise self.error("matrix row %d has %d numbers, row 0 has %d"
                                 % (i, len(r), cols), at)
        flat = self._parse_floats(b" ".join(b" ".join(r) for r in rows), at, dtype, "matrix")
        return flat.reshape(len(rows), cols)

    def read_double_matrix(self):
        return self.read_matrix(np.float64)

    def read_int_vector(self):
        """Kaldi's ReadIntegerVector for int32 elements, as a list of ints."""
        if self.binary:
            start = self.pos
            size_byte = self._read_raw(1, "integer vector")[0]
            if size_byte != 4:
                raise self.error("expected int32 vector (size byte 4), got %d" % size_byte, start)
            n = _INT32.unpack(self._read_raw(4, "vector size"))[0]
            if n < 0:
                raise self.error("negative vector size %d" % n, start)
            return np.frombuffer(self._read_raw(4 * n, "integer vector"), "<i4").tolist()
        text, at = self._text_bracketed("an integer vector")
        try:
            return [int(w) for w in text.split()]
        except ValueError:
            raise self.error("expected integers in integer vector", at) from None

    def read_int_pair_vector(self):
        """Kaldi's ReadIntegerPairVector for int32 pairs, as a list of (a, b) ints.

        Binary: size byte 4, an int32 count, then 2*count int32. Text:
        ``[ a,b c,d ]``, accepted exactly where C++'s ``>>`` would accept it
        (no space before a comma; every number within int32). The position
        ends just after the ']'.
        """
        start = self.pos
        if self.binary:
            size_byte = self._read_raw(1, "integer pair vector")[0]
            if size_byte != 4:
                raise self.error("expected int32 pair vector (size byte 4), got %d"
                                 % size_byte, start)
            n = _INT32.unpack(self._read_raw(4, "vector size"))[0]
            if n < 0:
                raise self.error("negative vector size %d" % n, start)
            flat = np.frombuffer(self._read_raw(8 * n, "integer pair vector"), "<i4").tolist()
            return list(zip(flat[0::2], flat[1::2]))
        self.skip_whitespace()
        start = self.pos
        data = self.data
        if data[start:start + 1] != b"[":
            raise self.error("expected '[' to start an integer pair vector, got %s"
                             % self._describe_next())
        end = data.find(b"]", start + 1)
        if end < 0:
            raise self.error("no closing ']' for an integer pair vector", start)
        body = data[start + 1:end]
        pairs = []
        at = _SKIP_WS_RE.match(body).end()
        while at < len(body):
            m = _INT_PAIR_RE.match(body, at)
            pair = (int(m.group(1)), int(m.group(2))) if m else None
            if pair is None or not all(-2**31 <= v < 2**31 for v in pair):
                word = body[at:].split()[0].decode("latin-1")[:40]
                raise self.error("expected 'int,int' (two int32) in integer pair vector, "
                                 "got '%s'" % word, start + 1 + at)
            pairs.append(pair)
            at = _SKIP_WS_RE.match(body, m.end()).end()
        self.pos = end + 1
        return pairs


def _is_float(word):
    try:
        float(word)
        return True
    except ValueError:
        return False


def _raw_view(array, dtype):
    """The bytes of ``array`` as ``dtype``, without copying when it already
    is a C-contiguous array of that type."""
    arr = np.ascontiguousarray(array, dtype)
    if arr.size == 0:
        return b""
    return memoryview(arr.reshape(-1)).cast("B")


class _Deferred:
    """Pieces of an :class:`OutputStream` made only when it is written."""

    __slots__ = ("pieces",)

    def __init__(self, pieces):
        self.pieces = pieces


class OutputStream:
    """Accumulates Kaldi primitives in binary or text mode; ``getvalue()``
    returns the bytes (without the ``\\0B`` header unless ``write_header``).

    In binary mode vectors and matrices are kept by reference (no copy)
    until ``getvalue()``/``chunks()`` are used: do not modify them in between.
    """

    __slots__ = ("binary", "_parts", "_deferred")

    def __init__(self, binary):
        self.binary = binary
        self._parts = []
        self._deferred = False      # some parts are made only when written

    def getvalue(self):
        return b"".join(self.chunks())

    def chunks(self):
        """The output as bytes-like pieces (what :meth:`getvalue` joins), for
        writing to a file without one more copy: a list, or, once a
        :class:`~pynnet3.io.matrix_rows.MatrixRows` was written, an iterator
        that makes its rows' bytes as they are written (once)."""
        if not self._deferred:
            return self._parts
        return self._expanded()

    def _expanded(self):
        for part in self._parts:
            if isinstance(part, _Deferred):
                yield from part.pieces
            else:
                yield part

    def write_raw(self, data):
        self._parts.append(data)

    def write_header(self):
        if self.binary:
            self._parts.append(b"\0B")

    def write_token(self, token):
        self._parts.append(token.encode("ascii") + b" ")

    def write_int32(self, value):
        if self.binary:
            self._parts.append(b"\x04" + _INT32.pack(value))
        else:
            self._parts.append(b"%d " % value)

    def write_int64(self, value):
        if self.binary:
            self._parts.append(b"\x08" + _INT64.pack(value))
        else:
            self._parts.append(b"%d " % value)

    def write_uint32(self, value):
        if self.binary:
            self._parts.append(b"\xfc" + _UINT32.pack(value))
        else:
            self._parts.append(b"%d " % value)

    def write_float(self, value):
        if self.binary:
            self._parts.append(b"\x04" + _FLOAT.pack(value))
        else:
            self._parts.append(format_float(value).encode() + b" ")

    def write_double(self, value):
        if self.binary:
            self._parts.append(b"\x08" + _DOUBLE.pack(value))
        else:
            self._parts.append(format_double(value).encode() + b" ")

    def write_bool(self, value):
        if self.binary:
            self._parts.append(b"T" if value else b"F")
        else:
            self._parts.append(b"T " if value else b"F ")

    def write_vector(self, vec, double=False):
        vec = np.asarray(vec)
        if self.binary:
            self._parts.append(b"DV " if double else b"FV ")
            self.write_int32(vec.shape[0])
            self._parts.append(_raw_view(vec, "<f8" if double else "<f4"))
        else:
            vec = vec.astype(np.float64 if double else np.float32)
            if vec.shape[0] == 0:
                self._parts.append(b" [ ]\n")
            else:
                self._parts.append(b" [ " + _format_array(vec).encode() + b" ]\n")

    def write_double_vector(self, vec):
        self.write_vector(vec, double=True)

    def write_matrix(self, mat, double=False):
        """Kaldi's Matrix::Write. A float
        :class:`~pynnet3.io.matrix_rows.MatrixRows` is written as its blocks
        come: the bytes of its rows are made when the stream is written."""
        if isinstance(mat, MatrixRows) and double:
            mat = mat.stack()
        if isinstance(mat, MatrixRows):
            self._deferred = True
            rows = mat
        else:
            mat = np.asarray(mat)
            rows = None

        def body(to_bytes):
            # the bytes of all rows: made now, or block by block when written
            if rows is None:
                return to_bytes(mat)
            return _Deferred(map(to_bytes, rows.checked_blocks()))

        if self.binary:
            self._parts.append(b"DM " if double else b"FM ")
            self.write_int32(mat.shape[0])
            self.write_int32(mat.shape[1])
            self._parts.append(body(lambda block: _raw_view(block, "<f8" if double else "<f4")))
        elif mat.shape[1] == 0:
            self._parts.append(body(lambda block: b""))   # (blocks still checked)
            self._parts.append(b" [ ]\n")
        else:
            dtype = np.float64 if double else np.float32
            self._parts.append(b" [")
            self._parts.append(body(lambda block: b"".join(
                [b"\n  " + _format_array(row).encode() + b" " for row in block.astype(dtype)])))
            self._parts.append(b"]\n")

    def write_double_matrix(self, mat):
        self.write_matrix(mat, double=True)

    def write_int_vector(self, values):
        values = [int(v) for v in values]
        if self.binary:
            self._parts.append(b"\x04" + _INT32.pack(len(values)))
            self._parts.append(np.asarray(values, dtype="<i4").tobytes())
        else:
            self._parts.append(b"[ " + b"".join(b"%d " % v for v in values) + b"]\n")

    def write_int_pair_vector(self, pairs):
        """Kaldi's WriteIntegerPairVector for int32 pairs: ``pairs`` is a
        sequence of (a, b) or an (n, 2) array."""
        flat = np.asarray(pairs, dtype="<i4").reshape(-1)
        if self.binary:
            self._parts.append(b"\x04" + _INT32.pack(flat.shape[0] // 2))
            self._parts.append(flat.tobytes())
        else:
            values = flat.tolist()
            self._parts.append(b"[ " + b"".join(b"%d,%d " % (values[i], values[i + 1])
                                                for i in range(0, len(values), 2)) + b"]\n")
