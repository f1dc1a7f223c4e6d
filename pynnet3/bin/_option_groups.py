"""The option groups the tools share, registered and read back in one place
(no tool imports another).

- any options dataclass under a prefix, as Kaldi's ``ParseOptions
  prefixed("optimization", &po); opts.Register(&prefixed)`` does
  (:func:`register_options`, :func:`options_from`): every field ``some_name``
  becomes ``--PREFIX.some-name`` with the field's default and documentation.
  A dataclass takes part by giving each field ``metadata={"doc": ...}``;
  ``"hidden": True`` keeps a field off the command line (Kaldi's hidden
  configs) and ``"kind": "double"`` marks a float that is not rounded to
  float32 (BaseFloat is the default for ``float`` fields). NnetOptimizeOptions
  (``--optimization.*``), CachingOptimizingCompilerOptions, the decoder's
  LatticeFasterDecoderConfig and DeterminizeLatticePhonePrunedOptions are
  registered this way;
- Kaldi's NnetSimpleComputationOptions (nnet3-compute, nnet3-latgen-faster,
  nnet3-xvector-compute), and its chunk options alone (nnet3-to-onnx);
- nnet3-compute's and nnet3-xvector-compute's options (also those of their
  ONNX counterparts);
- the i-vector options and the readers they open, with Kaldi's per-utterance
  checks;
- pynnet3's choice of arithmetic (``--kaldi-exact-arithmetic``), and what
  the tools running an ONNX model share.

(The scoring tools' ``--mode`` is in :mod:`._scoring`: they start without
loading the network machinery these groups need.)
"""

from dataclasses import fields, replace
import logging

from ..compute.backend import KaldiExactBackend
from ..compute.device import USE_GPU_VALUES, select_backend
from ..compute.utterance import SimpleComputationOptions
from ..driver.caching import CachingOptimizingCompilerOptions
from ..errors import UsageError
from ..io.table import RandomAccessTableReader, RandomAccessTableReaderMapped
from ..optimize.options import NnetOptimizeOptions

log = logging.getLogger(__name__)


# -- options dataclasses under a prefix ------------------------------------------------
def _kind(f):
    kind = f.metadata.get("kind")
    if kind:
        return kind
    return {bool: "bool", int: "int", float: "float", str: "str",
            "bool": "bool", "int": "int", "float": "float", "str": "str"}[f.type]


def _key(prefix, name):
    return "%s.%s" % (prefix, name) if prefix else name


def register_options(parser, prefix, defaults):
    """Registers every visible field of the dataclass instance ``defaults``
    on ``parser`` (a ToolParser) as ``--PREFIX.NAME`` (``--NAME`` when
    ``prefix`` is empty, as Kaldi registers some structs directly)."""
    for f in fields(defaults):
        if f.metadata.get("hidden"):
            continue
        name = _key(prefix, f.name.replace("_", "-"))
        register = getattr(parser, "register_" + _kind(f))
        register(name, getattr(defaults, f.name), f.metadata.get("doc", ""))


def options_from(opts, prefix, defaults):
    """The dataclass instance that ``parser.parse`` produced for ``prefix``:
    ``defaults`` with every registered field replaced by the parsed value."""
    parsed = vars(opts)
    changes = {}
    for f in fields(defaults):
        key = _key(prefix, f.name)
        if key in parsed:
            changes[f.name] = parsed[key]
    return replace(defaults, **changes)


# -- NnetSimpleComputationOptions ---------------------------------------------------------

def register_chunk_options(parser):
    """The chunking options of Kaldi's NnetSimpleComputationOptions
    (``--extra-left-context``, ``--extra-right-context``,
    ``--extra-left-context-initial``, ``--extra-right-context-final``,
    ``--frame-subsampling-factor``, ``--frames-per-chunk``) with Kaldi's
    defaults and documentation; nnet3-to-onnx records them in the model."""
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
    parser.register_int("frames-per-chunk", 50, "Number of frames in each chunk that is "
                        "separately evaluated by the neural net.  Measured before any "
                        "subsampling, if the --frame-subsampling-factor options is used "
                        "(i.e. counts input frames")


def register_simple_computation_options(parser, acoustic_scale=0.1):
    """Kaldi's NnetSimpleComputationOptions::Register (the chunk options of
    :func:`register_chunk_options`, NnetOptimizeOptions under the prefix
    ``optimization``, NnetComputeOptions under ``computation``); read them
    back with :func:`simple_computation_options` and :func:`optimize_options`."""
    register_chunk_options(parser)
    parser.register_float("acoustic-scale", acoustic_scale, "Scaling factor for acoustic "
                          "log-likelihoods (caution: is a no-op if set in the program "
                          "nnet3-compute")
    parser.register_bool("debug-computation", False, "If true, turn on debug for the "
                         "actual computation (very verbose!)")
    parser.register_bool("computation.debug", False, "If true, turn on debug for the "
                         "neural net computation (very verbose!) Will be turned on "
                         "regardless if --verbose >= 5")
    register_options(parser, "optimization", NnetOptimizeOptions())


def context_options(opts):
    """The extra-context options and --frame-subsampling-factor of
    :func:`register_chunk_options` as keyword arguments (``extra_left_context``
    ... ``frame_subsampling_factor``)."""
    return dict(extra_left_context=opts.extra_left_context,
                extra_right_context=opts.extra_right_context,
                extra_left_context_initial=opts.extra_left_context_initial,
                extra_right_context_final=opts.extra_right_context_final,
                frame_subsampling_factor=opts.frame_subsampling_factor)


def simple_computation_options(opts):
    """The SimpleComputationOptions given by
    :func:`register_simple_computation_options`' options."""
    return SimpleComputationOptions(frames_per_chunk=opts.frames_per_chunk,
                                    acoustic_scale=opts.acoustic_scale,
                                    **context_options(opts))


def optimize_options(opts):
    """The NnetOptimizeOptions given as ``--optimization.*``."""
    return options_from(opts, "optimization", NnetOptimizeOptions())


# -- i-vectors -------------------------------------------------------------------------------

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


# -- nnet3-compute ----------------------------------------------------------------------------

def register_compute_options(parser, use_gpu_doc, use_priors_doc, batch_size_doc):
    """The options nnet3-compute registers, with Kaldi's defaults and
    documentation but for the three given here: NnetSimpleComputationOptions
    (no acoustic scaling by default), the i-vector options, pynnet3's
    arithmetic, ``--apply-exp``, ``--use-gpu``, ``--use-priors`` and pynnet3's
    ``--batch-size``."""
    register_simple_computation_options(parser, acoustic_scale=1.0)
    register_ivector_options(parser)
    register_arithmetic_options(parser)
    parser.register_bool("apply-exp", False, "If true, apply exp function to output")
    parser.register_str("use-gpu", "yes", use_gpu_doc)
    parser.register_bool("use-priors", False, use_priors_doc)
    parser.register_int("batch-size", 1, batch_size_doc)


# -- x-vectors -------------------------------------------------------------------------------

CACHED_COMPILER_IN_DOC = "If set, read the cached compiler from the specified file path."
CACHED_COMPILER_OUT_DOC = "If set, write the cached compiler to the specified file path."


def register_xvector_options(parser, use_gpu_doc, cached_compiler_in_doc=CACHED_COMPILER_IN_DOC,
                             cached_compiler_out_doc=CACHED_COMPILER_OUT_DOC):
    """The options nnet3-xvector-compute registers, with Kaldi's defaults and
    documentation but for the three given here: NnetSimpleComputationOptions
    (accepted as Kaldi accepts them; only the chunking ones below act),
    ``--use-gpu``, ``--chunk-size``, ``--min-chunk-size``, ``--pad-input``,
    ``--cached-compiler-in`` / ``--cached-compiler-out``,
    CachingOptimizingCompilerOptions without a prefix, and pynnet3's
    arithmetic (:func:`register_arithmetic_options`)."""
    register_simple_computation_options(parser, acoustic_scale=1.0)
    parser.register_str("use-gpu", "no", use_gpu_doc)
    parser.register_int("chunk-size", -1, "If set, extracts xvectors from specified "
                        "chunk-size, and averages.  If not set, extracts an xvector from "
                        "all available features.")
    parser.register_int("min-chunk-size", 100, "Minimum chunk-size allowed when "
                        "extracting xvectors.")
    parser.register_bool("pad-input", True, "If true, duplicate the first and last frames "
                         "of the input features as required to equal min-chunk-size.")
    parser.register_str("cached-compiler-in", "", cached_compiler_in_doc)
    parser.register_str("cached-compiler-out", "", cached_compiler_out_doc)
    register_options(parser, "", CachingOptimizingCompilerOptions())
    register_arithmetic_options(parser)


# -- pynnet3's arithmetic ----------------------------------------------------------------------

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


def register_chunks_option(parser):
    """pynnet3's chunks-per-computation option (read back with
    :func:`chunks_per_computation`)."""
    parser.register_int("chunks-per-computation", 0, "pynnet3 only: how many chunks of the "
                        "same shape one computation takes (as sequences n = 0, 1, ...: larger "
                        "matrix products, the same numbers within float rounding); 0: "
                        "automatic: where the network's outputs do not depend on the chunking "
                        "(not recurrent, no statistics pooling, ...), consecutive chunks with "
                        "the same i-vector as one longer chunk (up to 1024 frames, 400 output "
                        "rows), without Kaldi's repeated context; else 2 for a recurrent "
                        "network, as many as make about 200 output rows for others (1 with "
                        "--kaldi-exact-arithmetic); 1: one chunk at a time, as Kaldi")


def chunks_per_computation(opts):
    """SimpleNnetComputer's ``max_chunks`` from --chunks-per-computation."""
    value = opts.chunks_per_computation
    if value < 0:
        raise UsageError("--chunks-per-computation must be >= 0, got %d" % value)
    if value > 1 and opts.kaldi_exact_arithmetic:
        raise UsageError("--chunks-per-computation > 1 cannot be combined with "
                         "--kaldi-exact-arithmetic (Kaldi computes one chunk at a time; "
                         "larger products sum in another order)")
    return value or None


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


# -- running an exported ONNX model ------------------------------------------------------------

def register_onnx_runtime_options(parser):
    """The option of the tools that run an exported model with onnxruntime
    (``--num-threads``)."""
    parser.register_int("num-threads", 1, "pynnet3 only: onnxruntime's intra-op threads "
                        "(0: one per core)")


def check_onnx_arithmetic(opts, nnet3_tool):
    """A tool running an ONNX model cannot give Kaldi's arithmetic: with
    --kaldi-exact-arithmetic a UsageError pointing to ``nnet3_tool``, the
    tool that computes the same with the nnet3 model."""
    if opts.kaldi_exact_arithmetic:
        raise UsageError("--kaldi-exact-arithmetic: onnxruntime computes with its own kernels; "
                         "use %s for Kaldi's arithmetic bit for bit" % nnet3_tool)
