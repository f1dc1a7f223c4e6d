"""The thread count of the BLAS library NumPy uses, changed at run time.

Multi-threaded OpenBLAS splits every product between its threads, which
then wait for each other at its end by spinning; on a machine with more
runnable processes than cores a waiting thread spins while the one it waits
for is not running, and a run with 2 BLAS threads can take several times as
long as with 1. :class:`~pynnet3.compute.utterance.SimpleNnetComputer` can
instead run whole computations on threads of its own, each with
single-threaded BLAS (no waiting inside a product); for that it turns
NumPy's BLAS to one thread while it runs them (:func:`single_threaded`).

The library is found as threadpoolctl finds it: among the shared libraries
loaded into the process, one whose name contains ``openblas``, with one of
OpenBLAS's thread-count functions (NumPy's own wheels export them with a
``scipy_`` prefix and a ``64_`` suffix). Where none is found (another BLAS,
an unusual build) :func:`available` is false and callers keep BLAS's own
threads.
"""

import contextlib
import ctypes
import threading

# imported for its side effect: it loads NumPy's OpenBLAS, which _loaded_libraries
# then finds in /proc/self/maps
import numpy  # noqa: F401

__all__ = ["available", "get_threads", "set_threads", "single_threaded"]

_SYMBOLS = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
            ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
            ("openblas_get_num_threads", "openblas_set_num_threads"))
_lock = threading.Lock()
_functions = None      # (get, set), () when not found, None before looking
_depth = 0
_saved = 0


def _loaded_libraries():
    try:
        with open("/proc/self/maps") as f:
            return sorted({line.split()[-1] for line in f
                           if "openblas" in line.rsplit("/", 1)[-1].lower()
                           and line.split()[-1].startswith("/")})
    except OSError:
        return []


def _find():
    global _functions
    if _functions is None:
        found = ()
        for path in _loaded_libraries():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for get_name, set_name in _SYMBOLS:
                if hasattr(lib, get_name) and hasattr(lib, set_name):
                    get, set_ = getattr(lib, get_name), getattr(lib, set_name)
                    get.restype, get.argtypes = ctypes.c_int, []
                    set_.restype, set_.argtypes = None, [ctypes.c_int]
                    found = (get, set_)
                    break
            if found:
                break
        _functions = found
    return _functions


def available():
    """Whether NumPy's BLAS thread count can be read and changed here."""
    return bool(_find())


def get_threads():
    """NumPy's BLAS thread count (None when not :func:`available`)."""
    functions = _find()
    return functions[0]() if functions else None


def set_threads(count):
    """Sets NumPy's BLAS thread count (for the whole process); no effect
    when not :func:`available`."""
    functions = _find()
    if functions:
        functions[1](int(count))


@contextlib.contextmanager
def single_threaded():
    """NumPy's BLAS on one thread inside the block (nested and concurrent
    blocks share one change: the count is restored when the last ends)."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = get_threads() or 1
            if _saved != 1:
                set_threads(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved != 1:
                set_threads(_saved)
