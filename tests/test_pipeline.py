"""A Kaldi recipe-style pipeline, unchanged, with pynnet3's tools first on
PATH (scripts/path.sh): a script file with byte offsets split into 4 parts,
4 parallel jobs (as run.pl runs them), an ``ark:... |`` input pipe, a
``| gzip -c > ...`` output pipe and ``ark,t:`` output; the union of the
jobs' outputs must agree with Kaldi's archive for the same options. Also
scripts/example_pipeline.sh, and nnet3-xvector-compute in a pipe."""

import os
import shutil
import subprocess

import numpy as np

from pynnet3.io.table import TableWriter, read_table

from conftest import REPO
from test_tool_nnet3_compute import DATA, assert_matches

PIPELINE = r"""
set -euo pipefail
. "$REPO/scripts/path.sh"
test "$(command -v nnet3-compute)" = "$REPO/scripts/bin/nnet3-compute"
nj=4
mkdir -p log out
for j in $(seq $nj); do
  if [ $((j % 2)) = 1 ]; then
    nnet3-compute --online-ivectors=ark:online-ivectors.ark --online-ivector-period=10 \
      model.raw scp:split$nj/feats.$j.scp "ark:| gzip -c > out/output.$j.ark.gz" \
      2> log/compute.$j.log &
  else
    nnet3-compute --online-ivectors=ark:online-ivectors.ark --online-ivector-period=10 \
      model.raw "ark:gunzip -c split$nj/feats.$j.ark.gz |" ark,t:out/output.$j.txt \
      2> log/compute.$j.log &
  fi
done
wait
nnet3-xvector-compute xvector.raw "ark:cat xvector-feats.ark |" ark,t:- \
  2> log/xvector.log | gzip -c > out/xvector.txt.gz
"""


def _env():
    env = dict(os.environ)
    env["REPO"] = str(REPO)
    env.pop("PYTHONPATH", None)
    return env


def test_recipe_pipeline_with_our_tools_first_on_path(tmp_path):
    lda = DATA / "tdnn_lda"
    for name in ("model.raw", "online-ivectors.ark"):
        shutil.copy(lda / name, tmp_path / name)
    shutil.copy(DATA / "xvector" / "extract.raw", tmp_path / "xvector.raw")
    shutil.copy(DATA / "xvector" / "feats.ark", tmp_path / "xvector-feats.ark")
    feats = dict(read_table("ark:%s" % (lda / "feats.ark")))
    keys = list(feats)
    # feats.scp with byte offsets into feats.ark, split in 4 (utils/split_scp.pl).
    with TableWriter("ark,scp:%s,%s" % (tmp_path / "feats.ark", tmp_path / "feats.scp")) as w:
        for k in keys:
            w.write(k, feats[k])
    lines = (tmp_path / "feats.scp").read_text().splitlines()
    assert all(":" in line.split()[1] for line in lines)
    (tmp_path / "split4").mkdir()
    for j in range(4):
        (tmp_path / "split4" / ("feats.%d.scp" % (j + 1))).write_text(lines[j] + "\n")
        with TableWriter("ark:| gzip -c > %s" % (tmp_path / "split4" /
                                                 ("feats.%d.ark.gz" % (j + 1)))) as w:
            w.write(keys[j], feats[keys[j]])
    result = subprocess.run(["bash", "-c", PIPELINE], cwd=tmp_path, env=_env(),
                            capture_output=True, text=True, timeout=300)
    logs = "".join(p.read_text() for p in sorted((tmp_path / "log").glob("*.log")))
    assert result.returncode == 0, result.stderr + logs
    ours = {}
    for j in range(1, 5):
        if j % 2:
            gz = tmp_path / "out" / ("output.%d.ark.gz" % j)
            ours.update(read_table("ark:gunzip -c %s |" % gz))
        else:
            ours.update(read_table("ark:%s" % (tmp_path / "out" / ("output.%d.txt" % j))))
        assert "Done 1 utterances, failed for 0" in (
            tmp_path / "log" / ("compute.%d.log" % j)).read_text()
    kaldi = dict(read_table("ark:%s" % (lda / "compute.default.ark")))
    assert_matches({k: ours[k] for k in kaldi}, kaldi, "pipeline")
    xv = dict(read_table("ark:gunzip -c %s |" % (tmp_path / "out" / "xvector.txt.gz"),
                         "vector"))
    kaldi_xv = dict(read_table("ark:%s" % (DATA / "xvector" / "xvector.default.ark"),
                               "vector"))
    assert_matches(xv, kaldi_xv, "xvector pipe")


def test_example_pipeline_script(tmp_path):
    result = subprocess.run(["bash", str(REPO / "scripts" / "example_pipeline.sh"),
                             str(tmp_path / "exp"), "2"], env=_env(), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("Done 2 utterances, failed for 0") == 2
    out = {}
    for j in (1, 2):
        out.update(read_table("ark:gunzip -c %s |" % (tmp_path / "exp" /
                                                      ("output.%d.ark.gz" % j))))
    assert sorted(out) == ["utt1", "utt2", "utt3", "utt4"]
    assert all(np.isfinite(v).all() for v in out.values())


def test_every_console_script_has_a_path_sh_shim():
    """scripts/path.sh puts scripts/bin first on PATH: every tool the package
    installs must be there too, so a recipe gets all of ours or none."""
    import re
    scripts = re.search(r"\[project\.scripts\]\n(.*?)\n\n", (REPO / "pyproject.toml").read_text(),
                        re.S).group(1)
    tools = {line.split("=")[0].strip() for line in scripts.splitlines() if "=" in line}
    shims = {p.name for p in (REPO / "scripts" / "bin").iterdir()} - {"pynnet3-tool"}
    assert tools == shims
