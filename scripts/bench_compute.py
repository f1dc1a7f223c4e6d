#!/usr/bin/env python
"""nnet3-compute / nnet3-xvector-compute: pynnet3 against Kaldi's own tool,
side by side on this machine.

For each case and thread count the script runs Kaldi's tool
(``../shared/kaldi-bin/kaldi TOOL ...``) and ours (``python -m
pynnet3.bin.TOOL ...``) alternately, ``--repeat`` pairs, on the same input
with the same options and ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``
(the kaldi runner sets ``OPENBLAS_CORETYPE`` for Kaldi's process where its
OpenBLAS 0.3.21 does not know the CPU; ours is never given one). Each run
is one child process, measured with GNU time (``/usr/bin/time``): wall
time, CPU time (user + system; the steadier figure on a shared machine) and
peak resident memory. The table gives the medians over the pairs, the ratio Kaldi / ours
(> 1: pynnet3 is faster) for CPU and wall time, both peak RSS and the load
average (1 minute) seen before each run, and names the CPU (``lscpu``).
Without ``../shared/kaldi-bin`` only our figures are measured, shown beside
the times in ``kaldi-ref/bench/kaldi-timings.txt``, labelled as recorded on
another machine (those are no fair opponent; no ratio is printed for them).

Inputs, made once in ``--workdir``: 20 utterances x 1000 frames of random
features (40-dim; 30-dim for the x-vector model) and 100-dim online
i-vectors every 10 frames (the ``*_utt`` cases: one 100-dim i-vector per
utterance, ``--ivectors``). Models are built with pynnet3's nnet3-init code
path (``Nnet.from_config``; parameters do not matter for speed):

- ``tdnnf_full``, ``tdnn_lstm_full``, ``xvector_full``: the configs in
  ``kaldi-ref/bench/models`` (the x-vector model gets extract.config's
  output node, as Kaldi's recipe does with nnet3-copy --nnet-config);
- ``chain_mini``, ``chain_wsj``, ``blstm_swbd``: chain models from Kaldi's
  recipes, ``scripts/bench_models/NAME/final.config`` as Kaldi's
  ``steps/nnet3/xconfig_to_configs.py`` wrote it from ``network.xconfig``
  (the recipe's xconfig, see its header); the LDA matrix is random.

Output layers that the xconfig initialises to zero get random weights
(N(0, 1/input-dim), biases N(0, 0.01)), and every batch-norm component gets
statistics from one pass over 1000 frames of random input in training mode,
so that test mode normalizes real activations (without statistics Kaldi and
pynnet3 would each invent random ones, and compute different networks).

``--check`` computes the first two utterances of each case with both tools
(outside the timing) and prints the largest difference of the outputs.
``--profile=CASE`` runs our side of one case once under cProfile.

Usage: python scripts/bench_compute.py [--repeat=3] [--threads=1,2]
         [--cases=tdnnf_default,...] [--workdir=/tmp/pynnet3-bench] [--check]
         [--profile=CASE] [--ours-options="--batch-size=2"]
"""

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
KALDI_REF = Path(os.environ.get("PYNNET3_KALDI_REF", SHARED / "kaldi-ref"))
BENCH = KALDI_REF / "bench"
KALDI = Path(os.environ.get("PYNNET3_KALDI_BIN", SHARED / "kaldi-bin")) / "kaldi"
MODELS = REPO / "scripts" / "bench_models"
NUM_UTTS, NUM_FRAMES = 20, 1000
# The random LDA's dimension (spliced features + i-vector) of the recipe models.
LDA_INPUT_DIM = {"chain_wsj": 3 * 40 + 100, "blstm_swbd": 5 * 40 + 100}
# Bumped when the way models are built changes, so old workdirs rebuild them.
MODEL_VERSION = "5"

CHAIN = ["--frame-subsampling-factor=3", "--frames-per-chunk=150"]
# case -> (model, tool, options, description)
CASES = {
    "tdnnf_default": ("tdnnf_full", "nnet3-compute", [],
                      "TDNN-F 20.7M (librispeech tdnn_1d dims), default options"),
    "tdnnf_sub3": ("tdnnf_full", "nnet3-compute", CHAIN,
                   "TDNN-F 20.7M, " + " ".join(CHAIN)),
    "chain_mini": ("chain_mini", "nnet3-compute", CHAIN,
                   "chain TDNN-F mini_librispeech 1j (768/96, 3000 pdfs), chain options"),
    "chain_wsj": ("chain_wsj", "nnet3-compute", CHAIN,
                  "chain TDNN-F wsj 1g (1024/128, 3500 pdfs), chain options"),
    "tdnn_lstm": ("tdnn_lstm_full", "nnet3-compute",
                  ["--frame-subsampling-factor=3", "--frames-per-chunk=140",
                   "--extra-left-context=40", "--extra-right-context=0",
                   "--extra-left-context-initial=0", "--extra-right-context-final=0"],
                  "TDNN-LSTM 36.4M, Kaldi's recipe options"),
    "xvector": ("xvector_full", "nnet3-xvector-compute", [], "x-vector extractor"),
    "blstm": ("blstm_swbd", "nnet3-compute",
              CHAIN + ["--extra-left-context=50", "--extra-right-context=50"],
              "chain BLSTM swbd 6j (3x2 lstmp 1024/256, 6000 pdfs), recipe options"),
}
# The same feed-forward cases with one i-vector per utterance (--ivectors)
# instead of online i-vectors: every chunk of an utterance then has the same
# i-vector, and pynnet3 merges consecutive chunks (Kaldi computes the context
# of each chunk again).
UTTERANCE_IVECTORS = ("tdnnf_default_utt", "tdnnf_sub3_utt", "chain_mini_utt", "chain_wsj_utt")
for _case in UTTERANCE_IVECTORS:
    _model, _tool, _options, _description = CASES[_case[:-len("_utt")]]
    CASES[_case] = (_model, _tool, _options, _description + ", one i-vector per utterance")
DEFAULT_CASES = ("tdnnf_default", "tdnnf_sub3", "chain_mini", "chain_wsj", "tdnn_lstm",
                 "xvector", "blstm") + UTTERANCE_IVECTORS

# Figures recorded once on another machine (kaldi-ref/bench/kaldi-timings.txt):
# shown only when kaldi-bin is absent, never as a ratio.
RECORDED = {("tdnnf_default", 2): 15.24, ("tdnnf_default", 1): 19.54,
            ("tdnnf_sub3", 2): 5.07, ("tdnnf_sub3", 1): 6.53,
            ("tdnn_lstm", 2): 31.02, ("xvector", 2): 1.95, ("xvector", 1): 1.95}


# -- the machine -------------------------------------------------------------------------------

def kaldi_kernels():
    """Which OpenBLAS kernels Kaldi's tools run with here: the runner's
    choice, or OpenBLAS's own, unless OPENBLAS_CORETYPE forces some (then
    said, since older kernels make Kaldi slower than it can be here)."""
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if forced:
        return ("%s, forced by OPENBLAS_CORETYPE in this environment (unset it to let "
                "Kaldi's OpenBLAS pick its own for this CPU)" % forced)
    core = subprocess.run([str(KALDI), "--coretype"], capture_output=True, text=True,
                          check=False).stdout.strip()
    return core or "OpenBLAS's own choice for this CPU"


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def machine_line():
    return "%s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg()))


# -- models and inputs ---------------------------------------------------------------------------

def _randomize_zero_outputs(nnet, rng):
    """Gives the output layers that xconfig initialises to zero random
    parameters (weights N(0, 1/input-dim), biases N(0, 0.1^2))."""
    for name, comp in zip(nnet.component_names, nnet.components):
        if not name.startswith("output") or not hasattr(comp, "linear_params"):
            continue
        if np.any(comp.linear_params):
            continue
        rows, cols = comp.linear_params.shape
        comp.linear_params = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(
            np.float32)
        comp.bias_params = (0.1 * rng.standard_normal(rows)).astype(np.float32)


def _batchnorm_stats(nnet, rng, num_frames=1000, pooled=False):
    """Batch-norm statistics from one forward pass in training mode over
    random input (dropout in test mode), left in the components as a
    trained model has them."""
    from pynnet3.compiler.request import ComputationRequest, IoSpecification
    from pynnet3.driver.compile_and_optimize import compile
    from pynnet3.model.context import compute_simple_nnet_context
    from pynnet3.compute.computer import NnetComputer
    from pynnet3.common.index import Index
    from pynnet3.nnet.component_ops import set_batchnorm_test_mode, set_dropout_test_mode
    if not any(c.type_name == "BatchNormComponent" for c in nnet.components):
        return
    set_dropout_test_mode(nnet, True)
    set_batchnorm_test_mode(nnet, False)
    request = ComputationRequest()
    request.need_model_derivative = False
    request.store_component_stats = True
    ivector_dim = nnet.input_dim("ivector")
    if pooled:
        # an x-vector extractor: one output over all the frames
        left = right = 0
        request.outputs = [IoSpecification("output", [Index(0, 0, 0)])]
    else:
        left, right = compute_simple_nnet_context(nnet)
        # every output (a chain model's xent branch has batch norms too)
        request.outputs = [IoSpecification.from_t_range(name, 0, num_frames)
                           for i, name in enumerate(nnet.node_names) if nnet.is_output_node(i)]
    request.inputs = [IoSpecification.from_t_range("input", -left, num_frames + right)]
    if ivector_dim > 0:
        request.inputs.append(IoSpecification("ivector", [Index(0, 0, 0)]))
    computer = NnetComputer(compile(nnet, request), nnet, nnet_to_store_stats=nnet)
    computer.accept_input("input", rng.standard_normal(
        (num_frames + left + right, nnet.input_dim("input"))).astype(np.float32))
    if ivector_dim > 0:
        computer.accept_input("ivector", rng.standard_normal((1, ivector_dim)).astype(
            np.float32))
    computer.run()
    set_dropout_test_mode(nnet, False)


def _write_lda(path, dim, rng):
    mat = (rng.standard_normal((dim, dim + 1)) / np.sqrt(dim)).astype(np.float32)
    with open(path, "w") as f:
        f.write(" [\n" + "\n".join("  " + " ".join("%.7g" % v for v in row)
                                   for row in mat) + " ]\n")


def build_model(name, workdir):
    """Builds ``workdir/NAME.raw`` (see the module docstring)."""
    import logging
    from pynnet3.nnet.nnet import Nnet
    rng = np.random.default_rng(7)
    if (MODELS / name).is_dir():
        folder = workdir / ("config." + name)
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "configs").mkdir(parents=True)
        shutil.copy(MODELS / name / "final.config", folder / "final.config")
        for extra in (MODELS / name).glob("*.mat"):
            shutil.copy(extra, folder / "configs" / extra.name)
        text = (folder / "final.config").read_text()
        if "configs/lda.mat" in text:
            _write_lda(folder / "configs" / "lda.mat", LDA_INPUT_DIM[name], rng)
    else:
        folder = BENCH / "models" / name
    cwd = os.getcwd()
    os.chdir(folder)     # final.config names configs/*.mat relative to it
    logging.disable(logging.WARNING)
    try:
        nnet = Nnet.from_config(str(folder / "final.config"))
        if name == "xvector_full":
            nnet.read_config("output-node name=output input=tdnn6.affine\n", "extract.config")
            _batchnorm_stats(nnet, rng, pooled=True)
        else:
            _randomize_zero_outputs(nnet, rng)
            _batchnorm_stats(nnet, rng)
    finally:
        logging.disable(logging.NOTSET)
        os.chdir(cwd)
    nnet.write(str(workdir / (name + ".raw")), True)


def prepare(workdir, models):
    """Builds the models and inputs once (kept in ``workdir``), and
    pynnet3's bytecode: an installed package has it, while a checkout run
    with PYTHONDONTWRITEBYTECODE set would compile every module in every
    run (0.2-0.3 s of CPU time)."""
    sys.path.insert(0, str(REPO))
    compileall.compile_dir(str(REPO / "pynnet3"), quiet=1)
    from pynnet3.io.table import TableWriter
    workdir.mkdir(parents=True, exist_ok=True)
    stamp = workdir / "models.version"
    if not stamp.is_file() or stamp.read_text() != MODEL_VERSION:
        for old in workdir.glob("*.raw"):
            old.unlink()
        stamp.write_text(MODEL_VERSION)
    for name in sorted(models):
        if not (workdir / (name + ".raw")).is_file():
            print("building %s ..." % name, flush=True)
            build_model(name, workdir)
    rng = np.random.default_rng(0)
    for dim, name in ((40, "feats40.ark"), (30, "feats30.ark")):
        path = workdir / name
        if not path.is_file():
            with TableWriter("ark:%s" % path, kind="matrix") as w:
                for i in range(NUM_UTTS):
                    w.write("utt%02d" % i, rng.standard_normal((NUM_FRAMES, dim),
                                                               dtype=np.float32))
    path = workdir / "ivectors.ark"
    if not path.is_file():
        with TableWriter("ark:%s" % path, kind="matrix") as w:
            for i in range(NUM_UTTS):
                w.write("utt%02d" % i, rng.standard_normal((NUM_FRAMES // 10, 100),
                                                           dtype=np.float32))
    path = workdir / "ivectors_utt.ark"
    if not path.is_file():
        with TableWriter("ark:%s" % path, kind="vector") as w:
            for i in range(NUM_UTTS):
                w.write("utt%02d" % i, rng.standard_normal(100, dtype=np.float32))


# -- running -------------------------------------------------------------------------------------

def arguments(case, workdir, feats=None, output="ark:/dev/null"):
    """The tool's arguments (options, model, features, output) for a case."""
    model, tool, options, _ = CASES[case]
    args = list(options)
    if tool == "nnet3-compute":
        if case in UTTERANCE_IVECTORS:
            args += ["--ivectors=ark:%s" % (workdir / "ivectors_utt.ark")]
        else:
            args += ["--online-ivectors=ark:%s" % (workdir / "ivectors.ark"),
                     "--online-ivector-period=10"]
        feats = feats or "ark:%s" % (workdir / "feats40.ark")
    else:
        feats = feats or "ark:%s" % (workdir / "feats30.ark")
    return args + [str(workdir / (model + ".raw")), feats, output]


def kaldi_argv(case, workdir, **kw):
    return [str(KALDI), CASES[case][1]] + arguments(case, workdir, **kw)


def ours_argv(case, workdir, extra=(), **kw):
    module = "pynnet3.bin." + CASES[case][1].replace("-", "_")
    return [sys.executable, "-m", module] + list(extra) + arguments(case, workdir, **kw)


def environment(threads, ours):
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(threads)
    if ours:
        env.pop("OPENBLAS_CORETYPE", None)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class Run:
    __slots__ = ("wall", "cpu", "rss_mb", "load")

    def __init__(self, wall, cpu, rss_mb, load):
        self.wall, self.cpu, self.rss_mb, self.load = wall, cpu, rss_mb, load


TIME = shutil.which("time", path="/usr/bin:/bin")


def run_once(argv, env):
    """One run of a tool as a child process: wall and CPU seconds (user +
    system), peak RSS (MB) and the load before it started. The child is
    started through GNU time, whose own small process is what forks: a
    child forked from this (large) Python process would report this
    process's RSS as its peak (the kernel keeps the high-water mark across
    fork and exec)."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as usage:
        prefix = [TIME, "-q", "-o", usage.name, "-f", "%e %U %S %M"] if TIME else []
        start = time.perf_counter()
        proc = subprocess.Popen(prefix + argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            raise SystemExit("failed (exit %d): %s\n%s" % (
                code, " ".join(argv), err.read()[-3000:].decode(errors="replace")))
        if TIME:
            fields = usage.read().split()
            cpu = float(fields[1]) + float(fields[2])
            rss_mb = float(fields[3]) / 1024.0
        else:
            cpu = rusage.ru_utime + rusage.ru_stime
            rss_mb = float("nan")      # see the docstring: not measurable this way
    return Run(wall, cpu, rss_mb, load)


def check(case, workdir, threads):
    """Largest |difference| between Kaldi's and our output on the first two
    utterances (not timed)."""
    from pynnet3.io.table import SequentialTableReader, TableWriter
    with tempfile.TemporaryDirectory() as tmp:
        tool = CASES[case][1]
        source = workdir / ("feats30.ark" if tool == "nnet3-xvector-compute" else "feats40.ark")
        with TableWriter("ark:%s/feats.ark" % tmp, kind="matrix") as w:
            for i, (key, value) in enumerate(SequentialTableReader("ark:%s" % source,
                                                                   "matrix")):
                if i == 2:
                    break
                w.write(key, value)
        kind = "vector" if tool == "nnet3-xvector-compute" else "matrix"
        outs = []
        for who, argv in (("kaldi", kaldi_argv), ("ours", ours_argv)):
            out = "%s/%s.ark" % (tmp, who)
            run_once(argv(case, workdir, feats="ark:%s/feats.ark" % tmp, output="ark:" + out),
                     environment(threads, who == "ours"))
            outs.append(dict(SequentialTableReader("ark:" + out, kind)))
        worst = 0.0
        scale = 0.0
        for key, k in outs[0].items():
            o = outs[1][key]
            worst = max(worst, float(np.max(np.abs(np.asarray(k) - np.asarray(o)))))
            scale = max(scale, float(np.max(np.abs(k))))
        return worst, scale


def profile(case, workdir, threads, extra=()):
    """Our side of a case once under cProfile (in a child, so that the BLAS
    thread count is set before NumPy loads); prints the top functions."""
    argv = ours_argv(case, workdir, extra)
    argv = argv[:1] + ["-m", "cProfile", "-s", "tottime"] + argv[1:]
    result = subprocess.run(argv, env=environment(threads, True), capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise SystemExit("profiled run failed:\n" + result.stderr[-2000:])
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    print("\n".join(lines[max(0, start - 6):start + 30]))


def median(values):
    return statistics.median(values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="alternating pairs per case")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES),
                        help="from: " + ", ".join(CASES))
    parser.add_argument("--workdir", default="/tmp/pynnet3-bench")
    parser.add_argument("--ours-options", default="",
                        help="extra options for our tool only (e.g. --batch-size=4)")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--profile", default="")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    cases = args.cases.split(",")
    for case in cases + ([args.profile] if args.profile else []):
        if case not in CASES:
            parser.error("unknown case %r (have: %s)" % (case, ", ".join(CASES)))
    prepare(workdir, {CASES[c][0] for c in cases + ([args.profile] if args.profile else [])})
    threads = [int(t) for t in args.threads.split(",")]
    extra = args.ours_options.split()
    if args.profile:
        profile(args.profile, workdir, threads[0], extra)
        return
    have_kaldi = KALDI.is_file()
    print("Machine: %s" % machine_line())
    if have_kaldi:
        print("Kaldi's OpenBLAS kernels: %s" % kaldi_kernels())
    print("Input: %d utterances x %d frames; %d alternating pair(s) per row, medians; "
          "ratio = Kaldi / pynnet3 (> 1: pynnet3 faster)%s\n" % (
              NUM_UTTS, NUM_FRAMES, args.repeat,
              "; pynnet3 options: " + args.ours_options if extra else ""), flush=True)
    if have_kaldi:
        print("| case | threads | Kaldi CPU s | pynnet3 CPU s | ratio CPU | Kaldi wall s | "
              "pynnet3 wall s | ratio wall | Kaldi peak RSS MB | pynnet3 peak RSS MB | "
              "RSS pynnet3/Kaldi | load |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    else:
        print("(no %s: Kaldi not measured here; Kaldi's figures are recorded on another "
              "machine, AMD EPYC, kaldi-ref/bench/kaldi-timings.txt, and are no fair "
              "opponent)\n" % KALDI)
        print("| case | threads | pynnet3 CPU s | pynnet3 wall s | pynnet3 peak RSS MB | "
              "Kaldi wall s recorded elsewhere | load |")
        print("|---|---|---|---|---|---|---|", flush=True)
    notes = []
    for case in cases:
        for t in threads:
            kaldi_runs, our_runs = [], []
            for _ in range(args.repeat):
                if have_kaldi:
                    kaldi_runs.append(run_once(kaldi_argv(case, workdir),
                                               environment(t, False)))
                our_runs.append(run_once(ours_argv(case, workdir, extra),
                                         environment(t, True)))
            ours = Run(*(median(getattr(r, f) for r in our_runs)
                         for f in ("wall", "cpu", "rss_mb", "load")))
            loads = [r.load for r in kaldi_runs + our_runs]
            load = "%.1f-%.1f" % (min(loads), max(loads))
            if have_kaldi:
                k = Run(*(median(getattr(r, f) for r in kaldi_runs)
                          for f in ("wall", "cpu", "rss_mb", "load")))
                print("| %s | %d | %.2f | %.2f | **%.2fx** | %.2f | %.2f | %.2fx | %.0f | %.0f | "
                      "%.2f | %s |" % (case, t, k.cpu, ours.cpu, k.cpu / ours.cpu, k.wall,
                                       ours.wall, k.wall / ours.wall, k.rss_mb, ours.rss_mb,
                                       ours.rss_mb / k.rss_mb, load), flush=True)
            else:
                recorded = RECORDED.get((case, t))
                print("| %s | %d | %.2f | %.2f | %.0f | %s | %s |" % (
                    case, t, ours.cpu, ours.wall, ours.rss_mb,
                    "%.2f" % recorded if recorded else "-", load), flush=True)
        if args.check and have_kaldi:
            worst, scale = check(case, workdir, threads[0])
            notes.append("%s: outputs of Kaldi and pynnet3 on 2 utterances differ by at most "
                         "%.3g (largest |output| %.3g)" % (case, worst, scale))
    print()
    for case in cases:
        print("- %s: %s; `%s %s`" % (case, CASES[case][3], CASES[case][1],
                                     " ".join(CASES[case][2]) or "(default options)"))
    for note in notes:
        print("- " + note)
    print("\nload average after: %s" % " ".join("%.2f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    main()
