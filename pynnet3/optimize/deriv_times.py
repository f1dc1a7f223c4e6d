"""Limiting derivative times: Kaldi's DerivativeTimeLimiter /
LimitDerivativeTimes (nnet-optimize-utils.cc).

Training recurrent models on chunks, Kaldi may treat the derivative of every
cindex with t < min_deriv_time or t > max_deriv_time as zero
(``--optimization.min-deriv-time``, ``max-deriv-time``, or
``max-deriv-time-relative`` = that many frames after the request's last
output time). This pass rewrites the computation under that assumption:

- every derivative submatrix is mapped to the rows whose t lies inside
  [min_deriv_time, max_deriv_time] (or to nothing);
- commands then act only on those rows: matrix copies/adds are narrowed (to
  the largest row range both sides keep), row tables get -1 for rows outside,
  range tables shrink their ranges, and a command left with nothing to do
  becomes a no-op; a simple component's backprop whose output derivative lies
  entirely outside is removed (its memo is then no longer stored), one partly
  outside works on the kept rows (unless the component uses a memo);
- derivative matrices never touched outside the kept rows are allocated with
  only those rows; ones never used at all are removed.

Guarantee: derivatives (input derivatives and parameter gradients) equal
those of the unlimited computation in which the derivative of every cindex
outside the time range is set to zero where it arises; forward values are
unchanged. The computation must carry matrix debug info (the compiler's
default) and must not yet have been optimized otherwise: the pass relies on
every matrix being zeroed before it is added to, which later passes undo.
"""

from ..compiler.computation import CommandType as C
from ..components.base import ComponentProperty as P
from ..errors import ComputationError
from .analysis import Analyzer
from .computation_edit import get_whole_submatrices, new_sub_matrix
from .renumber import remove_no_ops, renumber_computation

INT32_MIN = -2**31
INT32_MAX = 2**31 - 1


class _PruneInfo:
    """Which rows of one matrix lie inside the time range: all, none, or the
    block [row_begin, row_end) when only partly."""

    __slots__ = ("fully_inside", "partly_inside", "row_begin", "row_end")

    def __init__(self, fully_inside, partly_inside, row_begin=0, row_end=0):
        self.fully_inside = fully_inside
        self.partly_inside = partly_inside
        self.row_begin = row_begin
        self.row_end = row_end


class DerivativeTimeLimiter:
    """Kaldi's DerivativeTimeLimiter; use :func:`limit_derivative_times`."""

    def __init__(self, nnet, min_deriv_time, max_deriv_time, computation):
        self.nnet = nnet
        self.min_deriv_time = min_deriv_time
        self.max_deriv_time = max_deriv_time
        self.computation = computation
        self.whole_submatrices = []
        self.matrix_prune_info = []
        self.submatrix_map = []
        self.submatrix_map_if_deriv = []
        self.memos_to_delete = set()

    def limit_deriv_times(self):
        if self.max_deriv_time < self.min_deriv_time:
            raise ComputationError("max-deriv-time (%d) is less than min-deriv-time (%d)"
                                   % (self.max_deriv_time, self.min_deriv_time))
        if self.min_deriv_time == INT32_MIN and self.max_deriv_time == INT32_MAX:
            return
        self.whole_submatrices = get_whole_submatrices(self.computation)
        self.compute_matrix_prune_info()
        self.compute_submatrix_maps()
        for command in self.computation.commands:
            self.modify_command(command)
        self.prune_matrices()
        remove_no_ops(self.computation)
        self.remove_unused_memos()
        renumber_computation(self.computation)

    # -- which rows are kept ------------------------------------------------
    def compute_matrix_prune_info(self):
        computation = self.computation
        if len(computation.matrix_debug_info) != len(computation.matrices):
            raise ComputationError("limiting derivative times needs matrix debug info "
                                   "(compile with output_debug_info=True)")
        lo, hi = self.min_deriv_time, self.max_deriv_time
        info = [None]
        for m in range(1, len(computation.matrices)):
            cindexes = computation.matrix_debug_info[m].cindexes
            if len(cindexes) != computation.matrices[m].num_rows:
                raise ComputationError("matrix m%d: %d debug cindexes for %d rows"
                                       % (m, len(cindexes), computation.matrices[m].num_rows))
            inside = [i for i, (_, idx) in enumerate(cindexes) if lo <= idx[1] <= hi]
            if not inside:
                info.append(_PruneInfo(False, False))
            elif inside[0] == 0 and inside[-1] == len(cindexes) - 1:
                info.append(_PruneInfo(True, False))
            else:
                info.append(_PruneInfo(False, True, inside[0], inside[-1] + 1))
        self.matrix_prune_info = info

    def compute_submatrix_maps(self):
        computation = self.computation
        num_submatrices = len(computation.submatrices)
        self.submatrix_map = smap = [0] * num_submatrices
        self.submatrix_map_if_deriv = dmap = [0] * num_submatrices
        for s in range(1, num_submatrices):
            sub = computation.submatrices[s]
            m = sub.matrix_index
            prune = self.matrix_prune_info[m]
            if prune.fully_inside:
                smap[s] = s
            elif prune.partly_inside:
                begin = max(prune.row_begin, sub.row_offset)
                end = min(prune.row_end, sub.row_offset + sub.num_rows)
                if end > begin:
                    smap[s] = new_sub_matrix(computation, s, begin - sub.row_offset,
                                             end - begin, 0, -1)
            dmap[s] = smap[s] if computation.matrix_debug_info[m].is_deriv else s

    def row_is_kept(self, submatrix, row):
        """Whether row ``row`` of ``submatrix`` is inside the time range (rows
        of non-derivative matrices always are)."""
        sub = self.computation.submatrices[submatrix]
        if not 0 <= row < sub.num_rows:
            raise ComputationError("row %d out of range for submatrix %d of %d rows"
                                   % (row, submatrix, sub.num_rows))
        debug = self.computation.matrix_debug_info[sub.matrix_index]
        if not debug.is_deriv:
            return True
        t = debug.cindexes[row + sub.row_offset][1][1]
        return self.min_deriv_time <= t <= self.max_deriv_time

    def _prune_values(self, initial, new):
        """(rows removed on the left, rows removed on the right) going from
        submatrix ``initial`` to its narrowed ``new``."""
        a, b = self.computation.submatrices[initial], self.computation.submatrices[new]
        left = b.row_offset - a.row_offset
        return left, a.num_rows - b.num_rows - left

    def _narrowed_rows(self, old, dest, dest_mapped):
        """(i, the entry of ``old`` for that row) for each row i of
        ``dest_mapped``, the narrowed ``dest``; ``old`` has one entry per row
        of ``dest``."""
        dest_left = self._prune_values(dest, dest_mapped)[0]
        for i in range(self.computation.submatrices[dest_mapped].num_rows):
            yield i, old[i + dest_left]

    # -- commands ------------------------------------------------------------
    def modify_command(self, c):
        t = c.command_type
        if t == C.kPropagate:
            # Statistics of an output wholly outside the range are not stored
            # (Kaldi does this to stay close to its older code).
            if self.submatrix_map[c.arg4] == 0:
                c.arg6 = 0
        elif t in (C.kBackprop, C.kBackpropNoModelUpdate):
            self._map_backprop(c)
        elif t in (C.kMatrixCopy, C.kMatrixAdd):
            self._map_simple_matrix_command(c)
        elif t in (C.kCopyRows, C.kAddRows):
            self._map_indexes_command(c)
        elif t in (C.kCopyRowsMulti, C.kCopyToRowsMulti, C.kAddRowsMulti, C.kAddToRowsMulti):
            self._map_indexes_multi_command(c)
        elif t == C.kAddRowRanges:
            self._map_add_row_ranges_command(c)
        elif t not in (C.kAllocMatrix, C.kDeallocMatrix, C.kSetConst, C.kSwapMatrix,
                       C.kAcceptInput, C.kProvideOutput, C.kNoOperation,
                       C.kNoOperationPermanent, C.kNoOperationMarker):
            raise ComputationError("limiting derivative times: command type %s is not "
                                   "expected in an unoptimized computation" % t.name)

    def _map_backprop(self, c):
        properties = self.nnet.components[c.arg1].properties()
        if not properties & P.kSimpleComponent:
            return    # a non-simple component's precomputed indexes would change
        smap = self.submatrix_map
        in_value, out_value, out_deriv, in_deriv = (smap[c.arg3], smap[c.arg4],
                                                    smap[c.arg5], smap[c.arg6])
        if out_deriv == 0:
            if in_deriv != 0 or in_value != 0 or out_value != 0:
                raise ComputationError("limiting derivative times: backprop of component "
                                       "%d has its output derivative outside the range but "
                                       "not its other arguments" % c.arg1)
            c.command_type = C.kNoOperation
            if c.arg7 > 0:
                self.memos_to_delete.add(c.arg7)
        elif out_deriv != c.arg5 and not properties & P.kUsesMemo:
            c.arg3, c.arg4, c.arg5, c.arg6 = in_value, out_value, out_deriv, in_deriv

    def _map_simple_matrix_command(self, c):
        s1, s2 = c.arg1, c.arg2
        m1, m2 = self.submatrix_map_if_deriv[s1], self.submatrix_map_if_deriv[s2]
        if m1 == s1 and m2 == s2:
            return
        if m1 == 0 or m2 == 0:
            c.command_type = C.kNoOperation
            return
        num_rows = self.computation.submatrices[s1].num_rows
        left1, right1 = self._prune_values(s1, m1)
        left2, right2 = self._prune_values(s2, m2)
        if left1 == left2 and right1 == right2:
            c.arg1, c.arg2 = m1, m2
            return
        left, right = max(left1, left2), max(right1, right2)
        if left + right >= num_rows:
            c.command_type = C.kNoOperation
            return
        kept = num_rows - left - right
        c.arg1 = new_sub_matrix(self.computation, s1, left, kept, 0, -1)
        c.arg2 = new_sub_matrix(self.computation, s2, left, kept, 0, -1)

    def _map_indexes_command(self, c):
        # Making a kCopyRows whose rows are all dropped a no-op is right only
        # because in an unoptimized computation the destination was zeroed and
        # never holds anything that copy would have had to overwrite.
        computation = self.computation
        dest, src = c.arg1, c.arg2
        src_mapped = self.submatrix_map_if_deriv[src]
        dest_mapped = self.submatrix_map_if_deriv[dest]
        if src_mapped == 0 or dest_mapped == 0:
            c.command_type = C.kNoOperation
            return
        src_left = self._prune_values(src, src_mapped)[0]
        num_src_rows = computation.submatrices[src_mapped].num_rows
        new = []
        keep = False
        for i, j in self._narrowed_rows(computation.indexes[c.arg3], dest, dest_mapped):
            if j == -1 or not self.row_is_kept(src, j) or not self.row_is_kept(dest_mapped, i):
                new.append(-1)
            else:
                if not 0 <= j - src_left < num_src_rows:
                    raise ComputationError("limiting derivative times: row %d of submatrix "
                                           "%d is kept but outside its narrowed rows" % (j, src))
                new.append(j - src_left)
                keep = True
        if not keep:
            c.command_type = C.kNoOperation
            return
        c.arg1, c.arg2, c.arg3 = dest_mapped, src_mapped, len(computation.indexes)
        computation.indexes.append(new)

    def _map_indexes_multi_command(self, c):
        computation = self.computation
        dest = c.arg1
        dest_mapped = self.submatrix_map_if_deriv[dest]
        if dest_mapped == 0:
            c.command_type = C.kNoOperation
            return
        old = computation.indexes_multi[c.arg2]
        new = []
        keep = False
        for i, (s, row) in self._narrowed_rows(old, dest, dest_mapped):
            if s == -1:
                new.append((s, row))
                continue
            if not self.row_is_kept(s, row) or not self.row_is_kept(dest_mapped, i):
                new.append((-1, -1))
                continue
            s_mapped = self.submatrix_map_if_deriv[s]
            row_mapped = row - self._prune_values(s, s_mapped)[0] if s_mapped else -1
            if not 0 <= row_mapped < computation.submatrices[s_mapped].num_rows:
                raise ComputationError("limiting derivative times: row %d of submatrix %d is "
                                       "kept but outside its narrowed rows" % (row, s))
            new.append((s_mapped, row_mapped))
            keep = True
        if not keep:
            c.command_type = C.kNoOperation
            return
        if dest_mapped == dest and new == [tuple(p) for p in old]:
            return
        c.arg1, c.arg2 = dest_mapped, len(computation.indexes_multi)
        computation.indexes_multi.append(new)

    def _map_add_row_ranges_command(self, c):
        computation = self.computation
        dest, src = c.arg1, c.arg2
        dest_mapped = self.submatrix_map_if_deriv[dest]
        src_mapped = self.submatrix_map_if_deriv[src]
        if dest_mapped == dest and src_mapped == src:
            return
        if dest_mapped == 0 or src_mapped == 0:
            c.command_type = C.kNoOperation
            return
        src_left = self._prune_values(src, src_mapped)[0]
        new = []
        keep = False
        for i, (start, end) in self._narrowed_rows(computation.indexes_ranges[c.arg3], dest,
                                                   dest_mapped):
            if not self.row_is_kept(dest_mapped, i):
                start = end = -1
            elif start >= 0:
                while start < end and not self.row_is_kept(src, start):
                    start += 1
                while end > start and not self.row_is_kept(src, end - 1):
                    end -= 1
                if start == end:
                    start = end = -1
                else:
                    start -= src_left
                    end -= src_left
                    keep = True
            new.append((start, end))
        if not keep:
            c.command_type = C.kNoOperation
            return
        c.arg1, c.arg2, c.arg3 = dest_mapped, src_mapped, len(computation.indexes_ranges)
        computation.indexes_ranges.append(new)

    # -- matrices ------------------------------------------------------------
    def _can_limit_matrix(self, analyzer, m):
        """Whether no command touches matrix ``m`` outside its kept rows other
        than by setting it to a constant."""
        s_whole = self.whole_submatrices[m]
        s_mapped = self.submatrix_map[s_whole]
        whole, mapped = [], []
        analyzer.variables.append_variables_for_submatrix(s_whole, whole)
        analyzer.variables.append_variables_for_submatrix(s_mapped, mapped)
        mapped = set(mapped)
        commands = self.computation.commands
        for v in whole:
            if v in mapped:
                continue
            for access in analyzer.variable_accesses[v]:
                if commands[access.command_index].command_type != C.kSetConst:
                    return False
        return True

    def _limit_matrices(self, will_limit):
        computation = self.computation
        for s in range(1, len(computation.submatrices)):
            sub = computation.submatrices[s]
            m = sub.matrix_index
            if not will_limit[m]:
                continue
            prune = self.matrix_prune_info[m]
            num_rows = prune.row_end - prune.row_begin
            new_begin = sub.row_offset - prune.row_begin
            if new_begin >= 0 and sub.num_rows + new_begin <= num_rows:
                sub.row_offset = new_begin
            elif computation.is_whole_matrix(s):
                # Used only by allocation / deallocation from now on.
                sub.num_rows = num_rows
            else:
                # Never used any more; a 1x1 shape makes any use fail loudly.
                sub.row_offset, sub.num_rows, sub.col_offset, sub.num_cols = 0, 1, 0, 1
        for m in range(1, len(computation.matrices)):
            if will_limit[m]:
                prune = self.matrix_prune_info[m]
                debug = computation.matrix_debug_info[m]
                debug.cindexes = debug.cindexes[prune.row_begin:prune.row_end]
                computation.matrices[m].num_rows = prune.row_end - prune.row_begin

    def prune_matrices(self):
        computation = self.computation
        analyzer = Analyzer()
        analyzer.init(self.nnet, computation)
        will_limit = [False] * len(computation.matrices)
        for m in range(1, len(computation.matrices)):
            accesses = analyzer.matrix_accesses[m]
            prune = self.matrix_prune_info[m]
            if (prune.fully_inside or accesses.is_input or accesses.is_output
                    or not computation.matrix_debug_info[m].is_deriv):
                continue
            if not prune.partly_inside:
                if _matrix_is_unused(analyzer, computation, m):
                    _remove_commands_for_unused_matrix(analyzer, m, computation)
            elif self._can_limit_matrix(analyzer, m):
                will_limit[m] = True
        if any(will_limit):
            self._limit_matrices(will_limit)

    def remove_unused_memos(self):
        if not self.memos_to_delete:
            return
        removed = 0
        for c in self.computation.commands:
            if c.command_type == C.kPropagate and c.arg5 in self.memos_to_delete:
                c.arg5 = 0
                removed += 1
        if removed != len(self.memos_to_delete):
            raise ComputationError("limiting derivative times: %d memos of removed backprops, "
                                   "but %d propagates stored them"
                                   % (len(self.memos_to_delete), removed))


def _matrix_is_unused(analyzer, computation, m):
    """Kaldi's MatrixIsUnused: not an input or output, and every access is a
    no-op or a kSetConst."""
    accesses = analyzer.matrix_accesses[m]
    if accesses.is_input or accesses.is_output:
        return False
    return all(computation.commands[a.command_index].command_type in (C.kNoOperation,
                                                                      C.kSetConst)
               for a in accesses.accesses)


def _remove_commands_for_unused_matrix(analyzer, m, computation):
    """Kaldi's RemoveCommandsForUnusedMatrix: its allocation, deallocation and
    constant settings become no-ops."""
    accesses = analyzer.matrix_accesses[m]
    indexes = [a.command_index for a in accesses.accesses]
    for ci in (accesses.allocate_command, accesses.deallocate_command):
        if ci >= 0:
            indexes.append(ci)
    for ci in indexes:
        computation.commands[ci].command_type = C.kNoOperation


def limit_derivative_times(nnet, min_deriv_time, max_deriv_time, computation):
    """Kaldi's LimitDerivativeTimes (see the module docstring). Pass
    INT32_MIN / INT32_MAX for "no limit" on either side; with neither set the
    computation is unchanged."""
    DerivativeTimeLimiter(nnet, min_deriv_time, max_deriv_time, computation).limit_deriv_times()
