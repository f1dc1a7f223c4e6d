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

from ..common.config_line import ConfigLine, is_valid_name, read_config_lines
from ..components import Component
from ..errors import ConfigError, DescriptorError, KaldiFormatError, NnetError, PynnetError
from ..io.files import read_bytes
from .descriptor_parser import descriptor_name_lookup, parse_descriptor
from .node import NetworkNode, kComponent, kDescriptor, kDimRange, kInput, kLinear, kQuadratic

EXISTING = "(existing network)"


def read_config_file(rxfilename):
    """The text of a config rxfilename (file, '-', 'cmd |'); binary is refused."""
    data, offset = read_bytes(rxfilename)
    data = data[offset:]
    if data[:2] == b"\0B":
        raise KaldiFormatError("expected a text config file, got a binary file", rxfilename)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KaldiFormatError("config file is not valid text: %s" % e, rxfilename) from None


def read_config_source(text_or_path, source=None):
    """(text, source) for a config given as text or as a file name."""
    if isinstance(text_or_path, bytes):
        text_or_path = text_or_path.decode("utf-8")
    if "\n" not in text_or_path and os.path.isfile(text_or_path):
        with open(text_or_path, encoding="utf-8") as f:
            return f.read(), source or text_or_path
    return text_or_path, source


def build_from_config(nnet, result, text, source=None, first_line_number=1):
    """Kaldi's Nnet::ReadConfig: fills the empty network ``result`` with
    ``nnet``'s components and config lines followed by those of ``text``, and
    checks it (``nnet`` is not changed; :meth:`Nnet.read_config` swaps the
    result in).

    ``source`` names the text in errors; ``first_line_number`` is the line
    number of the text's first line in that source.
    """
    lines = [ConfigLine(line, EXISTING, None) for line in nnet.get_config_lines(False)]
    num_initial = len(lines)
    offset = first_line_number - 1
    for number, line in read_config_lines(text):
        lines.append(ConfigLine(line, source, number + offset))
    lines = _remove_redundant_config_lines(num_initial, lines)

    work = _Builder(result, nnet.components, nnet.component_names)
    handlers = {
        "component": _process_component,
        "component-node": _process_component_node,
        "input-node": _process_input_node,
        "output-node": _process_output_node,
        "dim-range-node": _process_dim_range_node,
    }
    for pass_ in (0, 1):
        if pass_ == 1:
            work.start_descriptors()
        for cfl in lines:
            handler = handlers.get(cfl.first_token)
            if handler is None:
                raise cfl.error("Invalid config-file line ('%s' not expected)"
                                % cfl.first_token)
            handler(work, cfl, pass_)
    try:
        work.nnet.check()
    except NnetError as e:
        if source is None:
            raise
        raise NnetError("%s: %s" % (source, e)) from None


class _Builder:
    """The network read_config builds, with its name -> index maps kept in
    step, so that each config line's lookups cost O(1) rather than a scan of
    every node (which made reading a big model quadratic in its size)."""

    __slots__ = ("nnet", "node_index", "component_index", "initial_num_components",
                 "descriptor_names")

    def __init__(self, nnet, components, component_names):
        self.nnet = nnet
        self.nnet.components = list(components)
        self.nnet.component_names = list(component_names)
        self.node_index = {}
        self.component_index = {}
        for i, name in enumerate(component_names):
            self.component_index.setdefault(name, i)
        self.initial_num_components = len(components)
        self.descriptor_names = None

    def get_node_index(self, name):
        return self.node_index.get(name, -1)

    def get_component_index(self, name):
        return self.component_index.get(name, -1)

    def add_node(self, node, name):
        self.node_index.setdefault(name, len(self.nnet.nodes))
        self.nnet.nodes.append(node)
        self.nnet.node_names.append(name)

    def add_component(self, comp, name):
        self.component_index.setdefault(name, len(self.nnet.components))
        self.nnet.components.append(comp)
        self.nnet.component_names.append(name)

    def start_descriptors(self):
        """Called once every node exists (after pass 0): their names and types
        no longer change, so all descriptors share one name lookup."""
        self.descriptor_names = descriptor_name_lookup(self.nnet.get_some_node_names())


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


def _process_component(work, cfl, pass_):
    if pass_ != 0:
        return
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
    index = work.get_component_index(name)
    if index != -1:
        if index >= work.initial_num_components:
            raise cfl.error("You are adding two components with the same name: '%s'" % name)
        work.nnet.components[index] = comp
    else:
        work.add_component(comp, name)


def _parse_input_descriptor(work, cfl, what):
    text = cfl.get_str("input")
    if text is None:
        raise cfl.error("Expected input=<input-descriptor>, in config line")
    try:
        return parse_descriptor(text, work.descriptor_names)
    except DescriptorError as e:
        raise DescriptorError("Error parsing descriptor (input=%s) of %s: %s"
                              % (text, what, e.detail), cfl.source, cfl.line_number,
                              cfl.whole_line) from None


def _process_component_node(work, cfl, pass_):
    name = cfl.get_str("name")
    input_name = name + "_input"
    input_index = work.get_node_index(input_name)
    index = work.get_node_index(name)
    if pass_ == 0:
        if input_index != -1:
            raise cfl.error("component-node %s needs a node called %s for its input, "
                            "but another node already has that name" % (name, input_name))
        if index != -1:
            raise cfl.error("Node name %s is defined twice" % name)
        work.add_node(NetworkNode(kDescriptor), input_name)
        work.add_node(NetworkNode(kComponent), name)
        return
    component_name = cfl.get_str("component")
    if component_name is None:
        raise cfl.error("Expected component=<component-name>, in config line")
    c = work.get_component_index(component_name)
    if c == -1:
        raise cfl.error("No component named '%s'" % component_name)
    work.nnet.nodes[index].component_index = c
    work.nnet.nodes[input_index].descriptor = _parse_input_descriptor(
        work, cfl, "component-node %s" % name)
    _check_unused(cfl)


def _process_input_node(work, cfl, pass_):
    if pass_ != 0:
        return
    name = cfl.get_str("name")
    if not cfl.has("dim"):
        raise cfl.error("Expected field dim=<input-dim> in config line")
    dim = cfl.get_int("dim")
    _check_unused(cfl)
    if work.get_node_index(name) != -1:
        raise cfl.error("Node name %s is defined twice" % name)
    if dim <= 0:
        raise cfl.error("Invalid dimension in config line")
    work.add_node(NetworkNode(kInput, dim=dim), name)


def _process_output_node(work, cfl, pass_):
    name = cfl.get_str("name")
    index = work.get_node_index(name)
    if pass_ == 0:
        if index != -1:
            raise cfl.error("Node name %s is defined twice" % name)
        work.add_node(NetworkNode(kDescriptor), name)
        return
    node = work.nnet.nodes[index]
    node.descriptor = _parse_input_descriptor(work, cfl, "output-node %s" % name)
    objective = cfl.get_str("objective")
    if objective is None or objective == "linear":
        node.objective_type = kLinear
    elif objective == "quadratic":
        node.objective_type = kQuadratic
    else:
        raise cfl.error("Invalid objective type: %s (expected linear or quadratic)"
                        % objective)
    _check_unused(cfl)


def _process_dim_range_node(work, cfl, pass_):
    name = cfl.get_str("name")
    index = work.get_node_index(name)
    if pass_ == 0:
        if index != -1:
            raise cfl.error("Node name %s is defined twice" % name)
        work.add_node(NetworkNode(kDimRange), name)
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
    src = work.get_node_index(input_name)
    if src == -1 or work.nnet.nodes[src].node_type not in (kComponent, kInput):
        raise cfl.error("invalid input-node %s (it must name an input-node or a "
                        "component-node)" % input_name)
    _check_unused(cfl)
    node = work.nnet.nodes[index]
    node.node_index = src
    node.dim = dim
    node.dim_offset = dim_offset


def _check_unused(cfl):
    unused = cfl.unused_keys()
    if unused:
        raise cfl.error("Unused values '%s'" % " ".join(
            "%s=%s" % (k, cfl.get_str(k)) for k in unused))
