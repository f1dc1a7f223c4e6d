"""A small, complete set of Kaldi files shipped with pynnet3, and what real
Kaldi (5.5) made of them: the files the quick start, the cookbook and
``python -m pynnet3.examples`` use.

:func:`path` gives a file's location wherever the package is installed;
:data:`FILES` lists them. The models have random parameters (they come from
the Kaldi reference set pynnet3 is tested against), so their outputs are
numbers, not speech; every layer, the output layer included, has non-zero
parameters, so the outputs vary from frame to frame and depend on every layer.

Acoustic model (a TDNN with an LDA-like fixed layer, batch-norm and an
``ivector`` input; 13-dim features, 10-dim i-vectors, 30 pdfs):

- ``tdnn_lda.raw`` — the network, binary; ``tdnn_lda.info.txt`` — what
  ``nnet3-info tdnn_lda.raw`` prints.
- ``final.mdl`` — the same network as an acoustic model (transition model,
  network, priors); ``final.am-info.txt`` — ``nnet3-am-info final.mdl``.
- ``feats.ark`` — 4 utterances (utt1..utt4: 7, 50, 173, 301 frames);
  ``online-ivectors.ark`` — their online i-vectors, one row per 10 frames;
  ``ivectors.ark`` — one i-vector per utterance (each utterance's first
  online i-vector, written by pynnet3).
- ``compute.apply_exp.ark`` — ``nnet3-compute`` with the online i-vectors,
  ``--apply-exp=true --frames-per-chunk=1000``;
  ``compute.ivectors.ark`` — ``nnet3-compute --ivectors=ark:ivectors.ark``
  (the streaming example's reference).
- ``HCLG.fst``, ``words.txt`` — a decoding graph (Kaldi's mkgraph.sh over a
  16-word lexicon and a word loop) and its word symbols;
  ``lat.narrow.ark``, ``words.narrow.txt``, ``ali.narrow.txt`` —
  ``nnet3-latgen-faster``'s lattices, best-path words (integers) and
  alignments (transition-ids) with ``--beam=8 --lattice-beam=4
  --max-active=200 --acoustic-scale=0.1``.

x-vector extractor (23-dim features, 48-dim x-vectors):

- ``xvector.raw`` — the network; ``xvector.info.txt`` — its ``nnet3-info``;
- ``xvector-feats.ark`` — 4 utterances; ``xvector.default.ark`` —
  ``nnet3-xvector-compute``'s x-vectors for them.

Each Kaldi output ``NAME.ark`` has ``NAME.cmd``, the exact command, run in
this folder, that wrote it, and ``NAME.log``, its stderr. The commands set
``OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=2``: OpenBLAS's kernels and
thread count decide Kaldi's last bits, and with these, Kaldi's tools write
these files byte for byte (pynnet3's ``backend="kaldi-exact"`` reproduces
that arithmetic; its default BLAS arithmetic agrees within float32
rounding).

Example::

    from pynnet3 import examples

    print(examples.path("final.mdl"))
    print(sorted(examples.FILES)[:3])
"""

from importlib import resources

__all__ = ["path", "FILES", "main"]

#: The shipped files, name -> what it holds.
FILES = {
    "tdnn_lda.raw": "acoustic network (raw nnet3, binary)",
    "tdnn_lda.info.txt": "nnet3-info tdnn_lda.raw",
    "final.mdl": "the same network as an acoustic model (transition model, priors)",
    "final.am-info.txt": "nnet3-am-info final.mdl",
    "feats.ark": "features of utt1..utt4 (13-dim; 7, 50, 173, 301 frames)",
    "online-ivectors.ark": "online i-vectors of utt1..utt4 (10-dim, one per 10 frames)",
    "ivectors.ark": "one i-vector per utterance (10-dim)",
    "compute.apply_exp.ark": "Kaldi's nnet3-compute output (online i-vectors, --apply-exp)",
    "compute.apply_exp.cmd": "the command that wrote compute.apply_exp.ark",
    "compute.apply_exp.log": "its log",
    "compute.ivectors.ark": "Kaldi's nnet3-compute output (--ivectors=ark:ivectors.ark)",
    "compute.ivectors.cmd": "the command that wrote compute.ivectors.ark",
    "compute.ivectors.log": "its log",
    "HCLG.fst": "decoding graph (16 words, word loop)",
    "words.txt": "word symbol table of HCLG.fst",
    "lat.narrow.ark": "Kaldi's nnet3-latgen-faster lattices (narrow beams)",
    "words.narrow.txt": "their best-path words (integers)",
    "ali.narrow.txt": "their best-path alignments (transition-ids)",
    "decode.narrow.cmd": "the command that wrote lat/words/ali.narrow",
    "decode.narrow.log": "its log",
    "xvector.raw": "x-vector extractor network",
    "xvector.info.txt": "nnet3-info xvector.raw",
    "xvector-feats.ark": "features for the x-vector network (23-dim, 4 utterances)",
    "xvector.default.ark": "Kaldi's nnet3-xvector-compute x-vectors",
    "xvector.default.cmd": "the command that wrote xvector.default.ark",
    "xvector.default.log": "its log",
}


def path(name):
    """The location of a shipped example file.

    Args:
        name: the file's name, one of :data:`FILES` (e.g. ``"final.mdl"``).

    Returns:
        The file's path (a str): a real file on disk, wherever pynnet3 is
        installed.

    Raises:
        PynnetError: ``name`` is not an example file, or the installed
            package lacks it.

    Example::

        import pynnet3
        from pynnet3 import examples

        nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
    """
    from ..errors import PynnetError
    if name not in FILES:
        raise PynnetError("'%s' is not an example file (the examples are: %s)"
                          % (name, ", ".join(sorted(FILES))))
    location = resources.files(__name__).joinpath(name)
    if not location.is_file():
        raise PynnetError("example file %s is missing from the installed package "
                          "(expected at %s)" % (name, location))
    return str(location)


def main(argv=None, out=None):
    """``python -m pynnet3.examples``: computes the examples with pynnet3 and
    compares each with Kaldi's output (see :mod:`pynnet3.examples.run`).

    Args:
        argv: the command-line arguments (default ``sys.argv[1:]``).
        out: where the report goes (default standard output).

    Returns:
        The exit status: 0 when everything agrees with Kaldi, 1 otherwise
        (also when a file cannot be read: one ERROR line on stderr).

    Raises:
        Nothing on bad input: errors become the ERROR line and status 1.
    """
    from .run import main as run_main
    return run_main(argv, out)
