"""No silent slow path: when a compiled extension cannot be imported, the
Python twins run and one SlowPathWarning (per process) names the extension
and how to build; a user who chooses the twins (PYNNET3_PURE_PYTHON=1 or
pynnet3._fast.use_pure_python()) gets them without a warning. Either way the
computation is the same."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

from conftest import REPO, TEST_DATA

from pynnet3 import _fast

_SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    BLOCKED = set(sys.argv[2:])

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name in BLOCKED:
                raise ImportError("simulated: %s was not built" % name)
            return None

    sys.meta_path.insert(0, Block())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import pynnet3.components
        from pynnet3 import _fast
        from pynnet3.compiler.compiler import Compiler
        from pynnet3.compiler.computation_io import print_computation
        from pynnet3.compiler.request import ComputationRequest
        from pynnet3.components import statistics
        from pynnet3.nnet.nnet import Nnet
        from pynnet3.optimize import analysis
        case = sys.argv[1]
        nnet = Nnet.read(case + "/model.raw")
        request = ComputationRequest.read(case + "/request.txt")
        texts = []
        for _ in range(2):
            compiler = Compiler(request, nnet)
            texts.append(print_computation(compiler.create_computation(), nnet))
        analysis.Analyzer().init(nnet, compiler.create_computation())
    slow = [str(w.message) for w in caught if issubclass(w.category, _fast.SlowPathWarning)]
    print(json.dumps({
        "warnings": slow,
        "same": texts[0] == texts[1] == open(case + "/computation.plain.txt").read(),
        "compiled_compiler": compiler.kernel is not None,
        "compiled_analysis": analysis.Analyzer is not analysis.AnalyzerPy,
        "compiled_indexes": statistics._fast_indexes is not None,
        "failed": sorted(_fast.failed_modules()),
    }))
""")


def _run(blocked=(), env_extra=None):
    env = dict(os.environ)
    env.pop(_fast.PURE_PYTHON_ENV, None)
    env["PYTHONPATH"] = str(REPO)
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(TEST_DATA / "compile" / "case17"),
                          *blocked], cwd=str(REPO), env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_built_extensions_are_used_silently():
    r = _run()
    assert r["warnings"] == [] and r["failed"] == []
    assert r["same"] and r["compiled_compiler"] and r["compiled_analysis"]
    assert r["compiled_indexes"]


def test_missing_extension_warns_once_naming_it_and_how_to_build():
    r = _run(blocked=["pynnet3._fast.computation_graph_kernel", "pynnet3._fast.analysis_kernel"])
    assert len(r["warnings"]) == 1, r["warnings"]
    message = r["warnings"][0]
    # the first extension that failed is named, with the import error
    assert ("pynnet3._fast.computation_graph_kernel could not be imported (simulated: "
            "pynnet3._fast.computation_graph_kernel was not built)" in message
            or "pynnet3._fast.analysis_kernel could not be imported (simulated: "
            "pynnet3._fast.analysis_kernel was not built)" in message), message
    assert "python -m pip install -e ." in message
    assert "python setup.py build_ext --inplace" in message
    assert "PYNNET3_PURE_PYTHON=1" in message
    # the compiler and steps kernels cimport the graph kernel, so they fail with it
    assert {"analysis_kernel", "computation_graph_kernel"} <= set(r["failed"]) <= {
        "analysis_kernel", "computation_graph_kernel", "steps_kernel", "compiler_kernel"}
    # the twins ran and gave the same computation
    assert r["same"] and not r["compiled_compiler"] and not r["compiled_analysis"]
    assert r["compiled_indexes"]       # the other extensions are still used


def test_pure_python_chosen_by_environment_is_silent():
    r = _run(env_extra={_fast.PURE_PYTHON_ENV: "1"})
    assert r["warnings"] == []
    assert r["same"]
    assert not (r["compiled_compiler"] or r["compiled_analysis"] or r["compiled_indexes"])


def test_use_pure_python_switch():
    assert _fast.load("analysis_kernel") is not None
    try:
        _fast.use_pure_python()
        assert _fast.pure_python()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert _fast.load("analysis_kernel") is None
    finally:
        _fast.use_pure_python(False)
    assert _fast.load("analysis_kernel") is not None
