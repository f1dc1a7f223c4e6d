"""nnet3-compute: propagate features through a network and write its output.

As Kaldi's nnet3bin/nnet3-compute.cc: read the network (a raw network, or a
.mdl's network; with ``--use-priors`` a .mdl whose priors are subtracted in
the log domain), put batch-norm and dropout in test mode and collapse it;
then for every utterance of the feature table compute the output chunk by
chunk as Kaldi's DecodableNnetSimple (``--frames-per-chunk``, extra context,
``--frame-subsampling-factor``, i-vectors: ``--ivectors`` per utterance or,
with ``--utt2spk``, per speaker; or ``--online-ivectors`` with
``--online-ivector-period``), optionally exponentiate (``--apply-exp``) and
write it. Utterances without features or without i-vectors are skipped with
Kaldi's warnings; the exit status is 0 if at least one utterance was done.

Beyond Kaldi: ``--batch-size=N`` (N > 1) computes chunks of the same shape
from up to N utterances together in one computation (n = 0..N-1; the
outputs are the same numbers, BLAS gets larger products). Utterances are
then written in input order after each batch is done. Where the network's
outputs do not depend on the chunking (:mod:`pynnet3.nnet.chunking`),
consecutive chunks with the same i-vector are computed as one longer chunk
(``--chunks-per-computation``; the tool says so once). With several BLAS
threads (``OPENBLAS_NUM_THREADS``) the computations run on as many threads
of the tool's own, and these go on with the next utterance while the last
one is written.
"""

import collections
import logging
import sys

from ..compute.batch import BatchedSimpleComputer
from ..compute.compilation import log_compiler_summary, make_compiler
from ..compute.utterance import SimpleNnetComputer, apply_exp, prepare_nnet_for_compute
from ..errors import UsageError
from ..io.matrix_rows import MatrixRows
from ..model.am import read_mdl
from ..nnet.nnet import Nnet, keep_only_output
from ._cli import ToolParser, kaldi_tool
from ._compute_threads import network_threads, running
from ._option_groups import (chunks_per_computation, compute_backend, open_ivector_readers,
                             optimize_options, register_chunks_option,
                             register_compute_options, simple_computation_options)
from ._run_summary import RunSummary, log_summary
from ._utterance_loop import write_outputs

log = logging.getLogger(__name__)

USAGE = """Propagate the features through raw neural network model and write the output.
If --apply-exp=true, apply the Exp() function to the output before writing it out.

Usage: nnet3-compute [options] <nnet-in> <features-rspecifier> <matrix-wspecifier>
 e.g.: nnet3-compute final.raw scp:feats.scp ark:nnet_prediction.ark
See also: nnet3-compute-from-egs, nnet3-chain-compute-post
Note: this program does not currently make very efficient use of the GPU.
"""


def read_network(rxfilename, use_priors):
    """(nnet, priors) as nnet3-compute reads them: with ``use_priors`` a
    .mdl (TransitionModel then AmNnetSimple), else any network file (a
    .mdl's network is accepted too, as Kaldi's Nnet::Read does)."""
    if use_priors:
        _, am_nnet = read_mdl(rxfilename)
        return am_nnet.nnet, am_nnet.priors
    return Nnet.read(rxfilename), None


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    register_compute_options(
        parser, "yes|no|optional|wait, only has effect if compiled with CUDA",
        "If true, subtract the logs of the priors stored with the model (in this case, a "
        ".mdl file is expected as input).",
        "pynnet3 only: number of utterances whose chunks are computed together in one "
        "computation (1: one chunk of one utterance at a time, as Kaldi)")
    register_chunks_option(parser)
    opts, args = parser.parse(argv, num_args=3)
    nnet_rxfilename, feature_rspecifier, matrix_wspecifier = args
    summary = RunSummary()
    backend = compute_backend(opts, opts.use_gpu)
    max_chunks = chunks_per_computation(opts)
    if opts.batch_size < 1:
        raise UsageError("--batch-size must be >= 1, got %d" % opts.batch_size)
    if opts.batch_size > 1 and opts.kaldi_exact_arithmetic:
        raise UsageError("--batch-size > 1 cannot be combined with --kaldi-exact-arithmetic "
                         "(Kaldi computes one chunk at a time; batched products sum in "
                         "another order)")

    nnet, priors = read_network(nnet_rxfilename, opts.use_priors)
    # CollapseModel's products in the OpenBLAS order of the exact arithmetic's threads
    prepare_nnet_for_compute(nnet, getattr(backend, "blas_threads", None))
    # only "output" is computed: other outputs' parameters need no memory
    keep_only_output(nnet, "output")
    compute_opts = simple_computation_options(opts)

    ivector_reader, online_ivector_reader = open_ivector_readers(opts)
    compiler = make_compiler(nnet, optimize_options(opts))
    # With BLAS arithmetic the network runs on threads of the computer's own
    computer = SimpleNnetComputer(
        nnet, compute_opts, priors, backend=backend, compiler=compiler, max_chunks=max_chunks,
        num_threads=network_threads(opts),
        debug_computation=opts.debug_computation,
        debug=getattr(opts, "computation.debug") or opts.verbose >= 5)
    if opts.online_ivectors and opts.online_ivector_period <= 0:
        raise UsageError("You need to set the --online-ivector-period option!")
    if opts.batch_size > 1:
        batcher = BatchedSimpleComputer(computer, opts.batch_size)
        compute, flush = batcher.add, batcher.flush
    elif computer.num_threads > 1:
        # The computer's threads go on with the next utterance while this
        # thread writes the last one (one utterance in flight behind the
        # one being submitted); each written block by block as computed.
        in_flight = collections.deque()

        def compute(utt, features, ivector, online_ivectors, period):
            num_rows, blocks = computer.submit_utterance(features, ivector, online_ivectors,
                                                         period)
            in_flight.append((utt, MatrixRows(num_rows, computer.output_dim, blocks),
                              features.shape[0]))
            while len(in_flight) > 1:
                yield in_flight.popleft()

        def flush():
            while in_flight:
                yield in_flight.popleft()
    else:
        def compute(utt, features, ivector, online_ivectors, period):
            # written block by block as computed: the utterance's whole output
            # is never in memory
            num_rows, blocks = computer.utterance_output_rows(features, ivector,
                                                              online_ivectors, period)
            yield utt, MatrixRows(num_rows, computer.output_dim, blocks), features.shape[0]

        def flush():
            return ()

    exp = None
    if opts.apply_exp:
        def exp(output):
            return apply_exp(output, opts.kaldi_exact_arithmetic)
    with running(computer):
        write_outputs(feature_rspecifier, matrix_wspecifier, compute, flush,
                      (ivector_reader, online_ivector_reader), opts.online_ivector_period,
                      exp, summary)
    log_summary(summary, log)
    log_compiler_summary(compiler)
    return 0 if summary.num_success != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
