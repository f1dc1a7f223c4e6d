"""NnetComputation: the compiled program, as Kaldi's data structure.

A computation is a list of commands over *matrices* (whole allocations) and
*submatrices* (row/column ranges of a matrix; submatrix 0 is the empty one),
plus index tables the row-copy commands refer to. The compiler produces it,
the optimizer rewrites it, NnetComputer executes it. Field names and command
argument meanings are Kaldi's (nnet-computation.h), in snake_case.

Printing in Kaldi's format and reading/writing Kaldi's serialization live in
``computation_io.py``.
"""

from dataclasses import dataclass, field
from enum import IntEnum


class CommandType(IntEnum):
    """Kaldi's CommandType, in Kaldi's order (the order matters for I/O)."""

    kAllocMatrix = 0
    kDeallocMatrix = 1
    kSwapMatrix = 2
    kSetConst = 3
    kPropagate = 4
    kBackprop = 5
    kBackpropNoModelUpdate = 6
    kMatrixCopy = 7
    kMatrixAdd = 8
    kCopyRows = 9
    kAddRows = 10
    kCopyRowsMulti = 11
    kCopyToRowsMulti = 12
    kAddRowsMulti = 13
    kAddToRowsMulti = 14
    kAddRowRanges = 15
    kCompressMatrix = 16
    kDecompressMatrix = 17
    kAcceptInput = 18
    kProvideOutput = 19
    kNoOperation = 20
    kNoOperationPermanent = 21
    kNoOperationMarker = 22
    kNoOperationLabel = 23
    kGotoLabel = 24


# What each command's arguments are, by command type: the one table of these
# facts (Kaldi's IdentifySubmatrixArgs, IdentifyIndexesArgs,
# IdentifyIndexesMultiArgs and IdentifyIndexesRangesArgs, nnet-optimize-utils.cc).
# The execution plan, renumbering, the analysis and the checker read it; what a
# command does with an argument (reads it, writes it, adds to it) is the
# analysis' business (Kaldi's ComputeCommandAttributes).
_T = CommandType

# The argument fields holding submatrix indexes (in Kaldi's order).
SUBMATRIX_ARGS = {
    _T.kAllocMatrix: ("arg1",), _T.kDeallocMatrix: ("arg1",), _T.kSwapMatrix: ("arg1", "arg2"),
    _T.kSetConst: ("arg1",), _T.kPropagate: ("arg3", "arg4"),
    _T.kBackprop: ("arg3", "arg4", "arg5", "arg6"),
    _T.kBackpropNoModelUpdate: ("arg3", "arg4", "arg5", "arg6"),
    _T.kMatrixCopy: ("arg1", "arg2"), _T.kMatrixAdd: ("arg1", "arg2"),
    _T.kCopyRows: ("arg1", "arg2"), _T.kAddRows: ("arg1", "arg2"),
    _T.kCopyRowsMulti: ("arg1",), _T.kCopyToRowsMulti: ("arg1",),
    _T.kAddRowsMulti: ("arg1",), _T.kAddToRowsMulti: ("arg1",),
    _T.kAddRowRanges: ("arg1", "arg2"), _T.kCompressMatrix: ("arg1",),
    _T.kDecompressMatrix: ("arg1",), _T.kAcceptInput: ("arg1",), _T.kProvideOutput: ("arg1",),
}
# The argument naming a table of computation.indexes, .indexes_multi or
# .indexes_ranges (whose pairs / ranges refer to submatrices or rows).
INDEXES_ARG = {_T.kCopyRows: "arg3", _T.kAddRows: "arg3"}
INDEXES_MULTI_ARG = {_T.kCopyRowsMulti: "arg2", _T.kCopyToRowsMulti: "arg2",
                     _T.kAddRowsMulti: "arg2", _T.kAddToRowsMulti: "arg2"}
INDEXES_RANGES_ARG = {_T.kAddRowRanges: "arg3"}
del _T


def has_loops(computation):
    """Whether the computation jumps back (a kGotoLabel: a looped
    computation, whose commands run more than once)."""
    return any(c.command_type == CommandType.kGotoLabel for c in computation.commands)


def multi_submatrices(computation, c):
    """The submatrices the pairs of command ``c``'s indexes_multi table name
    (none for a command without one)."""
    multi = INDEXES_MULTI_ARG.get(c.command_type)
    if multi is None or not 0 <= getattr(c, multi) < len(computation.indexes_multi):
        return []
    num_subs = len(computation.submatrices)
    return [s for s, _ in computation.indexes_multi[getattr(c, multi)] if 0 < s < num_subs]


def command_touches(computation):
    """{matrix index: [(command index, submatrix index), ...]}: every
    command naming a submatrix of each matrix, in command order (submatrix
    -1: named through the command's indexes_multi table)."""
    subs = computation.submatrices
    touches = {}
    for i, c in enumerate(computation.commands):
        for name in SUBMATRIX_ARGS.get(c.command_type, ()):
            s = getattr(c, name)
            if 0 < s < len(subs):
                touches.setdefault(subs[s].matrix_index, []).append((i, s))
        for s in multi_submatrices(computation, c):
            touches.setdefault(subs[s].matrix_index, []).append((i, -1))
    return touches


def touched_matrices(computation, c):
    """The matrices command ``c`` touches, through any submatrix it names
    (its submatrix arguments and the pairs of its indexes_multi table)."""
    subs = computation.submatrices
    num_subs = len(subs)
    out = set()
    for name in SUBMATRIX_ARGS.get(c.command_type, ()):
        s = getattr(c, name)
        if 0 < s < num_subs:
            out.add(subs[s].matrix_index)
    for s in multi_submatrices(computation, c):
        out.add(subs[s].matrix_index)
    return out


class MatrixStrideType(IntEnum):
    kDefaultStride = 0
    kStrideEqualNumCols = 1


@dataclass(slots=True)
class Command:
    """One command; unused args are -1 and alpha defaults to 1.0, as in Kaldi."""

    command_type: CommandType = CommandType.kNoOperationMarker
    arg1: int = -1
    arg2: int = -1
    arg3: int = -1
    arg4: int = -1
    arg5: int = -1
    arg6: int = -1
    arg7: int = -1
    alpha: float = 1.0


@dataclass(slots=True)
class MatrixInfo:
    num_rows: int
    num_cols: int
    stride_type: MatrixStrideType = MatrixStrideType.kDefaultStride


@dataclass(slots=True)
class MatrixDebugInfo:
    is_deriv: bool = False
    cindexes: list = field(default_factory=list)   # list of (node, (n, t, x))


_CINDEXES_SLOT = MatrixDebugInfo.__dict__["cindexes"]


class LazyMatrixDebugInfo(MatrixDebugInfo):
    """A MatrixDebugInfo whose Cindex list is built on first access, by
    ``build(*args)`` from a compact recipe (the compiler's packed keys, the
    shortcut's two-sequence rows). A computation has a Python tuple per
    matrix row in its debug info, which costs time to build and to free,
    while running a computation never reads them; printing, writing or
    checking it does, and then gets the same list as an eager one. Equal to
    any MatrixDebugInfo with the same fields.

    ``num_rows`` and ``min_n`` (the number of Cindexes and their smallest n)
    let the checker look at an unbuilt list without building it."""

    __slots__ = ("_recipe",)

    def __init__(self, is_deriv, num_rows, min_n, build, args):
        MatrixDebugInfo.__init__(self, is_deriv, None)
        self._recipe = (num_rows, min_n, build, args)

    def pending(self):
        """(num_rows, min_n, build, args) while the list is not built yet,
        else None (a pass may wrap ``build`` to change the list it will
        give without building it now)."""
        return self._recipe

    @property
    def cindexes(self):
        value = _CINDEXES_SLOT.__get__(self)
        if value is None:
            _, _, build, args = self._recipe
            value = build(*args)
            _CINDEXES_SLOT.__set__(self, value)
            self._recipe = None
        return value

    @cindexes.setter
    def cindexes(self, value):
        _CINDEXES_SLOT.__set__(self, value)
        self._recipe = None

    def __eq__(self, other):
        if not isinstance(other, MatrixDebugInfo):
            return NotImplemented
        return self.is_deriv == other.is_deriv and self.cindexes == other.cindexes

    __hash__ = None


@dataclass(slots=True)
class SubMatrixInfo:
    matrix_index: int
    row_offset: int
    num_rows: int
    col_offset: int
    num_cols: int


@dataclass(slots=True)
class PrecomputedIndexesInfo:
    """What a non-simple component precomputed for one propagate/backprop."""

    data: object = None                 # a component's precomputed-indexes object
    input_indexes: list = field(default_factory=list)
    output_indexes: list = field(default_factory=list)


@dataclass(slots=True)
class NnetComputation:
    """Kaldi's NnetComputation: the matrices, submatrices, index tables and
    commands that compute a request (what :func:`pynnet3.compile` returns and
    :class:`pynnet3.NnetComputer` runs).
    :func:`pynnet3.compiler.computation_io.print_computation` gives its text
    as Kaldi prints it."""

    matrices: list = field(default_factory=list)            # MatrixInfo
    matrix_debug_info: list = field(default_factory=list)   # MatrixDebugInfo (may be empty)
    submatrices: list = field(default_factory=list)         # SubMatrixInfo; [0] is empty
    component_precomputed_indexes: list = field(default_factory=list)  # [0] is empty
    indexes: list = field(default_factory=list)             # lists of int (-1 = none)
    indexes_multi: list = field(default_factory=list)       # lists of (submatrix, row)
    indexes_ranges: list = field(default_factory=list)      # lists of (begin, end)
    commands: list = field(default_factory=list)            # Command
    need_model_derivative: bool = False

    def new_matrix(self, num_rows, num_cols, stride_type=MatrixStrideType.kDefaultStride):
        """Adds a matrix and the submatrix covering all of it; returns that
        submatrix. Index 0 of both lists is reserved for the empty matrix, as
        in Kaldi."""
        if not self.matrices:
            self.matrices.append(MatrixInfo(0, 0))
            self.submatrices.append(SubMatrixInfo(0, 0, 0, 0, 0))
        matrix_index = len(self.matrices)
        self.matrices.append(MatrixInfo(num_rows, num_cols, stride_type))
        if self.matrix_debug_info:
            self.matrix_debug_info.append(MatrixDebugInfo())
        return self.new_submatrix(matrix_index, 0, num_rows, 0, num_cols)

    def new_submatrix(self, matrix_index, row_offset, num_rows, col_offset, num_cols):
        self.submatrices.append(SubMatrixInfo(matrix_index, row_offset, num_rows,
                                              col_offset, num_cols))
        return len(self.submatrices) - 1

    def is_whole_matrix(self, submatrix_index):
        s = self.submatrices[submatrix_index]
        m = self.matrices[s.matrix_index]
        return (s.row_offset == 0 and s.col_offset == 0 and s.num_rows == m.num_rows
                and s.num_cols == m.num_cols)
