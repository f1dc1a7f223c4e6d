"""lattice-mbr-decode / MinimumBayesRisk (Kaldi's lat/sausages.cc) on
hand-made lattices whose sausages are known, and on Kaldi's lattices."""

import io
import os
from contextlib import redirect_stderr

import pytest

from pynnet3.bin import lattice_mbr_decode
from pynnet3.decoding.lattice import CompactLattice
from pynnet3.decoding.mbr import MinimumBayesRisk, create_super_final
from pynnet3.io.table import TableWriter, read_table

DATA = os.path.join(os.path.dirname(__file__), "data", "decode", "tdnn_lda")


def lattice(paths):
    """A compact lattice with one chain per path: ``paths`` = list of
    (cost, [(word, frames), ...]); each arc's string has ``frames``
    transition-ids; the path's cost sits on its first arc."""
    clat = CompactLattice()
    clat.start = 0
    clat.arcs, clat.final = [[]], [None]
    for cost, words in paths:
        prev = 0
        for i, (word, frames) in enumerate(words):
            clat.arcs.append([])
            clat.final.append(None)
            new = len(clat.arcs) - 1
            clat.arcs[prev].append((word, cost if i == 0 else 0.0, 0.0, (1,) * frames, new))
            prev = new
        clat.final[prev] = (0.0, 0.0, ())
    return clat


def test_linear_lattice():
    mbr = MinimumBayesRisk(lattice([(3.0, [(5, 4), (0, 2), (7, 3)])]))
    assert mbr.one_best == [5, 7]
    assert mbr.bayes_risk == 0.0
    assert mbr.sausage_stats == [[(0, 1.0)], [(5, 1.0)], [(0, 1.0)], [(7, 1.0)], [(0, 1.0)]]
    assert mbr.sausage_times == [(0.0, 0.0), (0.0, 4.0), (4.0, 6.0), (6.0, 9.0), (9.0, 9.0)]
    assert mbr.one_best_times == [(0.0, 4.0), (6.0, 9.0)]


def test_mbr_differs_from_map():
    # P("1 2") = .4, P("1 3") = .3, P("4 3") = .3: the best path is "1 2",
    # but word by word the most likely words are 1 (.7) and 3 (.6).
    import math
    paths = [(-math.log(p), words) for p, words in
             ((0.4, [(1, 2), (2, 2)]), (0.3, [(1, 2), (3, 2)]), (0.3, [(4, 2), (3, 2)]))]
    mbr = MinimumBayesRisk(lattice(paths))
    assert mbr.one_best == [1, 3]
    stats = mbr.sausage_stats
    assert [w for w, _ in stats[1]] == [1, 4] and [w for w, _ in stats[3]] == [3, 2]
    assert abs(stats[1][0][1] - 0.7) < 1e-6 and abs(stats[3][0][1] - 0.6) < 1e-6
    # Expected errors against "1 3": .3 (word 4) + .4 (word 2).
    assert abs(mbr.bayes_risk - 0.7) < 1e-5
    kept = MinimumBayesRisk(lattice(paths), decode_mbr=False)
    assert kept.one_best == [1, 2]
    assert abs(kept.bayes_risk - (0.3 + 0.3 + 0.3)) < 1e-5


def test_super_final_state():
    clat = lattice([(1.0, [(1, 1)]), (2.0, [(2, 1)])])
    assert create_super_final(clat) == clat.num_states - 1
    assert [f for f in clat.final if f is not None] == [(0.0, 0.0, ())]
    single = lattice([(1.0, [(1, 1)])])
    n = single.num_states
    assert create_super_final(single) == n - 1 and single.num_states == n


def run(argv):
    err = io.StringIO()
    with redirect_stderr(err):
        status = lattice_mbr_decode.main(argv)
    return status, err.getvalue()


def test_tool_on_kaldis_lattices(tmp_path):
    lat = "ark:" + os.path.join(DATA, "lat.narrow.ark")
    status, log = run(["--acoustic-scale=0.1", "--word-symbol-table=" +
                       os.path.join(DATA, "words.txt"), lat, "ark,t:%s" % (tmp_path / "w"),
                       "ark,t:%s" % (tmp_path / "r"), "ark:%s" % (tmp_path / "s"),
                       "ark,t:%s" % (tmp_path / "t")])
    assert status == 0, log
    assert "Done 4 lattices." in log and "Average Bayes Risk per sentence is" in log
    # One word per utterance, very likely: MBR agrees with Kaldi's best path.
    assert (tmp_path / "w").read_text() == \
        open(os.path.join(DATA, "words.narrow.txt")).read()
    risks = dict(read_table("ark:%s" % (tmp_path / "r"), "float"))
    assert set(risks) == {"utt1", "utt2", "utt3", "utt4"}
    assert all(0.0 <= r < 1.0 for r in risks.values())
    stats = dict(read_table("ark:%s" % (tmp_path / "s"), "posterior"))
    times = dict(read_table("ark:%s" % (tmp_path / "t"), "float_pair_vector"))
    for key, bins in stats.items():
        assert len(bins) == 3 == len(times[key])     # <eps> word <eps>
        for b in bins:
            assert abs(sum(p for _, p in b) - 1.0) < 1e-4
            assert [p for _, p in b] == sorted((p for _, p in b), reverse=True)
        assert all(a <= b for a, b in times[key])
    status, log = run(["--acoustic-scale=0.1", "--one-best-times=true", lat, "ark:/dev/null",
                       "", "", "ark,t:%s" % (tmp_path / "t1")])
    assert status == 0, log
    assert all(len(v) == 1 for _, v in read_table("ark:%s" % (tmp_path / "t1"),
                                                  "float_pair_vector"))


def test_tool_matches_kaldis_best_path_on_large(kaldi_ref, tmp_path):
    folder = kaldi_ref / "decode" / "large"
    status, log = run(["--acoustic-scale=0.1", "ark:%s" % (folder / "lat.narrow.ark"),
                       "ark,t:%s" % (tmp_path / "w")])
    assert status == 0, log
    ours = dict(read_table("ark:%s" % (tmp_path / "w"), "int32_vector"))
    best = dict(read_table("ark:%s" % (folder / "words.narrow.txt"), "int32_vector"))
    same = sum(ours[k] == best[k] for k in best)
    assert len(ours) == 20 and same >= 15


@pytest.mark.parametrize("kind,value", [
    ("posterior", [[(0, 0.5), (3, 0.25)], [], [(7, 1.0)]]),
    ("float_pair_vector", [(0.0, 1.5), (1.5, 2.25)]),
    ("float_pair_vector", []),
])
def test_holders_round_trip(tmp_path, kind, value):
    for spec in ("ark", "ark,t"):
        path = tmp_path / ("x.%s" % spec)
        with TableWriter("%s:%s" % (spec, path), kind) as w:
            w.write("k", value)
        assert list(read_table("ark:%s" % path, kind)) == [("k", value)]
    text = (tmp_path / "x.ark,t").read_text()
    if kind == "posterior":
        assert text == "k [ 0 0.5 3 0.25 ] [ ] [ 7 1 ] \n"
    elif value:
        assert text == "k 0 1.5 ; 1.5 2.25 \n"


