"""Every fenced Python and shell block of README.md and docs/*.md runs, as
written, from a fresh temporary folder, against the installed package and
the files it ships (``pynnet3.examples``).

- A block is fenced with ```python, ```sh, ```bash or ```shell; a Python block
  runs as a script (``python block.py``), a shell block under
  ``bash -e -o pipefail``, with the installed package's console scripts and
  interpreter first on PATH (``python``, ``nnet3-compute``, ...).
- Every block names its language; blocks in other languages (text, dot, ...)
  are shown, not run.
- A block followed directly by an ```output block must print exactly that
  (standard output; trailing whitespace of lines and the text ignored).
- The only blocks that do not run are the README's two commands for a fresh
  machine (install and run the example; run the test suite): they are fenced
  ```sh not-run, there are exactly two, and they are what .ci/run runs. Any
  other ``not-run`` block fails this test.
- docs/*.md is globbed, so a new page is checked without changing this file.
- docs/api.md (from the docstrings, scripts/make_api_doc.py) and docs/tools.md
  (from the tools' --help, scripts/make_tools_doc.py) must be up to date; they
  cover exactly ``pynnet3.__all__`` and pyproject.toml's console scripts, and
  every documented name has its docstring sections.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

DOCS = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
RUN_LANGUAGES = {"python": "python", "sh": "shell", "bash": "shell", "shell": "shell"}
FENCE = re.compile(r"^(```+)([^\n`]*)\n(.*?)^\1[ \t]*$", re.M | re.S)
TIMEOUT = 600

# The README's commands for a fresh machine; .ci/run runs them itself.
README_COMMANDS = ['python -m pip install -e ".[test]" && bash scripts/run_example.sh',
                   "python -m pytest tests"]


class Block:
    __slots__ = ("doc", "line", "language", "info", "code", "output", "end")

    def __init__(self, doc, line, language, info, code, end):
        self.doc, self.line, self.language, self.info, self.code = \
            doc, line, language, info, code
        self.output = None
        self.end = end      # offset just after the closing fence

    @property
    def id(self):
        return "%s:%d" % (self.doc.relative_to(REPO), self.line)


def extract_blocks(doc):
    """The fenced blocks of a Markdown file, in order, each an ``output``
    block attached to the block just before it."""
    text = doc.read_text(encoding="utf-8")
    blocks = []
    for m in FENCE.finditer(text):
        info = m.group(2).strip()
        words = info.split()
        language = words[0].lower() if words else ""
        block = Block(doc, text.count("\n", 0, m.start()) + 1, language, words[1:],
                      m.group(3), m.end())
        if language == "output" and blocks and blocks[-1].output is None \
                and text[blocks[-1].end:m.start()].strip() == "":
            blocks[-1].output = block.code
            continue
        blocks.append(block)
    return blocks


def _all_blocks():
    return [b for doc in DOCS for b in extract_blocks(doc)]


def _runnable():
    return [b for b in _all_blocks()
            if b.language in RUN_LANGUAGES and "not-run" not in b.info]


def _environment():
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    # the installed package, not the checkout the tests run from
    env.pop("PYTHONPATH", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _normalized(text):
    """Output compared line by line without trailing whitespace (Kaldi's
    text archives end lines with a space) or trailing empty lines."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def test_docs_exist():
    names = {d.name for d in DOCS}
    assert {"README.md", "quickstart.md", "cookbook.md", "api.md", "tools.md"} <= names


def test_only_the_readme_commands_are_not_run():
    skipped = [b for b in _all_blocks() if "not-run" in b.info]
    assert [b.doc.name for b in skipped] == ["README.md", "README.md"]
    assert [b.code.strip() for b in skipped] == README_COMMANDS
    assert all(b.language == "sh" for b in skipped)
    ci = (REPO / ".ci" / "run").read_text()
    for command in README_COMMANDS:
        assert command in ci, "%r: .ci/run must run the README's command as written" % command


def test_every_block_says_what_it_is():
    """An untagged block might be code that never runs: every block names its
    language (python and shell blocks run; text, output, dot, ... do not)."""
    for block in _all_blocks():
        assert block.language, \
            "%s: a fenced block needs a language (python, sh, text, output, ...)" % block.id


@pytest.mark.parametrize("block", _runnable(), ids=lambda b: b.id)
def test_doc_block_runs(block, tmp_path):
    if block.language == "python":
        script = tmp_path / "block.py"
        command = [sys.executable, str(script)]
    else:
        script = tmp_path / "block.sh"
        command = [shutil.which("bash") or "/bin/bash", "-e", "-o", "pipefail", str(script)]
    work = tmp_path / "work"
    work.mkdir()
    script.write_text(block.code, encoding="utf-8")
    proc = subprocess.run(command, cwd=work, env=_environment(), capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, "%s failed (exit %d):\n%s\n--- stdout:\n%s\n--- stderr:\n%s" % (
        block.id, proc.returncode, block.code, proc.stdout, proc.stderr)
    if block.output is not None:
        assert _normalized(proc.stdout) == _normalized(block.output), \
            "%s printed:\n%s\nthe docs say:\n%s" % (block.id, proc.stdout, block.output)


def _script(name):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


def test_api_reference_is_up_to_date_and_complete():
    make_api_doc = _script("make_api_doc")
    assert make_api_doc.check() == []
    assert (REPO / "docs" / "api.md").read_text(encoding="utf-8") == make_api_doc.render(), \
        "docs/api.md is stale: run python scripts/make_api_doc.py"
    import pynnet3
    documented = {name for _, names in make_api_doc.GROUPS for name in names}
    assert documented == set(pynnet3.__all__)


def test_tools_reference_is_up_to_date_and_complete():
    make_tools_doc = _script("make_tools_doc")
    assert (REPO / "docs" / "tools.md").read_text(encoding="utf-8") == make_tools_doc.render(), \
        "docs/tools.md is stale: run python scripts/make_tools_doc.py"
    section = (REPO / "pyproject.toml").read_text().split("[project.scripts]", 1)[1]
    section = section.split("\n[", 1)[0]
    scripts = sorted(re.findall(r"^([\w-]+) = ", section, re.M))
    assert sorted(make_tools_doc.tools()) == scripts
