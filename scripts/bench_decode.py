#!/usr/bin/env python3
"""Decoding speed against Kaldi's nnet3-latgen-faster on kaldi-ref's
decode/large (a 142,458-state HCLG, 20 utterances of 1,000 frames).

For every option set in decode-variants.txt:
  1. our nnet3-latgen-faster run as decode.NAME.cmd (python -m, in a temporary
     folder), wall time against the median of Kaldi's three wall times in
     kaldi-timings.txt, and whether our words and alignments equal Kaldi's;
  2. where the time goes, measured in-process on the same input (CPU seconds,
     so that other load on the machine counts less): network
     (DecodableAmNnetSimple; with the default BLAS arithmetic and with
     Kaldi's exact arithmetic, --kaldi-exact-arithmetic), search with the
     acoustic scores given (the
     Cython LatticeFasterDecoder alone), raw lattice + best path, and
     determinization.
Prints the machine load (uptime) before and after: the machine is shared.

Also counts the utterances whose lattice equals Kaldi's byte for byte in the
archives (decode/large was made with OPENBLAS_NUM_THREADS=1, as the tool runs
here).

Usage: python scripts/bench_decode.py [--ref DIR] [--variants default,narrow]
       [--skip-tool] [--utts N] [--blas-arithmetic]
(the tool's default is Kaldi-exact arithmetic; --blas-arithmetic runs it and
the in-process search and determinization timings with the BLAS arithmetic.)
"""

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "(uptime unavailable)"


def kaldi_wall_times(ref):
    times = {}
    with open(os.path.join(ref, "kaldi-timings.txt")) as f:
        for line in f:
            m = re.match(r"^(\w+)\s+decode\.\w+\.cmd\s+([\d. ]+)$", line.strip())
            if m:
                times[m.group(1)] = [float(x) for x in m.group(2).split()]
    return times


def variants(ref):
    with open(os.path.join(ref, "decode-variants.txt")) as f:
        return [line.split("|")[0] for line in f if line.strip()]


def run_tool(ref, name, out_dir, extra_options=()):
    with open(os.path.join(ref, "decode.%s.cmd" % name)) as f:
        argv = shlex.split(f.read())[1:]
    outputs = {"lat.%s.ark" % name, "words.%s.txt" % name, "ali.%s.txt" % name}
    fixed = []
    for arg in argv:
        for o in outputs:
            arg = arg.replace(o, os.path.join(out_dir, o))
        fixed.append(arg)
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    start = time.time()
    cpu_start = os.times()
    proc = subprocess.run([sys.executable, "-m", "pynnet3.bin.nnet3_latgen_faster"]
                          + list(extra_options) + fixed,
                          cwd=ref, env=env, capture_output=True, text=True)
    wall = time.time() - start
    cpu_end = os.times()
    cpu = (cpu_end.children_user - cpu_start.children_user
           + cpu_end.children_system - cpu_start.children_system)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit("nnet3-latgen-faster failed for %s" % name)
    kind = "lattice" if "--determinize-lattice=false" in argv else "compact_lattice"
    same = {"lattices": _same_lattices(os.path.join(out_dir, "lat.%s.ark" % name),
                                       os.path.join(ref, "lat.%s.ark" % name), kind)}
    for kind in ("words", "ali"):
        ours = open(os.path.join(out_dir, "%s.%s.txt" % (kind, name)), "rb").read()
        kaldi = open(os.path.join(ref, "%s.%s.txt" % (kind, name)), "rb").read()
        same[kind] = ours == kaldi
    return wall, cpu, same


def _same_lattices(ours_path, kaldi_path, kind):
    """'N/M': how many of Kaldi's utterances have our lattice byte for byte
    (compared as binary archive entries); ``kind``: "compact_lattice" or
    "lattice" (raw, --determinize-lattice=false)."""
    from pynnet3.decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
    from pynnet3.io.table import SequentialTableReader

    def entries(path):
        return {k: v.write_binary() for k, v in SequentialTableReader("ark:" + path, kind)}

    ours, kaldi = entries(ours_path), entries(kaldi_path)
    same = sum(1 for k, v in kaldi.items() if ours.get(k) == v)
    return "%d/%d" % (same, len(kaldi))


def parse_options(ref, name):
    with open(os.path.join(ref, "decode.%s.cmd" % name)) as f:
        argv = shlex.split(f.read())[1:]
    opts = {}
    for arg in argv:
        m = re.match(r"--(beam|lattice-beam|max-active|min-active|acoustic-scale)=(\S+)", arg)
        if m:
            key = m.group(1).replace("-", "_")
            opts[key] = int(m.group(2)) if key in ("max_active", "min_active") else \
                float(m.group(2))
    return opts


def profile(ref, names, num_utts, kaldi_exact=False):
    from pynnet3.compute.backend import KaldiExactBackend
    from pynnet3.compute.utterance import SimpleComputationOptions
    from pynnet3.decoding.config import LatticeFasterDecoderConfig
    from pynnet3.decoding.decodable import (DecodableAmNnetSimple, decodable_nnet_computer,
                                          transition_id_to_pdf_table)
    from pynnet3.decoding.lattice_faster_decoder import LatticeFasterDecoder
    from pynnet3.decoding.determinize_lattice import determinize_lattice_phone_pruned_wrapper
    from pynnet3.decoding.fst import read_fst
    from pynnet3.decoding.token_lattice import best_path, get_raw_lattice
    from pynnet3.io.table import RandomAccessTableReader, read_table
    from pynnet3.model.am import read_mdl

    t = time.time()
    trans_model, am_nnet = read_mdl(os.path.join(ref, "model/final.mdl"))
    fst = read_fst(os.path.join(ref, "graph/HCLG.fst"))
    print("  reading model + HCLG.fst: %.2f s" % (time.time() - t))
    tid_to_pdf = transition_id_to_pdf_table(trans_model)
    ivectors = RandomAccessTableReader("ark:" + os.path.join(ref, "online-ivectors.ark"))
    feats = list(read_table("ark:" + os.path.join(ref, "feats.ark")))[:num_utts]
    for name in names:
        opts = parse_options(ref, name)
        ac = opts.pop("acoustic_scale", 0.1)
        t_nets = {}
        for arithmetic in ("blas", "kaldi-exact"):
            backend = KaldiExactBackend() if arithmetic == "kaldi-exact" else "numpy"
            computer = decodable_nnet_computer(am_nnet,
                                               SimpleComputationOptions(acoustic_scale=ac),
                                               backend=backend)
            t = time.process_time()
            decodables = [DecodableAmNnetSimple(computer, tid_to_pdf, f,
                                                online_ivectors=ivectors.value(k),
                                                online_ivector_period=10) for k, f in feats]
            t_nets[arithmetic] = time.process_time() - t
            if (arithmetic == "kaldi-exact") == kaldi_exact:
                kept = decodables
        decodables = kept
        t_net = t_nets["kaldi-exact" if kaldi_exact else "blas"]
        decoder = LatticeFasterDecoder(fst, LatticeFasterDecoderConfig(**opts))
        t_search = t_lat = t_det = 0.0
        frames = 0
        for d in decodables:
            t = time.process_time()
            decoder.decode(d.loglikes, d.tid_to_pdf)
            t_search += time.process_time() - t
            t = time.process_time()
            lat = get_raw_lattice(decoder.token_lattice())
            best_path(lat)
            lat.connect()
            t_lat += time.process_time() - t
            t = time.process_time()
            determinize_lattice_phone_pruned_wrapper(trans_model, lat, opts.get("lattice_beam",
                                                                                 10.0))
            t_det += time.process_time() - t
            frames += d.num_frames_ready()
        total = t_net + t_search + t_lat + t_det
        print("  %s (%d utterances, %d frames), CPU: network %.2f s (BLAS arithmetic "
              "%.2f s, Kaldi-exact arithmetic %.2f s), search %.2f s (%.1f frames/s, "
              "acoustic scores given), raw lattice + best path %.2f s, determinization "
              "%.2f s; total %.2f s"
              % (name, len(decodables), frames, t_net, t_nets["blas"], t_nets["kaldi-exact"],
                 t_search, frames / t_search, t_lat, t_det, total))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", default=os.path.join(ROOT, "..", "shared", "kaldi-ref",
                                                      "decode", "large"))
    parser.add_argument("--variants", default=None)
    parser.add_argument("--skip-tool", action="store_true")
    parser.add_argument("--utts", type=int, default=20)
    parser.add_argument("--blas-arithmetic", action="store_true")
    args = parser.parse_args()
    ref = os.path.abspath(args.ref)
    names = args.variants.split(",") if args.variants else variants(ref)
    print("load before:", uptime())
    kaldi = kaldi_wall_times(ref)
    if not args.skip_tool:
        for name in names:
            with tempfile.TemporaryDirectory() as out_dir:
                wall, cpu, same = run_tool(
                    ref, name, out_dir,
                    ["--kaldi-exact-arithmetic=false"] if args.blas_arithmetic else [])
            k = statistics.median(kaldi[name]) if name in kaldi else float("nan")
            print("%-8s ours %.2f s wall (%.2f s CPU), Kaldi %.2f s wall (median of %s): "
                  "ratio %.2fx wall, %.2fx CPU; words %s, alignments %s, lattices identical %s"
                  % (name, wall, cpu, k, kaldi.get(name), wall / k, cpu / k,
                                     "equal" if same["words"] else "DIFFERENT",
                                     "equal" if same["ali"] else "DIFFERENT",
                                     same["lattices"]), flush=True)
    print("where the time goes (in-process):")
    profile(ref, names, args.utts, not args.blas_arithmetic)
    print("load after:", uptime())


if __name__ == "__main__":
    main()
