"""Small edits on an NnetComputation that several passes share.

These are Kaldi's NnetComputation::NewSubMatrix and GetWholeSubmatrices,
InsertCommands and FixGotoLabel (nnet-computation.cc, nnet-optimize-utils.cc). They only add submatrices or commands; nothing is
renumbered here (a pass calls :func:`renumber_computation` afterwards, which
drops what became unused).
"""

from ..compiler.computation import CommandType, SubMatrixInfo
from ..errors import ComputationError


def new_sub_matrix(computation, base_submatrix, row_offset, num_rows, col_offset, num_cols):
    """Appends the submatrix at (row_offset, col_offset) *relative to*
    ``base_submatrix`` and returns its index (Kaldi's NewSubMatrix).

    ``num_rows`` / ``num_cols`` of -1 mean "up to the end of the base". The
    result must be non-empty and lie inside the base; anything else is a bug in
    the calling pass, reported with the numbers involved.
    """
    submatrices = computation.submatrices
    if not 0 < base_submatrix < len(submatrices):
        raise ComputationError("new_sub_matrix: base submatrix %d out of range (1..%d)"
                               % (base_submatrix, len(submatrices) - 1))
    base = submatrices[base_submatrix]
    if num_rows == -1:
        num_rows = base.num_rows - row_offset
    if num_cols == -1:
        num_cols = base.num_cols - col_offset
    if not (row_offset >= 0 and col_offset >= 0 and num_rows > 0 and num_cols > 0
            and row_offset + num_rows <= base.num_rows
            and col_offset + num_cols <= base.num_cols):
        raise ComputationError(
            "new_sub_matrix: rows %d+%d, cols %d+%d do not fit inside submatrix %d "
            "(%d x %d)" % (row_offset, num_rows, col_offset, num_cols, base_submatrix,
                           base.num_rows, base.num_cols))
    submatrices.append(SubMatrixInfo(base.matrix_index, base.row_offset + row_offset,
                                     num_rows, base.col_offset + col_offset, num_cols))
    return len(submatrices) - 1


def get_whole_submatrices(computation):
    """For each matrix index, the submatrix covering all of it; where several
    do, the last one (index 0 maps to 0; Kaldi's GetWholeSubmatrices). Every
    matrix must have one (the compiler creates it with the matrix)."""
    mats = computation.matrices
    whole = [0] * len(mats)
    for s, info in enumerate(computation.submatrices):
        # (NnetComputation.is_whole_matrix, inlined: this runs per submatrix)
        if info.row_offset == 0 and info.col_offset == 0 and s > 0:
            m = mats[info.matrix_index]
            if info.num_rows == m.num_rows and info.num_cols == m.num_cols:
                whole[info.matrix_index] = s
    for m in range(1, len(whole)):
        if whole[m] == 0:
            raise ComputationError("matrix m%d has no submatrix covering all of it" % m)
    return whole


def insert_commands(computation, new_commands):
    """Inserts ``new_commands``, a list of (position, Command): each goes just
    before the command that is at ``position`` now (``len(commands)``: at the
    end). Commands given for the same position keep their order, before the
    old command there (Kaldi's InsertCommands, which sorts stably). A goto's
    label is then found again (:func:`fix_goto_label`), since positions moved.
    """
    if not new_commands:
        return
    commands = computation.commands
    num_old = len(commands)
    ordered = sorted(new_commands, key=lambda pair: pair[0])   # stable
    if ordered[0][0] < 0 or ordered[-1][0] > num_old:
        raise ComputationError("insert_commands: position out of range 0..%d" % num_old)
    merged = []
    k = 0
    for old in range(num_old + 1):
        while k < len(ordered) and ordered[k][0] <= old:
            merged.append(ordered[k][1])
            k += 1
        if old < num_old:
            merged.append(commands[old])
    computation.commands = merged
    fix_goto_label(computation)


def fix_goto_label(computation):
    """Points the final kGotoLabel (possibly followed by kProvideOutput
    commands) at the computation's kNoOperationLabel again, after passes have
    moved commands (Kaldi's FixGotoLabel). Does nothing if there is no goto."""
    commands = computation.commands
    num = len(commands)
    for c in range(num - 1, -1, -1):
        command = commands[c]
        if command.command_type == CommandType.kGotoLabel:
            dest = command.arg1
            if 0 <= dest < num and commands[dest].command_type == CommandType.kNoOperationLabel:
                return
            for d in range(num - 1):
                if commands[d].command_type == CommandType.kNoOperationLabel:
                    command.arg1 = d
                    return
            raise ComputationError("command c%d: kGotoLabel, but the computation has no "
                                   "kNoOperationLabel" % c)
        if command.command_type != CommandType.kProvideOutput:
            return
