"""lattice-prune: beam-prune compact lattices as Kaldi's lattice-prune
(PruneLattice after scaling the acoustic costs by --acoustic-scale, the
scale undone before writing)."""

import logging
import sys

import numpy as np

from ..decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from ..decoding.lattice_functions import prune_lattice
from ..errors import UsageError
from ..io.table import SequentialTableReader, TableWriter
from ._cli import ToolParser, kaldi_tool

logger = logging.getLogger("pynnet3")

USAGE = """Apply beam pruning to lattices
Usage: lattice-prune [options] lattice-rspecifier lattice-wspecifier
 e.g.: lattice-prune --acoustic-scale=0.1 --beam=4.0 ark:1.lats ark:pruned.lats
"""


def acoustic_scale_option(opts):
    """--acoustic-scale, or 1/--inv-acoustic-scale (rounded to float as
    Kaldi's BaseFloat); giving both is an error."""
    acoustic_scale, inv = opts.acoustic_scale, opts.inv_acoustic_scale
    if not (acoustic_scale == 1.0 or inv == 1.0):
        raise UsageError("give only one of --acoustic-scale and --inv-acoustic-scale")
    if inv != 1.0:
        acoustic_scale = float(np.float32(1.0 / inv))
    return acoustic_scale


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_float("acoustic-scale", 1.0, "Scaling factor for acoustic likelihoods")
    parser.register_float("inv-acoustic-scale", 1.0, "An alternative way of setting the "
                          "acoustic scale: you can set its inverse.")
    parser.register_float("beam", 10.0, "Pruning beam [applied after acoustic scaling]")
    opts, (rspecifier, wspecifier) = parser.parse(argv, num_args=2)
    acoustic_scale = acoustic_scale_option(opts)
    if acoustic_scale == 0.0:
        raise UsageError("Do not use a zero acoustic scale (cannot be inverted)")
    if not opts.beam > 0.0:
        raise UsageError("--beam must be positive, got %g" % opts.beam)
    n_done = arcs_in = arcs_out = states_in = states_out = 0
    with TableWriter(wspecifier, "compact_lattice") as writer:
        for key, clat in SequentialTableReader(rspecifier, "compact_lattice"):
            clat.scale(((1.0, 0.0), (0.0, acoustic_scale)))
            narcs, nstates = clat.num_arcs(), clat.num_states
            arcs_in += narcs
            states_in += nstates
            if not prune_lattice(opts.beam, clat):
                logger.warning("Error pruning lattice for utterance %s", key)
            arcs_out += clat.num_arcs()
            states_out += clat.num_states
            logger.info("For utterance %s, pruned #states from %d to %d and #arcs from %d "
                        "to %d", key, nstates, clat.num_states, narcs, clat.num_arcs())
            clat.scale(((1.0, 0.0), (0.0, 1.0 / acoustic_scale)))
            writer.write(key, clat)
            n_done += 1
    den = np.float32(n_done if n_done else 1.0)
    logger.info("Overall, pruned from on average %g to %g states, and from %g to %g arcs, "
                "over %d utterances.", np.float32(states_in) / den,
                np.float32(states_out) / den, np.float32(arcs_in) / den,
                np.float32(arcs_out) / den, n_done)
    logger.info("Done %d lattices.", n_done)
    return 0 if n_done else 1


if __name__ == "__main__":
    sys.exit(main())
