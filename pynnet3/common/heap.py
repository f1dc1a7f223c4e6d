"""Giving the C library's free heap memory back to the operating system.

Compiling a computation allocates far more than the computation it keeps:
the computation graph, the steps and the analyses of every optimization
pass, then freed. glibc keeps freed blocks resident for reuse, scattered
between blocks still in use, where the large arrays that computations run
on later rarely fit; so the peak memory of a tool held a large
compilation's temporaries on top of what it computes with (chain BLSTM,
nnet3-compute, 1 thread: the first compilation left 40 MB more resident,
of which 2 MB in use).

:func:`giving_back_growth` wraps such work: when the process's resident
memory grew by at least ``min_bytes`` while it ran, the heap's free pages
are handed back afterwards (glibc's ``malloc_trim``, which also returns
free pages inside the heap, not only at its top). Small growth is left
alone: pages given back and then needed again are faulted in afresh, which
cost 10% of the time of an x-vector run that compiled each of 150
utterance lengths and gave back after every compilation. Without
``/proc/self/statm`` or glibc nothing is given back.
"""

import contextlib
import ctypes
import os

__all__ = ["giving_back_growth", "release_free_heap", "resident_bytes"]

# More than the compilations of feed-forward chunk shapes take, less than
# those of batched recurrent ones (chain BLSTM: 40 MB).
MIN_GROWTH = 16 << 20
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _malloc_trim():
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def resident_bytes():
    """The process's resident memory in bytes (Linux); None elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


def release_free_heap():
    """Returns the heap's free pages to the operating system (glibc); True
    when the C library could do so and released some memory."""
    return bool(_TRIM is not None and _TRIM(0))


@contextlib.contextmanager
def giving_back_growth(min_bytes=MIN_GROWTH):
    """Around work whose temporaries are freed by its end: afterwards, if
    resident memory grew by ``min_bytes`` or more meanwhile, the heap's free
    pages are given back (see the module docstring)."""
    before = resident_bytes() if _TRIM is not None else None
    try:
        yield
    finally:
        if before is not None:
            after = resident_bytes()
            if after is not None and after - before >= min_bytes:
                release_free_heap()
