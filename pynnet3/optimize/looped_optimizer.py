"""Looped computations: Kaldi's ComputationLoopedOptimizer and FixGotoLabel
(nnet-optimize-utils.cc).

A looped computation serves an unbounded stream. It is compiled from N >= 5
requests for consecutive chunks of the same utterance (each later chunk the
previous one shifted by a fixed number of frames), so it holds N segments
separated by kNoOperationMarker commands, each segment with a
kNoOperationPermanent "splice point" after its inputs arrive. The optimizer
looks, at each splice point, at the set of *active* matrices (written before
it, read after it) and describes each matrix as (shape of its cindexes up to a
time shift, is-derivative, time offset). The first two splice points whose
active sets are equal up to the expected time shift (segment difference x
shift per segment) delimit one period of the stream. The computation is then
cut to a loop:

    ... first segments ...
    kNoOperationLabel                  (inserted before splice point 1)
    ... one period ...
    kSwapMatrix(old, new) ...          (state from this period becomes the
                                        state the next period starts from)
    kGotoLabel                         (replaces splice point 2)

Guarantee: running the loop k times produces the same outputs, in the same
order, as the straight-line computation of the corresponding chunks, because
every matrix alive across the cut is handed over by a swap to the matrix that
played its role one period earlier. When no repeat is found the computation
is left unchanged and :func:`optimize_looped_computation` returns False (the
caller compiles again with more segments).
"""

from ..common.index import kNoTime
from ..compiler.computation import Command, CommandType as C
from ..errors import ComputationError
from .analysis import Analyzer, ComputationAnalysis
from .computation_edit import fix_goto_label, get_whole_submatrices
from .renumber import renumber_computation


def _commands_of_type(computation, command_type):
    return [i for i, c in enumerate(computation.commands) if c.command_type == command_type]


def find_time_shift(computation):
    """The time shift between successive segments: the difference in t between
    the first outputs of segments 2 and 3 (segment 1 has extra left context,
    so it is not used). The two outputs must have the same row structure."""
    ends = _commands_of_type(computation, C.kNoOperationMarker)
    if len(ends) < 3:
        raise ComputationError("looped optimization needs at least 3 segment markers "
                               "(kNoOperationMarker), found %d" % len(ends))
    firsts = []
    for begin, end in ((ends[0], ends[1]), (ends[1], ends[2])):
        first = next((c for c in range(begin, end)
                      if computation.commands[c].command_type == C.kProvideOutput), -1)
        firsts.append(first)
    if firsts[0] < 0 or firsts[1] < 0:
        raise ComputationError("looped optimization: could not locate output commands for "
                               "segments 2 and 3")
    c2, c3 = (computation.commands[c] for c in firsts)
    if c2.arg2 != c3.arg2:
        raise ComputationError("looped optimization: segments 2 and 3 start with outputs of "
                               "different nodes")
    if not (computation.is_whole_matrix(c2.arg1) and computation.is_whole_matrix(c3.arg1)):
        raise ComputationError("looped optimization: an output is not a whole matrix")
    m2 = computation.submatrices[c2.arg1].matrix_index
    m3 = computation.submatrices[c3.arg1].matrix_index
    if not computation.matrix_debug_info:
        raise ComputationError("looped optimization needs matrix debug info (compile with "
                               "output_debug_info=True)")
    rows2 = computation.matrix_debug_info[m2].cindexes
    rows3 = computation.matrix_debug_info[m3].cindexes
    if len(rows2) != len(rows3):
        raise ComputationError("looped optimization: outputs of segments 2 and 3 have %d and "
                               "%d rows" % (len(rows2), len(rows3)))
    shift = rows3[0][1][1] - rows2[0][1][1]
    for a, b in zip(rows2, rows3):
        if b[1][1] != a[1][1] + shift:
            raise ComputationError("looped optimization: outputs of segments 2 and 3 are not "
                                   "shifted copies of each other")
    return shift


def _normalized_cindexes(cindexes, m):
    """(cindexes with the first real t subtracted from every real t, that t)."""
    offset = next((idx[1] for _, idx in cindexes if idx[1] != kNoTime), None)
    if offset is None:
        raise ComputationError("matrix m%d: all t values are kNoTime" % m)
    return tuple((node, (n, t if t == kNoTime else t - offset, x))
                 for node, (n, t, x) in cindexes), offset


def create_matrix_pairs(computation):
    """For each matrix m >= 1, (unique_id, time_offset): matrices whose
    cindexes differ only by a time shift, with the same is_deriv, share the
    unique_id; time_offset is the t of the first cindex with a real t."""
    ids = {}
    pairs = [None] * len(computation.matrices)
    for m in range(1, len(computation.matrices)):
        info = computation.matrix_debug_info[m]
        if not info.cindexes:
            raise ComputationError("matrix m%d has no debug cindexes" % m)
        key, offset = _normalized_cindexes(info.cindexes, m)
        vector_id = ids.setdefault(key, len(ids) + 1)
        pairs[m] = (2 * vector_id + (1 if info.is_deriv else 0), offset)
    return pairs


def find_active_matrices(computation, analyzer, splice_points):
    """For each splice point, the sorted matrices accessed (other than by
    zeroing) before it and accessed after it."""
    analysis = ComputationAnalysis(computation, analyzer)
    whole = get_whole_submatrices(computation)
    active = [[] for _ in splice_points]
    for m in range(1, len(computation.matrices)):
        first = analysis.first_nontrivial_access(whole[m])
        last = analysis.last_access(whole[m])
        for i, point in enumerate(splice_points):
            if first < point < last:
                active[i].append(m)
    return active


def _equal_except_for_shift(a, b, shift):
    if len(a) != len(b):
        return False
    for (id1, t1), (id2, t2) in zip(a, b):
        if id1 != id2 or (t2 != t1 + shift and t2 != t1):
            return False
    return True


def find_first_repeat(pair_lists, time_shift_per_segment):
    """The first (s, t), s < t, whose active lists are equal up to a shift of
    (t - s) * time_shift_per_segment; None if there is none."""
    num = len(pair_lists)
    for s in range(num):
        for t in range(s + 1, num):
            if _equal_except_for_shift(pair_lists[s], pair_lists[t],
                                       (t - s) * time_shift_per_segment):
                return s, t
    return None


def get_matrix_swap_order(matrices1, matrices2):
    """An order for the swaps (matrices1[i], matrices2[i]) such that a matrix
    is overwritten only after its own value was handed on (the lists may
    overlap: a matrix can be the new state of one pair and the old of another).
    ``matrices2`` is sorted."""
    position = {m: i for i, m in enumerate(matrices2)}
    num = len(matrices1)
    processed = [False] * num
    swaps = []
    loops = 0
    while len(swaps) < num:
        for i in range(num):
            if processed[i]:
                continue
            m1 = matrices1[i]
            pos = position.get(m1)
            if pos is None or processed[pos]:
                swaps.append((m1, matrices2[i]))
                processed[i] = True
        loops += 1
        if loops > num:
            raise ComputationError("looped optimization: cyclic matrix hand-over")
    return swaps


def _check_identified_matrices(computation, list1, list2, time_difference):
    if time_difference <= 0 or len(list1) != len(list2):
        raise ComputationError("looped optimization: bad repeat (time difference %d)"
                               % time_difference)
    for m1, m2 in zip(list1, list2):
        a, b = computation.matrices[m1], computation.matrices[m2]
        d1, d2 = computation.matrix_debug_info[m1], computation.matrix_debug_info[m2]
        ok = (a.num_rows == b.num_rows and a.num_cols == b.num_cols
              and a.stride_type == b.stride_type and d1.is_deriv == d2.is_deriv
              and len(d1.cindexes) == len(d2.cindexes))
        if ok:
            for (node1, (n1, t1, x1)), (node2, (n2, t2, x2)) in zip(d1.cindexes, d2.cindexes):
                if not (node1 == node2 and n1 == n2 and x1 == x2
                        and ((t1 == kNoTime and t2 == kNoTime) or t2 == t1 + time_difference)):
                    ok = False
                    break
        if not ok:
            raise ComputationError("looped optimization: matrices m%d and m%d are not the same "
                                   "up to a shift of %d frames" % (m1, m2, time_difference))


def _form_infinite_loop(computation, command1, command2):
    commands = computation.commands
    if not (command1 < command2 < len(commands)
            and commands[command1].command_type == C.kNoOperationPermanent
            and commands[command2].command_type == C.kNoOperationPermanent):
        raise ComputationError("looped optimization: splice points c%d, c%d are not "
                               "kNoOperationPermanent" % (command1, command2))
    del commands[command2 + 1:]
    goto = commands[command2]
    goto.command_type = C.kGotoLabel
    goto.arg1 = command1
    commands.insert(command1, Command(C.kNoOperationLabel))


def _add_matrix_swap_commands(computation, matrices1, matrices2):
    goto = computation.commands.pop()
    whole = get_whole_submatrices(computation)
    for m1, m2 in get_matrix_swap_order(matrices1, matrices2):
        computation.commands.append(Command(C.kSwapMatrix, whole[m1], whole[m2]))
    computation.commands.append(goto)


def optimize_looped_computation(nnet, computation):
    """Kaldi's OptimizeLoopedComputation (see the module docstring). Returns
    True if the loop was formed (the last command is then kGotoLabel)."""
    if not computation.matrix_debug_info:
        raise ComputationError("looped optimization needs matrix debug info (compile with "
                               "output_debug_info=True)")
    analyzer = Analyzer()
    analyzer.init(nnet, computation)
    splice_points = _commands_of_type(computation, C.kNoOperationPermanent)
    shift = find_time_shift(computation)
    active = find_active_matrices(computation, analyzer, splice_points)
    matrix_to_pair = create_matrix_pairs(computation)
    pair_to_matrix = {matrix_to_pair[m]: m for m in range(1, len(matrix_to_pair))}
    pair_lists = [[matrix_to_pair[m] for m in ms] for ms in active]
    repeat = find_first_repeat(pair_lists, shift)
    if repeat is None:
        return False
    seg1, seg2 = repeat
    matrices1, matrices2 = [], []
    for p1, p2 in zip(pair_lists[seg1], pair_lists[seg2]):
        if p1[1] == p2[1]:
            continue     # the same matrix in both periods: nothing to hand over
        matrices1.append(pair_to_matrix[p1])
        matrices2.append(pair_to_matrix[p2])
    _check_identified_matrices(computation, matrices1, matrices2, shift * (seg2 - seg1))
    _form_infinite_loop(computation, splice_points[seg1], splice_points[seg2])
    _add_matrix_swap_commands(computation, matrices1, matrices2)
    renumber_computation(computation)
    fix_goto_label(computation)
    return True


