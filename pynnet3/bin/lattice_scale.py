"""lattice-scale: scale lattice weights as Kaldi's lattice-scale (the 2x2
scale: graph costs by --lm-scale plus --acoustic2lm-scale times acoustic
costs; acoustic costs by --acoustic-scale (or 1/--inv-acoustic-scale) plus
--lm2acoustic-scale times graph costs)."""

import logging
import sys

from ..common.floats import f32
from ..decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from ..errors import UsageError
from ..io.table import SequentialTableReader, TableWriter
from ._cli import ToolParser, kaldi_tool

logger = logging.getLogger("pynnet3")

USAGE = """Apply scaling to lattice weights
Usage: lattice-scale [options] lattice-rspecifier lattice-wspecifier
 e.g.: lattice-scale --lm-scale=0.0 ark:1.lats ark:scaled.lats
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_bool("write-compact", True, "If true, write in normal (compact) form.")
    parser.register_float("acoustic-scale", 1.0, "Scaling factor for acoustic likelihoods")
    parser.register_float("inv-acoustic-scale", 1.0, "An alternative way of setting the "
                          "acoustic scale: you can set its inverse.")
    parser.register_float("lm-scale", 1.0, "Scaling factor for graph/lm costs")
    parser.register_float("acoustic2lm-scale", 0.0,
                          "Add this times original acoustic costs to LM costs")
    parser.register_float("lm2acoustic-scale", 0.0,
                          "Add this times original LM costs to acoustic costs")
    opts, (rspecifier, wspecifier) = parser.parse(argv, num_args=2)
    acoustic_scale = f32(opts.acoustic_scale)
    inv = f32(opts.inv_acoustic_scale)
    if not (acoustic_scale == 1.0 or inv == 1.0):
        raise UsageError("give only one of --acoustic-scale and --inv-acoustic-scale")
    if inv != 1.0:
        acoustic_scale = f32(1.0 / inv)
    scale = ((f32(opts.lm_scale), f32(opts.acoustic2lm_scale)),
             (f32(opts.lm2acoustic_scale), acoustic_scale))
    kind = "compact_lattice" if opts.write_compact else "lattice"
    n_done = 0
    with TableWriter(wspecifier, kind) as writer:
        for key, lat in SequentialTableReader(rspecifier, kind):
            writer.write(key, lat.scale(scale))
            n_done += 1
    logger.info("Done %d lattices.", n_done)
    return 0 if n_done else 1


if __name__ == "__main__":
    sys.exit(main())
