"""Recipes without an active virtual environment: scripts/path.sh and the
scripts/bin shims.

- From a clean shell (``env -i PATH=/usr/bin:/bin``), sourcing path.sh and
  running ``nnet3-info`` on a shipped model prints Kaldi's text: the tools run
  with the interpreter that installed pynnet3 (scripts/.python, written by
  setup.py), not whatever python3 comes first on PATH.
- ``PYNNET3_PYTHON`` overrides it; with no usable interpreter the shim says so
  in one ERROR line and exits 255.
- The tool list in path.sh's comment is exactly scripts/bin, which is exactly
  pyproject.toml's console scripts, each shim a link to pynnet3-tool.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

import pynnet3.examples as examples

SCRIPTS = REPO / "scripts"
CLEAN_PATH = "/usr/bin:/bin"


def _clean_shell(command, **env):
    return subprocess.run(["/bin/bash", "-c", command], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={"PATH": CLEAN_PATH, **env})


def _kaldi_info():
    with open(examples.path("tdnn_lda.info.txt"), encoding="utf-8") as f:
        return f.read()


def test_path_sh_runs_the_tools_from_a_clean_shell():
    record = SCRIPTS / ".python"
    if not record.is_file():
        pytest.skip("pynnet3 was not installed from this checkout (pip install -e . or "
                    "setup.py build_ext write scripts/.python)")
    proc = _clean_shell('. scripts/path.sh && nnet3-info "%s" && echo "$PYNNET3_PYTHON" >&2'
                        % examples.path("tdnn_lda.raw"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == _kaldi_info()
    assert proc.stderr.splitlines()[-1] == record.read_text().strip()


def test_pynnet3_python_overrides_the_interpreter():
    proc = _clean_shell('. scripts/path.sh && pynnet3-tool --which-python && '
                        'nnet3-info "%s"' % examples.path("tdnn_lda.raw"),
                        PYNNET3_PYTHON=sys.executable)
    assert proc.returncode == 0, proc.stderr
    first, rest = proc.stdout.split("\n", 1)
    assert first == sys.executable
    assert rest == _kaldi_info()


def test_shim_without_an_interpreter_says_so(tmp_path):
    # A copy of the shims with no record, no pynnet3 beside them and nothing on PATH.
    shutil.copytree(SCRIPTS / "bin", tmp_path / "scripts" / "bin", symlinks=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.run([str(tmp_path / "scripts" / "bin" / "nnet3-info"), "x.raw"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": str(empty)})
    assert proc.returncode == 255
    assert proc.stdout == ""
    assert proc.stderr.startswith("ERROR (nnet3-info): found no Python that can run pynnet3")
    assert "PYNNET3_PYTHON" in proc.stderr and len(proc.stderr.splitlines()) == 1


def _console_scripts():
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return sorted(re.findall(r'^([\w-]+) = "pynnet3\.bin\.(\w+):main"', section, re.M))


def test_path_sh_lists_exactly_the_tools_in_scripts_bin():
    comment = []
    for line in (SCRIPTS / "path.sh").read_text().splitlines():
        if not line.startswith("#"):
            break
        comment.append(line)
    text = "\n".join(comment)
    listed = text.split("# Tools (scripts/bin", 1)[1].split("\n#\n", 1)[0]
    listed = sorted(listed.split("\n", 1)[1].replace("#", " ").split())
    shims = sorted(p.name for p in (SCRIPTS / "bin").iterdir()
                   if not p.name.startswith(".") and p.name != "pynnet3-tool")
    assert listed == shims
    scripts = _console_scripts()
    assert [name for name, _ in scripts] == shims
    for name, module in scripts:
        assert module == name.replace("-", "_")
        assert (REPO / "pynnet3" / "bin" / (module + ".py")).is_file()
        assert os.readlink(SCRIPTS / "bin" / name) == "pynnet3-tool"
