#!/usr/bin/env python3
"""pynnet3's compilation against Kaldi's.

Live, side by side (when ``../shared/kaldi-bin`` exists): Kaldi's tools log
their compiler's time at the end of a run (``... seconds taken in nnet3
compilation total (breakdown: ...)``), and so do pynnet3's. For each case of
``scripts/bench_compute.py`` (same models, options and inputs, on its first
``--utterances`` utterances) Kaldi's tool and ours run alternately
(``--repeat`` pairs, 1 BLAS thread), and the table gives the medians of
both totals and their breakdown. pynnet3 runs twice: with
``--chunks-per-computation=1`` (Kaldi's requests: one chunk at a time) and
with its default (chunks of one shape batched: other requests, larger
computations). Ratio: Kaldi / pynnet3 (> 1: pynnet3 compiles faster).

Per request (``--requests``, or when kaldi-bin is absent): for each
``kaldi-ref/bench/NAME/request.txt`` the network is built the way the bench
README says (``bench/models/MODEL/final.config`` through our nnet3-init code
path, ``Nnet.from_config``; ``blstm_small`` reads ``models/blstm/model.raw``),
and three things are timed (best of ``--repeat`` runs each, wall and CPU):

- ``compile``: ``compile(nnet, request, optimize=False)``;
- ``compile+opt``: ``compile(nnet, request)`` (Kaldi's default optimization);
- ``shortcut``: a fresh ``CachingOptimizingCompiler`` (use-shortcut=true)
  compiling the request (with, as in Kaldi, the checker runs and, where the
  request is decomposable, the two-sequence compilation and its expansion).

Beside them, Kaldi's figures from ``kaldi-compile-stats.txt``: recorded once on
another machine (AMD EPYC), labelled so and never turned into a ratio.
``--profile`` prints a cProfile summary of one run of each timed step.

Usage: scripts/bench_compile.py [--repeat N] [--utterances N] [--cases a,b]
                                [--workdir DIR]
       scripts/bench_compile.py --requests [--kaldi-ref DIR] [--repeat N] [--profile]
                                [--only compile,compile+opt,shortcut] [NAME ...]
"""

import argparse
import cProfile
import os
import pstats
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

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


# -- live, against kaldi-bin -----------------------------------------------------------------

_TOTAL_RE = re.compile(r"([0-9.e+-]+) seconds taken in nnet3 compilation total \(breakdown: "
                       r"([^)]*)\)")
_PART_RE = re.compile(r"([0-9.e+-]+) (compilation|optimization|shortcut expansion|checking|"
                      r"computing indexes|misc\.)")
PARTS = ("compilation", "optimization", "shortcut expansion", "checking", "misc.")


def compile_times(stderr):
    """(total, {part: seconds}) from a tool's closing compiler line."""
    match = None
    for match in _TOTAL_RE.finditer(stderr):
        pass
    if match is None:
        raise SystemExit("no compilation line in the log:\n" + stderr[-2000:])
    parts = {name: float(value) for value, name in _PART_RE.findall(match.group(2))}
    return float(match.group(1)), parts


def run_logged(argv, env):
    result = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    if result.returncode != 0:
        raise SystemExit("failed (exit %d): %s\n%s" % (result.returncode, " ".join(argv),
                                                       result.stderr[-2000:]))
    return result.stderr


def live(args):
    import bench_compute as bc
    workdir = Path(args.workdir)
    cases = args.cases.split(",")
    bc.prepare(workdir, {bc.CASES[c][0] for c in cases})
    from pynnet3.io.table import SequentialTableReader, TableWriter
    inputs = {}
    for dim in (40, 30):
        path = workdir / ("feats%d.first%d.ark" % (dim, args.utterances))
        with TableWriter("ark:%s" % path, kind="matrix") as w:
            for i, (key, value) in enumerate(SequentialTableReader(
                    "ark:%s" % (workdir / ("feats%d.ark" % dim)), "matrix")):
                if i == args.utterances:
                    break
                w.write(key, value)
        inputs[dim] = "ark:%s" % path
    print("Machine: %s" % bc.machine_line())
    print("Kaldi's and pynnet3's compiler time in one tool run (first %d utterance(s), "
          "1 BLAS thread), medians of %d alternating runs; ratio = Kaldi / pynnet3 "
          "(> 1: pynnet3 faster)\n" % (args.utterances, args.repeat))
    print("| case | Kaldi s | pynnet3 s, Kaldi's requests | ratio | pynnet3 s, batched chunks | "
          "ratio | Kaldi breakdown (%s) | pynnet3 breakdown, Kaldi's requests |"
          % ", ".join(PARTS))
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for case in cases:
        tool = bc.CASES[case][1]
        feats = inputs[30 if tool == "nnet3-xvector-compute" else 40]
        variants = (("kaldi", bc.kaldi_argv(case, workdir, feats=feats), False),
                    ("one", bc.ours_argv(case, workdir, ["--chunks-per-computation=1"]
                                         if tool == "nnet3-compute" else [], feats=feats), True),
                    ("batched", bc.ours_argv(case, workdir, feats=feats), True))
        runs = {name: [] for name, _, _ in variants}
        for _ in range(args.repeat):
            for name, argv, ours in variants:
                runs[name].append(compile_times(run_logged(argv, bc.environment(1, ours))))
        total = {name: statistics.median(r[0] for r in rs) for name, rs in runs.items()}

        def breakdown(name):
            return ", ".join("%.3g" % statistics.median(r[1].get(part, 0.0) for r in runs[name])
                             for part in PARTS)

        print("| %s | %.3f | %.3f | **%.2fx** | %.3f | %.2fx | %s | %s |" % (
            case, total["kaldi"], total["one"], total["kaldi"] / total["one"],
            total["batched"], total["kaldi"] / total["batched"], breakdown("kaldi"),
            breakdown("one")), flush=True)
    print("\nload average after: %s" % " ".join("%.2f" % x for x in os.getloadavg()))


# -- per request, against the recorded figures ------------------------------------------------

def requests(args):
    only = args.only.split(",")
    steps = [step for step in STEPS if step[0] in only]
    bench = os.path.join(args.kaldi_ref, "bench")
    names = args.names or sorted(d for d in os.listdir(bench)
                                 if os.path.isfile(os.path.join(bench, d, "request.txt")))
    print("kaldi_ms: Kaldi's figure recorded on another machine (AMD EPYC, "
          "kaldi-compile-stats.txt), not measured here: no ratio")
    print("%-32s %-11s %9s %9s %9s %9s" % ("request", "step", "wall_ms", "cpu_ms",
                                           "kaldi_ms", "commands"))
    for name in names:
        nnet = load_model(args.kaldi_ref, name)
        request = ComputationRequest.read(os.path.join(bench, name, "request.txt"))
        stats = kaldi_stats(os.path.join(bench, name, "kaldi-compile-stats.txt"))
        for step, kaldi_keys, fn in steps:
            kaldi_ms = sum(stats[k] for k in kaldi_keys)
            best, best_cpu, num_commands = time_step(lambda: fn(nnet, request), args.repeat)
            print("%-32s %-11s %9.1f %9.1f %9.1f %9d"
                  % (name, step, best, best_cpu, kaldi_ms, num_commands))
            if step == "shortcut":
                print("    (last run: %s)" % caching_compile.last_summary)
            sys.stdout.flush()
            if args.profile:
                profiler = cProfile.Profile()
                profiler.enable()
                fn(nnet, request)  # result dropped at once, as in time_step
                profiler.disable()
                pstats.Stats(profiler).sort_stats("cumtime").print_stats(25)
    return 0


def main(argv=None):
    import bench_compute as bc
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", action="store_true",
                        help="time the bench requests (against recorded figures)")
    parser.add_argument("--kaldi-ref", default=str(bc.KALDI_REF))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--utterances", type=int, default=2)
    parser.add_argument("--cases", default=",".join(c for c in bc.DEFAULT_CASES))
    parser.add_argument("--workdir", default="/tmp/pynnet3-bench")
    parser.add_argument("--profile", action="store_true",
                        help="print a cProfile summary of one run of each step per request")
    parser.add_argument("--only", default=",".join(step[0] for step in STEPS),
                        help="comma-separated steps to time (default: all)")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    if args.requests or not bc.KALDI.is_file():
        if not args.requests:
            print("(no %s: Kaldi not measured here; per request instead)\n" % bc.KALDI)
        return requests(args)
    live(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
