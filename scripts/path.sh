# Source this from a Kaldi recipe (e.g. at the end of its path.sh) to run
# pynnet3's tools in place of Kaldi's: nnet3-compute, nnet3-xvector-compute,
# nnet3-copy, nnet3-am-copy, nnet3-info, nnet3-am-info, nnet3-init,
# nnet3-latgen-faster, lattice-copy, lattice-scale, lattice-add-penalty,
# lattice-best-path, lattice-1best, compute-wer, align-text, compute-wer-bootci.
#
#   . /path/to/pynnet3/scripts/path.sh
#
# From a source checkout this puts scripts/bin (small shims that run
# "python -m pynnet3.bin.<tool>" on this checkout) first on PATH; where
# scripts/bin is absent (an installed copy of this file), it puts the folder
# of the installed console scripts first instead. The interpreter is
# $PYNNET3_PYTHON if set, else the python3 found now.
if [ -n "${BASH_SOURCE:-}" ]; then
  _pynnet3_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
else
  _pynnet3_here=$(cd "$(dirname "$0")" && pwd -P)
fi
: "${PYNNET3_PYTHON:=$(command -v python3 || command -v python)}"
export PYNNET3_PYTHON
if [ -x "$_pynnet3_here/bin/pynnet3-tool" ]; then
  _pynnet3_bin="$_pynnet3_here/bin"
else
  _pynnet3_bin=$("$PYNNET3_PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
fi
export PATH="$_pynnet3_bin:$PATH"
unset _pynnet3_here _pynnet3_bin
