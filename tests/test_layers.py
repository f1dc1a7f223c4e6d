"""The layers point down: no module imports from a layer above its own, no
two modules import each other (directly or round a circle), and imports
inside functions are only of optional dependencies.

``LAYERS`` is the layer list, bottom first: a module may import from its own
package and from the packages of lower layers; the packages of one layer do
not import each other. docs/architecture.md shows the same list (checked
below), with why each layer is where it is.

A kernel in ``pynnet3/_fast`` belongs to the module that owns it: module
``x.py`` loads ``_fast/x_kernel.pyx`` through ``pynnet3._fast.load("x_kernel")``
and no other module loads it. A kernel may use what its owner may use, and
never its owner (that would be a circle) or anything above. The ``.pxd``
headers in ``_fast`` (shared constants, packed Cindexes, slot reads) import
nothing of pynnet3's Python.

Every import counts: top-level, inside functions, ``cimport``, and the
``_fast.load`` of a kernel.
"""

import ast
import re

import pytest

from conftest import REPO

PACKAGE = REPO / "pynnet3"

# Bottom first. To add a package, put it in the lowest layer above
# everything it imports (and say why in docs/architecture.md).
LAYERS = [
    ["pynnet3.errors", "pynnet3._fast", "pynnet3.log"],    # errors; kernel loader; log lines
    ["pynnet3.common"],                                    # Index/Cindex, config lines, floats
    ["pynnet3.io", "pynnet3.numerics"],                    # streams, tables; Kaldi's arithmetic
    ["pynnet3.components", "pynnet3.hmm", "pynnet3.feat"],  # components; TransitionModel; CMVN
    ["pynnet3.nnet"],                                      # nodes, Descriptors, Nnet
    ["pynnet3.compiler", "pynnet3.drawing"],               # the Compiler; drawing a network
    ["pynnet3.optimize", "pynnet3.model"],                 # the optimizer; .mdl, info, context
    ["pynnet3.driver"],                                    # compile + optimize, caching, looped
    ["pynnet3.compute"],                                   # NnetComputer, backends, utterances
    ["pynnet3.decoding"],                                  # decoders, lattices
    ["pynnet3.onnx"],                                      # export
    ["pynnet3.bin"],                                       # the tools
    ["pynnet3.tables"],                                    # tables for Python users
    ["pynnet3.examples", "pynnet3"],                       # the example; the top-level API
]

# Imports allowed inside functions: optional dependencies, which a user
# without them must still be able to import the module for.
OPTIONAL = {"cupy", "cupyx", "onnx", "onnxruntime", "kaldi_io"}

_FROM_RE = re.compile(r"^(\s*)from\s+(\.*[\w.]*)\s+c?import\s+(.*)$")
_IMPORT_RE = re.compile(r"^(\s*)c?import\s+([\w.]+)")
_LOAD_RE = re.compile(r"_fast\.load\(\s*\"(\w+)\"\s*\)")


def _module_name(path):
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    """{module name: path} of every .py, .pyx and .pxd file of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix in (".py", ".pyx", ".pxd") and "__pycache__" not in path.parts:
            name = _module_name(path)
            if path.suffix == ".pxd" and name in found:
                continue      # a .pyx and its .pxd are one module
            found[name] = path
    return found


def _resolve(module, is_package, level, target):
    if level == 0:
        return target
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _target_module(target, names, modules):
    """The modules ``from target import names`` reads: target.name where that
    is a module, else target itself."""
    out = []
    for name in names:
        if "%s.%s" % (target, name) in modules:
            out.append("%s.%s" % (target, name))
        else:
            out.append(target)
    return out


def _imports(module, path, modules):
    """[(imported module, line, inside a function)] for one file."""
    text = path.read_text()
    is_package = path.name == "__init__.py"
    found = []
    if path.suffix == ".py":
        tree = ast.parse(text)

        def visit(node, in_function):
            for child in ast.iter_child_nodes(node):
                inside = in_function or isinstance(child, (ast.FunctionDef,
                                                           ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        found.append((alias.name, child.lineno, in_function))
                elif isinstance(child, ast.ImportFrom):
                    target = _resolve(module, is_package, child.level, child.module)
                    for name in _target_module(target, [a.name for a in child.names], modules):
                        found.append((name, child.lineno, in_function))
                visit(child, inside)
        visit(tree, False)
    else:
        for number, line in enumerate(text.splitlines(), 1):
            m = _FROM_RE.match(line)
            if m:
                spec = m.group(2)
                level = len(spec) - len(spec.lstrip("."))
                target = _resolve(module, False, level, spec.lstrip("."))
                found.append((target, number, bool(m.group(1))))
                continue
            m = _IMPORT_RE.match(line)
            if m:
                found.append((m.group(2), number, bool(m.group(1))))
    for number, line in enumerate(text.splitlines(), 1):
        for kernel in _LOAD_RE.findall(line):
            found.append(("pynnet3._fast." + kernel, number, False))
    return found


def _graph():
    modules = _modules()
    edges = {}
    local = []
    for module, path in modules.items():
        for target, line, in_function in _imports(module, path, modules):
            if in_function and target.split(".")[0] not in OPTIONAL:
                local.append("%s:%d imports %s inside a function"
                             % (path.relative_to(REPO), line, target))
            if target.startswith("pynnet3") and target != module:
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]     # a name inside a module
                edges.setdefault(module, {}).setdefault(target, line)
    return modules, edges, local


def _kernel_owners(modules, edges):
    """{kernel module: owner module} by the naming rule, and the faults."""
    owners, faults = {}, []
    loaders = {}
    for module, targets in edges.items():
        for target in targets:
            if target.startswith("pynnet3._fast.") and target.endswith("_kernel") \
                    and not module.startswith("pynnet3._fast"):
                loaders.setdefault(target, []).append(module)
    for module, path in modules.items():
        if not module.startswith("pynnet3._fast.") or path.suffix == ".pxd":
            continue
        if not module.endswith("_kernel"):
            faults.append("%s: a kernel's name is its owner's module name + _kernel" % module)
            continue
        stem = module.rsplit(".", 1)[1][:-len("_kernel")]
        users = loaders.get(module, [])
        if len(users) != 1 or users[0].rsplit(".", 1)[1] != stem:
            faults.append("%s must be loaded by exactly one module, %s.py (loaded by: %s)"
                          % (module, stem, ", ".join(users) or "none"))
            continue
        owners[module] = users[0]
    return owners, faults


def _package_layer():
    return {package: level for level, packages in enumerate(LAYERS) for package in packages}


def _layer_of(module, owners, layer):
    """(package, layer index) of a module."""
    if module in owners:
        module = owners[module]
    if module.startswith("pynnet3._fast"):
        return "pynnet3._fast", layer["pynnet3._fast"]
    parts = module.split(".")
    for k in range(len(parts), 1, -1):
        package = ".".join(parts[:k])
        if package in layer:
            return package, layer[package]
    if module in layer:                      # the top-level package itself
        return module, layer[module]
    raise AssertionError("module %s is in no layer: add its package to LAYERS" % module)


def test_every_package_has_a_layer():
    layer = _package_layer()
    missing = []
    for path in sorted(PACKAGE.iterdir()):
        name = "pynnet3." + path.stem
        if (path.is_dir() and (path / "__init__.py").exists()) or path.suffix == ".py":
            if name not in layer and path.name != "__init__.py":
                missing.append(name)
    assert not missing, "packages without a layer in LAYERS: %s" % missing


def test_kernels_follow_the_naming_rule():
    modules, edges, _ = _graph()
    _, faults = _kernel_owners(modules, edges)
    assert not faults, "\n".join(faults)


def test_no_import_from_a_higher_layer():
    modules, edges, _ = _graph()
    owners, _ = _kernel_owners(modules, edges)
    layer = _package_layer()
    wrong = []
    for module, targets in sorted(edges.items()):
        package, level = _layer_of(module, owners, layer)
        for target, line in sorted(targets.items()):
            if module in owners and target == owners[module]:
                wrong.append("%s:%d imports its owner %s" % (modules[module].relative_to(REPO),
                                                             line, target))
                continue
            target_package, target_level = _layer_of(target, owners, layer)
            if target_package == package or target_package == "pynnet3._fast" \
                    and not target.endswith("_kernel"):
                continue
            if target_level > level or (target_level == level and target_package != package
                                        and package != "pynnet3"):
                wrong.append("%s:%d (%s) imports %s (%s)" % (
                    modules[module].relative_to(REPO), line, package, target, target_package))
    assert not wrong, "imports that do not point down:\n" + "\n".join(wrong)


def _circles(edges):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(root):
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    scc.append(m)
                    if m == node:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return out


def test_no_import_circles():
    _, edges, _ = _graph()
    assert sum(len(t) for t in edges.values()) > 300     # the analysis sees the imports
    circles = _circles(edges)
    assert not circles, "modules that import each other:\n" + "\n".join(
        " <-> ".join(c) for c in circles)


def test_imports_inside_functions_are_optional_dependencies_only():
    _, _, local = _graph()
    assert not local, "\n".join(local)


def test_no_tool_imports_another_tool():
    """A tool (pynnet3/bin/x.py) is a program, not a library: what tools share
    lives in pynnet3/bin/_*.py or in the layers below. (The shipped example,
    above the tools, runs nnet3-compute's main().)"""
    _, edges, _ = _graph()
    tools = {m for m in _modules() if m.startswith("pynnet3.bin.")
             and not m.rsplit(".", 1)[1].startswith("_")}
    assert len(tools) > 20
    wrong = ["%s imports the tool %s" % (module, target)
             for module, targets in sorted(edges.items()) if module.startswith("pynnet3.bin.")
             for target in sorted(targets) if target in tools]
    assert not wrong, "\n".join(wrong)


def test_architecture_page_lists_the_layers():
    text = (REPO / "docs" / "architecture.md").read_text()
    listed = re.findall(r"^\| *(\d+) *\| *(.*?) *\|", text, re.M)
    assert listed, "docs/architecture.md has no layer table"
    documented = [[p.strip().strip("`") for p in packages.split(",")]
                  for _, packages in listed]
    assert documented == LAYERS, "docs/architecture.md's layer table differs from LAYERS"


def test_the_checks_see_an_upward_import(tmp_path):
    """The analysis finds what it must: an upward import, a circle and a
    function-local import in a made-up graph."""
    edges = {"a": {"b": 1}, "b": {"a": 2}}
    assert _circles(edges) == [["a", "b"]]
    layer = {"pynnet3.common": 1, "pynnet3.nnet": 4, "pynnet3._fast": 0}
    assert _layer_of("pynnet3.common.index", {}, layer) == ("pynnet3.common", 1)
    with pytest.raises(AssertionError):
        _layer_of("pynnet3.nowhere.x", {}, layer)
