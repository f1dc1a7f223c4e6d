"""NnetOptimizeOptions: which optimizations Kaldi's Optimize() applies.

Names, defaults and documentation strings are Kaldi's (nnet-optimize.h);
tools register them as ``--optimization.NAME`` through
:func:`pynnet3.bin._option_groups.register_options`. The options are mainly
for debugging the optimizer: switching a pass off must never change a
computation's results, only its cost.
"""

from dataclasses import dataclass, field, fields, replace

INT32_MIN = -2**31
INT32_MAX = 2**31 - 1


def _opt(default, doc, kind=None, hidden=False):
    return field(default=default, metadata={"doc": doc, "kind": kind, "hidden": hidden})


@dataclass
class NnetOptimizeOptions:
    optimize: bool = _opt(True, "Set this to false to turn off all optimizations")
    consolidate_model_update: bool = _opt(
        True, "Set to false to disable optimization that consolidates the model-update "
        "phase of backprop (e.g. for recurrent architectures")
    propagate_in_place: bool = _opt(
        True, "Set to false to disable optimization that allows in-place propagation")
    backprop_in_place: bool = _opt(
        True, "Set to false to disable optimization that allows in-place backprop")
    optimize_row_ops: bool = _opt(
        True, "Set to false to disable certain optimizations that act on operations of "
        "type *Row*.")
    split_row_ops: bool = _opt(
        True, "Set to false to disable an optimization that may replace some operations "
        "of type kCopyRowsMulti or kAddRowsMulti with up to two simpler operations.")
    extend_matrices: bool = _opt(
        True, "This optimization can reduce memory requirements for TDNNs when applied "
        "together with --convert-addition=true")
    convert_addition: bool = _opt(
        True, "Set to false to disable the optimization that converts Add commands into "
        "Copy commands wherever possible.")
    remove_assignments: bool = _opt(
        True, "Set to false to disable optimization that removes redundant assignments")
    allow_left_merge: bool = _opt(
        True, "Set to false to disable left-merging of variables in remove-assignments "
        "(obscure option)")
    allow_right_merge: bool = _opt(
        True, "Set to false to disable right-merging of variables in remove-assignments "
        "(obscure option)")
    initialize_undefined: bool = _opt(
        True, "Set to false to disable optimization that avoids redundant zeroing")
    move_sizing_commands: bool = _opt(
        True, "Set to false to disable optimization that moves matrix allocation and "
        "deallocation commands to conserve memory.")
    allocate_from_other: bool = _opt(
        True, "Instead of deleting a matrix of a given size and then allocating a matrix "
        "of the same size, allow re-use of that memory")
    min_deriv_time: int = _opt(
        INT32_MIN, "You can set this to the minimum t value that you want derivatives to "
        "be computed at when updating the model.  This is an optimization that saves time "
        "in the backprop phase for recurrent frameworks")
    max_deriv_time: int = _opt(
        INT32_MAX, "You can set this to the maximum t value that you want derivatives to "
        "be computed at when updating the model.  This is an optimization that saves time "
        "in the backprop phase for recurrent frameworks")
    max_deriv_time_relative: int = _opt(
        INT32_MAX, "An alternative mechanism for setting the --max-deriv-time, suitable "
        "for situations where the length of the egs is variable.  If set, it is "
        "equivalent to setting the --max-deriv-time to this value plus the largest 't' "
        "value in any 'output' node of the computation request.")
    snip_row_ops: bool = _opt(
        True, "Set this to false to disable an optimization that reduces the size of "
        "certain per-row operations")
    memory_compression_level: int = _opt(
        1, "This is only relevant to training, not decoding.  Set this to 0,1,2; higher "
        "levels are more aggressive at reducing memory by compressing quantities needed "
        "for backprop, potentially at the expense of speed and the accuracy of "
        "derivatives.  0 means no compression at all; 1 means compression that shouldn't "
        "affect results at all.")
    # Kaldi keeps this one off the command line: only the looped compiler sets it.
    optimize_looped_computation: bool = _opt(
        False, "Turn a linear computation into a loop (set by the looped compiler)",
        hidden=True)

    def copy(self, **changes):
        """A copy with some options changed (``opts.copy(optimize=False)``)."""
        return replace(self, **changes)

    @classmethod
    def option_names(cls):
        """The field names, in Kaldi's declaration order."""
        return [f.name for f in fields(cls)]


# -- Kaldi's NnetOptimizeOptions::Read, ::Write and operator== (the cached
# compiler's file starts with the options its computations were made with) --

# (token, field, kind, optional-on-read) in Kaldi's order; optional tokens are
# absent from files older Kaldis wrote.
_OPTIONS_LAYOUT = (
    ("<Optimize>", "optimize", "bool", False),
    ("<ConsolidateModelUpdate>", "consolidate_model_update", "bool", False),
    ("<PropagateInPlace>", "propagate_in_place", "bool", False),
    ("<BackpropInPlace>", "backprop_in_place", "bool", False),
    ("<OptimizeRowOps>", "optimize_row_ops", "bool", True),
    ("<SplitRowOps>", "split_row_ops", "bool", True),
    ("<ExtendMatrices>", "extend_matrices", "bool", True),
    ("<ConvertAddition>", "convert_addition", "bool", False),
    ("<RemoveAssignments>", "remove_assignments", "bool", False),
    ("<AllowLeftMerge>", "allow_left_merge", "bool", False),
    ("<AllowRightMerge>", "allow_right_merge", "bool", False),
    ("<InitializeUndefined>", "initialize_undefined", "bool", False),
    ("<MoveSizingCommands>", "move_sizing_commands", "bool", False),
    ("<AllocateFromOther>", "allocate_from_other", "bool", False),
    ("<MinDerivTime>", "min_deriv_time", "int", False),
    ("<MaxDerivTime>", "max_deriv_time", "int", False),
    ("<MaxDerivTimeRelative>", "max_deriv_time_relative", "int", True),
    ("<SnipRowOps>", "snip_row_ops", "bool", True),
    ("<MemoryCompressionLevel>", "memory_compression_level", "int", True),
)

# Kaldi's NnetOptimizeOptions::operator== ignores these two.
_IGNORED_IN_EQUALITY = ("extend_matrices", "optimize_looped_computation")


def read_optimize_options(stream):
    """Kaldi's NnetOptimizeOptions::Read (fields a file lacks keep their
    defaults)."""
    opts = NnetOptimizeOptions()
    stream.expect_token("<NnetOptimizeOptions>")
    for token, name, kind, optional in _OPTIONS_LAYOUT:
        if optional:
            if not stream.read_optional_token(token):
                continue
        else:
            stream.expect_token(token)
        setattr(opts, name, stream.read_bool() if kind == "bool" else stream.read_int32())
    stream.expect_token("</NnetOptimizeOptions>")
    return opts


def write_optimize_options(stream, opts):
    """Kaldi's NnetOptimizeOptions::Write."""
    stream.write_token("<NnetOptimizeOptions>")
    for token, name, kind, _ in _OPTIONS_LAYOUT:
        stream.write_token(token)
        value = getattr(opts, name)
        if kind == "bool":
            stream.write_bool(value)
        else:
            stream.write_int32(value)
    stream.write_token("</NnetOptimizeOptions>")


def optimize_options_equal(a, b):
    """Kaldi's NnetOptimizeOptions::operator==."""
    return all(getattr(a, f.name) == getattr(b, f.name) for f in fields(a)
               if f.name not in _IGNORED_IN_EQUALITY)
