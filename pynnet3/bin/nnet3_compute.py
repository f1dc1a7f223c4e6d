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
then written in input order after each batch is done.
"""

import logging
import sys
import time

from ..compute.backend import KaldiExactBackend
from ..compute.compilation import log_compiler_summary, make_compiler
from ..compute.device import USE_GPU_VALUES, select_backend
from ..compute.utterance import (SimpleComputationOptions, SimpleNnetComputer, apply_exp,
                                 prepare_nnet_for_compute)
from ..errors import UsageError
from ..io.table import (RandomAccessTableReader, RandomAccessTableReaderMapped,
                        SequentialTableReader, TableWriter)
from ..optimize.options import NnetOptimizeOptions
from ._cli import ToolParser, kaldi_tool
from ._progress import ProgressBar
from ._option_groups import options_from, register_options

log = logging.getLogger(__name__)

USAGE = """Propagate the features through raw neural network model and write the output.
If --apply-exp=true, apply the Exp() function to the output before writing it out.

Usage: nnet3-compute [options] <nnet-in> <features-rspecifier> <matrix-wspecifier>
 e.g.: nnet3-compute final.raw scp:feats.scp ark:nnet_prediction.ark
See also: nnet3-compute-from-egs, nnet3-chain-compute-post
Note: this program does not currently make very efficient use of the GPU.
"""


def register_simple_computation_options(parser, acoustic_scale=0.1):
    """Kaldi's NnetSimpleComputationOptions::Register (NnetOptimizeOptions
    under the prefix ``optimization``, NnetComputeOptions under
    ``computation``); read them back with :func:`optimize_options`."""
    parser.register_int("extra-left-context", 0, "Number of frames of additional "
                        "left-context to add on top of the neural net's inherent left "
                        "context (may be useful in recurrent setups")
    parser.register_int("extra-right-context", 0, "Number of frames of additional "
                        "right-context to add on top of the neural net's inherent right "
                        "context (may be useful in recurrent setups")
    parser.register_int("extra-left-context-initial", -1, "If >= 0, overrides the "
                        "--extra-left-context value at the start of an utterance.")
    parser.register_int("extra-right-context-final", -1, "If >= 0, overrides the "
                        "--extra-right-context value at the end of an utterance.")
    parser.register_int("frame-subsampling-factor", 1, "Required if the frame-rate of the "
                        "output (e.g. in 'chain' models) is less than the frame-rate of "
                        "the original alignment.")
    parser.register_float("acoustic-scale", acoustic_scale, "Scaling factor for acoustic "
                          "log-likelihoods (caution: is a no-op if set in the program "
                          "nnet3-compute")
    parser.register_int("frames-per-chunk", 50, "Number of frames in each chunk that is "
                        "separately evaluated by the neural net.  Measured before any "
                        "subsampling, if the --frame-subsampling-factor options is used "
                        "(i.e. counts input frames")
    parser.register_bool("debug-computation", False, "If true, turn on debug for the "
                         "actual computation (very verbose!)")
    parser.register_bool("computation.debug", False, "If true, turn on debug for the "
                         "neural net computation (very verbose!) Will be turned on "
                         "regardless if --verbose >= 5")
    register_options(parser, "optimization", NnetOptimizeOptions())


def register_ivector_options(parser):
    """The i-vector options nnet3-compute and nnet3-latgen-faster share
    (``--ivectors``, ``--utt2spk``, ``--online-ivectors``, ``--online-ivector-period``)."""
    parser.register_str("ivectors", "", "Rspecifier for iVectors as vectors (i.e. not "
                        "estimated online); per utterance by default, or per speaker if you "
                        "provide the --utt2spk option.")
    parser.register_str("utt2spk", "", "Rspecifier for utt2spk option used to get ivectors "
                        "per speaker")
    parser.register_str("online-ivectors", "", "Rspecifier for iVectors estimated online, as "
                        "matrices.  If you supply this, you must set the "
                        "--online-ivector-period option.")
    parser.register_int("online-ivector-period", 0, "Number of frames between iVectors in "
                        "matrices supplied to the --online-ivectors option")


def open_ivector_readers(opts):
    """(ivector_reader, online_ivector_reader) for --ivectors (mapped through
    --utt2spk) and --online-ivectors; None for an option not given."""
    online_reader = (RandomAccessTableReader(opts.online_ivectors, "matrix")
                     if opts.online_ivectors else None)
    ivector_reader = (RandomAccessTableReaderMapped(opts.ivectors, opts.utt2spk, "vector")
                      if opts.ivectors else None)
    return ivector_reader, online_reader


def utterance_ivectors(utt, features, ivector_reader, online_reader):
    """Kaldi's per-utterance checks before computing it: (ivector,
    online_ivectors) for ``utt`` (None where no reader is given), or None
    when the utterance is empty or a given reader lacks it (Kaldi's WARNING
    is logged)."""
    if features.shape[0] == 0:
        log.warning("Zero-length utterance: %s", utt)
        return None
    ivector = online_ivectors = None
    if ivector_reader is not None:
        if not ivector_reader.has_key(utt):
            log.warning("No iVector available for utterance %s", utt)
            return None
        ivector = ivector_reader.value(utt)
    if online_reader is not None:
        if not online_reader.has_key(utt):
            log.warning("No online iVector available for utterance %s", utt)
            return None
        online_ivectors = online_reader.value(utt)
    return ivector, online_ivectors


def register_arithmetic_options(parser, exact_by_default=False):
    """pynnet3's choice of arithmetic, shared by the tools that run a network
    (read back with :func:`compute_backend`); ``exact_by_default`` makes
    Kaldi's exact arithmetic the tool's default."""
    parser.register_bool("kaldi-exact-arithmetic", exact_by_default, "pynnet3 only: compute the "
                         "network with Kaldi's CPU arithmetic, bit for bit (OpenBLAS 0.3.21's "
                         "Haswell summation order, the C library's expf/logf); slower than "
                         "the BLAS arithmetic (false), which agrees with Kaldi within float "
                         "rounding. Runs on the CPU.")
    parser.register_int("kaldi-exact-blas-threads", -1, "pynnet3 only: with "
                        "--kaldi-exact-arithmetic, the OpenBLAS thread count whose summation "
                        "order to reproduce (it depends on it); -1: the count OpenBLAS would "
                        "use here (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or "
                        "OMP_NUM_THREADS, else the number of CPUs)")


def compute_backend(opts, use_gpu=None):
    """The backend the tool runs the network on: Kaldi's exact CPU
    arithmetic with --kaldi-exact-arithmetic, else what ``use_gpu``
    (--use-gpu, where the tool has it) selects."""
    threads = opts.kaldi_exact_blas_threads
    if threads < 1 and threads != -1:
        raise UsageError("--kaldi-exact-blas-threads must be -1 or >= 1, got %d" % threads)
    if opts.kaldi_exact_arithmetic:
        if use_gpu is not None and use_gpu not in USE_GPU_VALUES:
            select_backend(use_gpu)             # the usual error for a bad value
        backend = KaldiExactBackend(None if threads == -1 else threads)
        log.info("Kaldi-exact arithmetic, OpenBLAS order of %d thread(s)",
                 backend.blas_threads)
        return backend
    return select_backend(use_gpu) if use_gpu is not None else "numpy"


def optimize_options(opts):
    """The NnetOptimizeOptions given as ``--optimization.*``."""
    return options_from(opts, "optimization", NnetOptimizeOptions())


def simple_computation_options(opts):
    return SimpleComputationOptions(
        extra_left_context=opts.extra_left_context,
        extra_right_context=opts.extra_right_context,
        extra_left_context_initial=opts.extra_left_context_initial,
        extra_right_context_final=opts.extra_right_context_final,
        frame_subsampling_factor=opts.frame_subsampling_factor,
        frames_per_chunk=opts.frames_per_chunk,
        acoustic_scale=opts.acoustic_scale)


def read_network(rxfilename, use_priors):
    """(nnet, priors) as nnet3-compute reads them: with ``use_priors`` a
    .mdl (TransitionModel then AmNnetSimple), else any network file (a
    .mdl's network is accepted too, as Kaldi's Nnet::Read does)."""
    from ..model.am import read_mdl
    from ..nnet.nnet import Nnet
    if use_priors:
        _, am_nnet = read_mdl(rxfilename)
        return am_nnet.nnet, am_nnet.priors
    return Nnet.read(rxfilename), None


class _Summary:
    """Counts for Kaldi's closing lines (:func:`log_summary`)."""

    def __init__(self):
        self.start = time.perf_counter()
        self.num_success = 0
        self.num_fail = 0
        self.frame_count = 0


def log_summary(summary, logger):
    """Kaldi's closing lines: time taken, real-time factor, counts (logged
    through the tool's own logger so they name the tool's main())."""
    elapsed = time.perf_counter() - summary.start
    rtf = elapsed * 100.0 / summary.frame_count if summary.frame_count else float("inf")
    logger.info("Time taken %gs: real-time factor assuming 100 frames/sec is %g",
                elapsed, rtf, stacklevel=2)
    logger.info("Done %d utterances, failed for %d", summary.num_success, summary.num_fail,
                stacklevel=2)


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    # nnet3-compute does no acoustic scaling by default.
    register_simple_computation_options(parser, acoustic_scale=1.0)
    register_ivector_options(parser)
    register_arithmetic_options(parser)
    parser.register_bool("apply-exp", False, "If true, apply exp function to output")
    parser.register_str("use-gpu", "yes", "yes|no|optional|wait, only has effect if "
                        "compiled with CUDA")
    parser.register_bool("use-priors", False, "If true, subtract the logs of the priors "
                         "stored with the model (in this case, a .mdl file is expected as "
                         "input).")
    parser.register_int("batch-size", 1, "pynnet3 only: number of utterances whose "
                        "chunks are computed together in one computation (1: one chunk "
                        "of one utterance at a time, as Kaldi)")
    opts, args = parser.parse(argv, num_args=3)
    nnet_rxfilename, feature_rspecifier, matrix_wspecifier = args
    summary = _Summary()
    backend = compute_backend(opts, opts.use_gpu)
    if opts.batch_size < 1:
        raise UsageError("--batch-size must be >= 1, got %d" % opts.batch_size)
    if opts.batch_size > 1 and opts.kaldi_exact_arithmetic:
        raise UsageError("--batch-size > 1 cannot be combined with --kaldi-exact-arithmetic "
                         "(Kaldi computes one chunk at a time; batched products sum in "
                         "another order)")

    nnet, priors = read_network(nnet_rxfilename, opts.use_priors)
    prepare_nnet_for_compute(nnet)
    compute_opts = simple_computation_options(opts)

    ivector_reader, online_ivector_reader = open_ivector_readers(opts)
    compiler = make_compiler(nnet, optimize_options(opts))
    computer = SimpleNnetComputer(
        nnet, compute_opts, priors, backend=backend, compiler=compiler,
        debug_computation=opts.debug_computation,
        debug=getattr(opts, "computation.debug") or opts.verbose >= 5)
    if opts.online_ivectors and opts.online_ivector_period <= 0:
        raise UsageError("You need to set the --online-ivector-period option!")
    batcher = None
    if opts.batch_size > 1:
        from ..compute.batch import BatchedSimpleComputer
        batcher = BatchedSimpleComputer(computer, opts.batch_size)

    with TableWriter(matrix_wspecifier, kind="matrix") as writer, \
            SequentialTableReader(feature_rspecifier, "matrix") as feature_reader:
        progress = ProgressBar(feature_reader.num_entries, "utterances")

        def finish(utt, output, num_frames):
            if opts.apply_exp:
                output = apply_exp(output, opts.kaldi_exact_arithmetic)
            writer.write(utt, output)
            summary.frame_count += num_frames
            summary.num_success += 1

        for utt, features in feature_reader:
            progress.step()
            found = utterance_ivectors(utt, features, ivector_reader, online_ivector_reader)
            if found is None:
                summary.num_fail += 1
                continue
            ivector, online_ivectors = found
            if batcher is None:
                output = computer.compute_utterance(features, ivector, online_ivectors,
                                                    opts.online_ivector_period)
                finish(utt, output, features.shape[0])
            else:
                for done in batcher.add(utt, features, ivector, online_ivectors,
                                        opts.online_ivector_period):
                    finish(*done)
        if batcher is not None:
            for done in batcher.flush():
                finish(*done)
        progress.close()
    for reader in (online_ivector_reader, ivector_reader):
        if reader is not None:
            reader.close()
    log_summary(summary, log)
    log_compiler_summary(compiler)
    return 0 if summary.num_success != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
