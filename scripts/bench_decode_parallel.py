#!/usr/bin/env python3
"""nnet3-latgen-faster-parallel against nnet3-latgen-faster on kaldi-ref's
decode/large: the first N utterances (1,000 frames each), one option set
from decode-variants.txt, the two tools run alternately R times; prints each
run's wall and CPU seconds (CPU: the tool and its worker processes) with the
machine load before and after, the medians, the speedup of the medians, and
whether the parallel tool's lattices, words and alignments are byte for byte
the sequential tool's.

On a shared machine the wall times depend on what else runs: compare runs
taken at similar load.

Usage: python scripts/bench_decode_parallel.py [--ref DIR] [--variant narrow]
       [--utts 6] [--threads 2] [--reps 3]
"""

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def run(ref, argv, tool, extra, out_dir, tag):
    outputs = {"lat": "ark:%s/lat.%s.ark" % (out_dir, tag),
               "words": "ark,t:%s/words.%s.txt" % (out_dir, tag),
               "ali": "ark,t:%s/ali.%s.txt" % (out_dir, tag)}
    args = argv[:-3] + [outputs["lat"], outputs["words"], outputs["ali"]]
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    before = load()
    start, cpu0 = time.time(), os.times()
    proc = subprocess.run([sys.executable, "-m", "pynnet3.bin." + tool] + extra + args,
                          cwd=ref, env=env, capture_output=True, text=True)
    wall, cpu1 = time.time() - start, os.times()
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit("%s failed" % tool)
    cpu = (cpu1.children_user - cpu0.children_user
           + cpu1.children_system - cpu0.children_system)
    return wall, cpu, before, load()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default=os.path.join(ROOT, "..", "shared", "kaldi-ref",
                                                      "decode", "large"))
    parser.add_argument("--variant", default="narrow")
    parser.add_argument("--utts", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    a = parser.parse_args()
    ref = os.path.abspath(a.ref)
    from pynnet3.io.table import TableWriter, read_table
    with open(os.path.join(ref, "decode.%s.cmd" % a.variant)) as f:
        argv = shlex.split(f.read())[1:]
    with tempfile.TemporaryDirectory() as tmp:
        feats = os.path.join(tmp, "feats.ark")
        with TableWriter("ark:" + feats) as w:
            for i, (key, value) in enumerate(read_table("ark:" + os.path.join(ref, "feats.ark"))):
                if i < a.utts:
                    w.write(key, value)
        argv = [("ark:" + feats) if arg == "ark:feats.ark" else arg for arg in argv]
        times = {"serial": [], "parallel": []}
        identical = True
        for rep in range(a.reps):
            for name, tool, extra in (
                    ("serial", "nnet3_latgen_faster", []),
                    ("parallel", "nnet3_latgen_faster_parallel",
                     ["--num-threads=%d" % a.threads])):
                wall, cpu, before, after = run(ref, argv, tool, extra, tmp, name)
                times[name].append(wall)
                print("%-8s rep %d: wall %6.2f s, CPU %6.2f s, load %s -> %s"
                      % (name, rep + 1, wall, cpu, before, after))
            for kind in ("lat.%s.ark", "words.%s.txt", "ali.%s.txt"):
                with open(os.path.join(tmp, kind % "serial"), "rb") as f1, \
                        open(os.path.join(tmp, kind % "parallel"), "rb") as f2:
                    identical &= f1.read() == f2.read()
        s, p = statistics.median(times["serial"]), statistics.median(times["parallel"])
        print("%d utterances, %s options, --num-threads=%d: median wall %.2f s serial, "
              "%.2f s parallel: speedup %.2fx; outputs identical: %s"
              % (a.utts, a.variant, a.threads, s, p, s / p, identical))


if __name__ == "__main__":
    main()
