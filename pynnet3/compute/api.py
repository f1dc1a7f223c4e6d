"""The Python API for what nnet3-compute and nnet3-xvector-compute do, over
whole utterances held in memory (:func:`compute_utterance`,
:func:`compute_table`, :func:`compute_xvector`, :func:`prepare_for_test`).

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
any iterable of ``(key, features)`` pairs (:func:`pynnet3.read_table`,
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

__all__ = ["compute_utterance", "compute_xvector", "compute_table", "prepare_for_test"]

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
    """One utterance's output, as ``nnet3-compute`` writes it: the network
    is prepared as the tool prepares it (on a copy, unless ``prepared``) and
    the utterance is computed chunk by chunk exactly as the tool chunks it.
    The prepared copy and its compiled computations are kept for the most
    recently used networks and options, so later calls are fast (a network
    changed in place after a call needs a new object).

    Args:
        nnet: an Nnet (as read from disk), or the file name of a network
            (read at every call: for many utterances read it once with
            :meth:`Nnet.read <pynnet3.Nnet.read>`).
        feats: the features, a matrix (frames x the network's input dim).
        ivectors: the utterance's i-vector, a vector (``--ivectors``).
        online_ivectors: a matrix of i-vectors, one every
            ``online_ivector_period`` frames (``--online-ivectors``).
        online_ivector_period: the frames per online i-vector.
        priors: a vector subtracted in the log domain (``--use-priors``, e.g.
            ``AmNnetSimple.priors``); None: none.
        apply_exp: exponentiate the output (``--apply-exp``).
        prepared: the network is already prepared (used as given).
        backend: "numpy" (BLAS arithmetic, Kaldi's numbers within float32
            rounding), "kaldi-exact" (Kaldi's CPU arithmetic, bit for bit)
            or "cupy".
        **options: Kaldi's NnetSimpleComputationOptions by their snake_case
            names: ``frames_per_chunk`` (50), ``extra_left_context`` (0),
            ``extra_right_context`` (0), ``extra_left_context_initial`` (-1),
            ``extra_right_context_final`` (-1), ``frame_subsampling_factor``
            (1), ``acoustic_scale`` (1.0, as nnet3-compute).

    Returns:
        A float32 matrix, ceil(frames / frame_subsampling_factor) x the
        output dimension: the network's output (minus log priors, times
        ``acoustic_scale``, exponentiated, when asked).

    Raises:
        UsageError: unknown options, wrong feature or i-vector dimensions,
            missing i-vectors (Kaldi's wording); ComputationError: a chunk
            Kaldi cannot compute either.

    Example::

        import pynnet3
        from pynnet3 import examples

        nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
        feats = dict(pynnet3.read_table("ark:" + examples.path("feats.ark")))
        ivectors = dict(pynnet3.read_table("ark:" + examples.path("ivectors.ark")))
        out = pynnet3.compute_utterance(nnet, feats["utt2"], ivectors["utt2"])
        kaldi = dict(pynnet3.read_table("ark:" + examples.path("compute.ivectors.ark")))
        print(out.shape, abs(out - kaldi["utt2"]).max() < 1e-4)

    Output::

        (50, 30) True
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
    """One utterance's x-vector, as ``nnet3-xvector-compute`` writes it: the
    network's ``output`` for chunks of the utterance, averaged with each
    chunk's number of frames as its weight. The network is prepared as the
    tool prepares it (on a copy, unless ``prepared``); prepared copies and
    computations are cached as for :func:`compute_utterance`.

    Args:
        nnet: an x-vector extractor (an Nnet whose ``output`` node gives one
            row for a whole chunk), or its file name.
        feats: the features, a matrix (frames x the input dim).
        chunk_size: frames per chunk (-1: the whole utterance in one).
        min_chunk_size: the shortest chunk used.
        pad_input: pad chunks shorter than ``min_chunk_size`` by repeating
            their first and last frames (else they are left out).
        prepared: the network is already prepared (used as given).
        backend: "numpy", "kaldi-exact" or "cupy" (see
            :func:`compute_utterance`).

    Returns:
        The x-vector, a float32 vector of the output dimension.

    Raises:
        UsageError: wrong feature dimension, zero-length utterance; its
            subclass XvectorSkipped: an utterance shorter than
            ``min_chunk_size`` without ``pad_input`` (the tool skips it with
            a warning).

    Example::

        import pynnet3
        from pynnet3 import examples

        nnet = pynnet3.Nnet.read(examples.path("xvector.raw"))
        kaldi = dict(pynnet3.read_table("ark:" + examples.path("xvector.default.ark")))
        for utt, feats in pynnet3.read_table("ark:" + examples.path("xvector-feats.ark")):
            xvector = pynnet3.compute_xvector(nnet, feats)
            print(utt, xvector.shape, abs(xvector - kaldi[utt]).max() < 1e-4)

    Output::

        utt1 (48,) True
        utt2 (48,) True
        utt3 (48,) True
        utt4 (48,) True
    """
    nnet = _network(nnet)
    key = ("xvector", chunk_size, min_chunk_size, pad_input, prepared, backend)

    def make():
        net = nnet if prepared else prepare_nnet_for_compute(nnet.copy())
        return XvectorComputer(net, chunk_size, min_chunk_size, pad_input, backend=backend)

    return _cached_computer(nnet, key, make).compute(feats)


def compute_table(nnet, pairs, ivectors=None, online_ivectors=None, **options):
    """The outputs of a whole table of utterances, as ``nnet3-compute`` does
    for a feature table.

    Args:
        nnet: an Nnet, or the file name of a network.
        pairs: ``(key, features)`` pairs: :func:`pynnet3.read_table`, a
            dict's ``items()``, or kaldi-io / kaldiio readers.
        ivectors: a mapping (a dict, or :func:`pynnet3.open_table`) from key
            to the utterance's i-vector.
        online_ivectors: a mapping from key to the utterance's online
            i-vector matrix (with ``online_ivector_period=``).
        **options: as for :func:`compute_utterance`.

    Returns:
        An iterator of ``(key, output)`` pairs (computed as it is consumed),
        ready for :func:`pynnet3.write_table`.

    Raises:
        KeyError, PynnetError: a key missing from ``ivectors`` /
            ``online_ivectors`` (KeyError from a dict, PynnetError from
            :func:`pynnet3.open_table`; the tool skips such an utterance
            with a warning); as :func:`compute_utterance` otherwise.

    Example::

        import pynnet3
        from pynnet3 import examples

        with pynnet3.open_table("ark:" + examples.path("online-ivectors.ark")) as ivectors:
            outputs = pynnet3.compute_table(
                pynnet3.Nnet.read(examples.path("tdnn_lda.raw")),
                pynnet3.read_table("ark:" + examples.path("feats.ark")),
                online_ivectors=ivectors, online_ivector_period=10)
            print(pynnet3.write_table("ark:output.ark", outputs), "utterances written")

    Output::

        4 utterances written
    """
    nnet = _network(nnet)      # read once, so that its prepared copy is reused
    for key, feats in pairs:
        yield key, compute_utterance(
            nnet, feats, None if ivectors is None else ivectors[key],
            None if online_ivectors is None else online_ivectors[key], **options)


def prepare_for_test(nnet):
    """A copy of a network prepared for computing as Kaldi's tools prepare
    theirs (``nnet3-compute``, ``nnet3-latgen-faster``, and ``nnet3-copy
    --prepare-for-test=true``, which writes the same network): batch-norm and
    dropout components in test mode, then Kaldi's CollapseModel (adjacent
    components merged where Kaldi merges them: dropout removed, fixed
    affine and scale layers and batch-norm combined with the affine layers
    they feed or follow directly).

    :func:`compute_utterance`, :func:`compute_xvector`, the streaming class
    and :class:`~pynnet3.Decoder` do this themselves; a computation compiled
    with :func:`pynnet3.compile` runs the network as given, so prepare it
    first to get the tools' numbers.

    Args:
        nnet: an Nnet, or the file name of a network.

    Returns:
        A new, prepared Nnet (``nnet`` itself is not changed).

    Raises:
        PynnetError: the file cannot be read.

    Example::

        import pynnet3
        from pynnet3 import examples

        nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
        prepared = pynnet3.prepare_for_test(nnet)
        print(nnet.num_components(), "components ->", prepared.num_components())

    Output::

        15 components -> 14
    """
    return prepare_nnet_for_compute(_network(nnet).copy())
