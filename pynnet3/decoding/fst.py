"""Decoding graphs: OpenFst's binary ``const`` and ``vector`` formats for the
standard (tropical, float weight) arc, read into flat NumPy arrays.

Why our own reader and not kaldifst (PyPI): the decoder needs the graph as
flat arrays (one CSR copy, arcs in the file's order) that a Cython loop can
walk; kaldifst would add a compiled dependency outside the design card's
packages only to be copied out of again, arc by arc, through Python. The two
binary layouts Kaldi writes (HCLG.fst as ``const``, G.fst/L.fst as
``vector``) are small, fixed formats, read here with ``numpy.frombuffer`` in
one pass (an HCLG of 340,000 arcs loads in milliseconds).

The layouts (OpenFst's FstHeader, ConstFst and VectorFst writers):

- header: int32 magic 2125659606; string fst type ("const"/"vector");
  string arc type ("standard"); int32 version; int32 flags (1: input symbol
  table follows, 2: output symbol table follows, 4: data aligned to 16 bytes);
  uint64 properties; int64 start state; int64 number of states; int64 number
  of arcs (the vector writer may leave it 0) (strings: int32 length then bytes);
- symbol tables, when flagged (skipped: the decoder works on integer labels);
- ``const``: one 20-byte record per state (float final weight, uint32 first
  arc, uint32 arcs, uint32 input epsilons, uint32 output epsilons), then one
  16-byte record per arc (int32 ilabel, int32 olabel, float weight, int32
  next state);
- ``vector``: per state a float final weight, an int64 arc count and that
  many 16-byte arc records.

Guarantees: arcs keep the file's order within each state (the order Kaldi's
ArcIterator visits them, which fixes the decoder's tie-breaking); a final
weight of +infinity means "not final"; a truncated or foreign file raises
:class:`KaldiFormatError` naming the file and byte offset.
"""

import struct

import numpy as np

from ..errors import KaldiFormatError
from ..io.files import read_bytes

__all__ = ["StdFst", "read_fst", "parse_fst", "fst_to_bytes", "FST_MAGIC"]

FST_MAGIC = 2125659606
_SYMBOL_TABLE_MAGIC = 2125658996
_HAS_ISYMBOLS, _HAS_OSYMBOLS, _IS_ALIGNED = 1, 2, 4
_ARC_DTYPE = np.dtype([("ilabel", "<i4"), ("olabel", "<i4"), ("weight", "<f4"),
                       ("nextstate", "<i4")])
_CONST_STATE_DTYPE = np.dtype([("final", "<f4"), ("pos", "<u4"), ("narcs", "<u4"),
                               ("niepsilons", "<u4"), ("noepsilons", "<u4")])


class StdFst:
    """A weighted FST over the tropical semiring as flat arrays.

    ``arc_begin`` (num_states + 1, int64): state s owns arcs
    ``arc_begin[s]:arc_begin[s+1]``; ``ilabel``, ``olabel``, ``nextstate``
    (int32) and ``weight`` (float32) per arc; ``final`` (float32, +inf: not
    final); ``start`` (-1 for an empty FST); ``fst_type`` as in the file."""

    __slots__ = ("start", "final", "arc_begin", "ilabel", "olabel", "weight", "nextstate",
                 "fst_type", "source", "_num_input_epsilons")

    def __init__(self, start, final, arc_begin, ilabel, olabel, weight, nextstate,
                 fst_type="vector", source="<memory>"):
        self.start = int(start)
        self.final = np.ascontiguousarray(final, dtype=np.float32)
        self.arc_begin = np.ascontiguousarray(arc_begin, dtype=np.int64)
        self.ilabel = np.ascontiguousarray(ilabel, dtype=np.int32)
        self.olabel = np.ascontiguousarray(olabel, dtype=np.int32)
        self.weight = np.ascontiguousarray(weight, dtype=np.float32)
        self.nextstate = np.ascontiguousarray(nextstate, dtype=np.int32)
        self.fst_type = fst_type
        self.source = source
        self._num_input_epsilons = None

    @property
    def num_states(self):
        return self.final.shape[0]

    @property
    def num_arcs(self):
        return self.ilabel.shape[0]

    def arcs(self, state):
        """(ilabel, olabel, weight, nextstate) tuples of ``state``, in order."""
        b, e = self.arc_begin[state], self.arc_begin[state + 1]
        return list(zip(self.ilabel[b:e].tolist(), self.olabel[b:e].tolist(),
                        self.weight[b:e].tolist(), self.nextstate[b:e].tolist()))

    def num_input_epsilons(self):
        """Per state, the number of arcs with input label 0."""
        if self._num_input_epsilons is None:
            counts = np.zeros(self.num_states + 1, dtype=np.int64)
            owner = np.repeat(np.arange(self.num_states), np.diff(self.arc_begin))
            np.add.at(counts, owner[self.ilabel == 0], 1)
            self._num_input_epsilons = counts[:-1].astype(np.int32)
        return self._num_input_epsilons

    def max_ilabel(self):
        return int(self.ilabel.max()) if self.num_arcs else 0

    @classmethod
    def read(cls, rxfilename):
        return read_fst(rxfilename)


class _Reader:
    def __init__(self, data, source):
        self.data, self.source, self.pos = data, source, 0

    def fail(self, message):
        raise KaldiFormatError(message, self.source, self.pos)

    def take(self, fmt):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            self.fail("file ends inside the FST (expected %d more bytes)" % size)
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values

    def string(self):
        (n,) = self.take("<i")
        if n < 0 or self.pos + n > len(self.data):
            self.fail("bad string length %d in FST header" % n)
        text = bytes(self.data[self.pos:self.pos + n]).decode("latin-1")
        self.pos += n
        return text

    def array(self, dtype, count, what):
        size = dtype.itemsize * count
        if count < 0 or self.pos + size > len(self.data):
            self.fail("file ends inside the FST's %s (%d records expected)" % (what, count))
        values = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
        self.pos += size
        return values

    def align(self):
        self.pos = (self.pos + 15) // 16 * 16

    def skip_symbol_table(self):
        (magic,) = self.take("<i")
        if magic != _SYMBOL_TABLE_MAGIC:
            self.fail("bad symbol-table magic number %d" % magic)
        self.string()
        _, size = self.take("<qq")
        for _ in range(size):
            self.string()
            self.take("<q")


def read_fst(rxfilename):
    """Reads an OpenFst binary FST (types ``const`` and ``vector``, arc type
    ``standard``) from a file name, ``-`` or a pipe (``cmd |``)."""
    data, offset = read_bytes(rxfilename)
    return parse_fst(bytes(data[offset:]) if offset else data, rxfilename)


def parse_fst(data, source="<memory>"):
    r = _Reader(memoryview(data), source)
    (magic,) = r.take("<i")
    if magic != FST_MAGIC:
        r.pos = 0
        r.fail("not an OpenFst binary FST (bad magic number %d; text FSTs must first go "
               "through fstcompile)" % magic)
    fst_type = r.string()
    arc_type = r.string()
    if arc_type != "standard":
        r.fail("FST arc type is '%s'; the decoder needs 'standard' (tropical, float)" % arc_type)
    version, flags = r.take("<ii")
    _properties, start, num_states, num_arcs = r.take("<Qqqq")
    if flags & _HAS_ISYMBOLS:
        r.skip_symbol_table()
    if flags & _HAS_OSYMBOLS:
        r.skip_symbol_table()
    if fst_type == "const":
        if version not in (1, 2):
            r.fail("unsupported const FST version %d" % version)
        if flags & _IS_ALIGNED:
            r.align()
        states = r.array(_CONST_STATE_DTYPE, num_states, "states")
        if flags & _IS_ALIGNED:
            r.align()
        arcs = r.array(_ARC_DTYPE, num_arcs, "arcs")
        narcs = states["narcs"].astype(np.int64)
        arc_begin = np.zeros(num_states + 1, dtype=np.int64)
        np.cumsum(narcs, out=arc_begin[1:])
        if num_states and not np.array_equal(states["pos"].astype(np.int64), arc_begin[:-1]):
            r.fail("const FST's arc positions are not consecutive")
        final = states["final"]
    elif fst_type == "vector":
        if version != 2:
            r.fail("unsupported vector FST version %d" % version)
        final = np.empty(num_states, dtype=np.float32)
        arc_begin = np.zeros(num_states + 1, dtype=np.int64)
        pieces = []
        total = 0
        for s in range(num_states):
            f, n = r.take("<fq")
            final[s] = f
            pieces.append(r.array(_ARC_DTYPE, n, "arcs of state %d" % s))
            total += n
            arc_begin[s + 1] = total
        arcs = np.concatenate(pieces) if pieces else np.zeros(0, dtype=_ARC_DTYPE)
    else:
        r.fail("FST type '%s' is not supported (expected 'const' or 'vector')" % fst_type)
    fst = StdFst(start, final, arc_begin, arcs["ilabel"], arcs["olabel"], arcs["weight"],
                 arcs["nextstate"], fst_type, source)
    if fst.num_arcs and (fst.nextstate.min() < 0 or fst.nextstate.max() >= num_states):
        raise KaldiFormatError("arc to a state outside 0..%d" % (num_states - 1), source)
    if num_states and not 0 <= start < num_states:
        raise KaldiFormatError("start state %d outside 0..%d" % (start, num_states - 1),
                               source)
    return fst


def fst_to_bytes(fst):
    """A StdFst in OpenFst's binary ``vector`` format (as fstconvert writes
    it; symbol tables none, properties left unknown)."""
    header = (struct.pack("<i", FST_MAGIC) + struct.pack("<i", 6) + b"vector"
              + struct.pack("<i", 8) + b"standard"
              + struct.pack("<iiQqqq", 2, 0, 3, fst.start, fst.num_states, fst.num_arcs))
    parts = [header]
    arcs = np.empty(fst.num_arcs, dtype=_ARC_DTYPE)
    arcs["ilabel"], arcs["olabel"] = fst.ilabel, fst.olabel
    arcs["weight"], arcs["nextstate"] = fst.weight, fst.nextstate
    for s in range(fst.num_states):
        b, e = int(fst.arc_begin[s]), int(fst.arc_begin[s + 1])
        parts.append(struct.pack("<fq", float(fst.final[s]), e - b))
        parts.append(arcs[b:e].tobytes())
    return b"".join(parts)
