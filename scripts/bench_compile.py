#!/usr/bin/env python3
"""Times pynnet3's compilation against Kaldi's on the bench requests.

For each ``kaldi-ref/bench/NAME/request.txt`` the network is built the way the
bench README says (``bench/models/MODEL/final.config`` through our nnet3-init
code path, ``Nnet.from_config``; ``blstm_small`` reads ``models/blstm/model.raw``),
and three things are timed (best of ``--repeat`` runs each), each printed
beside Kaldi's figure from ``kaldi-compile-stats.txt`` with the ratio (ours /
Kaldi's; <= 1.0 is the goal, > 2.0 a defect):

- ``compile``: ``compile(nnet, request, optimize=False)`` against ``compile_ms``;
- ``compile+opt``: ``compile(nnet, request)`` (Kaldi's default optimization)
  against ``compile_ms + optimize_ms``;
- ``shortcut``: a fresh ``CachingOptimizingCompiler`` (use-shortcut=true)
  compiling the request against ``shortcut_caching_compile_ms`` (includes,
  as in Kaldi, the checker runs and, where the request is decomposable, the
  two-sequence compilation and its expansion).

Both wall-clock and CPU time (``time.process_time``) are shown: on a shared,
loaded machine the CPU time is the steadier measure; Kaldi's figures are
wall-clock on an idle one. ``--profile`` prints a cProfile summary of one run
of each timed step.

Usage: scripts/bench_compile.py [--kaldi-ref DIR] [--repeat N] [--profile]
                                [--only compile,compile+opt,shortcut] [NAME ...]
"""

import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pynnet3.components  # noqa: E402,F401  (registers component types)
from pynnet3.compiler.request import ComputationRequest  # noqa: E402
from pynnet3.driver.compile_and_optimize import compile  # noqa: E402
from pynnet3.driver.caching import CachingOptimizingCompiler  # noqa: E402
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


def caching_compile(nnet, request):
    compiler = CachingOptimizingCompiler(nnet)
    computation = compiler.compile(request)
    caching_compile.last_summary = compiler.timing_summary()
    return computation


STEPS = (
    ("compile", ("compile_ms",), lambda nnet, request: compile(nnet, request, optimize=False)),
    ("compile+opt", ("compile_ms", "optimize_ms"), lambda nnet, request: compile(nnet, request)),
    ("shortcut", ("shortcut_caching_compile_ms",), caching_compile),
)


def time_step(fn, repeat):
    """Best wall and CPU milliseconds over ``repeat`` runs, and the number of
    commands of the last result.

    No result outlives its run: a live optimized computation (blstm_small's
    holds ~200,000 objects left scattered through the heap among the freed
    temporaries of its optimization) makes the next compilation's objects land
    in the gaps between them, and its passes ~1.6x slower through poor memory
    locality; timing a step with the previous step's result still alive
    measured that, not the step."""
    best = best_cpu = None
    num_commands = None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        elapsed = (time.perf_counter() - start) * 1000.0
        elapsed_cpu = (time.process_time() - start_cpu) * 1000.0
        num_commands = len(result.commands)
        result = None
        best = elapsed if best is None else min(best, elapsed)
        best_cpu = elapsed_cpu if best_cpu is None else min(best_cpu, elapsed_cpu)
    return best, best_cpu, num_commands


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kaldi-ref", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "kaldi-ref"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true",
                        help="print a cProfile summary of one run of each step per request")
    parser.add_argument("--only", default=",".join(step[0] for step in STEPS),
                        help="comma-separated steps to time (default: all)")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    only = args.only.split(",")
    steps = [step for step in STEPS if step[0] in only]
    bench = os.path.join(args.kaldi_ref, "bench")
    names = args.names or sorted(d for d in os.listdir(bench)
                                 if os.path.isfile(os.path.join(bench, d, "request.txt")))
    print("%-32s %-11s %9s %9s %9s %7s %7s %9s" % ("request", "step", "wall_ms", "cpu_ms",
                                                   "kaldi_ms", "ratio", "cpu_rt", "commands"))
    worst = {}
    for name in names:
        nnet = load_model(args.kaldi_ref, name)
        request = ComputationRequest.read(os.path.join(bench, name, "request.txt"))
        stats = kaldi_stats(os.path.join(bench, name, "kaldi-compile-stats.txt"))
        for step, kaldi_keys, fn in steps:
            kaldi_ms = sum(stats[k] for k in kaldi_keys)
            best, best_cpu, num_commands = time_step(lambda: fn(nnet, request), args.repeat)
            ratio, cpu_ratio = best / kaldi_ms, best_cpu / kaldi_ms
            old = worst.get(step, (0.0, 0.0))
            worst[step] = (max(old[0], ratio), max(old[1], cpu_ratio))
            print("%-32s %-11s %9.1f %9.1f %9.1f %7.2f %7.2f %9d"
                  % (name, step, best, best_cpu, kaldi_ms, ratio, cpu_ratio,
                     num_commands))
            if step == "shortcut":
                print("    (last run: %s)" % caching_compile.last_summary)
            sys.stdout.flush()
            if args.profile:
                profiler = cProfile.Profile()
                profiler.enable()
                fn(nnet, request)  # result dropped at once, as in time_step
                profiler.disable()
                pstats.Stats(profiler).sort_stats("cumtime").print_stats(25)
    for step, (ratio, cpu_ratio) in worst.items():
        print("worst ratio %-11s %.2f (wall), %.2f (cpu)" % (step, ratio, cpu_ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
