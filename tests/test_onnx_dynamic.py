"""The length-generic lowering (pynnet3.onnx.dynamic) and the export layer's
place in the package (issue 18).

- the symbolic intervals (Expr): folding, order, printing and parsing;
- graphs for chunks of any length against pynnet3's own chunk computation
  (SimpleNnetComputer, which matches Kaldi) for chunks of many lengths, with
  initial and final extra context: every output within 1e-4 * max(1, |ref|),
  and the computable range says exactly which chunks exist;
- what it cannot write is refused with the node's name;
- only the tools import pynnet3.onnx, and the rest of pynnet3 imports
  without onnx or onnxruntime installed.
"""

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pynnet3.onnx.dynamic import Expr, _ge  # the symbolic part needs no onnx

REPO = Path(__file__).resolve().parent.parent


def test_expr_folds_and_orders():
    t = Expr.var_("T")
    assert Expr.max(Expr.const(3), Expr.const(5)) == Expr.const(5)
    assert Expr.min(t - 2, t - 7) == t - 7
    assert Expr.max(Expr.inf(-1), t) == t and Expr.min(Expr.inf(-1), t).is_inf(-1)
    mixed = Expr.max(Expr.const(2), Expr.var_("S", 1))
    assert mixed.eval({"S": 4}) == 5 and mixed.eval({"S": -3}) == 2
    assert _ge(t + 1, t) and not _ge(t, t + 1)
    assert _ge(mixed, Expr.const(2)) and not _ge(Expr.const(2), mixed)
    for e in (t - 9, Expr.const(-4), Expr.inf(1), mixed, Expr.min(t, Expr.const(10000))):
        assert Expr.parse(str(e)) == e


pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")

from conftest import KALDI_REF  # noqa: E402
import pynnet3  # noqa: E402
from pynnet3.compute.utterance import (ChunkLayout, SimpleComputationOptions,  # noqa: E402
                                       SimpleNnetComputer, prepare_nnet_for_compute)
from pynnet3.errors import ComputationError  # noqa: E402
from pynnet3.onnx.components import NotLowerable  # noqa: E402
from pynnet3.onnx.export import chunk_model  # noqa: E402
from pynnet3.onnx.runtime import check_computable, output_computable  # noqa: E402

MODELS = ["gru", "tdnn_lstm", "blstm", "xvector", "cnn_tdnn_attention", "misc_layers",
          "tdnnf_chain"]


@pytest.mark.parametrize("name", MODELS)
def test_any_length_chunks_match_pynnet3(name):
    folder = KALDI_REF / "models" / name
    if not folder.is_dir():
        pytest.skip("kaldi-ref not present")
    nnet = pynnet3.Nnet.read(str(folder / "model.raw"))
    prepare_nnet_for_compute(nnet)
    opts = SimpleComputationOptions(frames_per_chunk=9, extra_left_context=4,
                                    extra_right_context=2, extra_left_context_initial=1,
                                    extra_right_context_final=0,
                                    frame_subsampling_factor=1 if name != "tdnnf_chain" else 3)
    model = chunk_model(nnet, opts, any_length=True)
    meta = {p.key: p.value for p in model.metadata_props}
    computable = output_computable(meta)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    reference = SimpleNnetComputer(nnet, opts)
    layout = ChunkLayout(opts, reference.nnet_left_context, reference.nnet_right_context,
                         nnet.modulus())
    rng = np.random.default_rng(5)
    has_ivector = nnet.input_dim("ivector") > 0
    for num_frames in (1, 2, 5, 9, 13, 31, 64):
        feats = rng.standard_normal((num_frames, nnet.input_dim("input"))).astype(np.float32)
        ivector = (rng.standard_normal(nnet.input_dim("ivector")).astype(np.float32)
                   if has_ivector else None)
        for plan in layout.utterance_chunks(num_frames):
            first = plan.first_output_frame - plan.first_input_frame
            last = first + (plan.num_subsampled_frames - 1) * opts.frame_subsampling_factor
            try:
                ref = reference.compute_chunk(feats, plan.first_subsampled_frame,
                                              plan.num_subsampled_frames, ivector)
            except ComputationError:
                # Kaldi (and pynnet3) cannot compute this chunk: neither may we
                with pytest.raises(ComputationError, match="Not all outputs"):
                    check_computable(computable, plan.num_input_frames, first, last, "x")
                continue
            check_computable(computable, plan.num_input_frames, first, last, "x")
            feeds = {"input": layout.chunk_features(feats, plan.first_input_frame,
                                                    plan.num_input_frames)[None],
                     "first_output": np.asarray([first], np.int64),
                     "num_outputs": np.asarray([plan.num_subsampled_frames], np.int64)}
            if has_ivector:
                feeds["ivector"] = ivector[None, None]
            out = session.run(None, feeds)[0][0]
            err = float(np.abs(out - ref).max())
            assert err <= 1e-4 * max(1.0, float(np.abs(ref).max())), (num_frames, plan)


def test_failover_is_refused_naming_the_node():
    from pynnet3.onnx.dynamic import LengthGenericLowering
    nnet = pynnet3.Nnet.from_config(
        "input-node name=input dim=2\n"
        "component name=a type=NoOpComponent dim=2\n"
        "component-node name=a component=a input=Failover(Offset(input, 1), input)\n"
        "output-node name=output input=a\n")
    with pytest.raises(NotLowerable, match="node 'a_input'.*Failover"):
        LengthGenericLowering(nnet)


# -- the layer ---------------------------------------------------------------------------------

def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level, node
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, 0, node


def test_only_the_tools_import_the_export_layer():
    for path in (REPO / "pynnet3").rglob("*.py"):
        rel = path.relative_to(REPO / "pynnet3")
        if rel.parts[0] in ("onnx", "bin"):
            continue
        for module, level, _ in _imports(path):
            assert not (module == "onnx" or module.startswith(("onnx.", "onnxruntime"))
                        or "pynnet3.onnx" in module
                        or (level and module.split(".")[0] == "onnx")), (rel, module)


def test_export_layer_imports_onnx_only_inside_functions():
    for path in (REPO / "pynnet3" / "onnx").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""])
                assert not any(n.split(".")[0] in ("onnx", "onnxruntime") and not
                               getattr(node, "level", 0) for n in names), (path.name, names)


def test_pynnet3_works_without_onnx():
    """Every module outside the export layer imports with onnx and
    onnxruntime missing."""
    code = (
        "import importlib, pkgutil, sys\n"
        "sys.modules['onnx'] = None\n"
        "sys.modules['onnxruntime'] = None\n"
        "import pynnet3\n"
        "for m in pkgutil.walk_packages(pynnet3.__path__, 'pynnet3.'):\n"
        "    if m.name.startswith('pynnet3.onnx') or m.name.endswith('__main__'):\n"
        "        continue\n"
        "    importlib.import_module(m.name)\n"
        "import pynnet3.onnx, pynnet3.onnx.dynamic\n"
        "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True,
                            text=True)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
