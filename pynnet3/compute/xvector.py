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

With ``num_threads`` > 1 (BLAS arithmetic), :meth:`XvectorComputer.submit`
starts utterances on the computer's own threads
(:class:`~pynnet3.compute.threads.ComputerThreads`), one utterance per
thread, each computed as on one thread: the same x-vectors, bit for bit.
"""

import collections
import concurrent.futures
import logging
import math

import numpy as np

from ..common.index import Index
from ..compiler.request import ComputationRequest, IoSpecification
from ..errors import NnetError, UsageError
from . import blas_threads as blas_control
from .arena import Workspace
from .backend import KaldiExactBackend, get_backend
from .compilation import make_compiler
from .computer import NnetComputer
from .layout import lay_out_for_products
from .plan import ExecutionPlan
from .threads import ComputerThreads

logger = logging.getLogger("pynnet3")

__all__ = ["XvectorComputer", "XvectorSkipped", "xvector_chunks", "XvectorAverage",
           "check_chunk_size", "xvector_features"]


class XvectorSkipped(UsageError):
    """The utterance gives no x-vector (nnet3-xvector-compute warns and
    counts it as failed): shorter than ``min_chunk_size`` without padding."""


class XvectorComputer:
    """Computes x-vectors of whole utterances (see the module docstring).
    ``nnet`` must be prepared (:func:`pynnet3.compute.utterance.prepare_nnet_for_compute`).
    ``num_threads`` > 1: :meth:`submit` runs utterances on that many threads
    of the computer's own (with BLAS arithmetic and NumPy's BLAS thread
    count under control; else one thread)."""

    __slots__ = ("nnet", "chunk_size", "min_chunk_size", "pad_input", "backend", "compiler",
                 "input_dim", "xvector_dim", "num_threads", "_shapes", "_capacity",
                 "_workspaces", "_threads")

    def __init__(self, nnet, chunk_size=-1, min_chunk_size=100, pad_input=True,
                 backend="numpy", compiler=None, num_threads=1):
        if nnet.get_node_index("input") < 0 or nnet.output_dim("output") <= 0:
            raise NnetError("an x-vector network needs an input node 'input' and an "
                            "output node 'output'")
        check_chunk_size(chunk_size)
        self.nnet = nnet
        self.chunk_size = chunk_size
        self.min_chunk_size = min_chunk_size
        self.pad_input = pad_input
        self.backend = get_backend(backend)
        lay_out_for_products(nnet)       # same values, faster products
        self.compiler = compiler if compiler is not None else make_compiler(nnet)
        self.input_dim = nnet.input_dim("input")
        self.xvector_dim = nnet.output_dim("output")
        self.num_threads = 1
        if (num_threads > 1 and self.backend.xp is np
                and not isinstance(self.backend, KaldiExactBackend) and blas_control.available()):
            self.num_threads = int(num_threads)
        # chunk length -> (computation, {thread: execution plan}), the most
        # recently used ``cache_capacity`` (the compiler's, Kaldi's 64): an
        # utterance length each, with whole utterances as chunks
        self._shapes = collections.OrderedDict()
        self._capacity = getattr(getattr(self.compiler, "config", None), "cache_capacity", 64)
        # one arena per thread for all its plans (it runs one at a time): the
        # memory of the largest computation, not of every length seen
        self._workspaces = {}
        self._threads = ComputerThreads(self.num_threads, "pynnet3-xvector")

    def _shape(self, num_rows):
        """The ``(computation, plans)`` entry for chunks of ``num_rows``
        frames, compiled if new (on the calling thread: the compiler is not
        thread-safe); the least recently used entry beyond the capacity is
        dropped (its computation compiles again if that length comes back)."""
        entry = self._shapes.get(num_rows)
        if entry is None:
            request = ComputationRequest()
            request.need_model_derivative = False
            request.store_component_stats = False
            request.inputs = [IoSpecification.from_t_range("input", 0, num_rows)]
            request.outputs = [IoSpecification("output", [Index(0, 0, 0)])]
            entry = self._shapes[num_rows] = (self.compiler.compile(request), {})
            while len(self._shapes) > self._capacity:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(num_rows)
        return entry

    def _plan(self, entry):
        """The calling thread's execution plan for an entry of :meth:`_shape`,
        its matrices in the thread's one arena."""
        computation, plans = entry
        thread = self._threads.current()
        plan = plans.get(thread)
        if plan is None:
            workspace = self._workspaces.get(thread)
            if workspace is None:
                workspace = self._workspaces[thread] = Workspace(self.backend)
            plan = plans[thread] = ExecutionPlan(computation, self.nnet, self.backend,
                                                 workspace=workspace)
        return plan

    def compute_chunk(self, features):
        """The output row for one chunk of features (all of them)."""
        return self._compute_chunk(features, self._shape(features.shape[0]))

    def _compute_chunk(self, features, entry):
        plan = self._plan(entry)
        computer = NnetComputer(entry[0], self.nnet, backend=plan.backend, plan=plan)
        computer.accept_input("input", features)
        computer.run()
        out = computer.backend.to_host(computer.get_output_destructive("output"))
        return np.asarray(out[0], dtype=np.float32)

    def compute(self, features, utt=""):
        """The utterance's x-vector (float32, xvector_dim)."""
        features, chunks = self._chunks(features, utt)
        return self._average(features, chunks, [self._shape(len(rows)) for rows, _ in chunks])

    def submit(self, features, utt=""):
        """Starts the utterance's x-vector on this computer's threads and
        returns a future of what :meth:`compute` gives. The utterance is
        checked now (errors, :class:`XvectorSkipped` included, are raised
        here) and its computations compiled now, on the calling thread.
        With one thread the x-vector is computed now."""
        features, chunks = self._chunks(features, utt)
        entries = [self._shape(len(rows)) for rows, _ in chunks]
        if self.num_threads == 1:
            future = concurrent.futures.Future()
            future.set_result(self._average(features, chunks, entries))
            return future
        return self._threads.submit(self._average, features, chunks, entries)

    def close(self):
        """Ends this computer's threads (see :meth:`ComputerThreads.close`)."""
        self._threads.close()

    def _chunks(self, features, utt):
        features = xvector_features(features, self.input_dim, utt)
        return features, xvector_chunks(features.shape[0], self.chunk_size,
                                        self.min_chunk_size, self.pad_input, utt)

    def _average(self, features, chunks, entries):
        average = XvectorAverage(self.xvector_dim, self.backend)
        for (rows, weight), entry in zip(chunks, entries):
            average.add(self._compute_chunk(np.ascontiguousarray(features[rows]), entry),
                        weight)
        return average.result()


def check_chunk_size(chunk_size):
    """UsageError unless ``chunk_size`` is -1 (the whole utterance) or > 0."""
    if chunk_size == 0 or chunk_size < -1:
        raise UsageError("--chunk-size must be -1 (whole utterance) or > 0, got %d"
                         % chunk_size)


def xvector_features(features, input_dim, utt=""):
    """``features`` as a float32 array, checked as nnet3-xvector-compute
    checks an utterance's (UsageError naming ``utt`` for an empty one, or
    Kaldi's message for a feature dimension other than ``input_dim``)."""
    features = np.asarray(features, dtype=np.float32)
    if features.ndim != 2 or features.shape[0] == 0:
        raise UsageError("Zero-length utterance: %s" % utt)
    if features.shape[1] != input_dim:
        raise UsageError("Neural net expects 'input' features with dimension %d but you "
                         "provided %d" % (input_dim, features.shape[1]))
    return features


def xvector_chunks(num_rows, chunk_size, min_chunk_size, pad_input, utt=""):
    """The chunks nnet3-xvector-compute computes for an utterance of
    ``num_rows`` frames, in order: a list of (rows, weight), ``rows`` the
    feature rows of the chunk (a chunk shorter than ``min_chunk_size`` is
    padded, with ``pad_input``, by repeating its first and last frames, left
    half rounded down; without it, skipped) and ``weight`` its number of real
    frames. Raises :class:`XvectorSkipped` for an utterance shorter than
    ``min_chunk_size`` without ``pad_input``."""
    if not pad_input and num_rows < min_chunk_size:
        raise XvectorSkipped("Minimum chunk size of %d is greater than the number of "
                             "rows in utterance: %s" % (min_chunk_size, utt))
    if chunk_size == -1:
        chunk = num_rows
    elif num_rows < chunk_size:
        logger.info("Chunk size of %d is greater than the number of rows in "
                    "utterance: %s, using chunk size  of %d", chunk_size, utt, num_rows)
        chunk = num_rows
    else:
        chunk = chunk_size
    # Kaldi: ceil(num_rows / float(chunk)) in float32.
    num_chunks = int(math.ceil(np.float32(num_rows) / np.float32(chunk)))
    chunks = []
    for i in range(num_chunks):
        offset = min(chunk, num_rows - i * chunk)
        if not pad_input and offset < min_chunk_size:
            continue
        rows = np.arange(i * chunk, i * chunk + offset)
        if pad_input and offset < min_chunk_size:
            left = (min_chunk_size - offset) // 2
            right = min_chunk_size - offset - left
            rows = np.concatenate([np.full(left, rows[0]), rows, np.full(right, rows[-1])])
        chunks.append((rows, offset))
    return chunks


class XvectorAverage:
    """The average of chunk x-vectors weighted by their real frames, summed
    in float32 in Kaldi's order (with a Kaldi-exact backend, each addition a
    saxpy, as Kaldi's AddVec)."""

    __slots__ = ("total", "tot_weight", "backend")

    def __init__(self, dim, backend=None):
        self.total = np.zeros(dim, dtype=np.float32)
        self.tot_weight = np.float32(0.0)
        self.backend = backend

    def add(self, xvector, weight):
        self.tot_weight = np.float32(self.tot_weight + np.float32(weight))
        xvector = np.asarray(xvector, np.float32)
        if isinstance(self.backend, KaldiExactBackend):
            self.backend.kaldi.axpy_rows(self.total[None, :], weight, xvector[None, :])
        else:
            self.total += np.float32(weight) * xvector

    def result(self):
        self.total *= np.float32(1.0 / float(self.tot_weight))
        return self.total
