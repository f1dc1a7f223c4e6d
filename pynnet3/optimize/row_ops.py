"""Row-operation simplifications: Kaldi's SnipRowOps, SplitRowOps and
ReplaceRowWithMatrixOps (nnet-optimize-utils.cc).

The compiler expresses most data movement as row operations driven by index
tables (``indexes``, ``indexes_multi``, ``indexes_ranges``). Many tables have
a simple shape that a cheaper command expresses exactly:

- :func:`snip_row_ops`: leading/trailing rows that do nothing (index -1, pair
  (-1, -1), empty range (x, x)) are cut off, so the command works on a smaller
  destination submatrix. Only for commands where such a row is a true no-op
  (kAddRows, kAddRowsMulti, kAddToRowsMulti, kCopyToRowsMulti, kAddRowRanges):
  for kCopyRows / kCopyRowsMulti a -1 row means "set to zero".
- :func:`split_row_ops`: a multi-source command whose table uses at most two
  source submatrices, each in one contiguous run of rows, becomes one or two
  single-source commands (kMatrixCopy / kMatrixAdd when the source rows are
  consecutive, else kCopyRows / kAddRows over a new table).
- :func:`replace_row_with_matrix_ops`: kCopyRows / kAddRows whose table is
  "-1 ..., k, k+1, ..., k+n-1, -1 ..." becomes a kMatrixCopy / kMatrixAdd of an
  n-row block.

Each pass preserves what the computation computes, and returns True if it
changed anything. New submatrices and tables are appended; unused ones are
left for :func:`pynnet3.optimize.renumber.renumber_computation`, which
Kaldi's Optimize() calls after these passes when any of them made a change.
"""

from .. import _fast
from ..compiler.computation import Command
from ..compiler.computation import CommandType as C
from ..errors import ComputationError
from .command_types import commands_of_types
from .computation_edit import insert_commands, new_sub_matrix

# How much larger than the number of rows a split source block may be (a
# command over mostly-unused source rows would waste a kernel launch).
_MAX_SIZE_RATIO = 2


# ---------------------------------------------------------------------------
# SnipRowOps
# ---------------------------------------------------------------------------
_NOOP_TESTS = (lambda i: i < 0,                  # kind 0: indexes
               lambda pair: pair[0] < 0,         # kind 1: indexes_multi
               lambda pair: pair[0] == pair[1])  # kind 2: indexes_ranges


def leading_trailing_counts_py(rows, kind):
    """(number of leading no-op rows, number of trailing no-op rows) of
    ``rows``, where a row is a no-op when (kind 0) the index is negative,
    (kind 1) the pair's submatrix is negative, (kind 2) the range is empty;
    the leading count is len(rows) (and the trailing 0) when every row is.
    The twin of ``pynnet3/_fast/row_ops_kernel.pyx``."""
    is_noop = _NOOP_TESTS[kind]
    n = len(rows)
    lead = 0
    while lead < n and is_noop(rows[lead]):
        lead += 1
    if lead == n:
        return n, 0
    trail = 0
    while is_noop(rows[n - 1 - trail]):
        trail += 1
    return lead, trail


def _snip(computation, command_index, table_name, table_arg, kind):
    c = computation.commands[command_index]
    tables = getattr(computation, table_name)
    rows = tables[getattr(c, table_arg)]
    lead, trail = _leading_trailing_counts(rows, kind)
    if lead == len(rows):
        raise ComputationError("command c%d: its %s table has no row that does anything"
                               % (command_index, table_name))
    if lead == 0 and trail == 0:
        return False
    num_rows = len(rows) - lead - trail
    setattr(c, table_arg, len(tables))
    tables.append(list(rows[lead:lead + num_rows]))
    c.arg1 = new_sub_matrix(computation, c.arg1, lead, num_rows, 0, -1)
    return True


def snip_row_ops(computation):
    """Kaldi's SnipRowOps (see the module docstring); True if it changed
    anything."""
    changed = False
    commands = computation.commands
    add_rows, add_row_ranges = int(C.kAddRows), int(C.kAddRowRanges)
    for i in commands_of_types(computation, _SNIPPED_TYPES):
        t = commands[i].command_type
        if t == add_rows:
            changed |= _snip(computation, i, "indexes", "arg3", 0)
        elif t == add_row_ranges:
            changed |= _snip(computation, i, "indexes_ranges", "arg3", 2)
        else:
            changed |= _snip(computation, i, "indexes_multi", "arg2", 1)
    return changed


# The commands snip_row_ops looks at (found by one scan of the command types,
# not a Python visit of every command).
_SNIPPED_TYPES = (C.kAddRows, C.kAddRowsMulti, C.kAddToRowsMulti, C.kCopyToRowsMulti,
                  C.kAddRowRanges)


# ---------------------------------------------------------------------------
# ReplaceRowWithMatrixOps
# ---------------------------------------------------------------------------
def consecutive_block_py(indexes):
    """If ``indexes`` is -1s, then k, k+1, ..., k+n-1 (n >= 1), then -1s,
    returns (position of k, k, n); else None. The twin of
    ``pynnet3/_fast/row_ops_kernel.pyx``."""
    size = len(indexes)
    pos = 0
    while pos < size and indexes[pos] < 0:
        pos += 1
    if pos == size:
        return None
    first_pos = pos
    first_value = value = indexes[pos]
    while pos < size and indexes[pos] == value:
        pos += 1
        value += 1
    for rest in range(pos, size):
        if indexes[rest] >= 0:
            return None
    return first_pos, first_value, value - first_value


# Compiled unless the user chose the twins (or it is not built: then
# pynnet3._fast warns once).
_kernel = _fast.load("row_ops_kernel")
(_consecutive_block, _leading_trailing_counts) = _fast.select(
    _kernel, consecutive_block_py, leading_trailing_counts_py)


def replace_row_with_matrix_ops(computation):
    """Kaldi's ReplaceRowWithMatrixOps (see the module docstring); True if it
    changed anything."""
    changed = False
    commands = computation.commands
    for i in commands_of_types(computation, (C.kCopyRows, C.kAddRows)):
        c = commands[i]
        block = _consecutive_block(computation.indexes[c.arg3])
        if block is None:
            continue
        dest_row, src_row, num_rows = block
        c.arg1 = new_sub_matrix(computation, c.arg1, dest_row, num_rows, 0, -1)
        c.arg2 = new_sub_matrix(computation, c.arg2, src_row, num_rows, 0, -1)
        c.command_type = C.kMatrixCopy if c.command_type == C.kCopyRows else C.kMatrixAdd
        # arg3 keeps the old table number, unused from now on: Kaldi leaves it
        # so, and it is part of the serialized computation.
        changed = True
    return changed


# ---------------------------------------------------------------------------
# SplitRowOps
# ---------------------------------------------------------------------------
class _Split:
    """One run of a multi-index table with a single source submatrix.

    ``offset``/``size``: the run's rows in the table (= destination rows);
    ``source``: the source submatrix; ``min_row``/``row_range``: the block of
    source rows the run touches; ``offsets``: each row's source row minus
    ``min_row``, or None when the source rows are min_row, min_row+1, ...
    """

    __slots__ = ("offset", "size", "source", "min_row", "row_range", "offsets")


def _split_info(pairs, offset):
    """A :class:`_Split` for ``pairs`` (one run), or None if the run has
    -1 pairs, more than one source, or too sparse a block of source rows."""
    size = len(pairs)
    source = pairs[0][0]
    if source < 0:
        return None
    first_row = pairs[0][1]
    low = high = first_row
    consecutive = True
    for i, (s, row) in enumerate(pairs):
        if s != source or row < 0:
            return None
        if row != first_row + i:
            consecutive = False
        if row < low:
            low = row
        elif row > high:
            high = row
    split = _Split()
    split.offset, split.size, split.source = offset, size, source
    split.min_row, split.row_range = low, high + 1 - low
    if split.row_range > size * _MAX_SIZE_RATIO:
        return None
    split.offsets = None if consecutive else [row - low for _, row in pairs]
    return split


def _split_table(pairs):
    """The one or two runs of ``pairs`` (split where the source first
    changes), or None if the table cannot be split."""
    first = pairs[0][0]
    point = next((j for j in range(1, len(pairs)) if pairs[j][0] != first), None)
    if point is None:
        one = _split_info(pairs, 0)
        return None if one is None else [one]
    a = _split_info(pairs[:point], 0)
    b = _split_info(pairs[point:], point) if a is not None else None
    return None if b is None else [a, b]


_AS_MATRIX_OP = {C.kAddRowsMulti: (C.kMatrixAdd, False), C.kCopyRowsMulti: (C.kMatrixCopy, False),
                 C.kAddToRowsMulti: (C.kMatrixAdd, True),
                 C.kCopyToRowsMulti: (C.kMatrixCopy, True)}


def _split_command(computation, c, splits):
    """The commands replacing ``c``, or None when it must stay (a
    kCopyToRowsMulti with non-consecutive source rows: kCopyRows would zero
    the rows it does not name)."""
    out = []
    for split in splits:
        dest = new_sub_matrix(computation, c.arg1, split.offset, split.size, 0, -1)
        other = new_sub_matrix(computation, split.source, split.min_row, split.row_range, 0, -1)
        t = c.command_type
        if split.offsets is None:
            new_type, swapped = _AS_MATRIX_OP[t]
            out.append(Command(new_type, other, dest, alpha=c.alpha) if swapped
                       else Command(new_type, dest, other, alpha=c.alpha))
            continue
        table = len(computation.indexes)
        if t in (C.kAddRowsMulti, C.kCopyRowsMulti):
            computation.indexes.append(list(split.offsets))
            out.append(Command(C.kAddRows if t == C.kAddRowsMulti else C.kCopyRows,
                               dest, other, table, alpha=c.alpha))
        elif t == C.kCopyToRowsMulti:
            return None
        else:   # kAddToRowsMulti: the table is inverted (source row -> dest row)
            inverse = [-1] * split.row_range
            for i, offset in enumerate(split.offsets):
                if inverse[offset] >= 0:
                    raise ComputationError("AddToRowsMulti with table %d writes row %d of "
                                           "submatrix %d twice" % (c.arg2, split.min_row
                                                                   + offset, split.source))
                inverse[offset] = i
            computation.indexes.append(inverse)
            out.append(Command(C.kAddRows, other, dest, table, alpha=c.alpha))
    return out


def split_row_ops(computation):
    """Kaldi's SplitRowOps (see the module docstring); True if it changed
    anything."""
    tables = [_split_table(pairs) if pairs else None for pairs in computation.indexes_multi]
    if all(t is None for t in tables):
        return False
    changed = False
    extra = []
    commands = computation.commands
    for i in commands_of_types(computation, _AS_MATRIX_OP):
        c = commands[i]
        splits = tables[c.arg2]
        if splits is None:
            continue
        replacement = _split_command(computation, c, splits)
        if replacement is None:
            continue
        commands[i] = replacement[0]
        extra.extend((i + 1, r) for r in replacement[1:])
        changed = True
    insert_commands(computation, extra)
    return changed
