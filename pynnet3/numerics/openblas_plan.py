"""How the oracle's OpenBLAS splits an sgemm into kernel calls.

Kaldi's matrix products are ``cblas_sgemm`` calls. The oracle (kaldi-ref) ran
them on an AMD EPYC (Zen) machine with Debian's OpenBLAS 0.3.21
(DYNAMIC_ARCH), which picks its Haswell kernels there. Which float32
operations produce an element of C = A B depends only on integer decisions
the library makes before any arithmetic, and this module makes the same
decisions:

- the interface runs the threaded level-3 driver when M N K exceeds
  65536 x GEMM_MULTITHREAD_THRESHOLD and more than one thread is allowed,
  the serial driver otherwise (Haswell has no small-matrix path in 0.3.21);
- the drivers cut K into blocks (:func:`k_steps`); every block is
  accumulated separately and added onto C;
- the drivers cut C into kernel calls (:func:`serial_kernel_calls`,
  :func:`threaded_kernel_calls`), and inside a call the Haswell kernel
  (sgemm_kernel_8x4_haswell_2) sums some 8-element blocks with two
  accumulators instead of one (:func:`mark_paired`).

:func:`gemm_plan` turns these into what the arithmetic needs: the K blocks
and, per element of C, whether its blocks are summed paired. The
arithmetic itself lives in :mod:`pynnet3.numerics.openblas` (the readable
twin) and the Cython kernel ``pynnet3._fast.openblas_kernel``.

Orientation: Kaldi's row-major C (M x N) is OpenBLAS's column-major C'
(N x M), so OpenBLAS's "m" is our number of columns and its "n" our number
of rows; the functions below that describe the drivers use OpenBLAS's
names. Transposed operands change only how the drivers pack their inputs,
not which operations reach an element, so one plan serves every
transpose combination. The plan was checked against that OpenBLAS build's
own results (serial and threaded drivers, 1-4 threads, every transpose
combination, alpha and beta values, K over several blocks).
"""

import functools
import os
import re

import numpy as np

__all__ = ["ORACLE_THREADS", "openblas_threads_from_environment", "GemmPlan", "gemm_plan", "k_steps", "serial_kernel_calls",
           "threaded_kernel_calls", "mark_paired", "uses_threaded_driver"]

# OpenBLAS's default thread count on the oracle's machine (its number of
# cores); Kaldi's tools do not change it. (kaldi-ref's models/ outputs were
# computed so; its decode/large runs had OPENBLAS_NUM_THREADS=1.)
ORACLE_THREADS = 2
# The build's MAX_THREADS.
MAX_THREADS = 64


def _env_count(name):
    """A thread-count variable as OpenBLAS reads it (atoi; 0 when unset,
    not a number or not positive)."""
    match = re.match(r"\s*[+-]?\d+", os.environ.get(name, ""))
    return max(0, int(match.group())) if match else 0


def openblas_threads_from_environment():
    """The thread count OpenBLAS 0.3.21 (pthreads build) starts with in this
    process's environment: OPENBLAS_NUM_THREADS, else GOTO_NUM_THREADS,
    else OMP_NUM_THREADS, else as many as there are CPUs this process may
    run on; never more than those CPUs nor MAX_THREADS."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    wanted = (_env_count("OPENBLAS_NUM_THREADS") or _env_count("GOTO_NUM_THREADS")
              or _env_count("OMP_NUM_THREADS") or MAX_THREADS)
    return max(1, min(wanted, cpus, MAX_THREADS))

# The interface's and drivers' thresholds.
GEMM_MULTITHREAD_THRESHOLD = 4
SMP_THRESHOLD_MIN = 65536.0
# The Haswell sgemm blocking (param.h: P, Q, unrolls; R from the default
# 128 MiB buffer) and the threaded driver's defaults in a generic build.
GEMM_P = 320
GEMM_Q = 320
GEMM_R = 104512
GEMM_UNROLL_M = 8
GEMM_UNROLL_N = 4
SWITCH_RATIO = 2
DIVIDE_RATE = 2


def uses_threaded_driver(num_rows, num_cols, k, threads):
    """Whether the interface hands a row-major ``num_rows x k`` times
    ``k x num_cols`` product to the threaded driver (which may still find
    too little work to share, see :func:`threaded_kernel_calls`)."""
    return threads > 1 and \
        float(num_rows) * num_cols * k > SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD


def mark_paired(paired, ms, mlen, ns, nlen):
    """Mark in ``paired`` (shaped like Kaldi's C) the elements that one call
    of sgemm_kernel_8x4_haswell_2 sums with two accumulators. The call covers
    OpenBLAS rows ``ms .. ms+mlen-1`` (our columns) and OpenBLAS columns
    ``ns .. ns+nlen-1`` (our rows). It takes its columns in groups of 12
    while more than 11 are left, then one group each of 8, 4, 2 and 1 as
    they fit, and within a group its rows in blocks:

    - a group of 4: blocks of 8 rows are paired, the last mlen % 8 rows not;
    - a group of 12 with at least 16 rows: the group is two halves of 6
      columns whose 8-row blocks are staggered, so that only the first
      block of the left half and the last full block of one half (the left
      half when the number of full blocks is even) are paired;
    - every other block is a single chain."""
    groups = []
    col, left = ns, nlen
    for width in (12, 8, 4, 2, 1):
        while left >= width:
            groups.append((col, width))
            col += width
            left -= width
            if width != 12:
                break
    for col, width in groups:
        if width == 4:
            paired[col:col + 4, ms:ms + (mlen & ~7)] = True
        elif width == 12 and mlen >= 16:
            paired[col:col + 6, ms:ms + 8] = True
            blocks = mlen // 8
            half = col if blocks % 2 == 0 else col + 6
            last = ms + 8 * (blocks - 1)
            paired[half:half + 6, last:last + 8] = True


def _gemm_p_step(min_i, rounding_first):
    """Rows of A' a driver packs at once (at most GEMM_P; a remainder under
    2 GEMM_P is halved, rounded up to the unroll, in one of two ways)."""
    if min_i >= 2 * GEMM_P:
        return GEMM_P
    if min_i > GEMM_P:
        half = min_i // 2 if rounding_first else (min_i + 1) // 2
        return ((half + GEMM_UNROLL_M - 1) // GEMM_UNROLL_M) * GEMM_UNROLL_M
    return min_i


def _jj_steps(start, stop):
    """How a driver packs its own columns of B': 12 at a time, then 4, then
    what is left; each piece goes to its own kernel call."""
    steps = []
    while start < stop:
        width = stop - start
        if width >= 3 * GEMM_UNROLL_N:
            width = 3 * GEMM_UNROLL_N
        elif width > GEMM_UNROLL_N:
            width = GEMM_UNROLL_N
        steps.append((start, width))
        start += width
    return steps


def serial_kernel_calls(m, n):
    """The kernel calls of OpenBLAS's serial level-3 driver for an m x n
    result (OpenBLAS's orientation), as ``(ms, mlen, ns, nlen)``."""
    calls = []
    for js in range(0, n, GEMM_R):
        min_j = min(n - js, GEMM_R)
        min_i = _gemm_p_step(m, True)
        calls += [(0, min_i, jjs, width) for jjs, width in _jj_steps(js, js + min_j)]
        ms = min_i
        while ms < m:
            min_i = _gemm_p_step(m - ms, True)
            calls.append((ms, min_i, js, min_j))
            ms += min_i
    return calls


def _split_evenly(total, parts, min_width):
    """A threaded driver's split of ``total`` into ``parts`` ranges (as
    boundaries): each takes its share of what is left, at least
    ``min_width``. (GEMM_PREFERED_SIZE is 1 in this build, so no rounding.)"""
    bounds = [0]
    num = 0
    while total > 0:
        width = max((total + parts - num - 1) // (parts - num), min_width)
        width = min(width, total)
        total -= width
        bounds.append(bounds[-1] + width)
        num += 1
    bounds += [bounds[-1]] * (parts + 1 - len(bounds))
    return bounds


def threaded_kernel_calls(m, n, threads=ORACLE_THREADS):
    """The kernel calls of OpenBLAS's threaded level-3 driver (level3_thread)
    with ``threads`` threads for an m x n result, or None when it hands the
    work to the serial driver. Rows are split between the threads; each
    thread packs its part of the columns (in two halves, 12/4/rest at a
    time) and then applies its rows to the other threads' packed halves
    whole."""
    threads_m = 1
    if m >= 2 * SWITCH_RATIO:
        threads_m = threads
        while m < threads_m * SWITCH_RATIO:
            threads_m //= 2
    threads_n = 1
    if n >= SWITCH_RATIO * threads_m:
        threads_n = (n + SWITCH_RATIO * threads_m - 1) // (SWITCH_RATIO * threads_m)
        if threads_m * threads_n > threads:
            threads_n = threads // threads_m
    num_threads = threads_m * threads_n
    if num_threads <= 1:
        return None
    range_m = _split_evenly(m, threads_m, 0)
    calls = []
    for js in range(0, n, GEMM_R * num_threads):
        step = min(n - js, GEMM_R * num_threads)
        range_n = [js + b for b in _split_evenly(step, num_threads, SWITCH_RATIO)]

        def halves(part):
            lo, hi = range_n[part], range_n[part + 1]
            div_n = (hi - lo + DIVIDE_RATE - 1) // DIVIDE_RATE
            return [(s, min(hi - s, div_n)) for s in range(lo, hi, div_n)] if div_n else []

        for pos in range(num_threads):
            group = (pos // threads_m) * threads_m
            m_from, m_to = range_m[pos - group], range_m[pos - group + 1]
            min_i = _gemm_p_step(m_to - m_from, True)
            others = [group + (pos - group + i) % threads_m for i in range(threads_m)]
            for start, width in halves(pos):
                calls += [(m_from, min_i, jjs, w) for jjs, w in _jj_steps(start, start + width)]
            for part in others[1:]:
                calls += [(m_from, min_i, s, w) for s, w in halves(part)]
            ms = m_from + min_i
            while ms < m_to:
                min_i = _gemm_p_step(m_to - ms, False)
                for part in others:
                    calls += [(ms, min_i, s, w) for s, w in halves(part)]
                ms += min_i
    return calls


def k_steps(k, threaded):
    """The blocks of k the drivers take, as ``(start, length)``: GEMM_Q at a
    time; a remainder between GEMM_Q and 2 GEMM_Q is halved (the serial
    driver rounds the half up to the unroll, the threaded one to an
    integer)."""
    steps = []
    ls = 0
    while ls < k:
        min_l = k - ls
        if min_l >= 2 * GEMM_Q:
            min_l = GEMM_Q
        elif min_l > GEMM_Q:
            if threaded:
                min_l = (min_l + 1) // 2
            else:
                min_l = ((min_l // 2 + GEMM_UNROLL_M - 1) // GEMM_UNROLL_M) * GEMM_UNROLL_M
        steps.append((ls, min_l))
        ls += min_l
    return steps


class GemmPlan:
    """What the arithmetic of one sgemm shape needs (see :func:`gemm_plan`):
    ``k_steps`` (an int64 array of (start, length) rows), ``paired`` (a
    read-only uint8 array shaped like C: 1 where the kernel sums with two
    accumulators) and ``threaded`` (which driver ran)."""

    __slots__ = ("k_steps", "paired", "threaded")

    def __init__(self, k_steps_, paired, threaded):
        self.k_steps = k_steps_
        self.paired = paired
        self.threaded = threaded


@functools.lru_cache(maxsize=256)
def gemm_plan(num_rows, num_cols, k, threads=ORACLE_THREADS):
    """The :class:`GemmPlan` of a row-major ``num_rows x num_cols`` result
    with inner dimension ``k`` under ``threads`` OpenBLAS threads (shapes
    repeat from chunk to chunk, so plans are cached)."""
    calls = None
    if uses_threaded_driver(num_rows, num_cols, k, threads):
        calls = threaded_kernel_calls(num_cols, num_rows, threads)
    threaded = calls is not None
    if calls is None:
        calls = serial_kernel_calls(num_cols, num_rows)
    paired = np.zeros((num_rows, num_cols), bool)
    for call in calls:
        mark_paired(paired, *call)
    paired = paired.view(np.uint8)
    paired.flags.writeable = False
    steps = np.array(k_steps(k, threaded), dtype=np.int64).reshape(-1, 2)
    steps.flags.writeable = False
    return GemmPlan(steps, paired, threaded)
