"""Looped decoding of a 'simple' network, chunk after chunk with state kept
across chunks: Kaldi's DecodableNnetSimpleLoopedInfo / DecodableNnetSimpleLooped
(decodable-simple-looped.cc) and, for streaming, DecodableNnetLoopedOnline
(decodable-online-looped.cc).

:class:`DecodableNnetSimpleLoopedInfo` compiles the looped computation once
per network and options (:func:`pynnet3.driver.compile_looped.compile_looped`);
every decodable then runs that one computation on its own NnetComputer:

- chunk 1 feeds input frames [-left, chunk + right) (left = the network's left
  context + ``extra_left_context_initial``, right = its right context), chunk
  k > 1 the next ``frames_per_chunk`` frames; frames before the start / after
  the end of the available input are copies of the first / last frame;
- each chunk yields ``frames_per_chunk / frame_subsampling_factor`` output
  rows: minus log(priors) if priors were given, times ``acoustic_scale``;
- with an "ivector" input, the network is changed (in place, as Kaldi does)
  to read one i-vector per chunk (ModifyNnetIvectorPeriod); each chunk gets
  the i-vector of the last input frame it needs (online i-vectors: row
  ``frame // period``, clamped to the last row) or the batch i-vector.

Guarantee: for a network without right recurrence, whose recurrences the
looped computation carries over chunk boundaries, the output frames equal
those of the whole utterance computed in one piece with the same left-edge
padding (``extra_left_context_initial`` + the network's left context), up to
float32 rounding.

:class:`DecodableNnetLoopedOnline` is the streaming form: give it feature
frames as they arrive (:meth:`~DecodableNnetLoopedOnline.accept_features`),
say when the input has finished, and read the output frames as soon as enough
right context has arrived.
"""

import numpy as np

from ..driver.compile_looped import (NnetSimpleLoopedComputationOptions, compile_looped,
                                     create_looped_computation_request, get_chunk_size,
                                     modify_nnet_ivector_period)
from ..errors import NnetError, UsageError
from ..model.am import log_priors
from ..model.context import compute_simple_nnet_context
from ..nnet.nnet import is_simple_nnet
from .computer import NnetComputer

__all__ = ["NnetSimpleLoopedComputationOptions", "DecodableNnetSimpleLoopedInfo",
           "DecodableNnetSimpleLooped", "DecodableAmNnetSimpleLooped",
           "DecodableNnetLoopedOnline"]


class DecodableNnetSimpleLoopedInfo:
    """What every looped decodable of one network shares: the options, the
    (possibly i-vector-period-modified) network, log priors, the context and
    chunk geometry, the three requests and the looped computation.

    ``nnet`` may be an Nnet or an AmNnetSimple (then its priors are used
    unless ``priors`` is given)."""

    def __init__(self, opts, nnet, priors=None):
        opts = opts if opts is not None else NnetSimpleLoopedComputationOptions()
        opts.check()
        if hasattr(nnet, "transition_model") and hasattr(nnet, "priors"):
            if priors is None:
                priors = nnet.priors
            nnet = nnet.nnet
        if not is_simple_nnet(nnet):
            raise NnetError("looped decoding needs a 'simple' network (an input node "
                            "'input', an output node 'output', optionally 'ivector')")
        self.opts = opts
        self.nnet = nnet
        self.output_dim = nnet.output_dim("output")
        if self.output_dim <= 0:
            raise NnetError("the network has no output node 'output'")
        self.log_priors = log_priors(priors, self.output_dim)
        self.has_ivectors = nnet.input_dim("ivector") > 0
        left, right = compute_simple_nnet_context(nnet)
        self.frames_left_context = left + opts.extra_left_context_initial
        self.frames_right_context = right
        self.frames_per_chunk = get_chunk_size(nnet, opts.frame_subsampling_factor,
                                               opts.frames_per_chunk)
        ivector_period = self.frames_per_chunk   # one i-vector per chunk, as Kaldi
        if self.has_ivectors:
            modify_nnet_ivector_period(ivector_period, nnet)
        self.request1, self.request2, self.request3 = create_looped_computation_request(
            nnet, self.frames_per_chunk, opts.frame_subsampling_factor, ivector_period,
            self.frames_left_context, self.frames_right_context, 1)
        self.computation = compile_looped(nnet, opts.optimize_config, self.request1,
                                          self.request2, self.request3)

    def num_ivectors(self, chunk_index):
        """How many i-vector rows chunk ``chunk_index`` (0-based) takes."""
        request = self.request1 if chunk_index == 0 else self.request2
        return len(request.inputs[1].indexes)

    def chunk_input_range(self, chunk_index):
        """[begin, end) of the input frames chunk ``chunk_index`` feeds."""
        if chunk_index == 0:
            return -self.frames_left_context, self.frames_per_chunk + self.frames_right_context
        begin = chunk_index * self.frames_per_chunk + self.frames_right_context
        return begin, begin + self.frames_per_chunk


class _LoopedRunner:
    """The chunk loop shared by the whole-utterance and the streaming
    decodables: feeds one chunk, runs, post-processes the output."""

    def __init__(self, info, backend):
        self.info = info
        self.computer = NnetComputer(info.computation, info.nnet, backend=backend)
        self.num_chunks_computed = 0
        self.current_log_post = np.zeros((0, info.output_dim), np.float32)
        self.current_log_post_subsampled_offset = -1

    def advance_chunk(self, frames, ivector):
        """``frames``: this chunk's input rows; ``ivector``: the vector to
        give every i-vector row (None without i-vectors)."""
        info = self.info
        computer = self.computer
        computer.accept_input("input", np.ascontiguousarray(frames, dtype=np.float32))
        if info.has_ivectors:
            n = info.num_ivectors(self.num_chunks_computed)
            computer.accept_input("ivector", np.tile(np.asarray(ivector, np.float32), (n, 1)))
        computer.run()
        output = computer.backend.to_host(computer.get_output_destructive("output"))
        if info.log_priors is not None:
            output -= info.log_priors
        output *= np.float32(info.opts.acoustic_scale)
        sf = info.opts.frame_subsampling_factor
        if output.shape != (info.frames_per_chunk // sf, info.output_dim):
            raise NnetError("looped computation gave %s output rows, expected %d x %d"
                            % (output.shape, info.frames_per_chunk // sf, info.output_dim))
        self.current_log_post = output
        self.num_chunks_computed += 1
        self.current_log_post_subsampled_offset = \
            (self.num_chunks_computed - 1) * (info.frames_per_chunk // sf)


def _edge_padded(get_frame_block, num_available, begin, end):
    """Rows begin..end-1 of the input, out-of-range rows replaced by the
    first / last available row."""
    rows = np.clip(np.arange(begin, end), 0, num_available - 1)
    return get_frame_block(rows)


class DecodableNnetSimpleLooped:
    """Kaldi's DecodableNnetSimpleLooped over a whole feature matrix.
    ``ivector`` (batch) and ``online_ivectors`` (one row every
    ``online_ivector_period`` frames) are exclusive. Frames must be read in
    increasing order."""

    def __init__(self, info, feats, ivector=None, online_ivectors=None,
                 online_ivector_period=1, backend="numpy"):
        feats = np.asarray(feats, dtype=np.float32)
        if feats.ndim != 2 or feats.shape[0] == 0:
            raise UsageError("looped decoding needs a non-empty feature matrix")
        if feats.shape[1] != info.nnet.input_dim("input"):
            raise UsageError("Input feature dimension mismatch: got %d but network expects %d"
                             % (feats.shape[1], info.nnet.input_dim("input")))
        if ivector is not None and online_ivectors is not None:
            raise UsageError("give either a batch i-vector or online i-vectors, not both")
        if online_ivectors is not None and online_ivector_period <= 0:
            raise UsageError("You need to set the --online-ivector-period option!")
        if info.has_ivectors and ivector is None and online_ivectors is None:
            raise UsageError("Neural net expects iVectors but none provided.")
        self.info = info
        self.feats = feats
        self.ivector = ivector
        self.online_ivectors = online_ivectors
        self.online_ivector_period = online_ivector_period
        sf = info.opts.frame_subsampling_factor
        self.num_subsampled_frames = (feats.shape[0] + sf - 1) // sf
        self._runner = _LoopedRunner(info, backend)

    def num_frames(self):
        return self.num_subsampled_frames

    def output_dim(self):
        return self.info.output_dim

    def _current_ivector(self, input_frame):
        if not self.info.has_ivectors:
            return None
        if self.ivector is not None:
            return self.ivector
        rows = self.online_ivectors
        if len(rows) == 0:
            raise UsageError("ivector matrix cannot be empty.")
        return rows[min(input_frame // self.online_ivector_period, len(rows) - 1)]

    def _advance_chunk(self):
        runner = self._runner
        begin, end = self.info.chunk_input_range(runner.num_chunks_computed)
        frames = _edge_padded(self.feats.__getitem__, self.feats.shape[0], begin, end)
        runner.advance_chunk(frames, self._current_ivector(end))

    def get_output_for_frame(self, subsampled_frame):
        """The output row of ``subsampled_frame`` (a copy)."""
        runner = self._runner
        if subsampled_frame < runner.current_log_post_subsampled_offset:
            raise UsageError("Frames must be accessed in order (frame %d asked after %d)"
                             % (subsampled_frame, runner.current_log_post_subsampled_offset))
        if not 0 <= subsampled_frame < self.num_subsampled_frames:
            raise UsageError("frame %d out of range (0..%d)"
                             % (subsampled_frame, self.num_subsampled_frames - 1))
        while subsampled_frame >= (runner.current_log_post_subsampled_offset
                                   + runner.current_log_post.shape[0]):
            self._advance_chunk()
        return runner.current_log_post[
            subsampled_frame - runner.current_log_post_subsampled_offset].copy()

    def get_output(self, subsampled_frame, pdf_id):
        return float(self.get_output_for_frame(subsampled_frame)[pdf_id])

    def get_all_outputs(self):
        """Every output frame of the utterance, in one matrix (computing the
        chunks still needed)."""
        out = np.empty((self.num_subsampled_frames, self.info.output_dim), np.float32)
        for f in range(self.num_subsampled_frames):
            out[f] = self.get_output_for_frame(f)
        return out


class DecodableAmNnetSimpleLooped:
    """Kaldi's DecodableAmNnetSimpleLooped: the decoder's view (frames and
    transition-ids, as Kaldi's DecodableInterface). Build ``info`` from the
    AmNnetSimple so that its priors are subtracted."""

    def __init__(self, info, transition_model, feats, ivector=None, online_ivectors=None,
                 online_ivector_period=1, backend="numpy"):
        self.decodable_nnet = DecodableNnetSimpleLooped(info, feats, ivector, online_ivectors,
                                                        online_ivector_period, backend)
        self.transition_model = transition_model

    def log_likelihood(self, frame, transition_id):
        return self.decodable_nnet.get_output(
            frame, self.transition_model.transition_id_to_pdf(transition_id))

    def num_frames_ready(self):
        return self.decodable_nnet.num_frames()

    def num_indices(self):
        return self.transition_model.num_transition_ids()

    def is_last_frame(self, frame):
        if frame >= self.num_frames_ready():
            raise UsageError("frame %d is beyond the last frame %d"
                             % (frame, self.num_frames_ready() - 1))
        return frame == self.num_frames_ready() - 1


class DecodableNnetLoopedOnline:
    """Streaming looped decoding (Kaldi's DecodableNnetLoopedOnline with the
    features pushed in instead of pulled): :meth:`accept_features` appends
    input frames (and, for a network with i-vectors, the online i-vector rows
    that go with them, one per input frame as Kaldi's online i-vector feature
    gives them); :meth:`input_finished` announces the end, after which the
    last frames are flushed with copies of the last input frame.
    :meth:`num_frames_ready` says how many output frames can be read now,
    :meth:`get_output_for_frame` / :meth:`get_new_outputs` read them."""

    def __init__(self, info, backend="numpy"):
        self.info = info
        self._runner = _LoopedRunner(info, backend)
        self._input_dim = info.nnet.input_dim("input")
        self._ivector_dim = max(0, info.nnet.input_dim("ivector"))
        self._frames = np.zeros((0, self._input_dim), np.float32)
        self._ivectors = np.zeros((0, self._ivector_dim), np.float32)
        self._finished = False
        self._next_frame = 0     # next output frame get_new_outputs returns

    def accept_features(self, frames, ivectors=None):
        if self._finished:
            raise UsageError("accept_features after input_finished")
        frames = np.asarray(frames, dtype=np.float32).reshape(-1, self._input_dim)
        self._frames = np.concatenate([self._frames, frames])
        if self.info.has_ivectors:
            if ivectors is None:
                raise UsageError("Neural net expects iVectors but none provided.")
            ivectors = np.asarray(ivectors, dtype=np.float32).reshape(-1, self._ivector_dim)
            self._ivectors = np.concatenate([self._ivectors, ivectors])

    def input_finished(self):
        self._finished = True

    def num_frames_ready(self):
        """Kaldi's NumFramesReady: all frames once the input has finished,
        else the frames of the chunks whose right context has arrived."""
        ready = self._frames.shape[0]
        if ready == 0:
            return 0
        info = self.info
        sf = info.opts.frame_subsampling_factor
        if self._finished:
            return (ready + sf - 1) // sf
        chunks = max(0, ready - info.frames_right_context) // info.frames_per_chunk
        return chunks * info.frames_per_chunk // sf

    def is_last_frame(self, subsampled_frame):
        sf = self.info.opts.frame_subsampling_factor
        return (self._finished and self._frames.shape[0] > 0
                and subsampled_frame == (self._frames.shape[0] + sf - 1) // sf - 1)

    def _advance_chunk(self):
        runner = self._runner
        available = self._frames.shape[0]
        begin, end = self.info.chunk_input_range(runner.num_chunks_computed)
        if end > available and not self._finished:
            raise UsageError("Attempt to access frame past the end of the available input")
        frames = _edge_padded(self._frames.__getitem__, available, begin, end)
        ivector = None
        if self.info.has_ivectors:
            ivector = np.zeros(self._ivector_dim, np.float32)
            if self._ivectors.shape[0]:
                ivector = self._ivectors[min(available - 1, self._ivectors.shape[0] - 1)]
        runner.advance_chunk(frames, ivector)

    def get_output_for_frame(self, subsampled_frame):
        runner = self._runner
        if subsampled_frame < runner.current_log_post_subsampled_offset:
            raise UsageError("Frames must be accessed in order")
        if subsampled_frame >= self.num_frames_ready():
            raise UsageError("frame %d is not ready (%d ready)"
                             % (subsampled_frame, self.num_frames_ready()))
        while subsampled_frame >= (runner.current_log_post_subsampled_offset
                                   + runner.current_log_post.shape[0]):
            self._advance_chunk()
        return runner.current_log_post[
            subsampled_frame - runner.current_log_post_subsampled_offset].copy()

    def get_new_outputs(self):
        """The output frames that became ready since the last call (a matrix,
        possibly with no rows)."""
        ready = self.num_frames_ready()
        rows = [self.get_output_for_frame(f) for f in range(self._next_frame, ready)]
        self._next_frame = max(self._next_frame, ready)
        if not rows:
            return np.zeros((0, self.info.output_dim), np.float32)
        return np.stack(rows)
