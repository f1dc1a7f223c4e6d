"""Kaldi's CollapseModel: merge successive components for test time.

``collapse_model(nnet, config)`` does what Kaldi's ModelCollapser does
(nnet-utils.cc), in its order:

- it sweeps the nodes repeatedly (at most 10 sweeps; more is an error) until a
  sweep changes nothing. A component node is collapsed with the component
  feeding it when its input Descriptor reads a single component node ``foo``
  only, as ``foo``, ``Offset(foo, t)`` or an ``Append`` of such parts (all
  naming the same node; a ``Scale`` on ``foo`` is accepted as Kaldi accepts
  it), and when the two components form one of these pairs, tried in this
  order (each only if enabled in :class:`CollapseModelConfig`):

  1. ``collapse_dropout`` (off by default): DropoutComponent or
     GeneralDropoutComponent, then an Affine (or NaturalGradientAffine),
     Linear, Tdnn or TimeHeightConvolution component: the second component
     with its linear parameters scaled by ``1/(1-p)`` (DropoutComponent) or
     1 (GeneralDropoutComponent), named ``NAME.scaleS`` (S printed with 3
     significant digits). Like Kaldi, the scale is the inverse of what a
     test-mode DropoutComponent applies, so with p > 0 the output changes.
  2. ``collapse_batchnorm`` (off by default): BatchNormComponent (which must
     be in test mode), then an Affine, Linear (becomes an AffineComponent)
     or Tdnn component (given a bias if it had none): the batch-norm scale
     and offset are folded into the linear and bias parameters; named
     ``BATCHNORM.NAME``; an identity batch-norm keeps the second component.
  3. ``collapse_affine`` (on): FixedAffineComponent or Affine component that
     does not reduce the dimension, then an Affine component: one new
     AffineComponent (learning rate 0.001, other options at their defaults)
     named ``NAME1.NAME2``, block-diagonal in the first component when the
     Descriptor appends several time offsets of it.
  4. ``collapse_scale`` (on): an Affine component then a FixedScaleComponent
     of the same dimension: a copy of the affine component (same type and
     options) with scaled rows, named ``NAME1.NAME2``.

  A component of the wanted name that already exists is reused. The node
  keeps its name but takes the new component, and its Descriptor is the old
  one with ``foo`` replaced by ``foo``'s own input Descriptor (printed,
  substituted and re-parsed, so offsets are normalized as Kaldi does).
- then orphan nodes and orphan components are removed (Kaldi's
  RemoveOrphanNodes and RemoveOrphanComponents, with their log lines) and,
  when something changed, ``Added N components, removed M`` is logged.

Arithmetic: every new parameter is computed with the float32 operations
Kaldi performs, in the order Kaldi's BLAS performs them, so a collapsed model
written in text is Kaldi's, byte for byte: matrix products and
matrix-vector products go through :mod:`pynnet3.numerics.openblas` (the
oracle's OpenBLAS 0.3.21 with its Haswell kernels, with the thread count
OpenBLAS would have in this environment, since the summation order of a
product depends on it: Kaldi's tool run here with the same
OPENBLAS_NUM_THREADS collapses to the same bits; kaldi-ref's models were
collapsed with 2); element-wise scalings are single float32 roundings, as
in Kaldi.
"""

from dataclasses import dataclass
import logging

import numpy as np

from ..components.affine import AffineComponent, FixedAffineComponent, LinearComponent
from ..components.dropout import GeneralDropoutComponent
from ..components.normalize import BatchNormComponent
from ..components.parameter_free import DropoutComponent
from ..components.scale_offset import FixedScaleComponent
from ..components.tdnn import TdnnComponent
from ..components.time_height_convolution import TimeHeightConvolutionComponent
from ..errors import NnetError
from ..numerics.openblas import sgemm, sgemv_add
from ..numerics.openblas_plan import openblas_threads_from_environment
from .descriptor import OffsetForwardingDescriptor, SimpleForwardingDescriptor, SimpleSumDescriptor
from .descriptor_parser import parse_descriptor
from .nnet import remove_orphan_components, remove_orphan_nodes
from .node import kComponent, kDescriptor

logger = logging.getLogger("pynnet3")

_F32 = np.float32
_F64 = np.float64

# Kaldi's ModelCollapser gives up after this many sweeps.
_MAX_SWEEPS = 10


@dataclass(slots=True)
class CollapseModelConfig:
    """Kaldi's CollapseModelConfig (same defaults: only the affine and scale
    collapses are on)."""

    collapse_dropout: bool = False
    collapse_batchnorm: bool = False
    collapse_affine: bool = True
    collapse_scale: bool = True


def collapse_model(nnet, config=None, blas_threads=None):
    """Kaldi's CollapseModel: modifies ``nnet`` in place (see the module
    docstring for what is merged, the names given and the arithmetic).
    ``config`` defaults to ``CollapseModelConfig()``. Batch-norm components
    must be in test mode when ``collapse_batchnorm`` is set (NnetError
    otherwise). ``blas_threads``: the OpenBLAS thread count whose order the
    products follow (None: OpenBLAS's own count in this environment,
    OPENBLAS_NUM_THREADS and the like). Returns ``nnet``."""
    if blas_threads is None:
        blas_threads = openblas_threads_from_environment()
    _ModelCollapser(config or CollapseModelConfig(), nnet, blas_threads).collapse()
    return nnet


# ---------------------------------------------------------------------------
# The collapser
# ---------------------------------------------------------------------------

class _ModelCollapser:
    """Kaldi's ModelCollapser (see the module docstring)."""

    __slots__ = ("config", "nnet", "threads")

    def __init__(self, config, nnet, threads):
        self.config = config
        self.nnet = nnet
        self.threads = threads

    def collapse(self):
        nnet = self.nnet
        num_nodes = nnet.num_nodes()
        num_components1 = nnet.num_components()
        changed = True
        sweeps = 0
        while changed:
            changed = False
            for n in range(num_nodes):
                if self._optimize_node(n):
                    changed = True
            if sweeps >= _MAX_SWEEPS:
                raise NnetError("Something went wrong collapsing model: more than %d "
                                "passes over the nodes were needed" % _MAX_SWEEPS)
            sweeps += 1
        num_components2 = nnet.num_components()
        remove_orphan_nodes(nnet)
        remove_orphan_components(nnet)
        num_components3 = nnet.num_components()
        if num_components2 != num_components1 or num_components3 != num_components2:
            logger.info("Added %d components, removed %d",
                        num_components2 - num_components1, num_components2 - num_components3)

    # -- which nodes ------------------------------------------------------------------
    @staticmethod
    def _sum_descriptor_source(sum_desc):
        """The node a part reads when it is ``foo`` or ``Offset(foo, ...)``
        (Kaldi's SumDescriptorIsCollapsible), else -1."""
        if not isinstance(sum_desc, SimpleSumDescriptor):
            return -1
        fd = sum_desc.src
        if isinstance(fd, OffsetForwardingDescriptor):
            fd = fd.src
        if not isinstance(fd, SimpleForwardingDescriptor):
            return -1
        return fd.src_node

    def _descriptor_source(self, desc):
        """The single node every part of ``desc`` reads, or -1 (Kaldi's
        DescriptorIsCollapsible)."""
        ans = self._sum_descriptor_source(desc.part(0))
        for i in range(1, desc.num_parts()):
            if ans != -1 and self._sum_descriptor_source(desc.part(i)) != ans:
                ans = -1
        return ans

    def _replace_node_in_descriptor(self, src, node_to_replace, expr):
        """``src`` with node ``node_to_replace`` replaced by the expression
        ``expr``: printed with that node's name standing for ``expr``'s text,
        then parsed with the real names (which normalizes offsets)."""
        names = list(self.nnet.node_names)
        names[node_to_replace] = expr.write_config(self.nnet.node_names)
        return parse_descriptor(src.write_config(names), self.nnet.node_names)

    def _optimize_node(self, node_index):
        nnet = self.nnet
        descriptor_node = nnet.nodes[node_index]
        if descriptor_node.node_type != kDescriptor or node_index + 1 >= nnet.num_nodes():
            return False
        component_node = nnet.nodes[node_index + 1]
        if component_node.node_type != kComponent:
            return False
        input_node_index = self._descriptor_source(descriptor_node.descriptor)
        if input_node_index == -1:
            return False
        input_node = nnet.nodes[input_node_index]
        if input_node.node_type != kComponent:
            return False
        combined = self._collapse_components(input_node.component_index,
                                             component_node.component_index)
        if combined == -1:
            return False
        component_node.component_index = combined
        input_descriptor = nnet.nodes[input_node_index - 1].descriptor
        descriptor_node.descriptor = self._replace_node_in_descriptor(
            descriptor_node.descriptor, input_node_index, input_descriptor)
        return True

    # -- which pairs ------------------------------------------------------------------
    def _collapse_components(self, c1, c2):
        config = self.config
        for enabled, method in ((config.collapse_dropout, self._collapse_dropout),
                                (config.collapse_batchnorm, self._collapse_batchnorm),
                                (config.collapse_affine, self._collapse_affine),
                                (config.collapse_scale, self._collapse_scale)):
            if enabled:
                ans = method(c1, c2)
                if ans != -1:
                    return ans
        return -1

    def _collapse_dropout(self, c1, c2):
        comp1 = self.nnet.get_component(c1)
        if isinstance(comp1, DropoutComponent):
            # Kaldi computes 1/(1-p) in double and stores it as a float
            # (infinite for p = 1).
            with np.errstate(divide="ignore"):
                scale = float(_F32(_F64(1.0) / (_F64(1.0) - _F64(comp1.dropout_proportion))))
        elif isinstance(comp1, GeneralDropoutComponent):
            scale = 1.0
        else:
            return -1
        return self._get_scaled_component_index(c2, scale)

    def _collapse_batchnorm(self, c1, c2):
        comp1 = self.nnet.get_component(c1)
        if not isinstance(comp1, BatchNormComponent):
            return -1
        if not comp1.test_mode or comp1.offset is None or comp1.offset.shape[0] == 0:
            raise NnetError("Expected batch-norm components to have test-mode set "
                            "(component %s)" % self.nnet.get_component_name(c1))
        return self._get_diagonally_pre_modified_component_index(
            comp1.offset, comp1.scale_vec, self.nnet.get_component_name(c1), c2)

    def _existing_or_new_name(self, c1, c2):
        name = "%s.%s" % (self.nnet.get_component_name(c1), self.nnet.get_component_name(c2))
        return name, self.nnet.get_component_index(name)

    def _collapse_affine(self, c1, c2):
        nnet = self.nnet
        comp1, comp2 = nnet.get_component(c1), nnet.get_component(c2)
        if not isinstance(comp2, AffineComponent) or \
                not isinstance(comp1, (FixedAffineComponent, AffineComponent)):
            return -1
        name, existing = self._existing_or_new_name(c1, c2)
        if existing >= 0:
            return existing
        if comp1.input_dim() > comp1.output_dim():
            # Merging after a dimension-reducing transform would cost time.
            return -1
        linear1, bias1 = comp1.linear_params, comp1.bias_params
        output_dim1, input_dim1 = linear1.shape
        input_dim2 = comp2.input_dim()
        if input_dim2 % output_dim1 != 0:
            raise NnetError("cannot collapse components %s and %s: input dim %d is not a "
                            "multiple of %d" % (nnet.get_component_name(c1),
                                                nnet.get_component_name(c2), input_dim2,
                                                output_dim1))
        multiple = input_dim2 // output_dim1
        # The first transform repeated block-diagonally, once per appended part.
        bias1_full = np.tile(np.asarray(bias1, _F32), multiple)
        linear1_full = np.zeros((input_dim2, multiple * input_dim1), _F32)
        for i in range(multiple):
            linear1_full[i * output_dim1:(i + 1) * output_dim1,
                         i * input_dim1:(i + 1) * input_dim1] = linear1
        new_bias = sgemv_add(comp2.linear_params, bias1_full, comp2.bias_params, self.threads)
        new_linear = sgemm(comp2.linear_params, linear1_full, threads=self.threads)
        return nnet.add_component(name, AffineComponent(new_linear, new_bias))

    def _collapse_scale(self, c1, c2):
        nnet = self.nnet
        comp1, comp2 = nnet.get_component(c1), nnet.get_component(c2)
        if not isinstance(comp1, AffineComponent) or \
                not isinstance(comp2, FixedScaleComponent) or \
                comp1.output_dim() != comp2.input_dim():
            return -1
        name, existing = self._existing_or_new_name(c1, c2)
        if existing >= 0:
            return existing
        scales = np.asarray(comp2.scales, _F32)
        new = comp1.copy()
        new.set_params(np.asarray(comp1.bias_params, _F32) * scales,
                       np.asarray(comp1.linear_params, _F32) * scales[:, None])
        return nnet.add_component(name, new)

    # -- the modified components -------------------------------------------------------
    def _get_diagonally_pre_modified_component_index(self, offset, scale, src_identifier,
                                                     component_index):
        """The component ``component_index`` preceded by y = scale * x + offset
        (Kaldi's GetDiagonallyPreModifiedComponentIndex), or -1 if it is not
        an Affine, Linear or Tdnn component."""
        nnet = self.nnet
        offset = np.asarray(offset, _F32)
        scale = np.asarray(scale, _F32)
        if offset.shape[0] == 0 or offset.shape != scale.shape:
            raise NnetError("batch-norm offset and scale must be non-empty and of equal size")
        if offset.max() == 0.0 and offset.min() == 0.0 and \
                scale.max() == 1.0 and scale.min() == 1.0:
            return component_index
        name = "%s.%s" % (src_identifier, nnet.get_component_name(component_index))
        existing = nnet.get_component_index(name)
        if existing >= 0:
            return existing
        comp = nnet.get_component(component_index)
        if isinstance(comp, AffineComponent):
            new = comp.copy()
            new.bias_params, new.linear_params = self._pre_multiply(
                self.threads, offset, scale, new.bias_params, new.linear_params, name)
        elif isinstance(comp, LinearComponent):
            new = AffineComponent(comp.params, np.zeros(comp.output_dim(), _F32),
                                  comp.learning_rate)
            new.bias_params, new.linear_params = self._pre_multiply(
                self.threads, offset, scale, new.bias_params, new.linear_params, name)
        elif isinstance(comp, TdnnComponent):
            new = comp.copy()
            if new.bias_params.shape[0] == 0:
                new.bias_params = np.zeros(new.output_dim(), _F32)
            new.bias_params, new.linear_params = self._pre_multiply(
                self.threads, offset, scale, new.bias_params, new.linear_params, name)
        else:
            return -1
        return nnet.add_component(name, new)

    @staticmethod
    def _pre_multiply(threads, offset, scale, bias, linear, name):
        """Kaldi's PreMultiplyAffineParameters: with the transform repeated to
        the input dimension, b += W offset, then W's columns times scale."""
        linear = np.asarray(linear, _F32)
        input_dim, transform_dim = linear.shape[1], offset.shape[0]
        if input_dim % transform_dim != 0:
            raise NnetError("cannot fold a %d-dimensional batch-norm into %s with input dim %d"
                            % (transform_dim, name, input_dim))
        repeats = input_dim // transform_dim
        full_offset = np.tile(offset, repeats)
        full_scale = np.tile(scale, repeats)
        new_bias = sgemv_add(linear, full_offset, bias, threads)
        return new_bias, linear * full_scale[None, :]

    def _get_scaled_component_index(self, component_index, scale):
        """A component computing what ``component_index`` computes on its
        input times ``scale`` (Kaldi's GetScaledComponentIndex), or -1."""
        if scale == 1.0:
            return component_index
        nnet = self.nnet
        # std::setprecision(3) on a float: %.3g of its value.
        name = "%s.scale%.3g" % (nnet.get_component_name(component_index), scale)
        existing = nnet.get_component_index(name)
        if existing >= 0:
            return existing
        comp = nnet.get_component(component_index)
        factor = _F32(scale)
        if isinstance(comp, (AffineComponent, TimeHeightConvolutionComponent, TdnnComponent)):
            new = comp.copy()
            new.linear_params = np.asarray(new.linear_params, _F32) * factor
        elif isinstance(comp, LinearComponent):
            new = comp.copy()
            new.params = np.asarray(new.params, _F32) * factor
        else:
            return -1
        return nnet.add_component(name, new)
