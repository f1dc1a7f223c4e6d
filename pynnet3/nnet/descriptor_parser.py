"""Parsing Descriptors (Kaldi's DescriptorTokenize and GeneralDescriptor):
config text such as ``Append(Offset(input, -1), Sum(a, Scale(0.5, b)))`` into
the normalized :class:`~pynnet3.nnet.descriptor.Descriptor` (see that module
for the types and the guarantees of parsing, normalizing and printing).
"""

import re

import numpy as np

from ..common.config_line import is_valid_name
from ..common.floats import f32
from ..common.index import Index
from ..errors import DescriptorError
from .descriptor import (BinarySumDescriptor, ConstantSumDescriptor, Descriptor,
                         OffsetForwardingDescriptor, OptionalSumDescriptor,
                         ReplaceIndexForwardingDescriptor, RoundingForwardingDescriptor,
                         SimpleForwardingDescriptor, SimpleSumDescriptor,
                         SwitchingForwardingDescriptor, kFailoverOperation, kSumOperation)

__all__ = ["parse_descriptor", "descriptor_name_lookup", "tokenize_descriptor"]

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


def _read_real(toks, name, expected):
    """The float32 value of the next token of a ``name(...)`` expression
    (consumed); DescriptorError saying ``expected`` when it is not a real
    number."""
    alpha = _convert_real(toks.peek())
    if alpha is None:
        raise DescriptorError("Parsing %s() in descriptor: expected %s, got: %s"
                              % (name, expected, toks.peek()))
    toks.advance()
    return alpha


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
            ans.alpha = _read_real(toks, "Scale", "floating-point scale")
            toks.expect(",", "Scale")
            ans.children.append(_General.parse(node_names, toks))
            toks.expect(")", "Scale")
        else:  # kConst
            ans.alpha = _read_real(toks, "Const", "floating-point value")
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
                desc.alpha = f32(np.float32(desc.alpha) * np.float32(child.alpha))
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
