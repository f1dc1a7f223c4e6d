"""The command-line framework of pynnet3's tools: Kaldi's ParseOptions and
Kaldi-style logging.

Writing a tool::

    from pynnet3.bin._cli import ToolParser, kaldi_tool
    import logging
    log = logging.getLogger(__name__)

    USAGE = '''Copy a raw nnet3 network.

    Usage:  nnet3-copy [options] <nnet-in> <nnet-out>
    '''

    @kaldi_tool
    def main(argv=None):
        parser = ToolParser(USAGE)              # program name taken from "Usage:"
        parser.register_bool("binary", True, "Write output in binary mode")
        parser.register_float("scale", 1.0, "Scale the parameters by this")
        parser.register_str("edits", "", "Inline edits, ';'-separated")
        opts, args = parser.parse(argv, num_args=2)   # or (min, max), or None
        ...   # opts.binary, opts.scale, opts.edits; args is a list of str
        log.info("Copied raw neural net from %s to %s", args[0], args[1])
        # return nothing (exit 0) or an int exit status

``main(argv)`` takes the arguments without the program name (default
``sys.argv[1:]``) and, decorated with :func:`kaldi_tool`, returns the exit
status instead of raising; ``[project.scripts]`` can point straight at it.

What the parser does, as Kaldi's ParseOptions:
- options come before the positional arguments, only as ``--name=value``
  (``--name value`` is not an option/value pair: ``value`` is the first
  positional argument); ``--`` ends the options; names are case-insensitive and
  ``_`` equals ``-``; values are trimmed of surrounding whitespace;
- booleans accept ``true|false|t|f|1|0`` (any case), a bare ``--flag`` means
  true, ``--flag=`` is an error; string options need ``=``;
  numbers are checked like Kaldi (int32 range, no trailing junk);
- standard options ``--config=FILE`` (lines ``--name=value``, ``#`` comments;
  applied before the command line's own options, may be repeated),
  ``--print-args`` (default true: the command line is echoed to stderr, as at
  the top of every Kaldi log), ``--help`` (usage to stderr, exit 0; ``-h``
  before the positional arguments does the same), ``--verbose=N``;
- an unknown option prints the usage and ``Command line was: ...``, then an
  ``ERROR`` line (exit status 255); a wrong number of positional arguments
  prints the usage and exits with status 1, as Kaldi's tools do.

Logging: library code uses the standard :mod:`logging` module
(``logging.getLogger(__name__)``); inside a tool, all records go to stderr
as Kaldi's lines ``LOG (prog[5.5]:func():file.py:line) message``,
``WARNING (...)``, ``ERROR (...)``, and ``VLOG[n] (...)`` for
``log.log(vlog_level(n), ...)`` when ``--verbose`` >= n.

Errors: a :class:`PynnetError` escaping ``main`` becomes one ``ERROR`` line
naming the function, module and line that raised it, and exit status 255,
as Kaldi's tools (a KALDI_ERROR makes their main() return -1). Any other
exception is a bug in pynnet3: one ``ERROR`` line saying so (the traceback
follows with ``--verbose>=1`` or ``PYNNET3_TRACEBACK=1``), exit 255. A tool
that finished but processed nothing returns 1, as Kaldi's do. Ctrl-C exits 130 and a
closed output pipe 141, both quietly.
"""

import functools
import logging
import math
import os
import re
import sys
import traceback

import numpy as np

from ..errors import PynnetError, UsageError
from ..log import KaldiLogHandler, format_log_line, set_program_name

EXIT_USAGE = 1          # wrong number of arguments (Kaldi: exit(1))
EXIT_ERROR = 255        # any error: KALDI_ERROR makes Kaldi's main() return -1
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

verbose_level = 0


# -- logging -------------------------------------------------------------------

def vlog_level(n):
    """The :mod:`logging` level of Kaldi's ``VLOG(n)`` (n >= 1)."""
    return logging.DEBUG + 1 - n


_handler = None


def setup_logging(verbose=None):
    """Routes log records (root logger: library modules and the tool's own
    module, even when run as ``__main__``) to stderr in Kaldi's format,
    showing ``VLOG`` levels up to ``verbose`` (idempotent)."""
    global _handler, verbose_level
    if verbose is not None:
        verbose_level = verbose
    logger = logging.getLogger()
    if _handler is None:
        _handler = KaldiLogHandler()
        logger.addHandler(_handler)
    logger.setLevel(logging.INFO if verbose_level <= 0 else vlog_level(verbose_level))


# -- command-line quoting (Kaldi's ParseOptions::Escape) ------------------------

_OK_CHARS = set("[]~#^_-+=:.,/")


def escape_arg(arg):
    """An argument as Kaldi echoes it: quoted for bash only where needed."""
    if arg and all((c.isascii() and c.isalnum()) or c in _OK_CHARS for c in arg):
        return arg
    if "'" in arg and not any(c in arg for c in "\"`$\\"):
        return '"' + arg + '"'
    return "'" + arg.replace("'", "'\\''") + "'"


# -- option values -------------------------------------------------------------

_WHITE = " \t\n\r\f\v"
_REAL_RE = re.compile(r"^\s*[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)\s*$")
_INF_NAN = {"INF": math.inf, "+INF": math.inf, "-INF": -math.inf, "INFINITY": math.inf,
            "+INFINITY": math.inf, "-INFINITY": -math.inf, "NAN": math.nan,
            "+NAN": math.nan, "-NAN": math.nan}
_INT_RE = re.compile(r"^[ \t\n\r\f\v]*[+-]?\d+[ \t\n\r\f\v]*$")


def convert_string_to_integer(text, lo=-2**31, hi=2**31 - 1):
    """Kaldi's ConvertStringToInteger into [lo, hi]; None if invalid."""
    if not _INT_RE.match(text):
        return None
    value = int(text.strip(_WHITE))
    return value if lo <= value <= hi else None


def convert_string_to_real(text):
    """Kaldi's ConvertStringToReal (accepts inf/nan spellings); None if invalid."""
    if _REAL_RE.match(text):
        return float(text.strip(_WHITE))
    word = text.strip(_WHITE).upper()
    return _INF_NAN.get(word)


class _Option:
    __slots__ = ("name", "kind", "value", "doc", "standard")

    def __init__(self, name, kind, value, doc, standard):
        self.name = name
        self.kind = kind
        self.value = value
        self.doc = doc
        self.standard = standard

    def described(self):
        v = self.value
        if self.kind == "bool":
            shown = "true" if v else "false"
        elif self.kind in ("float", "double"):
            shown = "%g" % v
        elif self.kind == "string":
            return '%s (string, default = "%s")' % (self.doc, v)
        else:
            shown = str(v)
        return "%s (%s, default = %s)" % (self.doc, self.kind, shown)


class Options:
    """The parsed option values as attributes (``--set-raw-nnet`` ->
    ``opts.set_raw_nnet``)."""

    def __init__(self, values):
        self.__dict__.update(values)

    def __repr__(self):
        return "Options(%s)" % ", ".join("%s=%r" % kv for kv in sorted(self.__dict__.items()))


def _normalize(name):
    return name.replace("_", "-").lower()


class ToolParser:
    """Kaldi's ParseOptions for one tool (see the module docstring)."""

    def __init__(self, usage, prog=None):
        self.usage = usage
        if prog is None:
            m = re.search(r"Usage:\s+(\S+)", usage)
            prog = m.group(1) if m else (os.path.basename(sys.argv[0]) or "pynnet3")
        self.prog = prog
        self._options = {}
        self._argv = []
        self._given = set()
        self._register("config", "string", "", "Configuration file to read (this option "
                       "may be repeated)", True)
        self._register("print-args", "bool", True,
                       "Print the command line arguments (to stderr)", True)
        self._register("help", "bool", False, "Print out usage message", True)
        self._register("verbose", "int", 0, "Verbose level (higher->more logging)", True)

    # -- registration ------------------------------------------------------------
    def _register(self, name, kind, default, doc, standard=False):
        key = _normalize(name)
        if key in self._options:
            raise ValueError("option --%s registered twice" % name)
        self._options[key] = _Option(name, kind, default, doc, standard)

    def register_bool(self, name, default, doc):
        self._register(name, "bool", bool(default), doc)

    def register_int(self, name, default, doc):
        self._register(name, "int", int(default), doc)

    def register_uint(self, name, default, doc):
        self._register(name, "uint", int(default), doc)

    def register_float(self, name, default, doc):
        """A BaseFloat option: the value is rounded to float32 like Kaldi's."""
        self._register(name, "float", float(np.float32(default)), doc)

    def register_double(self, name, default, doc):
        self._register(name, "double", float(default), doc)

    def register_str(self, name, default, doc):
        self._register(name, "string", str(default), doc)

    # -- usage -------------------------------------------------------------------
    def usage_text(self, command_line=False):
        """What Kaldi's PrintUsage writes to stderr."""
        out = ["\n", self.usage, "\n"]
        specific = [o for k, o in sorted(self._options.items()) if not o.standard]
        standard = [o for k, o in sorted(self._options.items()) if o.standard]
        if specific:
            out.append("Options:\n")
            out.extend("  --%-25s : %s\n" % (o.name, o.described()) for o in specific)
            out.append("\n")
        out.append("Standard options:\n")
        out.extend("  --%-25s : %s\n" % (o.name, o.described()) for o in standard)
        out.append("\n")
        if command_line:
            out.append("Command line was: " + self.command_line() + "\n")
        return "".join(out)

    def print_usage(self, command_line=False):
        sys.stderr.write(self.usage_text(command_line))
        sys.stderr.flush()

    def command_line(self):
        """The command line as Kaldi echoes it (each argument escaped, then a
        space). The program appears by its name: a Python entry point sees
        its own full path in ``sys.argv[0]`` where a shell user typed just the
        name, which is what Kaldi's logs show."""
        return "".join(escape_arg(a) + " " for a in [self.prog] + self._argv)

    # -- parsing -----------------------------------------------------------------
    def _error(self, message, show_usage=False):
        if show_usage:
            self.print_usage(True)
        raise UsageError(message)

    def _split_long_arg(self, arg):
        eq = arg.find("=")
        if eq < 0:
            return _normalize(arg[2:]), "", False
        if eq == 2:
            self._error("Invalid option (no key): %s" % arg, show_usage=True)
        return _normalize(arg[2:eq]), arg[eq + 1:].strip(_WHITE), True

    def given(self, name):
        """True if option ``name`` was set (on the command line or in a
        --config file), whatever its value."""
        return _normalize(name) in self._given

    def given_names(self):
        """The names of the options that were set, normalized (sorted)."""
        return sorted(self._given)

    def _set_option(self, key, value, has_equal_sign):
        option = self._options.get(key)
        if option is None or not key:
            return False
        self._given.add(key)
        kind = option.kind
        if kind == "bool":
            if has_equal_sign and value == "":
                self._error("Invalid option --%s=" % key)
            low = value.lower()
            if low in ("true", "t", "1", ""):
                option.value = True
            elif low in ("false", "f", "0"):
                option.value = False
            else:
                self._error("Invalid format for boolean argument [expected true or false]: %s"
                            % value, show_usage=True)
        elif kind in ("int", "uint"):
            lo, hi = (-2**31, 2**31 - 1) if kind == "int" else (0, 2**32 - 1)
            parsed = convert_string_to_integer(value, lo, hi)
            if parsed is None:
                self._error('Invalid integer option "%s"' % value)
            option.value = parsed
        elif kind in ("float", "double"):
            parsed = convert_string_to_real(value)
            if parsed is None:
                self._error('Invalid floating-point option "%s"' % value)
            option.value = float(np.float32(parsed)) if kind == "float" else parsed
        else:
            if not has_equal_sign:
                self._error("Invalid option --%s (option format is --x=y)." % key)
            option.value = value
        return True

    def _read_config_file(self, filename):
        try:
            with open(filename, "r", encoding="utf-8", errors="surrogateescape") as f:
                lines = f.read().split("\n")
        except OSError:
            self._error("Cannot open config file: %s" % filename)
        if lines and lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, 1):
            hash_pos = line.find("#")
            if hash_pos >= 0:
                line = line[:hash_pos]
            line = line.strip(_WHITE)
            if not line:
                continue
            if not line.startswith("--"):
                self._error("Reading config file %s: line %d does not look like a line from "
                            "a Kaldi command-line program's config file: should be of the "
                            "form --x=y.  Note: config files intended to be sourced by shell "
                            "scripts lack the '--'." % (filename, number))
            key, value, has_eq = self._split_long_arg(line)
            if not self._set_option(key, value, has_eq):
                self._error("Invalid option %s in config file %s" % (line, filename),
                            show_usage=True)

    def parse(self, argv=None, num_args=None):
        """Parses ``argv`` (without the program name; default ``sys.argv[1:]``).

        Returns ``(opts, args)``. ``num_args`` is an int, a ``(min, max)``
        pair or None (any number); a count outside it prints the usage and
        raises ``SystemExit(1)``. ``--help`` raises ``SystemExit(0)``.
        Option errors raise :class:`UsageError`.
        """
        argv = list(sys.argv[1:] if argv is None else argv)
        self._argv = argv
        set_program_name(self.prog)
        setup_logging()
        # Pass 1 (as Kaldi): --config files and --help, wherever they are.
        for arg in argv:
            if arg == "--":
                break
            if arg.startswith("--"):
                key, value, _ = self._split_long_arg(arg)
                if key == "config":
                    self._read_config_file(value)
                if key == "help":
                    self.print_usage()
                    raise SystemExit(0)
        # Pass 2: the options before the first positional argument.
        i = 0
        double_dash_seen = False
        while i < len(argv):
            arg = argv[i]
            if arg == "--":
                i += 1
                double_dash_seen = True
                break
            if arg == "-h":
                self.print_usage()
                raise SystemExit(0)
            if not arg.startswith("--"):
                break
            key, value, has_eq = self._split_long_arg(arg)
            if not self._set_option(key, value, has_eq):
                self._error("Invalid option %s" % arg, show_usage=True)
            i += 1
        args = []
        for arg in argv[i:]:
            if arg == "--" and not double_dash_seen:
                double_dash_seen = True
            else:
                args.append(arg)
        setup_logging(self._options["verbose"].value)
        if self._options["print-args"].value:
            sys.stderr.write(self.command_line() + "\n")
            sys.stderr.flush()
        if num_args is not None:
            lo, hi = (num_args, num_args) if isinstance(num_args, int) else num_args
            if not lo <= len(args) <= hi:
                self.print_usage()
                raise SystemExit(EXIT_USAGE)
        values = {k.replace("-", "_"): o.value for k, o in self._options.items()}
        return Options(values), args


# -- running a tool ------------------------------------------------------------

_ERROR_HELPERS = frozenset(("_error", "error", "fail"))


def _raise_site(exc):
    """(function, file, line) of the frame that raised ``exc``."""
    tb = exc.__traceback__
    if tb is None:
        return "main", "<unknown>", 0
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    # An error helper that only builds and raises is not the interesting site.
    while len(frames) > 1 and frames[-1].tb_frame.f_code.co_name in _ERROR_HELPERS:
        frames.pop()
    code = frames[-1].tb_frame.f_code
    return code.co_name, os.path.basename(code.co_filename), frames[-1].tb_lineno


def _print_error(exc, message):
    func, filename, lineno = _raise_site(exc)
    sys.stderr.write(format_log_line("ERROR", func, filename, lineno, message) + "\n")
    sys.stderr.flush()


def run_tool(main, argv=None):
    """Runs ``main(argv)`` as a Kaldi tool and returns its exit status."""
    setup_logging()
    try:
        status = main(argv)
        sys.stdout.flush()
        return 0 if status is None else int(status)
    except SystemExit as e:
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_ERROR)
    except PynnetError as e:
        _print_error(e, str(e))
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        try:  # Python would complain again when flushing stdout at exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_BROKEN_PIPE
    except MemoryError as e:
        _print_error(e, "out of memory")
        return EXIT_ERROR
    except Exception as e:  # a bug in pynnet3, not bad input
        _print_error(e, "internal error (a bug in pynnet3, please report it): %s: %s"
                     % (type(e).__name__, e))
        if verbose_level > 0 or os.environ.get("PYNNET3_TRACEBACK"):
            traceback.print_exc(file=sys.stderr)
        return EXIT_ERROR


def kaldi_tool(main):
    """Decorator: ``main(argv=None)`` runs under :func:`run_tool` and returns
    its exit status (what ``[project.scripts]`` entry points need)."""
    @functools.wraps(main)
    def wrapper(argv=None):
        return run_tool(main, argv)
    wrapper.unwrapped = main
    return wrapper
