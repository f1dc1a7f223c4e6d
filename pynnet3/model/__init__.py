"""The acoustic model and what is printed about a network: Kaldi's
AmNnetSimple and the ``.mdl`` file, the nnet3-info text, and the one owner of
a network's left/right context (computed with the computation-graph builder,
so this package sits above the compiler)."""
