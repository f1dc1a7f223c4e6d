"""pynnet3.compute_utterance / pynnet3.compute_xvector give the tools'
numbers (Kaldi's archives shipped in tests/data/compute), reuse their
prepared network, and never change the caller's network."""

import numpy as np
import pytest

import pynnet3
from pynnet3.compute.batch import BatchedSimpleComputer
from pynnet3.compute.utterance import (SimpleComputationOptions, SimpleNnetComputer,
                                       prepare_nnet_for_compute)
from pynnet3.errors import UsageError
from pynnet3.io.table import read_table

from test_tool_nnet3_compute import DATA, assert_matches

LDA = DATA / "tdnn_lda"
XV = DATA / "xvector"


def _table(path, kind="matrix"):
    return dict(read_table("ark:%s" % path, kind))


def test_compute_utterance_matches_kaldi_chunked():
    nnet = pynnet3.Nnet.read(str(LDA / "model.raw"))
    before = pynnet3.nnet_info(nnet)
    feats, ivecs = _table(LDA / "feats.ark"), _table(LDA / "online-ivectors.ark")
    ours = {utt: pynnet3.compute_utterance(nnet, f, online_ivectors=ivecs[utt],
                                           online_ivector_period=10, frames_per_chunk=17,
                                           extra_left_context=5, extra_right_context=3)
            for utt, f in feats.items()}
    assert_matches(ours, _table(LDA / "compute.chunk17_ctx.ark"), "api chunk17_ctx")
    assert pynnet3.nnet_info(nnet) == before          # the caller's network is not prepared in place
    sub = {utt: pynnet3.compute_utterance(str(LDA / "model.raw"), f, None, ivecs[utt],
                                          online_ivector_period=10,
                                          frame_subsampling_factor=3, frames_per_chunk=30)
           for utt, f in feats.items()}
    assert_matches(sub, _table(LDA / "compute.subsample3.ark"), "api subsample3")
    with pytest.raises(UsageError, match="unknown option"):
        pynnet3.compute_utterance(nnet, feats["utt1"], frames_per_chunks=10)


def test_priors_from_the_mdl():
    from pynnet3.model.am import read_mdl
    _, am = read_mdl(str(LDA / "final.mdl"))
    feats, ivecs = _table(LDA / "feats.ark"), _table(LDA / "online-ivectors.ark")
    ours = {utt: pynnet3.compute_utterance(am.nnet, f, online_ivectors=ivecs[utt],
                                           online_ivector_period=10, priors=am.priors)
            for utt, f in feats.items()}
    assert_matches(ours, _table(LDA / "compute.mdl_priors.ark"), "api priors")


def test_compute_xvector_matches_kaldi():
    nnet = pynnet3.Nnet.read(str(XV / "extract.raw"))
    feats = _table(XV / "feats.ark")
    ours = {utt: pynnet3.compute_xvector(nnet, f, chunk_size=60, min_chunk_size=100)
            for utt, f in feats.items()}
    assert_matches(ours, _table(XV / "xvector.chunk60_pad.ark", "vector"), "api xvector")


def test_batched_equals_unbatched():
    """Batched mode: chunks of several utterances in one computation give
    the unbatched numbers within float32 rounding, in input order."""
    nnet = prepare_nnet_for_compute(pynnet3.Nnet.read(str(LDA / "model.raw")))
    feats, ivecs = _table(LDA / "feats.ark"), _table(LDA / "online-ivectors.ark")
    opts = SimpleComputationOptions(frames_per_chunk=20, extra_left_context=3)
    plain = SimpleNnetComputer(nnet, opts)
    batched = BatchedSimpleComputer(SimpleNnetComputer(nnet, opts), 3)
    done = []
    for utt, f in feats.items():
        done += batched.add(utt, f, None, ivecs[utt], 10)
    done += batched.flush()
    assert [d[0] for d in done] == list(feats)
    for utt, out, frames in done:
        assert frames == feats[utt].shape[0]
        np.testing.assert_allclose(out, plain.compute_utterance(feats[utt], None, ivecs[utt],
                                                                10), rtol=1e-5, atol=1e-5)
