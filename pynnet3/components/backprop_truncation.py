"""BackpropTruncationComponent: identity (times ``scale``) forward, with
derivative clipping and periodic zeroing backward, for recurrent networks.

Backward, each row's derivative is scaled so its 2-norm is at most
``clipping-threshold``, and rows whose frame crosses a multiple of
``zeroing-interval`` (shifted by the sequence index n) have their derivative
zeroed when its norm exceeds ``zeroing-threshold``. Which rows may be zeroed
depends on the output Indexes, so the component is not "simple": it computes
that at compile time (:class:`BackpropTruncationComponentPrecomputedIndexes`).
"""

import numpy as np

from .. import _fast
from ..common.floats import f32, kaldi_str
from ..errors import NnetError
from .base import Component, Field, P, PrecomputedIndexes
from .nonlinear import array_module_of, heaviside, invalid_initializer

# The kernel of the Index-list loops below when it is loaded (the one
# pynnet3._fast.load policy); else the Python twins run.
_kernel = _fast.load("backprop_truncation_kernel")

_F32 = np.float32


def zeroing_rows(output_indexes, zeroing_interval, recurrence_interval):
    """(zeroing, count): zeroing[i] = -1.0 (float32) for the rows whose
    t - n crosses a multiple of ``zeroing_interval`` since t -
    ``recurrence_interval`` - n, else 0.0; count = how many rows are -1."""
    zi, ri = zeroing_interval, recurrence_interval
    zeroing = np.zeros(len(output_indexes), dtype=_F32)
    count = 0
    for i, index in enumerate(output_indexes):
        n, t = index[0], index[1]
        if (t - n) // zi != (t - ri - n) // zi:
            zeroing[i] = -1.0
            count += 1
    return zeroing, count


class BackpropTruncationComponentPrecomputedIndexes(PrecomputedIndexes):
    """Per output row: -1.0 where the row is at a zeroing boundary, else 0;
    and the number of such rows (``zeroing_sum``)."""

    type_name = "BackpropTruncationComponentPrecomputedIndexes"
    layout = (
        Field("<Zeroing>", "vector", "zeroing"),
        Field("<ZeroingSum>", "float", "zeroing_sum"),
    )

    def __init__(self, zeroing=None, zeroing_sum=0.0):
        self.zeroing = np.zeros(0, dtype=_F32) if zeroing is None else np.asarray(zeroing, _F32)
        self.zeroing_sum = f32(zeroing_sum)


class BackpropTruncationComponent(Component):
    """Config: ``dim`` (required), ``scale`` (1), ``clipping-threshold`` (30),
    ``zeroing-threshold`` (15), ``zeroing-interval`` (20),
    ``recurrence-interval`` (1)."""

    type_name = "BackpropTruncationComponent"

    # Kaldi's propagate is copies and one rounding per element: so is ours.
    kaldi_exact = True

    def __init__(self, dim=0, scale=1.0, clipping_threshold=-1.0, zeroing_threshold=-1.0,
                 zeroing_interval=0, recurrence_interval=0):
        self.dim = int(dim)
        self.scale_value = f32(scale)
        self.clipping_threshold = f32(clipping_threshold)
        self.zeroing_threshold = f32(zeroing_threshold)
        self.zeroing_interval = int(zeroing_interval)
        self.recurrence_interval = int(recurrence_interval)
        self.num_clipped = 0.0
        self.num_zeroed = 0.0
        self.count = 0.0
        self.count_zeroing_boundaries = 0.0

    def init_from_config(self, cfl):
        dim = cfl.get_int("dim")
        scale = f32(cfl.get_float("scale", 1.0))
        clipping_threshold = f32(cfl.get_float("clipping-threshold", 30.0))
        zeroing_threshold = f32(cfl.get_float("zeroing-threshold", 15.0))
        zeroing_interval = cfl.get_int("zeroing-interval", 20)
        recurrence_interval = cfl.get_int("recurrence-interval", 1)
        if (dim is None or clipping_threshold < 0 or zeroing_threshold < 0
                or zeroing_interval < 1 or recurrence_interval < 1 or dim <= 0):
            raise invalid_initializer(cfl, self.type_name)
        if not scale > 0.0:
            raise cfl.error("BackpropTruncationComponent: scale must be > 0")
        self.__init__(dim, scale, clipping_threshold, zeroing_threshold, zeroing_interval,
                      recurrence_interval)

    def input_dim(self):
        return self.dim

    def output_dim(self):
        return self.dim

    def properties(self):
        return int(P.kPropagateInPlace | P.kBackpropInPlace)

    def info(self):
        clipped = self.num_clipped / self.count if self.count > 0.0 else 0.0
        zeroed = (self.num_zeroed / self.count_zeroing_boundaries
                  if self.count_zeroing_boundaries > 0.0 else 0.0)
        return ("%s, dim=%d, scale=%s, count=%s, recurrence-interval=%d, "
                "clipping-threshold=%s, clipped-proportion=%s, zeroing-threshold=%s, "
                "zeroing-interval=%d, zeroed-proportion=%s, count-zeroing-boundaries=%d" % (
                    self.type_name, self.dim, kaldi_str(self.scale_value),
                    kaldi_str(self.count, 3), self.recurrence_interval,
                    kaldi_str(self.clipping_threshold), kaldi_str(clipped),
                    kaldi_str(self.zeroing_threshold), self.zeroing_interval,
                    kaldi_str(zeroed), int(self.count_zeroing_boundaries)))

    # -- serialization -------------------------------------------------------------
    def read_body(self, stream):
        stream.expect_token("<Dim>")
        self.dim = stream.read_int32()
        start, token = stream.pos, stream.read_token()
        self.scale_value = 1.0
        if token == "<Scale>":
            self.scale_value = stream.read_float()
            start, token = stream.pos, stream.read_token()
        if token != "<ClippingThreshold>":
            raise stream.error("expected <ClippingThreshold>, got '%s'" % token, start)
        self.clipping_threshold = stream.read_float()
        stream.expect_token("<ZeroingThreshold>")
        self.zeroing_threshold = stream.read_float()
        stream.expect_token("<ZeroingInterval>")
        self.zeroing_interval = stream.read_int32()
        stream.expect_token("<RecurrenceInterval>")
        self.recurrence_interval = stream.read_int32()
        stream.expect_token("<NumElementsClipped>")
        self.num_clipped = stream.read_double()
        stream.expect_token("<NumElementsZeroed>")
        self.num_zeroed = stream.read_double()
        stream.expect_token("<NumElementsProcessed>")
        self.count = stream.read_double()
        stream.expect_token("<NumZeroingBoundaries>")
        self.count_zeroing_boundaries = stream.read_double()
        start = stream.pos
        stream.expect_token("</BackpropTruncationComponent>")
        if self.dim <= 0 or self.zeroing_interval <= 0 or self.recurrence_interval <= 0:
            raise stream.error("BackpropTruncationComponent: bad dim %d / zeroing-interval %d "
                               "/ recurrence-interval %d" % (self.dim, self.zeroing_interval,
                                                              self.recurrence_interval), start)

    def write_body(self, stream):
        stream.write_token("<Dim>")
        stream.write_int32(self.dim)
        stream.write_token("<Scale>")
        stream.write_float(self.scale_value)
        stream.write_token("<ClippingThreshold>")
        stream.write_float(self.clipping_threshold)
        stream.write_token("<ZeroingThreshold>")
        stream.write_float(self.zeroing_threshold)
        stream.write_token("<ZeroingInterval>")
        stream.write_int32(self.zeroing_interval)
        stream.write_token("<RecurrenceInterval>")
        stream.write_int32(self.recurrence_interval)
        stream.write_token("<NumElementsClipped>")
        stream.write_double(self.num_clipped)
        stream.write_token("<NumElementsZeroed>")
        stream.write_double(self.num_zeroed)
        stream.write_token("<NumElementsProcessed>")
        stream.write_double(self.count)
        stream.write_token("<NumZeroingBoundaries>")
        stream.write_double(self.count_zeroing_boundaries)

    # -- compilation ------------------------------------------------------------------
    def precompute_indexes(self, misc_info, input_indexes, output_indexes, need_backprop):
        """Marks rows whose t crosses a multiple of zeroing-interval since
        t - recurrence-interval (boundaries shifted by n, so that zeroing does
        not always fall on the same frames)."""
        if len(input_indexes) != len(output_indexes):
            raise NnetError("BackpropTruncationComponent: %d input and %d output indexes"
                            % (len(input_indexes), len(output_indexes)))
        zi, ri = self.zeroing_interval, self.recurrence_interval
        marked = None
        if _kernel is not None and type(output_indexes) is list:
            # the C twin (recurrent nets call this once per frame of every layer)
            marked = _kernel.backprop_truncation_zeroing(output_indexes, zi, ri)
        zeroing, count = marked if marked is not None else zeroing_rows(output_indexes, zi, ri)
        if count >= 2 ** 24:
            return BackpropTruncationComponentPrecomputedIndexes(zeroing, -float(zeroing.sum()))
        # Kaldi's -zeroing.Sum() in float is exactly the count here, and zeroing
        # is float32 already: the fields are set directly (a recurrent net
        # compiles this once per frame per layer; __init__'s conversions cost
        # as much as the rest).
        pre = BackpropTruncationComponentPrecomputedIndexes.__new__(
            BackpropTruncationComponentPrecomputedIndexes)
        pre.zeroing = zeroing
        # -Sum() of an all-zero vector is -0.0, which Kaldi writes as "-0".
        pre.zeroing_sum = float(count) if count else -0.0
        return pre

    # -- computation ----------------------------------------------------------------------
    def propagate(self, indexes, in_value, out):
        if self.scale_value != 1.0:
            out[...] = in_value * _F32(self.scale_value)
        else:
            out[...] = in_value
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        if indexes is None or indexes.zeroing.shape[0] != out_deriv.shape[0]:
            raise NnetError("BackpropTruncationComponent (%s): precomputed indexes missing or "
                            "of the wrong size" % debug_info)
        xp = array_module_of(out_deriv)
        to_update = to_update if isinstance(to_update, BackpropTruncationComponent) else None
        deriv = out_deriv.astype(xp.float32, copy=True)
        if self.scale_value != 1.0:
            deriv *= _F32(self.scale_value)
        rows = deriv.shape[0]
        with np.errstate(over="ignore"):  # an infinite norm gives a zero scale, as in Kaldi
            sumsq = (deriv * deriv).sum(axis=1, dtype=xp.float32)
        clipping = self.clipping_threshold if self.clipping_threshold > 0.0 else 1.0e+10
        clip_scales = sumsq * _F32(clipping ** -2.0)
        num_not_scaled = int((clip_scales < 1.0).sum())
        clip_scales = xp.maximum(clip_scales, _F32(1.0)) ** _F32(-0.5)
        if to_update is not None:
            to_update.num_clipped += rows - num_not_scaled
            to_update.count += rows
        zeroing = self.zeroing_threshold if self.zeroing_threshold > 0.0 else 1.0e+10
        # -1 for rows at a zeroing boundary whose norm exceeds the threshold
        zero_rows = heaviside(sumsq - _F32(zeroing ** 2)) * xp.asarray(indexes.zeroing)
        if to_update is not None:
            to_update.num_zeroed -= float(zero_rows.sum())
            to_update.count_zeroing_boundaries += indexes.zeroing_sum
        combined = clip_scales * (zero_rows + _F32(1.0))
        in_deriv[...] = deriv * combined[:, None]

    # -- statistics -----------------------------------------------------------------------
    def zero_stats(self):
        self.count = 0.0
        self.count_zeroing_boundaries = 0.0
        self.num_clipped = 0.0
        self.num_zeroed = 0.0

    def scale(self, alpha):
        alpha = f32(alpha)
        self.count *= alpha
        self.count_zeroing_boundaries *= alpha
        self.num_clipped *= alpha
        self.num_zeroed *= alpha

    def add(self, alpha, other):
        if not isinstance(other, BackpropTruncationComponent):
            raise NnetError("cannot add a %s to a BackpropTruncationComponent" % other.type_name)
        alpha = f32(alpha)
        self.count += alpha * other.count
        self.count_zeroing_boundaries += alpha * other.count_zeroing_boundaries
        self.num_clipped += alpha * other.num_clipped
        self.num_zeroed += alpha * other.num_zeroed
