"""Convolution-family components against Kaldi: ConvolutionComponent,
MaxpoolingComponent, TdnnComponent, TimeHeightConvolutionComponent,
DistributeComponent.

- Simple components (kaldi-ref components/compN): all four read/write
  combinations byte for byte, Info(), Properties(), Propagate, Backprop and the
  parameter gradient.
- Components inside Kaldi's networks: byte-exact round trips in both modes,
  binary -> text equal to Kaldi's text model, Info() equal to nnet3-info.
- Components built from Kaldi's config lines equal Kaldi's except for the
  random parameters.
- Precomputed indexes inside Kaldi's serialized computations: read/write
  byte for byte, and our precompute_indexes on the computation's own index
  lists reproduces them.
- Kaldi's optimized computations run end to end (outputs, input derivatives,
  gradients) for every random case with one of these components.
- TimeHeightConvolution against a direct convolution written here; adjoint
  (dot-product) checks of backprop and of the parameter gradient for index
  lists as the compiler gives them, with and without time subsampling.
"""

import re

import numpy as np
import pytest

from conftest import KALDI_REF, TEST_DATA
from kaldi_component_cases import (KaldiCaseTests, case_params, component_from_line,
                                   max_rel_diff, read_ark, to_bytes)
import pynnet3.components  # noqa: F401  (registers every component type)
from pynnet3.components.base import Component, PrecomputedIndexes
from pynnet3.components.convolution_computation import (ConvolutionComputationIo,
                                                        compile_convolution_computation,
                                                        get_computation_io)
from pynnet3.components.convolution_model import ConvolutionModel
from pynnet3.errors import ComputationError, ConfigError, KaldiFormatError
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.common.config_line import ConfigLine, read_config_lines
from pynnet3.common.index import Index, kNoTime
from pynnet3.common.index_io import read_index_vector

MY_TYPES = ("ConvolutionComponent", "MaxpoolingComponent", "TdnnComponent",
            "TimeHeightConvolutionComponent", "DistributeComponent")
MY_PI_TYPES = ("TdnnComponentPrecomputedIndexes",
               "TimeHeightConvolutionComponentPrecomputedIndexes",
               "DistributeComponentPrecomputedIndexes")
_TYPE_RE = re.compile(rb"<(%s)> " % "|".join(MY_TYPES).encode())
DATA = TEST_DATA / "components"


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------

def _key(path):
    m = re.search(r"(\d+)$", path.name)
    return (str(path.parent), int(m.group(1)) if m else -1, path.name)


def stream_of(path):
    return InputStream.from_bytes(path.read_bytes(), str(path))


def model_components(path):
    """[(name, type, start, end, component)] for our types in a model file
    (binary or text), found by their '<ComponentName> name' prefix."""
    data = path.read_bytes()
    binary = data[:2] == b"\0B"
    found = []
    for m in re.finditer(rb"<ComponentName> ", data):
        stream = InputStream(data, binary, str(path), m.end())
        name = stream.read_token()
        start = stream.pos
        while data[start:start + 1] in (b" ", b"\n"):
            start += 1
        token = stream.peek_token()
        if token is None or token[1:-1] not in MY_TYPES:
            continue
        comp = Component.read_new(stream)
        found.append((name, token[1:-1], start, stream.pos, comp))
    return found, data, binary


def _has_my_types(path):
    try:
        return _TYPE_RE.search(path.read_bytes()) is not None
    except OSError:
        return False


# ----------------------------------------------------------------------------
# case lists (kaldi-ref when present, plus the bundled subset)
# ----------------------------------------------------------------------------

def model_files():
    files = sorted(KALDI_REF.glob("models/*/model.raw")) + sorted(
        KALDI_REF.glob("random/case*/model.raw"), key=lambda p: _key(p.parent))
    files += sorted(DATA.glob("conv_models/*/model.raw")) + sorted(
        DATA.glob("conv_random/case*/model.raw"), key=lambda p: _key(p.parent))
    return [pytest.param(f, id="%s/%s" % (f.parent.parent.name, f.parent.name))
            for f in files if _has_my_types(f)]


def computation_files():
    files = sorted(KALDI_REF.glob("random/case*/computation.opt.kaldi"),
                   key=lambda p: _key(p.parent))
    files += sorted(KALDI_REF.glob("models/*/request*/computation.opt.kaldi"))
    files += sorted(DATA.glob("conv_random/case*/computation.opt.kaldi"),
                    key=lambda p: _key(p.parent))
    out = []
    for f in files:
        data = f.read_bytes()
        if any(("<%s> " % t).encode() in data for t in MY_PI_TYPES):
            out.append(pytest.param(f, id="%s/%s" % (f.parent.parent.name, f.parent.name)))
    return out


def random_case_dirs():
    dirs = [d for d in sorted(KALDI_REF.glob("random/case*"), key=_key)
            if _has_my_types(d / "model.raw")]
    dirs += sorted(DATA.glob("conv_random/case*"), key=_key)
    return [pytest.param(d, id="%s/%s" % (d.parent.name, d.name)) for d in dirs]


def config_sets():
    sets = []
    for case in sorted(KALDI_REF.glob("random/case*"), key=_key):
        sets.append((sorted(case.glob("config.*")), case / "model.raw"))
    for f in sorted(KALDI_REF.glob("models/*/final.config")):
        sets.append(([f], f.parent / "model.raw"))
    for case in sorted(DATA.glob("conv_random/case*"), key=_key):
        sets.append((sorted(case.glob("config.*")), case / "model.raw"))
    out = []
    for configs, model in sets:
        text = "".join(c.read_text() for c in configs)
        if re.search(r"type=(%s)\b" % "|".join(MY_TYPES), text):
            out.append(pytest.param(configs, model,
                                    id="%s/%s" % (model.parent.parent.name, model.parent.name)))
    return out


# ----------------------------------------------------------------------------
# simple components (components/compN)
# ----------------------------------------------------------------------------

SIMPLE_TYPES = ("ConvolutionComponent", "MaxpoolingComponent")


class TestKaldiCases(KaldiCaseTests):
    TYPES = SIMPLE_TYPES


@pytest.mark.parametrize("d", case_params(SIMPLE_TYPES))
def test_simple_component_numerics(d):
    comp = Component.read_new(stream_of(d / "component.bin"))
    a = read_ark(d / "data.ark")
    out = np.zeros_like(a["out"])
    comp.propagate(None, a["in"], out)
    assert max_rel_diff(out, a["out"]) <= 1e-3
    in_deriv = np.zeros_like(a["in"])
    grad = None
    if comp.is_updatable():
        grad = comp.copy()
        grad.set_as_gradient()
        grad.scale(0.0)
    comp.backprop("", None, a["in"], a["out"], a["out_deriv"], None, grad, in_deriv)
    assert max_rel_diff(in_deriv, a["in_deriv"]) <= 1e-3
    if grad is not None:
        ref = Component.read_new(stream_of(d / "gradient.txt"))
        assert max_rel_diff(grad.vectorize(), ref.vectorize()) <= 1e-3
        assert ref.is_gradient and grad.is_gradient


# ----------------------------------------------------------------------------
# components inside Kaldi's networks
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("path", model_files())
def test_model_components_round_trip(path):
    found, data, binary = model_components(path)
    assert found
    text_model = path.parent / "model.txt"
    text_found = model_components(text_model)[0] if text_model.is_file() else None
    for i, (name, type_name, start, end, comp) in enumerate(found):
        assert to_bytes(comp, binary) == data[start:end], name
        other = to_bytes(comp, not binary)
        again = Component.read_new(InputStream(other, not binary))
        if not binary:
            assert to_bytes(again, binary) == data[start:end], name
        assert to_bytes(again, not binary) == other, name
        if text_found is not None:
            # nnet3-copy --binary=false of the same model
            tname, _, tstart, tend, _ = text_found[i]
            tdata = text_model.read_bytes()
            assert tname == name and other == tdata[tstart:tend], name


@pytest.mark.parametrize("path", model_files())
def test_model_components_info(path):
    infos = {}
    for line in (path.parent / "info.txt").read_text().splitlines():
        m = re.match(r"component name=(\S+) type=(.*)$", line)
        if m:
            infos[m.group(1)] = m.group(2)
    for name, _, _, _, comp in model_components(path)[0]:
        assert comp.info() == infos[name], name


@pytest.mark.parametrize("configs, model", config_sets())
def test_init_from_config_matches_kaldi(configs, model):
    """Every key and default as Kaldi's nnet3-init: equal bytes once the random
    parameters are copied over (and the random ones have the right shape)."""
    kaldi = {name: comp for name, _, _, _, comp in model_components(model)[0]}
    lines = [line for c in configs for _, line in read_config_lines(c.read_text())]
    checked = 0
    for line in lines:
        if not re.search(r"type=(%s)\b" % "|".join(MY_TYPES), line):
            continue
        cfl = ConfigLine(line)
        name = cfl.get_str("name")
        ours = Component.from_config_line(cfl)
        ref = kaldi[name]
        for attr in ("linear_params", "filter_params", "bias_params"):
            if hasattr(ref, attr):
                assert getattr(ours, attr).shape == getattr(ref, attr).shape
                setattr(ours, attr, getattr(ref, attr).copy())
        assert to_bytes(ours, True) == to_bytes(ref, True), line
        checked += 1
    assert checked


def test_random_init_distributions():
    np.random.seed(3)
    tdnn = component_from_line((
        "component name=t type=TdnnComponent input-dim=200 output-dim=300 "
        "time-offsets=-1,0,1 bias-mean=2.0 bias-stddev=0.5"))
    assert abs(tdnn.linear_params.std() - 1.0 / np.sqrt(600)) < 0.05 / np.sqrt(600)
    assert abs(tdnn.bias_params.mean() - 2.0) < 0.1
    assert abs(tdnn.bias_params.std() - 0.5) < 0.1
    nobias = component_from_line((
        "component name=t type=TdnnComponent input-dim=4 output-dim=3 time-offsets=0 "
        "use-bias=false"))
    assert nobias.bias_params.shape == (0,) and nobias.properties() & 0x8
    thc = component_from_line((
        "component name=c type=TimeHeightConvolutionComponent num-filters-in=4 "
        "num-filters-out=4 height-in=10 height-out=10 height-offsets=-1,0,1 "
        "time-offsets=-1,0,1 init-unit=true"))
    block = thc.linear_params[:, 4 * 4:5 * 4]            # offset (0,0) is the 5th
    assert np.array_equal(block, np.eye(4, dtype=np.float32))
    assert np.count_nonzero(thc.linear_params) == 4
    assert not thc.bias_params.any()


# ----------------------------------------------------------------------------
# precomputed indexes inside Kaldi's computations
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("path", computation_files())
def test_precomputed_indexes_serialization(path):
    data = path.read_bytes()
    pattern = re.compile(rb"<(%s)> " % "|".join(MY_PI_TYPES).encode())
    count = 0
    for m in pattern.finditer(data):
        stream = InputStream(data, True, str(path), m.start())
        pi = PrecomputedIndexes.read_new(stream)
        assert to_bytes(pi, True) == data[m.start():stream.pos]
        read_index_vector(stream)     # Kaldi writes the index lists right after
        read_index_vector(stream)
        text = to_bytes(pi, False)
        back = PrecomputedIndexes.read_new(InputStream(text, False))
        assert to_bytes(back, False) == text and to_bytes(back, True) == to_bytes(pi, True)
        count += 1
    assert count


@pytest.mark.parametrize("path", computation_files())
def test_precompute_indexes_matches_kaldi(path):
    """Our reorder_indexes leaves the computation's own index lists alone and
    precompute_indexes on them gives exactly Kaldi's precomputed indexes."""
    from pynnet3.compiler.computation_io import read_computation_file
    from pynnet3.compiler.computation import CommandType
    from pynnet3.nnet.nnet import Nnet
    model = path.parent / "model.raw"
    if not model.is_file():
        model = path.parent.parent / "model.raw"
    nnet = Nnet.read(str(model))
    comp = read_computation_file(str(path))
    assert comp.matrix_debug_info
    checked = 0
    for cmd in comp.commands:
        if cmd.command_type != CommandType.kPropagate or cmd.arg2 <= 0:
            continue
        component = nnet.components[cmd.arg1]
        if component.type_name not in MY_TYPES:
            continue

        def indexes(s):
            sub = comp.submatrices[s]
            cindexes = comp.matrix_debug_info[sub.matrix_index].cindexes
            return [c[1] for c in cindexes[sub.row_offset:sub.row_offset + sub.num_rows]]
        ins, outs = indexes(cmd.arg3), indexes(cmd.arg4)
        if component.properties() & 0x10:
            new_in, new_out = component.reorder_indexes(ins, outs)
            assert list(new_in) == ins and list(new_out) == outs
        ours = component.precompute_indexes(None, ins, outs, True)
        assert ours == comp.component_precomputed_indexes[cmd.arg2].data
        assert to_bytes(ours, True) == to_bytes(comp.component_precomputed_indexes[cmd.arg2].data,
                                                True)
        checked += 1
    assert checked


@pytest.mark.parametrize("d", random_case_dirs())
def test_kaldi_computation_end_to_end(d):
    """Kaldi's optimized computation run by our computer on our components."""
    from pynnet3.compiler.computation_io import read_computation_file
    from pynnet3.compute.computer import NnetComputer
    from pynnet3.nnet.nnet import Nnet
    from pynnet3.nnet.component_ops import scale_nnet, set_nnet_as_gradient
    nnet = Nnet.read(str(d / "model.raw"))
    comp = read_computation_file(str(d / "computation.opt.kaldi"))
    grad = None
    if comp.need_model_derivative:
        grad = nnet.copy()
        set_nnet_as_gradient(grad)
        scale_nnet(grad, 0.0)
    computer = NnetComputer(comp, nnet, nnet_to_update=grad, nnet_to_store_stats=nnet.copy())
    for key, value in read_ark(d / "inputs.ark").items():
        computer.accept_input(key, value)
    computer.run()
    for key, value in read_ark(d / "outputs.ark").items():
        assert max_rel_diff(computer.get_output(key), value) <= 1e-3, key
    if not (d / "output_derivs.ark").is_file():
        return
    for key, value in read_ark(d / "output_derivs.ark").items():
        computer.accept_input(key, value)
    computer.run()
    if (d / "input_derivs.ark").is_file():
        for key, value in read_ark(d / "input_derivs.ark").items():
            assert max_rel_diff(computer.get_output(key), value) <= 1e-3, key
    if grad is not None:
        ref = Nnet.read(str(d / "gradient.raw"))
        for name, ours, kaldi in zip(grad.component_names, grad.components, ref.components):
            assert max_rel_diff(ours.vectorize(), kaldi.vectorize()) <= 1e-3, name


# ----------------------------------------------------------------------------
# numerics on index lists like the compiler's
# ----------------------------------------------------------------------------

def make_request(comp, n_images, t_out, t_in_available, xs=(0,)):
    """Output indexes for every (n, t in t_out, x); input indexes the
    computable outputs use among the available input times; then the
    component's reordering. Returns (inputs, outputs) ready for precompute."""
    available = {Index(n, t, x) for n in range(n_images) for t in t_in_available for x in xs}
    outputs, used = [], set()
    for n in range(n_images):
        for t in t_out:
            for x in xs:
                o = Index(n, t, x)
                u = []
                if comp.is_computable(None, o, available.__contains__, u):
                    outputs.append(o)
                    used.update(u)
    inputs = sorted(used)
    return comp.reorder_indexes(inputs, outputs)


def random_rows(indexes, dim, rng):
    """Random rows, zero where the Index is a kNoTime blank."""
    mat = rng.standard_normal((len(indexes), dim)).astype(np.float32)
    for i, index in enumerate(indexes):
        if index.t == kNoTime:
            mat[i] = 0.0
    return mat


def direct_time_height_convolution(comp, inputs, in_mat, outputs):
    """Obviously-correct convolution: for each output pixel, the sum over
    offsets of filters times the input pixel when present (else zero)."""
    m = comp.model
    w = comp.linear_params.astype(np.float64)
    row_of = {index: i for i, index in enumerate(inputs) if index.t != kNoTime}
    out = np.zeros((len(outputs), m.output_dim()))
    for r, (n, t, x) in enumerate(outputs):
        if t == kNoTime:
            continue
        for h_out in range(m.height_out):
            acc = comp.bias_params.astype(np.float64).copy()
            for k, (dt, dh) in enumerate(m.offsets):
                h_in = h_out * m.height_subsample_out + dh
                row = row_of.get(Index(n, t + dt, x))
                if row is None or not 0 <= h_in < m.height_in:
                    continue
                pixel = in_mat[row, h_in * m.num_filters_in:(h_in + 1) * m.num_filters_in]
                acc += w[:, k * m.num_filters_in:(k + 1) * m.num_filters_in] @ pixel
            out[r, h_out * m.num_filters_out:(h_out + 1) * m.num_filters_out] = acc
    return out


THC_CONFIGS = [
    # (config, t_step_in, t_step_out, output times)
    ("num-filters-in=3 num-filters-out=4 height-in=8 height-out=8 height-offsets=-1,0,1 "
     "time-offsets=-1,0,1", 1, 1, range(0, 6)),
    ("num-filters-in=2 num-filters-out=3 height-in=9 height-out=4 height-offsets=-1,0,1 "
     "time-offsets=-1,0,1 height-subsample-out=2 required-time-offsets=0", 1, 1, range(0, 7)),
    ("num-filters-in=2 num-filters-out=2 height-in=6 height-out=6 "
     "offsets=-1,0;0,-1;0,0;0,1;1,0 required-time-offsets=0", 1, 3, range(0, 15, 3)),
    ("num-filters-in=3 num-filters-out=2 height-in=5 height-out=3 height-offsets=0,1,2 "
     "time-offsets=-3,0,3 required-time-offsets=-3,0,3", 3, 3, range(3, 21, 3)),
    ("num-filters-in=1 num-filters-out=5 height-in=7 height-out=7 height-offsets=-2,0,2 "
     "time-offsets=-2,0,2 max-memory-mb=1e-05", 1, 2, range(-4, 13, 2)),
    ("num-filters-in=2 num-filters-out=2 height-in=4 height-out=4 height-offsets=0 "
     "time-offsets=0", 1, 1, [5]),
]


def _thc(config):
    return component_from_line((
        "component name=c type=TimeHeightConvolutionComponent learning-rate=0.01 " + config))


@pytest.mark.parametrize("config, step_in, step_out, t_out", THC_CONFIGS)
def test_time_height_convolution_against_direct(config, step_in, step_out, t_out):
    rng = np.random.default_rng(7)
    np.random.seed(7)
    comp = _thc(config)
    comp.bias_params = rng.standard_normal(comp.bias_params.shape).astype(np.float32)
    t_in = range(min(t_out) - 6, max(t_out) + 4, step_in)
    inputs, outputs = make_request(comp, 3, t_out, t_in)
    assert any(o.t != kNoTime for o in outputs)
    pi = comp.precompute_indexes(None, inputs, outputs, True)
    in_mat = random_rows(inputs, comp.input_dim(), rng)
    out = np.full((len(outputs), comp.output_dim()), np.nan, dtype=np.float32)
    comp.propagate(pi, in_mat, out)
    ref = direct_time_height_convolution(comp, inputs, in_mat, outputs)
    real = [i for i, o in enumerate(outputs) if o.t != kNoTime]
    assert max_rel_diff(out[real], ref[real]) <= 1e-5


def _adjoint_checks(comp, inputs, outputs, rng, pi, strided_views=False):
    """<J dx, R> == <dx, J^T R> for the input (linear maps), and the
    parameter gradient against the change of <out, R> with the parameters."""
    def fwd(c, x):
        out = np.zeros((len(outputs), c.output_dim()), dtype=np.float32)
        if strided_views:
            big = np.zeros((len(outputs), c.output_dim() + 3), dtype=np.float32)
            out = big[:, 1:1 + c.output_dim()]
        c.propagate(pi, x, out)
        return out.astype(np.float64)
    x = random_rows(inputs, comp.input_dim(), rng)
    r = rng.standard_normal((len(outputs), comp.output_dim())).astype(np.float32)
    blank_out = [i for i, o in enumerate(outputs) if o.t == kNoTime]
    r[blank_out] = 0.0
    base = fwd(comp, np.zeros_like(x))
    jx = fwd(comp, x) - base
    in_deriv = np.zeros_like(x)
    grad = comp.copy()
    grad.set_as_gradient()
    grad.scale(0.0)
    comp.backprop("", pi, x, None, r, None, grad, in_deriv)
    lhs = float((jx * r).sum())
    rhs = float((in_deriv.astype(np.float64) * x).sum())
    assert abs(lhs - rhs) <= 1e-4 * max(1.0, abs(lhs))
    # parameters: <out(p + dp) - out(p), R> == <grad, dp>
    params = comp.vectorize()
    dp = rng.standard_normal(params.shape).astype(np.float32)
    moved = comp.copy()
    moved.unvectorize(params + dp)
    change = float(((fwd(moved, x) - fwd(comp, x)) * r).sum())
    predicted = float(np.dot(grad.vectorize().astype(np.float64), dp))
    assert abs(change - predicted) <= 1e-3 * max(1.0, abs(change))
    # a plain learning-rate step adds learning_rate * gradient
    step = comp.copy()
    step.is_gradient = False
    step.use_natural_gradient = True
    comp.backprop("", pi, x, None, r, None, step, None)
    assert max_rel_diff(step.vectorize(), params + np.float32(comp.learning_rate)
                        * grad.vectorize()) <= 1e-5
    # learning rate 0: nothing changes
    frozen = comp.copy()
    frozen.learning_rate = 0.0
    comp.backprop("", pi, x, None, r, None, frozen, None)
    assert np.array_equal(frozen.vectorize(), params)


@pytest.mark.parametrize("config, step_in, step_out, t_out", THC_CONFIGS)
def test_time_height_convolution_backprop(config, step_in, step_out, t_out):
    rng = np.random.default_rng(11)
    np.random.seed(11)
    comp = _thc(config)
    t_in = range(min(t_out) - 6, max(t_out) + 4, step_in)
    inputs, outputs = make_request(comp, 2, t_out, t_in, xs=(0, 1))
    pi = comp.precompute_indexes(None, inputs, outputs, True)
    _adjoint_checks(comp, inputs, outputs, rng, pi, strided_views=True)


TDNN_CONFIGS = [
    ("input-dim=5 output-dim=4 time-offsets=-1,0,1", 1, range(0, 8)),
    ("input-dim=3 output-dim=6 time-offsets=-3,0,3 use-bias=false", 3, range(0, 30, 3)),
    ("input-dim=4 output-dim=3 time-offsets=-2,1", 1, range(0, 12, 3)),
    ("input-dim=2 output-dim=2 time-offsets=0", 1, [4]),
    ("input-dim=3 output-dim=2 time-offsets=-1,0", 1, range(0, 10, 2)),
]


@pytest.mark.parametrize("config, step_in, t_out", TDNN_CONFIGS)
def test_tdnn_against_direct_and_backprop(config, step_in, t_out):
    rng = np.random.default_rng(5)
    np.random.seed(5)
    comp = component_from_line((
        "component name=t type=TdnnComponent learning-rate=0.02 " + config))
    t_in = range(min(t_out) - 6, max(t_out) + 7, step_in)
    inputs, outputs = make_request(comp, 3, t_out, t_in)
    pi = comp.precompute_indexes(None, inputs, outputs, True)
    x = random_rows(inputs, comp.input_dim(), rng)
    out = np.zeros((len(outputs), comp.output_dim()), dtype=np.float32)
    comp.propagate(pi, x, out)
    row_of = {index: i for i, index in enumerate(inputs)}
    for r, (n, t, xx) in enumerate(outputs):
        if t == kNoTime:
            continue
        spliced = np.concatenate([x[row_of[Index(n, t + o, xx)]] for o in comp.time_offsets])
        expect = comp.linear_params.astype(np.float64) @ spliced
        if comp.bias_params.size:
            expect += comp.bias_params
        assert np.allclose(out[r], expect, atol=1e-5)
    _adjoint_checks(comp, inputs, outputs, rng, pi)


def test_distribute_component():
    rng = np.random.default_rng(2)
    comp = component_from_line((
        "component name=d type=DistributeComponent input-dim=12 output-dim=4"))
    assert comp.properties() == 0 and comp.info() == \
        "DistributeComponent, input-dim=12, output-dim=4"
    outputs = [Index(n, t, x) for n in range(2) for t in range(3) for x in range(-3, 3)]
    inputs = sorted({i for o in outputs for i in comp.get_input_indexes(None, o)})
    assert Index(0, 0, -1) in inputs and comp.get_input_indexes(None, Index(0, 0, -4)) == \
        [Index(0, 0, -2)]
    pi = comp.precompute_indexes(None, inputs, outputs, True)
    x = rng.standard_normal((len(inputs), 12)).astype(np.float32)
    out = np.zeros((len(outputs), 4), dtype=np.float32)
    comp.propagate(pi, x, out)
    row_of = {index: i for i, index in enumerate(inputs)}
    for r, (n, t, xx) in enumerate(outputs):
        block = xx % 3
        assert np.array_equal(out[r], x[row_of[Index(n, t, xx // 3)], 4 * block:4 * block + 4])
    r = rng.standard_normal(out.shape).astype(np.float32)
    in_deriv = np.full_like(x, 7.0)
    comp.backprop("", pi, x, out, r, None, None, in_deriv)
    assert abs(float((out * r).sum()) - float((in_deriv * x).sum())) < 1e-4
    # an input row not fully used: the rest of its derivative is zero
    part = outputs[:5]
    pi = comp.precompute_indexes(None, inputs, part, True)
    in_deriv = np.full_like(x, 7.0)
    comp.backprop("", pi, x, None, r[:5], None, None, in_deriv)
    assert np.count_nonzero(in_deriv == 7.0) == 0
    used = []
    assert comp.is_computable(None, Index(0, 1, 5), lambda i: True, used)
    assert used == [Index(0, 1, 1)]
    assert not comp.is_computable(None, Index(0, 1, 5), lambda i: False, [])


def test_convolution_and_maxpooling_adjoint():
    rng = np.random.default_rng(9)
    np.random.seed(9)
    for order in ("zyx", "yzx"):
        conv = component_from_line((
            "component name=c type=ConvolutionComponent input-x-dim=5 input-y-dim=6 "
            "input-z-dim=2 filt-x-dim=3 filt-y-dim=2 filt-x-step=1 filt-y-step=2 "
            "num-filters=3 learning-rate=0.1 input-vectorization-order=" + order))
        assert conv.output_dim() == 3 * 3 * 3 and conv.input_dim() == 60
        x = rng.standard_normal((4, 60)).astype(np.float32)
        out = np.zeros((4, 27), dtype=np.float32)
        conv.propagate(None, x, out)
        # direct computation
        t = x.reshape(4, 5, 6, 2) if order == "zyx" else x.reshape(4, 5, 2, 6).transpose(0, 1, 3, 2)
        for xs in range(3):
            for ys in range(3):
                patch = t[:, xs:xs + 3, 2 * ys:2 * ys + 2, :].reshape(4, -1)
                expect = patch @ conv.filter_params.T + conv.bias_params
                p = xs * 3 + ys
                assert np.allclose(out[:, 3 * p:3 * p + 3], expect, atol=1e-5)
    pool = component_from_line((
        "component name=p type=MaxpoolingComponent input-x-dim=4 input-y-dim=5 input-z-dim=3 "
        "pool-x-size=2 pool-y-size=3 pool-z-size=1 pool-x-step=2 pool-y-step=1 pool-z-step=1"))
    x = rng.standard_normal((3, 60)).astype(np.float32)
    out = np.zeros((3, pool.output_dim()), dtype=np.float32)
    pool.propagate(None, x, out)
    t = x.reshape(3, 4, 5, 3)
    expect = np.stack([t[:, 2 * i:2 * i + 2, j:j + 3, :].max(axis=(1, 2))
                       for i in range(2) for j in range(3)], axis=1).reshape(3, -1)
    assert np.array_equal(out, expect)
    r = rng.standard_normal(out.shape).astype(np.float32)
    in_deriv = np.zeros_like(x)
    pool.backprop("", None, x, out, r, None, None, in_deriv)
    # each output's derivative lands on its pool's maximum
    assert np.isclose(in_deriv.sum(), r.sum(), atol=1e-4)


# ----------------------------------------------------------------------------
# index hooks and planning details
# ----------------------------------------------------------------------------

def test_time_height_index_hooks_and_blanks():
    comp = _thc("num-filters-in=1 num-filters-out=1 height-in=3 height-out=3 "
                "height-offsets=0 time-offsets=-1,0,1 required-time-offsets=0")
    o = Index(0, 5, 0)
    assert comp.get_input_indexes(None, o) == [Index(0, 4, 0), Index(0, 5, 0), Index(0, 6, 0)]
    used = []
    assert comp.is_computable(None, o, {Index(0, 5, 0), Index(0, 6, 0)}.__contains__, used)
    assert used == [Index(0, 5, 0), Index(0, 6, 0)]
    assert not comp.is_computable(None, o, {Index(0, 4, 0)}.__contains__, [])
    # outputs 0..3 with inputs 0..3: t=-1 and t=4 become kNoTime blanks
    inputs = [Index(0, t, 0) for t in range(4)]
    outputs = [Index(0, t, 0) for t in range(4)]
    new_in, new_out = comp.reorder_indexes(inputs, outputs)
    assert new_out == outputs
    assert [i.t for i in new_in] == [kNoTime, 0, 1, 2, 3, kNoTime]
    with pytest.raises(ComputationError):
        comp.precompute_indexes(None, inputs, outputs, True)      # not reordered
    with pytest.raises(ComputationError):
        comp.get_input_indexes(None, Index(0, kNoTime, 0))


def test_time_subsampling_reorders_input_in_blocks():
    comp = component_from_line((
        "component name=t type=TdnnComponent input-dim=2 output-dim=2 time-offsets=-1,0,1"))
    outputs = [Index(n, t, 0) for n in range(2) for t in (0, 3, 6)]
    inputs = sorted({i for o in outputs for i in comp.get_input_indexes(None, o)})
    new_in, new_out = comp.reorder_indexes(inputs, outputs)
    assert new_out == [Index(n, t, 0) for t in (0, 3, 6) for n in range(2)]
    # blocks of 3 consecutive times per image: (n0: -1,0,1) (n1: -1,0,1) (n0: 2,3,4) ...
    assert [(i.n, i.t) for i in new_in[:6]] == [(0, -1), (0, 0), (0, 1), (1, -1), (1, 0), (1, 1)]
    pi = comp.precompute_indexes(None, new_in, new_out, True)
    assert (pi.row_stride, pi.row_offsets) == (3, [0, 1, 2])


def test_memory_limited_computation_matches_unlimited():
    rng = np.random.default_rng(1)
    base = ("num-filters-in=2 num-filters-out=3 height-in=6 height-out=6 "
            "height-offsets=-1,0,1 time-offsets=-1,0,1 ")
    small = _thc(base + "max-memory-mb=1e-6")
    big = small.copy()
    big.max_memory_mb = 200.0
    inputs, outputs = make_request(big, 2, range(10), range(-1, 11))
    pi_small = small.precompute_indexes(None, inputs, outputs, False)
    pi_big = big.precompute_indexes(None, inputs, outputs, False)
    assert pi_small.computation.temp_rows < pi_big.computation.temp_rows
    x = random_rows(inputs, 12, rng)
    out1 = np.zeros((len(outputs), 18), dtype=np.float32)
    out2 = np.zeros_like(out1)
    small.propagate(pi_small, x, out1)
    big.propagate(pi_big, x, out2)
    assert max_rel_diff(out1, out2) <= 1e-6


def test_convolution_model_io_and_check():
    model = ConvolutionModel(2, 3, 5, 5, 1, [(-1, 0), (0, -1), (0, 0), (0, 1), (1, 0)], [0])
    assert model.check()[0]
    assert model.time_offsets_modulus == 1 and model.all_time_offsets == [-1, 0, 1]
    for binary in (True, False):
        out = OutputStream(binary)
        model.write(out)
        assert ConvolutionModel.read(InputStream(out.getvalue(), binary)) == model
    text = (b"<ConvolutionModel> <NumFiltersIn> 1 <NumFiltersOut> 1 <HeightIn> 3 <HeightOut> 3 "
            b"<HeightSubsampleOut> 1 <Offsets> [ 0,0 0,5 ]\n<RequiredTimeOffsets> [ 0 ]\n"
            b"</ConvolutionModel> ")
    with pytest.raises(KaldiFormatError, match="never used"):
        ConvolutionModel.read(InputStream(text, False))
    with pytest.raises(ComputationError, match="required"):
        compile_convolution_computation(model, [Index(0, 0, 0)],
                                        [Index(0, 0, 0), Index(0, 1, 0)])
    io = get_computation_io([Index(n, t, 0) for n in range(2) for t in range(-1, 6)],
                            [Index(n, t, 0) for n in range(2) for t in range(0, 5, 2)])
    assert (io.num_images, io.start_t_in, io.t_step_in, io.num_t_in, io.start_t_out,
            io.t_step_out, io.num_t_out, io.reorder_t_in) == (2, -1, 1, 7, 0, 2, 3, 1)
    for binary in (True, False):
        out = OutputStream(binary)
        io.write(out)
        assert ConvolutionComputationIo.read(InputStream(out.getvalue(), binary)) == io
    out = OutputStream(False)
    io.write(out)
    assert out.getvalue() == b"<ConvCompIo> 2 -1 1 7 0 2 3 1 </ConvCompIo> "


# ----------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("line, match", [
    ("type=TimeHeightConvolutionComponent num-filters-in=1 num-filters-out=1 height-in=3 "
     "height-out=3", "offsets"),
    ("type=TimeHeightConvolutionComponent num-filters-in=1 num-filters-out=1 height-in=3 "
     "height-out=3 offsets=0,0;0,0", "repeated"),
    ("type=TimeHeightConvolutionComponent num-filters-in=1 num-filters-out=1 height-in=3 "
     "height-out=3 height-offsets=0 time-offsets=0 required-time-offsets=1", "make sense"),
    ("type=TimeHeightConvolutionComponent num-filters-in=1 num-filters-out=2 height-in=3 "
     "height-out=3 height-offsets=0 time-offsets=0 init-unit=true", "init-unit"),
    ("type=TimeHeightConvolutionComponent num-filters-in=1 num-filters-out=1 height-in=3 "
     "height-out=3 height-offsets=0 time-offsets=0 num-minibatches-history=1", "history"),
    ("type=TdnnComponent input-dim=3 output-dim=2 time-offsets=0,0", "repeated"),
    ("type=TdnnComponent input-dim=3 output-dim=2 time-offsets=0:1", "time-offsets"),
    ("type=TdnnComponent input-dim=3 time-offsets=0", "output-dim"),
    ("type=DistributeComponent input-dim=10 output-dim=3", "multiple"),
    ("type=MaxpoolingComponent input-x-dim=2 input-y-dim=2 input-z-dim=2 pool-x-size=3 "
     "pool-y-size=1 pool-z-size=1 pool-x-step=1 pool-y-step=1 pool-z-step=1", "exceeds"),
    ("type=ConvolutionComponent input-x-dim=4 input-y-dim=4 input-z-dim=1 filt-x-dim=2 "
     "filt-y-dim=2 filt-x-step=1 filt-y-step=1 num-filters=2 input-vectorization-order=xyz",
     "vectorization"),
    ("type=ConvolutionComponent input-x-dim=4 input-y-dim=4 input-z-dim=1 filt-x-dim=2 "
     "filt-y-dim=2 filt-x-step=1 filt-y-step=1", "num-filters"),
    ("type=TdnnComponent input-dim=3 output-dim=2 time-offsets=0 bogus=1", "bogus"),
])
def test_bad_configs(line, match):
    with pytest.raises(ConfigError, match=match):
        component_from_line("component name=x " + line, "test.config", 3)


def test_bad_files():
    d = DATA / "comp307"
    data = (d / "component.bin").read_bytes()
    for cut in (20, len(data) // 2, len(data) - 5):
        with pytest.raises(KaldiFormatError):
            Component.read_new(InputStream.from_bytes(data[:cut], "cut.bin"))
    model = DATA / "conv_random" / "case7" / "model.txt"
    found, text, _ = model_components(model)
    _, _, start, end, _ = found[0]
    body = text[start:end]
    bad = body.replace(b"<RankInOut> 14 4", b"<RankInOut> 0 4")
    with pytest.raises(KaldiFormatError, match="rank"):
        Component.read_new(InputStream(bad, False, "bad.txt"))
    bad = body.replace(b"<NumFiltersOut> 6 ", b"<NumFiltersOut> 5 ")
    assert bad != body
    with pytest.raises(KaldiFormatError, match="do not match the model"):
        Component.read_new(InputStream(bad, False, "bad.txt"))
    pi = (b"<TdnnComponentPrecomputedIndexes> <RowStride> 1 <RowOffsets> [ 0 1 ]\n"
          b"</TdnnComponentPrecomputedIndexes> ")
    assert PrecomputedIndexes.read_new(InputStream(pi, False)).row_offsets == [0, 1]
    with pytest.raises(KaldiFormatError):
        PrecomputedIndexes.read_new(InputStream(pi.replace(b"<RowOffsets>", b"<Rows>"), False))
    pairs = (b"<DistributeComponentPrecomputedIndexes> <Pairs> [ 0,0 1,x ]\n"
             b"</DistributeComponentPrecomputedIndexes> ")
    with pytest.raises(KaldiFormatError, match="int,int"):
        PrecomputedIndexes.read_new(InputStream(pairs, False))


def test_older_tokens_accepted():
    """Kaldi's readers accept a repeated opening tag, Tdnn's older <Alpha>,
    and a ConvolutionComponent without the trailing <IsGradient>."""
    model = DATA / "conv_random" / "case134" / "model.raw"
    found, data, _ = model_components(model)
    tdnn = found[0][4]
    text = to_bytes(tdnn, False)
    old = re.sub(rb"<AlphaInOut> (\S+) (\S+) ", rb"<Alpha> \1 ", text)
    again = Component.read_new(InputStream(old, False))
    assert again.alpha_in == again.alpha_out == tdnn.alpha_in
    doubled = text.replace(b"<TdnnComponent> ", b"<TdnnComponent> <TdnnComponent> ", 1)
    assert to_bytes(Component.read_new(InputStream(doubled, False)), False) == text
    conv = Component.read_new(stream_of(DATA / "comp307" / "component.txt"))
    text = to_bytes(conv, False)
    assert b"<IsGradient> F </ConvolutionComponent>" in text
    no_flag = text.replace(b"<IsGradient> F </ConvolutionComponent>", b"</ConvolutionComponent>")
    assert to_bytes(Component.read_new(InputStream(no_flag, False)), False) == text
