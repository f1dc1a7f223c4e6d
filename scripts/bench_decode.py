#!/usr/bin/env python3
"""Decoding speed and memory against Kaldi's nnet3-latgen-faster, side by
side on this machine.

Cases (--cases, default all three):
  default, narrow  kaldi-ref's decode/large (a 142,458-state HCLG over the
                   random tdnn_lda model, 20 utterances of 1,000 frames), with
                   the options of its decode.NAME.cmd (default: beam 15,
                   lattice-beam 8, max-active 7000; narrow: 11, 6, 3000);
  chain            a chain TDNN-F of a trained model's size
                   (scripts/bench_decode_chain/network.xconfig: Kaldi's
                   mini_librispeech run_tdnn_1j network, 4.2M parameters) over
                   an HCLG made by Kaldi's utils/mkgraph.sh --self-loop-scale
                   1.0 from kaldi-ref's models/tdnnf_chain tree and transition
                   model and decode/large's lang/; the same 20 utterances;
                   options --acoustic-scale=1.0 --frame-subsampling-factor=3
                   --frames-per-chunk=150 --extra-left-context=0
                   --extra-right-context=0 --beam=15 --lattice-beam=8
                   --max-active=7000 (CHAIN_OPTIONS below).

For each case, Kaldi's tool and ours (``python -m
pynnet3.bin.nnet3_latgen_faster``, its default BLAS arithmetic) run
alternately --reps times on the same input with the same options and the
same BLAS thread count (OPENBLAS_NUM_THREADS=1 for both; OPENBLAS_CORETYPE
is set for Kaldi's process only, as ../shared/kaldi-bin/kaldi sets it; the
binary is started directly with the runner's environment so that its CPU
time and peak memory are the tool's alone). Each run's wall time, CPU time
(user + sys) and peak RSS (ru_maxrss) come from wait4; every run's words and
alignments are compared with Kaldi's from the same round. Printed: every
run with the load average before it, then a markdown table per case
(medians; ratio = Kaldi's time / ours: > 1 is faster than Kaldi), the CPU
model and the load. On a shared machine, CPU seconds are the steadier
figure.

Without ../shared/kaldi-bin, ours runs alone and Kaldi's decode/large times
recorded in kaldi-ref/decode/large/kaldi-timings.txt are shown beside it,
labelled as recorded on another machine (no ratio is claimed from them).

The chain case is built into --workdir (default: pynnet3-bench-decode
under the system's temporary folder; reused while the xconfig is
unchanged; a few seconds): Kaldi's steps/nnet3/xconfig_to_configs.py and
utils/mkgraph.sh, from a Kaldi source tree (--kaldi-root, or $KALDI_ROOT:
the folder with egs/wsj/s5), run in a subshell that sources
../shared/kaldi-bin/env.sh (mkgraph.sh also runs OpenFst's own tools,
such as fstarcsort: Debian's libfst-tools); Kaldi's nnet3-init initialises the network;
the batch-norm statistics are then set by one training-mode pass of
pynnet3 over 400 frames of utt1 (test mode with zero statistics would not
normalize, and the activations of 13 random layers overflow); the .mdl gets
tdnnf_chain's transition model and no priors, as chain models have none.
Without a Kaldi source tree the chain case is skipped with a message. The
graph needs OpenFst's command-line tools (Debian: libfst-tools).

--breakdown also prints where our time goes, measured in-process (CPU
seconds): network, search with the scores given, raw lattice + best path,
determinization, with one BLAS thread as the tools have.

Usage: python scripts/bench_decode.py [--cases default,narrow,chain]
       [--reps 3] [--utts 20] [--kaldi-root DIR] [--workdir DIR] [--breakdown]
"""

import argparse
import hashlib
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared")
KALDI_BIN = os.path.join(SHARED, "kaldi-bin")
LARGE = os.path.join(SHARED, "kaldi-ref", "decode", "large")
CHAIN_REF = os.path.join(SHARED, "kaldi-ref", "models", "tdnnf_chain")
CHAIN_XCONFIG = os.path.join(ROOT, "scripts", "bench_decode_chain", "network.xconfig")
CHAIN_OPTIONS = ["--acoustic-scale=1.0", "--frame-subsampling-factor=3",
                 "--frames-per-chunk=150", "--extra-left-context=0",
                 "--extra-right-context=0", "--beam=15", "--lattice-beam=8",
                 "--max-active=7000"]
sys.path.insert(0, ROOT)


# -- the machine ---------------------------------------------------------------------------

def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def kaldi_available():
    return os.path.isfile(os.path.join(KALDI_BIN, "kaldi"))


def kaldi_env():
    """The environment ../shared/kaldi-bin/kaldi gives Kaldi's tools."""
    core = subprocess.run([os.path.join(KALDI_BIN, "kaldi"), "--coretype"],
                          capture_output=True, text=True, check=True).stdout.strip()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env["LD_LIBRARY_PATH"] = os.path.join(KALDI_BIN, "lib") + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if core and not os.environ.get("OPENBLAS_CORETYPE"):
        env["OPENBLAS_CORETYPE"] = core
    return env, core or os.environ.get("OPENBLAS_CORETYPE", "") or "OpenBLAS's own choice"


def our_env():
    """Our tool's environment: never OPENBLAS_CORETYPE (NumPy's OpenBLAS
    picks its kernels itself); bytecode cached as an installed package's is
    (so the runs do not include compiling Python sources)."""
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


# Runs a command and reports its wall time, CPU time, peak RSS and exit
# status. It is a small process of its own so that the tool is forked from
# it: Linux carries a process's peak RSS over an exec, so a tool forked
# straight from this (large) script would report this script's size.
_LAUNCHER = r"""
import os, sys, time
argv = sys.argv[1:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
print(time.perf_counter() - start, ru.ru_utime + ru.ru_stime, ru.ru_maxrss,
      os.waitstatus_to_exitcode(status))
"""


def timed(argv, cwd, env):
    """(wall s, CPU s (user + sys), peak RSS MB, stderr) of one process."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER] + argv, cwd=cwd,
                              env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        err.seek(0)
        log = err.read().decode(errors="replace")
    fields = proc.stdout.split()
    if proc.returncode != 0 or len(fields) != 4 or fields[3] != "0":
        sys.stderr.write(log[-3000:])
        raise SystemExit("%s failed (exit status %s)" % (argv[0], fields[3] if fields
                                                          else proc.returncode))
    return float(fields[0]), float(fields[1]), float(fields[2]) / 1024.0, log


def read_output(out_dir, pattern, tag):
    """The bytes of the output file ``pattern % tag`` (e.g. "ali.%s.txt")."""
    with open(os.path.join(out_dir, pattern % tag), "rb") as f:
        return f.read()


# -- cases -----------------------------------------------------------------------------------

class Case:
    """A decode: the model, graph, options and inputs, run in ``cwd``."""

    def __init__(self, name, cwd, model, graph, options, feats, ivectors, words):
        self.name, self.cwd, self.model, self.graph = name, cwd, model, graph
        self.options, self.feats, self.ivectors, self.words = options, feats, ivectors, words

    def argv(self, out_dir, tag):
        return (["--online-ivectors=ark:" + self.ivectors, "--online-ivector-period=10"]
                + self.options + ["--word-symbol-table=" + self.words, self.model,
                                  self.graph, "ark:" + self.feats,
                                  "ark:%s/lat.%s.ark" % (out_dir, tag),
                                  "ark,t:%s/words.%s.txt" % (out_dir, tag),
                                  "ark,t:%s/ali.%s.txt" % (out_dir, tag)])


def large_case(name, feats):
    with open(os.path.join(LARGE, "decode.%s.cmd" % name)) as f:
        argv = shlex.split(f.read())[1:]
    options = [a for a in argv if re.match(r"--(beam|lattice-beam|max-active|acoustic-scale)=", a)]
    return Case(name, LARGE, os.path.join(LARGE, "model", "final.mdl"),
                os.path.join(LARGE, "graph", "HCLG.fst"), options, feats,
                os.path.join(LARGE, "online-ivectors.ark"),
                os.path.join(LARGE, "graph", "words.txt"))


def build_chain_case(workdir, kaldi_root, feats):
    """The chain case's model and graph in ``workdir`` (see the docstring)."""
    egs = os.path.join(kaldi_root, "egs", "wsj", "s5") if kaldi_root else ""
    if not egs or not os.path.isfile(os.path.join(egs, "utils", "mkgraph.sh")):
        print("chain case skipped: no Kaldi source tree (give --kaldi-root or set KALDI_ROOT "
              "to a folder with egs/wsj/s5/utils/mkgraph.sh)")
        return None
    with open(CHAIN_XCONFIG, "rb") as f:
        stamp = hashlib.sha1(f.read() + b"v1").hexdigest()
    os.makedirs(workdir, exist_ok=True)
    model_dir = os.path.join(workdir, "model")
    graph = os.path.join(workdir, "graph", "HCLG.fst")
    stamp_file = os.path.join(workdir, "stamp")
    built = os.path.isfile(stamp_file) and open(stamp_file).read() == stamp
    if not built:
        start = time.time()
        for sub in ("configs", "model", "graph", "lang"):
            shutil.rmtree(os.path.join(workdir, sub), ignore_errors=True)
        env_sh = os.path.abspath(os.path.join(KALDI_BIN, "env.sh"))
        # Kaldi's scripts expect to run beside utils/ and steps/.
        for sub in ("utils", "steps"):
            link = os.path.join(workdir, sub)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(os.path.join(egs, sub), link)
        subprocess.run(["bash", "-c", ". %s && steps/nnet3/xconfig_to_configs.py --xconfig-file "
                        "%s --config-dir configs" % (shlex.quote(env_sh),
                                                     shlex.quote(CHAIN_XCONFIG))],
                       cwd=workdir, check=True, capture_output=True)
        env, _ = kaldi_env()
        subprocess.run([os.path.join(KALDI_BIN, "bin", "nnet3-init"), "--srand=1",
                        "configs/final.config", "configs/init.raw"], cwd=workdir, env=env,
                       check=True, capture_output=True)
        os.makedirs(model_dir)
        _chain_mdl(os.path.join(workdir, "configs", "init.raw"),
                   os.path.join(model_dir, "final.mdl"), feats)
        shutil.copy(os.path.join(CHAIN_REF, "tree"), os.path.join(model_dir, "tree"))
        shutil.copytree(os.path.join(LARGE, "lang"), os.path.join(workdir, "lang"))
        made = subprocess.run(["bash", "-c", ". %s && utils/mkgraph.sh --self-loop-scale 1.0 "
                               "lang model graph" % shlex.quote(env_sh)], cwd=workdir,
                              capture_output=True, text=True)
        if made.returncode != 0 or not os.path.isfile(graph):
            # mkgraph.sh also needs OpenFst's own tools (fstarcsort: Debian's
            # libfst-tools), which kaldi-bin does not ship
            raise SystemExit("bench_decode: utils/mkgraph.sh failed in %s (exit %d; it needs "
                             "OpenFst's tools such as fstarcsort on PATH):\n%s" % (
                                 workdir, made.returncode,
                                 "\n".join([line for line in made.stderr.splitlines()
                                            if "not found" in line or "ERROR" in line][:8]
                                           or made.stderr.splitlines()[-8:])))
        with open(stamp_file, "w") as f:
            f.write(stamp)
        print("built the chain case in %s (%.1f s)" % (workdir, time.time() - start))
    return Case("chain", workdir, os.path.join(model_dir, "final.mdl"), graph,
                CHAIN_OPTIONS, feats, os.path.join(LARGE, "online-ivectors.ark"),
                os.path.join(workdir, "graph", "words.txt"))


def _chain_mdl(raw_in, mdl_out, feats):
    """Batch-norm statistics from one training-mode pass over 400 frames of
    the first utterance, then the .mdl (tdnnf_chain's transition model, no
    priors)."""
    import numpy as np
    from pynnet3.compiler.request import ComputationRequest, IoSpecification
    from pynnet3.driver.compile_and_optimize import compile as compile_request
    from pynnet3.compute.computer import NnetComputer
    from pynnet3.io.table import read_table
    from pynnet3.model.am import AmNnetSimple, read_mdl, write_mdl
    from pynnet3.common.index import Index
    from pynnet3.nnet.nnet import Nnet
    nnet = Nnet.read(raw_in)
    key, x = next(iter(read_table("ark:" + feats)))
    ivectors = dict(read_table("ark:" + os.path.join(LARGE, "online-ivectors.ark")))[key]
    frames, context = 400, 40
    request = ComputationRequest()
    request.store_component_stats = True
    request.inputs = [IoSpecification.from_t_range("input", -context, frames + context),
                      IoSpecification("ivector", [Index(0, 0, 0)])]
    request.outputs = [IoSpecification.from_t_range("output", 0, frames)]
    computer = NnetComputer(compile_request(nnet, request), nnet, nnet_to_store_stats=nnet)
    rows = np.clip(np.arange(-context, frames + context), 0, len(x) - 1)
    computer.accept_input("input", np.ascontiguousarray(np.asarray(x)[rows], dtype=np.float32))
    computer.accept_input("ivector", np.asarray(ivectors[20:21], dtype=np.float32))
    computer.run()
    trans_model, _ = read_mdl(os.path.join(CHAIN_REF, "final.mdl"))
    write_mdl(mdl_out, trans_model, AmNnetSimple(nnet))


def first_utterances(n, out_path):
    """decode/large's first ``n`` utterances as an archive (all 20: the
    original file)."""
    if n >= 20:
        return os.path.join(LARGE, "feats.ark")
    from pynnet3.io.table import TableWriter, read_table
    with TableWriter("ark:" + out_path) as w:
        for i, (key, value) in enumerate(read_table("ark:" + os.path.join(LARGE, "feats.ark"))):
            if i < n:
                w.write(key, value)
    return out_path


# -- running -----------------------------------------------------------------------------------

def run_case(case, reps, out_dir):
    """Alternating runs; returns {"kaldi"|"ours": [(wall, cpu, rss, load)], "same": [..]}."""
    runs = {"kaldi": [], "ours": [], "same": []}
    have_kaldi = kaldi_available()
    if have_kaldi:
        kenv, _ = kaldi_env()
    for rep in range(reps):
        for who in (("kaldi", "ours") if rep % 2 == 0 else ("ours", "kaldi")):
            if who == "kaldi" and not have_kaldi:
                continue
            before = load()
            if who == "kaldi":
                argv = [os.path.join(KALDI_BIN, "bin", "nnet3-latgen-faster")]
                env = kenv
            else:
                argv = [sys.executable, "-m", "pynnet3.bin.nnet3_latgen_faster"]
                env = our_env()
            wall, cpu, rss, _ = timed(argv + case.argv(out_dir, who), case.cwd, env)
            runs[who].append((wall, cpu, rss, before))
            print("  %-5s %-6s run %d: wall %7.2f s  CPU %7.2f s  peak RSS %7.1f MB  "
                  "(load before: %s)" % (case.name, who, rep + 1, wall, cpu, rss, before),
                  flush=True)
        if have_kaldi:
            same = all(read_output(out_dir, kind, "ours") == read_output(out_dir, kind, "kaldi")
                       for kind in ("words.%s.txt", "ali.%s.txt"))
            runs["same"].append(same)
    return runs


def recorded_kaldi_wall(name):
    """Kaldi's wall times in kaldi-timings.txt (another machine)."""
    path = os.path.join(LARGE, "kaldi-timings.txt")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        for line in f:
            m = re.match(r"^(\w+)\s+decode\.\w+\.cmd\s+([\d. ]+)$", line.strip())
            if m and m.group(1) == name:
                return statistics.median(float(x) for x in m.group(2).split())
    return None


def table(results, utts):
    med = statistics.median
    lines = ["| case | Kaldi wall s | ours wall s | ratio wall | Kaldi CPU s | ours CPU s | "
             "ratio CPU | Kaldi peak RSS MB | ours peak RSS MB | RSS ours/Kaldi | load | "
             "words & alignments = Kaldi's |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, runs in results:
        ours = runs["ours"]
        ow, oc, orss = med(r[0] for r in ours), med(r[1] for r in ours), max(r[2] for r in ours)
        loads = [r[3].split()[0] for r in ours + runs["kaldi"]]
        load_text = "%s-%s" % (min(loads, key=float), max(loads, key=float))
        if runs["kaldi"]:
            kr = runs["kaldi"]
            kw, kc, krss = med(r[0] for r in kr), med(r[1] for r in kr), max(r[2] for r in kr)
            same = "%d/%d runs" % (sum(runs["same"]), len(runs["same"]))
            lines.append("| %s (%d utts) | %.2f | %.2f | **%.2fx** | %.2f | %.2f | **%.2fx** | "
                         "%.0f | %.0f | %.2f | %s | %s |"
                         % (name, utts, kw, ow, kw / ow, kc, oc, kc / oc, krss, orss,
                            orss / krss, load_text, same))
        else:
            rec = recorded_kaldi_wall(name) if utts == 20 else None
            lines.append("| %s (%d utts) | %s | %.2f | - | - | %.2f | - | - | %.0f | - | %s | "
                         "(no Kaldi here) |"
                         % (name, utts, ("%.2f recorded on another machine (AMD EPYC), "
                                         "not comparable" % rec) if rec else "-",
                            ow, oc, orss, load_text))
    return "\n".join(lines)


def breakdown(case, num_utts):
    """CPU seconds in-process: network, search, raw lattice + best path,
    determinization (our default BLAS arithmetic)."""
    import numpy as np
    from pynnet3.bin import _latgen, nnet3_latgen_faster as tool
    from pynnet3.bin._cli import ToolParser
    from pynnet3.decoding.api import make_decoder
    from pynnet3.decoding.decodable import DecodableAmNnetSimple as Decodable
    from pynnet3.decoding.determinize_lattice import determinize_lattice_phone_pruned_wrapper
    from pynnet3.decoding.token_lattice import raw_lattice_and_best_path
    from pynnet3.io.table import RandomAccessTableReader, read_table
    parser = ToolParser(tool.USAGE)
    _latgen.register_latgen_options(parser)
    opts, args = parser.parse(["--print-args=false", "--online-ivector-period=10"]
                              + case.options + [case.model, case.graph, "ark:x", "ark:y"],
                              num_args=(4, 6))
    cwd = os.getcwd()
    os.chdir(case.cwd)
    try:
        setup = _latgen.LatgenSetup(opts, case.model, case.graph)
        setup.load_graph()
        decoder = make_decoder(setup.fst, setup.config)
        ivectors = RandomAccessTableReader("ark:" + case.ivectors)
        t = dict(network=0.0, search=0.0, lattice=0.0, determinize=0.0)
        frames = 0
        for key, feats in list(read_table("ark:" + case.feats))[:num_utts]:
            c = time.process_time()
            d = Decodable(setup.computer, setup.tid_to_pdf, np.asarray(feats),
                          online_ivectors=ivectors.value(key), online_ivector_period=10)
            t["network"] += time.process_time() - c
            c = time.process_time()
            decoder.decode(d.loglikes, d.tid_to_pdf)
            t["search"] += time.process_time() - c
            c = time.process_time()
            lat, _ = raw_lattice_and_best_path(decoder.token_lattice())
            lat.connect()
            t["lattice"] += time.process_time() - c
            c = time.process_time()
            determinize_lattice_phone_pruned_wrapper(setup.trans_model, lat,
                                                     float(np.float32(opts.lattice_beam)),
                                                     setup.det_opts)
            t["determinize"] += time.process_time() - c
            frames += d.num_frames_ready()
    finally:
        os.chdir(cwd)
    print("  %s, where our time goes (CPU s, in-process, %d utterances, %d decoded frames): "
          "network %.2f, search %.2f, raw lattice + best path %.2f, determinization %.2f"
          % (case.name, num_utts, frames, t["network"], t["search"], t["lattice"],
             t["determinize"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="default,narrow,chain")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--utts", type=int, default=20)
    parser.add_argument("--kaldi-root", default=os.environ.get("KALDI_ROOT", ""))
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(),
                                                          "pynnet3-bench-decode"))
    parser.add_argument("--breakdown", action="store_true")
    a = parser.parse_args()
    if a.breakdown and (os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get(
            "OMP_NUM_THREADS")) != ("1", "1"):
        # The breakdown runs in this process: it must have the tools' single
        # BLAS thread, set before NumPy loads OpenBLAS (an idle OpenBLAS
        # thread spins after each product, and process_time counts it in
        # whatever runs next).
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"))
    print("CPU: %s, %d cores; load average: %s" % (cpu_model(), os.cpu_count(), load()))
    if kaldi_available():
        print("Kaldi: %s nnet3-latgen-faster, OpenBLAS kernels: %s; both tools: "
              "OPENBLAS_NUM_THREADS=1" % (os.path.normpath(KALDI_BIN), kaldi_env()[1]))
    else:
        print("no ../shared/kaldi-bin: ours runs alone")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        feats = first_utterances(a.utts, os.path.join(tmp, "feats.ark"))
        for name in a.cases.split(","):
            case = (build_chain_case(os.path.abspath(a.workdir), a.kaldi_root, feats)
                    if name == "chain" else large_case(name, feats))
            if case is None:
                continue
            print("%s: %s" % (name, " ".join(case.options)), flush=True)
            results.append((name, run_case(case, a.reps, tmp)))
            if a.breakdown:
                breakdown(case, a.utts)
    print("\nload average at the end: %s\n" % load())
    print("CPU: %s; OPENBLAS_NUM_THREADS=1; medians of %d runs each, alternating; ratio = "
          "Kaldi's time / ours (> 1: faster than Kaldi); peak RSS: the largest of the runs\n"
          % (cpu_model(), a.reps))
    print(table(results, a.utts))


if __name__ == "__main__":
    main()
