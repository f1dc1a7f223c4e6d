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

from ._cli import ToolParser, kaldi_tool
from ._option_groups import (check_onnx_arithmetic, register_onnx_runtime_options,
                             register_xvector_options)
from ._run_summary import RunSummary, log_summary
from ._utterance_loop import write_xvectors
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
    register_xvector_options(
        parser, "yes|no|optional|wait: use onnxruntime's CUDA execution provider where it is "
        "installed",
        cached_compiler_in_doc="If set, read the cached compiler from the specified file path "
        "(nothing to read for an ONNX model: ignored)",
        cached_compiler_out_doc="If set, write the cached compiler to the specified file path "
        "(nothing to write for an ONNX model: ignored)")
    register_onnx_runtime_options(parser)
    opts, args = parser.parse(argv, num_args=3)
    onnx_rxfilename, feature_rspecifier, vector_wspecifier = args
    summary = RunSummary()
    check_onnx_arithmetic(opts, "nnet3-xvector-compute")
    ignored = [o for o in ("cached-compiler-in", "cached-compiler-out", "cache-capacity",
                           "use-shortcut") if parser.given(o)]
    if ignored:
        log.warning("--%s: there is no compilation when running an ONNX model; ignored",
                    ", --".join(ignored))

    model = OnnxModel(onnx_rxfilename, opts.num_threads, opts.use_gpu)
    computer = XvectorOnnxComputer(model, opts.chunk_size, opts.min_chunk_size, opts.pad_input)
    write_xvectors(computer, feature_rspecifier, vector_wspecifier, summary, log)
    log_summary(summary, log)
    return 0 if summary.num_success != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
