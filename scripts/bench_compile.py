#!/usr/bin/env python3
"""Times pynnet3's unoptimized compilation against Kaldi's on the bench requests.

For each ``kaldi-ref/bench/NAME/request.txt`` the network is built the way the
bench README says (``bench/models/MODEL/final.config`` through our nnet3-init
code path, ``Nnet.from_config``; ``blstm_small`` reads ``models/blstm/model.raw``),
the request is compiled with ``compile(nnet, request)`` (best of ``--repeat``
runs) and our milliseconds are printed beside Kaldi's ``compile_ms`` with the
ratio (ours / Kaldi's; <= 1.0 is the goal, > 2.0 a defect). Both wall-clock
and CPU time (``time.process_time``) are shown: on a shared, loaded machine the
CPU time is the steadier measure; Kaldi's figures are wall-clock on an idle one.

Usage: scripts/bench_compile.py [--kaldi-ref DIR] [--repeat N] [--profile] [NAME ...]
"""

import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pynnet3.components  # noqa: E402,F401  (registers component types)
from pynnet3.compile import ComputationRequest, compile  # noqa: E402
from pynnet3.nnet.nnet import Nnet  # noqa: E402


def kaldi_stats(path):
    stats = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                stats[parts[0]] = float(parts[1])
    return stats


def load_model(kaldi_ref, name):
    model = name.split(".")[0]
    if model == "blstm_small":
        return Nnet.read(os.path.join(kaldi_ref, "models", "blstm", "model.raw"))
    config_dir = os.path.join(kaldi_ref, "bench", "models", model)
    cwd = os.getcwd()
    os.chdir(config_dir)  # final.config refers to configs/lda.mat relative to here
    try:
        return Nnet.from_config(os.path.join(config_dir, "final.config"))
    finally:
        os.chdir(cwd)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kaldi-ref", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "kaldi-ref"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true",
                        help="print a cProfile summary of one compilation per request")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    bench = os.path.join(args.kaldi_ref, "bench")
    names = args.names or sorted(d for d in os.listdir(bench)
                                 if os.path.isfile(os.path.join(bench, d, "request.txt")))
    print("%-32s %9s %9s %9s %7s %7s %9s" % ("request", "wall_ms", "cpu_ms", "kaldi_ms",
                                             "ratio", "cpu_rt", "commands"))
    worst = worst_cpu = 0.0
    for name in names:
        nnet = load_model(args.kaldi_ref, name)
        request = ComputationRequest.read(os.path.join(bench, name, "request.txt"))
        kaldi_ms = kaldi_stats(os.path.join(bench, name, "kaldi-compile-stats.txt"))["compile_ms"]
        best = best_cpu = None
        computation = None
        for _ in range(args.repeat):
            computation = None
            start, start_cpu = time.perf_counter(), time.process_time()
            computation = compile(nnet, request)
            elapsed = (time.perf_counter() - start) * 1000.0
            elapsed_cpu = (time.process_time() - start_cpu) * 1000.0
            best = elapsed if best is None else min(best, elapsed)
            best_cpu = elapsed_cpu if best_cpu is None else min(best_cpu, elapsed_cpu)
        ratio = best / kaldi_ms
        worst = max(worst, ratio)
        worst_cpu = max(worst_cpu, best_cpu / kaldi_ms)
        print("%-32s %9.1f %9.1f %9.1f %7.2f %7.2f %9d"
              % (name, best, best_cpu, kaldi_ms, ratio, best_cpu / kaldi_ms,
                 len(computation.commands)))
        sys.stdout.flush()
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            compile(nnet, request)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    print("worst ratio %.2f (wall), %.2f (cpu)" % (worst, worst_cpu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
