#!/usr/bin/env bash
# A recipe-style pipeline on pynnet3's shipped example, as a Kaldi recipe runs
# nnet3-compute (steps/nnet3/compute_output.sh): features in a script file
# with byte offsets, split into N parts, N parallel jobs, compressed output.
# Usage: scripts/example_pipeline.sh [work-dir] [num-jobs]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/path.sh"
dir=${1:-exp/pynnet3_example}
nj=${2:-4}
mkdir -p "$dir/split$nj" "$dir/log"
ex=$("$PYNNET3_PYTHON" -c 'import pynnet3.examples as e; print(e.path("feats.ark"))')
ex=$(dirname "$ex")
# An archive plus a script file of key -> archive:offset (what copy-feats
# ark,scp: writes), split into $nj parts as utils/split_scp.pl does.
"$PYNNET3_PYTHON" - "$ex/feats.ark" "$dir" "$nj" <<'PY'
import sys
from pynnet3.io.table import TableWriter, read_table
src, dir_, nj = sys.argv[1], sys.argv[2], int(sys.argv[3])
with TableWriter("ark,scp:%s/feats.ark,%s/feats.scp" % (dir_, dir_)) as w:
    for key, mat in read_table("ark:" + src):
        w.write(key, mat)
lines = open("%s/feats.scp" % dir_).read().splitlines()
for j in range(nj):
    with open("%s/split%d/feats.%d.scp" % (dir_, nj, j + 1), "w") as f:
        f.writelines(l + "\n" for l in lines[j::nj])
PY
for j in $(seq "$nj"); do
  nnet3-compute --online-ivectors="ark:$ex/online-ivectors.ark" --online-ivector-period=10 \
    --frames-per-chunk=50 "$ex/tdnn_lda.raw" "scp:$dir/split$nj/feats.$j.scp" \
    "ark:| gzip -c > $dir/output.$j.ark.gz" 2> "$dir/log/compute.$j.log" &
done
wait
for j in $(seq "$nj"); do
  grep -h "Done" "$dir/log/compute.$j.log"
done
echo "outputs: $dir/output.*.ark.gz"
