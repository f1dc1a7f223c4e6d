"""Kaldi's rxfilename / wxfilename forms.

rxfilename (something to read):
  ``-`` or empty   standard input
  ``cmd |``         the standard output of a shell command
  ``path:offset``   a file, starting at a byte offset (what scp files point to)
  ``path``          a file
wxfilename (something to write):
  ``-`` or empty   standard output
  ``| cmd``         the standard input of a shell command
  ``path``          a file, written to a temporary name and renamed into place, so
                    a failure never leaves a half-written file behind.
"""

import mmap
import os
import re
import subprocess
import sys
import tempfile

from ..errors import KaldiFormatError, PynnetError
from .mapped import MappedFile
from .stream import InputStream, OutputStream

OFFSET_RE = re.compile(r"^(.*):([0-9]+)$")


def classify_rxfilename(rxfilename):
    """One of 'stdin', 'pipe', 'offset', 'file'."""
    name = rxfilename.strip() if rxfilename else ""
    if name in ("", "-"):
        return "stdin"
    if name.endswith("|"):
        return "pipe"
    if OFFSET_RE.match(rxfilename) and not os.path.exists(rxfilename):
        return "offset"
    return "file"


def read_bytes(rxfilename):
    """The whole content an rxfilename names, and the offset to start at."""
    kind = classify_rxfilename(rxfilename)
    try:
        if kind == "stdin":
            return sys.stdin.buffer.read(), 0
        if kind == "pipe":
            command = rxfilename.rstrip()[:-1]
            proc = subprocess.run(command, shell=True, stdout=subprocess.PIPE)
            if proc.returncode != 0:
                raise PynnetError("command '%s' exited with status %d while reading %s"
                                  % (command.strip(), proc.returncode, rxfilename))
            return proc.stdout, 0
        if kind == "offset":
            path, offset = OFFSET_RE.match(rxfilename).groups()
            with open(path, "rb") as f:
                data = f.read()
            offset = int(offset)
            if offset > len(data):
                raise KaldiFormatError("offset %d is past the end of the file (%d bytes)"
                                       % (offset, len(data)), path)
            return data, offset
        with open(rxfilename, "rb") as f:
            return f.read(), 0
    except OSError as e:
        raise PynnetError("cannot open %s for reading: %s"
                          % (rxfilename, e.strerror or e)) from None


def open_input(rxfilename):
    """An :class:`InputStream` over an rxfilename, binary mode detected from
    Kaldi's ``\\0B`` header as Kaldi's Input class does. A plain file is
    memory-mapped (:class:`MappedFile`: slices are ``bytes`` and every bytes
    method works on it), anything else is read into ``bytes``."""
    data, offset = read_buffer(rxfilename)
    return InputStream.from_bytes(data, rxfilename or "-", offset)


def write_bytes(wxfilename, data):
    """Writes ``data`` (bytes, or a list of bytes-like chunks written in
    order) to a wxfilename; a file appears complete or not at all."""
    chunks = [data] if isinstance(data, (bytes, bytearray, memoryview)) else data
    name = wxfilename.strip() if wxfilename else ""
    if name in ("", "-"):
        sys.stdout.buffer.writelines(chunks)
        sys.stdout.buffer.flush()
        return
    if name.startswith("|"):
        command = name[1:]
        proc = subprocess.run(command, shell=True, input=b"".join(chunks))
        if proc.returncode != 0:
            raise PynnetError("command '%s' exited with status %d while writing %s"
                              % (command.strip(), proc.returncode, wxfilename))
        return
    if _is_special_file(wxfilename):
        try:
            with open(wxfilename, "wb") as f:
                f.writelines(chunks)
        except OSError as e:
            raise PynnetError("cannot write %s: %s" % (wxfilename, e.strerror or e)) from None
        return
    directory = os.path.dirname(os.path.abspath(wxfilename))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=directory)
    except OSError as e:
        raise PynnetError("cannot open %s for writing: %s"
                          % (wxfilename, e.strerror or e)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            _preallocate(f, chunks)
            f.writelines(chunks)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, wxfilename)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise PynnetError("cannot write %s: %s" % (wxfilename, e.strerror or e)) from None
        raise


def _is_special_file(path):
    """True for an existing file that is not a regular file (/dev/null, a
    device, a FIFO): it is written in place, never replaced by a renamed
    temporary file (which would turn /dev/null into a regular file)."""
    try:
        return os.path.exists(path) and not os.path.isfile(path)
    except (OSError, ValueError):
        return False


def _preallocate(f, chunks):
    """Reserves the file's final size first (as numpy's tofile does): on
    ext4 and similar this makes writing a large model markedly cheaper."""
    total = sum(len(c) if not isinstance(c, memoryview) else c.nbytes for c in chunks)
    if total >= 1 << 20 and hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(f.fileno(), 0, total)
        except OSError:
            pass  # not supported here: just write


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_object(wxfilename, binary, write_fn):
    """Serializes with ``write_fn(stream)`` (after Kaldi's binary header) and
    writes the bytes to ``wxfilename``."""
    stream = OutputStream(binary)
    stream.write_header()
    write_fn(stream)
    write_bytes(wxfilename, stream.chunks())


def read_buffer(rxfilename):
    """Like :func:`read_bytes`, but a plain file (or ``path:offset``) is
    memory-mapped instead of copied, so reading one object out of a large
    archive costs only the pages it touches. Returns ``(buffer, offset)``;
    the buffer supports slicing, ``find`` and regular expressions like bytes.
    """
    kind = classify_rxfilename(rxfilename)
    if kind not in ("file", "offset"):
        return read_bytes(rxfilename)
    if kind == "offset":
        path, offset = OFFSET_RE.match(rxfilename).groups()
        offset = int(offset)
    else:
        path, offset = rxfilename, 0
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0 or not os.path.isfile(path):
                data = f.read()
            else:
                data = MappedFile(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise PynnetError("cannot open %s for reading: %s"
                          % (rxfilename, e.strerror or e)) from None
    if offset > len(data):
        raise KaldiFormatError("offset %d is past the end of the file (%d bytes)"
                               % (offset, len(data)), path)
    return data, offset


class ClosesOrAborts:
    """Makes an object with ``close()`` and ``abort()`` a context manager
    that closes it when the block ends normally and aborts it (no
    half-written output) when the block raises."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False


class OutputSink:
    """A wxfilename opened for writing piece by piece (what a table writer
    needs). A file is written under a temporary name and renamed into place by
    :meth:`close`; :meth:`abort` removes it, so a failed run leaves no partial
    file. ``tell()`` is the number of bytes written so far."""

    __slots__ = ("wxfilename", "_file", "_tmp", "_proc", "_pos", "_closed", "_direct")

    def __init__(self, wxfilename):
        self.wxfilename = wxfilename
        self._tmp = None
        self._proc = None
        self._pos = 0
        self._closed = False
        self._direct = False
        name = wxfilename.strip() if wxfilename else ""
        if name in ("", "-"):
            self._file = sys.stdout.buffer
        elif not name.startswith("|") and _is_special_file(wxfilename):
            try:
                self._file = open(wxfilename, "wb")
            except OSError as e:
                raise PynnetError("cannot open %s for writing: %s"
                                  % (wxfilename, e.strerror or e)) from None
            self._direct = True
        elif name.startswith("|"):
            self._proc = subprocess.Popen(name[1:], shell=True, stdin=subprocess.PIPE)
            self._file = self._proc.stdin
        else:
            directory = os.path.dirname(os.path.abspath(wxfilename))
            try:
                fd, self._tmp = tempfile.mkstemp(prefix=".tmp.", dir=directory)
            except OSError as e:
                raise PynnetError("cannot open %s for writing: %s"
                                  % (wxfilename, e.strerror or e)) from None
            self._file = os.fdopen(fd, "wb")

    def tell(self):
        return self._pos

    def write(self, data):
        try:
            self._file.write(data)
        except OSError as e:
            raise PynnetError("cannot write %s: %s" % (self.wxfilename, e.strerror or e)) from None
        self._pos += len(data)

    def flush(self):
        try:
            self._file.flush()
        except OSError as e:
            raise PynnetError("cannot write %s: %s" % (self.wxfilename, e.strerror or e)) from None

    def close(self):
        """Finishes the output: renames the file into place, or waits for the
        pipe's command and checks its exit status."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._proc is not None:
                self._file.close()
                status = self._proc.wait()
                if status != 0:
                    raise PynnetError("command '%s' exited with status %d while writing %s"
                                      % (self.wxfilename.strip()[1:].strip(), status,
                                         self.wxfilename))
            elif self._tmp is not None:
                self._file.close()
                os.chmod(self._tmp, 0o666 & ~_umask())
                os.replace(self._tmp, self.wxfilename)
                self._tmp = None
            elif self._direct:
                self._file.close()
            else:
                self._file.flush()
        except OSError as e:
            self.abort()
            raise PynnetError("cannot write %s: %s" % (self.wxfilename, e.strerror or e)) from None

    def abort(self):
        """Gives up: a temporary file is removed, a pipe is closed."""
        self._closed = True
        if self._tmp is None and self._proc is None:
            return
        try:
            self._file.close()
        except OSError:
            pass
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except OSError:
                pass
            self._tmp = None
        else:
            self._proc.wait()
