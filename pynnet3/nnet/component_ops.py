"""Operations on every component of a network (Kaldi's nnet-utils): the
parameters (count, scale, add, gradients, learning rates, vectorizing, dot
products, statistics) and the modes (dropout proportion, batch-norm and
dropout test mode).

Parameter-level helpers loop over components in order and touch only the
updatable ones (``kUpdatableComponent``), exactly as Kaldi's functions of the
same names do, so e.g. :func:`vectorize_nnet` concatenates in Kaldi's order.
(The structural ones, orphans and node removal, are in :mod:`.nnet`; the
graph of nodes in :mod:`.graph`.)
"""

import numpy as np

from ..components.base import ComponentProperty as P
from ..errors import NnetError

_DROPOUT_TYPES = ("DropoutComponent", "DropoutMaskComponent", "GeneralDropoutComponent")


def _is_updatable(comp):
    return bool(comp.properties() & P.kUpdatableComponent)


def _updatable(nnet):
    return [c for c in nnet.components if _is_updatable(c)]


# -- counting ----------------------------------------------------------------------------

def num_parameters(nnet):
    """Kaldi's NumParameters: the parameters of the updatable components."""
    return sum(c.num_parameters() for c in _updatable(nnet))


def num_updatable_components(nnet):
    return len(_updatable(nnet))


# -- parameters ----------------------------------------------------------------------------

def scale_nnet(nnet, scale):
    """Kaldi's ScaleNnet: every component's Scale() (parameters and stats)."""
    if scale == 1.0:
        return
    for comp in nnet.components:
        comp.scale(scale)


def add_nnet(src, alpha, dest):
    """Kaldi's AddNnet: dest += alpha * src, component by component."""
    if src.num_components() != dest.num_components():
        raise NnetError("Trying to add incompatible nnets.")
    for s, d in zip(src.components, dest.components):
        d.add(alpha, s)


def set_nnet_as_gradient(nnet):
    """Kaldi's SetNnetAsGradient: updatable components become gradients
    (learning rate 1, is-gradient true)."""
    for comp in _updatable(nnet):
        comp.set_as_gradient()


def zero_component_stats(nnet):
    """Kaldi's ZeroComponentStats."""
    for comp in nnet.components:
        comp.zero_stats()


def set_learning_rate(nnet, learning_rate):
    """Kaldi's SetLearningRate: the underlying rate (times each component's
    learning-rate-factor) on every updatable component."""
    for comp in _updatable(nnet):
        if not hasattr(comp, "set_underlying_learning_rate"):
            raise NnetError("Updatable component %s does not support learning rates"
                            % comp.type_name)
        comp.set_underlying_learning_rate(learning_rate)


def vectorize_nnet(nnet):
    """Kaldi's VectorizeNnet: all updatable parameters as one float32 vector."""
    parts = [np.asarray(c.vectorize(), dtype=np.float32) for c in _updatable(nnet)]
    if not parts:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(parts)


def unvectorize_nnet(nnet, params):
    """Kaldi's UnVectorizeNnet (the inverse of :func:`vectorize_nnet`)."""
    params = np.asarray(params, dtype=np.float32)
    total = num_parameters(nnet)
    if params.shape != (total,):
        raise NnetError("UnVectorizeNnet: expected %d parameters, got %s"
                        % (total, params.shape))
    offset = 0
    for comp in _updatable(nnet):
        n = comp.num_parameters()
        comp.unvectorize(params[offset:offset + n])
        offset += n


def dot_product(nnet1, nnet2):
    """Kaldi's DotProduct over updatable components."""
    if nnet1.num_components() != nnet2.num_components():
        raise NnetError("DotProduct: the networks have different numbers of components")
    ans = 0.0
    for c1, c2 in zip(nnet1.components, nnet2.components):
        if _is_updatable(c1):
            ans += c1.dot_product(c2)
    return ans


def component_dot_products(nnet1, nnet2):
    """Kaldi's ComponentDotProducts: one dot product per updatable component."""
    return np.array([c1.dot_product(c2) for c1, c2 in zip(nnet1.components,
                                                          nnet2.components)
                     if _is_updatable(c1)], dtype=np.float32)


# -- modes ----------------------------------------------------------------------------------

def set_dropout_proportion(nnet, proportion):
    """Kaldi's SetDropoutProportion on every dropout-type component."""
    for comp in nnet.components:
        if comp.type_name in _DROPOUT_TYPES:
            comp.set_dropout_proportion(proportion)


def set_batchnorm_test_mode(nnet, test_mode):
    """Kaldi's SetBatchnormTestMode (nnet3-copy always calls it, with false by
    default, which is part of what it writes)."""
    for comp in nnet.components:
        if comp.type_name == "BatchNormComponent":
            comp.set_test_mode(test_mode)


def set_dropout_test_mode(nnet, test_mode):
    """Kaldi's SetDropoutTestMode on every RandomComponent."""
    for comp in nnet.components:
        if comp.properties() & P.kRandomComponent and hasattr(comp, "set_test_mode"):
            comp.set_test_mode(test_mode)


