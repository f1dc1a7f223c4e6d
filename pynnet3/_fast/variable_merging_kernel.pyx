# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""Variable merging in C: the scan for candidate commands (twin:
``merge_candidates_py``) and the round of merges itself (twin: the
``may_be_merged`` / ``do_merge`` methods of ``VariableMergingOptimizer``),
both in ``pynnet3.optimize.variable_merging``.

Each merging round visits every command to find the few that may be merges
(assignments, in-place propagates and backprops); on a quarter-million-command
computation that visit dominated a round. The candidates depend only on
command types and arguments the round does not change before reaching them,
so they can be listed up front.

The round then asks, per candidate, questions of the analysis (the variables
of a submatrix, its first and last accesses); :func:`merge_round` asks them
through the analysis' C interface (``analysis.pxd``) instead of building
Python lists per submatrix, and edits the computation as the twin does.
"""

from libcpp.vector cimport vector

from pynnet3._fast.analysis_kernel cimport (AccessLists, Analyzer, CommandAttributesList,
                                     ComputationAnalysis, ComputationVariables,
                                     MatrixAccessesList)
from pynnet3._fast.constants cimport *

from pynnet3.compiler.computation import CommandType, MatrixStrideType, SubMatrixInfo

cdef object _NO_OPERATION = CommandType.kNoOperation
cdef object _EQUAL_COLS = MatrixStrideType.kStrideEqualNumCols


def merge_candidates(list commands, list component_properties, bint remove_assignments,
                     bint propagate_in_place, bint backprop_in_place,
                     long propagate_in_place_bit, long backprop_in_place_bit):
    """[(command_index, s1, s2)] in command order: s1 is the submatrix whose
    data stops being needed and s2 the one whose data starts (see
    ``merge_candidates_py`` for the rules); both are > 0."""
    cdef list out = []
    cdef Py_ssize_t i = -1
    cdef object c
    cdef int t
    cdef long s1, s2, a3, a4
    for c in commands:
        i += 1
        t = c.command_type
        if t == kMatrixCopy:
            if not remove_assignments:
                continue
            s1 = c.arg2
            s2 = c.arg1
        elif t == kPropagate:
            if not propagate_in_place or not (
                    <long>component_properties[c.arg1] & propagate_in_place_bit):
                continue
            s1 = c.arg3
            s2 = c.arg4
        elif t == kBackprop or t == kBackpropNoModelUpdate:
            if not backprop_in_place or not (
                    <long>component_properties[c.arg1] & backprop_in_place_bit):
                continue
            s1 = c.arg5
            s2 = c.arg6
            a3 = c.arg3
            a4 = c.arg4
            if s1 == a3 or s1 == a4 or s2 == a3 or s2 == a4:
                continue
        else:
            continue
        if s1 > 0 and s2 > 0:
            out.append((i, s1, s2))
    return out




def merge_candidates_of_analysis(Analyzer analyzer, list component_properties,
                                 bint remove_assignments, bint propagate_in_place,
                                 bint backprop_in_place, long propagate_in_place_bit,
                                 long backprop_in_place_bit):
    """:func:`merge_candidates` for the computation ``analyzer`` has just
    analysed, read from the analysis' copy of the command types and
    arguments instead of from the commands (the same list)."""
    cdef CommandAttributesList attrs = analyzer.command_attributes
    cdef list out = []
    cdef Py_ssize_t num_components = len(component_properties)
    cdef int i, t
    cdef const int* a
    cdef long s1, s2
    for i in range(attrs.num_commands):
        t = attrs.command_type[i]
        a = &attrs.command_args[6 * i]
        if t == kMatrixCopy:
            if not remove_assignments:
                continue
            s1 = a[1]
            s2 = a[0]
        elif t == kPropagate or t == kBackprop or t == kBackpropNoModelUpdate:
            if not 0 <= a[0] < num_components:
                raise IndexError("command c%d: component index %d out of range" % (i, a[0]))
            if t == kPropagate:
                if not propagate_in_place or not (
                        <long>component_properties[a[0]] & propagate_in_place_bit):
                    continue
                s1 = a[2]
                s2 = a[3]
            else:
                if not backprop_in_place or not (
                        <long>component_properties[a[0]] & backprop_in_place_bit):
                    continue
                s1 = a[4]
                s2 = a[5]
                # never share with the value arguments of the backprop
                if s1 == a[2] or s1 == a[3] or s2 == a[2] or s2 == a[3]:
                    continue
        else:
            continue
        if s1 > 0 and s2 > 0:
            out.append((i, s1, s2))
    return out

cdef class _Round:
    """The state of one merging round: the analysis arrays it reads, and what
    the merges done so far changed (dirty variables, stride types)."""

    cdef ComputationAnalysis analysis
    cdef ComputationVariables vars
    cdef MatrixAccessesList ma
    cdef AccessLists macc           # per matrix
    cdef list commands, submatrices, matrices
    cdef int num_commands, num_submatrices
    cdef vector[char] dirty         # per variable: touched by a merge this round
    cdef vector[char] equal_cols    # per matrix: stride must equal num_cols
    cdef vector[int] m2s, m2s_start  # submatrices of each matrix (CSR), as at the start
    cdef vector[int] vs             # scratch
    cdef bint allow_left, allow_right

    cdef bint any_dirty(self, int s):
        cdef size_t i
        self.vs.clear()
        self.vars.append_submatrix_variables(s, self.vs)
        for i in range(self.vs.size()):
            if self.dirty[self.vs[i]]:
                return True
        return False

    cdef void mark_dirty(self, int s):
        cdef size_t i
        self.vs.clear()
        self.vars.append_submatrix_variables(s, self.vs)
        for i in range(self.vs.size()):
            self.dirty[self.vs[i]] = 1

    cdef int may_be_merged(self, int command_index, int s1, int s2) except -1:
        """0: no merge; 1: s1 kept, s2 merged into it (left); 2: s2 kept
        (right). The twin's conditions in the twin's order.

        The analysis arrays describe the submatrices as the round found them;
        a submatrix that a merge has moved since belongs to a matrix that was
        discarded whole, so all its variables are dirty and the dirty test
        vetoes it whatever the earlier tests said (each test only vetoes)."""
        if not 0 < s1 < self.num_submatrices or not 0 < s2 < self.num_submatrices:
            raise IndexError("merge candidate c%d names submatrices %d, %d (%d submatrices)"
                             % (command_index, s1, s2, self.num_submatrices))
        cdef int m1 = self.vars.submatrix_to_matrix[s1]
        cdef int m2 = self.vars.submatrix_to_matrix[s2]
        if m1 == m2:
            return 0
        cdef bint whole1 = self.vars.submatrix_is_whole_matrix[s1]
        cdef bint whole2 = self.vars.submatrix_is_whole_matrix[s2]
        cdef bint left = (self.allow_left and whole2
                          and not (self.equal_cols[m2] and not whole1))
        cdef bint right = (self.allow_right and whole1
                           and not (self.equal_cols[m1] and not whole2))
        if not left and not right:
            return 0
        if self.any_dirty(s1) or self.any_dirty(s2):
            return 0
        cdef bint in1 = self.ma.is_input[m1], in2 = self.ma.is_input[m2]
        cdef bint out1 = self.ma.is_output[m1], out2 = self.ma.is_output[m2]
        if (in1 and in2) or (out1 and out2):
            return 0
        if (in1 or out1 or in2 or out2) and not (whole1 and whole2):
            return 0
        cdef ComputationAnalysis analysis = self.analysis
        if analysis.first_nontrivial_access_c(s2) != command_index:
            return 0
        c = self.commands[command_index]
        cdef bint ok
        if <int>c.command_type == kMatrixCopy and c.alpha == 1.0:
            ok = (analysis.last_write_access_c(s1, m1) < command_index
                  and analysis.last_access_c(s1)
                  < analysis.data_invalidated_command_c(command_index, s2, m2))
        else:
            ok = analysis.last_access_c(s1) == command_index
        if not ok:
            return 0
        return 1 if left else 2

    cdef int do_merge(self, int command_index, int s_to_keep, int s_to_discard) except -1:
        """Makes the matrix of ``s_to_discard`` live inside ``s_to_keep``
        (the twin's do_merge)."""
        self.mark_dirty(s_to_keep)
        self.mark_dirty(s_to_discard)
        cdef int m_keep = self.vars.submatrix_to_matrix[s_to_keep]
        cdef int m_discard = self.vars.submatrix_to_matrix[s_to_discard]
        assert m_keep != m_discard and m_keep > 0 and m_discard > 0
        cdef list subs = self.submatrices, commands = self.commands
        keep = subs[s_to_keep]
        cdef long row_offset = keep.row_offset, col_offset = keep.col_offset
        cdef int p, s
        for p in range(self.m2s_start[m_discard], self.m2s_start[m_discard + 1]):
            s = self.m2s[p]
            a = subs[s]
            subs[s] = SubMatrixInfo(m_keep, a.row_offset + row_offset, a.num_rows,
                                    a.col_offset + col_offset, a.num_cols)
        c = commands[command_index]
        if <int>c.command_type == kMatrixCopy and c.alpha == 1.0:
            c.command_type = _NO_OPERATION
            c.arg1 = -1
            c.arg2 = -1
        # One deallocation survives: the discarded matrix's if it has one
        # (i.e. it is not an output), else the kept one's.
        cdef int dealloc = self.ma.deallocate_command[m_discard]
        if dealloc == -1:
            dealloc = self.ma.deallocate_command[m_keep]
        assert dealloc != -1, "neither m%d nor m%d is deallocated" % (m_keep, m_discard)
        (<object>commands[dealloc]).command_type = _NO_OPERATION
        # One allocation survives; a kAcceptInput must stay where it is.
        cdef int alloc_keep = self.ma.allocate_command[m_keep]
        cdef int alloc_discard = self.ma.allocate_command[m_discard]
        assert alloc_keep != -1 and alloc_discard != -1, \
            "m%d or m%d is never allocated" % (m_keep, m_discard)
        cdef int zeroed
        if <int>(<object>commands[alloc_discard]).command_type == kAcceptInput:
            (<object>commands[alloc_keep]).command_type = _NO_OPERATION
            zeroed = m_keep
        else:
            (<object>commands[alloc_discard]).command_type = _NO_OPERATION
            zeroed = m_discard
        # ... and the zeroing that followed the allocation that went.
        assert self.macc.start[zeroed] < self.macc.start[zeroed + 1], \
            "merged matrix m%d has no access" % zeroed
        first = commands[self.macc.cmd[self.macc.start[zeroed]]]
        if <int>first.command_type == kSetConst and first.alpha == 0.0:
            first.command_type = _NO_OPERATION
        if self.equal_cols[m_discard]:
            self.equal_cols[m_keep] = 1
            (<object>self.matrices[m_keep]).stride_type = _EQUAL_COLS
        return 0


def merge_round(Analyzer analyzer, computation, list candidates, bint allow_left,
                bint allow_right):
    """Does, in order, every merge that ``candidates`` (from
    :func:`merge_candidates` on ``computation``, which ``analyzer`` analysed)
    allows, editing ``computation`` as the twin does (no renumbering);
    returns True if any merge was done."""
    cdef _Round r = _Round()
    r.analysis = ComputationAnalysis(computation, analyzer)
    r.vars = analyzer.variables
    r.ma = analyzer.matrix_accesses
    r.macc = r.ma.accesses
    r.commands = computation.commands
    r.submatrices = computation.submatrices
    r.matrices = computation.matrices
    r.num_commands = len(r.commands)
    r.num_submatrices = min(len(r.submatrices), <int>r.vars.submatrix_to_matrix.size())
    r.allow_left = allow_left
    r.allow_right = allow_right
    if not allow_left and not allow_right:
        return False
    cdef int num_matrices = r.ma.num_matrices, m, s, p
    if len(r.matrices) != num_matrices:
        raise ValueError("the analysis has %d matrices, the computation %d"
                         % (num_matrices, len(r.matrices)))
    r.dirty.assign(r.vars._num_variables, 0)
    r.equal_cols.assign(num_matrices, 0)
    for m in range(num_matrices):
        if <int>(<object>r.matrices[m]).stride_type == <int>_EQUAL_COLS:
            r.equal_cols[m] = 1
    # submatrices per matrix, in increasing order (ComputeMatrixToSubmatrix)
    r.m2s_start.assign(num_matrices + 2, 0)
    for s in range(1, r.num_submatrices):
        r.m2s_start[r.vars.submatrix_to_matrix[s] + 2] += 1
    for m in range(num_matrices):
        r.m2s_start[m + 2] += r.m2s_start[m + 1]
    r.m2s.resize(r.m2s_start[num_matrices + 1])
    for s in range(1, r.num_submatrices):
        m = r.vars.submatrix_to_matrix[s] + 1
        r.m2s[r.m2s_start[m]] = s
        r.m2s_start[m] += 1
    cdef bint merged = False
    cdef int command_index, s1, s2, how
    for candidate in candidates:
        command_index, s1, s2 = candidate
        how = r.may_be_merged(command_index, s1, s2)
        if how == 1:
            r.do_merge(command_index, s1, s2)
            merged = True
        elif how == 2:
            r.do_merge(command_index, s2, s1)
            merged = True
    return merged
