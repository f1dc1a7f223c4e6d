#!/usr/bin/env python
"""nnet3-compute-onnx against Kaldi's own nnet3-compute, side by side.

The full-size benchmark models and inputs of scripts/bench_compute.py (20
utterances x 1000 frames, 100-dim online i-vectors every 10 frames; TDNN-F
with nnet3-compute's default options, TDNN-LSTM with its recipe's chunk
options) are exported once with nnet3-to-onnx; then Kaldi's nnet3-compute
(../shared/kaldi-bin) and nnet3-compute-onnx run alternately, ``--repeat``
times each, both on one thread (OPENBLAS_NUM_THREADS=1 for Kaldi,
--num-threads=1 for onnxruntime), writing to /dev/null. The goal (issue 18):
nnet3-compute-onnx at least 2x Kaldi's speed.

Prints the CPU, the load average before and after, the export time, the CPU
time onnxruntime takes to load the model (included in every run), and per
case and tool the median wall time, the median CPU time (user + system, the
figure least disturbed by other processes on a shared machine), the peak
resident memory, and Kaldi's time / ours (> 1: faster than Kaldi).

Usage: python scripts/bench_onnx.py [--repeat=3] [--cases=tdnnf_default,tdnn_lstm]
         [--batch-size=1] [--workdir=/tmp/pynnet3-bench]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import bench_compute  # noqa: E402  (the models and inputs)

KALDI = Path(os.environ.get("PYNNET3_KALDI_BIN", REPO.parent / "shared" / "kaldi-bin")) / "kaldi"

CASES = {
    name: bench_compute.CASES[name] for name in ("tdnnf_default", "tdnnf_sub3", "tdnn_lstm")
}


def cpu_name():
    model, flags = "unknown CPU", ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return "%s (%s, %d cores)" % (model, simd, os.cpu_count())


def env():
    e = dict(os.environ)
    e["OPENBLAS_NUM_THREADS"] = e["OMP_NUM_THREADS"] = "1"
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def run(argv):
    """(wall s, CPU s, peak RSS MB) of one run of ``argv``."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit("failed (%d): %s\n%s" % (proc.returncode, " ".join(argv),
                                                   stderr[-2000:]))
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def session_load(path):
    """CPU seconds onnxruntime takes to load the model (one thread), part
    of every nnet3-compute-onnx run."""
    code = ("import time, onnxruntime as ort\n"
            "o = ort.SessionOptions(); o.intra_op_num_threads = 1\n"
            "t = time.process_time()\n"
            "ort.InferenceSession(%r, o, providers=['CPUExecutionProvider'])\n"
            "print(time.process_time() - t)\n" % str(path))
    out = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True,
                         text=True, check=True)
    return float(out.stdout.strip())


def inputs(workdir):
    return ["--online-ivectors=ark:%s" % (workdir / "ivectors.ark"),
            "--online-ivector-period=10"], "ark:%s" % (workdir / "feats40.ark")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", default="tdnnf_default,tdnn_lstm")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--workdir", default="/tmp/pynnet3-bench")
    args = parser.parse_args()
    if not KALDI.is_file():
        sys.exit("Kaldi's binaries not found at %s" % KALDI)
    workdir = Path(args.workdir)
    bench_compute.prepare(workdir, {CASES[case][0] for case in args.cases.split(",")})
    print("CPU: %s" % cpu_name())
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    print("%-14s %-20s %9s %9s %9s %8s" % ("case", "tool", "wall s", "CPU s", "peak MB",
                                         "kaldi/us"))
    for case in args.cases.split(","):
        model, _, options, _ = CASES[case]
        raw = workdir / (model + ".raw")
        onnx_path = workdir / ("%s.%s.onnx" % (model, case))
        export_opts = [o for o in options]
        wall, cpu, rss = run([sys.executable, "-m", "pynnet3.bin.nnet3_to_onnx"] + export_opts
                             + [str(raw), str(onnx_path)])
        print("%-14s %-20s %9.2f %9.2f %9.0f" % (case, "nnet3-to-onnx", wall, cpu, rss))
        print("%-14s %-20s %9s %9.2f" % (case, "model load (ORT)", "", session_load(onnx_path)))
        ivec, feats = inputs(workdir)
        kaldi = [str(KALDI), "nnet3-compute"] + options + ivec + [str(raw), feats, "ark:/dev/null"]
        ours = ([sys.executable, "-m", "pynnet3.bin.nnet3_compute_onnx", "--num-threads=1",
                 "--batch-size=%d" % args.batch_size] + options + ivec
                + [str(onnx_path), feats, "ark:/dev/null"])
        runs = {"kaldi": [], "onnx": []}
        for _ in range(args.repeat):
            runs["kaldi"].append(run(kaldi))
            runs["onnx"].append(run(ours))
        med = {k: [statistics.median(r[i] for r in v) for i in range(3)]
               for k, v in runs.items()}
        print("%-14s %-20s %9.2f %9.2f %9.0f" % (case, "kaldi nnet3-compute", *med["kaldi"]))
        print("%-14s %-20s %9.2f %9.2f %9.0f %7.2fx CPU, %.2fx wall"
              % (case, "nnet3-compute-onnx", *med["onnx"], med["kaldi"][1] / med["onnx"][1],
                 med["kaldi"][0] / med["onnx"][0]), flush=True)
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
