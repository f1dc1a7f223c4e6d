"""lattice-prune, lattice-depth-per-frame and ali-to-phones (what Kaldi's
steps/diagnostic/analyze_lats.sh runs) on Kaldi's lattices and alignments:
tests/data/decode/tdnn_lda (lat.narrow.ark) and, when present, kaldi-ref's
decode/tdnn_lda and decode/large."""

import io
import math
import os
from contextlib import redirect_stderr

import pytest

from pynnet3.bin import ali_to_phones, lattice_depth_per_frame, lattice_prune
from pynnet3.decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from pynnet3.decoding.lattice import CompactLattice, Lattice
from pynnet3.decoding.lattice_functions import (compact_lattice_depth_per_frame,
                                              is_top_sorted, prune_lattice, top_sort)
from pynnet3.io.table import read_table
from pynnet3.hmm.hmm_utils import split_to_phones
from pynnet3.hmm.transition import TransitionModel

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "decode", "tdnn_lda")


def run(tool, argv):
    err = io.StringIO()
    with redirect_stderr(err):
        status = tool.main(argv)
    return status, err.getvalue()


def lattices(path):
    return list(read_table("ark:" + path, "compact_lattice"))


def ref_cases(kaldi_ref=None):
    """(name, folder, variant) of the lattices to test on."""
    cases = [("data-tdnn_lda-narrow", DATA, "narrow")]
    if kaldi_ref is not None:
        for corpus in ("tdnn_lda", "large"):
            for variant in ("default", "narrow"):
                cases.append(("%s-%s" % (corpus, variant),
                              str(kaldi_ref / "decode" / corpus), variant))
    return cases


def best_cost_and_kept(clat, beam):
    """Plain specification of beam pruning: the best total cost of a path
    through each arc (forward + arc + backward, by dynamic programming over a
    topological order) against the best path's cost + beam."""
    order = clat.top_order()
    n = clat.num_states
    fwd = [math.inf] * n
    fwd[clat.start] = 0.0
    for s in order:
        for a in clat.arcs[s]:
            fwd[a[4]] = min(fwd[a[4]], fwd[s] + (a[1] + a[2]))
    bwd = [math.inf] * n
    for s in reversed(order):
        f = clat.final[s]
        best = f[0] + f[1] if f is not None else math.inf
        for a in clat.arcs[s]:
            best = min(best, (a[1] + a[2]) + bwd[a[4]])
        bwd[s] = best
    total = bwd[clat.start]
    kept = sum(1 for s in range(n) for a in clat.arcs[s]
               if fwd[s] + (a[1] + a[2]) + bwd[a[4]] <= total + beam)
    return total, kept


# -- lattice-prune --------------------------------------------------------------------

def test_prune_small_lattice_by_hand():
    # 0 -a-> 1 -c-> 3(final); 0 -b-> 2 -d-> 3: costs 1+1 and 2+5.
    clat = CompactLattice()
    clat.arcs = [[(1, 1.0, 0.0, (1,), 1), (2, 2.0, 0.0, (2,), 2)],
                 [(3, 0.5, 0.5, (3,), 3)], [(4, 5.0, 0.0, (4,), 3)], []]
    clat.final = [None, None, None, (0.0, 0.0, ())]
    clat.start = 0
    assert prune_lattice(6.0, clat) and clat.num_arcs() == 4
    assert prune_lattice(4.0, clat)
    assert clat.arcs == [[(1, 1.0, 0.0, (1,), 1)], [(3, 0.5, 0.5, (3,), 2)], []]
    assert clat.final == [None, None, (0.0, 0.0, ())]


def test_prune_state_level_lattice():
    # The same shape as a (state-level) Lattice: costs at indices 2 and 3.
    lat = Lattice()
    lat.add_states(4)
    lat.arcs = [[(1, 1, 1.0, 0.0, 1), (2, 2, 2.0, 0.0, 2)], [(3, 3, 0.5, 0.5, 3)],
                [(4, 4, 5.0, 0.0, 3)], []]
    lat.final[3] = (0.0, 0.0)
    lat.start = 0
    assert prune_lattice(4.0, lat)
    assert lat.arcs == [[(1, 1, 1.0, 0.0, 1)], [(3, 3, 0.5, 0.5, 2)], []]
    empty = Lattice()
    assert not prune_lattice(1.0, empty)


def test_top_sort_renumbers_as_a_dfs_finish_order():
    clat = CompactLattice()
    # start 2 -> 0 -> 1 (final), and 2 -> 1
    clat.arcs = [[(5, 0.0, 0.0, (), 1)], [], [(6, 0.0, 0.0, (), 0), (7, 1.0, 0.0, (), 1)]]
    clat.final = [None, (0.0, 0.0, ()), None]
    clat.start = 2
    assert not is_top_sorted(clat)
    assert top_sort(clat) and is_top_sorted(clat)
    assert clat.start == 0
    assert clat.arcs == [[(6, 0.0, 0.0, (), 1), (7, 1.0, 0.0, (), 2)],
                         [(5, 0.0, 0.0, (), 2)], []]
    cyclic = CompactLattice()
    cyclic.arcs, cyclic.final, cyclic.start = [[(1, 0.0, 0.0, (), 1)], [(1, 0.0, 0.0, (), 0)]], \
        [None, (0.0, 0.0, ())], 0
    assert not top_sort(cyclic)


@pytest.mark.parametrize("beam", [0.5, 2.0, 6.0])
def test_prune_keeps_exactly_the_arcs_within_the_beam(beam, request):
    kaldi_ref = None
    try:
        kaldi_ref = request.getfixturevalue("kaldi_ref")
    except pytest.skip.Exception:
        pass
    checked = 0
    for _, folder, variant in ref_cases(kaldi_ref)[:3]:
        for key, clat in lattices(os.path.join(folder, "lat.%s.ark" % variant)):
            clat.scale(((1.0, 0.0), (0.0, 0.1)))
            _, kept = best_cost_and_kept(clat, beam)
            assert prune_lattice(beam, clat)
            assert clat.num_arcs() == kept, key
            checked += 1
    assert checked >= 4


def test_lattice_prune_tool(tmp_path):
    lat = os.path.join(DATA, "lat.narrow.ark")
    out = tmp_path / "pruned.ark"
    status, log = run(lattice_prune, ["--acoustic-scale=0.1", "--beam=1e10", "ark:" + lat,
                                      "ark:%s" % out])
    assert status == 0, log
    before = dict(lattices(lat))
    after = dict(lattices(str(out)))
    assert list(after) == list(before)
    for key in before:
        assert (after[key].num_states, after[key].num_arcs()) == \
            (before[key].num_states, before[key].num_arcs())
        # Scaling by 0.1 and back by 1/0.1 in float changes few costs, and
        # only in the last bit.
        for a, b in zip(sorted(x[:4] for arcs in before[key].arcs for x in arcs),
                        sorted(x[:4] for arcs in after[key].arcs for x in arcs)):
            assert a[0] == b[0] and a[3] == b[3] and a[1] == b[1]
            assert abs(a[2] - b[2]) <= 1e-6 * max(1.0, abs(a[2]))
    assert "LOG (lattice-prune[5.5]:main():lattice_prune.py:" in log
    assert "Done 4 lattices." in log
    status, log = run(lattice_prune, ["--inv-acoustic-scale=10", "--beam=4", "ark:" + lat,
                                      "ark,t:%s" % (tmp_path / "p.txt")])
    assert status == 0 and "For utterance utt2, pruned #states from" in log
    status, log = run(lattice_prune, ["--acoustic-scale=0", "ark:" + lat, "ark:/dev/null"])
    assert status == 255 and "zero acoustic scale" in log


def test_pruned_lattice_keeps_kaldis_best_path(kaldi_ref, tmp_path):
    from pynnet3.bin import lattice_best_path
    for corpus in ("tdnn_lda", "large"):
        folder = kaldi_ref / "decode" / corpus
        pruned = tmp_path / ("%s.ark" % corpus)
        status, log = run(lattice_prune, ["--acoustic-scale=0.1", "--beam=3",
                                          "ark:%s" % (folder / "lat.narrow.ark"),
                                          "ark:%s" % pruned])
        assert status == 0, log
        words = tmp_path / ("%s.words" % corpus)
        status, log = run(lattice_best_path, ["--acoustic-scale=0.1", "ark:%s" % pruned,
                                              "ark,t:%s" % words])
        assert status == 0, log
        assert words.read_text() == (folder / "words.narrow.txt").read_text()


# -- lattice-depth-per-frame ------------------------------------------------------------

def test_depth_per_frame_on_kaldis_lattices(request, tmp_path):
    try:
        kaldi_ref = request.getfixturevalue("kaldi_ref")
    except pytest.skip.Exception:
        kaldi_ref = None
    for _, folder, variant in ref_cases(kaldi_ref):
        alignments = dict(read_table("ark:" + os.path.join(folder, "ali.%s.txt" % variant),
                                     "int32_vector"))
        for key, clat in lattices(os.path.join(folder, "lat.%s.ark" % variant)):
            top_sort(clat)
            depth = compact_lattice_depth_per_frame(clat)
            assert len(depth) == len(alignments[key]), key
            assert min(depth) >= 1
            assert sum(depth) == sum(len(a[3]) for arcs in clat.arcs for a in arcs) + \
                sum(len(f[2]) for f in clat.final if f is not None)


def test_lattice_depth_per_frame_tool(tmp_path):
    lat = os.path.join(DATA, "lat.narrow.ark")
    status, log = run(lattice_depth_per_frame, ["ark:" + lat, "ark,t:%s" % (tmp_path / "d"),
                                                "ark:%s" % (tmp_path / "l.ark")])
    assert status == 0 and "Done 4 lattices." in log, log
    depth = dict(read_table("ark:%s" % (tmp_path / "d"), "int32_vector"))
    alignments = dict(read_table("ark:" + os.path.join(DATA, "ali.narrow.txt"), "int32_vector"))
    assert {k: len(v) for k, v in depth.items()} == {k: len(v) for k, v in alignments.items()}
    passed = dict(lattices(str(tmp_path / "l.ark")))
    assert all(is_top_sorted(c) for c in passed.values()) and len(passed) == 4


# -- ali-to-phones ------------------------------------------------------------------------

def lexicon_phones(folder):
    """word-id -> list of pronunciations (phone-ids), from Kaldi's lang/."""
    folder = str(folder)
    lang = os.path.join(folder, "lang")
    phone_id = dict(line.split() for line in open(os.path.join(lang, "phones.txt")))
    word_id = dict(line.split() for line in open(os.path.join(lang, "words.txt")))
    prons = {}
    for line in open(os.path.join(folder, "dict", "lexicon.txt")):
        fields = line.split()
        prons.setdefault(int(word_id[fields[0]]), []).append(
            [int(phone_id[p]) for p in fields[1:]])
    return prons


def matches(phones, words, prons):
    """Whether ``phones`` is the concatenation of one pronunciation per word."""
    if not words:
        return not phones
    return any(phones[:len(p)] == p and matches(phones[len(p):], words[1:], prons)
               for p in prons[words[0]])


def test_ali_to_phones_gives_the_words_pronunciations(kaldi_ref, tmp_path):
    checked = 0
    for corpus in ("tdnn_lda", "large"):
        folder = kaldi_ref / "decode" / corpus
        prons = lexicon_phones(folder)
        for variant in ("default", "narrow"):
            out = tmp_path / ("%s.%s" % (corpus, variant))
            status, log = run(ali_to_phones, [str(folder / "model" / "final.mdl"),
                                              "ark:%s" % (folder / ("ali.%s.txt" % variant)),
                                              "ark,t:%s" % out])
            assert status == 0, log
            words = dict(read_table("ark:%s" % (folder / ("words.%s.txt" % variant)),
                                    "int32_vector"))
            for key, phones in read_table("ark:%s" % out, "int32_vector"):
                assert matches(phones, words[key], prons), key
                checked += 1
    assert checked == 48


def test_ali_to_phones_formats(tmp_path):
    model = os.path.join(DATA, "final.mdl")
    ali = "ark:" + os.path.join(DATA, "ali.narrow.txt")
    out = {}
    for name, opts in (("plain", []), ("lengths", ["--write-lengths=true"]),
                       ("frames", ["--per-frame=true"])):
        status, log = run(ali_to_phones, opts + [model, ali, "ark,t:%s" % (tmp_path / name)])
        assert status == 0 and "Done 4 utterances." in log, log
        out[name] = (tmp_path / name).read_text()
    # utt3 decodes as "bad" (b a d), utt4 as "hid" (h i d).
    assert out["plain"].splitlines()[2:] == ["utt3 3 2 5 ", "utt4 9 10 5 "]
    assert out["lengths"].splitlines()[2] == "utt3 3 3 ; 2 3 ; 5 167 "
    lengths = dict(read_table("ark:%s" % (tmp_path / "lengths"), "int32_pair_vector"))
    frames = dict(read_table("ark:%s" % (tmp_path / "frames"), "int32_vector"))
    for key, pairs in lengths.items():
        assert frames[key] == [p for p, n in pairs for _ in range(n)]
    status, log = run(ali_to_phones, ["--ctm-output", model, ali, str(tmp_path / "ctm")])
    assert status == 0, log
    ctm = (tmp_path / "ctm").read_text().splitlines()
    assert ctm[4:7] == ["utt3 1 0.00 0.03 3", "utt3 1 0.03 0.03 2", "utt3 1 0.06 1.67 5"]
    status, log = run(ali_to_phones, ["--ctm-output", "--frame-shift=0.005", model, ali,
                                      str(tmp_path / "ctm3")])
    assert status == 0, log
    assert (tmp_path / "ctm3").read_text().splitlines()[6] == "utt3 1 0.030 0.835 5"
    status, log = run(ali_to_phones, ["--per-frame", "--write-lengths", model, ali,
                                      "ark:/dev/null"])
    assert status == 255 and "incompatible" in log


def test_split_to_phones_reports_inconsistent_alignments():
    trans_model = TransitionModel.read(os.path.join(DATA, "final.mdl"))
    ali = dict(read_table("ark:" + os.path.join(DATA, "ali.narrow.txt"), "int32_vector"))
    pieces, ok = split_to_phones(trans_model, ali["utt3"])
    assert ok and [len(p) for p in pieces] == [3, 3, 167]
    pieces, ok = split_to_phones(trans_model, ali["utt3"][1:])
    assert not ok
    assert split_to_phones(trans_model, []) == ([], True)
