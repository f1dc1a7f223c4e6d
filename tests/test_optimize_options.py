"""NnetOptimizeOptions (Kaldi's names and defaults), their registration as
``--optimization.NAME`` on a tool's parser, and compile()'s optimize switch."""

import pytest

from conftest import TEST_DATA
from pynnet3.bin._cli import ToolParser
from pynnet3.bin._option_groups import options_from, register_options
from pynnet3.compiler.request import ComputationRequest
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.compiler.computation_io import print_computation
from pynnet3.compiler.request import IoSpecification
from pynnet3.errors import ComputationError, UsageError
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize.optimizer import max_output_time_in_request
from pynnet3.optimize.options import INT32_MAX, INT32_MIN, NnetOptimizeOptions

KALDI_NAMES = [
    "optimize", "consolidate_model_update", "propagate_in_place", "backprop_in_place",
    "optimize_row_ops", "split_row_ops", "extend_matrices", "convert_addition",
    "remove_assignments", "allow_left_merge", "allow_right_merge", "initialize_undefined",
    "move_sizing_commands", "allocate_from_other", "min_deriv_time", "max_deriv_time",
    "max_deriv_time_relative", "snip_row_ops", "memory_compression_level",
    "optimize_looped_computation"]


def test_kaldi_names_and_defaults():
    opts = NnetOptimizeOptions()
    assert NnetOptimizeOptions.option_names() == KALDI_NAMES
    for name in KALDI_NAMES:
        value = getattr(opts, name)
        if name == "min_deriv_time":
            assert value == INT32_MIN
        elif name in ("max_deriv_time", "max_deriv_time_relative"):
            assert value == INT32_MAX
        elif name == "memory_compression_level":
            assert value == 1
        elif name == "optimize_looped_computation":
            assert value is False
        else:
            assert value is True, name
    assert opts.copy(optimize=False).optimize is False and opts.optimize is True


def _parser():
    parser = ToolParser("Test.\n\nUsage:  test-tool [options] <a>\n")
    register_options(parser, "optimization", NnetOptimizeOptions())
    return parser


def test_registered_with_prefix_and_parsed(capsys):
    opts, args = _parser().parse(["--print-args=false", "--optimization.propagate-in-place=false",
                                  "--optimization.max_deriv_time_relative=5",
                                  "--optimization.memory-compression-level=0", "x"], 1)
    assert args == ["x"]
    got = options_from(opts, "optimization", NnetOptimizeOptions())
    assert got == NnetOptimizeOptions(propagate_in_place=False, max_deriv_time_relative=5,
                                      memory_compression_level=0)


def test_hidden_option_is_not_on_the_command_line(capsys):
    parser = _parser()
    parser.print_usage()
    usage = capsys.readouterr().err
    assert "--optimization.allow-left-merge" in usage and "(bool, default = true)" in usage
    assert "looped" not in usage
    with pytest.raises(UsageError):
        parser.parse(["--print-args=false", "--optimization.optimize-looped-computation", "x"])


def test_max_output_time_in_request():
    request = ComputationRequest()
    request.outputs.append(IoSpecification.from_t_range("output", -3, 7))
    request.outputs.append(IoSpecification.from_t_range("other", 0, 2))
    assert max_output_time_in_request(request) == 6
    with pytest.raises(ComputationError, match="output indexes"):
        max_output_time_in_request(ComputationRequest())


def test_compile_optimizes_by_default_and_not_when_asked():
    case = TEST_DATA / "computer" / "case172"
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    optimized = print_computation(compile(nnet, request), nnet)
    assert optimized == (case / "computation.opt.txt").read_text()
    plain = compile(nnet, request, optimize=False)
    assert print_computation(plain, nnet) != optimized
    # optimize=False in the options gives only the passes Kaldi never gates
    # (ConsolidateIoOperations, memory compression).
    off = compile(nnet, request, options=NnetOptimizeOptions(optimize=False,
                                                             memory_compression_level=0))
    assert print_computation(off, nnet) == print_computation(plain, nnet)


def test_checker_runs_after_every_pass_and_names_the_pass(monkeypatch):
    """A pass that breaks the computation (here: drops the first allocation)
    is caught by the check right after it when check=True, and not without."""
    from pynnet3.compiler.computation import CommandType
    from pynnet3.optimize import zeroing

    def broken(nnet, computation):
        first = next(i for i, c in enumerate(computation.commands)
                     if c.command_type == CommandType.kAllocMatrix)
        del computation.commands[first]

    monkeypatch.setattr(zeroing, "remove_unnecessary_zeroing", broken)
    case = TEST_DATA / "computer" / "case172"
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    with pytest.raises(ComputationError, match="after remove_unnecessary_zeroing"):
        compile(nnet, request, check=True)
    compile(nnet, request)      # unchecked: the damage goes unnoticed here


def test_max_deriv_time_relative_is_relative_to_the_last_output_time():
    """--max-deriv-time-relative=R acts as --max-deriv-time=R+(largest output t)."""
    case = TEST_DATA / "computer" / "case172"
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    last_t = max_output_time_in_request(request)
    relative = compile(nnet, request, options=NnetOptimizeOptions(max_deriv_time_relative=-1))
    absolute = compile(nnet, request, options=NnetOptimizeOptions(max_deriv_time=last_t - 1))
    default = compile(nnet, request)
    assert print_computation(relative, nnet) == print_computation(absolute, nnet)
    assert print_computation(relative, nnet) != print_computation(default, nnet)


def test_registration_without_prefix():
    parser = ToolParser("Test.\n\nUsage:  test-tool [options] <a>\n")
    register_options(parser, "", NnetOptimizeOptions())
    opts, _ = parser.parse(["--print-args=false", "--extend-matrices=false", "x"], 1)
    assert options_from(opts, "", NnetOptimizeOptions()) == NnetOptimizeOptions(
        extend_matrices=False)


def test_checked_optimization_logs_memory_use(caplog):
    case = TEST_DATA / "computer" / "case172"
    nnet = Nnet.read(str(case / "model.raw"))
    request = ComputationRequest.read(str(case / "request.txt"))
    with caplog.at_level("INFO", logger="pynnet3.optimize.optimizer"):
        compile(nnet, request, check=True)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Before optimization, max memory use (bytes) = ") for m in messages)
    assert any(m.startswith("After optimization, max memory use (bytes) = ") for m in messages)
