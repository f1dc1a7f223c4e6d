"""Pictures of networks: a :class:`~pynnet3.nnet.nnet.Nnet` as a Graphviz graph.

:func:`nnet_to_dot` turns a network into DOT text (Graphviz's graph language);
:func:`write_picture` runs Graphviz's ``dot`` program on such text to make an
SVG, PNG or PDF picture; :func:`draw` does both. The ``nnet3-to-dot`` tool is
the command-line form.

What the graph shows:

- input nodes (green ellipses: name, dim), output nodes (orange double
  ellipses: name, dim, objective type), component nodes (boxes: node name,
  component type, input and output dims, the component's name where it differs
  from the node's, and any attributes asked for from the component's
  ``Info()``, by default TdnnComponent's ``time-offsets``), dim-range nodes
  (small boxes: which dims of which node);
- every Descriptor as what it computes, in Kaldi's normalized form (the form
  ``nnet3-info`` prints): an ``Append`` of several parts is a node with one
  numbered port per part, in order, each showing the part's dim; ``Sum`` is a
  ``+`` node (nested binary Sums, which mean one sum, are drawn as one node);
  ``Scale`` a ``×`` node; ``Const`` a node with its value and dim;
  ``Failover`` a node with ports ``first`` and ``else``; ``Switch`` a node
  with one port per ``t mod n``; ``Offset``, ``Round`` and ``ReplaceIndex``
  are labels on the edge they apply to (``t-3``, ``t+1, x-1``,
  ``Round(t, 2)``, ``ReplaceIndex(t, 0)``; nested ones outermost first, as
  Kaldi writes them); ``IfDefined`` makes its edge dashed and wraps its label
  (``IfDefined(t-1)``);
- recurrences (an edge that closes a cycle of the network and reads another
  time than its user's: through Offset, Round or ReplaceIndex of t) are blue
  and laid out against the flow, so the picture still runs from the inputs
  down to the outputs; nodes no output depends on are dashed grey;
- xconfig layers: nodes whose names share the prefix before the first ``.``
  (``tdnnf2.linear``, ``tdnnf2.affine``, ... ``tdnnf2.noop``), at least two of
  them, or nodes matching a prefix given in ``node_prefixes``, are drawn in one
  box labelled with the layer's name (``expand_layers=True``, the default), or
  as one node showing the layer's input and output dims
  (``expand_layers=False``: edges inside a layer disappear, parallel edges
  between the same two nodes become one whose label lists each).

Guarantees: the DOT text is valid Graphviz input for every network
:meth:`Nnet.check` accepts (every kaldi-ref model is drawn in the tests);
node ids are the network's node names (quoted); helper nodes have ids that
start with ``%`` (not a legal character in a node name), so they never collide
with the network's. Drawing reads the network and never changes it.
"""

import logging
import os
import re
import shutil
import subprocess
import tempfile

from .errors import PynnetError
from .nnet.descriptor import (BinarySumDescriptor, ConstantSumDescriptor,
                              OffsetForwardingDescriptor, OptionalSumDescriptor,
                              ReplaceIndexForwardingDescriptor, RoundingForwardingDescriptor,
                              SimpleForwardingDescriptor, SimpleSumDescriptor,
                              SwitchingForwardingDescriptor, kSumOperation)
from .common.floats import kaldi_str
from .nnet.nnet import Nnet, find_orphan_nodes
from .nnet.node import kComponent, kDescriptor, kDimRange, kInput, kQuadratic
from .nnet.graph import nnet_to_directed_graph

__all__ = ["draw", "nnet_to_dot", "write_picture", "picture_format", "info_attributes",
           "PICTURE_FORMATS", "DEFAULT_COMPONENT_ATTRIBUTES"]

log = logging.getLogger(__name__)

# File name ending -> Graphviz output format (dot -T...).
PICTURE_FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".ps": "ps",
                   ".eps": "eps", ".jpg": "jpg", ".jpeg": "jpg", ".gif": "gif"}

# What component labels show from Component.info() unless asked otherwise.
DEFAULT_COMPONENT_ATTRIBUTES = ("time-offsets",)

# Fill colours by component family: the first pattern found in the type name wins.
_FAMILY_COLORS = (
    (("RectifiedLinear", "Sigmoid", "Tanh", "Softmax"), "#fce5cd"),
    (("Lstm", "Gru"), "#f4cccc"),
    (("Affine", "Linear", "Tdnn", "Convolution", "Conv"), "#cfe2f3"),
    (("BatchNorm", "Normalize"), "#d9ead3"),
    (("Dropout", "SpecAugment", "NoOp", "BackpropTruncation", "ClipGradient"), "#eeeeee"),
    (("Statistics", "Attention"), "#e4d7f5"),
)
_DEFAULT_COMPONENT_COLOR = "#fce5cd"    # nonlinearities and the other simple components
_INPUT_COLOR = "#b6d7a8"
_OUTPUT_COLOR = "#f9cb9c"
_CONST_COLOR = "#fff2cc"
_LAYER_COLOR = "#3d6fb4"
_RECURRENT_COLOR = "#1c4fa0"
_UNUSED_COLOR = "#888888"


# -- public API ----------------------------------------------------------------------

def draw(nnet, picture=None, *, expand_layers=True, node_prefixes=(), use_color=True,
         component_attributes=DEFAULT_COMPONENT_ATTRIBUTES):
    """The network as Graphviz DOT text; with ``picture``, also a picture of it.

    Args:
        nnet: an :class:`~pynnet3.nnet.nnet.Nnet`, or the name of a file to read one
            from (``.raw`` or ``.mdl``, text or binary, as ``nnet3-info`` reads).
        picture: optional file name ending in ``.svg``, ``.png``, ``.pdf``, ``.ps``,
            ``.eps``, ``.jpg`` or ``.gif``: the picture is made with Graphviz's ``dot``
            program and written there (complete or not at all).
        expand_layers: True (default): each xconfig layer is a labelled box around its
            nodes; False: each layer is one node with its input and output dims.
        node_prefixes: extra layer prefixes (an iterable of strings, or one
            comma-separated string, as Kaldi's ``nnet3_to_dot.py --node-prefixes``):
            nodes whose names start with one of them are grouped under it (the longest
            prefix wins) even without a ``.`` in their names.
        use_color: fill nodes with colours by kind (False: black and white).
        component_attributes: names of ``key=value`` fields of a component's
            ``Info()`` to show in its node (default: ``time-offsets``).

    Returns:
        The DOT text (a ``str``; ``dot -Tsvg`` accepts it).

    Raises:
        PynnetError: the network could not be read, the picture's format is not known
            from its name, Graphviz's ``dot`` is not installed, or ``dot`` failed.

    Example::

        import pynnet3
        from pynnet3 import examples

        text = pynnet3.draw(examples.path("tdnn_lda.raw"))   # as nnet3-to-dot writes it
        print(text.splitlines()[0])
        # pynnet3.draw(examples.path("final.mdl"), "model.svg") also runs Graphviz's dot

    Output::

        digraph "nnet3" {
    """
    if picture is not None:
        picture_format(picture)     # a bad name fails before any work
    if not isinstance(nnet, Nnet):
        nnet = Nnet.read(os.fspath(nnet))
    text = nnet_to_dot(nnet, expand_layers=expand_layers, node_prefixes=node_prefixes,
                       use_color=use_color, component_attributes=component_attributes)
    if picture is not None:
        write_picture(text, picture)
    return text


def nnet_to_dot(nnet, *, expand_layers=True, node_prefixes=(), use_color=True,
                component_attributes=DEFAULT_COMPONENT_ATTRIBUTES):
    """The DOT text of ``nnet`` (see :func:`draw` for the options and the module
    docstring for what is drawn)."""
    if isinstance(node_prefixes, str):
        node_prefixes = node_prefixes.split(",")
    if isinstance(component_attributes, str):
        component_attributes = component_attributes.split(",")
    prefixes = sorted((p.strip() for p in node_prefixes if p.strip()), key=len,
                      reverse=True)
    attributes = [a.strip() for a in component_attributes if a.strip()]
    builder = _GraphBuilder(nnet, prefixes, use_color, attributes)
    builder.build()
    return builder.render(expand_layers)


def picture_format(path):
    """Graphviz's output format for a picture file name (from its ending); raises
    PynnetError naming the file if the ending is not one of PICTURE_FORMATS."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    fmt = PICTURE_FORMATS.get(ext)
    if fmt is None:
        raise PynnetError("cannot tell the picture format from the file name '%s': it "
                          "should end in one of %s" % (path, ", ".join(PICTURE_FORMATS)))
    return fmt


def write_picture(dot_text, path):
    """Runs Graphviz's ``dot`` on ``dot_text`` and writes the picture to ``path``
    (format from its ending, see :func:`picture_format`), through a temporary file
    renamed into place: the picture appears complete or not at all.

    Raises PynnetError if the format is unknown, ``dot`` is not on PATH, or ``dot``
    fails (its message included). Warnings ``dot`` prints are logged."""
    path = os.fspath(path)
    fmt = picture_format(path)
    dot = shutil.which("dot")
    if dot is None:
        raise PynnetError("cannot make the picture %s: Graphviz's 'dot' program is not "
                          "installed (not found on PATH; on Debian or Ubuntu: apt-get "
                          "install graphviz)" % path)
    if os.path.exists(path) and not os.path.isfile(path):
        # A device or FIFO (e.g. /dev/stdout) is written in place, never replaced.
        _run_dot(dot, fmt, dot_text, path, path)
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp.", suffix=os.path.splitext(path)[1],
                                   dir=directory)
    except OSError as e:
        raise PynnetError("cannot write %s: %s" % (path, e.strerror or e)) from None
    os.close(fd)
    try:
        _run_dot(dot, fmt, dot_text, tmp, path)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except OSError as e:
        raise PynnetError("cannot write %s: %s" % (path, e.strerror or e)) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _run_dot(dot, fmt, dot_text, out, path):
    """Runs ``dot -T<fmt> -o <out>`` on ``dot_text``; ``path`` names the picture
    in messages."""
    try:
        proc = subprocess.run([dot, "-T" + fmt, "-o", out], input=dot_text.encode("utf-8"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        raise PynnetError("cannot run Graphviz's dot (%s) to make %s: %s"
                          % (dot, path, e.strerror or e)) from None
    message = proc.stderr.decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        raise PynnetError("Graphviz's dot failed (exit status %d) making %s: %s"
                          % (proc.returncode, path, message or "no message"))
    if message:
        log.warning("Graphviz's dot, making %s: %s", path, message)


# -- the graph model -------------------------------------------------------------------

class _Node:
    """One DOT node: ``label`` is an HTML-like label (without the outer <>),
    ``attrs`` the other attributes, ``group`` its layer (None: not in one)."""

    __slots__ = ("id", "label", "attrs", "group", "nnet_node")

    def __init__(self, id_, label, attrs, group, nnet_node=-1):
        self.id = id_
        self.label = label
        self.attrs = attrs
        self.group = group
        self.nnet_node = nnet_node


class _Edge:
    """One DOT edge; ``label`` is plain text, ``dashed`` marks IfDefined,
    ``recurrent`` a recurrence (see the module docstring)."""

    __slots__ = ("tail", "tail_port", "head", "head_port", "label", "dashed", "recurrent")

    def __init__(self, tail, tail_port, head, head_port, label, dashed, recurrent):
        self.tail = tail
        self.tail_port = tail_port
        self.head = head
        self.head_port = head_port
        self.label = label
        self.dashed = dashed
        self.recurrent = recurrent


def _html(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _quote(text):
    return '"%s"' % str(text).replace("\\", "\\\\").replace('"', '\\"')


def _offset_label(offset):
    """``t-3``, ``t+1, x-1``, ``x+2`` for an Offset's Index (n is always 0)."""
    parts = []
    if offset.t != 0:
        parts.append("t%+d" % offset.t)
    if offset.x != 0:
        parts.append("x%+d" % offset.x)
    return ", ".join(parts) if parts else "t"


_INFO_KEY_RE = re.compile(r"(?:^|(?<=[ ,]))([A-Za-z{][-\w{},.]*)=")


def info_attributes(info):
    """The ``key=value`` fields of a Component's ``Info()`` text (e.g.
    ``"TdnnComponent, input-dim=96, ..., time-offsets=-1,0, ..."``), as a dict of
    strings. Values may contain commas, spaces and brackets; a key starts after a
    space or comma outside brackets."""
    keys = []
    depth = 0
    pos = 0
    for m in _INFO_KEY_RE.finditer(info):
        for c in info[pos:m.start()]:
            if c in "[(":
                depth += 1
            elif c in "])":
                depth -= 1
        pos = m.start()
        if depth == 0:
            keys.append(m)
    fields = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(info)
        fields.setdefault(m.group(1), info[m.end():end].rstrip(" ,"))
    return fields


def _strongly_connected(graph):
    """For a graph given as successor lists, a list mapping each vertex to the
    number of its strongly connected component (Tarjan's algorithm, iterative):
    two vertices have the same number exactly when each reaches the other."""
    num = len(graph)
    index = [-1] * num
    low = [0] * num
    on_stack = [False] * num
    component = [-1] * num
    stack = []
    counter = 0
    num_components = 0
    for root in range(num):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            recurse = False
            successors = graph[v]
            while i < len(successors):
                w = successors[i]
                i += 1
                if index[w] == -1:
                    work.append((v, i))
                    work.append((w, 0))
                    recurse = True
                    break
                if on_stack[w]:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    component[w] = num_components
                    if w == v:
                        break
                num_components += 1
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return component


def _component_color(type_name):
    for patterns, color in _FAMILY_COLORS:
        if any(p in type_name for p in patterns):
            return color
    return _DEFAULT_COMPONENT_COLOR


def _layer_of(name, prefixes):
    for prefix in prefixes:
        if name.startswith(prefix):
            return prefix
    dot = name.find(".")
    return name[:dot] if dot > 0 else None


class _GraphBuilder:
    """Builds the nodes and edges of one network's graph, then renders them."""

    def __init__(self, nnet, prefixes, use_color, attributes):
        self.nnet = nnet
        self.names = nnet.node_names
        self.use_color = use_color
        self.attributes = attributes
        self.nodes = {}          # id -> _Node, in creation order
        self.edges = []
        self.num_helpers = 0
        self.unused = set(find_orphan_nodes(nnet))
        self.groups = self._find_groups(prefixes)
        self.scc = _strongly_connected(nnet_to_directed_graph(nnet))
        # Set while drawing the descriptor of one node: its index and layer.
        self.consumer = -1
        self.consumer_group = None

    def _find_groups(self, prefixes):
        """nnet node index -> layer name, for component and dim-range nodes."""
        nnet = self.nnet
        candidate = {}
        members = {}
        for n, name in enumerate(self.names):
            if nnet.nodes[n].node_type not in (kComponent, kDimRange):
                continue
            layer = _layer_of(name, prefixes)
            if layer is not None:
                candidate[n] = layer
                members.setdefault(layer, []).append(n)
        explicit = set(prefixes)
        return {n: layer for n, layer in candidate.items()
                if layer in explicit or len(members[layer]) >= 2}

    # -- nodes ---------------------------------------------------------------------
    def _add(self, node):
        self.nodes[node.id] = node
        return node.id

    def _fill(self, color):
        return {"style": '"filled"', "fillcolor": _quote(color)} if self.use_color else {}

    def _helper(self, kind, label, attrs):
        """A node that draws part of a Descriptor; it lives in the consumer's layer."""
        self.num_helpers += 1
        return self._add(_Node("%%%s%d" % (kind, self.num_helpers), label, attrs,
                               self.consumer_group))

    def _mark_unused(self, n, attrs):
        if n in self.unused:
            style = attrs.get("style", '""').strip('"')
            attrs["style"] = _quote(",".join(s for s in (style, "dashed") if s))
            attrs["color"] = _quote(_UNUSED_COLOR)
            attrs["fontcolor"] = _quote(_UNUSED_COLOR)
            attrs["tooltip"] = _quote("not used to compute any output")
        return attrs

    def _input_node(self, n):
        nnet = self.nnet
        label = "<B>%s</B><BR/>dim=%d" % (_html(self.names[n]), nnet.nodes[n].dim)
        attrs = {"shape": "ellipse"}
        attrs.update(self._fill(_INPUT_COLOR))
        self._add(_Node(self.names[n], label, self._mark_unused(n, attrs), None, n))

    def _output_node(self, n):
        nnet = self.nnet
        objective = "quadratic" if nnet.nodes[n].objective_type == kQuadratic else "linear"
        label = "<B>%s</B><BR/>dim=%d<BR/>objective=%s" % (
            _html(self.names[n]), nnet.node_dim(n), objective)
        attrs = {"shape": "ellipse", "peripheries": "2"}
        attrs.update(self._fill(_OUTPUT_COLOR))
        self._add(_Node(self.names[n], label, attrs, None, n))

    def _component_node(self, n):
        nnet = self.nnet
        node = nnet.nodes[n]
        comp = nnet.components[node.component_index]
        comp_name = nnet.component_names[node.component_index]
        lines = ["<B>%s</B>" % _html(self.names[n]),
                 '<FONT POINT-SIZE="9">%s</FONT>' % _html(comp.type_name),
                 "%d &#8594; %d" % (nnet.node_dim(n - 1), nnet.node_dim(n))]
        if comp_name != self.names[n]:
            lines.insert(1, '<FONT POINT-SIZE="9">component=%s</FONT>' % _html(comp_name))
        if self.attributes:
            fields = info_attributes(comp.info())
            for key in self.attributes:
                if key in fields:
                    lines.append('<FONT POINT-SIZE="9">%s=%s</FONT>'
                                 % (_html(key), _html(fields[key])))
        attrs = {"shape": "box", "style": '"rounded"'}
        if self.use_color:
            attrs["style"] = '"rounded,filled"'
            attrs["fillcolor"] = _quote(_component_color(comp.type_name))
        self._add(_Node(self.names[n], "<BR/>".join(lines), self._mark_unused(n, attrs),
                        self.groups.get(n), n))

    def _dim_range_node(self, n):
        nnet = self.nnet
        node = nnet.nodes[n]
        src = node.node_index
        label = ('<B>%s</B><BR/><FONT POINT-SIZE="9">dim-range %d:%d of %d</FONT>'
                 % (_html(self.names[n]), node.dim_offset, node.dim_offset + node.dim,
                    nnet.node_dim(src)))
        attrs = {"shape": "box", "style": '"rounded"', "margin": '"0.05,0.02"'}
        self._add(_Node(self.names[n], label, self._mark_unused(n, attrs),
                        self.groups.get(n), n))
        self.consumer, self.consumer_group = n, self.groups.get(n)
        self._edge(self.names[src], None, self.names[n], None, [], 0)

    # -- edges ---------------------------------------------------------------------
    def _edge(self, tail, tail_port, head, head_port, labels, optional, recurrent=False):
        label = ", ".join(labels)
        for _ in range(optional):
            label = "IfDefined(%s)" % label if label else "IfDefined"
        self.edges.append(_Edge(tail, tail_port, head, head_port, label, optional > 0,
                                recurrent))

    # -- descriptors -----------------------------------------------------------------
    def _descriptor(self, descriptor, head, n):
        """Draws ``descriptor`` (the input of node ``n``) into node ``head``."""
        self.consumer, self.consumer_group = n, self.groups.get(n)
        parts = descriptor.parts
        if len(parts) == 1:
            self._sum(parts[0], (head, None), 0)
            return
        cells = "".join('<TD PORT="p%d">#%d: %d</TD>' % (i, i, part.dim(self.nnet))
                        for i, part in enumerate(parts))
        label = ('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
                 '<TR>%s</TR><TR><TD COLSPAN="%d"><B>Append</B></TD></TR></TABLE>'
                 % (cells, len(parts)))
        append = self._helper("Append", label, {"shape": "plain"})
        for i, part in enumerate(parts):
            self._sum(part, (append, "p%d" % i), 0)
        self._edge(append, None, head, None, [], 0)

    def _sum(self, part, head, optional):
        """Draws a SumDescriptor into ``head`` = (node id, port or None);
        ``optional`` counts the IfDefined()s around it."""
        if isinstance(part, SimpleSumDescriptor):
            tail, tail_port, labels, recurrent = self._forwarding(part.src)
            self._edge(tail, tail_port, head[0], head[1], labels, optional, recurrent)
        elif isinstance(part, OptionalSumDescriptor):
            self._sum(part.src, head, optional + 1)
        elif isinstance(part, ConstantSumDescriptor):
            label = "Const %s<BR/>dim=%d" % (_html(kaldi_str(part.value)), part.dim_)
            attrs = {"shape": "box", "margin": '"0.05,0.02"', "fontsize": "9"}
            attrs.update(self._fill(_CONST_COLOR))
            const = self._helper("Const", label, attrs)
            self._edge(const, None, head[0], head[1], [], optional)
        elif isinstance(part, BinarySumDescriptor):
            if part.op == kSumOperation:
                terms = []
                self._sum_terms(part, terms)
                node = self._helper("Sum", "<B>+</B>", {"shape": "circle", "width": "0.3",
                                                        "fixedsize": "true", "fontsize": "14",
                                                        "tooltip": '"Sum"'})
                for term in terms:
                    self._sum(term, (node, None), 0)
            else:
                label = ('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
                         '<TR><TD PORT="p0">first</TD><TD PORT="p1">else</TD></TR>'
                         '<TR><TD COLSPAN="2"><B>Failover</B></TD></TR></TABLE>')
                node = self._helper("Failover", label, {"shape": "plain"})
                self._sum(part.src1, (node, "p0"), 0)
                self._sum(part.src2, (node, "p1"), 0)
            self._edge(node, None, head[0], head[1], [], optional)
        else:
            raise PynnetError("cannot draw a descriptor part of type %s"
                              % type(part).__name__)

    @staticmethod
    def _sum_terms(part, terms):
        """The terms of a Sum, nested binary Sums flattened (they are one sum)."""
        for src in (part.src1, part.src2):
            if isinstance(src, BinarySumDescriptor) and src.op == kSumOperation:
                _GraphBuilder._sum_terms(src, terms)
            else:
                terms.append(src)

    def _forwarding(self, fwd, shifted=False):
        """Draws what a ForwardingDescriptor needs and returns (tail node id, tail
        port, edge labels outermost first, whether the edge from the tail is a
        recurrence). ``shifted``: an enclosing expression moves t."""
        if isinstance(fwd, SimpleForwardingDescriptor):
            src = fwd.src_node
            recurrent = self._is_recurrence(src, shifted)
            if fwd.scale == 1.0:
                return self.names[src], None, [], recurrent
            scale = self._helper("Scale", "&#215;%s" % _html(kaldi_str(fwd.scale)),
                                 {"shape": "circle", "margin": "0", "fontsize": "9",
                                  "tooltip": '"Scale"'})
            self._edge(self.names[src], None, scale, None, [], 0, recurrent)
            return scale, None, [], False
        if isinstance(fwd, OffsetForwardingDescriptor):
            label = _offset_label(fwd.offset)
            shifted = shifted or fwd.offset.t != 0
        elif isinstance(fwd, RoundingForwardingDescriptor):
            label = "Round(t, %d)" % fwd.t_modulus
            shifted = shifted or fwd.t_modulus != 1
        elif isinstance(fwd, ReplaceIndexForwardingDescriptor):
            label = "ReplaceIndex(%s, %d)" % (fwd.variable, fwd.value)
            shifted = shifted or fwd.variable == "t"
        elif isinstance(fwd, SwitchingForwardingDescriptor):
            num = len(fwd.srcs)
            cells = "".join('<TD PORT="p%d">%d</TD>' % (i, i) for i in range(num))
            label = ('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
                     '<TR>%s</TR><TR><TD COLSPAN="%d"><B>Switch</B> on t mod %d</TD></TR>'
                     '</TABLE>' % (cells, num, num))
            switch = self._helper("Switch", label, {"shape": "plain"})
            for i, src in enumerate(fwd.srcs):
                tail, tail_port, labels, recurrent = self._forwarding(src, shifted)
                self._edge(tail, tail_port, switch, "p%d" % i, labels, 0, recurrent)
            return switch, None, [], False
        else:
            raise PynnetError("cannot draw a forwarding descriptor of type %s"
                              % type(fwd).__name__)
        tail, tail_port, labels, recurrent = self._forwarding(fwd.src, shifted)
        return tail, tail_port, [label] + labels, recurrent

    def _is_recurrence(self, src, shifted):
        """Whether reading node ``src`` (at a moved t if ``shifted``) from the
        current consumer closes a cycle of the network: a recurrence. Such edges
        are drawn against the flow; the other edges of a cycle (read at the same
        t) are drawn as plain edges."""
        same_cycle = self.scc[src] == self.scc[self.consumer]
        return same_cycle and (shifted or src == self.consumer)

    # -- the whole network -------------------------------------------------------------
    def build(self):
        nnet = self.nnet
        for n, node in enumerate(nnet.nodes):
            t = node.node_type
            if t == kInput:
                self._input_node(n)
            elif t == kComponent:
                self._component_node(n)
                self._descriptor(nnet.nodes[n - 1].descriptor, self.names[n], n)
            elif t == kDimRange:
                self._dim_range_node(n)
            elif t == kDescriptor and nnet.is_output_node(n):
                self._output_node(n)
                self._descriptor(node.descriptor, self.names[n], n)

    def render(self, expand_layers):
        if expand_layers:
            nodes, edges, layer_nodes = list(self.nodes.values()), self.edges, {}
        else:
            nodes, edges, layer_nodes = self._collapse()
        out = ['digraph "nnet3" {',
               '  graph [rankdir=TB, nodesep=0.25, ranksep=0.3, '
               'fontname="Helvetica"];',
               '  node [fontname="Helvetica", fontsize=10, margin="0.1,0.04"];',
               '  edge [fontname="Helvetica", fontsize=9, arrowsize=0.7];']
        # Nodes in creation order; a layer's nodes together where its first one is.
        emitted_layers = set()
        members = {}
        for node in nodes:
            if node.group is not None and node.id not in layer_nodes:
                members.setdefault(node.group, []).append(node)
        for node in nodes:
            group = node.group if node.id not in layer_nodes else None
            if group is None:
                out.append("  " + self._node_line(node))
            elif group not in emitted_layers:
                emitted_layers.add(group)
                out.append("  subgraph %s {" % _quote("cluster_" + group))
                out.append('    label=<<B>%s</B>>; labeljust="l"; style="rounded"; '
                           'color=%s; fontcolor=%s; fontsize=11;'
                           % (_html(group), _quote(_LAYER_COLOR if self.use_color
                                                   else "black"),
                              _quote(_LAYER_COLOR if self.use_color else "black")))
                for member in members[group]:
                    out.append("    " + self._node_line(member))
                out.append("  }")
        for edge in edges:
            out.append("  " + self._edge_line(edge))
        if expand_layers:
            out.extend("  %s -> %s [style=invis];" % (_quote(a), _quote(b))
                       for a, b in self._layer_stacking())
        out.append("}")
        return "\n".join(out) + "\n"

    def _layer_stacking(self):
        """Invisible edges (last node of a layer, first node of the next) for each
        two consecutive layers where the second reads the first: without them the
        layout may start a layer beside the end of the previous one (a recurrent
        layer's last nodes are often not the ones the next layer reads), and a
        stack of such layers drifts sideways as a staircase."""
        members = {}
        for node in self.nodes.values():
            if node.group is not None and node.nnet_node >= 0:
                members.setdefault(node.group, []).append(node.nnet_node)
        reads = set()
        for edge in self.edges:
            tail, head = self.nodes[edge.tail], self.nodes[edge.head]
            if (not edge.recurrent and tail.group is not None and head.group is not None
                    and tail.group != head.group):
                reads.add((tail.group, head.group))
        order = list(members)
        pairs = []
        for a, b in zip(order, order[1:]):
            if (a, b) in reads and max(members[a]) < min(members[b]):
                pairs.append((self.names[max(members[a])], self.names[min(members[b])]))
        return pairs

    @staticmethod
    def _node_line(node):
        attrs = ["label=<%s>" % node.label]
        attrs.extend("%s=%s" % kv for kv in node.attrs.items())
        return "%s [%s];" % (_quote(node.id), ", ".join(attrs))

    def _edge_line(self, edge):
        tail = _quote(edge.tail) + (":%s" % edge.tail_port if edge.tail_port else "")
        head = _quote(edge.head) + (":%s" % edge.head_port if edge.head_port else "")
        attrs = []
        if edge.label:
            attrs.append("label=%s" % _quote(" " + edge.label))
        if edge.dashed:
            attrs.append('style="dashed"')
        if edge.recurrent:
            # Written from head to tail with the arrow reversed: the layout then
            # ranks the source below its user, as in the rest of the network.
            attrs.append("dir=back")
            if self.use_color:
                attrs.append("color=%s, fontcolor=%s" % (_quote(_RECURRENT_COLOR),
                                                         _quote(_RECURRENT_COLOR)))
            tail, head = head, tail
        elif edge.head_port:
            head += ":n"
        return "%s -> %s%s;" % (tail, head, " [%s]" % ", ".join(attrs) if attrs else "")

    def _collapse(self):
        """Nodes and edges with each layer made one node: edges inside a layer are
        dropped, edges into or out of one end at its node (ports dropped), and
        parallel edges of the same style into or out of a layer are merged, their
        labels listed; the other edges stay as they are."""
        layer_id = {}
        order = []
        for node in self.nodes.values():
            if node.group is not None and node.group not in layer_id:
                layer_id[node.group] = "%layer." + node.group
                order.append(node.group)
        where = {node.id: (layer_id[node.group] if node.group is not None else node.id)
                 for node in self.nodes.values()}
        merged = {}
        for edge in self.edges:
            tail, head = where[edge.tail], where[edge.head]
            if tail == head and tail in layer_id.values():
                continue
            tail_port = edge.tail_port if tail == edge.tail else None
            head_port = edge.head_port if head == edge.head else None
            key = (tail, tail_port, head, head_port, edge.dashed, edge.recurrent)
            if tail == edge.tail and head == edge.head:
                key += (len(merged),)     # not at a layer: kept as drawn (Sum(a, a)...)
            if key in merged:
                if edge.label not in merged[key]:
                    merged[key].append(edge.label)
            else:
                merged[key] = [edge.label]
        edges = []
        for (tail, tail_port, head, head_port, dashed, recurrent, *_), labels in merged.items():
            if len(labels) > 1:
                label = ", ".join(label or "t" for label in labels)
            else:
                label = labels[0]
            edges.append(_Edge(tail, tail_port, head, head_port, label, dashed, recurrent))
        # The dims a layer reads from outside and gives outside, by nnet node.
        dims_in = {g: [] for g in order}
        dims_out = {g: [] for g in order}
        for edge in self.edges:
            tail_node = self.nodes[edge.tail]
            head_node = self.nodes[edge.head]
            if where[edge.tail] == where[edge.head]:
                continue
            if head_node.group is not None and tail_node.nnet_node >= 0:
                if tail_node.nnet_node not in dims_in[head_node.group]:
                    dims_in[head_node.group].append(tail_node.nnet_node)
            if tail_node.group is not None and tail_node.nnet_node >= 0:
                if tail_node.nnet_node not in dims_out[tail_node.group]:
                    dims_out[tail_node.group].append(tail_node.nnet_node)
        nodes = []
        layer_nodes = {}
        for node in self.nodes.values():
            if node.group is None:
                nodes.append(node)
            elif layer_id[node.group] not in layer_nodes:
                group = node.group
                layer_members = [m for m in self.nodes.values()
                                 if m.group == group and m.nnet_node >= 0]
                layer = _Node(layer_id[group], self._layer_label(group, layer_members,
                                                                 dims_in[group],
                                                                 dims_out[group]),
                              {"shape": "box", "penwidth": "2",
                               "color": _quote(_LAYER_COLOR if self.use_color else "black")},
                              group)
                if self.use_color:
                    layer.attrs.update({"style": '"filled"', "fillcolor": '"#dae4f2"'})
                layer_nodes[layer.id] = layer
                nodes.append(layer)
        return nodes, edges, layer_nodes

    def _layer_label(self, group, members, dims_in, dims_out):
        nnet = self.nnet
        suffixes = []
        for m in members:
            name = self.names[m.nnet_node]
            suffix = name[len(group):].lstrip(".") or name
            suffixes.append(suffix)
        lines, line = [], ""
        for suffix in suffixes:
            piece = suffix if not line else line + ", " + suffix
            if len(piece) > 48 and line:
                lines.append(line + ",")
                line = suffix
            else:
                line = piece
        lines.append(line)

        def dims(nodes):
            return ", ".join(str(nnet.node_dim(n)) for n in nodes) if nodes else "none"

        return ('<B>%s</B><BR/><FONT POINT-SIZE="9">%s</FONT><BR/>%s &#8594; %s'
                % (_html(group), "<BR/>".join(_html(x) for x in lines), dims(dims_in),
                   dims(dims_out)))
