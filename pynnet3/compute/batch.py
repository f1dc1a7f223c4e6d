"""Batched chunk computation: chunks of the same shape from several
utterances stacked into one computation (sequences n = 0 .. B-1), beyond what
Kaldi's CPU tools do (Kaldi's nnet3-compute-batch does this on a GPU).

Each utterance is cut into chunks exactly as
:class:`~pynnet3.compute.utterance.SimpleNnetComputer` cuts it (same chunk
plans, same edge padding, same i-vector per chunk); chunks with the same
shape (input range, output count, i-vector or not) from the utterances of a
batch are computed together
(:meth:`~pynnet3.compute.utterance.SimpleNnetComputer.compute_utterances`,
as many per computation as the computer's ``max_chunks`` allows). Guarantee: the
output of every utterance equals the unbatched output within float32
rounding (BLAS sums larger products in another order; every sequence n sees
only its own rows, as the compiler keeps sequences apart).
"""

import numpy as np

from ..errors import UsageError

__all__ = ["BatchedSimpleComputer", "UtteranceQueue"]


class UtteranceQueue:
    """Utterances queued (:meth:`add`) and computed ``batch_size`` at a time
    by a subclass's ``_compute(pending)``; finished utterances come back, in
    the order they were added, as ``(key, output, num_frames)`` from
    :meth:`add` and :meth:`flush`. Every utterance is checked when it is
    queued, as Kaldi checks it before computing: the subclass's
    ``check_utterance(features, ivector, online_ivectors)``, then that online
    i-vectors come with a period. (pynnet3's batched computer and the ONNX
    runtime's computers share this.)"""

    __slots__ = ("batch_size", "_pending")

    def __init__(self, batch_size):
        self.batch_size = batch_size
        self._pending = []

    def add(self, key, features, ivector=None, online_ivectors=None, online_ivector_period=0):
        """Queues one utterance (checked now, as Kaldi checks it); returns
        the utterances finished by this call (a list, often empty)."""
        features = np.asarray(features, dtype=np.float32)
        self.check_utterance(features, ivector, online_ivectors)
        if online_ivectors is not None and online_ivector_period <= 0:
            raise UsageError("You need to set the --online-ivector-period option!")
        self._pending.append((key, features, ivector, online_ivectors, online_ivector_period))
        if len(self._pending) >= self.batch_size:
            return self.flush()
        return []

    def compute_utterance(self, features, ivector=None, online_ivectors=None,
                          online_ivector_period=0):
        """One utterance's output, computed now (called with nothing queued)."""
        done = self.add(None, features, ivector, online_ivectors, online_ivector_period)
        done += self.flush()
        return done[0][1]

    def flush(self):
        """Computes every queued utterance; returns them finished, in order."""
        pending, self._pending = self._pending, []
        if not pending:
            return []
        return self._compute(pending)


class BatchedSimpleComputer(UtteranceQueue):
    """Collects utterances (:meth:`add`) and computes them ``batch_size`` at
    a time with a :class:`~pynnet3.compute.utterance.SimpleNnetComputer`
    (see :class:`UtteranceQueue`)."""

    __slots__ = ("computer",)

    def __init__(self, computer, batch_size):
        if batch_size < 1:
            raise UsageError("batch size must be >= 1, got %d" % batch_size)
        super().__init__(batch_size)
        self.computer = computer

    def check_utterance(self, features, ivector, online_ivectors):
        """The computer's dimension checks, then a non-empty utterance."""
        self.computer.check_dims(features, ivector, online_ivectors)
        if features.shape[0] == 0:
            raise UsageError("Zero-length utterance")

    def _compute(self, pending):
        outputs = self.computer.compute_utterances([p[1:] for p in pending])
        return [(key, output, feats.shape[0])
                for (key, feats, _, _, _), output in zip(pending, outputs)]
