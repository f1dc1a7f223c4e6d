# cython: language_level=3, boundscheck=False, wraparound=False, auto_pickle=False
# distutils: language = c++
"""Analysis of a computation in C (its owner and twin: pynnet3/optimize/analysis.py).

Same API and results as the Python twin; the difference is storage. Split
points, per-submatrix variable ranges, command attributes and accesses live in
C++ vectors (the per-command and per-variable lists as CSR arrays: one data
vector plus one start offset per item), so the analysis of a computation with
tens of thousands of commands creates no Python object per variable or access.
The Python views (``command_attributes[c]``, ``variable_accesses[v]``,
``matrix_accesses[m]``) are built on first use and cached; treat them as
read-only.
"""

from libcpp.algorithm cimport lower_bound, sort, unique
from libcpp.vector cimport vector

from pynnet3.compiler.computation import Command, MatrixInfo, SubMatrixInfo
from pynnet3.optimize.analysis_types import (Access, AccessType, AnalysisError,
                                             CommandAttributes, MatrixAccesses,
                                             MatrixAccessSummary)

from pynnet3._fast.constants cimport *
from pynnet3._fast.slots cimport Slots, get_slot, slots_init

# direct slot reads of the records (see slots.pxd)
cdef Slots _CMD, _SUB, _MAT
slots_init(&_CMD, Command, ("command_type", "arg1", "arg2", "arg3", "arg4", "arg5", "arg6"))
slots_init(&_SUB, SubMatrixInfo, ("matrix_index", "row_offset", "num_rows", "col_offset",
                                  "num_cols"))
slots_init(&_MAT, MatrixInfo, ("num_rows", "num_cols"))

_tuple_new = tuple.__new__
_ACCESS_TYPES = (AccessType.kReadAccess, AccessType.kWriteAccess,
                 AccessType.kReadWriteAccess)
_FIELDS = ("variables_read", "variables_written", "submatrices_read",
           "submatrices_written", "matrices_read", "matrices_written")


cdef inline void sort_uniq(vector[int]& v):
    if v.size() > 1:
        sort(v.begin(), v.end())
        v.erase(unique(v.begin(), v.end()), v.end())


cdef inline int find_index(const vector[int]& sp, int begin, int end, int value):
    """The position of ``value`` in the sorted sp[begin:end], relative to begin."""
    cdef const int* first = sp.data() + begin
    return lower_bound(first, sp.data() + end, value) - first


cdef class ComputationVariables:
    """Kaldi's ComputationVariables (see analysis.ComputationVariables)."""

    def init(self, computation):
        if self._initialized:
            raise AnalysisError("ComputationVariables.init() called twice")
        self._initialized = True
        cdef list matrices = computation.matrices
        cdef list submatrices = computation.submatrices
        cdef int num_matrices = len(matrices), num_submatrices = len(submatrices)
        cdef int s, m, ro, nr, co, nc, i
        cdef vector[int] sm_m, sm_ro, sm_nr, sm_co, sm_nc
        cdef vector[int] mat_rows, mat_cols
        # split candidates of every matrix, gathered matrix by matrix into one
        # buffer (offsets ``off``), then sorted and made unique per matrix
        cdef vector[int] off, fill, rbuf, cbuf
        cdef int* p
        cdef int* q
        mat_rows.resize(num_matrices)
        mat_cols.resize(num_matrices)
        for m in range(num_matrices):
            info = matrices[m]
            mat_rows[m] = get_slot(&_MAT, info, 0, "num_rows")
            mat_cols[m] = get_slot(&_MAT, info, 1, "num_cols")
        if num_submatrices > 0 and submatrices[0].num_rows != 0:
            raise AnalysisError("submatrix 0 must be the empty submatrix")
        sm_m.resize(num_submatrices)
        sm_ro.resize(num_submatrices)
        sm_nr.resize(num_submatrices)
        sm_co.resize(num_submatrices)
        sm_nc.resize(num_submatrices)
        off.assign(num_matrices + 2, 0)
        for s in range(1, num_submatrices):
            info = submatrices[s]
            m = get_slot(&_SUB, info, 0, "matrix_index")
            ro = get_slot(&_SUB, info, 1, "row_offset")
            nr = get_slot(&_SUB, info, 2, "num_rows")
            co = get_slot(&_SUB, info, 3, "col_offset")
            nc = get_slot(&_SUB, info, 4, "num_cols")
            if not 0 < m < num_matrices:
                raise AnalysisError(
                    "submatrix %d refers to matrix m%d, but the computation has matrices "
                    "m1..m%d" % (s, m, num_matrices - 1))
            if ro < 0 or nr <= 0 or co < 0 or nc <= 0 or ro + nr > mat_rows[m] \
                    or co + nc > mat_cols[m]:
                raise AnalysisError(
                    "submatrix %d = m%d(%d:%d, %d:%d) is empty or outside matrix m%d "
                    "(%d x %d)" % (s, m, ro, ro + nr - 1, co, co + nc - 1, m,
                                   mat_rows[m], mat_cols[m]), matrix_index=m)
            sm_m[s] = m
            sm_ro[s] = ro
            sm_nr[s] = nr
            sm_co[s] = co
            sm_nc[s] = nc
            off[m + 1] += 2
        for m in range(1, num_matrices):
            off[m + 1] += off[m] + 2      # + the matrix's own 0 and end
        rbuf.resize(off[num_matrices] if num_matrices > 0 else 0)
        cbuf.resize(rbuf.size())
        fill = off
        for m in range(1, num_matrices):
            rbuf[fill[m]] = 0
            rbuf[fill[m] + 1] = mat_rows[m]
            cbuf[fill[m]] = 0
            cbuf[fill[m] + 1] = mat_cols[m]
            fill[m] += 2
        for s in range(1, num_submatrices):
            m = sm_m[s]
            i = fill[m]
            rbuf[i] = sm_ro[s]
            rbuf[i + 1] = sm_ro[s] + sm_nr[s]
            cbuf[i] = sm_co[s]
            cbuf[i + 1] = sm_co[s] + sm_nc[s]
            fill[m] = i + 2
        self.matrix_to_variable_index.assign(num_matrices + 1, 0)
        self.row_sp_start.assign(num_matrices + 1, 0)
        self.col_sp_start.assign(num_matrices + 1, 0)
        self.row_sp.reserve(rbuf.size())
        self.col_sp.reserve(cbuf.size())
        cdef int nrs, ncs
        for m in range(1, num_matrices):
            p = &rbuf[0] + off[m]
            q = &rbuf[0] + off[m + 1]
            sort(p, q)
            q = unique(p, q)
            nrs = q - p
            self.row_sp.insert(self.row_sp.end(), p, q)
            p = &cbuf[0] + off[m]
            q = &cbuf[0] + off[m + 1]
            sort(p, q)
            q = unique(p, q)
            ncs = q - p
            self.col_sp.insert(self.col_sp.end(), p, q)
            self.row_sp_start[m + 1] = self.row_sp.size()
            self.col_sp_start[m + 1] = self.col_sp.size()
            self.matrix_to_variable_index[m + 1] = self.matrix_to_variable_index[m] + \
                (nrs - 1) * (ncs - 1)
        self._num_variables = self.matrix_to_variable_index[num_matrices] \
            if num_matrices > 0 else 0
        # variables of each submatrix
        self.submatrix_to_matrix.assign(num_submatrices, 0)
        self.submatrix_is_whole_matrix.assign(num_submatrices, 0)
        self.sub_r0.assign(num_submatrices, 0)
        self.sub_r1.assign(num_submatrices, 0)
        self.sub_c0.assign(num_submatrices, 0)
        self.sub_c1.assign(num_submatrices, 0)
        cdef int rb, re, cb, ce
        for s in range(1, num_submatrices):
            m = sm_m[s]
            self.submatrix_to_matrix[s] = m
            rb = self.row_sp_start[m]
            re = self.row_sp_start[m + 1]
            cb = self.col_sp_start[m]
            ce = self.col_sp_start[m + 1]
            self.sub_r0[s] = find_index(self.row_sp, rb, re, sm_ro[s])
            self.sub_r1[s] = find_index(self.row_sp, rb, re, sm_ro[s] + sm_nr[s])
            self.sub_c0[s] = find_index(self.col_sp, cb, ce, sm_co[s])
            self.sub_c1[s] = find_index(self.col_sp, cb, ce, sm_co[s] + sm_nc[s])
            if (self.sub_r0[s] == 0 and self.sub_r1[s] == re - rb - 1
                    and self.sub_c0[s] == 0 and self.sub_c1[s] == ce - cb - 1):
                self.submatrix_is_whole_matrix[s] = 1
        self.variable_to_matrix.assign(self._num_variables, 0)
        for m in range(1, num_matrices):
            for i in range(self.matrix_to_variable_index[m],
                           self.matrix_to_variable_index[m + 1]):
                self.variable_to_matrix[i] = m

    cdef void append_submatrix_variables(self, int s, vector[int]& out):
        cdef int m = self.submatrix_to_matrix[s]
        cdef int ncv = self.col_sp_start[m + 1] - self.col_sp_start[m] - 1
        cdef int base = self.matrix_to_variable_index[m]
        cdef int r, c
        for r in range(self.sub_r0[s], self.sub_r1[s]):
            for c in range(self.sub_c0[s], self.sub_c1[s]):
                out.push_back(base + r * ncv + c)

    cdef int record_access(self, int s, int access_type, vector[int]* lists) except -1:
        """Appends to the six lists (VR..MW) what an access to ``s`` touches."""
        if s == 0:
            return 0
        if s < 0 or s >= <int>self.submatrix_to_matrix.size():
            raise AnalysisError("submatrix index %d out of range [0, %d)"
                                % (s, self.submatrix_to_matrix.size()))
        cdef int m = self.submatrix_to_matrix[s]
        if access_type == R:
            self.append_submatrix_variables(s, lists[VR])
            lists[MR].push_back(m)
            lists[SR].push_back(s)
        elif access_type == W:
            self.append_submatrix_variables(s, lists[VW])
            lists[SW].push_back(s)
            lists[MW].push_back(m)
            if not self.submatrix_is_whole_matrix[s]:
                lists[MR].push_back(m)
        else:
            self.append_submatrix_variables(s, lists[VW])
            self.append_submatrix_variables(s, lists[VR])
            lists[SW].push_back(s)
            lists[SR].push_back(s)
            lists[MW].push_back(m)
            lists[MR].push_back(m)
        return 0

    cdef int check_submatrix_index(self, int s) except -1:
        if s < 0 or s >= <int>self.submatrix_to_matrix.size():
            raise IndexError("submatrix %d out of range [0, %d)"
                             % (s, self.submatrix_to_matrix.size()))
        return 0

    def num_variables(self):
        return self._num_variables

    def get_matrix_for_variable(self, int variable):
        if not 0 <= variable < self._num_variables:
            raise IndexError("variable %d out of range [0, %d)" % (variable,
                                                                   self._num_variables))
        return self.variable_to_matrix[variable]

    def append_variables_for_submatrix(self, int submatrix_index, out_list):
        """Appends the sorted variables of ``submatrix_index`` to ``out_list``."""
        self.check_submatrix_index(submatrix_index)
        cdef vector[int] v
        if submatrix_index > 0:
            self.append_submatrix_variables(submatrix_index, v)
        out_list.extend(v)

    def append_variables_for_matrix(self, int matrix_index, out_list):
        """Appends the sorted variables of ``matrix_index`` to ``out_list``."""
        if not 0 <= matrix_index < <int>self.matrix_to_variable_index.size() - 1:
            raise IndexError("matrix %d out of range" % matrix_index)
        out_list.extend(range(self.matrix_to_variable_index[matrix_index],
                              self.matrix_to_variable_index[matrix_index + 1]))

    def record_access_for_submatrix(self, int submatrix_index, access_type, ca):
        """Records on CommandAttributes ``ca`` an access to the submatrix, as
        the twin does (a partial write also reads the matrix)."""
        self.check_submatrix_index(submatrix_index)
        cdef vector[int] lists[6]
        self.record_access(submatrix_index, int(access_type), lists)
        for k in range(6):
            getattr(ca, _FIELDS[k]).extend(lists[k])

    cdef tuple locate(self, int variable):
        if not 0 <= variable < self._num_variables:
            raise IndexError("variable %d out of range [0, %d)" % (variable,
                                                                   self._num_variables))
        cdef int m = self.variable_to_matrix[variable]
        cdef int offset = variable - self.matrix_to_variable_index[m]
        cdef int ncv = self.col_sp_start[m + 1] - self.col_sp_start[m] - 1
        return m, offset // ncv, offset % ncv

    def describe_variable(self, int variable):
        """Kaldi's DescribeVariable ("m3", "m3(0:9,:)", "m3(0:9,10:19)")."""
        m, r, c = self.locate(variable)
        cdef int rb = self.row_sp_start[m], cb = self.col_sp_start[m]
        cdef int nrs = self.row_sp_start[m + 1] - rb, ncs = self.col_sp_start[m + 1] - cb
        if nrs == 2 and ncs == 2:
            return "m%d" % m
        rows = ":" if nrs == 2 else "%d:%d" % (self.row_sp[rb + r], self.row_sp[rb + r + 1] - 1)
        cols = ":" if ncs == 2 else "%d:%d" % (self.col_sp[cb + c], self.col_sp[cb + c + 1] - 1)
        return "m%d(%s,%s)" % (m, rows, cols)

    def variable_info(self, int variable):
        """The SubMatrixInfo that the variable covers."""
        m, r, c = self.locate(variable)
        cdef int rb = self.row_sp_start[m], cb = self.col_sp_start[m]
        return SubMatrixInfo(m, self.row_sp[rb + r],
                             self.row_sp[rb + r + 1] - self.row_sp[rb + r],
                             self.col_sp[cb + c],
                             self.col_sp[cb + c + 1] - self.col_sp[cb + c])


cdef class CommandAttributesList:
    """The CommandAttributes of every command (Kaldi's
    std::vector<CommandAttributes>), stored as six CSR arrays; indexing
    gives a (cached) analysis.CommandAttributes."""

    def __cinit__(self):
        self.data.resize(6)
        self.start.resize(6)

    def __len__(self):
        return self.num_commands

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.num_commands))]
        cdef int c = index
        if c < 0:
            c += self.num_commands
        if not 0 <= c < self.num_commands:
            raise IndexError("command index %d out of range" % index)
        attr = self._cache[c]
        if attr is None:
            attr = CommandAttributes()
            for k in range(6):
                setattr(attr, _FIELDS[k],
                        [self.data[k][i] for i in range(self.start[k][c],
                                                        self.start[k][c + 1])])
            attr.has_side_effects = bool(self.side_effects[c])
            self._cache[c] = attr
        return attr

    def __iter__(self):
        for c in range(self.num_commands):
            yield self[c]


cdef list _component_properties(nnet):
    return [nnet.get_component(i).properties() for i in range(nnet.num_components())]


cdef void _multi_submatrices(list pairs, vector[int]& out):
    """The distinct submatrix indexes in an indexes_multi list, sorted."""
    out.clear()
    cdef int s, cur = -1
    for p in pairs:
        s = p[0]
        if s != -1 and s != cur:
            cur = s
            out.push_back(s)
    sort_uniq(out)


def compute_command_attributes(nnet, computation, ComputationVariables variables):
    """Kaldi's ComputeCommandAttributes; returns a CommandAttributesList."""
    # indexed with Python's checks: the arguments of a broken command may be
    # out of range
    props = _component_properties(nnet)
    indexes = computation.indexes
    indexes_multi = computation.indexes_multi
    cdef list commands = computation.commands
    cdef CommandAttributesList result = CommandAttributesList()
    cdef int num_commands = len(commands)
    cdef int ci, k
    cdef vector[int] lists[6]
    cdef vector[int] subs
    result.num_commands = num_commands
    result._cache = [None] * num_commands
    result.side_effects.assign(num_commands, 0)
    result.command_type.assign(num_commands, -1)
    result.command_args.assign(6 * num_commands, -1)
    for k in range(6):
        result.start[k].reserve(num_commands + 1)
        result.start[k].push_back(0)
    ci = 0
    try:
        _command_attributes_loop(variables, result, commands, props, indexes, indexes_multi,
                                 lists, subs, &ci)
    except AnalysisError as e:
        if e.command_index is not None:
            raise
        raise AnalysisError("command c%d: %s" % (ci, e.detail), ci) from None
    return result


cdef int _command_attributes_loop(ComputationVariables variables,
                                  CommandAttributesList result, list commands, props,
                                  indexes, indexes_multi, vector[int]* lists,
                                  vector[int]& subs, int* ci_out) except -1:
    cdef int ci, ct, k, i, prop
    cdef int* args
    for ci in range(result.num_commands):
        ci_out[0] = ci
        c = commands[ci]
        ct = get_slot(&_CMD, c, 0, "command_type")
        result.command_type[ci] = ct
        args = &result.command_args[6 * ci]
        for k in range(6):
            lists[k].clear()
        if ct == kAllocMatrix or ct == kDeallocMatrix:
            args[0] = get_slot(&_CMD, c, 1, "arg1")
        elif ct == kSwapMatrix:
            args[0] = get_slot(&_CMD, c, 1, "arg1")
            args[1] = get_slot(&_CMD, c, 2, "arg2")
        elif ct == kSetConst:
            variables.record_access(get_slot(&_CMD, c, 1, "arg1"), W, lists)
        elif ct == kPropagate:
            a1 = get_slot(&_CMD, c, 1, "arg1")
            prop = props[a1]     # (indexed as a Python list: a bad index raises)
            args[0] = a1
            args[2] = get_slot(&_CMD, c, 3, "arg3")
            args[3] = get_slot(&_CMD, c, 4, "arg4")
            variables.record_access(args[2], R, lists)
            variables.record_access(args[3], RW if prop & kPropagateAdds else W, lists)
        elif ct == kBackprop or ct == kBackpropNoModelUpdate:
            a1 = get_slot(&_CMD, c, 1, "arg1")
            prop = props[a1]
            args[0] = a1
            args[2] = get_slot(&_CMD, c, 3, "arg3")
            args[3] = get_slot(&_CMD, c, 4, "arg4")
            args[4] = get_slot(&_CMD, c, 5, "arg5")
            args[5] = get_slot(&_CMD, c, 6, "arg6")
            variables.record_access(args[2], R, lists)
            variables.record_access(args[3], R, lists)
            variables.record_access(args[4], R, lists)
            variables.record_access(args[5], RW if prop & kBackpropAdds else W, lists)
            if ct == kBackprop and prop & kUpdatableComponent:
                result.side_effects[ci] = 1
        elif ct == kMatrixCopy:
            args[0] = get_slot(&_CMD, c, 1, "arg1")
            args[1] = get_slot(&_CMD, c, 2, "arg2")
            variables.record_access(args[0], W, lists)
            variables.record_access(args[1], R, lists)
        elif ct == kMatrixAdd or ct == kAddRows or ct == kAddRowRanges:
            variables.record_access(get_slot(&_CMD, c, 1, "arg1"), RW, lists)
            variables.record_access(get_slot(&_CMD, c, 2, "arg2"), R, lists)
        elif ct == kCopyRows:
            variables.record_access(get_slot(&_CMD, c, 1, "arg1"), RW if -1 in indexes[get_slot(&_CMD, c, 3, "arg3")] else W, lists)
            variables.record_access(get_slot(&_CMD, c, 2, "arg2"), R, lists)
        elif ct == kAddRowsMulti or ct == kCopyRowsMulti:
            variables.record_access(get_slot(&_CMD, c, 1, "arg1"), RW if ct == kAddRowsMulti else W, lists)
            _multi_submatrices(indexes_multi[get_slot(&_CMD, c, 2, "arg2")], subs)
            for i in range(<int>subs.size()):
                variables.record_access(subs[i], R, lists)
        elif ct == kAddToRowsMulti or ct == kCopyToRowsMulti:
            variables.record_access(get_slot(&_CMD, c, 1, "arg1"), R, lists)
            _multi_submatrices(indexes_multi[get_slot(&_CMD, c, 2, "arg2")], subs)
            for i in range(<int>subs.size()):
                variables.record_access(subs[i], RW, lists)
        elif ct == kCompressMatrix:
            variables.record_access(get_slot(&_CMD, c, 1, "arg1"), RW, lists)
        elif ct == kDecompressMatrix:
            variables.record_access(get_slot(&_CMD, c, 1, "arg1"), W, lists)
        elif ct == kAcceptInput:
            args[0] = get_slot(&_CMD, c, 1, "arg1")
            variables.record_access(args[0], W, lists)
        elif ct == kProvideOutput:
            args[0] = get_slot(&_CMD, c, 1, "arg1")
            variables.record_access(args[0], R, lists)
        elif 20 <= ct <= kGotoLabel:   # the no-ops, the label and the goto
            pass
        else:
            raise AnalysisError("command c%d has unknown command type %r" % (ci, ct), ci)
        for k in range(6):
            sort_uniq(lists[k])
            result.data[k].insert(result.data[k].end(), lists[k].begin(), lists[k].end())
            result.start[k].push_back(result.data[k].size())
    return 0


cdef void _count_merged(const vector[int]& data_r, int rb, int re,
                        const vector[int]& data_w, int wb, int we, vector[int]& counts):
    cdef int i = rb, j = wb
    while i < re or j < we:
        if j >= we or (i < re and data_r[i] < data_w[j]):
            counts[data_r[i]] += 1
            i += 1
        elif i >= re or data_w[j] < data_r[i]:
            counts[data_w[j]] += 1
            j += 1
        else:
            counts[data_r[i]] += 1
            i += 1
            j += 1


cdef void _fill_merged(int c, const vector[int]& data_r, int rb, int re,
                       const vector[int]& data_w, int wb, int we, vector[int]& fill,
                       vector[int]& cmd, vector[char]& kind):
    """Writes command ``c``'s access to each item of two sorted ranges
    (read, written) at the item's next free slot."""
    cdef int i = rb, j = wb, item, pos
    cdef char t
    while i < re or j < we:
        if j >= we or (i < re and data_r[i] < data_w[j]):
            item = data_r[i]
            t = R
            i += 1
        elif i >= re or data_w[j] < data_r[i]:
            item = data_w[j]
            t = W
            j += 1
        else:
            item = data_r[i]
            t = RW
            i += 1
            j += 1
        pos = fill[item]
        fill[item] = pos + 1
        cmd[pos] = c
        kind[pos] = t


cdef class AccessLists:
    """Per item (variable or matrix), its accesses in command order (CSR);
    indexing gives a cached list of Access."""

    def __len__(self):
        return self.num_items

    cdef list build(self, int i):
        lst = self._cache[i]
        if lst is None:
            # tuple.__new__ skips the NamedTuple's Python-level __new__
            lst = [_tuple_new(Access, (self.cmd[p], _ACCESS_TYPES[self.kind[p]]))
                   for p in range(self.start[i], self.start[i + 1])]
            self._cache[i] = lst
        return lst

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.num_items))]
        cdef int i = index
        if i < 0:
            i += self.num_items
        if not 0 <= i < self.num_items:
            raise IndexError("index %d out of range" % index)
        return self.build(i)

    def __iter__(self):
        for i in range(self.num_items):
            yield self.build(i)


cdef AccessLists _accesses_from(CommandAttributesList attrs, int kr, int kw, int num_items):
    cdef AccessLists out = AccessLists()
    cdef int c, i, n = attrs.num_commands
    cdef vector[int] counts
    counts.assign(num_items + 1, 0)
    for c in range(n):
        _count_merged(attrs.data[kr], attrs.start[kr][c], attrs.start[kr][c + 1],
                      attrs.data[kw], attrs.start[kw][c], attrs.start[kw][c + 1], counts)
    out.start.assign(num_items + 1, 0)
    for i in range(num_items):
        out.start[i + 1] = out.start[i] + counts[i]
    out.cmd.resize(out.start[num_items])
    out.kind.resize(out.start[num_items])
    cdef vector[int] fill = out.start
    for c in range(n):
        _fill_merged(c, attrs.data[kr], attrs.start[kr][c], attrs.start[kr][c + 1],
                     attrs.data[kw], attrs.start[kw][c], attrs.start[kw][c + 1], fill,
                     out.cmd, out.kind)
    out.num_items = num_items
    out._cache = [None] * num_items
    return out


def compute_variable_accesses(ComputationVariables variables,
                              CommandAttributesList command_attributes):
    """Kaldi's ComputeVariableAccesses; returns an AccessLists (per variable)."""
    return _accesses_from(command_attributes, VR, VW, variables._num_variables)


cdef class MatrixAccessesList:
    """Kaldi's std::vector<MatrixAccesses>; indexing gives a cached
    analysis.MatrixAccesses."""

    def __len__(self):
        return self.num_matrices

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.num_matrices))]
        cdef int m = index
        if m < 0:
            m += self.num_matrices
        if not 0 <= m < self.num_matrices:
            raise IndexError("matrix index %d out of range" % index)
        ma = self._cache[m]
        if ma is None:
            ma = MatrixAccesses(self.allocate_command[m], self.deallocate_command[m],
                                self.accesses.build(m), bool(self.is_input[m]),
                                bool(self.is_output[m]))
            self._cache[m] = ma
        return ma

    def __iter__(self):
        for m in range(self.num_matrices):
            yield self[m]


cdef int _whole_matrix_of(ComputationVariables variables, int c, int s) except -1:
    """The matrix of submatrix ``s``, which command ``c`` needs to be a whole
    matrix. (A submatrix spans its whole split grid exactly when it spans the
    whole matrix: the grid always includes 0 and the matrix's extent.)"""
    cdef int n = variables.submatrix_to_matrix.size()
    if not 0 < s < n or not variables.submatrix_is_whole_matrix[s]:
        raise AnalysisError(
            "command c%d does not operate on a whole matrix (submatrix %d of matrix m%d)"
            % (c, s, variables.submatrix_to_matrix[s] if 0 <= s < n else -1), c,
            variables.submatrix_to_matrix[s] if 0 <= s < n else None)
    return variables.submatrix_to_matrix[s]


def compute_matrix_accesses(nnet, computation, ComputationVariables variables,
                            CommandAttributesList command_attributes):
    """Kaldi's ComputeMatrixAccesses; returns a MatrixAccessesList.
    ``command_attributes`` must come from ``computation`` (as in Kaldi: the
    commands' types and arguments are read from what it recorded)."""
    cdef int num_matrices = len(computation.matrices)
    cdef MatrixAccessesList out = MatrixAccessesList()
    cdef CommandAttributesList attrs = command_attributes
    cdef int c, ct, m, m2
    out.num_matrices = num_matrices
    out._cache = [None] * num_matrices
    out.accesses = _accesses_from(attrs, MR, MW, num_matrices)
    out.allocate_command.assign(num_matrices, -1)
    out.deallocate_command.assign(num_matrices, -1)
    out.is_input.assign(num_matrices, 0)
    out.is_output.assign(num_matrices, 0)
    for c in range(attrs.num_commands):
        ct = attrs.command_type[c]
        if ct == kAllocMatrix:
            m = _whole_matrix_of(variables, c, attrs.command_args[6 * c])
            if out.allocate_command[m] != -1:
                raise AnalysisError("Matrix m%d initialized twice (commands c%d and c%d)."
                                    % (m, out.allocate_command[m], c), c, m)
            out.allocate_command[m] = c
        elif ct == kSwapMatrix:
            m = _whole_matrix_of(variables, c, attrs.command_args[6 * c])
            m2 = _whole_matrix_of(variables, c, attrs.command_args[6 * c + 1])
            if out.allocate_command[m] != -1:
                raise AnalysisError("Matrix m%d initialized twice (commands c%d and c%d)."
                                    % (m, out.allocate_command[m], c), c, m)
            out.allocate_command[m] = c
            if out.deallocate_command[m2] != -1:
                raise AnalysisError("Matrix m%d destroyed twice (commands c%d and c%d)."
                                    % (m2, out.deallocate_command[m2], c), c, m2)
            out.deallocate_command[m2] = c
        elif ct == kDeallocMatrix:
            m = _whole_matrix_of(variables, c, attrs.command_args[6 * c])
            if out.deallocate_command[m] != -1:
                raise AnalysisError("Matrix m%d destroyed twice (commands c%d and c%d)."
                                    % (m, out.deallocate_command[m], c), c, m)
            out.deallocate_command[m] = c
        elif ct == kAcceptInput:
            m = _whole_matrix_of(variables, c, attrs.command_args[6 * c])
            out.is_input[m] = 1
            if out.allocate_command[m] == -1:
                out.allocate_command[m] = c
        elif ct == kProvideOutput:
            m = _whole_matrix_of(variables, c, attrs.command_args[6 * c])
            out.is_output[m] = 1
    return out


def matrix_access_summary(MatrixAccessesList matrix_accesses):
    """The MatrixAccessSummary of ``matrix_accesses``, read from the C arrays
    (no Access object is made); see the twin in analysis."""
    cdef int n = matrix_accesses.num_matrices, m, b, e
    cdef AccessLists acc = matrix_accesses.accesses
    cdef list first = [-1] * n, second = [-1] * n, last = [-1] * n
    cdef list is_input = [False] * n, is_output = [False] * n
    for m in range(n):
        b = acc.start[m]
        e = acc.start[m + 1]
        if e > b:
            first[m] = acc.cmd[b]
            last[m] = acc.cmd[e - 1]
            if e > b + 1:
                second[m] = acc.cmd[b + 1]
        if matrix_accesses.is_input[m]:
            is_input[m] = True
        if matrix_accesses.is_output[m]:
            is_output[m] = True
    return MatrixAccessSummary(matrix_accesses.allocate_command,
                               matrix_accesses.deallocate_command, first, second, last,
                               is_input, is_output)


def undefined_variable_candidates(AccessLists variable_accesses, bytes command_types,
                                  int compress_type):
    """The variables the checker's undefined-data check has to look at
    (never accessed, or first accessed other than by a pure write and not by
    a command of type ``compress_type``); see the twin in analysis."""
    cdef AccessLists va = variable_accesses
    cdef const unsigned char* types = command_types
    cdef Py_ssize_t num_types = len(command_types)
    cdef int v, p, ci
    cdef list out = []
    for v in range(va.num_items):
        p = va.start[v]
        if p == va.start[v + 1]:
            out.append(v)
            continue
        ci = va.cmd[p]
        if va.kind[p] != W and not (ci < num_types and types[ci] == compress_type):
            out.append(v)
    return out


def rewritten_variable_candidates(AccessLists variable_accesses):
    """The variables the checker's rewrite check has to look at (never
    accessed, or written after a pure read); see the twin in analysis."""
    cdef AccessLists va = variable_accesses
    cdef int v, p
    cdef bint read
    cdef list out = []
    for v in range(va.num_items):
        if va.start[v] == va.start[v + 1]:
            out.append(v)
            continue
        read = False
        for p in range(va.start[v], va.start[v + 1]):
            if va.kind[p] == R:
                read = True
            elif read:
                out.append(v)
                break
    return out


def compute_matrix_to_submatrix(computation):
    """Kaldi's ComputeMatrixToSubmatrix: per matrix, the submatrices of it in
    increasing order ([0] is empty); see the twin in analysis."""
    cdef list submatrices = computation.submatrices
    cdef Py_ssize_t num_matrices = len(computation.matrices), s
    cdef list result = [[] for _ in range(num_matrices)]
    cdef long m
    for s in range(1, len(submatrices)):
        m = (<object>submatrices[s]).matrix_index
        if not 0 <= m < num_matrices:
            raise IndexError("submatrix %d names matrix %d (%d matrices)"
                             % (s, m, num_matrices))
        (<list>result[m]).append(s)
    return result


cdef class Analyzer:
    """Kaldi's Analyzer: init(nnet, computation) fills variables,
    command_attributes, variable_accesses and matrix_accesses."""

    def __init__(self):
        self.variables = ComputationVariables()
        self.command_attributes = []
        self.variable_accesses = []
        self.matrix_accesses = []

    def init(self, nnet, computation):
        self.variables.init(computation)
        self.command_attributes = compute_command_attributes(nnet, computation, self.variables)
        self.variable_accesses = compute_variable_accesses(self.variables,
                                                           self.command_attributes)
        self.matrix_accesses = compute_matrix_accesses(nnet, computation, self.variables,
                                                       self.command_attributes)
        return self


cdef inline bint _is_zeroing(list commands, int c) except -1:
    command = commands[c]
    return <int>command.command_type == kSetConst and command.alpha == 0.0


cdef class ComputationAnalysis:
    """Kaldi's ComputationAnalysis over a (compiled) Analyzer; see the twin
    for what each question means. Reads the computation's commands at query
    time, as Kaldi does.

    The ``*_c`` methods (declared in analysis.pxd) are the same questions
    for kernels that cimport this class; they take a submatrix already known
    to be in range and use the analysis' own submatrix-to-matrix map."""

    def __init__(self, computation, Analyzer analyzer):
        self.computation = computation
        self.analyzer = analyzer
        self.vars = analyzer.variables
        self.va = analyzer.variable_accesses
        self.ma = analyzer.matrix_accesses

    # both the computation and the analysis (made before any submatrix or
    # matrix a pass has added since) must know the index
    cdef int check_submatrix(self, int s) except -1:
        cdef int n = min(len(self.computation.submatrices),
                         <int>self.vars.submatrix_to_matrix.size())
        if not 0 < s < n:
            raise IndexError("submatrix %d out of range [1, %d)" % (s, n))
        return 0

    cdef int check_matrix(self, int m) except -1:
        cdef int n = min(len(self.computation.matrices), self.ma.num_matrices)
        if not 0 < m < n:
            raise IndexError("matrix %d out of range [1, %d)" % (m, n))
        return 0

    cdef int first_nontrivial_access_c(self, int s) except -2:
        cdef list commands = self.computation.commands
        cdef int ans = len(commands), p, ci, v
        cdef size_t i
        self.vs.clear()
        self.vars.append_submatrix_variables(s, self.vs)
        for i in range(self.vs.size()):
            v = self.vs[i]
            for p in range(self.va.start[v], self.va.start[v + 1]):
                ci = self.va.cmd[p]
                if ci >= ans:
                    break
                if not _is_zeroing(commands, ci):
                    ans = ci
                    break
        return ans

    cdef int last_access_c(self, int s):
        cdef int ans = -1, v
        cdef size_t i
        self.vs.clear()
        self.vars.append_submatrix_variables(s, self.vs)
        for i in range(self.vs.size()):
            v = self.vs[i]
            if self.va.start[v] < self.va.start[v + 1] and \
                    self.va.cmd[self.va.start[v + 1] - 1] > ans:
                ans = self.va.cmd[self.va.start[v + 1] - 1]
        return ans

    cdef int last_write_access_c(self, int s, int m):
        if self.ma.is_output[m]:
            return len(self.computation.commands)
        cdef int ans = -1, v, p
        cdef size_t i
        self.vs.clear()
        self.vars.append_submatrix_variables(s, self.vs)
        for i in range(self.vs.size()):
            v = self.vs[i]
            p = self.va.start[v + 1] - 1
            while p >= self.va.start[v]:
                if self.va.kind[p] != R:
                    if self.va.cmd[p] > ans:
                        ans = self.va.cmd[p]
                    break
                p -= 1
        return ans

    cdef int data_invalidated_command_c(self, int c, int s, int m):
        cdef int ans = self.ma.deallocate_command[m], v, p
        cdef size_t i
        if ans == -1:
            ans = len(self.computation.commands)
        self.vs.clear()
        self.vars.append_submatrix_variables(s, self.vs)
        for i in range(self.vs.size()):
            v = self.vs[i]
            for p in range(self.va.start[v], self.va.start[v + 1]):
                if self.va.cmd[p] > c and self.va.kind[p] != R:
                    if self.va.cmd[p] < ans:
                        ans = self.va.cmd[p]
                    break
        return ans

    def first_nontrivial_access(self, int s):
        self.check_submatrix(s)
        return self.first_nontrivial_access_c(s)

    def first_access(self, int s):
        self.check_submatrix(s)
        cdef int ans = len(self.computation.commands), v
        cdef size_t i
        self.vs.clear()
        self.vars.append_submatrix_variables(s, self.vs)
        for i in range(self.vs.size()):
            v = self.vs[i]
            if self.va.start[v] < self.va.start[v + 1] and self.va.cmd[self.va.start[v]] < ans:
                ans = self.va.cmd[self.va.start[v]]
        return ans

    def last_access(self, int s):
        self.check_submatrix(s)
        return self.last_access_c(s)

    def last_write_access(self, int s):
        self.check_submatrix(s)
        # the computation's matrix of s, as the twin reads it
        cdef int m = self.computation.submatrices[s].matrix_index
        self.check_matrix(m)
        return self.last_write_access_c(s, m)

    def data_invalidated_command(self, int c, int s):
        cdef int num_commands = len(self.computation.commands)
        if not 0 <= c < num_commands:
            raise IndexError("command %d out of range [0, %d)" % (c, num_commands))
        self.check_submatrix(s)
        cdef int m = self.computation.submatrices[s].matrix_index
        self.check_matrix(m)
        return self.data_invalidated_command_c(c, s, m)

    def first_nontrivial_matrix_access(self, int m):
        self.check_matrix(m)
        cdef list commands = self.computation.commands
        cdef AccessLists acc = self.ma.accesses
        cdef int p
        for p in range(acc.start[m], acc.start[m + 1]):
            if not _is_zeroing(commands, acc.cmd[p]):
                return acc.cmd[p]
        return len(commands)

    def last_matrix_access(self, int m):
        self.check_matrix(m)
        cdef AccessLists acc = self.ma.accesses
        if acc.start[m] < acc.start[m + 1]:
            return acc.cmd[acc.start[m + 1] - 1]
        return -1
