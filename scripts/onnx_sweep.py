#!/usr/bin/env python
"""Every Kaldi reference case through the ONNX export, against Kaldi's
outputs (not a test: the full sweep; tests/test_onnx_*.py run parts of it).

- models: for every ``models/NAME/compute.VARIANT.cmd`` (nnet3-compute) and
  ``xvector.VARIANT.cmd`` (nnet3-xvector-compute), nnet3-to-onnx with the
  command's options, then nnet3-compute-onnx / nnet3-xvector-compute-onnx
  with the same command line on the .onnx: the archive must equal Kaldi's
  within 1e-4 x max(1, max|kaldi|) per utterance, or both must refuse (Kaldi's
  log has an ERROR line and no archive);
- random: every ``random/caseN`` whose request has no derivatives exported
  as one computation (pynnet3.onnx.computation.request_model) and run in
  onnxruntime on ``inputs.ark``: ``outputs.ark`` within the same tolerance
  (with --every-request, every case: the forward pass of a training request,
  its derivatives dropped, gives Kaldi's outputs too);
- with --any-length, every chunk model is the length-generic graph.

Usage: python scripts/onnx_sweep.py [--models] [--random] [--every-request]
         [--any-length] [--keep=DIR]
Prints one line per case and a summary; exit status 1 if anything differs.
"""

import argparse
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
REF = Path(os.environ.get("PYNNET3_KALDI_REF", REPO.parent / "shared" / "kaldi-ref"))
sys.path.insert(0, str(REPO))

TOLERANCE = 1e-4

# nnet3-to-onnx takes these options of the tools' command lines
EXPORT_OPTIONS = ("frames-per-chunk", "extra-left-context", "extra-right-context",
                  "extra-left-context-initial", "extra-right-context-final",
                  "frame-subsampling-factor", "online-ivector-period", "use-priors")


def relative_error(ours, kaldi):
    ours = np.asarray(ours, np.float64)
    kaldi = np.asarray(kaldi, np.float64)
    if ours.shape != kaldi.shape:
        return float("inf")
    if kaldi.size == 0:
        return 0.0
    return float(np.abs(ours - kaldi).max()) / max(1.0, float(np.abs(kaldi).max()))


def compare_archives(ours_path, kaldi_path, kind):
    from pynnet3.io.table import read_table
    kaldi = dict(read_table("ark:%s" % kaldi_path, kind))
    ours = dict(read_table("ark:%s" % ours_path, kind))
    if set(ours) != set(kaldi):
        return float("inf"), "utterances %s vs Kaldi's %s" % (sorted(ours), sorted(kaldi))
    worst = max(relative_error(ours[k], kaldi[k]) for k in kaldi)
    return worst, "%d utterances" % len(kaldi)


def run_tool(main, argv, cwd):
    """Runs a tool's main() in ``cwd``; returns its exit status."""
    here = os.getcwd()
    os.chdir(cwd)
    try:
        return main(argv)
    finally:
        os.chdir(here)


def model_case(folder, cmd_file, workdir, extra_export=()):
    """(status, detail) of one Kaldi command of a model folder."""
    import importlib
    from pynnet3.bin import nnet3_to_onnx
    argv = shlex.split(cmd_file.read_text())
    tool, args = argv[0], argv[1:]
    options = [a for a in args if a.startswith("--")]
    positional = [a for a in args if not a.startswith("--")]
    nnet, rspec, wspec = positional
    kaldi_ark = folder / wspec.split(":", 1)[1]
    kaldi_refused = not kaldi_ark.is_file()
    export_opts = [o for o in options if o[2:].split("=")[0] in EXPORT_OPTIONS]
    is_xvector = tool == "nnet3-xvector-compute"
    if is_xvector:
        export_opts = ["--xvector=true"]
    else:
        export_opts += list(extra_export)
    onnx_path = workdir / (cmd_file.stem + ".onnx")
    ours_ark = workdir / (cmd_file.stem + ".ark")
    for p in (onnx_path, ours_ark):
        if p.exists():
            p.unlink()
    status = run_tool(nnet3_to_onnx.main, export_opts + [nnet, str(onnx_path)], folder)
    if status != 0:
        return ("refused" if kaldi_refused else "FAILED",
                "nnet3-to-onnx exit %d" % status)
    runner = importlib.import_module("pynnet3.bin." + ("nnet3_xvector_compute_onnx" if is_xvector
                                                       else "nnet3_compute_onnx"))
    status = run_tool(runner.main, options + [str(onnx_path), rspec, "ark:%s" % ours_ark],
                      folder)
    if kaldi_refused:
        ok = status != 0 and not ours_ark.exists()
        return ("refused" if ok else "FAILED",
                "Kaldi refused; ours exit %d%s" % (status, ", archive written"
                                                   if ours_ark.exists() else ""))
    if status != 0:
        return "FAILED", "nnet3-compute-onnx exit %d" % status
    err, detail = compare_archives(ours_ark, kaldi_ark, "vector" if is_xvector else "matrix")
    return ("ok" if err <= TOLERANCE else "DIFF"), "max rel err %.2g, %s" % (err, detail)


def sweep_models(workdir, extra_export=()):
    results = []
    for folder in sorted((REF / "models").iterdir()):
        cmds = sorted(folder.glob("compute.*.cmd")) + sorted(folder.glob("xvector.*.cmd"))
        for cmd in cmds:
            try:
                status, detail = model_case(folder, cmd, workdir, extra_export)
            except Exception as e:     # a bug: report it and go on
                status, detail = "ERROR", "%s: %s" % (type(e).__name__, e)
            print("%-20s %-32s %-8s %s" % (folder.name, cmd.stem, status, detail), flush=True)
            results.append(status)
    return results


def inference_only(case):
    text = (case / "request.txt").read_text()
    return (all(h == "F" for h in re.findall(r"<HasDeriv> (\w)", text))
            and "<NeedModelDerivative> F" in text)


def sweep_random(every_request=False):
    import onnxruntime
    from pynnet3.compiler.request import ComputationRequest
    from pynnet3.io.table import read_table
    from pynnet3.nnet.nnet import Nnet
    from pynnet3.onnx.computation import request_model
    results = []
    cases = sorted((REF / "random").glob("case*"), key=lambda p: int(p.name[4:]))
    for case in cases:
        if not (every_request or inference_only(case)):
            continue
        try:
            nnet = Nnet.read(str(case / "model.raw"))
            request = ComputationRequest.read(str(case / "request.txt"))
            # the forward pass of a training request: its derivatives dropped
            for io in list(request.inputs) + list(request.outputs):
                io.has_deriv = False
            request.need_model_derivative = False
            model = request_model(nnet, request)
            session = onnxruntime.InferenceSession(model.SerializeToString(),
                                                   providers=["CPUExecutionProvider"])
            feeds = {k: v[None] for k, v in read_table("ark:%s" % (case / "inputs.ark"),
                                                        "matrix")}
            names = [o.name for o in session.get_outputs()]
            outs = dict(zip(names, session.run(names, feeds)))
            err = max(relative_error(outs[k][0], v)
                      for k, v in read_table("ark:%s" % (case / "outputs.ark"), "matrix"))
            status = "ok" if err <= TOLERANCE else "DIFF"
            detail = "max rel err %.2g, %d nodes" % (err, len(model.graph.node))
        except Exception as e:
            status, detail = "NOT EXPORTED", "%s: %s" % (type(e).__name__, e)
        print("%-20s %-8s %s" % (case.name, status, detail), flush=True)
        results.append(status)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", action="store_true")
    parser.add_argument("--random", action="store_true")
    parser.add_argument("--keep", help="folder for the exported models and archives")
    parser.add_argument("--every-request", action="store_true",
                        help="random: also the forward pass of the requests with "
                             "derivatives (their derivatives dropped)")
    parser.add_argument("--any-length", action="store_true",
                        help="export every chunk computation as a graph for any length "
                             "(nnet3-to-onnx --any-length=true)")
    args = parser.parse_args()
    if not (args.models or args.random):
        args.models = args.random = True
    if not REF.is_dir():
        sys.exit("kaldi-ref not found at %s" % REF)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.keep or tmp).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        if args.models:
            results = sweep_models(workdir, ["--any-length=true"] if args.any_length else [])
            print("models: %d matched, %d refused as Kaldi refuses, %d not matching"
                  % (results.count("ok"), results.count("refused"),
                     len(results) - results.count("ok") - results.count("refused")))
            bad += len(results) - results.count("ok") - results.count("refused")
        if args.random:
            results = sweep_random(args.every_request)
            print("random: %d of %d %s exported and matched"
                  % (results.count("ok"), len(results),
                     "requests (forward pass)" if args.every_request
                     else "inference-only requests"))
            bad += len(results) - results.count("ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
