"""lattice-mbr-decode: minimum-Bayes-risk decoding of compact lattices, as
Kaldi's lattice-mbr-decode (MinimumBayesRisk after scaling the graph costs by
--lm-scale and the acoustic costs by --acoustic-scale): the word sequence,
and optionally the Bayes risk, the sausage statistics (as a Posterior per
utterance) and the (start, end) frames of each sausage bin or, with
--one-best-times, of each output word."""

import logging
import sys

import numpy as np

from ..decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from ..decoding.mbr import MinimumBayesRisk
from ..io.table import SequentialTableReader, TableWriters
from ._cli import ToolParser, kaldi_tool
from ._word_symbols import read_word_symbols

logger = logging.getLogger("pynnet3")

USAGE = """Do Minimum Bayes Risk decoding (decoding that aims to minimize the 
expected word error rate).  Possible outputs include the 1-best path
(i.e. the word-sequence, as a sequence of ints per utterance), the
computed Bayes Risk for each utterance, and the sausage stats as
(for each utterance) std::vector<std::vector<std::pair<int32, float> > >
for which we use the same I/O routines as for posteriors (type Posterior).
times-wspecifier writes pairs of (start-time, end-time) in frames, for
each sausage position, or for each one-best entry if --one-best-times=true.
Note: use ark:/dev/null or the empty string for unwanted outputs.
Note: times will only be very meaningful if you first use lattice-word-align.
If you need ctm-format output, don't use this program but use lattice-to-ctm-conf
with --decode-mbr=true.

Usage: lattice-mbr-decode [options]  lattice-rspecifier transcriptions-wspecifier [ bayes-risk-wspecifier [ sausage-stats-wspecifier [ times-wspecifier] ] ] 
 e.g.: lattice-mbr-decode --acoustic-scale=0.1 ark:1.lats 'ark,t:|int2sym.pl -f 2- words.txt > text' ark:/dev/null ark:1.sau
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_float("acoustic-scale", 1.0, "Scaling factor for acoustic likelihoods")
    parser.register_float("lm-scale", 1.0, "Scaling factor for language model probabilities")
    parser.register_str("word-symbol-table", "", "Symbol table for words [for debug output]")
    parser.register_bool("one-best-times", False, "If true, output times corresponding to "
                         "one-best, not whole sausage.")
    opts, args = parser.parse(argv, num_args=(2, 5))
    rspecifier = args[0]
    wspecs = args[1:] + [""] * (5 - len(args))
    trans_wspec, risk_wspec, stats_wspec, times_wspec = wspecs[:4]
    if opts.word_symbol_table:   # read (and checked) as Kaldi does, but not used
        read_word_symbols(opts.word_symbol_table)
    n_done = n_words = 0
    tot_risk = np.float32(0.0)
    with TableWriters() as writers:
        trans_writer = writers.open(trans_wspec, "int32_vector")
        risk_writer = writers.open(risk_wspec, "float")
        stats_writer = writers.open(stats_wspec, "posterior")
        times_writer = writers.open(times_wspec, "float_pair_vector")
        scale = ((opts.lm_scale, 0.0), (0.0, opts.acoustic_scale))
        for key, clat in SequentialTableReader(rspecifier, "compact_lattice"):
            clat.scale(scale)
            mbr = MinimumBayesRisk(clat)
            if trans_writer:
                trans_writer.write(key, mbr.one_best)
            if risk_writer:
                risk_writer.write(key, mbr.bayes_risk)
            if stats_writer:
                stats_writer.write(key, mbr.sausage_stats)
            if times_writer:
                times_writer.write(key, mbr.one_best_times if opts.one_best_times
                                   else mbr.sausage_times)
            n_done += 1
            n_words += len(mbr.one_best)
            tot_risk = np.float32(tot_risk + np.float32(mbr.bayes_risk))
    logger.info("Done %d lattices.", n_done)
    with np.errstate(divide="ignore", invalid="ignore"):
        logger.info("Average Bayes Risk per sentence is %g and per word, %g",
                    np.float32(tot_risk / np.float32(n_done)),
                    np.float32(tot_risk / np.float32(n_words)))
    return 0 if n_done else 1


if __name__ == "__main__":
    sys.exit(main())
