"""LSTM/GRU nonlinearities, attention, statistics, constant and dropout-style
components against Kaldi.

Reference data (kaldi-ref, plus the copies in tests/data/components):
- components/compN (simple components: LSTM, GRU, output-GRU): the four
  nnet3-copy directions byte for byte, Info(), Properties(), forward,
  input derivative and the gradient (parameters and the statistics the
  backward pass accumulates) from data.ark / gradient.txt;
- whole models (models/*, random/case*): every component of these types
  read and written back byte for byte, in both modes and across modes
  (text read -> binary equals Kaldi's txt-to-bin copy), Info() equal to
  nnet3-info's line, and init_from_config on the config line that built it
  giving Kaldi's Info() (up to the random parameter statistics);
- computations (computation.opt.kaldi / computation.plain.txt): every
  precomputed-indexes object of these types read and written back byte for
  byte, and precompute_indexes() on the index lists Kaldi printed
  reproducing Kaldi's object; reorder_indexes() reproducing Kaldi's order.
Numerics of the non-simple components are checked by finite differences.
"""

import re
from pathlib import Path

import numpy as np
import pytest

import pynnet3.components  # noqa: F401  (registers component types)
from conftest import KALDI_REF, TEST_DATA
from kaldi_component_cases import (KaldiCaseTests, case_params, component_from_line,
                                   max_rel_diff, read_ark, to_bytes)
from pynnet3.compiler.request import ComputationRequest
from pynnet3.components import Component, PrecomputedIndexes, kaldi_random
from pynnet3.components.base import P
from pynnet3.errors import ComputationError, ConfigError, KaldiFormatError
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.common.config_line import ConfigLine, read_config_lines
from pynnet3.common.index import Index, kNoTime

SIMPLE_TYPES = ("LstmNonlinearityComponent", "GruNonlinearityComponent",
                "OutputGruNonlinearityComponent")
GENERAL_TYPES = ("RestrictedAttentionComponent", "StatisticsExtractionComponent",
                 "StatisticsPoolingComponent", "ConstantComponent", "GeneralDropoutComponent",
                 "DropoutMaskComponent", "SpecAugmentTimeMaskComponent")
MY_TYPES = SIMPLE_TYPES + GENERAL_TYPES
PI_TYPES = tuple(t + "PrecomputedIndexes" for t in
                 ("RestrictedAttentionComponent", "StatisticsExtractionComponent",
                  "StatisticsPoolingComponent", "GeneralDropoutComponent",
                  "SpecAugmentTimeMaskComponent"))
TOL = 1e-3
DATA = TEST_DATA / "components"


def _has_any(path, tokens):
    data = Path(path).read_bytes()
    return any(("<%s>" % t).encode() in data for t in tokens)


# -- collection ------------------------------------------------------------------------

def _model_dirs():
    """Folders holding a model (models/NAME, random/caseN, and the copies)."""
    dirs = []
    if KALDI_REF.is_dir():
        dirs += sorted(KALDI_REF.glob("models/*"))
        dirs += sorted(KALDI_REF.glob("random/case*"), key=lambda p: int(p.name[4:]))
    dirs += sorted((DATA / "general").glob("*"))
    return [d for d in dirs if (d / "model.raw").is_file() and _has_any(d / "model.raw",
                                                                         MY_TYPES)]


def _dir_id(d):
    return ("data:" if DATA in d.parents else "") + "/".join(d.parts[-2:])


def _model_files():
    out = []
    patterns = ("model.raw", "model.txt", "kaldi-copy.*", "copy.*.txt", "final*.mdl",
                "extract.raw", "kaldi-am-copy.*")
    for d in _model_dirs():
        for pattern in patterns:
            for f in sorted(d.glob(pattern)):
                if f.is_file() and _has_any(f, MY_TYPES):
                    out.append(pytest.param(f, id=_dir_id(d) + "/" + f.name))
    return out


def _computation_dirs():
    dirs = []
    if KALDI_REF.is_dir():
        dirs += sorted(KALDI_REF.glob("random/case*"), key=lambda p: int(p.name[4:]))
        dirs += sorted(KALDI_REF.glob("models/*/request*"))
    dirs += sorted((DATA / "general").glob("*/request*"))
    dirs += sorted((DATA / "general").glob("case*"))
    return [pytest.param(d, id=_dir_id(d)) for d in dirs
            if (d / "computation.opt.kaldi").is_file()
            and _has_any(d / "computation.opt.kaldi", PI_TYPES)]


SIMPLE_CASES = case_params(SIMPLE_TYPES)
MODEL_DIRS = _model_dirs()
MODEL_FILES = _model_files()
COMPUTATION_DIRS = _computation_dirs()


# -- helpers ---------------------------------------------------------------------------

def components_in(path):
    """(name, component, the exact bytes Kaldi wrote for it, binary) for every
    component of our types in a model file."""
    data = Path(path).read_bytes()
    binary = data[:2] == b"\0B"
    out = []
    pos = 0
    marker = b"<ComponentName> "
    while True:
        at = data.find(marker, pos)
        if at < 0:
            return out
        stream = InputStream(data, binary, str(path), at + len(marker))
        name = stream.read_token()
        start = stream.pos
        pos = start
        if stream.peek_token()[1:-1] not in MY_TYPES:
            continue
        comp = Component.read_new(stream)
        out.append((name, comp, data[start:stream.pos], binary))
        pos = stream.pos


# ---------------------------------------------------------------------------
# Simple components: the compN cases
# ---------------------------------------------------------------------------

class TestKaldiCases(KaldiCaseTests):
    TYPES = SIMPLE_TYPES


@pytest.mark.parametrize("case", SIMPLE_CASES)
def test_simple_forward_backward_gradient(case, monkeypatch):
    comp = Component.read(str(case / "component.bin"))
    data = read_ark(case / "data.ark")
    kaldi_grad = Component.read(str(case / "gradient.txt"))
    # The GRUs accumulate stats (and self-repair) on a random half of the
    # minibatches; take the branch Kaldi took (visible in its count).
    if comp.type_name != "LstmNonlinearityComponent":
        draw = 0.0 if kaldi_grad.count > 0 else 1.0
        monkeypatch.setattr(kaldi_random, "rand_uniform", lambda: draw)
    x = data["in"]
    out = np.zeros((x.shape[0], comp.output_dim()), np.float32)
    assert comp.propagate(None, x, out) is None
    assert max_rel_diff(out, data["out"]) <= TOL
    grad = comp.copy()
    grad.scale(0.0)
    grad.set_as_gradient()
    in_deriv = np.zeros_like(x)
    comp.backprop("", None, x, out, data["out_deriv"], None, grad, in_deriv)
    assert max_rel_diff(in_deriv, data["in_deriv"]) <= TOL
    assert max_rel_diff(grad.vectorize(), kaldi_grad.vectorize()) <= TOL
    assert grad.count == kaldi_grad.count
    assert max_rel_diff(grad.value_sum, kaldi_grad.value_sum) <= TOL * max(1.0, grad.count)
    assert max_rel_diff(grad.deriv_sum, kaldi_grad.deriv_sum) <= TOL * max(1.0, grad.count)
    assert np.allclose(grad.self_repair_total, kaldi_grad.self_repair_total, atol=1e-3)
    # Without an update the input derivative is the same (self-repair is
    # negligible here) and the component itself is untouched.
    before = comp.vectorize().copy()
    in_deriv2 = np.zeros_like(x)
    comp.backprop("", None, x, out, data["out_deriv"], None, None, in_deriv2)
    assert max_rel_diff(in_deriv2, data["in_deriv"]) <= TOL
    np.testing.assert_array_equal(comp.vectorize(), before)


def _small_lstm(use_dropout=False):
    return component_from_line("component name=l type=LstmNonlinearityComponent cell-dim=3 "
                               "use-dropout=%s self-repair-scale=0" % use_dropout)


@pytest.mark.parametrize("make", [
    lambda: _small_lstm(), lambda: _small_lstm(True),
    lambda: component_from_line("component name=g type=GruNonlinearityComponent cell-dim=4 "
                                "recurrent-dim=2 self-repair-scale=0"),
    lambda: component_from_line("component name=g type=GruNonlinearityComponent cell-dim=3 "
                                "self-repair-scale=0"),
    lambda: component_from_line("component name=o type=OutputGruNonlinearityComponent "
                                "cell-dim=3 self-repair-scale=0"),
], ids=["lstm", "lstm-dropout", "gru-projected", "gru", "ogru"])
def test_recurrent_derivatives_by_finite_differences(make):
    kaldi_random.seed(3)
    comp = make()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, comp.input_dim())).astype(np.float32)
    d = rng.standard_normal((7, comp.output_dim())).astype(np.float64)

    def f(c, inp):
        out = np.zeros((7, c.output_dim()), np.float32)
        c.propagate(None, inp, out)
        return float((out * d).sum()), out

    _, out = f(comp, x)
    grad = comp.copy()
    grad.scale(0.0)
    grad.set_as_gradient()
    in_deriv = np.zeros_like(x)
    comp.backprop("", None, x, out, d.astype(np.float32), None, grad, in_deriv)
    eps = 1e-3
    v = rng.standard_normal(x.shape).astype(np.float32)
    if comp.input_dim() % 5 == 3:      # LSTM dropout scales get no derivative
        v[:, -3:] = 0.0
    measured = (f(comp, x + eps * v)[0] - f(comp, x - eps * v)[0]) / (2 * eps)
    predicted = float((in_deriv.astype(np.float64) * v).sum())
    assert abs(measured - predicted) <= 2e-2 * max(1.0, abs(predicted))
    p = rng.standard_normal(comp.num_parameters()).astype(np.float32)
    plus, minus = comp.copy(), comp.copy()
    plus.unvectorize(comp.vectorize() + eps * p)
    minus.unvectorize(comp.vectorize() - eps * p)
    measured = (f(plus, x)[0] - f(minus, x)[0]) / (2 * eps)
    predicted = float(np.dot(grad.vectorize().astype(np.float64), p))
    assert abs(measured - predicted) <= 2e-2 * max(1.0, abs(predicted))
    # A non-gradient copy takes a learning-rate step along the gradient.
    stepped = comp.copy()
    stepped.learning_rate = 0.5
    comp.backprop("", None, x, out, d.astype(np.float32), None, stepped, None)
    np.testing.assert_allclose(stepped.vectorize(), comp.vectorize() + 0.5 * grad.vectorize(),
                               rtol=1e-5, atol=1e-5)


def test_recurrent_vector_operations():
    kaldi_random.seed(0)
    a = component_from_line("component name=g type=GruNonlinearityComponent cell-dim=4 "
                            "recurrent-dim=3")
    b = a.copy()
    b.perturb_params(0.1)
    v = a.vectorize()
    assert v.shape == (a.num_parameters(),) == (12,)
    np.testing.assert_array_equal(v, a.w_h.ravel())
    assert a.dot_product(b) == pytest.approx(float(np.dot(v, b.vectorize())), rel=1e-5)
    c = a.copy()
    c.add(2.0, b)
    np.testing.assert_allclose(c.vectorize(), v + 2 * b.vectorize(), rtol=1e-6)
    c.scale(0.5)
    np.testing.assert_allclose(c.vectorize(), 0.5 * (v + 2 * b.vectorize()), rtol=1e-6)
    c.count, c.self_repair_total = 4.0, 2.0
    c.scale(0.0)
    assert c.count == 0.0 and c.self_repair_total == 0.0 and not c.vectorize().any()
    lstm = _small_lstm()
    assert lstm.num_parameters() == 9
    np.testing.assert_array_equal(lstm.vectorize(), lstm.params.ravel())


def test_recurrent_init_distributions_and_errors():
    kaldi_random.seed(5)
    lstm = component_from_line("component name=l type=LstmNonlinearityComponent cell-dim=2000 "
                               "param-stddev=0.5 learning-rate=0.01")
    assert lstm.params.std() == pytest.approx(0.5, rel=0.05)
    assert lstm.self_repair_config.tolist() == pytest.approx(
        [0.05, 0.05, 0.2, 0.05, 0.2] + [1e-5] * 5)
    assert lstm.learning_rate == pytest.approx(0.01)
    gru = component_from_line("component name=g type=GruNonlinearityComponent cell-dim=400")
    assert gru.w_h.shape == (400, 400)
    assert gru.w_h.std() == pytest.approx(0.05, rel=0.05)      # 1/sqrt(cell-dim)
    ogru = component_from_line("component name=o type=OutputGruNonlinearityComponent "
                               "cell-dim=5000 param-mean=2 param-stddev=0.1")
    assert ogru.w_h.mean() == pytest.approx(2.0, abs=0.01)
    assert ogru.w_h.std() == pytest.approx(0.1, rel=0.05)
    for line in ("component name=l type=LstmNonlinearityComponent",
                 "component name=l type=LstmNonlinearityComponent cell-dim=4 "
                 "sigmoid-self-repair-threshold=0.5",
                 "component name=g type=GruNonlinearityComponent cell-dim=4 recurrent-dim=5",
                 "component name=g type=GruNonlinearityComponent cell-dim=0",
                 "component name=o type=OutputGruNonlinearityComponent cell-dim=4 bogus=1"):
        with pytest.raises(ConfigError):
            component_from_line(line)


# ---------------------------------------------------------------------------
# Whole models: byte-exact copies and Info()
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", MODEL_FILES)
def test_model_components_round_trip(path):
    comps = components_in(path)
    assert comps
    for name, comp, raw, binary in comps:
        assert to_bytes(comp, binary) == raw, "component '%s' (%s)" % (name, comp.type_name)


@pytest.mark.parametrize("model_dir", [pytest.param(d, id=_dir_id(d)) for d in MODEL_DIRS
                                       if (d / "model.txt").is_file()])
def test_model_components_across_modes(model_dir):
    """model.txt is Kaldi's text copy of model.raw; kaldi-copy.txt-to-bin.raw
    (where present) its binary copy of model.txt."""
    from_bin = components_in(model_dir / "model.raw")
    from_txt = components_in(model_dir / "model.txt")
    assert [n for n, *_ in from_bin] == [n for n, *_ in from_txt]
    for (name, comp, _, _), (_, _, raw_txt, _) in zip(from_bin, from_txt):
        assert to_bytes(comp, False) == raw_txt, name
    if (model_dir / "kaldi-copy.txt-to-bin.raw").is_file():
        copied = components_in(model_dir / "kaldi-copy.txt-to-bin.raw")
        for (name, comp, _, _), (_, _, raw_bin, _) in zip(from_txt, copied):
            assert to_bytes(comp, True) == raw_bin, name


def _info_lines(path):
    lines = {}
    for line in Path(path).read_text().splitlines():
        if line.startswith("component name="):
            name, rest = line[len("component name="):].split(" type=", 1)
            lines[name] = rest
    return lines


@pytest.mark.parametrize("model_dir", [pytest.param(d, id=_dir_id(d)) for d in MODEL_DIRS
                                       if (d / "info.txt").is_file()])
def test_model_component_info(model_dir):
    lines = _info_lines(model_dir / "info.txt")
    checked = 0
    for name, comp, _, _ in components_in(model_dir / "model.raw"):
        assert comp.info() == lines[name], name
        checked += 1
    assert checked


_RANDOM_STATS = re.compile(r"-(rms=[^,]*|\{mean,stddev\}=[^,]*,[^,]*)")


def _config_lines(model_dir):
    texts = sorted(model_dir.glob("config.*"), key=lambda p: int(p.suffix[1:])) \
        if not (model_dir / "final.config").is_file() else [model_dir / "final.config"]
    lines = {}
    for path in texts:
        for _, line in read_config_lines(path.read_text()):
            cfl = ConfigLine(line)
            if cfl.first_token == "component" and cfl.get_str("type") in MY_TYPES:
                lines[cfl.get_str("name")] = line
    return lines


@pytest.mark.parametrize("model_dir", [pytest.param(d, id=_dir_id(d)) for d in MODEL_DIRS
                                       if (d / "info.txt").is_file()])
def test_init_from_config_gives_kaldis_component(model_dir):
    """The config line that built each component gives the same Info() (the
    random parameters' statistics aside), dims and properties."""
    info = _info_lines(model_dir / "info.txt")
    lines = _config_lines(model_dir)
    if not lines:
        pytest.skip("no config lines for these types here")
    read = {name: comp for name, comp, _, _ in components_in(model_dir / "model.raw")}
    for name, line in lines.items():
        if name not in info:
            continue
        comp = component_from_line(line)
        assert _RANDOM_STATS.sub("", comp.info()) == _RANDOM_STATS.sub("", info[name]), name
        assert comp.properties() == read[name].properties()
        if comp.num_parameters() == 0 and comp.type_name != "ConstantComponent":
            # Text (7 digits): some reference models went through a text copy.
            assert to_bytes(comp, False) == to_bytes(read[name], False), name


# ---------------------------------------------------------------------------
# Precomputed indexes inside computations
# ---------------------------------------------------------------------------

def _pi_blobs(path):
    data = Path(path).read_bytes()
    binary = data[:2] == b"\0B"
    blobs = []
    for type_name in PI_TYPES:
        token = ("<%s> " % type_name).encode()
        pos = data.find(token)
        while pos >= 0:
            stream = InputStream(data, binary, str(path), pos)
            obj = PrecomputedIndexes.read_new(stream)
            blobs.append((obj, data[pos:stream.pos], binary))
            pos = data.find(token, stream.pos)
    return blobs


_RANGE = re.compile(r"\((-?\d+),(-?\d+)(?::(-?\d+))?(?:,(-?\d+))?\)")


def _parse_printed_indexes(text):
    """Index lists as Kaldi's PrintIndexes writes them ('(n,t1:t2[,x])')."""
    out = []
    for m in _RANGE.finditer(text):
        n, t1, x = int(m.group(1)), int(m.group(2)), int(m.group(4) or 0)
        t2 = t1 if m.group(3) is None else int(m.group(3))
        out.extend(Index(n, t, x) for t in range(t1, t2 + 1))
    return out


def _model_of(case):
    return case / "model.raw" if (case / "model.raw").is_file() else case.parent / "model.raw"


@pytest.mark.parametrize("case", COMPUTATION_DIRS)
def test_precomputed_indexes_round_trip(case):
    blobs = _pi_blobs(case / "computation.opt.kaldi")
    assert blobs
    for obj, raw, binary in blobs:
        assert to_bytes(obj, binary) == raw, obj.type_name


def test_precomputed_indexes_in_kaldis_compiler_cache(kaldi_ref):
    """nnet3-xvector-compute's cached computations (statistics components)."""
    blobs = _pi_blobs(kaldi_ref / "models" / "xvector" / "kaldi-compiler-cache.bin")
    assert {obj.type_name for obj, _, _ in blobs} == {
        "StatisticsExtractionComponentPrecomputedIndexes",
        "StatisticsPoolingComponentPrecomputedIndexes"}
    for obj, raw, binary in blobs:
        assert to_bytes(obj, binary) == raw


def _printed_propagates(case):
    """(component name, input indexes, output indexes) of every Propagate in
    Kaldi's printed unoptimized computation whose index lists are printed in
    full (Kaldi abbreviates long lists with "...")."""
    plain = (Path(case) / "computation.plain.txt").read_text()
    matrices = dict(re.findall(r"^(m\d+) == (?:value|deriv): [^\[]*(\[.*\])$", plain, re.M))
    return [(name, _parse_printed_indexes(matrices[m_in]), _parse_printed_indexes(matrices[m_out]))
            for name, _, m_in, m_out in re.findall(
                r"^c\d+: (\S+)\.Propagate\(precomputed_indexes\[(\d+)\], (m\d+), &(m\d+)\)$",
                plain, re.M)
            if "..." not in matrices[m_in] + matrices[m_out]]


# Cases with at least one Propagate whose index lists Kaldi printed in full.
PRINTED_COMPUTATION_DIRS = [p for p in COMPUTATION_DIRS if _printed_propagates(p.values[0])]


@pytest.mark.parametrize("case", PRINTED_COMPUTATION_DIRS)
def test_precompute_and_reorder_indexes_as_kaldi(case):
    """For each Propagate of our components in Kaldi's unoptimized computation
    whose index lists are printed in full: reorder_indexes() of those lists
    gives Kaldi's order back, and precompute_indexes() gives one of the
    objects in Kaldi's optimized computation, byte for byte. (Cases whose
    lists are all abbreviated are covered by the next test.)"""
    blobs = _pi_blobs(case / "computation.opt.kaldi")
    comps = {name: comp for name, comp, _, _ in components_in(_model_of(case))}
    need_derivs = ComputationRequest.read(str(case / "request.txt")).need_derivatives()
    checked = 0
    for name, ins, outs in _printed_propagates(case):
        comp = comps.get(name)
        if comp is None:
            continue
        if comp.properties() & P.kReordersIndexes:
            real_in = [i for i in ins if i.t != kNoTime]
            real_out = [i for i in outs if i.t != kNoTime]
            # Kaldi hands ReorderIndexes the lists in some other order.
            new_in, new_out = comp.reorder_indexes(real_in[::-1], real_out[::-1])
            assert (list(new_in), list(new_out)) == (ins, outs), name
        pi = comp.precompute_indexes(None, ins, outs, need_derivs)
        candidates = [raw for obj, raw, _ in blobs if obj.type_name == pi.type_name]
        binary = blobs[0][2]
        assert to_bytes(pi, binary) in candidates, name
        checked += 1
    assert checked


def test_some_computations_print_full_index_lists():
    if KALDI_REF.is_dir():
        assert len(PRINTED_COMPUTATION_DIRS) >= 10


@pytest.mark.parametrize("case", COMPUTATION_DIRS)
def test_compiled_precomputed_indexes_equal_kaldis(case):
    """pynnet3's compiler on the case's request (index lists of its own, then
    our precompute_indexes) gives exactly Kaldi's precomputed-indexes objects
    of these types, as a multiset (also where the printed lists are cut)."""
    from pynnet3.driver.compile_and_optimize import compile
    from pynnet3.nnet.nnet import Nnet
    blobs = _pi_blobs(case / "computation.opt.kaldi")
    nnet = Nnet.read(str(_model_of(case)))
    computation = compile(nnet, ComputationRequest.read(str(case / "request.txt")),
                          optimize=False)
    binary = blobs[0][2]
    ours = sorted(to_bytes(info.data, binary)
                  for info in computation.component_precomputed_indexes
                  if info.data is not None and info.data.type_name in PI_TYPES)
    assert ours == sorted(raw for _, raw, _ in blobs)


# ---------------------------------------------------------------------------
# Non-simple components: numerics
# ---------------------------------------------------------------------------

def _run(comp, pi, x, out_dim, out_deriv, to_update=None):
    out = np.zeros((len(out_deriv), out_dim), np.float32)
    memo = comp.propagate(pi, x, out)
    in_deriv = np.zeros_like(x)
    comp.backprop("", pi, x, out, out_deriv, memo, to_update, in_deriv)
    return out, in_deriv, memo


def _fd_check(forward, x, in_deriv, d, rng, mask=None, eps=1e-3, tol=2e-2):
    for _ in range(3):
        v = rng.standard_normal(x.shape).astype(np.float32)
        if mask is not None:
            v *= mask
        measured = (float((forward(x + eps * v) * d).sum())
                    - float((forward(x - eps * v) * d).sum())) / (2 * eps)
        predicted = float((in_deriv.astype(np.float64) * v).sum())
        assert abs(measured - predicted) <= tol * max(1.0, abs(predicted)), \
            (measured, predicted)


def _attention_setup(line, num_t=9, num_n=2, t_step=1):
    comp = component_from_line(line)
    outputs = [Index(n, t, 0) for n in range(num_n) for t in range(0, num_t * t_step, t_step)]
    needed = sorted({i for o in outputs for i in comp.get_input_indexes(None, o)})
    available = set(needed)
    for o in outputs:
        assert comp.is_computable(None, o, available.__contains__, None)
    ins, outs = comp.reorder_indexes(needed, outputs)
    pi = comp.precompute_indexes(None, ins, outs, True)
    assert pi.io.num_t_in * pi.io.num_images == len(ins)
    return comp, pi, ins, outs


@pytest.mark.parametrize("line", [
    "component name=a type=RestrictedAttentionComponent num-heads=2 key-dim=3 value-dim=4 "
    "num-left-inputs=2 num-right-inputs=1 time-stride=2",
    "component name=a type=RestrictedAttentionComponent key-dim=5 value-dim=2 "
    "num-left-inputs=3 num-right-inputs=0 output-context=false key-scale=0.5",
    "component name=a type=RestrictedAttentionComponent num-heads=3 key-dim=2 value-dim=3 "
    "num-left-inputs=0 num-right-inputs=2 num-right-inputs-required=1",
], ids=["2heads-stride2", "no-context", "required"])
def test_attention_derivatives_and_stats(line, monkeypatch):
    comp, pi, ins, outs = _attention_setup(line)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((len(ins), comp.input_dim())).astype(np.float32)
    x[[i.t == kNoTime for i in ins]] = 0.0
    d = rng.standard_normal((len(outs), comp.output_dim())).astype(np.float32)
    out, in_deriv, memo = _run(comp, pi, x, comp.output_dim(), d)
    c = memo
    assert c.shape == (len(outs), comp.num_heads * comp.context_dim)
    np.testing.assert_allclose(c.reshape(len(outs), comp.num_heads, -1).sum(axis=2), 1.0,
                               rtol=1e-5)

    def forward(inp):
        o = np.zeros_like(out)
        comp.propagate(pi, inp, o)
        return o.astype(np.float64)

    _fd_check(forward, x, in_deriv, d.astype(np.float64), rng)
    # Stats: two in three minibatches (the draw 0 skips).
    monkeypatch.setattr(kaldi_random, "rand_int", lambda lo, hi: 0)
    comp.store_stats(x, out, memo)
    assert comp.stats_count == 0 and comp.entropy_stats.shape == (comp.num_heads,)
    monkeypatch.setattr(kaldi_random, "rand_int", lambda lo, hi: 1)
    comp.store_stats(x, out, memo)
    assert comp.stats_count == len(outs)
    np.testing.assert_allclose(comp.posterior_stats.sum(axis=1), len(outs), rtol=1e-5)
    entropy = -(c * np.log(np.maximum(c, 1e-20))).reshape(len(outs), comp.num_heads, -1)
    np.testing.assert_allclose(comp.entropy_stats, entropy.sum(axis=(0, 2)), rtol=1e-4)
    assert ", entropy=" in comp.info() and "stats-count=%d" % len(outs) in comp.info()
    # Stats survive a round trip (they are written as double precision).
    again = Component.read_new(InputStream.from_bytes(to_bytes(comp, True, header=True)))
    assert to_bytes(again, True) == to_bytes(comp, True)
    assert to_bytes(again, False) == to_bytes(comp, False)
    other = comp.copy()
    other.add(1.0, comp)
    assert other.stats_count == 2 * comp.stats_count
    other.scale(0.5)
    np.testing.assert_allclose(other.posterior_stats, comp.posterior_stats)
    other.zero_stats()
    assert other.stats_count == 0.0 and not other.entropy_stats.any()


def test_attention_is_computable_follows_required_context():
    comp = component_from_line("component name=a type=RestrictedAttentionComponent key-dim=2 "
                               "value-dim=2 num-left-inputs=3 num-right-inputs=1 "
                               "num-left-inputs-required=1 num-right-inputs-required=0")
    o = Index(0, 10, 0)
    assert comp.get_input_indexes(None, o) == [Index(0, t, 0) for t in range(7, 12)]
    have = {Index(0, 9, 0), Index(0, 10, 0)}
    used = []
    assert comp.is_computable(None, o, have.__contains__, used)
    assert used == [Index(0, 9, 0), Index(0, 10, 0)]
    assert comp.is_computable(None, o, have.__contains__)
    used = []
    assert not comp.is_computable(None, o, {Index(0, 10, 0)}.__contains__, used)
    assert used == []
    # Not-required inputs become kNoTime padding in the reordered lists.
    ins, outs = comp.reorder_indexes(sorted(have), [o])
    assert outs == [o]
    assert ins == [Index(0, kNoTime, 0)] * 2 + [Index(0, 9, 0), Index(0, 10, 0),
                                               Index(0, kNoTime, 0)]


def _stats_pipeline(extract_line, pool_line, num_t=24, num_n=2):
    ext = component_from_line(extract_line)
    pool = component_from_line(pool_line)
    period = ext.output_period
    outputs = [Index(n, t, 0) for n in range(num_n) for t in range(0, num_t, pool.input_period)]
    have_in = {Index(n, t, 0) for n in range(num_n) for t in range(0, num_t, ext.input_period)}
    pool_in = sorted({i for o in outputs for i in pool.get_input_indexes(None, o)
                      if 0 <= i.t < num_t})
    used = []
    assert all(pool.is_computable(None, o, set(pool_in).__contains__, used) for o in outputs)
    pool_in, outputs = pool.reorder_indexes(pool_in, outputs)
    ext_in = sorted({i for o in pool_in for i in ext.get_input_indexes(None, o)} & have_in)
    assert all(ext.is_computable(None, o, have_in.__contains__, None) for o in pool_in)
    ext_in, pool_in2 = ext.reorder_indexes(ext_in[::-1], pool_in)
    assert pool_in2 == pool_in
    pi_e = ext.precompute_indexes(None, ext_in, pool_in, True)
    pi_p = pool.precompute_indexes(None, pool_in, outputs, True)
    assert (np.diff(pi_e.forward_indexes, axis=1) == pi_e.counts[:, None]).all()
    assert period % ext.input_period == 0
    return ext, pool, pi_e, pi_p, ext_in, pool_in, outputs


@pytest.mark.parametrize("lines", [
    ("component name=e type=StatisticsExtractionComponent input-dim=4 input-period=1 "
     "output-period=3", "component name=p type=StatisticsPoolingComponent input-dim=9 "
     "input-period=3 left-context=6 right-context=9 num-log-count-features=2 "
     "output-stddevs=true"),
    ("component name=e type=StatisticsExtractionComponent input-dim=3 input-period=2 "
     "output-period=4 include-variance=false", "component name=p "
     "type=StatisticsPoolingComponent input-dim=4 input-period=4 left-context=0 "
     "right-context=8"),
    ("component name=e type=StatisticsExtractionComponent input-dim=5",
     "component name=p type=StatisticsPoolingComponent input-dim=11 left-context=3 "
     "right-context=2 output-stddevs=true"),
], ids=["stddev-logcount", "mean-only", "period1"])
def test_statistics_pipeline_values_and_derivatives(lines):
    ext, pool, pi_e, pi_p, ext_in, pool_in, outputs = _stats_pipeline(*lines)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((len(ext_in), ext.input_dim())).astype(np.float32)
    d = rng.standard_normal((len(outputs), pool.output_dim())).astype(np.float32)

    def forward(inp, return_stats=False):
        stats = np.zeros((len(pool_in), ext.output_dim()), np.float32)
        ext.propagate(pi_e, inp, stats)
        out = np.zeros((len(outputs), pool.output_dim()), np.float32)
        pool.propagate(pi_p, stats, out)
        return (stats, out) if return_stats else out.astype(np.float64)

    stats, out = forward(x, True)
    # Direct computation of the pooled mean / stddev of one output.
    o = outputs[len(outputs) // 2]
    window = [k for k, i in enumerate(ext_in) if i.n == o.n and
              o.t - pool.left_context <= i.t < o.t + pool.right_context + ext.output_period]
    frames = x[window].astype(np.float64)
    row = out[len(outputs) // 2]
    nlc = pool.num_log_count_features
    np.testing.assert_allclose(row[:nlc], np.log(len(window)), rtol=1e-5)
    np.testing.assert_allclose(row[nlc:nlc + ext.input_dim()], frames.mean(axis=0),
                               rtol=1e-4, atol=1e-5)
    if pool.output_stddevs:
        np.testing.assert_allclose(row[nlc + ext.input_dim():], frames.std(axis=0),
                                   rtol=1e-3, atol=1e-4)
    stats_deriv = np.zeros_like(stats)
    pool.backprop("", pi_p, stats, out, d, None, None, stats_deriv)
    assert not stats_deriv[:, 0].any()       # the count gets no derivative
    in_deriv = np.zeros_like(x)
    ext.backprop("", pi_e, x, stats, stats_deriv, None, None, in_deriv)
    _fd_check(forward, x, in_deriv, d.astype(np.float64), rng)


def test_statistics_pooling_is_only_defined_at_its_period():
    pool = component_from_line("component name=p type=StatisticsPoolingComponent input-dim=3 "
                               "input-period=2 left-context=2 right-context=2")
    assert not pool.is_computable(None, Index(0, 3, 0), lambda i: True)
    assert pool.is_computable(None, Index(0, 4, 0), lambda i: i.t == 6)
    with pytest.raises(ComputationError):
        pool.get_input_indexes(None, Index(0, 3, 0))
    ext = component_from_line("component name=e type=StatisticsExtractionComponent "
                              "input-dim=3 input-period=2 output-period=6")
    assert ext.get_input_indexes(None, Index(0, -1, 0)) == [Index(0, t, 0) for t in (-6, -4, -2)]
    with pytest.raises(ComputationError):
        ext.precompute_indexes(None, [Index(0, 0, 0)], [Index(0, 7, 0)], False)
    for line in ("component name=p type=StatisticsPoolingComponent input-dim=4 left-context=1 "
                 "right-context=0 output-stddevs=true",
                 "component name=p type=StatisticsPoolingComponent input-dim=3 input-period=2 "
                 "left-context=1 right-context=2",
                 "component name=e type=StatisticsExtractionComponent input-dim=3 "
                 "input-period=2 output-period=3",
                 "component name=e type=StatisticsExtractionComponent"):
        with pytest.raises(ConfigError):
            component_from_line(line)


def test_int32_pair_vectors_both_modes():
    pairs = np.array([[0, 3], [3, 5], [-1, -1]], np.int32)
    for binary, expected in ((False, b"[ 0,3 3,5 -1,-1 ]\n"), (True, None)):
        for given in (pairs, pairs.tolist()):
            out = OutputStream(binary)
            out.write_int_pair_vector(given)
            data = out.getvalue()
            if expected is not None:
                assert data == expected
            back = InputStream(data, binary).read_int_pair_vector()
            np.testing.assert_array_equal(back, pairs)
    with pytest.raises(KaldiFormatError):
        InputStream(b"[ 1,2 3 ]", False).read_int_pair_vector()


@pytest.mark.parametrize("text, expected", [
    (b"[ ]", []), (b"[]", []), (b"\n [1,2]", [(1, 2)]), (b"[ 1, 2 ]", [(1, 2)]),
    (b"[ 1,2-3,+4 ]", [(1, 2), (-3, 4)]),  # C++'s >> starts the next number at '-'
    (b"[ -2147483648,2147483647 ]", [(-2147483648, 2147483647)]),
    (b"[ 1 ,2 ]", None), (b"[ 1,2,3 ]", None), (b"[ 1,2 x ]", None), (b"[ 1,1_0 ]", None),
    (b"[ 1,2147483648 ]", None), (b"[ 1,2", None), (b"1,2 ]", None), (b"[ 1,- 2 ]", None),
])
def test_int32_pair_vector_text_as_kaldi_reads_it(text, expected):
    """Kaldi's ReadIntegerPairVector reads each pair as ``is >> a``, ',', ``is >> b``."""
    stream = InputStream(text + b" <Next>", False)
    if expected is None:
        with pytest.raises(KaldiFormatError):
            stream.read_int_pair_vector()
    else:
        assert stream.read_int_pair_vector() == expected
        assert stream.read_token() == "<Next>"


def test_constant_component_update_and_io():
    kaldi_random.seed(1)
    comp = component_from_line("component name=c type=ConstantComponent output-dim=4000 "
                               "output-mean=1 output-stddev=2 learning-rate=0.5")
    assert comp.output.mean() == pytest.approx(1.0, abs=0.1)
    assert comp.output.std() == pytest.approx(2.0, rel=0.05)
    assert comp.get_input_indexes(None, Index(0, 5, 0)) == []
    assert comp.is_computable(None, Index(0, 5, 0), lambda i: False)
    comp = component_from_line("component name=c type=ConstantComponent output-dim=3 "
                               "output-mean=2 learning-rate=0.5")
    assert comp.properties() == P.kUpdatableComponent
    out = np.zeros((4, 3), np.float32)
    comp.propagate(None, np.zeros((0, 3), np.float32), out)
    np.testing.assert_array_equal(out, 2.0)
    d = np.arange(12, dtype=np.float32).reshape(4, 3)
    grad = comp.copy()
    grad.scale(0.0)
    grad.set_as_gradient()
    comp.backprop("", None, None, out, d, None, grad, None)
    np.testing.assert_allclose(grad.vectorize(), d.sum(axis=0))
    comp.backprop("", None, None, out, d, None, comp, None)
    np.testing.assert_allclose(comp.output, 2.0 + 0.5 * d.sum(axis=0))
    fixed = component_from_line("component name=c type=ConstantComponent output-dim=3 "
                                "is-updatable=false use-natural-gradient=false")
    assert fixed.properties() == 0
    assert "is-updatable=false, use-natural-gradient=false, output-{mean,stddev}=0,0" in \
        fixed.info()
    fixed.backprop("", None, None, out, d, None, fixed, None)
    fixed.scale(3.0)
    assert not fixed.output.any()
    for binary in (True, False):
        data = to_bytes(comp, binary, header=True)
        assert to_bytes(Component.read_new(InputStream.from_bytes(data)), binary, True) == data
    with pytest.raises(ConfigError):
        component_from_line("component name=c type=ConstantComponent")


def _dropout_indexes(n=3, t=10):
    return [Index(i, j, 0) for j in range(t) for i in range(n)]


def test_general_dropout_masks_and_test_mode():
    kaldi_random.seed(7)
    comp = component_from_line("component name=g type=GeneralDropoutComponent dim=6 "
                               "block-dim=3 dropout-proportion=0.5 time-period=4")
    assert comp.properties() & P.kInputContiguous
    idx = _dropout_indexes()
    pi = comp.precompute_indexes(None, idx, idx, True)
    # one mask row per (n, t // 4): 3 sequences x 3 blocks, each repeated for
    # the 2 column blocks.
    assert pi.num_mask_rows == 18 and len(pi.indexes) == 2 * len(idx)
    x = np.ones((len(idx), 6), np.float32)
    out, in_deriv, memo = _run(comp, pi, x, 6, x)
    assert set(np.unique(out)) <= {0.0, 2.0}
    np.testing.assert_array_equal(out, in_deriv)
    np.testing.assert_array_equal(out[:, :3], out[:, 3:])       # blocks share the mask
    rows_same_mask = [k for k, i in enumerate(idx) if i.n == 1 and 4 <= i.t < 8]
    assert (out[rows_same_mask] == out[rows_same_mask[0]]).all()
    assert out.mean() == pytest.approx(1.0, abs=0.35)
    comp.set_test_mode(True)
    out2, in_deriv2, memo2 = _run(comp, pi, x, 6, x)
    assert memo2 is None and (out2 == 1.0).all() and (in_deriv2 == 1.0).all()
    data = to_bytes(comp, False)
    assert b"<TestMode> </GeneralDropoutComponent>" in data
    assert Component.read_new(InputStream.from_bytes(data)).test_mode
    # continuous masks are 1 + 2p * Uniform[-1, 1]
    cont = component_from_line("component name=g type=GeneralDropoutComponent dim=500 "
                               "dropout-proportion=0.25 continuous=true")
    mask = cont.get_memo(200)
    assert mask.min() >= 0.5 and mask.max() <= 1.5 and mask.mean() == pytest.approx(1, abs=0.01)
    spec = component_from_line("component name=g type=GeneralDropoutComponent dim=20 "
                               "specaugment-max-proportion=0.3 specaugment-max-regions=2")
    mask = spec.get_memo(300)
    zeroed = (mask == 0).sum(axis=1)
    assert set(np.unique(mask)) <= {0.0, 1.0} and zeroed.max() <= 6 and zeroed.max() > 0
    assert "specaugment-max-proportion=0.3, specaugment-max-regions=2" in spec.info()
    data = to_bytes(spec, True, header=True)
    assert to_bytes(Component.read_new(InputStream.from_bytes(data)), True, True) == data
    with pytest.raises(ConfigError):
        component_from_line("component name=g type=GeneralDropoutComponent dim=6 block-dim=4")
    with pytest.raises(ConfigError):
        component_from_line("component name=g type=GeneralDropoutComponent dim=6 "
                            "specaugment-max-proportion=0.2 continuous=true")


def test_spec_augment_time_mask():
    kaldi_random.seed(11)
    comp = component_from_line("component name=s type=SpecAugmentTimeMaskComponent dim=4 "
                               "zeroed-proportion=0.3 time-mask-max-frames=4")
    idx = [Index(n, t, 0) for t in range(200) for n in (5, 2)]
    pi = comp.precompute_indexes(None, idx, idx, True)
    assert pi.tot_size == len(idx) and len(pi.indexes) == 2
    assert [idx[r] for r in pi.indexes[0][:3]] == [Index(2, 0, 0), Index(2, 1, 0), Index(2, 2, 0)]
    x = np.ones((len(idx), 4), np.float32)
    out, in_deriv, memo = _run(comp, pi, x, 4, x)
    assert set(np.unique(memo)) == {0.0, 1.0}
    np.testing.assert_array_equal(out, memo[:, None] * x)
    np.testing.assert_array_equal(in_deriv, out)
    for rows in pi.indexes:      # zeroed runs are at most time-mask-max-frames long
        runs = np.diff(np.flatnonzero(np.diff(np.r_[1.0, memo[rows], 1.0])))[::2]
        assert runs.max() <= 4
    assert 0.15 < 1 - memo.mean() < 0.45
    comp.set_test_mode(True)
    out2, _, memo2 = _run(comp, pi, x, 4, x)
    assert memo2 is None and (out2 == 1).all()
    data = to_bytes(comp, False)
    assert data.endswith(b"<TestMode> </SpecAugmentTimeMaskComponent> ")
    assert Component.read_new(InputStream.from_bytes(data)).test_mode
    with pytest.raises(ConfigError):
        component_from_line("component name=s type=SpecAugmentTimeMaskComponent dim=4 "
                            "time-mask-max-frames=1")


def test_dropout_mask_component():
    kaldi_random.seed(2)
    comp = component_from_line("component name=m type=DropoutMaskComponent output-dim=3 "
                               "dropout-proportion=0.3")
    assert comp.get_input_indexes(None, Index(0, 1, 0)) == []
    assert comp.properties() == P.kRandomComponent
    out = np.zeros((2000, 3), np.float32)
    comp.propagate(None, np.zeros((0, 3), np.float32), out)
    assert set(np.unique(out)) == {0.0, 1.0}
    assert not ((out[:, 0] == 0) & (out[:, 1] == 0)).any()   # never both i and f
    assert out[:, 0].mean() == pytest.approx(0.7, abs=0.05)
    comp.set_test_mode(True)
    comp.propagate(None, np.zeros((0, 3), np.float32), out)
    np.testing.assert_allclose(out, 0.7)
    text = to_bytes(comp, False)
    assert text == (b"<DropoutMaskComponent> <OutputDim> 3 <DropoutProportion> 0.3 "
                    b"<TestMode> T </DropoutMaskComponent> ")
    cont = component_from_line("component name=m type=DropoutMaskComponent output-dim=5 "
                               "dropout-proportion=0.5 continuous=true")
    assert cont.info() == "DropoutMaskComponent, output-dim=5, dropout-proportion=0.5, " \
        "continuous=true"
    out = np.zeros((1000, 5), np.float32)
    cont.propagate(None, None, out)
    assert out.min() >= 0.0 and out.max() <= 2.0 and out.mean() == pytest.approx(1, abs=0.05)
    data = to_bytes(cont, True, header=True)
    assert to_bytes(Component.read_new(InputStream.from_bytes(data)), True, True) == data
    cont.set_dropout_proportion(0.0)
    cont.propagate(None, None, out)
    assert (out == 1.0).all()


@pytest.mark.parametrize("type_name", MY_TYPES)
def test_truncated_files_raise_format_errors(type_name):
    paths = [f.values[0] for f in MODEL_FILES]
    for path in paths:
        found = [(c, raw, b) for _, c, raw, b in components_in(path) if c.type_name == type_name]
        if found:
            break
    else:
        pytest.skip("no model with a %s here" % type_name)
    _, raw, binary = found[0]
    for cut in (len(raw) // 3, len(raw) - 12):
        with pytest.raises(KaldiFormatError):
            Component.read_new(InputStream(raw[:cut], binary, "cut"))
