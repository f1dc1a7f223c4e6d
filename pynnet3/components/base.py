"""The Component interface, its properties, and declarative serialization.

A component type is a subclass of :class:`Component` with ``type_name`` set to
Kaldi's type name ("AffineComponent"); subclasses register themselves, so
``Component.new_of_type("AffineComponent")`` and reading a model find them.

Serialization is data: ``layout`` is the ordered list of :class:`Field` s a
component writes between its opening tag ``<TypeName>`` and closing tag
``</TypeName>``. Reading and writing are derived from it, in both modes, so one
table per type is checked against Kaldi instead of two hand-written functions.
A field may be *optional* (Kaldi writes it only when ``write_if`` holds; when
reading, a missing token leaves ``default``), may accept older spellings
(``aliases``), and may be read-only (``write=False``, for tokens only older Kaldi
versions wrote). Components whose format is not a flat token list override
:meth:`Component.read_body` / :meth:`Component.write_body`.

The compute interface mirrors Kaldi's, in snake_case (see the method docs).
Component math is written against the array module of its inputs
(``xp = array_module(in_value)``), so the same code runs on NumPy and CuPy.
"""

import copy

import numpy as np

from ..common.floats import kaldi_str
from ..errors import ConfigError, KaldiFormatError
from ..io.files import open_input, write_object


class ComponentProperty:
    """Kaldi's ComponentProperties bit flags (values as in Kaldi), as plain
    ints: each compilation asks every component for its properties, and
    combining enum.IntFlag members costs microseconds each."""

    kSimpleComponent = 0x001
    kUpdatableComponent = 0x002
    kPropagateInPlace = 0x004
    kPropagateAdds = 0x008
    kReordersIndexes = 0x010
    kBackpropAdds = 0x020
    kBackpropNeedsInput = 0x040
    kBackpropNeedsOutput = 0x080
    kBackpropInPlace = 0x100
    kStoresStats = 0x200
    kInputContiguous = 0x400
    kOutputContiguous = 0x800
    kUsesMemo = 0x1000
    kRandomComponent = 0x2000


P = ComponentProperty


def array_module(array):
    """``numpy`` or ``cupy``, whichever ``array`` belongs to."""
    module = type(array).__module__
    if module.startswith("cupy"):
        import cupy
        return cupy
    return np


def to_host(array):
    """A NumPy array of a CuPy array (a copy); anything else as it is."""
    if type(array).__module__.startswith("cupy"):
        return array.get()
    return array


class Field:
    """One entry of a component's on-disk layout.

    ``kind``: 'int', 'float', 'double', 'bool', 'vector' (float32 vector),
    'double_vector', 'matrix', 'double_matrix', 'int_vector', 'int_pair_vector' (a list of
    (a, b)), 'string' (a token value) or 'flag' (the token alone, present
    when the attribute is true: always optional, default False).
    Arrays are stored as float32 (float64 for the 'double_' kinds) NumPy arrays.
    """

    __slots__ = ("token", "kind", "attr", "optional", "default", "write_if", "aliases", "write")

    def __init__(self, token, kind, attr, optional=False, default=None, write_if=None,
                 aliases=(), write=True):
        if kind == "flag":
            optional, default = True, False
            if write_if is None:
                def write_if(obj):
                    return bool(getattr(obj, attr))
        self.token = token
        self.kind = kind
        self.attr = attr
        self.optional = optional
        self.default = default
        self.write_if = write_if
        self.aliases = tuple(aliases)
        self.write = write


# kind -> (InputStream method, OutputStream method) for a value after its token
_VALUE_IO = {
    "int": ("read_int32", "write_int32"),
    "float": ("read_float", "write_float"),
    "double": ("read_double", "write_double"),
    "bool": ("read_bool", "write_bool"),
    "vector": ("read_vector", "write_vector"),
    "double_vector": ("read_double_vector", "write_double_vector"),
    "matrix": ("read_matrix", "write_matrix"),
    "double_matrix": ("read_double_matrix", "write_double_matrix"),
    "int_vector": ("read_int_vector", "write_int_vector"),
    "int_pair_vector": ("read_int_pair_vector", "write_int_pair_vector"),
    "string": ("read_token", "write_token"),
}


def _value_io(kind):
    io = _VALUE_IO.get(kind)
    if io is None:
        raise ValueError("unknown field kind %r" % kind)
    return io


def read_value(stream, kind):
    """Reads one value of a layout ``kind`` from a stream ('flag': True, nothing read)."""
    if kind == "flag":
        return True
    return getattr(stream, _value_io(kind)[0])()


def write_value(stream, kind, value):
    """Writes one value of a layout ``kind`` to a stream ('flag': nothing)."""
    if kind == "flag":
        return
    if kind == "int":
        value = int(value)
    getattr(stream, _value_io(kind)[1])(value)


def read_layout(obj, stream, layout):
    """Reads ``layout``'s fields into ``obj`` (defaults for absent optional ones)."""
    for field in layout:
        token = stream.peek_token()
        if token == field.token or token in field.aliases:
            stream.read_token()
            setattr(obj, field.attr, read_value(stream, field.kind))
        elif field.optional:
            default = field.default
            setattr(obj, field.attr, default() if callable(default) else default)
        else:
            stream.expect_token(field.token)  # raises, naming what was found


def write_layout(obj, stream, layout):
    """Writes ``layout``'s fields of ``obj`` as Kaldi does."""
    for field in layout:
        if not field.write:
            continue
        if field.write_if is not None and not field.write_if(obj):
            continue
        stream.write_token(field.token)
        write_value(stream, field.kind, getattr(obj, field.attr))


class TaggedObject:
    """What components and precomputed indexes share: Kaldi's
    ``<TypeName> ... </TypeName>`` serialization around ``layout`` (or an
    overridden ``read_body``/``write_body``), and a registry of the subclasses
    by ``type_name`` (one registry per family, ``_registry``), which
    :meth:`read_new` reads through."""

    type_name = None          # Kaldi's Type(), e.g. "SigmoidComponent"
    layout = ()               # tuple of Field, between <Type> and </Type>
    _registry = None          # type_name -> class, set by each family's base
    _family = None            # the family's name in error messages
    _example = None           # a type_name of the family, for error messages

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("type_name"):
            cls._registry[cls.type_name] = cls

    @classmethod
    def read_new(cls, stream):
        """Kaldi's ReadNew: ``<TypeName>``, then that type's body (any type of
        the family, whichever class this is called on)."""
        start = stream.pos
        token = stream.read_token()
        if not (token.startswith("<") and token.endswith(">")) or token.startswith("</"):
            raise stream.error("expected a %s type token like <%s>, got '%s'"
                               % (cls._family, cls._example, token), start)
        type_name = token[1:-1]
        new = cls._registry.get(type_name)
        if new is None:
            raise stream.error("unknown %s type %s" % (cls._family, type_name), start)
        # Every Kaldi Read() of these families also takes the opening tag once
        # more (ExpectOneOrTwoTokens, ReadUpdatableCommon), so one repeat is
        # skipped here; a third copy fails there, as it does here.
        if stream.read_optional_token(token) and stream.peek_token() == token:
            raise stream.error("%s tag %s repeated more than twice" % (cls._family, token))
        obj = new.__new__(new)
        obj.read_body(stream)
        return obj

    def read_body(self, stream):
        """Reads everything after the opening tag, through the closing tag."""
        read_layout(self, stream, self.layout)
        stream.expect_token("</%s>" % self.type_name)
        self.after_read()

    def after_read(self):
        """Hook run after reading (derived state, consistency checks)."""

    def write_to(self, stream):
        stream.write_token("<%s>" % self.type_name)
        self.write_body(stream)
        stream.write_token("</%s>" % self.type_name)

    def write_body(self, stream):
        write_layout(self, stream, self.layout)


_REGISTRY = {}


class Component(TaggedObject):
    """Base of every nnet3 component (Kaldi's Component).

    Simple components (``kSimpleComponent``) map each input row to the output
    row of the same Index; the rest implement the index hooks
    (``get_input_indexes``, ``is_computable``, ``reorder_indexes``,
    ``precompute_indexes``).
    """

    _registry = _REGISTRY
    _family = "component"
    _example = "AffineComponent"

    # True where propagate sets every element of its output itself although
    # the component declares kPropagateAdds (Kaldi's StatisticsExtraction
    # zeroes its output first): the computer may then skip the zeroing the
    # compiler puts before it (see pynnet3.compute.plan).
    propagate_sets_whole_output = False

    # -- construction ---------------------------------------------------------
    @staticmethod
    def new_of_type(type_name):
        """A fresh, uninitialized component of Kaldi type ``type_name`` or None."""
        cls = _REGISTRY.get(type_name)
        return None if cls is None else cls.__new__(cls)

    @staticmethod
    def registered_types():
        return sorted(_REGISTRY)

    @staticmethod
    def from_config_line(cfl):
        """A component initialized from a ``component name=.. type=..`` line."""
        type_name = cfl.get_str("type")
        if type_name is None:
            raise cfl.error("no type= in component config line")
        cls = _REGISTRY.get(type_name)
        if cls is None:
            raise cfl.error("unknown component type '%s'" % type_name)
        comp = cls.__new__(cls)
        comp.init_from_config(cfl)
        cfl.check_all_used()
        return comp

    def init_from_config(self, cfl):
        """Kaldi's InitFromConfig: reads this type's keys from a ConfigLine
        (missing required keys and bad values raise ConfigError)."""
        raise NotImplementedError(self.type_name)

    # -- serialization --------------------------------------------------------
    @classmethod
    def read(cls, rxfilename):
        """Reads a lone component file (starts at the component's own token)."""
        stream = open_input(rxfilename)
        comp = Component.read_new(stream)
        if cls is not Component and not isinstance(comp, cls):
            raise KaldiFormatError("expected a %s, got a %s" % (cls.type_name, comp.type_name),
                                   rxfilename)
        return comp

    def write(self, wxfilename, binary=True):
        """Writes this component alone to a file, as Kaldi's WriteKaldiObject."""
        write_object(wxfilename, binary, self.write_to)

    # -- description ------------------------------------------------------------
    def properties(self):
        raise NotImplementedError(self.type_name)

    def input_dim(self):
        raise NotImplementedError(self.type_name)

    def output_dim(self):
        raise NotImplementedError(self.type_name)

    def info(self):
        """Kaldi's Info(): the line nnet3-info prints after 'component name=X type='."""
        return "%s, input-dim=%d, output-dim=%d" % (self.type_name, self.input_dim(),
                                                    self.output_dim())

    def is_simple(self):
        return bool(self.properties() & P.kSimpleComponent)

    def is_updatable(self):
        return bool(self.properties() & P.kUpdatableComponent)

    # -- index hooks (non-simple components override) ----------------------------
    def get_input_indexes(self, misc_info, output_index):
        """The input Indexes that may be used to compute ``output_index``."""
        return [output_index]

    def is_computable(self, misc_info, output_index, input_index_set, used_inputs=None):
        """Whether ``output_index`` is computable given ``input_index_set``
        (a callable Index -> bool); appends the inputs it would use to
        ``used_inputs`` when that is a list."""
        ok = input_index_set(output_index)
        if ok and used_inputs is not None:
            used_inputs.append(output_index)
        return ok

    def reorder_indexes(self, input_indexes, output_indexes):
        """May reorder (and pad with kNoTime-style blanks) the index lists."""
        return input_indexes, output_indexes

    def precompute_indexes(self, misc_info, input_indexes, output_indexes, need_backprop):
        """Index information propagate/backprop need (None for most)."""
        return None

    # -- computation ----------------------------------------------------------------
    def propagate(self, indexes, in_value, out):
        """Computes into ``out`` (adds if kPropagateAdds); returns a memo or None."""
        raise NotImplementedError(self.type_name)

    # Kaldi-exact arithmetic (pynnet3.compute.backend.KaldiExactBackend):
    # whether propagate_kaldi_exact gives Kaldi's CPU bits for this component
    # as it is configured (a property where that depends on its state).
    kaldi_exact = False

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        """What :meth:`propagate` computes, with Kaldi's CPU float32
        operations in Kaldi's order, done through ``kaldi`` (a
        :class:`pynnet3.numerics.kaldi_cpu.KaldiCpu`), so that the bits are
        Kaldi's when ``kaldi_exact`` is true. Components whose propagate
        already performs Kaldi's operations (copies, single roundings) keep
        this default, which runs propagate, and only set ``kaldi_exact``."""
        return self.propagate(indexes, in_value, out)

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        """Computes ``in_deriv`` (when not None; adds if kBackpropAdds) and, when
        ``to_update`` is not None, updates it (gradient or learning-rate step)."""
        raise NotImplementedError(self.type_name)

    def store_stats(self, in_value, out_value, memo):
        """Accumulates statistics (only for components with kStoresStats)."""

    def zero_stats(self):
        """Zeroes statistics stored by store_stats."""

    def delete_memo(self, memo):
        """Releases a memo (nothing to do in Python)."""

    # -- parameters (non-updatable components have none) -----------------------------
    def copy(self):
        return copy.deepcopy(self)

    def scale(self, alpha):
        """Scales parameters (and stats, as Kaldi's Scale does)."""

    def add(self, alpha, other):
        """Adds ``alpha`` times ``other``'s parameters."""

    def num_parameters(self):
        return 0

    def vectorize(self):
        """All parameters as one flat float32 vector, Kaldi's Vectorize order."""
        return np.zeros(0, dtype=np.float32)

    def unvectorize(self, params):
        if len(params) != 0:
            raise ValueError("%s has no parameters" % self.type_name)

    def dot_product(self, other):
        return 0.0

    def set_as_gradient(self):
        """Kaldi's SetAsGradient (updatable components)."""

    def free_parameters_check(self):
        """Hook for consistency checks after init/read."""


class InputFree:
    """The index hooks of a component whose output needs no input (Kaldi's
    ConstantComponent, DropoutMaskComponent): no input Indexes, and every
    output Index is computable."""

    def get_input_indexes(self, misc_info, output_index):
        return []

    def is_computable(self, misc_info, output_index, input_index_set, used_inputs=None):
        return True


class UpdatableComponent(Component):
    """Kaldi's UpdatableComponent: learning rate and the common header.

    Subclasses put ``UPDATABLE_COMMON`` first in their layout.
    """

    def __init__(self):
        # Kaldi's UpdatableComponent(): the header's defaults.
        self.learning_rate = 0.001
        self.learning_rate_factor = 1.0
        self.is_gradient = False
        self.max_change = 0.0
        self.l2_regularize = 0.0

    UPDATABLE_COMMON = (
        Field("<LearningRateFactor>", "float", "learning_rate_factor", optional=True,
              default=1.0, write_if=lambda c: c.learning_rate_factor != 1.0),
        Field("<IsGradient>", "bool", "is_gradient", optional=True, default=False,
              write_if=lambda c: c.is_gradient),
        Field("<MaxChange>", "float", "max_change", optional=True, default=0.0,
              write_if=lambda c: c.max_change > 0.0),
        Field("<L2Regularize>", "float", "l2_regularize", optional=True, default=0.0,
              write_if=lambda c: c.l2_regularize > 0.0),
        Field("<LearningRate>", "float", "learning_rate", optional=True, default=0.001),
    )

    def init_updatable_common(self, cfl):
        """Kaldi's InitLearningRatesFromConfig and friends: learning-rate,
        learning-rate-factor, max-change, l2-regularize."""
        self.learning_rate = float(np.float32(cfl.get_float("learning-rate", 0.001)))
        self.learning_rate_factor = float(np.float32(cfl.get_float("learning-rate-factor", 1.0)))
        self.max_change = float(np.float32(cfl.get_float("max-change", 0.0)))
        self.l2_regularize = float(np.float32(cfl.get_float("l2-regularize", 0.0)))
        self.is_gradient = False
        if self.learning_rate < 0.0 or self.learning_rate_factor < 0.0:
            raise cfl.error("learning-rate and learning-rate-factor must be >= 0")

    def updatable_info(self):
        """The prefix of Kaldi's UpdatableComponent::Info()."""
        s = "%s, input-dim=%d, output-dim=%d, learning-rate=%s" % (
            self.type_name, self.input_dim(), self.output_dim(), kaldi_str(self.learning_rate))
        if self.is_gradient:
            s += ", is-gradient=true"
        if self.l2_regularize != 0.0:
            s += ", l2-regularize=" + kaldi_str(self.l2_regularize)
        if self.learning_rate_factor != 1.0:
            s += ", learning-rate-factor=" + kaldi_str(self.learning_rate_factor)
        if self.max_change > 0.0:
            s += ", max-change=" + kaldi_str(self.max_change)
        return s

    def set_underlying_learning_rate(self, lrate):
        """Kaldi's SetUnderlyingLearningRate: lrate times the factor."""
        self.learning_rate = float(np.float32(lrate * self.learning_rate_factor))

    def set_actual_learning_rate(self, lrate):
        self.learning_rate = float(np.float32(lrate))

    def set_as_gradient(self):
        self.learning_rate = 1.0
        self.is_gradient = True

    def info(self):
        return self.updatable_info()


def check_dims(cfl, **dims):
    """Raises ConfigError naming the first key whose value is not positive."""
    for key, value in dims.items():
        if value is None or value <= 0:
            raise ConfigError("%s must be positive, got %s" % (key.replace("_", "-"), value),
                              cfl.source, cfl.line_number, cfl.whole_line)


_PRECOMPUTED_REGISTRY = {}


class PrecomputedIndexes(TaggedObject):
    """Base of Kaldi's ComponentPrecomputedIndexes: what a non-simple
    component computes once at compile time for one propagate/backprop.

    Serialized inside NnetComputation (``<TdnnComponentPrecomputedIndexes>`` ...
    ``</...>``) like a component: ``type_name`` and ``layout`` (or overridden
    ``read_body``/``write_body``). Subclasses register themselves.
    """

    _registry = _PRECOMPUTED_REGISTRY
    _family = "precomputed-indexes"
    _example = "TdnnComponentPrecomputedIndexes"
