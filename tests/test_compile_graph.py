"""The computation-graph builder: the Cython builder equals the Python twin
(cindexes, dependencies, computable flags, before and after pruning) on every
reference case, and uncomputable requests fail with a clear error."""

import pytest
from conftest import TEST_DATA

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.compiler.computation_graph import ComputationGraphBuilder
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.errors import ComputationError
from pynnet3.common.index import Index

from reference_cases import COMPILE_CASES as CASES, case_id as _id, load_case as _load

fast_graph = pytest.importorskip("pynnet3._fast.computation_graph_kernel")


def _state(builder):
    graph = builder.graph
    if isinstance(builder, ComputationGraphBuilder):
        return (graph.cindexes, graph.is_input, graph.dependencies, builder.computable)
    return (graph.cindexes_list, graph.is_input_list, graph.dependencies_list,
            builder.computable_list())


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_fast_builder_equals_python_twin(case):
    nnet, request = _load(case)
    py = ComputationGraphBuilder(nnet)
    fast = fast_graph.FastComputationGraphBuilder(nnet)
    py.compute(request)
    fast.compute(request)
    assert _state(py) == _state(fast)
    assert py.all_outputs_are_computable() and fast.all_outputs_are_computable()
    assert py.get_computable_info() == fast.get_computable_info()
    py.prune()
    fast.prune()
    assert _state(py) == _state(fast)
    assert py.graph.segment_ends == fast.graph.segment_ends_list == [len(py.graph)]
    # every kept cindex is computable and the outputs are all there
    assert set(py.computable) == {1}
    for spec in request.outputs:
        node = nnet.get_node_index(spec.name)
        assert all(py.graph.get_cindex_id((node, Index(*i))) >= 0 for i in spec.indexes)


def _tdnn_case():
    # a TdnnComponent with time-offsets -5,-3: inputs t = -1..7, outputs t = 4..7
    case = TEST_DATA / "compile" / "case134"
    if not case.is_dir():
        pytest.skip("test data missing")
    return _load(case)


@pytest.mark.parametrize("builder_class", [ComputationGraphBuilder, "fast"])
def test_missing_inputs_error_names_outputs_and_inputs(builder_class):
    """Dropping the first input frames makes the first outputs uncomputable;
    the error names them and the missing input Cindexes."""
    from pynnet3.driver.compile_and_optimize import compile as compile_
    nnet, request = _tdnn_case()
    spec = request.inputs[0]
    short = ComputationRequest(
        inputs=[IoSpecification(spec.name, spec.indexes[3:], spec.has_deriv)]
        + request.inputs[1:],
        outputs=request.outputs, need_model_derivative=request.need_model_derivative,
        store_component_stats=request.store_component_stats)
    if builder_class == "fast":
        builder = fast_graph.FastComputationGraphBuilder(nnet)
    else:
        builder = builder_class(nnet)
    builder.compute(short)
    assert not builder.all_outputs_are_computable()
    message = str(builder.not_computable_error())
    assert "Not all outputs were computable" in message
    assert "output(" in message
    assert "3 output cindexes out of 4" in message
    missing = spec.indexes[:3]
    for index in missing:
        assert "input(%d,%d)" % (index.n, index.t) in message
    assert "is not computable for the following reason" in message
    with pytest.raises(ComputationError, match="Not all outputs were computable"):
        compile_(nnet, short)


def test_unknown_input_and_output_names():
    nnet, request = _tdnn_case()
    bad = ComputationRequest(inputs=[IoSpecification("nope", [Index()])],
                             outputs=request.outputs)
    for builder in (ComputationGraphBuilder(nnet), fast_graph.FastComputationGraphBuilder(nnet)):
        with pytest.raises(ComputationError, match="no input with name nope"):
            builder.compute(bad)
    bad = ComputationRequest(inputs=request.inputs, outputs=[IoSpecification("nope", [Index()])])
    for builder in (ComputationGraphBuilder(nnet), fast_graph.FastComputationGraphBuilder(nnet)):
        with pytest.raises(ComputationError, match="no output with name nope"):
            builder.compute(bad)


def test_duplicate_and_out_of_range_indexes():
    nnet, request = _tdnn_case()
    spec = request.inputs[0]
    dup = ComputationRequest(inputs=[IoSpecification(spec.name, spec.indexes + spec.indexes[:1])]
                             + request.inputs[1:], outputs=request.outputs)
    for builder in (ComputationGraphBuilder(nnet), fast_graph.FastComputationGraphBuilder(nnet)):
        with pytest.raises(ComputationError, match="more than once"):
            builder.compute(dup)
    far = ComputationRequest(inputs=[IoSpecification(spec.name, [Index(0, 2 ** 30, 0)])]
                             + request.inputs[1:], outputs=request.outputs)
    with pytest.raises(ComputationError, match="outside the range the compiler supports"):
        fast_graph.FastComputationGraphBuilder(nnet).compute(far)


def test_packed_cindex_order_is_kaldi_order():
    """Packed keys sort like Kaldi's Cindexes: node, then t, x, n."""
    from pynnet3.common.index import cindex_key
    cindexes = [(n, Index(a, b, c)) for n in (0, 3) for a in (0, 1, 5) for b in (-7, 0, 2, 9)
                for c in (-1, 0, 2)] + [(1, Index(0, -2 ** 31, 0))]
    keys = [fast_graph.pack_cindex(n, i) for n, i in cindexes]
    assert sorted(keys) == [fast_graph.pack_cindex(n, i)
                            for n, i in sorted(cindexes, key=cindex_key)]
    assert [fast_graph.unpack_cindex(k) for k in keys] == cindexes
