"""nnet3-xvector-compute-onnx: nnet3-xvector-compute with an exported ONNX model.

Kaldi's nnet3-xvector-compute usage, options and tables, with the ``.onnx``
written by ``nnet3-to-onnx --xvector=true`` in place of the network: every
utterance is cut into chunks exactly as nnet3-xvector-compute cuts it
(--chunk-size, --min-chunk-size, --pad-input), each chunk's output computed
by onnxruntime, and the x-vector is the chunks' weighted average, as
Kaldi's. The model takes any number of frames, so the chunk options are not
the model's: any may be given. Zero-length utterances, and utterances
shorter than --min-chunk-size without --pad-input, are skipped with Kaldi's
warnings; exit status 0 if at least one utterance was done.
"""

import logging
import sys

from ..driver.caching import CachingOptimizingCompilerOptions
from ..compute.xvector import XvectorSkipped
from ..errors import UsageError
from ..io.table import SequentialTableReader, TableWriter
from ._cli import ToolParser, kaldi_tool
from ._progress import ProgressBar
from ._option_groups import (register_arithmetic_options, register_options,
                             register_simple_computation_options)
from ._run_summary import RunSummary, log_summary
from ..onnx.runtime import OnnxModel, XvectorOnnxComputer

log = logging.getLogger(__name__)

USAGE = """Propagate features through an xvector neural network model exported to ONNX by
nnet3-to-onnx --xvector=true (run with onnxruntime) and write the output
vectors, as nnet3-xvector-compute does with the nnet3 model.  By default,
one xvector is extracted directly from the set of features for each
utterance.  Optionally, xvectors are extracted from chunks of input
features and averaged, to produce a single vector.

Usage: nnet3-xvector-compute-onnx [options] <onnx-in> <features-rspecifier> <vector-wspecifier>
e.g.: nnet3-xvector-compute-onnx final.onnx scp:feats.scp ark:nnet_prediction.ark
See also: nnet3-to-onnx, nnet3-xvector-compute, nnet3-compute-onnx
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    register_simple_computation_options(parser, acoustic_scale=1.0)
    parser.register_str("use-gpu", "no", "yes|no|optional|wait: use onnxruntime's CUDA "
                        "execution provider where it is installed")
    parser.register_int("chunk-size", -1, "If set, extracts xvectors from specified "
                        "chunk-size, and averages.  If not set, extracts an xvector from "
                        "all available features.")
    parser.register_int("min-chunk-size", 100, "Minimum chunk-size allowed when "
                        "extracting xvectors.")
    parser.register_bool("pad-input", True, "If true, duplicate the first and last frames "
                         "of the input features as required to equal min-chunk-size.")
    parser.register_str("cached-compiler-in", "", "If set, read the cached compiler from the "
                        "specified file path (nothing to read for an ONNX model: ignored)")
    parser.register_str("cached-compiler-out", "", "If set, write the cached compiler to the "
                        "specified file path (nothing to write for an ONNX model: ignored)")
    register_options(parser, "", CachingOptimizingCompilerOptions())
    register_arithmetic_options(parser)
    parser.register_int("num-threads", 1, "pynnet3 only: onnxruntime's intra-op threads "
                        "(0: one per core)")
    opts, args = parser.parse(argv, num_args=3)
    onnx_rxfilename, feature_rspecifier, vector_wspecifier = args
    summary = RunSummary()
    if opts.kaldi_exact_arithmetic:
        raise UsageError("--kaldi-exact-arithmetic: onnxruntime computes with its own "
                         "kernels; use nnet3-xvector-compute for Kaldi's arithmetic bit for "
                         "bit")
    ignored = [o for o in ("cached-compiler-in", "cached-compiler-out", "cache-capacity",
                           "use-shortcut") if parser.given(o)]
    if ignored:
        log.warning("--%s: there is no compilation when running an ONNX model; ignored",
                    ", --".join(ignored))

    model = OnnxModel(onnx_rxfilename, opts.num_threads, opts.use_gpu)
    computer = XvectorOnnxComputer(model, opts.chunk_size, opts.min_chunk_size, opts.pad_input)
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
    return 0 if summary.num_success != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
