"""Decoding one utterance as Kaldi's DecodeUtteranceLatticeFaster
(decoder/decoder-wrappers.cc) does, and the Python API ``pynnet3.decode``.

Per utterance: search (LatticeFasterDecoder), the best path's words and
alignment (GetBestPath, GetLinearSymbolSequence), the raw lattice made
connected (fst::Connect) and written without acoustic scaling (acoustic costs
times 1 / acoustic-scale). When no token reached a final state the utterance
fails unless ``allow_partial`` (then the best partial path is used, as
Kaldi's).
"""

from dataclasses import dataclass
import logging

import numpy as np

from ..compute.utterance import SimpleComputationOptions
from ..errors import PynnetError, UsageError
from ..model.am import read_mdl
from .config import LatticeFasterDecoderConfig
from .decodable import DecodableAmNnetSimple, decodable_nnet_computer, transition_id_to_pdf_table
from .determinize_lattice import (DeterminizeLatticePhonePrunedOptions,
                                  determinize_lattice_phone_pruned_wrapper)
from .fst import read_fst
from .lattice_faster_decoder import make_decoder
from .token_lattice import best_path, get_raw_lattice

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
    lat = get_raw_lattice(decoder.token_lattice())
    path = best_path(lat)
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
    if acoustic_scale != 0.0:
        lat.scale(((1.0, 0.0), (0.0, 1.0 / float(np.float32(acoustic_scale)))))
    return DecodeResult(path.words, path.alignment, lat, path.likelihood,
                        len(path.alignment), reached)


class Decoder:
    """A model and a graph loaded once, for decoding many utterances:

        dec = Decoder("final.mdl", "HCLG.fst", beam=15, lattice_beam=8)
        for key, feats in pynnet3.io.table.read_table("ark:feats.ark"):
            result = dec(feats)

    ``model``: an rxfilename or a (TransitionModel, AmNnetSimple) pair;
    ``hclg``: an rxfilename or a StdFst. Options: the decoder's
    (:class:`LatticeFasterDecoderConfig` fields) and the decodable's
    (SimpleComputationOptions fields: acoustic_scale (default 0.1),
    frames_per_chunk, extra_left_context, ..., frame_subsampling_factor),
    plus ``allow_partial``, the determinization options
    (:class:`DeterminizeLatticePhonePrunedOptions` fields: ``delta``,
    ``max_mem``, ...), ``use_kernel`` (the compiled search and determinization
    when built, default True) and ``backend``
    (the network's backend: "kaldi-exact" (the default, as nnet3-latgen-faster)
    for Kaldi's CPU arithmetic bit for bit, "numpy" for BLAS arithmetic, a
    :class:`pynnet3.compute.backend.KaldiExactBackend` to choose its OpenBLAS
    thread count). With ``determinize_lattice`` (default True, as Kaldi's) the
    lattice is a determinized CompactLattice."""

    def __init__(self, model, hclg, **options):
        dec_fields = set(LatticeFasterDecoderConfig.__slots__)
        comp_fields = set(SimpleComputationOptions.__slots__)
        self.allow_partial = bool(options.pop("allow_partial", False))
        det_fields = set(DeterminizeLatticePhonePrunedOptions.__slots__)
        self.det_opts = DeterminizeLatticePhonePrunedOptions(
            **{k: options.pop(k) for k in list(options) if k in det_fields})
        self.use_kernel = bool(options.pop("use_kernel", True))
        backend = options.pop("backend", "kaldi-exact")
        unknown = set(options) - dec_fields - comp_fields
        if unknown:
            raise UsageError("unknown decoding option(s): %s" % ", ".join(sorted(unknown)))
        config = LatticeFasterDecoderConfig(**{k: v for k, v in options.items()
                                               if k in dec_fields})
        copts = SimpleComputationOptions(**{"acoustic_scale": 0.1, **{
            k: v for k, v in options.items() if k in comp_fields}})
        self.trans_model, self.am_nnet = read_mdl(model) if isinstance(model, str) else model
        self.fst = read_fst(hclg) if isinstance(hclg, str) else hclg
        self.tid_to_pdf = transition_id_to_pdf_table(self.trans_model)
        check_graph_labels(self.fst, self.tid_to_pdf)
        self.computer = decodable_nnet_computer(self.am_nnet, copts, backend=backend)
        self.acoustic_scale = copts.acoustic_scale
        self.decoder = make_decoder(self.fst, config, self.use_kernel)

    def __call__(self, feats, ivector=None, online_ivectors=None, online_ivector_period=0,
                 utt="utterance"):
        decodable = DecodableAmNnetSimple(self.computer, self.tid_to_pdf, feats, ivector,
                                          online_ivectors, online_ivector_period)
        return decode_utterance(self.decoder, decodable, utt, self.acoustic_scale,
                                self.allow_partial, self.trans_model,
                                self.decoder.config.determinize_lattice, self.det_opts)


def decode(model, hclg, feats, **options):
    """Decodes one utterance's features (``pynnet3.decode``): returns a
    :class:`DecodeResult` (words, alignment, lattice), or None when no final
    state was reached and ``allow_partial`` is false. ``model``/``hclg`` may
    be file names or loaded objects; for many utterances build one
    :class:`Decoder` (graph and model loaded once). I-vectors:
    ``ivector=``, or ``online_ivectors=`` with ``online_ivector_period=``."""
    ivector = options.pop("ivector", None)
    online_ivectors = options.pop("online_ivectors", None)
    period = options.pop("online_ivector_period", 0)
    return Decoder(model, hclg, **options)(feats, ivector, online_ivectors, period)
