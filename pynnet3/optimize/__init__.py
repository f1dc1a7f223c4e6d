"""The optimizer: Kaldi's Optimize() and everything it uses (nnet-optimize*.cc,
nnet-analyze.cc).

Entry point: :func:`pynnet3.optimize.optimizer.optimize` (the driver,
``pynnet3.compile``, calls it by default), with :class:`pynnet3.optimize.options.NnetOptimizeOptions`.

Where Kaldi's pieces live:

- analysis.py (kernel: _fast/analysis_kernel.pyx; records: analysis_types.py):
  ComputationVariables, CommandAttributes, accesses, Analyzer, ComputationAnalysis;
  checker.py: ComputationChecker / CheckComputation;
- renumber.py: RenumberComputation, RemoveNoOps;
- model_update.py: ConsolidateModelUpdate; addition.py: ConvertAdditionToAssignment;
- row_ops.py: SnipRowOps, SplitRowOps, ReplaceRowWithMatrixOps;
- extend_matrices.py: ExtendMatrices; variable_merging.py: VariableMergingOptimizer
  (remove-assignments, propagate/backprop in place);
- zeroing.py: RemoveUnnecessaryZeroing; sizing.py: MoveSizingCommands,
  RemoveUnnecessaryAllocation; consolidate_io.py: ConsolidateIoOperations;
- deriv_times.py: LimitDerivativeTimes; memory_compression.py:
  OptimizeMemoryCompression; looped_optimizer.py: OptimizeLoopedComputation;
- computation_edit.py: the small edits several passes share (NewSubMatrix,
  GetWholeSubmatrices, InsertCommands, FixGotoLabel);
- optimizer.py: Optimize(), the passes in Kaldi's order; options.py: the options.
"""
