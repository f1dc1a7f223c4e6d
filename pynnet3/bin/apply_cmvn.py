"""apply-cmvn: cepstral mean (and variance) normalization of features, as
Kaldi's apply-cmvn: statistics per utterance, per speaker (--utt2spk) or
global (a single stats file); --norm-vars, --norm-means, --reverse,
--skip-dims.

With --norm-means=false the features are copied unchanged, as Kaldi's
GeneralMatrix (compressed matrices stay compressed, byte for byte).
"""

import logging
import sys

from ..errors import UsageError
from ..feat.cmvn import apply_cmvn, apply_cmvn_reverse, fake_stats_for_some_dims
from ..io.files import open_input
from ..io.table import (RandomAccessTableReaderMapped, SequentialTableReader, TableWriter,
                        classify_rspecifier)
from ._cli import ToolParser, kaldi_tool

logger = logging.getLogger("pynnet3")

USAGE = """Apply cepstral mean and (optionally) variance normalization
Per-utterance by default, or per-speaker if utt2spk option provided
Usage: apply-cmvn [options] (<cmvn-stats-rspecifier>|<cmvn-stats-rxfilename>) <feats-rspecifier> <feats-wspecifier>
e.g.: apply-cmvn --utt2spk=ark:data/train/utt2spk scp:data/train/cmvn.scp scp:data/train/feats.scp ark:-
See also: modify-cmvn-stats, matrix-sum, compute-cmvn-stats
"""


def _skip_dims(text):
    """Kaldi's SplitStringToIntegers(text, ":", omit_empty=false)."""
    if not text:
        return []
    try:
        return [int(w) for w in text.split(":")]
    except ValueError:
        raise UsageError("Bad --skip-dims option (should be colon-separated list of "
                         "integers)") from None


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_str("utt2spk", "", "rspecifier for utterance to speaker map")
    parser.register_bool("norm-vars", False, "If true, normalize variances.")
    parser.register_bool("norm-means", True, "You can set this to false to turn off mean "
                         "normalization.  Note, the same can be achieved by using 'fake' CMVN "
                         "stats; see the --fake option to compute_cmvn_stats.sh")
    parser.register_str("skip-dims", "", "Dimensions for which to skip normalization: "
                        "colon-separated list of integers, e.g. 13:14:15)")
    parser.register_bool("reverse", False, "If true, apply CMVN in a reverse sense, so as to "
                         "transform zero-mean, unit-variance input into data with the given "
                         "mean and variance.")
    opts, (stats_in, feat_rspecifier, feat_wspecifier) = parser.parse(argv, num_args=3)
    if opts.norm_vars and not opts.norm_means:
        raise UsageError("You cannot normalize the variance but not the mean.")

    if not opts.norm_means:
        num_done = 0
        with TableWriter(feat_wspecifier, "general_matrix") as writer:
            for utt, feats in SequentialTableReader(feat_rspecifier, "general_matrix"):
                writer.write(utt, feats)
                num_done += 1
        logger.info("Copied %d utterances.", num_done)
        return 0 if num_done else 1

    skip_dims = _skip_dims(opts.skip_dims)
    normalize = apply_cmvn_reverse if opts.reverse else apply_cmvn
    num_done = num_err = 0
    table_stats = classify_rspecifier(stats_in)[0] is not None
    if table_stats:
        stats_reader = RandomAccessTableReaderMapped(stats_in, opts.utt2spk, "double_matrix")
        global_stats = None
    else:
        if opts.utt2spk:
            raise UsageError("--utt2spk option not compatible with rxfilename as input (did "
                             "you forget ark:?)")
        stream = open_input(stats_in)
        global_stats = stream.read_matrix(dtype="float64")
        if skip_dims:
            fake_stats_for_some_dims(skip_dims, global_stats)
    with TableWriter(feat_wspecifier, "matrix") as writer:
        for utt, feats in SequentialTableReader(feat_rspecifier, "matrix"):
            if table_stats:
                if not stats_reader.has_key(utt):
                    logger.warning("No normalization statistics available for key %s, "
                                   "producing no output for this utterance", utt)
                    num_err += 1
                    continue
                stats = stats_reader.value(utt).astype("float64")  # a copy
                if skip_dims:
                    fake_stats_for_some_dims(skip_dims, stats)
            else:
                stats = global_stats
            writer.write(utt, normalize(stats, opts.norm_vars, feats))
            num_done += 1
    if opts.norm_vars:
        logger.info("Applied cepstral mean and variance normalization to %d utterances, "
                    "errors on %d", num_done, num_err)
    else:
        logger.info("Applied cepstral mean normalization to %d utterances, errors on %d",
                    num_done, num_err)
    return 0 if num_done else 1


if __name__ == "__main__":
    sys.exit(main())
