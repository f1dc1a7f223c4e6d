"""nnet3-xvector-compute: x-vectors of utterances (Kaldi's
nnet3bin/nnet3-xvector-compute.cc): read the network, test mode and
collapse, then for every utterance average the ``output`` row over chunks of
``--chunk-size`` frames (see :mod:`pynnet3.compute.xvector`) and write the
vector. Zero-length utterances, and utterances shorter than
``--min-chunk-size`` without ``--pad-input``, are skipped with Kaldi's
warnings; exit status 0 if at least one utterance was done.
``--cached-compiler-in`` / ``--cached-compiler-out`` read and write Kaldi's
compiled-computation cache file (:mod:`pynnet3.driver.caching`).
With BLAS arithmetic and ``OPENBLAS_NUM_THREADS`` > 1, as many utterances
as that are computed at once, each on a thread of its own with
single-threaded BLAS (Kaldi spreads each product over BLAS threads
instead); the x-vectors are written in input order and are the same bytes
as with one thread.
"""

import logging
import sys

from ..compute.compilation import log_compiler_summary, make_compiler
from ..compute.utterance import prepare_nnet_for_compute
from ..compute.xvector import XvectorComputer
from ..driver.caching import CachingOptimizingCompilerOptions
from ..nnet.nnet import Nnet
from ._cli import ToolParser, kaldi_tool
from ._compute_threads import network_threads, running
from ._option_groups import (compute_backend, optimize_options, options_from,
                             register_xvector_options)
from ._run_summary import RunSummary, log_summary
from ._utterance_loop import write_xvectors

log = logging.getLogger(__name__)

USAGE = """Propagate features through an xvector neural network model and write
the output vectors.  "Xvector" is our term for a vector or
embedding which is the output of a particular type of neural network
architecture found in speaker recognition.  This architecture
consists of several layers that operate on frames, a statistics
pooling layer that aggregates over the frame-level representations
and possibly additional layers that operate on segment-level
representations.  The xvectors are generally extracted from an
output layer after the statistics pooling layer.  By default, one
xvector is extracted directly from the set of features for each
utterance.  Optionally, xvectors are extracted from chunks of input
features and averaged, to produce a single vector.

Usage: nnet3-xvector-compute [options] <raw-nnet-in> <features-rspecifier> <vector-wspecifier>
e.g.: nnet3-xvector-compute final.raw scp:feats.scp ark:nnet_prediction.ark
See also: nnet3-compute
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    register_xvector_options(parser, "yes|no|optional|wait, only has effect if compiled with "
                             "CUDA")
    opts, args = parser.parse(argv, num_args=3)
    nnet_rxfilename, feature_rspecifier, vector_wspecifier = args
    summary = RunSummary()
    backend = compute_backend(opts, opts.use_gpu)

    nnet = Nnet.read(nnet_rxfilename)
    prepare_nnet_for_compute(nnet, getattr(backend, "blas_threads", None))
    compiler = make_compiler(nnet, optimize_options(opts),
                             options_from(opts, "", CachingOptimizingCompilerOptions()))
    if opts.cached_compiler_in:
        log.info("Reading cache from %s", opts.cached_compiler_in)
        compiler.read_cache_file(opts.cached_compiler_in)
    # With BLAS arithmetic the utterances run on threads of the computer's own
    computer = XvectorComputer(nnet, opts.chunk_size, opts.min_chunk_size, opts.pad_input,
                               backend=backend, compiler=compiler,
                               num_threads=network_threads(opts))
    with running(computer):
        write_xvectors(computer, feature_rspecifier, vector_wspecifier, summary, log)
    log_summary(summary, log)
    if opts.cached_compiler_out:
        log.info("Writing cache to %s", opts.cached_compiler_out)
        compiler.write_cache_file(opts.cached_compiler_out, True)
    log_compiler_summary(compiler)
    return 0 if summary.num_success != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
