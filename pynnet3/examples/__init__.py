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

from .files import FILES, path
from .run import main

__all__ = ["path", "FILES", "main"]
