#!/usr/bin/env python3
"""Writes docs/api.md, the reference of pynnet3's public API, from the
docstrings of the top-level names (``pynnet3.__all__``), the methods a user
calls on them, and ``pynnet3.examples``.

    python scripts/make_api_doc.py           # rewrite docs/api.md
    python scripts/make_api_doc.py --check   # exit 1 if it is stale or a docstring lacks a section

The docstrings use Google-style sections (``Args:``, ``Returns:``,
``Raises:``) and an ``Example::`` block; the example becomes a fenced Python
block, which tests/test_docs.py runs like every block of the docs, and an
``Output::`` block after it what the example must print. Other ``::``
blocks become text blocks (not run). tests/test_docs.py checks that
docs/api.md is up to date and that every documented name has its sections.
"""

import inspect
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(os.path.dirname(HERE), "docs", "api.md")

# The reference's sections: (title, top-level names).
GROUPS = [
    ("Models", ["Nnet", "nnet_info", "AmNnetSimple", "prepare_for_test"]),
    ("Kaldi tables and objects", ["read_table", "open_table", "write_table", "TableWriter",
                                  "read_object", "write_object"]),
    ("Computing as Kaldi's tools do", ["compute_utterance", "compute_table", "compute_xvector",
                                       "DecodableNnetLoopedOnline"]),
    ("Decoding", ["Decoder", "decode"]),
    ("Any computation, Kaldi's way", ["ComputationRequest", "compile", "NnetComputer"]),
    ("Pictures of a network", ["draw"]),
    ("Errors", ["PynnetError"]),
]

# The methods a user calls, per class (documented with their own sections).
METHODS = {
    "Nnet": ["read", "from_config", "write", "copy", "input_dim", "output_dim",
             "get_node_names", "num_components"],
    "AmNnetSimple": ["read", "write", "info", "num_pdfs"],
    "TableWriter": ["write", "close", "abort"],
    "DecodableNnetLoopedOnline": ["accept_features", "input_finished", "get_new_outputs",
                                  "get_new_scaled_log_likelihoods", "num_frames_ready",
                                  "get_output_for_frame",
                                  "get_scaled_log_likelihoods_for_frame", "is_last_frame"],
    "Decoder": ["__call__"],
    "ComputationRequest": ["read", "write"],
    "NnetComputer": ["accept_input", "run", "get_output"],
}

EXAMPLES = ["path", "FILES", "main"]

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc):`~?([^`]+)`")
_SECTION = re.compile(r"^(Args|Arguments|Returns|Yields|Raises|Attributes|Example|Examples|"
                      r"Output):(:?)\s*$")


def _inline(text):
    text = _ROLE.sub(lambda m: "`%s`" % m.group(1).split(" <", 1)[0], text)
    return text.replace("``", "`")


def _dedent_block(lines):
    indents = [len(l) - len(l.lstrip()) for l in lines if l.strip()]
    cut = min(indents) if indents else 0
    out = [l[cut:] for l in lines]
    while out and not out[-1].strip():
        out.pop()
    while out and not out[0].strip():
        out.pop(0)
    return out


def _indented_block(lines, i, base):
    """The lines from i on that are blank or indented deeper than ``base``."""
    j = i
    while j < len(lines) and (not lines[j].strip()
                              or len(lines[j]) - len(lines[j].lstrip()) > base):
        j += 1
    return lines[i:j], j


def _entries(block):
    """Section entries 'name: text' (continuation lines indented deeper)."""
    block = _dedent_block(block)
    entries = []
    for line in block:
        if line and not line[0].isspace() and (":" in line or not entries):
            entries.append(line.strip())
        elif entries:
            entries[-1] += " " + line.strip()
    return entries


def render_docstring(doc):
    """Markdown for one docstring."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _SECTION.match(line.strip()) if len(line) - len(line.lstrip()) == 0 else None
        if m:
            name, literal = m.group(1), m.group(2)
            block, i = _indented_block(lines, i + 1, 0)
            if name.startswith("Example"):
                out += ["**Example:**", "", "```python"] + _dedent_block(block) + ["```", ""]
            elif name == "Output":      # what the example prints (checked by the tests)
                out += ["```output"] + _dedent_block(block) + ["```", ""]
            elif name in ("Returns", "Yields"):
                out += ["**%s:** %s" % (name, _inline(" ".join(
                    l.strip() for l in block if l.strip()))), ""]
            else:
                out += ["**%s:**" % name, ""]
                for entry in _entries(block):
                    key, sep, text = entry.partition(":")
                    if sep and re.fullmatch(r"[\w*., ]+", key):
                        out.append("- `%s`: %s" % (key.strip(), _inline(text.strip())))
                    else:
                        out.append("- %s" % _inline(entry))
                out.append("")
            continue
        if line.rstrip().endswith("::"):
            text = line.rstrip()[:-2].rstrip()
            if text:
                out.append(_inline(text) + ":")
            block, i = _indented_block(lines, i + 1, len(line) - len(line.lstrip()))
            out += ["", "```text"] + _dedent_block(block) + ["```", ""]
            continue
        out.append(_inline(line))
        i += 1
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def _signature(name, obj):
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return name
    params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
    return name + str(sig.replace(parameters=params, return_annotation=sig.empty))


def _method_doc(cls, name):
    for klass in cls.__mro__:
        if name in vars(klass):
            attr = vars(klass)[name]
            return attr
    raise AttributeError("%s has no method %s" % (cls.__name__, name))


def _unwrap(attr):
    if isinstance(attr, (classmethod, staticmethod)):
        return attr.__func__, ("classmethod" if isinstance(attr, classmethod) else
                               "staticmethod")
    return attr, ""


def _public(name):
    """The object a top-level name stands for. ``pynnet3.compile`` and
    ``pynnet3.decode`` are also callable packages (importing a submodule
    binds the package's name); the reference documents the functions."""
    import importlib
    import pynnet3
    module, attr = pynnet3._EXPORTS[name]
    return getattr(importlib.import_module(module), attr)


def documented():
    """(qualified name, object, kind) for every documented public name and method."""
    import pynnet3
    import pynnet3.examples as examples
    items = []
    for _, names in GROUPS:
        for name in names:
            obj = _public(name)
            kind = "class" if inspect.isclass(obj) else "function"
            items.append(("pynnet3." + name, obj, kind))
            for method in METHODS.get(name, []):
                func, _ = _unwrap(_method_doc(obj, method))
                items.append(("pynnet3.%s.%s" % (name, method), func, "method"))
    for name in EXAMPLES:
        obj = getattr(examples, name)
        items.append(("pynnet3.examples." + name, obj,
                      "data" if not callable(obj) else "function"))
    return items


def _takes_arguments(obj, kind):
    target = obj.__init__ if kind == "class" else obj
    try:
        params = [p for p in inspect.signature(target).parameters.values()
                  if p.name not in ("self", "cls")]
    except (TypeError, ValueError):
        return False
    return bool(params)


def check():
    """Problems with the docstrings: a list of strings (empty when fine)."""
    problems = []
    for qualname, obj, kind in documented():
        doc = inspect.getdoc(obj) if kind != "data" else "data"
        if kind == "data":
            continue
        if not doc:
            problems.append("%s has no docstring" % qualname)
            continue
        need = []
        if kind == "class" and issubclass(obj, BaseException):
            need = ["Example::"]        # raised by pynnet3, not called
        elif _takes_arguments(obj, kind):
            need.append("Args:")
        if not (kind == "class" and issubclass(obj, BaseException)):
            if kind in ("function", "method"):
                need.append("Returns:")
            if kind in ("function", "class") or qualname.endswith("__call__"):
                need.append("Raises:")
            if kind in ("function", "class") and qualname.count(".") == 1:
                need.append("Example::")
        for section in need:
            if not re.search(r"^%s\s*$" % re.escape(section), doc, re.M):
                problems.append("%s: its docstring has no %s section" % (qualname, section))
    return problems


def render():
    """The text of docs/api.md."""
    import pynnet3
    import pynnet3.examples as examples
    out = ["# API reference", "",
           "The public names of `pynnet3` (`import pynnet3`), by task, with the methods you "
           "call on them, and `pynnet3.examples`. Everything else lives in the subpackages "
           "and is importable from its module, but may move between versions.", "",
           "This page is generated from the docstrings by `python scripts/make_api_doc.py`; "
           "every example on it runs in the test suite (`tests/test_docs.py`).", ""]
    for title, names in GROUPS:
        out.append("- %s: %s" % (title, ", ".join(
            "[`%s`](#pynnet3%s)" % (n, n.lower()) for n in names)))
    out.append("- Example files: [`pynnet3.examples`](#pynnet3examples)")
    out.append("")
    for title, names in GROUPS:
        out += ["## %s" % title, ""]
        for name in names:
            obj = _public(name)
            is_class = inspect.isclass(obj)
            out += ["### pynnet3.%s" % name, ""]
            sig = _signature(name, obj)
            out += ["```text", ("class " if is_class else "") + "pynnet3." + sig, "```", ""]
            out += [render_docstring(inspect.getdoc(obj)), ""]
            for method in METHODS.get(name, []):
                func, decorator = _unwrap(_method_doc(obj, method))
                shown = name + "." + method if method != "__call__" else name.lower()
                label = "%s.%s" % (name, method) if method != "__call__" else \
                    "%s.__call__" % name
                out += ["#### %s" % label, ""]
                prefix = decorator + " " if decorator else ""
                call = _signature(shown, func)
                if decorator == "classmethod":
                    call = call.replace("(cls, ", "(").replace("(cls)", "()")
                out += ["```text", prefix + call, "```", ""]
                out += [render_docstring(inspect.getdoc(func)), ""]
    out += ["## pynnet3.examples", "", render_docstring(examples.__doc__), ""]
    for name in EXAMPLES:
        obj = getattr(examples, name)
        out += ["### pynnet3.examples.%s" % name, ""]
        if callable(obj):
            out += ["```text", "pynnet3.examples." + _signature(name, obj), "```", "",
                    render_docstring(inspect.getdoc(obj)), ""]
        else:
            out += ["A dict, file name -> what the file holds:", ""]
            out += ["- `%s`: %s" % kv for kv in obj.items()]
            out.append("")
    text = "\n".join(out)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") + "\n"


def main(argv):
    problems = check()
    for p in problems:
        sys.stderr.write("make_api_doc: %s\n" % p)
    text = render()
    if "--check" in argv:
        with open(OUTPUT, encoding="utf-8") as f:
            stale = f.read() != text
        if stale:
            sys.stderr.write("make_api_doc: docs/api.md is stale\n")
        return 1 if stale or problems else 0
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
