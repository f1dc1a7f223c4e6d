"""The nnet3-init, nnet3-copy and nnet3-info tools: arguments, outputs and
Kaldi-style failures (one ERROR line, exit status 1, no output file)."""

import re
import shlex

import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.bin import nnet3_copy, nnet3_info, nnet3_init
from pynnet3.nnet.nnet import Nnet

ZOO1 = TEST_DATA / "models" / "zoo1"
SIMPLE = TEST_DATA / "models" / "random" / "case13"
BAD = KALDI_REF / "bad" if (KALDI_REF / "bad").is_dir() else TEST_DATA / "models" / "bad"


def _error_lines(text):
    return [l for l in text.splitlines() if l.startswith("ERROR")]


def test_init_and_info(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ZOO1)
    out = tmp_path / "zoo1.raw"
    assert nnet3_init.main(["--srand=7", "final.config", str(out)]) == 0
    err = capsys.readouterr().err
    assert "Initialized raw neural net and wrote it to %s" % out in err
    assert out.read_bytes()[:2] == b"\0B"
    ours = Nnet.read(str(out))
    ref = Nnet.read(str(ZOO1 / "model.raw"))
    assert ours.get_config_lines() == ref.get_config_lines()
    assert nnet3_info.main([str(ZOO1 / "model.raw")]) == 0
    printed = capsys.readouterr().out
    assert printed == (ZOO1 / "info.txt").read_text()


def test_init_adds_to_existing_model(tmp_path):
    extra = tmp_path / "extra.config"
    extra.write_text("component name=s type=SigmoidComponent dim=179\n"
                     "component-node name=s component=s input=affine1_node\n"
                     "output-node name=output input=s\n")
    out = tmp_path / "out.txt"
    assert nnet3_init.main(["--binary=false", str(SIMPLE / "model.raw"), str(extra),
                            str(out)]) == 0
    nnet = Nnet.read(str(out))
    assert nnet.get_config_lines()[-2:] == [
        "component-node name=s component=s input=affine1_node",
        "output-node name=output input=s objective=linear"]
    assert out.read_bytes().startswith(b"<Nnet3> \n")


def test_init_config_from_stdin(tmp_path, monkeypatch):
    import io
    import sys
    text = b"input-node name=input dim=2\noutput-node name=output input=Offset(input, 1)\n"
    monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(text)})())
    out = tmp_path / "o.raw"
    assert nnet3_init.main(["-", str(out)]) == 0
    assert Nnet.read(str(out)).get_config_lines()[1] == (
        "output-node name=output input=Offset(input, 1) objective=linear")


def test_usage_errors(tmp_path, capsys):
    assert nnet3_init.main(["only-one-arg"]) == 1
    assert "Usage:  nnet3-init" in capsys.readouterr().err
    assert nnet3_copy.main(["a"]) == 1
    assert nnet3_info.main([]) == 1
    assert nnet3_copy.main(["--no-such-option=1", "a", "b"]) == 255
    assert _error_lines(capsys.readouterr().err)


def test_copy_options(tmp_path, capsys):
    out = tmp_path / "c.txt"
    assert nnet3_copy.main(["--binary=false", "--scale=2", "--learning-rate=0.5",
                            str(SIMPLE / "model.raw"), str(out)]) == 0
    nnet = Nnet.read(str(out))
    ref = Nnet.read(str(SIMPLE / "model.raw"))
    assert nnet.get_component(0).learning_rate == 0.5
    assert abs(nnet.get_component(0).linear_params - 2 * ref.get_component(0).linear_params
               ).max() < 1e-6
    edits = tmp_path / "edits.config"
    edits.write_text("rename-node old-name=output new-name=out2\n")
    cfg = tmp_path / "add.config"
    cfg.write_text("output-node name=extra input=Offset(affine1_node, -1)\n")
    out2 = tmp_path / "c2.raw"
    assert nnet3_copy.main(["--nnet-config=%s" % cfg, "--edits-config=%s" % edits,
                            "--edits=rename-node old-name=extra new-name=extra2",
                            str(out), str(out2)]) == 0
    assert Nnet.read(str(out2)).get_config_lines()[-2:] == [
        "output-node name=out2 input=affine1_node objective=linear",
        "output-node name=extra2 input=Offset(affine1_node, -1) objective=linear"]


def test_copy_binary_and_text_inputs_byte_exact(tmp_path):
    for src, ref in [("model.raw", "kaldi-copy.bin-to-bin.raw"),
                     ("model.txt", "kaldi-copy.txt-to-bin.raw")]:
        out = tmp_path / ("o-" + ref)
        assert nnet3_copy.main([str(ZOO1 / src), str(out)]) == 0
        assert out.read_bytes() == (ZOO1 / ref).read_bytes()
    out = tmp_path / "t2t.txt"
    assert nnet3_copy.main(["--binary=false", str(ZOO1 / "model.txt"), str(out)]) == 0
    assert out.read_bytes() == (ZOO1 / "kaldi-copy.txt-to-txt.txt").read_bytes()


# What each message must contain: Kaldi's own words where Kaldi gave an error.
BAD_MESSAGES = {
    "bad-descriptor": "Expected a Descriptor, got instead end of input",
    "dim-mismatch": "Dimension mismatch for network-node a: input-dim 4 versus "
                    "component-input-dim 5",
    "missing-key": "output-dim",                 # Kaldi: std::bad_alloc
    "no-delay-cycle": "cycle without a time delay: a -> a",   # Kaldi accepted it
    "unknown-key": "learning-rat=0.1",
    "unknown-node": "Expected a Descriptor, got instead inptu",
    "unknown-type": "Unknown component-type 'FooComponent' in config file.",
}
BAD_INIT = sorted(BAD_MESSAGES)


@pytest.mark.parametrize("name", BAD_INIT)
def test_bad_init_cases(name, tmp_path, capsys):
    """Kaldi's bad/ cases: one clear ERROR line naming the file and line,
    exit 255 as Kaldi's (where Kaldi crashed or accepted, we still refuse), no output."""
    argv = shlex.split((BAD / (name + ".cmd")).read_text())
    assert argv[0] == "nnet3-init"
    out = tmp_path / "out.raw"
    status = nnet3_init.main([str(BAD / argv[1]), str(out)])
    err = capsys.readouterr().err
    assert status == 255
    if name not in ("missing-key", "no-delay-cycle"):   # Kaldi crashed / accepted these
        assert int((BAD / (name + ".exit")).read_text()) == 255
    errors = _error_lines(err)
    assert len(errors) == 1
    assert str(BAD / argv[1]) in errors[0]
    assert BAD_MESSAGES[name] in errors[0]
    assert not out.exists()
    assert "Traceback" not in err


@pytest.mark.parametrize("name,pattern", [
    ("truncated", r"truncated"),
])
def test_bad_info_cases(name, pattern, capsys):
    assert nnet3_info.main([str(BAD / (name + ".raw"))]) == 255
    errors = _error_lines(capsys.readouterr().err)
    assert len(errors) == 1 and re.search(pattern, errors[0])


def test_info_unknown_token(tmp_path, capsys):
    bad = tmp_path / "bad-token.txt"
    bad.write_bytes((SIMPLE / "model.txt").read_bytes().replace(
        b"<AffineComponent>", b"<AffineComponnet>", 1))
    assert nnet3_info.main([str(bad)]) == 255
    errors = _error_lines(capsys.readouterr().err)
    assert len(errors) == 1 and "unknown component type AffineComponnet" in errors[0]
    assert str(bad) in errors[0]


def test_missing_input_file(tmp_path, capsys):
    out = tmp_path / "o.raw"
    assert nnet3_copy.main([str(tmp_path / "nope.raw"), str(out)]) == 255
    assert "nope.raw" in _error_lines(capsys.readouterr().err)[0]
    assert not out.exists()
