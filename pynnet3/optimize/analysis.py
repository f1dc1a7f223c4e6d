"""Analysis of a computation (Kaldi's nnet-analyze.h): the API the optimizer
passes and the ComputationChecker use, and its readable implementation.

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

Implementation: the kernel when it is loaded (``pynnet3/_fast/analysis_kernel.pyx``:
the per-command/per-variable lists are C arrays, and ``command_attributes``,
``variable_accesses``, ``matrix_accesses`` are read-only sequences that build
the Python objects above on first use), else the readable twins below, which
are the specification and keep their names with a ``Py`` / ``_py`` suffix
(``AnalyzerPy``, ``compute_command_attributes_py``, ...). Do not mix objects
of the two (a compiled ComputationAnalysis needs a compiled Analyzer). The
records (Access, CommandAttributes, ...) are :mod:`.analysis_types`'.

What it computes (Kaldi's semantics):

- *variables* (ComputationVariables): for every matrix, the sorted row and
  column "split points" where any submatrix of it starts or ends; a variable is
  one cell of that grid. Every submatrix is then exactly a union of variables,
  and the grid is the coarsest with that property. Variables are numbered
  matrix by matrix, row block by row block, column block by column block, so
  a submatrix's variables form a sorted list.
- *command attributes*: per command, the (sorted, unique) variables,
  submatrices and matrices it reads and writes, and whether it has side effects
  (a kBackprop of an updatable component). A write that depends on the earlier
  contents (adding, or a copy that leaves some rows untouched) is recorded as a
  read and a write; a write to less than a whole matrix reads that matrix.
- *variable accesses*: per variable, the commands that touch it in command
  order, one Access per command (read, write or read-write).
- *matrix accesses*: per matrix, the allocating and deallocating commands, the
  accesses (allocation, deallocation and swaps are not accesses; kAcceptInput
  is a write) and whether the matrix is an input or an output.

Structural faults the analysis cannot work around (a submatrix outside its
matrix, an allocation of a partial matrix, a matrix allocated twice, an
unknown command type) raise AnalysisError (a ComputationError) naming the
command or submatrix and the matrix.
"""

from bisect import bisect_left

from .. import _fast
from ..compiler.computation import CommandType, SubMatrixInfo
from ..components.base import ComponentProperty as P
from .analysis_types import (Access, AccessType, AnalysisError, CommandAttributes,
                             MatrixAccesses, MatrixAccessSummary, kReadAccess, kReadWriteAccess,
                             kWriteAccess)

CT = CommandType

__all__ = [
    "AnalysisError", "AccessType", "kReadAccess", "kWriteAccess", "kReadWriteAccess", "Access",
    "CommandAttributes", "ComputationVariables", "MatrixAccesses", "Analyzer",
    "ComputationAnalysis", "compute_command_attributes", "compute_variable_accesses",
    "compute_matrix_accesses", "compute_matrix_to_submatrix", "get_commands_of_type",
    "get_max_memory_use", "print_command_attributes", "print_matrix_accesses",
    "indexes_multi_to_submatrix_indexes", "MatrixAccessSummary", "matrix_access_summary",
    "undefined_variable_candidates", "rewritten_variable_candidates",
]


def _sort_uniq(values):
    return sorted(set(values)) if len(values) > 1 else values


class ComputationVariablesPy:
    """Kaldi's ComputationVariables: the split of every matrix into variables
    (see the module docstring). Call init() once."""

    def __init__(self):
        self.row_split_points = []        # per matrix, sorted split rows
        self.column_split_points = []     # per matrix, sorted split columns
        self.matrix_to_variable_index = []  # first variable of each matrix; one extra at end
        self.submatrix_to_matrix = []
        self.submatrix_is_whole_matrix = []
        self.variable_to_matrix = []
        self.variables_for_submatrix = []  # per submatrix, sorted variable list
        self._num_variables = 0
        self._initialized = False

    def init(self, computation):
        if self._initialized:
            raise AnalysisError("ComputationVariablesPy.init() called twice")
        self._initialized = True
        self._compute_split_points(computation)
        self._compute_variables_for_submatrix(computation)
        self._compute_variable_to_matrix()

    def _compute_split_points(self, computation):
        matrices = computation.matrices
        submatrices = computation.submatrices
        num_matrices = len(matrices)
        rows = [[] for _ in range(num_matrices)]
        cols = [[] for _ in range(num_matrices)]
        if submatrices and submatrices[0].num_rows != 0:
            raise AnalysisError("submatrix 0 must be the empty submatrix")
        for s in range(1, len(submatrices)):
            info = submatrices[s]
            m = info.matrix_index
            if not 0 < m < num_matrices:
                raise AnalysisError(
                    "submatrix %d refers to matrix m%d, but the computation has matrices "
                    "m1..m%d" % (s, m, num_matrices - 1))
            mi = matrices[m]
            if (info.row_offset < 0 or info.num_rows <= 0 or info.col_offset < 0
                    or info.num_cols <= 0 or info.row_offset + info.num_rows > mi.num_rows
                    or info.col_offset + info.num_cols > mi.num_cols):
                raise AnalysisError(
                    "submatrix %d = m%d(%d:%d, %d:%d) is empty or outside matrix m%d "
                    "(%d x %d)" % (s, m, info.row_offset, info.row_offset + info.num_rows - 1,
                                   info.col_offset, info.col_offset + info.num_cols - 1, m,
                                   mi.num_rows, mi.num_cols), matrix_index=m)
            rows[m].append(info.row_offset)
            rows[m].append(info.row_offset + info.num_rows)
            cols[m].append(info.col_offset)
            cols[m].append(info.col_offset + info.num_cols)
        # a matrix may have no submatrix left (after pruning): its full extent
        # is always a split range.
        start = [0] * (num_matrices + 1)
        for m in range(1, num_matrices):
            rows[m].append(0)
            rows[m].append(matrices[m].num_rows)
            cols[m].append(0)
            cols[m].append(matrices[m].num_cols)
            rows[m] = sorted(set(rows[m]))
            cols[m] = sorted(set(cols[m]))
            start[m + 1] = start[m] + (len(rows[m]) - 1) * (len(cols[m]) - 1)
        self.row_split_points = rows
        self.column_split_points = cols
        self.matrix_to_variable_index = start
        self._num_variables = start[-1] if num_matrices > 0 else 0

    def _compute_variables_for_submatrix(self, computation):
        submatrices = computation.submatrices
        n = len(submatrices)
        self.variables_for_submatrix = [[] for _ in range(n)]
        self.submatrix_is_whole_matrix = [False] * n
        self.submatrix_to_matrix = [0] * n
        for s in range(1, n):
            info = submatrices[s]
            m = info.matrix_index
            self.submatrix_to_matrix[s] = m
            rsp = self.row_split_points[m]
            csp = self.column_split_points[m]
            r0 = bisect_left(rsp, info.row_offset)
            r1 = bisect_left(rsp, info.row_offset + info.num_rows)
            c0 = bisect_left(csp, info.col_offset)
            c1 = bisect_left(csp, info.col_offset + info.num_cols)
            ncv = len(csp) - 1
            base = self.matrix_to_variable_index[m]
            self.variables_for_submatrix[s] = [base + r * ncv + c
                                               for r in range(r0, r1) for c in range(c0, c1)]
            if r0 == 0 and r1 == len(rsp) - 1 and c0 == 0 and c1 == ncv:
                self.submatrix_is_whole_matrix[s] = True

    def _compute_variable_to_matrix(self):
        v2m = [0] * self._num_variables
        start = self.matrix_to_variable_index
        for m in range(1, len(start) - 1):
            for v in range(start[m], start[m + 1]):
                v2m[v] = m
        self.variable_to_matrix = v2m

    def num_variables(self):
        return self._num_variables

    def get_matrix_for_variable(self, variable):
        if not 0 <= variable < self._num_variables:
            raise IndexError("variable %d out of range [0, %d)" % (variable,
                                                                   self._num_variables))
        return self.variable_to_matrix[variable]

    def append_variables_for_submatrix(self, submatrix_index, out_list):
        """Appends the sorted variables of ``submatrix_index`` to ``out_list``."""
        out_list.extend(self.variables_for_submatrix[submatrix_index])

    def append_variables_for_matrix(self, matrix_index, out_list):
        """Appends the sorted variables of ``matrix_index`` to ``out_list``."""
        start = self.matrix_to_variable_index
        out_list.extend(range(start[matrix_index], start[matrix_index + 1]))

    def record_access_for_submatrix(self, submatrix_index, access_type, ca):
        """Records on CommandAttributes ``ca`` an access to ``submatrix_index``
        (0, the empty submatrix, records nothing). A write to less than the
        whole matrix is also a read of the matrix (what is left keeps its old
        contents)."""
        if submatrix_index == 0:
            return
        if not 0 < submatrix_index < len(self.submatrix_to_matrix):
            raise AnalysisError("submatrix index %d out of range [0, %d)"
                                % (submatrix_index, len(self.submatrix_to_matrix)))
        m = self.submatrix_to_matrix[submatrix_index]
        variables = self.variables_for_submatrix[submatrix_index]
        if access_type == kReadAccess:
            ca.variables_read.extend(variables)
            ca.matrices_read.append(m)
            ca.submatrices_read.append(submatrix_index)
        elif access_type == kWriteAccess:
            ca.variables_written.extend(variables)
            ca.submatrices_written.append(submatrix_index)
            ca.matrices_written.append(m)
            if not self.submatrix_is_whole_matrix[submatrix_index]:
                ca.matrices_read.append(m)
        else:
            ca.variables_written.extend(variables)
            ca.variables_read.extend(variables)
            ca.submatrices_written.append(submatrix_index)
            ca.submatrices_read.append(submatrix_index)
            ca.matrices_written.append(m)
            ca.matrices_read.append(m)

    def _locate(self, variable):
        if not 0 <= variable < self._num_variables:
            raise IndexError("variable %d out of range [0, %d)" % (variable,
                                                                   self._num_variables))
        m = self.variable_to_matrix[variable]
        offset = variable - self.matrix_to_variable_index[m]
        ncv = len(self.column_split_points[m]) - 1
        return m, offset // ncv, offset % ncv

    def describe_variable(self, variable):
        """Kaldi's DescribeVariable: "m3", or "m3(0:9,:)" / "m3(:,10:19)" /
        "m3(0:9,10:19)" (inclusive ranges) when the matrix is split."""
        m, r, c = self._locate(variable)
        rsp = self.row_split_points[m]
        csp = self.column_split_points[m]
        if len(rsp) == 2 and len(csp) == 2:
            return "m%d" % m
        rows = ":" if len(rsp) == 2 else "%d:%d" % (rsp[r], rsp[r + 1] - 1)
        cols = ":" if len(csp) == 2 else "%d:%d" % (csp[c], csp[c + 1] - 1)
        return "m%d(%s,%s)" % (m, rows, cols)

    def variable_info(self, variable):
        """The SubMatrixInfo that the variable covers."""
        m, r, c = self._locate(variable)
        rsp = self.row_split_points[m]
        csp = self.column_split_points[m]
        return SubMatrixInfo(m, rsp[r], rsp[r + 1] - rsp[r], csp[c], csp[c + 1] - csp[c])


def indexes_multi_to_submatrix_indexes(pairs):
    """The sorted distinct submatrix indexes in an indexes_multi list (the
    (-1, -1) 'no source' entries excluded)."""
    return sorted({s for s, _ in pairs if s != -1})


def _component_properties(nnet):
    return [nnet.get_component(i).properties() for i in range(nnet.num_components())]


def compute_command_attributes_py(nnet, computation, variables):
    """Kaldi's ComputeCommandAttributes: one CommandAttributes per command."""
    props = _component_properties(nnet)
    record = variables.record_access_for_submatrix
    attributes = []
    command_index = 0
    try:
        for command_index, c in enumerate(computation.commands):
            attributes.append(_command_attributes(c, command_index, computation, props,
                                                  record))
    except AnalysisError as e:
        if e.command_index is not None:
            raise
        raise AnalysisError("command c%d: %s" % (command_index, e.detail),
                            command_index) from None
    return attributes


def _command_attributes(c, command_index, computation, props, record):
    """The CommandAttributes of one command."""
    R, W, RW = kReadAccess, kWriteAccess, kReadWriteAccess
    attr = CommandAttributes()
    ct = c.command_type
    if ct in (CT.kAllocMatrix, CT.kDeallocMatrix, CT.kSwapMatrix):
        pass   # these leave the matrix undefined: neither read nor written
    elif ct == CT.kSetConst:
        record(c.arg1, W, attr)
    elif ct == CT.kPropagate:
        record(c.arg3, R, attr)
        record(c.arg4, RW if props[c.arg1] & P.kPropagateAdds else W, attr)
    elif ct in (CT.kBackprop, CT.kBackpropNoModelUpdate):
        record(c.arg3, R, attr)
        record(c.arg4, R, attr)
        record(c.arg5, R, attr)
        record(c.arg6, RW if props[c.arg1] & P.kBackpropAdds else W, attr)
        if ct == CT.kBackprop and props[c.arg1] & P.kUpdatableComponent:
            attr.has_side_effects = True
    elif ct == CT.kMatrixCopy:
        record(c.arg1, W, attr)
        record(c.arg2, R, attr)
    elif ct in (CT.kMatrixAdd, CT.kAddRows, CT.kAddRowRanges):
        record(c.arg1, RW, attr)
        record(c.arg2, R, attr)
    elif ct == CT.kCopyRows:
        # rows with index -1 keep their old value: the result depends on it
        record(c.arg1, RW if -1 in computation.indexes[c.arg3] else W, attr)
        record(c.arg2, R, attr)
    elif ct in (CT.kAddRowsMulti, CT.kCopyRowsMulti):
        # kCopyRowsMulti writes zero where a row has no source: a pure write
        record(c.arg1, RW if ct == CT.kAddRowsMulti else W, attr)
        for s in indexes_multi_to_submatrix_indexes(computation.indexes_multi[c.arg2]):
            record(s, R, attr)
    elif ct in (CT.kAddToRowsMulti, CT.kCopyToRowsMulti):
        record(c.arg1, R, attr)
        for s in indexes_multi_to_submatrix_indexes(computation.indexes_multi[c.arg2]):
            record(s, RW, attr)
    elif ct == CT.kCompressMatrix:
        record(c.arg1, RW, attr)
    elif ct in (CT.kDecompressMatrix, CT.kAcceptInput):
        record(c.arg1, W, attr)
    elif ct == CT.kProvideOutput:
        record(c.arg1, R, attr)
    elif ct in (CT.kNoOperation, CT.kNoOperationPermanent, CT.kNoOperationMarker,
                CT.kNoOperationLabel, CT.kGotoLabel):
        pass
    else:
        raise AnalysisError("command c%d has unknown command type %r"
                            % (command_index, ct), command_index)
    attr.variables_read = _sort_uniq(attr.variables_read)
    attr.variables_written = _sort_uniq(attr.variables_written)
    attr.submatrices_read = _sort_uniq(attr.submatrices_read)
    attr.submatrices_written = _sort_uniq(attr.submatrices_written)
    attr.matrices_read = _sort_uniq(attr.matrices_read)
    attr.matrices_written = _sort_uniq(attr.matrices_written)
    return attr


def _append_accesses(per_item, c, read, written):
    """Appends command ``c``'s access to every item of the sorted lists
    ``read`` and ``written``: read-write when in both."""
    if not written:
        for i in read:
            per_item[i].append(Access(c, kReadAccess))
    elif not read:
        for i in written:
            per_item[i].append(Access(c, kWriteAccess))
    else:
        read_set = set(read)
        written_set = set(written)
        for i in sorted(read_set | written_set):
            if i in read_set:
                kind = kReadWriteAccess if i in written_set else kReadAccess
            else:
                kind = kWriteAccess
            per_item[i].append(Access(c, kind))


def compute_variable_accesses_py(variables, command_attributes):
    """Kaldi's ComputeVariableAccesses: per variable, its accesses in command
    order, one per command."""
    accesses = [[] for _ in range(variables.num_variables())]
    for c, attr in enumerate(command_attributes):
        _append_accesses(accesses, c, attr.variables_read, attr.variables_written)
    return accesses


def _whole_matrix_of(computation, command_index, submatrix_index):
    if not computation.is_whole_matrix(submatrix_index):
        s = computation.submatrices[submatrix_index]
        raise AnalysisError(
            "command c%d does not operate on a whole matrix (submatrix %d of matrix m%d)"
            % (command_index, submatrix_index, s.matrix_index), command_index,
            s.matrix_index)
    return computation.submatrices[submatrix_index].matrix_index


def compute_matrix_accesses_py(nnet, computation, variables, command_attributes):
    """Kaldi's ComputeMatrixAccesses: one MatrixAccesses per matrix (index 0,
    the empty matrix, included and never set)."""
    num_matrices = len(computation.matrices)
    result = [MatrixAccesses() for _ in range(num_matrices)]
    per_matrix = [ma.accesses for ma in result]
    commands = computation.commands
    for c, attr in enumerate(command_attributes):
        _append_accesses(per_matrix, c, attr.matrices_read, attr.matrices_written)
        command = commands[c]
        ct = command.command_type
        if ct == CT.kAllocMatrix:
            m = _whole_matrix_of(computation, c, command.arg1)
            if result[m].allocate_command != -1:
                raise AnalysisError("Matrix m%d initialized twice (commands c%d and c%d)."
                                       % (m, result[m].allocate_command, c), c, m)
            result[m].allocate_command = c
        elif ct == CT.kSwapMatrix:
            m1 = _whole_matrix_of(computation, c, command.arg1)
            m2 = _whole_matrix_of(computation, c, command.arg2)
            if result[m1].allocate_command != -1:
                raise AnalysisError("Matrix m%d initialized twice (commands c%d and c%d)."
                                       % (m1, result[m1].allocate_command, c), c, m1)
            result[m1].allocate_command = c
            if result[m2].deallocate_command != -1:
                raise AnalysisError("Matrix m%d destroyed twice (commands c%d and c%d)."
                                       % (m2, result[m2].deallocate_command, c), c, m2)
            result[m2].deallocate_command = c
        elif ct == CT.kDeallocMatrix:
            m = _whole_matrix_of(computation, c, command.arg1)
            if result[m].deallocate_command != -1:
                raise AnalysisError("Matrix m%d destroyed twice (commands c%d and c%d)."
                                       % (m, result[m].deallocate_command, c), c, m)
            result[m].deallocate_command = c
        elif ct == CT.kAcceptInput:
            m = _whole_matrix_of(computation, c, command.arg1)
            result[m].is_input = True
            # accepting the same input twice re-allocates it: the first counts
            if result[m].allocate_command == -1:
                result[m].allocate_command = c
        elif ct == CT.kProvideOutput:
            m = _whole_matrix_of(computation, c, command.arg1)
            result[m].is_output = True
    return result


def matrix_access_summary_py(matrix_accesses):
    """The MatrixAccessSummary of ``matrix_accesses`` (an Analyzer's). Passes
    that visit every matrix read these lists instead of building each
    matrix's list of Access objects."""
    first, second, last = [], [], []
    for ma in matrix_accesses:
        acc = ma.accesses
        n = len(acc)
        first.append(acc[0].command_index if n else -1)
        second.append(acc[1].command_index if n > 1 else -1)
        last.append(acc[-1].command_index if n else -1)
    return MatrixAccessSummary(
        [ma.allocate_command for ma in matrix_accesses],
        [ma.deallocate_command for ma in matrix_accesses], first, second, last,
        [bool(ma.is_input) for ma in matrix_accesses],
        [bool(ma.is_output) for ma in matrix_accesses])


def undefined_variable_candidates_py(variable_accesses, command_types, compress_type):
    """The variables, in order, that the checker's undefined-data check has
    to look at: those never accessed, and those whose first access is not a
    pure write and is made by a command whose type (``command_types[c]``, one
    byte per command) is not ``compress_type``."""
    out = []
    for v, accesses in enumerate(variable_accesses):
        if not accesses:
            out.append(v)
            continue
        first = accesses[0]
        ci = first.command_index
        if first.access_type != kWriteAccess and not (
                ci < len(command_types) and command_types[ci] == compress_type):
            out.append(v)
    return out


def rewritten_variable_candidates_py(variable_accesses):
    """The variables, in order, that the checker's rewrite check has to look
    at: those never accessed, and those written (or read and written) after a
    pure read."""
    out = []
    for v, accesses in enumerate(variable_accesses):
        if not accesses:
            out.append(v)
            continue
        read = False
        for x in accesses:
            if x.access_type == kReadAccess:
                read = True
            elif read:
                out.append(v)
                break
    return out


class AnalyzerPy:
    """Kaldi's Analyzer: variables, command_attributes, variable_accesses and
    matrix_accesses of one computation, computed by init()."""

    def __init__(self):
        self.variables = ComputationVariablesPy()
        self.command_attributes = []
        self.variable_accesses = []
        self.matrix_accesses = []

    def init(self, nnet, computation):
        self.variables.init(computation)
        self.command_attributes = compute_command_attributes_py(nnet, computation, self.variables)
        self.variable_accesses = compute_variable_accesses_py(self.variables,
                                                           self.command_attributes)
        self.matrix_accesses = compute_matrix_accesses_py(nnet, computation, self.variables,
                                                       self.command_attributes)
        return self


def _is_zeroing(command):
    return command.command_type == CT.kSetConst and command.alpha == 0.0


class ComputationAnalysisPy:
    """Kaldi's ComputationAnalysis: questions about when a submatrix or matrix
    is first/last touched, answered from an AnalyzerPy of ``computation``
    (which must not change while this object is used). Allocation, swap and
    deallocation commands are never accesses."""

    def __init__(self, computation, analyzer):
        self.computation = computation
        self.analyzer = analyzer

    def _check_submatrix(self, s):
        if not 0 < s < len(self.computation.submatrices):
            raise IndexError("submatrix %d out of range [1, %d)"
                             % (s, len(self.computation.submatrices)))

    def _check_matrix(self, m):
        if not 0 < m < len(self.computation.matrices):
            raise IndexError("matrix %d out of range [1, %d)"
                             % (m, len(self.computation.matrices)))

    def first_nontrivial_access(self, s):
        """The first command accessing any part of submatrix ``s`` other than
        by zeroing it (kSetConst with alpha 0); num_commands if none."""
        self._check_submatrix(s)
        commands = self.computation.commands
        ans = len(commands)
        va = self.analyzer.variable_accesses
        for v in self.analyzer.variables.variables_for_submatrix[s]:
            for access in va[v]:
                if not _is_zeroing(commands[access.command_index]):
                    ans = min(ans, access.command_index)
                    break
        return ans

    def first_access(self, s):
        """The first command accessing any part of ``s`` (zeroing included);
        num_commands if none."""
        self._check_submatrix(s)
        ans = len(self.computation.commands)
        va = self.analyzer.variable_accesses
        for v in self.analyzer.variables.variables_for_submatrix[s]:
            if va[v]:
                ans = min(ans, va[v][0].command_index)
        return ans

    def last_access(self, s):
        """The last command accessing any part of ``s``; -1 if none."""
        self._check_submatrix(s)
        ans = -1
        va = self.analyzer.variable_accesses
        for v in self.analyzer.variables.variables_for_submatrix[s]:
            if va[v]:
                ans = max(ans, va[v][-1].command_index)
        return ans

    def last_write_access(self, s):
        """The last command writing any part of ``s`` (-1 if none); for a
        matrix that is an output, num_commands (the user reads it after)."""
        self._check_submatrix(s)
        m = self.computation.submatrices[s].matrix_index
        if self.analyzer.matrix_accesses[m].is_output:
            return len(self.computation.commands)
        ans = -1
        va = self.analyzer.variable_accesses
        for v in self.analyzer.variables.variables_for_submatrix[s]:
            for access in reversed(va[v]):
                if access.access_type != kReadAccess:
                    ans = max(ans, access.command_index)
                    break
        return ans

    def data_invalidated_command(self, c, s):
        """The first command after ``c`` that writes any part of ``s``; else
        the command deallocating its matrix; else num_commands."""
        num_commands = len(self.computation.commands)
        if not 0 <= c < num_commands:
            raise IndexError("command %d out of range [0, %d)" % (c, num_commands))
        self._check_submatrix(s)
        m = self.computation.submatrices[s].matrix_index
        ans = self.analyzer.matrix_accesses[m].deallocate_command
        if ans == -1:
            ans = num_commands
        va = self.analyzer.variable_accesses
        for v in self.analyzer.variables.variables_for_submatrix[s]:
            for access in va[v]:
                if access.command_index > c and access.access_type != kReadAccess:
                    ans = min(ans, access.command_index)
                    break
        return ans

    def first_nontrivial_matrix_access(self, m):
        """The first command accessing matrix ``m`` other than by zeroing it;
        num_commands if none."""
        self._check_matrix(m)
        commands = self.computation.commands
        for access in self.analyzer.matrix_accesses[m].accesses:
            if not _is_zeroing(commands[access.command_index]):
                return access.command_index
        return len(commands)

    def last_matrix_access(self, m):
        """The last command accessing matrix ``m``; -1 if none."""
        self._check_matrix(m)
        accesses = self.analyzer.matrix_accesses[m].accesses
        return accesses[-1].command_index if accesses else -1


def compute_matrix_to_submatrix_py(computation):
    """Kaldi's ComputeMatrixToSubmatrix: per matrix, the submatrices of it in
    increasing order ([0] is empty)."""
    result = [[] for _ in computation.matrices]
    for s in range(1, len(computation.submatrices)):
        result[computation.submatrices[s].matrix_index].append(s)
    return result


def get_commands_of_type(computation, command_type):
    """Kaldi's GetCommandsOfType: indexes of the commands of that type."""
    return [i for i, c in enumerate(computation.commands) if c.command_type == command_type]


_COMPRESSED_ONE_BYTE = (1, 2)   # kCompressedMatrixInt8, kCompressedMatrixUint8


def get_max_memory_use(computation):
    """Kaldi's GetMaxMemoryUse: the largest number of bytes held by allocated
    matrices (float32) at any point of the command list, counting inputs as
    they are accepted and compressed matrices at their compressed size."""
    submatrices = computation.submatrices
    num_submatrices = len(submatrices)
    compressed_bytes = {}
    cur = peak = 0
    for index, c in enumerate(computation.commands):
        ct = c.command_type
        if ct not in (CT.kAllocMatrix, CT.kAcceptInput, CT.kDeallocMatrix,
                      CT.kCompressMatrix, CT.kDecompressMatrix):
            continue
        if not 0 <= c.arg1 < num_submatrices:
            raise AnalysisError("command c%d refers to submatrix %d, out of range"
                                % (index, c.arg1), index)
        s = submatrices[c.arg1]
        num_bytes = 4 * s.num_rows * s.num_cols
        if ct in (CT.kAllocMatrix, CT.kAcceptInput):
            cur += num_bytes
        elif ct == CT.kDeallocMatrix:
            cur -= num_bytes
        elif ct == CT.kCompressMatrix:
            packed = (1 if c.arg2 in _COMPRESSED_ONE_BYTE else 2) * s.num_rows * s.num_cols
            compressed_bytes[c.arg1] = packed
            cur += packed - num_bytes
        else:
            if c.arg1 not in compressed_bytes:
                raise AnalysisError("command c%d decompresses submatrix %d, which was "
                                    "never compressed" % (index, c.arg1), index)
            cur += num_bytes - compressed_bytes[c.arg1]
        if cur < 0:
            raise AnalysisError("command c%d frees more memory than is allocated" % index,
                                index)
        peak = max(peak, cur)
    return peak


def print_command_attributes(attributes):
    """Kaldi's PrintCommandAttributes, as a string (for debugging)."""
    lines = []
    for c, a in enumerate(attributes):
        parts = ["c%d: " % c]
        if a.variables_read:
            parts.append("r(%s) " % ",".join("v%d" % v for v in a.variables_read))
        if a.variables_written:
            parts.append("w(%s) " % ",".join("v%d" % v for v in a.variables_written))
        if a.matrices_read:
            parts.append("r(%s) " % ",".join("m%d" % m for m in a.matrices_read))
        if a.matrices_written:
            parts.append("w(%s)" % ",".join("m%d" % m for m in a.matrices_written))
        lines.append("".join(parts) + "\n")
    return "".join(lines)


_ACCESS_LETTERS = {kReadAccess: "r", kWriteAccess: "w", kReadWriteAccess: "rw"}


def print_matrix_accesses(matrix_accesses):
    """Kaldi's PrintMatrixAccesses, as a string (for debugging)."""
    lines = []
    for m in range(1, len(matrix_accesses)):
        a = matrix_accesses[m]
        lines.append("m%d: init-command=%d, destroy-command=%d, accesses=%s\n" % (
            m, a.allocate_command, a.deallocate_command,
            "".join("c%d(%s) " % (x.command_index, _ACCESS_LETTERS[x.access_type])
                    for x in a.accesses)))
    return "".join(lines)


# -- the implementation in use: the kernel when it is loaded (the one
# pynnet3._fast.load policy), else the twins above ------------------------------

_kernel = _fast.load("analysis_kernel")
(ComputationVariables, Analyzer, ComputationAnalysis, compute_command_attributes,
 compute_variable_accesses, compute_matrix_accesses, matrix_access_summary,
 compute_matrix_to_submatrix, undefined_variable_candidates,
 rewritten_variable_candidates) = _fast.select(
    _kernel, ComputationVariablesPy, AnalyzerPy, ComputationAnalysisPy,
    compute_command_attributes_py, compute_variable_accesses_py, compute_matrix_accesses_py,
    matrix_access_summary_py, compute_matrix_to_submatrix_py, undefined_variable_candidates_py,
    rewritten_variable_candidates_py)
