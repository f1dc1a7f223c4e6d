"""align-text: a minimum edit-distance alignment of two transcriptions of
each utterance, written as Kaldi's align-text writes it
("key a a ; b <eps> ; c c")."""

import logging
import sys

from ..decoding.edit_distance import levenshtein_alignment
from ..errors import PynnetError
from ..io.table import RandomAccessTableReader, SequentialTableReader, TableWriter, is_token
from ._cli import ToolParser, kaldi_tool

logger = logging.getLogger("pynnet3")

USAGE = """Computes alignment between two sentences with the same key in the
two given input text-rspecifiers. The current implementation uses
Levenshtein distance as the distance metric.

The input text file looks like follows:
  key1 a b c
  key2 d e

The output alignment file looks like follows:
  key1 a a ; b <eps> ; c c 
  key2 d f ; e e 
where the aligned pairs are separated by ";"

Usage: align-text [options] <text1-rspecifier> <text2-rspecifier> \\
                              <alignment-wspecifier>
 e.g.: align-text ark:text1.txt ark:text2.txt ark,t:alignment.txt
See also: compute-wer,
Example scoring script: egs/wsj/s5/steps/score_kaldi.sh
"""


def _is_printable_token(token):
    """Kaldi's IsToken, which also rejects byte 255 (a non-breaking space in
    Latin-1); tables decode such a stray byte as the surrogate U+DCFF."""
    return is_token(token) and "\udcff" not in token


def _check(which, key, tokens, special_symbol):
    if not all(_is_printable_token(t) for t in tokens):
        raise PynnetError("In %s, the utterance %s contains unprintable characters. That "
                          "means there is a problem with the text (such as incorrect "
                          "encoding)." % (which, key))
    if special_symbol in tokens:
        raise PynnetError("In %s, the utterance %s contains the special symbol '%s'. This "
                          "is not allowed." % (which, key, special_symbol))


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_str("special-symbol", "<eps>",
                        "Special symbol to be aligned with the inserted or deleted words. "
                        "Your sentences should not contain this symbol.")
    parser.register_str("separator", ";",
                        "Separator for each aligned pair in the output alignment file.  "
                        "Note: it should not be necessary to change this even if your "
                        "sentences contain ';', because to parse the output of this program "
                        "you can just split on space and then assert that every third token "
                        "is ';'.")
    opts, (text1_rspecifier, text2_rspecifier, align_wspecifier) = \
        parser.parse(argv, num_args=3)
    n_done = n_fail = 0
    text2_reader = RandomAccessTableReader(text2_rspecifier, "token_vector")
    with TableWriter(align_wspecifier, "token_vector") as writer:
        for key, text1 in SequentialTableReader(text1_rspecifier, "token_vector"):
            if not text2_reader.has_key(key):
                logger.warning("Key %s is in %s, but not in %s", key, text1_rspecifier,
                               text2_rspecifier)
                n_fail += 1
                continue
            text2 = text2_reader.value(key)
            _check("text1", key, text1, opts.special_symbol)
            _check("text2", key, text2, opts.special_symbol)
            _, pairs = levenshtein_alignment(text1, text2, opts.special_symbol)
            tokens = []
            for pair in pairs:
                if tokens:
                    tokens.append(opts.separator)
                tokens.extend(pair)
            writer.write(key, tokens)
            n_done += 1
    text2_reader.close()
    logger.info("Done %d sentences, failed for %d", n_done, n_fail)
    return 0 if n_done else 1


if __name__ == "__main__":
    sys.exit(main())
