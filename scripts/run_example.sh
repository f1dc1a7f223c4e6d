#!/usr/bin/env bash
# The README's first command after installing: run pynnet3 on the examples
# shipped in the package (a TDNN acoustic model, a decoding graph, an x-vector
# extractor, features and i-vectors) and compare each result with Kaldi's
# output for the same files: nnet3-compute, streaming, x-vectors, decoding.
# Exit status non-zero if anything differs.
set -euo pipefail
python -m pynnet3.examples
