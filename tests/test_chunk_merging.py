"""Merged chunks: which networks' outputs do not depend on the chunking
(pynnet3.nnet.chunking), how a run of whole chunks is cut into longer ones
(merged_chunk_counts), and that a computer merging chunks gives the numbers
of Kaldi's chunk-by-chunk computation. (Against Kaldi itself: kaldi-ref's
misc_layers variants in test_tool_nnet3_compute.py are computed with merged
chunks.)"""

import numpy as np
import pytest

from pynnet3.bin import nnet3_compute
from pynnet3.compute.backend import KaldiExactBackend
from pynnet3.compute.utterance import (SimpleComputationOptions, SimpleNnetComputer,
                                       merged_chunk_counts, merged_chunk_sizes,
                                       prepare_nnet_for_compute)
from pynnet3.io.table import TableWriter, read_table
from pynnet3.nnet.chunking import nnet_is_chunk_invariant
from pynnet3.nnet.component_ops import set_batchnorm_test_mode, set_dropout_test_mode
from pynnet3.nnet.nnet import Nnet

from conftest import TEST_DATA

LDA = TEST_DATA / "compute" / "tdnn_lda"
XVECTOR = TEST_DATA / "compute" / "xvector"


def _tdnn(first_input, input_dim):
    """A small TDNN whose first affine layer reads ``first_input`` (of
    dimension ``input_dim``)."""
    return Nnet.from_config("""\
input-node name=input dim=4
input-node name=ivector dim=3
component name=affine1 type=NaturalGradientAffineComponent input-dim=%d output-dim=6
component name=relu1 type=RectifiedLinearComponent dim=6
component name=affine2 type=NaturalGradientAffineComponent input-dim=12 output-dim=5
component-node name=affine1 component=affine1 input=%s
component-node name=relu1 component=relu1 input=affine1
component-node name=affine2 component=affine2 input=Append(Offset(relu1, -2), relu1)
output-node name=output input=affine2
""" % (input_dim, first_input))


@pytest.mark.parametrize("descriptor, dim, invariant", [
    ("Append(Offset(input, -1), input, Offset(input, 1))", 12, True),
    ("Append(input, ReplaceIndex(ivector, t, 0))", 7, True),
    ("Append(Round(input, 3), Switch(input, Offset(input, 1)))", 8, True),
    ("Append(input, ReplaceIndex(input, t, 0))", 8, False),
    ("Sum(input, IfDefined(Offset(input, -3)))", 4, False),
    ("Append(input, Failover(Offset(input, -3), input))", 8, False),
])
def test_descriptors(descriptor, dim, invariant):
    assert nnet_is_chunk_invariant(_tdnn(descriptor, dim)) is invariant


def test_recurrent_network_is_not_chunk_invariant():
    nnet = Nnet.from_config("""\
input-node name=input dim=4
component name=affine1 type=NaturalGradientAffineComponent input-dim=9 output-dim=5
component-node name=affine1 component=affine1 input=Append(input, IfDefined(Offset(affine1, -1)))
output-node name=output input=affine1
""")
    assert not nnet_is_chunk_invariant(nnet)


def test_optional_inputs_are_not_chunk_invariant():
    conv = """\
input-node name=input dim=4
component name=conv type=TimeHeightConvolutionComponent num-filters-in=1 height-in=4 \
num-filters-out=2 height-out=4 height-offsets=-1,0,1 time-offsets=-1,0,1 %s
component-node name=conv component=conv input=input
output-node name=output input=conv
"""
    assert nnet_is_chunk_invariant(Nnet.from_config(conv % ""))
    assert not nnet_is_chunk_invariant(Nnet.from_config(conv % "required-time-offsets=0"))
    # statistics pooling (an x-vector extractor)
    assert not nnet_is_chunk_invariant(Nnet.read(str(XVECTOR / "extract.raw")))
    assert nnet_is_chunk_invariant(prepare_nnet_for_compute(Nnet.read(str(LDA / "model.raw"))))


def test_batchnorm_and_dropout_only_in_test_mode():
    nnet = Nnet.from_config("""\
input-node name=input dim=4
component name=affine1 type=NaturalGradientAffineComponent input-dim=8 output-dim=6
component name=bn1 type=BatchNormComponent dim=6
component name=drop1 type=DropoutComponent dim=6 dropout-proportion=0.5
component-node name=affine1 component=affine1 input=Append(Offset(input, -1), input)
component-node name=bn1 component=bn1 input=affine1
component-node name=drop1 component=drop1 input=bn1
output-node name=output input=drop1
""")
    assert not nnet_is_chunk_invariant(nnet)
    set_batchnorm_test_mode(nnet, True)
    assert not nnet_is_chunk_invariant(nnet)        # dropout still draws per row
    set_dropout_test_mode(nnet, True)
    assert nnet_is_chunk_invariant(nnet)


@pytest.mark.parametrize("num_chunks, largest, parts, counts", [
    (20, 16, 1, [16, 4]),
    (20, 16, 2, [8, 2, 8, 2]),
    (20, 12, 1, [12, 8]),
    (6, 4, 1, [4, 2]),
    (6, 6, 1, [6]),
    (7, 4, 2, [3, 4]),
    (1, 4, 2, [1]),
    (5, 1, 1, [1, 1, 1, 1, 1]),
])
def test_merged_chunk_counts(num_chunks, largest, parts, counts):
    assert merged_chunk_counts(num_chunks, largest, parts) == counts


def test_merged_chunk_counts_cover_with_few_sizes():
    assert merged_chunk_sizes(20) == [1, 2, 3, 4, 6, 8, 12, 16]
    assert merged_chunk_sizes(1) == [1]
    for num_chunks in range(1, 70):
        for largest in (1, 2, 8, 12, 32):
            sizes = merged_chunk_sizes(largest)
            for parts in (1, 2, 3):
                counts = merged_chunk_counts(num_chunks, largest, parts)
                assert sum(counts) == num_chunks
                assert set(counts) <= set(sizes)


# -- computing -----------------------------------------------------------------------------------

def _lda_inputs():
    feats = dict(read_table("ark:%s" % (LDA / "feats.ark"), "matrix"))
    online = dict(read_table("ark:%s" % (LDA / "online-ivectors.ark"), "matrix"))
    return feats, online


def _computer(opts, **kwargs):
    nnet = prepare_nnet_for_compute(Nnet.read(str(LDA / "model.raw")))
    return SimpleNnetComputer(nnet, opts, **kwargs)


def _longest_chunk(computer):
    """The most output frames of any chunk shape the computer compiled."""
    return max(key[2] for key in computer._cache)


OPTS = [SimpleComputationOptions(frames_per_chunk=20),
        SimpleComputationOptions(frames_per_chunk=20, extra_left_context=4),
        SimpleComputationOptions(frame_subsampling_factor=3, frames_per_chunk=15)]


@pytest.mark.parametrize("opts", OPTS, ids=["chunk20", "chunk20_ctx", "subsample3"])
@pytest.mark.parametrize("threads", [1, 2])
def test_merged_chunks_give_kaldis_chunk_by_chunk_numbers(opts, threads):
    feats, online = _lda_inputs()
    merged = _computer(opts, num_threads=threads)
    kaldi = _computer(opts, max_chunks=1)          # Kaldi's chunks, one at a time
    assert merged.merges_chunks and not kaldi.merges_chunks
    step = merged.subsampled_frames_per_chunk()
    for utt, f in feats.items():
        ivector = online[utt][0]
        np.testing.assert_allclose(merged.compute_utterance(f, ivector),
                                   kaldi.compute_utterance(f, ivector), rtol=1e-5, atol=1e-5)
    assert _longest_chunk(merged) > step            # some chunks were merged ...
    assert _longest_chunk(kaldi) == step


def test_online_ivectors_merge_only_equal_ones():
    feats, online = _lda_inputs()
    opts = SimpleComputationOptions(frames_per_chunk=20)
    varying = _computer(opts)
    for utt, f in feats.items():
        varying.compute_utterance(f, online_ivectors=online[utt], online_ivector_period=10)
    assert _longest_chunk(varying) == 20          # each chunk has an i-vector of its own
    constant, kaldi = _computer(opts), _computer(opts, max_chunks=1)
    for utt, f in feats.items():
        rows = np.repeat(online[utt][:1], online[utt].shape[0], axis=0)
        np.testing.assert_allclose(
            constant.compute_utterance(f, online_ivectors=rows, online_ivector_period=10),
            kaldi.compute_utterance(f, online_ivectors=rows, online_ivector_period=10),
            rtol=1e-5, atol=1e-5)
    assert _longest_chunk(constant) > 20


def test_kaldi_exact_arithmetic_keeps_kaldis_chunks():
    computer = _computer(SimpleComputationOptions(frames_per_chunk=20),
                         backend=KaldiExactBackend(1))
    assert not computer.merges_chunks


def test_the_tool_says_once_that_it_merges(tmp_path, capsys):
    args = ["--frames-per-chunk=20", "--ivectors=ark:%s" % (tmp_path / "ivectors.ark"),
            str(LDA / "model.raw"), "ark:%s" % (LDA / "feats.ark"),
            "ark:%s" % (tmp_path / "o.ark")]
    feats, online = _lda_inputs()
    with TableWriter("ark:%s" % (tmp_path / "ivectors.ark"), kind="vector") as w:
        for utt in feats:
            w.write(utt, online[utt][0])
    assert nnet3_compute.main(args) == 0
    assert capsys.readouterr().err.count("computed as longer chunks") == 1
    assert nnet3_compute.main(["--chunks-per-computation=1"] + args) == 0
    assert "longer chunks" not in capsys.readouterr().err


def test_threads_share_the_merged_rows():
    """Each thread computes its own merged chunks with its own matrices, so
    together they take no longer ones than one thread does."""
    opts = SimpleComputationOptions(frames_per_chunk=20)
    one, two = _computer(opts), _computer(opts, num_threads=2)
    assert one.merged_chunk_frames() == 320            # 16 chunks: at most 400 rows
    if two.num_threads != 2:
        pytest.skip("NumPy's BLAS thread count cannot be set here: one compute thread")
    assert two.merged_chunk_frames() == 160            # 8 chunks: at most 200 rows each
