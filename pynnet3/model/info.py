"""Kaldi's Nnet::Info(), the text ``nnet3-info`` prints.

Layout, exactly as Kaldi writes it::

    left-context: L          (only for "simple" networks: see is_simple_nnet)
    right-context: R
    num-parameters: N
    modulus: M
    <one config line per node, with dims>
    component name=NAME type=<component.info()>

The context lines come from the computation-graph machinery
(``pynnet3.model.context.compute_simple_nnet_context``).
"""

from ..nnet.component_ops import num_parameters
from ..nnet.nnet import is_simple_nnet
from .context import compute_simple_nnet_context


def nnet_info(nnet, context=None):
    """What ``nnet3-info`` prints for a network: Kaldi's Nnet::Info(), byte
    for byte.

    Args:
        nnet: an :class:`~pynnet3.Nnet`.
        context: (left, right) to print instead of computing it (None: the
            network's context, computed for 'simple' networks as Kaldi's
            ComputeSimpleNnetContext does).

    Returns:
        The text (str), lines ending in newlines: context lines for a
        'simple' network, parameters, modulus, one config line per node with
        dimensions, one line per component.

    Raises:
        ComputationError: the context of a 'simple' network cannot be
            computed (its output is not computable from its inputs).

    Example::

        import pynnet3
        from pynnet3 import examples

        nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
        text = pynnet3.nnet_info(nnet)
        print(text == open(examples.path("tdnn_lda.info.txt")).read())

    Output::

        True
    """
    lines = []
    if is_simple_nnet(nnet):
        if context is None:
            context = compute_simple_nnet_context(nnet)
        lines.append("left-context: %d" % context[0])
        lines.append("right-context: %d" % context[1])
    lines.append("num-parameters: %d" % num_parameters(nnet))
    lines.append("modulus: %d" % nnet.modulus())
    lines.extend(nnet.get_config_lines(include_dim=True))
    for name, comp in zip(nnet.component_names, nnet.components):
        lines.append("component name=%s type=%s" % (name, comp.info()))
    return "".join(line + "\n" for line in lines)
