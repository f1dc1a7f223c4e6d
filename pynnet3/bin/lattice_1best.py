"""lattice-1best: the best path of compact lattices, written as lattices, as
Kaldi's lattice-1best (scaled by --lm-scale/--acoustic-scale with the
optional word insertion penalty for the search, then unscaled)."""

import logging
import sys

from ..common.floats import f32
from ..decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from ..errors import UsageError
from ..io.table import SequentialTableReader, TableWriter
from ._cli import ToolParser, kaldi_tool

logger = logging.getLogger("pynnet3")

USAGE = """Compute best path through lattices and write out as FSTs
Note: differs from lattice-nbest with --n=1 because we won't
append -1 to the utterance-ids.  Differs from lattice-best-path
because output is FST.

Usage: lattice-1best [options] <lattice-rspecifier> <lattice-wspecifier>
 e.g.: lattice-1best --acoustic-scale=0.1 ark:1.lats ark:1best.lats
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_float("acoustic-scale", 1.0, "Scaling factor for acoustic likelihoods")
    parser.register_float("lm-scale", 1.0, "Scaling factor for language model scores.")
    parser.register_float("word-ins-penalty", 0.0, "Word insertion penalty.")
    opts, (rspecifier, wspecifier) = parser.parse(argv, num_args=2)
    lm, ac = f32(opts.lm_scale), f32(opts.acoustic_scale)
    if ac == 0.0 or lm == 0.0:
        raise UsageError("Do not use exactly zero acoustic or LM scale (cannot be inverted)")
    n_done = n_err = 0
    with TableWriter(wspecifier, "compact_lattice") as writer:
        for key, clat in SequentialTableReader(rspecifier, "compact_lattice"):
            clat.scale(((lm, 0.0), (0.0, ac)))
            if opts.word_ins_penalty > 0.0:
                clat.add_word_ins_penalty(opts.word_ins_penalty)
            best = clat.shortest_path()
            if best.start is None:
                logger.warning("Possibly empty lattice for utterance-id %s(no output)", key)
                n_err += 1
                continue
            if opts.word_ins_penalty > 0.0:
                best.add_word_ins_penalty(-opts.word_ins_penalty)
            best.scale(((1.0 / lm, 0.0), (0.0, 1.0 / ac)))
            writer.write(key, best)
            n_done += 1
    logger.info("Done converting %d to best path, %d had errors.", n_done, n_err)
    return 0 if n_done else 1


if __name__ == "__main__":
    sys.exit(main())
