"""Whether a network's output frames depend on how an utterance is cut into
chunks.

Kaldi's DecodableNnetSimple computes an utterance chunk by chunk, each chunk
with the network's whole context around it, so the context frames are
computed again for every chunk. For most feed-forward networks (TDNN, TDNN-F,
CNN-TDNN) an output frame is a function of the input frames within its
context alone, the same in whichever chunk it is computed: then several
consecutive chunks may be computed as one longer chunk, with the same numbers
(within float rounding) and without the repeated context.

:func:`nnet_is_chunk_invariant` says when that holds. A network is
*chunk-invariant* when

- it is not recurrent (Kaldi's NnetIsRecurrent): a recurrence starts afresh
  at each chunk's first frame;
- no descriptor uses ``IfDefined()`` or ``Failover()``: what they take
  depends on which frames the chunk's request makes computable;
- ``ReplaceIndex(…, t, …)`` reads only the input node ``ivector`` (the caller
  gives each chunk its i-vector, and may merge only chunks whose i-vectors
  are equal); anywhere else it reads one frame of the chunk;
- no component takes optional inputs, whose use also depends on what the
  chunk makes computable: statistics extraction and pooling (their windows
  end at the chunk's edge), restricted attention, and time-height
  convolution with time offsets that are not required;
- batch-norm and random components (dropout, ...) are in test mode (as
  nnet3-compute sets them): in training mode they normalize over, or draw
  for, all rows of the computation.

Round() and Switch() are allowed: chunks start at multiples of the network's
modulus, and so do runs of them.
"""

from ..components.attention import RestrictedAttentionComponent
from ..components.base import ComponentProperty
from ..components.composite import CompositeComponent
from ..components.normalize import BatchNormComponent
from ..components.statistics import StatisticsExtractionComponent, StatisticsPoolingComponent
from ..components.time_height_convolution import TimeHeightConvolutionComponent
from .descriptor import (BinarySumDescriptor, OptionalSumDescriptor,
                         ReplaceIndexForwardingDescriptor, SimpleForwardingDescriptor,
                         SwitchingForwardingDescriptor, kFailoverOperation)
from .graph import nnet_is_recurrent
from .node import kDescriptor

__all__ = ["nnet_is_chunk_invariant"]

# Components whose output at a frame uses whichever of its inputs the chunk
# makes computable.
_OPTIONAL_INPUT_COMPONENTS = (StatisticsExtractionComponent, StatisticsPoolingComponent,
                              RestrictedAttentionComponent)


def nnet_is_chunk_invariant(nnet):
    """True when every output frame of ``nnet`` is the same function of the
    input frames (and of the chunk's i-vector) in whatever chunk it is
    computed (see the module docstring for the rules)."""
    if nnet_is_recurrent(nnet):
        return False
    for node in nnet.nodes:
        if int(node.node_type) == kDescriptor:
            for part in node.descriptor.parts:
                if not _expression_is_chunk_invariant(part, nnet):
                    return False
    return not any(_depends_on_the_chunk(component) for component in nnet.components)


def _expression_is_chunk_invariant(expression, nnet):
    if isinstance(expression, OptionalSumDescriptor):
        return False
    if isinstance(expression, BinarySumDescriptor):
        return (expression.op != kFailoverOperation
                and _expression_is_chunk_invariant(expression.src1, nnet)
                and _expression_is_chunk_invariant(expression.src2, nnet))
    if isinstance(expression, SwitchingForwardingDescriptor):
        return all(_expression_is_chunk_invariant(src, nnet) for src in expression.srcs)
    if isinstance(expression, ReplaceIndexForwardingDescriptor) and expression.variable == "t":
        src = expression.src
        return (isinstance(src, SimpleForwardingDescriptor)
                and nnet.node_names[src.src_node] == "ivector")
    src = getattr(expression, "src", None)       # Offset, Round, ReplaceIndex(x), a part
    return src is None or _expression_is_chunk_invariant(src, nnet)


def _depends_on_the_chunk(component):
    if isinstance(component, CompositeComponent):
        return any(_depends_on_the_chunk(part) for part in component.components)
    if isinstance(component, _OPTIONAL_INPUT_COMPONENTS):
        return True
    if isinstance(component, TimeHeightConvolutionComponent):
        model = component.model
        return set(model.required_time_offsets) != set(model.all_time_offsets)
    if (isinstance(component, BatchNormComponent)
            or component.properties() & ComponentProperty.kRandomComponent):
        return not getattr(component, "test_mode", False)
    return False
