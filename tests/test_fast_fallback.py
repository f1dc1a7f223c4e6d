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
        "compiled_indexes": statistics._kernel is not None,
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


def test_select_takes_the_kernels_object_named_like_each_twin():
    from pynnet3.numerics import kaldi_libm
    from pynnet3.optimize import analysis
    kernel = _fast.load("analysis_kernel")
    assert _fast.select(kernel, analysis.AnalyzerPy, analysis.compute_matrix_accesses_py) == (
        kernel.Analyzer, kernel.compute_matrix_accesses)
    assert _fast.select(None, analysis.AnalyzerPy, kaldi_libm.exp_rows_py) == (
        analysis.AnalyzerPy, kaldi_libm.exp_rows_py)
    assert _fast.kernel_name(kaldi_libm.exp_rows_py) == "exp_rows"
    try:
        _fast.kernel_name(kaldi_libm.expf)
    except ValueError as e:
        assert "expf is not named as a kernel's twin" in str(e)
    else:
        raise AssertionError("kernel_name accepted a name without _py/Py")


# A tree without any built kernel: decoding one utterance (compiling,
# optimizing and computing the network, the search, determinization) and
# compiling a request, in a process where every pynnet3._fast kernel fails to
# import; the same run with the kernels gives the same results.
_WHOLE_TREE_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys, warnings
    BLOCK_ALL = sys.argv[1] == "block"

    class Block:
        def find_spec(self, name, path=None, target=None):
            if BLOCK_ALL and name.startswith("pynnet3._fast."):
                raise ImportError("simulated: %s was not built" % name)
            return None

    sys.meta_path.insert(0, Block())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import pynnet3
        from pynnet3 import _fast
        from pynnet3.compiler.computation_io import print_computation
        from pynnet3.compiler.request import ComputationRequest
        from pynnet3.io.table import read_table
        from pynnet3.nnet.nnet import Nnet
        data, case = sys.argv[2], sys.argv[3]
        feats = dict(read_table("ark:" + data + "/feats.ark"))
        ivectors = dict(read_table("ark:" + data + "/online-ivectors.ark"))
        result = pynnet3.decode(data + "/final.mdl", data + "/HCLG.fst", feats["utt2"],
                                online_ivectors=ivectors["utt2"], online_ivector_period=10,
                                beam=8, lattice_beam=4, max_active=200, backend="numpy")
        nnet = Nnet.read(case + "/model.raw")
        request = ComputationRequest.read(case + "/request.txt")
        text = print_computation(pynnet3.compile(nnet, request, optimize=False), nnet)
        optimized = print_computation(pynnet3.compile(nnet, request), nnet)
    slow = [str(w.message) for w in caught if issubclass(w.category, _fast.SlowPathWarning)]
    print(json.dumps({
        "warnings": slow,
        "failed": sorted(_fast.failed_modules()),
        "kernels": sorted(name for name, module in list(sys.modules.items())
                          if name.startswith("pynnet3.")
                          and getattr(module, "_kernel", None) is not None),
        "words": result.words,
        "alignment": result.alignment,
        "lattice": hashlib.sha256(result.lattice.write_binary()).hexdigest(),
        "likelihood": result.likelihood,
        "compiled": text == open(case + "/computation.plain.txt").read(),
        "optimized": hashlib.sha256(optimized.encode()).hexdigest(),
    }))
""")


def _run_whole_tree(mode, env_extra=None):
    env = dict(os.environ)
    env.pop(_fast.PURE_PYTHON_ENV, None)
    env["PYTHONPATH"] = str(REPO)
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", _WHOLE_TREE_SCRIPT, mode,
                          str(TEST_DATA / "decode" / "tdnn_lda"),
                          str(TEST_DATA / "compile" / "case17")],
                         cwd=str(REPO), env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tree_without_kernels_decodes_compiles_and_computes_the_same():
    built = _run_whole_tree("built")
    assert built["warnings"] == [] and built["failed"] == []
    bare = _run_whole_tree("block")
    assert len(bare["warnings"]) == 1, bare["warnings"]
    assert "could not be imported" in bare["warnings"][0]
    assert "compiler_kernel" in bare["failed"] and "lattice_faster_decoder_kernel" in \
        bare["failed"] and "determinize_lattice_kernel" in bare["failed"]
    assert "pynnet3.decoding.lattice_faster_decoder" in built["kernels"]
    assert "pynnet3.compiler.compiler" in built["kernels"] and bare["kernels"] == []
    assert built["compiled"] and bare["compiled"]
    for key in ("words", "alignment", "lattice", "likelihood", "optimized"):
        assert bare[key] == built[key], key


def test_tree_with_twins_chosen_decodes_compiles_and_computes_the_same():
    built = _run_whole_tree("built")
    pure = _run_whole_tree("built", {_fast.PURE_PYTHON_ENV: "1"})
    assert pure["warnings"] == [] and pure["failed"] == [] and pure["kernels"] == []
    assert pure["compiled"]
    for key in ("words", "alignment", "lattice", "likelihood", "optimized"):
        assert pure[key] == built[key], key
