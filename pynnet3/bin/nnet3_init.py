"""nnet3-init: build a raw nnet3 network from a config file, or add to one.

``nnet3-init [options] [<existing-model-in>] <config-in> <raw-nnet-out>``:
reads the optional existing network, applies the config lines (Kaldi's
Nnet::ReadConfig semantics, see :mod:`pynnet3.nnet.nnet_config`) and writes
the result. On any error nothing is written and the exit status is 255.
"""

import logging
import sys

import numpy as np

from ..components import kaldi_random
from ..nnet.nnet import Nnet
from ..nnet.nnet_config import read_config_file
from ._cli import ToolParser, kaldi_tool

log = logging.getLogger(__name__)

USAGE = """Initialize nnet3 neural network from a config file; outputs 'raw' nnet
without associated information such as transition model and priors.
Search for examples in scripts in /egs/wsj/s5/steps/nnet3/
Can also be used to add layers to existing model (provide existing model
as 1st arg)

Usage:  nnet3-init [options] [<existing-model-in>] <config-in> <raw-nnet-out>
e.g.:
 nnet3-init nnet.config 0.raw
or: nnet3-init 1.raw nnet.config 2.raw
See also: nnet3-copy, nnet3-info
"""


def seed_random(seed):
    """Seeds every random source components draw from (Kaldi's srand())."""
    np.random.seed(seed & 0xFFFFFFFF)
    kaldi_random.seed(seed)


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_bool("binary", True, "Write output in binary mode")
    parser.register_int("srand", 0, "Seed for random number generator")
    opts, args = parser.parse(argv, num_args=(2, 3))
    seed_random(opts.srand)
    if len(args) == 3:
        nnet_in, config_in, nnet_out = args
    else:
        nnet_in, (config_in, nnet_out) = None, args
    nnet = Nnet()
    if nnet_in is not None:
        nnet = Nnet.read(nnet_in)
        log.info("Read raw neural net from %s", nnet_in)
    nnet.read_config(read_config_file(config_in), config_in)
    nnet.write(nnet_out, opts.binary)
    log.info("Initialized raw neural net and wrote it to %s", nnet_out)


if __name__ == "__main__":
    sys.exit(main())
