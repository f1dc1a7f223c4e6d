"""Kaldi-style log lines for pynnet3's messages.

pynnet3's modules log with the standard :mod:`logging` module under the
``pynnet3`` logger. Every record is printed as Kaldi prints its messages::

    WARNING (prog[5.5]:check():nnet.py:534) Node tdnn6.relu is never used to compute any output.

- In a tool (``nnet3-compute`` ...), ``pynnet3.bin`` routes every record to
  stderr in this form, ``LOG`` lines included, as Kaldi's tools do.
- In a Python program that has not configured :mod:`logging`, warnings and
  errors from pynnet3 go to stderr in this form (``LOG`` lines, Python's
  INFO level, are not shown: ``logging.getLogger("pynnet3").setLevel(logging.INFO)``
  shows them).
- Once the program configures logging itself (a handler on the root logger,
  e.g. ``logging.basicConfig()``), pynnet3 stays out of the way and its
  records go only to the program's handlers.
"""

import logging
import os
import sys

__all__ = ["KALDI_VERSION", "program_name", "set_program_name", "severity",
           "format_log_line", "KaldiLogHandler"]

KALDI_VERSION = "5.5"

_program = None


def set_program_name(name):
    """Names the program in every later log line (a tool sets its own name,
    e.g. ``nnet3-compute``, whatever file Python runs it from)."""
    global _program
    _program = name


def program_name():
    """The program name Kaldi puts in its log lines: the one set by
    :func:`set_program_name`, else the basename of ``sys.argv[0]``
    ("pynnet3" when there is none)."""
    if _program:
        return _program
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "pynnet3"


def severity(levelno):
    """Kaldi's name for a :mod:`logging` level: ERROR, WARNING, LOG (INFO) or
    VLOG[n] (level DEBUG + 1 - n)."""
    if levelno >= logging.ERROR:
        return "ERROR"
    if levelno >= logging.WARNING:
        return "WARNING"
    if levelno >= logging.INFO:
        return "LOG"
    return "VLOG[%d]" % (logging.DEBUG + 1 - levelno)


def format_log_line(severity_name, func, filename, lineno, message, program=None):
    """One Kaldi log line (without the newline)."""
    return "%s (%s[%s]:%s():%s:%d) %s" % (severity_name, program or program_name(),
                                          KALDI_VERSION, func, filename, lineno, message)


class KaldiLogHandler(logging.Handler):
    """Writes records to the current ``sys.stderr`` as Kaldi log lines."""

    def emit(self, record):
        try:
            line = format_log_line(severity(record.levelno), record.funcName,
                                   os.path.basename(record.pathname), record.lineno,
                                   record.getMessage())
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except Exception:  # pragma: no cover - logging must never raise
            self.handleError(record)


class _LibraryHandler(KaldiLogHandler):
    """pynnet3's own handler for programs that configured no logging: it
    stands aside as soon as the root logger has a handler (the program's, or
    a tool's), so that no record is printed twice."""

    def emit(self, record):
        if logging.getLogger().handlers:
            return
        super().emit(record)


def _install_library_handler():
    logger = logging.getLogger("pynnet3")
    if not any(isinstance(h, _LibraryHandler) for h in logger.handlers):
        logger.addHandler(_LibraryHandler())


_install_library_handler()
