"""``python -m pynnet3.examples [OUTPUT]``: pynnet3 on the shipped examples,
each compared with Kaldi's output (see :mod:`pynnet3.examples.run`)."""

import sys

from .run import main

if __name__ == "__main__":
    sys.exit(main())
