"""Lattice determinization (pynnet3/decoding/determinize_lattice.py and its C kernel
pynnet3/_fast/determinize_lattice_kernel.pyx): each C step against its Python twin
on random lattices, Kaldi's limits (max-mem with repository rebuilds and the
retry, max-states, max-arcs, max-loop) in both, and decode/large's utt6,
whose determinization Kaldi stopped at its memory limit."""

import copy
import io
import logging
import math
import os
import random
import shlex
from contextlib import redirect_stderr

import numpy as np
import pytest

from pynnet3.decoding import determinize_lattice as D
from pynnet3.decoding.lattice import Lattice
from pynnet3.errors import PynnetError

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "decode", "tdnn_lda")


def _f32(x):
    return float(np.float32(x))


def random_lattice(rng, num_states, max_arcs, num_labels, phone_labels=0):
    """A random acyclic lattice with its states shuffled (so not top-sorted),
    few distinct labels (many ties for the arc sort) and float32 weights."""
    order = list(range(num_states))
    rng.shuffle(order)
    lat = Lattice()
    lat.add_states(num_states)
    for s in range(num_states - 1):
        for _ in range(rng.randint(1, max_arcs)):
            t = rng.randint(s + 1, min(num_states - 1, s + 6))
            lat.arcs[order[s]].append((rng.randrange(num_labels),
                                       rng.randrange(phone_labels or num_labels),
                                       _f32(rng.uniform(0, 3)), _f32(rng.uniform(-2, 4)),
                                       order[t]))
    lat.final[order[num_states - 1]] = (0.0, 0.0)
    for s in rng.sample(range(num_states - 1), num_states // 5):
        lat.final[order[s]] = (_f32(rng.uniform(0, 5)), _f32(rng.uniform(0, 5)))
    lat.start = order[0]
    return lat


def _same(clat, lat):
    back = clat.to_lattice()
    assert back.start == lat.start
    assert back.final == lat.final
    assert back.arcs == lat.arcs


@pytest.mark.parametrize("seed", range(6))
def test_c_steps_equal_python_twins(seed):
    from pynnet3._fast.determinize_lattice_kernel import CLattice
    rng = random.Random(seed)
    lat = random_lattice(rng, rng.randint(5, 120), rng.choice([3, 40]), rng.choice([2, 5]),
                         phone_labels=12)
    c = CLattice.from_lattice(lat)
    _same(c, lat)
    D.invert(lat)
    c.invert()
    _same(c, lat)
    assert c.is_top_sorted() == D.is_top_sorted(lat)
    assert c.top_sort() == D.top_sort(lat)
    _same(c, lat)
    assert c.is_top_sorted() and D.is_top_sorted(lat)
    # std::sort on (ilabel, olabel) with many ties, states with up to 40 arcs
    D.arc_sort_ilabel(lat)
    c.arc_sort()
    _same(c, lat)
    phones = np.array([0] + [rng.choice([0, 1, 2, 3]) for _ in range(12)], dtype=np.int32)
    assert c.insert_phones(phones) == D.determinize_lattice_insert_phones(lat, phones)
    _same(c, lat)
    D.top_sort(lat)
    c.top_sort()
    _same(c, lat)
    for beam in (0.5, 2.0, 6.0):
        a, b = copy.deepcopy(lat), c.copy()
        assert b.prune(beam) == D.prune_lattice(beam, a)
        _same(b, a)
    D.determinize_lattice_delete_phones(lat, 3)
    c.delete_phones(3)
    _same(c, lat)
    lat.arcs[lat.start] = lat.arcs[lat.start][:1]     # leaves states unreachable
    c = CLattice.from_lattice(lat)
    lat.connect()
    c.connect()
    _same(c, lat)


@pytest.mark.parametrize("seed", range(1, 5))
def test_compact_output_connected_in_c_equals_connect_after(seed):
    """The word pass's output connected as it is made (the kernel's
    output_compact(connect=True), which the wrapper uses) equals the output
    connected afterwards, in C and in the twin. A max-states limit stops the
    determinization with states whose arcs were never made: dead ends, which
    Connect removes."""
    from pynnet3._fast.determinize_lattice_kernel import CLattice, LatticeDeterminizerCore
    from pynnet3.decoding.lattice_determinizer import LatticeDeterminizerPruned
    rng = random.Random(seed)
    removed = 0
    for max_states in (6, 12, 25, -1):
        lat = random_lattice(rng, 40, 3, 4)
        D.top_sort(lat)
        D.arc_sort_ilabel(lat)
        opts = D.DeterminizeLatticePrunedOptions(max_states=max_states)
        core = LatticeDeterminizerCore(CLattice.from_lattice(lat), 10.0, _f32(opts.delta),
                                       -1, -1, max_states, -1)
        core.determinize()
        twin = LatticeDeterminizerPruned(copy.deepcopy(lat), 10.0, opts)
        twin.determinize()
        after = core.output_compact().connect().write_text()
        assert core.output_compact(connect=True).write_text() == after
        assert twin.output_compact(connect=True).write_text() == after
        removed += core.output_compact().num_states - core.output_compact(True).num_states
    assert removed > 0


def test_empty_subset_warns_and_gives_the_zero_weight(caplog):
    """With an infinite beam nothing prunes the way into a dead end (a state
    neither final nor with arcs): its subset has no state with an input
    symbol or a final weight. Kaldi warns "empty subset" and gives it the
    zero weight; C and the twin do the same, and Connect removes the state."""
    lat = Lattice()
    lat.add_states(4)
    lat.start = 0
    lat.arcs[0] = [(1, 10, 0.5, 1.0, 1), (2, 20, 0.25, 0.5, 2)]
    lat.arcs[1] = [(3, 30, 1.0, 1.0, 3)]
    lat.final[3] = (0.0, 0.0)          # state 2 is a dead end
    out = []
    for fast in (True, False):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pynnet3.decoding.determinize_lattice"):
            clat, ok = D.determinize_lattice_pruned(copy.deepcopy(lat), math.inf, True,
                                                    use_kernel=fast)
        out.append((clat.write_text(), ok, [r.getMessage() for r in caplog.records]))
    assert out[0] == out[1]
    text, ok, messages = out[0]
    assert ok and messages == ["empty subset"]
    clat.connect()
    assert clat.num_states == 3 and [a[0] for a in clat.arcs[0]] == [1]


def test_std_sort_is_libstdcpp_sort():
    """std_sort against the C kernel's std::sort on (ilabel, olabel) keys with
    many ties, long enough for introsort's partitioning."""
    from pynnet3._fast.determinize_lattice_kernel import CLattice
    rng = random.Random(7)
    for n in (17, 18, 33, 100, 1000):
        lat = Lattice()
        lat.add_states(2)
        lat.start = 0
        lat.final[1] = (0.0, 0.0)
        lat.arcs[0] = [(rng.randrange(3), rng.randrange(2), _f32(i), 0.0, 1) for i in range(n)]
        c = CLattice.from_lattice(lat)
        c.arc_sort()
        D.arc_sort_ilabel(lat)
        _same(c, lat)
        assert [a[:2] for a in lat.arcs[0]] == sorted(a[:2] for a in lat.arcs[0])


def test_prune_lattice_by_hand():
    lat = Lattice()
    lat.add_states(4)
    lat.start = 0
    lat.arcs[0] = [(1, 1, 1.0, 0.0, 1), (2, 2, 4.0, 0.0, 2)]
    lat.arcs[1] = [(3, 3, 0.0, 1.0, 3)]
    lat.arcs[2] = [(4, 4, 0.0, 0.5, 3)]
    lat.final[3] = (0.0, 0.0)
    lat.final[2] = (0.0, 9.0)
    # best path 2; through state 2: 4.5; state 2 final: 13
    a = copy.deepcopy(lat)
    assert D.prune_lattice(3.0, a)
    assert a.num_states == 4 and a.final[2] is None and len(a.arcs[0]) == 2
    b = copy.deepcopy(lat)
    assert D.prune_lattice(2.0, b)
    assert b.num_states == 3 and b.arcs[0] == [(1, 1, 1.0, 0.0, 1)]


@pytest.fixture(scope="module")
def raw_lattices():
    from pynnet3.decoding.config import LatticeFasterDecoderConfig
    from pynnet3.decoding.decodable import (DecodableAmNnetSimple, decodable_nnet_computer,
                                          transition_id_to_pdf_table)
    from pynnet3.decoding.lattice_faster_decoder import make_decoder
    from pynnet3.decoding.fst import read_fst
    from pynnet3.decoding.token_lattice import get_raw_lattice
    from pynnet3.io.table import RandomAccessTableReader, SequentialTableReader
    from pynnet3.model.am import read_mdl
    trans_model, am_nnet = read_mdl(os.path.join(DATA, "final.mdl"))
    computer = decodable_nnet_computer(am_nnet)
    tid_to_pdf = transition_id_to_pdf_table(trans_model)
    ivectors = RandomAccessTableReader("ark:" + os.path.join(DATA, "online-ivectors.ark"))
    # the kernel's search, or its twin where the kernels are not used
    decoder = make_decoder(read_fst(os.path.join(DATA, "HCLG.fst")),
                           LatticeFasterDecoderConfig(beam=16, lattice_beam=10))
    lats = {}
    for key, feats in SequentialTableReader("ark:" + os.path.join(DATA, "feats.ark")):
        if key not in ("utt1", "utt2"):
            continue
        d = DecodableAmNnetSimple(computer, tid_to_pdf, feats,
                                  online_ivectors=ivectors.value(key), online_ivector_period=10)
        decoder.decode(d.loglikes, tid_to_pdf)
        lats[key] = get_raw_lattice(decoder.token_lattice()).connect()
    return trans_model, lats


def _run_both(caplog, fn):
    """fn(fast) for the C pipeline and the twin: results and log lines."""
    out = []
    for fast in (True, False):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="pynnet3.decoding.determinize_lattice"):
            result = fn(fast)
        out.append((result, [(r.levelname, r.getMessage()) for r in caplog.records]))
    return out


@pytest.mark.parametrize("max_mem", [-1, 100000, 400000, 1000000, 5000])
def test_max_mem_c_equals_twin(raw_lattices, caplog, max_mem):
    trans_model, lats = raw_lattices
    opts = D.DeterminizeLatticePhonePrunedOptions(max_mem=max_mem)

    def run(fast):
        clat, ok = D.determinize_lattice_phone_pruned_wrapper(
            trans_model, copy.deepcopy(lats["utt2"]), 10.0, opts, use_kernel=fast)
        return clat.write_text(), ok

    (fast, fast_log), (twin, twin_log) = _run_both(caplog, run)
    assert fast == twin
    assert fast_log == twin_log
    messages = [m for _, m in fast_log]
    if max_mem == -1:
        assert fast[1] and not messages
    else:
        # (after a retry with a narrower beam the last try may finish: success)
        assert fast[1] == (max_mem == 100000)
        assert "Rebuilding repository." in messages
        assert any(m.startswith("Did not reach requested beam in determinize-lattice: size "
                                "exceeds maximum %d bytes; (repo,arcs,elems) = (" % max_mem)
                   for m in messages)
    if max_mem == 5000:
        # the phone pass pruned and retried with narrower beams, as Kaldi's
        assert any(level == "WARNING" and m.startswith("Effective beam ")
                   and "was less than beam 10 * cutoff 0.5, pruning raw lattice with new beam 5 "
                   "and retrying." in m for level, m in fast_log)


@pytest.mark.parametrize("limits", [dict(max_mem=3000), dict(max_states=25), dict(max_arcs=40),
                                    dict(max_mem=3000, retry_cutoff=0.9)])
def test_word_pass_limits_c_equals_twin(raw_lattices, caplog, limits):
    """DeterminizeLatticePruned to a CompactLattice with each limit (the
    retry logs Kaldi's "Pruned state-level lattice" line on this path)."""
    _, lats = raw_lattices
    lat = copy.deepcopy(lats["utt2"])
    D.invert(lat)
    D.top_sort(lat)
    D.arc_sort_ilabel(lat)
    opts = D.DeterminizeLatticePrunedOptions(**limits)

    def run(fast):
        clat, ok = D.determinize_lattice_pruned(lat, 10.0, True, opts, use_kernel=fast)
        return clat.write_text(), ok

    (fast, fast_log), (twin, twin_log) = _run_both(caplog, run)
    assert fast == twin and fast_log == twin_log
    # the retry's narrower beam lets the last try finish
    assert fast[1] == ("retry_cutoff" in limits)
    if "retry_cutoff" in limits:
        assert any(m.startswith("Pruned state-level lattice with beam ") for _, m in fast_log)


def test_max_loop(raw_lattices):
    _, lats = raw_lattices
    lat = copy.deepcopy(lats["utt1"])
    D.invert(lat)
    D.top_sort(lat)
    for fast in (True, False):
        with pytest.raises(PynnetError, match="Lattice determinization aborted since looped "
                                              "more than 1 times during epsilon closure."):
            D.determinize_lattice_pruned(lat, 10.0, True,
                                         D.DeterminizeLatticePrunedOptions(max_loop=1), use_kernel=fast)
        clat, ok = D.determinize_lattice_pruned(
            lat, 10.0, True, D.DeterminizeLatticePrunedOptions(max_loop=100000), use_kernel=fast)
        assert ok


def _structure(text):
    """Lattice text lines without their float weights (kept: states, labels,
    the transition-id strings)."""
    out = []
    for line in text.strip("\n").split("\n"):
        fields = line.split("\t")
        weight = fields[-1].split(",")
        out.append(tuple(fields[:-1]) + tuple(weight[2:]))
    return out


def test_utt6_stops_at_kaldis_memory_limit(kaldi_ref, tmp_path):
    """decode/large utt6 with Kaldi's default options: the determinization
    stops where Kaldi's did (the same byte counts in the same WARNING) and
    the lattice has Kaldi's states, arcs and labels."""
    from pynnet3.bin import nnet3_latgen_faster
    from pynnet3.decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
    from pynnet3.io.table import TableWriter, read_table
    ref = kaldi_ref / "decode" / "large"
    with TableWriter("ark:" + str(tmp_path / "feats.ark"), "matrix") as w:
        for key, feats in read_table("ark:" + str(ref / "feats.ark")):
            if key == "utt6":
                w.write(key, feats)
    argv = shlex.split((ref / "decode.default.cmd").read_text())[1:]
    argv = [a.replace("ark:feats.ark", "ark:" + str(tmp_path / "feats.ark"))
             .replace("ark:online-ivectors.ark", "ark:" + str(ref / "online-ivectors.ark"))
             .replace("lat.default.ark", str(tmp_path / "lat.ark"))
             .replace("words.default.txt", str(tmp_path / "words.txt"))
             .replace("ali.default.txt", str(tmp_path / "ali.txt")) for a in argv]
    argv = [a if not a.startswith(("model/", "graph/", "--word-symbol-table=graph/"))
            else a.replace("model/", str(ref / "model") + "/")
                  .replace("graph/", str(ref / "graph") + "/") for a in argv]
    # Kaldi's memory count depends on the lattice's bits: Kaldi-exact
    # arithmetic, with the 1 OpenBLAS thread decode/large was made with.
    argv = ["--kaldi-exact-arithmetic=true", "--kaldi-exact-blas-threads=1"] + argv
    err = io.StringIO()
    with redirect_stderr(err):
        status = nnet3_latgen_faster.main(argv)
    log = err.getvalue()
    assert status == 0, log

    def messages(text, severity):
        return [line.split(") ", 1)[1] for line in text.split("\n")
                if line.startswith(severity + " (") and ("epository" in line or "beam" in line)]

    kaldi_log = (ref / "decode.default.log").read_text()
    kaldi_utt6 = kaldi_log[kaldi_log.index("\nutt6 "):kaldi_log.index("\nutt7 ")]
    for severity in ("LOG", "WARNING"):
        assert messages(log, severity) == messages(kaldi_utt6, severity), log
    assert len(messages(log, "WARNING")) == 2
    with TableWriter("ark,t:" + str(tmp_path / "lat.txt"), "compact_lattice") as w:
        for key, clat in read_table("ark:" + str(tmp_path / "lat.ark"), "compact_lattice"):
            w.write(key, clat)
    ours = (tmp_path / "lat.txt").read_text().split("\n\n")[0]
    kaldi = (ref / "lat.default.txt").read_text()
    kaldi = kaldi[kaldi.index("utt6 \n"):]
    kaldi = kaldi[:kaldi.index("\n\n")]
    assert _structure(ours) == _structure(kaldi)


# -- against Kaldi's own code on one raw lattice ---------------------------------------------
# tests/data/decode/determinize: raw.utt2.ark, the raw lattice pynnet3's decoder gives
# decode/tdnn_lda's utt2 with beam 16 and lattice-beam 10; kaldi.NAME.txt and kaldi.NAME.log,
# the CompactLattice (OpenFst's printer) and the LOG/WARNING messages that Kaldi's
# DeterminizeLatticePhonePrunedWrapper (with pushing and minimization where asked; a scratch
# build of Kaldi's lat/ sources at kaldi-ref's commit against OpenFst 1.7.9) gave for it with
# lattice beam 10 and the options of cases.txt.

DET_DATA = os.path.join(HERE, "data", "decode", "determinize")


def _det_cases():
    with open(os.path.join(DET_DATA, "cases.txt")) as f:
        return [line.rstrip("\n").split("|") for line in f if line.strip()]


def _parse_compact_text(text):
    """(structure, weights) of a CompactLattice in text form; a weight left
    out is One."""
    structure, weights = [], []
    for line in text.strip("\n").split("\n"):
        fields = line.split("\t")
        if len(fields) in (1, 3):
            fields.append("0,0,")
        w = fields[-1].split(",")
        structure.append(tuple(fields[:-1]) + (w[2],))
        weights.extend(float(x) for x in w[:2])
    return structure, np.array(weights)


@pytest.mark.parametrize("case", _det_cases(), ids=lambda c: c[0])
def test_wrapper_equals_kaldis_on_a_raw_lattice(caplog, case):
    from pynnet3.decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
    from pynnet3.io.table import read_table
    from pynnet3.model.am import read_mdl
    name, options, status = case
    flags = dict(opt[2:].split("=") for opt in options.split())
    opts = D.DeterminizeLatticePhonePrunedOptions(
        max_mem=int(flags["max-mem"]), word_determinize=flags["word-determinize"] == "true",
        phone_determinize=flags["phone-determinize"] == "true",
        minimize=flags["minimize"] == "true")
    (_, raw), = read_table("ark:" + os.path.join(DET_DATA, "raw.utt2.ark"), "lattice")
    trans_model, _ = read_mdl(os.path.join(DATA, "final.mdl"))
    with open(os.path.join(DET_DATA, "kaldi.%s.txt" % name)) as f:
        kaldi_structure, kaldi_weights = _parse_compact_text(f.read())
    with open(os.path.join(DET_DATA, "kaldi.%s.log" % name)) as f:
        kaldi_log = f.read().split("\n")[:-1]
    for fast in (True, False):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="pynnet3.decoding.determinize_lattice"):
            clat, ok = D.determinize_lattice_phone_pruned_wrapper(
                trans_model, copy.deepcopy(raw), 10.0, opts, use_kernel=fast)
        assert ok == (status == "ok=1")
        assert [r.getMessage() for r in caplog.records] == kaldi_log
        structure, weights = _parse_compact_text(clat.write_text().decode())
        assert structure == kaldi_structure
        assert np.allclose(weights, kaldi_weights, rtol=1e-5, atol=1e-5)
