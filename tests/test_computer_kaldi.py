"""NnetComputer running Kaldi's own optimized computations.

For every reference case (random/caseN, models/zoo*/requestN, and the copies in
tests/data/computer): read the model and Kaldi's ``computation.opt.kaldi``,
feed ``inputs.ark``, run forward: outputs match ``outputs.ark``; where output
derivatives exist, feed them and run backward: input derivatives match
``input_derivs.ark`` and the parameter gradient accumulated into a zeroed
gradient copy of the model (``nnet_to_update``) matches ``gradient.raw`` /
``gradient.txt`` per updatable component. Tolerance, per matrix:
max|ours - kaldi| <= 1e-3 * max(1, max|kaldi|).

The helpers here are also used by test_computer_compiled.py (the same checks
on computations compiled by pynnet3).
"""

import numpy as np
import pytest

import pynnet3.components  # noqa: F401  (registers component types)
from conftest import KALDI_REF, TEST_DATA
from pynnet3.compiler.computation import Command, CommandType, NnetComputation
from pynnet3.compiler.computation_io import read_computation_file
from pynnet3.compute.computer import NnetComputer
from pynnet3.errors import ComputationError
from pynnet3.io.table import read_table
from pynnet3.nnet.nnet import Nnet
from pynnet3.nnet.component_ops import scale_nnet, set_nnet_as_gradient


def case_dirs():
    """Every reference computation case (kaldi-ref if present, plus tests/data)."""
    dirs = []
    if KALDI_REF.is_dir():
        dirs += sorted(KALDI_REF.glob("random/case*"), key=lambda p: int(p.name[4:]))
        dirs += sorted(KALDI_REF.glob("models/*/request*"))
    dirs += sorted((TEST_DATA / "computer").glob("case*"))
    return [d for d in dirs if (d / "inputs.ark").is_file()]


def case_id(path):
    return "/".join(path.parts[-2:]) if "computer" not in path.parts else "data/" + path.name


def read_ark(path):
    return dict(read_table("ark:" + str(path), "matrix"))


def assert_close(ours, kaldi, what):
    ours = np.asarray(ours)
    assert ours.shape == kaldi.shape, "%s: shape %s, Kaldi %s" % (what, ours.shape, kaldi.shape)
    if kaldi.size == 0:
        return
    # Where Kaldi's numbers diverged (inf/NaN, e.g. an exploding recurrence),
    # ours must diverge in the same places; the finite ones are compared.
    finite = np.isfinite(kaldi)
    assert np.array_equal(finite, np.isfinite(ours)), "%s: inf/NaN pattern differs" % what
    assert np.array_equal(np.isnan(kaldi), np.isnan(ours)), "%s: NaN pattern differs" % what
    if not finite.any():
        return
    err = float(np.abs(ours[finite].astype(np.float64) - kaldi[finite]).max())
    tol = 1e-3 * max(1.0, float(np.abs(kaldi[finite]).max()))
    assert err <= tol, "%s: max |ours - kaldi| = %g > %g" % (what, err, tol)


def gradient_reference(case):
    for name in ("gradient.raw", "gradient.txt"):
        if (case / name).is_file():
            return Nnet.read(str(case / name))
    return None


def run_and_check(case, computation, nnet, undefined_fill=None):
    """Runs ``computation`` on the case's data and checks everything Kaldi
    recorded; returns the set of checks done ("forward", "input-deriv",
    "gradient")."""
    gradient = nnet.copy()
    scale_nnet(gradient, 0.0)
    set_nnet_as_gradient(gradient)
    computer = NnetComputer(computation, nnet, nnet_to_update=gradient,
                            undefined_fill=undefined_fill)
    for name, value in read_ark(case / "inputs.ark").items():
        computer.accept_input(name, value)
    computer.run()
    done = set()
    for name, value in read_ark(case / "outputs.ark").items():
        assert_close(computer.get_output(name), value, "output '%s'" % name)
    done.add("forward")
    if not (case / "output_derivs.ark").is_file():
        return done
    for name, value in read_ark(case / "output_derivs.ark").items():
        computer.accept_input(name, value)
    computer.run()
    if (case / "input_derivs.ark").is_file():
        for name, value in read_ark(case / "input_derivs.ark").items():
            assert_close(computer.get_output(name), value, "derivative of input '%s'" % name)
        done.add("input-deriv")
    reference = gradient_reference(case)
    if reference is not None:
        assert reference.component_names == gradient.component_names
        for name, ours, kaldi in zip(gradient.component_names, gradient.components,
                                     reference.components):
            if kaldi.num_parameters():
                assert_close(ours.vectorize(), kaldi.vectorize(), "gradient of '%s'" % name)
        done.add("gradient")
    return done


CASES = case_dirs()


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_kaldi_computation_matches_kaldi(case):
    nnet = Nnet.read(str(case / "model.raw"))
    computation = read_computation_file(str(case / "computation.opt.kaldi"))
    done = run_and_check(case, computation, nnet)
    assert "forward" in done


# -- the protocol --------------------------------------------------------------------------

SMALL = TEST_DATA / "computer" / "case172"    # forward, backward, input derivative, gradient


def _small():
    nnet = Nnet.read(str(SMALL / "model.raw"))
    return nnet, read_computation_file(str(SMALL / "computation.opt.kaldi"))


def test_undefined_memory_is_never_read_in_a_kaldi_computation():
    nnet, computation = _small()
    assert run_and_check(SMALL, computation, nnet, undefined_fill=np.nan) == {
        "forward", "input-deriv", "gradient"}


def test_run_without_input_names_the_node():
    nnet, computation = _small()
    computer = NnetComputer(computation, nnet, nnet.copy())
    with pytest.raises(ComputationError, match="no input was given for node 'input'"):
        computer.run()


def test_accept_input_checks_the_shape_and_the_node():
    nnet, computation = _small()
    computer = NnetComputer(computation, nnet, nnet.copy())
    value = read_ark(SMALL / "inputs.ark")["input"]
    with pytest.raises(ComputationError, match="num-rows mismatch"):
        computer.accept_input("input", value[1:])
    with pytest.raises(ComputationError, match="num-cols mismatch"):
        computer.accept_input("input", value[:, 1:])
    with pytest.raises(ComputationError, match="no node named 'nope'"):
        computer.accept_input("nope", value)
    with pytest.raises(ComputationError, match="could not accept input for network node "
                                               "'output'"):
        computer.accept_input("output", value)


def test_backward_waits_for_output_derivative_and_finished_cannot_run():
    nnet, computation = _small()
    computer = NnetComputer(computation, nnet, nnet.copy())
    for name, value in read_ark(SMALL / "inputs.ark").items():
        computer.accept_input(name, value)
    computer.run()
    computer.get_output("output")
    # before the output derivative arrives, the backward pass may not start
    with pytest.raises(ComputationError, match="no input was given for node 'output'"):
        computer.run()
    for name, value in read_ark(SMALL / "output_derivs.ark").items():
        computer.accept_input(name, value)
    computer.run()
    computer.get_output("input")
    while computer.program_counter < len(computation.commands):
        computer.run()
    with pytest.raises(ComputationError, match="has finished"):
        computer.run()


def test_outputs_may_be_read_twice_and_destructively():
    nnet, computation = _small()
    computer = NnetComputer(computation, nnet, nnet.copy())
    for name, value in read_ark(SMALL / "inputs.ark").items():
        computer.accept_input(name, value)
    computer.run()
    a = computer.get_output("output")
    b = computer.get_output_destructive("output")
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ComputationError, match="not available"):
        computer.get_output("output")


class _Names:
    node_names = ["input", "output"]
    component_names = []

    def get_node_index(self, name):
        return self.node_names.index(name) if name in self.node_names else -1


def test_failing_command_is_reported_with_its_text():
    comp = NnetComputation()
    a = comp.new_matrix(3, 2)
    b = comp.new_matrix(3, 2)
    comp.indexes.append([0, 5, 1])
    T = CommandType
    comp.commands = [Command(T.kAcceptInput, a, 0), Command(T.kAllocMatrix, b),
                     Command(T.kCopyRows, b, a, 0), Command(T.kProvideOutput, b, 1)]
    computer = NnetComputer(comp, _Names())
    computer.accept_input("input", np.ones((3, 2), np.float32))
    with pytest.raises(ComputationError, match=r"command c2: m2.CopyRows\(1, m1\[0, 5, 1\]\) -- "
                                               r"CopyRows: index 5 out of range"):
        computer.run()


def test_goto_loops_and_row_commands_on_a_hand_made_computation():
    # m2 = 0; loop: m2 += 2 * m1 (via AddRowRanges), twice (goto back once
    # through a swap pair that makes the second pass the last).
    comp = NnetComputation()
    a = comp.new_matrix(2, 2)
    b = comp.new_matrix(2, 2)
    comp.indexes_ranges.append([(0, 2), (1, 2)])
    T = CommandType
    comp.commands = [
        Command(T.kAcceptInput, a, 0),
        Command(T.kAllocMatrix, b),
        Command(T.kSetConst, b, alpha=0.0),
        Command(T.kNoOperationLabel),
        Command(T.kAddRowRanges, b, a, 0, alpha=2.0),
        Command(T.kProvideOutput, b, 1),
        Command(T.kGotoLabel, 3),
    ]
    computer = NnetComputer(comp, _Names())
    x = np.array([[1, 2], [3, 4]], np.float32)
    computer.accept_input("input", x)
    computer.run()
    first = computer.get_output("output")
    np.testing.assert_array_equal(first, [[8, 12], [6, 8]])
    computer.run()     # executes the goto, then the body again
    np.testing.assert_array_equal(computer.get_output("output"), 2 * first)
