"""``python -m pynnet3.examples [OUTPUT]``: run pynnet3 on the shipped Kaldi
example and compare with Kaldi's nnet3-compute (see :mod:`pynnet3.examples`)."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
