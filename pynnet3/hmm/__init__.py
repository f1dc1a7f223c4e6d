"""Kaldi's HMM topology pieces that nnet3 acoustic models carry (hmm/): the
TransitionModel at the start of a ``.mdl`` file and the HMM utilities the
tools use (splitting an alignment into phones)."""
