#!/usr/bin/env python
"""Frames per second of our nnet3-compute / nnet3-xvector-compute on the
full-size benchmark models, against Kaldi's figures in
../shared/kaldi-ref/bench/kaldi-timings.txt (same inputs, same options, same
thread count). Not a test: the machine is shared, so each case runs
``--repeat`` times and the median is reported, with the load average.

Inputs are made as kaldi-timings.txt describes them: 20 utterances x 1000
frames of random features (40-dim; 30-dim for the x-vector model) and
100-dim online i-vectors every 10 frames. Models are built with our
nnet3-init from the bench configs (parameters do not matter for speed); the
x-vector model gets extract.config's output node (``output-node name=output
input=tdnn6.affine``) as Kaldi's recipe does with nnet3-copy --nnet-config.

Usage: python scripts/bench_compute.py [--repeat=3] [--threads=2,1]
         [--cases=tdnnf_default,tdnnf_sub3,tdnn_lstm,xvector] [--batch-size=N]
         [--workdir=/tmp/pynnet3-bench] [--profile=CASE]
Prints one line per case: ours (wall s, frames/s, and the CPU seconds the
process used, a figure less disturbed by other load), Kaldi's (wall, measured
on a quiet machine), and ours/Kaldi (frames/s ratio: > 1 means faster than
Kaldi). On a machine busier than its cores, multi-threaded OpenBLAS slows
down badly (its threads wait for each other): compare threads=1 figures then. ``--batch-size=N`` adds a
line per nnet3-compute case with our batched mode. ``--profile=CASE`` runs
that case once in-process under cProfile and prints the top functions.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
BENCH = Path(os.environ.get("PYNNET3_KALDI_REF", REPO.parent / "shared" / "kaldi-ref")) / "bench"
NUM_UTTS, NUM_FRAMES = 20, 1000

# case -> (model, tool, options, kaldi seconds by thread count)
CASES = {
    "tdnnf_default": ("tdnnf_full", "nnet3_compute", [], {2: 15.24, 1: 19.54}),
    "tdnnf_sub3": ("tdnnf_full", "nnet3_compute",
                   ["--frame-subsampling-factor=3", "--frames-per-chunk=150"],
                   {2: 5.07, 1: 6.53}),
    "tdnn_lstm": ("tdnn_lstm_full", "nnet3_compute",
                  ["--frame-subsampling-factor=3", "--frames-per-chunk=140",
                   "--extra-left-context=40", "--extra-right-context=0",
                   "--extra-left-context-initial=0", "--extra-right-context-final=0"],
                  {2: 31.02}),
    "xvector": ("xvector_full", "nnet3_xvector_compute", [], {2: 1.95, 1: 1.95}),
}


def _env(threads):
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(threads)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def prepare(workdir):
    """Builds the models and inputs once (kept in ``workdir``)."""
    sys.path.insert(0, str(REPO))
    from pynnet3.io.table import TableWriter
    from pynnet3.nnet.nnet import Nnet
    workdir.mkdir(parents=True, exist_ok=True)
    for name in ("tdnnf_full", "tdnn_lstm_full", "xvector_full"):
        raw = workdir / (name + ".raw")
        if raw.is_file():
            continue
        folder = BENCH / "models" / name
        cwd = os.getcwd()
        os.chdir(folder)     # final.config names configs/lda.mat relative to it
        try:
            nnet = Nnet.from_config(str(folder / "final.config"))
        finally:
            os.chdir(cwd)
        if name == "xvector_full":
            nnet.read_config("output-node name=output input=tdnn6.affine\n", "extract.config")
        nnet.write(str(raw), True)
    rng = np.random.default_rng(0)
    for dim, name in ((40, "feats40.ark"), (30, "feats30.ark")):
        path = workdir / name
        if not path.is_file():
            with TableWriter("ark:%s" % path, kind="matrix") as w:
                for i in range(NUM_UTTS):
                    w.write("utt%02d" % i, rng.standard_normal((NUM_FRAMES, dim),
                                                               dtype=np.float32))
    path = workdir / "ivectors.ark"
    if not path.is_file():
        with TableWriter("ark:%s" % path, kind="matrix") as w:
            for i in range(NUM_UTTS):
                w.write("utt%02d" % i, rng.standard_normal((NUM_FRAMES // 10, 100),
                                                           dtype=np.float32))


def command(case, workdir, extra=()):
    model, tool, options, _ = CASES[case]
    argv = [sys.executable, "-m", "pynnet3.bin." + tool] + list(options) + list(extra)
    if tool == "nnet3_compute":
        argv += ["--online-ivectors=ark:%s" % (workdir / "ivectors.ark"),
                 "--online-ivector-period=10"]
        feats = workdir / "feats40.ark"
    else:
        feats = workdir / "feats30.ark"
    return argv + [str(workdir / (model + ".raw")), "ark:%s" % feats, "ark:/dev/null"]


def run_once(argv, threads):
    """(wall seconds, CPU seconds of the child: user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(argv, env=_env(threads), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        raise SystemExit("failed (%d): %s\n%s" % (result.returncode, " ".join(argv),
                                                   result.stderr[-2000:]))
    return elapsed, cpu


def profile(case, workdir, threads, extra=()):
    """Runs the case once under cProfile in a subprocess (so that the BLAS
    thread count is set before NumPy loads) and prints the top functions."""
    argv = command(case, workdir, extra)
    argv = argv[:1] + ["-m", "cProfile", "-s", "tottime"] + argv[1:]
    result = subprocess.run(argv, env=_env(threads), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise SystemExit("profiled run failed:\n" + result.stderr[-2000:])
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    print("\n".join(lines[max(0, start - 6):start + 26]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", default="2,1")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--batch-size", type=int, default=0)
    parser.add_argument("--workdir", default="/tmp/pynnet3-bench")
    parser.add_argument("--profile", default="")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    prepare(workdir)
    threads = [int(t) for t in args.threads.split(",")]
    if args.profile:
        extra = ["--batch-size=%d" % args.batch_size] if args.batch_size > 1 else []
        profile(args.profile, workdir, threads[0], extra)
        return
    print("load before: %s" % os.getloadavg().__repr__())
    frames = NUM_UTTS * NUM_FRAMES
    for case in args.cases.split(","):
        kaldi_times = CASES[case][3]
        variants = [((), "")]
        if args.batch_size > 1 and CASES[case][1] == "nnet3_compute":
            variants.append((["--batch-size=%d" % args.batch_size],
                             " batch=%d" % args.batch_size))
        for t in threads:
            # Without a Kaldi figure at this thread count, compare with Kaldi's
            # figure at the nearest one (and say so).
            kt = t if t in kaldi_times else min(kaldi_times, key=lambda k: abs(k - t))
            for extra, label in variants:
                argv = command(case, workdir, extra)
                runs = [run_once(argv, t) for _ in range(args.repeat)]
                ours = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                kaldi = kaldi_times[kt]
                print("%-14s threads=%d%s: ours %.2f s wall (%.0f frames/s), %.2f s CPU  "
                      "kaldi%s %.2f s (%.0f frames/s)  ratio %.2fx (wall)" % (
                          case, t, label, ours, frames / ours, cpu,
                          "" if kt == t else "(threads=%d)" % kt, kaldi, frames / kaldi,
                          kaldi / ours), flush=True)
    print("load after: %s" % os.getloadavg().__repr__())


if __name__ == "__main__":
    main()
