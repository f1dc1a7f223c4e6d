"""Descriptors: the expressions that say where a node's input comes from.

A Descriptor is written in config files as e.g.
``Append(Offset(input, -1), Sum(a, Scale(0.5, b)), IfDefined(Offset(c, 3)))``.
Kaldi parses such text into a loose tree (its ``GeneralDescriptor``),
*normalizes* it, and converts it into a strict three-level hierarchy:

- :class:`Descriptor`: an Append of one or more *parts* (the dims add up);
- each part is a :class:`SumDescriptor`: :class:`SimpleSumDescriptor`,
  :class:`BinarySumDescriptor` (``Sum`` or ``Failover`` of two),
  :class:`OptionalSumDescriptor` (``IfDefined``) or
  :class:`ConstantSumDescriptor` (``Const``);
- the leaves of those are :class:`ForwardingDescriptor` s, which map an output
  Index to exactly one input Cindex: :class:`SimpleForwardingDescriptor`
  (a node, optionally scaled), :class:`OffsetForwardingDescriptor`,
  :class:`SwitchingForwardingDescriptor`, :class:`RoundingForwardingDescriptor`,
  :class:`ReplaceIndexForwardingDescriptor`.

Guarantees:
- :func:`parse_descriptor` accepts exactly the texts Kaldi accepts, normalizes
  them the way Kaldi does (Append moved outward, Offset/Round/ReplaceIndex/
  Switch pushed inside Sum/Failover/IfDefined, Scale pushed to the node, nested
  Offsets and Scales combined, ``Sum(a, b, c)`` -> ``Sum(a, Sum(b, c))``), and
  :meth:`Descriptor.write_config` prints the result exactly as Kaldi prints it
  in model files and ``nnet3-info``.
- Text Kaldi rejects raises :class:`~pynnet3.errors.DescriptorError` whose
  message is Kaldi's (plus context); where Kaldi only fails an assertion, the
  message says what is wrong with the expression.
- Descriptor objects are never modified after construction, so they can be
  shared between copies of a network.
"""

import math

from ..common.floats import f32, kaldi_str
from ..common.index import Cindex, Index
from ..errors import DescriptorError

__all__ = [
    "Descriptor", "ForwardingDescriptor", "SimpleForwardingDescriptor",
    "OffsetForwardingDescriptor", "SwitchingForwardingDescriptor",
    "RoundingForwardingDescriptor", "ReplaceIndexForwardingDescriptor",
    "SumDescriptor", "SimpleSumDescriptor", "BinarySumDescriptor",
    "OptionalSumDescriptor", "ConstantSumDescriptor", "kSumOperation",
    "kFailoverOperation", "lcm",
]

_INF = float("inf")

# BinarySumDescriptor operations (Kaldi's BinarySumDescriptor::Operation).
kSumOperation = 0
kFailoverOperation = 1


def lcm(a, b):
    """The least common multiple of two moduli (the other one when one is 0)."""
    return a * b // math.gcd(a, b) if a and b else max(a, b)


def _push(container, value):
    """Adds ``value`` to a list (append) or a set (add)."""
    if isinstance(container, list):
        container.append(value)
    else:
        container.add(value)


class _Expression:
    """What the parts of a Descriptor share: they are immutable values, equal
    when of the same class with equal ``_key()``, printed by ``repr`` with
    node indexes for names."""

    __slots__ = ()

    def _key(self):
        raise NotImplementedError

    def write_config(self, node_names):
        raise NotImplementedError

    def copy(self):
        return self

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, self.write_config(_IndexNames()))

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self):
        return hash((type(self).__name__, self._key()))


# ---------------------------------------------------------------------------
# ForwardingDescriptor: maps an output Index to one input Cindex.
# ---------------------------------------------------------------------------

class ForwardingDescriptor(_Expression):
    """Base class; subclasses implement the methods below."""

    __slots__ = ()

    def map_to_input(self, index):
        """The input Cindex that output ``index`` is taken from."""
        raise NotImplementedError

    def dim(self, nnet):
        raise NotImplementedError

    def modulus(self):
        """The t-period of this expression (Kaldi's Modulus()): 1 unless it
        contains Switch() or Round()."""
        return 1

    def get_node_dependencies(self, node_indexes=None):
        """Adds every node this may forward from to ``node_indexes`` (a list or
        set; a new set if None) and returns it."""
        raise NotImplementedError

    def get_scale_for_node(self, node_index):
        """The scale applied to node ``node_index`` (inf if it does not appear)."""
        raise NotImplementedError


class _IndexNames:
    """A stand-in for node_names that prints node indexes (for repr)."""

    def __getitem__(self, i):
        return "#%d" % i

    def __len__(self):
        return 1 << 62


class SimpleForwardingDescriptor(ForwardingDescriptor):
    """A node's output, optionally scaled: ``x`` or ``Scale(0.5, x)``."""

    __slots__ = ("src_node", "scale")

    def __init__(self, src_node, scale=1.0):
        self.src_node = int(src_node)
        self.scale = f32(scale)

    def _key(self):
        return (self.src_node, self.scale)

    def map_to_input(self, index):
        return Cindex(self.src_node, index)

    def dim(self, nnet):
        return nnet.node_dim(self.src_node)

    def write_config(self, node_names):
        if self.scale == 1.0:
            return node_names[self.src_node]
        return "Scale(%s, %s)" % (kaldi_str(self.scale), node_names[self.src_node])

    def get_node_dependencies(self, node_indexes=None):
        if node_indexes is None:
            node_indexes = set()
        _push(node_indexes, self.src_node)
        return node_indexes

    def get_scale_for_node(self, node_index):
        return self.scale if node_index == self.src_node else _INF


class OffsetForwardingDescriptor(ForwardingDescriptor):
    """``Offset(src, t[, x])``: the input at Index + offset."""

    __slots__ = ("src", "offset")

    def __init__(self, src, offset):
        self.src = src
        self.offset = Index(*offset)

    def _key(self):
        return (self.src, self.offset)

    def map_to_input(self, index):
        off = self.offset
        return self.src.map_to_input(Index(index[0] + off[0], index[1] + off[1],
                                           index[2] + off[2]))

    def dim(self, nnet):
        return self.src.dim(nnet)

    def modulus(self):
        return self.src.modulus()

    def write_config(self, node_names):
        text = "Offset(%s, %d" % (self.src.write_config(node_names), self.offset.t)
        if self.offset.x != 0:
            text += ", %d" % self.offset.x
        return text + ")"

    def get_node_dependencies(self, node_indexes=None):
        return self.src.get_node_dependencies(node_indexes)

    def get_scale_for_node(self, node_index):
        return self.src.get_scale_for_node(node_index)


class SwitchingForwardingDescriptor(ForwardingDescriptor):
    """``Switch(a, b, ...)``: source number (t mod the number of sources)."""

    __slots__ = ("srcs",)

    def __init__(self, srcs):
        self.srcs = tuple(srcs)
        if not self.srcs:
            raise DescriptorError("Switch() needs at least one argument")

    def _key(self):
        return self.srcs

    def map_to_input(self, index):
        # Python's % is the mathematical modulus Kaldi computes by hand.
        return self.srcs[index[1] % len(self.srcs)].map_to_input(index)

    def dim(self, nnet):
        return self.srcs[0].dim(nnet)

    def modulus(self):
        ans = len(self.srcs)
        for src in self.srcs:
            ans = lcm(ans, src.modulus())
        return ans

    def write_config(self, node_names):
        return "Switch(%s)" % ", ".join(s.write_config(node_names) for s in self.srcs)

    def get_node_dependencies(self, node_indexes=None):
        if node_indexes is None:
            node_indexes = set()
        for src in self.srcs:
            src.get_node_dependencies(node_indexes)
        return node_indexes

    def get_scale_for_node(self, node_index):
        ans = _INF
        for src in self.srcs:
            this_ans = src.get_scale_for_node(node_index)
            if this_ans != _INF:
                if ans != _INF and ans != this_ans:
                    raise DescriptorError(
                        "Invalid Descriptor encountered: for node-index %d, got two "
                        "different scales %s vs. %s" % (node_index, kaldi_str(this_ans),
                                                        kaldi_str(ans)))
                ans = this_ans
        return ans


class RoundingForwardingDescriptor(ForwardingDescriptor):
    """``Round(src, m)``: t rounded down to a multiple of m."""

    __slots__ = ("src", "t_modulus")

    def __init__(self, src, t_modulus):
        self.src = src
        self.t_modulus = int(t_modulus)

    def _key(self):
        return (self.src, self.t_modulus)

    def map_to_input(self, index):
        m = self.t_modulus
        if m < 1:
            raise DescriptorError("Round() with modulus %d cannot be evaluated "
                                  "(the modulus must be at least 1)" % m)
        return self.src.map_to_input(Index(index[0], index[1] - index[1] % m, index[2]))

    def dim(self, nnet):
        return self.src.dim(nnet)

    def modulus(self):
        return self.t_modulus

    def write_config(self, node_names):
        return "Round(%s, %d)" % (self.src.write_config(node_names), self.t_modulus)

    def get_node_dependencies(self, node_indexes=None):
        return self.src.get_node_dependencies(node_indexes)

    def get_scale_for_node(self, node_index):
        return self.src.get_scale_for_node(node_index)


class ReplaceIndexForwardingDescriptor(ForwardingDescriptor):
    """``ReplaceIndex(src, t|x, value)``: that coordinate set to ``value``."""

    __slots__ = ("src", "variable", "value")

    # Kaldi's VariableName enum, for code that wants the numbers.
    kN, kT, kX = 0, 1, 2

    def __init__(self, src, variable, value):
        if variable not in ("t", "x"):
            raise DescriptorError("ReplaceIndex: expected variable 't' or 'x', got %r"
                                  % (variable,))
        self.src = src
        self.variable = variable
        self.value = int(value)

    def _key(self):
        return (self.src, self.variable, self.value)

    def map_to_input(self, index):
        if self.variable == "t":
            index = Index(index[0], self.value, index[2])
        else:
            index = Index(index[0], index[1], self.value)
        return self.src.map_to_input(index)

    def dim(self, nnet):
        return self.src.dim(nnet)

    def modulus(self):
        return self.src.modulus()

    def write_config(self, node_names):
        return "ReplaceIndex(%s, %s, %d)" % (self.src.write_config(node_names),
                                             self.variable, self.value)

    def get_node_dependencies(self, node_indexes=None):
        return self.src.get_node_dependencies(node_indexes)

    def get_scale_for_node(self, node_index):
        return self.src.get_scale_for_node(node_index)


# ---------------------------------------------------------------------------
# SumDescriptor: one part of an Append.
# ---------------------------------------------------------------------------

class SumDescriptor(_Expression):
    """Base class of the parts of a Descriptor."""

    __slots__ = ()

    def get_dependencies(self, index, dependencies=None):
        """Appends every Cindex output ``index`` may depend on to
        ``dependencies`` (a new list if None) and returns it."""
        raise NotImplementedError

    def is_computable(self, index, cindex_is_computable, used_inputs=None):
        """Whether output ``index`` can be computed when ``cindex_is_computable``
        (a callable Cindex -> bool) says which inputs exist; if so and
        ``used_inputs`` is a list, appends the inputs actually used."""
        raise NotImplementedError

    def dim(self, nnet):
        raise NotImplementedError

    def modulus(self):
        raise NotImplementedError

    def get_node_dependencies(self, node_indexes=None):
        raise NotImplementedError

    def get_scale_for_node(self, node_index):
        """The scale this part applies to ``node_index`` (inf if absent); for
        ``node_index < 0``, the constant term (Const() value, 0 if none)."""
        raise NotImplementedError


class _WrappingSumDescriptor(SumDescriptor):
    """A part made of one expression ``src`` (whose dim, modulus and nodes
    it has)."""

    __slots__ = ("src",)

    def __init__(self, src):
        self.src = src

    def _key(self):
        return (self.src,)

    def dim(self, nnet):
        return self.src.dim(nnet)

    def modulus(self):
        return self.src.modulus()

    def get_node_dependencies(self, node_indexes=None):
        return self.src.get_node_dependencies(node_indexes)


class SimpleSumDescriptor(_WrappingSumDescriptor):
    """A part that is a single ForwardingDescriptor."""

    __slots__ = ()

    def get_dependencies(self, index, dependencies=None):
        if dependencies is None:
            dependencies = []
        dependencies.append(self.src.map_to_input(index))
        return dependencies

    def is_computable(self, index, cindex_is_computable, used_inputs=None):
        c = self.src.map_to_input(index)
        present = bool(cindex_is_computable(c))
        if present and used_inputs is not None:
            used_inputs.append(c)
        return present

    def write_config(self, node_names):
        return self.src.write_config(node_names)

    def get_scale_for_node(self, node_index):
        if node_index >= 0:
            return self.src.get_scale_for_node(node_index)
        return 0.0


class OptionalSumDescriptor(_WrappingSumDescriptor):
    """``IfDefined(src)``: src where computable, zero elsewhere (always computable)."""

    __slots__ = ()

    def get_dependencies(self, index, dependencies=None):
        return self.src.get_dependencies(index, dependencies)

    def is_computable(self, index, cindex_is_computable, used_inputs=None):
        if used_inputs is not None:
            self.src.is_computable(index, cindex_is_computable, used_inputs)
        return True

    def write_config(self, node_names):
        return "IfDefined(%s)" % self.src.write_config(node_names)

    def get_scale_for_node(self, node_index):
        ans = self.src.get_scale_for_node(node_index)
        if node_index < 0 and ans != 0.0:
            raise DescriptorError("Illegal combination of IfDefined() expression and "
                                  "Const() expression encountered.")
        return ans


class ConstantSumDescriptor(SumDescriptor):
    """``Const(value, dim)``: a constant vector, depends on nothing."""

    __slots__ = ("value", "dim_")

    def __init__(self, value, dim):
        value = f32(value)
        if dim <= 0 or value - value != 0.0:
            raise DescriptorError("Const(%s, %d): the dimension must be positive and "
                                  "the value finite" % (kaldi_str(value), dim))
        self.value = value
        self.dim_ = int(dim)

    def _key(self):
        return (self.value, self.dim_)

    def get_dependencies(self, index, dependencies=None):
        return [] if dependencies is None else dependencies

    def is_computable(self, index, cindex_is_computable, used_inputs=None):
        return True

    def dim(self, nnet=None):
        return self.dim_

    def modulus(self):
        return 1

    def write_config(self, node_names):
        return "Const(%s, %d)" % (kaldi_str(self.value), self.dim_)

    def get_node_dependencies(self, node_indexes=None):
        return set() if node_indexes is None else node_indexes

    def get_scale_for_node(self, node_index):
        return self.value if node_index < 0 else _INF


class BinarySumDescriptor(SumDescriptor):
    """``Sum(src1, src2)`` (both needed) or ``Failover(src1, src2)`` (src1
    where computable, else src2)."""

    __slots__ = ("op", "src1", "src2")

    def __init__(self, op, src1, src2):
        if op not in (kSumOperation, kFailoverOperation):
            raise ValueError("bad BinarySumDescriptor operation %r" % (op,))
        self.op = op
        self.src1 = src1
        self.src2 = src2

    def _key(self):
        return (self.op, self.src1, self.src2)

    def get_dependencies(self, index, dependencies=None):
        dependencies = self.src1.get_dependencies(index, dependencies)
        return self.src2.get_dependencies(index, dependencies)

    def is_computable(self, index, cindex_is_computable, used_inputs=None):
        want = used_inputs is not None
        in1 = [] if want else None
        in2 = [] if want else None
        ok1 = self.src1.is_computable(index, cindex_is_computable, in1)
        ok2 = self.src2.is_computable(index, cindex_is_computable, in2)
        if self.op == kSumOperation:
            if ok1 and ok2:
                if want:
                    used_inputs.extend(in1)
                    used_inputs.extend(in2)
                return True
            return False
        if ok1:
            if want:
                used_inputs.extend(in1)
            return True
        if ok2:
            if want:
                used_inputs.extend(in2)
            return True
        return False

    def dim(self, nnet):
        dim1 = self.src1.dim(nnet)
        dim2 = self.src2.dim(nnet)
        if dim1 != dim2:
            raise DescriptorError(
                "Neural net contains %s expression with inconsistent dimension: %d vs. %d"
                % ("Sum" if self.op == kSumOperation else "Failover", dim1, dim2))
        return dim1

    def modulus(self):
        return lcm(self.src1.modulus(), self.src2.modulus())

    def write_config(self, node_names):
        return "%s(%s, %s)" % ("Sum" if self.op == kSumOperation else "Failover",
                               self.src1.write_config(node_names),
                               self.src2.write_config(node_names))

    def get_node_dependencies(self, node_indexes=None):
        node_indexes = self.src1.get_node_dependencies(node_indexes)
        return self.src2.get_node_dependencies(node_indexes)

    def get_scale_for_node(self, node_index):
        ans1 = self.src1.get_scale_for_node(node_index)
        ans2 = self.src2.get_scale_for_node(node_index)
        valid1 = ans1 - ans1 == 0
        valid2 = ans2 - ans2 == 0
        if node_index < 0:
            if not (valid1 and valid2):
                raise DescriptorError("invalid constant term in %s expression"
                                      % ("Sum" if self.op == kSumOperation else "Failover"))
            if self.op == kSumOperation:
                return f32(ans1 + ans2)
            if ans1 != ans2:
                raise DescriptorError("Illegal combination of Failover operation with "
                                      "Const() expression encountered in Descriptor (this "
                                      "is not supported).")
        if valid1 and valid2 and ans1 != ans2:
            raise DescriptorError(
                "Inconsistent value for sum descriptor: for node %d, it can have scales "
                "%s vs. %s (you have used unsupported combinations of descriptors)."
                % (node_index, kaldi_str(ans1), kaldi_str(ans2)))
        return ans1 if not valid2 else ans2


# ---------------------------------------------------------------------------
# Descriptor: Append of parts.
# ---------------------------------------------------------------------------

class Descriptor:
    """A node's input: the concatenation (Append) of ``parts``."""

    __slots__ = ("parts",)

    def __init__(self, parts):
        self.parts = list(parts)

    def num_parts(self):
        return len(self.parts)

    def part(self, i):
        return self.parts[i]

    def dim(self, nnet):
        dim = 0
        for part in self.parts:
            dim += part.dim(nnet)
        if dim <= 0:
            raise DescriptorError("Descriptor has non-positive dimension %d" % dim)
        return dim

    def modulus(self):
        ans = 1
        for part in self.parts:
            ans = lcm(ans, part.modulus())
        return ans

    def get_dependencies(self, index):
        """Every Cindex output ``index`` may depend on (not unique, not sorted)."""
        dependencies = []
        for part in self.parts:
            part.get_dependencies(index, dependencies)
        return dependencies

    def is_computable(self, index, cindex_is_computable, used_inputs=None):
        """Whether every part is computable; if ``used_inputs`` is a list it is
        cleared and, on success, filled with the inputs used (Kaldi's
        Descriptor::IsComputable writes rather than appends)."""
        if used_inputs is not None:
            del used_inputs[:]
        for part in self.parts:
            if not part.is_computable(index, cindex_is_computable, used_inputs):
                if used_inputs is not None:
                    del used_inputs[:]
                return False
        return True

    def get_node_dependencies(self, node_indexes=None):
        """The nodes this descriptor may read from, added to ``node_indexes``
        (a list or set; a new set if None), which is returned."""
        if node_indexes is None:
            node_indexes = set()
        for part in self.parts:
            part.get_node_dependencies(node_indexes)
        return node_indexes

    def write_config(self, node_names):
        """Kaldi's printed form (one part: the part itself; else Append(...))."""
        if len(self.parts) == 1:
            return self.parts[0].write_config(node_names)
        return "Append(%s)" % ", ".join(p.write_config(node_names) for p in self.parts)

    def copy(self):
        return Descriptor(self.parts)

    def __repr__(self):
        return "Descriptor(%s)" % self.write_config(_IndexNames())

    def __eq__(self, other):
        return isinstance(other, Descriptor) and self.parts == other.parts

    def __hash__(self):
        return hash(tuple(self.parts))
