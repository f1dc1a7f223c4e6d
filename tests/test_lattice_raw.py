"""The raw-lattice and best-path kernels (pynnet3/_fast/token_lattice_kernel.pyx)
against their plain-Python twins (pynnet3.decode.token_lattice): the same
states, arcs, order, weights and best paths, on real decoder output and on
random token lattices whose epsilon links make TopSortTokens renumber."""

import os

import numpy as np
import pytest

from pynnet3._fast.determinize_lattice_kernel import CLattice
from pynnet3._fast.token_lattice_kernel import best_path_arrays, raw_lattice_arrays
from pynnet3.decoding.config import LatticeFasterDecoderConfig
from pynnet3.decoding.decodable import DecodableAmNnetSimple, decodable_nnet_computer, transition_id_to_pdf_table
from pynnet3.decoding.lattice_faster_decoder import LatticeFasterDecoder
from pynnet3.decoding.fst import read_fst
from pynnet3.decoding.token_lattice import TokenLattice, best_path, get_raw_lattice
from pynnet3.errors import PynnetError
from pynnet3.io.table import RandomAccessTableReader, SequentialTableReader
from pynnet3.model.am import read_mdl

DATA = os.path.join(os.path.dirname(__file__), "data", "decode", "tdnn_lda")


def kernel_lattice(tl):
    arrays = raw_lattice_arrays(tl)
    return CLattice.from_arrays(*arrays).to_lattice(), best_path_arrays(*arrays)


def assert_same(tl):
    twin = get_raw_lattice(tl)
    lat, found = kernel_lattice(tl)
    assert lat.start == twin.start
    assert lat.arcs == twin.arcs
    assert lat.final == twin.final
    path = best_path(twin)
    if path is None:
        assert found is None
    else:
        alignment, words, weight = found
        assert (alignment.tolist(), words.tolist(), weight) == \
            (path.alignment, path.words, path.weight)


@pytest.fixture(scope="module")
def decodables():
    trans_model, am_nnet = read_mdl(os.path.join(DATA, "final.mdl"))
    computer = decodable_nnet_computer(am_nnet)
    tid_to_pdf = transition_id_to_pdf_table(trans_model)
    ivectors = RandomAccessTableReader("ark:" + os.path.join(DATA, "online-ivectors.ark"))
    return tid_to_pdf, [DecodableAmNnetSimple(computer, tid_to_pdf, feats,
                                              online_ivectors=ivectors.value(key),
                                              online_ivector_period=10)
                        for key, feats in SequentialTableReader(
                            "ark:" + os.path.join(DATA, "feats.ark"))]


@pytest.mark.parametrize("options", [dict(beam=15, lattice_beam=8),
                                     dict(beam=8, lattice_beam=4, max_active=200),
                                     dict(beam=11, lattice_beam=6)])
def test_decoder_output(decodables, options):
    tid_to_pdf, ds = decodables
    decoder = LatticeFasterDecoder(read_fst(os.path.join(DATA, "HCLG.fst")),
                                   LatticeFasterDecoderConfig(**options))
    for d in ds:
        decoder.decode(d.loglikes, tid_to_pdf)
        assert_same(decoder.token_lattice())


def random_token_lattice(rng, num_frames, has_final, epsilon_cycle=False):
    """Tokens per frame in a random list order; emitting links to the next
    frame, epsilon links inside a frame along a random order (no cycles,
    unless ``epsilon_cycle``), so that TopSortTokens has to move tokens."""
    sizes = rng.integers(1, 7, size=num_frames + 1)
    frame_begin = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    links = []
    for f in range(num_frames + 1):
        b, e = int(frame_begin[f]), int(frame_begin[f + 1])
        topo = rng.permutation(np.arange(b, e))
        rank = {int(t): i for i, t in enumerate(topo)}
        for tok in range(b, e):
            mine = []
            for nt in range(b, e):
                if rank[nt] > rank[tok] and rng.random() < 0.4:
                    mine.append((nt, 0, int(rng.integers(0, 4))))
            if epsilon_cycle and f == 0 and e - b >= 2 and tok == b:
                mine.append((b + 1, 0, 0))
            if epsilon_cycle and f == 0 and e - b >= 2 and tok == b + 1:
                mine.append((b, 0, 0))
            if f < num_frames:
                nb, ne = int(frame_begin[f + 1]), int(frame_begin[f + 2])
                for nt in rng.choice(np.arange(nb, ne), size=min(2, ne - nb), replace=False):
                    mine.append((int(nt), int(rng.integers(1, 50)), int(rng.integers(0, 4))))
            rng.shuffle(mine)
            links.append(mine)
    link_begin = np.concatenate([[0], np.cumsum([len(x) for x in links])]).astype(np.int64)
    flat = [link for x in links for link in x]
    n = len(flat)
    num_tokens = int(frame_begin[-1])
    final = np.full(num_tokens, np.inf, dtype=np.float32)
    last = int(frame_begin[-2])
    if has_final:
        final[last:] = np.where(rng.random(num_tokens - last) < 0.5,
                                rng.random(num_tokens - last).astype(np.float32), np.inf)
        final[last] = 0.25
    return TokenLattice(
        frame_begin, link_begin, np.array([x[0] for x in flat], dtype=np.int32),
        np.array([x[1] for x in flat], dtype=np.int32),
        np.array([x[2] for x in flat], dtype=np.int32),
        rng.random(n).astype(np.float32) * 3, rng.random(n).astype(np.float32) * 5 - 1,
        rng.random(num_frames + 1).astype(np.float32), final, has_final)


@pytest.mark.parametrize("seed", range(40))
def test_random_token_lattices(seed):
    rng = np.random.default_rng(seed)
    assert_same(random_token_lattice(rng, int(rng.integers(1, 12)), bool(seed % 3)))


def test_epsilon_loop_is_an_error():
    rng = np.random.default_rng(5)
    tl = random_token_lattice(rng, 3, True, epsilon_cycle=True)
    with pytest.raises(PynnetError, match="Epsilon loops exist"):
        get_raw_lattice(tl)
    with pytest.raises(PynnetError, match="Epsilon loops exist"):
        raw_lattice_arrays(tl)
