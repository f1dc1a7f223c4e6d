"""lattice-add-penalty: add a word insertion penalty to the graph cost of
every word arc of compact lattices, as Kaldi's lattice-add-penalty."""

import logging
import sys

from ..decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from ..io.table import SequentialTableReader, TableWriter
from ._cli import ToolParser, kaldi_tool

logger = logging.getLogger("pynnet3")

USAGE = """Add word insertion penalty to the lattice.
Note: penalties are negative log-probs, base e, and are added to the
'language model' part of the cost.

Usage: lattice-add-penalty [options] <lattice-rspecifier> <lattice-wspecifier>
 e.g.: lattice-add-penalty --word-ins-penalty=1.0 ark:- ark:-
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_float("word-ins-penalty", 0.0, "Word insertion penalty")
    opts, (rspecifier, wspecifier) = parser.parse(argv, num_args=2)
    n_done = 0
    with TableWriter(wspecifier, "compact_lattice") as writer:
        for key, clat in SequentialTableReader(rspecifier, "compact_lattice"):
            writer.write(key, clat.add_word_ins_penalty(opts.word_ins_penalty))
            n_done += 1
    logger.info("Done adding word insertion penalty to %d lattices.", n_done)
    return 0 if n_done else 1


if __name__ == "__main__":
    sys.exit(main())
