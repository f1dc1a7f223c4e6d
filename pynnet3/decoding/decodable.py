"""Kaldi's DecodableAmNnetSimple (nnet3/nnet-am-decodable-simple.h): the
acoustic scores a decoder reads, frame by frame and transition-id by
transition-id.

LogLikelihood(frame, transition-id) is the network's output for the
transition-id's pdf at that (subsampled) frame, minus the log prior of the
pdf, times the acoustic scale. Kaldi computes the output in chunks of
``frames_per_chunk / frame_subsampling_factor`` output frames as the decoder
first asks for a frame in a chunk; the decoder asks in order, so the chunks
start at 0, n, 2n, ... (the last one shorter): nnet3-compute's chunks.
:class:`DecodableAmNnetSimple` computes exactly those chunks with
:meth:`pynnet3.compute.utterance.SimpleNnetComputer.compute_utterance` (which
handles the extra contexts, i-vectors and online i-vectors), all at once,
into one float32 matrix; the scores are the same, only the time at which they
are computed differs.

Also here: the transition-id -> pdf-id table the decoder indexes with
(Kaldi's TransitionIdToPdfFast) and the check that a graph's input labels
are transition-ids of the model.
"""

import numpy as np

from ..compute.utterance import (SimpleComputationOptions, SimpleNnetComputer,
                                 prepare_nnet_for_compute)
from ..errors import UsageError
from ..nnet.nnet import keep_only_output

__all__ = ["DecodableAmNnetSimple", "DecodableMatrix", "transition_id_to_pdf_table",
           "decodable_nnet_computer"]


def transition_id_to_pdf_table(trans_model):
    """int32 array: entry t is the pdf-id of transition-id t (entry 0, which
    is not a transition-id, is -1)."""
    table = np.asarray(trans_model.id2pdf_id, dtype=np.int32).copy()
    if table.size:
        table[0] = -1
    return table


def decodable_nnet_computer(am_nnet, opts=None, **computer_options):
    """A SimpleNnetComputer set up as nnet3-latgen-faster's: the network
    prepared (test mode, collapsed), the model's priors, and ``opts`` (a
    SimpleComputationOptions; decoders' default acoustic scale is 0.1);
    ``computer_options`` go to SimpleNnetComputer (compiler, debug flags)."""
    if opts is None:
        opts = SimpleComputationOptions(acoustic_scale=0.1)
    # collapsed in the OpenBLAS order of Kaldi-exact arithmetic's threads
    prepare_nnet_for_compute(am_nnet.nnet,
                             getattr(computer_options.get("backend"), "blas_threads", None))
    # decoding computes only "output": other outputs' parameters (a chain
    # model's cross-entropy branch) need no memory
    keep_only_output(am_nnet.nnet, "output")
    return SimpleNnetComputer(am_nnet.nnet, opts, priors=am_nnet.priors, **computer_options)


class DecodableMatrix:
    """Scores given directly: ``loglikes`` (frames x pdfs, already scaled)
    and the transition-id -> pdf table (decoding with acoustic scores given,
    e.g. to time the search alone)."""

    def __init__(self, loglikes, tid_to_pdf):
        self.loglikes = np.ascontiguousarray(loglikes, dtype=np.float32)
        self.tid_to_pdf = np.ascontiguousarray(tid_to_pdf, dtype=np.int32)

    def num_frames_ready(self):
        return self.loglikes.shape[0]

    def num_indices(self):
        return self.tid_to_pdf.shape[0] - 1

    def log_likelihood(self, frame, tid):
        return self.loglikes[frame, self.tid_to_pdf[tid]]


class DecodableAmNnetSimple(DecodableMatrix):
    """The scores of one utterance (see the module docstring).
    ``computer``: from :func:`decodable_nnet_computer` (shared by all
    utterances: it caches compilations); ``tid_to_pdf``: from
    :func:`transition_id_to_pdf_table`."""

    def __init__(self, computer, tid_to_pdf, features, ivector=None, online_ivectors=None,
                 online_ivector_period=0):
        if computer.output_dim <= int(np.max(tid_to_pdf)):
            raise UsageError("the network's output dimension %d is too small for the "
                             "transition model's %d pdfs"
                             % (computer.output_dim, int(np.max(tid_to_pdf)) + 1))
        super().__init__(computer.compute_utterance(features, ivector, online_ivectors,
                                                    online_ivector_period), tid_to_pdf)
