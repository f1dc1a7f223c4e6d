"""Kaldi's VariableMergingOptimizer (nnet-optimize-utils.cc): removing
assignments and propagating / backpropagating in place.

Where a command ``s2 = s1`` (kMatrixCopy, with ``remove_assignments``), an
in-place-capable propagate (input s1, output s2) or backprop (output
derivative s1, input derivative s2) is the point at which s1's data stops
being needed and s2's starts, the two matrices can share memory: every
submatrix of one matrix becomes a submatrix of the other, the assignment (if
alpha is 1) becomes a no-op, and one allocation, zeroing and deallocation go.

A merge is done only when it cannot change what is computed (Kaldi's
conditions c1..c7 in MayBeMerged): not two inputs or two outputs, inputs and
outputs only as whole matrices, the kept side whole, stride compatibility,
no variable touched by an earlier merge in this round, and the access pattern
(s2 first really touched by this command; s1 last touched by it, or for an
assignment, s1 neither written after nor read after s2 is next written).
Rounds repeat until nothing merges; each round ends with a renumbering.
"""

from .. import _fast
from ..compiler.computation import CommandType as C, MatrixStrideType, SubMatrixInfo
from ..components.base import ComponentProperty as P
from . import analysis as _analysis
from .analysis import (Analyzer, ComputationAnalysis, compute_matrix_to_submatrix,
                       matrix_access_summary)
from .renumber import remove_no_ops, renumber_computation


def merge_candidates_py(commands, component_properties, remove_assignments,
                        propagate_in_place, backprop_in_place, propagate_in_place_bit,
                        backprop_in_place_bit):
    """The commands that may be merges, as [(command_index, s1, s2)] in
    command order, s1 the submatrix whose data stops being needed and s2 the
    one whose data starts, both > 0: assignments s2 = s1 (kMatrixCopy; with
    remove_assignments), propagates from s1 to s2 of components that can
    propagate in place (with propagate_in_place), backprops from output
    derivative s1 to input derivative s2 of components that can backprop in
    place and whose value arguments are neither (with backprop_in_place).
    The twin of ``pynnet3/_fast/variable_merging_kernel.pyx``."""
    copy_type = int(C.kMatrixCopy)
    propagate_type = int(C.kPropagate)
    backprop_types = (int(C.kBackprop), int(C.kBackpropNoModelUpdate))
    out = []
    for command_index, c in enumerate(commands):
        t = c.command_type
        if t == copy_type:
            if not remove_assignments:
                continue
            s1, s2 = c.arg2, c.arg1
        elif t == propagate_type:
            if not (propagate_in_place and component_properties[c.arg1]
                    & propagate_in_place_bit):
                continue
            s1, s2 = c.arg3, c.arg4
        elif t in backprop_types:
            if not (backprop_in_place and component_properties[c.arg1]
                    & backprop_in_place_bit):
                continue
            s1, s2 = c.arg5, c.arg6
            # Never share with the value arguments of the backprop.
            if s1 in (c.arg3, c.arg4) or s2 in (c.arg3, c.arg4):
                continue
        else:
            continue
        if s1 > 0 and s2 > 0:
            out.append((command_index, s1, s2))
    return out


_EQUAL_COLS = int(MatrixStrideType.kStrideEqualNumCols)
_COPY = int(C.kMatrixCopy)


# The kernel's when it is loaded (the one pynnet3._fast.load policy), else
# the twins. The compiled round reads the compiled analysis' arrays (so it runs
# only on the kernel's Analyzer).
_kernel = _fast.load("variable_merging_kernel")
_merge_candidates = _kernel.merge_candidates if _kernel is not None else merge_candidates_py
_merge_round = _kernel.merge_round if _kernel is not None else None
_compiled_analysis = _analysis.Analyzer is not _analysis.AnalyzerPy


class VariableMergingOptimizer:
    """One round of merging on ``computation`` (a new instance per round, as
    the analysis is computed once, at construction).

    The round runs in C (``merge_round`` of pynnet3/_fast/variable_merging_kernel.pyx)
    when both it and the compiled analysis are in use; the methods below are
    its twin, the readable specification."""

    def __init__(self, options, nnet, computation):
        self.options = options
        self.nnet = nnet
        self.computation = computation
        self.analyzer = Analyzer().init(nnet, computation)
        self._called = False
        self._allow_left = options.allow_left_merge
        self._allow_right = options.allow_right_merge

    def _init_twin(self):
        """The state the twin's methods use (the kernel keeps its own)."""
        computation = self.computation
        self.matrix_to_submatrix = compute_matrix_to_submatrix(computation)
        self.variable_dirty = [False] * self.analyzer.variables.num_variables()
        # Kaldi asks a fresh ComputationAnalysis each time; it holds no state
        # of its own (it reads the computation live), so one serves the round.
        self.analysis = ComputationAnalysis(computation, self.analyzer)
        # Per-matrix facts as plain lists: asking matrix_accesses[m] would
        # build every asked matrix's list of Access objects.
        self.summary = matrix_access_summary(self.analyzer.matrix_accesses)
        # The analysis' variables of a submatrix do not change in a round.
        self._variables_cache = {}

    def merge_variables(self, use_kernel=None):
        """Does every merge this round allows; returns True if any was done.
        ``use_kernel`` (None: whenever it can) chooses between the compiled
        round and the twin; tests cross-check the two."""
        assert not self._called, "merge_variables may be called once per instance"
        self._called = True
        opts = self.options
        if not opts.optimize:
            return False
        comp = self.computation
        props = [int(self.nnet.get_component(i).properties())
                 for i in range(self.nnet.num_components())]
        flags = (opts.remove_assignments, opts.propagate_in_place, opts.backprop_in_place,
                 int(P.kPropagateInPlace), int(P.kBackpropInPlace))
        if use_kernel is None:
            use_kernel = _merge_round is not None and _compiled_analysis
        if use_kernel:
            # (the analysis kept the arguments: the commands are not read again)
            candidates = _kernel.merge_candidates_of_analysis(self.analyzer, props, *flags)
        else:
            candidates = _merge_candidates(comp.commands, props, *flags)
        if use_kernel:
            merged = _merge_round(self.analyzer, comp, candidates, self._allow_left,
                                  self._allow_right)
        else:
            self._init_twin()
            merged = False
            for command_index, s1, s2 in candidates:
                left, right = self.may_be_merged(command_index, s1, s2)
                if left:
                    self.do_merge(command_index, s1, s2)
                    merged = True
                elif right:
                    self.do_merge(command_index, s2, s1)
                    merged = True
        if merged:
            renumber_computation(comp)
            remove_no_ops(comp)
        return merged

    def _variables(self, s):
        out = self._variables_cache.get(s)
        if out is None:
            out = self._variables_cache[s] = []
            self.analyzer.variables.append_variables_for_submatrix(s, out)
        return out

    def _mark_as_dirty(self, s):
        for v in self._variables(s):
            self.variable_dirty[v] = True

    def may_be_merged(self, command_index, s1, s2):
        """(left, right): whether s1 may be kept with s2 merged into it
        (left), or s2 kept with s1 merged into it (right).

        Kaldi's conditions, all of which must hold; they are tested cheapest
        first, which cannot change the answer (each only vetoes)."""
        allow_left, allow_right = self._allow_left, self._allow_right
        if not allow_left and not allow_right:
            return False, False
        comp = self.computation
        subs = comp.submatrices
        sub1 = subs[s1]
        sub2 = subs[s2]
        m1 = sub1.matrix_index
        m2 = sub2.matrix_index
        if m1 == m2:    # two parts of one matrix
            return False, False
        mats = comp.matrices
        mat1 = mats[m1]
        mat2 = mats[m2]
        whole1 = (sub1.row_offset == 0 and sub1.col_offset == 0
                  and sub1.num_rows == mat1.num_rows and sub1.num_cols == mat1.num_cols)
        whole2 = (sub2.row_offset == 0 and sub2.col_offset == 0
                  and sub2.num_rows == mat2.num_rows and sub2.num_cols == mat2.num_cols)
        # c3, c4: the kept side must be a whole matrix; c6, c7: a matrix
        # whose stride must equal its width can only take in a whole matrix.
        left = (allow_left and whole2
                and not (mat2.stride_type == _EQUAL_COLS and not whole1))
        right = (allow_right and whole1
                 and not (mat1.stride_type == _EQUAL_COLS and not whole2))
        if not left and not right:
            return False, False
        # c5: nothing already merged this round.
        dirty = self.variable_dirty
        cache = self._variables_cache
        for s in (s1, s2):
            variables = cache.get(s)
            if variables is None:
                variables = self._variables(s)
            for v in variables:
                if dirty[v]:
                    return False, False
        # c1: not two inputs or two outputs; c2: inputs and outputs whole.
        is_input = self.summary.is_input
        is_output = self.summary.is_output
        in1, in2, out1, out2 = is_input[m1], is_input[m2], is_output[m1], is_output[m2]
        if (in1 and in2) or (out1 and out2):
            return False, False
        if (in1 or out1 or in2 or out2) and not (whole1 and whole2):
            return False, False
        # The access pattern.
        analysis = self.analysis
        if analysis.first_nontrivial_access(s2) != command_index:
            return False, False
        c = comp.commands[command_index]
        if c.command_type == _COPY and c.alpha == 1.0:
            ok = (analysis.last_write_access(s1) < command_index
                  and analysis.last_access(s1)
                  < analysis.data_invalidated_command(command_index, s2))
        else:
            ok = analysis.last_access(s1) == command_index
        return (left, right) if ok else (False, False)

    def do_merge(self, command_index, s_to_keep, s_to_discard):
        """Makes the matrix of ``s_to_discard`` live inside ``s_to_keep``."""
        self._mark_as_dirty(s_to_keep)
        self._mark_as_dirty(s_to_discard)
        comp = self.computation
        subs = comp.submatrices
        m_keep = subs[s_to_keep].matrix_index
        m_discard = subs[s_to_discard].matrix_index
        assert m_keep != m_discard and m_keep > 0 and m_discard > 0
        keep = subs[s_to_keep]
        for s in self.matrix_to_submatrix[m_discard]:
            a = subs[s]
            subs[s] = SubMatrixInfo(keep.matrix_index, a.row_offset + keep.row_offset,
                                    a.num_rows, a.col_offset + keep.col_offset, a.num_cols)
        commands = comp.commands
        c = commands[command_index]
        if c.command_type == C.kMatrixCopy and c.alpha == 1.0:
            c.command_type = C.kNoOperation
            c.arg1 = c.arg2 = -1
        summary = self.summary
        # One deallocation survives: the discarded matrix's if it has one
        # (i.e. it is not an output), else the kept one's.
        dealloc = summary.deallocate_command[m_discard]
        if dealloc == -1:
            dealloc = summary.deallocate_command[m_keep]
        assert dealloc != -1, "neither m%d nor m%d is deallocated" % (m_keep, m_discard)
        commands[dealloc].command_type = C.kNoOperation
        # One allocation survives; a kAcceptInput must stay where it is.
        assert (summary.allocate_command[m_keep] != -1
                and summary.allocate_command[m_discard] != -1), \
            "m%d or m%d is never allocated" % (m_keep, m_discard)
        alloc_keep = commands[summary.allocate_command[m_keep]]
        alloc_discard = commands[summary.allocate_command[m_discard]]
        if alloc_discard.command_type == C.kAcceptInput:
            alloc_keep.command_type = C.kNoOperation
            zeroed = m_keep
        else:
            alloc_discard.command_type = C.kNoOperation
            zeroed = m_discard
        # ... and the zeroing that followed the allocation that went.
        assert summary.first_access[zeroed] != -1, "merged matrix m%d has no access" % zeroed
        first = commands[summary.first_access[zeroed]]
        if first.command_type == C.kSetConst and first.alpha == 0.0:
            first.command_type = C.kNoOperation
        if comp.matrices[m_discard].stride_type == MatrixStrideType.kStrideEqualNumCols:
            comp.matrices[m_keep].stride_type = MatrixStrideType.kStrideEqualNumCols


def variable_merging_optimization(options, nnet, computation):
    """Kaldi's VariableMergingOptimization: merging rounds until one merges
    nothing."""
    while VariableMergingOptimizer(options, nnet, computation).merge_variables():
        pass
