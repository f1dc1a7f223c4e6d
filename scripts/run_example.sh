#!/usr/bin/env bash
# The README's first command after installing: run pynnet3 on the example shipped
# in the package (Kaldi's tdnn_lda model and features) and compare with Kaldi's
# nnet3-compute output. Exit status non-zero if any utterance differs.
set -euo pipefail
python -m pynnet3.examples
