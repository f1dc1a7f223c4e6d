"""The random source behind components' stochastic behaviour.

Kaldi draws from the C library's ``rand()`` in a few component methods: stats
are stored only on some minibatches (``RandInt(0, 1) == 0`` skips), self-repair
runs on about half of them (``RandUniform() > 0.5`` skips), and dropout masks
are uniform draws. pynnet3 cannot reproduce ``rand()``'s sequence, so these
draws come from one seedable source instead; what is guaranteed is the same
*distribution* of decisions as Kaldi, and reproducibility after :func:`seed`.
"""

import random

import numpy as np

_PY_RNG = random.Random(0)
# NumPy's generator, made at the first draw: importing numpy.random costs a
# process that never draws (nnet3-compute in test mode) several MB.
_NP_SEED = 0
_NP_RNG = None


def _np_rng():
    global _NP_RNG
    if _NP_RNG is None:
        _NP_RNG = np.random.default_rng(_NP_SEED)
    return _NP_RNG


def seed(value):
    """Reseeds every draw made by components (stats skipping, self-repair,
    dropout masks), for reproducible runs and tests."""
    global _NP_RNG, _NP_SEED
    _PY_RNG.seed(value)
    _NP_SEED = value
    _NP_RNG = None


def rand_int(lo, hi):
    """Kaldi's RandInt(lo, hi): uniform integer in [lo, hi], both inclusive."""
    return _PY_RNG.randint(lo, hi)


def rand_uniform():
    """Kaldi's RandUniform(): uniform float in (0, 1)."""
    value = _PY_RNG.random()
    while value == 0.0:
        value = _PY_RNG.random()
    return value


def uniform_matrix(xp, shape):
    """A float32 matrix of uniform [0, 1) draws on the array module ``xp``
    (Kaldi's CuRand::RandUniform)."""
    if xp is np:
        return _np_rng().random(shape, dtype=np.float32)
    return xp.random.random_sample(shape, dtype=xp.float32)


# Up to this many normal draws come from Python's generator: a test-mode
# batch-norm without statistics makes up its counts from two vectors of its
# dimension (Kaldi does the same), and NumPy's generator would cost that
# process about 7 MB for importing numpy.random (nnet3-latgen-faster on a
# chain model fresh from nnet3-init: 86 MB of peak RSS).
_FEW_DRAWS = 4096


def normal_vector(dim):
    """A float64 vector of standard normal draws (Kaldi's SetRandn)."""
    if dim <= _FEW_DRAWS:
        gauss = _PY_RNG.gauss
        return np.array([gauss(0.0, 1.0) for _ in range(dim)])
    return _np_rng().standard_normal(dim)
