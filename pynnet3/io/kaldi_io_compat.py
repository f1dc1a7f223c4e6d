"""kaldi-io (the ``kaldi_io`` package) alongside pynnet3.

``kaldi_io`` reads and writes Kaldi archives with generators of
``(key, numpy array)`` pairs, the same pairs pynnet3's tables give
(:func:`pynnet3.io.table.read_table`) and take (:class:`TableWriter`), and
the same pairs :func:`pynnet3.compute.api.compute_table` consumes and
produces, so code built on kaldi_io works with pynnet3 unchanged. pynnet3's
tests use it as an independent reader to cross-check pynnet3's own.

Importing ``kaldi_io`` directly prints a warning when ``$KALDI_ROOT`` does
not exist and prepends Kaldi's binary folders to ``$PATH`` (which could put
Kaldi's tools before pynnet3's shims). :func:`import_kaldi_io` imports it
without either: its warning is swallowed and ``PATH`` / ``KALDI_ROOT`` are
restored to what they were.
"""

import contextlib
import io
import os
import sys

from ..errors import PynnetError

__all__ = ["import_kaldi_io"]


def import_kaldi_io():
    """The ``kaldi_io`` module, imported quietly (see the module docstring).
    PynnetError if kaldi-io is not installed (``pip install kaldi-io``)."""
    module = sys.modules.get("kaldi_io")
    if module is not None:
        return module
    saved = {name: os.environ.get(name) for name in ("PATH", "KALDI_ROOT")}
    try:
        with contextlib.redirect_stderr(io.StringIO()), \
                contextlib.redirect_stdout(io.StringIO()):
            import kaldi_io
    except ImportError:
        raise PynnetError("the kaldi-io package is not installed (pip install kaldi-io)") \
            from None
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return kaldi_io
