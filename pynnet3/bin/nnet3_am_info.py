"""nnet3-am-info: print what an nnet3 acoustic model (.mdl) contains.

Prints Kaldi's AmNnetSimple::Info() (input and i-vector dims, number of
pdfs, prior statistics) followed by the network's Info(), exactly as Kaldi's
``nnet3-am-info`` does, to standard output.
"""

import sys

from ..model.am import read_mdl
from ._cli import ToolParser, kaldi_tool

USAGE = """Print information about an nnet3 acoustic model (transition model, neural
network and priors, as written by nnet3-am-init or nnet3-am-copy).

Usage:  nnet3-am-info [options] <nnet-in>
e.g.:
 nnet3-am-info final.mdl
See also: nnet3-info, nnet3-am-copy
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    _, args = parser.parse(argv, num_args=1)
    _, am_nnet = read_mdl(args[0])
    sys.stdout.write(am_nnet.info())
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
