"""nnet3-latgen-faster-parallel: nnet3-latgen-faster with several decoding
jobs at once (--num-threads), as Kaldi's nnet3-latgen-faster-parallel.

As Kaldi's, it decodes whole utterances (network, search, lattice,
determinization) on ``--num-threads`` threads sharing the model and the
graph, and the main thread reads the features and writes the lattices,
words, alignments and log lines in input order
(:class:`pynnet3.bin._task_sequencer.TaskSequencer`, Kaldi's TaskSequencer
design). The search, lattice and determinization kernels and NumPy's BLAS
release the GIL, so the threads run at once; what still holds it (the
network interpreter's Python loop, the Python side of each utterance) is
what keeps the speed-up under the thread count. As Kaldi's, it decodes
every utterance as a new decoder does (:meth:`LatgenSetup.decode_alone`:
each thread renews its one decoder between utterances), so
its output does not depend on the thread count or on which thread took
which utterance: each utterance's lattice, words and alignment are those
nnet3-latgen-faster gives for that utterance on its own. nnet3-latgen-faster
keeps one decoder for all utterances, whose hash table stays at the largest
size it needed, and that size decides the order in which tokens of equal
cost meet: so the two tools can give other words for an utterance, in Kaldi
as here (the chain decode of scripts/bench_decode.py on an Intel Xeon: 7
utterances of 20 here, 6 between Kaldi's two tools; on that model the
words also change with the BLAS kernels that compute the network).
With ``--num-threads=0`` or 1 the decoding runs in the main thread.

The decoding threads share one malloc heap (:mod:`pynnet3.bin._malloc_arenas`).

A job that fails (a bad utterance, a bug) stops the tool when its turn
comes: the jobs not started are dropped, the running ones finish, and the
tool exits with the error (Kaldi's ERROR line and exit status) and leaves no
output file.

As with Kaldi, every thread's BLAS calls may use BLAS threads of their own:
on a machine with few cores set ``OPENBLAS_NUM_THREADS=1`` (or the
equivalent) so that they do not compete for the cores.
"""

import logging
import queue
import sys

from ..errors import UsageError
from ._cli import ToolParser, kaldi_tool
from ._latgen import decode_in_order, register_latgen_options, run_latgen
from ._malloc_arenas import share_one_malloc_arena
from ._task_sequencer import TaskSequencer

logger = logging.getLogger("pynnet3")

USAGE = """Generate lattices using nnet3 neural net model.  This version supports
multiple decoding threads (using a shared decoding graph.)
Usage: nnet3-latgen-faster-parallel [options] <nnet-in> <fst-in|fsts-rspecifier> <features-rspecifier> <lattice-wspecifier> [ <words-wspecifier> [<alignments-wspecifier>] ]
See also: nnet3-latgen-faster-batch (which supports GPUs)
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_int("num-threads", 1, "Number of actively processing threads to run in "
                        "parallel")
    parser.register_int("num-threads-total", 0, "Total number of threads, including those "
                        "that are waiting on other threads to produce their output.  "
                        "Controls memory use.  If <= 0, defaults to --num-threads plus 20.  "
                        "Otherwise, must be >= num-threads.")
    register_latgen_options(parser)
    opts, args = parser.parse(argv, num_args=(4, 6))
    if opts.num_threads < 0 or (0 < opts.num_threads_total < opts.num_threads):
        raise UsageError("num-threads-total, if specified, must be >= num-threads (and "
                         "num-threads >= 0); got --num-threads=%d --num-threads-total=%d"
                         % (opts.num_threads, opts.num_threads_total))

    def decode_all(setup, inputs, write):
        if opts.num_threads <= 1:
            return decode_in_order(setup, inputs, write, alone=True)
        total = (opts.num_threads_total if opts.num_threads_total > 0
                 else opts.num_threads + 20)
        # before the decoding threads start (see _malloc_arenas)
        share_one_malloc_arena()
        job = _DecodeJob(setup, opts.num_threads)
        with TaskSequencer(opts.num_threads, total) as sequencer:
            for utterance in inputs:
                for done_utt, result in sequencer.submit(job, *utterance):
                    write(done_utt, result)
            for done_utt, result in sequencer.drain():
                write(done_utt, result)

    return run_latgen(opts, args, decode_all, rtf_text="100 feature frames/sec",
                      rtf_factor=max(opts.num_threads, 1),
                      compiler_summary=opts.num_threads <= 1)


class _DecodeJob:
    """One utterance, on a worker thread: (utt, DecodeResult or None). The
    ``num_threads`` thread workers (a network computer each, see
    LatgenSetup.thread_worker; a decoder renewed for every utterance) are made
    here, in the main thread, and lent to one job at a time; no more jobs
    than that run at once, so a free one is always there."""

    def __init__(self, setup, num_threads):
        self.free = queue.SimpleQueue()
        for _ in range(num_threads):
            self.free.put(setup.thread_worker())

    def __call__(self, utt, features, ivector, online):
        worker = self.free.get(timeout=_WORKER_WAIT_SECONDS)
        try:
            return utt, worker.decode_alone(utt, features, ivector, online)
        finally:
            self.free.put(worker)


# Never reached (at most num_threads jobs run at once); a bound, not a wait.
_WORKER_WAIT_SECONDS = 600


if __name__ == "__main__":
    sys.exit(main())
