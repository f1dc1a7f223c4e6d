"""Edit directives (Kaldi's ReadEditConfig, used by ``nnet3-copy --edits``).

One directive per line (``--edits`` turns ';' into newlines first):

- ``convert-to-fixed-affine [name=<pattern>]``
- ``remove-orphan-nodes [remove-orphan-inputs=true|false]``
- ``remove-orphan-components``
- ``remove-orphans [remove-orphan-inputs=true|false]``
- ``set-learning-rate [name=<pattern>] learning-rate=<lr>`` (times each
  component's learning-rate-factor)
- ``set-learning-rate-factor [name=<pattern>] learning-rate-factor=<f>``
- ``rename-node old-name=<name> new-name=<name>``
- ``remove-output-nodes name=<pattern>``
- ``set-dropout-proportion [name=<pattern>] proportion=<p>``
- ``apply-svd name=<pattern> [bottleneck-dim=<n>] [energy-threshold=<e>]
  [shrinkage-threshold=<s>]``
- ``reduce-rank name=<pattern> rank=<n>``

Patterns match component names (node names for remove-output-nodes) with
``*`` as the only wildcard. Directives apply in order; errors (ConfigError)
name the source and line; unknown keys are errors, as in Kaldi.
"""

import logging

import numpy as np

from ..common.config_line import ConfigLine, name_matches_pattern, read_config_lines
from ..common.floats import f32
from ..components.affine import (AffineComponent, FixedAffineComponent, LinearComponent,
                                 NaturalGradientAffineComponent)
from ..components.base import UpdatableComponent
from ..errors import ConfigError, PynnetError
from .nnet import remove_orphan_components, remove_orphan_nodes, remove_some_nodes
from .node import kComponent, kDescriptor, kDimRange, kLinear

logger = logging.getLogger("pynnet3")

_DROPOUT_TYPES = ("DropoutComponent", "DropoutMaskComponent", "GeneralDropoutComponent")


def _is_affine(comp):
    """Kaldi's dynamic_cast<AffineComponent*>: AffineComponent and its subclass."""
    return isinstance(comp, AffineComponent)


def _svd_candidates(nnet, pattern, rank, doing):
    """(index, name, component) of each component there is at the start whose
    name matches ``pattern``, that is affine and whose input and output
    dimensions both exceed ``rank``: the ones an SVD edit changes. Each other
    matching one is skipped with Kaldi's warning ("Not <doing> component
    ...")."""
    for c in range(nnet.num_components()):
        comp = nnet.components[c]
        name = nnet.component_names[c]
        if not name_matches_pattern(name, pattern):
            continue
        if not _is_affine(comp):
            logger.warning("Not %s component %s as it is not an AffineComponent.", doing, name)
            continue
        in_dim, out_dim = comp.input_dim(), comp.output_dim()
        if in_dim <= rank or out_dim <= rank:
            logger.warning("Not %s component %s with SVD to rank %d because its dimension "
                           "is %d -> %d", doing, name, rank, in_dim, out_dim)
            continue
        yield c, name, comp


def read_edit_config(nnet, text, source=None):
    """Applies edit directives in ``text`` to ``nnet`` (Kaldi's ReadEditConfig)."""
    for number, line in read_config_lines(text):
        cfl = ConfigLine(line, source, number)
        try:
            _apply(nnet, cfl)
        except ConfigError:
            raise
        except PynnetError as e:
            raise cfl.error(str(e)) from None
        unused = cfl.unused_keys()
        if unused:
            raise cfl.error("Could not interpret '%s' in edit config line" % " ".join(
                "%s=%s" % (k, cfl.get_str(k)) for k in unused))


def apply_edits_string(nnet, edits, source="--edits"):
    """nnet3-copy's ``--edits``: semicolons become newlines."""
    read_edit_config(nnet, edits.replace(";", "\n"), source)


def _apply(nnet, cfl):
    directive = cfl.first_token
    handler = _DIRECTIVES.get(directive)
    if handler is None:
        raise cfl.error("Directive '%s' is not currently supported (reading edit-config)."
                        % directive)
    handler(nnet, cfl)


def _matching_components(nnet, cfl, wanted):
    """(index, component) of the components named by the directive's
    ``name=`` pattern (default: all) for which ``wanted(component)``."""
    pattern = cfl.get_str("name", "*")
    return [(c, comp) for c, comp in enumerate(nnet.components)
            if name_matches_pattern(nnet.component_names[c], pattern) and wanted(comp)]


def _required_float(cfl, key):
    """The directive's float ``key=`` value (must be given), as a float32."""
    if not cfl.has(key):
        raise cfl.error("In edits-config, expected %s to be set" % key)
    return f32(cfl.get_float(key))


def _convert_to_fixed_affine(nnet, cfl):
    matching = _matching_components(nnet, cfl, _is_affine)
    for c, comp in matching:
        nnet.components[c] = FixedAffineComponent.from_affine(comp)
    logger.info("Converted %d components to FixedAffineComponent.", len(matching))


def _remove_orphan_nodes(nnet, cfl):
    remove_orphan_nodes(nnet, cfl.get_bool("remove-orphan-inputs", False))


def _remove_orphan_components(nnet, cfl):
    remove_orphan_components(nnet)


def _remove_orphans(nnet, cfl):
    remove_orphan_nodes(nnet, cfl.get_bool("remove-orphan-inputs", False))
    remove_orphan_components(nnet)


def _is_updatable(comp):
    return isinstance(comp, UpdatableComponent)


def _set_learning_rate(nnet, cfl):
    matching = _matching_components(nnet, cfl, _is_updatable)
    lr = _required_float(cfl, "learning-rate")
    for _, comp in matching:
        comp.set_underlying_learning_rate(lr)
    logger.info("Set learning rates for %d components.", len(matching))


def _set_on_components(matching, attribute, value):
    """Sets ``attribute`` to ``value`` on every matching component, through
    its ``set_<attribute>`` method where it has one."""
    for _, comp in matching:
        if hasattr(comp, "set_" + attribute):
            getattr(comp, "set_" + attribute)(value)
        else:
            setattr(comp, attribute, value)


def _set_learning_rate_factor(nnet, cfl):
    matching = _matching_components(nnet, cfl, _is_updatable)
    factor = _required_float(cfl, "learning-rate-factor")
    _set_on_components(matching, "learning_rate_factor", factor)
    logger.info("Set learning rate factors for %d components.", len(matching))


def _rename_node(nnet, cfl):
    old_name = cfl.get_str("old-name")
    new_name = cfl.get_str("new-name")
    if old_name is None or new_name is None or cfl.unused_keys():
        raise cfl.error("In edits-config, could not make sense of this rename-node "
                        "directive (expect old-name=xxx new-name=xxx)")
    index = nnet.get_node_index(old_name)
    if index < 0:
        raise cfl.error("Could not rename node from %s to %s because there is no node "
                        "called %s" % (old_name, new_name, old_name))
    nnet.set_node_name(index, new_name)


def _remove_output_nodes(nnet, cfl):
    pattern = cfl.get_str("name")
    if pattern is None or cfl.unused_keys():
        raise cfl.error("In edits-config, could not make sense of remove-output-nodes "
                        "directive (expect name=<pattern>)")
    to_remove = []
    remaining = 0
    for n in range(nnet.num_nodes()):
        if nnet.is_output_node(n):
            if name_matches_pattern(nnet.node_names[n], pattern):
                to_remove.append(n)
            else:
                remaining += 1
    logger.info("Removing %d output nodes.", len(to_remove))
    if remaining == 0:
        raise cfl.error("All outputs were removed.")
    remove_some_nodes(nnet, to_remove)


def _set_dropout_proportion(nnet, cfl):
    matching = _matching_components(nnet, cfl, lambda comp: comp.type_name in _DROPOUT_TYPES)
    proportion = _required_float(cfl, "proportion")
    _set_on_components(matching, "dropout_proportion", proportion)
    logger.info("Set dropout proportions for %d components.", len(matching))


def _apply_svd(nnet, cfl):
    bottleneck_dim = cfl.get_int("bottleneck-dim", -1)
    energy_threshold = f32(cfl.get_float("energy-threshold", -1.0))
    shrinkage_threshold = f32(cfl.get_float("shrinkage-threshold", 1.0))
    pattern = cfl.get_str("name")
    if pattern is None:
        raise cfl.error("Edit directive apply-svd requires 'name' to be specified.")
    if bottleneck_dim <= 0 and energy_threshold <= 0:
        raise cfl.error("Either Bottleneck-dim or energy-threshold must be set in apply-svd "
                        "command. Range of possible values is (0 1]")
    _SvdApplier(nnet, pattern, bottleneck_dim, energy_threshold, shrinkage_threshold).apply()


def _sorted_svd(matrix):
    """M = U diag(s) Vt with s sorted from largest to smallest (Kaldi's Svd +
    SortSvd), computed in double precision and returned as float32."""
    u, s, vt = np.linalg.svd(matrix.astype(np.float64), full_matrices=False)
    order = np.argsort(-s, kind="stable")
    return (u[:, order].astype(np.float32), s[order].astype(np.float32),
            vt[order].astype(np.float32))


def _copy_updatable_configs(dest, src):
    """Kaldi's SetUpdatableConfigs."""
    dest.learning_rate = src.learning_rate
    dest.learning_rate_factor = src.learning_rate_factor
    dest.l2_regularize = src.l2_regularize
    dest.is_gradient = src.is_gradient
    dest.max_change = src.max_change


class _SvdApplier:
    """Kaldi's SvdApplier: splits matching affine components W x + b into
    ``<name>_a`` (LinearComponent, sqrt(s) Vt) and ``<name>_b``
    (NaturalGradientAffineComponent, U sqrt(s), b) and rewires the nodes."""

    def __init__(self, nnet, pattern, bottleneck_dim, energy_threshold, shrinkage_threshold):
        self.nnet = nnet
        self.pattern = pattern
        self.bottleneck_dim = bottleneck_dim
        self.energy_threshold = energy_threshold
        self.shrinkage_threshold = shrinkage_threshold
        self.modified = {}   # component index -> (name_a, name_b)

    def apply(self):
        self._decompose_components()
        if self.modified:
            self._modify_topology()
        logger.info("Decomposed %d components with SVD dimension %d", len(self.modified),
                    self.bottleneck_dim)

    def _decompose_components(self):
        nnet = self.nnet
        for c, name, comp in _svd_candidates(nnet, self.pattern, self.bottleneck_dim,
                                             "decomposing"):
            parts = self._decompose(name, comp)
            if parts is None:
                continue
            name_a, name_b = name + "_a", name + "_b"
            for new_name in (name_a, name_b):
                if nnet.get_component_index(new_name) >= 0:
                    raise PynnetError("Neural network already has a component named %s"
                                      % new_name)
            nnet.add_component(name_a, parts[0])
            nnet.add_component(name_b, parts[1])
            self.modified[c] = (name_a, name_b)
        logger.info("Converted %d components to FixedAffineComponent.", len(self.modified))

    def _decompose(self, name, affine):
        in_dim, out_dim = affine.input_dim(), affine.output_dim()
        if self.energy_threshold >= 1 or self.shrinkage_threshold >= 1:
            # Kaldi asserts this at this point (so its default shrinkage-threshold
            # of 1.0 cannot actually be used); we say why instead.
            raise PynnetError("apply-svd on component %s: energy-threshold and "
                              "shrinkage-threshold must both be less than 1 (got %g and %g)"
                              % (name, self.energy_threshold, self.shrinkage_threshold))
        u, s, vt = _sorted_svd(np.asarray(affine.linear_params))
        s2 = (s.astype(np.float32) ** 2).astype(np.float32)
        s2_sum_orig = float(np.sum(s2, dtype=np.float32))
        if self.energy_threshold > 0:
            min_sum = self.energy_threshold * s2_sum_orig
            total = 0.0
            i = 0
            while i < len(s2):
                total += float(s2[i])
                if total >= min_sum:
                    break
                i += 1
            self.bottleneck_dim = i + 1
        dim = self.bottleneck_dim
        s2_sum_reduced = float(np.sum(s2[:dim], dtype=np.float32))
        shrinkage = f32(dim * (in_dim + out_dim)) / f32(in_dim * out_dim)
        if shrinkage > self.shrinkage_threshold:
            logger.info("Shrinkage ratio %g greater than threshold : %g Skipping SVD for "
                        "this layer.", shrinkage, self.shrinkage_threshold)
            return None
        logger.info("For component %s singular value squared sum changed by %g (from %g "
                    "to %g)", name, s2_sum_orig - s2_sum_reduced, s2_sum_orig, s2_sum_reduced)
        root = np.sqrt(s[:dim]).astype(np.float32)
        a = (vt[:dim] * root[:, None]).astype(np.float32)
        b = (u[:, :dim] * root[None, :]).astype(np.float32)
        comp_a = LinearComponent(a)
        comp_b = NaturalGradientAffineComponent(b, np.asarray(affine.bias_params))
        _copy_updatable_configs(comp_a, affine)
        _copy_updatable_configs(comp_b, affine)
        return comp_a, comp_b

    def _modify_topology(self):
        nnet = self.nnet
        names = list(nnet.node_names)
        modified_names = list(names)
        for n, node in enumerate(nnet.nodes):
            if node.node_type == kComponent and node.component_index in self.modified:
                modified_names[n] = names[n] + "_b"
        lines = []
        for n, node in enumerate(nnet.nodes):
            if nnet.is_component_input_node(n) or nnet.is_input_node(n):
                continue
            name = names[n]
            t = node.node_type
            if t == kComponent and node.component_index in self.modified:
                name_a, name_b = self.modified[node.component_index]
                lines.append("component-node name=%s_a component=%s input=%s" % (
                    name, name_a, nnet.nodes[n - 1].descriptor.write_config(modified_names)))
                lines.append("component-node name=%s_b component=%s input=%s_a"
                             % (name, name_b, name))
            elif t == kDescriptor:
                lines.append("output-node name=%s input=%s objective=%s" % (
                    name, node.descriptor.write_config(modified_names),
                    "linear" if node.objective_type == kLinear else "quadratic"))
            elif t == kComponent:
                lines.append("component-node name=%s component=%s input=%s" % (
                    name, nnet.component_names[node.component_index],
                    nnet.nodes[n - 1].descriptor.write_config(modified_names)))
            elif t == kDimRange:
                lines.append("dim-range-node name=%s input-node=%s dim-offset=%d dim=%d" % (
                    name, modified_names[node.node_index], node.dim_offset, node.dim))
        nnet.read_config("\n".join(lines) + "\n", "(apply-svd)")
        remove_orphan_nodes(nnet)
        remove_orphan_components(nnet)


def _reduce_rank(nnet, cfl):
    pattern = cfl.get_str("name")
    rank = cfl.get_int("rank")
    if pattern is None or rank is None:
        raise cfl.error("Edit directive reduce-rank requires 'name' and 'rank' to be "
                        "specified.")
    if rank <= 0:
        raise cfl.error("Rank must be positive in reduce-rank command.")
    reduce_rank_of_components(nnet, pattern, rank)


def reduce_rank_of_components(nnet, pattern, rank):
    """Kaldi's ReduceRankOfComponents: W of matching affine components replaced
    by its best rank-``rank`` approximation (bias unchanged)."""
    changed = 0
    for _, name, comp in _svd_candidates(nnet, pattern, rank, "reducing rank of"):
        u, s, vt = _sorted_svd(np.asarray(comp.linear_params))
        s_sum_orig = float(np.sum(s, dtype=np.float32))
        s_sum_reduced = float(np.sum(s[:rank], dtype=np.float32))
        logger.info("For component %s singular value sum changed by reduce-rank command %g "
                    "(from %g to %g)", name, s_sum_orig - s_sum_reduced, s_sum_orig,
                    s_sum_reduced)
        reduced = ((u[:, :rank] * s[None, :rank]).astype(np.float32) @ vt[:rank]).astype(
            np.float32)
        comp.set_params(np.asarray(comp.bias_params).copy(), reduced)
        changed += 1
    logger.info("Reduced rank of parameters of %d components.", changed)


_DIRECTIVES = {
    "convert-to-fixed-affine": _convert_to_fixed_affine,
    "remove-orphan-nodes": _remove_orphan_nodes,
    "remove-orphan-components": _remove_orphan_components,
    "remove-orphans": _remove_orphans,
    "set-learning-rate": _set_learning_rate,
    "set-learning-rate-factor": _set_learning_rate_factor,
    "rename-node": _rename_node,
    "remove-output-nodes": _remove_output_nodes,
    "set-dropout-proportion": _set_dropout_proportion,
    "apply-svd": _apply_svd,
    "reduce-rank": _reduce_rank,
}
