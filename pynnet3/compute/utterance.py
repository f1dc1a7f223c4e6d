"""One utterance through a 'simple' network, as Kaldi's nnet3-compute does it
(Kaldi's DecodableNnetSimple, nnet-am-decodable-simple.cc).

A *simple* network has an input node ``input``, an output node ``output`` and
optionally an input node ``ivector`` (Kaldi's IsSimpleNnet). Its output is
computed in *chunks* of output frames; for each chunk Kaldi

- takes the network's own left/right context (Kaldi's ComputeSimpleNnetContext,
  which the CachingOptimizingCompiler computes once) plus ``extra_left_context`` /
  ``extra_right_context`` (``extra_left_context_initial`` replaces the former
  for the chunk that starts at frame 0, ``extra_right_context_final`` the latter
  for the chunk that ends at the last output frame, when they are >= 0);
- requests input frames ``first_output - left .. last_output + right``; frames
  outside the utterance are copies of its first / last frame;
- with ``frame_subsampling_factor`` f, asks for outputs at t = first, first+f,
  ... (the utterance has ceil(num_frames / f) output frames);
- shifts every time index so the chunk's first output is at t = 0 (that only
  lets the compiler reuse computations; it changes no number);
- supplies one i-vector at Index (0, 0, 0) if the network has an ``ivector``
  input: the batch i-vector if given, else the online i-vector row
  ``(first_output + (last_output - first_output) // 2) // period`` (the most
  recent one for the chunk's middle frame), clamped to the last row when the
  matrix is at most 50 frames short, an error otherwise;
- subtracts log(priors) when priors are given, then scales by
  ``acoustic_scale`` (1.0 in nnet3-compute; decoders pass their own).

nnet3-compute asks for frames in order, so chunks start at output frames 0,
``frames_per_chunk // f``, 2 * that, ... and each holds at most
``frames_per_chunk // f`` subsampled frames (after ``frames_per_chunk`` is
rounded up to a multiple of lcm(f, network modulus), see
:meth:`SimpleComputationOptions.fixed_frames_per_chunk`).
:meth:`SimpleNnetComputer.compute_chunk` computes any one chunk;
:meth:`SimpleNnetComputer.compute_utterance` the whole utterance chunk by
chunk (nnet3-compute's output). Chunks of the same shape are independent
computations, so pynnet3 computes several of them (of one utterance, or of
several: :meth:`SimpleNnetComputer.compute_utterances`) in one computation,
as sequences n = 0, 1, ... with their own inputs and i-vectors: Kaldi's
numbers (within float32 rounding) with larger products. Where the
network is chunk-invariant (:func:`pynnet3.nnet.chunking.nnet_is_chunk_invariant`:
each output frame depends on its context's input frames alone), whole
consecutive chunks with equal i-vectors are computed as one longer chunk
instead (:attr:`SimpleNnetComputer.merges_chunks`): the same numbers within
float32 rounding, without the context Kaldi computes again for each chunk.
``--apply-exp`` is applied by the caller to the finished matrix
(:func:`apply_exp`), as nnet3-compute does.

Before computing, nnet3-compute puts batch-norm and dropout components in test
mode and collapses the model (Kaldi's CollapseModel); :func:`prepare_nnet_for_compute`
does the same.

Guarantees: the numbers are those of Kaldi's computation for the same
chunk (within float32 tolerance: pynnet3 runs the unoptimized computation);
a chunk Kaldi cannot compute (e.g. an x-vector network's per-frame output
over too few frames) raises :class:`ComputationError`; wrong feature or
i-vector dimensions and missing i-vectors raise :class:`UsageError` with
Kaldi's wording.
"""

import collections
import copy
import logging
import math
import threading
from dataclasses import dataclass

import numpy as np

from ..common.index import Index
from ..compiler.computation_io import print_computation
from ..compiler.request import ComputationRequest, IoSpecification
from ..errors import NnetError, UsageError
from ..model.am import log_priors
from ..nnet.chunking import nnet_is_chunk_invariant
from ..nnet.collapse import collapse_model
from ..nnet.component_ops import set_batchnorm_test_mode, set_dropout_test_mode
from ..nnet.graph import nnet_is_recurrent
from ..nnet.nnet import is_simple_nnet
from ..numerics import kaldi_cpu
from . import blas_threads as blas_control
from .arena import Workspace
from .backend import KaldiExactBackend, get_backend
from .compilation import make_compiler
from .computer import NnetComputer
from .layout import lay_out_for_products
from .plan import ExecutionPlan
from .threads import ComputerThreads

logger = logging.getLogger("pynnet3")

__all__ = ["SimpleComputationOptions", "ChunkPlan", "ChunkLayout", "SimpleNnetComputer",
           "prepare_nnet_for_compute", "apply_exp", "check_input_dims",
           "compute_utterance"]

# The automatic batch of chunks (SimpleNnetComputer.chunks_per_computation)
# aims at this many output rows per computation (and at most BATCH_MAX_ROWS
# input rows): enough for BLAS to reuse each packed weight block over many
# rows, also in the layers after frame subsampling, and to turn recurrent
# layers' row-by-row products into matrix products; few enough to keep the
# matrices small.
BATCH_OUTPUT_ROWS = 200
BATCH_MAX_ROWS = 4096
# ... and for a recurrent network (see chunks_per_computation), chunks at a
# time.
BATCH_RECURRENT_CHUNKS = 2
# A chunk-invariant network's consecutive chunks go together as longer
# chunks (SimpleNnetComputer.merges_chunks) of at most this many input
# frames and output rows (and at least one chunk): long enough that the
# context computed again for each is a small part of it; short enough that
# its matrices stay small (the output rows bound the widest, the output
# layer's: 400 rows keep TDNN-F 20.7M's peak memory where Kaldi's chunks
# had it, 800 added 22 MiB; the rows are shared among the computer's
# threads: 400 each added 21 MiB with 2 threads).
MERGED_CHUNK_MAX_FRAMES = 1024
MERGED_CHUNK_MAX_OUTPUT_ROWS = 400

# Kaldi gives up on an i-vector matrix that ends more than this many frames
# before the frame it needs ("half a second": not explainable by edge effects).
_MAX_IVECTOR_MARGIN_FRAMES = 50


# -- preparing the network ----------------------------------------------------------------------

def prepare_nnet_for_compute(nnet, blas_threads=None):
    """What nnet3-compute does to a network it has read, in place: batch-norm
    and dropout components in test mode, then Kaldi's CollapseModel with its
    default options (its products in the order of ``blas_threads`` OpenBLAS
    threads; None: OpenBLAS's count in this environment, as Kaldi run here
    would have). Returns ``nnet``."""
    set_batchnorm_test_mode(nnet, True)
    set_dropout_test_mode(nnet, True)
    collapse_model(nnet, blas_threads=blas_threads)
    return nnet


def apply_exp(matrix, kaldi_exact=False):
    """nnet3-compute's --apply-exp: element-wise exp, float32 (with
    ``kaldi_exact``, the C library's expf, as Kaldi, on a copy)."""
    if kaldi_exact:
        return kaldi_cpu.apply_exp(np.array(matrix, dtype=np.float32))
    return np.exp(np.asarray(matrix, dtype=np.float32))


# -- options and chunk geometry -----------------------------------------------------------------

@dataclass(slots=True)
class SimpleComputationOptions:
    """Kaldi's NnetSimpleComputationOptions (option names without dashes).
    ``acoustic_scale`` defaults to nnet3-compute's 1.0 (the struct's own
    default, used by decoders, is 0.1)."""

    extra_left_context: int = 0
    extra_right_context: int = 0
    extra_left_context_initial: int = -1
    extra_right_context_final: int = -1
    frame_subsampling_factor: int = 1
    frames_per_chunk: int = 50
    acoustic_scale: float = 1.0

    def check(self):
        if self.frame_subsampling_factor < 1 or self.frames_per_chunk < 1:
            raise UsageError("--frame-subsampling-factor and --frames-per-chunk must be > 0")
        if self.extra_left_context < 0 or self.extra_right_context < 0:
            raise UsageError("--extra-left-context and --extra-right-context must be >= 0")

    def fixed_frames_per_chunk(self, nnet_modulus):
        """frames_per_chunk rounded up to a multiple of
        lcm(frame_subsampling_factor, nnet_modulus), as Kaldi's
        CheckAndFixConfigs does (it logs the change once)."""
        self.check()
        if nnet_modulus < 1:
            raise NnetError("network modulus must be > 0, got %d" % nnet_modulus)
        n = self.frame_subsampling_factor * nnet_modulus // math.gcd(
            self.frame_subsampling_factor, nnet_modulus)
        return n * ((self.frames_per_chunk + n - 1) // n)


@dataclass(slots=True)
class ChunkPlan:
    """Where one chunk lies in the utterance (all in input-frame units except
    the ``*_subsampled_*`` fields). ``first_input_frame`` may be negative and
    ``first_input_frame + num_input_frames`` may pass the end: those frames are
    edge copies."""

    first_subsampled_frame: int
    num_subsampled_frames: int
    first_output_frame: int
    last_output_frame: int
    first_input_frame: int
    num_input_frames: int


# -- the chunk layout -----------------------------------------------------------------------------

class ChunkLayout:
    """Where nnet3-compute's chunks of an utterance lie (Kaldi's
    DecodableNnetSimple), from the options and the network's context and
    modulus alone: every runtime that computes a simple network chunk by
    chunk (:class:`SimpleNnetComputer`, an exported ONNX model) uses this
    one layout. ``frames_per_chunk`` is the options' value after Kaldi's
    rounding (logged once when it changes)."""

    __slots__ = ("opts", "nnet_left_context", "nnet_right_context", "modulus",
                 "frames_per_chunk")

    def __init__(self, opts, left_context, right_context, modulus):
        self.opts = opts
        self.nnet_left_context, self.nnet_right_context = int(left_context), int(right_context)
        self.modulus = int(modulus)
        self.frames_per_chunk = opts.fixed_frames_per_chunk(self.modulus)
        if self.frames_per_chunk != opts.frames_per_chunk:
            if self.modulus == 1:
                logger.info("Increasing --frames-per-chunk from %d to %d to make it a "
                            "multiple of --frame-subsampling-factor=%d",
                            opts.frames_per_chunk, self.frames_per_chunk,
                            opts.frame_subsampling_factor)
            else:
                logger.info("Increasing --frames-per-chunk from %d to %d due to "
                            "--frame-subsampling-factor=%d and nnet shift-invariance "
                            "modulus = %d", opts.frames_per_chunk, self.frames_per_chunk,
                            opts.frame_subsampling_factor, self.modulus)

    def num_subsampled_frames(self, num_frames):
        """Output frames of an utterance of ``num_frames`` input frames."""
        f = self.opts.frame_subsampling_factor
        return (num_frames + f - 1) // f

    def subsampled_frames_per_chunk(self):
        return self.frames_per_chunk // self.opts.frame_subsampling_factor

    def merged_chunk_frames(self, max_output_rows):
        """The input frames of the longest merged chunk: at most
        :data:`MERGED_CHUNK_MAX_FRAMES` input frames and ``max_output_rows``
        output rows (or one chunk), of one of the chunk counts of
        :func:`merged_chunk_sizes`."""
        largest = min(MERGED_CHUNK_MAX_FRAMES // self.frames_per_chunk,
                      max_output_rows // self.subsampled_frames_per_chunk())
        return self.frames_per_chunk * merged_chunk_sizes(max(1, largest))[-1]

    def chunk_plan(self, num_frames, first_subsampled_frame, num_subsampled_frames):
        """The ChunkPlan of the chunk of ``num_subsampled_frames`` output frames
        starting at ``first_subsampled_frame`` in an utterance of
        ``num_frames`` input frames."""
        total = self.num_subsampled_frames(num_frames)
        if not (0 <= first_subsampled_frame and num_subsampled_frames > 0
                and first_subsampled_frame + num_subsampled_frames <= total):
            raise UsageError("chunk of %d output frames at frame %d does not fit in an "
                             "utterance with %d output frames" % (
                                 num_subsampled_frames, first_subsampled_frame, total))
        opts = self.opts
        f = opts.frame_subsampling_factor
        last_subsampled_frame = first_subsampled_frame + num_subsampled_frames - 1
        first_output_frame = first_subsampled_frame * f
        last_output_frame = last_subsampled_frame * f
        extra_left, extra_right = opts.extra_left_context, opts.extra_right_context
        if first_output_frame == 0 and opts.extra_left_context_initial >= 0:
            extra_left = opts.extra_left_context_initial
        if last_subsampled_frame == total - 1 and opts.extra_right_context_final >= 0:
            extra_right = opts.extra_right_context_final
        first_input_frame = first_output_frame - (self.nnet_left_context + extra_left)
        last_input_frame = last_output_frame + self.nnet_right_context + extra_right
        return ChunkPlan(first_subsampled_frame, num_subsampled_frames, first_output_frame,
                         last_output_frame, first_input_frame,
                         last_input_frame + 1 - first_input_frame)

    def utterance_chunks(self, num_frames):
        """The ChunkPlans nnet3-compute computes for an utterance of
        ``num_frames`` frames, in its order (chunks of
        :meth:`subsampled_frames_per_chunk` output frames from frame 0, the
        last one shorter)."""
        total = self.num_subsampled_frames(num_frames)
        step = self.subsampled_frames_per_chunk()
        return [self.chunk_plan(num_frames, start, min(step, total - start))
                for start in range(0, total, step)]

    def covers_utterance(self, num_frames):
        """True when Kaldi, with these options, computes an utterance of
        ``num_frames`` frames in a single chunk."""
        return self.subsampled_frames_per_chunk() >= self.num_subsampled_frames(num_frames)

    @staticmethod
    def chunk_ivector(plan, ivector=None, online_ivectors=None, online_ivector_period=0):
        """The i-vector a chunk uses (Kaldi's GetCurrentIvector), or None."""
        if ivector is not None:
            return np.asarray(ivector, dtype=np.float32)
        if online_ivectors is None:
            return None
        if online_ivector_period <= 0:
            raise UsageError("You need to set the --online-ivector-period option!")
        frame_to_search = plan.first_output_frame + (
            plan.last_output_frame - plan.first_output_frame) // 2
        ivector_frame = frame_to_search // online_ivector_period
        num_rows = online_ivectors.shape[0]
        if ivector_frame >= num_rows:
            margin = ivector_frame - (num_rows - 1)
            if margin * online_ivector_period > _MAX_IVECTOR_MARGIN_FRAMES:
                raise UsageError("Could not get iVector for frame %d, only available till "
                                 "frame %d * ivector-period=%d (mismatched "
                                 "--online-ivector-period?)"
                                 % (frame_to_search, num_rows, online_ivector_period))
            ivector_frame = num_rows - 1
        return np.asarray(online_ivectors[ivector_frame], dtype=np.float32)

    @staticmethod
    def chunk_features(features, first_input_frame, num_input_frames):
        """Input rows first_input_frame .. + num_input_frames - 1, the
        utterance's first/last frame repeated where they reach past its
        edges."""
        rows = np.arange(first_input_frame, first_input_frame + num_input_frames)
        np.clip(rows, 0, features.shape[0] - 1, out=rows)
        return np.ascontiguousarray(features[rows], dtype=np.float32)


# -- the computer --------------------------------------------------------------------------------

def check_input_dims(features, ivector, online_ivectors, input_dim, ivector_dim,
                     allow_both_ivectors=False):
    """Kaldi's dimension checks of an utterance's inputs, with Kaldi's
    messages (UsageError): ``features`` a matrix of ``input_dim`` columns,
    then the i-vector (``ivector``, else ``online_ivectors``' columns, else
    none) of ``ivector_dim``. Giving both kinds of i-vector is an error
    unless ``allow_both_ivectors`` (then ``ivector`` is the one checked)."""
    if features.ndim != 2 or features.shape[1] != input_dim:
        raise UsageError("Neural net expects 'input' features with dimension %d but you "
                         "provided %d" % (input_dim, features.shape[-1]))
    if not allow_both_ivectors and ivector is not None and online_ivectors is not None:
        raise UsageError("give either a batch i-vector or online i-vectors, not both")
    if ivector is not None:
        given_dim = len(ivector)
    elif online_ivectors is not None:
        given_dim = online_ivectors.shape[1]
    else:
        given_dim = 0
    if given_dim != ivector_dim:
        raise UsageError("Neural net expects 'ivector' features with dimension %d but "
                         "you provided %d" % (ivector_dim, given_dim))


class SimpleNnetComputer:
    """Computes a simple network's output for utterances, chunk by chunk, as
    Kaldi's DecodableNnetSimple (see the module docstring; the chunks are
    those of :class:`ChunkLayout`).

    ``nnet``: prepared as the caller wants (nnet3-compute: see
    :func:`prepare_nnet_for_compute`); its weight matrices are re-stored
    column-major for faster products, values unchanged
    (:func:`~pynnet3.compute.layout.lay_out_for_products`). ``priors``: vector whose log is
    subtracted from every output row (empty/None: none). ``context``:
    (left, right) to use instead of computing it. ``backend``: NnetComputer's
    backend ("numpy", "cupy", or "kaldi-exact" / a KaldiExactBackend: Kaldi's
    CPU arithmetic bit for bit; the log of the priors, their subtraction and
    the acoustic scale are Kaldi's in every case). ``compiler``: the compiler to use (a
    CachingOptimizingCompiler, :func:`pynnet3.compute.compilation.make_compiler`;
    one with Kaldi's default options is made for ``nnet`` if None);
    computations and their execution plans are kept per chunk shape, so all
    chunks and utterances of the same shape compile once.
    ``debug_computation``: log each computation when it is first used
    (--debug-computation; Kaldi registers it but does nothing with it).
    ``debug``: run every computation in debug mode, logging each command
    (Kaldi's --computation.debug, also on with --verbose >= 5).
    ``max_chunks``: at most this many chunks of the same shape (of one
    utterance, or of several: :meth:`compute_utterances`) go into one
    computation as sequences n = 0, 1, ... (see :meth:`chunks_per_computation`);
    1 computes one chunk at a time as Kaldi does; None (default) chooses
    from the chunk size, and 1 with Kaldi-exact arithmetic. With None and
    BLAS arithmetic, a chunk-invariant network's consecutive chunks are
    first merged into longer ones (``merges_chunks``, see
    :meth:`_utterance_chunks`).
    ``num_threads``: computations run on this many threads of the
    computer's own, each with single-threaded BLAS
    (:mod:`pynnet3.compute.blas_threads`; on the NumPy backend with BLAS
    arithmetic, where NumPy's BLAS thread count can be changed; else one
    thread, with BLAS's own threads). Each thread has its own matrices, so
    memory grows with it; the numbers do not change.
    """

    __slots__ = ("nnet", "opts", "log_priors", "nnet_left_context", "nnet_right_context",
                 "output_dim", "input_dim", "ivector_dim", "frames_per_chunk", "backend",
                 "compiler", "debug_computation", "debug", "layout", "max_chunks", "num_threads",
                 "merges_chunks", "_recurrent", "_cache", "_plans", "_shape_plans", "_plan_lock",
                 "_workspaces", "_threads")

    def __init__(self, nnet, opts=None, priors=None, context=None, backend="numpy",
                 compiler=None, debug_computation=False, debug=False, max_chunks=None,
                 num_threads=1):
        if not is_simple_nnet(nnet):
            raise NnetError("nnet3-compute needs a 'simple' network (an input node 'input', "
                            "an output node 'output', optionally an input node 'ivector')")
        self.nnet = nnet
        self.opts = opts if opts is not None else SimpleComputationOptions()
        self.backend = get_backend(backend)
        lay_out_for_products(nnet)       # same values, faster products
        self.output_dim = nnet.output_dim("output")
        self.input_dim = nnet.input_dim("input")
        self.ivector_dim = max(0, nnet.input_dim("ivector"))
        self.log_priors = log_priors(priors, self.output_dim)
        self.compiler = compiler if compiler is not None else make_compiler(nnet)
        # Kaldi's DecodableNnetSimple asks its compiler (which computes it once)
        left, right = (context if context is not None
                       else self.compiler.get_simple_nnet_context())
        self.nnet_left_context, self.nnet_right_context = int(left), int(right)
        self.debug_computation = debug_computation
        self.debug = debug
        self.layout = ChunkLayout(self.opts, left, right, nnet.modulus())
        self.frames_per_chunk = self.layout.frames_per_chunk
        if max_chunks is not None and max_chunks < 1:
            raise UsageError("the number of chunks per computation must be >= 1, got %d"
                             % max_chunks)
        self.max_chunks = max_chunks
        self.num_threads = 1
        if (num_threads > 1 and self.backend.xp is np
                and not isinstance(self.backend, KaldiExactBackend) and blas_control.available()):
            self.num_threads = int(num_threads)
        self._recurrent = nnet_is_recurrent(nnet)
        self.merges_chunks = (max_chunks is None
                              and not isinstance(self.backend, KaldiExactBackend)
                              and nnet_is_chunk_invariant(nnet))
        if self.merges_chunks:
            logger.info("The network's outputs do not depend on the chunking: consecutive "
                        "chunks with the same i-vector are computed as longer chunks of up to "
                        "%d frames (Kaldi's numbers within float rounding; "
                        "--chunks-per-computation=1 computes Kaldi's chunks)",
                        self.merged_chunk_frames())
        self._cache = {}        # chunk shape -> computation
        self._plans = {}        # (chunk shape, thread) -> execution plan
        self._shape_plans = {}  # chunk shape -> the first of them (the others share its parts)
        self._plan_lock = threading.Lock()
        # one arena per thread for the computations of every chunk shape
        # (outputs included): a thread runs them one after the other and
        # their outputs are copied out
        self._workspaces = {}
        self._threads = ComputerThreads(self.num_threads, "pynnet3-compute")

    def copy_for_thread(self, compiler):
        """A computer for another thread: the same network, options,
        priors and backend, ``compiler`` (share one through a lock), and its
        own computations, execution plans and matrices (reused from chunk to
        chunk, so two threads cannot share them); it computes on the calling
        thread alone."""
        other = copy.copy(self)
        other.compiler = compiler
        other.num_threads = 1
        other._cache, other._plans, other._shape_plans, other._workspaces = {}, {}, {}, {}
        other._plan_lock = threading.Lock()
        other._threads = ComputerThreads(1, "pynnet3-compute")
        return other

    # -- geometry ------------------------------------------------------------------------------
    def num_subsampled_frames(self, num_frames):
        """Output frames of an utterance of ``num_frames`` input frames."""
        return self.layout.num_subsampled_frames(num_frames)

    def subsampled_frames_per_chunk(self):
        return self.layout.subsampled_frames_per_chunk()

    def merged_chunk_frames(self):
        """The input frames of this computer's longest merged chunk: its
        threads share :data:`MERGED_CHUNK_MAX_OUTPUT_ROWS` (each computes
        one chunk at a time, and each has its own matrices)."""
        return self.layout.merged_chunk_frames(MERGED_CHUNK_MAX_OUTPUT_ROWS // self.num_threads)

    def chunk_plan(self, num_frames, first_subsampled_frame, num_subsampled_frames):
        """The ChunkPlan of the chunk of ``num_subsampled_frames`` output frames
        starting at ``first_subsampled_frame`` in an utterance of
        ``num_frames`` input frames."""
        return self.layout.chunk_plan(num_frames, first_subsampled_frame, num_subsampled_frames)

    # -- inputs ----------------------------------------------------------------------------------
    def check_dims(self, features, ivector=None, online_ivectors=None):
        """Kaldi's dimension checks of the features and i-vectors
        (:func:`check_input_dims`; not both kinds of i-vector)."""
        check_input_dims(features, ivector, online_ivectors, self.input_dim, self.ivector_dim)

    chunk_ivector = staticmethod(ChunkLayout.chunk_ivector)

    @staticmethod
    def chunk_features(features, plan):
        """The chunk's input rows, the utterance's first/last frame repeated
        where the chunk reaches past its edges."""
        return ChunkLayout.chunk_features(features, plan.first_input_frame,
                                          plan.num_input_frames)

    # -- computing ------------------------------------------------------------------------------
    def _computation(self, plan, has_ivector, num_sequences=1, thread=0):
        """(computation, execution plan) for a chunk shape, with times
        shifted so the first output is at t = 0. ``num_sequences`` > 1 asks
        for that many chunks of this shape at once (n = 0, 1, ...; the rows
        of each input and of the output are n-major, as Kaldi's
        NnetBatchComputer orders them). ``thread``: whose execution plan
        (each of the computer's threads has its own; None: compile only, no
        plan)."""
        f = self.opts.frame_subsampling_factor
        input_start = plan.first_input_frame - plan.first_output_frame
        key = (input_start, plan.num_input_frames, plan.num_subsampled_frames, f, has_ivector,
               num_sequences)
        computation = self._cache.get(key)
        if computation is None:
            request = ComputationRequest()
            request.need_model_derivative = False
            request.store_component_stats = False
            if num_sequences == 1:
                request.inputs = [IoSpecification.from_t_range(
                    "input", input_start, input_start + plan.num_input_frames)]
            else:
                request.inputs = [IoSpecification("input", [
                    Index(n, t, 0) for n in range(num_sequences)
                    for t in range(input_start, input_start + plan.num_input_frames)])]
            if has_ivector:
                request.inputs.append(IoSpecification(
                    "ivector", [Index(n, 0, 0) for n in range(num_sequences)]))
            request.outputs = [IoSpecification(
                "output", [Index(n, i * f, 0) for n in range(num_sequences)
                           for i in range(plan.num_subsampled_frames)])]
            computation = self.compiler.compile(request)
            if self.debug_computation:
                logger.info("Computation for chunk shape %s:\n%s", key,
                            print_computation(computation, self.nnet))
            self._cache[key] = computation
        if thread is None:
            return computation, None
        exec_plan = self._plans.get((key, thread))
        if exec_plan is None:
            workspace = self._workspaces.get(thread)
            if workspace is None:
                workspace = self._workspaces[thread] = Workspace(self.backend)
            # A worker's output leaves it (see _run_on_thread): made outside
            # the arena, it is handed over as it is, not copied out of it.
            # The threads' plans of one shape share all but their arenas: the
            # first one made (under the lock) is the one the others share.
            with self._plan_lock:
                exec_plan = ExecutionPlan(computation, self.nnet, self.backend,
                                          workspace=workspace, outputs_in_arena=thread == 0,
                                          like=self._shape_plans.get(key))
                self._shape_plans.setdefault(key, exec_plan)
            self._plans[(key, thread)] = exec_plan
        return computation, exec_plan

    def run_computation(self, plan, features, ivectors, num_sequences=1):
        """Runs the computation of ``plan``'s shape on ``features`` (the
        chunk input rows, n-major) and ``ivectors`` (one row per sequence, or
        None); returns the output rows (n-major) on the host with priors and
        acoustic scale applied: on the calling thread of the computer, a view
        of its memory, valid until its next computation (copy what you
        keep); on one of the computer's own threads, a matrix of its own."""
        computation, exec_plan = self._computation(plan, ivectors is not None, num_sequences,
                                                   self._threads.current())
        computer = NnetComputer(computation, self.nnet, backend=exec_plan.backend,
                                plan=exec_plan, debug=self.debug)
        computer.accept_input("input", features)
        if ivectors is not None:
            computer.accept_input("ivector", ivectors)
        computer.run()
        output = computer.get_output_destructive("output")
        if not isinstance(output, np.ndarray):
            output = computer.backend.to_host(output)
        # Kaldi's AddVecToRows(-1.0, log_priors) and Scale(acoustic_scale):
        # one rounding per element each, as these.
        if self.log_priors is not None:
            output -= self.log_priors
        if self.opts.acoustic_scale != 1.0:
            output *= np.float32(self.opts.acoustic_scale)
        return output

    def compute_chunk(self, features, first_subsampled_frame, num_subsampled_frames,
                      ivector=None, online_ivectors=None, online_ivector_period=0):
        """Output rows (num_subsampled_frames x output_dim, float32 NumPy) of
        one chunk, with priors and acoustic scale applied (not exp)."""
        features = np.asarray(features, dtype=np.float32)
        self.check_dims(features, ivector, online_ivectors)
        if features.shape[0] == 0:
            raise UsageError("Zero-length utterance")
        plan = self.chunk_plan(features.shape[0], first_subsampled_frame, num_subsampled_frames)
        ivec = self.chunk_ivector(plan, ivector, online_ivectors, online_ivector_period)
        return np.array(self.run_computation(plan, self.chunk_features(features, plan),
                                             None if ivec is None else ivec.reshape(1, -1)))

    def chunks_per_computation(self, plan, num_chunks):
        """How many chunks of ``plan``'s shape one computation takes when
        ``num_chunks`` of them are to be computed: ``max_chunks`` if set,
        else as many as keep the computation near :data:`BATCH_OUTPUT_ROWS`
        output rows (one with Kaldi-exact arithmetic, whose products must be
        Kaldi's one-chunk products), or :data:`BATCH_RECURRENT_CHUNKS` for a
        recurrent network. Then spread evenly: the computations of one
        batch differ by at most one chunk. On ``num_threads`` threads the
        chunks are cut into at least as many computations as threads.

        A recurrent network's steps multiply one row per chunk, and their
        input's non-recurrent part is multiplied ahead for many steps
        (:mod:`pynnet3.compute.hoisted_products`), so more chunks at a time
        gain less there than they cost in memory: on the TDNN-LSTM of
        scripts/bench_compute.py (1 thread, 2026-11-28) 1, 2 and 4 chunks
        and the 5-8 of before took 9.0, 7.7, 7.7 and 7.0 s at a peak of 201,
        203, 207 and 215 MB (Kaldi: 174 MB); on its chain BLSTM 1, 2 and 3
        chunks and 5-8 16.8, 13.8, 12.5 and 11.1 s, 242, 245, 255 and 263 MB
        (Kaldi: 218)."""
        limit = self.max_chunks
        if limit is None:
            if isinstance(self.backend, KaldiExactBackend):
                limit = 1
            elif self._recurrent:
                limit = BATCH_RECURRENT_CHUNKS
            else:
                limit = max(1, min(BATCH_OUTPUT_ROWS // plan.num_subsampled_frames,
                                   BATCH_MAX_ROWS // plan.num_input_frames))
            limit = max(1, min(limit, BATCH_MAX_ROWS // plan.num_input_frames))
        num_batches = -(-num_chunks // min(limit, num_chunks))
        if self.num_threads > 1:
            # as many computations per thread (as the chunks allow)
            num_batches = min(num_chunks,
                              -(-num_batches // self.num_threads) * self.num_threads)
        return -(-num_chunks // num_batches)

    def compute_utterances(self, utterances):
        """The outputs of several utterances, each a ``(features, ivector,
        online_ivectors, online_ivector_period)`` tuple, each output exactly
        what :meth:`compute_utterance` gives for it. Every chunk is cut,
        padded and given its i-vector as for one utterance; chunks of the
        same shape (from any of the utterances) are computed together, as
        sequences n = 0, 1, ... of one computation
        (:meth:`chunks_per_computation` at a time). The compiler keeps
        sequences apart, so each output equals the one-chunk-at-a-time
        output within float32 rounding (BLAS sums larger products in
        another order)."""
        inputs, totals, batches = self._batches(utterances)
        outputs = [np.empty((total, self.output_dim), dtype=np.float32) for total in totals]
        for batch, out in self._computed_batches(inputs, batches):
            rows = batch[0][1].num_subsampled_frames
            for n, (u, p, _) in enumerate(batch):
                outputs[u][p.first_subsampled_frame:p.first_subsampled_frame + rows] = \
                    out[n * rows:(n + 1) * rows]
        return outputs

    def utterance_output_rows(self, features, ivector=None, online_ivectors=None,
                              online_ivector_period=0):
        """What :meth:`compute_utterance` gives, as ``(num_rows, blocks)``:
        ``blocks`` yields the output's rows, a block of consecutive rows at a
        time, in order, as the computations deliver them, so that the whole
        output never needs to be in memory (for
        :class:`~pynnet3.io.matrix_rows.MatrixRows`). A block is valid until
        the next one is asked for (it may be this computer's memory). The
        utterance is checked now, before any block is asked for."""
        inputs, totals, batches = self._batches([(features, ivector, online_ivectors,
                                                  online_ivector_period)])
        return totals[0], self._rows_in_order(self._computed_batches(inputs, batches))

    def submit_utterance(self, features, ivector=None, online_ivectors=None,
                         online_ivector_period=0):
        """Starts one utterance on this computer's threads and returns at
        once, with what :meth:`utterance_output_rows` returns: ``(num_rows,
        blocks)``, whose blocks wait for their computations. The utterance
        is checked and its computations compiled now, on the calling thread
        (each submitted as soon as it is compiled). Utterances submitted one
        after the other are computed in that order, so that the threads go
        on with the next utterance while the caller writes the last one: no
        thread waits at the end of each utterance (:meth:`utterance_output_rows`
        has them all wait for its slowest computation). Read the utterances'
        blocks in the order they were submitted; a block left unread keeps
        its computation's output (a copy) in memory. Each computation's
        output is the one :meth:`utterance_output_rows` computes (the same
        chunks per computation), on a computer with ``num_threads`` > 1;
        with one thread this is :meth:`utterance_output_rows`."""
        if self.num_threads == 1:
            return self.utterance_output_rows(features, ivector, online_ivectors,
                                              online_ivector_period)
        inputs, totals, batches = self._batches([(features, ivector, online_ivectors,
                                                  online_ivector_period)])
        pending = collections.deque()
        for batch in batches:
            # a new shape compiles while the threads run those already submitted
            self._compile(batch)
            pending.append((batch, self._threads.submit(self._run_on_thread, inputs, batch)))

        def computed():
            try:
                while pending:
                    # popped, so that each output is let go once read (a
                    # future holds its result)
                    batch, future = pending.popleft()
                    yield batch, future.result()
            finally:    # abandoned or failed: the rest need not run
                for _, future in pending:
                    future.cancel()

        return totals[0], self._rows_in_order(computed())

    def _rows_in_order(self, computed):
        """The output rows of one utterance's ``(batch, output)`` pairs, a
        block at a time, in row order (see :meth:`utterance_output_rows`)."""
        next_row, waiting = 0, {}       # chunks computed before their turn, copied
        for batch, out in computed:
            rows = batch[0][1].num_subsampled_frames
            for n, (_, plan, _) in enumerate(batch):
                block = out[n * rows:(n + 1) * rows]
                if plan.first_subsampled_frame != next_row:
                    waiting[plan.first_subsampled_frame] = np.array(block)
                    continue
                yield block
                next_row += rows
                while next_row in waiting:
                    block = waiting.pop(next_row)
                    yield block
                    next_row += block.shape[0]

    def _batches(self, utterances):
        """Kaldi's checks of every utterance, then its chunks grouped by shape
        and cut into computations: ``(inputs, num_rows, batches)``, the
        utterances' features, their output row counts and the computations,
        each a list of ``(utterance, chunk plan, i-vector)`` (a shape's
        chunks in row order)."""
        groups = {}     # chunk shape -> [(utterance, plan, i-vector)]
        inputs, totals = [], []
        for u, (features, ivector, online, period) in enumerate(utterances):
            features = np.asarray(features, dtype=np.float32)
            if features.ndim != 2 or features.shape[0] == 0:
                raise UsageError("Zero-length utterance" if features.ndim == 2 else
                                 "features must be a matrix, got %d dimension(s)"
                                 % features.ndim)
            if online is not None and period <= 0:
                raise UsageError("You need to set the --online-ivector-period option!")
            self.check_dims(features, ivector, online)
            inputs.append(features)
            totals.append(self.num_subsampled_frames(features.shape[0]))
            for plan, ivec in self._utterance_chunks(features.shape[0], ivector, online, period):
                key = (plan.first_input_frame - plan.first_output_frame,
                       plan.num_input_frames, plan.num_subsampled_frames, ivec is not None)
                groups.setdefault(key, []).append((u, plan, ivec))
        batches = []
        for tasks in groups.values():
            per = self.chunks_per_computation(tasks[0][1], len(tasks))
            batches += [tasks[first:first + per] for first in range(0, len(tasks), per)]
        return inputs, totals, batches

    def _utterance_chunks(self, num_frames, ivector, online_ivectors, period):
        """The ``(plan, i-vector)`` of each chunk an utterance is computed in:
        Kaldi's chunks (:meth:`ChunkLayout.utterance_chunks`), or, when this
        computer :attr:`merges_chunks`, each run of whole consecutive chunks
        with equal i-vectors cut into longer chunks
        (:func:`merged_chunk_counts`; on several threads, first into as many
        near-equal parts). Kaldi's shorter last chunk stays as it is, so no
        more chunk shapes need compiling than Kaldi's and those of the
        merged lengths."""
        chunks = [(plan, self.chunk_ivector(plan, ivector, online_ivectors, period))
                  for plan in self.layout.utterance_chunks(num_frames)]
        if not self.merges_chunks or len(chunks) < 2:
            return chunks
        step = self.subsampled_frames_per_chunk()
        largest = self.merged_chunk_frames() // self.frames_per_chunk
        merged, run = [], []

        def end_run():
            first = run[0][0].first_subsampled_frame
            for count in merged_chunk_counts(len(run), largest, self.num_threads):
                merged.append((self.chunk_plan(num_frames, first, count * step), run[0][1]))
                first += count * step
            run.clear()

        for plan, ivec in chunks:
            if run and not _same_ivector(ivec, run[0][1]):
                end_run()
            if plan.num_subsampled_frames == step:
                run.append((plan, ivec))
            else:
                if run:
                    end_run()
                merged.append((plan, ivec))
        if run:
            end_run()
        return merged

    def _computed_batches(self, inputs, batches):
        """Yields ``(batch, output rows)`` for each computation of
        :meth:`_batches`, in order; the rows are n-major, with priors and
        acoustic scale applied, valid until the next item."""
        # every new shape compiled first, on this thread: the threads only
        # run computations, and a compilation's temporaries come and go
        # before the computations' matrices exist, not on top of them (the
        # peak memory)
        for batch in batches:
            self._compile(batch)
        if self.num_threads > 1 and len(batches) > 1:
            with blas_control.single_threaded():
                yield from zip(batches, self._threads.map(
                    lambda batch: self._run_on_thread(inputs, batch), batches))
        else:
            for batch in batches:
                yield batch, self._run_batch(inputs, batch)

    def _compile(self, batch):
        """Compiles the computation of one batch of :meth:`_batches` (if its
        shape is new) on the calling thread: the compiler is not
        thread-safe, so the computer's threads only run computations."""
        self._computation(batch[0][1], batch[0][2] is not None, len(batch), None)

    def _run_batch(self, inputs, batch):
        """One computation of :meth:`_batches`: its output rows, n-major (a
        view of the calling thread's memory, see :meth:`run_computation`)."""
        plan = batch[0][1]
        feats = np.concatenate([self.chunk_features(inputs[u], p) for u, p, _ in batch])
        ivecs = (None if batch[0][2] is None
                 else np.stack([v for _, _, v in batch]).astype(np.float32, copy=False))
        return self.run_computation(plan, feats, ivecs, len(batch))

    def _run_on_thread(self, inputs, batch):
        """:meth:`_run_batch` on one of the computer's threads (BLAS
        single-threaded there). The output is a matrix of its own: a
        worker's plans keep outputs out of its arena."""
        return self._run_batch(inputs, batch)

    def close(self):
        """Ends this computer's threads: computations submitted and not yet
        started are cancelled, those running are waited for. The computer
        can still be used (it starts new threads)."""
        self._threads.close()

    def compute_utterance(self, features, ivector=None, online_ivectors=None,
                          online_ivector_period=0):
        """The whole utterance, ceil(num_frames / f) x output_dim, computed
        chunk by chunk as nnet3-compute does (chunks of
        :meth:`subsampled_frames_per_chunk` output frames from frame 0, the
        last one shorter; chunks of the same shape computed together, see
        :meth:`compute_utterances`); exp is not applied."""
        return self.compute_utterances([(features, ivector, online_ivectors,
                                         online_ivector_period)])[0]

    def covers_utterance(self, num_frames):
        """True when Kaldi, with these options, computes an utterance of
        ``num_frames`` frames in a single chunk."""
        return self.layout.covers_utterance(num_frames)


def merged_chunk_counts(num_chunks, largest, parts=1):
    """How many chunks each merged chunk takes when ``num_chunks``
    consecutive whole chunks are merged: ``parts`` near-equal runs (one per
    thread), each cut greedily into the sizes of :func:`merged_chunk_sizes`
    up to ``largest``, the larger first. Guarantees: the counts sum to
    ``num_chunks``, and only those few sizes occur, so merged chunks come in
    few shapes, each compiled once."""
    sizes = merged_chunk_sizes(largest)[::-1]
    counts = []
    parts = max(1, min(parts, num_chunks))
    for part in range(parts):
        left = num_chunks * (part + 1) // parts - num_chunks * part // parts
        for size in sizes:
            while left >= size:
                counts.append(size)
                left -= size
    return counts


def merged_chunk_sizes(largest):
    """The chunk counts a merged chunk may take, up to ``largest``: 1, 2, 3,
    4, 6, 8, 12, 16, ... (powers of two and 1.5 times them), so that a run
    of chunks takes few merged chunks of few shapes."""
    sizes, power = [1], 2
    while power <= largest:
        sizes.append(power)
        if power + power // 2 <= largest:
            sizes.append(power + power // 2)
        power *= 2
    return sizes


def _same_ivector(a, b):
    return a is b or (a is not None and b is not None and np.array_equal(a, b))


def compute_utterance(nnet, features, opts=None, ivector=None, online_ivectors=None,
                      online_ivector_period=0, priors=None, apply_exp_to_output=False):
    """One utterance's output as nnet3-compute gives it (chunked as
    ``opts`` says). ``nnet`` must already be prepared
    (:func:`prepare_nnet_for_compute`). For many utterances build one
    :class:`SimpleNnetComputer` instead (context and compilations are reused)."""
    computer = SimpleNnetComputer(nnet, opts, priors)
    output = computer.compute_utterance(features, ivector, online_ivectors,
                                        online_ivector_period)
    return apply_exp(output) if apply_exp_to_output else output
