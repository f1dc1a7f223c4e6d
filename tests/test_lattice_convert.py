"""Reading a lattice table as the other lattice kind, as Kaldi's lattice
holders do (ConvertLattice both ways), binary and text."""

import os
from contextlib import redirect_stderr
import io

from pynnet3.bin import lattice_best_path, lattice_copy
from pynnet3.decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from pynnet3.decoding.lattice import CompactLattice, Lattice
from pynnet3.decoding.lattice_ops import convert_compact_lattice, convert_lattice
from pynnet3.io.table import read_table

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "decode", "tdnn_lda")


def _compact_example():
    """0 -(word 7, string 1_2_3)-> 1 -(word 0, string 4)-> 2 -(word 8, no
    string)-> 3, final with string 5_6; state 1 also final without string."""
    clat = CompactLattice()
    clat.arcs = [[(7, 1.0, 2.0, (1, 2, 3), 1)], [(0, 0.5, 0.25, (4,), 2)],
                 [(8, 0.125, 0.0, (), 3)], []]
    clat.final = [None, (3.0, 4.0, ()), None, (0.75, 1.5, (5, 6))]
    clat.start = 0
    return clat


def test_compact_to_lattice_by_hand():
    lat = convert_compact_lattice(_compact_example())
    one = (0.0, 0.0)
    # States 0-3 keep their numbers; the chains' states follow in Kaldi's
    # order: state 0's arc chain (4, 5), then state 3's final chain (6, 7).
    assert lat.start == 0 and lat.num_states == 8
    assert lat.arcs[0] == [(1, 7, 1.0, 2.0, 4)]
    assert lat.arcs[4] == [(2, 0) + one + (5,)]
    assert lat.arcs[5] == [(3, 0) + one + (1,)]
    assert lat.arcs[1] == [(4, 0, 0.5, 0.25, 2)]
    assert lat.arcs[2] == [(0, 8, 0.125, 0.0, 3)]
    assert lat.arcs[3] == [(5, 0, 0.75, 1.5, 6)]
    assert lat.arcs[6] == [(6, 0) + one + (7,)]
    assert lat.final == [None, (3.0, 4.0), None, None, None, None, None, one]


def test_compact_to_lattice_and_back_keeps_paths():
    clat = _compact_example()
    back = convert_lattice(convert_compact_lattice(clat))
    assert back.shortest_path().linear_symbol_sequence() == \
        clat.shortest_path().linear_symbol_sequence()


def _best(lat):
    return lat.shortest_path().linear_symbol_sequence()


def test_kaldis_compact_lattices_read_as_lattices_and_back():
    """Kaldi's determinized lattices, read through the Lattice holder
    (binary and text), convert back to compact lattices with the same best
    path: words, transition ids and costs."""
    for name in ("lat.narrow.ark", "lat.narrow.txt"):
        # (the text form has rounded costs: compare with the same file)
        compact = dict(read_table("ark:" + os.path.join(DATA, name), "compact_lattice"))
        lats = dict(read_table("ark:" + os.path.join(DATA, name), "lattice"))
        assert list(lats) == list(compact)
        for key, lat in lats.items():
            assert isinstance(lat, Lattice)
            assert _best(convert_lattice(lat)) == _best(compact[key]), (name, key)


def test_lattice_copy_write_compact_false_reads_compact_archive(tmp_path):
    """lattice-copy --write-compact=false ark:compact.ark ark,t:- (its usage
    example): the compact lattices are converted and written as lattices;
    copied back to compact, lattice-best-path gives Kaldi's words."""
    raw = tmp_path / "raw.ark"
    with redirect_stderr(io.StringIO()):
        assert lattice_copy.main(["--write-compact=false",
                                  "ark:" + os.path.join(DATA, "lat.narrow.ark"),
                                  "ark,t:%s" % raw]) == 0
        assert lattice_best_path.main(["ark:%s" % raw, "ark,t:%s" % (tmp_path / "w.txt")]) == 0
    assert (tmp_path / "w.txt").read_bytes() == \
        open(os.path.join(DATA, "words.narrow.txt"), "rb").read()


def test_raw_lattices_read_as_compact_give_kaldis_best_path(kaldi_ref, tmp_path):
    """Kaldi's raw (--determinize-lattice=false) lattices read by
    lattice-best-path (a CompactLattice reader): Kaldi's words and alignments."""
    lats = kaldi_ref / "decode" / "tdnn_lda" / "lat.nodet.ark"
    with redirect_stderr(io.StringIO()):
        assert lattice_best_path.main(["--acoustic-scale=0.1", "ark:%s" % lats,
                                       "ark,t:%s" % (tmp_path / "w.txt"),
                                       "ark,t:%s" % (tmp_path / "a.txt")]) == 0
    assert (tmp_path / "w.txt").read_bytes() == \
        open(os.path.join(DATA, "words.nodet.txt"), "rb").read()
    assert (tmp_path / "a.txt").read_bytes() == \
        open(os.path.join(DATA, "ali.nodet.txt"), "rb").read()
