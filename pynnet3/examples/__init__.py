"""The example shipped with pynnet3: a Kaldi model, features, and what Kaldi's
``nnet3-compute`` made of them.

Run it with ``python -m pynnet3.examples [OUTPUT]`` (``scripts/run_example.sh``).
It reads the shipped model, prints ``nnet3-info``'s header lines for it,
runs the ``nnet3-compute`` tool on it with the shipped command's options,
writes the outputs to the table OUTPUT if given (a wspecifier such as
``ark:out.ark`` or ``ark,t:-``; a plain path means ``ark:PATH``), and compares
each utterance with Kaldi's output. Exit status 0 when every utterance agrees
within max |ours - kaldi| <= 1e-3 * max(1, max |kaldi|), 1 otherwise.

Files (all from Kaldi 5.5, kaldi-ref ``models/tdnn_lda``):

- ``tdnn_lda.raw`` — the raw nnet3 network (a TDNN with an LDA-like fixed
  affine layer, batch-norm, an ``ivector`` input), binary; Kaldi's
  ``model.raw``.
- ``tdnn_lda.info.txt`` — ``nnet3-info model.raw``.
- ``feats.ark`` — 4 utterances of 13-dim features (7, 50, 173, 301 frames).
- ``online-ivectors.ark`` — 10-dim online i-vectors, one per 10 frames.
- ``compute.apply_exp.ark`` — Kaldi's output for the command in
  ``compute.apply_exp.cmd`` (``nnet3-compute --online-ivectors=... 
  --online-ivector-period=10 --apply-exp=true --frames-per-chunk=1000``, where
  ``model.raw`` is ``tdnn_lda.raw``), its log in ``compute.apply_exp.log``.
  With 1000 frames per chunk every utterance is computed as a single chunk.

Note on this reference: the model's output layer was initialized by Kaldi's
xconfig with zero weights and bias (``param-stddev=0.0 bias-stddev=0.0``), so
its output is exactly uniform (1/30 after exp) whatever the features; the
comparison checks shapes, i-vector and context handling and that nothing
breaks, not the hidden layers' arithmetic (pynnet3's tests check that against
Kaldi's random networks).
"""

from dataclasses import dataclass
from importlib import resources
import os
import sys
import tempfile

import numpy as np

from ..bin import nnet3_compute
from ..compute.utterance import (SimpleComputationOptions, SimpleNnetComputer, apply_exp,
                                 prepare_nnet_for_compute)
from ..errors import PynnetError
from ..io.table import TableWriter, classify_wspecifier, read_table
from ..model.info import nnet_info
from ..nnet.nnet import Nnet

__all__ = ["example_file", "ExampleSetup", "UtteranceResult", "load_example",
           "compute_example", "run_nnet3_compute", "main"]

MODEL = "tdnn_lda.raw"
KALDI_INFO = "tdnn_lda.info.txt"
FEATS = "feats.ark"
ONLINE_IVECTORS = "online-ivectors.ark"
KALDI_OUTPUT = "compute.apply_exp.ark"

# The options of compute.apply_exp.cmd.
ONLINE_IVECTOR_PERIOD = 10
FRAMES_PER_CHUNK = 1000
APPLY_EXP = True

USAGE = """Run pynnet3 on the shipped example (Kaldi's tdnn_lda model and features) and
compare with Kaldi's nnet3-compute output.

Usage: python -m pynnet3.examples [<output-wspecifier>]
 e.g.: python -m pynnet3.examples ark:out.ark
(a plain path means ark:<path>)
"""


def example_file(name):
    """Path (str) of a shipped example file; the package is installed as
    plain files, so this is a real file on disk."""
    path = resources.files(__name__).joinpath(name)
    if not path.is_file():
        raise PynnetError("example file %s is missing from the installed package "
                          "(expected at %s)" % (name, path))
    return str(path)


@dataclass(slots=True)
class ExampleSetup:
    """Everything the example reads: the network as read (``nnet``), its
    ``nnet3-info`` text as Kaldi printed it, the inputs and Kaldi's output
    (dicts utterance -> float32 matrix, in archive order)."""

    nnet: object
    kaldi_info: str
    features: dict
    online_ivectors: dict
    kaldi_output: dict


@dataclass(slots=True)
class UtteranceResult:
    utterance: str
    output: np.ndarray          # ours, after exp
    max_abs_diff: float         # max |ours - kaldi|
    max_abs_kaldi: float

    @property
    def tolerance(self):
        return 1e-3 * max(1.0, self.max_abs_kaldi)

    @property
    def ok(self):
        return self.max_abs_diff <= self.tolerance


def load_example():
    with open(example_file(KALDI_INFO), encoding="utf-8") as f:
        kaldi_info = f.read()
    return ExampleSetup(
        nnet=Nnet.read(example_file(MODEL)),
        kaldi_info=kaldi_info,
        features=dict(read_table("ark:" + example_file(FEATS))),
        online_ivectors=dict(read_table("ark:" + example_file(ONLINE_IVECTORS))),
        kaldi_output=dict(read_table("ark:" + example_file(KALDI_OUTPUT))))


def _max_abs_diff(ours, kaldi):
    if ours.shape != kaldi.shape:
        return float("inf")
    return float(np.abs(ours.astype(np.float64) - kaldi).max(initial=0.0))


def _results(setup, outputs):
    """UtteranceResults of our outputs (a dict, archive order) against Kaldi's."""
    results = []
    for utt, output in outputs.items():
        kaldi = setup.kaldi_output.get(utt)
        if kaldi is None:
            raise PynnetError("the shipped Kaldi output has no utterance " + utt)
        results.append(UtteranceResult(utt, output, _max_abs_diff(output, kaldi),
                                       float(np.abs(kaldi).max(initial=0.0))))
    return results


def compute_example(setup, computer=None):
    """Our output for every utterance (nnet3-compute's options of the shipped
    command, computed by the engine nnet3-compute runs, chunk by chunk) and
    how it compares with Kaldi's; a list of UtteranceResult.
    ``setup.nnet`` is prepared for computing (test modes) in place."""
    if computer is None:
        prepare_nnet_for_compute(setup.nnet)
        computer = SimpleNnetComputer(
            setup.nnet, SimpleComputationOptions(frames_per_chunk=FRAMES_PER_CHUNK))
    outputs = {}
    for utt, feats in setup.features.items():
        if utt not in setup.online_ivectors:
            raise PynnetError("No online iVector available for utterance " + utt)
        output = computer.compute_utterance(
            feats, online_ivectors=setup.online_ivectors[utt],
            online_ivector_period=ONLINE_IVECTOR_PERIOD)
        outputs[utt] = apply_exp(output) if APPLY_EXP else output
    return _results(setup, outputs)


def run_nnet3_compute(output_wspecifier):
    """Runs our ``nnet3-compute`` tool (in this process) with the shipped
    command's options on the shipped files; returns its exit status. Its
    Kaldi-style log goes to stderr."""
    return nnet3_compute.main([
        "--print-args=false", "--online-ivectors=ark:" + example_file(ONLINE_IVECTORS),
        "--online-ivector-period=%d" % ONLINE_IVECTOR_PERIOD,
        "--apply-exp=%s" % str(APPLY_EXP).lower(), "--frames-per-chunk=%d" % FRAMES_PER_CHUNK,
        example_file(MODEL), "ark:" + example_file(FEATS), output_wspecifier])


def _info_header(nnet, context):
    """nnet3-info's lines before the network's config lines."""
    keys = ("left-context:", "right-context:", "num-parameters:", "modulus:")
    text = nnet_info(nnet, context)
    return [line for line in text.splitlines() if line.startswith(keys)], text


def _wspecifier(arg):
    return arg if classify_wspecifier(arg)[0] is not None else "ark:" + arg


def _writes_stdout(wspecifier):
    kind, archive, script, _ = classify_wspecifier(wspecifier)
    return "-" in (archive, script) or (kind in ("ark", "both") and archive == "")


def main(argv=None, out=None):
    """The example's command line; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv) or len(argv) > 1:
        sys.stderr.write(USAGE)
        return 0 if len(argv) <= 1 else 1
    wspecifier = _wspecifier(argv[0]) if argv else None
    if out is None:
        # An archive written to standard output keeps it to itself.
        to_stdout = wspecifier is not None and _writes_stdout(wspecifier)
        out = sys.stderr if to_stdout else sys.stdout
    try:
        setup = load_example()
        # The header comes from the network as read, as nnet3-info prints it.
        nnet = setup.nnet
        prepared = prepare_nnet_for_compute(nnet.copy())
        computer = SimpleNnetComputer(
            prepared, SimpleComputationOptions(frames_per_chunk=FRAMES_PER_CHUNK))
        header, info = _info_header(nnet, (computer.nnet_left_context,
                                           computer.nnet_right_context))
        out.write("# nnet3-info %s\n" % MODEL)
        for line in header:
            out.write(line + "\n")
        out.write("# nnet3-info output %s Kaldi's\n"
                  % ("identical to" if info == setup.kaldi_info else "DIFFERS from"))
        out.write("# nnet3-compute --online-ivector-period=%d --apply-exp=%s "
                  "--frames-per-chunk=%d\n" % (ONLINE_IVECTOR_PERIOD,
                                               str(APPLY_EXP).lower(), FRAMES_PER_CHUNK))
        # The outputs come from the nnet3-compute tool itself.
        with tempfile.TemporaryDirectory() as tmp:
            archive = os.path.join(tmp, "output.ark")
            if run_nnet3_compute("ark:" + archive) != 0:
                raise PynnetError("nnet3-compute failed on the example (see its log above)")
            outputs = dict(read_table("ark:" + archive))
        results = _results(setup, outputs)
        if wspecifier is not None:
            with TableWriter(wspecifier, kind="matrix") as writer:
                for r in results:
                    writer.write(r.utterance, r.output)
    except PynnetError as e:
        sys.stderr.write("ERROR: %s\n" % e)
        return 1
    worst = 0.0
    for r in results:
        worst = max(worst, r.max_abs_diff)
        out.write("%s: frames=%d output-dim=%d max|ours-kaldi|=%.3g max|kaldi|=%.4g %s\n"
                  % (r.utterance, r.output.shape[0], r.output.shape[1], r.max_abs_diff,
                     r.max_abs_kaldi, "ok" if r.ok else "DIFFERS"))
    num_bad = sum(1 for r in results if not r.ok)
    frames = sum(r.output.shape[0] for r in results)
    if num_bad:
        out.write("FAILED: %d of %d utterances differ from Kaldi's nnet3-compute beyond "
                  "1e-3*max(1,max|kaldi|) (worst max|ours-kaldi|=%.3g)\n"
                  % (num_bad, len(results), worst))
    else:
        out.write("OK: %d utterances, %d frames, all within 1e-3*max(1,max|kaldi|) of "
                  "Kaldi's nnet3-compute (worst max|ours-kaldi|=%.3g)\n"
                  % (len(results), frames, worst))
    out.flush()
    return 1 if num_bad or not results else 0
