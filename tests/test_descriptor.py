"""Descriptors: Kaldi's parsing, normalization and printing (normalization.tsv),
and the compute-side methods (dependencies, computability, moduli, scales)."""

import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.errors import DescriptorError
from pynnet3.common.config_line import name_matches_pattern
from pynnet3.nnet.descriptor import (BinarySumDescriptor, ConstantSumDescriptor,
                                     OptionalSumDescriptor, SimpleSumDescriptor,
                                     kFailoverOperation, kSumOperation)
from pynnet3.nnet.descriptor_parser import parse_descriptor, tokenize_descriptor
from pynnet3.common.index import Cindex, Index
from pynnet3.model.info import nnet_info
from pynnet3.nnet.nnet import Nnet

# x, y: input nodes of dim 4; a: an AffineComponent node of dim 4 (as in the tsv).
BASE = ("input-node name=x dim=4\ninput-node name=y dim=4\n"
        "component name=a type=AffineComponent input-dim=4 output-dim=4\n"
        "component-node name=a component=a input=x\n")
NAMES = ["x", "y", "**", "a"]          # node names as a descriptor sees them


def _tsv_cases():
    files = [TEST_DATA / "models" / "normalization.tsv"]
    ref = KALDI_REF / "descriptors" / "normalization.tsv"
    if ref.is_file():
        files = [ref]
    cases = []
    for path in files:
        for line in path.read_text().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            status, text, expected = line.split("\t")
            cases.append(pytest.param(status, text, expected, id=text))
    return cases


@pytest.mark.parametrize("status,text,expected", _tsv_cases())
def test_normalization_tsv(status, text, expected):
    """Each case through nnet3-init semantics and Info(): Kaldi's printed form,
    dim and objective; or Kaldi's error message."""
    config = BASE + "output-node name=o input=%s\n" % text
    if status == "OK":
        nnet = Nnet.from_config(config)
        line = [l for l in nnet_info(nnet).splitlines() if l.startswith("output-node name=o ")]
        assert line == ["output-node name=o " + expected]
    else:
        with pytest.raises(DescriptorError) as info:
            Nnet.from_config(config)
        assert expected in str(info.value)
        assert "input=" in str(info.value)     # names the offending config line


def test_tsv_bundled_matches_reference():
    ref = KALDI_REF / "descriptors" / "normalization.tsv"
    if not ref.is_file():
        pytest.skip("kaldi-ref absent")
    assert (TEST_DATA / "models" / "normalization.tsv").read_text() == ref.read_text()


def _d(text):
    return parse_descriptor(text, NAMES)


def test_tokenize():
    assert tokenize_descriptor("  Append( x , Offset(y,-1) )") == [
        "Append", "(", "x", ",", "Offset", "(", "y", ",", "-1", ")", ")"]
    with pytest.raises(DescriptorError, match="tokenize"):
        tokenize_descriptor("Append(x, y$)")


def test_parse_errors_are_descriptor_errors():
    for bad in ["", "Append(x,", "Append(x y)", "x y", "Offset(x, 1", "Sum(Append(x, y), x)",
                "Scale(2, IfDefined(x))", "Offset(Const(1, 4), 1)",
                "Switch(Sum(x, y), x)", "Const(1, 0)", "Const(1, -2)"]:
        with pytest.raises(DescriptorError):
            _d(bad)


def test_trailing_junk():
    with pytest.raises(DescriptorError, match="expected end of input but got 'y'"):
        _d("x y")


def test_structure_of_normalized_forms():
    d = _d("Sum(x, y, a)")
    assert d.num_parts() == 1
    part = d.part(0)
    assert isinstance(part, BinarySumDescriptor) and part.op == kSumOperation
    assert isinstance(part.src2, BinarySumDescriptor)
    d = _d("Append(Failover(Offset(x, 1), x), IfDefined(y), Const(0.5, 3))")
    assert [type(p) for p in d.parts] == [BinarySumDescriptor, OptionalSumDescriptor,
                                          ConstantSumDescriptor]
    assert d.part(0).op == kFailoverOperation
    assert d.write_config(NAMES) == "Append(Failover(Offset(x, 1), x), IfDefined(y), Const(0.5, 3))"


def test_map_to_input_forms():
    i = Index(2, 10, 1)
    assert _d("x").part(0).src.map_to_input(i) == Cindex(0, i)
    assert _d("Offset(x, -3)").part(0).src.map_to_input(i) == Cindex(0, Index(2, 7, 1))
    assert _d("Offset(x, 1, 2)").part(0).src.map_to_input(i) == Cindex(0, Index(2, 11, 3))
    sw = _d("Switch(x, y, a)").part(0).src
    assert sw.map_to_input(Index(0, 4, 0)) == Cindex(1, Index(0, 4, 0))     # 4 % 3 = 1
    assert sw.map_to_input(Index(0, -1, 0)) == Cindex(3, Index(0, -1, 0))   # math modulus
    rnd = _d("Round(x, 3)").part(0).src
    assert rnd.map_to_input(Index(0, 5, 0)).index.t == 3
    assert rnd.map_to_input(Index(0, -1, 0)).index.t == -3
    rep = _d("ReplaceIndex(Offset(x, 5), t, 0)").part(0).src
    assert rep.map_to_input(Index(1, 9, 2)) == Cindex(0, Index(1, 5, 2))
    rep = _d("ReplaceIndex(x, x, 7)").part(0).src
    assert rep.map_to_input(Index(1, 9, 2)) == Cindex(0, Index(1, 9, 7))
    with pytest.raises(DescriptorError, match="modulus"):
        _d("Round(x, 0)").part(0).src.map_to_input(Index(0, 1, 0))


def test_dependencies_and_computability():
    d = _d("Append(Sum(x, Offset(y, 1)), Failover(Offset(x, -1), a), IfDefined(Offset(a, 2)), "
           "Const(1, 2))")
    i = Index(0, 5, 0)
    assert d.get_dependencies(i) == [Cindex(0, Index(0, 5, 0)), Cindex(1, Index(0, 6, 0)),
                                     Cindex(0, Index(0, 4, 0)), Cindex(3, Index(0, 5, 0)),
                                     Cindex(3, Index(0, 7, 0))]
    everything = lambda c: True
    used = ["junk"]
    assert d.is_computable(i, everything, used)
    assert used == [Cindex(0, Index(0, 5, 0)), Cindex(1, Index(0, 6, 0)),
                    Cindex(0, Index(0, 4, 0)), Cindex(3, Index(0, 7, 0))]
    # x at t=4 missing: the Failover falls over to a; IfDefined(a@7) missing is fine.
    avail = {Cindex(0, Index(0, 5, 0)), Cindex(1, Index(0, 6, 0)), Cindex(3, Index(0, 5, 0))}
    used = []
    assert d.is_computable(i, avail.__contains__, used)
    assert used == [Cindex(0, Index(0, 5, 0)), Cindex(1, Index(0, 6, 0)),
                    Cindex(3, Index(0, 5, 0))]
    # y at 6 missing: the Sum is not computable, so nothing is; used is cleared.
    used = ["junk"]
    assert not d.is_computable(i, {Cindex(0, Index(0, 5, 0))}.__contains__, used)
    assert used == []
    assert d.is_computable(i, everything, None)
    assert d.get_node_dependencies() == {0, 1, 3}
    assert d.get_node_dependencies([]) == [0, 1, 0, 3, 3]


def test_modulus_and_scales():
    assert _d("x").modulus() == 1
    assert _d("Append(Switch(x, y), Round(a, 3))").modulus() == 6
    assert _d("Sum(Switch(x, y, a), Offset(Round(x, 4), 1))").modulus() == 12
    d = _d("Sum(Scale(0.5, x), Sum(Offset(Scale(0.5, x), -2), Const(2, 4)))")
    part = d.part(0)
    assert part.get_scale_for_node(0) == 0.5
    assert part.get_scale_for_node(1) == float("inf")
    assert part.get_scale_for_node(-1) == 2.0
    with pytest.raises(DescriptorError, match="Inconsistent value"):
        _d("Sum(Scale(2, x), x)").part(0).get_scale_for_node(0)
    with pytest.raises(DescriptorError, match="IfDefined"):
        _d("IfDefined(Const(1, 4))").part(0).get_scale_for_node(-1)
    assert isinstance(_d("Scale(3, x)").part(0), SimpleSumDescriptor)


def test_dims_and_equality():
    nnet = Nnet.from_config(BASE + "output-node name=o input=Append(x, Const(1, 3))\n")
    names = nnet.get_some_node_names()
    d = parse_descriptor("Append(x, Sum(y, a), Const(1, 3))", names)
    assert d.dim(nnet) == 11
    bad = parse_descriptor("Sum(x, Const(1, 3))", names)
    with pytest.raises(DescriptorError, match="inconsistent dimension: 4 vs. 3"):
        bad.dim(nnet)
    assert d == parse_descriptor("Append(x, Sum(y, a), Const(1.0, 3))", names)
    assert d != parse_descriptor("Append(x, Sum(a, y), Const(1, 3))", names)
    assert hash(d) == hash(d.copy())


def test_name_matches_pattern():
    assert name_matches_pattern("tdnn1.affine", "tdnn*")
    assert name_matches_pattern("abc", "*")
    assert name_matches_pattern("abc", "a*c")
    assert not name_matches_pattern("abc", "a*d")
    assert not name_matches_pattern("a.c", "a?c")
    assert name_matches_pattern("a?c", "a?c")
    assert name_matches_pattern("", "*")


# -- property tests: random expressions from the whole grammar ------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402


def _expressions():
    leaf = st.sampled_from(["x", "y", "a"]) | st.builds(
        lambda v, d: "Const(%s, %d)" % (v, d), st.sampled_from(["1", "-0.5", "2.5"]),
        st.sampled_from([4, 8]))

    def extend(inner):
        args = st.lists(inner, min_size=1, max_size=3).map(", ".join)
        return st.one_of(
            st.builds(lambda a: "Append(%s)" % a, args),
            st.builds(lambda a: "Sum(%s)" % a, args),
            st.builds(lambda a: "Switch(%s)" % a, args),
            st.builds(lambda a, b: "Failover(%s, %s)" % (a, b), inner, inner),
            st.builds(lambda a: "IfDefined(%s)" % a, inner),
            st.builds(lambda a, t: "Offset(%s, %d)" % (a, t), inner, st.integers(-3, 3)),
            st.builds(lambda a, t, x: "Offset(%s, %d, %d)" % (a, t, x), inner,
                      st.integers(-2, 2), st.integers(-1, 1)),
            st.builds(lambda a, m: "Round(%s, %d)" % (a, m), inner, st.integers(1, 4)),
            st.builds(lambda a, v, n: "ReplaceIndex(%s, %s, %d)" % (a, v, n), inner,
                      st.sampled_from(["t", "x"]), st.integers(-2, 2)),
            st.builds(lambda s, a: "Scale(%s, %s)" % (s, a), st.sampled_from(["2", "0.5", "-1"]),
                      inner),
        )
    return st.recursive(leaf, extend, max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(_expressions(), st.integers(-5, 5), st.integers(0, 1))
def test_random_expressions(text, t, n):
    """Whatever parses: its printed form is a fixed point of parse+normalize,
    and is_computable's used inputs are among get_dependencies' Cindexes."""
    try:
        d = _d(text)
    except DescriptorError:
        return
    printed = d.write_config(NAMES)
    again = _d(printed)
    assert again == d and again.write_config(NAMES) == printed
    index = Index(n, t, 0)
    deps = d.get_dependencies(index)
    used = []
    try:
        ok = d.is_computable(index, lambda c: True, used)
    except DescriptorError:      # e.g. Round(x, 0) cannot be evaluated
        return
    assert ok and set(used) <= set(deps)
    assert {c.node for c in deps} <= d.get_node_dependencies()
