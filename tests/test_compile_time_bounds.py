"""The statistics windows' time bounds (pynnet3.compiler.time_bounds): every
Cindex that can be computable lies inside its node's bound, and the graph
builders that leave out the window inputs outside it give Kaldi's pruned
graph (the same Cindexes, ids and dependencies) and computation."""

import pytest

from conftest import TEST_DATA
from pynnet3 import _fast
from pynnet3.common.index import Index
from pynnet3.compiler import computation_graph
from pynnet3.compiler.compiler import create_computation, pruned_computation_graph
from pynnet3.compiler.computability import kComputable
from pynnet3.compiler.computation_graph import ComputationGraphBuilder
from pynnet3.compiler.computation_io import print_computation
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.compiler.time_bounds import computable_time_bounds
from pynnet3.nnet.nnet import Nnet
from reference_cases import COMPILE_CASES, case_id, load_case

_kernel = _fast.load("computation_graph_kernel")


def _has_statistics(nnet):
    return any(type(c).__name__.startswith("Statistics") for c in nnet.components)


STATS_CASES = [c for c in COMPILE_CASES if b"Statistics" in (c / "model.raw").read_bytes()]


def _no_bounds(monkeypatch):
    """Builders that take every window input, as Kaldi's."""
    monkeypatch.setattr(computation_graph, "window_input_bounds", lambda nnet, reqs: {})
    if _kernel is not None:
        monkeypatch.setattr(_kernel, "window_input_bounds", lambda nnet, reqs: {})


def test_there_are_cases_with_statistics_windows():
    assert len(STATS_CASES) >= 5


@pytest.mark.parametrize("case", STATS_CASES + COMPILE_CASES[::4], ids=case_id)
def test_every_computable_cindex_is_inside_its_bound(case, monkeypatch):
    """Recurrent networks included: a cycle through IfDefined constrains
    nothing, so their nodes get the bounds of their other inputs."""
    nnet, request = load_case(case)
    bounds = computable_time_bounds(nnet, [request])
    _no_bounds(monkeypatch)
    builder = ComputationGraphBuilder(nnet)
    builder.compute(request)
    for cid, (node, index) in enumerate(builder.graph.cindexes):
        if builder.computable[cid] == kComputable and bounds is not None \
                and bounds[node] is not None:
            lo, hi = bounds[node]
            assert lo <= index.t <= hi, (nnet.node_names[node], index, bounds[node])


@pytest.mark.parametrize("case", STATS_CASES, ids=case_id)
def test_bounded_windows_give_kaldis_graph_and_computation(case, monkeypatch):
    nnet, request = load_case(case)
    bounded_graph = pruned_computation_graph(nnet, request)
    bounded = [print_computation(create_computation(nnet, request, use_kernel=k), nnet)
               for k in ((True, False) if _kernel is not None else (False,))]
    _no_bounds(monkeypatch)
    assert pruned_computation_graph(nnet, request) == bounded_graph
    for text in bounded:
        assert text == print_computation(create_computation(nnet, request), nnet)


def _xvector_request(num_frames):
    request = ComputationRequest()
    request.inputs = [IoSpecification.from_t_range("input", 0, num_frames)]
    request.outputs = [IoSpecification("output", [Index(0, 0, 0)])]
    return request


def test_an_xvector_graph_no_longer_spans_the_whole_window(monkeypatch):
    """The x-vector extractor pools over t .. t + 10000: for a 150-frame
    utterance the bounded builders add a few thousand Cindexes, not the
    window's 340,000, and compile the same computation."""
    nnet = Nnet.read(str(TEST_DATA / "compute" / "xvector" / "extract.raw"))
    assert _has_statistics(nnet)
    request = _xvector_request(150)
    sizes = {}
    texts = {}
    for bounded in (True, False):
        if not bounded:
            _no_bounds(monkeypatch)
        builder = ComputationGraphBuilder(nnet)
        builder.compute(request)
        sizes[bounded] = len(builder.graph.cindexes)
        texts[bounded] = print_computation(create_computation(nnet, request), nnet)
    assert sizes[True] * 10 < sizes[False]
    assert texts[True] == texts[False]


def test_a_second_segment_keeps_the_first_segments_times(monkeypatch):
    """Multi-segment: a window in the second segment may use what the first
    computed, so the bound covers both segments' inputs; same computation
    as the full windows."""
    nnet = Nnet.read(str(TEST_DATA / "compute" / "xvector" / "extract.raw"))
    first = _xvector_request(100)
    second = ComputationRequest()
    second.inputs = [IoSpecification.from_t_range("input", 100, 160)]
    second.outputs = [IoSpecification("output", [Index(0, 150, 0)])]
    bounded = print_computation(create_computation(nnet, [first, second]), nnet)
    _no_bounds(monkeypatch)
    assert print_computation(create_computation(nnet, [first, second]), nnet) == bounded


@pytest.mark.parametrize("cycle", [True, False], ids=["cycle", "unbounded-input"])
def test_a_window_built_whole_is_said_once(cycle, monkeypatch, caplog):
    """Where no bound can be worked out the builders take the whole window
    (Kaldi's way, slower to compile): the log says so, once per window node,
    however many computations are compiled."""
    from pynnet3.compiler import time_bounds
    nnet = Nnet.read(str(TEST_DATA / "compute" / "xvector" / "extract.raw"))
    monkeypatch.setattr(time_bounds, "_TOLD_UNBOUNDED", set())
    monkeypatch.setattr(time_bounds, "computable_time_bounds",
                        lambda nnet, reqs: None if cycle else [None] * len(nnet.nodes))
    with caplog.at_level("INFO", logger="pynnet3.compiler.time_bounds"):
        for num_frames in (150, 160):
            assert time_bounds.window_input_bounds(nnet, [_xvector_request(num_frames)]) == {}
    told = [r.getMessage() for r in caplog.records if "No time bound" in r.getMessage()]
    assert len(told) == 1
    assert ("form a cycle" if cycle else "nothing bounds") in told[0]
    windows = [nnet.node_names[i] for i, node in enumerate(nnet.nodes)
               if "stats" in nnet.node_names[i]]
    assert windows and any(name in told[0] for name in windows)


def test_a_bounded_window_says_nothing(caplog):
    nnet = Nnet.read(str(TEST_DATA / "compute" / "xvector" / "extract.raw"))
    with caplog.at_level("INFO", logger="pynnet3.compiler.time_bounds"):
        from pynnet3.compiler.time_bounds import window_input_bounds
        assert window_input_bounds(nnet, [_xvector_request(150)])
    assert not [r for r in caplog.records if "No time bound" in r.getMessage()]
