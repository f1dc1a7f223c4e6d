"""nnet3-latgen-faster: decode features with an nnet3 acoustic model and a
decoding graph (HCLG.fst), writing lattices, and optionally the best path's
words and alignments, as Kaldi's nnet3-latgen-faster does.

Lattices are determinized as Kaldi's (DeterminizeLatticePhonePrunedWrapper,
compact lattices) or, with ``--determinize-lattice=false``, written as raw
state-level lattices. Only a single graph file is accepted (not an archive
of per-utterance graphs).
"""

import logging
import sys
import time

from ..compute.compilation import log_compiler_summary, make_compiler
from ..decode.api import check_graph_labels, decode_utterance, make_decoder
from ..decode.config import LatticeFasterDecoderConfig
from ..decode.determinize import K_DELTA, DeterminizeLatticePhonePrunedOptions
from ..decode.decodable import (DecodableAmNnetSimple, decodable_nnet_computer,
                                transition_id_to_pdf_table)
from ..decode.fst import read_fst
from ..decode.lattice import register_lattice_holder
from ..errors import UsageError
from ..io.table import (RandomAccessTableReader, RandomAccessTableReaderMapped,
                        SequentialTableReader, TableWriter)
from ..nnet.am import read_mdl
from ._cli import ToolParser, kaldi_tool
from .nnet3_compute import (optimize_options, register_ivector_options,
                            register_simple_computation_options, simple_computation_options)

logger = logging.getLogger("pynnet3")

USAGE = """Generate lattices using nnet3 neural net model.
Usage: nnet3-latgen-faster [options] <nnet-in> <fst-in|fsts-rspecifier> <features-rspecifier> <lattice-wspecifier> [ <words-wspecifier> [<alignments-wspecifier>] ]
See also: nnet3-latgen-faster-parallel, nnet3-latgen-faster-batch
"""


def register_decoder_options(parser):
    d = LatticeFasterDecoderConfig()
    parser.register_float("beam", d.beam, "Decoding beam.  Larger->slower, more accurate.")
    parser.register_int("max-active", d.max_active,
                        "Decoder max active states.  Larger->slower; more accurate")
    parser.register_int("min-active", d.min_active, "Decoder minimum #active states.")
    parser.register_float("lattice-beam", d.lattice_beam, "Lattice generation beam.  "
                          "Larger->slower, and deeper lattices")
    parser.register_int("prune-interval", d.prune_interval,
                        "Interval (in frames) at which to prune tokens")
    parser.register_bool("determinize-lattice", d.determinize_lattice,
                         "If true, determinize the lattice (lattice-determinization, keeping "
                         "only best pdf-sequence for each word-sequence).")
    parser.register_float("beam-delta", d.beam_delta, "Increment used in decoding-- this "
                          "parameter is obscure and relates to a speedup in the way the "
                          "max-active constraint is applied.  Larger is more accurate.")
    parser.register_float("hash-ratio", d.hash_ratio,
                          "Setting used in decoder to control hash behavior")
    parser.register_float("delta", float(K_DELTA), "Tolerance used in determinization")
    parser.register_int("max-mem", 50000000, "Maximum approximate memory usage in "
                        "determinization (real usage might be many times this).")
    parser.register_bool("phone-determinize", True, "If true, do an initial pass of "
                         "determinization on both phones and words (see also "
                         "--word-determinize)")
    parser.register_bool("word-determinize", True, "If true, do a second pass of "
                         "determinization on words only (see also --phone-determinize)")
    parser.register_bool("minimize", False, "If true, push and minimize after "
                         "determinization.")


def decoder_config(opts):
    config = LatticeFasterDecoderConfig(
        beam=opts.beam, max_active=opts.max_active, min_active=opts.min_active,
        lattice_beam=opts.lattice_beam, prune_interval=opts.prune_interval,
        determinize_lattice=opts.determinize_lattice, beam_delta=opts.beam_delta,
        hash_ratio=opts.hash_ratio)
    config.check()
    return config


def read_word_symbols(filename):
    table = {}
    try:
        with open(filename, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields = line.split()
                if len(fields) == 2:
                    table[int(fields[1])] = fields[0]
                elif fields:
                    raise ValueError
    except (OSError, ValueError):
        raise UsageError("Could not read symbol table from file %s" % filename) from None
    return table


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    register_decoder_options(parser)
    register_simple_computation_options(parser, acoustic_scale=0.1)
    parser.register_str("word-symbol-table", "", "Symbol table for words [for debug output]")
    parser.register_bool("allow-partial", False,
                         "If true, produce output even if end state was not reached.")
    register_ivector_options(parser)
    opts, args = parser.parse(argv, num_args=(4, 6))
    model_in, fst_in, feature_rspecifier, lattice_wspecifier = args[:4]
    words_wspecifier = args[4] if len(args) > 4 else ""
    alignment_wspecifier = args[5] if len(args) > 5 else ""
    config = decoder_config(opts)
    det_opts = DeterminizeLatticePhonePrunedOptions(
        delta=opts.delta, max_mem=opts.max_mem, phone_determinize=opts.phone_determinize,
        word_determinize=opts.word_determinize, minimize=opts.minimize)
    if ":" in fst_in and fst_in.split(":", 1)[0].split(",")[0] in ("ark", "scp"):
        raise UsageError("per-utterance decoding graphs (%s) are not supported; give one "
                         "graph file" % fst_in)

    trans_model, am_nnet = read_mdl(model_in)
    compiler = make_compiler(am_nnet.nnet, optimize_options(opts))
    computer = decodable_nnet_computer(
        am_nnet, simple_computation_options(opts), compiler=compiler,
        debug_computation=opts.debug_computation,
        debug=getattr(opts, "computation.debug") or opts.verbose >= 5)
    tid_to_pdf = transition_id_to_pdf_table(trans_model)
    register_lattice_holder()
    word_syms = read_word_symbols(opts.word_symbol_table) if opts.word_symbol_table else None

    online_reader = (RandomAccessTableReader(opts.online_ivectors, "matrix")
                     if opts.online_ivectors else None)
    ivector_reader = (RandomAccessTableReaderMapped(opts.ivectors, opts.utt2spk, "vector")
                      if opts.ivectors else None)
    writers = []
    try:
        lattice_writer = TableWriter(lattice_wspecifier, "compact_lattice"
                                     if config.determinize_lattice else "lattice")
        writers.append(lattice_writer)
        words_writer = TableWriter(words_wspecifier, "int32_vector") if words_wspecifier else None
        if words_writer:
            writers.append(words_writer)
        ali_writer = (TableWriter(alignment_wspecifier, "int32_vector")
                      if alignment_wspecifier else None)
        if ali_writer:
            writers.append(ali_writer)

        fst = read_fst(fst_in)
        check_graph_labels(fst, tid_to_pdf, fst_in)
        start = time.time()
        decoder = make_decoder(fst, config)
        tot_like, frame_count, num_success, num_fail = 0.0, 0, 0, 0
        for utt, features in SequentialTableReader(feature_rspecifier, "matrix"):
            if features.shape[0] == 0:
                logger.warning("Zero-length utterance: %s", utt)
                num_fail += 1
                continue
            ivector = online = None
            if ivector_reader is not None:
                if not ivector_reader.has_key(utt):
                    logger.warning("No iVector available for utterance %s", utt)
                    num_fail += 1
                    continue
                ivector = ivector_reader.value(utt)
            if online_reader is not None:
                if not online_reader.has_key(utt):
                    logger.warning("No online iVector available for utterance %s", utt)
                    num_fail += 1
                    continue
                online = online_reader.value(utt)
            decodable = DecodableAmNnetSimple(computer, tid_to_pdf, features, ivector, online,
                                              opts.online_ivector_period)
            result = decode_utterance(decoder, decodable, utt, opts.acoustic_scale,
                                      opts.allow_partial, trans_model,
                                      config.determinize_lattice, det_opts)
            if result is None:
                num_fail += 1
                continue
            if words_writer:
                words_writer.write(utt, result.words)
            if ali_writer:
                ali_writer.write(utt, result.alignment)
            if word_syms is not None:
                names = []
                for w in result.words:
                    if w not in word_syms:
                        raise UsageError("Word-id %d not in symbol table." % w)
                    names.append(word_syms[w])
                sys.stderr.write(utt + " " + "".join(n + " " for n in names) + "\n")
                sys.stderr.flush()
            lattice_writer.write(utt, result.lattice)
            logger.info("Log-like per frame for utterance %s is %g over %d frames.", utt,
                        result.likelihood / result.num_frames, result.num_frames)
            tot_like += result.likelihood
            frame_count += decodable.num_frames_ready()
            num_success += 1
        for w in writers:
            w.close()
    except BaseException:
        for w in writers:
            w.abort()
        raise
    elapsed = time.time() - start
    input_frames = frame_count * opts.frame_subsampling_factor
    logger.info("Time taken %gs: real-time factor assuming 100 frames/sec is %g", elapsed,
                elapsed * 100.0 / input_frames if input_frames else 0.0)
    logger.info("Done %d utterances, failed for %d", num_success, num_fail)
    logger.info("Overall log-likelihood per frame is %g over %d frames.",
                tot_like / frame_count if frame_count else float("nan"), frame_count)
    log_compiler_summary(compiler)
    return 0 if num_success != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
