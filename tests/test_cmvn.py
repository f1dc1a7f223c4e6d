"""compute-cmvn-stats and apply-cmvn (Kaldi's transform/cmvn.cc arithmetic),
checked against a frame-by-frame, element-by-element twin written from
Kaldi's description of the arithmetic (double sums of float products; offset
and scale computed in double, rounded to float, applied in float)."""

import io
import math
import os
from contextlib import redirect_stderr

import numpy as np
import pytest

from pynnet3.bin import apply_cmvn as apply_cmvn_tool
from pynnet3.bin import compute_cmvn_stats
from pynnet3.errors import PynnetError
from pynnet3.feat.cmvn import (acc_cmvn_stats, apply_cmvn, apply_cmvn_reverse,
                               fake_stats_for_some_dims, init_cmvn_stats)
from pynnet3.io.files import open_input
from pynnet3.io.table import TableWriter, read_table

DATA = os.path.join(os.path.dirname(__file__), "data", "decode", "tdnn_lda")
F32 = np.float32


def twin_stats(frames, weights=None):
    dim = len(frames[0])
    stats = [[0.0] * (dim + 1), [0.0] * (dim + 1)]
    for i, row in enumerate(frames):
        w = F32(1.0 if weights is None else weights[i])
        if w == 0.0:
            continue
        stats[0][dim] += float(w)
        for d in range(dim):
            x = F32(row[d])
            stats[0][d] += float(x * w)
            stats[1][d] += float(x * x * w)
    return np.array(stats)


def twin_apply(stats, var_norm, feats):
    dim = stats.shape[1] - 1
    count = stats[0, dim]
    out = np.array(feats, dtype=np.float32)
    for d in range(dim):
        mean = stats[0, d] / count
        if var_norm:
            scale = 1.0 / math.sqrt(max(stats[1, d] / count - mean * mean, 1e-20))
            offset, scale = F32(-(mean * scale)), F32(scale)
        else:
            offset, scale = F32(F32(-1.0 / count) * stats[0, d]), None
        for r in range(out.shape[0]):
            x = out[r, d]
            if scale is not None:
                x = F32(x * scale)
            out[r, d] = F32(x + offset)
    return out


@pytest.fixture(scope="module")
def feats():
    return dict(read_table("ark:" + os.path.join(DATA, "feats.ark")))


def test_stats_and_normalization_equal_the_twin(feats):
    rng = np.random.default_rng(0)
    for key, m in feats.items():
        stats = acc_cmvn_stats(m, init_cmvn_stats(m.shape[1]))
        assert np.array_equal(stats, twin_stats(m)), key
        w = rng.random(m.shape[0]).astype(np.float32)
        w[::3] = 0.0
        if w.sum() >= 1.0:
            assert np.array_equal(acc_cmvn_stats(m, init_cmvn_stats(m.shape[1]), w),
                                  twin_stats(m, w))
        for var_norm in (False, True):
            if m.shape[0] > 1:
                assert np.array_equal(apply_cmvn(stats, var_norm, m),
                                      twin_apply(stats, var_norm, m)), (key, var_norm)
    # Accumulating utterance after utterance continues the same running sums.
    both = init_cmvn_stats(13)
    for m in feats.values():
        acc_cmvn_stats(m, both)
    assert np.array_equal(both, twin_stats(np.vstack(list(feats.values()))))


def test_normalized_features_have_zero_mean_unit_variance(feats):
    m = feats["utt4"]
    stats = acc_cmvn_stats(m, init_cmvn_stats(13))
    out = apply_cmvn(stats, True, m)
    assert np.abs(out.mean(axis=0)).max() < 1e-5
    assert np.abs(out.std(axis=0) - 1).max() < 1e-5
    back = apply_cmvn_reverse(stats, True, out)
    assert np.allclose(back, m, atol=1e-4)
    means_only = apply_cmvn_reverse(stats, False, apply_cmvn(stats, False, m))
    assert np.allclose(means_only, m, atol=1e-4)
    skipped = fake_stats_for_some_dims([0, 12], stats.copy())
    kept = apply_cmvn(skipped, True, m)
    assert np.array_equal(kept[:, [0, 12]], m[:, [0, 12]])


def test_bad_stats_are_errors(feats):
    m = feats["utt2"]
    with pytest.raises(PynnetError, match="Dim mismatch"):
        apply_cmvn(init_cmvn_stats(12), False, m)
    with pytest.raises(PynnetError, match="Insufficient stats"):
        apply_cmvn(init_cmvn_stats(13), False, m)
    with pytest.raises(PynnetError, match="no variance stats"):
        apply_cmvn(np.ones((1, 14)), True, m)


def run(tool, argv):
    err = io.StringIO()
    with redirect_stderr(err):
        status = tool.main(argv)
    return status, err.getvalue()


def test_tools_per_utterance_per_speaker_and_global(feats, tmp_path):
    ark = "ark:" + os.path.join(DATA, "feats.ark")
    (tmp_path / "spk2utt").write_text("A utt1 utt2\nB utt3 utt4 utt9\n")
    (tmp_path / "utt2spk").write_text("utt1 A\nutt2 A\nutt3 B\nutt4 B\n")
    status, log = run(compute_cmvn_stats, [ark, "ark,t:%s" % (tmp_path / "utt.txt")])
    assert status == 0 and "Done accumulating CMVN stats for 4 utterances; 0 had errors." in log
    per_utt = dict(read_table("ark:%s" % (tmp_path / "utt.txt"), "double_matrix"))
    assert np.allclose(per_utt["utt3"], twin_stats(feats["utt3"]), rtol=1e-6)
    status, log = run(compute_cmvn_stats, ["--spk2utt=ark:%s" % (tmp_path / "spk2utt"), ark,
                                           "ark,scp:%s,%s" % (tmp_path / "spk.ark",
                                                              tmp_path / "spk.scp")])
    assert status == 0, log
    assert "Did not find features for utterance utt9" in log
    assert "for 4 utterances; 1 had errors." in log
    per_spk = dict(read_table("scp:%s" % (tmp_path / "spk.scp"), "double_matrix"))
    assert np.array_equal(per_spk["B"], twin_stats(np.vstack([feats["utt3"], feats["utt4"]])))
    status, log = run(compute_cmvn_stats, ["--binary=false", ark, str(tmp_path / "global")])
    assert status == 0 and "Wrote global CMVN stats to" in log
    glob = open_input(str(tmp_path / "global")).read_matrix()
    assert glob.dtype == np.float32 and glob.shape == (2, 14) and glob[0, 13] == 531

    out = tmp_path / "normed.ark"
    status, log = run(apply_cmvn_tool, ["--norm-vars=true", "--utt2spk=ark:%s"
                                        % (tmp_path / "utt2spk"), "scp:%s" % (tmp_path / "spk.scp"),
                                        ark, "ark:%s" % out])
    assert status == 0, log
    assert "Applied cepstral mean and variance normalization to 4 utterances, errors on 0" \
        in log
    normed = dict(read_table("ark:%s" % out))
    assert np.array_equal(normed["utt4"], twin_apply(per_spk["B"], True, feats["utt4"]))
    status, log = run(apply_cmvn_tool, [str(tmp_path / "global"), ark, "ark:%s" % out])
    assert status == 0 and "Applied cepstral mean normalization to 4 utterances" in log
    status, log = run(apply_cmvn_tool, ["--norm-means=false", "--norm-vars=false",
                                        "scp:%s" % (tmp_path / "spk.scp"), ark, "ark:%s" % out])
    assert status == 0 and "Copied 4 utterances." in log
    assert all(np.array_equal(v, feats[k]) for k, v in read_table("ark:%s" % out))
    # Missing speaker statistics: a WARNING, the utterance left out.
    (tmp_path / "utt2spk").write_text("utt1 A\nutt2 A\nutt3 C\nutt4 B\n")
    status, log = run(apply_cmvn_tool, ["--utt2spk=ark:%s" % (tmp_path / "utt2spk"),
                                        "scp:%s" % (tmp_path / "spk.scp"), ark,
                                        "ark:%s" % out])
    assert status == 0 and "No normalization statistics available for key utt3" in log
    assert [k for k, _ in read_table("ark:%s" % out)] == ["utt1", "utt2", "utt4"]
    status, log = run(apply_cmvn_tool, ["--norm-vars=true", "--norm-means=false",
                                        "ark:x", ark, "ark:%s" % (tmp_path / "never.ark")])
    assert status == 255 and "cannot normalize the variance" in log
    assert not (tmp_path / "never.ark").exists()


def test_reverse_and_skip_dims_options(feats, tmp_path):
    ark = "ark:" + os.path.join(DATA, "feats.ark")
    status, log = run(compute_cmvn_stats, [ark, "ark:%s" % (tmp_path / "s.ark")])
    assert status == 0, log
    stats = dict(read_table("ark:%s" % (tmp_path / "s.ark"), "double_matrix"))
    status, log = run(apply_cmvn_tool, ["--norm-vars=true", "--reverse=true", "--skip-dims=0:5",
                                        "ark:%s" % (tmp_path / "s.ark"), ark,
                                        "ark:%s" % (tmp_path / "r.ark")])
    assert status == 0, log
    out = dict(read_table("ark:%s" % (tmp_path / "r.ark")))
    expected = apply_cmvn_reverse(fake_stats_for_some_dims([0, 5], stats["utt3"].copy()), True,
                                  feats["utt3"])
    assert np.array_equal(out["utt3"], expected)
    assert np.array_equal(out["utt3"][:, 0], feats["utt3"][:, 0])
    status, log = run(apply_cmvn_tool, ["--skip-dims=a:b", "ark:%s" % (tmp_path / "s.ark"), ark,
                                        "ark:/dev/null"])
    assert status == 255 and "Bad --skip-dims option" in log


def test_copy_without_mean_normalization_keeps_compressed_features(feats, tmp_path):
    from pynnet3.io.compressed import compress
    # A binary archive of compressed matrices, as Kaldi writes them.
    data = b"".join(key.encode() + b" \0B" + compress(m) for key, m in feats.items())
    (tmp_path / "c.ark").write_bytes(data)
    (tmp_path / "dummy.scp").write_text("")
    for out, kind in (("copy.ark", "ark"), ("copy.txt", "ark,t")):
        status, log = run(apply_cmvn_tool, ["--norm-means=false",
                                            "scp:%s" % (tmp_path / "dummy.scp"),
                                            "ark:%s" % (tmp_path / "c.ark"),
                                            "%s:%s" % (kind, tmp_path / out)])
        assert status == 0 and "Copied 4 utterances." in log, log
    assert (tmp_path / "copy.ark").read_bytes() == data
    # In text, Kaldi writes the decompressed values as a plain matrix.
    with TableWriter("ark,t:%s" % (tmp_path / "expected.txt")) as w:
        for key, value in read_table("ark:%s" % (tmp_path / "c.ark")):
            w.write(key, value)
    assert (tmp_path / "copy.txt").read_bytes() == (tmp_path / "expected.txt").read_bytes()
