"""Descriptors compiled into flat integer programs for the Cython compiler.

The Python Descriptor tree (``pynnet3.nnet.descriptor``) is the readable form;
evaluating it once per Cindex from Cython would mean a Python call per row.
This module flattens each Descriptor into an int32 array that
``pynnet3/_fast/descriptor_interpreter.pxd`` interprets in C (GetDependencies, IsComputable with
the inputs used, MapToInput), with exactly the Python classes' semantics.

Program layout (positions are absolute offsets into the same array; every
record starts with its opcode):

ForwardingDescriptor records
  ``F_NODE node``                              the node itself (any Scale is
                                               irrelevant to indexing)
  ``F_OFFSET dn dt dx child``                  Index + offset
  ``F_SWITCH k pos_0 .. pos_{k-1}``            child number (t mod k), the
                                               mathematical modulus
  ``F_ROUND modulus child``                    t rounded down to a multiple
  ``F_REPLACE_T value child`` / ``F_REPLACE_X value child``
SumDescriptor records
  ``S_SIMPLE fwd``, ``S_OPTIONAL sum``, ``S_CONST``,
  ``S_SUM pos2 sum1 sum2`` / ``S_FAILOVER pos2 sum1 sum2`` (sum1 follows the
  header, sum2 starts at pos2)

A Descriptor is a program plus the start of each of its parts.

Non-simple components get an *index program* too when their index hooks are
simple enough to run in C: ``("simple",)`` for simple components,
``("offsets", [o1, o2, ...])`` for Kaldi's TdnnComponent (inputs (n, t+o, x),
all required); ``("window", P, M, lo, hi, step)`` for the statistics components
(only where t % M == 0; inputs t' = floor(t / P) * P + lo + k * step below
floor(t / P) * P + hi; computable when any input is, the present ones used);
anything else is ``("python",)`` and is called back per Cindex, as Kaldi makes
a virtual call.
"""

import numpy as np

from ..components.base import Component, ComponentProperty
from ..errors import ComputationError
from ..nnet import descriptor as D

F_NODE = 1
F_OFFSET = 2
F_SWITCH = 3
F_ROUND = 4
F_REPLACE_T = 5
F_REPLACE_X = 6
S_SIMPLE = 10
S_OPTIONAL = 11
S_CONST = 12
S_SUM = 13
S_FAILOVER = 14

kSimpleComponent = ComponentProperty.kSimpleComponent


def _emit_forwarding(fwd, prog):
    if isinstance(fwd, D.SimpleForwardingDescriptor):
        prog += [F_NODE, fwd.src_node]
    elif isinstance(fwd, D.OffsetForwardingDescriptor):
        off = fwd.offset
        prog += [F_OFFSET, off[0], off[1], off[2]]
        _emit_forwarding(fwd.src, prog)
    elif isinstance(fwd, D.SwitchingForwardingDescriptor):
        k = len(fwd.srcs)
        prog += [F_SWITCH, k]
        table = len(prog)
        prog += [0] * k
        for i, src in enumerate(fwd.srcs):
            prog[table + i] = len(prog)
            _emit_forwarding(src, prog)
    elif isinstance(fwd, D.RoundingForwardingDescriptor):
        if fwd.t_modulus < 1:
            raise ComputationError("Round() with modulus %d cannot be evaluated" % fwd.t_modulus)
        prog += [F_ROUND, fwd.t_modulus]
        _emit_forwarding(fwd.src, prog)
    elif isinstance(fwd, D.ReplaceIndexForwardingDescriptor):
        prog += [F_REPLACE_T if fwd.variable == "t" else F_REPLACE_X, fwd.value]
        _emit_forwarding(fwd.src, prog)
    else:
        raise ComputationError("cannot compile forwarding descriptor of type %s"
                               % type(fwd).__name__)


def _emit_sum(part, prog):
    if isinstance(part, D.SimpleSumDescriptor):
        prog.append(S_SIMPLE)
        _emit_forwarding(part.src, prog)
    elif isinstance(part, D.OptionalSumDescriptor):
        prog.append(S_OPTIONAL)
        _emit_sum(part.src, prog)
    elif isinstance(part, D.ConstantSumDescriptor):
        prog.append(S_CONST)
    elif isinstance(part, D.BinarySumDescriptor):
        prog.append(S_SUM if part.op == D.kSumOperation else S_FAILOVER)
        slot = len(prog)
        prog.append(0)
        _emit_sum(part.src1, prog)
        prog[slot] = len(prog)
        _emit_sum(part.src2, prog)
    else:
        raise ComputationError("cannot compile sum descriptor of type %s" % type(part).__name__)


# Descriptors are immutable, so their programs can be reused across
# compilations; entries hold the descriptor itself so its id stays unique.
_PROGRAM_CACHE = {}
_PROGRAM_CACHE_LIMIT = 20000


def compile_descriptor_cached(descriptor):
    """(program, part_starts, has_optional_inputs) for a Descriptor, cached."""
    entry = _PROGRAM_CACHE.get(id(descriptor))
    if entry is not None and entry[0] is descriptor:
        return entry[1]
    prog, starts = compile_descriptor(descriptor)
    result = (prog.tolist(), starts.tolist(), program_has_optional_inputs(prog))
    if len(_PROGRAM_CACHE) >= _PROGRAM_CACHE_LIMIT:
        _PROGRAM_CACHE.clear()
    _PROGRAM_CACHE[id(descriptor)] = (descriptor, result)
    return result


def compile_descriptor(descriptor):
    """(program, part_starts) as int32 NumPy arrays for a Descriptor."""
    prog = []
    starts = []
    for part in descriptor.parts:
        starts.append(len(prog))
        _emit_sum(part, prog)
    return np.asarray(prog, dtype=np.int32), np.asarray(starts, dtype=np.int32)


def program_has_optional_inputs(prog):
    """Whether a Descriptor program has IfDefined() or Failover() anywhere, i.e.
    whether some inputs may go unused. (Walks the records; operands of other
    opcodes are never mistaken for opcodes.)"""
    prog = [int(v) for v in prog]
    pos = 0
    found = False

    def walk_fwd(pos):
        op = prog[pos]
        if op == F_NODE:
            return pos + 2
        if op == F_OFFSET:
            return walk_fwd(pos + 4)
        if op == F_SWITCH:
            end = pos + 2 + prog[pos + 1]
            for i in range(prog[pos + 1]):
                end = max(end, walk_fwd(prog[pos + 2 + i]))
            return end
        if op in (F_ROUND, F_REPLACE_T, F_REPLACE_X):
            return walk_fwd(pos + 2)
        raise ComputationError("bad descriptor program")

    def walk_sum(pos):
        nonlocal found
        op = prog[pos]
        if op == S_SIMPLE:
            return walk_fwd(pos + 1)
        if op == S_OPTIONAL:
            found = True
            return walk_sum(pos + 1)
        if op == S_CONST:
            return pos + 1
        if op in (S_SUM, S_FAILOVER):
            if op == S_FAILOVER:
                found = True
            walk_sum(pos + 2)
            return walk_sum(prog[pos + 1])
        raise ComputationError("bad descriptor program")

    while pos < len(prog):
        pos = walk_sum(pos)
    return found


def component_index_program(component, properties=None):
    """How the C graph builder evaluates a component's index hooks
    (``properties``: the component's properties() if already known)."""
    if properties is None:
        properties = int(component.properties())
    if properties & kSimpleComponent:
        return ("simple",)
    cls = type(component)
    if (cls.get_input_indexes is Component.get_input_indexes
            and cls.is_computable is Component.is_computable):
        # a non-simple component with the default (identity) index hooks
        return ("simple",)
    if component.type_name == "TdnnComponent":
        # Kaldi's TdnnComponent: inputs (n, t + o, x) for each time offset o,
        # computable only when all of them are.
        return ("offsets", [int(o) for o in component.time_offsets])
    if component.type_name == "StatisticsExtractionComponent":
        # inputs at t' = start, start + input_period, ... < start + output_period
        # where start = t rounded down to a multiple of output_period;
        # computable when any input is, using the ones present.
        return ("window", int(component.output_period), 1, 0, int(component.output_period),
                int(component.input_period))
    if component.type_name == "StatisticsPoolingComponent":
        # only at multiples of input_period; inputs at t - left_context ..
        # t + right_context step input_period; computable when any input is.
        return ("window", 1, int(component.input_period), -int(component.left_context),
                int(component.right_context) + 1, int(component.input_period))
    return ("python",)
