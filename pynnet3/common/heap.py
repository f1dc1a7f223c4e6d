"""Giving the C library's free heap memory back to the operating system.

Compiling a computation allocates far more than the computation it keeps:
the computation graph, the steps and the analyses of every optimization
pass, then freed. glibc keeps freed blocks resident for reuse, scattered
between blocks still in use, where the large arrays that computations run
on later rarely fit; so the peak memory of a tool held every compilation's
temporaries on top of what it computes with (chain BLSTM, nnet3-compute, 1
thread: 40 MB of resident memory after the first compilation, of which 2 MB
in use). :func:`release_free_heap` hands the free pages back (glibc's
``malloc_trim``: it also returns free pages inside the heap, not only at
its top); it takes well under a millisecond. With another C library it
does nothing.
"""

import ctypes

__all__ = ["release_free_heap"]


def _malloc_trim():
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def release_free_heap():
    """Returns the heap's free pages to the operating system (glibc); True
    when the C library could do so and released some memory."""
    return bool(_TRIM is not None and _TRIM(0))
