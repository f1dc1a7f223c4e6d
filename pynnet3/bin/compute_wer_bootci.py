"""compute-wer-bootci: a bootstrap estimate of WER and of its 95% confidence
interval (Bisani and Ney), and with a second hypothesis set the probability
that it improves on the first, as Kaldi's compute-wer-bootci: the same
resampling draws (glibc's rand() from its default seed, through Kaldi's
RandInt) and the same single-precision sums, so the same printed figures."""

import math
import sys

import numpy as np

from ..decoding.edit_distance import levenshtein_edit_distance
from ..decoding.glibc_rand import GlibcRand
from ..errors import PynnetError
from ..io.table import RandomAccessTableReader, SequentialTableReader
from ._cli import ToolParser, kaldi_tool
from ._scoring import register_mode_option, scoring_mode

USAGE = """Compute a bootstrapping of WER to extract the 95% confidence interval.
Take a reference and a transcription file, in integer or text format,
and outputs overall WER statistics to standard output along with its
confidence interval using the bootstrap method of Bisani and Ney.
If a second transcription file corresponding to the same reference is
provided, a bootstrap comparison of the two transcription is performed
to estimate the probability of improvement.

Usage: compute-wer-bootci [options] <ref-rspecifier> <hyp-rspecifier> [<hyp2-rspecifier>]
E.g.: compute-wer-bootci --mode=present ark:data/train/text ark:hyp_text
or compute-wer-bootci ark:data/train/text ark:hyp_text ark:hyp_text2
See also: compute-wer
"""


def get_edits(ref_rspecifier, hyp_rspecifiers, mode):
    """Per scored utterance, (errors, reference words) for each hypothesis
    set; with two sets, an utterance either lacks is skipped ("present"),
    fatal ("strict") or all errors for the set lacking it ("all")."""
    readers = [RandomAccessTableReader(r, "token_vector") for r in hyp_rspecifiers]
    edits = [[] for _ in readers]
    for key, ref in SequentialTableReader(ref_rspecifier, "token_vector"):
        present = [reader.has_key(key) for reader in readers]
        if not all(present):
            if mode == "strict":
                raise PynnetError(("No hypothesis for key %s and strict mode specifier."
                                   if len(readers) == 1 else
                                   "No hypothesis for key %s in both transcripts "
                                   "comparison is not possible.") % key)
            if mode == "present":
                continue
        for reader, found, out in zip(readers, present, edits):
            if found:
                errs = levenshtein_edit_distance(ref, reader.value(key))[0]
            else:
                # One set: an absent hypothesis is empty; two sets: Kaldi
                # counts every reference word as an error (the same number).
                errs = len(ref)
            out.append((errs, len(ref)))
    for reader in readers:
        reader.close()
    return edits


def _draws(rng, n):
    """One replication's n resampled positions (Kaldi's RandInt(0, n - 1))."""
    if n == 1:
        return [0]
    return [v % n for v in rng.rand_block(n)]


def get_bootstrap_wer_interval(edits, replications, rng):
    """(mean, interval) in Kaldi's float arithmetic."""
    wer_accum = np.float32(0.0)
    wer_mult_accum = np.float32(0.0)
    errs = [e for e, _ in edits]
    words = [w for _, w in edits]
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(replications):
            picks = _draws(rng, len(edits)) if edits else []
            wer_rep = np.float32(sum(errs[p] for p in picks)) / np.float32(sum(words[p] for p in picks))
            wer_accum = np.float32(wer_accum + wer_rep)
            wer_mult_accum = np.float32(wer_mult_accum + np.float32(wer_rep * wer_rep))
        mean = np.float32(wer_accum / np.float32(replications))
        variance = np.float32(np.float32(wer_mult_accum / np.float32(replications)) - np.float32(mean * mean))
        interval = np.float32(1.96 * float(np.sqrt(variance)))
    return mean, interval


def get_bootstrap_wer_two_system_comparison(edits, edits2, replications, rng):
    diffs = [a[0] - b[0] for a, b in zip(edits, edits2)]
    improv = 0
    for _ in range(replications):
        picks = _draws(rng, len(diffs)) if diffs else []
        if sum(diffs[p] for p in picks) > 0:
            improv += 1
    return np.float32(np.float32(improv) / np.float32(replications))


def _fixed(x):
    """A float as Kaldi's std::fixed with precision 2 prints it."""
    x = float(x)
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return "%.2f" % x


def _interval_line(name, mean, interval):
    m = np.float32(100 * mean)
    i = np.float32(100 * interval)
    return "%s: %%WER %s 95%% Conf Interval [ %s, %s ]\n" % (
        name, _fixed(m), _fixed(np.float32(m - i)), _fixed(np.float32(m + i)))


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    register_mode_option(parser)
    parser.register_int("replications", 10000,
                        "Number of replications to compute the intervals")
    opts, args = parser.parse(argv, num_args=(2, 3))
    edits = get_edits(args[0], args[1:], scoring_mode(opts))
    rng = GlibcRand()       # Kaldi's tool never seeds: glibc's default seed
    mean, interval = get_bootstrap_wer_interval(edits[0], opts.replications, rng)
    out = [_interval_line("Set1", mean, interval)]
    if len(edits) == 2:
        mean2, interval2 = get_bootstrap_wer_interval(edits[1], opts.replications, rng)
        p_improv = get_bootstrap_wer_two_system_comparison(edits[0], edits[1],
                                                           opts.replications, rng)
        out.append(_interval_line("Set2", mean2, interval2))
        out.append("Probability of Set2 improving Set1: %s\n" % _fixed(np.float32(100 * p_improv)))
    sys.stdout.write("".join(out))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
