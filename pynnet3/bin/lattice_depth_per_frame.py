"""lattice-depth-per-frame: how many arcs of each compact lattice cross each
frame, as Kaldi's lattice-depth-per-frame (CompactLatticeDepthPerFrame),
optionally passing the (topologically sorted) lattices on."""

import logging
import sys

from ..decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from ..decoding.lattice_functions import (compact_lattice_depth_per_frame,
                                          top_sort_compact_lattice_if_needed)
from ..io.table import SequentialTableReader, TableWriters
from ._cli import ToolParser, kaldi_tool

logger = logging.getLogger("pynnet3")

USAGE = """For each lattice, compute a vector of length (num-frames) saying how
may arcs cross each frame.  See also lattice-depth
Usage: lattice-depth-per-frame <lattice-rspecifier> <depth-wspecifier> [<lattice-wspecifier>]
The final <lattice-wspecifier> allows you to write the input lattices out
in case you want to do something else with them as part of the same pipe.
E.g.: lattice-depth-per-frame ark:- ark,t:-
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    opts, args = parser.parse(argv, num_args=(2, 3))
    n_done = 0
    with TableWriters() as writers:
        depth_writer = writers.open(args[1], "int32_vector")
        lattice_writer = writers.open(args[2] if len(args) > 2 else "", "compact_lattice")
        for key, clat in SequentialTableReader(args[0], "compact_lattice"):
            top_sort_compact_lattice_if_needed(clat)
            depth_writer.write(key, compact_lattice_depth_per_frame(clat))
            if lattice_writer:
                lattice_writer.write(key, clat)
            n_done += 1
    logger.info("Done %d lattices.", n_done)
    return 0 if n_done else 1


if __name__ == "__main__":
    sys.exit(main())
