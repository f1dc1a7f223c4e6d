# The analysis' C storage (pynnet3/_fast/analysis_kernel.pyx), declared here so that
# other kernels (variable merging, the passes that only ask questions of the
# analysis) can cimport the classes and read the arrays directly instead of
# going through Python objects per variable or access.

from libcpp.vector cimport vector

from pynnet3._fast.constants cimport kReadAccess, kReadWriteAccess, kWriteAccess

# The access kinds stored in AccessLists.kind (short names of AccessType's
# values, constants.pxd).
cdef enum:
    R = kReadAccess
    W = kWriteAccess
    RW = kReadWriteAccess

# indexes of the six lists of a command's attributes in CommandAttributesList
cdef enum:
    VR = 0   # variables_read
    VW = 1   # variables_written
    SR = 2   # submatrices_read
    SW = 3   # submatrices_written
    MR = 4   # matrices_read
    MW = 5   # matrices_written


cdef class ComputationVariables:
    cdef vector[int] row_sp, row_sp_start      # split rows per matrix (CSR)
    cdef vector[int] col_sp, col_sp_start      # split columns per matrix (CSR)
    cdef vector[int] matrix_to_variable_index  # num_matrices + 1 entries
    cdef vector[int] submatrix_to_matrix
    cdef vector[char] submatrix_is_whole_matrix
    # each submatrix covers split-grid rows [r0, r1) and columns [c0, c1)
    cdef vector[int] sub_r0, sub_r1, sub_c0, sub_c1
    cdef vector[int] variable_to_matrix
    cdef int _num_variables
    cdef bint _initialized

    cdef void append_submatrix_variables(self, int s, vector[int]& out)
    cdef int record_access(self, int s, int access_type, vector[int]* lists) except -1
    cdef int check_submatrix_index(self, int s) except -1
    cdef tuple locate(self, int variable)


cdef class CommandAttributesList:
    # Six lists each (one per CommandAttributes field). Not C arrays of
    # vectors: Cython neither constructs nor destroys those in an extension
    # type, so their memory leaked with every analysis.
    cdef vector[vector[int]] data
    cdef vector[vector[int]] start  # num_commands + 1 offsets into data[k]
    cdef vector[char] side_effects
    # per command: its type, and (six per command) arg1 .. arg6 where the
    # analysis read them: for allocation, deallocation, swap, input and
    # output commands their submatrices (compute_matrix_accesses), for
    # kMatrixCopy, kPropagate and the backprops every argument variable
    # merging asks about; -1 elsewhere. So neither reads the commands again.
    cdef vector[int] command_type, command_args
    cdef int num_commands
    cdef list _cache


cdef class AccessLists:
    cdef vector[int] start      # num_items + 1
    cdef vector[int] cmd
    cdef vector[char] kind
    cdef int num_items
    cdef list _cache

    cdef list build(self, int i)


cdef class MatrixAccessesList:
    cdef AccessLists accesses
    cdef vector[int] allocate_command, deallocate_command
    cdef vector[char] is_input, is_output
    cdef int num_matrices
    cdef list _cache


cdef class Analyzer:
    cdef public ComputationVariables variables
    cdef public object command_attributes
    cdef public object variable_accesses
    cdef public object matrix_accesses


cdef class ComputationAnalysis:
    cdef public object computation
    cdef public Analyzer analyzer
    cdef ComputationVariables vars
    cdef AccessLists va
    cdef MatrixAccessesList ma
    cdef vector[int] vs             # scratch: the variables of a submatrix

    cdef int check_submatrix(self, int s) except -1
    cdef int check_matrix(self, int m) except -1
    # Kaldi's questions for kernels: s must be in range, m its matrix
    cdef int first_nontrivial_access_c(self, int s) except -2
    cdef int last_access_c(self, int s)
    cdef int last_write_access_c(self, int s, int m)
    cdef int data_invalidated_command_c(self, int c, int s, int m)
