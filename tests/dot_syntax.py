"""A small structural parser for Graphviz DOT text, to check what
pynnet3.drawing writes without needing Graphviz.

:func:`parse_dot` tokenizes (IDs, numerals, quoted strings with escapes,
HTML-like strings with nested ``<...>``, comments) and parses the DOT grammar
(graph, statements, attribute lists, subgraphs, edges with ports); it raises
:class:`DotSyntaxError` on any unbalanced brace, bracket, quote or ``<``, on a
statement the grammar does not allow, and on the stricter rules pynnet3's
graphs follow: every node is declared exactly once by a node statement, every
edge's endpoints are declared nodes, and a port an edge names is a ``PORT``
of that node's HTML label.
"""

import re


class DotSyntaxError(AssertionError):
    pass


_PUNCT = ("->", "--", "{", "}", "[", "]", "=", ";", ",", ":")
_ID_RE = re.compile(r"[A-Za-z_\x80-\uffff][A-Za-z_0-9\x80-\uffff]*")
_NUM_RE = re.compile(r"-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)")


def tokenize(text):
    """(kind, value) pairs; kind is 'id', 'html' or the punctuation itself."""
    tokens = []
    pos, size = 0, len(text)
    while pos < size:
        c = text[pos]
        if c.isspace():
            pos += 1
        elif text.startswith("//", pos) or (c == "#" and (pos == 0 or text[pos - 1] == "\n")):
            end = text.find("\n", pos)
            pos = size if end < 0 else end
        elif text.startswith("/*", pos):
            end = text.find("*/", pos + 2)
            if end < 0:
                raise DotSyntaxError("unterminated /* comment")
            pos = end + 2
        elif c == '"':
            i = pos + 1
            value = []
            while True:
                if i >= size:
                    raise DotSyntaxError("unterminated quoted string at offset %d" % pos)
                if text[i] == "\\" and i + 1 < size:
                    value.append(text[i:i + 2] if text[i + 1] != '"' else '"')
                    i += 2
                elif text[i] == '"':
                    break
                else:
                    value.append(text[i])
                    i += 1
            tokens.append(("id", "".join(value)))
            pos = i + 1
        elif c == "<":
            depth, i = 0, pos
            while True:
                if i >= size:
                    raise DotSyntaxError("unterminated HTML string at offset %d" % pos)
                if text[i] == "<":
                    depth += 1
                elif text[i] == ">":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            tokens.append(("html", text[pos + 1:i]))
            pos = i + 1
        else:
            for p in _PUNCT:
                if text.startswith(p, pos):
                    tokens.append((p, p))
                    pos += len(p)
                    break
            else:
                m = _ID_RE.match(text, pos) or _NUM_RE.match(text, pos)
                if not m:
                    raise DotSyntaxError("unexpected character %r at offset %d" % (c, pos))
                tokens.append(("id", m.group(0)))
                pos = m.end()
    return tokens


class DotGraph:
    """What :func:`parse_dot` found: ``nodes`` (id -> attribute dict, in order),
    ``edges`` (dicts: tail, tail_port, head, head_port, attrs), ``clusters``
    (subgraph name -> list of node ids declared inside it), ``directed``."""

    def __init__(self):
        self.nodes = {}
        self.edges = []
        self.clusters = {}
        self.directed = True
        self.graph_attrs = {}

    def edges_between(self, tail, head):
        return [e for e in self.edges if e["tail"] == tail and e["head"] == head]

    def edges_into(self, head):
        return [e for e in self.edges if e["head"] == head]

    def edges_from(self, tail):
        return [e for e in self.edges if e["tail"] == tail]


class _Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.pos = 0
        self.graph = DotGraph()
        self.subgraph_stack = []

    def peek(self, k=0):
        i = self.pos + k
        return self.tokens[i][0] if i < len(self.tokens) else None

    def next(self):
        if self.pos >= len(self.tokens):
            raise DotSyntaxError("unexpected end of input (unbalanced braces?)")
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def expect(self, kind):
        tok = self.next()
        if tok[0] != kind:
            raise DotSyntaxError("expected %r, got %r" % (kind, tok[1]))
        return tok[1]

    def is_id(self, k=0):
        return self.peek(k) in ("id", "html")

    def parse(self):
        if self.is_id() and self.tokens[self.pos][1].lower() == "strict":
            self.next()
        kind = self.expect("id").lower()
        if kind not in ("graph", "digraph"):
            raise DotSyntaxError("expected 'graph' or 'digraph', got %r" % kind)
        self.graph.directed = kind == "digraph"
        if self.is_id():
            self.next()
        self.expect("{")
        self.stmt_list()
        self.expect("}")
        if self.pos != len(self.tokens):
            raise DotSyntaxError("text after the graph's closing brace: %r"
                                 % (self.tokens[self.pos][1],))
        self.check()
        return self.graph

    def stmt_list(self):
        while self.peek() not in ("}", None):
            self.stmt()
            if self.peek() == ";":
                self.next()

    def attr_list(self):
        attrs = {}
        while self.peek() == "[":
            self.next()
            while self.peek() != "]":
                if not self.is_id():
                    raise DotSyntaxError("expected an attribute name, got %r"
                                         % (self.tokens[self.pos][1],))
                key = self.next()[1]
                self.expect("=")
                if not self.is_id():
                    raise DotSyntaxError("expected a value for attribute %s" % key)
                attrs[key] = self.next()
                if self.peek() in (";", ","):
                    self.next()
            self.expect("]")
        return attrs

    def node_id(self):
        if not self.is_id():
            raise DotSyntaxError("expected a node id, got %r" % (self.tokens[self.pos][1],))
        name = self.next()[1]
        port = None
        if self.peek() == ":":
            self.next()
            port = self.expect("id")
            if self.peek() == ":":
                self.next()
                compass = self.expect("id")
                if compass not in ("n", "ne", "e", "se", "s", "sw", "w", "nw", "c", "_"):
                    raise DotSyntaxError("bad compass point %r" % compass)
            elif port in ("n", "ne", "e", "se", "s", "sw", "w", "nw", "c", "_"):
                port = None
        return name, port

    def stmt(self):
        kind = self.peek()
        value = self.tokens[self.pos][1] if kind else None
        if kind == "{" or (kind == "id" and value.lower() == "subgraph"):
            self.subgraph()
            return
        if kind == "id" and value.lower() in ("graph", "node", "edge") and self.peek(1) == "[":
            self.next()
            attrs = self.attr_list()
            if value.lower() == "graph":
                self.graph.graph_attrs.update(attrs)
            return
        if self.is_id() and self.peek(1) == "=":
            self.next()
            self.next()
            if not self.is_id():
                raise DotSyntaxError("expected a value after %s=" % value)
            self.next()
            return
        name, port = self.node_id()
        if self.peek() in ("->", "--"):
            endpoints = [(name, port)]
            while self.peek() in ("->", "--"):
                op = self.next()[0]
                if op != ("->" if self.graph.directed else "--"):
                    raise DotSyntaxError("edge operator %s in a %s" % (
                        op, "digraph" if self.graph.directed else "graph"))
                if self.peek() == "{" or (self.is_id() and
                                          self.tokens[self.pos][1] == "subgraph"):
                    raise DotSyntaxError("subgraph as an edge endpoint (not used by "
                                         "pynnet3)")
                endpoints.append(self.node_id())
            attrs = self.attr_list()
            for (t, tp), (h, hp) in zip(endpoints, endpoints[1:]):
                self.graph.edges.append({"tail": t, "tail_port": tp, "head": h,
                                         "head_port": hp, "attrs": attrs})
            return
        if port is not None:
            raise DotSyntaxError("node statement with a port: %s:%s" % (name, port))
        attrs = self.attr_list()
        if name in self.graph.nodes:
            raise DotSyntaxError("node %r declared twice" % name)
        self.graph.nodes[name] = attrs
        for cluster in self.subgraph_stack:
            if cluster is not None:
                self.graph.clusters[cluster].append(name)

    def subgraph(self):
        name = None
        if self.peek() == "id" and self.tokens[self.pos][1].lower() == "subgraph":
            self.next()
            if self.is_id():
                name = self.next()[1]
        if name is not None:
            if name in self.graph.clusters:
                raise DotSyntaxError("subgraph %r declared twice" % name)
            self.graph.clusters[name] = []
        self.subgraph_stack.append(name)
        self.expect("{")
        self.stmt_list()
        self.expect("}")
        self.subgraph_stack.pop()

    def check(self):
        nodes = self.graph.nodes
        for e in self.graph.edges:
            for end, port in ((e["tail"], e["tail_port"]), (e["head"], e["head_port"])):
                if end not in nodes:
                    raise DotSyntaxError("edge %s -> %s: node %r is not declared"
                                         % (e["tail"], e["head"], end))
                if port is not None:
                    label = nodes[end].get("label")
                    if label is None or label[0] != "html" or \
                            ('PORT="%s"' % port) not in label[1]:
                        raise DotSyntaxError("edge %s -> %s: node %r has no port %r"
                                             % (e["tail"], e["head"], end, port))


def parse_dot(text):
    """Parses DOT text (see the module docstring); returns a :class:`DotGraph`."""
    return _Parser(tokenize(text)).parse()


def attr(attrs, key):
    """The value of attribute ``key`` (the text of a quoted or HTML value), or None."""
    value = attrs.get(key)
    return None if value is None else value[1]
