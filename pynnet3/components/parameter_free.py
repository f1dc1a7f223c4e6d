"""Small parameter-free simple components.

PnormComponent (group 2-norms), SumGroupComponent (sums of column groups),
SumBlockComponent (scaled sum of equal blocks), ElementwiseProductComponent
(product of equal blocks), PermuteComponent (column permutation),
NoOpComponent (copy, scaled backprop), ClipGradientComponent (copy, clipped
backprop with Kaldi's optional self-repair) and DropoutComponent.

Each reads and writes Kaldi's exact token layout (including tokens only older
Kaldi versions wrote), prints Kaldi's Info() and Properties(), and computes
what Kaldi's Propagate/Backprop compute.
"""

import logging

import numpy as np

from . import kaldi_random
from ..common.floats import f32, kaldi_str
from ..errors import NnetError
from .affine import ReadSteps
from .base import Component, Field, P, read_layout
from .nonlinear import array_module_of, heaviside, invalid_initializer

_F32 = np.float32
_log = logging.getLogger(__name__)


def _read_group_or_defaults(comp, stream, fields):
    """Kaldi's "if the next token opens the group, read the whole group, else
    take the defaults": a group is all or nothing."""
    if stream.peek_token() == fields[0].token:
        read_layout(comp, stream, fields)
    else:
        for field in fields:
            setattr(comp, field.attr, field.default)


class _InputOutputDims(ReadSteps, Component):
    """A component defined by ``input-dim`` and ``output-dim`` alone (kept as
    ``in_dim``/``out_dim``, written as <InputDim> <OutputDim>); subclasses say
    which pairs are valid (``check`` after reading, ``config_problem`` for
    config values)."""

    layout = (Field("<InputDim>", "int", "in_dim"), Field("<OutputDim>", "int", "out_dim"))

    def __init__(self, input_dim=0, output_dim=0):
        self.in_dim = int(input_dim)
        self.out_dim = int(output_dim)

    def init_from_config(self, cfl):
        output_dim = _int_key(cfl, "output-dim")
        input_dim = _int_key(cfl, "input-dim") if output_dim is not None else None
        if input_dim is None or output_dim is None or output_dim <= 0:
            raise invalid_initializer(cfl, self.type_name)
        problem = self.config_problem(input_dim, output_dim)
        if problem:
            raise cfl.error("%s: %s" % (self.type_name, problem))
        self.in_dim, self.out_dim = input_dim, output_dim

    def config_problem(self, input_dim, output_dim):
        """What is wrong with config dims (output_dim > 0 already), or None."""
        raise NotImplementedError(self.type_name)

    def input_dim(self):
        return self.in_dim

    def output_dim(self):
        return self.out_dim


def _int_key(cfl, key):
    """An int config value that must be present (None when absent)."""
    return cfl.get_int(key)


class PnormComponent(_InputOutputDims):
    """Output j is the 2-norm of input group j (groups of input-dim/output-dim
    consecutive columns). Config: ``input-dim``, ``output-dim``."""

    type_name = "PnormComponent"

    def config_problem(self, input_dim, output_dim):
        if input_dim <= 0 or input_dim % output_dim != 0:
            return "input-dim=%d must be a positive multiple of output-dim=%d" % (
                input_dim, output_dim)
        return None

    def properties(self):
        return int(P.kSimpleComponent | P.kBackpropNeedsInput | P.kBackpropNeedsOutput)

    def check(self):
        if self.in_dim <= 0 or self.out_dim <= 0 or self.in_dim % self.out_dim != 0:
            return "bad dims %d -> %d" % (self.in_dim, self.out_dim)
        return None

    def propagate(self, indexes, in_value, out):
        xp = array_module_of(in_value)
        groups = in_value.reshape(in_value.shape[0], self.out_dim, -1)
        out[...] = xp.sqrt((groups * groups).sum(axis=2, dtype=xp.float32))
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi's GroupPnorm with p = 2 (VectorBase::Norm): a float sum from
        # 0 of x * x in order, then sqrtf.
        groups = in_value.reshape(in_value.shape[0], self.out_dim, -1)
        total = np.zeros(groups.shape[:2], np.float32)
        for k in range(groups.shape[2]):
            total = total + groups[:, :, k] * groups[:, :, k]
        out[...] = np.sqrt(total)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module_of(in_value)
        rows = in_value.shape[0]
        group = self.in_dim // self.out_dim
        x = in_value.reshape(rows, self.out_dim, group)
        y = out_value[:, :, None]
        # d|x|/dx = x / |x|, and 0 for an all-zero group
        safe = xp.where(y == 0, _F32(1.0), y)
        d = xp.where(y == 0, _F32(0.0), x / safe) * out_deriv[:, :, None]
        in_deriv[...] = d.reshape(rows, self.in_dim)


class SumGroupComponent(Component):
    """Output i is the sum of input columns in group i (consecutive groups of
    the given ``sizes``, or input-dim/output-dim equal groups)."""

    type_name = "SumGroupComponent"

    def __init__(self, sizes=None):
        if sizes is not None:
            self._init_sizes(list(sizes))

    def _init_sizes(self, sizes):
        self.sizes = [int(s) for s in sizes]
        self.in_dim = sum(self.sizes)
        self.out_dim = len(self.sizes)
        self.reverse_indexes = np.repeat(np.arange(self.out_dim), self.sizes).astype(np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)

    def init_from_config(self, cfl):
        sizes = cfl.get_int_list("sizes")
        if sizes is not None:
            if not sizes or any(s <= 0 for s in sizes):
                raise invalid_initializer(cfl, self.type_name)
            self._init_sizes(sizes)
            return
        input_dim = _int_key(cfl, "input-dim")
        output_dim = _int_key(cfl, "output-dim") if input_dim is not None else None
        if input_dim is None or output_dim is None:
            raise invalid_initializer(cfl, self.type_name)
        if output_dim <= 0 or input_dim <= 0 or input_dim % output_dim != 0:
            raise cfl.error("SumGroupComponent: input-dim=%d must be a positive multiple of "
                            "output-dim=%d" % (input_dim, output_dim))
        self._init_sizes([input_dim // output_dim] * output_dim)

    def input_dim(self):
        return self.in_dim

    def output_dim(self):
        return self.out_dim

    def properties(self):
        return int(P.kSimpleComponent)

    def read_body(self, stream):
        stream.expect_token("<Sizes>")
        sizes = stream.read_int_vector()
        start = stream.pos
        token = stream.read_token()
        # Kaldi accepts a repeated opening tag here (an old writer's bug)
        if token not in ("<SumGroupComponent>", "</SumGroupComponent>"):
            raise stream.error("expected </SumGroupComponent>, got '%s'" % token, start)
        if not sizes or any(s <= 0 for s in sizes):
            raise stream.error("SumGroupComponent: bad <Sizes> %s" % sizes, start)
        self._init_sizes(sizes)

    def write_body(self, stream):
        stream.write_token("<Sizes>")
        stream.write_int_vector(self.sizes)

    def propagate(self, indexes, in_value, out):
        xp = array_module_of(in_value)
        if len(set(self.sizes)) == 1:
            out[...] = in_value.reshape(in_value.shape[0], self.out_dim, -1).sum(
                axis=2, dtype=xp.float32)
        else:
            for i, (start, size) in enumerate(zip(self.starts.tolist(), self.sizes)):
                out[:, i] = in_value[:, start:start + size].sum(axis=1, dtype=xp.float32)
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi's SumColumnRanges on the CPU: a float sum from 0, in order.
        for i, (start, size) in enumerate(zip(self.starts.tolist(), self.sizes)):
            total = np.zeros(in_value.shape[0], np.float32)
            for col in range(start, start + size):
                total = total + in_value[:, col]
            out[:, i] = total
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module_of(out_deriv)
        in_deriv[...] = out_deriv[:, xp.asarray(self.reverse_indexes)]


class SumBlockComponent(ReadSteps, Component):
    """out += scale * (sum of the input-dim/output-dim consecutive blocks of
    width output-dim). Config: ``input-dim``, ``output-dim``, ``scale``
    (default 1)."""

    type_name = "SumBlockComponent"
    layout = (
        Field("<InputDim>", "int", "in_dim"),
        Field("<OutputDim>", "int", "out_dim"),
        Field("<Scale>", "float", "scale_value"),
    )

    def __init__(self, input_dim=0, output_dim=0, scale=1.0):
        self.in_dim = int(input_dim)
        self.out_dim = int(output_dim)
        self.scale_value = f32(scale)

    def init_from_config(self, cfl):
        self.scale_value = 1.0
        input_dim = _int_key(cfl, "input-dim")
        output_dim = _int_key(cfl, "output-dim") if input_dim is not None else None
        if input_dim is None or output_dim is None:
            raise cfl.error("input-dim and output-dim must both be provided.")
        if input_dim <= 0 or output_dim <= 0 or input_dim % output_dim != 0:
            raise cfl.error("Invalid values input-dim=%d output-dim=%d" % (input_dim, output_dim))
        self.in_dim, self.out_dim = input_dim, output_dim
        self.scale_value = f32(cfl.get_float("scale", 1.0))

    def check(self):
        if self.in_dim <= 0 or self.out_dim <= 0 or self.in_dim % self.out_dim != 0:
            return "bad dims %d -> %d" % (self.in_dim, self.out_dim)
        return None

    def input_dim(self):
        return self.in_dim

    def output_dim(self):
        return self.out_dim

    def properties(self):
        return int(P.kSimpleComponent | P.kPropagateAdds | P.kBackpropAdds)

    def info(self):
        return "%s, input-dim=%d, output-dim=%d, scale=%s" % (
            self.type_name, self.in_dim, self.out_dim, kaldi_str(self.scale_value))

    def propagate(self, indexes, in_value, out):
        xp = array_module_of(in_value)
        blocks = in_value.reshape(in_value.shape[0], -1, self.out_dim)
        out += _F32(self.scale_value) * blocks.sum(axis=1, dtype=xp.float32)
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi's AddMatBlocks: AddMat(scale, block) for each block in turn.
        d = self.out_dim
        for b in range(in_value.shape[1] // d):
            kaldi.axpy_rows(out, self.scale_value, in_value[:, b * d:(b + 1) * d])
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module_of(out_deriv)
        num_blocks = self.in_dim // self.out_dim
        in_deriv += xp.tile(_F32(self.scale_value) * out_deriv, (1, num_blocks))


class ElementwiseProductComponent(_InputOutputDims):
    """Output is the elementwise product of the input-dim/output-dim
    consecutive input blocks of width output-dim."""

    type_name = "ElementwiseProductComponent"

    # Kaldi's propagate is copies and one rounding per element: so is ours.
    kaldi_exact = True

    def config_problem(self, input_dim, output_dim):
        if not (input_dim > output_dim and input_dim % output_dim == 0):
            return "input-dim=%d must be a multiple (> 1) of output-dim=%d" % (
                input_dim, output_dim)
        return None

    def properties(self):
        return int(P.kSimpleComponent | P.kBackpropNeedsInput)

    def check(self):
        if self.out_dim <= 0 or self.in_dim <= self.out_dim or self.in_dim % self.out_dim != 0:
            return "bad dims %d -> %d" % (self.in_dim, self.out_dim)
        return None

    def _parts(self, in_value):
        d = self.out_dim
        return [in_value[:, i * d:(i + 1) * d] for i in range(self.in_dim // d)]

    def propagate(self, indexes, in_value, out):
        parts = self._parts(in_value)
        product = parts[0].copy()
        for part in parts[1:]:
            product *= part
        out[...] = product
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        parts = self._parts(in_value)
        d = self.out_dim
        derivs = []
        for i in range(len(parts)):
            deriv = out_deriv.copy()
            for j, part in enumerate(parts):
                if j != i:
                    deriv *= part
            derivs.append(deriv)
        for i, deriv in enumerate(derivs):
            in_deriv[:, i * d:(i + 1) * d] = deriv


class PermuteComponent(Component):
    """Output column i is input column ``column_map[i]``. Config:
    ``column-map`` (comma-separated permutation of 0..dim-1)."""

    type_name = "PermuteComponent"

    # Kaldi's propagate is copies and one rounding per element: so is ours.
    kaldi_exact = True

    def __init__(self, column_map=None):
        if column_map is not None:
            self._init_map(list(column_map), None)

    def _init_map(self, column_map, fail):
        """Sets the map and its inverse; ``fail(msg)`` makes the error."""
        dim = len(column_map)
        if dim == 0:
            raise fail("PermuteComponent: empty column map")
        reverse = [-1] * dim
        for i, c in enumerate(column_map):
            if not 0 <= c < dim or reverse[c] != -1:
                raise fail("Column map does not represent a permutation.")
            reverse[c] = i
        self.column_map = [int(c) for c in column_map]
        self.reverse_column_map = reverse
        self._map = np.asarray(self.column_map, dtype=np.int64)
        self._reverse = np.asarray(reverse, dtype=np.int64)

    def init_from_config(self, cfl):
        text = cfl.get_str("column-map")
        if text is None:
            raise invalid_initializer(cfl, self.type_name)
        try:
            column_map = [int(v) for v in text.split(",") if v != ""]
        except ValueError:
            raise cfl.error("Bad initializer in PermuteComponent: column-map=%s" % text) from None
        self._init_map(column_map, cfl.error)

    def input_dim(self):
        return len(self.column_map)

    def output_dim(self):
        return len(self.column_map)

    def properties(self):
        return int(P.kSimpleComponent)

    def info(self):
        shown = "".join("%d " % c for c in self.column_map[:5])
        more = "... " if len(self.column_map) > 5 else ""
        return "%s, dim=%d , column-map=[ %s%s]" % (self.type_name, len(self.column_map),
                                                   shown, more)

    def read_body(self, stream):
        stream.expect_token("<ColumnMap>")
        start = stream.pos
        if stream.binary and stream.data[stream.pos:stream.pos + 1] == b"F":
            # old writers stored the map as a float vector; Kaldi rounds each
            # entry and forces the last to dim-1 (a workaround for their bug)
            floats = stream.read_vector()
            column_map = [int(v + 0.5) for v in floats.tolist()]
            if column_map:
                column_map[-1] = len(column_map) - 1
        else:
            column_map = stream.read_int_vector()
        stream.expect_token("</PermuteComponent>")
        self._init_map(column_map, lambda msg: stream.error(msg, start))

    def write_body(self, stream):
        stream.write_token("<ColumnMap>")
        stream.write_int_vector(self.column_map)

    def propagate(self, indexes, in_value, out):
        xp = array_module_of(in_value)
        out[...] = in_value[:, xp.asarray(self._map)]
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module_of(out_deriv)
        in_deriv[...] = out_deriv[:, xp.asarray(self._reverse)]


class NoOpComponent(Component):
    """Copies its input; backprop multiplies by ``backprop-scale`` (default 1)."""

    type_name = "NoOpComponent"

    # Kaldi's propagate is copies and one rounding per element: so is ours.
    kaldi_exact = True
    layout = (Field("<Dim>", "int", "dim"), Field("<BackpropScale>", "float", "backprop_scale"))

    def __init__(self, dim=0, backprop_scale=1.0):
        self.dim = int(dim)
        self.backprop_scale = f32(backprop_scale)

    def init_from_config(self, cfl):
        self.backprop_scale = f32(cfl.get_float("backprop-scale", 1.0))
        dim = cfl.get_int("dim")
        if dim is None or dim <= 0:
            raise invalid_initializer(cfl, self.type_name)
        self.dim = dim

    def input_dim(self):
        return self.dim

    def output_dim(self):
        return self.dim

    def properties(self):
        return int(P.kSimpleComponent | P.kPropagateInPlace | P.kBackpropInPlace)

    def info(self):
        s = "%s, dim=%d" % (self.type_name, self.dim)
        if self.backprop_scale != 1.0:
            s += ", backprop-scale=" + kaldi_str(self.backprop_scale)
        return s

    def read_body(self, stream):
        stream.expect_token("<Dim>")
        self.dim = stream.read_int32()
        if (stream.peek_token() or "").startswith("<V"):
            # the old format, from when NoOpComponent was a NonlinearComponent:
            # its statistics are read and dropped
            self.backprop_scale = 1.0
            stream.expect_token("<ValueAvg>")
            stream.read_vector()
            stream.expect_token("<DerivAvg>")
            stream.read_vector()
            stream.expect_token("<Count>")
            stream.read_float()
            if (stream.peek_token() or "").startswith("<O"):
                stream.expect_token("<OderivRms>")
                stream.read_vector()
                stream.expect_token("<OderivCount>")
                stream.read_float()
            start, token = stream.pos, stream.read_token()
            if token == "<NumDimsSelfRepaired>":
                stream.read_float()
                start, token = stream.pos, stream.read_token()
            if token == "<NumDimsProcessed>":
                stream.read_float()
                start, token = stream.pos, stream.read_token()
            if token != "</NoOpComponent>":
                raise stream.error("expected </NoOpComponent>, got '%s'" % token, start)
        else:
            stream.expect_token("<BackpropScale>")
            self.backprop_scale = stream.read_float()
            stream.expect_token("</NoOpComponent>")
        if self.dim <= 0:
            raise stream.error("NoOpComponent: bad dim %d" % self.dim)


    def propagate(self, indexes, in_value, out):
        out[...] = in_value
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        if self.backprop_scale != 1.0:
            in_deriv[...] = out_deriv * _F32(self.backprop_scale)
        else:
            in_deriv[...] = out_deriv


class ClipGradientComponent(Component):
    """Copies its input; in backprop clips each row's derivative norm
    (``norm-based-clipping=true``) or each element's magnitude to
    ``clipping-threshold`` (0 zeroes the derivative), keeping clipping counts;
    with a ``to_update`` it may add Kaldi's self-repair term (pulling inputs
    towards ``self-repair-target``) when the clipped proportion exceeds
    ``self-repair-clipped-proportion-threshold``.
    """

    type_name = "ClipGradientComponent"

    # Kaldi's propagate is copies and one rounding per element: so is ours.
    kaldi_exact = True
    _HEAD = (Field("<Dim>", "int", "dim"),
             Field("<ClippingThreshold>", "float", "clipping_threshold"),
             Field("<NormBasedClipping>", "bool", "norm_based_clipping"))
    _SELF_REPAIR = (Field("<SelfRepairClippedProportionThreshold>", "float",
                          "self_repair_clipped_proportion_threshold", default=1.0),
                    Field("<SelfRepairTarget>", "float", "self_repair_target", default=0.0),
                    Field("<SelfRepairScale>", "float", "self_repair_scale", default=0.0))
    _COUNTS = (Field("<NumElementsClipped>", "int", "num_clipped"),
               Field("<NumElementsProcessed>", "int", "count"))
    _REPAIR_COUNTS = (Field("<NumSelfRepaired>", "int", "num_self_repaired", default=0),
                      Field("<NumBackpropped>", "int", "num_backpropped", default=0))
    layout = _HEAD + _SELF_REPAIR + _COUNTS + _REPAIR_COUNTS

    def __init__(self, dim=0, clipping_threshold=-1.0, norm_based_clipping=False,
                 self_repair_clipped_proportion_threshold=1.0, self_repair_target=0.0,
                 self_repair_scale=0.0, num_clipped=0, count=0, num_self_repaired=0,
                 num_backpropped=0):
        self.dim = int(dim)
        self.clipping_threshold = f32(clipping_threshold)
        self.norm_based_clipping = bool(norm_based_clipping)
        self.self_repair_clipped_proportion_threshold = f32(
            self_repair_clipped_proportion_threshold)
        self.self_repair_target = f32(self_repair_target)
        self.self_repair_scale = f32(self_repair_scale)
        self.num_clipped = int(num_clipped)        # int32 in Kaldi
        self.count = int(count)                    # int32 in Kaldi
        self.num_self_repaired = int(num_self_repaired)
        self.num_backpropped = int(num_backpropped)
        self.debug_info = ""

    def init_from_config(self, cfl):
        dim = cfl.get_int("dim")
        clipping_threshold = f32(cfl.get_float("clipping-threshold", 15.0))
        norm_based_clipping = cfl.get_bool("norm-based-clipping", False)
        threshold = f32(cfl.get_float("self-repair-clipped-proportion-threshold", 0.01))
        target = f32(cfl.get_float("self-repair-target", 0.0))
        scale = f32(cfl.get_float("self-repair-scale", 1.0))
        if (dim is None or clipping_threshold < 0 or dim <= 0 or threshold < 0.0
                or target < 0.0 or scale < 0.0):
            raise invalid_initializer(cfl, self.type_name)
        self.__init__(dim, clipping_threshold, norm_based_clipping, threshold, target, scale)

    def input_dim(self):
        return self.dim

    def output_dim(self):
        return self.dim

    def properties(self):
        return int(P.kSimpleComponent | P.kPropagateInPlace | P.kBackpropInPlace
                   | P.kBackpropNeedsInput)

    def _clipped_proportion(self):
        # Kaldi: static_cast<BaseFloat>(num_clipped_) / count_, in float
        return f32(_F32(self.num_clipped) / _F32(self.count)) if self.count > 0 else 0.0

    def info(self):
        s = "%s, dim=%d, norm-based-clipping=%s, clipping-threshold=%s, clipped-proportion=%s" % (
            self.type_name, self.dim, kaldi_str(self.norm_based_clipping),
            kaldi_str(self.clipping_threshold), kaldi_str(self._clipped_proportion()))
        if self.self_repair_scale != 0.0:
            s += (", self-repair-clipped-proportion-threshold=%s, self-repair-target=%s, "
                  "self-repair-scale=%s" % (
                      kaldi_str(self.self_repair_clipped_proportion_threshold),
                      kaldi_str(self.self_repair_target), kaldi_str(self.self_repair_scale)))
        return s

    def read_body(self, stream):
        # Kaldi writes all of ``layout``; older versions wrote neither the
        # self-repair options nor their counts (each group is all or nothing).
        self.debug_info = ""
        read_layout(self, stream, self._HEAD)
        _read_group_or_defaults(self, stream, self._SELF_REPAIR)
        read_layout(self, stream, self._COUNTS)
        _read_group_or_defaults(self, stream, self._REPAIR_COUNTS)
        stream.expect_token("</ClipGradientComponent>")

    def propagate(self, indexes, in_value, out):
        out[...] = in_value
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module_of(out_deriv)
        to_update = to_update if isinstance(to_update, ClipGradientComponent) else None
        deriv = out_deriv.astype(xp.float32, copy=True)
        threshold = self.clipping_threshold
        if threshold > 0:
            if self.norm_based_clipping:
                # squared row norms over threshold^2, floored at 1
                with np.errstate(over="ignore"):  # infinite norms give zero scales
                    scales = (deriv * deriv).sum(axis=1, dtype=xp.float32) * \
                        _F32(threshold ** -2.0)
                num_not_scaled = int((scales < 1.0).sum())
                if num_not_scaled != scales.shape[0]:
                    scales = xp.maximum(scales, _F32(1.0)) ** _F32(-0.5)
                    deriv *= scales[:, None]
                    if to_update is not None:
                        to_update.num_clipped += scales.shape[0] - num_not_scaled
                if to_update is not None:
                    to_update.count += scales.shape[0]
            else:
                deriv = xp.clip(deriv, _F32(-threshold), _F32(threshold))
            if to_update is not None:
                to_update.num_backpropped += 1
                deriv = self._repair_gradients(debug_info, in_value, deriv, to_update)
        elif threshold == 0.0:
            deriv[...] = 0.0
        in_deriv[...] = deriv

    def _repair_gradients(self, debug_info, in_value, in_deriv, to_update):
        """Kaldi's RepairGradients: adds a term shrinking |input| towards the
        self-repair target, then rescales rows to keep the derivative's total
        norm (runs on about half the calls)."""
        if (self.self_repair_clipped_proportion_threshold >= 1.0
                or self.self_repair_scale == 0.0 or self.count == 0
                or kaldi_random.rand_uniform() > 0.5):
            return in_deriv
        clipped_proportion = self._clipped_proportion()
        if clipped_proportion <= self.self_repair_clipped_proportion_threshold:
            return in_deriv
        to_update.num_self_repaired += 1
        if to_update.debug_info == "":
            to_update.debug_info = debug_info
        if to_update.num_self_repaired == 1:
            _log.info("ClipGradientComponent(node_name=%s)'s self-repair was activated as "
                      "the first time at the %d-th call of Backprop() in this training job.",
                      debug_info, to_update.num_backpropped)
        xp = array_module_of(in_deriv)
        sign = heaviside(in_value) * _F32(2.0) - _F32(1.0)
        repair = xp.maximum(xp.abs(in_value) - _F32(self.self_repair_target), _F32(0.0)) * sign
        rows = in_deriv.shape[0]
        norm_sum = float(xp.sqrt((in_deriv * in_deriv).sum(axis=1, dtype=xp.float32)).sum())
        magnitude = f32(self.self_repair_scale * clipped_proportion * (norm_sum / rows))
        repair_sum = float(xp.sqrt((repair * repair).sum(axis=1, dtype=xp.float32)).sum())
        scale = magnitude / (repair_sum / rows) if repair_sum != 0.0 else 0.0
        in_deriv = in_deriv + _F32(-scale / 0.5) * repair
        repaired_sum = float(xp.sqrt((in_deriv * in_deriv).sum(axis=1, dtype=xp.float32)).sum())
        if repaired_sum != 0.0:
            in_deriv = in_deriv * _F32(norm_sum / repaired_sum)
        return in_deriv

    def zero_stats(self):
        self.count = 0
        self.num_clipped = 0
        self.num_self_repaired = 0
        self.num_backpropped = 0

    def scale(self, alpha):
        # int32 counters times a float, truncated as C++ assigns them back
        alpha = _F32(alpha)
        self.count = int(_F32(self.count) * alpha)
        self.num_clipped = int(_F32(self.num_clipped) * alpha)

    def add(self, alpha, other):
        if not isinstance(other, ClipGradientComponent):
            raise NnetError("cannot add a %s to a ClipGradientComponent" % other.type_name)
        alpha = _F32(alpha)
        self.count = int(_F32(self.count) + alpha * _F32(other.count))
        self.num_clipped = int(_F32(self.num_clipped) + alpha * _F32(other.num_clipped))


class DropoutComponent(Component):
    """Training mode: zeroes each element (or, with ``dropout-per-frame``,
    each row) with probability ``dropout-proportion``, no rescaling. Test
    mode: multiplies by (1 - dropout-proportion). Config: ``dim``,
    ``dropout-proportion`` (required), ``dropout-per-frame``, ``test-mode``.
    """

    type_name = "DropoutComponent"

    @property
    def kaldi_exact(self):
        """In test mode Kaldi copies and scales by 1 - p (one rounding), as
        propagate does; training mode draws other random numbers."""
        return bool(self.test_mode)
    layout = (
        Field("<Dim>", "int", "dim"),
        Field("<DropoutProportion>", "float", "dropout_proportion"),
        Field("<DropoutPerFrame>", "bool", "dropout_per_frame", optional=True, default=False),
        Field("<TestMode>", "bool", "test_mode", optional=True, default=False),
    )

    def __init__(self, dim=0, dropout_proportion=0.0, dropout_per_frame=False):
        self.dim = int(dim)
        self.dropout_proportion = f32(dropout_proportion)
        self.dropout_per_frame = bool(dropout_per_frame)
        self.test_mode = False

    def init_from_config(self, cfl):
        self.test_mode = False
        dim = cfl.get_int("dim")
        proportion = cfl.get_float("dropout-proportion") if dim is not None else None
        per_frame = cfl.get_bool("dropout-per-frame", False)
        self.test_mode = cfl.get_bool("test-mode", False)
        if dim is None or proportion is None or dim <= 0 or not 0.0 <= proportion <= 1.0:
            raise invalid_initializer(cfl, self.type_name)
        self.dim = dim
        self.dropout_proportion = f32(proportion)
        self.dropout_per_frame = per_frame

    def input_dim(self):
        return self.dim

    def output_dim(self):
        return self.dim

    def properties(self):
        return int(P.kBackpropInPlace | P.kSimpleComponent | P.kBackpropNeedsInput
                   | P.kBackpropNeedsOutput | P.kRandomComponent)

    def info(self):
        return "%s, dim=%d, dropout-proportion=%s, dropout-per-frame=%s" % (
            self.type_name, self.dim, kaldi_str(self.dropout_proportion),
            kaldi_str(self.dropout_per_frame))

    def set_test_mode(self, test_mode):
        """Kaldi's RandomComponent::SetTestMode."""
        self.test_mode = bool(test_mode)

    def set_dropout_proportion(self, proportion):
        """Kaldi's SetDropoutProportion (nnet3-copy's set-dropout-proportion)."""
        self.dropout_proportion = f32(proportion)

    def propagate(self, indexes, in_value, out):
        xp = array_module_of(in_value)
        p = self.dropout_proportion
        if not 0.0 <= p <= 1.0:
            raise NnetError("DropoutComponent: dropout-proportion %s outside [0, 1]"
                            % kaldi_str(p))
        if self.test_mode:
            out[...] = in_value * _F32(1.0 - p)
            return None
        rows = in_value.shape[0]
        if not self.dropout_per_frame:
            mask = heaviside(kaldi_random.uniform_matrix(xp, in_value.shape) - _F32(p))
        else:
            mask = heaviside(kaldi_random.uniform_matrix(xp, (rows, 1)) - _F32(p))
        out[...] = in_value * xp.asarray(mask)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module_of(out_deriv)
        # out/in recovers the mask (or the test-mode scale); where the input
        # was zero Kaldi passes the derivative through unchanged
        zero = in_value == 0
        ratio = out_value / xp.where(zero, _F32(1.0), in_value)
        in_deriv[...] = xp.where(zero, out_deriv, out_deriv * ratio)
