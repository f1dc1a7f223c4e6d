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
- each chunk yields ``frames_per_chunk / frame_subsampling_factor`` rows of
  the network's output; the decoder's view of them (Kaldi's
  GetOutputForFrame / LogLikelihood) are *scaled log-likelihoods*:
  ``acoustic_scale * (output - log(priors))`` (no subtraction without
  priors);
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
read the output frames as soon as enough right context has arrived, say when
the input has finished, and read the rest. It hands out the network's output
(:meth:`~DecodableNnetLoopedOnline.get_new_outputs`) or the scaled
log-likelihoods (:meth:`~DecodableNnetLoopedOnline.get_new_scaled_log_likelihoods`),
whichever is asked for by name.

Kaldi's looped tools prepare the network before computing (batch-norm and
dropout in test mode, CollapseModel); :class:`DecodableNnetSimpleLoopedInfo`
does the same on a copy unless told the network is already ``prepared``.
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
from .utterance import prepare_nnet_for_compute
from ..nnet.nnet import Nnet

__all__ = ["NnetSimpleLoopedComputationOptions", "DecodableNnetSimpleLoopedInfo",
           "looped_chunk_input_range", "looped_chunk_ivector",
           "DecodableNnetSimpleLooped", "DecodableAmNnetSimpleLooped",
           "DecodableNnetLoopedOnline"]


class DecodableNnetSimpleLoopedInfo:
    """What every looped decodable of one network shares: the options, the
    prepared (and i-vector-period-modified) network, log priors, the context
    and chunk geometry, the three requests and the looped computation.

    Args:
        opts: a NnetSimpleLoopedComputationOptions (None: Kaldi's defaults).
        nnet: an Nnet, or an AmNnetSimple (then its priors are used unless
            ``priors`` is given).
        priors: the output's priors (a vector), subtracted in the log domain
            from the scaled log-likelihoods; None: none.
        prepared: False (the default) computes a copy of the network
            prepared as Kaldi's looped tools prepare theirs (batch-norm and
            dropout in test mode, CollapseModel); True uses ``nnet`` itself
            as given (and changes its i-vector period in place, as Kaldi).

    Raises:
        NnetError: the network is not 'simple' (input, output, ivector).
        UsageError: bad options or priors.
    """

    def __init__(self, opts, nnet, priors=None, prepared=False):
        opts = opts if opts is not None else NnetSimpleLoopedComputationOptions()
        opts.check()
        if hasattr(nnet, "transition_model") and hasattr(nnet, "priors"):
            if priors is None:
                priors = nnet.priors
            nnet = nnet.nnet
        if not prepared:
            nnet = prepare_nnet_for_compute(nnet.copy())
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

    def scaled_log_likelihoods(self, output):
        """``acoustic_scale * (output - log(priors))`` of network output rows
        (float32, a new matrix; without priors only the scale), as Kaldi's
        looped decodables turn each chunk's output into what the decoder
        reads."""
        result = np.array(output, dtype=np.float32)
        if self.log_priors is not None:
            result -= self.log_priors
        result *= np.float32(self.opts.acoustic_scale)
        return result

    def num_ivectors(self, chunk_index):
        """How many i-vector rows chunk ``chunk_index`` (0-based) takes."""
        request = self.request1 if chunk_index == 0 else self.request2
        return len(request.inputs[1].indexes)

    def chunk_input_range(self, chunk_index):
        """[begin, end) of the input frames chunk ``chunk_index`` feeds."""
        return looped_chunk_input_range(chunk_index, self.frames_per_chunk,
                                        self.frames_left_context, self.frames_right_context)


def looped_chunk_input_range(chunk_index, frames_per_chunk, left_context, right_context):
    """[begin, end) of the input frames chunk ``chunk_index`` (0-based) of a
    looped computation feeds: chunk 0 frames [-left_context, frames_per_chunk
    + right_context), each later chunk the next ``frames_per_chunk``."""
    if chunk_index == 0:
        return -left_context, frames_per_chunk + right_context
    begin = chunk_index * frames_per_chunk + right_context
    return begin, begin + frames_per_chunk


def looped_chunk_ivector(end_frame, ivector=None, online_ivectors=None, online_ivector_period=1):
    """The i-vector Kaldi's DecodableNnetSimpleLooped gives a chunk whose
    input ends (exclusive) at ``end_frame``: the batch i-vector, or the online
    row ``end_frame // period`` (clamped to the last row)."""
    if ivector is not None:
        return ivector
    rows = online_ivectors
    if len(rows) == 0:
        raise UsageError("ivector matrix cannot be empty.")
    return rows[min(end_frame // online_ivector_period, len(rows) - 1)]


class _LoopedRunner:
    """The chunk loop shared by the whole-utterance and the streaming
    decodables: feeds one chunk, runs, keeps the chunk's network output
    (``current_output``) and its scaled log-likelihoods (``current_log_post``)."""

    def __init__(self, info, backend):
        self.info = info
        self.computer = NnetComputer(info.computation, info.nnet, backend=backend)
        self.num_chunks_computed = 0
        self.current_output = np.zeros((0, info.output_dim), np.float32)
        self.current_log_post = self.current_output
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
        output = np.asarray(computer.backend.to_host(
            computer.get_output_destructive("output")), dtype=np.float32)
        sf = info.opts.frame_subsampling_factor
        if output.shape != (info.frames_per_chunk // sf, info.output_dim):
            raise NnetError("looped computation gave %s output rows, expected %d x %d"
                            % (output.shape, info.frames_per_chunk // sf, info.output_dim))
        self.current_output = output
        self.current_log_post = info.scaled_log_likelihoods(output)
        self.num_chunks_computed += 1
        self.current_log_post_subsampled_offset = \
            (self.num_chunks_computed - 1) * (info.frames_per_chunk // sf)


def _edge_padded(get_frame_block, num_available, begin, end):
    """Rows begin..end-1 of the input, out-of-range rows replaced by the
    first / last available row."""
    rows = np.clip(np.arange(begin, end), 0, num_available - 1)
    return get_frame_block(rows)


class DecodableNnetSimpleLooped:
    """Kaldi's DecodableNnetSimpleLooped over a whole feature matrix: the
    decoder's view, so :meth:`get_output_for_frame` and
    :meth:`get_all_outputs` give *scaled log-likelihoods*,
    ``acoustic_scale * (output - log(priors))``, as Kaldi's GetOutputForFrame
    does. ``ivector`` (batch) and ``online_ivectors`` (one row every
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
        return looped_chunk_ivector(input_frame, self.ivector, self.online_ivectors,
                                    self.online_ivector_period)

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
        """The scaled log-likelihoods of every output frame of the utterance,
        in one matrix (computing the chunks still needed)."""
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
    """A network's output computed frame by frame as the features arrive
    (Kaldi's DecodableNnetLoopedOnline, with the features pushed in instead
    of pulled). The call sequence::

        stream = pynnet3.DecodableNnetLoopedOnline(nnet, frames_per_chunk=20)
        for frames in pieces:                  # as the input arrives
            stream.accept_features(frames)     # (and i-vectors, if the network has them)
            rows = stream.get_new_outputs()    # frames whose right context has arrived
        stream.input_finished()                # no more input will come
        rows = stream.get_new_outputs()        # every remaining frame

    ``accept_features(frames, input_finished=True)`` gives the last frames
    and ends the input in one call. Until the input is finished, the last
    frames (the network's right context, plus up to a chunk) are held back
    because they need input that has not arrived; once it is finished they
    are computed with copies of the last frame as right context, as Kaldi
    does, so every frame is delivered.

    Two readings of the same frames, named for what they are:

    - :meth:`get_new_outputs`: the network's ``output`` rows, the numbers
      ``nnet3-compute`` writes (no priors, no scale);
    - :meth:`get_new_scaled_log_likelihoods`: ``acoustic_scale * (output -
      log(priors))``, what Kaldi's decoders read (without priors only the
      scale; ``acoustic_scale`` is an option, Kaldi's default 0.1).

    Both read from one position: each frame is returned once, by whichever
    of the two is called.

    For a network without recurrence the outputs equal ``nnet3-compute``'s
    for the same utterance and i-vector, within float32 rounding; a
    recurrent network carries its state across chunks as Kaldi's looped
    decoding does.

    Args:
        model: an Nnet; an AmNnetSimple (its priors count in the scaled
            log-likelihoods); the file name of a network; or a
            :class:`DecodableNnetSimpleLoopedInfo` shared by several streams
            (then no ``priors``, ``prepared`` or options).
        priors: the output's priors (overrides an AmNnetSimple's).
        prepared: False (default): a copy of the network is prepared as
            Kaldi's tools prepare it (batch-norm and dropout in test mode,
            CollapseModel); True: the network is used as given.
        backend: "numpy" (BLAS arithmetic), "kaldi-exact" or "cupy".
        **options: Kaldi's NnetSimpleLoopedComputationOptions by their
            snake_case names: ``frames_per_chunk`` (24),
            ``extra_left_context_initial`` (0), ``frame_subsampling_factor``
            (1), ``acoustic_scale`` (0.1, only for the scaled
            log-likelihoods).

    Raises:
        UsageError: unknown options, or options with a shared info.
        NnetError: the network is not 'simple' (nodes ``input``,
            ``output``, optionally ``ivector``).

    Example::

        import pynnet3
        from pynnet3 import examples

        nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
        feats = dict(pynnet3.read_table("ark:" + examples.path("feats.ark")))["utt2"]
        ivector = dict(pynnet3.read_table("ark:" + examples.path("ivectors.ark")))["utt2"]
        stream = pynnet3.DecodableNnetLoopedOnline(nnet, frames_per_chunk=20)
        for start in range(0, len(feats), 10):             # 10 frames at a time
            stream.accept_features(feats[start:start + 10], ivector)
            print(len(stream.get_new_outputs()), end=" ")   # frames ready so far
        stream.input_finished()
        print(len(stream.get_new_outputs()))                # the rest

    Output::

        0 0 20 0 20 10
    """

    def __init__(self, model, priors=None, *, prepared=False, backend="numpy", **options):
        if isinstance(model, DecodableNnetSimpleLoopedInfo):
            if priors is not None or prepared or options:
                raise UsageError("a shared DecodableNnetSimpleLoopedInfo already fixes the "
                                 "network, priors and options; give none of them")
            info = model
        else:
            if isinstance(model, str):
                model = Nnet.read(model)
            known = set(NnetSimpleLoopedComputationOptions.__dataclass_fields__)
            unknown = set(options) - known
            if unknown:
                raise UsageError("unknown option(s) %s; expected some of %s"
                                 % (", ".join(sorted(unknown)), ", ".join(sorted(known))))
            info = DecodableNnetSimpleLoopedInfo(NnetSimpleLoopedComputationOptions(**options),
                                                 model, priors, prepared=prepared)
        self.info = info
        self._runner = _LoopedRunner(info, backend)
        self._input_dim = info.nnet.input_dim("input")
        self._ivector_dim = max(0, info.nnet.input_dim("ivector"))
        self._frames = np.zeros((0, self._input_dim), np.float32)
        self._ivectors = np.zeros((0, self._ivector_dim), np.float32)
        self._finished = False
        self._next_frame = 0     # next output frame the get_new_* methods return

    def accept_features(self, frames, ivectors=None, input_finished=False):
        """Appends input frames (and their i-vectors) to the stream.

        Args:
            frames: a matrix, one row per input frame (the network's input
                dimension); may have no rows.
            ivectors: for a network with an ``ivector`` input: a matrix with
                one i-vector per frame (Kaldi's online i-vectors as its
                online feature gives them), or one vector for all these
                frames. Each chunk uses the most recent one, as Kaldi does.
            input_finished: True when these are the last frames (the same as
                calling :meth:`input_finished` next).

        Returns:
            None.

        Raises:
            UsageError: wrong dimensions, missing i-vectors, or frames after
                the input has finished.
        """
        if self._finished:
            raise UsageError("accept_features after input_finished")
        frames = np.asarray(frames, dtype=np.float32)
        if frames.ndim != 2 or frames.shape[1] != self._input_dim:
            raise UsageError("Input feature dimension mismatch: got %s but network expects "
                             "rows of dimension %d" % (frames.shape, self._input_dim))
        if self.info.has_ivectors:
            if ivectors is None:
                raise UsageError("Neural net expects iVectors but none provided.")
            ivectors = np.asarray(ivectors, dtype=np.float32)
            if ivectors.ndim == 1:
                ivectors = np.tile(ivectors, (frames.shape[0], 1))
            if ivectors.ndim != 2 or ivectors.shape[1] != self._ivector_dim:
                raise UsageError("Ivector feature dimension mismatch: got %s but network "
                                 "expects dimension %d" % (ivectors.shape, self._ivector_dim))
            self._ivectors = np.concatenate([self._ivectors, ivectors])
        elif ivectors is not None:
            raise UsageError("the network has no ivector input, but i-vectors were given")
        self._frames = np.concatenate([self._frames, frames])
        if input_finished:
            self.input_finished()

    def input_finished(self):
        """Announces that no more frames will come: every remaining output
        frame becomes ready (the last chunk's right context is made of
        copies of the last frame, as Kaldi's).

        Returns:
            None.
        """
        self._finished = True

    def num_frames_ready(self):
        """How many output frames can be read now (Kaldi's NumFramesReady):
        all of them once the input has finished, else those of the chunks
        whose right context has arrived.

        Returns:
            The number of (subsampled) output frames ready, counted from the
            start of the stream.
        """
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
        """Kaldi's IsLastFrame.

        Args:
            subsampled_frame: an output frame.

        Returns:
            True if the input has finished and this is the last output frame.
        """
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

    def _frame_row(self, subsampled_frame, scaled):
        runner = self._runner
        if subsampled_frame < runner.current_log_post_subsampled_offset:
            raise UsageError("Frames must be accessed in order (frame %d asked after %d)"
                             % (subsampled_frame, runner.current_log_post_subsampled_offset))
        if not 0 <= subsampled_frame < self.num_frames_ready():
            raise UsageError("frame %d is not ready (%d ready%s)"
                             % (subsampled_frame, self.num_frames_ready(),
                                "" if self._finished else "; call input_finished() after "
                                "the last frames"))
        while subsampled_frame >= (runner.current_log_post_subsampled_offset
                                   + runner.current_output.shape[0]):
            self._advance_chunk()
        rows = runner.current_log_post if scaled else runner.current_output
        return rows[subsampled_frame - runner.current_log_post_subsampled_offset].copy()

    def get_output_for_frame(self, subsampled_frame):
        """The network's output row for one frame (a copy). Frames are
        computed chunk by chunk, so they must be asked for in increasing
        order.

        Args:
            subsampled_frame: the output frame (0-based, after frame
                subsampling); must be ready (:meth:`num_frames_ready`).

        Returns:
            A float32 vector of the output dimension.

        Raises:
            UsageError: the frame is not ready, or is older than the chunk
                being read.
        """
        return self._frame_row(subsampled_frame, scaled=False)

    def get_scaled_log_likelihoods_for_frame(self, subsampled_frame):
        """The scaled log-likelihoods of one frame, ``acoustic_scale * (output
        - log(priors))`` (Kaldi's LogLikelihood values).

        Args:
            subsampled_frame: as for :meth:`get_output_for_frame`.

        Returns:
            A float32 vector of the output dimension.

        Raises:
            UsageError: as :meth:`get_output_for_frame`.
        """
        return self._frame_row(subsampled_frame, scaled=True)

    def _get_new(self, scaled):
        ready = self.num_frames_ready()
        rows = [self._frame_row(f, scaled) for f in range(self._next_frame, ready)]
        self._next_frame = max(self._next_frame, ready)
        if not rows:
            return np.zeros((0, self.info.output_dim), np.float32)
        return np.stack(rows)

    def get_new_outputs(self):
        """The network's output for the frames that became ready since the
        last ``get_new_*`` call.

        Returns:
            A float32 matrix (frames x output dimension), possibly with no
            rows: nothing new is ready yet.
        """
        return self._get_new(scaled=False)

    def get_new_scaled_log_likelihoods(self):
        """The scaled log-likelihoods ``acoustic_scale * (output -
        log(priors))`` of the frames that became ready since the last
        ``get_new_*`` call: what Kaldi's decoders read.

        Returns:
            A float32 matrix (frames x output dimension), possibly with no
            rows.
        """
        return self._get_new(scaled=True)
