"""nnet3-info: print Kaldi's Nnet::Info() of a raw network (or of the network
inside a .mdl) to standard output."""

import sys

from ..model.info import nnet_info
from ..nnet.nnet import Nnet
from ._cli import ToolParser, kaldi_tool

USAGE = """Print some text information about 'raw' nnet3 neural network, to
standard output

Usage:  nnet3-info [options] <raw-nnet>
e.g.:
 nnet3-info 0.raw
See also: nnet3-am-info
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    _, args = parser.parse(argv, num_args=1)
    nnet = Nnet.read(args[0])
    sys.stdout.write(nnet_info(nnet))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
