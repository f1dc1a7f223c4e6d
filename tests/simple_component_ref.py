"""Reference-case helpers for the nonlinear, normalize and simple-misc
component tests (kaldi-ref/components/compN/ and the copies in
tests/data/components/).

How Kaldi's oracle made data.ark (nnet-component-test style): ``out`` is
Propagate of ``in``; ``in_deriv`` is Backprop of a random ``out_deriv`` given
that propagate's memo, starting from a zero ``in_deriv``. Kaldi ran it on its
default CPU matrices, whose rows are padded to a multiple of 4 floats, with
assertions compiled out: components that declare kInputContiguous /
kOutputContiguous and reshape rows into blocks (Normalize, BatchNorm with
block-dim < dim) then read and write the padding as if it were data.
:func:`forward_backward` reproduces that memory layout with NaN padding, so
every number that does not depend on the (uninitialized) padding is
compared exactly and the others are recognisably NaN.
"""

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.components import Component
from pynnet3.components.base import P
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.io.table import read_table

TOLERANCE = 1e-3
_TYPE_RE = re.compile(rb"^\s*<([A-Za-z0-9]+)>")
DIRECTIONS = [("bin", "bin"), ("bin", "txt"), ("txt", "bin"), ("txt", "txt")]


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


def read_component(path):
    return Component.read(str(path))


def component_bytes(comp, binary):
    out = OutputStream(binary)
    out.write_header()
    comp.write_to(out)
    return out.getvalue()


def roundtrip(comp, binary):
    """The component written and read back (tests the reader on our output)."""
    data = component_bytes(comp, binary)
    return Component.read_new(InputStream.from_bytes(data, "<roundtrip>"))


def read_data(case_dir):
    return dict(read_table("ark:%s" % (Path(case_dir) / "data.ark")))


def check_copy(case_dir, src, dst):
    """nnet3-copy of component.<src> to <dst> mode, byte for byte."""
    comp = read_component(Path(case_dir) / ("component." + src))
    expected = (Path(case_dir) / ("kaldi-copy.%s-to-%s" % (src, dst))).read_bytes()
    assert component_bytes(comp, dst == "bin") == expected


def check_info(case_dir):
    comp = read_component(Path(case_dir) / "component.bin")
    assert comp.info() == (Path(case_dir) / "info.txt").read_text().rstrip("\n")


def check_properties(case_dir):
    comp = read_component(Path(case_dir) / "component.bin")
    fields = dict(line.split(None, 1) for line in
                  (Path(case_dir) / "props.txt").read_text().splitlines() if line.strip())
    assert comp.type_name == fields["type"].strip()
    assert comp.properties() == int(fields["properties"])


def padding_artifact(comp, in_dim, out_dim):
    """Whether Kaldi's oracle numbers for this component came from padded
    rows reinterpreted as contiguous."""
    contiguous = comp.properties() & (P.kInputContiguous | P.kOutputContiguous)
    return bool(contiguous) and (in_dim % 4 != 0 or out_dim % 4 != 0)


class PaddedMatrix:
    """Kaldi's default CPU matrix memory: rows of ``stride`` floats (cols
    rounded up to 4), padding NaN. ``flat`` is the rows x cols view a
    component sees when it ignores the stride; ``value`` the real matrix."""

    def __init__(self, rows, cols, values=None):
        self.cols = cols
        stride = (cols + 3) // 4 * 4
        self.memory = np.full((rows, stride), np.nan, dtype=np.float32)
        self.memory[:, :cols] = 0.0 if values is None else values
        self.flat = self.memory.reshape(-1)[:rows * cols].reshape(rows, cols)

    @property
    def value(self):
        return self.memory[:, :self.cols]


def forward_backward(comp, data, to_update=None):
    """(out, in_deriv) as Kaldi's oracle computed them (see module doc)."""
    x, out_deriv = data["in"], data["out_deriv"]
    rows, in_dim = x.shape
    out_dim = out_deriv.shape[1]
    if not padding_artifact(comp, in_dim, out_dim):
        out = np.zeros((rows, out_dim), np.float32)
        memo = comp.propagate(None, x.copy(), out)
        in_deriv = np.zeros((rows, in_dim), np.float32)
        comp.backprop("test", None, x.copy(), out.copy(), out_deriv.copy(), memo, to_update,
                      in_deriv)
        return out, in_deriv
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        xin = PaddedMatrix(rows, in_dim, x)
        out = PaddedMatrix(rows, out_dim)
        memo = comp.propagate(None, xin.flat, out.flat)
        oderiv = PaddedMatrix(rows, out_dim, out_deriv)
        in_deriv = PaddedMatrix(rows, in_dim)
        comp.backprop("test", None, xin.flat, out.flat, oderiv.flat, memo, to_update,
                      in_deriv.flat)
    return out.value, in_deriv.value


def compare(ours, kaldi, what):
    """Asserts agreement within the project tolerance on the entries of
    ``ours`` that are not NaN; returns how many entries were compared."""
    assert ours.shape == kaldi.shape, (what, ours.shape, kaldi.shape)
    mask = ~np.isnan(ours)
    n = int(mask.sum())
    if n == 0:
        return 0
    scale = max(1.0, float(np.max(np.abs(kaldi[mask]))))
    diff = float(np.max(np.abs(ours[mask].astype(np.float64) - kaldi[mask])))
    assert diff <= TOLERANCE * scale, "%s differs from Kaldi by %g (scale %g)" % (what, diff, scale)
    return n


def check_forward_backward(case_dir):
    """Propagate and backprop against data.ark; returns the number of output
    and input-derivative entries compared."""
    comp = read_component(Path(case_dir) / "component.bin")
    data = read_data(case_dir)
    out, in_deriv = forward_backward(comp, data)
    n_out = compare(out, data["out"], "output")
    n_in = compare(in_deriv, data["in_deriv"], "input derivative")
    if not padding_artifact(comp, data["in"].shape[1], data["out"].shape[1]):
        assert n_out == out.size and n_in == in_deriv.size
    return n_out, n_in


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
