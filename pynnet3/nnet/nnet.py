"""The neural network: named nodes wired by Descriptors, and named Components.

Node layout is Kaldi's, exactly, because node indexes appear in computations:

- ``input-node name=x dim=D``         -> one kInput node "x";
- ``component-node name=c component=C input=DESC`` -> TWO nodes: a kDescriptor
  node "c_input" (holding DESC) immediately followed by a kComponent node "c";
- ``output-node name=o input=DESC``   -> one kDescriptor node "o" (an output
  node is a kDescriptor node *not* followed by a kComponent node);
- ``dim-range-node name=r input-node=n dim-offset=O dim=D`` -> one kDimRange node.

On disk (Kaldi's Nnet::Write) a network is ``<Nnet3>``, a newline, the config
lines of its nodes (component-input nodes implied by their component-nodes), an
empty line, ``<NumComponents> N`` and N times ``<ComponentName> name
<XxxComponent> ... </XxxComponent>``, then ``</Nnet3>``; in binary mode the
tokens and numbers are binary but the config section stays text.

Guarantees: :meth:`Nnet.write_to` produces Kaldi's bytes for the network it
holds; :meth:`Nnet.read_from` accepts what Kaldi's Nnet::Read accepts (raw
nnets in either mode, and ``.mdl`` files, whose network it takes) and raises
KaldiFormatError / ConfigError / NnetError naming the file and what was wrong;
every network it returns has passed :meth:`Nnet.check`.
"""

import logging

import numpy as np

from ..common.config_line import is_valid_name
from ..components import Component
from ..errors import DescriptorError, KaldiFormatError, NnetError, PynnetError
from ..hmm.transition import TransitionModel
from ..io.files import open_input, write_object
from ..io.stream import InputStream, OutputStream
from .descriptor import (BinarySumDescriptor, OptionalSumDescriptor, SimpleForwardingDescriptor,
                         SimpleSumDescriptor, lcm)
from .descriptor_parser import descriptor_name_lookup, parse_descriptor
from .graph import find_cycle, nnet_to_directed_graph
from .nnet_config import build_from_config, read_config_source
from .node import kComponent, kDescriptor, kDimRange, kInput, kLinear

logger = logging.getLogger("pynnet3")


class Nnet:
    """Kaldi's Nnet: a network of nodes (inputs, Descriptors, components,
    dim-ranges, outputs; ``nodes`` / ``node_names``) and the components they
    use (``components`` / ``component_names``). ``Nnet()`` is an empty
    network: read one from a file (:meth:`read`, ``.raw`` or ``.mdl``, text
    or binary) or build one from nnet3 config lines (:meth:`from_config`, as
    ``nnet3-init``). Reading then writing gives Kaldi's bytes; :func:`pynnet3.nnet_info`
    gives what ``nnet3-info`` prints.

    Raises:
        PynnetError: :meth:`read` and :meth:`from_config` raise
            KaldiFormatError / ConfigError (subclasses) on bad files or
            config lines, naming the file and offset or line.

    Example::

        import pynnet3
        from pynnet3 import examples

        nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
        print(pynnet3.nnet_info(nnet).splitlines()[:2])   # nnet3-info's first lines
        nnet.write("copy.txt", binary=False)          # as nnet3-copy --binary=false
        print(pynnet3.Nnet.read("copy.txt").num_components())

    Output::

        ['left-context: 8', 'right-context: 8']
        15
    """

    __slots__ = ("nodes", "node_names", "components", "component_names")

    def __init__(self):
        self.nodes = []
        self.node_names = []
        self.components = []
        self.component_names = []

    # -- construction ---------------------------------------------------------------
    @classmethod
    def read(cls, rxfilename):
        """Reads a network, as Kaldi's ReadKaldiObject.

        Args:
            rxfilename: a file (text or binary; a raw network, or a ``.mdl``
                whose network is taken), ``-`` (standard input) or
                ``command |``.

        Returns:
            A new Nnet.

        Raises:
            KaldiFormatError: the file is not a Kaldi network (the message
                names the file and byte offset).
        """
        stream = open_input(rxfilename)
        nnet = cls()
        nnet.read_from(stream)
        return nnet

    @classmethod
    def from_config(cls, text_or_path, source=None):
        """A new network from nnet3 config lines, as ``nnet3-init`` builds it.

        Args:
            text_or_path: config text, or the name of a config file (a string
                without newlines that names an existing file).
            source: the name error messages use for the text (default: the
                file name, or ``<config>``).

        Returns:
            A new Nnet.

        Raises:
            ConfigError: a bad config line (names the file, line and what was
                expected); NnetError: an inconsistent network.
        """
        text, source = read_config_source(text_or_path, source)
        nnet = cls()
        nnet.read_config(text, source)
        return nnet

    def read_config(self, text, source=None):
        """Adds (or replaces) nodes and components from config text, as Kaldi's
        Nnet::ReadConfig does; on error the network is left unchanged."""
        result = Nnet()
        build_from_config(self, result, text, source)
        self.swap(result)

    def copy(self):
        """A deep copy (components copied, Descriptors shared: they are
        immutable).

        Returns:
            A new Nnet.
        """
        ans = Nnet()
        ans.nodes = [n.copy() for n in self.nodes]
        ans.node_names = list(self.node_names)
        ans.components = [c.copy() for c in self.components]
        ans.component_names = list(self.component_names)
        return ans

    def swap(self, other):
        for slot in Nnet.__slots__:
            a, b = getattr(self, slot), getattr(other, slot)
            setattr(self, slot, b)
            setattr(other, slot, a)

    # -- reading ----------------------------------------------------------------------
    def read_from(self, stream):
        """Kaldi's Nnet::Read from an InputStream positioned at the object
        (replaces this network's content; unchanged if reading fails)."""
        token = stream.peek_token()
        if token is not None and token.startswith("<T"):
            self._read_from_mdl(stream)
            return
        stream.expect_token("<Nnet3>")
        data = stream.data
        newline = data.find(b"\n", stream.pos)
        if newline < 0:
            raise stream.error("expected a newline after <Nnet3>, got end of file")
        rest = data[stream.pos:newline]
        if rest not in (b"", b"\r"):
            raise stream.error("expected a newline after <Nnet3>, got %r" % rest[:40])
        pos = newline + 1
        config_start = pos
        lines = []
        while True:
            newline = data.find(b"\n", pos)
            if newline < 0:
                raise stream.error("the config section after <Nnet3> is not terminated "
                                   "by an empty line (file truncated?)", pos)
            line = data[pos:newline]
            pos = newline + 1
            if line in (b"", b"\r"):
                break
            lines.append(line)
        stream.pos = pos
        try:
            config_text = b"\n".join(lines).decode("ascii")
        except UnicodeDecodeError:
            raise stream.error("the config section after <Nnet3> contains non-text bytes",
                               config_start) from None
        stream.expect_token("<NumComponents>")
        start = stream.pos
        num_components = stream.read_int32()
        if not 0 <= num_components < 100000:
            raise stream.error("invalid number of components %d" % num_components, start)
        components, names = [], []
        for c in range(num_components):
            stream.expect_token("<ComponentName>")
            names.append(stream.read_token())
            try:
                components.append(Component.read_new(stream))
            except KaldiFormatError:
                raise
            except PynnetError as e:
                raise stream.error("error reading component %s: %s" % (names[-1], e)) from None
        stream.expect_token("</Nnet3>")
        # Built aside and swapped in, so a failure leaves this object unchanged.
        read = Nnet()
        read.components, read.component_names = components, names
        result = Nnet()
        build_from_config(read, result, config_text, "%s (config section)" % stream.source,
                          first_line_number=_line_number(data, config_start))
        self.swap(result)

    def _read_from_mdl(self, stream):
        """A .mdl file (TransitionModel, then an AmNnetSimple): takes the
        network, as Kaldi's Nnet::Read does (see :func:`read_am_nnet_simple`)."""
        TransitionModel().read_from(stream)
        nnet, _, _, _ = read_am_nnet_simple(stream)
        self.swap(nnet)

    # -- writing ----------------------------------------------------------------------
    def write(self, wxfilename, binary=True):
        """Writes the network as Kaldi's WriteKaldiObject (``nnet3-copy``):
        byte for byte Kaldi's file. A file appears only once complete.

        Args:
            wxfilename: a file, ``-`` (standard output) or ``| command``.
            binary: Kaldi's binary form (True) or its text form.

        Returns:
            None.
        """
        write_object(wxfilename, binary, self.write_to)

    def write_to(self, stream):
        """Kaldi's Nnet::Write into an OutputStream."""
        stream.write_token("<Nnet3>")
        stream.write_raw(b"\n")
        for line in self.get_config_lines(include_dim=False):
            stream.write_raw(line.encode("ascii") + b"\n")
        stream.write_raw(b"\n")
        stream.write_token("<NumComponents>")
        stream.write_int32(len(self.components))
        if not stream.binary:
            stream.write_raw(b"\n")
        for name, comp in zip(self.component_names, self.components):
            stream.write_token("<ComponentName>")
            stream.write_token(name)
            comp.write_to(stream)
            if not stream.binary:
                stream.write_raw(b"\n")
        stream.write_token("</Nnet3>")

    def to_bytes(self, binary=True):
        """The file content :meth:`write` would produce (with the binary header)."""
        stream = OutputStream(binary)
        stream.write_header()
        self.write_to(stream)
        return stream.getvalue()

    @classmethod
    def from_bytes(cls, data, source="<memory>"):
        nnet = cls()
        nnet.read_from(InputStream.from_bytes(data, source))
        return nnet

    # -- nodes ------------------------------------------------------------------------
    def num_nodes(self):
        return len(self.nodes)

    def num_components(self):
        """How many components the network has.

        Returns:
            The number of components.
        """
        return len(self.components)

    def get_node(self, i):
        return self.nodes[i]

    def get_node_index(self, name):
        """The index of the node called ``name``, or -1."""
        try:
            return self.node_names.index(name)
        except ValueError:
            return -1

    def get_component_index(self, name):
        """The index of the component called ``name``, or -1."""
        try:
            return self.component_names.index(name)
        except ValueError:
            return -1

    def get_node_name(self, i):
        return self.node_names[i]

    def get_node_names(self):
        """The names of the nodes.

        Returns:
            The node names, in node order (component-input nodes included,
            named ``<component-node>_input``).
        """
        return self.node_names

    def get_component_name(self, i):
        return self.component_names[i]

    def get_component_names(self):
        return self.component_names

    def get_component(self, i):
        return self.components[i]

    def set_component(self, i, component):
        self.components[i] = component

    def add_component(self, name, component):
        """Appends a component; returns its index."""
        if not is_valid_name(name):
            raise NnetError("invalid component name '%s'" % name)
        self.components.append(component)
        self.component_names.append(name)
        return len(self.components) - 1

    def set_node_name(self, i, new_name):
        """Kaldi's SetNodeName: renames node ``i`` (no duplicates, valid names)."""
        if not 0 <= i < len(self.nodes):
            raise NnetError("invalid node index %d" % i)
        if self.get_node_index(new_name) != -1:
            raise NnetError("You cannot rename a node to create a duplicate node name "
                            "(%s)" % new_name)
        if not is_valid_name(new_name):
            raise NnetError("Node name %s is not allowed." % new_name)
        self.node_names[i] = new_name

    def is_input_node(self, i):
        return self.nodes[i].node_type == kInput

    def is_descriptor_node(self, i):
        return self.nodes[i].node_type == kDescriptor

    def is_component_node(self, i):
        return self.nodes[i].node_type == kComponent

    def is_dim_range_node(self, i):
        return self.nodes[i].node_type == kDimRange

    def is_output_node(self, i):
        """A kDescriptor node not followed by a kComponent node."""
        nodes = self.nodes
        return nodes[i].node_type == kDescriptor and (
            i + 1 == len(nodes) or nodes[i + 1].node_type != kComponent)

    def is_component_input_node(self, i):
        """A kDescriptor node immediately followed by a kComponent node."""
        nodes = self.nodes
        return (i + 1 < len(nodes) and nodes[i].node_type == kDescriptor
                and nodes[i + 1].node_type == kComponent)

    def node_dim(self, i):
        """The dimension node ``i`` outputs (Kaldi's NetworkNode::Dim)."""
        node = self.nodes[i]
        t = node.node_type
        if t == kInput or t == kDimRange:
            ans = node.dim
        elif t == kDescriptor:
            ans = node.descriptor.dim(self)
        elif t == kComponent:
            ans = self.components[node.component_index].output_dim()
        else:
            raise NnetError("node %s has an invalid node type" % self.node_names[i])
        if ans <= 0:
            raise NnetError("node %s has non-positive dimension %d"
                            % (self.node_names[i], ans))
        return ans

    def input_dim(self, name):
        """Kaldi's InputDim.

        Args:
            name: an input node's name (``"input"``, ``"ivector"``).

        Returns:
            Its dimension, or -1 if the network has no such input node.
        """
        n = self.get_node_index(name)
        if n == -1 or self.nodes[n].node_type != kInput:
            return -1
        return self.nodes[n].dim

    def output_dim(self, name):
        """Kaldi's OutputDim.

        Args:
            name: an output node's name (``"output"``).

        Returns:
            Its dimension, or -1 if the network has no such output node.
        """
        n = self.get_node_index(name)
        if n == -1 or not self.is_output_node(n):
            return -1
        return self.node_dim(n)

    def modulus(self):
        """Kaldi's Nnet::Modulus: the lcm of the descriptors' moduli."""
        ans = 1
        for node in self.nodes:
            if node.node_type == kDescriptor:
                ans = lcm(ans, node.descriptor.modulus())
        return ans

    def get_some_node_names(self):
        """Node names a descriptor may refer to; kDescriptor nodes become "**"."""
        return [name if node.node_type != kDescriptor else "**"
                for node, name in zip(self.nodes, self.node_names)]

    # -- config form ----------------------------------------------------------------------
    def get_as_config_line(self, i, include_dim):
        """Kaldi's GetAsConfigLine for node ``i`` (not a component-input node)."""
        node = self.nodes[i]
        name = self.node_names[i]
        t = node.node_type
        if t == kInput:
            return "input-node name=%s dim=%d" % (name, node.dim)
        if t == kDescriptor:
            if not self.is_output_node(i):
                raise NnetError("node %s is a component-input node, which has no config "
                                "line of its own" % name)
            line = "output-node name=%s input=%s" % (
                name, node.descriptor.write_config(self.node_names))
            if include_dim:
                line += " dim=%d" % self.node_dim(i)
            return line + " objective=" + ("linear" if node.objective_type == kLinear
                                           else "quadratic")
        if t == kComponent:
            line = "component-node name=%s component=%s input=%s" % (
                name, self.component_names[node.component_index],
                self.nodes[i - 1].descriptor.write_config(self.node_names))
            if include_dim:
                line += " input-dim=%d output-dim=%d" % (self.node_dim(i - 1),
                                                         self.node_dim(i))
            return line
        if t == kDimRange:
            return "dim-range-node name=%s input-node=%s dim-offset=%d dim=%d" % (
                name, self.node_names[node.node_index], node.dim_offset, node.dim)
        raise NnetError("node %s has an unknown node type" % name)

    def get_config_lines(self, include_dim=False):
        """One config line per node, component-input nodes omitted (Kaldi's
        GetConfigLines); ``include_dim`` adds dims as nnet3-info shows them."""
        return [self.get_as_config_line(i, include_dim) for i in range(len(self.nodes))
                if not self.is_component_input_node(i)]

    # -- structural edits (the functions below) --------------------------------------------
    def remove_orphan_nodes(self, remove_orphan_inputs=False):
        remove_orphan_nodes(self, remove_orphan_inputs)

    def remove_orphan_components(self):
        remove_orphan_components(self)

    def remove_some_nodes(self, nodes_to_remove):
        remove_some_nodes(self, nodes_to_remove)

    # -- consistency --------------------------------------------------------------------
    def check(self, warn_for_orphans=True):
        """Kaldi's Nnet::Check, stricter: raises NnetError naming the node when
        names are duplicated, a descriptor refers to a node it may not read,
        dimensions disagree (component inputs, dim-range nodes, Sum/Failover
        terms, output descriptors), or a cycle of nodes has no time delay
        (a Cindex that would need its own value; Kaldi accepts such networks
        and fails only when computing with them)."""
        nodes = self.nodes
        names = self.node_names
        num_nodes = len(nodes)
        if num_nodes == 0:
            raise NnetError("the network has no nodes")
        if len(names) != num_nodes:
            raise NnetError("internal error: %d nodes but %d node names"
                            % (num_nodes, len(names)))
        seen = {}
        for n, name in enumerate(names):
            if name in seen:
                raise NnetError("node name %s is used twice (nodes %d and %d)"
                                % (name, seen[name], n))
            seen[name] = n
        num_inputs = num_outputs = 0
        num_components = len(self.components)
        for n, node in enumerate(nodes):
            name = names[n]
            t = node.node_type
            if t == kInput:
                if node.dim <= 0:
                    raise NnetError("input node %s has invalid dimension %d" % (name, node.dim))
                num_inputs += 1
            elif t == kDescriptor:
                if node.descriptor is None:
                    raise NnetError("node %s has no descriptor" % name)
                is_output = self.is_output_node(n)
                if is_output:
                    num_outputs += 1
                for src in sorted(node.descriptor.get_node_dependencies(set())):
                    if not 0 <= src < num_nodes:
                        raise NnetError("Descriptor of node %s refers to node index %d, "
                                        "which does not exist" % (name, src))
                    if nodes[src].node_type not in (kInput, kDimRange, kComponent):
                        raise NnetError("Invalid source node type in Descriptor of node %s: "
                                        "source node %s" % (name, names[src]))
                if is_output:
                    try:
                        node.descriptor.dim(self)
                    except DescriptorError as e:
                        raise NnetError("Error in Descriptor for output node %s: %s"
                                        % (name, e)) from None
            elif t == kComponent:
                if n == 0 or nodes[n - 1].node_type != kDescriptor:
                    raise NnetError("component node %s is not preceded by its input "
                                    "descriptor node" % name)
                c = node.component_index
                if not 0 <= c < num_components:
                    raise NnetError("component node %s refers to component index %d, which "
                                    "does not exist" % (name, c))
                try:
                    src_dim = nodes[n - 1].descriptor.dim(self)
                except DescriptorError as e:
                    raise NnetError("Error in Descriptor for network-node %s: %s"
                                    % (name, e)) from None
                input_dim = self.components[c].input_dim()
                if src_dim != input_dim:
                    raise NnetError("Dimension mismatch for network-node %s: input-dim %d "
                                    "versus component-input-dim %d"
                                    % (name, src_dim, input_dim))
            elif t == kDimRange:
                src = node.node_index
                if not 0 <= src < num_nodes:
                    raise NnetError("dim-range node %s refers to node index %d, which does "
                                    "not exist" % (name, src))
                if nodes[src].node_type not in (kInput, kComponent):
                    raise NnetError("Invalid source node type in DimRange node: source node "
                                    "%s" % names[src])
                input_dim = self.node_dim(src)
                if not (node.dim > 0 and node.dim_offset >= 0
                        and node.dim + node.dim_offset <= input_dim):
                    raise NnetError("Invalid node dimensions for DimRange node: %s: "
                                    "input-dim=%d, dim=%d, dim-offset=%d"
                                    % (name, input_dim, node.dim, node.dim_offset))
            else:
                raise NnetError("Invalid node type for node %s" % name)
        seen = set()
        for cname in self.component_names:
            if cname in seen:
                raise NnetError("component name %s is used twice" % cname)
            seen.add(cname)
        if num_inputs == 0:
            raise NnetError("the network has no input nodes")
        if num_outputs == 0:
            raise NnetError("the network has no output nodes")
        self._check_no_zero_delay_cycle()
        if warn_for_orphans:
            for c in find_orphan_components(self):
                logger.warning("Component %s is never used by any node.",
                               self.component_names[c])
            for n in find_orphan_nodes(self):
                if not self.is_component_input_node(n):
                    logger.warning("Node %s is never used to compute any output.", names[n])

    def _check_no_zero_delay_cycle(self):
        """Raises NnetError if some nodes depend on each other in a cycle along
        which every step keeps the Index unchanged (whole node names, simple
        components, dim-range nodes): such a Cindex would need its own value."""
        graph = [[] for _ in self.nodes]   # node -> nodes it reads at the same Index
        for n, node in enumerate(self.nodes):
            t = node.node_type
            if t == kDescriptor:
                graph[n] = sorted(_same_index_sources(node.descriptor))
            elif t == kComponent:
                comp = self.components[node.component_index]
                if comp.is_simple():
                    graph[n] = [n - 1]
            elif t == kDimRange:
                graph[n] = [node.node_index]
        cycle = find_cycle(graph)
        if cycle is not None:
            shown = [self.node_names[i] for i in cycle
                     if not self.is_component_input_node(i)]
            shown.append(shown[0])
            raise NnetError("the network has a cycle without a time delay: %s (each of "
                            "these nodes needs its own output at the same time index; "
                            "a recurrence must go through an Offset() with a nonzero delay)"
                            % " -> ".join(shown))


def _same_index_sources(descriptor):
    """The source nodes a descriptor reads at exactly the output Index, through
    plain node names or Scale() only (inside Sum/Failover/IfDefined)."""
    out = set()

    def visit(part):
        if isinstance(part, SimpleSumDescriptor):
            if isinstance(part.src, SimpleForwardingDescriptor):
                out.add(part.src.src_node)
        elif isinstance(part, BinarySumDescriptor):
            visit(part.src1)
            visit(part.src2)
        elif isinstance(part, OptionalSumDescriptor):
            visit(part.src)

    for part in descriptor.parts:
        visit(part)
    return out


def _line_number(data, pos):
    """1-based line number of byte ``pos`` in ``data``."""
    return data.count(b"\n", 0, pos) + 1


# -- Kaldi's nnet-utils on the structure -------------------------------------------------

def num_input_nodes(nnet):
    return sum(1 for n in range(nnet.num_nodes()) if nnet.is_input_node(n))


def num_output_nodes(nnet):
    return sum(1 for n in range(nnet.num_nodes()) if nnet.is_output_node(n))


def is_simple_nnet(nnet):
    """Kaldi's IsSimpleNnet: an output "output", an input "input", and no other
    input except possibly "ivector"."""
    out = nnet.get_node_index("output")
    if out == -1 or not nnet.is_output_node(out):
        return False
    inp = nnet.get_node_index("input")
    if inp == -1 or not nnet.is_input_node(inp):
        return False
    if num_input_nodes(nnet) == 1:
        return True
    iv = nnet.get_node_index("ivector")
    return iv != -1 and nnet.is_input_node(iv)


def find_orphan_components(nnet):
    """Indexes of components no component-node uses (Kaldi's FindOrphanComponents)."""
    used = [False] * nnet.num_components()
    for node in nnet.nodes:
        if node.node_type == kComponent:
            used[node.component_index] = True
    return [c for c, u in enumerate(used) if not u]


def find_orphan_nodes(nnet, outputs=None):
    """Indexes of nodes not needed to compute any output (Kaldi's
    FindOrphanNodes), or any of the output nodes ``outputs`` (indexes)."""
    depend_on = nnet_to_directed_graph(nnet)
    dependencies = [[] for _ in depend_on]
    for n, users in enumerate(depend_on):
        for u in users:
            dependencies[u].append(n)
    required = [False] * nnet.num_nodes()
    queue = (list(outputs) if outputs is not None
             else [n for n in range(nnet.num_nodes()) if nnet.is_output_node(n)])
    while queue:
        i = queue.pop()
        if not required[i]:
            required[i] = True
            queue.extend(dependencies[i])
    return [n for n, r in enumerate(required) if not r]


def remove_some_nodes(nnet, nodes_to_remove):
    """Kaldi's Nnet::RemoveSomeNodes: drops those nodes; descriptors are
    renumbered by printing and re-parsing them, as Kaldi does."""
    if not nodes_to_remove:
        return
    remove = set(nodes_to_remove)
    old2new = {}
    new_nodes, new_names = [], []
    for n, node in enumerate(nnet.nodes):
        if n not in remove:
            old2new[n] = len(new_nodes)
            new_nodes.append(node.copy())
            new_names.append(nnet.node_names[n])
    new_lookup = descriptor_name_lookup(new_names)
    for node in new_nodes:
        if node.node_type == kDescriptor:
            text = node.descriptor.write_config(nnet.node_names)
            node.descriptor = parse_descriptor(text, new_lookup)
        elif node.node_type == kDimRange:
            if node.node_index not in old2new:
                raise NnetError("cannot remove node %s: dim-range node uses it"
                                % nnet.node_names[node.node_index])
            node.node_index = old2new[node.node_index]
    nnet.nodes = new_nodes
    nnet.node_names = new_names
    nnet.check(warn_for_orphans=False)


def remove_orphan_nodes(nnet, remove_orphan_inputs=False):
    """Kaldi's Nnet::RemoveOrphanNodes (logs how many were removed)."""
    orphans = find_orphan_nodes(nnet)
    if not remove_orphan_inputs:
        # Kaldi erases input nodes from the list while stepping through it
        # with an index, so an orphan right after an erased input is skipped
        # (kept in the list, hence removed); we reproduce that exactly.
        i = 0
        while i < len(orphans):
            if nnet.is_input_node(orphans[i]):
                del orphans[i]
            i += 1
    num_removed = sum(1 for n in orphans if not nnet.is_component_input_node(n))
    remove_some_nodes(nnet, orphans)
    logger.info("Removed %d orphan nodes.", num_removed)


def remove_orphan_components(nnet):
    """Kaldi's Nnet::RemoveOrphanComponents."""
    orphans = find_orphan_components(nnet)
    logger.info("Removing %d orphan components.", len(orphans))
    _remove_components(nnet, orphans)


def keep_only_output(nnet, name="output"):
    """Drops every output node but ``name`` and every node and component
    that only the others need (Kaldi's ``remove-output-nodes`` edit, then
    its orphan removal, without their log lines). A tool that computes only
    ``name`` then holds no other output's parameters (a chain model's
    cross-entropy branch: 3-5 MB less peak memory on 22-35 MB models, 8 on
    a TDNN-F of 83 MB). The computations for ``name`` are the same (its
    nodes keep their order and names). Input nodes stay. Returns whether
    anything was dropped; nothing is when ``name`` is not an output node
    (the caller's own check reports that). Not for a model whose compiled
    computations are read from or written to a cache file: theirs use the
    whole model's component numbers, as Kaldi's do."""
    index = nnet.get_node_index(name)
    if index < 0 or not nnet.is_output_node(index):
        return False
    unneeded = [n for n in find_orphan_nodes(nnet, [index]) if not nnet.is_input_node(n)]
    if not unneeded:
        return False
    remove_some_nodes(nnet, unneeded)
    _remove_components(nnet, find_orphan_components(nnet))
    return True


def _remove_components(nnet, orphans):
    """Drops the components ``orphans`` (indexes no node uses) and renumbers
    the nodes' component indexes."""
    if not orphans:
        return
    drop = set(orphans)
    old2new = {}
    comps, names = [], []
    for c, (comp, name) in enumerate(zip(nnet.components, nnet.component_names)):
        if c not in drop:
            old2new[c] = len(comps)
            comps.append(comp)
            names.append(name)
    for node in nnet.nodes:
        if node.node_type == kComponent:
            node.component_index = old2new[node.component_index]
    nnet.components = comps
    nnet.component_names = names
    nnet.check()


# -- the network of an acoustic model -------------------------------------------------------

def read_am_nnet_simple(stream):
    """Kaldi's AmNnetSimple::Read without its last step: (nnet, left_context,
    right_context, priors) as stored, after Kaldi's checks (a 'simple'
    network; priors empty or of the output's dimension). Kaldi then recomputes
    the context, which needs the compiler: :class:`pynnet3.model.am.AmNnetSimple`
    does; :meth:`Nnet.read` of a ``.mdl``, which keeps only the network, does
    not."""
    nnet = Nnet()
    start = stream.pos
    nnet.read_from(stream)
    stream.expect_token("<LeftContext>")
    left_context = stream.read_int32()
    stream.expect_token("<RightContext>")
    right_context = stream.read_int32()
    if not is_simple_nnet(nnet):
        raise stream.error("AmNnetSimple is only for 'simple' networks (an input node "
                           "'input', an output node 'output', optionally an input "
                           "'ivector'), and this one is not", start)
    stream.expect_token("<Priors>")
    at = stream.pos
    priors = stream.read_vector(np.float32)
    out_dim = nnet.output_dim("output")
    if priors.shape[0] not in (0, out_dim):
        raise stream.error("the priors have dimension %d but the network's output "
                           "has dimension %d" % (priors.shape[0], out_dim), at)
    return nnet, left_context, right_context, priors


__all__ = ["Nnet", "is_simple_nnet", "num_input_nodes", "num_output_nodes",
           "find_orphan_components", "find_orphan_nodes", "remove_some_nodes",
           "remove_orphan_nodes", "remove_orphan_components", "keep_only_output",
           "read_am_nnet_simple"]
