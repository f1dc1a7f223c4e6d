"""Kaldi's closing log lines of the tools that compute a network per
utterance (nnet3-compute, nnet3-xvector-compute): time taken, real-time
factor, counts."""

import time


class RunSummary:
    """Counts for Kaldi's closing lines (:func:`log_summary`)."""

    def __init__(self):
        self.start = time.perf_counter()
        self.num_success = 0
        self.num_fail = 0
        self.frame_count = 0


def log_summary(summary, logger):
    """Kaldi's closing lines: time taken, real-time factor, counts (logged
    through the tool's own logger so they name the tool's main())."""
    elapsed = time.perf_counter() - summary.start
    rtf = elapsed * 100.0 / summary.frame_count if summary.frame_count else float("inf")
    logger.info("Time taken %gs: real-time factor assuming 100 frames/sec is %g",
                elapsed, rtf, stacklevel=2)
    logger.info("Done %d utterances, failed for %d", summary.num_success, summary.num_fail,
                stacklevel=2)
