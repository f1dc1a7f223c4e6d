"""The nonlinear, normalize and simple-misc component types as they occur in
whole Kaldi networks: built from config lines (as nnet3-init builds them),
copied in all four binary/text directions (as nnet3-copy copies them), and
described (as nnet3-info describes them)."""

import re

import pytest

from conftest import TEST_DATA
from kaldi_component_cases import (component_bytes, component_fragment, component_occurrences,
                                   model_dirs)
from pynnet3.components import Component
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.common.config_line import ConfigLine, read_config_lines

TYPES = ("SigmoidComponent", "TanhComponent", "RectifiedLinearComponent", "SoftmaxComponent",
         "LogSoftmaxComponent", "NormalizeComponent", "BatchNormComponent", "PnormComponent",
         "SumGroupComponent", "NoOpComponent", "ClipGradientComponent",
         "ElementwiseProductComponent", "DropoutComponent", "BackpropTruncationComponent",
         "SumBlockComponent", "PermuteComponent")
MODEL_DIRS = [pytest.param(d, id="%s/%s" % (d.parent.name, d.name)) for d in model_dirs()]


def init_from_line(line, source=None, number=None):
    cfl = ConfigLine(line, source, number)
    cfl.get_str("name")
    return Component.from_config_line(cfl)


def _config_cases():
    path = TEST_DATA / "components" / "config_init.txt"
    blocks = [b for b in path.read_text().split("\n\n") if b.strip()]
    cases = []
    for block in blocks:
        lines = [l for l in block.splitlines() if not l.startswith("#")]
        line, expected = lines[0], "\n".join(lines[1:]) + "\n"
        kind = ConfigLine(line).get_str("type")
        cases.append(pytest.param(line, expected, id="%s-%d" % (kind, len(cases))))
    return cases


@pytest.mark.parametrize("line,expected", _config_cases())
def test_config_init_matches_nnet3_init(line, expected):
    comp = init_from_line(line)
    assert component_bytes(comp, False).decode() == expected.rstrip("\n")


def test_config_cases_cover_the_types():
    kinds = {ConfigLine(p.values[0]).get_str("type") for p in _config_cases()}
    assert kinds >= set(TYPES) - {"BatchNormComponent"}  # batch-norm: see normalize tests


def _copy_pairs(model_dir):
    raw = (model_dir / "model.raw").read_bytes()
    txt = (model_dir / "model.txt").read_bytes()
    pairs = [("bin-to-txt", raw, True, txt, False)]
    if (model_dir / "kaldi-copy.bin-to-bin.raw").is_file():
        pairs += [
            ("bin-to-bin", raw, True, (model_dir / "kaldi-copy.bin-to-bin.raw").read_bytes(), True),
            ("txt-to-bin", txt, False, (model_dir / "kaldi-copy.txt-to-bin.raw").read_bytes(),
             True),
            ("txt-to-txt", txt, False, (model_dir / "kaldi-copy.txt-to-txt.txt").read_bytes(),
             False),
        ]
    return pairs


@pytest.mark.parametrize("model_dir", MODEL_DIRS)
def test_components_in_models_copy_like_kaldi(model_dir):
    """Every component of these types in the model, read from Kaldi's file
    and written, equals the same component in Kaldi's copy."""
    for direction, src, src_binary, dst, dst_binary in _copy_pairs(model_dir):
        for type_name in TYPES:
            starts, ends = component_occurrences(src, type_name), component_occurrences(dst,
                                                                                      type_name)
            assert len(starts) == len(ends)
            for a, b in zip(starts, ends):
                comp = Component.read_new(InputStream(src, src_binary, direction, a))
                out = OutputStream(dst_binary)
                comp.write_to(out)
                assert out.getvalue() == component_fragment(dst, b, type_name), \
                    "%s %s at byte %d" % (direction, type_name, a)


def _named_components(model_text):
    found = {}
    for m in re.finditer(rb"<ComponentName> (\S+) <([A-Za-z]+)> ", model_text):
        type_name = m.group(2).decode()
        if type_name in TYPES:
            stream = InputStream(model_text, False, "model.txt", m.start(2) - 1)
            fragment = component_fragment(model_text, m.start(2) - 1, type_name)
            found[m.group(1).decode()] = (Component.read_new(stream), fragment)
    return found


@pytest.mark.parametrize("model_dir", MODEL_DIRS)
def test_components_in_models_info_and_config(model_dir):
    """Info() equals nnet3-info's line; the component built from its config
    line equals what nnet3-init wrote (batch-norm: up to its statistics,
    which these models were given after initialization)."""
    comps = _named_components((model_dir / "model.txt").read_bytes())
    infos = {}
    for line in (model_dir / "info.txt").read_text().splitlines():
        m = re.match(r"component name=(\S+) type=(.*)$", line)
        if m:
            infos[m.group(1)] = m.group(2)
    for name, (comp, _) in comps.items():
        if name in infos:
            assert comp.info() == infos[name], name
    configs = sorted(model_dir.glob("config.*")) or [model_dir / "final.config"]
    lines = {}
    for path in configs:
        for number, line in read_config_lines(path.read_text()):
            cfl = ConfigLine(line, str(path), number)
            if cfl.first_token == "component" and cfl.get_str("type") in TYPES:
                lines[cfl.get_str("name")] = (line, str(path), number)
    for name, (line, path, number) in lines.items():
        if name not in comps:
            continue
        ours = component_bytes(init_from_line(line, path, number), False)
        kaldi = comps[name][1]
        if comps[name][0].type_name == "BatchNormComponent":
            ours, kaldi = ours[:ours.index(b"<Count>")], kaldi[:kaldi.index(b"<Count>")]
        assert ours == kaldi, line
