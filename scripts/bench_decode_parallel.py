#!/usr/bin/env python3
"""nnet3-latgen-faster-parallel's threads: ours with --num-threads=N against
ours with one thread, against our nnet3-latgen-faster and against Kaldi's
nnet3-latgen-faster, side by side on this machine.

On kaldi-ref's decode/large (--case narrow or default: the first --utts
utterances) or the chain case of scripts/bench_decode.py (--case chain,
built the same way, --kaldi-root needed), four tools run alternately
--reps times on the same input with the same options and
OPENBLAS_NUM_THREADS=1: Kaldi's nnet3-latgen-faster (when
../shared/kaldi-bin exists; its nnet3-latgen-faster-parallel is not there,
so Kaldi's single-threaded tool is the opponent), ours serial
(nnet3-latgen-faster), and our nnet3-latgen-faster-parallel with
--num-threads=1 and with --num-threads=N. Each run's wall and CPU time and
peak RSS come from wait4 (scripts/bench_decode.py's launcher).

The thread speed-up is the parallel tool's one-thread wall time over its
N-thread wall time, taken per round (the two runs of a round are next to
each other, so a machine whose speed drifts moves both) and then the median.
Checked in every round: whether the N-thread lattices, words and alignments
are byte for byte the one-thread ones (they must be: each utterance gets a
new decoder, whichever thread takes it); whether the parallel tool's words
and alignments equal our serial tool's and Kaldi's. Those two may differ
where the serial tool's decoder history matters: Kaldi's serial tool and
ours keep one decoder for all utterances (see nnet3-latgen-faster-parallel's
docstring), and their lattices can differ from the parallel tool's in
arcs within the lattice beam. Printed: every run with the load average
before it, then a markdown table (medians) with the speed-ups and the
ratios to Kaldi (Kaldi's wall / ours), the CPU model and the load.

The speed-up needs N idle cores: on a shared machine compare runs taken at
similar load (printed), and prefer a quiet machine for the figure.

Usage: python scripts/bench_decode_parallel.py [--case narrow] [--utts 10]
       [--threads 2] [--reps 3] [--kaldi-root DIR] [--workdir DIR]
"""

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode as bd  # noqa: E402  (the cases, the launcher, the machine)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default="narrow")
    parser.add_argument("--utts", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--kaldi-root", default=os.environ.get("KALDI_ROOT", ""))
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(),
                                                          "pynnet3-bench-decode"))
    a = parser.parse_args()
    print("CPU: %s, %d cores; load average: %s" % (bd.cpu_model(), os.cpu_count(), bd.load()))
    have_kaldi = bd.kaldi_available()
    if have_kaldi:
        kenv, core = bd.kaldi_env()
        print("Kaldi: nnet3-latgen-faster, OpenBLAS kernels %s; all runs "
              "OPENBLAS_NUM_THREADS=1" % core)
    parallel = [sys.executable, "-m", "pynnet3.bin.nnet3_latgen_faster_parallel"]
    one, many = "ours-1thread", "ours-%dthreads" % a.threads
    tools = [("ours-serial", [sys.executable, "-m", "pynnet3.bin.nnet3_latgen_faster"]),
             (one, parallel + ["--num-threads=1"]),
             (many, parallel + ["--num-threads=%d" % a.threads])]
    if have_kaldi:
        tools.append(("kaldi", [os.path.join(bd.KALDI_BIN, "bin", "nnet3-latgen-faster")]))
    runs = {name: [] for name, _ in tools}
    identical, same_as_serial, same_as_kaldi, speedups = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        feats = bd.first_utterances(a.utts, os.path.join(tmp, "feats.ark"))
        case = (bd.build_chain_case(os.path.abspath(a.workdir), a.kaldi_root, feats)
                if a.case == "chain" else bd.large_case(a.case, feats))
        if case is None:
            raise SystemExit("no case to run")
        print("%s, %d utterances: %s" % (a.case, a.utts, " ".join(case.options)), flush=True)
        for rep in range(a.reps):
            order = tools[rep % len(tools):] + tools[:rep % len(tools)]
            for name, argv in order:
                env = kenv if name == "kaldi" else bd.our_env()
                before = bd.load()
                wall, cpu, rss, _ = bd.timed(argv + case.argv(tmp, name), case.cwd, env)
                runs[name].append((wall, cpu, rss, before))
                print("  %-14s run %d: wall %7.2f s  CPU %7.2f s  peak RSS %6.1f MB  "
                      "(load before: %s)" % (name, rep + 1, wall, cpu, rss, before),
                      flush=True)
            speedups.append(runs[one][-1][0] / runs[many][-1][0])
            identical.append(all(
                bd.read_output(tmp, kind, one) == bd.read_output(tmp, kind, many)
                for kind in ("lat.%s.ark", "words.%s.txt", "ali.%s.txt")))
            for same, other in ((same_as_serial, "ours-serial"), (same_as_kaldi, "kaldi")):
                if other in runs:
                    same.append(all(
                        bd.read_output(tmp, kind, other) == bd.read_output(tmp, kind, many)
                        for kind in ("words.%s.txt", "ali.%s.txt")))
    med = statistics.median
    walls = {name: med(r[0] for r in rs) for name, rs in runs.items()}
    loads = sorted((r[3].split()[0] for rs in runs.values() for r in rs), key=float)
    print("\nload average at the end: %s\n" % bd.load())
    print("CPU: %s; %s, %d utterances; OPENBLAS_NUM_THREADS=1; medians of %d alternating "
          "runs; load average (1 min) during the runs %s-%s\n"
          % (bd.cpu_model(), a.case, a.utts, a.reps, loads[0], loads[-1]))
    print("| tool | wall s | CPU s | peak RSS MB | speed-up over ours with 1 thread | "
          "Kaldi wall / ours |")
    print("|---|---|---|---|---|---|")
    for name, _ in tools:
        rs = runs[name]
        print("| %s | %.2f | %.2f | %.0f | %s | %s |" % (
            name, walls[name], med(r[1] for r in rs), max(r[2] for r in rs),
            "%.2fx" % (walls[one] / walls[name]) if name != "kaldi" else "-",
            "%.2fx" % (walls["kaldi"] / walls[name]) if have_kaldi and name != "kaldi"
            else "-"))

    def rounds(same):
        return "%d/%d rounds" % (sum(same), len(same)) if same else "(no Kaldi here)"

    print("\n%d threads against 1, per round: %s (median %.2fx)"
          % (a.threads, ", ".join("%.2fx" % x for x in speedups), med(speedups)))
    print("%d-thread outputs (lattices, words, alignments) byte-identical to 1 thread's: %s"
          % (a.threads, rounds(identical)))
    print("words and alignments equal our serial tool's: %s; Kaldi's serial tool's: %s "
          "(either may differ where a serial decoder's history matters)"
          % (rounds(same_as_serial), rounds(same_as_kaldi)))


if __name__ == "__main__":
    main()
