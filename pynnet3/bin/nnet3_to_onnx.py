"""nnet3-to-onnx: a Kaldi nnet3 network as a standard ONNX model.

Reads a network (``.raw``, or a ``.mdl``'s network; with --use-priors a
``.mdl`` whose log-priors the model then subtracts), prepares it as
nnet3-compute does (batch-norm and dropout in test mode, CollapseModel) and
writes an ONNX model of default-domain operators only (checked with
onnx.checker's full check) that computes:

- by default, nnet3-compute's chunk computation for the chunk options given
  (run it with nnet3-compute-onnx);
- with --streaming=true, the looped computation Kaldi's online decoding runs
  (one chunk per call, the state between chunks as explicit inputs and
  outputs; run it with nnet3-compute-onnx, or chunk by chunk);
- with --xvector=true, nnet3-xvector-compute's computation (run it with
  nnet3-xvector-compute-onnx).

The options, the network's left/right context and modulus are recorded in
the model's metadata. See pynnet3.onnx and docs/onnx.md.
"""

import logging
import sys

from ..errors import UsageError
from ._cli import ToolParser, kaldi_tool
from ._option_groups import (context_options, options_from, register_chunk_options,
                             register_options)
from ..optimize.options import NnetOptimizeOptions
from ..onnx.export import export

log = logging.getLogger(__name__)

USAGE = """Convert a Kaldi nnet3 network (a raw network, or the network of a .mdl) into a
standard ONNX model (default-domain operators only) that computes what
nnet3-compute computes with the given chunk options; with --streaming=true,
the looped computation of Kaldi's online decoding; with --xvector=true,
what nnet3-xvector-compute computes. The options, the network's context and
modulus are recorded in the model's metadata.

Usage: nnet3-to-onnx [options] <nnet-in> <onnx-out>
 e.g.: nnet3-to-onnx --frames-per-chunk=150 --frame-subsampling-factor=3 final.raw final.onnx
  or:  nnet3-to-onnx --use-priors=true final.mdl final.onnx
See also: nnet3-compute-onnx, nnet3-xvector-compute-onnx, nnet3-compute
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    register_chunk_options(parser)
    parser.register_int("online-ivector-period", 0, "Number of frames between iVectors in "
                        "the matrices the model will be given online i-vectors from "
                        "(recorded in the model; nnet3-compute-onnx uses it)")
    parser.register_bool("use-priors", False, "If true, subtract the logs of the priors "
                         "stored with the model (a .mdl is expected as input) inside the "
                         "exported model, as nnet3-compute --use-priors does")
    parser.register_bool("streaming", False, "If true, export the looped computation of "
                         "online decoding (DecodableNnetSimpleLooped: --frames-per-chunk, "
                         "--extra-left-context-initial, --frame-subsampling-factor) as a "
                         "model taking one chunk of new frames and the state, returning the "
                         "output and the next state")
    parser.register_bool("xvector", False, "If true, export nnet3-xvector-compute's "
                         "computation (the 'output' node at t = 0 from any number of "
                         "frames)")
    parser.register_bool("any-length", False, "pynnet3 only: export one graph that computes "
                         "a chunk of any length (exact for every network it can write) "
                         "instead of fixed-size chunks (faster; used where they are exact, "
                         "which the export proves)")
    register_options(parser, "optimization", NnetOptimizeOptions())
    opts, args = parser.parse(argv, num_args=2)
    nnet_rxfilename, onnx_wxfilename = args
    if opts.streaming and opts.xvector:
        raise UsageError("--streaming and --xvector cannot be combined")
    kind = "streaming" if opts.streaming else "xvector" if opts.xvector else "chunk"
    if kind != "chunk":
        for name in ("extra-left-context", "extra-right-context", "extra-right-context-final",
                     "any-length"):
            if parser.given(name):
                raise UsageError("--%s applies to nnet3-compute's chunks, not to a %s model"
                                 % (name, kind))
    if kind == "xvector":
        for name in ("frames-per-chunk", "extra-left-context-initial",
                     "frame-subsampling-factor", "online-ivector-period", "use-priors"):
            if parser.given(name):
                raise UsageError("--%s does not apply to an x-vector model" % name)

    model = export(nnet_rxfilename, onnx_wxfilename, kind,
                   frames_per_chunk=(opts.frames_per_chunk if parser.given("frames-per-chunk")
                                     else None),
                   **context_options(opts),
                   online_ivector_period=opts.online_ivector_period,
                   use_priors=opts.use_priors,
                   optimize_options=options_from(opts, "optimization", NnetOptimizeOptions()),
                   any_length=opts.any_length)
    log.info("Wrote %s model (%d nodes, %d initializers) to %s", kind,
             len(model.graph.node), len(model.graph.initializer), onnx_wxfilename)
    return 0


if __name__ == "__main__":
    sys.exit(main())
