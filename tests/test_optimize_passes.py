"""Hand-made checks of rules in individual passes that the reference cases
may not reach (renumbering of tables, allocation pairing, I/O order)."""

from pynnet3.compiler.computation import Command, CommandType as C, NnetComputation
from pynnet3.optimize.consolidate_io import consolidate_io_operations
from pynnet3.optimize.renumber import remove_no_ops, renumber_computation
from pynnet3.optimize.sizing import _command_pairs


def _computation():
    comp = NnetComputation()
    a = comp.new_matrix(40, 3)          # m1, s1
    b = comp.new_matrix(40, 3)          # m2, s2
    comp.new_matrix(5, 5)               # m3, s3: never used
    b_again = comp.new_submatrix(2, 0, 40, 0, 3)     # s4: same as s2
    long_rows = list(range(40))
    comp.indexes = [[0, 1], long_rows, [0, 1], list(long_rows), [7]]   # [4] unused
    comp.commands = [
        Command(C.kAllocMatrix, a), Command(C.kAllocMatrix, b),
        Command(C.kCopyRows, b_again, a, 1),
        Command(C.kAddRows, b, a, 3),
        Command(C.kCopyRows, b, a, 0),
        Command(C.kAddRows, b_again, a, 2),
        Command(C.kNoOperation),
        Command(C.kDeallocMatrix, a), Command(C.kDeallocMatrix, b)]
    return comp


def test_renumbering_drops_unused_and_merges_duplicates():
    comp = _computation()
    renumber_computation(comp)
    assert len(comp.matrices) == 3 and len(comp.submatrices) == 3
    # s4 became s2; identical tables (long ones too) merged onto the first
    # of them, numbered in table order; the unused table is gone.
    assert [(c.arg1, c.arg2, c.arg3) for c in comp.commands[2:6]] == [
        (2, 1, 1), (2, 1, 1), (2, 1, 0), (2, 1, 0)]
    assert comp.indexes == [[0, 1], list(range(40))]
    remove_no_ops(comp)
    assert C.kNoOperation not in [c.command_type for c in comp.commands]


def test_memos_become_consecutive_in_propagate_order():
    comp = NnetComputation()
    s = comp.new_matrix(2, 2)
    comp.commands = [Command(C.kPropagate, 0, 0, s, s, 7), Command(C.kPropagate, 0, 0, s, s, 3),
                     Command(C.kBackprop, 0, 0, s, s, s, s, 3),
                     Command(C.kBackprop, 0, 0, s, s, s, s, 7)]
    renumber_computation(comp)
    assert [comp.commands[0].arg5, comp.commands[1].arg5] == [1, 2]
    assert [comp.commands[2].arg7, comp.commands[3].arg7] == [2, 1]


def test_deallocation_allocation_pairs():
    # From the latest deallocation back, each takes the first free allocation
    # after it; pairs never reuse a command.
    assert sorted(_command_pairs([1, 4, 6], [5, 7, 8])) == [(1, 8), (4, 5), (6, 7)]
    assert _command_pairs([9], [2, 3]) == []
    assert sorted(_command_pairs([1, 2], [3])) == [(2, 3)]


def test_io_commands_go_to_the_ends_of_each_segment():
    comp = NnetComputation()
    s = comp.new_matrix(1, 1)
    types = [C.kSetConst, C.kProvideOutput, C.kAcceptInput, C.kSetConst,
             C.kNoOperationMarker, C.kProvideOutput, C.kAcceptInput, C.kSetConst]
    comp.commands = [Command(t, s, i) for i, t in enumerate(types)]
    consolidate_io_operations(None, comp)
    assert [c.arg2 for c in comp.commands] == [2, 0, 3, 1, 4, 6, 7, 5]
