"""Checks of single components against kaldi-ref/components/compN/ cases
(and the copies shipped in tests/data/components/), shared by the component
test modules.

A case directory holds what Kaldi wrote for one random component (see
kaldi-ref/README.md, "components/"): component.{txt,bin},
kaldi-copy.{bin,txt}-to-{bin,txt}, info.txt, props.txt, data.ark (in, out,
out_deriv, in_deriv) and, for updatable components, gradient.txt (a copy set
as gradient, zeroed, then given the backprop).

How Kaldi's oracle made data.ark (nnet-component-test style): ``out`` is
Propagate of ``in``; ``in_deriv`` is Backprop of a random ``out_deriv`` given
that propagate's memo, starting from a zero ``in_deriv``, on matrices without
row padding (stride = columns), as Kaldi's NnetComputer gives components that
require contiguous data. :func:`forward_backward` does the same, and every
number is compared.

Test modules get the per-case tests by subclassing :class:`KaldiCaseTests`
(or :class:`UpdatableCaseTests`) as ``class Test...`` with ``TYPES`` set.
"""

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.components import Component
from pynnet3.components.base import P
from pynnet3.io.files import open_input
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.io.table import read_table
from pynnet3.common.config_line import ConfigLine

TOLERANCE = 1e-3
_TYPE_RE = re.compile(rb"^\s*<([A-Za-z0-9]+)>")
DIRECTIONS = [("bin", "bin"), ("bin", "txt"), ("txt", "bin"), ("txt", "txt")]


# -- the cases ------------------------------------------------------------------------

def component_type_of(case_dir):
    with open(Path(case_dir) / "component.txt", "rb") as f:
        m = _TYPE_RE.match(f.read(200))
    return m.group(1).decode() if m else None


def case_params(type_names):
    """pytest params for every reference case of these types: the full
    oracle's (id compN) and the shipped copies (id data:compN)."""
    out = []
    for root, prefix in ((KALDI_REF / "components", ""), (TEST_DATA / "components", "data:")):
        if not root.is_dir():
            continue
        for d in sorted(root.glob("comp*"), key=lambda p: int(p.name[4:])):
            if (d / "component.txt").is_file() and component_type_of(d) in type_names:
                out.append(pytest.param(d, id=prefix + d.name))
    return out


def shipped_types(params):
    """The component types of the shipped copies (ids data:compN) among ``params``."""
    return {component_type_of(p.values[0]) for p in params if p.id.startswith("data:")}


def read_component(path):
    return Component.read(str(path))


def read_ark(path):
    """A matrix archive as {key: float32 matrix}."""
    return dict(read_table("ark:%s" % path, "matrix"))


def read_data(case_dir):
    return read_ark(Path(case_dir) / "data.ark")


def to_bytes(obj, binary, header=False):
    """What ``obj.write_to`` writes (a component, precomputed indexes...),
    after Kaldi's binary header if ``header``."""
    out = OutputStream(binary)
    if header:
        out.write_header()
    obj.write_to(out)
    return out.getvalue()


def component_bytes(comp, binary):
    """What writing ``comp`` to a file gives (with the binary header)."""
    return to_bytes(comp, binary, header=True)


def read_text_component(data, source="test"):
    """A component read from ``data`` (str or bytes; binary if it starts with
    Kaldi's header, text otherwise)."""
    if isinstance(data, str):
        data = data.encode()
    return Component.read_new(InputStream.from_bytes(data, source))


def component_text(comp):
    """The component in Kaldi's text form, as a str."""
    return to_bytes(comp, False).decode()


def component_from_line(line, source=None, line_number=None):
    """A component from a ``component name=... type=...`` config line, as
    nnet3-init makes it (the name is the caller's business)."""
    cfl = ConfigLine(line, source, line_number)
    cfl.get_str("name")
    return Component.from_config_line(cfl)


def component_from_config(keys):
    """A component from the keys of a config line (``type=... dim=...``)."""
    return component_from_line("component name=x " + keys)


def roundtrip(comp, binary):
    """The component written and read back (tests the reader on our output)."""
    data = component_bytes(comp, binary)
    return Component.read_new(InputStream.from_bytes(data, "<roundtrip>"))


# -- running a component as Kaldi's oracle did ----------------------------------------

def forward_backward(comp, data, to_update=None):
    """(out, in_deriv) as Kaldi's oracle computed them: propagate of ``in``
    into a zero ``out``, then backprop of ``out_deriv`` given that
    propagate's memo into a zero ``in_deriv`` (contiguous float32 matrices)."""
    x, out_deriv = data["in"], data["out_deriv"]
    rows, in_dim = x.shape
    out = np.zeros((rows, out_deriv.shape[1]), np.float32)
    in_deriv = np.zeros((rows, in_dim), np.float32)
    x = np.ascontiguousarray(x, dtype=np.float32)
    memo = comp.propagate(None, x, out)
    comp.backprop("test", None, x, out, np.ascontiguousarray(out_deriv, dtype=np.float32),
                  memo, to_update, in_deriv)
    return out, in_deriv


def max_rel_diff(ours, kaldi):
    """max |ours - kaldi| / max(1, max |kaldi|) (the project's tolerance measure)."""
    ours = np.asarray(ours, dtype=np.float64)
    kaldi = np.asarray(kaldi, dtype=np.float64)
    assert ours.shape == kaldi.shape, (ours.shape, kaldi.shape)
    if kaldi.size == 0:
        return 0.0
    return float(np.max(np.abs(ours - kaldi)) / max(1.0, float(np.max(np.abs(kaldi)))))


def compare(ours, kaldi, what):
    """Asserts agreement within the project tolerance on every entry (NaN and
    inf must sit where Kaldi's are); returns how many entries were compared."""
    assert ours.shape == kaldi.shape, (what, ours.shape, kaldi.shape)
    finite = np.isfinite(kaldi)
    assert np.array_equal(np.isnan(ours), np.isnan(kaldi)) and \
        np.array_equal(np.isposinf(ours), np.isposinf(kaldi)) and \
        np.array_equal(np.isneginf(ours), np.isneginf(kaldi)), \
        "%s: NaN/inf entries differ from Kaldi's" % what
    if finite.any():
        scale = max(1.0, float(np.max(np.abs(kaldi[finite]))))
        diff = float(np.max(np.abs(ours[finite].astype(np.float64) - kaldi[finite])))
        assert diff <= TOLERANCE * scale, \
            "%s differs from Kaldi by %g (scale %g)" % (what, diff, scale)
    return ours.size


def gradient_component(comp):
    """A copy set as gradient and zeroed, as Kaldi's oracle made it."""
    grad = comp.copy()
    grad.set_as_gradient()
    grad.scale(0.0)
    return grad


# -- the checks every case gets -------------------------------------------------------

def check_copy(case_dir, src, dst):
    """nnet3-copy of component.<src> to <dst> mode, byte for byte."""
    comp = read_component(Path(case_dir) / ("component." + src))
    expected = (Path(case_dir) / ("kaldi-copy.%s-to-%s" % (src, dst))).read_bytes()
    assert component_bytes(comp, dst == "bin") == expected, \
        "%s -> %s differs from Kaldi" % (src, dst)


def check_info(case_dir):
    comp = read_component(Path(case_dir) / "component.bin")
    assert comp.info() == (Path(case_dir) / "info.txt").read_text().rstrip("\n")


def check_properties(case_dir):
    comp = read_component(Path(case_dir) / "component.bin")
    fields = dict(line.split(None, 1) for line in
                  (Path(case_dir) / "props.txt").read_text().splitlines() if line.strip())
    assert comp.type_name == fields["type"].strip()
    assert comp.properties() == int(fields["properties"])


def check_forward_backward(case_dir):
    """Propagate and backprop against data.ark, every entry. Returns the
    number of output and input-derivative entries compared."""
    comp = read_component(Path(case_dir) / "component.bin")
    data = read_data(case_dir)
    out, in_deriv = forward_backward(comp, data)
    return (compare(out, data["out"], "output"),
            compare(in_deriv, data["in_deriv"], "input derivative"))


def check_gradient(case_dir):
    """The plain gradient against Kaldi's gradient.txt, every parameter."""
    case_dir = Path(case_dir)
    comp = read_component(case_dir / "component.bin")
    has_file = (case_dir / "gradient.txt").is_file()
    if not comp.properties() & P.kUpdatableComponent:
        assert not has_file
        return
    assert has_file
    kaldi_grad = read_component(case_dir / "gradient.txt")
    grad = gradient_component(comp)
    forward_backward(comp, read_data(case_dir), to_update=grad)
    assert kaldi_grad.type_name == grad.type_name
    assert kaldi_grad.is_gradient and grad.is_gradient
    assert kaldi_grad.learning_rate == grad.learning_rate == 1.0
    ours, theirs = grad.vectorize(), kaldi_grad.vectorize()
    assert ours.shape == theirs.shape
    diff = max_rel_diff(ours, theirs)
    assert diff <= TOLERANCE, "gradient differs from Kaldi by %g (relative)" % diff


def check_linearity(case_dir, linear=True):
    """Self-consistency on contiguous data, for every case: with
    f = sum(out * out_deriv), the input derivative and the gradient are the
    directional derivatives of f. For the affine-in-input-and-parameters
    components (``linear``) a central difference is exact up to rounding;
    otherwise (composites with nonlinearities) it is second-order accurate
    and the tolerance is looser."""
    comp = read_component(Path(case_dir) / "component.bin")
    data = read_data(case_dir)
    x, d = data["in"].astype(np.float32), data["out_deriv"].astype(np.float64)
    rows, in_dim = x.shape
    out_dim = d.shape[1]
    eps, tol = (1e-2, 2e-3) if linear else (1e-3, 2e-2)

    def objective(c, inp):
        out = np.zeros((rows, out_dim), np.float32)
        c.propagate(None, inp, out)
        return float((out.astype(np.float64) * d).sum()), out

    f0, out0 = objective(comp, x)
    rng = np.random.default_rng(0)
    in_deriv = np.zeros((rows, in_dim), np.float32)
    grad = gradient_component(comp) if comp.properties() & P.kUpdatableComponent else None
    comp.backprop("", None, x.copy(), out0, d.astype(np.float32), None, grad, in_deriv)

    def agree(f_plus, f_minus, predicted, what):
        measured = (f_plus - f_minus) / (2 * eps)
        scale = max(1.0, abs(predicted), abs(measured))
        assert abs(measured - predicted) <= tol * scale, \
            "%s: finite difference %g, backprop %g" % (what, measured, predicted)

    v = rng.standard_normal(x.shape).astype(np.float32)
    agree(objective(comp, x + np.float32(eps) * v)[0], objective(comp, x - np.float32(eps) * v)[0],
          float((in_deriv.astype(np.float64) * v).sum()), "input derivative")
    if grad is not None and grad.num_parameters() > 0:
        theta = comp.vectorize()
        v = rng.standard_normal(theta.shape).astype(np.float32)
        plus, minus = comp.copy(), comp.copy()
        plus.unvectorize(theta + np.float32(eps) * v)
        minus.unvectorize(theta - np.float32(eps) * v)
        agree(objective(plus, x)[0], objective(minus, x)[0],
              float((grad.vectorize().astype(np.float64) * v).sum()), "gradient")


def finite_difference_check(comp, x, out_deriv, eps=1e-3, tol=2e-2, seed=0):
    """Backprop's input derivative against a central difference of
    f(x) = sum(propagate(x) * out_deriv) along a random direction (float64
    accumulation; a fresh propagate for each evaluation)."""
    rows, in_dim = x.shape
    d = out_deriv.astype(np.float64)

    def f(inp):
        out = np.zeros(out_deriv.shape, np.float32)
        comp.propagate(None, inp.astype(np.float32), out)
        return float((out.astype(np.float64) * d).sum()), out

    out0 = np.zeros(out_deriv.shape, np.float32)
    memo = comp.propagate(None, x.copy(), out0)
    in_deriv = np.zeros((rows, in_dim), np.float32)
    comp.backprop("fd", None, x.copy(), out0, out_deriv.astype(np.float32), memo, None,
                  in_deriv)
    v = np.random.default_rng(seed).standard_normal(x.shape)
    measured = (f(x + eps * v)[0] - f(x - eps * v)[0]) / (2 * eps)
    predicted = float((in_deriv.astype(np.float64) * v).sum())
    scale = max(1.0, abs(measured), abs(predicted))
    assert abs(measured - predicted) <= tol * scale, (measured, predicted)
    return in_deriv


# -- the per-case tests, for test modules to subclass ----------------------------------

class KaldiCaseTests:
    """Byte-exact copies in the four nnet3-copy directions, Info(),
    Properties(), and forward and input derivative against Kaldi's numbers,
    for every reference case of the component types in ``TYPES``. A test
    module subclasses this as ``class Test...: TYPES = (...)``; its ``case``
    argument is parametrized over :func:`case_params` of ``TYPES``."""

    TYPES = ()

    def pytest_generate_tests(self, metafunc):
        if "case" in metafunc.fixturenames:
            metafunc.parametrize("case", case_params(self.TYPES))

    @pytest.mark.parametrize("src,dst", DIRECTIONS, ids=["%s-to-%s" % d for d in DIRECTIONS])
    def test_copy_matches_kaldi(self, case, src, dst):
        check_copy(case, src, dst)

    def test_info_matches_kaldi(self, case):
        check_info(case)

    def test_properties_match_kaldi(self, case):
        check_properties(case)

    def test_forward_backward_match_kaldi(self, case):
        check_forward_backward(case)

    def test_every_type_has_shipped_cases(self):
        assert shipped_types(case_params(self.TYPES)) >= set(self.TYPES)


class UpdatableCaseTests(KaldiCaseTests):
    """:class:`KaldiCaseTests` plus the gradient against Kaldi's and a
    finite-difference self-check of the derivatives (``LINEAR``: whether the
    component is affine in its input and parameters, see
    :func:`check_linearity`)."""

    LINEAR = True

    def test_gradient_matches_kaldi(self, case):
        check_gradient(case)

    def test_derivatives_self_consistent(self, case):
        check_linearity(case, linear=self.LINEAR)


# -- components of whole networks (for config initialization tests) ------------------

def read_model_component(model_bytes, name):
    """The component named ``name`` in a Kaldi nnet3 model's bytes (binary
    or text), read with Component.read_new."""
    key = b"<ComponentName> " + name.encode() + b" "
    at = model_bytes.find(key)
    assert at >= 0, "component %s not in model" % name
    binary = model_bytes[:2] == b"\0B"
    stream = InputStream(model_bytes, binary, "model", at + len(key))
    return Component.read_new(stream)


def adopt_parameters(ours, kaldi):
    """Copies every array attribute of ``kaldi`` into ``ours`` (same shapes
    required), recursing into sub-components: what remains different after
    this is configuration, not random initialization."""
    assert type(ours) is type(kaldi)
    for attr, value in vars(kaldi).items():
        if isinstance(value, np.ndarray):
            mine = getattr(ours, attr)
            assert mine.shape == value.shape, (attr, mine.shape, value.shape)
            setattr(ours, attr, value.copy())
    subs = getattr(kaldi, "components", None)
    if isinstance(subs, list):
        assert len(ours.components) == len(subs)
        for a, b in zip(ours.components, subs):
            adopt_parameters(a, b)


def open_model_bytes(path):
    stream = open_input(str(path))
    return stream.data


def model_dirs():
    """kaldi-ref networks that have a text model (models/* and random/case*)."""
    if not KALDI_REF.is_dir():
        return []
    dirs = sorted((KALDI_REF / "models").glob("*"))
    dirs += sorted((KALDI_REF / "random").glob("case*"), key=lambda p: int(p.name[4:]))
    return [d for d in dirs if (d / "model.txt").is_file()]


def component_occurrences(data, type_name):
    """Byte offsets of every ``<TypeName> `` token in a model file."""
    return [m.start() for m in re.finditer(re.escape(("<%s> " % type_name).encode()), data)]


def component_fragment(data, at, type_name):
    """The bytes of one component, from its opening token at ``at`` through
    its closing token and the space after it."""
    end = ("</%s> " % type_name).encode()
    return data[at:data.index(end, at) + len(end)]
