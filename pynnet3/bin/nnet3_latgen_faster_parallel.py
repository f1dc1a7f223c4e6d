"""nnet3-latgen-faster-parallel: nnet3-latgen-faster with several decoding
jobs at once (--num-threads), as Kaldi's nnet3-latgen-faster-parallel.

Kaldi runs one thread per utterance (network and search) and writes the
results in input order. pynnet3's network interpreter and Cython search hold
Python's GIL, so threads would not run at once; here ``--num-threads``
worker processes, forked after the model and graph are loaded (they share
them copy-on-write), each decode whole utterances, and the parent reads the
features and writes the lattices, words, alignments and log lines in input
order (:class:`pynnet3.bin._fork_pool.OrderedForkPool`). The outputs are
byte for byte those of nnet3-latgen-faster with the same options. With
``--num-threads=0`` or 1 the decoding runs in the tool's own process.

As with Kaldi, every worker runs its own BLAS: on a machine with few cores
set ``OPENBLAS_NUM_THREADS=1`` (or the equivalent) so that the workers do
not compete for them.
"""

import logging
import sys
import time

from ..errors import UsageError
from ._cli import ToolParser, kaldi_tool
from ._fork_pool import OrderedForkPool
from ._latgen import (LatgenSetup, LatgenWriters, log_summary, parse_latgen_args,
                      register_latgen_options, utterance_inputs)

logger = logging.getLogger("pynnet3")

USAGE = """Generate lattices using nnet3 neural net model.  This version supports
multiple decoding threads (using a shared decoding graph.)
Usage: nnet3-latgen-faster-parallel [options] <nnet-in> <fst-in|fsts-rspecifier> <features-rspecifier> <lattice-wspecifier> [ <words-wspecifier> [<alignments-wspecifier>] ]
See also: nnet3-latgen-faster-batch (which supports GPUs)
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_int("num-threads", 1, "Number of actively processing threads to run in "
                        "parallel")
    parser.register_int("num-threads-total", 0, "Total number of threads, including those "
                        "that are waiting on other threads to produce their output.  "
                        "Controls memory use.  If <= 0, defaults to --num-threads plus 20.  "
                        "Otherwise, must be >= num-threads.")
    register_latgen_options(parser)
    opts, args = parser.parse(argv, num_args=(4, 6))
    if opts.num_threads < 0 or (0 < opts.num_threads_total < opts.num_threads):
        raise UsageError("num-threads-total, if specified, must be >= num-threads (and "
                         "num-threads >= 0); got --num-threads=%d --num-threads-total=%d"
                         % (opts.num_threads, opts.num_threads_total))
    model_in, fst_in, feature_rspecifier, lat_wspec, words_wspec, ali_wspec = \
        parse_latgen_args(args)
    setup = LatgenSetup(opts, model_in, fst_in)
    writers = LatgenWriters(setup, lat_wspec, words_wspec, ali_wspec)
    counts = {"success": 0, "fail": 0}
    pool = None
    try:
        setup.load_graph()
        start = time.time()
        inputs = utterance_inputs(opts, feature_rspecifier, counts)
        if opts.num_threads <= 1:
            for utt, features, ivector, online in inputs:
                writers.write_result(utt, setup.decode(utt, features, ivector, online),
                                     counts)
        else:
            total = (opts.num_threads_total if opts.num_threads_total > 0
                     else opts.num_threads + 20)
            pool = OrderedForkPool(_DecodeJob(setup), opts.num_threads, total)
            for utt, features, ivector, online in inputs:
                for done_utt, result in pool.submit((utt, features, ivector, online)):
                    writers.write_result(done_utt, result, counts)
            for done_utt, result in pool.drain():
                writers.write_result(done_utt, result, counts)
            pool.close()
            pool = None
        writers.close()
    except BaseException:
        if pool is not None:
            pool.terminate()
        writers.abort()
        raise
    log_summary(setup, writers, counts, time.time() - start,
                rtf_text="100 feature frames/sec", rtf_factor=max(opts.num_threads, 1),
                compiler_summary=opts.num_threads <= 1)
    return 0 if counts["success"] != 0 else 1


class _DecodeJob:
    """One utterance, in a worker: (utt, DecodeResult or None)."""

    def __init__(self, setup):
        self.setup = setup

    def __call__(self, utt, features, ivector, online):
        return utt, self.setup.decode(utt, features, ivector, online)


if __name__ == "__main__":
    sys.exit(main())
