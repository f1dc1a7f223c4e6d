"""Kaldi's cepstral mean and variance normalization (transform/cmvn.cc).

CMVN statistics are a 2 x (dim + 1) double matrix: row 0 holds the sums of
the features and, in its last column, the count (sum of frame weights); row 1
the sums of squares (its last column unused, 0). A 1-row matrix (means only)
serves mean normalization.

The arithmetic is Kaldi's, so results are bit for bit its: sums accumulate
frame by frame in double (the products feature * weight and
feature * feature * weight in float first); the per-dimension offset and
scale are computed in double and rounded to float, then applied to the float
features in float (multiply, then add).
"""

import logging
import math

import numpy as np

from ..errors import PynnetError

__all__ = ["init_cmvn_stats", "acc_cmvn_stats", "apply_cmvn", "apply_cmvn_reverse",
           "fake_stats_for_some_dims"]

logger = logging.getLogger("pynnet3")

_VAR_FLOOR = 1.0e-20


def init_cmvn_stats(dim):
    """Zero statistics for ``dim``-dimensional features (Kaldi's InitCmvnStats)."""
    if dim <= 0:
        raise PynnetError("CMVN statistics need a positive feature dimension, got %d" % dim)
    return np.zeros((2, dim + 1), dtype=np.float64)


def acc_cmvn_stats(feats, stats, weights=None):
    """Adds the frames of ``feats`` (float32, frames x dim), each times its
    weight (``weights``: one float per frame, frames of weight 0 skipped;
    default 1), to ``stats`` in place, frame by frame as Kaldi's
    AccCmvnStats (the running double sums are sequential: np.cumsum, not a
    pairwise sum)."""
    feats = np.asarray(feats, dtype=np.float32)
    dim = feats.shape[1]
    if stats.shape != (2, dim + 1):
        raise PynnetError("CMVN statistics are %dx%d but the features have dimension %d"
                          % (stats.shape[0], stats.shape[1], dim))
    if weights is None:
        w = np.ones(feats.shape[0], dtype=np.float32)
    else:
        w = np.asarray(weights, dtype=np.float32)
        if w.shape[0] != feats.shape[0]:
            raise PynnetError("%d weights for %d frames" % (w.shape[0], feats.shape[0]))
        keep = w != 0.0
        feats, w = feats[keep], w[keep]
    if feats.shape[0] == 0:
        return stats
    wcol = w[:, None]
    first = (feats * wcol).astype(np.float64)
    second = (feats * feats * wcol).astype(np.float64)
    stats[0, :dim] = np.cumsum(np.vstack([stats[0:1, :dim], first]), axis=0)[-1]
    stats[1, :dim] = np.cumsum(np.vstack([stats[1:2, :dim], second]), axis=0)[-1]
    stats[0, dim] = np.cumsum(np.concatenate([[stats[0, dim]], w.astype(np.float64)]))[-1]
    return stats


def _check(stats, feats, var_norm):
    rows, cols = stats.shape
    dim = cols - 1
    if rows > 2 or rows < 1 or feats.shape[1] != dim:
        raise PynnetError("Dim mismatch: cmvn %dx%d, feats %dx%d"
                          % (rows, cols, feats.shape[0], feats.shape[1]))
    if rows == 1 and var_norm:
        raise PynnetError("You requested variance normalization but no variance stats are "
                          "supplied.")
    count = float(stats[0, dim])
    if count < 1.0:
        raise PynnetError("Insufficient stats for cepstral mean and variance normalization: "
                          "count = %g" % count)
    return dim, count


def _variance(stats, d, count, mean):
    var = stats[1, d] / count - mean * mean
    if var < _VAR_FLOOR:
        logger.warning("Flooring cepstral variance from %g to %g", var, _VAR_FLOOR)
        var = _VAR_FLOOR
    return var


def apply_cmvn(stats, var_norm, feats):
    """Kaldi's ApplyCmvn: ``feats`` (float32) normalized to zero mean (and,
    with ``var_norm``, unit variance) by ``stats``; returns a new array."""
    feats = np.array(feats, dtype=np.float32)
    stats = np.asarray(stats, dtype=np.float64)
    dim, count = _check(stats, feats, var_norm)
    if not var_norm:
        alpha = float(np.float32(-1.0 / count))   # AddVec's alpha is a float
        offset = (alpha * stats[0, :dim]).astype(np.float32)
        return feats + offset
    offset = np.empty(dim, dtype=np.float32)
    scale = np.empty(dim, dtype=np.float32)
    for d in range(dim):
        mean = stats[0, d] / count
        s = 1.0 / math.sqrt(_variance(stats, d, count, mean))
        if s != s or 1.0 / s == 0.0:
            raise PynnetError("NaN or infinity in cepstral mean/variance computation")
        offset[d] = -(mean * s)
        scale[d] = s
    return feats * scale + offset


def apply_cmvn_reverse(stats, var_norm, feats):
    """Kaldi's ApplyCmvnReverse: zero-mean (unit-variance) ``feats`` given
    the mean (and variance) of ``stats``; returns a new array."""
    feats = np.array(feats, dtype=np.float32)
    stats = np.asarray(stats, dtype=np.float64)
    dim, count = _check(stats, feats, var_norm)
    offset = np.empty(dim, dtype=np.float32)
    scale = np.ones(dim, dtype=np.float32)
    for d in range(dim):
        mean = stats[0, d] / count
        if var_norm:
            scale[d] = math.sqrt(_variance(stats, d, count, mean))
        offset[d] = mean
    if var_norm:
        feats = feats * scale
    return feats + offset


def fake_stats_for_some_dims(dims, stats):
    """Kaldi's FakeStatsForSomeDims: in place, statistics that leave the
    dimensions ``dims`` unnormalized (mean 0, variance 1)."""
    if stats.shape[0] != 2 or stats.shape[1] <= 1:
        raise PynnetError("--skip-dims needs 2-row CMVN statistics, got %dx%d"
                          % stats.shape)
    dim = stats.shape[1] - 1
    count = stats[0, dim]
    for d in dims:
        if not 0 <= d < dim:
            raise PynnetError("--skip-dims: dimension %d is out of range [0, %d)" % (d, dim))
        stats[0, d] = 0.0
        stats[1, d] = count
    return stats
