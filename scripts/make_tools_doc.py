#!/usr/bin/env python3
"""Writes docs/tools.md, the reference of pynnet3's command-line tools: for
each tool its usage and options (the tool's own ``--help``), what differs
from Kaldi's tool of that name, and an example that runs on the shipped
example files.

    python scripts/make_tools_doc.py           # rewrite docs/tools.md
    python scripts/make_tools_doc.py --check   # exit 1 if it is stale

tests/test_docs.py checks that docs/tools.md is up to date, that it covers
exactly the console scripts of pyproject.toml, and runs every example.
"""

import contextlib
import importlib
import io
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(os.path.dirname(HERE), "docs", "tools.md")

EX = "ex=$(python -m pynnet3.examples --dir)\n"

# (family, [(tool, what differs from Kaldi's tool, example)]); an empty
# difference means: none beyond what every tool shares (see the page's top).
FAMILIES = [
    ("Networks", [
        ("nnet3-init", "", EX + '''cat > tiny.config <<'EOF'
input-node name=input dim=4
component name=affine type=NaturalGradientAffineComponent input-dim=8 output-dim=3
component-node name=affine component=affine input=Append(Offset(input, -1), input)
output-node name=output input=affine
EOF
nnet3-init --srand=1 tiny.config tiny.raw
nnet3-info tiny.raw > info.txt
head -4 info.txt
'''),
        ("nnet3-info", "", EX + '''nnet3-info "$ex/tdnn_lda.raw" > info.txt
cmp info.txt "$ex/tdnn_lda.info.txt" && echo "identical to Kaldi's"
'''),
        ("nnet3-copy", "", EX + '''nnet3-copy --binary=false "$ex/tdnn_lda.raw" model.txt
nnet3-copy --prepare-for-test=true "$ex/tdnn_lda.raw" prepared.raw
nnet3-copy --edits='set-learning-rate name=* learning-rate=0.0001' model.txt edited.raw
'''),
        ("nnet3-am-info", "", EX + '''nnet3-am-info "$ex/final.mdl" | cmp - "$ex/final.am-info.txt" && echo "identical to Kaldi's"
'''),
        ("nnet3-am-copy", "", EX + '''nnet3-am-copy --raw=true "$ex/final.mdl" final.raw
nnet3-am-copy --binary=false "$ex/final.mdl" final.txt.mdl
'''),
    ]),
    ("Computing", [
        ("nnet3-compute",
         "`--batch-size=N` (pynnet3 only) computes chunks of up to N utterances together, "
         "and `--chunks-per-computation` (pynnet3 only; automatic by default) chunks of one "
         "utterance (the same numbers within float rounding; larger products for BLAS). "
         "Where the network's outputs do not depend on the chunking (not recurrent, no "
         "statistics pooling, no IfDefined or Failover; see `pynnet3/nnet/chunking.py`), "
         "consecutive chunks with the same i-vector are computed as one longer chunk, "
         "without the context Kaldi computes again for each chunk; the tool says so once, "
         "and `--chunks-per-computation=1` computes Kaldi's chunks. With "
         "BLAS arithmetic, `OPENBLAS_NUM_THREADS=N` runs the chunk batches on N threads of "
         "the tool's own, each with single-threaded BLAS; the threads go on with the next "
         "utterance while the last one is written (the output is the one 1 thread writes, "
         "byte for byte). `--kaldi-exact-arithmetic` and "
         "`--kaldi-exact-blas-threads` (pynnet3 only) choose Kaldi's CPU arithmetic bit for "
         "bit; by default the BLAS arithmetic agrees with Kaldi within float32 rounding. "
         "`--use-gpu` selects the CuPy backend when CuPy is installed (otherwise, as a Kaldi "
         "build without CUDA, it is only checked).",
         EX + '''nnet3-compute --online-ivectors=ark:"$ex/online-ivectors.ark" --online-ivector-period=10 \\
  "$ex/tdnn_lda.raw" ark:"$ex/feats.ark" ark,t:output.txt
nnet3-compute --ivectors=ark:"$ex/ivectors.ark" --frames-per-chunk=20 \\
  "$ex/tdnn_lda.raw" ark:"$ex/feats.ark" ark:- | gzip -c > output.ark.gz
'''),
        ("nnet3-xvector-compute",
         "`--kaldi-exact-arithmetic` and `--kaldi-exact-blas-threads` as for nnet3-compute.",
         EX + '''nnet3-xvector-compute "$ex/xvector.raw" ark:"$ex/xvector-feats.ark" ark,t:xvectors.txt
nnet3-xvector-compute --chunk-size=100 --min-chunk-size=25 \\
  "$ex/xvector.raw" ark:"$ex/xvector-feats.ark" ark:xvectors.ark
'''),
    ]),
    ("Decoding", [
        ("nnet3-latgen-faster",
         "The network is computed with Kaldi's CPU arithmetic or with BLAS arithmetic, as "
         "`--kaldi-exact-arithmetic` (pynnet3 only; its default is in the options below) "
         "says; with Kaldi's arithmetic the lattices are Kaldi's byte for byte. Only a "
         "single graph file is accepted (not an archive of per-utterance graphs). Kaldi's "
         "`--memory-pool-tokens-block-size` and `--memory-pool-links-block-size` are not "
         "accepted.",
         EX + '''nnet3-latgen-faster --online-ivectors=ark:"$ex/online-ivectors.ark" --online-ivector-period=10 \\
  --acoustic-scale=0.1 --beam=8 --lattice-beam=4 --max-active=200 --word-symbol-table="$ex/words.txt" \\
  "$ex/final.mdl" "$ex/HCLG.fst" ark:"$ex/feats.ark" ark:lat.ark ark,t:words.txt ark,t:ali.txt
cmp words.txt "$ex/words.narrow.txt" && cmp ali.txt "$ex/ali.narrow.txt" && echo "Kaldi's words and alignments"
'''),
        ("nnet3-latgen-faster-parallel",
         "`--num-threads` runs that many worker threads (Kaldi's TaskSequencer design: the "
         "search, raw-lattice and determinization kernels release the GIL); as Kaldi's, it "
         "decodes every utterance as a new decoder does, so the outputs, in input order, do not "
         "depend on the thread count: each utterance's are what nnet3-latgen-faster gives "
         "for it on its own (nnet3-latgen-faster keeps one decoder, whose hash table size, "
         "carried from one utterance to the next, orders tokens of equal cost: the two "
         "tools can give other words for an utterance, in Kaldi as here). A failing "
         "utterance ends the tool with Kaldi's error and no output file. As with Kaldi, set "
         "`OPENBLAS_NUM_THREADS=1` when running several workers. Otherwise as "
         "nnet3-latgen-faster.",
         EX + '''OPENBLAS_NUM_THREADS=1 nnet3-latgen-faster-parallel --num-threads=2 \\
  --online-ivectors=ark:"$ex/online-ivectors.ark" --online-ivector-period=10 \\
  --acoustic-scale=0.1 --beam=8 --lattice-beam=4 --max-active=200 \\
  "$ex/final.mdl" "$ex/HCLG.fst" ark:"$ex/feats.ark" ark:lat.ark ark,t:words.txt
cmp words.txt "$ex/words.narrow.txt" && echo "Kaldi's words"
'''),
    ]),
    ("Converting and drawing (pynnet3 only)", [
        ("nnet3-to-onnx",
         "No Kaldi counterpart: writes a standard ONNX model of nnet3-compute's chunk "
         "computation (`--streaming=true`: the looped computation of online decoding, "
         "taking one chunk and the state; `--xvector=true`: nnet3-xvector-compute's). See "
         "docs/onnx.md.",
         EX + '''nnet3-to-onnx --frames-per-chunk=1000 "$ex/tdnn_lda.raw" tdnn_lda.onnx
'''),
        ("nnet3-compute-onnx",
         "No Kaldi counterpart: nnet3-compute's options and outputs, the network run by "
         "onnxruntime from a model written by nnet3-to-onnx.",
         EX + '''nnet3-to-onnx --frames-per-chunk=1000 "$ex/tdnn_lda.raw" tdnn_lda.onnx
nnet3-compute-onnx --online-ivectors=ark:"$ex/online-ivectors.ark" --online-ivector-period=10 \\
  tdnn_lda.onnx ark:"$ex/feats.ark" ark,t:output.txt
'''),
        ("nnet3-xvector-compute-onnx",
         "No Kaldi counterpart: nnet3-xvector-compute's options and outputs, the network run "
         "by onnxruntime from a model written by `nnet3-to-onnx --xvector=true`.",
         EX + '''nnet3-to-onnx --xvector=true "$ex/xvector.raw" xvector.onnx
nnet3-xvector-compute-onnx xvector.onnx ark:"$ex/xvector-feats.ark" ark,t:xvectors.txt
'''),
        ("nnet3-to-dot",
         "Kaldi's nnet3 has no such tool (nnet2 had nnet-to-dot): writes a Graphviz DOT "
         "picture of any network, layers grouped; with a third argument it also runs "
         "Graphviz's `dot` to write the picture. See docs/drawing.md.",
         EX + '''nnet3-to-dot "$ex/tdnn_lda.raw" tdnn_lda.dot
nnet3-to-dot --expand-layers=false "$ex/tdnn_lda.raw" tdnn_lda.overview.dot
'''),
    ]),
    ("Lattices", [
        ("lattice-copy", "", EX + '''lattice-copy ark:"$ex/lat.narrow.ark" ark,t:lat.txt
lattice-copy --write-compact=false ark:"$ex/lat.narrow.ark" ark:raw-lat.ark
'''),
        ("lattice-scale", "", EX + '''lattice-scale --acoustic-scale=0.1 --lm-scale=1.0 ark:"$ex/lat.narrow.ark" ark:scaled.ark
'''),
        ("lattice-add-penalty", "", EX + '''lattice-add-penalty --word-ins-penalty=0.5 ark:"$ex/lat.narrow.ark" ark:penalized.ark
'''),
        ("lattice-prune",
         "The OpenFst property bits in the written lattices' headers are recomputed from "
         "the content, not tracked through pruning as OpenFst does (Kaldi's headers may "
         "carry more known bits); there is no Kaldi output in the reference set to compare "
         "with byte for byte.",
         EX + '''lattice-prune --acoustic-scale=0.1 --beam=2 ark:"$ex/lat.narrow.ark" ark:pruned.ark
'''),
        ("lattice-best-path", "", EX + '''lattice-best-path --acoustic-scale=0.1 --word-symbol-table="$ex/words.txt" \\
  ark:"$ex/lat.narrow.ark" ark,t:words.txt ark,t:ali.txt
'''),
        ("lattice-1best", "", EX + '''lattice-1best --acoustic-scale=0.1 ark:"$ex/lat.narrow.ark" ark:1best.ark
'''),
        ("lattice-mbr-decode", "", EX + '''lattice-mbr-decode --acoustic-scale=0.1 --word-symbol-table="$ex/words.txt" \\
  ark:"$ex/lat.narrow.ark" ark,t:words.txt ark,t:bayes-risk.txt
'''),
        ("lattice-depth-per-frame",
         "As lattice-prune, the header property bits of the lattices it passes on are "
         "recomputed.",
         EX + '''lattice-depth-per-frame ark:"$ex/lat.narrow.ark" ark,t:depth.txt
'''),
    ]),
    ("Alignments and scoring", [
        ("ali-to-phones", "", EX + '''ali-to-phones --per-frame=false "$ex/final.mdl" ark:"$ex/ali.narrow.txt" ark,t:phones.txt
'''),
        ("compute-wer", "", '''printf 'utt1 a b c\\nutt2 d e\\n' > ref.txt
printf 'utt1 a x c\\nutt2 d e f\\n' > hyp.txt
compute-wer --text --mode=present ark:ref.txt ark:hyp.txt
'''),
        ("align-text", "", '''printf 'utt1 a b c\\n' > ref.txt
printf 'utt1 a c d\\n' > hyp.txt
align-text ark:ref.txt ark:hyp.txt ark,t:-
'''),
        ("compute-wer-bootci", "", '''printf 'utt1 a b c\\nutt2 d e\\nutt3 f g h\\n' > ref.txt
printf 'utt1 a x c\\nutt2 d e\\nutt3 f h\\n' > hyp.txt
compute-wer-bootci ark:ref.txt ark:hyp.txt
'''),
    ]),
    ("Features", [
        ("compute-cmvn-stats", "", EX + '''compute-cmvn-stats ark:"$ex/feats.ark" ark,t:cmvn.txt
'''),
        ("apply-cmvn", "", EX + '''compute-cmvn-stats ark:"$ex/feats.ark" ark:cmvn.ark
apply-cmvn --norm-vars=true ark:cmvn.ark ark:"$ex/feats.ark" ark:normalized.ark
'''),
    ]),
]

# What an example prints (checked by tests/test_docs.py), where it is stable.
OUTPUTS = {
    "nnet3-init": "left-context: 1\nright-context: 0\nnum-parameters: 27\nmodulus: 1",
    "nnet3-info": "identical to Kaldi's",
    "nnet3-am-info": "identical to Kaldi's",
    "nnet3-latgen-faster": "Kaldi's words and alignments",
    "nnet3-latgen-faster-parallel": "Kaldi's words",
    "compute-wer": "%WER 40.00 [ 2 / 5, 1 ins, 0 del, 1 sub ]\n%SER 100.00 [ 2 / 2 ]\n"
                   "Scored 2 sentences, 0 not present in hyp.",
    "align-text": "utt1 a a ; b c ; c d",
    "compute-wer-bootci": "Set1: %WER 24.14 95% Conf Interval [ 7.87, 40.41 ]",
}

PREAMBLE = """# Command-line tools

pynnet3 installs these tools as console scripts named like Kaldi's (`pip install`
puts them in the environment's `bin/`); `scripts/path.sh` puts shims of the same
names first on a recipe's PATH (see the cookbook). They take Kaldi's arguments
and write Kaldi's outputs, so recipes call them unchanged.

What every tool shares with Kaldi's:

- the usage text, positional arguments and options (`--name=value`, `--name value`
  for non-booleans, `--config=FILE`, `--help`, `--print-args`, `--verbose`), as the
  usage below shows;
- rspecifiers and wspecifiers (`ark:`, `scp:`, `ark,scp:`, `ark,t:`, options such as
  `s`, `cs`, `p`, `o`), rxfilenames and wxfilenames (`-`, pipes `cmd |` and `| cmd`,
  `file:offset`, ranges `[r1:r2]`);
- log lines on stderr (`LOG`, `WARNING`, `ERROR`, `VLOG[n]`), the command line
  echoed first, and the exit status (255 after an error, 1 for a wrong argument count
  or when nothing was processed), with no half-written output file after an error.

What differs for every tool: log lines name pynnet3's Python function, file and line
(`LOG (nnet3-compute[5.5]:main():nnet3_compute.py:287) ...`) where Kaldi names its
C++ ones, and an internal error (a bug) is one ERROR line saying so (the traceback
with `--verbose=1` or `PYNNET3_TRACEBACK=1`). How each tool's outputs were checked
against Kaldi's is in the README.

This page is generated by `python scripts/make_tools_doc.py` from the tools' own
`--help`; every example on it runs in the test suite, on the files shipped in
`pynnet3.examples` (`python -m pynnet3.examples --dir` prints their folder).
"""


def tool_help(tool):
    """The tool's --help text (usage and options), as it prints it."""
    from pynnet3.log import set_program_name
    module = importlib.import_module("pynnet3.bin." + tool.replace("-", "_"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = module.main(["--help"])
    set_program_name(None)
    if status != 0:
        raise RuntimeError("%s --help exited with %s" % (tool, status))
    return err.getvalue().strip("\n")


def tools():
    return [tool for _, members in FAMILIES for tool, _, _ in members]


def render():
    out = [PREAMBLE]
    for family, members in FAMILIES:
        out.append("- %s: %s" % (family, ", ".join("[`%s`](#%s)" % (t, t)
                                                   for t, _, _ in members)))
    out.append("")
    for family, members in FAMILIES:
        out += ["## %s" % family, ""]
        for tool, differences, example in members:
            out += ["### %s" % tool, "", "```text", tool_help(tool), "```", ""]
            out += ["Differences from Kaldi's %s: %s" % (
                tool, differences or "none beyond those of every tool (above)."), ""]
            out += ["Example:", "", "```sh", example.rstrip("\n"), "```", ""]
            if tool in OUTPUTS:
                out += ["```output", OUTPUTS[tool], "```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv):
    text = render()
    if "--check" in argv:
        with open(OUTPUT, encoding="utf-8") as f:
            if f.read() != text:
                sys.stderr.write("make_tools_doc: docs/tools.md is stale\n")
                return 1
        return 0
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
