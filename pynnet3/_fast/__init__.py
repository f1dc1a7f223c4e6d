"""The compiled (Cython) kernels, and the one policy for when they are missing.

Every module here has a plain-Python twin elsewhere in pynnet3 with the same
results, 20-50x slower. Code that wants a kernel calls :func:`load`:

- normally it returns the compiled module;
- if the module cannot be imported (a source tree that was never built, a
  broken build), it returns None and warns once per process with a
  :class:`SlowPathWarning` naming the module, the import error and how to
  build — the caller then runs the twin;
- if the user chose the twins (environment variable ``PYNNET3_PURE_PYTHON=1``
  at import time, or :func:`use_pure_python` at run time) it returns None
  without a warning.
"""

import importlib
import os
import warnings

__all__ = ["SlowPathWarning", "load", "select", "kernel_name", "use_pure_python", "pure_python"]

PURE_PYTHON_ENV = "PYNNET3_PURE_PYTHON"

BUILD_HINT = ("build them with `python -m pip install -e .` or, in a source checkout, "
              "`python setup.py build_ext --inplace`; set %s=1 to choose the Python "
              "implementation without this warning" % PURE_PYTHON_ENV)


class SlowPathWarning(RuntimeWarning):
    """A compiled kernel is unavailable and its (much slower) Python twin runs."""


_pure_python = os.environ.get(PURE_PYTHON_ENV, "").strip().lower() not in ("", "0", "false",
                                                                         "no")
_warned = False
_failed = {}     # module name -> the ImportError text


def use_pure_python(flag=True):
    """Chooses (True) or stops choosing (False) the Python twins for every
    kernel loaded from now on. The Compiler asks at each construction; modules
    that pick at import (the analysis, the component index helpers) keep the
    pick they made, so call this before importing the rest of pynnet3
    (``import pynnet3`` alone imports nothing) or set PYNNET3_PURE_PYTHON=1."""
    global _pure_python
    _pure_python = bool(flag)


def pure_python():
    """True when the user chose the Python twins."""
    return _pure_python


def load(name):
    """The compiled module ``pynnet3._fast.<name>``, or None when the twins
    were chosen or it cannot be imported (then one SlowPathWarning per
    process, see the module docstring)."""
    global _warned
    if _pure_python:
        return None
    try:
        return importlib.import_module(__name__ + "." + name)
    except ImportError as e:
        _failed[name] = str(e)
        if not _warned:
            _warned = True
            warnings.warn(
                "pynnet3's compiled extension pynnet3._fast.%s could not be imported (%s); "
                "falling back to the Python implementation, which is 20-50x slower. To fix "
                "it, %s." % (name, e, BUILD_HINT), SlowPathWarning, stacklevel=2)
        return None


def failed_modules():
    """{module name: import error} for every kernel that failed to import."""
    return dict(_failed)


def select(kernel, *twins):
    """The functions or classes a module runs, in the order given: for each
    twin, the kernel's object of the same name without the twin's ``_py`` /
    ``Py`` suffix when ``kernel`` (what :func:`load` returned) is a module,
    else the twin itself::

        exp_rows, log_rows = _fast.select(_kernel, exp_rows_py, log_rows_py)
    """
    if kernel is None:
        return twins
    return tuple(getattr(kernel, kernel_name(twin)) for twin in twins)


def kernel_name(twin):
    """The name of a twin's kernel: ``exp_rows_py`` -> ``exp_rows``,
    ``AnalyzerPy`` -> ``Analyzer`` (the naming rule of docs/architecture.md)."""
    name = twin.__name__
    for suffix in ("_py", "Py"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    raise ValueError("%s is not named as a kernel's twin (it ends in neither _py nor Py)"
                     % name)
