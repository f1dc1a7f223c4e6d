"""compute-cmvn-stats: cepstral mean and variance normalization statistics,
as Kaldi's compute-cmvn-stats: per utterance, per speaker (--spk2utt) or
global (to a wxfilename, as a float matrix); --weights per frame."""

import logging
import sys

import numpy as np

from ..errors import UsageError
from ..feat.cmvn import acc_cmvn_stats, init_cmvn_stats
from ..io.files import write_object
from ..io.table import (RandomAccessTableReader, SequentialTableReader, TableWriter,
                        classify_wspecifier)
from ._cli import ToolParser, kaldi_tool

logger = logging.getLogger("pynnet3")

USAGE = """Compute cepstral mean and variance normalization statistics
If wspecifier provided: per-utterance by default, or per-speaker if
spk2utt option provided; if wxfilename: global
Usage: compute-cmvn-stats  [options] <feats-rspecifier> (<stats-wspecifier>|<stats-wxfilename>)
e.g.: compute-cmvn-stats --spk2utt=ark:data/train/spk2utt scp:data/train/feats.scp ark,scp:/foo/bar/cmvn.ark,data/train/cmvn.scp
See also: apply-cmvn, modify-cmvn-stats
"""


def _accumulate(utt, feats, weights_reader, stats):
    """Kaldi's AccCmvnStatsWrapper into ``stats`` (new ones, of the features'
    dimension, when None): (stats, ok), ok false (with a WARNING) when the
    frame weights are missing or of the wrong length."""
    if stats is None:
        stats = init_cmvn_stats(feats.shape[1])
    weights = None
    if weights_reader is not None:
        if not weights_reader.has_key(utt):
            logger.warning("No weights available for utterance %s", utt)
            return stats, False
        weights = weights_reader.value(utt)
        if weights.shape[0] != feats.shape[0]:
            logger.warning("Weights for utterance %s have wrong dimension %d vs. %d", utt,
                           weights.shape[0], feats.shape[0])
            return stats, False
    acc_cmvn_stats(feats, stats, weights)
    return stats, True


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_str("spk2utt", "", "rspecifier for speaker to utterance-list map")
    parser.register_bool("binary", True, "write in binary mode (applies only to global "
                         "CMN/CVN)")
    parser.register_str("weights", "", "rspecifier for a vector of floats for each "
                        "utterance, that's a per-frame weight.")
    opts, (rspecifier, out_spec) = parser.parse(argv, num_args=2)
    weights_reader = RandomAccessTableReader(opts.weights, "vector") if opts.weights else None
    num_done = num_err = 0
    if classify_wspecifier(out_spec)[0] is not None:
        with TableWriter(out_spec, "double_matrix") as writer:
            if opts.spk2utt:
                feat_reader = RandomAccessTableReader(rspecifier, "matrix")
                for spk, utts in SequentialTableReader(opts.spk2utt, "token_vector"):
                    stats = None
                    for utt in utts:
                        if not feat_reader.has_key(utt):
                            logger.warning("Did not find features for utterance %s", utt)
                            num_err += 1
                            continue
                        stats, ok = _accumulate(utt, feat_reader.value(utt), weights_reader,
                                                stats)
                        num_done, num_err = num_done + ok, num_err + (not ok)
                    if stats is None:
                        logger.warning("No stats accumulated for speaker %s", spk)
                    else:
                        writer.write(spk, stats)
            else:
                for utt, feats in SequentialTableReader(rspecifier, "matrix"):
                    stats, ok = _accumulate(utt, feats, weights_reader, None)
                    if not ok:
                        num_err += 1
                        continue
                    writer.write(utt, stats)
                    num_done += 1
    else:
        if opts.spk2utt:
            raise UsageError("--spk2utt option not compatible with wxfilename as output (did "
                             "you forget ark:?)")
        stats = None
        for utt, feats in SequentialTableReader(rspecifier, "matrix"):
            stats, ok = _accumulate(utt, feats, weights_reader, stats)
            num_done, num_err = num_done + ok, num_err + (not ok)
        if stats is None:
            stats = np.zeros((0, 0))
        write_object(out_spec, opts.binary,
                     lambda stream: stream.write_matrix(stats.astype(np.float32)))
        logger.info("Wrote global CMVN stats to %s", "standard output"
                    if out_spec in ("", "-") else out_spec)
    logger.info("Done accumulating CMVN stats for %d utterances; %d had errors.", num_done,
                num_err)
    return 0 if num_done else 1


if __name__ == "__main__":
    sys.exit(main())
