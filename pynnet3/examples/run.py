"""``python -m pynnet3.examples [OUTPUT]``: pynnet3 on the shipped examples,
each compared with what Kaldi made of the same files
(``python -m pynnet3.examples --dir`` prints the examples' folder).

1. ``nnet3-info``: the header of ``tdnn_lda.raw``'s info, and whether the
   whole text equals Kaldi's ``tdnn_lda.info.txt``.
2. ``nnet3-compute``: pynnet3's tool, run in this process with the options of
   ``compute.apply_exp.cmd``, against ``compute.apply_exp.ark``; with OUTPUT
   (a wspecifier such as ``ark:out.ark`` or ``ark,t:-``; a plain path means
   ``ark:PATH``) its output is also written there.
3. Streaming: :class:`pynnet3.DecodableNnetLoopedOnline` fed 10 frames at a
   time with each utterance's i-vector, against ``nnet3-compute
   --ivectors`` (``compute.ivectors.ark``).
4. x-vectors: :func:`pynnet3.compute_xvector` against
   ``nnet3-xvector-compute`` (``xvector.default.ark``).
5. Decoding: :class:`pynnet3.Decoder` with ``final.mdl`` and ``HCLG.fst``
   and the options of ``decode.narrow.cmd``: its best-path words and
   alignment against ``nnet3-latgen-faster``'s.

Numbers agree when max |ours - kaldi| <= 1e-5 * max(1, max |kaldi|) per
utterance; words and alignments must be equal. Exit status 0 when
everything agrees, 1 otherwise.
"""

import os
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

from .files import path
from ..tables import read_table
from ..errors import PynnetError
import logging
from ..bin import nnet3_compute
from ..log import set_program_name
from ..compute.decodable_simple_looped import DecodableNnetLoopedOnline
from ..nnet.nnet import Nnet
from ..compute.api import compute_xvector
from ..decoding.api import Decoder
from ..compute.utterance import SimpleNnetComputer, prepare_nnet_for_compute
from ..model.info import nnet_info
from ..io.table import classify_wspecifier
from ..tables import write_table

__all__ = ["TOLERANCE", "Check", "load_kaldi_outputs", "check_compute", "check_streaming",
           "check_xvector", "check_decode", "main"]

#: Numbers agree when max |ours - kaldi| <= TOLERANCE * max(1, max |kaldi|).
TOLERANCE = 1e-5

# compute.apply_exp.cmd's options
COMPUTE_OPTIONS = ["--online-ivectors=ark:online-ivectors.ark", "--online-ivector-period=10",
                   "--apply-exp=true", "--frames-per-chunk=1000"]
# decode.narrow.cmd's options
DECODE_OPTIONS = dict(beam=8, lattice_beam=4, max_active=200, acoustic_scale=0.1)
STREAM_PIECE = 10          # frames given to the stream at a time
STREAM_CHUNK = 20          # its frames_per_chunk

USAGE = """Runs pynnet3 on the examples shipped in the package (a TDNN acoustic model, an
x-vector extractor, a decoding graph, features and i-vectors) and compares each
result with real Kaldi's output for the same files.

Usage: python -m pynnet3.examples [<output-wspecifier>]
 e.g.: python -m pynnet3.examples ark:out.ark
(writes pynnet3's nnet3-compute output there; a plain path means ark:<path>)
       python -m pynnet3.examples --dir
(prints the folder that holds the example files, e.g. ex=$(python -m pynnet3.examples --dir))
"""


@dataclass
class Check:
    """One utterance of one check: what was compared (``detail``), how far
    apart (``max_abs_diff``, for numbers) and whether it agrees (``ok``)."""

    what: str
    utterance: str
    detail: str
    ok: bool
    max_abs_diff: float = 0.0


def _read(name, kind=None):
    return dict(read_table("ark:" + path(name), kind))


def load_kaldi_outputs():
    """Kaldi's outputs for the examples: a dict with ``"compute"``,
    ``"streaming"`` (nnet3-compute with per-utterance i-vectors),
    ``"xvector"`` (utterance -> array), ``"words"`` and ``"alignment"``
    (utterance -> list of ints)."""
    return {"compute": _read("compute.apply_exp.ark"),
            "streaming": _read("compute.ivectors.ark"),
            "xvector": _read("xvector.default.ark"),
            "words": {k: list(v) for k, v in _read("words.narrow.txt", "int32_vector").items()},
            "alignment": {k: list(v) for k, v
                          in _read("ali.narrow.txt", "int32_vector").items()}}


def _compare(what, utt, ours, kaldi, detail):
    kaldi = np.asarray(kaldi)
    if ours is None or np.shape(ours) != kaldi.shape:
        return Check(what, utt, "%s: shape %s, Kaldi's %s" % (detail, np.shape(ours),
                                                                kaldi.shape), False, np.inf)
    diff = float(np.abs(np.asarray(ours, np.float64) - kaldi).max(initial=0.0))
    scale = max(1.0, float(np.abs(kaldi).max(initial=0.0)))
    return Check(what, utt, "%s max|ours-kaldi|=%.3g max|kaldi|=%.4g"
                 % (detail, diff, scale if scale > 1.0 else np.abs(kaldi).max(initial=0.0)),
                 diff <= TOLERANCE * scale, diff)


def _kaldi_key(kaldi, utt):
    if utt not in kaldi:
        raise PynnetError("Kaldi's output has no utterance %s" % utt)
    return kaldi[utt]


def run_nnet3_compute(output_wspecifier):
    """Runs pynnet3's ``nnet3-compute`` tool in this process with the options
    of ``compute.apply_exp.cmd`` on the shipped files; returns its exit
    status (its log goes to stderr)."""
    folder = os.path.dirname(path("feats.ark"))
    options = [o.replace("ark:online-ivectors.ark",
                         "ark:" + os.path.join(folder, "online-ivectors.ark"))
               for o in COMPUTE_OPTIONS]
    root = logging.getLogger()
    level = root.level
    try:
        return nnet3_compute.main(["--print-args=false"] + options + [
            path("tdnn_lda.raw"), "ark:" + path("feats.ark"), output_wspecifier])
    finally:
        # The tool shows its LOG lines, as Kaldi's; the rest of the example
        # shows warnings only.
        root.setLevel(level)
        set_program_name("pynnet3.examples")


def check_compute(kaldi):
    """nnet3-compute (pynnet3's tool) against Kaldi's: (checks, outputs)."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = os.path.join(tmp, "output.ark")
        if run_nnet3_compute("ark:" + archive) != 0:
            raise PynnetError("nnet3-compute failed on the example (see its log above)")
        outputs = dict(read_table("ark:" + archive))
    checks = [_compare("nnet3-compute", utt, out, _kaldi_key(kaldi["compute"], utt),
                       "frames=%d output-dim=%d" % out.shape)
              for utt, out in outputs.items()]
    return checks, outputs


def check_streaming(kaldi):
    """The streaming API, STREAM_PIECE frames at a time, against Kaldi's
    nnet3-compute with the same (per-utterance) i-vectors."""
    nnet = Nnet.read(path("tdnn_lda.raw"))
    ivectors = _read("ivectors.ark")
    checks = []
    info = None      # the compiled looped computation, shared by the streams
    for utt, feats in _read("feats.ark").items():
        if info is None:
            stream = DecodableNnetLoopedOnline(nnet, frames_per_chunk=STREAM_CHUNK)
            info = stream.info
        else:
            stream = DecodableNnetLoopedOnline(info)
        pieces = []
        for start in range(0, feats.shape[0], STREAM_PIECE):
            stream.accept_features(feats[start:start + STREAM_PIECE], ivectors[utt])
            pieces.append(stream.get_new_outputs())
        stream.input_finished()
        pieces.append(stream.get_new_outputs())
        ours = np.concatenate(pieces)
        checks.append(_compare("streaming", utt, ours, _kaldi_key(kaldi["streaming"], utt),
                               "frames=%d" % ours.shape[0]))
    return checks


def check_xvector(kaldi):
    """compute_xvector against nnet3-xvector-compute."""
    nnet = Nnet.read(path("xvector.raw"))
    checks = []
    for utt, feats in _read("xvector-feats.ark").items():
        xvector = compute_xvector(nnet, feats)
        checks.append(_compare("x-vector", utt, xvector, _kaldi_key(kaldi["xvector"], utt),
                               "frames=%d dim=%d" % (feats.shape[0], xvector.shape[0])))
    return checks


def check_decode(kaldi):
    """Decoder (final.mdl, HCLG.fst) against nnet3-latgen-faster: best-path
    words and alignment."""
    with open(path("words.txt"), encoding="utf-8") as f:
        symbols = {int(i): w for w, i in (line.split() for line in f if line.strip())}
    decoder = Decoder(path("final.mdl"), path("HCLG.fst"), **DECODE_OPTIONS)
    online_ivectors = _read("online-ivectors.ark")
    checks = []
    for utt, feats in _read("feats.ark").items():
        result = decoder(feats, online_ivectors=online_ivectors[utt], online_ivector_period=10,
                         utt=utt)
        words = [] if result is None else list(result.words)
        alignment = [] if result is None else list(result.alignment)
        want_words = _kaldi_key(kaldi["words"], utt)
        same = words == want_words and alignment == _kaldi_key(kaldi["alignment"], utt)
        text = " ".join(symbols.get(w, str(w)) for w in words)
        want_text = " ".join(symbols.get(w, str(w)) for w in want_words)
        checks.append(Check("decoding", utt, "words='%s' (Kaldi: '%s') alignment of %d "
                            "transition-ids %s Kaldi's" % (
                                text, want_text, len(alignment),
                                "equal to" if same else "DIFFERENT from"), same))
    return checks


def _info_header(nnet):
    """nnet3-info's text for ``nnet`` and its lines before the config lines."""
    computer = SimpleNnetComputer(prepare_nnet_for_compute(nnet.copy()))
    text = nnet_info(nnet, (computer.nnet_left_context, computer.nnet_right_context))
    keys = ("left-context:", "right-context:", "num-parameters:", "modulus:")
    return [line for line in text.splitlines() if line.startswith(keys)], text


def _wspecifier(arg):
    return arg if classify_wspecifier(arg)[0] is not None else "ark:" + arg


def _writes_stdout(wspecifier):
    kind, archive, script, _ = classify_wspecifier(wspecifier)
    return "-" in (archive, script) or (kind in ("ark", "both") and archive == "")


def _report(out, title, checks):
    out.write("# %s\n" % title)
    for c in checks:
        out.write("%s: %s %s\n" % (c.utterance, c.detail, "ok" if c.ok else "DIFFERS"))
    out.flush()


def main(argv=None, out=None):
    """``python -m pynnet3.examples``: computes the examples with pynnet3 and
    compares each with Kaldi's output (this module).

    Args:
        argv: the command-line arguments (default ``sys.argv[1:]``).
        out: where the report goes (default standard output).

    Returns:
        The exit status: 0 when everything agrees with Kaldi, 1 otherwise
        (also when a file cannot be read: one ERROR line on stderr).

    Raises:
        Nothing on bad input: errors become the ERROR line and status 1.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv == ["--dir"]:
        (out or sys.stdout).write(os.path.dirname(path("feats.ark")) + "\n")
        return 0
    if any(a in ("-h", "--help") for a in argv) or len(argv) > 1 or argv[:1] == ["--dir"]:
        sys.stderr.write(USAGE)
        return 0 if len(argv) <= 1 else 1
    wspecifier = _wspecifier(argv[0]) if argv else None
    if out is None:
        # An archive written to standard output keeps it to itself.
        to_stdout = wspecifier is not None and _writes_stdout(wspecifier)
        out = sys.stderr if to_stdout else sys.stdout
    set_program_name("pynnet3.examples")
    groups = []
    try:
        kaldi = load_kaldi_outputs()
        header, info = _info_header(Nnet.read(path("tdnn_lda.raw")))
        with open(path("tdnn_lda.info.txt"), encoding="utf-8") as f:
            info_ok = info == f.read()
        out.write("# nnet3-info tdnn_lda.raw\n")
        for line in header:
            out.write(line + "\n")
        out.write("# nnet3-info output %s Kaldi's\n"
                  % ("identical to" if info_ok else "DIFFERS from"))
        out.flush()
        compute_checks, outputs = check_compute(kaldi)
        _report(out, "nnet3-compute %s tdnn_lda.raw vs Kaldi's compute.apply_exp.ark"
                % " ".join(COMPUTE_OPTIONS), compute_checks)
        if wspecifier is not None:
            write_table(wspecifier, outputs, "matrix")
        groups.append(("nnet3-compute", compute_checks))
        for title, name, run in (
                ("streaming: DecodableNnetLoopedOnline(tdnn_lda.raw, frames_per_chunk=%d), "
                 "%d frames at a time, vs Kaldi's compute.ivectors.ark"
                 % (STREAM_CHUNK, STREAM_PIECE), "streaming", check_streaming),
                ("x-vectors: compute_xvector(xvector.raw) vs Kaldi's xvector.default.ark",
                 "x-vector", check_xvector),
                ("decoding: Decoder(final.mdl, HCLG.fst, %s) vs Kaldi's words.narrow.txt, "
                 "ali.narrow.txt" % ", ".join("%s=%s" % kv for kv in DECODE_OPTIONS.items()),
                 "decoding", check_decode)):
            checks = run(kaldi)
            _report(out, title, checks)
            groups.append((name, checks))
    except PynnetError as e:
        sys.stderr.write("ERROR: %s\n" % e)
        return 1
    counts = ", ".join("%s %d/%d" % (name, sum(c.ok for c in checks), len(checks))
                       for name, checks in groups)
    bad = [c for _, checks in groups for c in checks if not c.ok]
    if not info_ok:
        out.write("FAILED: nnet3-info differs from Kaldi's\n")
    elif bad or any(not checks for _, checks in groups):
        out.write("FAILED: %s utterances agree with Kaldi (%s)\n"
                  % (counts, ", ".join("%s %s" % (c.what, c.utterance) for c in bad)))
    else:
        out.write("OK: %s utterances agree with Kaldi (numbers within %g * max(1, "
                  "max|kaldi|))\n" % (counts, TOLERANCE))
    out.flush()
    return 0 if info_ok and not bad and all(checks for _, checks in groups) else 1
