"""init_from_config of the affine, scale/offset and composite component types.

Against Kaldi: every ``component`` line of these types in the kaldi-ref model
configs (models/*/final.config) and random-network configs
(random/caseN/config.J), and the copies in tests/data/models, is initialized
and compared with the component ``nnet3-init`` put in Kaldi's model.raw:
type, dimensions, properties, and, after adopting Kaldi's random parameter
values, the written bytes (so every configured value -- learning rates,
max-change, ranks, alpha, block sizes, flags -- equals Kaldi's). Components
whose initialization is deterministic (loaded from matrix/vector files,
constant values) must equal Kaldi's without adopting anything.

Statistically: random initialization follows Kaldi's distributions
(Gaussian with Kaldi's default or configured mean and standard deviation).
"""

import re

import numpy as np
import pytest

from conftest import KALDI_REF, TEST_DATA
from kaldi_component_cases import adopt_parameters, component_bytes, read_model_component
from pynnet3.components import Component, kaldi_random
from pynnet3.errors import ConfigError
from pynnet3.common.config_line import ConfigLine, read_config_lines

TYPES = {"AffineComponent", "LinearComponent", "NaturalGradientAffineComponent",
         "FixedAffineComponent", "RepeatedAffineComponent", "BlockAffineComponent",
         "NaturalGradientRepeatedAffineComponent", "PerElementScaleComponent",
         "NaturalGradientPerElementScaleComponent", "PerElementOffsetComponent",
         "FixedScaleComponent", "FixedBiasComponent", "ScaleAndOffsetComponent",
         "ConstantFunctionComponent", "CompositeComponent"}

_TYPE_RE = re.compile(r"\btype=(\w+)")


def _config_files(model_dir):
    if (model_dir / "final.config").is_file():
        return [model_dir / "final.config"]
    return sorted(model_dir.glob("config.*"), key=lambda p: int(p.suffix[1:]))


def _model_dirs():
    dirs = []
    for root, prefix in ((KALDI_REF, ""), (TEST_DATA, "data:")):
        for sub in ("models", "random"):
            base = root / sub if root is KALDI_REF else root / "models" / (
                "" if sub == "models" else "random")
            if not base.is_dir():
                continue
            for d in sorted(base.iterdir()):
                if d.is_dir() and (d / "model.raw").is_file() and _config_files(d):
                    text = "".join(p.read_text() for p in _config_files(d))
                    if any(t in TYPES for t in _TYPE_RE.findall(text)):
                        dirs.append(pytest.param(d, id=prefix + sub + "/" + d.name))
    return dirs


MODEL_DIRS = _model_dirs()


def _component_lines(model_dir):
    """name -> ConfigLine of the last definition, for lines of our types."""
    lines = {}
    for path in _config_files(model_dir):
        for number, text in read_config_lines(path.read_text()):
            cfl = ConfigLine(text, str(path), number)
            if cfl.first_token != "component":
                continue
            m = _TYPE_RE.search(text)
            if m and m.group(1) in TYPES:
                lines[cfl.get_str("name")] = (text, str(path), number)
    return lines


_DETERMINISTIC = re.compile(r"\b(matrix|bias|scales|vector)=|type=ScaleAndOffsetComponent"
                            r"|type=FixedScaleComponent .*\bscale=")


def _is_deterministic(text):
    if _DETERMINISTIC.search(text):
        return True
    # Components whose every random draw has a zero standard deviation.
    t = _TYPE_RE.search(text).group(1)
    stddevs = dict(re.findall(r"\b(param-stddev|bias-stddev|output-stddev)=(\S+)", text))
    zero = {k: float(v) == 0.0 for k, v in stddevs.items()}
    if t in ("PerElementScaleComponent", "NaturalGradientPerElementScaleComponent",
             "PerElementOffsetComponent"):
        return zero.get("param-stddev", True)
    if t == "ConstantFunctionComponent":
        return zero.get("output-stddev", True)
    if t in ("AffineComponent", "NaturalGradientAffineComponent"):
        return zero.get("param-stddev", False) and zero.get("bias-stddev", False)
    return False


def _assert_same_arrays(ours, kaldi, where):
    """Deterministic initialization: the same parameter values. (Not bytes:
    one kaldi-ref model's idct.mat was rewritten after nnet3-init read it and
    differs from what Kaldi loaded by a few float32 ulps.)"""
    for attr, value in vars(kaldi).items():
        if isinstance(value, np.ndarray):
            mine = getattr(ours, attr)
            assert mine.shape == value.shape, (where, attr)
            scale = max(1.0, float(np.abs(value).max())) if value.size else 1.0
            assert np.abs(mine - value).max(initial=0.0) <= 1e-6 * scale, (where, attr)
    for a, b in zip(getattr(ours, "components", []), getattr(kaldi, "components", [])):
        _assert_same_arrays(a, b, where)


@pytest.mark.parametrize("model_dir", MODEL_DIRS)
def test_init_matches_nnet3_init(model_dir, monkeypatch):
    monkeypatch.chdir(model_dir)   # matrix= paths are relative to the model's folder
    model = (model_dir / "model.raw").read_bytes()
    lines = _component_lines(model_dir)
    assert lines
    for name, (text, source, number) in lines.items():
        cfl = ConfigLine(text, source, number)
        cfl.get_str("name")
        ours = Component.from_config_line(cfl)
        kaldi = read_model_component(model, name)
        where = "%s:%d %s" % (source, number, name)
        assert ours.type_name == kaldi.type_name, where
        assert (ours.input_dim(), ours.output_dim()) == (kaldi.input_dim(),
                                                         kaldi.output_dim()), where
        assert ours.properties() == kaldi.properties(), where
        if _is_deterministic(text):
            _assert_same_arrays(ours, kaldi, where)
        adopt_parameters(ours, kaldi)
        assert component_bytes(ours, True) == component_bytes(kaldi, True), where


def test_some_models_checked():
    assert any(p.id.startswith("data:") for p in MODEL_DIRS)


# -- Kaldi's random initialization distributions -------------------------------------

def _init(line):
    return Component.from_config_line(ConfigLine(line))


def _assert_gaussian(values, mean, stddev, what):
    values = np.asarray(values, dtype=np.float64).ravel()
    n = values.size
    if stddev == 0.0:
        np.testing.assert_array_equal(values, np.float32(mean), err_msg=what)
        return
    # 5-sigma bounds for the sample mean and the sample standard deviation.
    assert abs(values.mean() - mean) <= 5 * stddev / np.sqrt(n), what
    assert abs(values.std() - stddev) <= 5 * stddev / np.sqrt(2 * n), what


DISTRIBUTIONS = [
    ("type=AffineComponent input-dim=400 output-dim=300",
     {"linear_params": (0.0, 1 / 20.0), "bias_params": (0.0, 1.0)}),
    ("type=AffineComponent input-dim=100 output-dim=2000 param-stddev=0.3 bias-stddev=0.1",
     {"linear_params": (0.0, 0.3), "bias_params": (0.0, 0.1)}),
    ("type=NaturalGradientAffineComponent input-dim=256 output-dim=1000 bias-mean=2 "
     "bias-stddev=0.5", {"linear_params": (0.0, 1 / 16.0), "bias_params": (2.0, 0.5)}),
    ("type=NaturalGradientAffineComponent input-dim=64 output-dim=30 param-stddev=0.0 "
     "bias-stddev=0.0", {"linear_params": (0.0, 0.0), "bias_params": (0.0, 0.0)}),
    ("type=LinearComponent input-dim=225 output-dim=400", {"params": (0.0, 1 / 15.0)}),
    ("type=FixedAffineComponent input-dim=50 output-dim=400",
     {"linear_params": (0.0, 1.0), "bias_params": (0.0, 1.0)}),
    ("type=RepeatedAffineComponent input-dim=1000 output-dim=1000 num-repeats=10",
     {"linear_params": (0.0, 0.1), "bias_params": (0.0, 0.0)}),
    ("type=NaturalGradientRepeatedAffineComponent input-dim=640 output-dim=2000 "
     "num-repeats=10 bias-mean=1 bias-stddev=2",
     {"linear_params": (0.0, 0.125), "bias_params": (1.0, 2.0)}),
    ("type=BlockAffineComponent input-dim=1600 output-dim=1000 num-blocks=4",
     {"linear_params": (0.0, 0.05), "bias_params": (0.0, 1.0)}),
    ("type=PerElementScaleComponent dim=100", {"scales": (1.0, 0.0)}),
    ("type=PerElementScaleComponent dim=3000 param-mean=0.5 param-stddev=0.2",
     {"scales": (0.5, 0.2)}),
    ("type=NaturalGradientPerElementScaleComponent dim=3000 param-mean=0 param-stddev=1",
     {"scales": (0.0, 1.0)}),
    ("type=PerElementOffsetComponent dim=3000 param-mean=1 param-stddev=1",
     {"offsets": (1.0, 1.0)}),
    ("type=PerElementOffsetComponent dim=40 block-dim=10", {"offsets": (0.0, 0.0)}),
    ("type=FixedScaleComponent dim=3000", {"scales": (0.0, 1.0)}),
    ("type=FixedScaleComponent dim=30 scale=1.5", {"scales": (1.5, 0.0)}),
    ("type=FixedBiasComponent dim=3000", {"bias": (0.0, 1.0)}),
    ("type=ScaleAndOffsetComponent dim=30 block-dim=10",
     {"scales": (1.0, 0.0), "offsets": (0.0, 0.0)}),
    ("type=ConstantFunctionComponent input-dim=3 output-dim=3000 output-mean=-1 "
     "output-stddev=3", {"output": (-1.0, 3.0)}),
]


@pytest.mark.parametrize("line, expected", DISTRIBUTIONS,
                         ids=[d[0].split()[0][5:] + str(i) for i, d in enumerate(DISTRIBUTIONS)])
def test_random_init_distribution(line, expected):
    kaldi_random.seed(17)
    comp = _init(line)
    for attr, (mean, stddev) in expected.items():
        _assert_gaussian(getattr(comp, attr), mean, stddev, "%s %s" % (line, attr))


def test_random_init_is_seedable():
    kaldi_random.seed(3)
    a = _init("type=AffineComponent input-dim=5 output-dim=4").vectorize()
    kaldi_random.seed(3)
    b = _init("type=AffineComponent input-dim=5 output-dim=4").vectorize()
    np.testing.assert_array_equal(a, b)


# -- configuration defaults and errors -------------------------------------------------------

def test_natural_gradient_defaults():
    c = _init("type=NaturalGradientAffineComponent input-dim=7 output-dim=300")
    assert (c.rank_in, c.rank_out, c.update_period) == (4, 80, 4)
    assert (c.num_samples_history, c.alpha) == (2000.0, 4.0)
    c = _init("type=LinearComponent input-dim=100 output-dim=9 rank-in=3 alpha=2 "
              "use-natural-gradient=false update-period=1 num-samples-history=500")
    assert (c.rank_in, c.rank_out, c.alpha, c.update_period) == (3, 5, 2.0, 1)
    assert not c.use_natural_gradient and c.num_samples_history == 500.0
    c = _init("type=NaturalGradientPerElementScaleComponent dim=4")
    assert (c.rank, c.update_period, c.num_samples_history, c.alpha) == (8, 10, 2000.0, 4.0)
    c = _init("type=ScaleAndOffsetComponent dim=4")
    assert c.rank == 20 and c.use_natural_gradient


def test_matrix_files(tmp_path):
    from pynnet3.io.stream import OutputStream
    mat = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = OutputStream(True)
    out.write_header()
    out.write_matrix(mat)
    (tmp_path / "m.mat").write_bytes(out.getvalue())
    (tmp_path / "v.vec").write_text(" [ 1 2 3 ]\n")
    aff = _init("type=AffineComponent matrix=%s output-dim=3" % (tmp_path / "m.mat"))
    np.testing.assert_array_equal(aff.linear_params, mat[:, :3])
    np.testing.assert_array_equal(aff.bias_params, mat[:, 3])
    lin = _init("type=LinearComponent matrix=%s" % (tmp_path / "m.mat"))
    np.testing.assert_array_equal(lin.params, mat)
    pes = _init("type=PerElementScaleComponent vector=%s" % (tmp_path / "v.vec"))
    np.testing.assert_array_equal(pes.scales, [1, 2, 3])
    ng = _init("type=NaturalGradientPerElementScaleComponent scales=%s" % (tmp_path / "v.vec"))
    np.testing.assert_array_equal(ng.scales, [1, 2, 3])
    off = _init("type=PerElementOffsetComponent vector=%s" % (tmp_path / "v.vec"))
    assert off.dim == 3
    with pytest.raises(ConfigError, match="input-dim=5 does not match"):
        _init("type=AffineComponent matrix=%s input-dim=5" % (tmp_path / "m.mat"))
    with pytest.raises(ConfigError, match="could not read"):
        _init("type=FixedAffineComponent matrix=%s" % (tmp_path / "missing.mat"))
    with pytest.raises(ConfigError, match="input-dim"):
        _init("type=FixedAffineComponent matrix=%s input-dim=3" % (tmp_path / "m.mat"))


@pytest.mark.parametrize("line, message", [
    ("type=AffineComponent input-dim=3", "output-dim"),   # kaldi-ref bad/missing-key
    ("type=AffineComponent input-dim=4 output-dim=3 learning-rat=0.1",
     "learning-rat=0.1"),                                 # kaldi-ref bad/unknown-key
    ("type=AffineComponent input-dim=3 output-dim=0", "output-dim must be positive"),
    ("type=AffineComponent input-dim=3 output-dim=4 bias-mean=1", "bias-mean"),
    ("type=AffineComponent input-dim=3 output-dim=4 learning-rate=-1", "learning-rate"),
    ("type=NaturalGradientAffineComponent input-dim=3 output-dim=4 rank-in=0", "rank"),
    ("type=NaturalGradientAffineComponent input-dim=3 output-dim=4 alpha=-1", "alpha"),
    ("type=LinearComponent input-dim=3 output-dim=4 bias-stddev=1", "bias-stddev"),
    ("type=RepeatedAffineComponent input-dim=10 output-dim=6 num-repeats=4", "divide"),
    ("type=BlockAffineComponent input-dim=10 output-dim=6", "num-blocks"),
    ("type=PerElementOffsetComponent dim=10 block-dim=3", "block-dim"),
    ("type=ScaleAndOffsetComponent block-dim=3", "dim"),
    ("type=ScaleAndOffsetComponent dim=4 rank=0", "rank"),
    ("type=ConstantFunctionComponent input-dim=3", "output-dim"),
    ("type=FixedScaleComponent", "dim"),
    ("type=FixedBiasComponent dim=3 scale=2", "scale"),
    ("type=NaturalGradientPerElementScaleComponent dim=3 update-period=0", "update-period"),
])
def test_config_errors(line, message):
    with pytest.raises(ConfigError, match=message):
        _init(line)


# -- Info() of the components of whole networks -----------------------------------------

_INFO_RE = re.compile(r"^component name=(\S+) type=((\w+).*)$")


def _info_dirs():
    return [p for p in MODEL_DIRS if (p.values[0] / "info.txt").is_file()]


@pytest.mark.parametrize("model_dir", _info_dirs())
def test_info_matches_nnet3_info(model_dir):
    """Info() of each component of our types in Kaldi's model equals the line
    nnet3-info printed (large, trained-size matrices included)."""
    model = (model_dir / "model.raw").read_bytes()
    checked = 0
    for line in (model_dir / "info.txt").read_text().splitlines():
        m = _INFO_RE.match(line)
        if not m or m.group(3) not in TYPES:
            continue
        comp = read_model_component(model, m.group(1))
        assert comp.info() == m.group(2), m.group(1)
        checked += 1
    assert checked > 0
