"""The one exception hierarchy of pynnet3.

Every error a user can cause (a bad file, config line, descriptor, request or
command-line argument) is a :class:`PynnetError` whose message names *where*
(file and byte offset, file and line, node, option) and *what was expected*.
Tools catch ``PynnetError`` and print it as a Kaldi-style ``ERROR`` line; any
other exception escaping a tool is a bug in pynnet3.
"""


class PynnetError(Exception):
    """The base class of every error pynnet3 raises on bad input: a bad file
    (KaldiFormatError: names the file and byte offset), config line
    (ConfigError, DescriptorError: file and line), network (NnetError),
    computation (ComputationError) or argument (UsageError), all in
    ``pynnet3.errors``. The message says where and what was expected; the
    tools print it as one Kaldi-style ERROR line. Any other exception from
    pynnet3 is a bug.

    Example::

        import pynnet3

        try:
            pynnet3.Nnet.read("no-such-file.raw")
        except pynnet3.PynnetError as e:
            print(type(e).__name__, e)

    Output::

        PynnetError cannot open no-such-file.raw for reading: No such file or directory
    """


def _where(source, position):
    """The start of an error message naming a place: ``"SOURCE" + position +
    ": "``, or nothing when ``source`` is None."""
    if source is None:
        return ""
    return f"{source}{position}: "


class KaldiFormatError(PynnetError):
    """A Kaldi file (model, archive, matrix...) is not what was expected.

    ``source`` is the file name as the user gave it, ``offset`` the byte
    offset at which reading failed (``None`` if unknown).
    """

    def __init__(self, message, source=None, offset=None):
        self.source = source
        self.offset = offset
        self.detail = message
        super().__init__(_where(source, "" if offset is None else f" (byte offset {offset})")
                         + message)


class ConfigError(PynnetError):
    """A config line (nnet3-init, edits config, component config) is invalid.

    ``source`` is the file name, ``line_number`` 1-based, ``line`` the text.
    """

    def __init__(self, message, source=None, line_number=None, line=None):
        self.source = source
        self.line_number = line_number
        self.line = line
        self.detail = message
        text = _where(source, "" if line_number is None else f":{line_number}") + message
        if line is not None:
            text += f" (in config line: {line.strip()})"
        super().__init__(text)


class DescriptorError(ConfigError):
    """A Descriptor expression could not be parsed or refers to unknown nodes."""


class NnetError(PynnetError):
    """A network is inconsistent: dimension mismatch, missing node, bad cycle."""


class ComputationError(PynnetError):
    """A computation could not be compiled (e.g. outputs not computable) or
    failed while running; the message names the command or the Cindexes."""


class UsageError(PynnetError):
    """A command-line tool was called with wrong arguments or options."""
