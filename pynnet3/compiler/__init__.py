"""The Compiler: ComputationRequest + Nnet -> unoptimized NnetComputation
(Kaldi's nnet-compile*, nnet-computation-graph*, nnet-computation.h).

Compiling *and* optimizing, the caching compiler and looped compilation live
above this package and the optimizer, in :mod:`pynnet3.driver`.
"""
