"""Decoding graphs: OpenFst's binary ``const`` and ``vector`` formats for the
standard (tropical, float weight) arc, read into the record arrays the
decoder's search walks.

Why our own reader and not kaldifst (PyPI): the decoder needs the graph as
flat arrays that a Cython loop can walk without the GIL; kaldifst would add a
compiled dependency only to be copied out of again. The two binary layouts
Kaldi writes (HCLG.fst as ``const``, G.fst/L.fst as ``vector``) are small,
fixed formats.

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

Memory: a graph is held once, as Kaldi's ConstFst holds it: the const
format's own state and arc records (:data:`STATE_DTYPE`, :data:`ARC_DTYPE`),
copied from the memory-mapped file straight into 64-byte aligned arrays, 4 MB
at a time (the mapped pages are released as the copy goes, so the peak is the
graph plus one chunk; from a pipe or standard input the file's bytes are read
whole first, so there the peak is twice the graph). A vector FST is converted to the same
records. The per-arc and per-state fields (``ilabel``, ``final``, ...) are
views of those records, not copies.

Guarantees: arcs keep the file's order within each state (the order Kaldi's
ArcIterator visits them, which fixes the decoder's tie-breaking); a final
weight of +infinity means "not final"; a truncated or foreign file raises
:class:`KaldiFormatError` naming the file and byte offset.
"""

import struct

import numpy as np

from ..errors import KaldiFormatError
from ..io.files import read_buffer
from ..io.mapped import MappedFile

__all__ = ["StdFst", "read_fst", "parse_fst", "fst_to_bytes", "FST_MAGIC", "ARC_DTYPE",
           "STATE_DTYPE"]

FST_MAGIC = 2125659606
_SYMBOL_TABLE_MAGIC = 2125658996
_HAS_ISYMBOLS, _HAS_OSYMBOLS, _IS_ALIGNED = 1, 2, 4
ARC_DTYPE = np.dtype([("ilabel", "<i4"), ("olabel", "<i4"), ("weight", "<f4"),
                      ("nextstate", "<i4")])
STATE_DTYPE = np.dtype([("final", "<f4"), ("pos", "<u4"), ("narcs", "<u4"),
                        ("niepsilons", "<u4"), ("noepsilons", "<u4")])
_ALIGN = 64
_COPY_CHUNK = 1 << 22


def _aligned_records(dtype, count):
    """An uninitialized, C-contiguous record array whose data starts on a
    64-byte boundary (the search reads the records through C pointers)."""
    nbytes = dtype.itemsize * count
    buf = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    skip = (-buf.ctypes.data) % _ALIGN
    return buf[skip:skip + nbytes].view(dtype)


class StdFst:
    """A weighted FST over the tropical semiring as record arrays.

    ``state_records`` (:data:`STATE_DTYPE`, one per state: final weight
    (+inf: not final), first arc, number of arcs, of input epsilons and of
    output epsilons) and ``arc_records`` (:data:`ARC_DTYPE`: ilabel, olabel,
    weight, nextstate), the arcs of each state consecutive and in order;
    ``start`` (-1 for an empty FST); ``fst_type`` as in the file. ``final``,
    ``ilabel``, ``olabel``, ``weight``, ``nextstate`` are views of the
    records; ``arc_begin`` (num_states + 1, int64) is computed on request.

    ``StdFst(start, final, arc_begin, ilabel, olabel, weight, nextstate)``
    builds one from per-field arrays; :meth:`from_records` from the records."""

    __slots__ = ("start", "state_records", "arc_records", "fst_type", "source")

    def __init__(self, start, final, arc_begin, ilabel, olabel, weight, nextstate,
                 fst_type="vector", source="<memory>"):
        final = np.asarray(final, dtype=np.float32)
        arc_begin = np.asarray(arc_begin, dtype=np.int64)
        states = np.zeros(final.shape[0], dtype=STATE_DTYPE)
        arcs = _aligned_records(ARC_DTYPE, int(np.asarray(ilabel).shape[0]))
        arcs["ilabel"], arcs["olabel"] = ilabel, olabel
        arcs["weight"], arcs["nextstate"] = weight, nextstate
        if arc_begin[-1] >= 2**32:
            raise ValueError("an FST with 2^32 or more arcs is not supported")
        states["final"] = final
        states["pos"] = arc_begin[:-1]
        states["narcs"] = np.diff(arc_begin)
        _count_epsilons(states, arcs)
        self._set(start, states, arcs, fst_type, source)

    @classmethod
    def from_records(cls, start, state_records, arc_records, fst_type="const",
                     source="<memory>"):
        """An StdFst over existing record arrays (not copied when they are
        C-contiguous and of the record dtypes)."""
        self = cls.__new__(cls)
        self._set(start, state_records, arc_records, fst_type, source)
        return self

    def _set(self, start, states, arcs, fst_type, source):
        self.start = int(start)
        self.state_records = np.ascontiguousarray(states, dtype=STATE_DTYPE)
        self.arc_records = np.ascontiguousarray(arcs, dtype=ARC_DTYPE)
        self.fst_type = fst_type
        self.source = source

    @property
    def num_states(self):
        return self.state_records.shape[0]

    @property
    def num_arcs(self):
        return self.arc_records.shape[0]

    @property
    def final(self):
        return self.state_records["final"]

    @property
    def ilabel(self):
        return self.arc_records["ilabel"]

    @property
    def olabel(self):
        return self.arc_records["olabel"]

    @property
    def weight(self):
        return self.arc_records["weight"]

    @property
    def nextstate(self):
        return self.arc_records["nextstate"]

    @property
    def arc_begin(self):
        begin = np.zeros(self.num_states + 1, dtype=np.int64)
        begin[:-1] = self.state_records["pos"]
        if self.num_states:
            begin[-1] = int(begin[-2]) + int(self.state_records["narcs"][-1])
        return begin

    def arcs(self, state):
        """(ilabel, olabel, weight, nextstate) tuples of ``state``, in order."""
        b = int(self.state_records["pos"][state])
        e = b + int(self.state_records["narcs"][state])
        return list(zip(self.ilabel[b:e].tolist(), self.olabel[b:e].tolist(),
                        self.weight[b:e].tolist(), self.nextstate[b:e].tolist()))

    def num_input_epsilons(self):
        """Per state, the number of arcs with input label 0."""
        return self.state_records["niepsilons"].astype(np.int32)

    def max_ilabel(self):
        return int(self.ilabel.max()) if self.num_arcs else 0

    @classmethod
    def read(cls, rxfilename):
        return read_fst(rxfilename)


def _count_epsilons(states, arcs):
    """Fills the records' input and output epsilon counts from the arcs."""
    if not arcs.shape[0]:
        states["niepsilons"] = 0
        states["noepsilons"] = 0
        return
    owner = np.repeat(np.arange(states.shape[0], dtype=np.int64),
                      states["narcs"].astype(np.int64))
    states["niepsilons"] = np.bincount(owner, weights=arcs["ilabel"] == 0,
                                       minlength=states.shape[0])
    states["noepsilons"] = np.bincount(owner, weights=arcs["olabel"] == 0,
                                       minlength=states.shape[0])


class _Reader:
    def __init__(self, data, source, pos=0):
        self.data, self.source, self.pos = data, source, pos

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

    def records(self, dtype, count, what):
        """``count`` records copied into an aligned array (in chunks; the
        source pages of a memory-mapped file are released as they are
        copied)."""
        size = dtype.itemsize * count
        if count < 0 or self.pos + size > len(self.data):
            self.fail("file ends inside the FST's %s (%d records expected)" % (what, count))
        out = _aligned_records(dtype, count)
        dest = out.view(np.uint8) if count else np.zeros(0, dtype=np.uint8)
        mapped = isinstance(self.data, MappedFile)
        done = 0
        while done < size:
            n = min(_COPY_CHUNK, size - done)
            dest[done:done + n] = np.frombuffer(self.data, dtype=np.uint8, count=n,
                                                offset=self.pos + done)
            if mapped:
                # the copy is made: a large graph is not held twice
                self.data.release(self.pos + done, self.pos + done + n)
            done += n
        self.pos += size
        return out

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


def _consecutive(states, num_arcs, block=1 << 20):
    """Whether each state's arcs start where the previous state's end and
    the last end at ``num_arcs`` (checked a block of states at a time, so
    that a large graph needs no state-sized temporaries)."""
    expected = 0
    for b in range(0, states.shape[0], block):
        pos = states["pos"][b:b + block].astype(np.int64)
        end = pos + states["narcs"][b:b + block]
        if pos[0] != expected or not np.array_equal(pos[1:], end[:-1]):
            return False
        expected = int(end[-1])
    return expected == num_arcs


def read_fst(rxfilename):
    """Reads an OpenFst binary FST (types ``const`` and ``vector``, arc type
    ``standard``) from a file name (memory-mapped while it is copied), ``-``
    or a pipe (``cmd |``; read whole first)."""
    data, offset = read_buffer(rxfilename)
    return parse_fst(data, rxfilename, offset)


def parse_fst(data, source="<memory>", offset=0):
    """An StdFst from the binary FST at ``offset`` of ``data`` (bytes or a
    memory-mapped file; the records are copied out of it)."""
    r = _Reader(data, source, offset)
    (magic,) = r.take("<i")
    if magic != FST_MAGIC:
        r.pos = offset
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
        states = r.records(STATE_DTYPE, num_states, "states")
        if flags & _IS_ALIGNED:
            r.align()
        arcs = r.records(ARC_DTYPE, num_arcs, "arcs")
        if not _consecutive(states, num_arcs):
            r.fail("const FST's arc positions are not consecutive")
        fst = StdFst.from_records(start, states, arcs, fst_type, source)
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
            pieces.append(r.array(ARC_DTYPE, n, "arcs of state %d" % s))
            total += n
            arc_begin[s + 1] = total
        arcs = np.concatenate(pieces) if pieces else np.zeros(0, dtype=ARC_DTYPE)
        fst = StdFst(start, final, arc_begin, arcs["ilabel"], arcs["olabel"], arcs["weight"],
                     arcs["nextstate"], fst_type, source)
    else:
        r.fail("FST type '%s' is not supported (expected 'const' or 'vector')" % fst_type)
    nextstate = fst.nextstate
    if fst.num_arcs and (nextstate.min() < 0 or nextstate.max() >= num_states):
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
    arcs = fst.arc_records
    begin = fst.arc_begin
    for s in range(fst.num_states):
        b, e = int(begin[s]), int(begin[s + 1])
        parts.append(struct.pack("<fq", float(fst.final[s]), e - b))
        parts.append(arcs[b:e].tobytes())
    return b"".join(parts)
