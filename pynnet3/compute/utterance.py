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
chunk in that order (nnet3-compute's output).
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

from dataclasses import dataclass
import logging
import math

import numpy as np

from ..common.index import Index
from ..compiler.computation_io import print_computation
from ..compiler.request import ComputationRequest, IoSpecification
from ..errors import NnetError, UsageError
from ..model.am import log_priors
from ..nnet.collapse import collapse_model
from ..nnet.component_ops import set_batchnorm_test_mode, set_dropout_test_mode
from ..nnet.nnet import is_simple_nnet
from ..numerics import kaldi_cpu
from .backend import get_backend
from .compilation import make_compiler
from .computer import NnetComputer
from .plan import ExecutionPlan

logger = logging.getLogger("pynnet3")

__all__ = ["SimpleComputationOptions", "ChunkPlan", "SimpleNnetComputer",
           "prepare_nnet_for_compute", "apply_exp",
           "compute_utterance"]

# Kaldi gives up on an i-vector matrix that ends more than this many frames
# before the frame it needs ("half a second": not explainable by edge effects).
_MAX_IVECTOR_MARGIN_FRAMES = 50


# -- the network's context ---------------------------------------------------------------------

# -- preparing the network ----------------------------------------------------------------------

def prepare_nnet_for_compute(nnet):
    """What nnet3-compute does to a network it has read, in place: batch-norm
    and dropout components in test mode, then Kaldi's CollapseModel with its
    default options. Returns ``nnet``."""
    set_batchnorm_test_mode(nnet, True)
    set_dropout_test_mode(nnet, True)
    collapse_model(nnet)
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


# -- the computer --------------------------------------------------------------------------------

class SimpleNnetComputer:
    """Computes a simple network's output for utterances, chunk by chunk, as
    Kaldi's DecodableNnetSimple (see the module docstring).

    ``nnet``: prepared as the caller wants (nnet3-compute: see
    :func:`prepare_nnet_for_compute`). ``priors``: vector whose log is
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
    """

    __slots__ = ("nnet", "opts", "log_priors", "nnet_left_context", "nnet_right_context",
                 "output_dim", "input_dim", "ivector_dim", "frames_per_chunk", "backend",
                 "compiler", "debug_computation", "debug", "_cache")

    def __init__(self, nnet, opts=None, priors=None, context=None, backend="numpy",
                 compiler=None, debug_computation=False, debug=False):
        if not is_simple_nnet(nnet):
            raise NnetError("nnet3-compute needs a 'simple' network (an input node 'input', "
                            "an output node 'output', optionally an input node 'ivector')")
        self.nnet = nnet
        self.opts = opts if opts is not None else SimpleComputationOptions()
        self.backend = get_backend(backend)
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
        modulus = nnet.modulus()
        self.frames_per_chunk = self.opts.fixed_frames_per_chunk(modulus)
        if self.frames_per_chunk != self.opts.frames_per_chunk:
            if modulus == 1:
                logger.info("Increasing --frames-per-chunk from %d to %d to make it a "
                            "multiple of --frame-subsampling-factor=%d",
                            self.opts.frames_per_chunk, self.frames_per_chunk,
                            self.opts.frame_subsampling_factor)
            else:
                logger.info("Increasing --frames-per-chunk from %d to %d due to "
                            "--frame-subsampling-factor=%d and nnet shift-invariance "
                            "modulus = %d", self.opts.frames_per_chunk,
                            self.frames_per_chunk, self.opts.frame_subsampling_factor,
                            modulus)
        self._cache = {}

    # -- geometry ------------------------------------------------------------------------------
    def num_subsampled_frames(self, num_frames):
        """Output frames of an utterance of ``num_frames`` input frames."""
        f = self.opts.frame_subsampling_factor
        return (num_frames + f - 1) // f

    def subsampled_frames_per_chunk(self):
        return self.frames_per_chunk // self.opts.frame_subsampling_factor

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

    # -- inputs ----------------------------------------------------------------------------------
    def check_dims(self, features, ivector=None, online_ivectors=None):
        """Kaldi's dimension checks of the features and i-vectors."""
        if features.ndim != 2 or features.shape[1] != self.input_dim:
            raise UsageError("Neural net expects 'input' features with dimension %d but you "
                             "provided %d" % (self.input_dim, features.shape[-1]))
        if ivector is not None and online_ivectors is not None:
            raise UsageError("give either a batch i-vector or online i-vectors, not both")
        if ivector is not None:
            ivector_dim = len(ivector)
        elif online_ivectors is not None:
            ivector_dim = online_ivectors.shape[1]
        else:
            ivector_dim = 0
        if ivector_dim != self.ivector_dim:
            raise UsageError("Neural net expects 'ivector' features with dimension %d but "
                             "you provided %d" % (self.ivector_dim, ivector_dim))

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
    def chunk_features(features, plan):
        """The chunk's input rows, the utterance's first/last frame repeated
        where the chunk reaches past its edges."""
        rows = np.arange(plan.first_input_frame,
                         plan.first_input_frame + plan.num_input_frames)
        np.clip(rows, 0, features.shape[0] - 1, out=rows)
        return np.ascontiguousarray(features[rows], dtype=np.float32)

    # -- computing ------------------------------------------------------------------------------
    def _computation(self, plan, has_ivector, num_sequences=1):
        """(computation, execution plan) for a chunk shape, with times
        shifted so the first output is at t = 0. ``num_sequences`` > 1 asks
        for that many chunks of this shape at once (n = 0, 1, ...; the rows
        of each input and of the output are n-major, as Kaldi's
        NnetBatchComputer orders them)."""
        f = self.opts.frame_subsampling_factor
        input_start = plan.first_input_frame - plan.first_output_frame
        key = (input_start, plan.num_input_frames, plan.num_subsampled_frames, f, has_ivector,
               num_sequences)
        cached = self._cache.get(key)
        if cached is None:
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
            cached = self._cache[key] = (computation, ExecutionPlan(
                computation, self.nnet, self.backend))
        return cached

    def run_computation(self, plan, features, ivectors, num_sequences=1):
        """Runs the computation of ``plan``'s shape on ``features`` (the
        chunk input rows, n-major) and ``ivectors`` (one row per sequence, or
        None); returns the output rows on the host with priors and acoustic
        scale applied."""
        computation, exec_plan = self._computation(plan, ivectors is not None, num_sequences)
        computer = NnetComputer(computation, self.nnet, backend=exec_plan.backend,
                                plan=exec_plan, debug=self.debug)
        computer.accept_input("input", features)
        if ivectors is not None:
            computer.accept_input("ivector", ivectors)
        computer.run()
        # A copy on the host; the computer's matrix goes back to the plan's pool.
        output = computer.backend.to_host(computer.get_output("output"))
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
        return self.run_computation(plan, self.chunk_features(features, plan),
                                    None if ivec is None else ivec.reshape(1, -1))

    def compute_utterance(self, features, ivector=None, online_ivectors=None,
                          online_ivector_period=0):
        """The whole utterance, ceil(num_frames / f) x output_dim, computed
        chunk by chunk exactly as nnet3-compute does (chunks of
        :meth:`subsampled_frames_per_chunk` output frames from frame 0, the
        last one shorter); exp is not applied."""
        features = np.asarray(features, dtype=np.float32)
        if features.ndim != 2 or features.shape[0] == 0:
            raise UsageError("Zero-length utterance" if features.ndim == 2 else
                             "features must be a matrix, got %d dimension(s)" % features.ndim)
        if online_ivectors is not None and online_ivector_period <= 0:
            raise UsageError("You need to set the --online-ivector-period option!")
        total = self.num_subsampled_frames(features.shape[0])
        step = self.subsampled_frames_per_chunk()
        if step >= total:
            return self.compute_chunk(features, 0, total, ivector, online_ivectors,
                                      online_ivector_period)
        output = np.empty((total, self.output_dim), dtype=np.float32)
        for start in range(0, total, step):
            num = min(step, total - start)
            output[start:start + num] = self.compute_chunk(
                features, start, num, ivector, online_ivectors, online_ivector_period)
        return output

    def covers_utterance(self, num_frames):
        """True when Kaldi, with these options, computes an utterance of
        ``num_frames`` frames in a single chunk."""
        return self.subsampled_frames_per_chunk() >= self.num_subsampled_frames(num_frames)


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
