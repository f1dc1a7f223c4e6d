"""Kaldi's serialization of Index and Cindex vectors (nnet-common.cc).

Both start with the token ``<I1V>`` and an int32 size. In text mode every
Index is written in full (``<I1> n t x``); a Cindex vector additionally groups
runs of the same node as ``[node :<I1> ... <I1> ...]``. In binary mode Kaldi
uses a compressed, delta-coded byte form:

Index vector, element i (one signed byte ``c``, else the escape 127):
  - i == 0: ``c = t`` when n == 0, x == 0 and -125 < t < 125;
  - i > 0:  ``c = t - t_prev`` when n, x equal the previous ones and
    -125 < t - t_prev < 125;
  - otherwise byte 127 then n, t, x as int32 basic types.

Cindex vector, element i: a ``'|'`` byte and the node as an int32 whenever
the node differs from the previous element's (always for i == 0), then:
  - i == 0: ``c = t`` (n == x == 0, -125 < t < 125), or ``c = 125 + n`` when
    t == x == 0 and n is 0 or 1, else 127 and n, t, x;
  - i > 0:  ``c = t - t_prev`` (same n, x, |delta| < 124: byte 124 is '|'),
    or ``c = 125 + (n - n_prev)`` when t, x equal and n - n_prev is 0 or 1,
    else 127 and n, t, x.

Guarantees: writing reproduces Kaldi's bytes exactly; reading accepts
everything Kaldi writes and raises KaldiFormatError (with the byte offset)
on anything else.
"""

import struct

from .index import Index

_INT32 = struct.Struct("<i")
_ESCAPE = 127
_BAR = 124  # '|'


def _signed(byte):
    return byte - 256 if byte > 127 else byte


# -- Index vectors ----------------------------------------------------------------

def write_index_vector(stream, indexes):
    """Kaldi's WriteIndexVector: ``indexes`` is a sequence of (n, t, x)."""
    stream.write_token("<I1V>")
    stream.write_int32(len(indexes))
    if not stream.binary:
        for n, t, x in indexes:
            stream.write_token("<I1>")
            stream.write_int32(n)
            stream.write_int32(t)
            stream.write_int32(x)
        return
    out = bytearray()
    prev = None
    for n, t, x in indexes:
        if prev is None:
            small = n == 0 and x == 0 and -125 < t < 125
            delta = t
        else:
            pn, pt, px = prev
            delta = t - pt
            small = n == pn and x == px and -125 < delta < 125
        if small:
            out.append(delta & 0xFF)
        else:
            out.append(_ESCAPE)
            out += b"\x04" + _INT32.pack(n) + b"\x04" + _INT32.pack(t) + b"\x04" + _INT32.pack(x)
        prev = (n, t, x)
    stream.write_raw(bytes(out))


def _read_size(stream):
    start = stream.pos
    size = stream.read_int32()
    if size < 0:
        raise stream.error("error reading Index vector: size = %d" % size, start)
    return size


def _read_index_text(stream):
    stream.expect_token("<I1>")
    return Index(stream.read_int32(), stream.read_int32(), stream.read_int32())


def _read_full_index_binary(stream):
    n = stream.read_int32()
    t = stream.read_int32()
    x = stream.read_int32()
    return Index(n, t, x)


def read_index_vector(stream):
    """Kaldi's ReadIndexVector; returns a list of Index."""
    stream.expect_token("<I1V>")
    size = _read_size(stream)
    if not stream.binary:
        return [_read_index_text(stream) for _ in range(size)]
    data = stream.data
    out = []
    prev = None
    for i in range(size):
        if stream.pos >= len(data):
            raise stream.error("end of file while reading vector of Index "
                               "(element %d of %d)" % (i, size))
        c = _signed(data[stream.pos])
        at = stream.pos
        stream.pos += 1
        if abs(c) < 125:
            if prev is None:
                index = Index(0, c, 0)
            else:
                index = Index(prev.n, prev.t + c, prev.x)
        elif c == _ESCAPE:
            index = _read_full_index_binary(stream)
        else:
            raise stream.error("unexpected character %d while reading Index vector" % c, at)
        out.append(index)
        prev = index
    return out


# -- Cindex vectors ---------------------------------------------------------------

def write_cindex_vector(stream, cindexes):
    """Kaldi's WriteCindexVector: ``cindexes`` is a sequence of (node, (n, t, x))."""
    stream.write_token("<I1V>")
    size = len(cindexes)
    stream.write_int32(size)
    if not stream.binary:
        prev_node = None
        parts = []
        for i, (node, (n, t, x)) in enumerate(cindexes):
            if i == 0 or node != prev_node:
                if i > 0:
                    parts.append(b"]")
                parts.append(b"[%d :" % node)
            parts.append(b"<I1> %d %d %d " % (n, t, x))
            if i == size - 1:
                parts.append(b"]")
            prev_node = node
        stream.write_raw(b"".join(parts))
        return
    out = bytearray()
    prev_node = None
    prev = None
    for i, (node, (n, t, x)) in enumerate(cindexes):
        if i == 0 or node != prev_node:
            out.append(_BAR)
            out += b"\x04" + _INT32.pack(node)
        if i == 0:
            if n == 0 and x == 0 and -125 < t < 125:
                out.append(t & 0xFF)
            elif t == 0 and x == 0 and n in (0, 1):
                out.append(125 + n)
            else:
                out.append(_ESCAPE)
                out += (b"\x04" + _INT32.pack(n) + b"\x04" + _INT32.pack(t)
                        + b"\x04" + _INT32.pack(x))
        else:
            pn, pt, px = prev
            delta = t - pt
            if n == pn and x == px and -124 < delta < 124:
                out.append(delta & 0xFF)
            elif t == pt and x == px and (n == pn or n == pn + 1):
                out.append(125 + n - pn)
            else:
                out.append(_ESCAPE)
                out += (b"\x04" + _INT32.pack(n) + b"\x04" + _INT32.pack(t)
                        + b"\x04" + _INT32.pack(x))
        prev_node = node
        prev = (n, t, x)
    stream.write_raw(bytes(out))


def _skip_ws(stream):
    stream.skip_whitespace()


def _expect_char(stream, char, what):
    _skip_ws(stream)
    data = stream.data
    if stream.pos >= len(data) or data[stream.pos] != ord(char):
        got = "end of file" if stream.pos >= len(data) else repr(chr(data[stream.pos]))
        raise stream.error("reading Cindex vector: expected '%s' %s, got %s"
                           % (char, what, got))
    stream.pos += 1


def _read_text_node(stream):
    """The node number after '[' in text form (digits possibly followed by ':')."""
    _skip_ws(stream)
    data = stream.data
    start = stream.pos
    end = start
    while end < len(data) and (data[end:end + 1].isdigit() or (end == start and data[end] == 45)):
        end += 1
    if end == start or (end == start + 1 and data[start] == 45):
        raise stream.error("reading Cindex vector: expected a node index after '['", start)
    stream.pos = end
    return int(data[start:end])


def read_cindex_vector(stream):
    """Kaldi's ReadCindexVector; returns a list of (node, Index) tuples."""
    stream.expect_token("<I1V>")
    size = _read_size(stream)
    data = stream.data
    out = []
    if not stream.binary:
        node = None
        for i in range(size):
            _skip_ws(stream)
            if i == 0 or (stream.pos < len(data) and data[stream.pos] == ord("]")):
                if i != 0:
                    stream.pos += 1
                _expect_char(stream, "[", "at the start of a node's run")
                node = _read_text_node(stream)
                _expect_char(stream, ":", "after the node index")
            out.append((node, _read_index_text(stream)))
            if i == size - 1:
                _expect_char(stream, "]", "at the end of the vector")
        return out
    node = None
    prev = None
    for i in range(size):
        if stream.pos >= len(data):
            raise stream.error("end of file while reading vector of Cindex "
                               "(element %d of %d)" % (i, size))
        if data[stream.pos] == _BAR:
            stream.pos += 1
            node = stream.read_int32()
        elif i == 0:
            raise stream.error("reading Cindex vector: expected '|' before the first node")
        if stream.pos >= len(data):
            raise stream.error("end of file while reading vector of Cindex")
        at = stream.pos
        c = _signed(data[stream.pos])
        stream.pos += 1
        if i == 0:
            if abs(c) < 125:
                index = Index(0, c, 0)
            elif c in (125, 126):
                index = Index(c - 125, 0, 0)
            elif c == _ESCAPE:
                index = _read_full_index_binary(stream)
            else:
                raise stream.error("unexpected character %d while reading Cindex vector" % c, at)
        else:
            if abs(c) < 124:
                index = Index(prev.n, prev.t + c, prev.x)
            elif c in (125, 126):
                index = Index(prev.n + c - 125, prev.t, prev.x)
            elif c == _ESCAPE:
                index = _read_full_index_binary(stream)
            else:
                raise stream.error("unexpected character %d while reading Cindex vector" % c, at)
        out.append((node, index))
        prev = index
    return out


# -- human-readable forms (Kaldi's PrintIndexes / PrintCindex) ---------------------

def print_indexes(indexes, max_length=200):
    """Kaldi's PrintIndexes: runs of consecutive t (same n, x) as ``(n,t1:t2)``,
    x shown only when nonzero; strings over 200 characters keep their first and
    last 100 with `` ... `` between."""
    if not indexes:
        return "[ ]"
    parts = []
    size = len(indexes)
    start = 0
    for i in range(1, size + 1):
        if i < size:
            a, b = indexes[i - 1], indexes[i]
            if b[1] == a[1] + 1 and b[0] == a[0] and b[2] == a[2]:
                continue
        first = indexes[start]
        if i == start + 1:
            text = "(%d,%d" % (first[0], first[1])
        else:
            text = "(%d,%d:%d" % (first[0], first[1], indexes[i - 1][1])
        if first[2] != 0:
            text += ",%d" % first[2]
        parts.append(text + ")")
        start = i
    text = "[" + ", ".join(parts) + "]"
    if len(text) <= max_length:
        return text
    half = max_length // 2
    return text[:half] + " ... " + text[len(text) - half:]


def print_cindex(cindex, node_names):
    """Kaldi's PrintCindex: ``name(n,t)`` or ``name(n,t,x)`` when x != 0."""
    node, (n, t, x) = cindex
    if x != 0:
        return "%s(%d,%d,%d)" % (node_names[node], n, t, x)
    return "%s(%d,%d)" % (node_names[node], n, t)
