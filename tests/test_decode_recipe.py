"""A decode.sh-like recipe (tests/data/decode/decode_recipe.sh: CMVN through
apply-cmvn, split data, parallel jobs (nnet3-latgen-faster-parallel) writing
``| gzip -c`` lattices, analyze_lats.sh's lattice-depth-per-frame and
ali-to-phones, lattice-scale | lattice-add-penalty | lattice-best-path
scoring and the --decode-mbr pipeline through lattice-prune |
lattice-mbr-decode) run with pynnet3's tools first on PATH (wrappers calling
``python -m pynnet3.bin.X``)."""

import os
import subprocess
import sys

import numpy as np

from pynnet3.io.table import TableWriter, read_table

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data", "decode", "tdnn_lda")
TOOLS = {"nnet3-latgen-faster": "nnet3_latgen_faster", "lattice-scale": "lattice_scale",
         "lattice-add-penalty": "lattice_add_penalty",
         "lattice-best-path": "lattice_best_path", "lattice-copy": "lattice_copy",
         "lattice-1best": "lattice_1best", "compute-wer": "compute_wer",
         "align-text": "align_text", "compute-wer-bootci": "compute_wer_bootci",
         "nnet3-latgen-faster-parallel": "nnet3_latgen_faster_parallel",
         "apply-cmvn": "apply_cmvn", "compute-cmvn-stats": "compute_cmvn_stats",
         "lattice-depth-per-frame": "lattice_depth_per_frame", "ali-to-phones": "ali_to_phones",
         "lattice-prune": "lattice_prune", "lattice-mbr-decode": "lattice_mbr_decode"}


def make_tool_dir(path):
    path.mkdir()
    for name, module in TOOLS.items():
        script = path / name
        script.write_text('#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}" exec "%s" -m '
                          'pynnet3.bin.%s "$@"\n' % (ROOT, sys.executable, module))
        script.chmod(0o755)
    return path


def test_recipe_decode_and_score(tmp_path):
    bin_dir = make_tool_dir(tmp_path / "bin")
    feats = dict(read_table("ark:" + os.path.join(DATA, "feats.ark")))
    with TableWriter("ark,scp:%s,%s" % (tmp_path / "feats.ark", tmp_path / "feats.scp")) as w:
        for key, value in feats.items():
            w.write(key, np.asarray(value))
    words = {}
    for line in open(os.path.join(DATA, "words.txt")):
        sym, num = line.split()
        words[num] = sym
    expected = []
    for line in open(os.path.join(DATA, "words.default.txt")):
        fields = line.split()
        expected.append(" ".join([fields[0]] + [words[w] for w in fields[1:]]))
    # A reference text against the decoder's words (one word per utterance):
    # utt1's reference says its word twice (a deletion), utt2's says another
    # word (a substitution), utt3 and utt4 agree, utt5 was not decoded.
    hyp = dict(line.split(None, 1) for line in expected)
    other = "ZZZ_OTHER"
    ref_text = tmp_path / "text"
    ref_text.write_text("utt1 %s %s\nutt2 %s\nutt3 %s\nutt4 %s\nutt5 a b\n"
                        % (hyp["utt1"], hyp["utt1"], other, hyp["utt3"], hyp["utt4"]))
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), NUM_THREADS="2",
               OPENBLAS_NUM_THREADS="1")
    exp = tmp_path / "decode"
    subprocess.run(["bash", os.path.join(HERE, "data", "decode", "decode_recipe.sh"), "2",
                    os.path.join(DATA, "final.mdl"), DATA, str(tmp_path / "feats.scp"),
                    "ark:" + os.path.join(DATA, "online-ivectors.ark"), str(exp),
                    str(ref_text)],
                   env=env, check=True, timeout=600)
    for n in (1, 2):
        log = (exp / "log" / ("decode.%d.log" % n)).read_text()
        assert log.startswith("nnet3-latgen-faster-parallel --num-threads=2 "), log
        assert "Done 2 utterances, failed for 0" in log, log
        assert (exp / ("lat.%d.gz" % n)).stat().st_size > 0
    assert "Done accumulating CMVN stats for 4 utterances; 0 had errors." in \
        (exp / "log" / "cmvn.log").read_text()
    # analyze_lats.sh's statistics: one depth per frame of the best path, the
    # phones of the decoded words ("bad" = b a d) with their lengths.
    depth = dict(read_table("ark:gunzip -c %s/depth_tmp.1.gz %s/depth_tmp.2.gz|" % (exp, exp),
                            "int32_vector"))
    ali = dict(read_table("ark:gunzip -c %s/ali_tmp.1.gz %s/ali_tmp.2.gz|" % (exp, exp),
                          "int32_vector"))
    kaldi_ali = dict(read_table("ark:" + os.path.join(DATA, "ali.default.txt"), "int32_vector"))
    assert ali == kaldi_ali
    assert {k: len(v) for k, v in depth.items()} == {k: len(v) for k, v in ali.items()}
    assert (exp / "phone_stats.2").read_text().splitlines()[0] == "utt3 3 3 ; 2 3 ; 5 167 "
    frames = dict(read_table("ark:gunzip -c %s/ali_frame_tmp.gz|" % exp, "int32_vector"))
    assert [len(frames[k]) for k in sorted(frames)] == [7, 50, 173, 301]
    # MBR decoding of these confident one-word lattices gives the best path.
    assert [line.split() for line in (exp / "scoring" / "mbr_10.int").read_text().splitlines()] \
        == [line.split() for line in open(os.path.join(DATA, "words.default.txt"))]
    assert "Average Bayes Risk per sentence is" in (exp / "log" / "mbr.10.log").read_text()
    # The lattices were decoded with acoustic scale 0.1: LM weight 10 gives
    # back the decoder's own best path.
    assert (exp / "scoring" / "10.txt").read_text().splitlines() == expected
    for lmwt in (9, 11):
        assert len((exp / "scoring" / ("%d.txt" % lmwt)).read_text().splitlines()) == 4
    # compute-wer's report, after the command line echoed to stderr (">&").
    wer = (exp / "wer_10").read_text().splitlines()
    assert wer[0].startswith("compute-wer --text --mode=present ark:"), wer
    assert wer[1:] == ["%WER 40.00 [ 2 / 5, 0 ins, 1 del, 1 sub ] [PARTIAL]",
                       "%SER 50.00 [ 2 / 4 ]",
                       "Scored 4 sentences, 1 not present in hyp."], wer
    # align-text on the best LM weight (all three decode the same words here);
    # Kaldi's trace-back, from the end, prefers the diagonal, so utt1's
    # deleted word is the first one.
    w = {key: word.strip() for key, word in hyp.items()}
    assert (exp / "scoring" / "per_utt_align").read_text().splitlines() == [
        "utt1 %s *** ; %s %s " % (w["utt1"], w["utt1"], w["utt1"]),
        "utt2 %s %s " % (other, w["utt2"]),
        "utt3 %s %s " % (w["utt3"], w["utt3"]),
        "utt4 %s %s " % (w["utt4"], w["utt4"])]
    assert "Done 4 sentences, failed for 1" in (exp / "log" / "stats1.log").read_text()
    # Bootstrap over (errors, words) = (1, 2), (1, 1), (0, 1), (0, 1); the
    # figures are those of a scratch C++ re-run of Kaldi's bootstrap.
    assert (exp / "scoring" / "wer_bootci").read_text() == \
        "Set1: %WER 39.18 95% Conf Interval [ 3.26, 75.10 ]\n"
