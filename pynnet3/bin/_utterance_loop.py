"""The loop over the feature table that the tools computing a network per
utterance share, whatever runs the network (pynnet3's computer or
onnxruntime): nnet3-compute and nnet3-compute-onnx write one matrix per
utterance (:func:`write_outputs`), nnet3-xvector-compute and
nnet3-xvector-compute-onnx one x-vector (:func:`write_xvectors`). Both count
into the tool's :class:`~._run_summary.RunSummary` and show a
:class:`~._progress.ProgressBar`.
"""

import collections

from ..compute.xvector import XvectorSkipped
from ..io.matrix_rows import MatrixRows
from ..io.table import SequentialTableReader, TableWriter
from ._option_groups import utterance_ivectors
from ._progress import ProgressBar


def write_outputs(feature_rspecifier, matrix_wspecifier, compute, flush, ivector_readers,
                  period, exp, summary):
    """nnet3-compute's loop: for every utterance of the feature table, Kaldi's
    per-utterance checks (:func:`~._option_groups.utterance_ivectors`: a
    skipped utterance counts as failed), then ``compute(utt, features,
    ivector, online_ivectors, period)``, which yields the utterances it
    finished as ``(utt, output, num_frames)`` (none, one, or several of a
    batch); ``flush()`` yields the rest after the last utterance. Each
    output, passed through ``exp`` where it is not None, is written in the
    order yielded. ``ivector_readers`` is ``(ivector_reader,
    online_ivector_reader)``; both are closed at the end (None where not
    given). An output is let go before the next utterance is computed."""
    ivector_reader, online_ivector_reader = ivector_readers
    with TableWriter(matrix_wspecifier, kind="matrix") as writer, \
            SequentialTableReader(feature_rspecifier, "matrix") as feature_reader:
        progress = ProgressBar(feature_reader.num_entries, "utterances")

        def finish(utt, output, num_frames):
            if exp is not None:
                output = output.map(exp) if isinstance(output, MatrixRows) else exp(output)
            writer.write(utt, output)
            summary.frame_count += num_frames
            summary.num_success += 1

        for utt, features in feature_reader:
            progress.step()
            found = utterance_ivectors(utt, features, ivector_reader, online_ivector_reader)
            if found is None:
                summary.num_fail += 1
                continue
            ivector, online_ivectors = found
            for done in compute(utt, features, ivector, online_ivectors, period):
                finish(*done)
            done = None     # the output let go before the next utterance's is made
        for done in flush():
            finish(*done)
        progress.close()
    for reader in (online_ivector_reader, ivector_reader):
        if reader is not None:
            reader.close()


def write_xvectors(computer, feature_rspecifier, vector_wspecifier, summary, logger):
    """nnet3-xvector-compute's loop: writes ``computer.compute(features,
    utt)`` for every utterance of the feature table. A zero-length utterance,
    or one the computer skips (:class:`~pynnet3.compute.xvector.XvectorSkipped`),
    counts as failed with Kaldi's WARNING, logged through the tool's
    ``logger`` so that it names the tool's main(). A computer with threads
    of its own (``num_threads`` > 1) gets each utterance through its
    ``submit``, with as many utterances in flight as it has threads; they
    are written in input order."""
    threads = getattr(computer, "num_threads", 1)
    in_flight = collections.deque()     # (utt, future x-vector, frames)

    def write(utt, xvector, num_frames):
        writer.write(utt, xvector)
        summary.frame_count += num_frames
        summary.num_success += 1

    def write_in_flight(keep):
        while len(in_flight) > keep:
            utt, future, num_frames = in_flight.popleft()
            write(utt, future.result(), num_frames)

    with TableWriter(vector_wspecifier, kind="vector") as writer, \
            SequentialTableReader(feature_rspecifier, "matrix") as feature_reader:
        progress = ProgressBar(feature_reader.num_entries, "utterances")
        for utt, features in feature_reader:
            progress.step()
            if features.shape[0] == 0:
                logger.warning("Zero-length utterance: %s", utt, stacklevel=2)
                summary.num_fail += 1
                continue
            try:
                if threads > 1:
                    in_flight.append((utt, computer.submit(features, utt), features.shape[0]))
                else:
                    write(utt, computer.compute(features, utt), features.shape[0])
            except XvectorSkipped as e:
                logger.warning("%s", e, stacklevel=2)
                summary.num_fail += 1
            write_in_flight(threads - 1)
        write_in_flight(0)
        progress.close()
