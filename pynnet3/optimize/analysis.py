"""Analysis of a computation (Kaldi's nnet-analyze.h): the public import point.

The optimizer passes and the ComputationChecker import everything from here.
The readable implementation (the specification) is
``pynnet3.optimize.analysis_py``; its module docstring says what is computed.

API (Kaldi's names in snake_case; semantics exactly Kaldi's)::

    AccessType            IntEnum: kReadAccess, kWriteAccess, kReadWriteAccess
                          (also module constants of the same names)
    Access                NamedTuple (command_index, access_type); sorts by command_index
    CommandAttributes     variables_read, variables_written, submatrices_read,
                          submatrices_written, matrices_read, matrices_written
                          (sorted unique int lists), has_side_effects (bool)
    MatrixAccesses        allocate_command, deallocate_command (-1 if none),
                          accesses (list of Access, one per command, sorted),
                          is_input, is_output
    ComputationVariables()
        .init(computation)                       once
        .num_variables()
        .get_matrix_for_variable(v)
        .append_variables_for_submatrix(s, out)  out.extend(sorted variables of s)
        .append_variables_for_matrix(m, out)
        .record_access_for_submatrix(s, access_type, command_attributes)
        .describe_variable(v)                    "m3" / "m3(0:9,:)" as Kaldi
        .variable_info(v)                        SubMatrixInfo of the variable
    compute_command_attributes(nnet, computation, variables) -> [CommandAttributes]
    compute_variable_accesses(variables, command_attributes)  -> [[Access]] per variable
    compute_matrix_accesses(nnet, computation, variables, command_attributes)
                                                              -> [MatrixAccesses] per matrix
    Analyzer()            .init(nnet, computation) -> self; fields variables,
                          command_attributes, variable_accesses, matrix_accesses
    ComputationAnalysis(computation, analyzer)
        .first_nontrivial_access(s)   .first_access(s)   .last_access(s)
        .last_write_access(s)         .data_invalidated_command(c, s)
        .first_nontrivial_matrix_access(m)               .last_matrix_access(m)
    matrix_access_summary(matrix_accesses)    -> MatrixAccessSummary: per matrix lists
                          allocate_command, deallocate_command, first_access,
                          second_access, last_access (-1 if none), is_input, is_output
    undefined_variable_candidates(variable_accesses, command_type_bytes, compress_type)
    rewritten_variable_candidates(variable_accesses)
                          -> the variables (in order) the checker's undefined-data
                          and rewrite checks must look at; the rest pass them
    compute_matrix_to_submatrix(computation)  -> per matrix, its submatrix indexes
    get_commands_of_type(computation, command_type) -> [command index]
    get_max_memory_use(computation)           -> peak bytes (Kaldi's GetMaxMemoryUse)
    indexes_multi_to_submatrix_indexes(pairs) -> sorted distinct submatrix indexes
    print_command_attributes(attrs), print_matrix_accesses(accesses) -> str (debugging)

Errors: structural faults (submatrix outside its matrix, allocation of a
partial matrix, a matrix allocated or freed twice, unknown command type) raise
AnalysisError (a pynnet3.errors.ComputationError) naming the command/submatrix
and matrix in its message and as .command_index / .matrix_index.
Treat everything returned as read-only.

Implementation: by default the compiled one (``pynnet3/_fast/analysis_kernel.pyx``:
the per-command/per-variable lists are C arrays, and ``command_attributes``,
``variable_accesses``, ``matrix_accesses`` are read-only sequences that build
the Python objects above on first use); the twin when the user chose the
Python implementations (``PYNNET3_PURE_PYTHON=1``, see ``pynnet3._fast``).
The twin is always importable as ``pynnet3.optimize.analysis_py``. Do not mix
objects of the two (a compiled ComputationAnalysis needs a compiled Analyzer).
"""

from .. import _fast
from . import analysis_py as _py
from .analysis_py import (  # noqa: F401  (the same in both implementations)
    Access, AccessType, AnalysisError, CommandAttributes, MatrixAccesses, MatrixAccessSummary,
    get_commands_of_type, get_max_memory_use,
    indexes_multi_to_submatrix_indexes, kReadAccess, kReadWriteAccess, kWriteAccess,
    print_command_attributes, print_matrix_accesses)
from .analysis_py import __all__  # noqa: F401

# The compiled implementation unless the user chose the twins (or it is not
# built: then pynnet3._fast warns once).
_impl = _fast.load("analysis_kernel") or _py
ComputationVariables = _impl.ComputationVariables
Analyzer = _impl.Analyzer
ComputationAnalysis = _impl.ComputationAnalysis
compute_command_attributes = _impl.compute_command_attributes
compute_variable_accesses = _impl.compute_variable_accesses
compute_matrix_accesses = _impl.compute_matrix_accesses
matrix_access_summary = _impl.matrix_access_summary
compute_matrix_to_submatrix = _impl.compute_matrix_to_submatrix
undefined_variable_candidates = _impl.undefined_variable_candidates
rewritten_variable_candidates = _impl.rewritten_variable_candidates
