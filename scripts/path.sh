# Source this from a Kaldi recipe (e.g. at the end of its path.sh) to run
# pynnet3's tools in place of Kaldi's:
#
#   . /path/to/pynnet3/scripts/path.sh
#
# Tools (scripts/bin; tests/test_recipe_path.py checks this list):
#   ali-to-phones align-text apply-cmvn compute-cmvn-stats compute-wer
#   compute-wer-bootci lattice-1best lattice-add-penalty lattice-best-path
#   lattice-copy lattice-depth-per-frame lattice-mbr-decode lattice-prune
#   lattice-scale nnet3-am-copy nnet3-am-info nnet3-compute
#   nnet3-compute-onnx nnet3-copy nnet3-info nnet3-init nnet3-latgen-faster
#   nnet3-latgen-faster-parallel nnet3-to-dot nnet3-to-onnx
#   nnet3-xvector-compute nnet3-xvector-compute-onnx
#
# From a source checkout this puts scripts/bin (small shims that run
# "python -m pynnet3.bin.<tool>" on this checkout) first on PATH. No virtual
# environment needs to be active: the tools run with the interpreter that
# installed pynnet3 from this checkout (recorded by setup.py in
# scripts/.python), or $PYNNET3_PYTHON if set, or else a python3 on PATH that
# can import pynnet3. PYNNET3_PYTHON is exported (recipes can run
# "$PYNNET3_PYTHON -c ..."). Where scripts/bin is absent (a copy of this file
# elsewhere), it puts the folder of $PYNNET3_PYTHON's console scripts first.
if [ -n "${BASH_SOURCE:-}" ]; then
  _pynnet3_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
else
  _pynnet3_here=$(cd "$(dirname "$0")" && pwd -P)
fi
if [ -x "$_pynnet3_here/bin/pynnet3-tool" ]; then
  _pynnet3_bin="$_pynnet3_here/bin"
  if [ -z "${PYNNET3_PYTHON:-}" ]; then
    PYNNET3_PYTHON=$("$_pynnet3_bin/pynnet3-tool" --which-python) || PYNNET3_PYTHON=
  fi
else
  : "${PYNNET3_PYTHON:=$(command -v python3 || command -v python)}"
  _pynnet3_bin=$("$PYNNET3_PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
fi
if [ -n "${PYNNET3_PYTHON:-}" ]; then
  export PYNNET3_PYTHON
else
  unset PYNNET3_PYTHON
fi
export PATH="$_pynnet3_bin:$PATH"
unset _pynnet3_here _pynnet3_bin
