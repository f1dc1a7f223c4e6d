"""compute-wer: word and sentence error rates of hypothesis transcriptions
against reference ones, as Kaldi's compute-wer (text tables of tokens, words
or integers alike; three ways of treating utterances the hypotheses lack)."""

import sys

import numpy as np

from ..decoding.edit_distance import levenshtein_edit_distance
from ..errors import PynnetError
from ..io.table import RandomAccessTableReader, SequentialTableReader
from ._cli import ToolParser, kaldi_tool
from ._scoring import register_mode_option, scoring_mode

USAGE = """Compute WER by comparing different transcriptions
Takes two transcription files, in integer or text format,
and outputs overall WER statistics to standard output.

Usage: compute-wer [options] <ref-rspecifier> <hyp-rspecifier>
E.g.: compute-wer --text --mode=present ark:data/train/text ark:hyp_text
See also: align-text,
Example scoring script: egs/wsj/s5/steps/score_kaldi.sh
"""


def format_percent(count, total):
    """100 * count / total as Kaldi prints it: computed in double, stored as
    a float, printed with two decimals; 0/0 is x86's default NaN, which
    carries the sign bit, hence "-nan"."""
    if total == 0:
        return "-nan" if count == 0 else "inf"
    return "%.2f" % float(np.float32(100.0 * count / total))


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    register_mode_option(parser)
    parser.register_bool("text", False, "Deprecated option! Keeping for compatibility reasons.")
    opts, (ref_rspecifier, hyp_rspecifier) = parser.parse(argv, num_args=2)
    mode = scoring_mode(opts)
    num_words = word_errs = num_sent = sent_errs = 0
    num_ins = num_del = num_sub = num_absent = 0
    hyp_reader = RandomAccessTableReader(hyp_rspecifier, "token_vector")
    for key, ref in SequentialTableReader(ref_rspecifier, "token_vector"):
        if hyp_reader.has_key(key):
            hyp = hyp_reader.value(key)
        else:
            if mode == "strict":
                raise PynnetError("No hypothesis for key %s and strict mode specifier." % key)
            num_absent += 1
            if mode == "present":
                continue
            hyp = []
        errs, ins, dels, sub = levenshtein_edit_distance(ref, hyp)
        num_words += len(ref)
        word_errs += errs
        num_ins += ins
        num_del += dels
        num_sub += sub
        num_sent += 1
        sent_errs += ref != hyp
    hyp_reader.close()
    out = sys.stdout
    out.write("%%WER %s [ %d / %d, %d ins, %d del, %d sub ]%s\n"
              % (format_percent(word_errs, num_words), word_errs, num_words, num_ins,
                 num_del, num_sub, " [PARTIAL]" if num_absent else ""))
    out.write("%%SER %s [ %d / %d ]\n" % (format_percent(sent_errs, num_sent), sent_errs,
                                          num_sent))
    out.write("Scored %d sentences, %d not present in hyp.\n" % (num_sent, num_absent))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
