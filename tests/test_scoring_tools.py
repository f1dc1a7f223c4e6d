"""compute-wer and align-text (steps/scoring/score_kaldi_wer.sh's tools):
expected outputs derived by hand from Kaldi's src/bin/compute-wer.cc,
src/bin/align-text.cc and util/edit-distance-inl.h (there is no kaldi-ref
output for these tools)."""

import os
import subprocess

from pynnet3.bin import align_text, compute_wer
from pynnet3.decode.edit_distance import levenshtein_alignment, levenshtein_edit_distance

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
    ref, hyp = _tables(tmp_path, "u1 a\n", "u2 a\n")
    assert align_text.main([ref, hyp, "ark,t:%s" % out]) == 1
    assert "Done 0 sentences, failed for 1" in capsys.readouterr().err
