"""nnet3-latgen-faster: decode features with an nnet3 acoustic model and a
decoding graph (HCLG.fst), writing lattices, and optionally the best path's
words and alignments, as Kaldi's nnet3-latgen-faster does.

Lattices are determinized as Kaldi's (DeterminizeLatticePhonePrunedWrapper,
compact lattices) or, with ``--determinize-lattice=false``, written as raw
state-level lattices. Only a single graph file is accepted (not an archive
of per-utterance graphs).

The steps (loading, per-utterance decoding, writing) are in
:mod:`._latgen`, which nnet3-latgen-faster-parallel runs too.
"""

import sys

from ._cli import ToolParser, kaldi_tool
from ._latgen import decode_in_order, register_latgen_options, run_latgen

USAGE = """Generate lattices using nnet3 neural net model.
Usage: nnet3-latgen-faster [options] <nnet-in> <fst-in|fsts-rspecifier> <features-rspecifier> <lattice-wspecifier> [ <words-wspecifier> [<alignments-wspecifier>] ]
See also: nnet3-latgen-faster-parallel, nnet3-latgen-faster-batch
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    register_latgen_options(parser)
    opts, args = parser.parse(argv, num_args=(4, 6))
    return run_latgen(opts, args, decode_in_order)


if __name__ == "__main__":
    sys.exit(main())
