#!/usr/bin/env python
"""How fast can nnet3-compute and nnet3-xvector-compute be on this CPU?
The products' share and bound.

For each case of scripts/bench_compute.py (same models, inputs and options,
built in the same --workdir), with one BLAS thread:

1. Kaldi's tool and ours run alternately (--repeat pairs), as in
   bench_compute.py: CPU seconds, medians.
2. Our tool runs once more in-process with every matrix product timed
   (NumPy's matmul, CPU seconds) and its floating-point operations counted
   (2 m k n per product).
3. This CPU's single-thread sgemm rate is measured on a 2048 x 2048 x 2048
   product (NumPy's OpenBLAS; best of 3): a practical peak.

Printed per case: the products' GFLOP per run, the share of our CPU time
they take and the rate they run at, the time they would need at the
measured peak, and the bound on the ratio: Kaldi's CPU time divided by
that time. A pynnet3 that does these products cannot be faster than the
bound (everything else it does only adds time); a target above it needs
fewer operations, not faster code. Where a TDNN layer's three time offsets
go through Winograd's F(2, 3) (pynnet3/components/winograd.py), our
products are 4 for Kaldi's 6 and the bound counts ours.

--shapes=N adds, per case, the N shapes that take the most product time:
their rate in the run (wall seconds around each call) beside the rate of
the same shape and operand layouts run alone, repeated on fresh random
operands (best of 3). Equal rates mean the run loses nothing to its
operands (cache, strides, layout): the shape itself sets the rate.

Usage: python scripts/bench_gemm_bound.py [--cases=chain_mini,chain_wsj]
         [--repeat=2] [--workdir=/tmp/pynnet3-bench] [--shapes=N]
"""

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_compute as bc  # noqa: E402  (cases, models, inputs, the launcher)

# Run in a child (the BLAS thread count must be set before NumPy loads):
# our tool in-process with NumPy's matmul timed and counted in the
# modules that make the products (the affine and TDNN components, the
# plan's shifted-splice products, the F(2, 3) products), then the peak.
_CHILD = r"""
import sys, time, types, collections, numpy as np
num_shapes, module, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
import importlib
tool = importlib.import_module(module)
import pynnet3.components.affine as affine, pynnet3.components.tdnn as tdnn
import pynnet3.compute.shifted_splice as shifted_splice
import pynnet3.components.winograd as winograd
seconds, flops = [0.0], [0]
# (m, k, n, layout of a, of b) -> [calls, wall seconds, flops]
shapes = collections.defaultdict(lambda: [0, 0.0, 0])
matmul = np.matmul
def layout(x):
    return "C" if x.flags.c_contiguous else "F" if x.flags.f_contiguous else "strided"
def timed(a, b, out=None, **kw):
    start, wall = time.process_time(), time.perf_counter()
    result = matmul(a, b, out=out, **kw)
    wall = time.perf_counter() - wall
    seconds[0] += time.process_time() - start
    count = 2 * a.shape[0] * a.shape[1] * b.shape[-1]
    flops[0] += count
    if num_shapes:
        entry = shapes[(a.shape[0], a.shape[1], b.shape[-1], layout(a), layout(b))]
        entry[0] += 1
        entry[1] += wall
        entry[2] += count
    return result
numpy_timed = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
numpy_timed.matmul = timed
affine.array_module = tdnn.array_module = lambda x: numpy_timed
shifted_splice.np = numpy_timed  # spliced inputs multiplied from their shifted rows
winograd.np = numpy_timed        # three-tap layers' products by F(2, 3)
start = time.process_time()
status = tool.main(argv)
total = time.process_time() - start
if status:
    sys.exit(status)
a = np.random.default_rng(0).standard_normal((2048, 2048), dtype=np.float32)
out = np.empty_like(a)
best = float("inf")
for _ in range(3):
    start = time.perf_counter()
    np.matmul(a, a, out=out)
    best = min(best, time.perf_counter() - start)
print("RESULT %r %r %r %r" % (total, seconds[0], flops[0], 2 * 2048 ** 3 / best))
rng = np.random.default_rng(0)
def operand(shape, kind):
    x = rng.standard_normal(shape, dtype=np.float32)
    return np.asfortranarray(x) if kind == "F" else x
products = sum(entry[1] for entry in shapes.values())
for (m, k, n, la, lb), (calls, wall, count) in sorted(
        shapes.items(), key=lambda item: -item[1][1])[:num_shapes]:
    # a strided operand is timed as a contiguous one: the difference is the
    # strides' cost
    a, b = operand((m, k), la), operand((k, n), lb)
    out = np.empty((m, n), np.float32)
    reps = max(3, int(0.05 * calls / wall))
    alone = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(reps):
            matmul(a, b, out=out)
        alone = min(alone, (time.perf_counter() - start) / reps)
    print("SHAPE %d %d %d %s %s %d %r %r %r" % (m, k, n, la, lb, calls, wall / products,
                                               count / wall, 2 * m * k * n / alone))
"""


def measure_products(case, workdir, num_shapes=0):
    """(total CPU s, products' CPU s, their flops, sgemm peak, shape lines)."""
    argv = bc.ours_argv(case, workdir)
    module = argv[2]
    env = bc.environment(1, True)
    result = subprocess.run([sys.executable, "-c", _CHILD, str(num_shapes), module] + argv[3:],
                            env=env, capture_output=True, text=True)
    lines = result.stdout.splitlines()
    line = [x for x in lines if x.startswith("RESULT ")]
    if result.returncode != 0 or not line:
        raise SystemExit("in-process run failed:\n" + result.stderr[-2000:])
    total, seconds, flops, peak = (float(x) for x in line[0].split()[1:])
    shapes = [x.split()[1:] for x in lines if x.startswith("SHAPE ")]
    return total, seconds, flops, peak, shapes


def print_shapes(case, shapes):
    print("\n%s: the shapes that take the most product time (C: row-major, F: "
          "column-major operand; a @ b with a m x k, b k x n)\n" % case)
    print("| m | k | n | a | b | calls | share of the products | GFLOPS in the run | "
          "GFLOPS alone |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m, k, n, la, lb, calls, share, in_run, alone in shapes:
        print("| %s | %s | %s | %s | %s | %s | %.1f%% | %.0f | %.0f |" % (
            m, k, n, la, lb, calls, 100 * float(share), float(in_run) / 1e9,
            float(alone) / 1e9))
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="chain_mini,chain_wsj,tdnnf_sub3,tdnnf_default")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workdir", default="/tmp/pynnet3-bench")
    parser.add_argument("--shapes", type=int, default=0,
                        help="also list the N most costly product shapes per case, in the run "
                             "and alone")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    cases = args.cases.split(",")
    for case in cases:
        if case not in bc.CASES:
            parser.error("not a case of bench_compute.py: %r" % case)
    if not bc.KALDI.is_file():
        raise SystemExit("needs Kaldi's tool (%s) for the bound" % bc.KALDI)
    bc.prepare(workdir, {bc.CASES[c][0] for c in cases})
    print("Machine: %s; 1 BLAS thread\n" % bc.machine_line())
    print("| case | Kaldi CPU s | ours CPU s | ratio | products GFLOP | products' share of "
          "ours | their rate GFLOPS | measured sgemm peak GFLOPS | products at peak s | "
          "bound on the ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    shape_tables = []
    for case in cases:
        kaldi, ours = [], []
        for _ in range(args.repeat):
            kaldi.append(bc.run_once(bc.kaldi_argv(case, workdir),
                                     bc.environment(1, False)).cpu)
            ours.append(bc.run_once(bc.ours_argv(case, workdir),
                                    bc.environment(1, True)).cpu)
        k, o = statistics.median(kaldi), statistics.median(ours)
        total, seconds, flops, peak, shapes = measure_products(case, workdir, args.shapes)
        at_peak = flops / peak
        print("| %s | %.2f | %.2f | %.2fx | %.1f | %.0f%% | %.0f | %.0f | %.2f | %.2fx |" % (
            case, k, o, k / o, flops / 1e9, 100 * seconds / total, flops / seconds / 1e9,
            peak / 1e9, at_peak, k / at_peak), flush=True)
        shape_tables.append((case, shapes))
    for case, shapes in shape_tables:
        if shapes:
            print_shapes(case, shapes)
    print("\nload average at the end: %s" % " ".join("%.2f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    main()
