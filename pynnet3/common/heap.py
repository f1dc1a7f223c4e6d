"""Giving the C library's free heap memory back to the operating system.

Compiling a computation allocates far more than the computation it keeps:
the computation graph, the steps and the analyses of every optimization
pass, then freed. glibc keeps freed blocks resident for reuse, scattered
between blocks still in use, where the large arrays that computations run
on later rarely fit; so the peak memory of a tool held a large
compilation's temporaries on top of what it computes with (chain BLSTM,
nnet3-compute, 1 thread: the first compilation left 40 MB more resident,
of which 2 MB in use).

:class:`GivingBack` wraps such work and, afterwards, hands the heap's
free pages back (glibc's ``malloc_trim``, which also returns free pages
inside the heap, not only at its top) on two rules:

- growth: resident memory grew by ``min_growth`` (16 MiB) or more while the
  work ran: always;
- leftovers: ``min_free`` (4 MiB) or more lie free inside the heap after
  it (glibc's ``mallinfo2``), though resident memory grew less (the work
  reused what earlier work had left): rationed, the k-th such giving back
  only once 2^k works have run (after the 1st, 2nd, 4th, 8th... work).

Pages given back and then needed again are faulted in afresh. Given back
after every compilation, an x-vector run that compiled each of 150
utterance lengths (16 MiB free after each) spent 0.46 s of system time
instead of 0.13; rationed, it gives back 8 times at no measurable cost,
and the first compilations' leftovers, which sit under the first
computations' matrices (the peak), still go: TDNN-F with subsampling,
nnet3-compute, 1 thread: peak 140.3 -> 136.9 MB. Without
``/proc/self/statm`` or glibc nothing is given back.
"""

import contextlib
import ctypes
import os

__all__ = ["GivingBack", "free_heap_bytes", "malloc_info", "release_free_heap",
           "resident_bytes"]

# More than the compilations of feed-forward chunk shapes take, less than
# those of batched recurrent ones (chain BLSTM: 40 MB).
MIN_GROWTH = 16 << 20
# What a feed-forward chunk shape's compilation leaves free (TDNN-F: 6 MB).
MIN_FREE = 4 << 20
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


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _mallinfo2():
    try:
        info = ctypes.CDLL(None).mallinfo2       # glibc 2.33 and later
    except (OSError, AttributeError):
        return None
    info.argtypes = ()
    info.restype = _MallInfo2
    return info


_MALLINFO2 = _mallinfo2()


def resident_bytes():
    """The process's resident memory in bytes (Linux); None elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


def malloc_info():
    """glibc's mallinfo2 now (fields ``uordblks`` in use, ``fordblks`` free
    in the heap, ``hblkhd`` in mapped blocks...); None without it."""
    return None if _MALLINFO2 is None else _MALLINFO2()


def free_heap_bytes():
    """Bytes lying free inside the C library's heap (glibc's mallinfo2);
    None elsewhere."""
    info = malloc_info()
    return None if info is None else int(info.fordblks)


def release_free_heap():
    """Returns the heap's free pages to the operating system (glibc); True
    when the C library could do so and released some memory."""
    return bool(_TRIM is not None and _TRIM(0))


class GivingBack:
    """Gives the heap's free pages back after works whose temporaries are
    freed by their end, on the rules of the module docstring; one per
    sequence of works (a compiler's compilations), since the leftovers
    rule counts them."""

    def __init__(self, min_growth=MIN_GROWTH, min_free=MIN_FREE):
        self.min_growth = min_growth
        self.min_free = min_free
        self.works = 0
        self.leftover_releases = 0

    @contextlib.contextmanager
    def around(self):
        """Runs the body as one work, then gives back if a rule says so."""
        before = resident_bytes() if _TRIM is not None else None
        try:
            yield
        finally:
            if before is not None:
                self._after(before)

    def _after(self, before):
        self.works += 1
        after = resident_bytes()
        if after is not None and after - before >= self.min_growth:
            release_free_heap()
        elif self.works >= 1 << self.leftover_releases:
            free = free_heap_bytes()
            if free is not None and free >= self.min_free:
                self.leftover_releases += 1
                release_free_heap()
