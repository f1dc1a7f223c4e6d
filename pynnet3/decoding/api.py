"""Decoding one utterance as Kaldi's DecodeUtteranceLatticeFaster
(decoder/decoder-wrappers.cc) does, and the Python API ``pynnet3.decode``.

Per utterance: search (LatticeFasterDecoder), the best path's words and
alignment (GetBestPath, GetLinearSymbolSequence), the raw lattice made
connected (fst::Connect) and written without acoustic scaling (acoustic costs
times 1 / acoustic-scale). When no token reached a final state the utterance
fails unless ``allow_partial`` (then the best partial path is used, as
Kaldi's).
"""

import logging
from dataclasses import dataclass

import numpy as np

from ..compute.utterance import SimpleComputationOptions
from ..errors import PynnetError, UsageError
from ..model.am import AmNnetSimple, read_mdl
from .config import LatticeFasterDecoderConfig
from .decodable import DecodableAmNnetSimple, decodable_nnet_computer, transition_id_to_pdf_table
from .determinize_lattice import (DeterminizeLatticePhonePrunedOptions,
                                  determinize_lattice_phone_pruned_wrapper)
from .fst import read_fst
from .lattice import Lattice
from .lattice_faster_decoder import make_decoder
from .token_lattice import raw_lattice_and_best_path

__all__ = ["DecodeResult", "Decoder", "decode", "decode_utterance", "make_decoder",
           "check_graph_labels"]

logger = logging.getLogger("pynnet3")


@dataclass(slots=True)
class DecodeResult:
    """``words`` and ``alignment`` (transition-ids) of the best path,
    ``lattice`` (a determinized CompactLattice, or the raw connected Lattice
    when not determinizing; acoustic costs unscaled), ``likelihood``
    (minus the best path's scaled cost), ``num_frames``, ``reached_final``."""

    words: list
    alignment: list
    lattice: object
    likelihood: float
    num_frames: int
    reached_final: bool


def check_graph_labels(fst, tid_to_pdf, source="the decoding graph"):
    """Kaldi checks every looked-up transition-id against the model; the
    graph's input labels must therefore be transition-ids of the model."""
    num_tids = len(tid_to_pdf) - 1
    max_label = fst.max_ilabel()
    if max_label > num_tids or (fst.num_arcs and int(fst.ilabel.min()) < 0):
        raise UsageError("%s has input label %d but the transition model has only %d "
                         "transition-ids (graph and model do not match)"
                         % (source, max_label, num_tids))


def decode_utterance(decoder, decodable, utt, acoustic_scale, allow_partial=False,
                     trans_model=None, determinize=False, det_opts=None):
    """One utterance; returns a DecodeResult, or None when Kaldi would not
    produce output (a WARNING is logged, as Kaldi's). With ``determinize``
    (needs ``trans_model``) the lattice is a CompactLattice determinized as
    Kaldi's DeterminizeLatticePhonePrunedWrapper does, with ``det_opts`` (a
    DeterminizeLatticePhonePrunedOptions; default Kaldi's)."""
    ok = decoder.decode(decodable.loglikes, decodable.tid_to_pdf)
    for message in decoder.warnings:
        logger.warning(message)
    if not ok:
        logger.warning("Failed to decode utterance with id %s", utt)
        return None
    reached = decoder.reached_final()
    if not reached:
        if allow_partial:
            logger.warning("Outputting partial output for utterance %s since no final-state "
                           "reached\n", utt)
        else:
            logger.warning("Not producing output for utterance %s since no final-state "
                           "reached and --allow-partial=false.\n", utt)
            return None
    lat, path = raw_lattice_and_best_path(decoder.token_lattice())
    if path is None:
        raise PynnetError("Failed to get traceback for utterance %s" % utt)
    lat.connect()
    if lat.num_states == 0:
        raise PynnetError("Unexpected problem getting lattice for utterance %s" % utt)
    if determinize:
        lat, ok = determinize_lattice_phone_pruned_wrapper(
            trans_model, lat, float(np.float32(decoder.config.lattice_beam)), det_opts)
        if not ok:
            logger.warning("Determinization finished earlier than the beam for utterance %s",
                           utt)
    elif not isinstance(lat, Lattice):
        lat = lat.to_lattice()
    if acoustic_scale != 0.0:
        lat.scale(((1.0, 0.0), (0.0, 1.0 / float(np.float32(acoustic_scale)))))
    return DecodeResult(path.words, path.alignment, lat, path.likelihood,
                        len(path.alignment), reached)


def _model_copy(model):
    """(TransitionModel, AmNnetSimple) from a pair or from an AmNnetSimple
    read from a .mdl, with a copy of the network: preparing it for
    computing must not change the caller's model."""
    if isinstance(model, AmNnetSimple):
        if model.transition_model is None:
            raise UsageError("the acoustic model has no transition model (read a .mdl with "
                             "AmNnetSimple.read, or give a (TransitionModel, AmNnetSimple) "
                             "pair)")
        trans_model, am_nnet = model.transition_model, model
    else:
        trans_model, am_nnet = model
    return trans_model, AmNnetSimple(am_nnet.nnet.copy(), am_nnet.priors, trans_model)


class Decoder:
    """An acoustic model and a decoding graph loaded once, for decoding many
    utterances as ``nnet3-latgen-faster`` does: the network (prepared as the
    tool prepares it) gives each frame's log-likelihoods, the lattice search
    finds the best path and a lattice. Calling the decoder decodes one
    utterance (:meth:`__call__`).

    Args:
        model: the ``.mdl`` file name, an AmNnetSimple read from a ``.mdl``
            (:meth:`AmNnetSimple.read <pynnet3.AmNnetSimple.read>`), or a
            (TransitionModel, AmNnetSimple) pair; the network is prepared on
            a copy, the caller's model is not changed.
        hclg: the decoding graph's file name (Kaldi's HCLG.fst, const or
            vector FST), or a graph already read.
        **options: ``nnet3-latgen-faster``'s options by their snake_case
            names: the search's (``beam`` 16, ``lattice_beam`` 10,
            ``max_active``, ``min_active``, ``prune_interval``,
            ``determinize_lattice`` True, ...), the network's
            (``acoustic_scale`` 0.1, ``frames_per_chunk`` 50,
            ``extra_left_context``, ..., ``frame_subsampling_factor``), the
            determinization's (``delta``, ``max_mem``, ...), and
            ``allow_partial`` (False), ``backend`` (the network's arithmetic:
            "numpy", BLAS arithmetic, the default as in
            ``nnet3-latgen-faster``; "kaldi-exact", Kaldi's CPU arithmetic
            bit for bit, an opt-in check: see the README for what it
            reproduces; or a KaldiExactBackend to choose its OpenBLAS thread
            count), ``use_kernel`` (the compiled search when it is built,
            True).

    Raises:
        UsageError: unknown options, or a graph whose labels are not the
            model's transition-ids; KaldiFormatError: unreadable files.

    Example::

        import pynnet3
        from pynnet3 import examples

        decoder = pynnet3.Decoder(examples.path("final.mdl"), examples.path("HCLG.fst"),
                                  beam=8, lattice_beam=4, max_active=200)
        words = {int(i): w for w, i in (line.split() for line in open(examples.path("words.txt")))}
        ivectors = pynnet3.open_table("ark:" + examples.path("online-ivectors.ark"))
        for utt, feats in pynnet3.read_table("ark:" + examples.path("feats.ark")):
            result = decoder(feats, online_ivectors=ivectors[utt], online_ivector_period=10)
            print(utt, " ".join(words[w] for w in result.words), len(result.alignment))

    Output::

        utt1 <UNK> 7
        utt2 cab 50
        utt3 bad 173
        utt4 hid 301
    """

    def __init__(self, model, hclg, **options):
        dec_fields = set(LatticeFasterDecoderConfig.__slots__)
        comp_fields = set(SimpleComputationOptions.__slots__)
        self.allow_partial = bool(options.pop("allow_partial", False))
        det_fields = set(DeterminizeLatticePhonePrunedOptions.__slots__)
        self.det_opts = DeterminizeLatticePhonePrunedOptions(
            **{k: options.pop(k) for k in list(options) if k in det_fields})
        self.use_kernel = bool(options.pop("use_kernel", True))
        backend = options.pop("backend", "numpy")
        unknown = set(options) - dec_fields - comp_fields
        if unknown:
            raise UsageError("unknown decoding option(s): %s" % ", ".join(sorted(unknown)))
        config = LatticeFasterDecoderConfig(**{k: v for k, v in options.items()
                                               if k in dec_fields})
        copts = SimpleComputationOptions(**{"acoustic_scale": 0.1, **{
            k: v for k, v in options.items() if k in comp_fields}})
        self.trans_model, self.am_nnet = read_mdl(model) if isinstance(model, str) else \
            _model_copy(model)
        self.fst = read_fst(hclg) if isinstance(hclg, str) else hclg
        self.tid_to_pdf = transition_id_to_pdf_table(self.trans_model)
        check_graph_labels(self.fst, self.tid_to_pdf)
        self.computer = decodable_nnet_computer(self.am_nnet, copts, backend=backend)
        self.acoustic_scale = copts.acoustic_scale
        self.decoder = make_decoder(self.fst, config, self.use_kernel)

    def __call__(self, feats, ivector=None, online_ivectors=None, online_ivector_period=0,
                 utt="utterance"):
        """Decodes one utterance.

        Args:
            feats: the features, a matrix (frames x the network's input dim).
            ivector: the utterance's i-vector (``--ivectors``).
            online_ivectors: its i-vectors every ``online_ivector_period``
                frames (``--online-ivectors``).
            online_ivector_period: frames per online i-vector.
            utt: the utterance's name in warnings.

        Returns:
            A DecodeResult: ``words`` (word ids of the best path; map them
            with the graph's words.txt), ``alignment`` (its transition-ids,
            one per frame), ``lattice`` (a CompactLattice, determinized
            unless ``determinize_lattice=False``; write it with
            :func:`pynnet3.write_table`), ``likelihood``, ``num_frames``,
            ``reached_final``. None when no final state was reached and
            ``allow_partial`` is false (a WARNING is logged, as Kaldi's).

        Raises:
            UsageError: wrong feature or i-vector dimensions, missing
                i-vectors.
        """
        decodable = DecodableAmNnetSimple(self.computer, self.tid_to_pdf, feats, ivector,
                                          online_ivectors, online_ivector_period)
        return decode_utterance(self.decoder, decodable, utt, self.acoustic_scale,
                                self.allow_partial, self.trans_model,
                                self.decoder.config.determinize_lattice, self.det_opts)


def decode(model, hclg, feats, **options):
    """Decodes one utterance: :class:`Decoder` made and called once (for
    many utterances make one Decoder, which loads model and graph once).

    Args:
        model: the ``.mdl`` file name, an AmNnetSimple read from a ``.mdl``,
            or a (TransitionModel, AmNnetSimple) pair (not changed).
        hclg: the decoding graph's file name, or a graph already read.
        feats: the features, a matrix.
        **options: the Decoder's options, and ``ivector=``, or
            ``online_ivectors=`` with ``online_ivector_period=``.

    Returns:
        A DecodeResult (``words``, ``alignment``, ``lattice``, ...), or None
        when no final state was reached and ``allow_partial`` is false.

    Raises:
        UsageError, KaldiFormatError: as :class:`Decoder`.

    Example::

        import pynnet3
        from pynnet3 import examples

        feats = dict(pynnet3.read_table("ark:" + examples.path("feats.ark")))["utt2"]
        ivectors = dict(pynnet3.read_table("ark:" + examples.path("online-ivectors.ark")))
        result = pynnet3.decode(examples.path("final.mdl"), examples.path("HCLG.fst"), feats,
                                online_ivectors=ivectors["utt2"], online_ivector_period=10)
        print(result.words, result.num_frames)

    Output::

        [9] 50
    """
    ivector = options.pop("ivector", None)
    online_ivectors = options.pop("online_ivectors", None)
    period = options.pop("online_ivector_period", 0)
    return Decoder(model, hclg, **options)(feats, ivector, online_ivectors, period)
