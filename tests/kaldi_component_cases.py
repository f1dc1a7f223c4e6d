"""Checks of single components against kaldi-ref/components/compN/ cases.

Shared by the component test modules of the affine, scale/offset and
composite families. A case directory holds what Kaldi wrote for one random
component (see kaldi-ref/README.md, "components/"):
component.{txt,bin}, kaldi-copy.{bin,txt}-to-{bin,txt}, info.txt, props.txt,
data.ark (in, out, out_deriv, in_deriv) and, for updatable components,
gradient.txt (a copy set as gradient, zeroed, then given the backprop).

Kaldi's oracle ran components that declare kInputContiguous /
kOutputContiguous on matrices whose rows are padded to a multiple of 4
floats (Kaldi's default stride) with assertions compiled out; those
components reinterpret the data as contiguous, so part of Kaldi's
numbers there come from the padding (uninitialized memory).
:func:`run_like_kaldi` reproduces that layout with NaN padding, so every
number that does not depend on the padding can still be compared exactly
and the rest is recognisably NaN.
"""

import re
from pathlib import Path

import numpy as np

from conftest import KALDI_REF, TEST_DATA
from pynnet3.components import Component
from pynnet3.components.base import P
from pynnet3.io.files import open_input
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.io.table import read_table

_TYPE_RE = re.compile(rb"^\s*<([A-Za-z0-9]+)>")


def component_type_of(case_dir):
    with open(Path(case_dir) / "component.txt", "rb") as f:
        m = _TYPE_RE.match(f.read(200))
    return m.group(1).decode() if m else None


def cases_of_types(type_names):
    """(id, path) of every reference case of these component types: the full
    oracle's and the copies shipped in tests/data/components."""
    out = []
    for root, prefix in ((KALDI_REF / "components", ""),
                         (TEST_DATA / "components", "data:")):
        if not root.is_dir():
            continue
        for d in sorted(root.glob("comp*"), key=lambda p: int(p.name[4:])):
            if (d / "component.txt").is_file() and component_type_of(d) in type_names:
                out.append((prefix + d.name, d))
    return out


def params_for(cases):
    import pytest
    return [pytest.param(path, id=ident) for ident, path in cases]


def write_bytes(comp, binary):
    out = OutputStream(binary)
    out.write_header()
    comp.write_to(out)
    return out.getvalue()


def read_data(case_dir):
    return dict(read_table("ark:%s" % (Path(case_dir) / "data.ark")))


def max_rel_diff(ours, kaldi):
    """max |ours - kaldi| / max(1, max |kaldi|) (the project's tolerance measure)."""
    ours = np.asarray(ours, dtype=np.float64)
    kaldi = np.asarray(kaldi, dtype=np.float64)
    assert ours.shape == kaldi.shape, (ours.shape, kaldi.shape)
    if kaldi.size == 0:
        return 0.0
    return float(np.max(np.abs(ours - kaldi)) / max(1.0, float(np.max(np.abs(kaldi)))))


TOLERANCE = 1e-3


def kaldi_padding_artifact(comp, in_dim, out_dim):
    """Whether Kaldi's oracle numbers for this component depend on row padding."""
    props = comp.properties()
    contiguous = props & (P.kInputContiguous | P.kOutputContiguous)
    return bool(contiguous) and (in_dim % 4 != 0 or out_dim % 4 != 0)


def _padded(mat, fill=np.nan):
    rows, cols = mat.shape
    stride = cols + (4 - cols % 4) % 4
    buf = np.full((rows, stride), fill, np.float32)
    buf[:, :cols] = mat
    return buf


def _flat(buf, cols):
    return buf.reshape(-1)[:buf.shape[0] * cols].reshape(buf.shape[0], cols)


def run_like_kaldi(comp, data, to_update=None, pad=np.nan):
    """Forward and backward as Kaldi's oracle ran them: returns
    (out, in_deriv), computed on contiguous matrices normally, or on
    NaN-padded rows reinterpreted as contiguous for the padding-artifact
    components (then NaN marks numbers Kaldi took from padding)."""
    x, y = data["in"], data["out"]
    rows, in_dim = x.shape
    out_dim = y.shape[1]
    if not kaldi_padding_artifact(comp, in_dim, out_dim):
        out = np.zeros((rows, out_dim), np.float32)
        comp.propagate(None, x.copy(), out)
        in_deriv = np.zeros((rows, in_dim), np.float32)
        comp.backprop("", None, x.copy(), y.copy(), data["out_deriv"].copy(), None,
                      to_update, in_deriv)
        return out, in_deriv
    with np.errstate(invalid="ignore"):
        in_buf = _padded(x, pad)
        out_buf = _padded(np.zeros((rows, out_dim), np.float32), pad)
        comp.propagate(None, _flat(in_buf, in_dim), _flat(out_buf, out_dim))
        in_deriv_buf = _padded(np.zeros((rows, in_dim), np.float32), pad)
        comp.backprop("", None, _flat(in_buf, in_dim), _flat(_padded(y, pad), out_dim),
                      _flat(_padded(data["out_deriv"], pad), out_dim), None, to_update,
                      _flat(in_deriv_buf, in_dim))
    return out_buf[:, :out_dim], in_deriv_buf[:, :in_dim]


def compare_determined(ours, kaldi, what):
    """Compares the entries of ``ours`` that are not NaN; returns how many."""
    mask = np.isfinite(ours)
    n = int(mask.sum())
    assert n > 0, "%s: nothing comparable" % what
    scale = max(1.0, float(np.max(np.abs(kaldi)))) if kaldi.size else 1.0
    diff = float(np.max(np.abs(ours[mask].astype(np.float64) - kaldi[mask]))) / scale
    assert diff <= TOLERANCE, "%s differs from Kaldi by %g (relative)" % (what, diff)
    return n


def gradient_component(comp):
    """A copy set as gradient and zeroed, as Kaldi's oracle made it."""
    grad = comp.copy()
    grad.set_as_gradient()
    grad.scale(0.0)
    return grad


# -- the checks every case gets ----------------------------------------------------

def check_copies(case_dir):
    """The four nnet3-copy directions, byte for byte."""
    case_dir = Path(case_dir)
    for src in ("bin", "txt"):
        comp = Component.read(str(case_dir / ("component." + src)))
        for dst, binary in (("bin", True), ("txt", False)):
            expected = (case_dir / ("kaldi-copy.%s-to-%s" % (src, dst))).read_bytes()
            got = write_bytes(comp, binary)
            assert got == expected, "%s -> %s differs from Kaldi" % (src, dst)


def check_info(case_dir):
    comp = Component.read(str(Path(case_dir) / "component.bin"))
    expected = (Path(case_dir) / "info.txt").read_text().rstrip("\n")
    assert comp.info() == expected


def check_properties(case_dir):
    comp = Component.read(str(Path(case_dir) / "component.bin"))
    lines = dict(line.split(None, 1) for line in
                 (Path(case_dir) / "props.txt").read_text().splitlines() if line.strip())
    assert comp.type_name == lines["type"].strip()
    assert comp.properties() == int(lines["properties"])


def check_forward_backward(case_dir):
    comp = Component.read(str(Path(case_dir) / "component.bin"))
    data = read_data(case_dir)
    out, in_deriv = run_like_kaldi(comp, data)
    compare_determined(out, data["out"], "forward")
    compare_determined(in_deriv, data["in_deriv"], "input derivative")


def check_gradient(case_dir):
    """The plain gradient against Kaldi's gradient.txt. Returns False when
    Kaldi's numbers depend on padding memory that did not hold zeros (then
    there is nothing numeric to compare)."""
    case_dir = Path(case_dir)
    comp = Component.read(str(case_dir / "component.bin"))
    has_file = (case_dir / "gradient.txt").is_file()
    if not comp.properties() & P.kUpdatableComponent:
        assert not has_file
        return True
    assert has_file
    kaldi_grad = Component.read(str(case_dir / "gradient.txt"))
    grad = gradient_component(comp)
    data = read_data(case_dir)
    run_like_kaldi(comp, data, to_update=grad)
    assert kaldi_grad.type_name == grad.type_name
    assert kaldi_grad.is_gradient and grad.is_gradient
    assert kaldi_grad.learning_rate == grad.learning_rate == 1.0
    ours, theirs = grad.vectorize(), kaldi_grad.vectorize()
    assert ours.shape == theirs.shape
    if not np.isfinite(ours).all():
        # Kaldi summed over padding memory. Where that memory held zeros,
        # Kaldi's gradient is reproducible with zero padding.
        grad = gradient_component(comp)
        run_like_kaldi(comp, data, to_update=grad, pad=0.0)
        ours = grad.vectorize()
        if not np.isfinite(theirs).all() or not max_rel_diff(ours, theirs) <= TOLERANCE:
            return False
    diff = max_rel_diff(ours, theirs)
    assert diff <= TOLERANCE, "gradient differs from Kaldi by %g (relative)" % diff
    return True


def check_linearity(case_dir, linear=True):
    """Self-consistency on contiguous data, for every case: with
    f = sum(out * out_deriv), the input derivative and the gradient are the
    directional derivatives of f. For the affine-in-input-and-parameters
    components (``linear``) a central difference is exact up to rounding;
    otherwise (composites with nonlinearities) it is second-order accurate
    and the tolerance is looser."""
    comp = Component.read(str(Path(case_dir) / "component.bin"))
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
