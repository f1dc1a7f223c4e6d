"""pynnet3.drawing and nnet3-to-dot: pictures of networks.

Each Descriptor kind is drawn as what it means (checked node by node and edge by
edge on small networks, through the structural DOT parser in dot_syntax.py);
xconfig layers are grouped, expanded or collapsed; the tool writes its outputs
complete or not at all; and every kaldi-ref model (models/, a sample of random/;
scripts/draw_sweep.py draws them all) gives DOT text that parses and, where
Graphviz is installed, that ``dot -Tsvg`` accepts.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import KALDI_REF, REPO, kaldi_ref_dir
from dot_syntax import DotSyntaxError, attr, parse_dot
import pynnet3
from pynnet3 import drawing
from pynnet3.bin import nnet3_to_dot
from pynnet3.errors import PynnetError
from pynnet3.nnet.nnet import Nnet

HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz's dot is not installed")

EXAMPLE = REPO / "pynnet3" / "examples" / "tdnn_lda.raw"


def _inputs_and(lines):
    return Nnet.from_config("input-node name=x dim=4\ninput-node name=y dim=4\n" + lines)


def _output_graph(descriptor, **options):
    """The parsed graph of a network whose output node "o" reads ``descriptor``."""
    nnet = _inputs_and("output-node name=o input=%s\n" % descriptor)
    return parse_dot(drawing.nnet_to_dot(nnet, **options))


def _label(graph, node):
    return attr(graph.nodes[node], "label")


def _helpers(graph, kind):
    return [n for n in graph.nodes if n.startswith("%" + kind)]


def _edge(graph, tail, head, head_port=None):
    """The one edge tail -> head (recurrences are written head -> tail, dir=back)."""
    edges = [e for e in graph.edges
             if e["tail"] == tail and e["head"] == head and e["head_port"] == head_port]
    assert len(edges) == 1, (tail, head, head_port, graph.edges)
    return edges[0]


def _edge_label(edge):
    label = attr(edge["attrs"], "label")
    return "" if label is None else label.strip()


# -- each Descriptor kind ----------------------------------------------------------------

def test_plain_node_is_one_unlabelled_edge():
    g = _output_graph("x")
    edge = _edge(g, "x", "o")
    assert _edge_label(edge) == "" and "style" not in edge["attrs"]
    assert not [n for n in g.nodes if n.startswith("%")]


@pytest.mark.parametrize("descriptor, label", [
    ("Offset(x, -3)", "t-3"), ("Offset(x, 2)", "t+2"), ("Offset(x, 1, 2)", "t+1, x+2"),
    ("Offset(x, 0, -1)", "x-1"), ("Offset(Offset(x, 1), 2)", "t+3"),
    ("Round(x, 3)", "Round(t, 3)"), ("ReplaceIndex(x, t, 0)", "ReplaceIndex(t, 0)"),
    ("ReplaceIndex(x, x, 1)", "ReplaceIndex(x, 1)"),
    ("Offset(Round(x, 2), 1)", "t+1, Round(t, 2)"),
])
def test_index_mappings_are_edge_labels(descriptor, label):
    g = _output_graph(descriptor)
    assert _edge_label(_edge(g, "x", "o")) == label
    assert not [n for n in g.nodes if n.startswith("%")]


def test_append_is_a_node_with_numbered_ports_in_order():
    g = _output_graph("Append(x, Offset(y, 1), Offset(x, -1))")
    [append] = _helpers(g, "Append")
    label = _label(g, append)
    for i, dim in enumerate((4, 4, 4)):
        assert 'PORT="p%d">#%d: %d<' % (i, i, dim) in label
    assert label.index('"p0"') < label.index('"p1"') < label.index('"p2"')
    assert _edge_label(_edge(g, "x", append, "p0")) == ""
    assert _edge_label(_edge(g, "y", append, "p1")) == "t+1"
    assert _edge_label(_edge(g, "x", append, "p2")) == "t-1"
    _edge(g, append, "o")


def test_nested_appends_are_flattened_as_kaldi_normalizes_them():
    g = _output_graph("Append(Append(x, y), x)")
    [append] = _helpers(g, "Append")
    assert [e["head_port"] for e in g.edges_into(append)] == ["p0", "p1", "p2"]


def test_sum_is_one_plus_node_with_all_terms():
    # Kaldi prints Sum(x, Sum(y, Offset(x, 1))); it is one sum of three terms.
    g = _output_graph("Sum(x, y, Offset(x, 1))")
    [plus] = _helpers(g, "Sum")
    assert "+" in _label(g, plus)
    assert sorted((e["tail"], _edge_label(e)) for e in g.edges_into(plus)) == [
        ("x", ""), ("x", "t+1"), ("y", "")]
    _edge(g, plus, "o")


def test_scale_is_an_operator_node_at_the_node_it_scales():
    # Kaldi normalizes Scale(2, Offset(x, 1)) to Offset(Scale(2, x), 1).
    g = _output_graph("Scale(2, Offset(x, 1))")
    [scale] = _helpers(g, "Scale")
    assert _label(g, scale) == "&#215;2"
    assert _edge_label(_edge(g, "x", scale)) == ""
    assert _edge_label(_edge(g, scale, "o")) == "t+1"


def test_scales_combine_and_move_inside_sums():
    g = _output_graph("Scale(2, Scale(3, x))")
    [scale] = _helpers(g, "Scale")
    assert _label(g, scale) == "&#215;6"
    g = _output_graph("Scale(-1, Sum(x, y))")
    [plus] = _helpers(g, "Sum")
    scales = _helpers(g, "Scale")
    assert len(scales) == 2 and all(_label(g, s) == "&#215;-1" for s in scales)
    assert sorted(e["tail"] for e in g.edges_into(plus)) == sorted(scales)


def test_offset_of_a_sum_is_drawn_on_each_term():
    g = _output_graph("Offset(Sum(x, y), 1)")
    [plus] = _helpers(g, "Sum")
    assert sorted(_edge_label(e) for e in g.edges_into(plus)) == ["t+1", "t+1"]


def test_const_is_a_node_with_value_and_dim():
    g = _output_graph("Sum(x, Const(0.25, 4))")
    [const] = _helpers(g, "Const")
    assert _label(g, const) == "Const 0.25<BR/>dim=4"
    [plus] = _helpers(g, "Sum")
    assert sorted(e["tail"] for e in g.edges_into(plus)) == sorted([const, "x"])


def test_failover_has_first_and_else_ports():
    g = _output_graph("Failover(Offset(x, 1), y)")
    [node] = _helpers(g, "Failover")
    label = _label(g, node)
    assert 'PORT="p0">first<' in label and 'PORT="p1">else<' in label
    assert _edge_label(_edge(g, "x", node, "p0")) == "t+1"
    assert _edge_label(_edge(g, "y", node, "p1")) == ""
    _edge(g, node, "o")


def test_switch_has_one_port_per_t_mod_n():
    g = _output_graph("Switch(x, Offset(y, -1), x)")
    [node] = _helpers(g, "Switch")
    assert "t mod 3" in _label(g, node)
    assert _edge_label(_edge(g, "x", node, "p0")) == ""
    assert _edge_label(_edge(g, "y", node, "p1")) == "t-1"
    _edge(g, "x", node, "p2")
    _edge(g, node, "o")


def test_offset_of_a_switch_labels_the_switch_output():
    g = _output_graph("Offset(Switch(x, y), 2)")
    [node] = _helpers(g, "Switch")
    assert _edge_label(_edge(g, node, "o")) == "t+2"


def test_ifdefined_is_a_dashed_edge_wrapping_the_label():
    g = _output_graph("Append(IfDefined(Offset(x, -1)), IfDefined(y))")
    [append] = _helpers(g, "Append")
    first = _edge(g, "x", append, "p0")
    assert _edge_label(first) == "IfDefined(t-1)" and attr(first["attrs"], "style") == "dashed"
    assert _edge_label(_edge(g, "y", append, "p1")) == "IfDefined"


def test_ifdefined_of_a_sum_is_the_sum_nodes_edge():
    # Kaldi moves the Offset inside: IfDefined(Sum(Offset(x, 1), Offset(y, 1))).
    g = _output_graph("IfDefined(Offset(Sum(x, y), 1))")
    [plus] = _helpers(g, "Sum")
    out = _edge(g, plus, "o")
    assert _edge_label(out) == "IfDefined" and attr(out["attrs"], "style") == "dashed"
    assert sorted(_edge_label(e) for e in g.edges_into(plus)) == ["t+1", "t+1"]


def test_every_kind_together_parses():
    g = _output_graph("Append(Sum(Scale(0.5, x), Const(1, 4)), Failover(Offset(x, 1), "
                      "Switch(x, y)), IfDefined(Round(ReplaceIndex(y, t, 0), 2)))")
    assert len(_helpers(g, "Append")) == 1 and len(_helpers(g, "Failover")) == 1


# -- nodes ----------------------------------------------------------------------------

def _small_network():
    return _inputs_and(
        "component name=l1.aff type=AffineComponent input-dim=8 output-dim=4\n"
        "component name=shared type=RectifiedLinearComponent dim=4\n"
        "component name=tdnn type=TdnnComponent input-dim=4 output-dim=4 "
        "time-offsets=-1,0,1\n"
        "component-node name=l1.aff component=l1.aff input=Append(x, "
        "IfDefined(Offset(l1.relu, -1)))\n"
        "component-node name=l1.relu component=shared input=l1.aff\n"
        "dim-range-node name=l1.part input-node=l1.relu dim-offset=1 dim=2\n"
        "component-node name=t1 component=tdnn input=l1.relu\n"
        "component-node name=unused component=shared input=y\n"
        "output-node name=o input=Append(t1, l1.part) objective=quadratic\n")


def test_node_labels_show_names_types_dims():
    g = parse_dot(drawing.nnet_to_dot(_small_network()))
    assert _label(g, "x") == "<B>x</B><BR/>dim=4"
    assert attr(g.nodes["x"], "shape") == "ellipse"
    assert _label(g, "o") == "<B>o</B><BR/>dim=6<BR/>objective=quadratic"
    assert attr(g.nodes["o"], "peripheries") == "2"
    aff = _label(g, "l1.aff")
    assert "<B>l1.aff</B>" in aff and "AffineComponent" in aff and "8 &#8594; 4" in aff
    relu = _label(g, "l1.relu")       # the component has another name than the node
    assert "component=shared" in relu and "RectifiedLinearComponent" in relu
    assert "component=" not in aff
    assert "time-offsets=-1,0,1" in _label(g, "t1")
    assert "dim-range 1:3 of 4" in _label(g, "l1.part")
    _edge(g, "l1.relu", "l1.part")


def test_component_attributes_option():
    text = drawing.nnet_to_dot(_small_network(), component_attributes="learning-rate,nothing")
    g = parse_dot(text)
    assert "learning-rate=0.001" in _label(g, "l1.aff")
    assert "time-offsets" not in _label(g, "t1") and "nothing" not in text
    g = parse_dot(drawing.nnet_to_dot(_small_network(), component_attributes=()))
    assert "time-offsets" not in _label(g, "t1")


def test_info_attributes_parses_kaldi_info_text():
    info = ("TdnnComponent, input-dim=96, output-dim=24, learning-rate=0.001, "
            "time-offsets=-1,0, linear-params-row-norms=[percentiles(0,1,2)=(0.1,0.2, "
            "0.3), mean=0.9], bias-{mean,stddev}=-0.01,0.29, max-change=0.25 num-filters-in=3")
    fields = drawing.info_attributes(info)
    assert fields["time-offsets"] == "-1,0"
    assert fields["bias-{mean,stddev}"] == "-0.01,0.29"
    assert fields["linear-params-row-norms"].startswith("[percentiles")
    assert fields["max-change"] == "0.25" and fields["num-filters-in"] == "3"
    assert "mean" not in fields     # inside brackets


def test_unused_nodes_are_dashed_grey():
    g = parse_dot(drawing.nnet_to_dot(_small_network()))
    assert "dashed" in attr(g.nodes["unused"], "style")
    assert "dashed" not in attr(g.nodes["l1.aff"], "style")


def test_recurrence_is_drawn_against_the_flow():
    g = parse_dot(drawing.nnet_to_dot(_small_network()))
    [append] = [n for n in _helpers(g, "Append") if g.edges_between(n, "l1.aff")]
    # written from the Append's port to l1.relu with the arrow reversed
    [edge] = [e for e in g.edges if e["tail"] == append and e["head"] == "l1.relu"]
    assert edge["tail_port"] == "p1" and attr(edge["attrs"], "dir") == "back"
    assert _edge_label(edge) == "IfDefined(t-1)"
    # the forward edges of the same cycle are plain
    assert "dir" not in _edge(g, "l1.aff", "l1.relu")["attrs"]


def test_cycle_edges_read_at_the_same_t_are_not_recurrences():
    # c reads d (later in node order, same t); d reads c one frame back.
    nnet = _inputs_and(
        "component name=n type=NoOpComponent dim=4\n"
        "component-node name=c component=n input=Sum(x, d)\n"
        "component-node name=d component=n input=IfDefined(Offset(c, -1))\n"
        "output-node name=o input=c\n")
    g = parse_dot(drawing.nnet_to_dot(nnet))
    [plus] = _helpers(g, "Sum")
    assert "dir" not in _edge(g, "d", plus)["attrs"]
    assert attr(_edge(g, "d", "c")["attrs"], "dir") == "back"     # c -> d, reversed


def test_strongly_connected_components_match_reachability():
    import random
    rng = random.Random(5)
    for _ in range(200):
        num = rng.randint(1, 12)
        graph = [sorted(rng.sample(range(num), rng.randint(0, min(3, num))))
                 for _ in range(num)]
        reach = [{v} for v in range(num)]
        for _ in range(num):
            for v in range(num):
                for w in list(reach[v]):
                    reach[v].update(graph[w])
        scc = drawing._strongly_connected(graph)
        for v in range(num):
            for w in range(num):
                assert (scc[v] == scc[w]) == (w in reach[v] and v in reach[w]), graph


def test_use_color_false_has_no_fills():
    text = drawing.nnet_to_dot(_small_network(), use_color=False)
    assert "fillcolor" not in text and "filled" not in text
    parse_dot(text)


# -- layers --------------------------------------------------------------------------------

def test_layers_are_clusters_of_their_nodes():
    g = parse_dot(drawing.nnet_to_dot(_small_network()))
    members = g.clusters["cluster_l1"]
    assert {"l1.aff", "l1.relu", "l1.part"} <= set(members)
    # the Append drawn for l1.aff's input is in l1's box too
    assert any(m.startswith("%Append") for m in members)
    assert "t1" not in members and "x" not in members and "o" not in members


def test_one_node_with_a_dot_is_not_a_layer():
    nnet = _inputs_and("component name=a type=NoOpComponent dim=4\n"
                       "component-node name=output.affine component=a input=x\n"
                       "output-node name=output input=output.affine\n")
    assert parse_dot(drawing.nnet_to_dot(nnet)).clusters == {}


def test_node_prefixes_make_layers():
    nnet = _inputs_and("component name=a type=NoOpComponent dim=4\n"
                       "component-node name=lstm-a component=a input=x\n"
                       "component-node name=lstm-b component=a input=lstm-a\n"
                       "component-node name=other component=a input=lstm-b\n"
                       "output-node name=o input=other\n")
    g = parse_dot(drawing.nnet_to_dot(nnet, node_prefixes="lstm,oth"))
    assert sorted(g.clusters["cluster_lstm"]) == ["lstm-a", "lstm-b"]
    assert g.clusters["cluster_oth"] == ["other"]      # asked for: a layer of one
    g = parse_dot(drawing.nnet_to_dot(nnet, node_prefixes=["lstm"], expand_layers=False))
    assert "%layer.lstm" in g.nodes and "lstm-a" not in g.nodes


def test_collapsed_layers_are_one_node_with_dims():
    g = parse_dot(drawing.nnet_to_dot(_small_network(), expand_layers=False))
    assert "l1.aff" not in g.nodes and "%layer.l1" in g.nodes
    label = _label(g, "%layer.l1")
    assert "<B>l1</B>" in label and "aff, relu, part" in label
    assert "4 &#8594; 4, 2" in label     # reads x (4); gives l1.relu (4) and l1.part (2)
    _edge(g, "x", "%layer.l1")            # the Append's port is gone with the Append
    _edge(g, "%layer.l1", "t1")
    assert not g.edges_between("%layer.l1", "%layer.l1")   # the recurrence is inside


def test_collapsed_parallel_edges_merge_their_labels():
    nnet = _inputs_and("component name=a type=AffineComponent input-dim=12 output-dim=4\n"
                       "component name=n type=NoOpComponent dim=4\n"
                       "component-node name=L.a component=a input=Append(Offset(x, -1), x, "
                       "Offset(x, 1))\n"
                       "component-node name=L.b component=n input=L.a\n"
                       "output-node name=o input=L.b\n")
    g = parse_dot(drawing.nnet_to_dot(nnet, expand_layers=False))
    assert _edge_label(_edge(g, "x", "%layer.L")) == "t-1, t, t+1"
    # edges outside layers stay as drawn: a sum of x at two times has two edges
    g = parse_dot(drawing.nnet_to_dot(_inputs_and(
        "output-node name=o input=Sum(Offset(x, -2), Offset(x, 2))\n"), expand_layers=False))
    [plus] = _helpers(g, "Sum")
    assert sorted(_edge_label(e) for e in g.edges_into(plus)) == ["t+2", "t-2"]


def test_layers_of_a_kaldi_xconfig_model(kaldi_ref):
    nnet = Nnet.read(str(kaldi_ref / "models" / "tdnnf_chain" / "model.raw"))
    g = parse_dot(drawing.nnet_to_dot(nnet))
    members = g.clusters["cluster_tdnnf2"]
    assert sorted(m for m in members if not m.startswith("%")) == [
        "tdnnf2.affine", "tdnnf2.batchnorm", "tdnnf2.dropout", "tdnnf2.linear",
        "tdnnf2.noop", "tdnnf2.relu"]
    # the noop's input Sum(Scale(0.75, tdnn1.dropout), tdnnf2.dropout) is in the box
    assert sorted(m[:4] for m in members if m.startswith("%")) == ["%Sca", "%Sum"]
    assert "lda" not in sum(g.clusters.values(), [])
    collapsed = parse_dot(drawing.nnet_to_dot(nnet, expand_layers=False))
    assert "96 &#8594; 96" in _label(collapsed, "%layer.tdnnf2")
    assert collapsed.edges_between("%layer.tdnnf2", "%layer.tdnnf3")


# -- draw() and pictures -------------------------------------------------------------------

def test_draw_is_exported_and_reads_files():
    assert pynnet3.draw is drawing.draw
    text = pynnet3.draw(str(EXAMPLE))
    assert text == drawing.nnet_to_dot(Nnet.read(str(EXAMPLE)))
    assert text == pynnet3.draw(EXAMPLE)        # a Path works too
    parse_dot(text)


@needs_dot
@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".png", b"\x89PNG"),
                                           (".pdf", b"%PDF")])
def test_draw_writes_a_picture(tmp_path, suffix, magic):
    picture = tmp_path / ("model" + suffix)
    pynnet3.draw(str(EXAMPLE), str(picture))
    assert picture.read_bytes().startswith(magic)
    assert [p.name for p in tmp_path.iterdir()] == [picture.name]


def test_unknown_picture_format_is_refused(tmp_path):
    with pytest.raises(PynnetError, match=r"picture format .*model\.bmp.*\.svg"):
        pynnet3.draw(str(EXAMPLE), str(tmp_path / "model.bmp"))
    assert not list(tmp_path.iterdir())


def test_missing_dot_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(PynnetError, match="Graphviz's 'dot' program is not installed"):
        pynnet3.draw(str(EXAMPLE), str(tmp_path / "model.svg"))
    assert not list(tmp_path.iterdir())


@needs_dot
def test_dot_failure_is_reported_without_output(tmp_path):
    with pytest.raises(PynnetError, match=r"Graphviz's dot failed \(exit status"):
        drawing.write_picture("digraph { a -> }", str(tmp_path / "bad.svg"))
    assert not list(tmp_path.iterdir())


@needs_dot
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_picture_into_a_named_pipe_is_written_in_place(tmp_path):
    import stat
    import threading
    fifo = tmp_path / "pipe.svg"
    os.mkfifo(fifo)
    got = {}

    def read():
        with open(fifo, "rb") as f:
            got["data"] = f.read()

    reader = threading.Thread(target=read)
    reader.start()
    drawing.write_picture(pynnet3.draw(str(EXAMPLE)), str(fifo))
    reader.join(30)
    assert got["data"].startswith(b"<?xml")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)      # still the pipe, not replaced


# -- the tool -----------------------------------------------------------------------------

def _run_tool(argv, capsys):
    status = nnet3_to_dot.main(argv)
    return status, capsys.readouterr()


def test_tool_writes_dot(tmp_path, capsys):
    out = tmp_path / "m.dot"
    status, io = _run_tool([str(EXAMPLE), str(out)], capsys)
    assert status == 0, io.err
    assert out.read_text() == drawing.nnet_to_dot(Nnet.read(str(EXAMPLE)))
    assert "LOG (nnet3-to-dot[5.5]:main()" in io.err


def test_tool_options(tmp_path, capsys):
    out = tmp_path / "m.dot"
    status, io = _run_tool(["--expand-layers=false", "--use-color=false",
                            "--node-prefixes=lda", "--component-attributes=",
                            str(EXAMPLE), str(out)], capsys)
    assert status == 0, io.err
    assert out.read_text() == drawing.nnet_to_dot(
        Nnet.read(str(EXAMPLE)), expand_layers=False, use_color=False,
        node_prefixes=["lda"], component_attributes=())


def test_tool_writes_dot_to_stdout(capsys):
    status, io = _run_tool([str(EXAMPLE), "-"], capsys)
    assert status == 0
    parse_dot(io.out)


@needs_dot
def test_tool_writes_picture(tmp_path, capsys):
    status, io = _run_tool([str(EXAMPLE), str(tmp_path / "m.dot"), str(tmp_path / "m.svg")],
                           capsys)
    assert status == 0, io.err
    assert (tmp_path / "m.svg").read_bytes().startswith(b"<?xml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.dot", "m.svg"]


def test_tool_errors_leave_no_output(tmp_path, capsys, monkeypatch):
    dot_out = tmp_path / "m.dot"
    status, io = _run_tool([str(EXAMPLE), str(dot_out), str(tmp_path / "m.bmp")], capsys)
    assert status == 255 and "ERROR (nnet3-to-dot[5.5]:" in io.err and "m.bmp" in io.err
    status, io = _run_tool([str(tmp_path / "missing.raw"), str(dot_out)], capsys)
    assert status == 255 and "missing.raw" in io.err
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    status, io = _run_tool([str(EXAMPLE), str(dot_out), str(tmp_path / "m.png")], capsys)
    assert status == 255 and "'dot' program is not installed" in io.err
    assert not list(tmp_path.iterdir())
    assert "Traceback" not in io.err


def test_tool_argument_count(capsys):
    status, io = _run_tool([str(EXAMPLE)], capsys)
    assert status == 1 and "Usage:  nnet3-to-dot" in io.err
    status, io = _run_tool(["a", "b", "c", "d"], capsys)
    assert status == 1


# -- the DOT checker itself -------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ('digraph { "a" [label="x"]; "a" -> "b"; }', "not declared"),
    ('digraph { "a" [label="x"]; "a" [label="y"]; }', "declared twice"),
    ('digraph { "a" [label="x"];', "unbalanced"),
    ('digraph { "a" [label="x"]; } }', "after the graph"),
    ('digraph { "a" [label="x]; }', "unterminated quoted"),
    ('digraph { "a" [label=<<B>x</B>]; }', "unterminated HTML"),
    ('digraph { "a" [label=<<B>x</B>>]; "b" [label="y"]; "b" -> "a":p0; }', "no port"),
    ('digraph { "a"; "b"; "a" -- "b"; }', "edge operator"),
])
def test_dot_checker_catches(text, message):
    with pytest.raises(DotSyntaxError, match=message):
        parse_dot(text)


# -- every kaldi-ref model ------------------------------------------------------------------

def _reference_models():
    if not KALDI_REF.is_dir():
        return []
    files = sorted(KALDI_REF.glob("models/*/model.raw")) + sorted(
        KALDI_REF.glob("models/*/final.mdl")) + sorted(KALDI_REF.glob("models/*/final.txt.mdl"))
    files += sorted(KALDI_REF.glob("models/xvector/extract.raw"))
    cases = sorted(KALDI_REF.glob("random/case*/model.raw"),
                   key=lambda p: int(p.parent.name[4:]))
    return files + cases[::25]       # scripts/draw_sweep.py draws every case


def _model_id(path):
    return "/".join(path.parts[-2:])


@pytest.mark.parametrize("path", _reference_models(), ids=_model_id)
def test_kaldi_ref_models_draw(path):
    kaldi_ref_dir()
    nnet = Nnet.read(str(path))
    for expand in (True, False):
        text = drawing.nnet_to_dot(nnet, expand_layers=expand)
        graph = parse_dot(text)
        named = {n for n in graph.nodes if not n.startswith("%")}
        shown = {nnet.node_names[i] for i in range(nnet.num_nodes())
                 if not nnet.is_component_input_node(i)}
        if expand:
            assert named == shown
        else:
            assert named <= shown
        if HAVE_DOT:
            proc = subprocess.run(["dot", "-Tsvg", "-o", os.devnull], input=text.encode(),
                                  stderr=subprocess.PIPE)
            assert proc.returncode == 0, proc.stderr.decode()


def test_text_and_binary_models_draw_the_same(kaldi_ref):
    text = Nnet.read(str(kaldi_ref / "models" / "gru" / "model.txt"))
    binary = Nnet.read(str(kaldi_ref / "models" / "gru" / "model.raw"))
    assert drawing.nnet_to_dot(text) == drawing.nnet_to_dot(binary)


# -- docs/drawing.md --------------------------------------------------------------------------

def _doc_blocks():
    text = (REPO / "docs" / "drawing.md").read_text()
    return re.findall(r"```(python|sh)\n(.*?)```", text, re.S)


@pytest.mark.parametrize("number", range(len(_doc_blocks())))
def test_docs_drawing_blocks_run_as_written(number, tmp_path):
    """Each code block of docs/drawing.md, run from an empty folder with this
    interpreter's python and the scripts/bin tools first on PATH."""
    lang, code = _doc_blocks()[number]
    env = dict(os.environ, PYNNET3_PYTHON=sys.executable,
               PATH=os.pathsep.join([str(REPO / "scripts" / "bin"),
                                     os.path.dirname(sys.executable), os.environ["PATH"]]))
    command = [sys.executable, "-c", code] if lang == "python" else ["bash", "-e", "-c", code]
    proc = subprocess.run(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr.decode()
    assert list(tmp_path.iterdir()) or not HAVE_DOT     # each block writes a file
