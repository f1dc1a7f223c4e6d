"""Kaldi's float32 arithmetic, reproduced bit for bit.

Kaldi's numbers depend on the order of its float32 operations: its own
loops (matrix/, cudamatrix/ on the CPU), the BLAS library it calls and the C
library's exp/log/pow. This package reproduces the oracle's (kaldi-ref's):

- :mod:`.openblas_plan`: how OpenBLAS 0.3.21 (Haswell kernels) splits a
  matrix product into blocks and kernel calls, and how many threads it uses;
- :mod:`.openblas`: its sgemm, sgemv and sdot arithmetic (kernel
  ``pynnet3._fast.openblas_kernel``; the readable NumPy twins beside it);
- :mod:`.kaldi_libm`: the C library's expf/logf/pow in Kaldi's loops (kernel
  ``pynnet3._fast.kaldi_libm_kernel``; the twins call the library through
  ctypes);
- :mod:`.kaldi_cpu`: Kaldi's CPU matrix operations built from those
  (AddMatMat, AddMat, AddVecToRows, softmaxes, sigmoid, tanh, ...), and
  :class:`.kaldi_cpu.KaldiCpu`, which components' ``propagate_kaldi_exact``
  compute with (see :class:`pynnet3.compute.backend.KaldiExactBackend`).

It sits below components and nnet (both use it) and imports neither.
"""
