"""The Python API for what nnet3-compute and nnet3-xvector-compute do, over
whole utterances held in memory:

    >>> out = pynnet3.compute_utterance(nnet, feats, online_ivectors=ivecs,
    ...                                 online_ivector_period=10,
    ...                                 frame_subsampling_factor=3, frames_per_chunk=150)
    >>> xvec = pynnet3.compute_xvector(xvector_nnet, feats, chunk_size=300)

``nnet`` is a :class:`~pynnet3.Nnet` (or the path of a network file) as read
from disk; it is copied and prepared as the tools prepare it (batch-norm and
dropout in test mode, Kaldi's CollapseModel), and the prepared copy, its
context and its compiled computations are kept for the most recently used
networks and option sets (a few; the cache holds the network objects), so
later calls with the same network and options reuse them (so a network
changed in place after a call needs a new object, or ``prepared=True``). Pass
``prepared=True`` for a network already prepared (it is then used as is).
The numbers are the tools' numbers (utterances chunked exactly as the tools
chunk them). :func:`compute_table` runs a whole table of utterances:
any iterable of ``(key, features)`` pairs (:func:`pynnet3.io.table.read_table`,
or kaldi_io's generators such as ``kaldi_io.read_mat_scp``) in, the same
kind of pairs out.
"""

from collections import OrderedDict

import numpy as np

from ..errors import UsageError
from ..nnet.nnet import Nnet
from .utterance import SimpleComputationOptions, SimpleNnetComputer
from .utterance import apply_exp as _exp
from .utterance import prepare_nnet_for_compute
from .xvector import XvectorComputer

__all__ = ["compute_utterance", "compute_xvector", "compute_table"]

_SIMPLE_FIELDS = frozenset(SimpleComputationOptions.__dataclass_fields__)
# (id(network), options key) -> (network, computer), most recent last. Holding
# the network keeps its id from being reused by another object.
_computers = OrderedDict()
_MAX_CACHED = 8


def _network(nnet):
    if isinstance(nnet, str):
        return Nnet.read(nnet)
    return nnet


def _cached_computer(nnet, key, make):
    full_key = (id(nnet), key)
    entry = _computers.get(full_key)
    if entry is None:
        entry = _computers[full_key] = (nnet, make())
        while len(_computers) > _MAX_CACHED:
            _computers.popitem(last=False)
    else:
        _computers.move_to_end(full_key)
    return entry[1]


def compute_utterance(nnet, feats, ivectors=None, online_ivectors=None, *,
                      online_ivector_period=0, priors=None, apply_exp=False,
                      prepared=False, backend="numpy", **options):
    """One utterance's output (ceil(frames / frame_subsampling_factor) x
    output dim, float32), as ``nnet3-compute`` writes it.

    ``ivectors``: the utterance's i-vector (a vector, nnet3-compute's
    ``--ivectors``); ``online_ivectors``: a matrix of i-vectors every
    ``online_ivector_period`` frames (``--online-ivectors``). ``priors``:
    subtracted in the log domain (``--use-priors``; e.g.
    ``AmNnetSimple.priors``). ``apply_exp``: ``--apply-exp``. ``options``:
    Kaldi's NnetSimpleComputationOptions by their snake_case names
    (``frames_per_chunk=50``, ``extra_left_context=0``,
    ``extra_left_context_initial=-1``, ``extra_right_context=0``,
    ``extra_right_context_final=-1``, ``frame_subsampling_factor=1``,
    ``acoustic_scale=1.0``). ``backend``: "numpy" (BLAS arithmetic, Kaldi's
    numbers within float32 rounding), "kaldi-exact" (Kaldi's CPU arithmetic,
    bit for bit; a :class:`~pynnet3.compute.backend.KaldiExactBackend` sets
    the OpenBLAS thread count whose order is reproduced) or "cupy".
    """
    unknown = set(options) - _SIMPLE_FIELDS
    if unknown:
        raise UsageError("unknown option(s) %s; expected some of %s"
                         % (", ".join(sorted(unknown)), ", ".join(sorted(_SIMPLE_FIELDS))))
    nnet = _network(nnet)
    opts = SimpleComputationOptions(**options)
    priors_key = None if priors is None else np.asarray(priors, np.float32).tobytes()
    key = ("simple", tuple(sorted(options.items())), priors_key, prepared, backend)

    def make():
        net = nnet if prepared else prepare_nnet_for_compute(nnet.copy())
        return SimpleNnetComputer(net, opts, priors, backend=backend)

    computer = _cached_computer(nnet, key, make)
    output = computer.compute_utterance(feats, ivectors, online_ivectors,
                                        online_ivector_period)
    return _exp(output) if apply_exp else output


def compute_xvector(nnet, feats, *, chunk_size=-1, min_chunk_size=100, pad_input=True,
                    prepared=False, backend="numpy"):
    """One utterance's x-vector (float32 vector), as ``nnet3-xvector-compute``
    writes it (``chunk_size``, ``min_chunk_size``, ``pad_input`` as its
    options). An utterance shorter than ``min_chunk_size`` without
    ``pad_input`` raises :class:`~pynnet3.compute.xvector.XvectorSkipped`
    (the tool skips it with a warning)."""
    nnet = _network(nnet)
    key = ("xvector", chunk_size, min_chunk_size, pad_input, prepared, backend)

    def make():
        net = nnet if prepared else prepare_nnet_for_compute(nnet.copy())
        return XvectorComputer(net, chunk_size, min_chunk_size, pad_input, backend=backend)

    return _cached_computer(nnet, key, make).compute(feats)


def compute_table(nnet, pairs, ivectors=None, online_ivectors=None, **options):
    """Yields ``(key, output)`` for every ``(key, features)`` of ``pairs``,
    as nnet3-compute does for a feature table. ``ivectors`` /
    ``online_ivectors``: mappings (dicts, or RandomAccessTableReaders) from
    key to the utterance's i-vector / online i-vector matrix; a key missing
    from them raises KeyError (the tool skips such utterances with a
    warning). ``options``: as :func:`compute_utterance`."""
    for key, feats in pairs:
        yield key, compute_utterance(
            nnet, feats, None if ivectors is None else ivectors[key],
            None if online_ivectors is None else online_ivectors[key], **options)
