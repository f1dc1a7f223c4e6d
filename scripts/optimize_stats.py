#!/usr/bin/env python3
"""Optimized computation size: pynnet3 against Kaldi.

For every ``kaldi-ref/random/caseN`` (and ``models/zoo*/requestN``) and every
``kaldi-ref/bench/NAME`` request, prints our optimized command count, matrix
count and peak matrix memory beside Kaldi's, and how many cases are no worse
on all three. Kaldi's figures: commands and matrices from ``stats.txt`` (random)
or ``kaldi-compile-stats.txt`` (bench); peak memory from Kaldi's own optimized
computation (``computation.opt.kaldi``, measured with the same function as
ours) or ``kaldi-compile-stats.txt``.

Counts are Kaldi's: matrices include the empty matrix 0, as
``computation.matrices.size()`` does. Peak memory is as kaldi-timings.txt
defines it (see :func:`peak_matrix_bytes_excluding_inputs`). For bench requests the
optimize time is printed too (best of ``--repeat``, wall and CPU), beside
Kaldi's ``optimize_ms``. CPU is this thread's time: process time would also
count OpenBLAS worker threads that spin for a while after a NumPy call.

Usage: scripts/optimize_stats.py [--kaldi-ref DIR] [--no-bench] [--no-random] [--repeat N]
"""

import argparse
import gc
import glob
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pynnet3.components  # noqa: E402,F401  (registers component types)
from bench_compile import kaldi_stats as read_stats, load_model  # noqa: E402
from pynnet3.compiler.request import ComputationRequest  # noqa: E402
from pynnet3.driver.compile_and_optimize import compile  # noqa: E402
from pynnet3.compiler.computation import CommandType as C  # noqa: E402
from pynnet3.compiler.computation_io import read_computation_file  # noqa: E402
from pynnet3.nnet.nnet import Nnet  # noqa: E402
from pynnet3.optimize.optimizer import max_output_time_in_request, optimize  # noqa: E402


def peak_matrix_bytes_excluding_inputs(computation, nnet):
    """The largest running total while walking the command list, adding a
    matrix's bytes (4 per element) at kAllocMatrix and taking them off at
    kDeallocMatrix; matrices arriving by kAcceptInput (inputs, output
    derivatives) are never added, and compression is ignored. This is the
    figure kaldi-compile-stats.txt records: it reproduces Kaldi's numbers
    exactly on all seven bench requests (Kaldi's GetMaxMemoryUse, which counts
    accepted matrices and compressed sizes, does not on the training ones)."""
    subs = computation.submatrices
    cur = peak = 0
    for c in computation.commands:
        t = c.command_type
        if t == C.kAllocMatrix or t == C.kDeallocMatrix:
            info = subs[c.arg1]
            size = 4 * info.num_rows * info.num_cols
            cur += size if t == C.kAllocMatrix else -size
            peak = max(peak, cur)
    return peak


def figures(computation, nnet):
    return (len(computation.commands), len(computation.matrices),
            peak_matrix_bytes_excluding_inputs(computation, nnet))


def row(name, ours, kaldi, extra=""):
    ok = all(o <= k for o, k in zip(ours, kaldi))
    print("%-34s %7d %7d %7d %7d %11d %11d %s%s" % (
        name, ours[0], kaldi[0], ours[1], kaldi[1], ours[2], kaldi[2],
        "ok  " if ok else "WORSE", extra))
    return ok


HEADER = "%-34s %7s %7s %7s %7s %11s %11s" % ("case", "cmds", "kaldi", "mats", "kaldi",
                                              "peak_bytes", "kaldi")


def random_cases(kaldi_ref):
    dirs = sorted(glob.glob(os.path.join(kaldi_ref, "random", "case*")),
                  key=lambda p: int(os.path.basename(p)[4:]))
    dirs += sorted(glob.glob(os.path.join(kaldi_ref, "models", "*", "request*")))
    print(HEADER)
    good = 0
    for d in dirs:
        nnet = Nnet.read(os.path.join(d, "model.raw"))
        request = ComputationRequest.read(os.path.join(d, "request.txt"))
        ours = figures(compile(nnet, request), nnet)
        kaldi_computation = read_computation_file(os.path.join(d, "computation.opt.kaldi"))
        kaldi = figures(kaldi_computation, nnet)
        stats = read_stats(os.path.join(d, "stats.txt"))
        assert (stats["opt_commands"], stats["opt_matrices"]) == kaldi[:2], d
        good += row(os.path.relpath(d, kaldi_ref), ours, kaldi)
    print("random/zoo: no worse than Kaldi on %d of %d cases (%.1f%%)\n"
          % (good, len(dirs), 100.0 * good / max(1, len(dirs))))


def bench_requests(kaldi_ref, repeat):
    bench = os.path.join(kaldi_ref, "bench")
    names = sorted(d for d in os.listdir(bench)
                   if os.path.isfile(os.path.join(bench, d, "request.txt")))
    print(HEADER + " %9s %9s %9s" % ("opt_ms", "opt_cpu", "kaldi_ms"))
    good = 0
    for name in names:
        nnet = load_model(kaldi_ref, name)
        request = ComputationRequest.read(os.path.join(bench, name, "request.txt"))
        stats = read_stats(os.path.join(bench, name, "kaldi-compile-stats.txt"))
        wall = cpu = None
        max_t = max_output_time_in_request(request)
        for _ in range(repeat):     # the first run also pays for imports
            computation = compile(nnet, request, optimize=False)
            # The compiler pauses the cyclic GC, so the first allocations after
            # it pay for a young-generation scan of everything it made; that
            # belongs to compilation, not to the optimizer.
            gc.collect()
            start, start_cpu = time.perf_counter(), time.thread_time()
            optimize(None, nnet, max_t, computation)
            this_wall = (time.perf_counter() - start) * 1000.0
            this_cpu = (time.thread_time() - start_cpu) * 1000.0
            wall = this_wall if wall is None else min(wall, this_wall)
            cpu = this_cpu if cpu is None else min(cpu, this_cpu)
        kaldi = (int(stats["opt_commands"]), int(stats["opt_matrices"]),
                 int(stats["peak_matrix_bytes_excluding_inputs"]))
        good += row(name, figures(computation, nnet), kaldi,
                    " %9.1f %9.1f %9.1f" % (wall, cpu, stats["optimize_ms"]))
        sys.stdout.flush()
    print("bench: no worse than Kaldi on %d of %d requests" % (good, len(names)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kaldi-ref", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "kaldi-ref"))
    parser.add_argument("--no-bench", action="store_true")
    parser.add_argument("--no-random", action="store_true")
    parser.add_argument("--repeat", type=int, default=3,
                        help="optimize each bench request this many times; the best "
                             "time is shown")
    args = parser.parse_args(argv)
    if not args.no_random:
        random_cases(args.kaldi_ref)
    if not args.no_bench:
        bench_requests(args.kaldi_ref, args.repeat)


if __name__ == "__main__":
    main()
