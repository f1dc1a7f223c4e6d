#!/usr/bin/env python3
"""Run time of the optimized against the unoptimized computation.

For every inference request in ``kaldi-ref/bench`` (``NAME`` containing
``infer``), the network is built as ``scripts/bench_compile.py`` builds it,
the request is compiled twice (``compile(nnet, request)``, optimized with
Kaldi's default options, and ``optimize=False``), and each computation is run
forward on the NumPy backend on the same random inputs (``--repeat`` runs,
median shown, wall and CPU). Prints both times, the speed-up (unoptimized /
optimized) and whether the outputs agree (max |difference| relative to the
largest output). Shows how much the optimizer buys at run time; this is a
benchmark, not a test.

Usage: scripts/bench_optimized_run.py [--kaldi-ref DIR] [--repeat N] [NAME ...]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pynnet3.components  # noqa: E402,F401  (registers component types)
from bench_compile import load_model  # noqa: E402
from pynnet3.compiler.request import ComputationRequest  # noqa: E402
from pynnet3.driver.compile_and_optimize import compile  # noqa: E402
from pynnet3.compute.computer import NnetComputer  # noqa: E402


def random_inputs(nnet, request, seed=0):
    rng = np.random.default_rng(seed)
    return {io.name: rng.standard_normal((len(io.indexes), nnet.input_dim(io.name)),
                                         dtype=np.float32)
            for io in request.inputs}


def run_once(computation, nnet, inputs, output_names):
    start, start_cpu = time.perf_counter(), time.process_time()
    computer = NnetComputer(computation, nnet)
    for name, value in inputs.items():
        computer.accept_input(name, value)
    computer.run()
    outputs = {name: computer.get_output(name) for name in output_names}
    return time.perf_counter() - start, time.process_time() - start_cpu, outputs


def timed(computation, nnet, inputs, output_names, repeat):
    walls, cpus = [], []
    outputs = None
    for _ in range(repeat):
        wall, cpu, outputs = run_once(computation, nnet, inputs, output_names)
        walls.append(wall)
        cpus.append(cpu)
    return statistics.median(walls) * 1000.0, statistics.median(cpus) * 1000.0, outputs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kaldi-ref", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "kaldi-ref"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    bench = os.path.join(args.kaldi_ref, "bench")
    names = args.names or sorted(d for d in os.listdir(bench) if "infer" in d and
                                 os.path.isfile(os.path.join(bench, d, "request.txt")))
    print("%-32s %10s %10s %10s %10s %8s %10s %10s" % (
        "request", "plain_ms", "plain_cpu", "opt_ms", "opt_cpu", "speedup", "commands",
        "rel_diff"))
    for name in names:
        nnet = load_model(args.kaldi_ref, name)
        request = ComputationRequest.read(os.path.join(bench, name, "request.txt"))
        inputs = random_inputs(nnet, request)
        output_names = [io.name for io in request.outputs]
        plain = compile(nnet, request, optimize=False)
        optimized = compile(nnet, request)
        p_wall, p_cpu, p_out = timed(plain, nnet, inputs, output_names, args.repeat)
        o_wall, o_cpu, o_out = timed(optimized, nnet, inputs, output_names, args.repeat)
        diff = max(float(np.abs(np.asarray(o_out[k]) - np.asarray(p_out[k])).max()
                         / max(1.0, float(np.abs(np.asarray(p_out[k])).max())))
                   for k in output_names)
        print("%-32s %10.1f %10.1f %10.1f %10.1f %7.2fx %4d->%-5d %10.2g" % (
            name, p_wall, p_cpu, o_wall, o_cpu, p_wall / o_wall, len(plain.commands),
            len(optimized.commands), diff))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
