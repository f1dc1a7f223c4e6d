"""Kaldi's ConsolidateModelUpdate (ModelUpdateConsolidator,
nnet-optimize-utils.cc).

In recurrent networks one updatable simple component is backpropagated many
times (once per time step), and each backprop would update the model with a
small matrix product. This pass turns those backprops into
kBackpropNoModelUpdate and, at the end of the computation, does one kBackprop
that only updates the model, on matrices into which the inputs / outputs /
output derivatives of all the steps were copied (each copy right before the
backprop it belongs to). The gradient is the same sum, formed in one product.
Components with memos are left alone.
"""

from ..compiler.computation import (Command, CommandType as C, MatrixDebugInfo,
                                   MatrixStrideType)
from ..components.base import ComponentProperty as P
from .command_types import commands_of_types


class ModelUpdateConsolidator:
    def __init__(self, nnet, computation):
        self.nnet = nnet
        self.computation = computation
        # extra_commands[c]: new commands to go right before old command c
        # (only the few commands that get some are keys).
        self.extra_commands = {}
        self.final_commands = []
        self.final_deallocate_commands = []

    def consolidate_model_update(self):
        nnet = self.nnet
        per_component = {}
        commands = self.computation.commands
        eligible = {}      # component -> whether its updates can be consolidated
        for index in commands_of_types(self.computation, (C.kBackprop,)):
            component = commands[index].arg1
            ok = eligible.get(component)
            if ok is None:
                props = nnet.get_component(component).properties()
                ok = eligible[component] = bool(
                    props & P.kUpdatableComponent and props & P.kSimpleComponent
                    and not props & P.kUsesMemo)
            if ok:
                per_component.setdefault(component, []).append(index)
        consolidated = False
        for component in sorted(per_component):
            if len(per_component[component]) > 1:
                self._consolidate_update_for_component(component, per_component[component])
                consolidated = True
        if consolidated:
            self._add_commands_to_computation()

    def _append_debug_info_for_submatrix(self, s, debug_info):
        comp = self.computation
        info = comp.submatrices[s]
        src = comp.matrix_debug_info[info.matrix_index]
        debug_info.is_deriv = src.is_deriv
        debug_info.cindexes.extend(src.cindexes[info.row_offset:
                                                info.row_offset + info.num_rows])

    def _consolidate_submatrices(self, commands, submatrices):
        """A new matrix holding ``submatrices`` stacked, filled by copies
        placed before ``commands``; returns its whole submatrix."""
        comp = self.computation
        num_cols = comp.submatrices[submatrices[0]].num_cols
        num_rows = 0
        stride = MatrixStrideType.kDefaultStride
        debug_info = MatrixDebugInfo()
        for s in submatrices:
            info = comp.submatrices[s]
            num_rows += info.num_rows
            assert info.num_cols == num_cols
            if comp.matrix_debug_info:
                self._append_debug_info_for_submatrix(s, debug_info)
            if (comp.is_whole_matrix(s) and comp.matrices[info.matrix_index].stride_type
                    == MatrixStrideType.kStrideEqualNumCols):
                stride = MatrixStrideType.kStrideEqualNumCols
        whole = comp.new_matrix(num_rows, num_cols, stride)
        first = self.extra_commands.setdefault(0, [])
        first.append(Command(C.kAllocMatrix, whole))
        first.append(Command(C.kSetConst, whole, alpha=0.0))
        self.final_deallocate_commands.append(Command(C.kDeallocMatrix, whole))
        matrix = comp.submatrices[whole].matrix_index
        if comp.matrix_debug_info:
            comp.matrix_debug_info[matrix] = debug_info
        row_offset = 0
        for command_index, s in zip(commands, submatrices):
            rows = comp.submatrices[s].num_rows
            part = comp.new_submatrix(matrix, row_offset, rows, 0, num_cols)
            self.extra_commands.setdefault(command_index, []).append(
                Command(C.kMatrixCopy, part, s))
            row_offset += rows
        return whole

    def _consolidate_update_for_component(self, component_index, backprop_commands):
        props = self.nnet.get_component(component_index).properties()
        need_input = bool(props & P.kBackpropNeedsInput)
        need_output = bool(props & P.kBackpropNeedsOutput)
        inputs, outputs, output_derivs = [], [], []
        for index in backprop_commands:
            c = self.computation.commands[index]
            assert c.command_type == C.kBackprop and c.arg2 == 0
            c.command_type = C.kBackpropNoModelUpdate
            assert (c.arg3 != 0) == need_input and (c.arg4 != 0) == need_output
            inputs.append(c.arg3)
            outputs.append(c.arg4)
            output_derivs.append(c.arg5)
        in_s = self._consolidate_submatrices(backprop_commands, inputs) if need_input else 0
        out_s = (self._consolidate_submatrices(backprop_commands, outputs)
                 if need_output else 0)
        deriv_s = self._consolidate_submatrices(backprop_commands, output_derivs)
        # No precomputed indexes (simple component), no input derivative, no memo.
        self.final_commands.append(Command(C.kBackprop, component_index, 0, in_s, out_s,
                                           deriv_s, 0, 0))

    def _add_commands_to_computation(self):
        new = []
        commands = self.computation.commands
        done = 0
        for index in sorted(self.extra_commands):
            new.extend(commands[done:index])
            new.extend(self.extra_commands[index])
            done = index
        new.extend(commands[done:])
        new.extend(self.final_commands)
        new.extend(self.final_deallocate_commands)
        self.computation.commands = new


def consolidate_model_update(nnet, computation):
    """Consolidates the model update of repeated backprops (only where the
    computation updates the model)."""
    if computation.need_model_derivative:
        ModelUpdateConsolidator(nnet, computation).consolidate_model_update()
