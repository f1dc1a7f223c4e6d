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
import time

from ._cli import ToolParser, kaldi_tool
from ._latgen import (LatgenSetup, LatgenWriters, log_summary, parse_latgen_args,
                      register_latgen_options, utterance_inputs)

USAGE = """Generate lattices using nnet3 neural net model.
Usage: nnet3-latgen-faster [options] <nnet-in> <fst-in|fsts-rspecifier> <features-rspecifier> <lattice-wspecifier> [ <words-wspecifier> [<alignments-wspecifier>] ]
See also: nnet3-latgen-faster-parallel, nnet3-latgen-faster-batch
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    register_latgen_options(parser)
    opts, args = parser.parse(argv, num_args=(4, 6))
    model_in, fst_in, feature_rspecifier, lat_wspec, words_wspec, ali_wspec = \
        parse_latgen_args(args)
    setup = LatgenSetup(opts, model_in, fst_in)
    writers = LatgenWriters(setup, lat_wspec, words_wspec, ali_wspec)
    counts = {"success": 0, "fail": 0}
    try:
        setup.load_graph()
        start = time.time()
        for utt, features, ivector, online in utterance_inputs(opts, feature_rspecifier,
                                                               counts):
            writers.write_result(utt, setup.decode(utt, features, ivector, online), counts)
        writers.close()
    except BaseException:
        writers.abort()
        raise
    log_summary(setup, writers, counts, time.time() - start)
    return 0 if counts["success"] != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
