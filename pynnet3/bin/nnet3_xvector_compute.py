"""nnet3-xvector-compute: x-vectors of utterances (Kaldi's
nnet3bin/nnet3-xvector-compute.cc): read the network, test mode and
collapse, then for every utterance average the ``output`` row over chunks of
``--chunk-size`` frames (see :mod:`pynnet3.compute.xvector`) and write the
vector. Zero-length utterances, and utterances shorter than
``--min-chunk-size`` without ``--pad-input``, are skipped with Kaldi's
warnings; exit status 0 if at least one utterance was done.
``--cached-compiler-in`` / ``--cached-compiler-out`` read and write Kaldi's
compiled-computation cache file (:mod:`pynnet3.driver.caching`).
"""

import logging
import sys

from ..compute.compilation import log_compiler_summary, make_compiler
from ..compute.utterance import prepare_nnet_for_compute
from ..compute.xvector import XvectorComputer, XvectorSkipped
from ..driver.caching import CachingOptimizingCompilerOptions
from ..io.table import SequentialTableReader, TableWriter
from ..nnet.nnet import Nnet
from ._cli import ToolParser, kaldi_tool
from ._option_groups import (compute_backend, optimize_options, options_from,
                             register_arithmetic_options, register_options,
                             register_simple_computation_options)
from ._progress import ProgressBar
from ._run_summary import RunSummary, log_summary

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
    # The options nnet3-xvector-compute registers (the simple-computation
    # ones are accepted as Kaldi accepts them; only the chunking ones act).
    register_simple_computation_options(parser, acoustic_scale=1.0)
    parser.register_str("use-gpu", "no", "yes|no|optional|wait, only has effect if "
                        "compiled with CUDA")
    parser.register_int("chunk-size", -1, "If set, extracts xvectors from specified "
                        "chunk-size, and averages.  If not set, extracts an xvector from "
                        "all available features.")
    parser.register_int("min-chunk-size", 100, "Minimum chunk-size allowed when "
                        "extracting xvectors.")
    parser.register_bool("pad-input", True, "If true, duplicate the first and last frames "
                         "of the input features as required to equal min-chunk-size.")
    parser.register_str("cached-compiler-in", "", "If set, read the cached compiler from the "
                        "specified file path.")
    parser.register_str("cached-compiler-out", "", "If set, write the cached compiler to the "
                        "specified file path.")
    register_options(parser, "", CachingOptimizingCompilerOptions())
    register_arithmetic_options(parser)
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
    computer = XvectorComputer(nnet, opts.chunk_size, opts.min_chunk_size, opts.pad_input,
                               backend=backend, compiler=compiler)

    with TableWriter(vector_wspecifier, kind="vector") as writer, \
            SequentialTableReader(feature_rspecifier, "matrix") as feature_reader:
        progress = ProgressBar(feature_reader.num_entries, "utterances")
        for utt, features in feature_reader:
            progress.step()
            if features.shape[0] == 0:
                log.warning("Zero-length utterance: %s", utt)
                summary.num_fail += 1
                continue
            try:
                xvector = computer.compute(features, utt)
            except XvectorSkipped as e:
                log.warning("%s", e)
                summary.num_fail += 1
                continue
            writer.write(utt, xvector)
            summary.frame_count += features.shape[0]
            summary.num_success += 1
        progress.close()
    log_summary(summary, log)
    if opts.cached_compiler_out:
        log.info("Writing cache to %s", opts.cached_compiler_out)
        compiler.write_cache_file(opts.cached_compiler_out, True)
    log_compiler_summary(compiler)
    return 0 if summary.num_success != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
