"""Kaldi tables and single Kaldi objects from Python: ``pynnet3.read_table``,
``pynnet3.open_table``, ``pynnet3.write_table``, ``pynnet3.TableWriter``,
``pynnet3.read_object`` and ``pynnet3.write_object``.

A table is what Kaldi's tools read and write through an rspecifier or a
wspecifier: an archive (``ark:feats.ark``, ``ark,t:-``), a script file
(``scp:feats.scp``), both at once when writing (``ark,scp:out.ark,out.scp``),
a pipe (``ark:gunzip -c feats.ark.gz |``), with Kaldi's options
(``ark,s,cs:``, ``ark,t:``, ``ark,p:`` ...). Values are NumPy arrays for
matrices and vectors, Python values for the rest.

``kind`` names the type of the objects, as Kaldi's holders do:

- ``None`` (the default when reading): matrices and vectors recognized by
  their own header, as kaldiio and kaldi-io do: float32 matrices (also
  compressed ones) and vectors, float64 for double ones; an empty text object
  (``[ ]``) reads as a 0 x 0 matrix. Other kinds must be named.
- ``"matrix"``, ``"double_matrix"``, ``"vector"``, ``"double_vector"``,
  ``"int32"``, ``"float"``, ``"double"``, ``"bool"``, ``"int32_vector"``
  (alignments), ``"int32_vector_vector"``, ``"int32_pair_vector"``,
  ``"float_pair_vector"``, ``"posterior"``, ``"token"``, ``"token_vector"``
  (word sequences as text), ``"lattice"``, ``"compact_lattice"`` (Kaldi's
  lattices: what nnet3-latgen-faster writes).

When writing, ``kind=None`` infers the kind from each value: a 2-D float32
array is a ``matrix``, 1-D float32 a ``vector``, float64 the ``double_``
kinds, 1-D integers an ``int32_vector``, a lattice object its lattice kind.

The bytes written are the bytes Kaldi writes for the same keys and values;
everything Kaldi's readers accept for a kind is read. Bad input raises
:class:`~pynnet3.PynnetError` naming the file, the key and the byte offset.
"""

from .decoding import lattice_holders  # noqa: F401  (registers the lattice kinds)
from .decoding.lattice import CompactLattice, Lattice
from .errors import PynnetError
from .io import holders as _holders
from .io import table as _table
from .io.files import OutputSink

__all__ = ["read_table", "open_table", "write_table", "TableWriter", "read_object",
           "write_object", "TABLE_KINDS"]

#: Every ``kind`` the table functions accept (besides ``None``).
TABLE_KINDS = tuple(sorted(_holders.HOLDERS))

# Kaldi's binary headers of the matrices and vectors, and the kind each one is.
_BINARY_KINDS = {"FM": "matrix", "CM": "matrix", "CM2": "matrix", "CM3": "matrix",
                 "DM": "double_matrix", "FV": "vector", "DV": "double_vector"}


def _auto_kind(stream):
    """The kind of the matrix or vector at ``stream.pos`` (after Kaldi's
    binary header, if any), from its own header."""
    data, pos = stream.data, stream.pos
    if stream.binary:
        end = pos
        while end < len(data) and end - pos < 4 and data[end] not in b" \t\n":
            end += 1
        token = bytes(data[pos:end]).decode("latin-1")
        kind = _BINARY_KINDS.get(token)
        if kind is None:
            raise stream.error("cannot tell the kind of this object (binary header '%s' is "
                               "not a matrix or vector): pass kind=... (one of %s)"
                               % (token.encode("unicode_escape").decode("ascii"),
                                  ", ".join(TABLE_KINDS)))
        return kind
    while pos < len(data) and data[pos] in b" \t":
        pos += 1
    if data[pos:pos + 1] != b"[":
        raise stream.error("cannot tell the kind of this text object (it does not start with "
                           "'[' as a matrix or vector does): pass kind=... (one of %s)"
                           % ", ".join(TABLE_KINDS))
    pos += 1
    while pos < len(data) and data[pos] in b" \t\r":
        pos += 1
    # Kaldi writes a text matrix as "[\n rows ]", a vector as "[ values ]".
    if data[pos:pos + 1] in (b"\n", b"]"):
        return "matrix"
    return "vector"


class _AutoHolder(_holders.Holder):
    """Reads a matrix or a vector, whichever the object's header says."""

    __slots__ = ()

    def read_object(self, stream):
        _holders._take_header(stream)
        return _holders.HOLDERS[_auto_kind(stream)].read(stream)


def _auto_range(value, range_text, stream_error):
    kind = "matrix" if value.ndim == 2 else "vector"
    return _holders.HOLDERS[kind].extract_range(value, range_text, stream_error)


def _kind(kind):
    """The holder name for ``kind`` (the lattice kinds are registered when
    this module imports pynnet3.decoding.lattice_holders; ``auto``, this
    module's own, on first use)."""
    if kind is None:
        if "auto" not in _holders.HOLDERS:
            _holders.HOLDERS["auto"] = _AutoHolder("matrix-or-vector", None, None,
                                                 extract_range=_auto_range)
        return "auto"
    if kind not in _holders.HOLDERS or kind == "auto":
        raise PynnetError("unknown table kind %r (known: %s, or None for matrices and "
                          "vectors by their header)" % (kind, ", ".join(TABLE_KINDS)))
    return kind


def _value_kind(value):
    """The kind a value is written as when ``kind`` is None."""
    if isinstance(value, CompactLattice):
        return _kind("compact_lattice")
    if isinstance(value, Lattice):
        return _kind("lattice")
    return _holders.infer_kind(value)


class TableWriter(_table.TableWriter):
    """Writes ``(key, value)`` pairs one at a time to the table a wspecifier
    names, byte for byte as Kaldi's TableWriter. Use it as a context manager
    (or call :meth:`close`): an archive file appears under its name only
    when closed without error; if the block raises, nothing is left behind.

    Args:
        wspecifier: Kaldi's wspecifier: ``"ark:out.ark"``, ``"ark,t:-"``,
            ``"ark,scp:out.ark,out.scp"``, ``"ark:| gzip -c > out.ark.gz"``,
            ``"scp:out.scp"`` (each object to the file its line names).
        kind: the objects' type (as for :func:`read_table`: ``"matrix"``,
            ``"int32_vector"``, ``"compact_lattice"``, ...); None infers it
            from each value.

    Raises:
        PynnetError: a bad wspecifier or kind, or a file that cannot be
            written.

    Example::

        import pynnet3

        with pynnet3.TableWriter("ark,t:ali.txt", "int32_vector") as writer:
            writer.write("utt1", [1, 2, 2, 3])
            writer.write("utt2", [4, 4])
        print(open("ali.txt").read())

    Output::

        utt1 1 2 2 3
        utt2 4 4
    """

    def __init__(self, wspecifier, kind=None):
        super().__init__(wspecifier, None if kind is None else _kind(kind))

    def write(self, key, value, kind=None):
        """Writes one object.

        Args:
            key: the key, a non-empty string without whitespace.
            value: the object (a NumPy array for matrices and vectors).
            kind: this object's type, overriding the writer's.

        Returns:
            None.

        Raises:
            PynnetError: a bad key, or a value that is not of the kind.
        """
        if kind is not None:
            kind = _kind(kind)
        elif self.holder is None:
            kind = _value_kind(value)
        super().write(key, value, kind)


def read_table(rspecifier, kind=None):
    """Iterates over a Kaldi table: ``(key, value)`` pairs in table order,
    as Kaldi's SequentialTableReader.

    Args:
        rspecifier: Kaldi's rspecifier, e.g. ``"ark:feats.ark"``,
            ``"scp:feats.scp"``, ``"ark,t:-"`` (standard input),
            ``"ark:gunzip -c feats.ark.gz |"``.
        kind: the objects' type (see :mod:`pynnet3.tables`); None reads
            matrices and vectors by their own header.

    Returns:
        An iterator of ``(key, value)``; matrices and vectors are NumPy
        arrays (float32, float64 for double ones). The files are closed when
        the iterator is exhausted or garbage-collected.

    Raises:
        PynnetError: a bad rspecifier, or an unreadable archive, script file
            or object (the message names the file, key and byte offset).

    Example::

        import pynnet3
        from pynnet3 import examples

        for key, feats in pynnet3.read_table("ark:" + examples.path("feats.ark")):
            print(key, feats.shape, feats.dtype)

    Output::

        utt1 (7, 13) float32
        utt2 (50, 13) float32
        utt3 (173, 13) float32
        utt4 (301, 13) float32
    """
    return iter(_table.SequentialTableReader(rspecifier, _kind(kind)))


def open_table(rspecifier, kind=None, utt2spk=None):
    """Opens a Kaldi table for lookups by key, as Kaldi's
    RandomAccessTableReader (with ``utt2spk``, RandomAccessTableReaderMapped).

    Args:
        rspecifier: as for :func:`read_table`; an archive is read forward only
            as far as a lookup needs, a script file is indexed when opened.
        kind: as for :func:`read_table`.
        utt2spk: an rspecifier of a token table (``"ark:data/utt2spk"``)
            mapping the keys you ask for to the table's keys, for
            per-speaker objects looked up by utterance.

    Returns:
        A reader: ``reader[key]`` (the value; PynnetError if absent),
        ``key in reader``, ``reader.close()``; also a context manager.

    Raises:
        PynnetError: a bad rspecifier or an unreadable table.

    Example::

        import pynnet3
        from pynnet3 import examples

        with pynnet3.open_table("ark:" + examples.path("online-ivectors.ark")) as ivectors:
            print("utt3" in ivectors, ivectors["utt3"].shape)

    Output::

        True (18, 10)
    """
    if utt2spk:
        return _table.RandomAccessTableReaderMapped(rspecifier, utt2spk, _kind(kind))
    return _table.RandomAccessTableReader(rspecifier, _kind(kind))


def write_table(wspecifier, pairs, kind=None):
    """Writes a whole table: every ``(key, value)`` of ``pairs``, in order.

    The output appears only when everything was written: if a value cannot
    be written, no file is left behind (Kaldi's tools behave the same).

    Args:
        wspecifier: Kaldi's wspecifier, e.g. ``"ark:out.ark"`` (binary),
            ``"ark,t:out.txt"`` (text), ``"ark,scp:out.ark,out.scp"``,
            ``"ark:| gzip -c > out.ark.gz"``.
        pairs: a mapping (``dict``: keys and values) or an iterable of
            ``(key, value)`` pairs. Keys are non-empty strings without
            whitespace.
        kind: the objects' type; None infers it from each value.

    Returns:
        The number of objects written.

    Raises:
        PynnetError: a bad wspecifier, key or value.

    Example::

        import numpy as np
        import pynnet3

        pynnet3.write_table("ark,scp:out.ark,out.scp",
                            {"utt1": np.eye(3, dtype=np.float32),
                             "utt2": np.ones((2, 3), np.float32)})
        print(open("out.scp").read())

    Output::

        utt1 out.ark:5
        utt2 out.ark:61
    """
    items = pairs.items() if hasattr(pairs, "items") else pairs
    count = 0
    with TableWriter(wspecifier, kind) as writer:
        for key, value in items:
            writer.write(key, value)
            count += 1
    return count


def read_object(rxfilename, kind=None):
    """Reads one Kaldi object from a file, as Kaldi's ReadKaldiObject: e.g.
    an LDA matrix, a priors vector, or one entry of an archive named by a
    script file's ``archive:offset``, optionally with a range as Kaldi's
    (inclusive: ``[0:9]`` rows 0 to 9, ``[0:9,0:4]`` rows and columns).

    Args:
        rxfilename: a file, ``-`` (standard input), ``command |``, or
            ``file:offset``, optionally followed by a range.
        kind: as for :func:`read_table`.

    Returns:
        The object (NumPy arrays for matrices and vectors).

    Raises:
        PynnetError: the file cannot be read or does not hold such an object.

    Example::

        import pynnet3
        from pynnet3 import examples

        # a copy of the example features with a script file: "key feats.ark:offset" lines
        pynnet3.write_table("ark,scp:feats.ark,feats.scp",
                            pynnet3.read_table("ark:" + examples.path("feats.ark")))
        with open("feats.scp") as scp:
            key, location = scp.readline().split()
        print(key, location, pynnet3.read_object(location).shape)
        print(pynnet3.read_object(location + "[0:1]").shape)   # rows 0 to 1

    Output::

        utt1 feats.ark:5 (7, 13)
        (2, 13)
    """
    loader = _table._ObjectLoader(_holders.HOLDERS[_kind(kind)])
    try:
        return loader.load(str(rxfilename), str(rxfilename))
    finally:
        loader.close()


def write_object(wxfilename, value, binary=True, kind=None):
    """Writes one Kaldi object to a file, as Kaldi's WriteKaldiObject (e.g.
    what ``copy-matrix`` or ``copy-vector`` write). The file appears only
    once it is complete.

    Args:
        wxfilename: a file, ``-`` (standard output) or ``| command``.
        value: the object (a NumPy matrix or vector, ...).
        binary: Kaldi's binary form (True) or its text form.
        kind: the object's type; None infers it from the value.

    Returns:
        None.

    Raises:
        PynnetError: the file cannot be written or the value has no Kaldi form.

    Example::

        import numpy as np
        import pynnet3

        pynnet3.write_object("priors.vec", np.array([0.25, 0.75], np.float32), binary=False)
        print(open("priors.vec").read())
        print(pynnet3.read_object("priors.vec"))

    Output::

         [ 0.25 0.75 ]

        [0.25 0.75]
    """
    holder = _holders.HOLDERS[_kind(kind) if kind is not None else _value_kind(value)]
    body = holder.object_bytes(value, binary)
    sink = OutputSink(str(wxfilename))
    try:
        sink.write(body)
        sink.close()
    except BaseException:
        sink.abort()
        raise
