"""Registering an options dataclass on a tool's parser under a prefix, as
Kaldi's ``ParseOptions prefixed("optimization", &po); opts.Register(&prefixed)``
does: every field ``some_name`` becomes ``--PREFIX.some-name`` with the
field's default and documentation.

A dataclass takes part by giving each field ``metadata={"doc": ...}``;
``"hidden": True`` keeps a field off the command line (Kaldi's hidden
configs) and ``"kind": "double"`` marks a float that is not rounded to
float32 (BaseFloat is the default for ``float`` fields).
"""

from dataclasses import fields, replace


def _kind(f):
    kind = f.metadata.get("kind")
    if kind:
        return kind
    return {bool: "bool", int: "int", float: "float", str: "str",
            "bool": "bool", "int": "int", "float": "float", "str": "str"}[f.type]


def _key(prefix, name):
    return "%s.%s" % (prefix, name) if prefix else name


def register_options(parser, prefix, defaults):
    """Registers every visible field of the dataclass instance ``defaults``
    on ``parser`` (a ToolParser) as ``--PREFIX.NAME`` (``--NAME`` when
    ``prefix`` is empty, as Kaldi registers some structs directly)."""
    for f in fields(defaults):
        if f.metadata.get("hidden"):
            continue
        name = _key(prefix, f.name.replace("_", "-"))
        register = getattr(parser, "register_" + _kind(f))
        register(name, getattr(defaults, f.name), f.metadata.get("doc", ""))


def options_from(opts, prefix, defaults):
    """The dataclass instance that ``parser.parse`` produced for ``prefix``:
    ``defaults`` with every registered field replaced by the parsed value."""
    parsed = vars(opts)
    changes = {}
    for f in fields(defaults):
        key = _key(prefix, f.name)
        if key in parsed:
            changes[f.name] = parsed[key]
    return replace(defaults, **changes)
