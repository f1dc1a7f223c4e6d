"""lattice-copy: copy lattices (e.g. to text form), as Kaldi's lattice-copy.
Compact lattices by default; ``--write-compact=false`` copies raw
(state-level) lattices. ``--include``/``--exclude`` select utterances."""

import logging
import sys

from ..decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from ..errors import UsageError
from ..io.table import SequentialTableReader, TableWriter
from ._cli import ToolParser, kaldi_tool

logger = logging.getLogger("pynnet3")

USAGE = """Copy lattices (e.g. useful for changing to text mode or changing
format to standard from compact lattice.)
The --include and --exclude options can be used to copy only a subset of lattices, where are the --include option specifies the whitelisted utterances that would be copied and --exclude option specifies the blacklisted utterances that would not be copied.
Only one of --include and --exclude can be supplied.
Usage: lattice-copy [options] lattice-rspecifier lattice-wspecifier
 e.g.: lattice-copy --write-compact=false ark:1.lats ark,t:text.lats
See also: lattice-scale, lattice-to-fst, and
   the script egs/wsj/s5/utils/convert_slf.pl
"""


def _read_keys(filename):
    try:
        with open(filename, encoding="utf-8", errors="surrogateescape") as f:
            return {line.split()[0] for line in f if line.split()}
    except OSError as e:
        raise UsageError("cannot open %s: %s" % (filename, e.strerror)) from None


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_bool("write-compact", True, "If true, write in normal (compact) form.")
    parser.register_str("include", "", "Text file, the first field of each line being "
                        "interpreted as the utterance-id whose lattices will be included")
    parser.register_str("exclude", "", "Text file, the first field of each line being "
                        "interpreted as an utterance-id whose lattices will be excluded")
    parser.register_bool("ignore-missing", False,
                         "Exit with status 0 even if no lattices are copied")
    opts, (rspecifier, wspecifier) = parser.parse(argv, num_args=2)
    if opts.include and opts.exclude:
        raise UsageError("should not have both --exclude and --include option!")
    include = _read_keys(opts.include) if opts.include else None
    exclude = _read_keys(opts.exclude) if opts.exclude else None
    kind = "compact_lattice" if opts.write_compact else "lattice"
    n_done = 0
    with TableWriter(wspecifier, kind) as writer:
        for key, lat in SequentialTableReader(rspecifier, kind):
            if include is not None and key not in include:
                continue
            if exclude is not None and key in exclude:
                continue
            writer.write(key, lat)
            n_done += 1
    logger.info("Done copying %d lattices.", n_done)
    return 0 if (n_done or opts.ignore_missing) else 1


if __name__ == "__main__":
    sys.exit(main())
