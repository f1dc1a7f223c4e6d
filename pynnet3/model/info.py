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
    """Kaldi's Nnet::Info(). ``context``: (left, right) to print instead of
    computing it (None: computed for simple networks)."""
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
