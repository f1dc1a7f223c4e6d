"""compute-wer, align-text and compute-wer-bootci (steps/scoring/score_kaldi_wer.sh's tools):
expected outputs derived by hand from Kaldi's src/bin/compute-wer.cc,
src/bin/align-text.cc and util/edit-distance-inl.h (there is no kaldi-ref
output for these tools)."""

import ctypes
import ctypes.util
import os
import subprocess

import pytest

from pynnet3.bin import align_text, compute_wer, compute_wer_bootci
from pynnet3.decoding.edit_distance import levenshtein_alignment, levenshtein_edit_distance
from pynnet3.decoding.glibc_rand import GlibcRand

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REF = "u1 a b c\nu2 d e\nu3 f\n"
HYP = "u1 a x c d\nu2\n"


def _tables(tmp_path, ref, hyp):
    (tmp_path / "ref").write_text(ref)
    (tmp_path / "hyp").write_text(hyp)
    return "ark:%s" % (tmp_path / "ref"), "ark:%s" % (tmp_path / "hyp")


def _wer(tmp_path, capsys, ref, hyp, *options):
    status = compute_wer.main(list(options) + list(_tables(tmp_path, ref, hyp)))
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def test_edit_distance_breaks_ties_as_kaldi():
    assert levenshtein_edit_distance("abc", "axcd") == (2, 1, 0, 1)
    assert levenshtein_edit_distance("", "xy") == (2, 2, 0, 0)
    assert levenshtein_edit_distance("ab", "") == (2, 0, 2, 0)
    # Two substitutions or one deletion plus one insertion cost the same;
    # Kaldi's recursion takes a substitution only when strictly cheaper, so
    # the counts come out as 1 ins + 1 del ...
    assert levenshtein_edit_distance("ab", "ba") == (2, 1, 1, 0)
    # ... while the alignment's trace-back prefers the diagonal.
    assert levenshtein_alignment("ab", "ba", "-") == (2, [("a", "b"), ("b", "a")])
    assert levenshtein_alignment("aa", "a", "-") == (1, [("a", "-"), ("a", "a")])
    assert levenshtein_alignment("", "", "-") == (0, [])


def test_compute_wer_modes(tmp_path, capsys):
    # u1: a b c -> a x c d is one substitution and one insertion; u2: d e -> ""
    # is two deletions; u3 has no hypothesis.
    status, out, err = _wer(tmp_path, capsys, REF, HYP, "--text", "--mode=present")
    assert status == 0
    assert out == ["%WER 80.00 [ 4 / 5, 1 ins, 2 del, 1 sub ] [PARTIAL]",
                   "%SER 100.00 [ 2 / 2 ]",
                   "Scored 2 sentences, 1 not present in hyp."]
    assert err.startswith("compute-wer --text --mode=present ark:")
    status, out, _ = _wer(tmp_path, capsys, REF, HYP, "--mode=all")
    assert status == 0
    assert out == ["%WER 83.33 [ 5 / 6, 1 ins, 3 del, 1 sub ] [PARTIAL]",
                   "%SER 100.00 [ 3 / 3 ]",
                   "Scored 3 sentences, 1 not present in hyp."]
    status, out, err = _wer(tmp_path, capsys, REF, HYP)       # strict by default
    assert status == 255 and out == []
    assert "ERROR (compute-wer[5.5]:" in err
    assert err.rstrip().endswith("No hypothesis for key u3 and strict mode specifier.")
    status, out, _ = _wer(tmp_path, capsys, REF, HYP + "u3 f\n", "--mode=strict")
    assert out == ["%WER 66.67 [ 4 / 6, 1 ins, 2 del, 1 sub ]",
                   "%SER 66.67 [ 2 / 3 ]",
                   "Scored 3 sentences, 0 not present in hyp."]


def test_compute_wer_empty_and_nothing_scored(tmp_path, capsys):
    # 0 / 0 is x86's default NaN (sign bit set): Kaldi prints "-nan".
    _, out, _ = _wer(tmp_path, capsys, "u1\n", "u1\n")
    assert out == ["%WER -nan [ 0 / 0, 0 ins, 0 del, 0 sub ]", "%SER 0.00 [ 0 / 1 ]",
                   "Scored 1 sentences, 0 not present in hyp."]
    _, out, _ = _wer(tmp_path, capsys, "u1\n", "u1 x\n")
    assert out == ["%WER inf [ 1 / 0, 1 ins, 0 del, 0 sub ]", "%SER 100.00 [ 1 / 1 ]",
                   "Scored 1 sentences, 0 not present in hyp."]
    status, out, _ = _wer(tmp_path, capsys, "u1 a\n", "u2 a\n", "--mode=present")
    assert status == 0
    assert out == ["%WER -nan [ 0 / 0, 0 ins, 0 del, 0 sub ] [PARTIAL]", "%SER -nan [ 0 / 0 ]",
                   "Scored 0 sentences, 1 not present in hyp."]


def test_compute_wer_rounds_through_float(tmp_path, capsys):
    # 100 * 1462 / 1491 = 98.0550... in double but 98.0550003... as a float,
    # which Kaldi prints ("%.2f" of the double would say 98.05).
    ref = "".join("u%d %d\n" % (i, i) for i in range(1491))
    hyp = "".join("u%d %d\n" % (i, i if i < 29 else -1) for i in range(1491))
    _, out, _ = _wer(tmp_path, capsys, ref, hyp)
    assert out[0] == "%WER 98.06 [ 1462 / 1491, 0 ins, 0 del, 1462 sub ]"
    assert out[1] == "%SER 98.06 [ 1462 / 1491 ]"


def test_compute_wer_bad_mode_and_usage(tmp_path, capsys):
    status, out, err = _wer(tmp_path, capsys, REF, HYP, "--mode=some")
    assert status == 255 and out == []
    assert err.rstrip().endswith('--mode option invalid: expected "present"|"all"|"strict", '
                                 'got some')
    assert compute_wer.main(["ark:x"]) == 1
    assert "Usage: compute-wer [options] <ref-rspecifier> <hyp-rspecifier>" \
        in capsys.readouterr().err


def test_compute_wer_shim_reads_hypotheses_from_stdin(tmp_path):
    ref, _ = _tables(tmp_path, REF, HYP)
    run = subprocess.run([os.path.join(ROOT, "scripts", "bin", "compute-wer"), "--text",
                          "--mode=present", ref, "ark,p:-"], input=HYP.encode(),
                         capture_output=True, check=True, timeout=60)
    assert run.stdout.decode().splitlines()[0] == \
        "%WER 80.00 [ 4 / 5, 1 ins, 2 del, 1 sub ] [PARTIAL]"


def test_align_text(tmp_path, capsys):
    ref, hyp = _tables(tmp_path, REF + "u4\n", "u4\n" + HYP)
    out = tmp_path / "ali.txt"
    assert align_text.main([ref, hyp, "ark,t:%s" % out]) == 0
    assert out.read_text() == ("u1 a a ; b x ; c c ; <eps> d \n"
                               "u2 d <eps> ; e <eps> \n"
                               "u4 \n")
    err = capsys.readouterr().err
    assert "WARNING (align-text[5.5]:" in err
    assert "Key u3 is in %s, but not in %s" % (ref, hyp) in err
    assert "Done 3 sentences, failed for 1" in err
    assert align_text.main(["--special-symbol=***", "--separator=|", ref, hyp,
                            "ark,t:%s" % out]) == 0
    assert out.read_text().splitlines()[1] == "u2 d *** | e *** "


def test_align_text_errors(tmp_path, capsys):
    ref, hyp = _tables(tmp_path, "u1 a <eps> b\n", "u1 a b\n")
    out = tmp_path / "ali.txt"
    assert align_text.main([ref, hyp, "ark,t:%s" % out]) == 255
    assert "In text1, the utterance u1 contains the special symbol '<eps>'. This is not " \
        "allowed." in capsys.readouterr().err
    assert not out.exists()
    # Byte 255 (Latin-1's non-breaking space) is not part of a token.
    (tmp_path / "ref").write_text("u1 a b\n")
    (tmp_path / "hyp").write_bytes(b"u1 a b\xff\n")
    assert align_text.main([ref, hyp, "ark,t:%s" % out]) == 255
    assert "In text2, the utterance u1 contains unprintable characters." \
        in capsys.readouterr().err
    assert not out.exists()
    ref, hyp = _tables(tmp_path, "u1 a\n", "u2 a\n")
    assert align_text.main([ref, hyp, "ark,t:%s" % out]) == 1
    assert "Done 0 sentences, failed for 1" in capsys.readouterr().err


# -- compute-wer-bootci -----------------------------------------------------------

def test_glibc_rand_sequence():
    # glibc's rand() after srand(1) (or no srand at all) starts so:
    assert GlibcRand().rand_block(5) == [1804289383, 846930886, 1681692777, 1714636915,
                                         1957747793]
    g = GlibcRand(0)                    # glibc treats seed 0 as 1
    assert g.rand() == 1804289383
    assert g.rand_int(4, 4) == 4        # Kaldi's RandInt draws nothing here
    assert g.rand_int(0, 9) == 846930886 % 10


def test_glibc_rand_agrees_with_libc():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    if not hasattr(libc, "gnu_get_libc_version"):
        pytest.skip("the C library is not glibc")
    for seed in (1, 7, 12345, 2**31 + 7, 2**32 - 1):
        libc.srand(ctypes.c_uint(seed))
        expected = [libc.rand() for _ in range(3000)]
        ours = GlibcRand(seed)
        assert ours.rand_block(1000) + [ours.rand() for _ in range(1000)] + \
            ours.rand_block(1000) == expected


def _bootci(tmp_path, capsys, *args):
    status = compute_wer_bootci.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def test_compute_wer_bootci_one_replication(tmp_path, capsys):
    # One replication draws rand() % 3 three times: 1, 1, 0, i.e. u2, u2, u1:
    # (2 + 2 + 2) errors over (2 + 2 + 3) words.
    ref, hyp = _tables(tmp_path, REF, HYP + "u3 f\n")
    status, out, _ = _bootci(tmp_path, capsys, "--replications=1", ref, hyp)
    assert status == 0
    assert out == ["Set1: %WER 85.71 95% Conf Interval [ 85.71, 85.71 ]"]


def test_compute_wer_bootci_two_sets(tmp_path, capsys):
    # Expected figures from a scratch C++ program doing Kaldi's bootstrap
    # (glibc rand(), float sums) on the same per-utterance counts.
    ref, hyp = _tables(tmp_path, REF, HYP + "u3 f\n")
    (tmp_path / "hyp2").write_text("u1 a b c\nu2 d\nu3 g\n")
    hyp2 = "ark:%s" % (tmp_path / "hyp2")
    status, out, _ = _bootci(tmp_path, capsys, ref, hyp, hyp2)
    assert status == 0
    assert out == ["Set1: %WER 64.25 95% Conf Interval [ 26.23, 102.27 ]",
                   "Set2: %WER 38.63 95% Conf Interval [ -8.02, 85.28 ]",
                   "Probability of Set2 improving Set1: 73.75"]
    # With u2 missing from the second set: "present" drops u2 from both,
    # "all" counts all of u2's words as errors of the second set.
    (tmp_path / "hyp2").write_text("u1 a b c\nu3 g\n")
    _, out, _ = _bootci(tmp_path, capsys, "--mode=present", ref, hyp, hyp2)
    assert out == ["Set1: %WER 42.23 95% Conf Interval [ -6.02, 90.48 ]",
                   "Set2: %WER 37.28 95% Conf Interval [ -36.13, 110.69 ]",
                   "Probability of Set2 improving Set1: 75.19"]
    _, out, _ = _bootci(tmp_path, capsys, "--mode=all", ref, hyp, hyp2)
    assert out == ["Set1: %WER 64.25 95% Conf Interval [ 26.23, 102.27 ]",
                   "Set2: %WER 55.56 95% Conf Interval [ -7.18, 118.30 ]",
                   "Probability of Set2 improving Set1: 58.91"]
    status, out, err = _bootci(tmp_path, capsys, ref, hyp, hyp2)
    assert status == 255 and out == []
    assert err.rstrip().endswith("No hypothesis for key u2 in both transcripts comparison "
                                 "is not possible.")
    assert compute_wer_bootci.main([ref]) == 1
