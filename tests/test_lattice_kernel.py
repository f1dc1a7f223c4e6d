"""The lattice kernel (pynnet3/_fast/lattice_kernel.pyx: a CompactLattice's
states in binary) against its Python twin, byte for byte, and Kaldi's
ScaleLattice rules."""

import math
import os

import pytest

from conftest import TEST_DATA

from pynnet3.decoding import lattice_holders  # noqa: F401  (the lattice table kinds)
from pynnet3.decoding.lattice import (CompactLattice, Lattice, _kernel,
                                     compact_lattice_states_binary_py)
from pynnet3.io.table import read_table

LATTICES = os.path.join(TEST_DATA, "decode", "tdnn_lda", "lat.narrow.ark")

needs_kernel = pytest.mark.skipif(_kernel is None, reason="the compiled kernels are not built")


def _both(clat):
    """(kernel's, twin's) (bytes, has_epsilons, weighted) for ``clat``."""
    return (_kernel.compact_lattice_states_binary(clat.arcs, clat.final),
            compact_lattice_states_binary_py(clat.arcs, clat.final))


def _hand_made():
    """Arcs and finals as lists as well as tuples, an epsilon arc, strings."""
    clat = CompactLattice()
    clat.start = 0
    clat.arcs = [[[0, 0.0, 0.0, [], 1], (7, 1.5, -2.25, (3, 4, 5), 2)],
                 [(5, 0.25, 0.5, (1,), 2)],
                 []]
    clat.final = [None, None, [0.0, 0.125, [9, 9]]]
    return clat


def _unweighted():
    clat = CompactLattice()
    clat.start = 0
    clat.arcs = [[(3, 0.0, 0.0, (), 1)], []]
    clat.final = [None, (0.0, 0.0, ())]
    return clat


@needs_kernel
def test_kaldis_lattices_written_as_the_twin_writes_them():
    lats = list(read_table("ark:" + LATTICES, "compact_lattice"))
    assert lats
    for key, clat in lats:
        fast, twin = _both(clat)
        assert fast == twin, key
        assert clat.write_binary().endswith(fast[0])


@needs_kernel
@pytest.mark.parametrize("make", [_hand_made, _unweighted, CompactLattice])
def test_odd_lattices_written_as_the_twin_writes_them(make):
    clat = make()
    fast, twin = _both(clat)
    assert fast == twin


@needs_kernel
def test_written_lattice_reads_back():
    from pynnet3.decoding.lattice import read_compact_lattice_binary
    clat = _hand_made()
    back, _ = read_compact_lattice_binary(clat.write_binary(), 0, "test")
    assert back.start == 0
    assert [[(a[0], a[1], a[2], tuple(a[3]), a[4]) for a in row] for row in back.arcs] == \
        [[(0, 0.0, 0.0, (), 1), (7, 1.5, -2.25, (3, 4, 5), 2)], [(5, 0.25, 0.5, (1,), 2)], []]
    assert back.final[2][:2] == (0.0, 0.125) and tuple(back.final[2][2]) == (9, 9)


def test_scale_identity_leaves_the_lattice_as_it_is():
    """Kaldi's ScaleLattice does nothing for the identity matrix, so weights
    it would turn into NaN (inf * 0) stay."""
    clat = _hand_made()
    clat.arcs[1] = [(5, 0.25, math.inf, (1,), 2)]
    before = ([list(r) for r in clat.arcs], list(clat.final))
    clat.scale(((1.0, 0.0), (0.0, 1.0)))
    assert ([list(r) for r in clat.arcs], list(clat.final)) == before


def test_scale_gives_the_zero_weight_for_an_infinite_graph_cost():
    clat = CompactLattice()
    clat.start = 0
    clat.arcs = [[(3, math.inf, 1.0, (), 1)], []]
    clat.final = [None, (0.5, 2.0, ())]
    clat.scale(((1.0, 0.0), (0.0, 10.0)))
    assert clat.arcs[0][0][1:3] == (math.inf, math.inf)
    assert clat.final[1][:2] == (0.5, 20.0)
    lat = Lattice()
    lat.add_states(2)
    lat.start = 0
    lat.arcs[0] = [(1, 2, math.inf, 1.0, 1)]
    lat.final[1] = (math.inf, 3.0)
    lat.scale(((1.0, 0.0), (0.0, 10.0)))
    assert lat.arcs[0][0][2:4] == (math.inf, math.inf)
    assert lat.final[1] is None
