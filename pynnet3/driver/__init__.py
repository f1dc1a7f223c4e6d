"""The compile-and-optimize driver: what runs the Compiler and then the
optimizer (Kaldi's nnet-optimize.h CachingOptimizingCompiler and
nnet-compile-looped.h): ``compile()`` (:mod:`.compile_and_optimize`),
:class:`CachingOptimizingCompiler` (:mod:`.caching`) and looped compilation
(:mod:`.compile_looped`). It sits above both :mod:`pynnet3.compiler` and
:mod:`pynnet3.optimize`."""
