"""One decoding run of nnet3-latgen-faster and nnet3-latgen-faster-parallel
(both tools run these steps; only where the decoding runs differs): the
options, loading the model, network computer, graph and decoder once
(:class:`LatgenSetup`), the utterances to decode (:func:`utterance_inputs`),
writing each result and its log lines (:class:`LatgenWriters`) and the
closing lines (:func:`log_summary`).
"""

import logging
import threading
import time

from ..compute.compilation import log_compiler_summary, make_compiler
from ..decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from ..decoding.api import check_graph_labels, decode_utterance, make_decoder
from ..decoding.config import LatticeFasterDecoderConfig
from ..decoding.decodable import (DecodableAmNnetSimple, decodable_nnet_computer,
                                  transition_id_to_pdf_table)
from ..decoding.determinize_lattice import DeterminizeLatticePhonePrunedOptions
from ..decoding.fst import read_fst
from ..errors import UsageError
from ..io.table import SequentialTableReader, TableWriters
from ..model.am import read_mdl
from ._option_groups import (compute_backend, open_ivector_readers, optimize_options, options_from,
                             register_arithmetic_options, register_ivector_options,
                             register_options, register_simple_computation_options,
                             simple_computation_options, utterance_ivectors)
from ._word_symbols import read_word_symbols, write_word_names

logger = logging.getLogger("pynnet3")


def register_latgen_options(parser):
    """The options nnet3-latgen-faster and nnet3-latgen-faster-parallel share."""
    register_options(parser, "", LatticeFasterDecoderConfig())
    register_options(parser, "", DeterminizeLatticePhonePrunedOptions())
    register_simple_computation_options(parser, acoustic_scale=0.1)
    parser.register_str("word-symbol-table", "", "Symbol table for words [for debug output]")
    parser.register_bool("allow-partial", False,
                         "If true, produce output even if end state was not reached.")
    register_ivector_options(parser)
    # The default is the BLAS arithmetic (fast; Kaldi's words and alignments,
    # costs within float rounding); --kaldi-exact-arithmetic=true reproduces
    # Kaldi's lattices bit for bit (README: what it reproduces), at the
    # network's cost, which with large models is a good part of decoding.
    register_arithmetic_options(parser)


class LatgenSetup:
    """Everything one decoding run loads once: the model, the network
    computer (with its compilation cache), the graph, the decoder (made for
    the first utterance), the word symbols and the options; :meth:`decode`
    decodes one utterance with them.
    :meth:`thread_worker` gives another decoder and network computer over
    the same model, graph and compiler, for a worker thread."""

    def __init__(self, opts, model_in, fst_in):
        self.opts = opts
        self.config = options_from(opts, "", LatticeFasterDecoderConfig())
        self.config.check()
        self.det_opts = options_from(opts, "", DeterminizeLatticePhonePrunedOptions())
        if ":" in fst_in and fst_in.split(":", 1)[0].split(",")[0] in ("ark", "scp"):
            raise UsageError("per-utterance decoding graphs (%s) are not supported; give one "
                             "graph file" % fst_in)
        self.trans_model, self.am_nnet = read_mdl(model_in)
        self.compiler = make_compiler(self.am_nnet.nnet, optimize_options(opts))
        self.computer = decodable_nnet_computer(
            self.am_nnet, simple_computation_options(opts), compiler=self.compiler,
            backend=compute_backend(opts),
            debug_computation=opts.debug_computation,
            debug=getattr(opts, "computation.debug") or opts.verbose >= 5)
        self.tid_to_pdf = transition_id_to_pdf_table(self.trans_model)
        self.word_syms = (read_word_symbols(opts.word_symbol_table)
                          if opts.word_symbol_table else None)
        self.fst_in = fst_in
        self.fst = None
        self.decoder = None
        self._compiler_lock = threading.Lock()

    def load_graph(self):
        """Reads the graph (after the output tables are open, as Kaldi
        does)."""
        self.fst = read_fst(self.fst_in)
        check_graph_labels(self.fst, self.tid_to_pdf, self.fst_in)

    def thread_worker(self):
        """A copy of this setup for one worker thread: its own network
        computer (its execution plans and their matrices), sharing the model,
        the graph, the options and the compiler, through a lock (Kaldi's
        parallel tool compiles for every utterance; one shared cache
        compiles each chunk shape once). It decodes with
        :meth:`decode_alone`, which makes its decoder."""
        worker = object.__new__(LatgenSetup)
        worker.__dict__.update(self.__dict__)
        worker.computer = self.computer.copy_for_thread(
            _LockedCompiler(self.compiler, self._compiler_lock))
        worker.decoder = None
        return worker

    def decode_alone(self, utt, features, ivector, online):
        """:meth:`decode` as with a new decoder, as Kaldi's
        nnet3-latgen-faster-parallel makes one for every utterance: the
        result does not depend on the utterances decoded before. (A decoder
        kept from one utterance to the next, as nnet3-latgen-faster keeps
        it, keeps its hash table at the largest size it needed; that size
        decides the order in which tokens of equal cost meet, and so,
        rarely, the words: Kaldi's two tools differ in the same way.) The
        decoder object is kept and renewed (:meth:`LatticeFasterDecoder.renew`),
        so that its arrays are not allocated and grown again for every
        utterance."""
        if self.decoder is None:
            self.decoder = make_decoder(self.fst, self.config)
        else:
            self.decoder.renew()
        return self.decode(utt, features, ivector, online)

    def decode(self, utt, features, ivector, online):
        """One utterance's DecodeResult, or None (a WARNING was logged),
        from this setup's decoder: made for the first utterance and kept
        for the next, as nnet3-latgen-faster keeps its one decoder."""
        if self.decoder is None:
            self.decoder = make_decoder(self.fst, self.config)
        decodable = DecodableAmNnetSimple(self.computer, self.tid_to_pdf, features, ivector,
                                          online, self.opts.online_ivector_period)
        return decode_utterance(self.decoder, decodable, utt, self.opts.acoustic_scale,
                                self.opts.allow_partial, self.trans_model,
                                self.config.determinize_lattice, self.det_opts)


class _LockedCompiler:
    """A compiler shared by threads: one compilation at a time (the cache
    and the statistics are shared); everything else is the compiler's."""

    def __init__(self, compiler, lock):
        self._compiler = compiler
        self._lock = lock

    def compile(self, request):
        with self._lock:
            return self._compiler.compile(request)

    def __getattr__(self, name):
        return getattr(self._compiler, name)


def utterance_inputs(opts, feature_rspecifier, counts):
    """(utt, features, ivector, online_ivectors) for every utterance that can
    be decoded, in the archive's order; the others get Kaldi's WARNING and
    count in ``counts["fail"]``."""
    ivector_reader, online_reader = open_ivector_readers(opts)
    for utt, features in SequentialTableReader(feature_rspecifier, "matrix"):
        found = utterance_ivectors(utt, features, ivector_reader, online_reader)
        if found is None:
            counts["fail"] += 1
            continue
        yield (utt, features) + found


class LatgenWriters(TableWriters):
    """The lattice, words and alignment tables; :meth:`write_result` writes
    one utterance's outputs and its log lines as Kaldi's
    DecodeUtteranceLatticeFaster does, and counts it."""

    def __init__(self, setup, lattice_wspecifier, words_wspecifier, alignment_wspecifier):
        super().__init__()
        self.setup = setup
        try:
            self.lattice = self.open(lattice_wspecifier, "compact_lattice"
                                     if setup.config.determinize_lattice else "lattice")
            self.words = self.open(words_wspecifier, "int32_vector")
            self.alignment = self.open(alignment_wspecifier, "int32_vector")
        except BaseException:
            self.abort()
            raise
        self.tot_like = 0.0
        self.frame_count = 0

    def write_result(self, utt, result, counts):
        if result is None:
            counts["fail"] += 1
            return
        if self.words:
            self.words.write(utt, result.words)
        if self.alignment:
            self.alignment.write(utt, result.alignment)
        if self.setup.word_syms is not None:
            write_word_names(utt, result.words, self.setup.word_syms)
        self.lattice.write(utt, result.lattice)
        logger.info("Log-like per frame for utterance %s is %g over %d frames.", utt,
                    result.likelihood / result.num_frames, result.num_frames)
        self.tot_like += result.likelihood
        self.frame_count += result.num_frames
        counts["success"] += 1


def log_summary(setup, writers, counts, elapsed, rtf_text="100 frames/sec", rtf_factor=1,
                compiler_summary=True):
    """The closing log lines (Kaldi's); the compiler's line only where this
    process compiled (nnet3-latgen-faster-parallel's workers compile their
    own, as each of Kaldi's threads does)."""
    frame_count = writers.frame_count
    input_frames = frame_count * setup.opts.frame_subsampling_factor
    logger.info("Time taken %gs: real-time factor assuming %s is %g", elapsed, rtf_text,
                rtf_factor * elapsed * 100.0 / input_frames if input_frames else 0.0)
    logger.info("Done %d utterances, failed for %d", counts["success"], counts["fail"])
    logger.info("Overall log-likelihood per frame is %g over %d frames.",
                writers.tot_like / frame_count if frame_count else float("nan"), frame_count)
    if compiler_summary:
        log_compiler_summary(setup.compiler)


def parse_latgen_args(args):
    model_in, fst_in, feature_rspecifier, lattice_wspecifier = args[:4]
    words_wspecifier = args[4] if len(args) > 4 else ""
    alignment_wspecifier = args[5] if len(args) > 5 else ""
    return (model_in, fst_in, feature_rspecifier, lattice_wspecifier, words_wspecifier,
            alignment_wspecifier)


def decode_in_order(setup, inputs, write, alone=False):
    """Decodes the utterances one after another on this thread (a
    ``decode_all`` for :func:`run_latgen`): with the setup's one decoder, or,
    ``alone``, each as a new decoder would (:meth:`LatgenSetup.decode_alone`)."""
    decode = setup.decode_alone if alone else setup.decode
    for utt, features, ivector, online in inputs:
        write(utt, decode(utt, features, ivector, online))


def run_latgen(opts, args, decode_all, **summary_options):
    """One run of either tool after its options are parsed (``args``: its
    4 to 6 positional arguments): loads the model, network and graph
    (:class:`LatgenSetup`), opens the output tables (:class:`LatgenWriters`),
    then ``decode_all(setup, inputs, write)`` decodes every ``(utt, features,
    ivector, online_ivectors)`` that ``inputs`` yields
    (:func:`utterance_inputs`) and calls ``write(utt, result)`` for each in
    input order. The tables are closed when all is written and aborted (no
    half-written output) when anything raises. Logs the closing lines
    (:func:`log_summary`, with ``summary_options``) and returns Kaldi's exit
    status: 0 if at least one utterance was decoded."""
    model_in, fst_in, feature_rspecifier, lat_wspec, words_wspec, ali_wspec = \
        parse_latgen_args(args)
    setup = LatgenSetup(opts, model_in, fst_in)
    writers = LatgenWriters(setup, lat_wspec, words_wspec, ali_wspec)
    counts = {"success": 0, "fail": 0}

    def write(utt, result):
        writers.write_result(utt, result, counts)

    try:
        setup.load_graph()
        start = time.time()
        decode_all(setup, utterance_inputs(opts, feature_rspecifier, counts), write)
        writers.close()
    except BaseException:
        writers.abort()
        raise
    log_summary(setup, writers, counts, time.time() - start, **summary_options)
    return 0 if counts["success"] != 0 else 1
