#!/usr/bin/env python3
"""Times the computation analysis (Kaldi's Analyzer::Init, plus one
ComputationAnalysis question per submatrix) on the bench requests: the
compiled implementation against the Python twin, on each request's
unoptimized computation.

Not a test: the figures are medians of ``--repeat`` runs (wall and CPU);
the machine is shared, so report the load beside them (``uptime``).

Usage: scripts/bench_analysis.py [--kaldi-ref DIR] [--repeat N] [NAME ...]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pynnet3.components  # noqa: E402,F401  (registers component types)
from pynnet3.compiler.compiler import create_computation  # noqa: E402
from pynnet3.compiler.request import ComputationRequest  # noqa: E402
from pynnet3.optimize import analysis  # noqa: E402
from pynnet3._fast import analysis_kernel as analysis_c  # noqa: E402

from bench_compile import load_model  # noqa: E402


def time_analysis(classes, nnet, computation, repeat):
    """``classes``: (Analyzer, ComputationAnalysis) of one implementation."""
    analyzer_class, analysis_class = classes
    walls, cpus = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        analyzer = analyzer_class().init(nnet, computation)
        ca = analysis_class(computation, analyzer)
        for s in range(1, len(computation.submatrices)):
            ca.first_nontrivial_access(s)
            ca.last_access(s)
        walls.append((time.perf_counter() - start) * 1000.0)
        cpus.append((time.process_time() - start_cpu) * 1000.0)
    return statistics.median(walls), statistics.median(cpus), analyzer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kaldi-ref", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "kaldi-ref"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    bench = os.path.join(args.kaldi_ref, "bench")
    names = args.names or sorted(d for d in os.listdir(bench)
                                 if os.path.isfile(os.path.join(bench, d, "request.txt")))
    print("%-30s %8s %8s %9s %9s %10s %9s %8s %8s" % (
        "request", "commands", "vars", "c_wall_ms", "c_cpu_ms", "py_wall_ms", "py_cpu_ms",
        "x_wall", "x_cpu"))
    for name in names:
        nnet = load_model(args.kaldi_ref, name)
        request = ComputationRequest.read(os.path.join(bench, name, "request.txt"))
        computation = create_computation(nnet, request)
        cw, cc, analyzer = time_analysis(
            (analysis_c.Analyzer, analysis_c.ComputationAnalysis), nnet, computation,
            args.repeat)
        pw, pc, _ = time_analysis((analysis.AnalyzerPy, analysis.ComputationAnalysisPy), nnet,
                                  computation, max(1, args.repeat // 2))
        print("%-30s %8d %8d %9.2f %9.2f %10.1f %9.1f %8.0f %8.0f" % (
            name, len(computation.commands), analyzer.variables.num_variables(), cw, cc, pw,
            pc, pw / cw, pc / max(cc, 1e-3)))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
