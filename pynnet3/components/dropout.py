"""Dropout and masking components (Kaldi's nnet-general-component.h):
DropoutMaskComponent (a mask that needs no input), GeneralDropoutComponent
(dropout masks shared across time or blocks, and SpecAugment's frequency
masking) and SpecAugmentTimeMaskComponent (SpecAugment's time masking), with
their precomputed indexes. (The simple DropoutComponent is in
:mod:`.parameter_free`.)

Guarantees: serialization (including the optional ``<TestMode>``,
``<Continuous>`` and SpecAugment tokens) is byte-identical to Kaldi's;
Info() and Properties() equal Kaldi's; test mode is deterministic (masks are
all ones, or 1 - dropout-proportion for DropoutMaskComponent). In training
mode the masks have Kaldi's distributions but come from the seedable source
in :mod:`pynnet3.components.kaldi_random`, so individual draws differ from
Kaldi's.
"""

import numpy as np

from . import kaldi_random
from .. import _fast
from ..common.floats import f32, kaldi_str
from ..errors import ComputationError
from .base import Component, Field, InputFree, P, PrecomputedIndexes, array_module

# The kernel of the Index-list loops below when it is loaded (the one
# pynnet3._fast.load policy); else the Python twins run.
_kernel = _fast.load("dropout_kernel")


def _rand_int(low, high):
    """Kaldi's RandInt: uniform on [low, high], inclusive."""
    return kaldi_random.rand_int(low, high)


def _uniform(shape):
    """Uniform [0, 1) float32 draws on the host (Kaldi's CuRand::RandUniform)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return kaldi_random.uniform_matrix(np, shape)


class RandomMixin:
    """Kaldi's RandomComponent: a ``test_mode`` flag (deterministic output)."""

    test_mode = False

    def set_test_mode(self, test_mode):
        """Kaldi's SetTestMode (what --prepare-for-test / nnet3-compute use)."""
        self.test_mode = bool(test_mode)


# ---------------------------------------------------------------------------
# DropoutMaskComponent
# ---------------------------------------------------------------------------

class DropoutMaskComponent(InputFree, RandomMixin, Component):
    """Outputs random 0/1 dropout masks (or continuous scales), needing no
    input; used with LstmNonlinearityComponent's per-frame dropout. In test
    mode every element is 1 - dropout_proportion (or 1 if continuous)."""

    type_name = "DropoutMaskComponent"

    @property
    def kaldi_exact(self):
        """In test mode (or with proportion 0) the mask is a constant, as
        Kaldi's; otherwise Kaldi draws other random numbers."""
        return bool(self.test_mode or self.dropout_proportion == 0.0)

    layout = (
        Field("<OutputDim>", "int", "output_dim_"),
        Field("<DropoutProportion>", "float", "dropout_proportion"),
        Field("<TestMode>", "bool", "test_mode", optional=True, default=False),
        Field("<Continuous>", "flag", "continuous"),
    )

    def properties(self):
        return P.kRandomComponent

    def input_dim(self):
        return self.output_dim_

    def output_dim(self):
        return self.output_dim_

    def init_from_config(self, cfl):
        self.output_dim_ = cfl.get_int("output-dim", 0)
        if not cfl.has("output-dim") or self.output_dim_ <= 0:
            raise cfl.error("DropoutMaskComponent needs output-dim > 0")
        self.dropout_proportion = f32(cfl.get_float("dropout-proportion", 0.5))
        self.continuous = cfl.get_bool("continuous", False)
        self.test_mode = cfl.get_bool("test-mode", False)

    def info(self):
        s = "DropoutMaskComponent, output-dim=%d, dropout-proportion=%s" % (
            self.output_dim_, kaldi_str(self.dropout_proportion))
        if self.continuous:
            s += ", continuous=true"
        return s

    def set_dropout_proportion(self, proportion):
        """Kaldi's SetDropoutProportion (nnet3-copy --edits)."""
        self.dropout_proportion = f32(proportion)

    def propagate(self, indexes, in_value, out):
        xp = array_module(out)
        p = np.float32(self.dropout_proportion)
        if not 0.0 <= p <= 1.0:
            raise ComputationError("DropoutMaskComponent: dropout-proportion %g is not in [0, 1]"
                                   % p)
        if p == 0:
            out[...] = 1.0
            return None
        shape = out.shape
        if self.continuous:
            if self.test_mode:
                out[...] = 1.0
            else:
                out[...] = xp.asarray(_uniform(shape) * (p * np.float32(4.0))
                                      + (np.float32(1.0) - np.float32(2.0) * p))
            return None
        if self.test_mode:
            out[...] = np.float32(1.0) - p
            return None
        mask = (_uniform(shape) - p > 0).astype(np.float32)
        if shape[1] in (2, 3):
            # For LSTMs: never drop both the i and f gates of a row. Row i
            # gets (u < p ? 0 : 1, u > 1 - p ? 0 : 1) from one draw u.
            u = _uniform(shape[0])
            mask[:, 0] = (u - p > 0)
            mask[:, 1] = (-(u - p - np.float32(1.0) + np.float32(2.0) * p) > 0)
        out[...] = xp.asarray(mask)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        # Nothing to propagate back to and nothing to update.
        return None


# ---------------------------------------------------------------------------
# GeneralDropoutComponent
# ---------------------------------------------------------------------------

def dropout_mask_rows(indexes, time_period):
    """(rows, count): rows[i] (int32 array) numbers the distinct (n, t //
    time_period) pairs of ``indexes`` (t ignored when time_period is 0) in
    order of first appearance, as Kaldi's GeneralDropoutComponent numbers its
    mask rows; count = how many there are."""
    rows = {}
    numbers = []
    for index in indexes:
        t = 0 if time_period == 0 else index[1] // time_period
        numbers.append(rows.setdefault((index[0], t), len(rows)))
    return np.asarray(numbers, dtype=np.int32), len(rows)


class GeneralDropoutComponentPrecomputedIndexes(PrecomputedIndexes):
    """num_mask_rows: rows of the dropout-mask matrix (one per (n, t-block),
    times dim/block_dim); indexes: for each row of the (reshaped) data, the
    mask row that multiplies it."""

    type_name = "GeneralDropoutComponentPrecomputedIndexes"
    layout = (
        Field("<NumMaskRows>", "int", "num_mask_rows"),
        Field("<Indexes>", "int_vector", "indexes"),
    )

    def __init__(self, num_mask_rows=0, indexes=None):
        self.num_mask_rows = num_mask_rows
        self.indexes = np.zeros(0, np.int32) if indexes is None else np.asarray(indexes,
                                                                                np.int32)

    def after_read(self):
        self.indexes = np.asarray(self.indexes, np.int32)


class GeneralDropoutComponent(RandomMixin, Component):
    """Dropout with masks shared across all t (time_period == 0) or blocks of
    time_period frames, per sequence n; masks of block_dim repeated across
    the dim. Continuous masks are 1 + 2p * Uniform[-1, 1]; binary masks are
    0 or 1/(1-p). With specaugment_max_proportion > 0 it instead zeroes a
    random band of frequencies (SpecAugment). Identity in test mode."""

    type_name = "GeneralDropoutComponent"

    @property
    def kaldi_exact(self):
        """When it is the identity (test mode, nothing to drop) Kaldi copies,
        as propagate does; otherwise it draws other random numbers."""
        return bool(self._is_identity())

    def properties(self):
        return (P.kRandomComponent | P.kPropagateInPlace | P.kBackpropInPlace | P.kUsesMemo
                | (P.kInputContiguous | P.kOutputContiguous
                   if self.block_dim != self.dim else 0))

    def input_dim(self):
        return self.dim

    def output_dim(self):
        return self.dim

    def init_from_config(self, cfl):
        self.dim = cfl.get_int("dim", 0)
        if not cfl.has("dim") or self.dim <= 0:
            raise cfl.error("GeneralDropoutComponent needs dim > 0")
        self.block_dim = cfl.get_int("block-dim", self.dim)
        if not (self.block_dim > 0 and self.dim % self.block_dim == 0):
            raise cfl.error("Invalid configuration dim=%d, block-dim=%d"
                            % (self.dim, self.block_dim))
        self.time_period = cfl.get_int("time-period", 0)
        self.dropout_proportion = f32(cfl.get_float("dropout-proportion", 0.5))
        self.specaugment_max_proportion = f32(cfl.get_float("specaugment-max-proportion", 0.0))
        self.specaugment_max_regions = cfl.get_int("specaugment-max-regions", 1)
        self.continuous = cfl.get_bool("continuous", False)
        self.test_mode = cfl.get_bool("test-mode", False)
        if self.specaugment_max_proportion != 0.0 and (
                not 0.0 <= self.specaugment_max_proportion <= 1.0 or self.continuous
                or self.specaugment_max_regions < 1):
            raise cfl.error("Invalid config values: specaugment-max-proportion = %s, "
                            "continuous = %s, specaugment-max-regions = %d"
                            % (kaldi_str(self.specaugment_max_proportion),
                               kaldi_str(self.continuous), self.specaugment_max_regions))

    def read_body(self, stream):
        stream.expect_token("<Dim>")
        self.dim = stream.read_int32()
        stream.expect_token("<BlockDim>")
        self.block_dim = stream.read_int32()
        stream.expect_token("<TimePeriod>")
        self.time_period = stream.read_int32()
        stream.expect_token("<DropoutProportion>")
        self.dropout_proportion = stream.read_float()
        self.specaugment_max_proportion = 0.0
        self.specaugment_max_regions = 1
        if stream.read_optional_token("<SpecAugmentMaxProportion>"):
            self.specaugment_max_proportion = stream.read_float()
            if stream.read_optional_token("<SpecAugmentMaxRegions>"):
                self.specaugment_max_regions = stream.read_int32()
        self.test_mode = stream.read_optional_token("<TestMode>")
        self.continuous = stream.read_optional_token("<Continuous>")
        stream.expect_token("</GeneralDropoutComponent>")
        if not (self.dim > 0 and self.block_dim > 0 and self.dim % self.block_dim == 0):
            raise stream.error("GeneralDropoutComponent: invalid dim=%d, block-dim=%d"
                               % (self.dim, self.block_dim))

    def write_body(self, stream):
        stream.write_token("<Dim>")
        stream.write_int32(self.dim)
        stream.write_token("<BlockDim>")
        stream.write_int32(self.block_dim)
        stream.write_token("<TimePeriod>")
        stream.write_int32(self.time_period)
        stream.write_token("<DropoutProportion>")
        stream.write_float(self.dropout_proportion)
        if self.specaugment_max_proportion != 0.0:
            stream.write_token("<SpecAugmentMaxProportion>")
            stream.write_float(self.specaugment_max_proportion)
            if self.specaugment_max_regions != 1:
                stream.write_token("<SpecAugmentMaxRegions>")
                stream.write_int32(self.specaugment_max_regions)
        if self.test_mode:
            stream.write_token("<TestMode>")
        if self.continuous:
            stream.write_token("<Continuous>")

    def info(self):
        s = "GeneralDropoutComponent, dim=%d, block-dim=%d, dropout-proportion=%s" % (
            self.dim, self.block_dim, kaldi_str(self.dropout_proportion))
        if self.continuous:
            s += ", continuous=true"
        if self.specaugment_max_proportion != 0:
            s += ", specaugment-max-proportion=%s, specaugment-max-regions=%d" % (
                kaldi_str(self.specaugment_max_proportion), self.specaugment_max_regions)
        if self.time_period > 0:
            s += ", time-period=%d" % self.time_period
        return s

    def set_dropout_proportion(self, proportion):
        """Kaldi's SetDropoutProportion (nnet3-copy --edits)."""
        self.dropout_proportion = f32(proportion)

    def _is_identity(self):
        return self.test_mode or (self.dropout_proportion == 0.0
                                  and self.specaugment_max_proportion == 0.0)

    def precompute_indexes(self, misc_info, input_indexes, output_indexes, need_backprop):
        if list(input_indexes) != list(output_indexes):
            raise ComputationError("GeneralDropoutComponent: input and output indexes differ")
        numbered = None
        if _kernel is not None and type(input_indexes) is list:
            numbered = _kernel.dropout_mask_rows(input_indexes, self.time_period)
        indexes, num_rows = (numbered if numbered is not None
                             else dropout_mask_rows(input_indexes, self.time_period))
        multiple = self.dim // self.block_dim
        if multiple != 1:
            indexes = np.repeat(indexes, multiple)
        return GeneralDropoutComponentPrecomputedIndexes(num_rows * multiple, indexes)

    def get_memo(self, num_mask_rows):
        """A random (num_mask_rows x block_dim) float32 mask (host array)."""
        if num_mask_rows <= 0 or self._is_identity():
            raise ComputationError("GeneralDropoutComponent: no mask to draw (test mode, "
                                   "zero dropout or no rows)")
        if self.specaugment_max_proportion != 0.0:
            return self._specaugment_mask(num_mask_rows)
        p = np.float32(self.dropout_proportion)
        mask = _uniform((num_mask_rows, self.block_dim))
        if not self.continuous:
            mask = (mask - p > 0).astype(np.float32) * np.float32(1.0 / (1.0 - p))
        else:
            mask = mask * (p * np.float32(4.0)) + (np.float32(1.0) - np.float32(2.0) * p)
        return mask

    def _specaugment_mask(self, num_mask_rows):
        num_bins = self.block_dim
        mask = np.ones((num_mask_rows, num_bins), dtype=np.float32)
        max_zeroed = int(np.float32(num_bins) * np.float32(self.specaugment_max_proportion)
                         + np.float32(0.5))
        for row in mask:
            num_zeroed = _rand_int(0, max_zeroed)
            if num_zeroed == 0:
                continue
            # The zeroed band may wrap around from the top to the bottom.
            start = _rand_int(0, num_bins - 1)
            row[np.arange(start, start + num_zeroed) % num_bins] = 0.0
            # For more regions, flip a random half of the (circular) spectrum
            # around its middle, splitting the band.
            for _ in range(1, self.specaugment_max_regions):
                half = num_bins // 2
                quarter = half // 2
                start = _rand_int(0, num_bins - 1)
                end = start + half
                for i in range(quarter):
                    a, b = (start + i) % num_bins, (end - i) % num_bins
                    row[a], row[b] = row[b], row[a]
        return mask

    def _apply_mask(self, xp, mat, mask, indexes):
        rows = xp.asarray(indexes.indexes)
        mask = xp.asarray(mask)
        if self.block_dim < self.dim:
            reshaped = mat.reshape(-1, self.block_dim) * mask[rows]
            mat[...] = reshaped.reshape(mat.shape)
        else:
            mat *= mask[rows]

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        if out is not in_value:
            out[...] = in_value
        if self._is_identity():
            return None
        if indexes is None:
            raise ComputationError("GeneralDropoutComponent: propagate needs precomputed indexes")
        mask = self.get_memo(indexes.num_mask_rows)
        self._apply_mask(xp, out, mask, indexes)
        return mask

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module(out_deriv)
        if in_deriv is not out_deriv:
            in_deriv[...] = out_deriv
        if self._is_identity():
            return
        if indexes is None or memo is None:
            raise ComputationError("GeneralDropoutComponent: backprop needs the propagate memo")
        self._apply_mask(xp, in_deriv, memo, indexes)


# ---------------------------------------------------------------------------
# SpecAugmentTimeMaskComponent
# ---------------------------------------------------------------------------

class SpecAugmentTimeMaskComponentPrecomputedIndexes(PrecomputedIndexes):
    """indexes[s]: for the s-th sequence (sorted by n), the rows holding its
    frames in increasing t; tot_size: the number of rows."""

    type_name = "SpecAugmentTimeMaskComponentPrecomputedIndexes"

    def __init__(self, indexes=None):
        self.indexes = [] if indexes is None else [list(v) for v in indexes]
        self.tot_size = sum(len(v) for v in self.indexes)

    def read_body(self, stream):
        stream.expect_token("<Indexes>")
        size = stream.read_int32()
        if size < 0:
            raise stream.error("negative number of sequences %d" % size)
        self.indexes = [stream.read_int_vector() for _ in range(size)]
        stream.expect_token("</%s>" % self.type_name)
        self.tot_size = sum(len(v) for v in self.indexes)

    def write_body(self, stream):
        stream.write_token("<Indexes>")
        stream.write_int32(len(self.indexes))
        for v in self.indexes:
            stream.write_int_vector(v)


class SpecAugmentTimeMaskComponent(RandomMixin, Component):
    """SpecAugment's time masking: per sequence, alternating kept and zeroed
    runs of frames (zeroed runs up to time_mask_max_frames, about
    zeroed_proportion of the frames zeroed). Identity in test mode."""

    type_name = "SpecAugmentTimeMaskComponent"

    @property
    def kaldi_exact(self):
        """When it is the identity (test mode, nothing to drop) Kaldi copies,
        as propagate does; otherwise it draws other random numbers."""
        return bool(self._is_identity())

    layout = (
        Field("<Dim>", "int", "dim"),
        Field("<ZeroedProportion>", "float", "zeroed_proportion"),
        Field("<TimeMaskMaxFrames>", "int", "time_mask_max_frames"),
        Field("<TestMode>", "flag", "test_mode"),
    )

    def properties(self):
        return P.kRandomComponent | P.kPropagateInPlace | P.kBackpropInPlace | P.kUsesMemo

    def input_dim(self):
        return self.dim

    def output_dim(self):
        return self.dim

    def init_from_config(self, cfl):
        self.dim = cfl.get_int("dim", 0)
        if not cfl.has("dim") or self.dim <= 0:
            raise cfl.error("SpecAugmentTimeMaskComponent needs dim > 0")
        self.zeroed_proportion = f32(cfl.get_float("zeroed-proportion", 0.25))
        self.time_mask_max_frames = cfl.get_int("time-mask-max-frames", 10)
        if self.time_mask_max_frames <= 1:
            raise cfl.error("time-mask-max-frames must be > 1")
        self.test_mode = False

    def info(self):
        return ("SpecAugmentTimeMaskComponent, dim=%d, zeroed-proportion=%s, "
                "time-mask-max-frames=%d" % (self.dim, kaldi_str(self.zeroed_proportion),
                                             self.time_mask_max_frames))

    def _is_identity(self):
        return self.test_mode or self.zeroed_proportion == 0.0

    def precompute_indexes(self, misc_info, input_indexes, output_indexes, need_backprop):
        if list(input_indexes) != list(output_indexes):
            raise ComputationError("SpecAugmentTimeMaskComponent: input and output indexes "
                                   "differ")
        if not input_indexes:
            raise ComputationError("SpecAugmentTimeMaskComponent: no indexes")
        order = sorted(range(len(input_indexes)),
                       key=lambda i: (input_indexes[i].n, input_indexes[i].t, i))
        sequences = []
        current_n = None
        for i in order:
            n = input_indexes[i].n
            if n != current_n:
                sequences.append([])
                current_n = n
            sequences[-1].append(i)
        return SpecAugmentTimeMaskComponentPrecomputedIndexes(sequences)

    def get_memo(self, indexes):
        """A random 0/1 mask over the rows (host float32 vector)."""
        z = np.float32(self.zeroed_proportion)
        max_zeroed = self.time_mask_max_frames
        max_kept = int(np.float32(max_zeroed) * (np.float32(1.0) - z) / z)
        if max_zeroed <= 0 or max_kept <= 0:
            raise ComputationError("SpecAugmentTimeMaskComponent: zeroed-proportion %s and "
                                   "time-mask-max-frames %d leave no kept frames"
                                   % (kaldi_str(float(z)), max_zeroed))
        mask = np.ones(indexes.tot_size, dtype=np.float32)
        for rows in indexes.indexes:
            length = len(rows)
            t = 0
            while t < length:
                # Alternate kept and zeroed runs; the first run is kept with
                # probability z, so sequences may start either way.
                if t > 0 or kaldi_random.rand_uniform() < z:
                    kept = _rand_int(1, max_kept)
                    t = min(length, t + kept)
                zeroed = _rand_int(1, max_zeroed)
                stop = min(length, t + zeroed)
                mask[rows[t:stop]] = 0.0
                t = stop
        return mask

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        if out is not in_value:
            out[...] = in_value
        if self._is_identity():
            return None
        if indexes is None:
            raise ComputationError("SpecAugmentTimeMaskComponent: propagate needs precomputed "
                                   "indexes")
        mask = self.get_memo(indexes)
        out *= xp.asarray(mask)[:, None]
        return mask

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module(out_deriv)
        if in_deriv is not out_deriv:
            in_deriv[...] = out_deriv
        if self._is_identity():
            return
        if memo is None:
            raise ComputationError("SpecAugmentTimeMaskComponent: backprop needs the propagate "
                                   "memo")
        in_deriv *= xp.asarray(memo)[:, None]
