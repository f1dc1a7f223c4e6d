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
import re

import numpy as np

from ..errors import DescriptorError
from ..common.config_line import is_valid_name
from ..common.floats import kaldi_str
from ..common.index import Cindex, Index

__all__ = [
    "Descriptor", "ForwardingDescriptor", "SimpleForwardingDescriptor",
    "OffsetForwardingDescriptor", "SwitchingForwardingDescriptor",
    "RoundingForwardingDescriptor", "ReplaceIndexForwardingDescriptor",
    "SumDescriptor", "SimpleSumDescriptor", "BinarySumDescriptor",
    "OptionalSumDescriptor", "ConstantSumDescriptor", "kSumOperation",
    "kFailoverOperation", "parse_descriptor", "descriptor_name_lookup",
    "tokenize_descriptor", "name_matches_pattern",
]

_INF = float("inf")

# BinarySumDescriptor operations (Kaldi's BinarySumDescriptor::Operation).
kSumOperation = 0
kFailoverOperation = 1


def _f32(value):
    """``value`` rounded to float32 (Kaldi's BaseFloat), as a Python float."""
    return float(np.float32(value))


def _lcm(a, b):
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
        self.scale = _f32(scale)

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
            ans = _lcm(ans, src.modulus())
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
        value = _f32(value)
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
        return _lcm(self.src1.modulus(), self.src2.modulus())

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
                return _f32(ans1 + ans2)
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
            ans = _lcm(ans, part.modulus())
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


# ---------------------------------------------------------------------------
# Parsing (Kaldi's DescriptorTokenize and GeneralDescriptor).
# ---------------------------------------------------------------------------

_END = "end of input"
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_REAL_RE = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
_INF_NAN = {"INF", "+INF", "-INF", "INFINITY", "+INFINITY", "-INFINITY", "NAN", "+NAN",
            "-NAN", "1.#INF", "-1.#INF", "1.#QNAN", "-1.#QNAN"}


def _convert_real(text):
    """Kaldi's ConvertStringToReal<float>: the float32 value or None."""
    if _REAL_RE.match(text):
        value = float(text)
        f = np.float32(value) if abs(value) <= 3.5e38 else np.float32(np.inf)
        if np.isinf(f):
            return None  # the C++ stream fails on overflow
        return float(f)
    upper = text.upper()
    if upper in _INF_NAN:
        return float(upper.replace("1.#QNAN", "NAN").replace("1.#INF", "INF")
                     .replace("INFINITY", "INF"))
    return None


def _convert_int(text):
    """Kaldi's ConvertStringToInteger<int32>: the value or None."""
    if not _INT_RE.match(text):
        return None
    value = int(text)
    if not -2**31 <= value < 2**31:
        return None
    return value


def tokenize_descriptor(text):
    """Kaldi's DescriptorTokenize: '(' ')' ',' and words (names or numbers)."""
    tokens = []
    size = len(text)
    pos = 0
    while pos < size and text[pos] in " \t":
        pos += 1
    while pos < size:
        c = text[pos]
        if c in "(),":
            tokens.append(c)
            pos += 1
        else:
            end = pos
            while end < size and text[end] not in " \t(),":
                end += 1
            word = text[pos:end]
            if not is_valid_name(word) and _convert_real(word) is None:
                raise DescriptorError("Could not tokenize descriptor '%s' at '%s'"
                                      % (text.strip(), text[pos:].strip()))
            tokens.append(word)
            pos = end
        while pos < size and text[pos] in " \t":
            pos += 1
    return tokens


# GeneralDescriptor types, in Kaldi's order.
(kAppend, kSum, kFailover, kIfDefined, kOffset, kSwitch, kRound, kReplaceIndex, kScale,
 kConst, kNodeName) = range(11)

_RESERVED = {"Append": kAppend, "Sum": kSum, "Failover": kFailover,
             "IfDefined": kIfDefined, "Offset": kOffset, "Switch": kSwitch,
             "Scale": kScale, "Const": kConst, "Round": kRound,
             "ReplaceIndex": kReplaceIndex}
_TYPE_NAMES = {v: k for k, v in _RESERVED.items()}


class _Tokens:
    """A token list ending in Kaldi's "end of input" sentinel, with a cursor."""

    __slots__ = ("tokens", "pos")

    def __init__(self, tokens):
        self.tokens = list(tokens) + [_END]
        self.pos = 0

    def peek(self):
        return self.tokens[self.pos]

    def advance(self):
        self.pos += 1

    def context(self):
        """Kaldi's ParsingContext: the next few tokens, for error messages."""
        token = self.tokens[self.pos]
        if token == _END:
            return ""
        text = ", next part of line is: "
        i = self.pos
        while self.tokens[i] != _END and len(text) < 40:
            text = text + " " + self.tokens[i]
            i += 1
        if self.tokens[i] != _END:
            text += " ..."
        return text

    def expect(self, token, what):
        if self.peek() != token:
            raise DescriptorError("Expected '%s' while parsing %s, got %s%s"
                                  % (token, what, self.peek(), self.context()))
        self.pos += 1

    def read_int(self, what):
        value = _convert_int(self.peek())
        if value is None:
            raise DescriptorError("Expected integer while parsing %s, got '%s'%s"
                                  % (what, self.peek(), self.context()))
        self.pos += 1
        return value


class _General:
    """Kaldi's GeneralDescriptor: the loose parse tree, before normalization.

    ``value1``: node index (kNodeName), t offset (kOffset), modulus (kRound),
    1 for t / 2 for x (kReplaceIndex), dim (kConst); ``value2``: x offset
    (kOffset), the new value (kReplaceIndex); ``alpha``: scale (kScale) or
    value (kConst), a float32.
    """

    __slots__ = ("type", "value1", "value2", "alpha", "children")

    def __init__(self, type_, value1=-1, value2=-1, alpha=0.0, children=None):
        self.type = type_
        self.value1 = value1
        self.value2 = value2
        self.alpha = alpha
        self.children = children if children is not None else []

    def assign(self, other):
        """Makes this node a copy of ``other``'s fields (sharing its children)."""
        self.type = other.type
        self.value1 = other.value1
        self.value2 = other.value2
        self.alpha = other.alpha
        self.children = other.children

    # -- parsing ---------------------------------------------------------------
    @staticmethod
    def parse(node_names, toks):
        token = toks.peek()
        t = _RESERVED.get(token)
        if t is None:
            index = node_names.get(token)
            if index is None:
                raise DescriptorError("Expected a Descriptor, got instead %s" % token)
            toks.advance()
            return _General(kNodeName, index)
        toks.advance()
        toks.expect("(", "Descriptor")
        ans = _General(t)
        if t in (kAppend, kSum, kSwitch):
            ans.children.append(_General.parse(node_names, toks))
            while True:
                if toks.peek() == ")":
                    toks.advance()
                    break
                if toks.peek() == ",":
                    toks.advance()
                    ans.children.append(_General.parse(node_names, toks))
                else:
                    raise DescriptorError("Expected ',' or ')', got %s" % toks.peek())
        elif t == kFailover:
            ans.children.append(_General.parse(node_names, toks))
            toks.expect(",", "Failover")
            ans.children.append(_General.parse(node_names, toks))
            toks.expect(")", "Failover")
        elif t == kIfDefined:
            ans.children.append(_General.parse(node_names, toks))
            toks.expect(")", "IfDefined")
        elif t == kOffset:
            ans.children.append(_General.parse(node_names, toks))
            toks.expect(",", "Offset")
            ans.value1 = toks.read_int("Offset")
            if toks.peek() == ",":
                toks.advance()
                ans.value2 = toks.read_int("Offset")
            else:
                ans.value2 = 0
            toks.expect(")", "Offset")
        elif t == kRound:
            ans.children.append(_General.parse(node_names, toks))
            toks.expect(",", "Round")
            ans.value1 = toks.read_int("Round")
            toks.expect(")", "Round")
        elif t == kReplaceIndex:
            ans.children.append(_General.parse(node_names, toks))
            toks.expect(",", "ReplaceIndex")
            if toks.peek() == "t":
                ans.value1 = ReplaceIndexForwardingDescriptor.kT
            elif toks.peek() == "x":
                ans.value1 = ReplaceIndexForwardingDescriptor.kX
            else:
                raise DescriptorError("Expected 't' or 'x', got %s" % toks.peek())
            toks.advance()
            toks.expect(",", "ReplaceIndex")
            ans.value2 = toks.read_int("Replace")
            toks.expect(")", "ReplaceIndex")
        elif t == kScale:
            alpha = _convert_real(toks.peek())
            if alpha is None:
                raise DescriptorError("Parsing Scale() in descriptor: expected "
                                      "floating-point scale, got: %s" % toks.peek())
            ans.alpha = alpha
            toks.advance()
            toks.expect(",", "Scale")
            ans.children.append(_General.parse(node_names, toks))
            toks.expect(")", "Scale")
        else:  # kConst
            alpha = _convert_real(toks.peek())
            if alpha is None:
                raise DescriptorError("Parsing Const() in descriptor: expected "
                                      "floating-point value, got: %s" % toks.peek())
            ans.alpha = alpha
            toks.advance()
            toks.expect(",", "Const")
            dim = _convert_int(toks.peek())
            if dim is None or dim <= 0:
                raise DescriptorError("Parsing Const() in descriptor: expected "
                                      "nonnegative integer, got: %s" % toks.peek())
            ans.value1 = dim
            toks.advance()
            toks.expect(")", "Const")
        return ans

    # -- Append normalization (top level only) ------------------------------------
    def num_append_terms(self):
        if self.type in (kNodeName, kConst):
            return 1
        if self.type == kAppend:
            return sum(c.num_append_terms() for c in self.children)
        ans = self.children[0].num_append_terms()
        for c in self.children[1:]:
            n = c.num_append_terms()
            if n != ans:
                raise DescriptorError(
                    "the arguments of %s() are Append() expressions with different "
                    "numbers of terms (%d vs. %d), which cannot be normalized"
                    % (_TYPE_NAMES[self.type], ans, n))
        return ans

    def get_append_term(self, term):
        if self.type == kNodeName:
            return _General(kNodeName, self.value1)
        if self.type == kAppend:
            for c in self.children:
                n = c.num_append_terms()
                if term < n:
                    return c.get_append_term(term)
                term -= n
            raise DescriptorError("internal error getting Append() term")
        return _General(self.type, self.value1, self.value2, self.alpha,
                        [c.get_append_term(term) for c in self.children])

    def normalize_append(self):
        n = self.num_append_terms()
        if n == 1:
            return self.get_append_term(0)
        return _General(kAppend, children=[self.get_append_term(i) for i in range(n)])

    # -- other normalization ------------------------------------------------------
    @staticmethod
    def normalize(desc):
        """One pass of Kaldi's GeneralDescriptor::Normalize; True if changed."""
        changed = False
        t = desc.type
        fall_through = False
        if t == kOffset:
            child = desc.children[0]
            if child.type == kOffset:
                # Offset(Offset(x, a), b) -> Offset(x, a + b)
                desc.value1 += child.value1
                desc.value2 += child.value2
                desc.children[0] = child.children[0]
                changed = True
                fall_through = True
            elif desc.value1 == 0 and desc.value2 == 0:
                # Offset(x, 0) -> x
                desc.assign(child)
                changed = True
            else:
                fall_through = True
        if fall_through or t in (kSwitch, kRound, kReplaceIndex):
            child = desc.children[0]
            if child.type in (kSum, kFailover, kIfDefined):
                if len(desc.children) > 1:
                    raise DescriptorError("Sum(), Failover() or IfDefined() expression "
                                          "inside Switch(), we can't currently normalize "
                                          "this.")
                # Offset(Sum(x, y), 1) -> Sum(Offset(x, 1), Offset(y, 1)); note
                # the outer node keeps its own alpha, as Kaldi's does.
                new_children = [_General(desc.type, desc.value1, desc.value2, desc.alpha,
                                         [g]) for g in child.children]
                desc.type = child.type
                desc.value1 = child.value1
                desc.value2 = child.value2
                desc.children = new_children
                changed = True
        elif t == kSum:
            if len(desc.children) == 1:
                desc.assign(desc.children[0])
                changed = True
            elif len(desc.children) > 2:
                rest = _General(kSum, children=desc.children[1:])
                desc.children = [desc.children[0], rest]
                changed = True
        elif t == kScale:
            child = desc.children[0]
            if child.type in (kOffset, kReplaceIndex, kRound):
                # Scale(a, Offset(x, 1)) -> Offset(Scale(a, x), 1)
                desc.type, child.type = child.type, desc.type
                desc.alpha, child.alpha = child.alpha, desc.alpha
                desc.value1, child.value1 = child.value1, desc.value1
                desc.value2, child.value2 = child.value2, desc.value2
                changed = True
            elif child.type == kSum:
                desc.children = [_General(kScale, -1, -1, desc.alpha, [g])
                                 for g in child.children]
                desc.type = kSum
                desc.alpha = 0.0
                changed = True
            elif child.type == kScale:
                desc.alpha = _f32(np.float32(desc.alpha) * np.float32(child.alpha))
                desc.children[0] = child.children[0]
                changed = True
            elif child.type != kNodeName:
                raise DescriptorError("Unhandled case encountered when normalizing "
                                      "Descriptor; you can work around this by pushing "
                                      "Scale() inside other expressions.")
        # Kaldi short-circuits: once something changed, children wait for the
        # next pass (the caller repeats until nothing changes).
        for c in desc.children:
            changed = changed or _General.normalize(c)
        return changed

    # -- conversion -------------------------------------------------------------------
    def to_sum_descriptor(self):
        t = self.type
        if t == kAppend:
            raise DescriptorError("badly normalized descriptor (nested Append)")
        if t in (kSum, kFailover):
            if len(self.children) != 2:
                raise DescriptorError("badly normalized descriptor (%s with %d terms)"
                                      % (_TYPE_NAMES[t], len(self.children)))
            return BinarySumDescriptor(kSumOperation if t == kSum else kFailoverOperation,
                                       self.children[0].to_sum_descriptor(),
                                       self.children[1].to_sum_descriptor())
        if t == kIfDefined:
            return OptionalSumDescriptor(self.children[0].to_sum_descriptor())
        if t == kConst:
            return ConstantSumDescriptor(self.alpha, self.value1)
        return SimpleSumDescriptor(self.to_forwarding_descriptor())

    def to_forwarding_descriptor(self):
        t = self.type
        if t == kNodeName:
            return SimpleForwardingDescriptor(self.value1)
        if t == kOffset:
            return OffsetForwardingDescriptor(self.children[0].to_forwarding_descriptor(),
                                              Index(0, self.value1, self.value2))
        if t == kSwitch:
            return SwitchingForwardingDescriptor(
                [c.to_forwarding_descriptor() for c in self.children])
        if t == kRound:
            return RoundingForwardingDescriptor(self.children[0].to_forwarding_descriptor(),
                                                self.value1)
        if t == kReplaceIndex:
            return ReplaceIndexForwardingDescriptor(
                self.children[0].to_forwarding_descriptor(),
                "t" if self.value1 == ReplaceIndexForwardingDescriptor.kT else "x",
                self.value2)
        if t == kScale:
            if not (len(self.children) == 1 and self.children[0].type == kNodeName):
                raise DescriptorError("Invalid combination of Scale() expression and other "
                                      "expressions encountered in descriptor.")
            return SimpleForwardingDescriptor(self.children[0].value1, self.alpha)
        if t == kConst:
            raise DescriptorError("Error in Descriptor: Const() appeared too deep in the "
                                  "expression.")
        raise DescriptorError("Invalid descriptor type (failure in normalization?): %s() "
                              "cannot be moved out of this position (only the first "
                              "argument of Switch() is normalized, as in Kaldi)"
                              % _TYPE_NAMES.get(t, t))

    def to_descriptor(self):
        normalized = self.normalize_append()
        while _General.normalize(normalized):
            pass
        if normalized.type == kAppend:
            return Descriptor([c.to_sum_descriptor() for c in normalized.children])
        return Descriptor([normalized.to_sum_descriptor()])


def descriptor_name_lookup(node_names):
    """The name -> node index map :func:`parse_descriptor` resolves names
    with (the first of equal names wins). Build it once and pass it in place
    of the list when parsing many descriptors over the same nodes."""
    names = {}
    for i, name in enumerate(node_names):
        names.setdefault(name, i)
    return names


def parse_descriptor(text, node_names):
    """Parses descriptor ``text`` into a normalized :class:`Descriptor`.

    ``node_names`` is the list of names a descriptor may refer to, by node
    index, or the dict :func:`descriptor_name_lookup` made of that list;
    entries that must not be referred to (Kaldi uses "**" for descriptor
    nodes) never match a valid token. Raises DescriptorError.
    """
    tokens = tokenize_descriptor(text)
    names = node_names if isinstance(node_names, dict) else descriptor_name_lookup(node_names)
    toks = _Tokens(tokens)
    general = _General.parse(names, toks)
    if toks.peek() != _END:
        raise DescriptorError("Parsing Descriptor, expected end of input but got '%s'"
                              % toks.peek())
    return general.to_descriptor()


def name_matches_pattern(name, pattern):
    """Kaldi's NameMatchesPattern: ``*`` matches any sequence; nothing else is special."""
    regex = "".join(".*" if c == "*" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.DOTALL) is not None
