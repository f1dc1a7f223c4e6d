"""NnetComputation as text and as data: Kaldi's Print, Read and Write.

- :func:`print_computation` is Kaldi's ``NnetComputation::Print``: the matrix
  list, the debug-info lines (which node and Cindexes each matrix holds) and
  one line per command, character for character.
- :func:`command_strings` is Kaldi's ``GetCommandStrings`` (the preamble and
  each command without its newline), used in error messages.
- :func:`read_computation` / :func:`write_computation` are Kaldi's
  ``NnetComputation::Read`` / ``Write`` (version 5), binary and text; a
  computation read and written back gives the same bytes.
"""

import struct


from ..common.floats import kaldi_str
from ..components.base import PrecomputedIndexes
from ..errors import KaldiFormatError
from ..io.files import open_input
from ..io.stream import OutputStream, format_float
from ..common.index_io import (print_indexes, read_cindex_vector, read_index_vector,
                             write_cindex_vector, write_index_vector)
from .computation import (Command, CommandType, MatrixDebugInfo, MatrixInfo, MatrixStrideType,
                          NnetComputation, PrecomputedIndexesInfo, SubMatrixInfo)

# Kaldi's CuCompressedMatrixType values (arg2 of kCompressMatrix) -> printed name.
COMPRESSED_MATRIX_TYPE_NAMES = {1: "int8", 2: "uint8", 3: "int16", 4: "uint16"}

_MAX_STRING_LENGTH = 200   # Kaldi summarizes longer printed lines with " ... "


def _summarize(text):
    if len(text) <= _MAX_STRING_LENGTH:
        return text
    half = _MAX_STRING_LENGTH // 2
    return text[:half] + " ... " + text[-half:]


# ---------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------

def print_cindexes(cindexes, node_names):
    """Kaldi's PrintCindexes: ``node[indexes]`` for each run of one node."""
    if len(cindexes) == 0:
        return "[ ]"
    out = []
    start = 0
    size = len(cindexes)
    while start < size:
        node = cindexes[start][0]
        end = start
        while end < size and cindexes[end][0] == node:
            end += 1
        if not 0 <= node < len(node_names):
            raise KaldiFormatError("computation debug info names node %d; the network has "
                                   "%d nodes" % (node, len(node_names)))
        out.append(node_names[node] + print_indexes([c[1] for c in cindexes[start:end]]))
        start = end
    return "".join(out)


def print_integer_vector(ints):
    """Kaldi's PrintIntegerVector: runs of equal values as ``vxN``, runs of
    consecutive values as ``a:b``, runs of two printed as two numbers."""
    size = len(ints)
    if size == 0:
        return "[ ]"
    ints = [int(v) for v in ints]
    starts = []
    cur = 0
    for i in range(1, size):
        if i > cur:
            v0, v1, v = ints[cur], ints[cur + 1], ints[i]
            if not ((v1 == v0 and v == v0) or (v1 == v0 + 1 and v == v0 + i - cur)):
                starts.append(cur)
                cur = i
    starts.append(cur)
    starts.append(size)
    parts = []
    for r in range(len(starts) - 1):
        b, e = starts[r], starts[r + 1]
        if e == b + 1:
            parts.append("%d" % ints[b])
        elif e == b + 2:
            parts.append("%d, %d" % (ints[b], ints[b + 1]))
        elif ints[b] == ints[b + 1]:
            parts.append("%dx%d" % (ints[b], e - b))
        else:
            parts.append("%d:%d" % (ints[b], ints[e - 1]))
    return "[" + ", ".join(parts) + "]"


def submatrix_strings(computation):
    """Kaldi's GetSubmatrixStrings: ``m3`` for a whole matrix, ``m3(r1:r2, c1:c2)``
    (inclusive ranges) for a part, ``[]`` for submatrix 0."""
    out = ["[]"]
    matrices = computation.matrices
    for s in computation.submatrices[1:]:
        m = matrices[s.matrix_index]
        if (s.row_offset == 0 and s.col_offset == 0 and s.num_rows == m.num_rows
                and s.num_cols == m.num_cols):
            out.append("m%d" % s.matrix_index)
        else:
            out.append("m%d(%d:%d, %d:%d)" % (s.matrix_index, s.row_offset,
                                              s.row_offset + s.num_rows - 1, s.col_offset,
                                              s.col_offset + s.num_cols - 1))
    return out


def _indexes_multi_string(computation, pairs):
    parts = []
    submatrices, matrices = computation.submatrices, computation.matrices
    for submat_index, row_index in pairs:
        if submat_index == -1:
            parts.append("NULL")
            continue
        s = submatrices[submat_index]
        m = matrices[s.matrix_index]
        row = row_index + s.row_offset
        if s.col_offset == 0 and s.num_cols == m.num_cols:
            parts.append("m%d(%d,:)" % (s.matrix_index, row))
        else:
            parts.append("m%d(%d,%d:%d)" % (s.matrix_index, row, s.col_offset,
                                            s.col_offset + s.num_cols - 1))
    return "[" + ",".join(parts) + "]"


_DEBUG_INFO_HEADER = (
    "# The following show how matrices correspond to network-nodes and\n"
    "# cindex-ids.  Format is: matrix = <node-id>.[value|deriv]"
    "[ <list-of-cindex-ids> ]\n"
    "# where a cindex-id is written as (n,t[,x]) but ranges of t values are "
    "compressed\n"
    "# so we write (n, tfirst:tlast).\n")


class _Printer:
    """Lazily built strings shared by all commands of one computation."""

    def __init__(self, computation, nnet):
        self.computation = computation
        self.nnet = nnet
        self.submat = submatrix_strings(computation)
        self._indexes = {}
        self._multi = {}

    def indexes(self, i):
        s = self._indexes.get(i)
        if s is None:
            s = self._indexes[i] = print_integer_vector(self.computation.indexes[i])
        return s

    def multi(self, i):
        s = self._multi.get(i)
        if s is None:
            s = self._multi[i] = _indexes_multi_string(self.computation,
                                                       self.computation.indexes_multi[i])
        return s

    def component_name(self, i):
        names = self.nnet.component_names
        return names[i] if 0 <= i < len(names) else "<component %d>" % i

    def node_name(self, i):
        names = self.nnet.node_names
        return names[i] if 0 <= i < len(names) else "<node %d>" % i

    def command(self, command_index):
        """Kaldi's PrintCommand, with the trailing newline."""
        comp = self.computation
        c = comp.commands[command_index]
        sm = self.submat
        ct = c.command_type
        T = CommandType
        if ct == T.kAllocMatrix:
            s = comp.submatrices[c.arg1]
            body = "%s = undefined(%d,%d)\n" % (sm[c.arg1], s.num_rows, s.num_cols)
        elif ct == T.kDeallocMatrix:
            body = "%s = []\n" % sm[c.arg1]
        elif ct == T.kSwapMatrix:
            s = comp.submatrices[c.arg1]
            body = "%s.swap(%s) [dim = %d x %d]\n" % (sm[c.arg1], sm[c.arg2], s.num_rows,
                                                      s.num_cols)
        elif ct == T.kSetConst:
            s = comp.submatrices[c.arg1]
            body = "%s.set(%s) [dim = %d x %d];\n" % (sm[c.arg1], kaldi_str(c.alpha),
                                                      s.num_rows, s.num_cols)
        elif ct == T.kPropagate:
            body = "%s.Propagate(%s%s, &%s)\n" % (
                self.component_name(c.arg1),
                "NULL, " if c.arg2 == 0 else "precomputed_indexes[%d], " % c.arg2,
                sm[c.arg3], sm[c.arg4])
        elif ct in (T.kBackprop, T.kBackpropNoModelUpdate):
            body = "%s.Backprop(%s%s, %s, %s, %s%s)\n" % (
                self.component_name(c.arg1),
                "NULL, " if c.arg2 == 0 else "precomputed_indexes[%d], " % c.arg2,
                sm[c.arg3], sm[c.arg4], sm[c.arg5],
                "[component-pointer], " if (comp.need_model_derivative
                                            and ct == T.kBackprop) else "NULL, ",
                "NULL" if c.arg6 == 0 else "&" + sm[c.arg6])
        elif ct in (T.kMatrixCopy, T.kMatrixAdd):
            op = " = " if ct == T.kMatrixCopy else " += "
            if c.alpha == 1.0:
                body = sm[c.arg1] + op + sm[c.arg2] + "\n"
            else:
                body = sm[c.arg1] + op + kaldi_str(c.alpha) + " * " + sm[c.arg2] + "\n"
        elif ct in (T.kAddRows, T.kCopyRows):
            body = "%s.%s(%s, %s%s)\n" % (sm[c.arg1],
                                         "AddRows" if ct == T.kAddRows else "CopyRows",
                                         kaldi_str(c.alpha), sm[c.arg2], self.indexes(c.arg3))
        elif ct in (T.kAddRowsMulti, T.kAddToRowsMulti, T.kCopyRowsMulti, T.kCopyToRowsMulti):
            name = {T.kAddRowsMulti: "AddRowsMulti", T.kAddToRowsMulti: "AddToRowsMulti",
                    T.kCopyRowsMulti: "CopyRowsMulti", T.kCopyToRowsMulti: "CopyToRowsMulti"}[ct]
            body = "%s.%s(%s, %s)\n" % (sm[c.arg1], name, kaldi_str(c.alpha),
                                        self.multi(c.arg2))
        elif ct == T.kAddRowRanges:
            ranges = ",".join("null" if first == -1 else "%d:%d" % (first, second - 1)
                              for first, second in comp.indexes_ranges[c.arg3])
            body = "%s.AddRowRanges(%s, %s, [%s])\n" % (sm[c.arg1], kaldi_str(c.alpha),
                                                        sm[c.arg2], ranges)
        elif ct == T.kCompressMatrix:
            type_name = COMPRESSED_MATRIX_TYPE_NAMES.get(c.arg2, "uint16")
            body = "CompressMatrix(%s, %s, %s, %s)\n" % (sm[c.arg1], kaldi_str(c.alpha),
                                                         type_name,
                                                         "true" if c.arg3 != 0 else "false")
        elif ct == T.kDecompressMatrix:
            body = "DecompressMatrix(%s)\n" % sm[c.arg1]
        elif ct == T.kAcceptInput:
            body = "%s = user input [for node: '%s']\n" % (sm[c.arg1], self.node_name(c.arg2))
        elif ct == T.kProvideOutput:
            body = "output %s to user [for node: '%s']\n" % (sm[c.arg1], self.node_name(c.arg2))
        elif ct == T.kNoOperation:
            body = "[no-op]\n"
        elif ct == T.kNoOperationPermanent:
            body = "[no-op-permanent]\n"
        elif ct == T.kNoOperationMarker:
            body = "# computation segment separator [e.g., begin backward commands]\n"
        elif ct == T.kNoOperationLabel:
            body = "[label for goto statement]\n"
        elif ct == T.kGotoLabel:
            body = "goto c%d\n" % c.arg1
        else:
            raise KaldiFormatError("command %d has unknown type %r" % (command_index, ct))
        return _summarize("c%d: %s" % (command_index, body))

    def preamble(self):
        comp = self.computation
        lines = ["matrix " + ", ".join("m%d(%d, %d)" % (i, m.num_rows, m.num_cols)
                                       for i, m in enumerate(comp.matrices) if i > 0) + "\n"]
        if comp.matrix_debug_info:
            if len(comp.matrix_debug_info) != len(comp.matrices):
                raise KaldiFormatError("computation has %d matrices but %d matrix debug infos"
                                       % (len(comp.matrices), len(comp.matrix_debug_info)))
            lines.append(_DEBUG_INFO_HEADER)
            for i in range(1, len(comp.matrices)):
                info = comp.matrix_debug_info[i]
                lines.append("m%d == %s%s\n" % (i, "deriv: " if info.is_deriv else "value: ",
                                                print_cindexes(info.cindexes,
                                                               self.nnet.node_names)))
        return "".join(lines)


def print_computation(computation, nnet):
    """Kaldi's NnetComputation::Print (``nnet`` supplies node and component names)."""
    p = _Printer(computation, nnet)
    parts = [p.preamble(), "# begin forward commands\n"]
    parts.extend(p.command(i) for i in range(len(computation.commands)))
    return "".join(parts)


def command_strings(computation, nnet):
    """Kaldi's GetCommandStrings: (preamble, [command string without newline])."""
    p = _Printer(computation, nnet)
    return p.preamble(), [p.command(i)[:-1] for i in range(len(computation.commands))]


def command_string(computation, nnet, command_index):
    """One command as Kaldi prints it, without the newline."""
    return _Printer(computation, nnet).command(command_index)[:-1]


# ---------------------------------------------------------------------------
# Serialization
# ---------------------------------------------------------------------------

_VERSION = 5
_UINT64 = struct.Struct("<Q")
_INT32 = struct.Struct("<i")


def _read_size_t(stream):
    """A size_t basic type (binary: size byte -8 then 8 bytes)."""
    if not stream.binary:
        start = stream.pos
        value = stream.read_int64()
        if value < 0:
            raise stream.error("expected a non-negative count, got %d" % value, start)
        return value
    data, pos = stream.data, stream.pos
    if pos >= len(data) or data[pos] != 0xF8:
        raise stream.error("expected a size_t (size byte -8), got %s"
                           % ("end of file" if pos >= len(data) else "size byte %d"
                              % (data[pos] - 256 if data[pos] > 127 else data[pos])))
    if pos + 9 > len(data):
        raise stream.error("expected a size_t, got end of file")
    stream.pos = pos + 9
    return _UINT64.unpack_from(data, pos + 1)[0]


def _write_size_t(stream, value):
    if stream.binary:
        stream.write_raw(b"\xf8" + _UINT64.pack(value))
    else:
        stream.write_raw(b"%d " % value)


def _newline(stream):
    if not stream.binary:
        stream.write_raw(b"\n")


def _read_matrix_info(stream):
    stream.expect_token("<MatrixInfo>")
    stream.expect_token("<NumRows>")
    num_rows = stream.read_int32()
    stream.expect_token("<NumCols>")
    num_cols = stream.read_int32()
    stride = MatrixStrideType.kDefaultStride
    if stream.read_optional_token("<StrideEqualNumCols>"):
        stride = MatrixStrideType.kStrideEqualNumCols
    stream.expect_token("</MatrixInfo>")
    return MatrixInfo(num_rows, num_cols, stride)


def _write_matrix_info(stream, m):
    stream.write_token("<MatrixInfo>")
    _newline(stream)
    stream.write_token("<NumRows>")
    stream.write_int32(m.num_rows)
    stream.write_token("<NumCols>")
    stream.write_int32(m.num_cols)
    if m.stride_type != MatrixStrideType.kDefaultStride:
        stream.write_token("<StrideEqualNumCols>")
    _newline(stream)
    stream.write_token("</MatrixInfo>")
    _newline(stream)


def _read_debug_info(stream):
    stream.expect_token("<MatrixDebugInfo>")
    stream.expect_token("<IsDeriv>")
    is_deriv = stream.read_bool()
    stream.expect_token("<Cindexes>")
    cindexes = read_cindex_vector(stream)
    stream.expect_token("</MatrixDebugInfo>")
    return MatrixDebugInfo(is_deriv, cindexes)


def _write_debug_info(stream, info):
    stream.write_token("<MatrixDebugInfo>")
    _newline(stream)
    stream.write_token("<IsDeriv>")
    stream.write_bool(info.is_deriv)
    _newline(stream)
    stream.write_token("<Cindexes>")
    write_cindex_vector(stream, info.cindexes)
    _newline(stream)
    stream.write_token("</MatrixDebugInfo>")
    _newline(stream)


_SUBMATRIX_FIELDS = (("<MatrixIndex>", "matrix_index"), ("<RowOffset>", "row_offset"),
                     ("<NumRows>", "num_rows"), ("<ColOffset>", "col_offset"),
                     ("<NumCols>", "num_cols"))


def _read_submatrix_info(stream):
    stream.expect_token("<SubMatrixInfo>")
    values = []
    for token, _ in _SUBMATRIX_FIELDS:
        stream.expect_token(token)
        values.append(stream.read_int32())
    stream.expect_token("</SubMatrixInfo>")
    return SubMatrixInfo(*values)


def _write_submatrix_info(stream, s):
    stream.write_token("<SubMatrixInfo>")
    _newline(stream)
    for token, attr in _SUBMATRIX_FIELDS:
        stream.write_token(token)
        stream.write_int32(getattr(s, attr))
    _newline(stream)
    stream.write_token("</SubMatrixInfo>")
    _newline(stream)


def _command_type(value, stream, start):
    try:
        return CommandType(value)
    except ValueError:
        raise stream.error("unknown command type %r" % (value,), start) from None


def _read_command(stream):
    stream.expect_token("<Cmd>")
    start = stream.pos
    if stream.binary:
        command_type = _command_type(stream.read_int32(), stream, start)
        alpha = stream.read_float()
        args = stream.read_int_vector()
        if len(args) > 7:
            raise stream.error("command has %d arguments, at most 7 allowed" % len(args), start)
        args = list(args) + [-1] * (7 - len(args))
    else:
        # The type name is the rest of the line, as Kaldi reads it with getline.
        end = stream.data.find(b"\n", stream.pos)
        if end < 0:
            end = len(stream.data)
        name = stream.data[stream.pos:end].decode("latin-1")
        stream.pos = end + 1
        if name not in CommandType.__members__:
            raise stream.error("unknown command type '%s'" % name, start)
        command_type = CommandType[name]
        stream.expect_token("<Alpha>")
        alpha = stream.read_float()
        stream.expect_token("<Args>")
        args = [stream.read_int32() for _ in range(7)]
    stream.expect_token("</Cmd>")
    return Command(command_type, *args, alpha=alpha)


def _write_command(stream, c):
    stream.write_token("<Cmd>")
    args = [c.arg1, c.arg2, c.arg3, c.arg4, c.arg5, c.arg6, c.arg7]
    if stream.binary:
        stream.write_int32(int(c.command_type))
        stream.write_float(c.alpha)
        while args and args[-1] == -1:
            args.pop()
        stream.write_int_vector(args)
    else:
        stream.write_raw(CommandType(c.command_type).name.encode() + b"\n")
        stream.write_raw(b"<Alpha> " + format_float(c.alpha).encode() + b" ")
        stream.write_raw(b"<Args> " + b"".join(b"%d " % a for a in args))
    stream.write_token("</Cmd>")


def _read_counted(stream, count_token, list_token):
    stream.expect_token(count_token)
    start = stream.pos
    n = _read_size_t(stream)
    if n > len(stream.data):
        raise stream.error("implausible count %d after %s" % (n, count_token), start)
    stream.expect_token(list_token)
    return n


def read_computation(stream):
    """Kaldi's NnetComputation::Read from an InputStream (binary or text).

    Precomputed indexes are read with :meth:`PrecomputedIndexes.read_new`, so
    the component modules must be imported (``import pynnet3.components``).
    """
    stream.expect_token("<NnetComputation>")
    start = stream.pos
    token = stream.read_token()
    version = 1
    if token == "<Version>":
        version = stream.read_int32()
        stream.expect_token("<NumMatrices>")
    elif token != "<NumMatrices>":
        raise stream.error("expected <Version> or <NumMatrices>, got '%s'" % token, start)
    if version != _VERSION:
        raise stream.error("NnetComputation version %d is not supported (expected %d)"
                           % (version, _VERSION), start)
    comp = NnetComputation()
    num_matrices = _read_size_t(stream)
    stream.expect_token("<Matrices>")
    comp.matrices = [_read_matrix_info(stream) for _ in range(num_matrices)]
    n = _read_counted(stream, "<NumMatrixDebugInfo>", "<MatrixDebugInfo>")
    comp.matrix_debug_info = [_read_debug_info(stream) for _ in range(n)]
    n = _read_counted(stream, "<NumSubMatrices>", "<SubMatrices>")
    comp.submatrices = [_read_submatrix_info(stream) for _ in range(n)]

    stream.expect_token("<NumComponentPrecomputedIndexes>")
    n = _read_size_t(stream)
    start = stream.pos
    token = stream.read_token()
    infos = [PrecomputedIndexesInfo() for _ in range(n)]
    if token == "<ComponentPrecomputedIndexes>":
        # Older format: a bool "is null" then the object, for every slot.
        for info in infos:
            if not stream.read_bool():
                info.data = PrecomputedIndexes.read_new(stream)
    elif token == "<PrecomputedIndexesInfo>":
        for info in infos[1:]:
            info.data = PrecomputedIndexes.read_new(stream)
            info.input_indexes = read_index_vector(stream)
            info.output_indexes = read_index_vector(stream)
    else:
        raise stream.error("expected <PrecomputedIndexesInfo>, got '%s'" % token, start)
    comp.component_precomputed_indexes = infos

    n = _read_counted(stream, "<NumIndexes>", "<Indexes>")
    comp.indexes = [stream.read_int_vector() for _ in range(n)]
    n = _read_counted(stream, "<NumIndexesMulti>", "<IndexesMulti>")
    comp.indexes_multi = [stream.read_int_pair_vector() for _ in range(n)]
    n = _read_counted(stream, "<NumIndexesRanges>", "<IndexesRanges>")
    comp.indexes_ranges = [stream.read_int_pair_vector() for _ in range(n)]
    n = _read_counted(stream, "<NumCommands>", "<Commands>")
    comp.commands = [_read_command(stream) for _ in range(n)]
    stream.expect_token("<NeedModelDerivative>")
    comp.need_model_derivative = stream.read_bool()
    stream.expect_token("</NnetComputation>")
    check_computation_references(comp, stream)
    return comp


def check_computation_references(comp, stream=None):
    """Checks that every submatrix, index table and precomputed-indexes slot a
    command names exists, so that a corrupt file fails here with a clear
    message rather than later with an IndexError."""
    def fail(msg):
        if stream is not None:
            raise stream.error(msg)
        raise KaldiFormatError(msg)

    num_m, num_s = len(comp.matrices), len(comp.submatrices)
    for i, s in enumerate(comp.submatrices):
        if not 0 <= s.matrix_index < num_m:
            fail("submatrix %d refers to matrix %d; there are %d" % (i, s.matrix_index, num_m))
        m = comp.matrices[s.matrix_index]
        if (s.row_offset < 0 or s.col_offset < 0 or s.row_offset + s.num_rows > m.num_rows
                or s.col_offset + s.num_cols > m.num_cols):
            fail("submatrix %d (%d+%d rows, %d+%d cols) exceeds matrix %d (%d x %d)"
                 % (i, s.row_offset, s.num_rows, s.col_offset, s.num_cols, s.matrix_index,
                    m.num_rows, m.num_cols))
    T = CommandType
    sub_args = {
        T.kAllocMatrix: (1,), T.kDeallocMatrix: (1,), T.kSwapMatrix: (1, 2), T.kSetConst: (1,),
        T.kPropagate: (3, 4), T.kBackprop: (3, 4, 5, 6), T.kBackpropNoModelUpdate: (3, 4, 5, 6),
        T.kMatrixCopy: (1, 2), T.kMatrixAdd: (1, 2), T.kCopyRows: (1, 2), T.kAddRows: (1, 2),
        T.kCopyRowsMulti: (1,), T.kCopyToRowsMulti: (1,), T.kAddRowsMulti: (1,),
        T.kAddToRowsMulti: (1,), T.kAddRowRanges: (1, 2), T.kCompressMatrix: (1,),
        T.kDecompressMatrix: (1,), T.kAcceptInput: (1,), T.kProvideOutput: (1,),
    }
    num_pre = len(comp.component_precomputed_indexes)
    for ci, c in enumerate(comp.commands):
        ct = c.command_type
        for a in sub_args.get(ct, ()):
            v = getattr(c, "arg%d" % a)
            if not 0 <= v < num_s:
                fail("command c%d (%s) arg%d = %d is not a submatrix index (there are %d)"
                     % (ci, ct.name, a, v, num_s))
        table = None
        if ct in (T.kCopyRows, T.kAddRows):
            table, idx, name = comp.indexes, c.arg3, "indexes"
        elif ct in (T.kCopyRowsMulti, T.kCopyToRowsMulti, T.kAddRowsMulti, T.kAddToRowsMulti):
            table, idx, name = comp.indexes_multi, c.arg2, "indexes_multi"
        elif ct == T.kAddRowRanges:
            table, idx, name = comp.indexes_ranges, c.arg3, "indexes_ranges"
        if table is not None and not 0 <= idx < len(table):
            fail("command c%d (%s) refers to %s[%d]; there are %d"
                 % (ci, ct.name, name, idx, len(table)))
        if ct in (T.kPropagate, T.kBackprop, T.kBackpropNoModelUpdate):
            if not 0 <= c.arg2 < max(num_pre, 1):
                fail("command c%d (%s) refers to precomputed_indexes[%d]; there are %d"
                     % (ci, ct.name, c.arg2, num_pre))
        if ct == T.kGotoLabel and not 0 <= c.arg1 < len(comp.commands):
            fail("command c%d (goto) jumps to c%d; there are %d commands"
                 % (ci, c.arg1, len(comp.commands)))


def _write_counted(stream, count_token, list_token, items, write_item):
    """``count_token`` and the number of ``items``, then ``list_token`` and
    each item written by ``write_item(stream, item)`` (what
    :func:`_read_counted` reads before the items)."""
    stream.write_token(count_token)
    _write_size_t(stream, len(items))
    stream.write_token(list_token)
    for item in items:
        write_item(stream, item)


def write_computation(computation, stream):
    """Kaldi's NnetComputation::Write (version 5) to an OutputStream."""
    comp = computation
    stream.write_token("<NnetComputation>")
    stream.write_token("<Version>")
    stream.write_int32(_VERSION)
    _write_counted(stream, "<NumMatrices>", "<Matrices>", comp.matrices, _write_matrix_info)
    _newline(stream)
    _write_counted(stream, "<NumMatrixDebugInfo>", "<MatrixDebugInfo>",
                   comp.matrix_debug_info, _write_debug_info)
    _newline(stream)
    _write_counted(stream, "<NumSubMatrices>", "<SubMatrices>", comp.submatrices,
                   _write_submatrix_info)
    _newline(stream)
    stream.write_token("<NumComponentPrecomputedIndexes>")
    _write_size_t(stream, len(comp.component_precomputed_indexes))
    stream.write_token("<PrecomputedIndexesInfo>")
    for i, info in enumerate(comp.component_precomputed_indexes[1:], 1):
        if info.data is None:
            raise KaldiFormatError("precomputed_indexes[%d] has no data; only slot 0 may be "
                                   "empty" % i)
        info.data.write_to(stream)
        write_index_vector(stream, info.input_indexes)
        write_index_vector(stream, info.output_indexes)
    _newline(stream)
    _write_counted(stream, "<NumIndexes>", "<Indexes>", comp.indexes,
                   lambda out, v: out.write_int_vector(v))
    for count_token, list_token, table in (
            ("<NumIndexesMulti>", "<IndexesMulti>", comp.indexes_multi),
            ("<NumIndexesRanges>", "<IndexesRanges>", comp.indexes_ranges)):
        _newline(stream)
        _write_counted(stream, count_token, list_token, table,
                       lambda out, pairs: out.write_int_pair_vector(pairs))
    _newline(stream)
    _write_counted(stream, "<NumCommands>", "<Commands>", comp.commands, _write_command)
    _newline(stream)
    stream.write_token("<NeedModelDerivative>")
    stream.write_bool(comp.need_model_derivative)
    stream.write_token("</NnetComputation>")
    _newline(stream)


def read_computation_file(rxfilename):
    """Reads a lone NnetComputation file (with or without the binary header)."""
    return read_computation(open_input(rxfilename))


def computation_to_bytes(computation, binary=True):
    """The file bytes Kaldi writes for ``computation`` (with ``\\0B`` if binary)."""
    out = OutputStream(binary)
    out.write_header()
    write_computation(computation, out)
    return out.getvalue()
