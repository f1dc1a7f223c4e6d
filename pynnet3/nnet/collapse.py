"""Kaldi's CollapseModel: merge successive components for test time.

``collapse_model(nnet, config)`` does what Kaldi's ModelCollapser does
(nnet-utils.cc), in its order:

- it sweeps the nodes repeatedly (at most 10 sweeps; more is an error) until a
  sweep changes nothing. A component node is collapsed with the component
  feeding it when its input Descriptor reads a single component node ``foo``
  only, as ``foo``, ``Offset(foo, t)`` or an ``Append`` of such parts (all
  naming the same node; a ``Scale`` on ``foo`` is accepted as Kaldi accepts
  it), and when the two components form one of these pairs, tried in this
  order (each only if enabled in :class:`CollapseModelConfig`):

  1. ``collapse_dropout`` (off by default): DropoutComponent or
     GeneralDropoutComponent, then an Affine (or NaturalGradientAffine),
     Linear, Tdnn or TimeHeightConvolution component: the second component
     with its linear parameters scaled by ``1/(1-p)`` (DropoutComponent) or
     1 (GeneralDropoutComponent), named ``NAME.scaleS`` (S printed with 3
     significant digits). Like Kaldi, the scale is the inverse of what a
     test-mode DropoutComponent applies, so with p > 0 the output changes.
  2. ``collapse_batchnorm`` (off by default): BatchNormComponent (which must
     be in test mode), then an Affine, Linear (becomes an AffineComponent)
     or Tdnn component (given a bias if it had none): the batch-norm scale
     and offset are folded into the linear and bias parameters; named
     ``BATCHNORM.NAME``; an identity batch-norm keeps the second component.
  3. ``collapse_affine`` (on): FixedAffineComponent or Affine component that
     does not reduce the dimension, then an Affine component: one new
     AffineComponent (learning rate 0.001, other options at their defaults)
     named ``NAME1.NAME2``, block-diagonal in the first component when the
     Descriptor appends several time offsets of it.
  4. ``collapse_scale`` (on): an Affine component then a FixedScaleComponent
     of the same dimension: a copy of the affine component (same type and
     options) with scaled rows, named ``NAME1.NAME2``.

  A component of the wanted name that already exists is reused. The node
  keeps its name but takes the new component, and its Descriptor is the old
  one with ``foo`` replaced by ``foo``'s own input Descriptor (printed,
  substituted and re-parsed, so offsets are normalized as Kaldi does).
- then orphan nodes and orphan components are removed (Kaldi's
  RemoveOrphanNodes and RemoveOrphanComponents, with their log lines) and,
  when something changed, ``Added N components, removed M`` is logged.

Arithmetic: every new parameter is computed with the float32 operations
Kaldi performs, in the order Kaldi's BLAS performs them, so a collapsed model
written in text is Kaldi's, byte for byte. The oracle (kaldi-ref) ran on an
AMD EPYC (Zen) machine with Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) and two
threads; that build picks its Haswell kernels there (it reports core
"Haswell"), so those are the orders reproduced. Matrix products go through
:func:`sgemm_nn` and matrix-vector products through :func:`sgemv_add`; see
those for the orders. Element-wise scalings are single float32 roundings, as
in Kaldi. kaldi-ref's collapsed models pin down the serial sgemm path and
the sgemv kernels; both functions, threaded and multi-block paths included,
were checked bit for bit against that OpenBLAS build on about a thousand
random shapes each (tests/test_collapse.py keeps digests of a few).
"""

import logging
from dataclasses import dataclass

import numpy as np

from ..components.affine import AffineComponent, FixedAffineComponent, LinearComponent
from ..components.general_misc import GeneralDropoutComponent
from ..components.normalize import BatchNormComponent
from ..components.scale_offset import FixedScaleComponent
from ..components.simple_misc import DropoutComponent
from ..components.tdnn import TdnnComponent
from ..components.time_height_convolution import TimeHeightConvolutionComponent
from ..errors import NnetError
from .descriptor import (OffsetForwardingDescriptor, SimpleForwardingDescriptor,
                         SimpleSumDescriptor, parse_descriptor)
from .nnet import kComponent, kDescriptor
from .utils import remove_orphan_components, remove_orphan_nodes

logger = logging.getLogger("pynnet3")

_F32 = np.float32
_F64 = np.float64

# How the oracle's OpenBLAS ran (see the module docstring): its thread count
# and the thresholds of its interface and drivers.
_OPENBLAS_THREADS = 2
_GEMM_MULTITHREAD_THRESHOLD = 4
_SMP_THRESHOLD_MIN = 65536.0
_GEMV_NBMAX = 4096
# The Haswell sgemm blocking (param.h: P, Q, unrolls; R from the default
# 128 MiB buffer) and the threaded driver's defaults in a generic build.
_GEMM_P = 320
_GEMM_Q = 320
_GEMM_R = 104512
_GEMM_UNROLL_M = 8
_GEMM_UNROLL_N = 4
_SWITCH_RATIO = 2
_DIVIDE_RATE = 2

# Kaldi's ModelCollapser gives up after this many sweeps.
_MAX_SWEEPS = 10


@dataclass(slots=True)
class CollapseModelConfig:
    """Kaldi's CollapseModelConfig (same defaults: only the affine and scale
    collapses are on)."""

    collapse_dropout: bool = False
    collapse_batchnorm: bool = False
    collapse_affine: bool = True
    collapse_scale: bool = True


def collapse_model(nnet, config=None):
    """Kaldi's CollapseModel: modifies ``nnet`` in place (see the module
    docstring for what is merged, the names given and the arithmetic).
    ``config`` defaults to ``CollapseModelConfig()``. Batch-norm components
    must be in test mode when ``collapse_batchnorm`` is set (NnetError
    otherwise). Returns ``nnet``."""
    _ModelCollapser(config or CollapseModelConfig(), nnet).collapse()
    return nnet


# ---------------------------------------------------------------------------
# OpenBLAS arithmetic
# ---------------------------------------------------------------------------

def _fma32(a, b, c):
    """float32 fused multiply-add ``a*b + c`` rounded once (broadcasting).

    The product is exact in double; the double sum may round onto a float32
    tie that the exact sum is not on, so such ties are resolved with the
    exact remainder of the double addition (TwoSum)."""
    p = np.asarray(a, _F32).astype(_F64) * np.asarray(b, _F32).astype(_F64)
    c = np.asarray(c, _F32).astype(_F64)
    p, c = np.broadcast_arrays(p, c)
    s = np.asarray(p + c)
    r = s.astype(_F32)
    bits = s.view(np.int64)
    tie = (bits & 0x1FFFFFFF) == 0x10000000
    if tie.any():
        bb = s - p
        err = (p - (s - bb)) + (c - bb)
        fix = tie & (err != 0)
        if fix.any():
            toward = np.where(err[fix] > 0, np.inf, -np.inf)
            r[fix] = np.nextafter(s[fix], toward).astype(_F32)
    return r


def _fma_chains(a, b):
    """For A (M x K) and B (K x N), the two ways the Haswell sgemm kernel
    accumulates a block of k, both starting from +0 and using fused
    multiply-adds: ``(single, paired)``. ``single`` is one chain over k in
    order; ``paired`` runs k in groups of 8, even steps into one accumulator
    and odd steps into a second, then the last K % 8 steps into the first,
    and adds the two accumulators."""
    m, k = a.shape
    n = b.shape[1]
    single = np.zeros((m, n), _F32)
    first = np.zeros((m, n), _F32)
    second = np.zeros((m, n), _F32)
    k8 = k & ~7
    for kk in range(k):
        col, row = a[:, kk:kk + 1], b[kk:kk + 1, :]
        single = _fma32(col, row, single)
        if kk < k8 and kk & 1:
            second = _fma32(col, row, second)
        else:
            first = _fma32(col, row, first)
    return single, first + second


def _mark_paired(paired, ms, mlen, ns, nlen):
    """Mark in ``paired`` (shaped like C) the elements that one call of
    sgemm_kernel_8x4_haswell_2 sums with two accumulators. The call covers
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
    if min_i >= 2 * _GEMM_P:
        return _GEMM_P
    if min_i > _GEMM_P:
        half = min_i // 2 if rounding_first else (min_i + 1) // 2
        return ((half + _GEMM_UNROLL_M - 1) // _GEMM_UNROLL_M) * _GEMM_UNROLL_M
    return min_i


def _jj_steps(start, stop):
    """How a driver packs its own columns of B': 12 at a time, then 4, then
    what is left; each piece goes to its own kernel call."""
    steps = []
    while start < stop:
        width = stop - start
        if width >= 3 * _GEMM_UNROLL_N:
            width = 3 * _GEMM_UNROLL_N
        elif width > _GEMM_UNROLL_N:
            width = _GEMM_UNROLL_N
        steps.append((start, width))
        start += width
    return steps


def _serial_kernel_calls(m, n):
    """The kernel calls of OpenBLAS's serial level-3 driver for an m x n
    result (OpenBLAS's orientation), as ``(ms, mlen, ns, nlen)``."""
    calls = []
    for js in range(0, n, _GEMM_R):
        min_j = min(n - js, _GEMM_R)
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


def _threaded_kernel_calls(m, n):
    """The kernel calls of OpenBLAS's threaded level-3 driver (level3_thread)
    for an m x n result, or None when it hands the work to the serial
    driver. Rows are split between the threads; each thread packs its part
    of the columns (in two halves, 12/4/rest at a time) and then applies its
    rows to the other threads' packed halves whole."""
    threads_m = 1
    if m >= 2 * _SWITCH_RATIO:
        threads_m = _OPENBLAS_THREADS
        while m < threads_m * _SWITCH_RATIO:
            threads_m //= 2
    threads_n = 1
    if n >= _SWITCH_RATIO * threads_m:
        threads_n = (n + _SWITCH_RATIO * threads_m - 1) // (_SWITCH_RATIO * threads_m)
        if threads_m * threads_n > _OPENBLAS_THREADS:
            threads_n = _OPENBLAS_THREADS // threads_m
    threads = threads_m * threads_n
    if threads <= 1:
        return None
    range_m = _split_evenly(m, threads_m, 0)
    calls = []
    for js in range(0, n, _GEMM_R * threads):
        step = min(n - js, _GEMM_R * threads)
        range_n = [js + b for b in _split_evenly(step, threads, _SWITCH_RATIO)]

        def halves(part):
            lo, hi = range_n[part], range_n[part + 1]
            div_n = (hi - lo + _DIVIDE_RATE - 1) // _DIVIDE_RATE
            return [(s, min(hi - s, div_n)) for s in range(lo, hi, div_n)] if div_n else []

        for pos in range(threads):
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


def _k_steps(k, threaded):
    """The blocks of k the drivers take: GEMM_Q at a time; a remainder
    between GEMM_Q and 2 GEMM_Q is halved (the serial driver rounds the half
    up to the unroll, the threaded one to an integer)."""
    steps = []
    ls = 0
    while ls < k:
        min_l = k - ls
        if min_l >= 2 * _GEMM_Q:
            min_l = _GEMM_Q
        elif min_l > _GEMM_Q:
            if threaded:
                min_l = (min_l + 1) // 2
            else:
                min_l = ((min_l // 2 + _GEMM_UNROLL_M - 1) // _GEMM_UNROLL_M) * _GEMM_UNROLL_M
        steps.append((ls, min_l))
        ls += min_l
    return steps


def sgemm_nn(a, b):
    """Kaldi's ``C.AddMatMat(1.0, A, kNoTrans, B, kNoTrans, 0.0)``: A (M x K)
    times B (K x N) in float32, in the order of the oracle's OpenBLAS 0.3.21
    with its Haswell kernels and two threads (see the module docstring).

    Row-major C = A B is OpenBLAS's column-major C' = B' A' with m = N and
    n = M. Haswell has no small-matrix path, so every product goes through
    the level-3 drivers: the threaded one when m n k > 65536 x
    GEMM_MULTITHREAD_THRESHOLD (unless it finds too little to share), the
    serial one otherwise. Every element is the sum, in order, of one
    accumulation per block of k (``_k_steps``), added to C with a fused
    multiply-add by alpha = 1; each block is either a single fused
    multiply-add chain over k or the kernel's two-accumulator form, which
    one depends on where the element falls in the kernel calls the driver
    makes (``_mark_paired``)."""
    a = np.ascontiguousarray(a, _F32)
    b = np.ascontiguousarray(b, _F32)
    rows, k = a.shape
    if b.shape[0] != k:
        raise NnetError("sgemm: inner dimensions differ (%d vs %d)" % (k, b.shape[0]))
    cols = b.shape[1]
    if rows == 0 or cols == 0 or k == 0:
        return np.zeros((rows, cols), _F32)
    calls = None
    if float(cols) * rows * k > _SMP_THRESHOLD_MIN * _GEMM_MULTITHREAD_THRESHOLD:
        calls = _threaded_kernel_calls(cols, rows)
    threaded = calls is not None
    if calls is None:
        calls = _serial_kernel_calls(cols, rows)
    paired = np.zeros((rows, cols), bool)
    for call in calls:
        _mark_paired(paired, *call)
    c = np.zeros((rows, cols), _F32)
    for ls, min_l in _k_steps(k, threaded):
        single, two = _fma_chains(a[:, ls:ls + min_l], b[ls:ls + min_l, :])
        c = c + np.where(paired, two, single)
    return c


def _gemv_lanes_fma(a, x, lanes_width, chunks):
    """Helper of the sgemv kernels: for row-major ``a`` (rows x NB), lane
    accumulators of ``lanes_width`` over the given column chunks
    ``(start, lanes)`` (chunk element j goes to lane j), with fused
    multiply-adds."""
    acc = np.zeros((a.shape[0], lanes_width), _F32)
    for start, width in chunks:
        acc[:, :width] = _fma32(a[:, start:start + width], x[None, start:start + width],
                                acc[:, :width])
    return acc


def _gemv_t_dot_4x4(a, x):
    """sgemv_kernel_4x4 (Haswell micro-kernel): 8 FMA lanes (a leading
    4-chunk, an 8-chunk, then 8-chunks two at a time), reduced as
    ((l0+l4)+(l1+l5)) + ((l2+l6)+(l3+l7))."""
    nb = a.shape[1]
    chunks = []
    i = 0
    if nb & 4:
        chunks.append((0, 4))
        i = 4
    while i < nb:
        chunks.append((i, 8))
        i += 8
    lanes = _gemv_lanes_fma(a, x, 8, chunks)
    t = lanes[:, 4:8] + lanes[:, 0:4]
    return (t[:, 0] + t[:, 1]) + (t[:, 2] + t[:, 3])


def _gemv_t_dot_sse(a, x, two_accumulators):
    """sgemv_kernel_4x2 / 4x1 (SSE, multiply then add): 4 lanes; 4x1 keeps
    the second half of every 8 columns in a second accumulator."""
    nb = a.shape[1]
    first = np.zeros((a.shape[0], 4), _F32)
    second = np.zeros((a.shape[0], 4), _F32)
    i = 0
    if nb & 4:
        first = first + a[:, 0:4] * x[None, 0:4]
        i = 4
    while i < nb:
        first = first + a[:, i:i + 4] * x[None, i:i + 4]
        p = a[:, i + 4:i + 8] * x[None, i + 4:i + 8]
        if two_accumulators:
            second = second + p
        else:
            first = first + p
        i += 8
    if two_accumulators:
        first = first + second
    return (first[:, 0] + first[:, 1]) + (first[:, 2] + first[:, 3])


def _gemv_t_block(a, x, y):
    """One column block of sgemv_t_4: y += row dot products (rows in groups
    of 4 through the 4x4 kernel, then a pair, then a single row)."""
    rows = a.shape[0]
    n4 = rows & ~3
    if n4:
        y[:n4] = y[:n4] + _gemv_t_dot_4x4(a[:n4], x)
    r = n4
    if rows & 2:
        y[r:r + 2] = y[r:r + 2] + _gemv_t_dot_sse(a[r:r + 2], x, False)
        r += 2
    if rows & 1:
        y[r:r + 1] = y[r:r + 1] + _gemv_t_dot_sse(a[r:r + 1], x, True)


def _gemv_t_kernel(a, x, y):
    """OpenBLAS's sgemv_t_4.c on a row-major matrix (rows = its n, columns =
    its m): column blocks of up to 4096 (a multiple of 4), then the last
    1-3 columns as separate float32 products and sums (the Haswell kernels
    are built with -mavx2 but not -mfma, so GCC contracts nothing there)."""
    rows, m = a.shape
    m3 = m & 3
    m1 = m & -4
    m2 = (m & (_GEMV_NBMAX - 1)) - m3
    nb = _GEMV_NBMAX
    col = 0
    while nb == _GEMV_NBMAX:
        m1 -= nb
        if m1 < 0:
            if m2 == 0:
                break
            nb = m2
        _gemv_t_block(a[:, col:col + nb], x[col:col + nb], y)
        col += nb
    if m3:
        t = a[:, col] * x[col]
        for j in range(col + 1, col + m3):
            t = t + a[:, j] * x[j]
        y[:] = y + t


def sgemv_add(mat, x, y):
    """Kaldi's ``y.AddMatVec(1.0, M, kNoTrans, x, 1.0)`` in OpenBLAS's order
    (row-major no-transpose is OpenBLAS's sgemv_t); returns the new ``y``.

    Rows are split between threads as OpenBLAS splits them (from 2304 x
    GEMM_MULTITHREAD_THRESHOLD elements on); each part goes through the
    kernel, whose row grouping decides the summation order."""
    mat = np.ascontiguousarray(mat, _F32)
    x = np.ascontiguousarray(x, _F32)
    y = np.array(y, dtype=_F32)
    rows, cols = mat.shape
    if rows == 0 or cols == 0:
        return y
    nthreads = 1 if rows * cols < 2304 * _GEMM_MULTITHREAD_THRESHOLD else _OPENBLAS_THREADS
    start, remaining, num = 0, rows, 0
    while remaining > 0:
        width = (remaining + nthreads - num - 1) // (nthreads - num) if num < nthreads \
            else remaining
        width = min(max(width, 4), remaining)
        _gemv_t_kernel(mat[start:start + width], x, y[start:start + width])
        start += width
        remaining -= width
        num += 1
    return y


# ---------------------------------------------------------------------------
# The collapser
# ---------------------------------------------------------------------------

class _ModelCollapser:
    """Kaldi's ModelCollapser (see the module docstring)."""

    __slots__ = ("config", "nnet")

    def __init__(self, config, nnet):
        self.config = config
        self.nnet = nnet

    def collapse(self):
        nnet = self.nnet
        num_nodes = nnet.num_nodes()
        num_components1 = nnet.num_components()
        changed = True
        sweeps = 0
        while changed:
            changed = False
            for n in range(num_nodes):
                if self._optimize_node(n):
                    changed = True
            if sweeps >= _MAX_SWEEPS:
                raise NnetError("Something went wrong collapsing model: more than %d "
                                "passes over the nodes were needed" % _MAX_SWEEPS)
            sweeps += 1
        num_components2 = nnet.num_components()
        remove_orphan_nodes(nnet)
        remove_orphan_components(nnet)
        num_components3 = nnet.num_components()
        if num_components2 != num_components1 or num_components3 != num_components2:
            logger.info("Added %d components, removed %d",
                        num_components2 - num_components1, num_components2 - num_components3)

    # -- which nodes ------------------------------------------------------------------
    @staticmethod
    def _sum_descriptor_source(sum_desc):
        """The node a part reads when it is ``foo`` or ``Offset(foo, ...)``
        (Kaldi's SumDescriptorIsCollapsible), else -1."""
        if not isinstance(sum_desc, SimpleSumDescriptor):
            return -1
        fd = sum_desc.src
        if isinstance(fd, OffsetForwardingDescriptor):
            fd = fd.src
        if not isinstance(fd, SimpleForwardingDescriptor):
            return -1
        return fd.src_node

    def _descriptor_source(self, desc):
        """The single node every part of ``desc`` reads, or -1 (Kaldi's
        DescriptorIsCollapsible)."""
        ans = self._sum_descriptor_source(desc.part(0))
        for i in range(1, desc.num_parts()):
            if ans != -1 and self._sum_descriptor_source(desc.part(i)) != ans:
                ans = -1
        return ans

    def _replace_node_in_descriptor(self, src, node_to_replace, expr):
        """``src`` with node ``node_to_replace`` replaced by the expression
        ``expr``: printed with that node's name standing for ``expr``'s text,
        then parsed with the real names (which normalizes offsets)."""
        names = list(self.nnet.node_names)
        names[node_to_replace] = expr.write_config(self.nnet.node_names)
        return parse_descriptor(src.write_config(names), self.nnet.node_names)

    def _optimize_node(self, node_index):
        nnet = self.nnet
        descriptor_node = nnet.nodes[node_index]
        if descriptor_node.node_type != kDescriptor or node_index + 1 >= nnet.num_nodes():
            return False
        component_node = nnet.nodes[node_index + 1]
        if component_node.node_type != kComponent:
            return False
        input_node_index = self._descriptor_source(descriptor_node.descriptor)
        if input_node_index == -1:
            return False
        input_node = nnet.nodes[input_node_index]
        if input_node.node_type != kComponent:
            return False
        combined = self._collapse_components(input_node.component_index,
                                             component_node.component_index)
        if combined == -1:
            return False
        component_node.component_index = combined
        input_descriptor = nnet.nodes[input_node_index - 1].descriptor
        descriptor_node.descriptor = self._replace_node_in_descriptor(
            descriptor_node.descriptor, input_node_index, input_descriptor)
        return True

    # -- which pairs ------------------------------------------------------------------
    def _collapse_components(self, c1, c2):
        config = self.config
        for enabled, method in ((config.collapse_dropout, self._collapse_dropout),
                                (config.collapse_batchnorm, self._collapse_batchnorm),
                                (config.collapse_affine, self._collapse_affine),
                                (config.collapse_scale, self._collapse_scale)):
            if enabled:
                ans = method(c1, c2)
                if ans != -1:
                    return ans
        return -1

    def _collapse_dropout(self, c1, c2):
        comp1 = self.nnet.get_component(c1)
        if isinstance(comp1, DropoutComponent):
            # Kaldi computes 1/(1-p) in double and stores it as a float
            # (infinite for p = 1).
            with np.errstate(divide="ignore"):
                scale = float(_F32(_F64(1.0) / (_F64(1.0) - _F64(comp1.dropout_proportion))))
        elif isinstance(comp1, GeneralDropoutComponent):
            scale = 1.0
        else:
            return -1
        return self._get_scaled_component_index(c2, scale)

    def _collapse_batchnorm(self, c1, c2):
        comp1 = self.nnet.get_component(c1)
        if not isinstance(comp1, BatchNormComponent):
            return -1
        if not comp1.test_mode or comp1.offset is None or comp1.offset.shape[0] == 0:
            raise NnetError("Expected batch-norm components to have test-mode set "
                            "(component %s)" % self.nnet.get_component_name(c1))
        return self._get_diagonally_pre_modified_component_index(
            comp1.offset, comp1.scale_vec, self.nnet.get_component_name(c1), c2)

    def _existing_or_new_name(self, c1, c2):
        name = "%s.%s" % (self.nnet.get_component_name(c1), self.nnet.get_component_name(c2))
        return name, self.nnet.get_component_index(name)

    def _collapse_affine(self, c1, c2):
        nnet = self.nnet
        comp1, comp2 = nnet.get_component(c1), nnet.get_component(c2)
        if not isinstance(comp2, AffineComponent) or \
                not isinstance(comp1, (FixedAffineComponent, AffineComponent)):
            return -1
        name, existing = self._existing_or_new_name(c1, c2)
        if existing >= 0:
            return existing
        if comp1.input_dim() > comp1.output_dim():
            # Merging after a dimension-reducing transform would cost time.
            return -1
        linear1, bias1 = comp1.linear_params, comp1.bias_params
        output_dim1, input_dim1 = linear1.shape
        input_dim2 = comp2.input_dim()
        if input_dim2 % output_dim1 != 0:
            raise NnetError("cannot collapse components %s and %s: input dim %d is not a "
                            "multiple of %d" % (nnet.get_component_name(c1),
                                                nnet.get_component_name(c2), input_dim2,
                                                output_dim1))
        multiple = input_dim2 // output_dim1
        # The first transform repeated block-diagonally, once per appended part.
        bias1_full = np.tile(np.asarray(bias1, _F32), multiple)
        linear1_full = np.zeros((input_dim2, multiple * input_dim1), _F32)
        for i in range(multiple):
            linear1_full[i * output_dim1:(i + 1) * output_dim1,
                         i * input_dim1:(i + 1) * input_dim1] = linear1
        new_bias = sgemv_add(comp2.linear_params, bias1_full, comp2.bias_params)
        new_linear = sgemm_nn(comp2.linear_params, linear1_full)
        return nnet.add_component(name, AffineComponent(new_linear, new_bias))

    def _collapse_scale(self, c1, c2):
        nnet = self.nnet
        comp1, comp2 = nnet.get_component(c1), nnet.get_component(c2)
        if not isinstance(comp1, AffineComponent) or \
                not isinstance(comp2, FixedScaleComponent) or \
                comp1.output_dim() != comp2.input_dim():
            return -1
        name, existing = self._existing_or_new_name(c1, c2)
        if existing >= 0:
            return existing
        scales = np.asarray(comp2.scales, _F32)
        new = comp1.copy()
        new.set_params(np.asarray(comp1.bias_params, _F32) * scales,
                       np.asarray(comp1.linear_params, _F32) * scales[:, None])
        return nnet.add_component(name, new)

    # -- the modified components -------------------------------------------------------
    def _get_diagonally_pre_modified_component_index(self, offset, scale, src_identifier,
                                                     component_index):
        """The component ``component_index`` preceded by y = scale * x + offset
        (Kaldi's GetDiagonallyPreModifiedComponentIndex), or -1 if it is not
        an Affine, Linear or Tdnn component."""
        nnet = self.nnet
        offset = np.asarray(offset, _F32)
        scale = np.asarray(scale, _F32)
        if offset.shape[0] == 0 or offset.shape != scale.shape:
            raise NnetError("batch-norm offset and scale must be non-empty and of equal size")
        if offset.max() == 0.0 and offset.min() == 0.0 and \
                scale.max() == 1.0 and scale.min() == 1.0:
            return component_index
        name = "%s.%s" % (src_identifier, nnet.get_component_name(component_index))
        existing = nnet.get_component_index(name)
        if existing >= 0:
            return existing
        comp = nnet.get_component(component_index)
        if isinstance(comp, AffineComponent):
            new = comp.copy()
            new.bias_params, new.linear_params = self._pre_multiply(
                offset, scale, new.bias_params, new.linear_params, name)
        elif isinstance(comp, LinearComponent):
            new = AffineComponent(comp.params, np.zeros(comp.output_dim(), _F32),
                                  comp.learning_rate)
            new.bias_params, new.linear_params = self._pre_multiply(
                offset, scale, new.bias_params, new.linear_params, name)
        elif isinstance(comp, TdnnComponent):
            new = comp.copy()
            if new.bias_params.shape[0] == 0:
                new.bias_params = np.zeros(new.output_dim(), _F32)
            new.bias_params, new.linear_params = self._pre_multiply(
                offset, scale, new.bias_params, new.linear_params, name)
        else:
            return -1
        return nnet.add_component(name, new)

    @staticmethod
    def _pre_multiply(offset, scale, bias, linear, name):
        """Kaldi's PreMultiplyAffineParameters: with the transform repeated to
        the input dimension, b += W offset, then W's columns times scale."""
        linear = np.asarray(linear, _F32)
        input_dim, transform_dim = linear.shape[1], offset.shape[0]
        if input_dim % transform_dim != 0:
            raise NnetError("cannot fold a %d-dimensional batch-norm into %s with input dim %d"
                            % (transform_dim, name, input_dim))
        repeats = input_dim // transform_dim
        full_offset = np.tile(offset, repeats)
        full_scale = np.tile(scale, repeats)
        new_bias = sgemv_add(linear, full_offset, bias)
        return new_bias, linear * full_scale[None, :]

    def _get_scaled_component_index(self, component_index, scale):
        """A component computing what ``component_index`` computes on its
        input times ``scale`` (Kaldi's GetScaledComponentIndex), or -1."""
        if scale == 1.0:
            return component_index
        nnet = self.nnet
        # std::setprecision(3) on a float: %.3g of its value.
        name = "%s.scale%.3g" % (nnet.get_component_name(component_index), scale)
        existing = nnet.get_component_index(name)
        if existing >= 0:
            return existing
        comp = nnet.get_component(component_index)
        factor = _F32(scale)
        if isinstance(comp, (AffineComponent, TimeHeightConvolutionComponent, TdnnComponent)):
            new = comp.copy()
            new.linear_params = np.asarray(new.linear_params, _F32) * factor
        elif isinstance(comp, LinearComponent):
            new = comp.copy()
            new.params = np.asarray(new.params, _F32) * factor
        else:
            return -1
        return nnet.add_component(name, new)
