"""Word symbol tables as the decoding tools use them (Kaldi's
``--word-symbol-table``): reading words.txt, and the line of word names a
tool prints to stderr for each utterance."""

import sys

from ..errors import UsageError


def read_word_symbols(filename):
    """{word id: word} from an OpenFst text symbol table ("word id" lines)."""
    table = {}
    try:
        with open(filename, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields = line.split()
                if len(fields) == 2:
                    table[int(fields[1])] = fields[0]
                elif fields:
                    raise ValueError
    except (OSError, ValueError):
        raise UsageError("Could not read symbol table from file %s" % filename) from None
    return table


def write_word_names(key, words, word_syms):
    """Prints "KEY w1 w2 ... " to stderr, as Kaldi's decoders and
    lattice-best-path do; a word id missing from the table is an error."""
    names = []
    for w in words:
        if w not in word_syms:
            raise UsageError("Word-id %d not in symbol table." % w)
        names.append(word_syms[w])
    sys.stderr.write(key + " " + "".join(n + " " for n in names) + "\n")
    sys.stderr.flush()
