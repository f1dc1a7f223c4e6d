"""Kaldi's ConvolutionModel (nnet3/convolution.h): the structure of a
time-height convolution.

A :class:`ConvolutionModel` is the structure of a 2-D convolution whose width
axis is nnet3's time index ``t`` and whose height axis lives in the feature
dimension (``height * num_filters``, filter index with stride 1). It is a list
of (time-offset, height-offset) pairs plus the set of *required* time offsets
(the others are zero-padded when absent). How one component call is planned
is :mod:`.convolution_computation`; how it is run, :mod:`.convolve`.

Guarantees: the model, its serialization and its Info() are Kaldi's.
"""

import math
import re

from ..errors import ComputationError


def split_ints(text, sep=","):
    """Kaldi's SplitStringToIntegers(text, sep, omit_empty_strings=false):
    a list of ints, or None when some piece is not an integer ('' gives [])."""
    if text == "":
        return []
    out = []
    for piece in text.split(sep):
        if not re.fullmatch(r"\s*[+-]?\d+", piece):
            return None
        value = int(piece)
        if not -2**31 <= value < 2**31:
            return None
        out.append(value)
    return out


def _gcd(m, n):
    """Kaldi's Gcd for the non-negative arguments used here (0,0 is an error)."""
    if m == 0 and n == 0:
        raise ComputationError("convolution: undefined GCD of 0 and 0")
    return math.gcd(m, n)


def _is_sorted_and_uniq(values):
    return all(values[i] < values[i + 1] for i in range(len(values) - 1))


# ---------------------------------------------------------------------------
# ConvolutionModel
# ---------------------------------------------------------------------------

class ConvolutionModel:
    """Structure of a time-height convolution (Kaldi's ConvolutionModel).

    ``offsets``: sorted unique list of (time_offset, height_offset);
    ``required_time_offsets``: sorted unique list (Kaldi's std::set);
    derived: ``all_time_offsets`` (sorted unique time offsets) and
    ``time_offsets_modulus`` (GCD of their differences, 0 if only one).
    Parameters for it are a (num_filters_out, len(offsets) * num_filters_in)
    matrix, offset index with the larger stride.
    """

    __slots__ = ("num_filters_in", "num_filters_out", "height_in", "height_out",
                 "height_subsample_out", "offsets", "required_time_offsets",
                 "all_time_offsets", "time_offsets_modulus")

    def __init__(self, num_filters_in=0, num_filters_out=0, height_in=0, height_out=0,
                 height_subsample_out=1, offsets=(), required_time_offsets=()):
        self.num_filters_in = num_filters_in
        self.num_filters_out = num_filters_out
        self.height_in = height_in
        self.height_out = height_out
        self.height_subsample_out = height_subsample_out
        self.offsets = [tuple(o) for o in offsets]
        self.required_time_offsets = sorted(set(required_time_offsets))
        self.all_time_offsets = []
        self.time_offsets_modulus = 0
        if self.offsets:
            self.compute_derived()

    def copy(self):
        m = ConvolutionModel.__new__(ConvolutionModel)
        for name in self.__slots__:
            value = getattr(self, name)
            setattr(m, name, list(value) if isinstance(value, list) else value)
        return m

    def __eq__(self, other):
        return isinstance(other, ConvolutionModel) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def input_dim(self):
        return self.num_filters_in * self.height_in

    def output_dim(self):
        return self.num_filters_out * self.height_out

    def param_rows(self):
        return self.num_filters_out

    def param_cols(self):
        return self.num_filters_in * len(self.offsets)

    def compute_derived(self):
        """Sets all_time_offsets and time_offsets_modulus from offsets."""
        self.all_time_offsets = sorted({t for t, _ in self.offsets})
        modulus = 0
        for a, b in zip(self.all_time_offsets, self.all_time_offsets[1:]):
            modulus = _gcd(modulus, b - a)
        self.time_offsets_modulus = modulus

    def check(self, check_heights_used=True, allow_height_padding=True):
        """Kaldi's ConvolutionModel::Check: returns (ok, reason)."""
        if (self.num_filters_in <= 0 or self.num_filters_out <= 0 or self.height_in <= 0
                or self.height_out <= 0 or self.height_subsample_out <= 0
                or not self.offsets or not self.required_time_offsets):
            return False, "convolution model fails basic check (non-positive sizes or no offsets)"
        if not _is_sorted_and_uniq(self.offsets):
            return False, "offsets are not sorted and unique"
        all_t = set(self.all_time_offsets)
        if any(t not in all_t for t in self.required_time_offsets):
            return False, "required time offsets are not a subset of the time offsets"
        required = set(self.required_time_offsets)
        h_in_used = [False] * self.height_in
        offsets_used = [False] * len(self.offsets)
        for h_out in range(0, self.height_out * self.height_subsample_out,
                           self.height_subsample_out):
            some_input_available = False
            for i, (t_off, h_off) in enumerate(self.offsets):
                h_in = h_out + h_off
                if 0 <= h_in < self.height_in:
                    offsets_used[i] = True
                    h_in_used[h_in] = True
                    if t_off in required:
                        some_input_available = True
                elif not allow_height_padding:
                    return False, "height padding not allowed but is required"
            if not some_input_available:
                return False, ("for output height %d no input is available if only the "
                               "required time offsets are available" % h_out)
        if check_heights_used:
            for h, used in enumerate(h_in_used):
                if not used:
                    return False, "the input at height %d is never used" % h
        for i, used in enumerate(offsets_used):
            if not used:
                return False, ("(time,height) offset (%d,%d) is never used"
                               % self.offsets[i])
        return True, ""

    def info(self):
        """Kaldi's ConvolutionModel::Info()."""
        return ("num-filters-in=%d, num-filters-out=%d, height-in=%d, height-out=%d, "
                "height-subsample-out=%d, {time,height}-offsets=[%s], "
                "required-time-offsets=[%s], input-dim=%d, output-dim=%d" % (
                    self.num_filters_in, self.num_filters_out, self.height_in,
                    self.height_out, self.height_subsample_out,
                    " ".join("%d,%d" % o for o in self.offsets),
                    ",".join(str(t) for t in self.required_time_offsets),
                    self.input_dim(), self.output_dim()))

    def write(self, stream):
        stream.write_token("<ConvolutionModel>")
        stream.write_token("<NumFiltersIn>")
        stream.write_int32(self.num_filters_in)
        stream.write_token("<NumFiltersOut>")
        stream.write_int32(self.num_filters_out)
        stream.write_token("<HeightIn>")
        stream.write_int32(self.height_in)
        stream.write_token("<HeightOut>")
        stream.write_int32(self.height_out)
        stream.write_token("<HeightSubsampleOut>")
        stream.write_int32(self.height_subsample_out)
        stream.write_token("<Offsets>")
        stream.write_int_pair_vector(self.offsets)
        stream.write_token("<RequiredTimeOffsets>")
        stream.write_int_vector(self.required_time_offsets)
        stream.write_token("</ConvolutionModel>")

    @classmethod
    def read(cls, stream):
        """Reads ``[<ConvolutionModel>] <NumFiltersIn> ... </ConvolutionModel>``."""
        start = stream.pos
        stream.read_optional_token("<ConvolutionModel>")
        m = cls.__new__(cls)
        stream.expect_token("<NumFiltersIn>")
        m.num_filters_in = stream.read_int32()
        stream.expect_token("<NumFiltersOut>")
        m.num_filters_out = stream.read_int32()
        stream.expect_token("<HeightIn>")
        m.height_in = stream.read_int32()
        stream.expect_token("<HeightOut>")
        m.height_out = stream.read_int32()
        stream.expect_token("<HeightSubsampleOut>")
        m.height_subsample_out = stream.read_int32()
        stream.expect_token("<Offsets>")
        m.offsets = stream.read_int_pair_vector()
        stream.expect_token("<RequiredTimeOffsets>")
        # Kaldi stores these in a std::set: order and repeats are normalized.
        m.required_time_offsets = sorted(set(stream.read_int_vector()))
        stream.expect_token("</ConvolutionModel>")
        if not m.offsets:
            raise stream.error("convolution model has no offsets", start)
        m.compute_derived()
        ok, reason = m.check(False, True)
        if not ok:
            raise stream.error("invalid convolution model: " + reason, start)
        return m
