"""docs/onnx.md's code blocks run as written, on the example shipped with
pynnet3 (the shell blocks with scripts/bin first on PATH, as
scripts/path.sh sets it), and the shell example writes what Kaldi wrote."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from pynnet3.io.table import read_table  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "onnx.md"
BLOCKS = re.findall(r"```(sh|python)\n(.*?)```", DOC.read_text(), re.S)


def _env():
    """scripts/bin first on PATH (the tools), then this interpreter's folder
    (``python3`` in the blocks)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(REPO / "scripts" / "bin"),
                                   str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYNNET3_PYTHON"] = sys.executable
    return env


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_block_runs(index):
    kind, code = BLOCKS[index]
    argv = ["bash", "-e", "-c", code] if kind == "sh" else [sys.executable, "-c", code]
    result = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    if kind == "sh" and "tdnn_lda.out.ark" in code:
        import pynnet3.examples
        folder = Path(pynnet3.examples.__file__).parent
        kaldi = dict(read_table("ark:%s" % (folder / "compute.apply_exp.ark"), "matrix"))
        ours = dict(read_table("ark:/tmp/tdnn_lda.out.ark", "matrix"))
        assert list(ours) == list(kaldi)
        for utt, value in kaldi.items():
            assert np.abs(ours[utt] - value).max() <= 1e-4 * max(1.0, np.abs(value).max())
