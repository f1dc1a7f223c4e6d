"""Looped compilation: Kaldi's nnet-compile-looped (CreateLoopedComputationRequest,
CompileLooped, ModifyNnetIvectorPeriod) and the options of decodable-simple-looped.

A looped computation serves one stream of frames, chunk after chunk, keeping
the network's recurrent state (and any activations a later chunk can reuse)
across chunks instead of recomputing left context. It is compiled from
requests for consecutive chunks: the first with the network's left context
(plus any extra), then chunks of ``chunk_size`` new input frames each, every
request the previous one shifted by ``chunk_size`` frames. The compiler turns
N such requests into one N-segment computation and the optimizer
(``optimize_looped_computation``) cuts it into a loop (see
:mod:`pynnet3.optimize.looped_optimizer`); N starts at 5 and doubles until the loop is
found (up to 100, as Kaldi).

Running the result on an :class:`~pynnet3.compute.computer.NnetComputer`:
give "input" (and "ivector") for the first chunk, ``run()``, read "output";
then for each further chunk give the next ``chunk_size`` input frames,
``run()``, read "output" — forever.
"""

import copy
import logging
from dataclasses import dataclass, field

from ..common.config_line import ConfigLine
from ..common.index import Index
from ..compiler.compiler import Compiler
from ..compiler.computation import CommandType
from ..compiler.request import ComputationRequest, IoSpecification
from ..errors import ComputationError, UsageError
from ..model.context import compute_simple_nnet_context
from ..optimize.optimizer import max_output_time_in_request, optimize
from ..optimize.options import NnetOptimizeOptions

log = logging.getLogger("pynnet3")


@dataclass
class NnetSimpleLoopedComputationOptions:
    """Kaldi's NnetSimpleLoopedComputationOptions (option names without the
    dashes; ``optimize_config`` holds the ``--optimization.*`` options)."""

    extra_left_context_initial: int = 0
    frame_subsampling_factor: int = 1
    frames_per_chunk: int = 24
    acoustic_scale: float = 0.1
    debug_computation: bool = False
    optimize_config: object = field(default_factory=NnetOptimizeOptions)  # NnetOptimizeOptions

    def check(self):
        if not (self.extra_left_context_initial >= 0 and self.frame_subsampling_factor > 0
                and self.frames_per_chunk > 0 and self.acoustic_scale > 0.0):
            raise UsageError("looped computation options: need extra-left-context-initial "
                             ">= 0, frame-subsampling-factor > 0, frames-per-chunk > 0 and "
                             "acoustic-scale > 0 (got %d, %d, %d, %g)"
                             % (self.extra_left_context_initial, self.frame_subsampling_factor,
                                self.frames_per_chunk, self.acoustic_scale))


def modify_nnet_ivector_period(ivector_period, nnet):
    """Makes every component-node that reads ``ReplaceIndex(X, t, 0)`` read
    ``Round(X, ivector_period)`` instead, in place (Kaldi's
    ModifyNnetIvectorPeriod): a looped computation then needs one i-vector
    per ``ivector_period`` frames instead of one for t = 0, so the i-vector
    can change as the stream advances."""
    if ivector_period <= 0:
        raise UsageError("ivector period must be > 0, got %d" % ivector_period)
    changed = []
    for line in nnet.get_config_lines(False):
        if ConfigLine(line).first_token != "component-node":
            continue
        pos = line.find("ReplaceIndex(")
        if pos < 0:
            continue
        comma = line.find(", t, 0)", pos)
        if comma < 0:
            raise ComputationError("Could not process the ReplaceIndex expression in: %s"
                                   % line)
        name = line[pos + len("ReplaceIndex("):comma]
        end = comma + len(", t, 0)")
        changed.append(line[:pos] + "Round(%s, %d)" % (name, ivector_period) + line[end:])
    if changed:
        nnet.read_config("\n".join(changed) + "\n")


def get_chunk_size(nnet, frame_subsampling_factor, advised_chunk_size):
    """The smallest chunk size >= ``advised_chunk_size`` that is a multiple of
    the network's modulus and of ``frame_subsampling_factor``."""
    modulus = nnet.modulus()
    if modulus <= 0 or frame_subsampling_factor <= 0 or advised_chunk_size <= 0:
        raise UsageError("chunk size: modulus %d, frame-subsampling-factor %d and "
                         "frames-per-chunk %d must be > 0"
                         % (modulus, frame_subsampling_factor, advised_chunk_size))
    chunk_size = advised_chunk_size
    while chunk_size % modulus or chunk_size % frame_subsampling_factor:
        chunk_size += 1
    return chunk_size


def _request(begin_input_t, end_input_t, begin_output_t, end_output_t, num_sequences,
             frame_subsampling_factor, ivector_times):
    """One chunk's request: input frames [begin, end), outputs every
    ``frame_subsampling_factor`` frames of [begin_output, end_output), the
    i-vectors at ``ivector_times``; n has the larger stride (per-sequence
    blocks, for the user's convenience)."""
    inputs = [IoSpecification("input")]
    outputs = [IoSpecification("output")]
    if ivector_times:
        inputs.append(IoSpecification("ivector"))
    for n in range(num_sequences):
        inputs[0].indexes += [Index(n, t, 0) for t in range(begin_input_t, end_input_t)]
        outputs[0].indexes += [Index(n, t, 0) for t in range(begin_output_t, end_output_t,
                                                              frame_subsampling_factor)]
    if ivector_times:
        for n in range(num_sequences):
            inputs[1].indexes += [Index(n, t, 0) for t in sorted(ivector_times)]
    return ComputationRequest(inputs=inputs, outputs=outputs)


def create_looped_computation_request(nnet, chunk_size, frame_subsampling_factor,
                                      ivector_period, left_context_begin, right_context,
                                      num_sequences):
    """Kaldi's CreateLoopedComputationRequest: the requests for the first three
    chunks. Chunk 1 takes input frames [-left_context_begin, chunk_size +
    right_context) and outputs [0, chunk_size); chunk k > 1 takes the next
    ``chunk_size`` input frames and outputs the next ``chunk_size`` frames.
    With an "ivector" input, each chunk asks for the i-vectors (one per
    ``ivector_period`` frames, at multiples of it) that earlier chunks did not
    ask for."""
    has_ivector = nnet.input_dim("ivector") > 0
    if (chunk_size % frame_subsampling_factor or chunk_size % nnet.modulus()
            or chunk_size % ivector_period):
        raise UsageError("chunk size %d must be a multiple of the frame-subsampling-factor "
                         "(%d), the network's modulus (%d) and the i-vector period (%d)"
                         % (chunk_size, frame_subsampling_factor, nnet.modulus(),
                            ivector_period))
    if left_context_begin < 0 or right_context < 0:
        raise UsageError("left and right context must be >= 0 (got %d, %d)"
                         % (left_context_begin, right_context))
    bounds = [(-left_context_begin, chunk_size + right_context)]
    for _ in range(2):
        begin = bounds[-1][1]
        bounds.append((begin, begin + chunk_size))
    seen = set()
    requests = []
    for k, (begin, end) in enumerate(bounds):
        times = set()
        if has_ivector:
            times = {t - t % ivector_period for t in range(begin, end)} - seen
            seen |= times
        requests.append(_request(begin, end, k * chunk_size, (k + 1) * chunk_size,
                                 num_sequences, frame_subsampling_factor, times))
    return tuple(requests)


def create_looped_computation_request_simple(nnet, chunk_size, frame_subsampling_factor,
                                             ivector_period, extra_left_context_begin,
                                             extra_right_context, num_sequences):
    """Like :func:`create_looped_computation_request`, with the network's own
    context (Kaldi's ComputeSimpleNnetContext) added to the extra context."""
    left, right = compute_simple_nnet_context(nnet)
    return create_looped_computation_request(
        nnet, chunk_size, frame_subsampling_factor, ivector_period,
        extra_left_context_begin + left, extra_right_context + right, num_sequences)


def add_time_offset_to_computation_request(t_offset, request):
    """Adds ``t_offset`` to every t of the request's inputs and outputs, in
    place."""
    for io in list(request.inputs) + list(request.outputs):
        io.indexes = [Index(n, t + t_offset, x) for n, t, x in io.indexes]


def extrapolate_computation_request(request1, request2):
    """The next request in the sequence request1, request2 (which must differ
    only by a time shift), or None if they do not."""
    if not (request1.inputs and request1.inputs[0].indexes
            and request2.inputs and request2.inputs[0].indexes):
        raise ComputationError("looped compilation: requests without input indexes")
    shift = request2.inputs[0].indexes[0].t - request1.inputs[0].indexes[0].t
    request3 = copy.deepcopy(request2)
    add_time_offset_to_computation_request(-shift, request3)
    if request3 != request1:
        return None
    add_time_offset_to_computation_request(2 * shift, request3)
    return request3


def _compile_looped_internal(nnet, optimize_opts, request1, request2, request3, num_requests,
                             check):
    requests = [request1, request2, request3]
    while len(requests) < num_requests:
        nxt = extrapolate_computation_request(requests[-2], requests[-1])
        if nxt is None:
            raise ComputationError(
                "Computation requests do not have the right relationship:\nprev_request "
                "is:\n%s\ncur_request is:\n%s" % (requests[-2].print_request(),
                                                  requests[-1].print_request()))
        requests.append(nxt)
    computation = Compiler(requests, nnet).create_computation(True)
    opts = copy.copy(optimize_opts)
    opts.optimize_looped_computation = True
    optimize(opts, nnet, max_output_time_in_request(request3), computation, check=check)
    ok = bool(computation.commands) and \
        computation.commands[-1].command_type == CommandType.kGotoLabel
    return ok, computation


def compile_looped(nnet, optimize_opts, request1, request2, request3, check=False):
    """Kaldi's CompileLooped: compiles 5, 10, 20, ... (up to 100) segments
    until the looped optimization finds the repeat; returns the looped
    computation (its last command is kGotoLabel). ``check`` runs the
    ComputationChecker after every optimization pass (Kaldi: --verbose >= 3)."""
    num_requests = 5
    while num_requests <= 100:
        ok, computation = _compile_looped_internal(nnet, optimize_opts, request1, request2,
                                                   request3, num_requests, check)
        if ok:
            return computation
        log.debug("Looped compilation failed with %d requests, trying %d",
                  num_requests, 2 * num_requests)
        num_requests *= 2
    raise ComputationError("Looped compilation failed with %d requests, which we expect "
                           "should be enough... something went wrong." % (num_requests // 2))
