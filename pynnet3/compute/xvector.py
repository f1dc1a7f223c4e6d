"""x-vectors as Kaldi's nnet3-xvector-compute computes them.

The network's ``output`` node is asked for one row (Index (0, 0, 0)) from
input frames t = 0 .. num_rows - 1 of a chunk of features. An utterance is
cut into chunks of ``chunk_size`` frames (-1: the whole utterance; a
``chunk_size`` longer than the utterance is shortened to it, with Kaldi's
log line); a chunk shorter than ``min_chunk_size`` is padded by repeating its
first and last frames (left half rounded down) when ``pad_input``, and
skipped otherwise (an utterance shorter than ``min_chunk_size`` then fails
with Kaldi's warning). The x-vector is the average of the chunk outputs
weighted by each chunk's number of real frames, accumulated in float32 in
Kaldi's order (so the numbers are Kaldi's within float32 rounding).
"""

import logging
import math

import numpy as np

from ..common.index import Index
from ..compiler.request import ComputationRequest, IoSpecification
from ..errors import NnetError, UsageError
from .backend import KaldiExactBackend, get_backend
from .compilation import make_compiler
from .computer import NnetComputer
from .plan import ExecutionPlan

logger = logging.getLogger("pynnet3")

__all__ = ["XvectorComputer", "XvectorSkipped"]


class XvectorSkipped(UsageError):
    """The utterance gives no x-vector (nnet3-xvector-compute warns and
    counts it as failed): shorter than ``min_chunk_size`` without padding."""


class XvectorComputer:
    """Computes x-vectors of whole utterances (see the module docstring).
    ``nnet`` must be prepared (:func:`pynnet3.compute.utterance.prepare_nnet_for_compute`)."""

    __slots__ = ("nnet", "chunk_size", "min_chunk_size", "pad_input", "backend", "compiler",
                 "input_dim", "xvector_dim", "_cache")

    def __init__(self, nnet, chunk_size=-1, min_chunk_size=100, pad_input=True,
                 backend="numpy", compiler=None):
        if nnet.get_node_index("input") < 0 or nnet.output_dim("output") <= 0:
            raise NnetError("an x-vector network needs an input node 'input' and an "
                            "output node 'output'")
        if chunk_size == 0 or chunk_size < -1:
            raise UsageError("--chunk-size must be -1 (whole utterance) or > 0, got %d"
                             % chunk_size)
        self.nnet = nnet
        self.chunk_size = chunk_size
        self.min_chunk_size = min_chunk_size
        self.pad_input = pad_input
        self.backend = get_backend(backend)
        self.compiler = compiler if compiler is not None else make_compiler(nnet)
        self.input_dim = nnet.input_dim("input")
        self.xvector_dim = nnet.output_dim("output")
        self._cache = {}

    def _computation(self, num_rows):
        computation = self._cache.get(num_rows)
        if computation is None:
            request = ComputationRequest()
            request.need_model_derivative = False
            request.store_component_stats = False
            request.inputs = [IoSpecification.from_t_range("input", 0, num_rows)]
            request.outputs = [IoSpecification("output", [Index(0, 0, 0)])]
            computation = self.compiler.compile(request)
            computation = self._cache[num_rows] = (computation, ExecutionPlan(
                computation, self.nnet, self.backend))
        return computation

    def compute_chunk(self, features):
        """The output row for one chunk of features (all of them)."""
        computation, plan = self._computation(features.shape[0])
        computer = NnetComputer(computation, self.nnet, backend=plan.backend, plan=plan)
        computer.accept_input("input", features)
        computer.run()
        out = computer.backend.to_host(computer.get_output_destructive("output"))
        return np.asarray(out[0], dtype=np.float32)

    def chunk_size_for(self, num_rows, utt=""):
        """The chunk size used for an utterance of ``num_rows`` frames."""
        if self.chunk_size == -1:
            return num_rows
        if num_rows < self.chunk_size:
            logger.info("Chunk size of %d is greater than the number of rows in "
                        "utterance: %s, using chunk size  of %d", self.chunk_size, utt,
                        num_rows)
            return num_rows
        return self.chunk_size

    def compute(self, features, utt=""):
        """The utterance's x-vector (float32, xvector_dim)."""
        features = np.asarray(features, dtype=np.float32)
        if features.ndim != 2 or features.shape[0] == 0:
            raise UsageError("Zero-length utterance: %s" % utt)
        num_rows, feat_dim = features.shape
        if feat_dim != self.input_dim:
            raise UsageError("Neural net expects 'input' features with dimension %d but you "
                             "provided %d" % (self.input_dim, feat_dim))
        if not self.pad_input and num_rows < self.min_chunk_size:
            raise XvectorSkipped("Minimum chunk size of %d is greater than the number of "
                                 "rows in utterance: %s" % (self.min_chunk_size, utt))
        chunk = self.chunk_size_for(num_rows, utt)
        # Kaldi: ceil(num_rows / float(chunk)) in float32.
        num_chunks = int(math.ceil(np.float32(num_rows) / np.float32(chunk)))
        total = np.zeros(self.xvector_dim, dtype=np.float32)
        tot_weight = np.float32(0.0)
        for i in range(num_chunks):
            offset = min(chunk, num_rows - i * chunk)
            if not self.pad_input and offset < self.min_chunk_size:
                continue
            sub = features[i * chunk:i * chunk + offset]
            tot_weight = np.float32(tot_weight + np.float32(offset))
            if self.pad_input and offset < self.min_chunk_size:
                left = (self.min_chunk_size - offset) // 2
                right = self.min_chunk_size - offset - left
                rows = np.concatenate([np.zeros(left, np.int64), np.arange(offset),
                                       np.full(right, offset - 1, np.int64)])
                sub = sub[rows]
            xvector = self.compute_chunk(np.ascontiguousarray(sub))
            if isinstance(self.backend, KaldiExactBackend):
                # Kaldi's AddVec(offset, xvector) is a saxpy
                self.backend.kaldi.axpy_rows(total[None, :], offset, xvector[None, :])
            else:
                total += np.float32(offset) * xvector
        total *= np.float32(1.0 / float(tot_weight))
        return total
