"""ComputationChecker: is a computation well formed? (Kaldi's CheckComputation)

A checked computation satisfies, for the network it was compiled for:

- *indexes*: every command's submatrix, component, precomputed-indexes, index
  table and node arguments are in range, and dimensions agree (component
  input/output dims, rows of simple components, index-table lengths and row
  indexes, ``*-multi`` pairs, row ranges); in-place propagate/backprop only
  where the component supports it; every memo produced by a kPropagate is
  consumed by one kBackprop of the same component;
- *order* (from seed 004's CheckComputationOrder; current Kaldi dropped it
  because looped computations have several markers): before the last
  kNoOperationMarker (the end of the forward commands) there is no
  kBackprop / kBackpropNoModelUpdate, after it no kPropagate;
- *matrix accesses*: every matrix is allocated (or accepted as input) before
  its first access, accessed at all, and not accessed after its
  deallocation; a matrix that is only set to a constant (a write nothing
  reads) is reported by one warning per process, as it is legal in Kaldi;
- *compression*: kCompressMatrix is followed by its kDecompressMatrix across
  the forward/backward marker (and sign-only compression only for a ReLU);
- *undefined data*: no part of a matrix (a variable) is read before it is
  written, and, unless the computation is looped, every variable is used
  (Kaldi's one exception: the last rows of a matrix extended by
  extend-matrices);
- *debug info*: if present, one entry per matrix, with one cindex per row;
- with ``check_rewrite`` (meaningful only before optimization): no variable is
  written after it has been purely read.

A violation raises :class:`ComputationCheckError` whose message says what is
wrong, names the command as Kaldi prints it (``c12: m3 = ...``) and the matrix
(``m3``, or the variable ``m3(0:9,:)``); the same facts are attributes.
Looped computations (ending in kGotoLabel) are checked as Kaldi does: the
matrix swaps before the goto are read as deallocations and unused variables
are allowed.
"""

import copy
import gc
import logging
from operator import itemgetter

from .. import _fast
from ..compiler.computation import CommandType, LazyMatrixDebugInfo
from ..compiler.computation_io import command_string
from ..components.base import ComponentProperty as P
from ..errors import ComputationError
from .analysis import (AnalysisError, Analyzer, kReadAccess, kWriteAccess,
                       matrix_access_summary, rewritten_variable_candidates,
                       undefined_variable_candidates)
from .command_types import command_type_bytes

# The index check's kernel (a yes/no answer, see check_computation_indexes).
_kernel = _fast.load("checker_kernel")

CT = CommandType
_log = logging.getLogger("pynnet3")
_warned_only_constant = False
_index_of_cindex = itemgetter(1)   # a cindex is (node, Index)
_n_of_index = itemgetter(0)        # an Index is (n, t, x)

# CuCompressedMatrixType values (arg2 of kCompressMatrix)
kCompressedMatrixInt8 = 1
kCompressedMatrixUint8 = 2
kCompressedMatrixUint16 = 4

# the ExtendMatrices pass may leave the last rows of a matrix partly unused;
# must not exceed that pass's min_proportion (Kaldi: 0.8)
_EXTEND_MIN_PROPORTION = 0.8

# Command types as plain ints: the per-command loops compare against these
# (an IntEnum member is a class-attribute lookup each time).
_ALLOC, _DEALLOC, _SWAP, _SET_CONST = (int(CT.kAllocMatrix), int(CT.kDeallocMatrix),
                                       int(CT.kSwapMatrix), int(CT.kSetConst))
_PROPAGATE, _BACKPROP, _BACKPROP_NO_UPDATE = (int(CT.kPropagate), int(CT.kBackprop),
                                              int(CT.kBackpropNoModelUpdate))
_COPY, _ADD, _COPY_ROWS, _ADD_ROWS = (int(CT.kMatrixCopy), int(CT.kMatrixAdd),
                                      int(CT.kCopyRows), int(CT.kAddRows))
_MULTI = frozenset(int(t) for t in (CT.kAddRowsMulti, CT.kCopyRowsMulti,
                                    CT.kAddToRowsMulti, CT.kCopyToRowsMulti))
_ADD_ROW_RANGES, _COMPRESS, _DECOMPRESS = (int(CT.kAddRowRanges), int(CT.kCompressMatrix),
                                           int(CT.kDecompressMatrix))
_ACCEPT, _PROVIDE = int(CT.kAcceptInput), int(CT.kProvideOutput)
_NO_OPS = frozenset(int(t) for t in (CT.kNoOperation, CT.kNoOperationPermanent,
                                     CT.kNoOperationMarker, CT.kNoOperationLabel))
_MARKER, _GOTO = int(CT.kNoOperationMarker), int(CT.kGotoLabel)




def _component_facts(nnet):
    """What the index check needs of the network: per component its
    properties, input and output dims; per node whether it is an input or
    output node (as bytes)."""
    components = [nnet.get_component(i) for i in range(nnet.num_components())]
    return ([int(c.properties()) for c in components], [c.input_dim() for c in components],
            [c.output_dim() for c in components],
            bytes(1 if nnet.is_input_node(n) or nnet.is_output_node(n) else 0
                  for n in range(nnet.num_nodes())))


class ComputationCheckError(ComputationError):
    """A computation failed a check. ``check`` names the check (indexes,
    order, matrix-accesses, compression, undefined, rewrite, debug-info),
    ``command_index`` / ``matrix_index`` the command and matrix involved (or
    None), ``detail`` the bare reason."""

    def __init__(self, message, check, detail, command_index=None, matrix_index=None):
        super().__init__(message)
        self.check = check
        self.detail = detail
        self.command_index = command_index
        self.matrix_index = matrix_index


class CheckComputationOptions:
    """Kaldi's CheckComputationOptions. check_rewrite: also reject a variable
    written after being read (only valid before optimization).
    check_unused_variables: reject parts of matrices that are never used
    (False for looped computations)."""

    def __init__(self, check_rewrite=False, check_unused_variables=True):
        self.check_rewrite = check_rewrite
        self.check_unused_variables = check_unused_variables


class ComputationChecker:
    """Kaldi's ComputationChecker; call check() once. Does not handle looped
    computations itself (use :func:`check_computation`)."""

    def __init__(self, config, nnet, computation):
        self.config = config
        self.nnet = nnet
        self.computation = computation
        self.a = None
        self._types = None

    def command_types(self):
        """The command types, one byte per command (see
        :func:`command_type_bytes_py`); computed once per check."""
        if self._types is None:
            self._types = command_type_bytes(self.computation.commands)
        return self._types

    def check(self):
        # the checks build many small objects while the computation holds
        # millions; Python's cyclic GC would rescan those again and again
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._check()
        finally:
            if gc_was_enabled:
                gc.enable()

    def _check(self):
        self.check_computation_indexes()
        try:
            self.a = Analyzer().init(self.nnet, self.computation)
        except AnalysisError as e:   # e.g. a matrix allocated twice
            self._fail("matrix-accesses", e.detail, e.command_index, e.matrix_index)
        self.check_computation_order()
        self.check_computation_matrix_accesses()
        self.check_computation_compression()
        self.check_computation_undefined()
        self.check_computation_debug_info()
        if self.config.check_rewrite:
            self.check_computation_rewrite()

    # -- error reporting --------------------------------------------------------------------
    def _fail(self, check, detail, command_index=None, matrix_index=None, submatrix=None):
        comp = self.computation
        if matrix_index is None and submatrix is not None \
                and 0 < submatrix < len(comp.submatrices):
            matrix_index = comp.submatrices[submatrix].matrix_index
        parts = ["Computation check failed (%s): %s" % (check, detail)]
        if matrix_index is not None and "m%d" % matrix_index not in detail:
            parts.append("matrix m%d" % matrix_index)
        if command_index is not None:
            try:
                text = command_string(comp, self.nnet, command_index)
            except Exception:  # a command too broken to print: name it by index
                text = "c%d" % command_index
            parts.append("in command %s" % text)
        raise ComputationCheckError("; ".join(parts), check, detail, command_index,
                                    matrix_index)

    # -- indexes ----------------------------------------------------------------------------
    def check_computation_indexes(self):
        # The compiled check answers yes or no for the whole computation; the
        # loop below (its twin) runs when it says no, to name the fault.
        if _kernel is not None and _kernel.indexes_look_valid(
                self.computation, *_component_facts(self.nnet)):
            return
        self.check_computation_indexes_py()

    def check_computation_indexes_py(self):
        comp = self.computation
        nnet = self.nnet
        submatrices = comp.submatrices
        num_submatrices = len(submatrices)
        num_commands = len(comp.commands)
        num_components = nnet.num_components()
        num_precomputed = len(comp.component_precomputed_indexes)
        memo_to_command = {}

        def whole(s):
            return 1 <= s < num_submatrices and comp.is_whole_matrix(s)

        def valid(s, minimum=1):
            return minimum <= s < num_submatrices

        types = self.command_types()
        ci = -1

        def fail(detail, submatrix=None):
            # (reads the loop's current ci: called only within its iteration)
            self._fail("indexes", detail, ci, submatrix=submatrix)

        for ci, c in enumerate(comp.commands):
            ct = types[ci]
            if ct == _ALLOC or ct == _DEALLOC:
                if not whole(c.arg1):
                    fail("submatrix index %d out of range or not a whole matrix" % c.arg1,
                         c.arg1)
            elif ct == _SET_CONST:
                if not valid(c.arg1):
                    fail("submatrix index %d out of range" % c.arg1)
            elif ct == _SWAP:
                if not (whole(c.arg1) and whole(c.arg2)):
                    fail("submatrix index out of range or not a whole matrix", c.arg1)
                a, b = submatrices[c.arg1], submatrices[c.arg2]
                if a.num_rows != b.num_rows or a.num_cols != b.num_cols:
                    fail("dimension mismatch in kSwapMatrix command", c.arg1)
            elif ct == _PROPAGATE:
                if not 0 <= c.arg1 < num_components:
                    fail("component index %d out of range" % c.arg1)
                component = nnet.get_component(c.arg1)
                props = component.properties()
                simple = props & P.kSimpleComponent
                if not 0 <= c.arg2 <= num_precomputed:
                    fail("precomputed-indexes index %d out of range" % c.arg2)
                if c.arg2 != 0 and simple:
                    fail("precomputed-indexes index nonzero for simple component")
                if (not valid(c.arg3, 0) or (c.arg3 == 0 and simple) or not valid(c.arg4)):
                    fail("submatrix indexes out of range (input %d, output %d)"
                         % (c.arg3, c.arg4))
                if c.arg3 > 0 and submatrices[c.arg3].num_cols != component.input_dim():
                    fail("input-dim mismatch: submatrix has %d columns, component "
                         "input-dim is %d" % (submatrices[c.arg3].num_cols,
                                              component.input_dim()), c.arg3)
                if submatrices[c.arg4].num_cols != component.output_dim():
                    fail("output-dim mismatch: submatrix has %d columns, component "
                         "output-dim is %d" % (submatrices[c.arg4].num_cols,
                                               component.output_dim()), c.arg4)
                if simple and submatrices[c.arg3].num_rows != submatrices[c.arg4].num_rows:
                    fail("num-rows mismatch for simple component", c.arg4)
                if not props & P.kPropagateInPlace and c.arg3 == c.arg4:
                    fail("in-place propagation not supported for this component", c.arg4)
                if c.arg5 > 0:
                    if c.arg5 in memo_to_command:
                        fail("memo index %d re-used" % c.arg5)
                    memo_to_command[c.arg5] = ci
                if c.arg6 not in (0, 1):
                    fail("store-stats flag must be 0 or 1, is %d" % c.arg6)
            elif ct == _BACKPROP or ct == _BACKPROP_NO_UPDATE:
                self._check_backprop(ci, c, memo_to_command, num_components,
                                     num_precomputed, valid, fail)
            elif ct == _COPY or ct == _ADD:
                if not (valid(c.arg1) and valid(c.arg2)):
                    fail("submatrix indexes out of range in matrix copy/add")
                a, b = submatrices[c.arg1], submatrices[c.arg2]
                if a.num_rows != b.num_rows or a.num_cols != b.num_cols:
                    fail("dimension mismatch in matrix copy/add (%dx%d vs %dx%d)"
                         % (a.num_rows, a.num_cols, b.num_rows, b.num_cols), c.arg1)
                if c.arg1 == c.arg2 and not (ct == _COPY and c.alpha != 1.0):
                    fail("adding/copying to self", c.arg1)
            elif ct == _ADD_ROWS or ct == _COPY_ROWS:
                if not (valid(c.arg1) and valid(c.arg2) and 0 <= c.arg3 < len(comp.indexes)):
                    fail("index out of range in add-rows/copy-rows command")
                indexes = comp.indexes[c.arg3]
                if len(indexes) != submatrices[c.arg1].num_rows:
                    fail("indexes size mismatch in add-rows/copy-rows (%d indexes, %d rows)"
                         % (len(indexes), submatrices[c.arg1].num_rows), c.arg1)
                if submatrices[c.arg1].num_cols != submatrices[c.arg2].num_cols:
                    fail("dimension mismatch in add-rows/copy-rows", c.arg1)
                if indexes and (max(indexes) >= submatrices[c.arg2].num_rows
                                or min(indexes) < -1):
                    fail("row-index out of range in add-rows/copy-rows (source has %d rows)"
                         % submatrices[c.arg2].num_rows, c.arg2)
                if c.arg1 == c.arg2:
                    fail("copying to self in add-rows/copy-rows command", c.arg1)
            elif ct in _MULTI:
                self._check_multi(ci, c, valid, fail)
            elif ct == _ADD_ROW_RANGES:
                if not (valid(c.arg1) and valid(c.arg2) and
                        0 <= c.arg3 < len(comp.indexes_ranges)):
                    fail("index out of range in add-row-ranges command")
                pairs = comp.indexes_ranges[c.arg3]
                if submatrices[c.arg1].num_rows != len(pairs):
                    fail("num-rows mismatch in add-row-ranges command", c.arg1)
                if submatrices[c.arg1].num_cols != submatrices[c.arg2].num_cols:
                    fail("dimension mismatch in add-row-ranges command", c.arg1)
                src_rows = submatrices[c.arg2].num_rows
                for first, second in pairs:
                    if not ((first == -1 and second == -1)
                            or (second > first and first >= 0 and second <= src_rows)):
                        fail("row range %d,%d is invalid in add-row-ranges command"
                             % (first, second), c.arg2)
            elif ct == _COMPRESS:
                if not whole(c.arg1):
                    fail("submatrix index out of range or not a whole matrix", c.arg1)
                if not kCompressedMatrixInt8 <= c.arg2 <= kCompressedMatrixUint16:
                    fail("invalid compressed-matrix type %d" % c.arg2, c.arg1)
                if c.arg3 not in (0, 1):
                    fail("invalid 'truncate' option for compressing matrix", c.arg1)
                if c.alpha < 0.0 or c.alpha > 1000.0 or (
                        c.alpha == 0.0 and c.arg2 != kCompressedMatrixUint8):
                    fail("invalid alpha in kCompressMatrix command", c.arg1)
            elif ct == _DECOMPRESS:
                if not whole(c.arg1):
                    fail("submatrix index out of range or not a whole matrix", c.arg1)
            elif ct == _ACCEPT or ct == _PROVIDE:
                if not whole(c.arg1):
                    fail("submatrix index out of range or not a whole matrix", c.arg1)
                if not (0 <= c.arg2 < nnet.num_nodes()
                        and (nnet.is_input_node(c.arg2) or nnet.is_output_node(c.arg2))):
                    fail("invalid network node %d (not an input or output node)" % c.arg2,
                         c.arg1)
            elif ct in _NO_OPS:
                pass
            elif ct == _GOTO:
                label = c.arg1
                if not (0 <= label < ci
                        and comp.commands[label].command_type == CT.kNoOperationLabel):
                    fail("kGotoLabel command has invalid destination index %d" % label)
                if ci + 1 != num_commands:
                    fail("kGotoLabel is not the last command in the computation")
            else:
                fail("unknown command type %r" % (c.command_type,))
        if memo_to_command:
            ci = min(memo_to_command.values())
            self._fail("indexes", "memo was produced by this command but never consumed",
                       ci)

    def _check_backprop(self, ci, c, memo_to_command, num_components, num_precomputed,
                        valid, fail):
        submatrices = self.computation.submatrices
        if not 0 <= c.arg1 < num_components:
            fail("component index %d in backprop out of range" % c.arg1)
        component = self.nnet.get_component(c.arg1)
        props = component.properties()
        if not 0 <= c.arg2 <= num_precomputed:
            fail("precomputed-indexes index %d out of range" % c.arg2)
        if c.arg2 != 0 and props & P.kSimpleComponent:
            fail("precomputed-indexes index nonzero for simple component")
        if not (valid(c.arg3, 0) and valid(c.arg4, 0) and valid(c.arg5)
                and valid(c.arg6, 0)):
            fail("submatrix index out of range for backprop")
        if props & P.kBackpropNeedsInput and c.arg3 == 0:
            fail("backprop input needed but not supplied")
        if props & P.kBackpropNeedsOutput and c.arg4 == 0:
            fail("backprop output needed but not supplied")
        if c.arg6 == 0 and not props & P.kUpdatableComponent:
            fail("backprop is done but has no effect")
        if c.arg5 == c.arg6 and not props & P.kBackpropInPlace:
            fail("in-place backprop used where not supported", c.arg5)
        in_dim, out_dim = component.input_dim(), component.output_dim()
        for arg, dim, what in ((c.arg3, in_dim, "input"), (c.arg4, out_dim, "output"),
                               (c.arg5, out_dim, "output-deriv"),
                               (c.arg6, in_dim, "input-deriv")):
            if arg != 0 and submatrices[arg].num_cols != dim:
                fail("%s-dim mismatch in backprop: submatrix has %d columns, component "
                     "expects %d" % (what, submatrices[arg].num_cols, dim), arg)
        if c.arg3 != 0 and c.arg6 != 0 and \
                submatrices[c.arg3].num_rows != submatrices[c.arg6].num_rows:
            fail("num-rows mismatch in backprop input", c.arg6)
        if c.arg4 != 0 and submatrices[c.arg4].num_rows != submatrices[c.arg5].num_rows:
            fail("num-rows mismatch in backprop output", c.arg5)
        if props & P.kSimpleComponent and c.arg6 != 0 and \
                submatrices[c.arg5].num_rows != submatrices[c.arg6].num_rows:
            fail("num-rows mismatch in backprop input vs output", c.arg6)
        if c.arg7 != 0:
            if c.arg7 < 0 or c.arg7 not in memo_to_command:
                fail("memo-index %d not used for propagate" % c.arg7)
            propagate_command = memo_to_command.pop(c.arg7)
            if c.arg1 != self.computation.commands[propagate_command].arg1:
                fail("mismatch in component-node for memo index (made by command c%d)"
                     % propagate_command)
            if not props & P.kUsesMemo:
                fail("component not expected to use a memo")

    def _check_multi(self, ci, c, valid, fail):
        comp = self.computation
        submatrices = comp.submatrices
        num_submatrices = len(submatrices)
        if not (valid(c.arg1) and 0 <= c.arg2 < len(comp.indexes_multi)):
            fail("index out of range in *-multi command")
        pairs = comp.indexes_multi[c.arg2]
        num_rows = submatrices[c.arg1].num_rows
        num_cols = submatrices[c.arg1].num_cols
        if len(pairs) != num_rows:
            fail("indexes dimension mismatch in *-multi command (%d pairs, %d rows)"
                 % (len(pairs), num_rows), c.arg1)
        for s, row in pairs:
            if s == -1:
                if row != -1:
                    fail("expected -1 row index if submatrix index is -1")
                continue
            if not 1 <= s < num_submatrices:
                fail("submatrix index %d out of range in indexes_multi" % s)
            if not 0 <= row < submatrices[s].num_rows:
                fail("row index %d out of range in indexes_multi (submatrix %d has %d rows)"
                     % (row, s, submatrices[s].num_rows), s)
            if s == c.arg1:
                fail("copying from self in *-multi command", s)
            if submatrices[s].num_cols != num_cols:
                fail("mismatching dimension in *-multi command", s)
        if c.command_type in (CT.kAddToRowsMulti, CT.kCopyToRowsMulti):
            # duplicates would make the CUDA kernels write one row twice
            seen = set()
            for pair in pairs:
                if pair[0] != -1:
                    if pair in seen:
                        fail("duplicate element %d,%d found in indexes for "
                             "{add,copy}-to-rows-multi command" % pair, pair[0])
                    seen.add(pair)

    # -- order ------------------------------------------------------------------------------
    def check_computation_order(self):
        commands = self.computation.commands
        types = self.command_types()
        end_of_forward = types.rfind(_MARKER)
        if end_of_forward < 0:
            return
        # The first offending command: a backprop before the marker comes
        # before any propagate after it.
        backprops = [i for i in (types.find(_BACKPROP, 0, end_of_forward),
                                 types.find(_BACKPROP_NO_UPDATE, 0, end_of_forward))
                     if i >= 0]
        if backprops:
            ci = min(backprops)
            self._fail("order", "backprop occurs before the kNoOperationMarker (c%d) "
                       "that ends the forward commands" % end_of_forward, ci,
                       submatrix=commands[ci].arg5)
        ci = types.find(_PROPAGATE, end_of_forward + 1)
        if ci >= 0:
            self._fail("order", "propagate occurs after the kNoOperationMarker (c%d) "
                       "that ends the forward commands" % end_of_forward, ci,
                       submatrix=commands[ci].arg4)

    # -- matrix accesses --------------------------------------------------------------------
    def check_computation_matrix_accesses(self):
        # Kaldi's unused-input warning and its "only set to a constant" error
        # sit behind conditions that can never hold: Kaldi rejects every matrix
        # that is never accessed (inputs included) and accepts one that is only
        # set to a constant. This does the same, but warns (once per process)
        # about such a write that nothing reads; no Kaldi computation in
        # kaldi-ref has one.
        global _warned_only_constant
        commands = self.computation.commands
        summary = matrix_access_summary(self.a.matrix_accesses)
        for m in range(1, len(summary.first_access)):
            allocate = summary.allocate_command[m]
            first = summary.first_access[m]
            if allocate == -1:
                self._fail("matrix-accesses", "matrix m%d is not initialized" % m,
                           first if first != -1 else None, m)
            if first == -1:
                self._fail("matrix-accesses", "matrix m%d is never accessed" % m, allocate, m)
            if first < allocate:
                self._fail("matrix-accesses", "matrix m%d is accessed before it is "
                           "initialized (by command c%d)" % (m, allocate), first, m)
            if (summary.second_access[m] == -1 and self.config.check_unused_variables
                    and not _warned_only_constant
                    and commands[first].command_type == CT.kSetConst):
                _warned_only_constant = True
                _log.warning("Matrix m%d is only set to a constant value (command c%d), but "
                             "then never accessed.  Will warn only once.", m, first)
            deallocate = summary.deallocate_command[m]
            last = summary.last_access[m]
            if deallocate != -1 and last >= deallocate:
                self._fail("matrix-accesses", "matrix m%d is accessed after it is destroyed "
                           "(by command c%d)" % (m, deallocate), last, m)

    # -- compression ------------------------------------------------------------------------
    def check_computation_compression(self):
        commands = self.computation.commands
        types = self.command_types()
        # Only commands that compress or decompress have anything to check.
        if types.find(_COMPRESS) < 0 and types.find(_DECOMPRESS) < 0:
            return
        middle = types.find(_MARKER)
        # Only a matrix that some (de)compression touches can fail; in
        # increasing order, as a visit of every matrix would find them.
        subs = self.computation.submatrices
        touched = sorted({subs[commands[ci].arg1].matrix_index
                          for ci, t in enumerate(types) if t == _COMPRESS or t == _DECOMPRESS})
        for m in touched:
            accesses = self.a.matrix_accesses[m].accesses
            n = len(accesses)
            for i, access in enumerate(accesses):
                ci = access.command_index
                command = commands[ci]
                if command.command_type == CT.kDecompressMatrix:
                    if not (i > 0 and commands[accesses[i - 1].command_index].command_type
                            == CT.kCompressMatrix):
                        self._fail("compression", "decompression of matrix m%d not preceded "
                                   "by its compression" % m, ci, m)
                if command.command_type != CT.kCompressMatrix:
                    continue
                if i + 1 >= n or commands[accesses[i + 1].command_index].command_type \
                        != CT.kDecompressMatrix:
                    self._fail("compression", "compression of matrix m%d not followed by "
                               "its decompression" % m, ci, m)
                following = accesses[i + 1].command_index
                if not ci < middle < following:
                    self._fail("compression", "compression and decompression (c%d) of "
                               "matrix m%d do not straddle the forward/backward marker"
                               % (following, m), ci, m)
                if command.alpha == 0.0:
                    # sign-only compression: only for the output of a ReLU, whose
                    # backprop is the one access left
                    ok = (i > 0 and command.arg2 == kCompressedMatrixUint8 and n == i + 3)
                    if ok:
                        nxt = commands[accesses[i + 2].command_index]
                        ok = (nxt.command_type == CT.kBackprop and
                              self.nnet.get_component(nxt.arg1).type_name
                              == "RectifiedLinearComponent")
                    if not ok:
                        self._fail("compression", "sign-only compression of matrix m%d is "
                                   "allowed only for a ReLU output read by its backprop" % m,
                                   ci, m)

    # -- undefined data ---------------------------------------------------------------------
    def check_computation_undefined(self):
        a = self.a
        comp = self.computation
        check_unused = self.config.check_unused_variables
        variable_accesses = a.variable_accesses
        # Only these variables can fail; the rest are first written.
        for v in undefined_variable_candidates(variable_accesses, self.command_types(),
                                               _COMPRESS):
            accesses = variable_accesses[v]
            if not accesses:
                if not check_unused:
                    continue
                info = a.variables.variable_info(v)
                matrix = comp.matrices[info.matrix_index]
                # allowed: part of the last rows of a matrix that extend-matrices grew
                if (info.row_offset >= _EXTEND_MIN_PROPORTION * matrix.num_rows
                        and not (info.col_offset == 0 and info.num_cols == matrix.num_cols)):
                    continue
                self._fail("undefined", "variable %d == %s is never used"
                           % (v, a.variables.describe_variable(v)), None, info.matrix_index)
            first = accesses[0]
            # a compressed part of a matrix may be undefined: it is never read back
            if first.access_type != kWriteAccess and \
                    comp.commands[first.command_index].command_type != CT.kCompressMatrix:
                self._fail("undefined", "variable %d == %s is read before it is written to"
                           % (v, a.variables.describe_variable(v)), first.command_index,
                           a.variables.get_matrix_for_variable(v))

    # -- rewrite ----------------------------------------------------------------------------
    def check_computation_rewrite(self):
        a = self.a
        variable_accesses = a.variable_accesses
        # Only these variables can fail; the rest are never written after a read.
        for v in rewritten_variable_candidates(variable_accesses):
            accesses = variable_accesses[v]
            if not accesses:
                if self.config.check_unused_variables:
                    self._fail("rewrite", "variable %d = %s is never used"
                               % (v, a.variables.describe_variable(v)), None,
                               a.variables.get_matrix_for_variable(v))
                continue
            first_pure_read = next((i for i, x in enumerate(accesses)
                                    if x.access_type == kReadAccess), -1)
            if first_pure_read == -1:
                continue
            for x in accesses[first_pure_read + 1:]:
                if x.access_type != kReadAccess:
                    self._fail("rewrite", "variable %d = %s is modified after being read "
                               "(this is not expected before optimization)"
                               % (v, a.variables.describe_variable(v)), x.command_index,
                               a.variables.get_matrix_for_variable(v))

    # -- debug info -------------------------------------------------------------------------
    def check_computation_debug_info(self):
        comp = self.computation
        if not comp.matrix_debug_info:
            return
        if len(comp.matrix_debug_info) != len(comp.matrices):
            self._fail("debug-info", "debug info has %d entries for %d matrices"
                       % (len(comp.matrix_debug_info), len(comp.matrices)))
        for m in range(1, len(comp.matrix_debug_info)):
            info = comp.matrix_debug_info[m]
            # a debug info built on first access says how many Cindexes it
            # will have and their smallest n without being built
            pending = info.pending() if isinstance(info, LazyMatrixDebugInfo) else None
            if pending is None:
                cindexes = info.cindexes
                num_cindexes = len(cindexes)
                min_n = min(map(_n_of_index, map(_index_of_cindex, cindexes))) \
                    if cindexes else 0
            else:
                num_cindexes, min_n = pending[:2]
            if num_cindexes != comp.matrices[m].num_rows:
                self._fail("debug-info", "debug info for matrix m%d has wrong num-rows "
                           "(%d cindexes for %d rows)" % (m, num_cindexes,
                                                          comp.matrices[m].num_rows),
                           None, m)
            if min_n < 0:
                self._fail("debug-info", "negative n index in debug info of matrix m%d" % m,
                           None, m)


def _check_looped(nnet, computation, check_rewrite):
    """Kaldi's CheckComputationOnline: the swaps just before the final goto
    re-initialize matrices that are already initialized; read each as the
    deallocation of its second matrix, and allow unused variables."""
    computation = copy.copy(computation)
    commands = [copy.copy(c) for c in computation.commands]
    computation.commands = commands
    c = len(commands) - 2
    while c >= 0 and commands[c].command_type == CT.kSwapMatrix:
        commands[c].command_type = CT.kDeallocMatrix
        commands[c].arg1, commands[c].arg2 = commands[c].arg2, commands[c].arg1
        c -= 1
    ComputationChecker(CheckComputationOptions(check_rewrite, False), nnet,
                       computation).check()


def check_computation(nnet, computation, check_rewrite=False):
    """Kaldi's CheckComputation: checks ``computation`` (looped ones too);
    pass check_rewrite=True only for an unoptimized computation. Raises
    ComputationCheckError."""
    commands = computation.commands
    if commands and commands[-1].command_type == CT.kGotoLabel:
        _check_looped(nnet, computation, check_rewrite)
    else:
        ComputationChecker(CheckComputationOptions(check_rewrite), nnet, computation).check()
