"""The tool framework (Kaldi's ParseOptions and log lines) and the
nnet3-am-info / nnet3-am-copy tools."""

import logging
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest

from conftest import KALDI_REF, REPO, TEST_DATA
from pynnet3.bin import _cli
from pynnet3.bin._cli import ToolParser, escape_arg, kaldi_tool, run_tool, vlog_level
from pynnet3.errors import KaldiFormatError, UsageError

USAGE = "Test tool.\n\nUsage:  test-tool [options] <a> [<b>]\n"


def make_parser():
    p = ToolParser(USAGE)
    p.register_bool("binary", True, "Write in binary")
    p.register_int("count", 3, "A count")
    p.register_uint("size", 1, "A size")
    p.register_float("scale", 1.0, "A scale")
    p.register_double("weight", 0.5, "A weight")
    p.register_str("edits", "", "Edits")
    p.register_str("set-raw-nnet", "", "A file")
    return p


def parse(argv, num_args=None):
    return make_parser().parse(argv, num_args)


# -- option syntax -------------------------------------------------------------

def test_defaults_and_values(capsys):
    opts, args = parse(["--binary=false", "--count=-7", "--scale=0.1", "--edits=a b;c",
                        "--set-raw-nnet= x.raw ", "in", "out"])
    assert (opts.binary, opts.count, opts.size, opts.weight) == (False, -7, 1, 0.5)
    assert opts.scale == float(__import__("numpy").float32(0.1))   # BaseFloat
    assert opts.edits == "a b;c" and opts.set_raw_nnet == "x.raw"   # values are trimmed
    assert args == ["in", "out"]
    assert capsys.readouterr().err == "test-tool --binary=false --count=-7 --scale=0.1 " \
        "'--edits=a b;c' '--set-raw-nnet= x.raw ' in out \n"


@pytest.mark.parametrize("arg,value", [("--binary", True), ("--binary=TRUE", True),
                                       ("--binary=t", True), ("--binary=1", True),
                                       ("--binary=False", False), ("--binary=F", False),
                                       ("--binary=0", False), ("--Binary=false", False)])
def test_booleans(arg, value):
    opts, _ = parse(["--binary=false", arg] if value else [arg])
    assert opts.binary is value


def test_names_are_normalized():
    opts, _ = parse(["--SET_RAW_NNET=a", "--Count=2"])
    assert opts.set_raw_nnet == "a" and opts.count == 2


def test_space_separated_value_is_a_positional_argument():
    opts, args = parse(["--binary", "false", "x"])
    assert opts.binary is True and args == ["false", "x"]
    with pytest.raises(UsageError, match='Invalid integer option ""'):
        parse(["--count", "5"])


def test_options_after_positionals_are_positionals():
    opts, args = parse(["a", "--binary=false", "b"])
    assert opts.binary is True and args == ["a", "--binary=false", "b"]


def test_double_dash():
    opts, args = parse(["--count=2", "--", "--binary=false", "x"])
    assert opts.binary is True and opts.count == 2 and args == ["--binary=false", "x"]
    _, args = parse(["a", "--", "b", "--"])
    assert args == ["a", "b", "--"]


@pytest.mark.parametrize("argv,message", [
    (["--binary="], r"Invalid option --binary="),
    (["--binary=yes"], r"Invalid format for boolean argument \[expected true or false\]: yes"),
    (["--count=1.5"], 'Invalid integer option "1.5"'),
    (["--count=3000000000"], 'Invalid integer option "3000000000"'),
    (["--size=-1"], 'Invalid integer option "-1"'),
    (["--scale=abc"], 'Invalid floating-point option "abc"'),
    (["--scale=1_0"], 'Invalid floating-point option "1_0"'),
    (["--edits"], r"Invalid option --edits \(option format is --x=y\)."),
    (["--=3"], r"Invalid option \(no key\): --=3"),
])
def test_bad_values(argv, message):
    with pytest.raises(UsageError, match=message):
        parse(argv)


def test_float_spellings():
    for text, value in (("1e-3", 1e-3), (" .5 ", 0.5), ("5.", 5.0), ("+2", 2.0),
                        ("-inf", float("-inf")), ("INFINITY", float("inf"))):
        opts, _ = parse(["--weight=%s" % text])
        assert opts.weight == value


def test_unknown_option_prints_usage_and_command_line(capsys):
    with pytest.raises(UsageError, match="Invalid option --nope=1"):
        parse(["--nope=1", "x"])
    err = capsys.readouterr().err
    assert "Usage:  test-tool" in err
    assert err.endswith("\nCommand line was: test-tool --nope=1 x \n")


def test_usage_layout(capsys):
    with pytest.raises(SystemExit) as e:
        parse(["--help"])
    assert e.value.code == 0
    err = capsys.readouterr().err
    assert err.startswith("\n" + USAGE + "\nOptions:\n")
    assert "  --binary                    : Write in binary (bool, default = true)\n" in err
    assert "  --count                     : A count (int, default = 3)\n" in err
    assert "  --scale                     : A scale (float, default = 1)\n" in err
    assert '  --edits                     : Edits (string, default = "")\n' in err
    assert err.index("--binary") < err.index("--count") < err.index("--edits") \
        < err.index("--scale") < err.index("--set-raw-nnet") < err.index("--size")
    assert err.endswith(
        "\nStandard options:\n"
        '  --config                    : Configuration file to read (this option may be '
        'repeated) (string, default = "")\n'
        "  --help                      : Print out usage message (bool, default = false)\n"
        "  --print-args                : Print the command line arguments (to stderr) "
        "(bool, default = true)\n"
        "  --verbose                   : Verbose level (higher->more logging) "
        "(int, default = 0)\n\n")


def test_help_anywhere_and_dash_h(capsys):
    for argv in (["x", "--help"], ["-h"], ["--count=2", "-h", "x"]):
        with pytest.raises(SystemExit) as e:
            parse(argv)
        assert e.value.code == 0
        assert "Usage:  test-tool" in capsys.readouterr().err


def test_wrong_number_of_arguments(capsys):
    for argv, num in ((["a", "b", "c"], (1, 2)), ([], 1), (["a"], 2)):
        with pytest.raises(SystemExit) as e:
            parse(argv, num)
        assert e.value.code == 1
        err = capsys.readouterr().err
        assert "Usage:  test-tool" in err and "Command line was" not in err
    assert parse(["a"], (1, 2))[1] == ["a"]


def test_config_file(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("# comment\n--count=9   # trailing comment\n\n  --binary=false\n"
                    "--edits=x=y\n")
    opts, args = parse(["--config=%s" % conf, "--count=4", "a"])
    assert (opts.count, opts.binary, opts.edits, args) == (4, False, "x=y", ["a"])
    # A config given after the options still applies (Kaldi reads configs first).
    opts, _ = parse(["--count=4", "--config=%s" % conf])
    assert opts.count == 4 and opts.binary is False
    conf.write_text("count=3\n")
    with pytest.raises(UsageError, match="line 1 does not look like"):
        parse(["--config=%s" % conf])
    conf.write_text("--nope=3\n")
    with pytest.raises(UsageError, match="Invalid option --nope=3 in config file"):
        parse(["--config=%s" % conf])
    with pytest.raises(UsageError, match="Cannot open config file"):
        parse(["--config=%s" % (tmp_path / "missing")])


def test_print_args_false(capsys):
    parse(["--print-args=false", "x"])
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("arg,escaped", [
    ("model.raw", "model.raw"), ("ark:feats.ark", "ark:feats.ark"),
    ("--x=[1,2]~#^_-+=:.,/", "--x=[1,2]~#^_-+=:.,/"), ("", "''"), ("a b", "'a b'"),
    ("it's", '"it\'s"'), ("it's $x", "'it'\\''s $x'"), ("ark:gunzip -c a|", "'ark:gunzip -c a|'"),
    ("\u00e9", "'\u00e9'"),
])
def test_escape_arg(arg, escaped):
    assert escape_arg(arg) == escaped


ECHO_CASES = sorted(KALDI_REF.glob("models/*/copy.*.cmd")) + \
    sorted(KALDI_REF.glob("models/*/compute.*.cmd"))[:20] + sorted(KALDI_REF.glob("bad/*.cmd"))


@pytest.mark.parametrize("cmd", ECHO_CASES, ids=lambda p: "/".join(p.parts[-2:]))
def test_command_line_echo_matches_kaldi_logs(cmd):
    log = cmd.with_suffix(".log")
    if not log.exists():
        log = cmd.with_suffix(".stderr")
    argv = shlex.split(cmd.read_text())
    parser = ToolParser("Usage:  %s\n" % argv[0])
    parser._argv = argv[1:]
    assert parser.command_line() + "\n" == log.read_text().split("\n")[0] + "\n"


# -- logging and run_tool ------------------------------------------------------

log = logging.getLogger("pynnet3.test_cli")


@kaldi_tool
def _tool(argv=None):
    parser = ToolParser("Usage:  demo-tool [options] <what>\n")
    opts, args = parser.parse(argv, num_args=1)
    what = args[0]
    if what == "log":
        log.info("hello %d", 5)
        log.warning("careful")
        log.log(vlog_level(1), "detail one")
        log.log(vlog_level(2), "detail two")
    elif what == "format":
        raise KaldiFormatError("expected token <Nnet3>, got 'x'", "a.raw", 12)
    elif what == "bug":
        return {}["missing"]
    elif what == "interrupt":
        raise KeyboardInterrupt
    elif what == "pipe":
        raise BrokenPipeError
    elif what == "status":
        return 3


def _lines(err):
    return [line for line in err.split("\n") if line]


def test_log_lines(capsys):
    assert _tool(["log"]) == 0
    lines = _lines(capsys.readouterr().err)
    assert lines[0] == "demo-tool log "
    assert re.fullmatch(r"LOG \(demo-tool\[5\.5\]:_tool\(\):test_cli\.py:\d+\) hello 5", lines[1])
    assert re.fullmatch(r"WARNING \(demo-tool\[5\.5\]:_tool\(\):test_cli\.py:\d+\) careful",
                        lines[2])
    assert len(lines) == 3
    assert _tool(["--verbose=1", "log"]) == 0
    lines = _lines(capsys.readouterr().err)
    assert re.fullmatch(r"VLOG\[1\] \(demo-tool\[5\.5\]:_tool\(\):test_cli\.py:\d+\) detail one",
                        lines[-1])
    assert _tool(["--verbose=2", "log"]) == 0
    assert "VLOG[2]" in capsys.readouterr().err
    _cli.setup_logging(0)


def test_errors_become_one_error_line(capsys):
    assert _tool(["format"]) == 255
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 2
    assert re.fullmatch(r"ERROR \(demo-tool\[5\.5\]:_tool\(\):test_cli\.py:\d+\) a\.raw "
                        r"\(byte offset 12\): expected token <Nnet3>, got 'x'", lines[1])
    assert _tool(["bug"]) == 255
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 2 and "internal error (a bug in pynnet3" in lines[1] \
        and "KeyError" in lines[1]
    assert _tool(["--nope", "x"]) == 255
    err = capsys.readouterr().err
    assert re.search(r"\nERROR \(demo-tool\[5\.5\]:parse\(\):_cli\.py:\d+\) Invalid option "
                     r"--nope\n$", err)


def test_exit_statuses(capsys):
    assert _tool(["interrupt"]) == 130
    assert _tool(["pipe"]) == 141
    assert _tool(["status"]) == 3
    assert _tool([]) == 1
    assert _tool(["--help"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert run_tool(lambda argv: None, []) == 0


# -- the .mdl tools ------------------------------------------------------------

MDL_DIRS = sorted(p.parent for p in KALDI_REF.glob("models/*/final.mdl")) + \
    sorted(p.parent for p in TEST_DATA.glob("mdl/*/final.mdl"))


@pytest.mark.parametrize("model", MDL_DIRS, ids=lambda p: "/".join(p.parts[-2:]))
def test_nnet3_am_info(model, capsys):
    from pynnet3.bin.nnet3_am_info import main
    assert main([str(model / "final.mdl")]) == 0
    out, err = capsys.readouterr()
    assert out == (model / "am-info.txt").read_text()
    assert err == "nnet3-am-info %s \n" % (model / "final.mdl")


@pytest.mark.parametrize("model", MDL_DIRS, ids=lambda p: "/".join(p.parts[-2:]))
def test_nnet3_am_copy(model, tmp_path, capsys):
    from pynnet3.bin.nnet3_am_copy import main
    cases = [([], "final.mdl", "kaldi-copy.bin-to-bin.mdl"),
             ([], "final.txt.mdl", "kaldi-copy.txt-to-bin.mdl"),
             (["--binary=false"], "final.mdl", "final.txt.mdl"),
             (["--raw=true"], "final.mdl", "kaldi-am-copy.raw.raw")]
    for options, src, expected in cases:
        out = tmp_path / "out"
        assert main(options + [str(model / src), str(out)]) == 0
        assert out.read_bytes() == (model / expected).read_bytes(), (options, src)
        err = _lines(capsys.readouterr().err)
        assert re.fullmatch(r"LOG \(nnet3-am-copy\[5\.5\]:main\(\):nnet3_am_copy\.py:\d+\) "
                            r"Copied neural net from .*%s to %s%s" % (
                                re.escape(src), "raw format as " if "--raw=true" in options
                                else "", re.escape(str(out))), err[-1])


def test_nnet3_am_copy_learning_rate_and_scale(tmp_path):
    from pynnet3.bin.nnet3_am_copy import main
    from pynnet3.model.am import read_mdl
    src = MDL_DIRS[0] / "final.mdl"
    out = tmp_path / "o.mdl"
    assert main(["--learning-rate=0.25", "--scale=0.5", str(src), str(out)]) == 0
    tm, am = read_mdl(str(out))
    tm0, am0 = read_mdl(str(src))
    updatable = 0
    for c, c0 in zip(am.nnet.components, am0.nnet.components):
        if c0.is_updatable():   # ScaleNnet leaves fixed components alone, as Kaldi
            updatable += 1
            assert c.learning_rate == pytest.approx(0.25 * c0.learning_rate_factor)
            assert (c.linear_params == c0.linear_params * np.float32(0.5)).all()
    assert updatable > 0 and (am.priors == am0.priors).all()


def test_nnet3_am_copy_errors(tmp_path, capsys):
    from pynnet3.bin.nnet3_am_copy import main
    model = MDL_DIRS[0]
    assert main([str(model / "kaldi-am-copy.raw.raw"), str(tmp_path / "o")]) == 255
    err = _lines(capsys.readouterr().err)
    assert len(err) == 2 and "expected token <TransitionModel>" in err[1]
    assert not (tmp_path / "o").exists()
    assert main([str(model / "final.mdl")]) == 1
    assert main(["--no-such-option=true", str(model / "final.mdl"), str(tmp_path / "o")]) \
        == 255


def test_tools_run_as_programs(tmp_path):
    model = MDL_DIRS[-1]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "pynnet3.bin.nnet3_am_info",
                           str(model / "final.mdl")], capture_output=True, env=env)
    assert proc.returncode == 0
    assert proc.stdout == (model / "am-info.txt").read_bytes()
    proc = subprocess.run([sys.executable, "-m", "pynnet3.bin.nnet3_am_copy", "--raw=true",
                           str(model / "final.mdl"), "-"], capture_output=True, env=env)
    assert proc.returncode == 0
    assert proc.stdout == (model / "kaldi-am-copy.raw.raw").read_bytes()
    assert proc.stderr.decode().startswith("nnet3-am-copy --raw=true ")
    proc = subprocess.run([sys.executable, "-m", "pynnet3.bin.nnet3_am_info", "/no/such.mdl"],
                          capture_output=True, env=env)
    assert proc.returncode == 255
    assert b"Traceback" not in proc.stderr
    assert proc.stderr.decode().split("\n")[1].startswith("ERROR (nnet3-am-info[5.5]:")


def test_nnet3_am_copy_structural_options(tmp_path, capsys):
    """--edits, --set-raw-nnet and --nnet-config do what the library calls do,
    in Kaldi's order, and the context is recomputed afterwards."""
    from pynnet3.bin.nnet3_am_copy import main
    from pynnet3.model.am import mdl_to_bytes, read_mdl
    from pynnet3.nnet.edits import apply_edits_string
    from pynnet3.nnet.nnet import Nnet
    model = MDL_DIRS[0]
    src, out = str(model / "final.mdl"), tmp_path / "o.mdl"

    edits = "set-learning-rate-factor name=* learning-rate-factor=2.0;remove-orphans"
    assert main(["--edits=%s" % edits, src, str(out)]) == 0
    tm, am = read_mdl(src)
    apply_edits_string(am.nnet, edits)
    assert out.read_bytes() == mdl_to_bytes(tm, am, True)

    assert main(["--set-raw-nnet=%s" % (model / "kaldi-am-copy.raw.raw"), src, str(out)]) == 0
    tm, am = read_mdl(src)
    am.set_nnet(Nnet.read(str(model / "kaldi-am-copy.raw.raw")))
    assert out.read_bytes() == mdl_to_bytes(tm, am, True)

    (tmp_path / "extra.config").write_text("output-node name=output2 input=output.affine\n")
    assert main(["--nnet-config=%s" % (tmp_path / "extra.config"), "--binary=false",
                 src, str(out)]) == 0
    _, am = read_mdl(str(out))
    _, am0 = read_mdl(src)
    assert am.nnet.is_output_node(am.nnet.get_node_index("output2"))
    assert (am.left_context, am.right_context) == (am0.left_context, am0.right_context)
    capsys.readouterr()

    # Renaming the output leaves no 'simple' network: an error, as in Kaldi.
    assert main(["--edits=rename-node old-name=output new-name=foo", src, str(out)]) == 255
    assert "simple" in capsys.readouterr().err


def test_convert_repeated_to_block_affine():
    import numpy as np
    from pynnet3.bin.nnet3_am_copy import convert_repeated_to_block_affine
    from pynnet3.nnet.nnet import Nnet
    path = KALDI_REF / "random" / "case131" / "model.raw"
    if not path.exists():
        pytest.skip("kaldi-ref case131 not available")
    nnet = Nnet.read(str(path))
    composite = next(c for c in nnet.components if c.type_name == "CompositeComponent")
    before = [c.copy() for c in composite.components]
    convert_repeated_to_block_affine(nnet)
    after = composite.components
    assert [c.type_name for c in after] == ["BlockAffineComponent"] * 3
    rng = np.random.default_rng(0)
    for old, new in zip(before, after):
        x = rng.normal(size=(5, old.input_dim())).astype(np.float32)
        y_old = np.zeros((5, old.output_dim()), np.float32)
        y_new = np.zeros((5, new.output_dim()), np.float32)
        old.propagate(None, x, y_old)
        new.propagate(None, x, y_new)
        assert np.allclose(y_old, y_new, atol=1e-5)
