"""The default arithmetic's speed-ups: fused element-wise passes (kernel
against twin, bit for bit), fused commands against the commands run one by
one (bit for bit), the arena memory plan (no two live matrices overlap),
column-major weights (values and files unchanged) and chunks computed
together (Kaldi's outputs within float32 tolerance)."""

import numpy as np
import pytest

from conftest import KALDI_REF, run_with_plan, skip_if_blas_kernels_forced
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.driver.compile_and_optimize import compile
from pynnet3.compiler.computation import CommandType as T
from pynnet3.compute import fused_elementwise as fused_kernels
from pynnet3.compute.arena import plan_arena
from pynnet3.compute.backend import Backend, KaldiExactBackend
from pynnet3.compute.layout import lay_out_for_products
from pynnet3.compute.plan import ExecutionPlan
from pynnet3.compute.utterance import (SimpleComputationOptions, SimpleNnetComputer,
                                       prepare_nnet_for_compute)
from pynnet3.io.table import read_table
from pynnet3.nnet.nnet import Nnet

from test_computer_kaldi import case_dirs, case_id

CHAIN = KALDI_REF / "models" / "tdnnf_chain"


def _need(path):
    if not path.exists():
        pytest.skip("%s not found" % path)


class _Unfused(Backend):
    """The default arithmetic with every command run on its own."""
    fuses_elementwise = False


def _special_matrix(rng, rows, cols):
    m = rng.standard_normal((rows, cols)).astype(np.float32)
    flat = m.reshape(-1)
    flat[::7] = -0.0
    flat[3::11] = np.nan
    flat[5::13] = np.inf
    flat[6::17] = -np.inf
    flat[8::19] = 1e-40          # denormal
    return m


# -- kernels and twins ----------------------------------------------------------------------

@pytest.mark.skipif(fused_kernels._kernel is None, reason="kernel not built")
@pytest.mark.parametrize("cols", [1, 7, 16, 37, 129])
@pytest.mark.parametrize("vectors", ["bso", "b", "so", "s", "o", ""])
def test_bias_relu_scale_offset_kernel_equals_twin(cols, vectors):
    rng = np.random.default_rng(cols)
    wide = _special_matrix(rng, 9, cols + 5)
    vec = {k: (_special_matrix(rng, 1, cols)[0] if k in vectors else None) for k in "bso"}
    ours, twin = wide.copy(), wide.copy()
    with np.errstate(all="ignore"):
        # a column range of a wider matrix: rows contiguous, stride cols + 5
        fused_kernels.bias_relu_scale_offset(ours[:, 2:2 + cols], vec["b"], vec["s"], vec["o"])
        fused_kernels.bias_relu_scale_offset_py(twin[:, 2:2 + cols], vec["b"], vec["s"],
                                                vec["o"])
    assert ours.tobytes() == twin.tobytes()


@pytest.mark.skipif(fused_kernels._kernel is None, reason="kernel not built")
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.66, 1.0), (1.0, -2.5), (0.75, 0.5)])
@pytest.mark.parametrize("kind", ["other", "self", "rows"])
def test_scaled_copy_add_kernel_equals_twin(alpha, beta, kind):
    rng = np.random.default_rng(3)
    dest0 = _special_matrix(rng, 11, 40)
    src = _special_matrix(rng, 20, 40)
    add = _special_matrix(rng, 11, 40)
    rows = rng.integers(0, 20, 11) if kind == "rows" else None
    results = []
    for fn in (fused_kernels.scaled_copy_add, fused_kernels.scaled_copy_add_py):
        dest = dest0.copy()
        source = dest if kind == "self" else (src if kind == "rows" else src[:11])
        with np.errstate(all="ignore"):
            fn(dest[:, 3:33], source[:, 3:33], rows, alpha, add[:, 3:33], beta)
        results.append(dest.tobytes())
    assert results[0] == results[1]


def test_scaled_copy_add_checks_its_rows():
    dest = np.zeros((3, 4), np.float32)
    with pytest.raises(Exception, match="out of range"):
        fused_kernels.scaled_copy_add(dest, np.zeros((2, 4), np.float32), np.array([0, 1, 2]),
                                      1.0, np.zeros((3, 4), np.float32), 1.0)


# -- fused commands -------------------------------------------------------------------------

def _chain_inputs():
    feats = dict(read_table("ark:%s" % (CHAIN / "feats.ark"), "matrix"))
    ivectors = dict(read_table("ark:%s" % (CHAIN / "online-ivectors.ark"), "matrix"))
    return feats, ivectors


@pytest.mark.parametrize("options", [{}, {"frame_subsampling_factor": 3,
                                          "frames_per_chunk": 30}])
def test_fused_commands_give_the_unfused_bits(options):
    """A chain TDNN-F (relu-batchnorm-dropout layers, TDNN-F layers with
    Sum(Scale(0.75, ...))): the fusions are found and change no bit."""
    _need(CHAIN)
    nnet = prepare_nnet_for_compute(Nnet.read(str(CHAIN / "model.raw")))
    feats, ivectors = _chain_inputs()
    opts = SimpleComputationOptions(**options)
    fused = SimpleNnetComputer(nnet, opts)
    plain = SimpleNnetComputer(nnet, opts, backend=_Unfused())
    plan = fused.chunk_plan(301, 0, 1)
    _, exec_plan = fused._computation(plan, True)
    kinds = {exec_plan.computation.commands[i].command_type for i in exec_plan.fusions.ops}
    assert T.kPropagate in kinds and T.kMatrixCopy in kinds or T.kCopyRows in kinds
    for utt, f in feats.items():
        a = fused.compute_utterance(f, online_ivectors=ivectors[utt], online_ivector_period=10)
        b = plain.compute_utterance(f, online_ivectors=ivectors[utt], online_ivector_period=10)
        assert a.tobytes() == b.tobytes(), utt


_STATS_NET = """
input-node name=input dim=5
component name=a type=AffineComponent input-dim=5 output-dim=6
component-node name=a component=a input=input
component name=r type=RectifiedLinearComponent dim=6
component-node name=r component=r input=a
component name=e type=StatisticsExtractionComponent input-dim=6 input-period=1 output-period={period} include-variance={variance}
component-node name=e component=e input=r
component name=p type=StatisticsPoolingComponent input-dim={pool_dim} input-period={period} left-context={left} right-context=30 num-log-count-features={nlc} output-stddevs={variance}
component-node name=p component=p input=e
output-node name=output input=p
"""


def _stats_nnet(rng, period, variance, left, nlc):
    """The network of _STATS_NET, its affine's parameters drawn from ``rng``."""
    pool_dim = 1 + 6 * (2 if variance == "true" else 1)
    nnet = Nnet.from_config(_STATS_NET.format(period=period, variance=variance, left=left,
                                              nlc=nlc, pool_dim=pool_dim))
    nnet.components[0].linear_params[...] = rng.standard_normal((6, 5))
    nnet.components[0].bias_params[...] = rng.standard_normal(6)
    return nnet


@pytest.mark.parametrize("period,variance,left,nlc,fused", [
    (1, "true", 0, 0, True), (1, "true", 6, 1, True), (1, "false", 3, 0, True),
    (2, "true", 0, 0, False)])
def test_statistics_pooled_from_their_input_give_the_unfused_bits(period, variance, left,
                                                                   nlc, fused):
    """Statistics extraction then pooling (x-vector style): where every
    extraction row is one input row, the pooled sums are added straight from
    the extraction's input (its own matrix never written), with the unfused
    run's bits; an extraction that sums several rows per output is left as
    it is."""
    from pynnet3.common.index import Index
    from pynnet3.compiler.request import IoSpecification
    from pynnet3.compute.computer import NnetComputer
    rng = np.random.default_rng(period * 10 + left)
    nnet = _stats_nnet(rng, period, variance, left, nlc)
    request = ComputationRequest()
    request.inputs = [IoSpecification.from_t_range("input", 0, 50)]
    request.outputs = [IoSpecification("output", [Index(0, t, 0)
                                                  for t in range(left, 20, period)])]
    computation = compile(nnet, request)
    feats = rng.standard_normal((50, 5)).astype(np.float32)
    feats[rng.random(feats.shape) < 0.2] = -0.0
    outputs = []
    for backend in (Backend(), _Unfused()):
        plan = ExecutionPlan(computation, nnet, backend)
        names = {getattr(op, "__name__", "") for op in (plan.fusions.ops.values()
                                                        if plan.fusions else ())}
        assert ("run_extraction" in names) == (fused and backend.fuses_elementwise)
        for _ in range(2):                  # the second run reuses the plan's memory
            computer = NnetComputer(computation, nnet, plan=plan, undefined_fill=np.nan)
            computer.accept_input("input", feats)
            computer.run()
            outputs.append(computer.get_output("output"))
    assert np.isfinite(outputs[0]).all()
    for other in outputs[1:]:
        assert outputs[0].tobytes() == other.tobytes()


def test_threads_sharing_a_plan_pool_their_own_statistics():
    """Two threads' plans of one computation share their fusions: the sums
    a fused extraction hands to its pooling belong to each thread's computer.
    Both threads extract before either pools (a barrier in the shared
    extraction), and each gets the output it gets alone."""
    import threading
    rng = np.random.default_rng(7)
    nnet = _stats_nnet(rng, period=1, variance="true", left=0, nlc=0)
    request = ComputationRequest()
    request.inputs = [IoSpecification.from_t_range("input", 0, 50)]
    request.outputs = [IoSpecification.from_t_range("output", 0, 20)]
    computation = compile(nnet, request)
    first = ExecutionPlan(computation, nnet, Backend())
    plans = (first, ExecutionPlan(computation, nnet, first.backend, like=first))
    features = [rng.standard_normal((50, 5)).astype(np.float32) for _ in plans]

    def output(k):
        return run_with_plan(computation, nnet, plans[k], features[k])

    alone = [output(k) for k in range(len(plans))]
    assert not np.array_equal(alone[0], alone[1])
    ops = first.fusions.ops
    (i, extraction), = [(i, op) for i, op in ops.items()
                        if getattr(op, "__name__", "") == "run_extraction"]
    both_extracted = threading.Barrier(len(plans), timeout=30)

    def extract_then_wait(computer):
        extraction(computer)
        both_extracted.wait()

    ops[i] = extract_then_wait
    together, errors = [None] * len(plans), []

    def worker(k):
        try:
            together[k] = output(k)
        except Exception as e:  # reported below, not lost in the thread
            errors.append(e)
            both_extracted.abort()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(plans))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        ops[i] = extraction
    assert not errors, errors
    for a, b in zip(alone, together):
        assert a.tobytes() == b.tobytes()


def test_kaldi_exact_and_unplanned_runs_fuse_nothing():
    _need(CHAIN)
    nnet = prepare_nnet_for_compute(Nnet.read(str(CHAIN / "model.raw")))
    computer = SimpleNnetComputer(nnet, backend=KaldiExactBackend(2))
    _, exec_plan = computer._computation(computer.chunk_plan(301, 0, 50), True)
    assert exec_plan.fusions is None
    plain = ExecutionPlan(exec_plan.computation, nnet, Backend(), elide_zeroing=False)
    assert plain.fusions is None
    assert computer.chunks_per_computation(computer.chunk_plan(301, 0, 50), 6) == 1


# -- the arena ------------------------------------------------------------------------------

def _blocks(computation, arena):
    """(offset, size, start, end) of every block placed in the arena."""
    subs = computation.submatrices
    commands = computation.commands
    owner, out = {}, []
    for i, c in enumerate(commands):
        t = c.command_type
        if t in (T.kAllocMatrix, T.kAcceptInput, T.kDecompressMatrix):
            m = subs[c.arg1].matrix_index
            if i in arena.offsets:
                info = computation.matrices[m]
                owner[m] = len(out)
                out.append([arena.offsets[i], info.num_rows * info.num_cols, i, len(commands)])
            else:
                owner.pop(m, None)
        elif t in (T.kDeallocMatrix, T.kCompressMatrix):
            b = owner.pop(subs[c.arg1].matrix_index, None)
            if b is not None:
                out[b][3] = i
        elif t == T.kSwapMatrix:
            m1, m2 = subs[c.arg1].matrix_index, subs[c.arg2].matrix_index
            b1, b2 = owner.pop(m1, None), owner.pop(m2, None)
            if b2 is not None:
                owner[m1] = b2
            if b1 is not None:
                owner[m2] = b1
    return out


@pytest.mark.parametrize("case", [c for c in case_dirs() if (c / "request.txt").is_file()][::5],
                         ids=case_id)
def test_arena_never_overlaps_live_matrices(case):
    nnet = Nnet.read(str(case / "model.raw"))
    computation = compile(nnet, ComputationRequest.read(str(case / "request.txt")))
    arena = plan_arena(computation, outputs_in_arena=True)
    if any(c.command_type == T.kGotoLabel for c in computation.commands):
        assert arena is None
        return
    blocks = _blocks(computation, arena)
    assert sum(size for _, size, _, _ in blocks) >= 0
    for k, (off, size, start, end) in enumerate(blocks):
        assert off % 16 == 0 and off + size <= arena.size
        for off2, size2, start2, end2 in blocks[k + 1:]:
            if start < end2 and start2 < end:          # alive at the same time
                assert off + size <= off2 or off2 + size2 <= off


# -- layout and chunk batches --------------------------------------------------------------

def test_column_major_weights_keep_values_and_files(tmp_path):
    _need(CHAIN)
    nnet = Nnet.read(str(CHAIN / "model.raw"))
    before = nnet.copy()
    assert lay_out_for_products(nnet) > 0
    assert lay_out_for_products(nnet) == 0
    for a, b in zip(nnet.components, before.components):
        for name in ("linear_params", "params"):
            if isinstance(getattr(a, name, None), np.ndarray):
                assert np.array_equal(getattr(a, name), getattr(b, name))
    nnet.write(str(tmp_path / "a.raw"), True)
    before.write(str(tmp_path / "b.raw"), True)
    assert (tmp_path / "a.raw").read_bytes() == (tmp_path / "b.raw").read_bytes()


def test_chunks_computed_together_equal_one_at_a_time():
    _need(CHAIN)
    nnet = prepare_nnet_for_compute(Nnet.read(str(CHAIN / "model.raw")))
    feats, ivectors = _chain_inputs()
    opts = SimpleComputationOptions(frames_per_chunk=20, extra_left_context=3)
    together = SimpleNnetComputer(nnet, opts, max_chunks=5)
    alone = SimpleNnetComputer(nnet, opts, max_chunks=1)
    assert together.chunks_per_computation(together.chunk_plan(301, 1, 20), 14) == 5
    assert together.chunks_per_computation(together.chunk_plan(301, 1, 20), 11) == 4
    for utt, f in feats.items():
        a = together.compute_utterance(f, online_ivectors=ivectors[utt],
                                       online_ivector_period=10)
        b = alone.compute_utterance(f, online_ivectors=ivectors[utt], online_ivector_period=10)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(b).max()))


def test_chunk_shapes_of_many_lengths_keep_one_arena_array():
    """Utterances of growing lengths make new chunk shapes, each a plan in
    the computer's one arena; when the arena grows, the plans let go of
    the array it replaced (they held it, one array per growth, until they
    ran again: 102 MB of RSS against Kaldi's 54 on 120 utterances of
    200-1033 frames, 93 MB after), and the numbers are a fresh computer's."""
    _need(CHAIN)
    nnet = prepare_nnet_for_compute(Nnet.read(str(CHAIN / "model.raw")))
    feats, ivectors = _chain_inputs()
    utt = "utt4"
    f = feats[utt]          # 301 frames
    # utterances shorter than a chunk are a chunk shape each
    opts = SimpleComputationOptions(frames_per_chunk=150)
    computer = SimpleNnetComputer(nnet, opts)
    outputs = []
    for num_frames in (7, 25, 33, 61, f.shape[0]):
        outputs.append(computer.compute_utterance(f[:num_frames], online_ivectors=ivectors[utt],
                                                  online_ivector_period=10))
    (workspace,) = computer._workspaces.values()
    held = {id(plan._views_array) for plan in computer._plans.values()
            if plan._views_array is not None}
    assert len(computer._plans) > 2 and held == {id(workspace._array)}
    for num_frames, out in zip((7, 61), (outputs[0], outputs[3])):
        fresh = SimpleNnetComputer(nnet, opts).compute_utterance(
            f[:num_frames], online_ivectors=ivectors[utt], online_ivector_period=10)
        assert np.array_equal(fresh, out)


def test_recurrent_networks_batch_two_chunks():
    """A recurrent network's chunks go together two at a time (its steps'
    non-recurrent products are made ahead, so more chunks gain less than
    they cost in memory); on 2 threads, as many computations per thread;
    Kaldi-exact arithmetic one chunk at a time."""
    blstm = KALDI_REF / "models" / "blstm"
    _need(blstm)
    nnet = prepare_nnet_for_compute(Nnet.read(str(blstm / "model.raw")))
    computer = SimpleNnetComputer(nnet, SimpleComputationOptions(frames_per_chunk=20))
    plan = computer.chunk_plan(301, 1, 20)
    assert [computer.chunks_per_computation(plan, n) for n in (1, 2, 3, 4, 9, 16, 17)] == \
        [1, 2, 2, 2, 2, 2, 2]
    exact = SimpleNnetComputer(nnet, SimpleComputationOptions(frames_per_chunk=20),
                               backend=KaldiExactBackend(2))
    assert exact.chunks_per_computation(plan, 16) == 1
    from pynnet3.compute import blas_threads
    if not blas_threads.available():
        return
    threaded = SimpleNnetComputer(nnet, SimpleComputationOptions(frames_per_chunk=20),
                                  num_threads=2)
    assert threaded.num_threads == 2
    # 2 chunks: one computation per thread
    assert [threaded.chunks_per_computation(plan, n) for n in (1, 2, 3, 5, 9)] == \
        [1, 1, 2, 2, 2]


# -- the computer's own threads -------------------------------------------------------------

def test_blas_thread_count_is_restored():
    from pynnet3.compute import blas_threads
    if not blas_threads.available():
        pytest.skip("NumPy's BLAS thread count cannot be changed here")
    before = blas_threads.get_threads()
    with blas_threads.single_threaded():
        assert blas_threads.get_threads() == 1
        with blas_threads.single_threaded():
            assert blas_threads.get_threads() == 1
    assert blas_threads.get_threads() == before


def test_threads_compute_the_same_numbers():
    """Computations on the computer's threads (single-threaded BLAS): the
    same chunks give the same bits as on one thread."""
    _need(CHAIN)
    from pynnet3.compute import blas_threads
    nnet = prepare_nnet_for_compute(Nnet.read(str(CHAIN / "model.raw")))
    feats, ivectors = _chain_inputs()
    opts = SimpleComputationOptions(frames_per_chunk=20)
    threaded = SimpleNnetComputer(nnet, opts, max_chunks=1, num_threads=3)
    assert threaded.num_threads == (3 if blas_threads.available() else 1)
    alone = SimpleNnetComputer(nnet, opts, max_chunks=1)
    utterances = [(f, None, ivectors[utt], 10) for utt, f in feats.items()]
    for a, b in zip(threaded.compute_utterances(utterances), alone.compute_utterances(utterances)):
        assert a.tobytes() == b.tobytes()
    assert SimpleNnetComputer(nnet, opts, num_threads=2,
                              backend=KaldiExactBackend(2)).num_threads == 1


def test_a_workers_outputs_stay_out_of_its_arena():
    """A worker hands each output over as a matrix of its own, so its
    arena does not hold the outputs (they were copied out of it until
    2026-11-28), and the numbers are one thread's."""
    _need(CHAIN)
    from pynnet3.compute import blas_threads
    if not blas_threads.available():
        pytest.skip("NumPy's BLAS thread count cannot be changed here: no computer threads")
    skip_if_blas_kernels_forced()
    nnet = prepare_nnet_for_compute(Nnet.read(str(CHAIN / "model.raw")))
    feats, ivectors = _chain_inputs()
    opts = SimpleComputationOptions(frames_per_chunk=20)
    threaded = SimpleNnetComputer(nnet, opts, num_threads=2)
    alone = SimpleNnetComputer(nnet, opts)
    for utt, f in feats.items():
        num_rows, blocks = threaded.submit_utterance(f, None, ivectors[utt], 10)
        got = np.concatenate(list(blocks))
        assert got.tobytes() == alone.compute_utterance(f, None, ivectors[utt], 10).tobytes()
    workers = [(key, thread) for key, thread in threaded._plans if thread > 0]
    assert workers
    for key, thread in workers:
        computation = threaded._cache[key]
        assert (threaded._plans[(key, thread)].arena.offsets
                == plan_arena(computation).offsets)
        assert plan_arena(computation).offsets != plan_arena(computation, True).offsets
