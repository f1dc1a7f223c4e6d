"""Running exported models in onnxruntime, utterance by utterance, exactly
as the Kaldi tools they replace.

- :class:`OnnxModel`: a model file in an onnxruntime session (default CPU
  provider; the CUDA provider where installed and ``--use-gpu`` asks) with
  its metadata.
- :class:`ChunkedOnnxComputer`: nnet3-compute's output from a ``chunk``
  model: each utterance cut into chunks by nnet3-compute's own layout
  (:class:`pynnet3.compute.utterance.ChunkLayout`: edge frames, initial and
  final chunks, the i-vector of each chunk), each chunk computed by the
  model's chunk computation over its padded window (see
  :mod:`pynnet3.onnx.chunked` for why that is exact), the chunks of a group
  of utterances in one run (the batch dimension).
- :func:`check_chunk_options`: the chunk options a tool was given must be
  those the model was exported with.
"""

import logging

import numpy as np

from ..compute.batch import UtteranceQueue
from ..compute.utterance import ChunkLayout, SimpleComputationOptions, check_input_dims
from ..errors import ComputationError, UsageError
from .metadata import (CHUNK_OPTIONS, KIND_KEY, bool_value, int_value, parse_shape)
from .dynamic import Expr
from ..compute.decodable_simple_looped import looped_chunk_input_range, looped_chunk_ivector
from ..compute.xvector import (XvectorAverage, check_chunk_size, xvector_chunks,
                               xvector_features)

logger = logging.getLogger("pynnet3")

__all__ = ["OnnxModel", "ChunkedOnnxComputer", "StreamingOnnxComputer", "XvectorOnnxComputer",
           "check_chunk_options", "chunk_options_from"]

USE_GPU_VALUES = ("yes", "no", "optional", "wait")


class OnnxModel:
    """An exported model in an onnxruntime InferenceSession.

    ``num_threads``: onnxruntime's intra-op threads (0: its default, one per
    core). ``use_gpu``: Kaldi's --use-gpu (yes|no|optional|wait); the CUDA
    execution provider is used when onnxruntime has it, as a Kaldi build
    with CUDA would use the GPU."""

    def __init__(self, path, num_threads=1, use_gpu="no"):
        import onnxruntime
        if use_gpu not in USE_GPU_VALUES:
            raise UsageError("Please choose : --use-gpu=yes|no|optional|wait, passed '%s'"
                             % use_gpu)
        if num_threads < 0:
            raise UsageError("--num-threads must be >= 0, got %d" % num_threads)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        providers = ["CPUExecutionProvider"]
        if use_gpu != "no" and "CUDAExecutionProvider" in onnxruntime.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        self.path = path
        try:
            self.session = onnxruntime.InferenceSession(str(path), options,
                                                        providers=providers)
        except Exception as e:   # onnxruntime raises its own exception types
            raise UsageError("cannot load ONNX model %s: %s" % (path, e)) from None
        self.meta = dict(self.session.get_modelmeta().custom_metadata_map)
        self.inputs = {i.name: i for i in self.session.get_inputs()}
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.kind = self.meta.get(KIND_KEY, "")

    def require_kind(self, kind, tool):
        if self.kind != kind:
            raise UsageError("%s: %s is %s, not a model exported for %s (nnet3-to-onnx%s)"
                             % (tool, self.path,
                                ("a '%s' model" % self.kind) if self.kind
                                else "not a model exported by nnet3-to-onnx",
                                tool, {"streaming": " --streaming=true",
                                       "xvector": " --xvector=true"}.get(kind, "")))

    def int(self, key):
        return int_value(self.meta, key, str(self.path))

    def run(self, feeds, outputs=None):
        """Runs the model; returns the outputs as a dict name -> array."""
        names = outputs or self.outputs
        values = self.session.run(names, feeds)
        return dict(zip(names, values))


def output_computable(meta, source="the model"):
    """(first, last, conditions): the output times a length-generic model
    can compute, expressions of T (the number of input frames), provided
    every (lo, hi) of conditions is non-empty (pynnet3.output-computable,
    pynnet3.output-computable-if)."""
    text = meta.get("pynnet3.output-computable")
    if text is None:
        raise UsageError("%s has no 'pynnet3.output-computable' in its metadata" % source)
    lo, hi = text.split()
    conditions = [tuple(Expr.parse(v) for v in c.split())
                  for c in meta.get("pynnet3.output-computable-if", "").split(";") if c]
    return Expr.parse(lo), Expr.parse(hi), conditions


def check_computable(computable, num_input, first, last, tool):
    """Kaldi's refusal of a chunk whose outputs ``first``..``last`` (frames
    of the chunk's input) are not all computable from ``num_input`` frames."""
    lo, hi, conditions = computable
    env = {"T": num_input}
    if not all(a.eval(env) <= b.eval(env) for a, b in conditions):
        where = "the network computes no output frame from it"
    elif lo.eval(env) <= first and last <= hi.eval(env):
        return
    else:
        where = "the network computes its output at frames %d to %d only" % (
            lo.eval(env), hi.eval(env))
    raise ComputationError("Not all outputs were computable, cannot create computation: "
                           "outputs at frames %d to %d of a chunk of %d input frames are "
                           "wanted, but %s (%s refuses this chunk too)"
                           % (first, last, num_input, where, tool))


def chunk_options_from(meta, source="the model"):
    """The SimpleComputationOptions a chunk model was exported with."""
    values = {name.replace("-", "_"): int_value(meta, name, source) for name, _ in CHUNK_OPTIONS}
    return SimpleComputationOptions(**values)


def check_chunk_options(meta, given, source="the model"):
    """``given``: option name -> value for the chunk options a tool was
    given explicitly; each must equal the model's (UsageError naming the
    option otherwise)."""
    for name, value in given.items():
        recorded = int_value(meta, name, source)
        if value != recorded:
            raise UsageError("--%s=%d was given, but %s was exported with --%s=%d: its "
                             "computation is for that value (export the network again with "
                             "nnet3-to-onnx --%s=%d to use it)"
                             % (name, value, source, name, recorded, name, value))


class ChunkedOnnxComputer(UtteranceQueue):
    """nnet3-compute's output of utterances from a ``chunk`` model (see the
    module docstring). ``acoustic_scale``: multiplies the output (after any
    priors the model subtracts), as nnet3-compute. ``batch_size``: the
    utterances whose chunks are computed together; ``chunks_per_run``: at
    most that many chunks per run of the model (0: chosen for speed); the
    outputs are the same numbers whatever they are."""

    def __init__(self, model, acoustic_scale=1.0, batch_size=1, chunks_per_run=0):
        model.require_kind("chunk", "nnet3-compute-onnx")
        if chunks_per_run < 0:
            raise UsageError("--chunks-per-run must be >= 0, got %d" % chunks_per_run)
        if batch_size < 1:
            raise UsageError("--batch-size must be >= 1, got %d" % batch_size)
        super().__init__(batch_size)
        self.model = model
        meta = model.meta
        self.opts = chunk_options_from(meta, str(model.path))
        self.layout = ChunkLayout(self.opts, model.int("nnet3.left-context"),
                                  model.int("nnet3.right-context"), model.int("nnet3.modulus"))
        self.input_dim = model.int("nnet3.input-dim")
        self.ivector_dim = model.int("nnet3.ivector-dim")
        self.output_dim = model.int("nnet3.output-dim")
        self.acoustic_scale = np.float32(acoustic_scale)
        self.shapes = {}
        for name in ("regular", "initial"):
            text = meta.get("pynnet3.chunk." + name)
            if text is not None:
                self.shapes[name] = parse_shape(text)
        self.length_generic = bool_value(meta, "pynnet3.chunk.length-generic")
        if self.length_generic:
            self.computable = output_computable(meta, str(model.path))
        elif "regular" not in self.shapes:
            raise UsageError("%s has no chunk computation in its metadata" % model.path)
        self.uses_ivector = "ivector" in model.inputs
        if chunks_per_run == 0:
            # A recurrence unrolled in time runs one small product per frame:
            # the more chunks per run, the larger each. Otherwise runs of a
            # few hundred frames keep the activations in the caches.
            unrolled = (self.length_generic
                        or bool_value(meta, "pynnet3.chunk.recurrent", True))
            frames = self.shapes["regular"]["input-frames"] if self.shapes else 0
            chunks_per_run = 1 << 30 if unrolled else max(1, 256 // max(1, frames))
        self.chunks_per_run = chunks_per_run

    # -- checks ----------------------------------------------------------------------------
    def check_dims(self, features, ivector=None, online_ivectors=None):
        """nnet3-compute's dimension checks (Kaldi's wording; with both kinds
        of i-vector, the batch one is checked)."""
        check_input_dims(features, ivector, online_ivectors, self.input_dim, self.ivector_dim,
                         allow_both_ivectors=True)

    def _check_computable(self, num_input, first, num_outputs):
        lo, hi, conditions = self.computable
        last = first + (num_outputs - 1) * self.opts.frame_subsampling_factor
        env = {"T": num_input}
        check_computable(self.computable, num_input, first, last, "nnet3-compute")

    # -- utterances ---------------------------------------------------------------------------
    def check_utterance(self, features, ivector, online_ivectors):
        """nnet3-compute's dimension checks, then a non-empty utterance."""
        self.check_dims(features, ivector, online_ivectors)
        if features.shape[0] == 0:
            raise UsageError("Zero-length utterance")

    def _compute(self, pending):
        """The queued utterances' outputs (nnet3-compute's matrices, before
        --apply-exp)."""
        layout = self.layout
        outputs = []
        groups = {}         # shape name -> [(utterance, plan, input rows, i-vector)]
        for u, (_, feats, ivector, online, period) in enumerate(pending):
            plans = layout.utterance_chunks(feats.shape[0])
            outputs.append(np.empty((layout.num_subsampled_frames(feats.shape[0]),
                                     self.output_dim), dtype=np.float32))
            for plan in plans:
                ivec = layout.chunk_ivector(plan, ivector, online, period)
                if self.length_generic:
                    # Kaldi's own window; the outputs' times within it
                    first = plan.first_output_frame - plan.first_input_frame
                    self._check_computable(plan.num_input_frames, first,
                                           plan.num_subsampled_frames)
                    rows = layout.chunk_features(feats, plan.first_input_frame,
                                                 plan.num_input_frames)
                    key = (plan.num_input_frames, first, plan.num_subsampled_frames)
                else:
                    key = ("initial" if plan.first_output_frame == 0
                           and "initial" in self.shapes else "regular")
                    shape = self.shapes[key]
                    rows = layout.chunk_features(feats, plan.first_output_frame - shape["left"],
                                                 shape["input-frames"])
                groups.setdefault(key, []).append((u, plan, rows, ivec))
        runs = [(key, tasks[i:i + self.chunks_per_run]) for key, tasks in groups.items()
                for i in range(0, len(tasks), self.chunks_per_run)]
        for key, tasks in runs:
            feeds = {"input": np.stack([t[2] for t in tasks])}
            if self.uses_ivector:
                feeds["ivector"] = np.stack([t[3] for t in tasks])[:, None, :]
            if self.length_generic:
                feeds["first_output"] = np.asarray([key[1]], np.int64)
                feeds["num_outputs"] = np.asarray([key[2]], np.int64)
            out = self.model.run(feeds, ["output"])["output"]
            for n, (u, plan, _, _) in enumerate(tasks):
                first, num = plan.first_subsampled_frame, plan.num_subsampled_frames
                outputs[u][first:first + num] = out[n, :num]
        if self.acoustic_scale != 1.0:
            for out in outputs:
                out *= self.acoustic_scale
        return [(key, outputs[u], feats.shape[0])
                for u, (key, feats, _, _, _) in enumerate(pending)]


class StreamingOnnxComputer(UtteranceQueue):
    """The outputs of Kaldi's looped decodable (DecodableNnetSimpleLooped)
    over whole utterances, from a ``streaming`` model run chunk after chunk
    with its state (see :mod:`pynnet3.onnx.streaming`): the chunks' input
    frames (edge frames repeated) and i-vectors are those of pynnet3's own
    looped decodable (:func:`pynnet3.compute.decodable_simple_looped.looped_chunk_input_range`,
    :func:`~pynnet3.compute.decodable_simple_looped.looped_chunk_ivector`). The utterances of
    a batch step together (one run of the model per chunk)."""

    def __init__(self, model, acoustic_scale=1.0, batch_size=1):
        model.require_kind("streaming", "nnet3-compute-onnx")
        if batch_size < 1:
            raise UsageError("--batch-size must be >= 1, got %d" % batch_size)
        super().__init__(batch_size)
        self.model = model
        m = model.int
        self.chunk_frames = m("pynnet3.streaming.chunk-frames")
        self.left = m("pynnet3.streaming.left-context")
        self.right = m("pynnet3.streaming.right-context")
        self.subsampling = m("frame-subsampling-factor")
        self.ivector_rows = (m("pynnet3.streaming.first-ivector-rows-chunk1"),
                             m("pynnet3.streaming.first-ivector-rows")
                             - m("pynnet3.streaming.first-ivector-rows-chunk1"),
                             m("pynnet3.streaming.chunk-ivector-rows"))
        self.input_dim = m("nnet3.input-dim")
        self.ivector_dim = m("nnet3.ivector-dim")
        self.output_dim = m("nnet3.output-dim")
        self.acoustic_scale = np.float32(acoustic_scale)
        self.states = [i for i in model.session.get_inputs() if i.name.startswith("state/")]
        self.uses_ivector = "ivector" in model.inputs

    def check_utterance(self, features, ivector, online_ivectors):
        """The looped decodable's checks: a non-empty matrix of the network's
        input dimension, i-vectors where the network takes them."""
        if features.ndim != 2 or features.shape[0] == 0:
            raise UsageError("looped decoding needs a non-empty feature matrix")
        if features.shape[1] != self.input_dim:
            raise UsageError("Input feature dimension mismatch: got %d but network expects %d"
                             % (features.shape[1], self.input_dim))
        if self.ivector_dim > 0 and ivector is None and online_ivectors is None:
            raise UsageError("Neural net expects iVectors but none provided.")

    def compute_utterance(self, features, ivector=None, online_ivectors=None,
                          online_ivector_period=1):
        """One utterance's output (online i-vectors: one per frame unless
        ``online_ivector_period`` says otherwise)."""
        return super().compute_utterance(features, ivector, online_ivectors,
                                         online_ivector_period)

    def _chunk(self, utterance, k):
        """(input frames, i-vector rows) of chunk ``k`` of a queued utterance."""
        _, feats, ivector, online, period = utterance
        begin, end = looped_chunk_input_range(k, self.chunk_frames, self.left, self.right)
        rows = np.clip(np.arange(begin, end), 0, feats.shape[0] - 1)
        ivecs = None
        if self.uses_ivector:
            vector = looped_chunk_ivector(end, ivector, online, period or 1)
            n = self.ivector_rows[min(k, 2)]
            ivecs = np.tile(np.asarray(vector, np.float32), (n, 1))
        return feats[rows], ivecs

    def _compute(self, pending):
        """The queued utterances, stepped through their chunks together."""
        per_chunk = self.chunk_frames // self.subsampling
        totals = [(feats.shape[0] + self.subsampling - 1) // self.subsampling
                  for _, feats, _, _, _ in pending]
        num_chunks = max(2, max(-(-t // per_chunk) for t in totals))
        batch = len(pending)
        state = {s.name: np.zeros([batch] + list(s.shape[1:]), np.float32)
                 for s in self.states}
        pieces = []
        for k in range(num_chunks):
            if k == 1:
                continue            # the first call computes chunks 0 and 1
            chunks = [self._chunk(u, k) for u in pending]
            if k == 0:
                second = [self._chunk(u, 1) for u in pending]
                chunks = [(np.concatenate([a[0], b[0]]),
                           None if a[1] is None else np.concatenate([a[1], b[1]]))
                          for a, b in zip(chunks, second)]
            feeds = {"input": np.stack([c[0] for c in chunks])}
            if self.uses_ivector:
                feeds["ivector"] = np.stack([c[1] for c in chunks])
            feeds.update(state)
            results = self.model.run(feeds)
            pieces.append(results["output"])
            state = {name[len("next_"):]: value for name, value in results.items()
                     if name.startswith("next_state/")}
        outputs = np.concatenate(pieces, axis=1)
        if self.acoustic_scale != 1.0:
            outputs *= self.acoustic_scale
        return [(key, np.ascontiguousarray(outputs[u, :totals[u]]), feats.shape[0])
                for u, (key, feats, _, _, _) in enumerate(pending)]


class XvectorOnnxComputer:
    """x-vectors as nnet3-xvector-compute computes them, from an ``xvector``
    model (the network's output at t = 0 from any number of frames): each
    utterance cut into chunks by nnet3-xvector-compute's own rule
    (:func:`pynnet3.compute.xvector.xvector_chunks`: --chunk-size,
    --min-chunk-size, --pad-input), the chunk outputs averaged with its
    weights (:class:`~pynnet3.compute.xvector.XvectorAverage`)."""

    def __init__(self, model, chunk_size=-1, min_chunk_size=100, pad_input=True):
        model.require_kind("xvector", "nnet3-xvector-compute-onnx")
        check_chunk_size(chunk_size)
        self.model = model
        self.chunk_size = chunk_size
        self.min_chunk_size = min_chunk_size
        self.pad_input = pad_input
        self.input_dim = model.int("nnet3.input-dim")
        self.xvector_dim = model.int("nnet3.output-dim")
        self.computable = output_computable(model.meta, str(model.path))

    def compute(self, features, utt=""):
        """The utterance's x-vector (float32, xvector_dim);
        :class:`~pynnet3.compute.xvector.XvectorSkipped` where
        nnet3-xvector-compute skips the utterance."""
        features = xvector_features(features, self.input_dim, utt)
        chunks = xvector_chunks(features.shape[0], self.chunk_size, self.min_chunk_size,
                                self.pad_input, utt)
        average = XvectorAverage(self.xvector_dim)
        by_length = {}
        for i, (rows, _) in enumerate(chunks):
            by_length.setdefault(len(rows), []).append(i)
        results = [None] * len(chunks)
        for length, members in by_length.items():
            check_computable(self.computable, length, 0, 0, "nnet3-xvector-compute")
            feeds = {"input": np.stack([features[chunks[i][0]] for i in members])}
            out = self.model.run(feeds, ["output"])["output"]
            for n, i in enumerate(members):
                results[i] = out[n, 0]
        for (_, weight), xvector in zip(chunks, results):
            average.add(xvector, weight)
        return average.result()
