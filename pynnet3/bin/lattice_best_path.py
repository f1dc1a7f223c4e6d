"""lattice-best-path: the best path of compact lattices as word sequences and
alignments, as Kaldi's lattice-best-path (CompactLatticeShortestPath after
scaling by --lm-scale and --acoustic-scale)."""

import logging
import sys

from ..common.floats import f32
from ..decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from ..io.table import SequentialTableReader, TableWriters
from ._cli import ToolParser, kaldi_tool
from ._word_symbols import read_word_symbols, write_word_names

logger = logging.getLogger("pynnet3")

USAGE = """Generate 1-best path through lattices; output as transcriptions and alignments
Note: if you want output as FSTs, use lattice-1best; if you want output
with acoustic and LM scores, use lattice-1best | nbest-to-linear
Usage: lattice-best-path [options]  <lattice-rspecifier> [ <transcriptions-wspecifier> [ <alignments-wspecifier>] ]
 e.g.: lattice-best-path --acoustic-scale=0.1 ark:1.lats 'ark,t:|int2sym.pl -f 2- words.txt > text' ark:1.ali
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_float("acoustic-scale", 1.0, "Scaling factor for acoustic likelihoods")
    parser.register_float("lm-scale", 1.0, "Scaling factor for LM probabilities. Note: the "
                          "ratio acoustic-scale/lm-scale is all that matters.")
    parser.register_str("word-symbol-table", "", "Symbol table for words [for debug output]")
    opts, args = parser.parse(argv, num_args=(1, 3))
    rspecifier = args[0]
    words_wspecifier = args[1] if len(args) > 1 else ""
    ali_wspecifier = args[2] if len(args) > 2 else ""
    word_syms = read_word_symbols(opts.word_symbol_table) if opts.word_symbol_table else None
    scale = ((f32(opts.lm_scale), 0.0), (0.0, f32(opts.acoustic_scale)))
    n_done = n_fail = n_frame = 0
    tot1 = tot2 = 0.0
    with TableWriters() as writers:
        words_writer = writers.open(words_wspecifier, "int32_vector")
        ali_writer = writers.open(ali_wspecifier, "int32_vector")
        for key, clat in SequentialTableReader(rspecifier, "compact_lattice"):
            path = clat.scale(scale).shortest_path()
            if path.start is None:
                logger.warning("Best-path failed for key %s", key)
                n_fail += 1
                continue
            alignment, words, (w1, w2) = path.linear_symbol_sequence()
            logger.info("For utterance %s, best cost %g + %g = %g over %d frames.", key, w1,
                        w2, f32(w1 + w2), len(alignment))
            if words_writer:
                words_writer.write(key, words)
            if ali_writer:
                ali_writer.write(key, alignment)
            if word_syms is not None:
                write_word_names(key, words, word_syms)
            n_done += 1
            n_frame += len(alignment)
            tot1, tot2 = f32(tot1 + w1), f32(tot2 + w2)
    tot = f32(tot1 + tot2)
    if n_frame:
        logger.info("Overall cost per frame is %g = %g [graph] + %g [acoustic] over %d frames.",
                    tot / n_frame, tot1 / n_frame, tot2 / n_frame, n_frame)
    else:
        logger.info("Overall cost per frame is nan = nan [graph] + nan [acoustic] over 0 "
                    "frames.")
    logger.info("Done %d lattices, failed for %d", n_done, n_fail)
    return 0 if n_done else 1


if __name__ == "__main__":
    sys.exit(main())
