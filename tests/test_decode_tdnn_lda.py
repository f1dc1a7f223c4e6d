"""Decoding against Kaldi's nnet3-latgen-faster on decode/tdnn_lda (a copy of
what the tests need is in tests/data/decode/tdnn_lda; Kaldi's lattices are
read from kaldi-ref when present)."""

import io
import os
import shlex
from contextlib import redirect_stderr

import numpy as np
import pytest

from pynnet3.bin import nnet3_latgen_faster
from pynnet3.decoding.config import LatticeFasterDecoderConfig
from pynnet3.decoding.decodable import (DecodableAmNnetSimple, decodable_nnet_computer,
                                      transition_id_to_pdf_table)
from pynnet3.decoding.lattice_faster_decoder import LatticeFasterDecoder
from pynnet3.decoding.lattice_faster_decoder import LatticeFasterDecoderPy
from pynnet3.decoding.lattice_faster_decoder import _kernel as _decoder_kernel
from pynnet3.decoding.fst import StdFst, read_fst
from pynnet3.decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from pynnet3.io.table import RandomAccessTableReader, SequentialTableReader, read_table
from pynnet3.model.am import read_mdl

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "decode", "tdnn_lda")


def variants():
    with open(os.path.join(DATA, "decode-variants.txt")) as f:
        return [line.split("|")[0] for line in f if line.strip()]


@pytest.fixture(scope="module")
def setup():
    trans_model, am_nnet = read_mdl(os.path.join(DATA, "final.mdl"))
    computer = decodable_nnet_computer(am_nnet)
    tid_to_pdf = transition_id_to_pdf_table(trans_model)
    fst = read_fst(os.path.join(DATA, "HCLG.fst"))
    ivectors = RandomAccessTableReader("ark:" + os.path.join(DATA, "online-ivectors.ark"))
    decodables = [(key, DecodableAmNnetSimple(computer, tid_to_pdf, feats,
                                              online_ivectors=ivectors.value(key),
                                              online_ivector_period=10))
                  for key, feats in SequentialTableReader(
                      "ark:" + os.path.join(DATA, "feats.ark"))]
    return trans_model, tid_to_pdf, fst, decodables


def test_fst_reader():
    hclg = read_fst(os.path.join(DATA, "HCLG.fst"))
    assert (hclg.fst_type, hclg.num_states, hclg.num_arcs, hclg.start) == ("const", 94, 198, 71)
    g = read_fst(os.path.join(DATA, "G.fst"))
    assert (g.fst_type, g.num_states, g.num_arcs) == ("vector", 1, 15)
    assert g.arcs(0)[0][:2] == (2, 2)


def test_fst_records_are_the_files(tmp_path):
    """A const FST's records are the file's bytes, 64-byte aligned; a pipe
    reads the same; the epsilon counts of a built StdFst are the file's."""
    from pynnet3.decoding.fst import ARC_DTYPE, STATE_DTYPE
    path = os.path.join(DATA, "HCLG.fst")
    data = open(path, "rb").read()
    hclg = read_fst(path)
    arcs_at = len(data) - ARC_DTYPE.itemsize * hclg.num_arcs
    states_at = arcs_at - STATE_DTYPE.itemsize * hclg.num_states
    assert hclg.arc_records.tobytes() == data[arcs_at:]
    assert hclg.state_records.tobytes() == data[states_at:arcs_at]
    for records in (hclg.arc_records, hclg.state_records):
        assert records.ctypes.data % 64 == 0 and records.flags.c_contiguous
    piped = read_fst("cat %s |" % path)
    assert piped.arc_records.tobytes() == hclg.arc_records.tobytes()
    assert piped.state_records.tobytes() == hclg.state_records.tobytes()
    rebuilt = StdFst(hclg.start, hclg.final, hclg.arc_begin, hclg.ilabel, hclg.olabel,
                     hclg.weight, hclg.nextstate)
    assert rebuilt.state_records.tobytes() == hclg.state_records.tobytes()
    counts = [sum(1 for a in hclg.arcs(s) if a[0] == 0) for s in range(hclg.num_states)]
    assert hclg.num_input_epsilons().tolist() == counts


def test_fst_reader_rejects_garbage(tmp_path):
    bad = tmp_path / "bad.fst"
    bad.write_bytes(b"not an fst at all")
    from pynnet3.errors import KaldiFormatError
    with pytest.raises(KaldiFormatError, match="bad magic"):
        read_fst(str(bad))
    data = open(os.path.join(DATA, "HCLG.fst"), "rb").read()
    bad.write_bytes(data[:len(data) - 10])
    with pytest.raises(KaldiFormatError, match="ends inside"):
        read_fst(str(bad))


@pytest.mark.parametrize("options", [
    dict(beam=15, lattice_beam=8), dict(beam=8, lattice_beam=4, max_active=200),
    dict(beam=10, lattice_beam=5, max_active=30, min_active=10, prune_interval=5),
    dict(beam=9, lattice_beam=3, min_active=0, hash_ratio=1.5),
])
def test_cython_decoder_equals_python_twin(setup, options):
    _, tid_to_pdf, fst, decodables = setup
    config = LatticeFasterDecoderConfig(**options)
    twin, fast = LatticeFasterDecoderPy(fst, config), LatticeFasterDecoder(fst, config)
    for _, d in decodables[:3]:
        assert twin.decode(d.loglikes, tid_to_pdf) == fast.decode(d.loglikes, tid_to_pdf)
        a, b = twin.token_lattice(), fast.token_lattice()
        for field in a.__slots__:
            assert np.array_equal(getattr(a, field), getattr(b, field)), field
        assert twin.reached_final() == fast.reached_final()


@pytest.mark.skipif(_decoder_kernel is None, reason="the compiled kernels are not built")
def test_cutoff_selection_is_the_exact_order_statistic():
    """The max-active and min-active cutoffs' selection (counting in buckets,
    then nth_element within one) gives the k-th smallest cost exactly, as a
    full sort does: ties, one far outlier, negative costs, an infinite one,
    all equal, short arrays (nth_element alone)."""
    rng = np.random.default_rng(7)
    arrays = [rng.normal(100.0, 3.0, 5000).astype(np.float32),
              np.round(rng.uniform(-20.0, 20.0, 3000), 1).astype(np.float32),
              np.append(rng.uniform(0.0, 1.0, 4000), 1e30).astype(np.float32),
              np.append(rng.uniform(5.0, 6.0, 700), np.inf).astype(np.float32),
              np.full(1000, 3.25, dtype=np.float32),
              rng.uniform(0.0, 1.0, 100).astype(np.float32),
              np.nextafter(np.float32(1), np.float32(2)) * np.ones(300, np.float32)
              + np.arange(300, dtype=np.float32) * np.float32(1e-7)]
    for costs in arrays:
        ranks = sorted({0, 1, len(costs) // 3, len(costs) // 2, len(costs) - 2,
                        len(costs) - 1})
        for k in ranks:
            expected = np.partition(costs, k)[k]
            got = _decoder_kernel.kth_smallest_value(costs, k)
            assert np.float32(got) == expected, (len(costs), k, got, expected)


def _run_tool(argv):
    err = io.StringIO()
    with redirect_stderr(err):
        status = nnet3_latgen_faster.main(argv)
    return status, err.getvalue()


def _command(variant, tmp_path, exact=True):
    """Kaldi's command for ``variant``, with our paths, with Kaldi-exact
    arithmetic (--kaldi-exact-arithmetic=true) pinned to the 2 OpenBLAS
    threads kaldi-ref's decode/tdnn_lda ran with (by default it follows this
    machine's count); ``exact=False`` runs the tool's default, the BLAS
    arithmetic."""
    with open(os.path.join(DATA, "decode.%s.cmd" % variant)) as f:
        argv = shlex.split(f.read())[1:]
    argv = (["--kaldi-exact-arithmetic=true", "--kaldi-exact-blas-threads=2"] if exact
            else []) + argv
    subst = {"model/final.mdl": os.path.join(DATA, "final.mdl"),
             "graph/HCLG.fst": os.path.join(DATA, "HCLG.fst"),
             "graph/words.txt": os.path.join(DATA, "words.txt")}
    out = []
    for arg in argv:
        for a, b in subst.items():
            arg = arg.replace(a, b)
        for name in ("feats.ark", "online-ivectors.ark", "utt-ivectors.ark"):
            arg = arg.replace("ark:" + name, "ark:" + os.path.join(DATA, name))
        for kind in ("lat", "words", "ali"):
            for ext in ("ark", "txt"):
                name = "%s.%s.%s" % (kind, variant, ext)
                arg = arg.replace(name, str(tmp_path / name))
        out.append(arg)
    return out


@pytest.mark.parametrize("variant", variants())
def test_words_and_alignments_equal_kaldi(variant, tmp_path):
    status, log = _run_tool(_command(variant, tmp_path))
    assert status == 0, log
    for kind in ("words", "ali"):
        ours = (tmp_path / ("%s.%s.txt" % (kind, variant))).read_bytes()
        kaldi = open(os.path.join(DATA, "%s.%s.txt" % (kind, variant)), "rb").read()
        assert ours == kaldi, kind
    assert "utt2 cab \n" in log
    assert "Log-like per frame for utterance utt1 is -0.80967 over 7 frames." in log
    assert "Done 4 utterances, failed for 0" in log


def test_merged_chunks_decode_as_kaldi(tmp_path):
    """One i-vector per utterance (--ivectors): the network's chunks merge
    (the BLAS arithmetic's default), and the words and alignments are still
    Kaldi's (kaldi-bin's nnet3-latgen-faster, decode.utt_ivectors.cmd)."""
    status, log = _run_tool(_command("utt_ivectors", tmp_path, exact=False))
    assert status == 0, log
    assert "computed as longer chunks" in log
    for kind in ("words", "ali"):
        ours = (tmp_path / ("%s.utt_ivectors.txt" % kind)).read_bytes()
        kaldi = open(os.path.join(DATA, "%s.utt_ivectors.txt" % kind), "rb").read()
        assert ours == kaldi, kind


def test_raw_lattices_equal_kaldi(kaldi_ref, tmp_path):
    status, log = _run_tool(_command("nodet", tmp_path))
    assert status == 0, log
    ours = dict(read_table("ark:" + str(tmp_path / "lat.nodet.ark"), "lattice"))
    kaldi = dict(read_table("ark:" + str(kaldi_ref / "decode/tdnn_lda/lat.nodet.ark"),
                            "lattice"))
    assert list(ours) == list(kaldi)
    for key in kaldi:
        a, b = ours[key], kaldi[key]
        # Same states, arcs (labels, order, destinations) and final states.
        assert a.start == b.start
        assert [[x[:2] + x[4:] for x in s] for s in a.arcs] == \
            [[x[:2] + x[4:] for x in s] for s in b.arcs]
        assert [f is None for f in a.final] == [f is None for f in b.final]
        # Kaldi-exact arithmetic (--kaldi-exact-arithmetic=true): every cost
        # bit for bit.
        assert a.arcs == b.arcs and a.final == b.final, key
    assert (tmp_path / "lat.nodet.ark").read_bytes() == \
        (kaldi_ref / "decode/tdnn_lda/lat.nodet.ark").read_bytes()


def test_raw_lattices_with_blas_arithmetic(kaldi_ref, tmp_path):
    """The BLAS arithmetic agrees with Kaldi's costs within float rounding."""
    status, log = _run_tool(_command("nodet", tmp_path, exact=False))
    assert status == 0, log
    ours = dict(read_table("ark:" + str(tmp_path / "lat.nodet.ark"), "lattice"))
    kaldi = dict(read_table("ark:" + str(kaldi_ref / "decode/tdnn_lda/lat.nodet.ark"),
                            "lattice"))
    for key in kaldi:
        a, b = ours[key], kaldi[key]
        assert [[x[:2] + x[4:] for x in s] for s in a.arcs] == \
            [[x[:2] + x[4:] for x in s] for s in b.arcs]
        wa = np.array([x[2:4] for s in a.arcs for x in s])
        wb = np.array([x[2:4] for s in b.arcs for x in s])
        assert np.allclose(wa, wb, rtol=1e-3, atol=1e-4)


def test_lattice_text_and_binary_round_trip(setup, tmp_path):
    status, log = _run_tool(_command("nodet", tmp_path))
    assert status == 0, log
    lats = dict(read_table("ark:" + str(tmp_path / "lat.nodet.ark"), "lattice"))
    from pynnet3.io.table import TableWriter
    with TableWriter("ark,t:" + str(tmp_path / "t.txt"), "lattice") as w:
        for k, v in lats.items():
            w.write(k, v)
    back = dict(read_table("ark:" + str(tmp_path / "t.txt"), "lattice"))
    for k in lats:
        assert back[k].write_text() == lats[k].write_text()


def _compare_lattice_texts(ours, kaldi):
    """Same lines except float weights, which may differ in the last digits
    (with BLAS arithmetic pynnet3's network scores equal Kaldi's within
    float32 rounding, not bitwise); returns the number of lines that differ
    at all."""
    a, b = ours.split("\n"), kaldi.split("\n")
    assert len(a) == len(b)
    differing = 0
    for x, y in zip(a, b):
        if x == y:
            continue
        differing += 1
        fx, fy = x.split("\t"), y.split("\t")
        assert fx[:-1] == fy[:-1], (x, y)
        wx, wy = fx[-1].split(","), fy[-1].split(",")
        assert len(wx) == len(wy) and wx[2:] == wy[2:], (x, y)
        for p, q in zip(wx[:2], wy[:2]):
            p, q = float(p), float(q)
            assert abs(p - q) <= 1e-3 * max(abs(p), abs(q), 1.0), (x, y)
    return differing


@pytest.mark.parametrize("exact", [True, False], ids=["kaldi-exact", "blas"])
@pytest.mark.parametrize("variant", ["default", "narrow"])
def test_determinized_lattices_equal_kaldi(kaldi_ref, variant, exact, tmp_path):
    status, log = _run_tool(_command(variant, tmp_path, exact))
    assert status == 0, log
    from pynnet3.io.table import TableWriter
    with TableWriter("ark,t:" + str(tmp_path / "ours.txt"), "compact_lattice") as w:
        for key, clat in read_table("ark:" + str(tmp_path / ("lat.%s.ark" % variant)),
                                    "compact_lattice"):
            w.write(key, clat)
    ours = (tmp_path / "ours.txt").read_text()
    kaldi = open(kaldi_ref / "decode/tdnn_lda" / ("lat.%s.txt" % variant)).read()
    if exact:
        assert ours == kaldi
        assert (tmp_path / ("lat.%s.ark" % variant)).read_bytes() == \
            (kaldi_ref / "decode/tdnn_lda" / ("lat.%s.ark" % variant)).read_bytes()
    else:
        differing = _compare_lattice_texts(ours, kaldi)
        assert differing <= len(kaldi.split("\n")) // 5


def test_kaldi_lattice_archives_round_trip(kaldi_ref, tmp_path):
    """Kaldi's binary lattice archives read and written again are the same
    bytes; their text form is lattice-copy's."""
    from pynnet3.io.table import TableWriter
    base = kaldi_ref / "decode/tdnn_lda"
    for kind, name in (("compact_lattice", "default"), ("lattice", "nodet")):
        src = str(base / ("lat.%s.ark" % name))
        with TableWriter("ark:" + str(tmp_path / "b.ark"), kind) as w:
            for key, lat in read_table("ark:" + src, kind):
                w.write(key, lat)
        assert (tmp_path / "b.ark").read_bytes() == open(src, "rb").read()
    with TableWriter("ark,t:" + str(tmp_path / "t.txt"), "compact_lattice") as w:
        for key, lat in read_table("ark:" + str(base / "lat.default.ark"), "compact_lattice"):
            w.write(key, lat)
    assert (tmp_path / "t.txt").read_bytes() == open(base / "lat.default.txt", "rb").read()


def test_graph_labels_beyond_transition_model(tmp_path):
    fst = read_fst(os.path.join(DATA, "HCLG.fst"))
    data = bytearray(open(os.path.join(DATA, "HCLG.fst"), "rb").read())
    # The first arc's ilabel sits right after the header and the state records.
    arcs_at = len(data) - 16 * fst.num_arcs
    data[arcs_at:arcs_at + 4] = (100000).to_bytes(4, "little")
    bad = tmp_path / "bad.fst"
    bad.write_bytes(bytes(data))
    argv = _command("nodet", tmp_path)
    argv[argv.index(os.path.join(DATA, "HCLG.fst"))] = str(bad)
    status, log = _run_tool(argv)
    assert status != 0
    assert "input label 100000" in log and "transition-ids" in log
    assert not (tmp_path / "lat.nodet.ark").exists()


def test_mismatched_features(tmp_path):
    from pynnet3.io.table import TableWriter
    feats = tmp_path / "feats.ark"
    with TableWriter("ark:" + str(feats)) as w:
        w.write("utt1", np.zeros((20, 7), dtype=np.float32))
    argv = _command("nodet", tmp_path)
    argv = [a if not a.endswith("/feats.ark") else "ark:" + str(feats) for a in argv]
    status, log = _run_tool(argv)
    assert status != 0
    assert "ERROR" in log and "dimension" in log


def _no_final_graph(fst):
    return StdFst(fst.start, np.full(fst.num_states, np.inf, dtype=np.float32),
                  fst.arc_begin, fst.ilabel, fst.olabel, fst.weight, fst.nextstate)


def test_no_final_state_and_allow_partial(setup):
    from pynnet3.decoding.api import decode_utterance
    _, tid_to_pdf, fst, decodables = setup
    graph = _no_final_graph(fst)
    for fast in (True, False):
        dec = (LatticeFasterDecoder if fast else LatticeFasterDecoderPy)(
            graph, LatticeFasterDecoderConfig(beam=15, lattice_beam=8))
        key, d = decodables[1]
        assert decode_utterance(dec, d, key, 0.1, allow_partial=False) is None
        partial = decode_utterance(dec, d, key, 0.1, allow_partial=True)
        assert partial is not None and not partial.reached_final
        assert len(partial.alignment) == d.num_frames_ready()


def test_python_api(setup):
    import pynnet3
    trans_model, _, fst, _ = setup
    feats = dict(read_table("ark:" + os.path.join(DATA, "feats.ark")))
    ivectors = dict(read_table("ark:" + os.path.join(DATA, "online-ivectors.ark")))
    dec = pynnet3.Decoder(os.path.join(DATA, "final.mdl"), fst, beam=15, lattice_beam=8)
    with open(os.path.join(DATA, "words.default.txt")) as f:
        words = {line.split()[0]: [int(w) for w in line.split()[1:]] for line in f}
    for key in feats:
        result = dec(feats[key], online_ivectors=ivectors[key], online_ivector_period=10)
        assert result.words == words[key]
    one = pynnet3.decode(os.path.join(DATA, "final.mdl"), os.path.join(DATA, "HCLG.fst"),
                         feats["utt2"], online_ivectors=ivectors["utt2"],
                         online_ivector_period=10, beam=15, lattice_beam=8)
    assert one.words == words["utt2"]


def test_fst_vector_round_trip(tmp_path):
    from pynnet3.decoding.fst import fst_to_bytes
    hclg = read_fst(os.path.join(DATA, "HCLG.fst"))
    (tmp_path / "v.fst").write_bytes(fst_to_bytes(hclg))
    back = read_fst(str(tmp_path / "v.fst"))
    assert back.fst_type == "vector" and back.start == hclg.start
    for field in ("final", "arc_begin", "ilabel", "olabel", "weight", "nextstate"):
        assert np.array_equal(getattr(back, field), getattr(hclg, field))
    g_bytes = open(os.path.join(DATA, "G.fst"), "rb").read()
    g = read_fst(os.path.join(DATA, "G.fst"))
    # Same layout as Kaldi's G.fst after the header (which carries properties).
    assert fst_to_bytes(g)[66:] == g_bytes[66:]


def test_no_surviving_tokens(tmp_path):
    """A graph whose only path is one frame long: every later frame has no
    token; Kaldi warns, fails the utterance and exits with status 1."""
    from pynnet3.decoding.fst import fst_to_bytes
    graph = StdFst(0, np.array([np.inf, 0.0], dtype=np.float32), [0, 1, 1], [1], [2], [0.0],
                   [1])
    (tmp_path / "tiny.fst").write_bytes(fst_to_bytes(graph))
    argv = _command("nodet", tmp_path)
    argv[argv.index(os.path.join(DATA, "HCLG.fst"))] = str(tmp_path / "tiny.fst")
    status, log = _run_tool(argv)
    assert status == 1, log
    assert "Error, no surviving tokens: frame is 1" in log
    assert "Failed to decode utterance with id utt2" in log
    assert "Done 0 utterances, failed for 4" in log


@pytest.mark.parametrize("options", [dict(beam=8, lattice_beam=4, max_active=200),
                                     dict(beam=12, lattice_beam=6)])
def test_cython_determinizer_equals_python_twin(setup, options):
    import copy
    from pynnet3.decoding.determinize_lattice import (DeterminizeLatticePhonePrunedOptions,
                                            determinize_lattice_phone_pruned_wrapper)
    from pynnet3.decoding.token_lattice import get_raw_lattice
    trans_model, tid_to_pdf, fst, decodables = setup
    decoder = LatticeFasterDecoder(fst, LatticeFasterDecoderConfig(**options))
    for _, d in decodables[:3]:
        decoder.decode(d.loglikes, tid_to_pdf)
        lat = get_raw_lattice(decoder.token_lattice()).connect()
        for phone in (True, False):
            opts = DeterminizeLatticePhonePrunedOptions(phone_determinize=phone)
            a, ok_a = determinize_lattice_phone_pruned_wrapper(
                trans_model, copy.deepcopy(lat), options["lattice_beam"], opts, use_kernel=True)
            b, ok_b = determinize_lattice_phone_pruned_wrapper(
                trans_model, copy.deepcopy(lat), options["lattice_beam"], opts, use_kernel=False)
            assert ok_a and ok_b
            assert a.write_text() == b.write_text()


@pytest.mark.parametrize("variant", ["ascale1", "ascale1_minimize"])
def test_lattices_at_acoustic_scale_one_equal_kaldi(variant, tmp_path):
    """At --acoustic-scale=1.0 (chain models) Kaldi does not rescale the
    determinized lattice, so its header keeps the property bits Connect
    left (kAccessible, kCoAccessible, the sorted bits; no kWeighted), also
    after --minimize=true: the archive is Kaldi's byte for byte with
    Kaldi-exact arithmetic (decode.VARIANT.cmd, made by kaldi-bin's
    nnet3-latgen-faster with OPENBLAS_CORETYPE=Haswell, 2 threads), and the
    words and alignments are Kaldi's with either arithmetic."""
    for exact in (True, False):
        out = tmp_path / ("exact" if exact else "blas")
        out.mkdir()
        status, log = _run_tool(_command(variant, out, exact))
        assert status == 0, log
        for kind in ("words", "ali"):
            assert (out / ("%s.%s.txt" % (kind, variant))).read_bytes() == \
                open(os.path.join(DATA, "%s.%s.txt" % (kind, variant)), "rb").read(), kind
    assert (tmp_path / "exact" / ("lat.%s.ark" % variant)).read_bytes() == \
        open(os.path.join(DATA, "lat.%s.ark" % variant), "rb").read()
