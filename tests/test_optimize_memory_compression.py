"""OptimizeMemoryCompression (pynnet3.optimize.memory_compression) and the
NnetComputer's kCompressMatrix / kDecompressMatrix.

- Level 1 (Kaldi's default): the random/ cases where Kaldi's optimized
  computation compresses ReLU outputs get the same commands (the whole
  computation prints as Kaldi's ``computation.opt.txt``) and Kaldi's numbers,
  with the compression executed.
- Level 2 compresses every matrix used in both passes to int16 in [-10, 10]:
  outputs are unchanged and derivatives / gradients stay within 1e-2 (relative)
  of the uncompressed computation's on every case (a quarter of random/) whose
  compressed values lie inside that range.
- Level 0, looped computations and computations without a backward pass are
  left alone.
- The interpreter's compression is Kaldi's CuCompressedMatrix arithmetic.
"""

import numpy as np
import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.compiler.request import ComputationRequest
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.compiler.computation import Command, CommandType, NnetComputation
from pynnet3.compiler.computation_io import print_computation
from pynnet3.compute.backend import get_backend
from pynnet3.nnet.nnet import Nnet
from pynnet3.optimize.memory_compression import optimize_memory_compression
from pynnet3.optimize.options import NnetOptimizeOptions
from test_computer_kaldi import run_and_check

T = CommandType


def _compressing_cases():
    cases = [TEST_DATA / "computer" / "case24"]
    if KALDI_REF.is_dir():
        cases += [c for c in sorted(KALDI_REF.glob("random/case*"), key=lambda p: int(p.name[4:]))
                  if "Compress" in (c / "computation.opt.txt").read_text()]
    return cases


COMPRESSING = _compressing_cases()


def _load(case):
    return (Nnet.read(str(case / "model.raw")),
            ComputationRequest.read(str(case / "request.txt")))


def _count(computation, command_type):
    return sum(c.command_type == command_type for c in computation.commands)


@pytest.mark.parametrize("case", COMPRESSING, ids=["/".join(c.parts[-2:]) for c in COMPRESSING])
def test_level_1_is_kaldis_and_keeps_the_numbers(case):
    nnet, request = _load(case)
    computation = compile(nnet, request)
    assert _count(computation, T.kCompressMatrix) > 0
    assert _count(computation, T.kCompressMatrix) == _count(computation, T.kDecompressMatrix)
    with open(case / "computation.opt.txt") as f:
        assert print_computation(computation, nnet) == f.read()
    assert "gradient" in run_and_check(case, computation, nnet, undefined_fill=np.nan) \
        or not (case / "gradient.raw").is_file()


def test_level_0_compresses_nothing():
    case = COMPRESSING[0]
    nnet, request = _load(case)
    computation = compile(nnet, request,
                          options=NnetOptimizeOptions(memory_compression_level=0))
    assert _count(computation, T.kCompressMatrix) == 0


def _level2_cases():
    if not KALDI_REF.is_dir():
        return COMPRESSING[:1]
    cases = sorted(KALDI_REF.glob("random/case*"), key=lambda p: int(p.name[4:]))
    return [c for c in cases if (c / "output_derivs.ark").is_file()][::4]


LEVEL2 = _level2_cases()


@pytest.mark.parametrize("case", LEVEL2, ids=["/".join(c.parts[-2:]) for c in LEVEL2])
def test_level_2_stays_within_the_quantization_error(case):
    nnet, request = _load(case)
    plain = compile(nnet, request, options=NnetOptimizeOptions(memory_compression_level=0))
    computation = compile(nnet, request,
                          options=NnetOptimizeOptions(memory_compression_level=2))
    compressed = _count(computation, T.kCompressMatrix)
    # Level 2 compresses whatever level 1 does, and more.
    assert compressed >= _count(compile(nnet, request), T.kCompressMatrix)
    if not compressed:
        assert print_computation(computation, nnet) == print_computation(plain, nnet)
        return
    largest, got = _run(case, computation, nnet)
    if largest > 10.0:
        pytest.skip("compressed values reach %.3g, beyond level 2's range" % largest)
    _, want = _run(case, plain, nnet)
    for key, value in want.items():
        if key[0] == "output":   # compression happens after the last forward use
            np.testing.assert_array_equal(got[key], value)
        else:
            # int16 steps of 10/32767 ~ 3e-4, accumulated through the backward pass
            err = float(np.abs(got[key].astype(np.float64) - value).max()) if value.size else 0
            assert err <= 1e-2 * max(1.0, float(np.abs(value).max())), (key, err)


def _run(case, computation, nnet):
    """Runs forward and backward; returns the largest |value| any
    kCompressMatrix saw and {(kind, name): array} of outputs, input
    derivatives and parameter gradients."""
    from pynnet3.components import kaldi_random
    from pynnet3.compute.computer import NnetComputer
    from pynnet3.nnet.component_ops import scale_nnet, set_nnet_as_gradient
    from test_computer_kaldi import read_ark
    # Training-mode random components (self-repair, stats sampling) draw the
    # same numbers in both runs, so the runs differ only by compression.
    kaldi_random.seed(0)
    seen = [0.0]
    gradient = nnet.copy()
    scale_nnet(gradient, 0.0)
    set_nnet_as_gradient(gradient)
    # Zero-filled allocations: rows a compressed matrix never had written hold
    # no leftover memory that would decide the range check below.
    computer = NnetComputer(computation, nnet, gradient, undefined_fill=0.0)
    original = computer._dispatch[T.kCompressMatrix]

    def compress(c):
        mat = computer.matrices[computation.submatrices[c.arg1].matrix_index]
        if mat.size:
            seen[0] = max(seen[0], float(np.abs(mat).max()))
        original(c)
    computer._dispatch[T.kCompressMatrix] = compress
    for name, value in read_ark(case / "inputs.ark").items():
        computer.accept_input(name, value)
    computer.run()
    result = {("output", name): computer.get_output(name)
              for name in read_ark(case / "outputs.ark")}
    for name, value in read_ark(case / "output_derivs.ark").items():
        computer.accept_input(name, value)
    computer.run()
    if (case / "input_derivs.ark").is_file():
        for name in read_ark(case / "input_derivs.ark"):
            result[("input-deriv", name)] = computer.get_output(name)
    for name, c in zip(gradient.component_names, gradient.components):
        if c.num_parameters():
            result[("gradient", name)] = c.vectorize()
    return seen[0], result


def _marker_computation(goto=False, markers=1):
    comp = NnetComputation()
    a = comp.new_matrix(2, 2)
    comp.commands = [Command(T.kAllocMatrix, a)]
    comp.commands += [Command(T.kNoOperationMarker) for _ in range(markers)]
    comp.commands.append(Command(T.kDeallocMatrix, a))
    if goto:
        comp.commands.insert(0, Command(T.kNoOperationLabel))
        comp.commands.append(Command(T.kGotoLabel, 0))
    return comp


def test_looped_and_forward_only_computations_are_left_alone():
    for comp in (_marker_computation(goto=True), _marker_computation(markers=0),
                 _marker_computation(markers=2)):
        before = list(comp.commands)
        optimize_memory_compression(None, 2, comp)
        assert comp.commands == before


def test_compression_arithmetic_is_kaldis():
    backend = get_backend("numpy")
    x = np.array([[-1.5, 0.0, 2e-5, 3.0], [12.0, -11.0, 10.0 * 0.5 / 32767, -4.25]], np.float32)
    # uint8, range 0: only the sign (> 0 gives 1, else 0).
    sign = backend.decompress(backend.compress(x, 2, 0.0, True))
    np.testing.assert_array_equal(sign, (x > 0).astype(np.float32))
    # int16, range 10, truncate: round half to even of x / scale, clipped.
    scale = np.float32(np.float32(10.0) / np.float32(32767))
    inv = np.float32(1.0 / float(scale))
    q = np.clip(np.rint(x * inv), -32768, 32767)
    got = backend.decompress(backend.compress(x, 3, 10.0, True))
    np.testing.assert_array_equal(got, (q * scale).astype(np.float32))
    assert got[1, 0] == np.float32(32767 * scale) and got[1, 1] == np.float32(-32768 * scale)
    # uint8 range 1, truncate: negatives clip to 0.
    got = backend.decompress(backend.compress(x, 2, 1.0, True))
    assert got[0, 0] == 0.0 and got[0, 3] == np.float32(255 * np.float32(1.0 / 255))
