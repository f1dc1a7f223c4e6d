"""nnet3-compute-onnx: nnet3-compute with an exported ONNX model.

Kaldi's nnet3-compute usage, options and tables, with the ``.onnx`` written
by nnet3-to-onnx in place of the network: every utterance is cut into chunks
exactly as nnet3-compute cuts it (edge frames, initial and final chunks, the
i-vector of each chunk) and computed by onnxruntime. The chunk options
(--frames-per-chunk, --extra-*-context*, --frame-subsampling-factor,
--online-ivector-period, --use-priors) are the model's: given here, they
must equal what it was exported with. A ``streaming`` model
(nnet3-to-onnx --streaming=true) is run chunk after chunk with its state,
as Kaldi's looped decodable does.

Beyond Kaldi: --num-threads (onnxruntime's threads, default 1),
--batch-size (utterances whose chunks are computed together) and
--chunks-per-run (at most that many chunks per run of the model).
"""

import logging
import sys

from ..errors import UsageError
from ._cli import ToolParser, kaldi_tool
from ._option_groups import (check_onnx_arithmetic, open_ivector_readers,
                             register_compute_options, register_onnx_runtime_options)
from ._run_summary import RunSummary, log_summary
from ._utterance_loop import write_outputs
from ..onnx.runtime import (ChunkedOnnxComputer, OnnxModel, StreamingOnnxComputer,
                            check_chunk_options)
import numpy as np

log = logging.getLogger(__name__)

USAGE = """Propagate the features through a neural network model exported to ONNX by
nnet3-to-onnx (run with onnxruntime) and write the output, as nnet3-compute
does with the nnet3 model. If --apply-exp=true, apply the Exp() function to
the output before writing it out.

Usage: nnet3-compute-onnx [options] <onnx-in> <features-rspecifier> <matrix-wspecifier>
 e.g.: nnet3-compute-onnx final.onnx scp:feats.scp ark:nnet_prediction.ark
See also: nnet3-to-onnx, nnet3-compute, nnet3-xvector-compute-onnx
"""

CHUNK_OPTION_NAMES = ("frames-per-chunk", "extra-left-context", "extra-right-context",
                      "extra-left-context-initial", "extra-right-context-final",
                      "frame-subsampling-factor")
STREAMING_OPTION_NAMES = ("frames-per-chunk", "extra-left-context-initial",
                          "frame-subsampling-factor")


def _given_ints(parser, opts, names):
    return {name: getattr(opts, name.replace("-", "_")) for name in names if parser.given(name)}


def check_model_options(parser, opts, model):
    """The options that are the model's must be the model's (UsageError
    naming the option otherwise); returns the online-ivector period to use."""
    names = STREAMING_OPTION_NAMES if model.kind == "streaming" else CHUNK_OPTION_NAMES
    check_chunk_options(model.meta, _given_ints(parser, opts, names), str(model.path))
    if model.kind == "streaming":
        for name in CHUNK_OPTION_NAMES:
            if name not in names and parser.given(name):
                value = getattr(opts, name.replace("-", "_"))
                default = dict((("extra-left-context", 0), ("extra-right-context", 0),
                                ("extra-right-context-final", -1)))[name]
                if value != default:
                    raise UsageError("--%s=%d: a streaming model (Kaldi's looped computation) "
                                     "has no %s" % (name, value, name))
    use_priors = model.meta.get("use-priors") == "true"
    if parser.given("use-priors") and opts.use_priors != use_priors:
        raise UsageError("--use-priors=%s was given, but %s was exported %s --use-priors "
                         "(the priors are subtracted inside the model, or not at all)"
                         % ("true" if opts.use_priors else "false", model.path,
                            "with" if use_priors else "without"))
    period = int(model.meta.get("online-ivector-period", "0"))
    if parser.given("online-ivector-period") and period and opts.online_ivector_period != period:
        raise UsageError("--online-ivector-period=%d was given, but %s was exported with "
                         "--online-ivector-period=%d" % (opts.online_ivector_period,
                                                         model.path, period))
    return opts.online_ivector_period if parser.given("online-ivector-period") else period


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    register_compute_options(
        parser, "yes|no|optional|wait: use onnxruntime's CUDA execution provider where it "
        "is installed",
        "If true, subtract the logs of the priors stored with the model (here: the model "
        "must have been exported from a .mdl with nnet3-to-onnx --use-priors=true, which "
        "subtracts them inside the model)",
        "pynnet3 only: number of utterances whose chunks are computed together in one run "
        "of the model")
    register_onnx_runtime_options(parser)
    parser.register_int("chunks-per-run", 0, "pynnet3 only: at most this many chunks in one "
                        "run of the model (0: as many as --batch-size gives for recurrent "
                        "models, a few hundred frames' worth for the others)")
    opts, args = parser.parse(argv, num_args=3)
    onnx_rxfilename, feature_rspecifier, matrix_wspecifier = args
    summary = RunSummary()
    check_onnx_arithmetic(opts, "nnet3-compute")
    if opts.batch_size < 1:
        raise UsageError("--batch-size must be >= 1, got %d" % opts.batch_size)
    if any(parser.given(o) for o in ("debug-computation", "computation.debug")) or \
            any(k.startswith("optimization.") for k in parser.given_names()):
        log.warning("--debug-computation, --computation.debug and --optimization.* act when "
                    "the computation is compiled, in nnet3-to-onnx; they do nothing here")

    model = OnnxModel(onnx_rxfilename, opts.num_threads, opts.use_gpu)
    if model.kind not in ("chunk", "streaming"):
        model.require_kind("chunk", "nnet3-compute-onnx")
    period = check_model_options(parser, opts, model)
    if model.kind == "streaming":
        computer = StreamingOnnxComputer(model, opts.acoustic_scale, opts.batch_size)
    else:
        computer = ChunkedOnnxComputer(model, opts.acoustic_scale, opts.batch_size,
                                       opts.chunks_per_run)
    ivector_reader, online_ivector_reader = open_ivector_readers(opts)
    if opts.online_ivectors and period <= 0:
        raise UsageError("You need to set the --online-ivector-period option!")

    write_outputs(feature_rspecifier, matrix_wspecifier, computer.add, computer.flush,
                  (ivector_reader, online_ivector_reader), period,
                  np.exp if opts.apply_exp else None, summary)
    log_summary(summary, log)
    return 0 if summary.num_success != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
