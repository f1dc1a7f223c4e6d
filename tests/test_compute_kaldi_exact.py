"""Kaldi-exact arithmetic (backend "kaldi-exact", --kaldi-exact-arithmetic).

- The C-library kernels (expf, logf, pow, log-softmax rows) equal their
  ctypes twins bit for bit, special values included; NumPy's own float32
  functions are not what Kaldi calls.
- Kaldi's row additions (AddMat: a saxpy per row) and AddVecToRows (its own
  loop up to 64 columns, a rank-one sger beyond) have the bits the oracle's
  OpenBLAS 0.3.21 gave (digests computed with that library).
- Components: the exact propagate of each supported type agrees with the
  default one within float32 rounding, and the affine one adds the product
  onto the bias as Kaldi does; a type without exact arithmetic is warned
  about once.
- Against Kaldi (whose nnet3-compute and nnet3-latgen-faster runs in
  kaldi-ref/models and decode/tdnn_lda had OpenBLAS's 2 threads):
  nnet3-compute --kaldi-exact-arithmetic gives the outputs of every model
  (tdnn_lda, tdnnf_chain, tdnn_lstm, blstm, gru, misc_layers, xvector,
  cnn_tdnn_attention) bit for bit (every
  compute variant in kaldi-ref; tdnn_lda's --use-priors one also from
  tests/data), xvector's per-frame outputs and nnet3-xvector-compute's
  x-vectors likewise, and nnet3-latgen-faster --kaldi-exact-arithmetic gives
  Kaldi's raw lattices with bitwise costs and Kaldi's determinized lattices
  as identical text.
- The thread count OpenBLAS would choose follows its environment variables.
"""

import hashlib
import io
import logging
import os
import shlex
from contextlib import redirect_stderr

import numpy as np
import pytest

from conftest import TEST_DATA
from pynnet3 import _fast
from pynnet3.bin import nnet3_compute, nnet3_latgen_faster
from pynnet3.compute.backend import KaldiExactBackend, get_backend
from pynnet3.compute.computer import NnetComputer
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from pynnet3.io.table import read_table
from pynnet3.nnet.nnet import Nnet
from pynnet3.numerics import kaldi_cpu, kaldi_libm
from pynnet3.numerics.openblas import fma32

DATA = TEST_DATA / "decode" / "tdnn_lda"
_libm = _fast.load("kaldi_libm_kernel")
needs_kernel = pytest.mark.skipif(_libm is None, reason="kaldi_libm is not built")

_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 88.72, 88.73,
                     -103.0, -87.3, 1.0, 3.4e38, -3.4e38, 1e-38], np.float32)


def _bits(a):
    return np.asarray(a, np.float32).view(np.int32)


def _bits_any_nan(a):
    """The bits, with every NaN the same (the twin's NumPy arithmetic and
    the compiled loop may set a NaN's sign differently)."""
    a = np.array(a, np.float32)
    a[np.isnan(a)] = np.nan
    return a.view(np.int32)


def _lcg_matrix(rows, cols, seed):
    i = np.arange(rows * cols, dtype=np.uint64) + np.uint64(seed) * np.uint64(1000003)
    x = (i * np.uint64(2654435761) + np.uint64(12345)) % np.uint64(2 ** 32)
    return ((x >> np.uint64(8)).astype(np.float64) / 2.0 ** 23 - 1.0) \
        .astype(np.float32).reshape(rows, cols)


def _digest(matrix):
    return hashlib.sha256(matrix.astype("<f4").tobytes()).hexdigest()[:16]


# -- the C library ---------------------------------------------------------------------------

@needs_kernel
def test_libm_kernels_equal_their_twin():
    rng = np.random.default_rng(0)
    x = np.concatenate([_SPECIAL, (rng.standard_normal(500) * 20).astype(np.float32)])
    mat = x.reshape(-1, 5)
    for fn in ("exp_rows", "log_softmax_rows", "softmax_rows", "sigmoid_rows", "tanh_rows",
               "scalar_sigmoid_rows", "scalar_tanh_rows"):
        ours, twin = np.empty_like(mat), np.empty_like(mat)
        with np.errstate(all="ignore"):
            getattr(_libm, fn)(mat, ours)
            getattr(kaldi_libm, fn + "_py")(mat, twin)
        assert np.array_equal(_bits_any_nan(ours), _bits_any_nan(twin)), fn
    positive = np.abs(x)
    for fn, args in (("log_vector", ()), ("pow_vector", (np.float32(-0.5),))):
        ours, twin = np.empty_like(positive), np.empty_like(positive)
        getattr(_libm, fn)(positive, *args, ours)
        getattr(kaldi_libm, fn + "_py")(positive, *args, twin)
        assert np.array_equal(_bits_any_nan(ours), _bits_any_nan(twin)), fn


def test_libm_functions_are_the_c_librarys():
    # exp, log and pow of a float as the C library computes them (glibc's
    # correctly rounded results on these), not NumPy's float32 loops.
    assert kaldi_libm.expf(np.float32(1.0)) == np.float32(2.7182817)
    assert kaldi_libm.logf(np.float32(10.0)) == np.float32(2.3025851)
    v = np.array([4.0, 0.25, 2.0], np.float32)
    assert np.array_equal(kaldi_cpu.apply_pow(v, -0.5), np.array([0.5, 2.0, 0.70710677],
                                                                 np.float32))


def test_log_softmax_is_kaldis_loop():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((6, 30)) * 5).astype(np.float32)
    x[2] = -np.inf
    x[2, 7] = 3.0
    out = np.empty_like(x)
    kaldi_cpu.log_softmax_per_row(x, out)
    for r in range(x.shape[0]):
        shifted = x[r] - x[r].max()
        total = np.float32(0.0)
        for value in shifted:
            total = np.float32(total + kaldi_libm.expf(value))
        assert np.array_equal(_bits(out[r]), _bits(shifted - kaldi_libm.logf(total)))
    assert out[2, 7] == 0.0 and np.isneginf(out[2, 0])
    inplace = x.copy()
    kaldi_cpu.log_softmax_per_row(inplace, inplace)
    assert np.array_equal(_bits(inplace), _bits(out))


# -- OpenBLAS level-1/2 row operations ------------------------------------------------------------

# Kaldi's AddMat (one cblas_saxpy per row) with D = lcg(3), S = lcg(4):
# (rows, cols, alpha, threads, digest) from OpenBLAS 0.3.21 (Haswell).
_AXPY_DIGESTS = [
    (3, 100, 0.37, 2, "f92afc7e9e8c3e6d"),
    (5, 31, -2.5, 1, "ad630448fda7a7fb"),
    (2, 20007, 0.37, 2, "528e0df692548ebe"),
    (2, 20007, 0.37, 1, "d027c3f6c5b92602"),
    (4, 64, 1.5, 2, "5edc8cdf01b97997"),
]


@pytest.mark.parametrize("rows,cols,alpha,threads,digest", _AXPY_DIGESTS)
def test_axpy_rows_has_openblas_bits(rows, cols, alpha, threads, digest):
    dest = _lcg_matrix(rows, cols, 3)
    kaldi_cpu.axpy_rows(dest, alpha, _lcg_matrix(rows, cols, 4), threads)
    assert _digest(dest) == digest


def test_axpy_rows_fuses_whole_blocks_of_32_only():
    rng = np.random.default_rng(2)
    d = rng.standard_normal((3, 70)).astype(np.float32)
    s = rng.standard_normal((3, 70)).astype(np.float32)
    alpha = np.float32(0.3)
    ours = kaldi_cpu.axpy_rows(d.copy(), alpha, s)
    assert np.array_equal(ours[:, :64], fma32(alpha, s[:, :64], d[:, :64]))
    assert np.array_equal(ours[:, 64:], d[:, 64:] + alpha * s[:, 64:])
    with_nan = s.copy()
    with_nan[0, 0] = np.nan
    assert np.array_equal(kaldi_cpu.axpy_rows(d.copy(), 0.0, with_nan), d)


def test_axpy_rows_with_one_alpha_per_row_is_a_saxpy_per_row():
    rng = np.random.default_rng(8)
    d = rng.standard_normal((5, 70)).astype(np.float32)
    s = rng.standard_normal((5, 70)).astype(np.float32)
    s[2, 3] = np.inf
    alphas = np.array([0.3, -1.5, 0.0, 1.0, 2.5], np.float32)
    ours = kaldi_cpu.axpy_rows(d.copy(), alphas, s)
    for r in range(5):
        row = kaldi_cpu.axpy_rows(d[r:r + 1].copy(), alphas[r], s[r:r + 1])
        assert np.array_equal(_bits(ours[r:r + 1]), _bits(row)), r
    assert np.array_equal(ours[2], d[2])          # alpha 0: saxpy returns at once


# AddVecToRows beyond 64 columns: sger with a vector of ones (D = lcg(3),
# v = lcg(4) row 0).
_GER_DIGESTS = [(70, 100, 0.37, 2, "987aef2cb19921cc"), (3000, 100, -0.6, 2, "c929ef2ed5bac300"),
                (5, 65, 2.0, 1, "7ebc75163ad1fce2")]


@pytest.mark.parametrize("rows,cols,alpha,threads,digest", _GER_DIGESTS)
def test_add_vec_to_rows_over_64_columns_has_openblas_bits(rows, cols, alpha, threads, digest):
    mat = _lcg_matrix(rows, cols, 3)
    kaldi_cpu.add_vec_to_rows(mat, alpha, _lcg_matrix(1, cols, 4)[0], 1.0, threads)
    assert _digest(mat) == digest


def test_add_vec_to_rows_up_to_64_columns_is_kaldis_loop():
    mat = _lcg_matrix(7, 64, 3)
    vec = _lcg_matrix(1, 64, 4)[0]
    expected = (mat * np.float32(0.5)) + np.float32(0.37) * vec
    kaldi_cpu.add_vec_to_rows(mat, 0.37, vec, beta=0.5)
    assert np.array_equal(mat, expected)


# cblas_sdot of the row pairs of lcg(1) and lcg(2), from that library.
_SDOT_DIGESTS = [(7, 100, "f794a316c7d934ec"), (5, 31, "5c326bb2fbc6b497"),
                 (3, 1000, "3cf3912a92eb5959")]


@pytest.mark.parametrize("rows,n,digest", _SDOT_DIGESTS)
def test_sdot_rows_has_openblas_bits(rows, n, digest):
    from pynnet3.numerics.openblas import sdot_rows
    assert _digest(sdot_rows(_lcg_matrix(rows, n, 1), _lcg_matrix(rows, n, 2))) == digest


def test_apply_floor_keeps_nan_and_negative_zero():
    m = np.array([[-1.0, -0.0, np.nan, 2.0]], np.float32)
    kaldi_cpu.apply_floor(m, 0.0)
    assert _bits(m).tolist() == _bits(np.array([[0.0, -0.0, np.nan, 2.0]], np.float32)).tolist()


# -- components through the backend ------------------------------------------------------------

_CONFIG = """input-node name=input dim=13
component name=lin type=LinearComponent input-dim=13 output-dim=9
component-node name=lin component=lin input=input
component name=fix type=FixedAffineComponent input-dim=9 output-dim=70
component-node name=fix component=fix input=lin
component name=aff type=NaturalGradientAffineComponent input-dim=70 output-dim=40
component-node name=aff component=aff input=fix
component name=relu type=RectifiedLinearComponent dim=40
component-node name=relu component=relu input=aff
component name=bn type=BatchNormComponent dim=40 block-dim=20
component-node name=bn component=bn input=relu
component name=out type=AffineComponent input-dim=40 output-dim=12
component-node name=out component=out input=bn
component name=ls type=LogSoftmaxComponent dim=12
component-node name=ls component=ls input=out
output-node name=output input=ls
"""


def _run(nnet, feats, backend):
    request = ComputationRequest()
    request.inputs = [IoSpecification.from_t_range("input", 0, feats.shape[0])]
    request.outputs = [IoSpecification.from_t_range("output", 0, feats.shape[0])]
    computer = NnetComputer(compile(nnet, request), nnet, backend=backend)
    computer.accept_input("input", feats)
    computer.run()
    return np.array(computer.get_output("output"))


def _small_network():
    from pynnet3.components.normalize import BatchNormComponent
    nnet = Nnet.from_config(_CONFIG)
    rng = np.random.default_rng(5)
    for comp in nnet.components:
        for name in ("linear_params", "bias_params", "params"):
            value = getattr(comp, name, None)
            if isinstance(value, np.ndarray):
                value[...] = rng.standard_normal(value.shape) * 0.3
        if isinstance(comp, BatchNormComponent):
            comp.count = 10.0
            comp.stats_sum = rng.standard_normal(20) * 3.0
            comp.stats_sumsq = comp.stats_sum ** 2 / 10.0 + 5.0 + rng.random(20)
            comp.test_mode = True
            comp.compute_derived()
    return nnet


@pytest.mark.parametrize("threads", [1, 2])
def test_exact_propagate_agrees_with_default_arithmetic(threads):
    nnet = _small_network()
    feats = np.random.default_rng(6).standard_normal((23, 13)).astype(np.float32)
    fast = _run(nnet, feats, "numpy")
    exact = _run(nnet, feats, KaldiExactBackend(threads))
    assert np.abs(exact - fast).max() < 1e-4
    assert np.array_equal(exact, _run(nnet, feats, KaldiExactBackend(threads)))


def test_affine_adds_the_product_onto_the_bias():
    nnet = _small_network()
    comp = nnet.get_component(nnet.get_component_index("aff"))
    x = np.random.default_rng(7).standard_normal((5, 70)).astype(np.float32)
    out = np.empty((5, 40), np.float32)
    assert isinstance(get_backend("kaldi-exact"), KaldiExactBackend)
    KaldiExactBackend(2).propagate(comp, None, x, out)
    expected = np.tile(comp.bias_params, (5, 1))
    # one k block: each element is bias + (its fused chain) rounded once
    from pynnet3.numerics.openblas import sgemm_py as sgemm
    assert np.array_equal(out, sgemm(x, comp.linear_params, expected, 1.0, 1.0, trans_b=True))


def test_a_type_without_exact_arithmetic_is_warned_about_once(caplog):
    nnet = Nnet.from_config("input-node name=input dim=4\n"
                                 "component name=t type=BatchNormComponent dim=4\n"
                                 "component-node name=t component=t input=input\n"
                                 "output-node name=output input=t\n")
    feats = np.arange(12, dtype=np.float32).reshape(3, 4)
    backend = KaldiExactBackend()
    with caplog.at_level(logging.WARNING, logger="pynnet3"):
        _run(nnet, feats, backend)
        _run(nnet, feats, backend)
    warnings = [r for r in caplog.records
                if "BatchNormComponent has no Kaldi-exact arithmetic in training mode" in r.message]
    assert len(warnings) == 1


# Kaldi's random networks (random/caseN) were computed on a machine where OpenBLAS ran its
# SkylakeX kernels (another summation order), so they check only that the exact paths
# compute the right function: within float32 tolerance, every output.
_RANDOM_CASES = ["case16", "case46", "case11", "case3", "case7", "case0", "case5", "case26"]


@pytest.mark.parametrize("case", _RANDOM_CASES)
def test_exact_paths_compute_kaldis_function_on_random_networks(case, kaldi_ref, caplog):
    from pynnet3.compiler.computation_io import read_computation_file
    case_dir = kaldi_ref / "random" / case
    nnet = Nnet.read(str(case_dir / "model.raw"))
    computation = read_computation_file(str(case_dir / "computation.opt.kaldi"))
    computer = NnetComputer(computation, nnet, nnet_to_store_stats=nnet.copy(),
                            backend=KaldiExactBackend(2))
    for name, value in read_table("ark:%s" % (case_dir / "inputs.ark"), "matrix"):
        computer.accept_input(name, value)
    with caplog.at_level(logging.WARNING, logger="pynnet3"):
        computer.run()
    assert not [r for r in caplog.records if "no Kaldi-exact" in r.message]
    for name, kaldi in read_table("ark:%s" % (case_dir / "outputs.ark"), "matrix"):
        ours = np.asarray(computer.get_output(name))
        scale = max(1.0, float(np.abs(kaldi).max()))
        assert np.abs(ours - kaldi).max() <= 1e-4 * scale, name


# -- against Kaldi -----------------------------------------------------------------------------

# The models whose every component type has Kaldi-exact arithmetic.
_EXACT_MODELS = ("tdnn_lda", "tdnnf_chain", "tdnn_lstm", "blstm", "gru", "misc_layers",
                 "xvector", "cnn_tdnn_attention")


def _compute_cases():
    from conftest import KALDI_REF
    return [pytest.param(cmd, id="%s-%s" % (model, cmd.name[len("compute."):-len(".cmd")]))
            for model in _EXACT_MODELS
            for cmd in sorted(KALDI_REF.glob("models/%s/compute.*.cmd" % model))
            if cmd.with_suffix(".ark").exists()]      # (else Kaldi refused it)


def _assert_bitwise_equal_archives(ours_path, kaldi_path):
    ours = dict(read_table("ark:%s" % ours_path, "matrix"))
    kaldi = dict(read_table("ark:%s" % kaldi_path, "matrix"))
    assert list(ours) == list(kaldi)
    for key in kaldi:
        assert np.array_equal(_bits(ours[key]), _bits(kaldi[key])), key


@pytest.mark.parametrize("cmd", _compute_cases())
def test_nnet3_compute_is_bitwise_kaldis(cmd, kaldi_ref, tmp_path, monkeypatch):
    argv = shlex.split(cmd.read_text())
    out = tmp_path / "out.ark"
    monkeypatch.chdir(cmd.parent)
    assert nnet3_compute.main(["--print-args=false", "--kaldi-exact-arithmetic=true",
                               "--kaldi-exact-blas-threads=2"]
                              + argv[1:-1] + ["ark:%s" % out]) == 0
    _assert_bitwise_equal_archives(out, cmd.with_suffix(".ark"))


def _xvector_cases():
    from conftest import KALDI_REF
    return [pytest.param(cmd, id=cmd.name[len("xvector."):-len(".cmd")])
            for cmd in sorted(KALDI_REF.glob("models/xvector/xvector.*.cmd"))]


@pytest.mark.parametrize("cmd", _xvector_cases())
def test_nnet3_xvector_compute_is_bitwise_kaldis(cmd, kaldi_ref, tmp_path, monkeypatch):
    from pynnet3.bin import nnet3_xvector_compute
    argv = shlex.split(cmd.read_text())
    out = tmp_path / "out.ark"
    monkeypatch.chdir(cmd.parent)
    assert nnet3_xvector_compute.main(["--print-args=false", "--kaldi-exact-arithmetic=true",
                                       "--kaldi-exact-blas-threads=2"]
                                      + argv[1:-1] + ["ark:%s" % out]) == 0
    ours = dict(read_table("ark:%s" % out, "vector"))
    kaldi = dict(read_table("ark:%s" % cmd.with_suffix(".ark"), "vector"))
    assert list(ours) == list(kaldi)
    for key in kaldi:
        assert np.array_equal(_bits(ours[key]), _bits(kaldi[key])), key


def test_nnet3_compute_with_priors_is_bitwise_kaldis(tmp_path):
    out = tmp_path / "out.ark"
    assert nnet3_compute.main([
        "--print-args=false", "--kaldi-exact-arithmetic=true", "--kaldi-exact-blas-threads=2",
        "--online-ivectors=ark:%s" % (DATA / "online-ivectors.ark"),
        "--online-ivector-period=10", "--use-priors=true", str(DATA / "final.mdl"),
        "ark:%s" % (DATA / "feats.ark"), "ark:%s" % out]) == 0
    _assert_bitwise_equal_archives(out, DATA / "compute.mdl_priors.ark")


def test_exact_arithmetic_refuses_batching(tmp_path):
    err = io.StringIO()
    with redirect_stderr(err):
        status = nnet3_compute.main([
            "--print-args=false", "--kaldi-exact-arithmetic=true", "--batch-size=2",
            str(DATA / "final.mdl"), "ark:%s" % (DATA / "feats.ark"),
            "ark:%s" % (tmp_path / "out.ark")])
    assert status != 0 and "--batch-size > 1 cannot be combined" in err.getvalue()
    assert not (tmp_path / "out.ark").exists()


def _decode(variant, data, tmp_path):
    with open(os.path.join(data, "decode.%s.cmd" % variant)) as f:
        argv = shlex.split(f.read())[1:]
    out = []
    for arg in argv:
        arg = arg.replace("model/final.mdl", str(DATA / "final.mdl"))
        arg = arg.replace("graph/HCLG.fst", str(DATA / "HCLG.fst"))
        arg = arg.replace("graph/words.txt", str(DATA / "words.txt"))
        for name in ("feats.ark", "online-ivectors.ark"):
            arg = arg.replace("ark:" + name, "ark:%s" % (DATA / name))
        for kind in ("lat", "words", "ali"):
            name = "%s.%s" % (kind, variant)
            arg = arg.replace(name + ".ark", str(tmp_path / (name + ".ark")))
            arg = arg.replace(name + ".txt", str(tmp_path / (name + ".txt")))
        out.append(arg)
    err = io.StringIO()
    with redirect_stderr(err):
        status = nnet3_latgen_faster.main(["--kaldi-exact-arithmetic=true",
                                           "--kaldi-exact-blas-threads=2"] + out)
    assert status == 0, err.getvalue()
    return tmp_path / ("lat.%s.ark" % variant)


def _lattice_text(path, kind):
    from pynnet3.io.table import TableWriter
    text = path.with_suffix(".txt")
    with TableWriter("ark,t:%s" % text, kind) as writer:
        for key, lat in read_table("ark:%s" % path, kind):
            writer.write(key, lat)
    return text.read_bytes()


def test_narrow_lattices_are_kaldis_text(tmp_path):
    lat = _decode("narrow", DATA, tmp_path)
    assert _lattice_text(lat, "compact_lattice") == (DATA / "lat.narrow.txt").read_bytes()


def test_default_lattices_are_kaldis_text(kaldi_ref, tmp_path):
    lat = _decode("default", DATA, tmp_path)
    expected = (kaldi_ref / "decode" / "tdnn_lda" / "lat.default.txt").read_bytes()
    assert _lattice_text(lat, "compact_lattice") == expected


def test_raw_lattice_costs_are_kaldis_bits(kaldi_ref, tmp_path):
    lat = _decode("nodet", DATA, tmp_path)
    ours = dict(read_table("ark:%s" % lat, "lattice"))
    kaldi = dict(read_table("ark:%s" % (kaldi_ref / "decode/tdnn_lda/lat.nodet.ark"),
                            "lattice"))
    assert list(ours) == list(kaldi)
    for key in kaldi:
        a = [arc for state in ours[key].arcs for arc in state]
        b = [arc for state in kaldi[key].arcs for arc in state]
        assert [x[:2] + x[4:] for x in a] == [x[:2] + x[4:] for x in b]
        assert np.array_equal(_bits([x[2:4] for x in a]), _bits([x[2:4] for x in b])), key


def test_default_thread_count_follows_openblas_environment(monkeypatch):
    from pynnet3.numerics.openblas_plan import openblas_threads_from_environment
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert openblas_threads_from_environment() == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert openblas_threads_from_environment() == 3
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert openblas_threads_from_environment() == 1
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "16")      # no more than the CPUs
    assert openblas_threads_from_environment() == 4
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "junk")
    assert openblas_threads_from_environment() == 3
    assert KaldiExactBackend().blas_threads == 3
