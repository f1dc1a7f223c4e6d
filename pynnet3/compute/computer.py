"""NnetComputer: runs an NnetComputation, Kaldi's nnet-compute.cc protocol.

Usage (forward and backward, as Kaldi's NnetComputer)::

    computer = NnetComputer(computation, nnet, nnet_to_update=gradient_nnet)
    computer.accept_input("input", feats)        # every input node
    computer.run()                               # forward, up to the outputs
    out = computer.get_output("output")
    computer.accept_input("output", out_deriv)   # output derivatives
    computer.run()                               # backward
    in_deriv = computer.get_output("input")      # input derivatives

``run()`` executes commands from the program counter until it reaches a
kAcceptInput or kProvideOutput command (the user's turn) or the end; the I/O
commands met there become *pending* and are satisfied by ``accept_input`` /
``get_output`` in any order. kGotoLabel loops (looped computations) jump back
to their label exactly as in Kaldi.

Semantics that match Kaldi exactly:
- kPropagate: arg5 is the memo index (0: discard the memo), arg6 non-zero
  stores stats into ``nnet_to_store_stats`` (defaults to ``nnet_to_update``),
  with an empty input when the propagate was in place;
- kBackprop: an updatable component gets the matching component of
  ``nnet_to_update`` only when the computation needs the model derivative; a
  non-updatable one gets ``nnet_to_store_stats``'s (some store stats in
  backprop); kBackpropNoModelUpdate never updates; arg7 is the memo index;
- kCopyRows / kCopyRowsMulti / kAddRowRanges with alpha 0 do nothing;
- kCompressMatrix / kDecompressMatrix compress as Kaldi's CuCompressedMatrix
  (Kaldi does this on GPU only; the sign form used for ReLU outputs is exact
  for what reads it).

A failing command raises :class:`ComputationError` naming the command index and
the command as Kaldi prints it.
"""

import time

import numpy as np

from ..compiler.computation import CommandType
from ..compiler.computation_io import command_string
from ..components.base import ComponentProperty
from ..errors import ComputationError, PynnetError
from .backend import get_backend
from .debug import CommandDebugger
from .plan import ExecutionPlan

_IO_COMMANDS = (CommandType.kAcceptInput, CommandType.kProvideOutput)


class NnetComputer:
    """Runs one NnetComputation on one Nnet, as Kaldi's NnetComputer: give
    every input (:meth:`accept_input`), :meth:`run` the forward pass, read
    the outputs (:meth:`get_output`); if the request asked for derivatives,
    give the output derivatives, :meth:`run` again (the backward pass) and
    read the input derivatives under the input nodes' names. A computer runs
    its computation once.

    Args:
        computation: what :func:`pynnet3.compile` returned.
        nnet: the network it was compiled for.
        nnet_to_update: the Nnet whose components receive the parameter
            gradient in the backward pass (as in Kaldi, a copy of ``nnet``
            with its parameters scaled to zero and set as gradient: Kaldi's
            ScaleNnet and SetNnetAsGradient), None: none.
        backend: "numpy" (BLAS arithmetic), "kaldi-exact" (Kaldi's CPU
            arithmetic, bit for bit), "cupy", or a Backend.
        nnet_to_store_stats: where the forward pass's store-stats flag
            accumulates statistics (default: ``nnet_to_update``, as Kaldi).
        undefined_fill: the value of newly allocated matrices (None leaves
            them undefined, as Kaldi; NaN finds reads of undefined memory).
        plan: an ExecutionPlan shared by the computers of one computation
            (index tables and matrices prepared once); None: one of its own.
        debug: log every command with the values it wrote and its time, as
            Kaldi's ``--computation.debug``.

    Raises:
        ComputationError: a command fails (names the command as Kaldi prints
            it), or inputs / outputs are given or asked at the wrong time.

    Example::

        import numpy as np
        import pynnet3
        from pynnet3 import examples
        from pynnet3.compiler.request import IoSpecification

        nnet = pynnet3.prepare_for_test(examples.path("tdnn_lda.raw"))
        request = pynnet3.ComputationRequest(
            inputs=[IoSpecification.from_t_range("input", -8, 58),
                    IoSpecification.from_t_range("ivector", 0, 1)],
            outputs=[IoSpecification.from_t_range("output", 0, 50)])
        feats = dict(pynnet3.read_table("ark:" + examples.path("feats.ark")))["utt2"]
        ivector = dict(pynnet3.read_table("ark:" + examples.path("ivectors.ark")))["utt2"]
        computer = pynnet3.NnetComputer(pynnet3.compile(nnet, request), nnet)
        rows = np.clip(np.arange(-8, 58), 0, len(feats) - 1)   # first/last frame repeated
        computer.accept_input("input", feats[rows])
        computer.accept_input("ivector", ivector[None, :])
        computer.run()
        output = computer.get_output("output")
        kaldi = dict(pynnet3.read_table("ark:" + examples.path("compute.ivectors.ark")))
        print(output.shape, abs(output - kaldi["utt2"]).max() < 1e-4)

    Output::

        (50, 30) True
    """

    def __init__(self, computation, nnet, nnet_to_update=None, backend="numpy",
                 nnet_to_store_stats=None, undefined_fill=None, plan=None, debug=False):
        self.computation = computation
        self.nnet = nnet
        self.nnet_to_update = nnet_to_update
        self.nnet_to_store_stats = (nnet_to_store_stats if nnet_to_store_stats is not None
                                    else nnet_to_update)
        self.backend = get_backend(backend)
        self._backend_propagate = self.backend.propagate
        self.undefined_fill = undefined_fill
        self.program_counter = 0
        self.pending_commands = []
        self.matrices = [None] * len(computation.matrices)
        self.compressed = {}
        self.memos = {}
        # what a fused command hands to a later one (fusion.py): per computer,
        # since plans (and their fusions) are shared between threads
        self.fused_values = {}
        self._empty = self.backend.empty(0, 0)
        if plan is None:
            plan = ExecutionPlan(computation, nnet, self.backend, elide_zeroing=False)
        elif plan.computation is not computation:
            raise ComputationError("the execution plan given was made for another "
                                   "computation")
        self.plan = plan
        self._debugger = None
        if debug:
            self._debugger = CommandDebugger(self)
        self._slices = plan.slices
        self._pool = plan.pool
        # in debug mode the commands run one by one, unfused
        self._arena = plan.arena_views(fused=self._debugger is None)
        self._skip_zeroing = plan.skip_zeroing
        self._add_as_copy = plan.add_as_copy
        T = CommandType
        self._dispatch = {
            T.kAllocMatrix: self._alloc_matrix,
            T.kDeallocMatrix: self._dealloc_matrix,
            T.kSwapMatrix: self._swap_matrix,
            T.kSetConst: self._set_const,
            T.kPropagate: self._propagate,
            T.kBackprop: self._backprop,
            T.kBackpropNoModelUpdate: self._backprop,
            T.kMatrixCopy: self._matrix_copy,
            T.kMatrixAdd: self._matrix_add,
            T.kCopyRows: self._copy_rows,
            T.kAddRows: self._add_rows,
            T.kCopyRowsMulti: self._copy_rows_multi,
            T.kCopyToRowsMulti: self._copy_to_rows_multi,
            T.kAddRowsMulti: self._add_rows_multi,
            T.kAddToRowsMulti: self._add_to_rows_multi,
            T.kAddRowRanges: self._add_row_ranges,
            T.kCompressMatrix: self._compress_matrix,
            T.kDecompressMatrix: self._decompress_matrix,
            T.kNoOperation: self._no_op,
            T.kNoOperationPermanent: self._no_op,
            T.kNoOperationMarker: self._no_op,
            T.kNoOperationLabel: self._no_op,
            T.kGotoLabel: self._goto_label,
        }

    # ------------------------------------------------------------------------
    # The user protocol
    # ------------------------------------------------------------------------
    def run(self):
        """Executes commands until the computation needs the user (inputs
        to give, outputs to read) or ends: the forward pass, then, on a second
        call, the backward pass.

        Returns:
            None.

        Raises:
            ComputationError: a command failed, or inputs are missing.
        """
        commands = self.computation.commands
        num_commands = len(commands)
        if self.program_counter >= num_commands:
            raise ComputationError("running a computation that has finished "
                                   "(program counter %d of %d commands)"
                                   % (self.program_counter, num_commands))
        self._check_no_pending_io()
        dispatch = self._dispatch
        debugger = self._debugger
        # Fused commands (the plan's, default arithmetic; not in debug mode,
        # which reports every command).
        fusions = self.plan.fusions if debugger is None else None
        fused = fusions.ops if fusions else {}
        absorbed = fusions.skip if fusions else ()
        while self.program_counter < num_commands:
            c = commands[self.program_counter]
            if c.command_type in _IO_COMMANDS:
                break
            handler = dispatch.get(c.command_type)
            try:
                if fused:
                    op = fused.get(self.program_counter)
                    if op is not None or self.program_counter in absorbed:
                        if op is not None:
                            op(self)
                        self.program_counter += 1
                        continue
                if handler is None:
                    raise ComputationError("invalid command type %r here"
                                           % (c.command_type,))
                if debugger is None:
                    handler(c)
                else:
                    pc = self.program_counter
                    debugger.before(pc)
                    start = time.perf_counter()
                    handler(c)
                    debugger.after(pc, time.perf_counter() - start)
            except Exception as e:  # re-raised with the command that failed
                raise self._command_error(e) from e
            self.program_counter += 1

    def accept_input(self, node_name, matrix):
        """Gives the matrix for an input node, or, after the forward pass, the
        derivative for an output node.

        Args:
            node_name: the node's name.
            matrix: one row per Index of the request's IoSpecification for the
                node, in its order (copied; float32).

        Returns:
            None.

        Raises:
            ComputationError: the computation does not take that node now, or
                the matrix has the wrong shape.
        """
        m, pending = self._io_matrix_index(node_name, is_output=False)
        info = self.computation.matrices[m]
        shape = getattr(matrix, "shape", None)
        if shape is None or len(shape) != 2:
            raise ComputationError("input for node '%s' must be a matrix, got %r"
                                   % (node_name, type(matrix).__name__))
        if shape[0] != info.num_rows:
            raise ComputationError("num-rows mismatch for input '%s': %d in computation-"
                                   "request, %d provided" % (node_name, info.num_rows, shape[0]))
        if shape[1] != info.num_cols:
            raise ComputationError("num-cols mismatch for input '%s': %d in computation-"
                                   "request, %d provided" % (node_name, info.num_cols, shape[1]))
        view = self._arena[pending] if self._arena is not None else None
        if view is not None:
            view[...] = self.backend.xp.asarray(matrix)
            self.matrices[m] = view
        elif self._pool is not None and isinstance(matrix, self.backend.xp.ndarray):
            mat = self._pool.take(info.num_rows, info.num_cols)
            mat[...] = matrix
            self.matrices[m] = mat
        else:
            self.matrices[m] = self.backend.from_host(matrix)
        # Only an accepted input is no longer pending (a rejected one may be
        # given again).
        self.pending_commands.remove(pending)

    def get_output(self, node_name):
        """An output node's value (after the forward pass), or an input
        node's derivative (after the backward pass).

        Args:
            node_name: the node's name.

        Returns:
            A copy, one row per Index of the request's IoSpecification, as a
            backend array (a NumPy array, or a CuPy array with "cupy").

        Raises:
            ComputationError: the computation has no such output now.
        """
        m, _ = self._io_matrix_index(node_name, is_output=True)
        mat = self.matrices[m]
        if mat is None or mat.shape[0] == 0:
            raise ComputationError("output for node '%s' is not available (matrix m%d is "
                                   "empty)" % (node_name, m))
        return self.backend.copy(mat)

    def get_output_destructive(self, node_name):
        """Like get_output, but hands over the matrix itself (no copy) and
        forgets it, as Kaldi's GetOutputDestructive."""
        m, _ = self._io_matrix_index(node_name, is_output=True)
        mat = self.matrices[m]
        if mat is None or mat.shape[0] == 0:
            raise ComputationError("output for node '%s' is not available (matrix m%d is "
                                   "empty)" % (node_name, m))
        self.matrices[m] = None
        return mat

    # ------------------------------------------------------------------------
    # Pending I/O (Kaldi's CheckNoPendingIo / GetIoMatrixIndex)
    # ------------------------------------------------------------------------
    def _check_no_pending_io(self):
        commands = self.computation.commands
        while (self.program_counter < len(commands)
               and commands[self.program_counter].command_type in _IO_COMMANDS):
            self.pending_commands.append(self.program_counter)
            self.program_counter += 1
        for ci in self.pending_commands:
            c = commands[ci]
            if c.command_type == CommandType.kAcceptInput:
                raise ComputationError("cannot run the computation: no input was given for "
                                       "node '%s' (command c%d)" % (self._node_name(c.arg2), ci))
        self.pending_commands = []

    def _io_matrix_index(self, node_name, is_output):
        commands = self.computation.commands
        node_index = self.nnet.get_node_index(node_name)
        if node_index == -1:
            raise ComputationError("no node named '%s' in the network" % node_name)
        while (self.program_counter < len(commands)
               and commands[self.program_counter].command_type in (
                   CommandType.kAcceptInput, CommandType.kProvideOutput,
                   CommandType.kNoOperationMarker)):
            if commands[self.program_counter].command_type != CommandType.kNoOperationMarker:
                self.pending_commands.append(self.program_counter)
            self.program_counter += 1
        for ci in self.pending_commands:
            c = commands[ci]
            this_is_output = c.command_type == CommandType.kProvideOutput
            if this_is_output == is_output and c.arg2 == node_index:
                if not self.computation.is_whole_matrix(c.arg1):
                    raise ComputationError("input or output of node '%s' is not a whole "
                                           "matrix (command c%d)" % (node_name, ci))
                # The caller removes an accepted input from the pending list;
                # outputs stay pending so that they may be read twice.
                return self.computation.submatrices[c.arg1].matrix_index, ci
        raise ComputationError("could not %s for network node '%s' (it is not expected at "
                               "this point in the computation)"
                               % ("provide output" if is_output else "accept input", node_name))

    # ------------------------------------------------------------------------
    # Helpers
    # ------------------------------------------------------------------------
    def _sub(self, s):
        """The current view of submatrix ``s`` (submatrix 0: an empty matrix)."""
        if s == 0:
            return self._empty
        m, rows, cols = self._slices[s]
        mat = self.matrices[m]
        if mat is None:
            raise ComputationError("submatrix %d uses matrix m%d, which is not allocated" % (s, m))
        return mat[rows, cols]

    def _matrix_of(self, s):
        return self._slices[s][0]

    def _rows(self, i):
        return self.plan.rows(i)

    def _multi(self, i):
        return self.plan.multi(i)

    def _ranges(self, i):
        return self.plan.ranges(i)

    def _check_rows(self, dest, src, num_rows, max_src_row, what):
        if dest.shape[0] != num_rows:
            raise ComputationError("%s: destination has %d rows, index table has %d"
                                   % (what, dest.shape[0], num_rows))
        if src is not None and max_src_row >= src.shape[0]:
            raise ComputationError("%s: index %d out of range for a source of %d rows"
                                   % (what, max_src_row, src.shape[0]))

    def _multi_sources(self, multi, num_cols, what):
        sources = {}
        for s, _, _, _ in multi.groups:
            view = self._sub(s)
            if view.shape[1] != num_cols:
                raise ComputationError("%s: submatrix %d has %d columns, expected %d"
                                       % (what, s, view.shape[1], num_cols))
            if multi.max_rows[s] >= view.shape[0]:
                raise ComputationError("%s: row %d out of range for submatrix %d of %d rows"
                                       % (what, multi.max_rows[s], s, view.shape[0]))
            sources[s] = view
        return sources

    def _node_name(self, i):
        names = self.nnet.node_names
        return names[i] if 0 <= i < len(names) else "<node %d>" % i

    def _command_error(self, e):
        pc = self.program_counter
        try:
            text = command_string(self.computation, self.nnet, pc)
        except Exception:  # the command may itself be malformed
            text = "c%d: %r" % (pc, self.computation.commands[pc])
        detail = str(e) if isinstance(e, PynnetError) else "%s: %s" % (type(e).__name__, e)
        return ComputationError("error running command %s -- %s" % (text, detail))

    # ------------------------------------------------------------------------
    # Commands
    # ------------------------------------------------------------------------
    def _alloc_matrix(self, c):
        m = self._matrix_of(c.arg1)
        if self._arena is not None:
            view = self._arena[self.program_counter]
            if view is not None:
                if self.undefined_fill is not None:
                    view[...] = self.undefined_fill
                self.matrices[m] = view
                return
        info = self.computation.matrices[m]
        if self._pool is not None:
            self.matrices[m] = self._pool.take(info.num_rows, info.num_cols,
                                               self.undefined_fill)
        else:
            self.matrices[m] = self.backend.empty(info.num_rows, info.num_cols,
                                                  self.undefined_fill)

    def _dealloc_matrix(self, c):
        m = self._matrix_of(c.arg1)
        if self._pool is not None:
            self._pool.give(self.matrices[m])
        self.matrices[m] = None

    def _swap_matrix(self, c):
        m1, m2 = self._matrix_of(c.arg1), self._matrix_of(c.arg2)
        self.matrices[m1], self.matrices[m2] = self.matrices[m2], self.matrices[m1]

    def _set_const(self, c):
        if self.program_counter in self._skip_zeroing:
            return      # the next command overwrites the whole matrix (see plan.py)
        self._sub(c.arg1)[...] = np.float32(c.alpha)

    def _propagate(self, c):
        component = self.nnet.components[c.arg1]
        indexes = self.computation.component_precomputed_indexes[c.arg2].data
        in_value = self._sub(c.arg3)
        out = self._sub(c.arg4)
        memo = self._backend_propagate(component, indexes, in_value, out)
        if c.arg6 > 0:
            if self.nnet_to_store_stats is None:
                raise ComputationError("the computation stores component statistics (the "
                                       "request had store_component_stats) but no "
                                       "nnet_to_store_stats / nnet_to_update was given")
            stats_component = self.nnet_to_store_stats.components[c.arg1]
            # After an in-place propagate the input is gone: give an empty one.
            maybe_input = self._empty if c.arg3 == c.arg4 else in_value
            stats_component.store_stats(maybe_input, out, memo)
        if c.arg5 > 0:
            self.memos[c.arg5] = memo

    def _backprop(self, c):
        component = self.nnet.components[c.arg1]
        upd_component = None
        if c.command_type == CommandType.kBackprop:
            if component.properties() & ComponentProperty.kUpdatableComponent:
                if self.computation.need_model_derivative:
                    if self.nnet_to_update is None:
                        raise ComputationError("the computation needs the model derivative "
                                               "but no nnet_to_update was given")
                    upd_nnet = self.nnet_to_update
                else:
                    upd_nnet = None
            else:
                # Some non-updatable components (e.g. CompositeComponent)
                # store stats in backprop.
                upd_nnet = self.nnet_to_store_stats
            if upd_nnet is not None:
                upd_component = upd_nnet.components[c.arg1]
        indexes = self.computation.component_precomputed_indexes[c.arg2].data
        memo = None
        if c.arg7 > 0:
            if c.arg7 not in self.memos:
                raise ComputationError("memo %d requested that was not generated" % c.arg7)
            memo = self.memos.pop(c.arg7)
        in_deriv = None if c.arg6 == 0 else self._sub(c.arg6)
        component.backprop(self.nnet.component_names[c.arg1], indexes, self._sub(c.arg3),
                           self._sub(c.arg4), self._sub(c.arg5), memo, upd_component, in_deriv)

    def _matrix_copy(self, c):
        dest = self._sub(c.arg1)
        self.backend.copy_matrix(dest, self._sub(c.arg2))
        if c.alpha != 1.0:
            dest *= np.float32(c.alpha)

    def _matrix_add(self, c):
        if self.program_counter in self._add_as_copy:   # onto zeros (see plan.py)
            self._matrix_copy(c)
            return
        self.backend.add_mat(self._sub(c.arg1), c.alpha, self._sub(c.arg2))

    def _copy_rows(self, c):
        if c.alpha == 0.0:
            return
        dest, src, rows = self._sub(c.arg1), self._sub(c.arg2), self._rows(c.arg3)
        self._check_rows(dest, src, rows.num_rows, rows.max_row, "CopyRows")
        self.backend.copy_rows(dest, src, rows)
        if c.alpha != 1.0:
            dest *= np.float32(c.alpha)

    def _add_rows(self, c):
        if self.program_counter in self._add_as_copy:   # onto zeros (see plan.py)
            if c.alpha == 0.0:
                self._sub(c.arg1)[...] = 0.0
            else:
                self._copy_rows(c)
            return
        dest, src, rows = self._sub(c.arg1), self._sub(c.arg2), self._rows(c.arg3)
        self._check_rows(dest, src, rows.num_rows, rows.max_row, "AddRows")
        self.backend.add_rows(dest, c.alpha, src, rows)

    def _copy_rows_multi(self, c):
        if c.alpha == 0.0:
            return
        dest, multi = self._sub(c.arg1), self._multi(c.arg2)
        self._check_rows(dest, None, multi.num_rows, -1, "CopyRowsMulti")
        sources = self._multi_sources(multi, dest.shape[1], "CopyRowsMulti")
        self.backend.copy_rows_multi(dest, sources, multi)
        if c.alpha != 1.0:
            dest *= np.float32(c.alpha)

    def _copy_to_rows_multi(self, c):
        if c.alpha != 1.0:
            raise ComputationError("CopyToRowsMulti supports only alpha = 1, got %g" % c.alpha)
        src, multi = self._sub(c.arg1), self._multi(c.arg2)
        self._check_rows(src, None, multi.num_rows, -1, "CopyToRowsMulti")
        targets = self._multi_sources(multi, src.shape[1], "CopyToRowsMulti")
        self.backend.copy_to_rows_multi(src, targets, multi)

    def _add_rows_multi(self, c):
        dest, multi = self._sub(c.arg1), self._multi(c.arg2)
        self._check_rows(dest, None, multi.num_rows, -1, "AddRowsMulti")
        sources = self._multi_sources(multi, dest.shape[1], "AddRowsMulti")
        self.backend.add_rows_multi(dest, c.alpha, sources, multi)

    def _add_to_rows_multi(self, c):
        src, multi = self._sub(c.arg1), self._multi(c.arg2)
        self._check_rows(src, None, multi.num_rows, -1, "AddToRowsMulti")
        targets = self._multi_sources(multi, src.shape[1], "AddToRowsMulti")
        self.backend.add_to_rows_multi(c.alpha, src, targets, multi)

    def _add_row_ranges(self, c):
        if c.alpha == 0.0:
            return
        dest, src, ranges = self._sub(c.arg1), self._sub(c.arg2), self._ranges(c.arg3)
        self._check_rows(dest, src, ranges.num_rows, ranges.max_end - 1, "AddRowRanges")
        self.backend.add_row_ranges(dest, c.alpha, src, ranges)

    def _compress_matrix(self, c):
        m = self._matrix_of(c.arg1)
        if m in self.compressed or self.matrices[m] is None:
            raise ComputationError("cannot compress matrix m%d: it is %s" % (
                m, "already compressed" if m in self.compressed else "not allocated"))
        self.compressed[m] = self.backend.compress(self.matrices[m], c.arg2, c.alpha,
                                                   c.arg3 != 0)
        self.matrices[m] = None

    def _decompress_matrix(self, c):
        m = self._matrix_of(c.arg1)
        if m not in self.compressed or self.matrices[m] is not None:
            raise ComputationError("cannot decompress matrix m%d: it is not compressed" % m)
        self.matrices[m] = self.backend.decompress(self.compressed.pop(m))

    def _no_op(self, c):
        pass

    def _goto_label(self, c):
        commands = self.computation.commands
        if not (0 <= c.arg1 < len(commands)
                and commands[c.arg1].command_type == CommandType.kNoOperationLabel):
            raise ComputationError("goto c%d: that command is not a label" % c.arg1)
        # run() then steps past the label, as Kaldi's loop increment does.
        self.program_counter = c.arg1
