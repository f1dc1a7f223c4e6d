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

Object *kinds* are Kaldi's holders (:mod:`.holders`: ``matrix``, ``vector``,
``int32``, ``token``, ... and kinds other packages register, e.g.
``compact_lattice``).

Guarantees:
- :class:`TableWriter` writes exactly the bytes Kaldi's TableWriter writes for
  the same keys and values (binary and text), including ``ark,scp`` offsets.
- Readers accept everything Kaldi's readers accept for these kinds; a bad
  rspecifier, archive or script raises :class:`PynnetError` /
  :class:`KaldiFormatError` naming the file, the key and the byte offset.
"""

from dataclasses import dataclass
import logging
import re

from ..errors import KaldiFormatError, PynnetError
from .files import (OFFSET_RE, ClosesOrAborts, OutputSink, classify_rxfilename,
                    read_buffer)
from .holders import TOKEN_RE, holder_for, infer_kind, is_token, printable_key
from .mapped import MappedFile
from .stream import InputStream

_log = logging.getLogger(__name__)
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
    kind = classify_rxfilename(rxfilename)
    if kind == "file":
        return rxfilename, 0
    if kind == "offset":
        path, offset = OFFSET_RE.match(rxfilename).groups()
        return path, int(offset)
    return None, 0


def _archive_entries(stream, holder, archive):
    """Yields (key, value, offset) from an archive stream until its end."""
    data = stream.data
    n = len(data)
    mapped = isinstance(data, MappedFile)
    while True:
        if mapped:
            # entries before this one are read: a long archive costs no memory
            data.release_behind(stream.pos)
        m = TOKEN_RE.match(data, stream.pos)
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


class _Reader:
    """A reader is a context manager that closes it."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _SourceReader(_Reader):
    """What the sequential and random-access readers share: the rspecifier,
    checked, with the holder of ``kind``; closing the archive or script they
    read."""

    def __init__(self, rspecifier, kind):
        self.rspecifier = rspecifier
        self.holder = holder_for(kind)
        self.kind, self.rxfilename, self.opts = classify_rspecifier(rspecifier)
        if self.kind is None:
            raise PynnetError("invalid rspecifier '%s' (expected e.g. ark:file.ark or "
                              "scp:file.scp)" % rspecifier)
        self._data = None       # an archive's bytes
        self._loader = None     # a script's object loader

    def close(self):
        if self._loader is not None:
            self._loader.close()
        data, self._data = self._data, None
        if data is not None and hasattr(data, "close"):
            data.close()


class SequentialTableReader(_SourceReader):
    """Iterates ``(key, value)`` over a table, like Kaldi's
    SequentialTableReader. Use as an iterator (and optionally a context
    manager); :meth:`close` releases the files."""

    def __init__(self, rspecifier, kind="matrix"):
        super().__init__(rspecifier, kind)
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


def read_table(rspecifier, kind="matrix"):
    """Iterates ``(key, value)`` over the table an rspecifier names."""
    return iter(SequentialTableReader(rspecifier, kind))


class RandomAccessTableReader(_SourceReader):
    """Looks objects up by key, like Kaldi's RandomAccessTableReader.

    An archive is read forward only as far as needed and what was read is
    kept (under the ``o`` option a value is dropped once returned); a script
    file is indexed when opened and each object loaded when asked for.
    """

    def __init__(self, rspecifier, kind="matrix"):
        super().__init__(rspecifier, kind)
        self._values = {}
        self._failed = set()
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
        super().close()


class RandomAccessTableReaderMapped(_Reader):
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


# -- writing -------------------------------------------------------------------

class TableWriter(ClosesOrAborts):
    """Writes ``(key, value)`` pairs to the table a wspecifier names, byte for
    byte as Kaldi's TableWriter. ``kind`` fixes the holder; None infers it
    from each value (:func:`infer_kind`). Use as a context manager or call
    :meth:`close`: an archive file appears under its name only when closed
    without error."""

    def __init__(self, wspecifier, kind=None):
        self.wspecifier = wspecifier
        self.holder = None if kind is None else holder_for(kind)
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
        holder = holder_for(kind) if kind else self.holder or holder_for(infer_kind(value))
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

    def _sinks(self):
        return [sink for sink in (self._archive, self._script_out) if sink is not None]

    def close(self):
        """Finishes the table: the archive (and script file) appear under
        their names.

        Returns:
            None.
        """
        for sink in self._sinks():
            sink.close()

    def abort(self):
        """Discards what was written (files are not created).

        Returns:
            None.
        """
        for sink in self._sinks():
            sink.abort()


class TableWriters(ClosesOrAborts):
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
