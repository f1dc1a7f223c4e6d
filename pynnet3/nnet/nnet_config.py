"""nnet3-init semantics: building or extending a network from config lines.

Line kinds (Kaldi's Nnet::ReadConfig):

- ``input-node name=N dim=D``
- ``component name=C type=XxxComponent <type's keys>``
- ``component-node name=N component=C input=<descriptor>``
- ``output-node name=N input=<descriptor> [objective=linear|quadratic]``
- ``dim-range-node name=N input-node=M dim-offset=O dim=D``

Guarantees, as in Kaldi:
- the existing network is turned back into config lines and the new lines are
  appended; a new line defining an existing node *replaces* it (the old line is
  dropped, so the node moves to where the new line is); a component with an
  existing name replaces that component in place;
- a node or component defined twice in the same config, a line without
  ``name=``, an unknown line kind, unknown keys, unknown component types or
  node names and dimension mismatches are errors;
- descriptors may name nodes defined later in the file (two passes);
- errors name the file and line (ConfigError / DescriptorError), and on error
  the network is left as it was.
"""

import os

from ..errors import ConfigError, DescriptorError, NnetError, PynnetError
from .config_line import ConfigLine, is_valid_name, read_config_lines
from .descriptor import parse_descriptor

EXISTING = "(existing network)"


def read_config_source(text_or_path, source=None):
    """(text, source) for a config given as text or as a file name."""
    if isinstance(text_or_path, bytes):
        text_or_path = text_or_path.decode("utf-8")
    if "\n" not in text_or_path and os.path.isfile(text_or_path):
        with open(text_or_path, encoding="utf-8") as f:
            return f.read(), source or text_or_path
    return text_or_path, source


def read_config(nnet, text, source=None, first_line_number=1):
    """Applies config ``text`` to ``nnet`` (Kaldi's Nnet::ReadConfig).

    ``source`` names the text in errors; ``first_line_number`` is the line
    number of the text's first line in that source.
    """
    from .nnet import Nnet
    lines = [ConfigLine(line, EXISTING, None) for line in nnet.get_config_lines(False)]
    num_initial = len(lines)
    offset = first_line_number - 1
    for number, line in read_config_lines(text):
        lines.append(ConfigLine(line, source, number + offset))
    lines = _remove_redundant_config_lines(num_initial, lines)

    work = Nnet()
    work.components = list(nnet.components)
    work.component_names = list(nnet.component_names)
    initial_num_components = len(work.components)
    handlers = {
        "component": _process_component,
        "component-node": _process_component_node,
        "input-node": _process_input_node,
        "output-node": _process_output_node,
        "dim-range-node": _process_dim_range_node,
    }
    for pass_ in (0, 1):
        for cfl in lines:
            handler = handlers.get(cfl.first_token)
            if handler is None:
                raise cfl.error("Invalid config-file line ('%s' not expected)"
                                % cfl.first_token)
            if handler is _process_component:
                if pass_ == 0:
                    _process_component(work, cfl, initial_num_components)
            else:
                handler(work, cfl, pass_)
    try:
        work.check()
    except NnetError as e:
        if source is None:
            raise
        raise NnetError("%s: %s" % (source, e)) from None
    nnet.swap(work)


def _remove_redundant_config_lines(num_initial, lines):
    """Kaldi's RemoveRedundantConfigLines: a node defined again by the new
    config drops the old definition; repeats within the new config are errors."""
    most_recent = {}
    component_names = set()
    to_remove = set()
    for i, cfl in enumerate(lines):
        name = cfl.get_str("name")
        if name is None:
            raise cfl.error("Config line has no field 'name=xxx'")
        if not is_valid_name(name):
            raise cfl.error("Name '%s' is not allowable" % name)
        if cfl.first_token == "component":
            if name in component_names:
                raise cfl.error("Component name %s appears twice in the same config file."
                                % name)
            component_names.add(name)
        else:
            prev = most_recent.get(name)
            if prev is not None:
                if prev >= num_initial:
                    raise cfl.error("Node name %s appears twice in the same config file."
                                    % name)
                to_remove.add(prev)
            most_recent[name] = i
    return [cfl for i, cfl in enumerate(lines) if i not in to_remove]


def _process_component(nnet, cfl, initial_num_components):
    from ..components import Component
    name = cfl.get_str("name")
    type_name = cfl.get_str("type")
    if type_name is None:
        raise cfl.error("Expected field type=<component-type> in config line")
    comp = Component.new_of_type(type_name)
    if comp is None:
        raise cfl.error("Unknown component-type '%s' in config file.  Check your code "
                        "version and config." % type_name)
    try:
        comp.init_from_config(cfl)
    except ConfigError as e:
        if e.source is None and e.line_number is None:
            raise ConfigError(str(e), cfl.source, cfl.line_number, cfl.whole_line) from None
        raise
    except PynnetError as e:
        raise cfl.error("error initializing component %s: %s" % (name, e)) from None
    cfl.check_all_used()
    index = nnet.get_component_index(name)
    if index != -1:
        if index >= initial_num_components:
            raise cfl.error("You are adding two components with the same name: '%s'" % name)
        nnet.components[index] = comp
    else:
        nnet.components.append(comp)
        nnet.component_names.append(name)


def _parse_input_descriptor(nnet, cfl, what):
    text = cfl.get_str("input")
    if text is None:
        raise cfl.error("Expected input=<input-descriptor>, in config line")
    try:
        return parse_descriptor(text, nnet.get_some_node_names())
    except DescriptorError as e:
        raise DescriptorError("Error parsing descriptor (input=%s) of %s: %s"
                              % (text, what, e.detail), cfl.source, cfl.line_number,
                              cfl.whole_line) from None


def _process_component_node(nnet, cfl, pass_):
    from .nnet import NetworkNode, kComponent, kDescriptor
    name = cfl.get_str("name")
    input_name = name + "_input"
    input_index = nnet.get_node_index(input_name)
    index = nnet.get_node_index(name)
    if pass_ == 0:
        if input_index != -1:
            raise cfl.error("component-node %s needs a node called %s for its input, "
                            "but another node already has that name" % (name, input_name))
        if index != -1:
            raise cfl.error("Node name %s is defined twice" % name)
        nnet.nodes.append(NetworkNode(kDescriptor))
        nnet.nodes.append(NetworkNode(kComponent))
        nnet.node_names.append(input_name)
        nnet.node_names.append(name)
        return
    component_name = cfl.get_str("component")
    if component_name is None:
        raise cfl.error("Expected component=<component-name>, in config line")
    c = nnet.get_component_index(component_name)
    if c == -1:
        raise cfl.error("No component named '%s'" % component_name)
    nnet.nodes[index].component_index = c
    nnet.nodes[input_index].descriptor = _parse_input_descriptor(
        nnet, cfl, "component-node %s" % name)
    _check_unused(cfl)


def _process_input_node(nnet, cfl, pass_):
    from .nnet import NetworkNode, kInput
    if pass_ != 0:
        return
    name = cfl.get_str("name")
    if not cfl.has("dim"):
        raise cfl.error("Expected field dim=<input-dim> in config line")
    dim = cfl.get_int("dim")
    _check_unused(cfl)
    if nnet.get_node_index(name) != -1:
        raise cfl.error("Node name %s is defined twice" % name)
    if dim <= 0:
        raise cfl.error("Invalid dimension in config line")
    nnet.nodes.append(NetworkNode(kInput, dim=dim))
    nnet.node_names.append(name)


def _process_output_node(nnet, cfl, pass_):
    from .nnet import NetworkNode, kDescriptor, kLinear, kQuadratic
    name = cfl.get_str("name")
    index = nnet.get_node_index(name)
    if pass_ == 0:
        if index != -1:
            raise cfl.error("Node name %s is defined twice" % name)
        nnet.nodes.append(NetworkNode(kDescriptor))
        nnet.node_names.append(name)
        return
    node = nnet.nodes[index]
    node.descriptor = _parse_input_descriptor(nnet, cfl, "output-node %s" % name)
    objective = cfl.get_str("objective")
    if objective is None or objective == "linear":
        node.objective_type = kLinear
    elif objective == "quadratic":
        node.objective_type = kQuadratic
    else:
        raise cfl.error("Invalid objective type: %s (expected linear or quadratic)"
                        % objective)
    _check_unused(cfl)


def _process_dim_range_node(nnet, cfl, pass_):
    from .nnet import NetworkNode, kComponent, kDimRange, kInput
    name = cfl.get_str("name")
    index = nnet.get_node_index(name)
    if pass_ == 0:
        if index != -1:
            raise cfl.error("Node name %s is defined twice" % name)
        nnet.nodes.append(NetworkNode(kDimRange))
        nnet.node_names.append(name)
        return
    input_name = cfl.get_str("input-node")
    if input_name is None:
        raise cfl.error("Expected input-node=<input-node-name>, in config line")
    if not cfl.has("dim"):
        raise cfl.error("Expected dim=<feature-dim>, in config line")
    dim = cfl.get_int("dim")
    if not cfl.has("dim-offset"):
        raise cfl.error("Expected dim-offset=<dimension-offset>, in config line")
    dim_offset = cfl.get_int("dim-offset")
    src = nnet.get_node_index(input_name)
    if src == -1 or nnet.nodes[src].node_type not in (kComponent, kInput):
        raise cfl.error("invalid input-node %s (it must name an input-node or a "
                        "component-node)" % input_name)
    _check_unused(cfl)
    node = nnet.nodes[index]
    node.node_index = src
    node.dim = dim
    node.dim_offset = dim_offset


def _check_unused(cfl):
    unused = cfl.unused_keys()
    if unused:
        raise cfl.error("Unused values '%s'" % " ".join(
            "%s=%s" % (k, cfl.get_str(k)) for k in unused))
