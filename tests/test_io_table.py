"""Kaldi tables: rspecifier/wspecifier parsing, archives and script files.

Every archive Kaldi wrote in kaldi-ref (inputs, outputs, features, i-vectors)
is read, compared with kaldi_io's values and written back byte for byte.
"""

import io
import os
import sys

import numpy as np
import pytest

from conftest import KALDI_REF, TEST_DATA
from pynnet3.errors import KaldiFormatError, PynnetError
from pynnet3.io.table import (RandomAccessTableReader, SequentialTableReader, TableWriter,
                              classify_rspecifier, classify_wspecifier, read_table)

from pynnet3.io.kaldi_io_compat import import_kaldi_io

kaldi_io = import_kaldi_io()

ARCHIVES = (sorted(KALDI_REF.glob("random/case*/inputs.ark"))
            + sorted(KALDI_REF.glob("random/case*/outputs.ark"))
            + sorted(KALDI_REF.glob("models/*/feats.ark"))
            + sorted(KALDI_REF.glob("models/*/online-ivectors.ark"))
            + sorted(KALDI_REF.glob("models/*/compute.*.ark"))
            + sorted(TEST_DATA.glob("io/**/*.ark")))
FEATS = TEST_DATA / "io" / "feats.ark"


def _id(path):
    return "/".join(path.parts[-3:])


# -- specifiers ----------------------------------------------------------------

@pytest.mark.parametrize("spec,kind,name", [
    ("ark:foo.ark", "ark", "foo.ark"),
    ("scp:foo.scp", "scp", "foo.scp"),
    ("ark,t:-", "ark", "-"),
    ("b,ark:foo", "ark", "foo"),
    ("ark,o,s,cs:foo", "ark", "foo"),
    ("scp,p,ns,ncs,no,np,bg:a b", "scp", "a b"),
    ("ark:gunzip -c foo.gz |", "ark", "gunzip -c foo.gz |"),
    ("ark:", "ark", ""),
    ("ark:a:b", "ark", "a:b"),
    ("ark,scp:foo", None, ""),     # both is only for writing
    ("ark,ark:foo", None, ""),
    ("ark,,t:foo", None, ""),      # empty option
    ("ark, t:foo", None, ""),
    ("ark,x:foo", None, ""),
    ("t:foo", None, ""),
    ("foo.ark", None, ""),
    ("ark:foo ", None, ""),        # trailing space
])
def test_classify_rspecifier(spec, kind, name):
    got_kind, got_name, _ = classify_rspecifier(spec)
    assert (got_kind, got_name) == (kind, name)


def test_rspecifier_options():
    _, _, o = classify_rspecifier("ark,o,s,cs,p:x")
    assert (o.once, o.sorted, o.called_sorted, o.permissive) == (True, True, True, True)
    _, _, o = classify_rspecifier("ark,o,no,p,np:x")
    assert (o.once, o.permissive) == (False, False)


@pytest.mark.parametrize("spec,kind,ark,scp,binary,flush", [
    ("ark:a.ark", "ark", "a.ark", "", True, False),
    ("ark,t:a.ark", "ark", "a.ark", "", False, False),
    ("t,ark,b:a.ark", "ark", "a.ark", "", True, False),
    ("ark,f:-", "ark", "-", "", True, True),
    ("ark,nf:-", "ark", "-", "", True, False),
    ("scp:a.scp", "scp", "", "a.scp", True, False),
    ("ark,scp:a.ark,a.scp", "both", "a.ark", "a.scp", True, False),
    ("ark,scp,t:a.ark,b,c.scp", "both", "a.ark", "b,c.scp", False, False),
    ("scp,ark:a.ark,a.scp", None, "", "", True, False),
    ("ark,scp:a.ark", None, "", "", True, False),
    ("ark,scp,scp:a,b", None, "", "", True, False),
    ("ark,o:a.ark", None, "", "", True, False),
    ("a.ark", None, "", "", True, False),
    ("ark:a.ark\t", None, "", "", True, False),
])
def test_classify_wspecifier(spec, kind, ark, scp, binary, flush):
    got = classify_wspecifier(spec)
    assert got[:3] == (kind, ark, scp)
    if kind is not None:
        assert (got[3].binary, got[3].flush) == (binary, flush)


def test_invalid_specifiers_raise():
    with pytest.raises(PynnetError, match="invalid rspecifier"):
        read_table("foo.ark")
    with pytest.raises(PynnetError, match="invalid wspecifier"):
        TableWriter("ark,o:foo.ark")


# -- real archives -------------------------------------------------------------

@pytest.mark.parametrize("path", ARCHIVES, ids=_id)
def test_archive_values_and_bytes(path, tmp_path):
    ours = list(read_table("ark:%s" % path))
    theirs = list(kaldi_io.read_mat_ark(str(path)))
    assert [k for k, _ in ours] == [k for k, _ in theirs]
    for (_, a), (_, b) in zip(ours, theirs):
        assert a.dtype == np.float32 and np.array_equal(a, b)
    out = tmp_path / "x.ark"
    with TableWriter("ark:%s" % out) as writer:
        for key, value in ours:
            writer.write(key, value)
    assert out.read_bytes() == path.read_bytes()


def test_text_archive_matches_kaldi_format(tmp_path):
    items = list(read_table("ark:%s" % FEATS))
    out = tmp_path / "t.ark"
    with TableWriter("ark,t:%s" % out) as writer:
        for key, value in items:
            writer.write(key, value)
    text = out.read_bytes()
    first = items[0][1]
    expected_head = ("utt1  [\n  " + " ".join("%.7g" % v for v in first[0]) + " \n").encode()
    assert text.startswith(expected_head)
    back = list(read_table("ark:%s" % out))
    theirs = list(kaldi_io.read_mat_ark(str(out)))
    for (k, a), (k2, b), (k3, c) in zip(items, back, theirs):
        assert k == k2 == k3
        assert np.array_equal(b, c)
        assert np.allclose(a, b, rtol=1e-6, atol=1e-7)
    # Re-writing what was read from text reproduces the text exactly.
    out2 = tmp_path / "t2.ark"
    with TableWriter("ark,t:%s" % out2) as writer:
        for key, value in back:
            writer.write(key, value)
    assert out2.read_bytes() == text


def test_writer_bytes_equal_kaldi_io(tmp_path):
    rng = np.random.default_rng(0)
    mat = rng.normal(size=(4, 3)).astype(np.float32)
    vec = rng.normal(size=5).astype(np.float32)
    ints = [3, -1, 7]
    with TableWriter("ark:%s" % (tmp_path / "ours.ark")) as writer:
        writer.write("m", mat)
        writer.write("v", vec)
        writer.write("i", ints)
    with open(tmp_path / "theirs.ark", "wb") as f:
        kaldi_io.write_mat(f, mat, key="m")
        kaldi_io.write_vec_flt(f, vec, key="v")
        kaldi_io.write_vec_int(f, np.array(ints, dtype=np.int32), key="i")
    assert (tmp_path / "ours.ark").read_bytes() == (tmp_path / "theirs.ark").read_bytes()
    # A mixed archive is read one kind at a time, by key.
    r = RandomAccessTableReader("ark:%s" % (tmp_path / "theirs.ark"), "matrix")
    assert np.array_equal(r["m"], mat)


# Kaldi's holders, byte for byte (derived from kaldi-holder-inl.h / io-funcs).
KIND_CASES = [
    ("int32", 5, b"\0B\x04\x05\x00\x00\x00", b"5 \n"),
    ("int32", -2, b"\0B\x04\xfe\xff\xff\xff", b"-2 \n"),
    ("float", 0.25, b"\0B\x04\x00\x00\x80>", b"0.25 \n"),
    ("double", 0.1, b"\0B\x08" + np.float64(0.1).tobytes(), b"0.1 \n"),
    ("bool", True, b"\0BT", b"T \n"),
    ("bool", False, b"\0BF", b"F \n"),
    ("int32_vector", [1, -2], b"\0B\x04\x02\x00\x00\x00\x04\x01\x00\x00\x00\x04\xfe\xff\xff\xff",
     b"1 -2 \n"),
    ("int32_vector", [], b"\0B\x04\x00\x00\x00\x00", b"\n"),
    ("int32_vector_vector", [[1, 2], [3]],
     b"\0B\x04\x02\x00\x00\x00\x04\x02\x00\x00\x00\x04\x01\x00\x00\x00\x04\x02\x00\x00\x00"
     b"\x04\x01\x00\x00\x00\x04\x03\x00\x00\x00", b"1 2 ; 3 ; \n"),
    ("token", "abc", b"abc\n", b"abc\n"),
    ("token_vector", ["a", "bc"], b"a bc \n", b"a bc \n"),
    ("vector", np.array([1.5, -2], np.float32), b"\0BFV \x04\x02\x00\x00\x00"
     + np.array([1.5, -2], "<f4").tobytes(), b" [ 1.5 -2 ]\n"),
    ("double_vector", np.array([1.5], np.float64), b"\0BDV \x04\x01\x00\x00\x00"
     + np.array([1.5], "<f8").tobytes(), b" [ 1.5 ]\n"),
    ("matrix", np.array([[1, 2], [3, 4]], np.float32), b"\0BFM \x04\x02\x00\x00\x00\x04\x02\x00"
     b"\x00\x00" + np.array([1, 2, 3, 4], "<f4").tobytes(), b" [\n  1 2 \n  3 4 ]\n"),
    ("matrix", np.zeros((0, 0), np.float32), b"\0BFM \x04\x00\x00\x00\x00\x04\x00\x00\x00\x00",
     b" [ ]\n"),
    ("double_matrix", np.array([[0.5]], np.float64), b"\0BDM \x04\x01\x00\x00\x00\x04\x01\x00"
     b"\x00\x00" + np.array([0.5], "<f8").tobytes(), b" [\n  0.5 ]\n"),
]


def _equal(a, b):
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return a == b


@pytest.mark.parametrize("kind,value,binary_bytes,text_bytes", KIND_CASES,
                         ids=[c[0] for c in KIND_CASES])
def test_holders_bytes_and_round_trip(kind, value, binary_bytes, text_bytes, tmp_path):
    for spec, body in (("ark", binary_bytes), ("ark,t", text_bytes)):
        path = tmp_path / "k.ark"
        with TableWriter("%s:%s" % (spec, path), kind) as writer:
            writer.write("k1", value)
            writer.write("k2", value)
        assert path.read_bytes() == b"k1 " + body + b"k2 " + body
        got = list(read_table("ark:%s" % path, kind))
        assert [k for k, _ in got] == ["k1", "k2"]
        assert all(_equal(v, value) for _, v in got)


def test_kind_is_inferred_from_values(tmp_path):
    path = tmp_path / "m.ark"
    with TableWriter("ark:%s" % path) as writer:
        writer.write("a", np.ones((2, 2), np.float32))
        writer.write("b", np.ones(3, np.float32))
        writer.write("c", 4)
        writer.write("d", [1, 2])
    data = path.read_bytes()
    assert b"a \0BFM " in data and b"b \0BFV " in data and b"c \0B\x04\x04\x00" in data


def test_text_basic_holder_format_errors(tmp_path):
    path = tmp_path / "bad.ark"
    path.write_bytes(b"a 5 6\n")
    with pytest.raises(KaldiFormatError, match="key 'a'"):
        list(read_table("ark:%s" % path, "int32"))
    path.write_bytes(b"a \nb 3\n")
    with pytest.raises(KaldiFormatError, match="newline"):
        list(read_table("ark:%s" % path, "int32"))


# -- script files, ranges, random access ---------------------------------------

def _write_ark_scp(tmp_path, items, spec="ark,scp"):
    ark, scp = tmp_path / "a.ark", tmp_path / "a.scp"
    with TableWriter("%s:%s,%s" % (spec, ark, scp)) as writer:
        for key, value in items:
            writer.write(key, value)
    return ark, scp


def test_ark_scp_offsets_and_reading_back(tmp_path):
    items = list(read_table("ark:%s" % FEATS))
    ark, scp = _write_ark_scp(tmp_path, items)
    assert ark.read_bytes() == FEATS.read_bytes()
    lines = scp.read_text().splitlines()
    data = ark.read_bytes()
    for (key, _), line in zip(items, lines):
        k, where = line.split(" ")
        assert k == key and where.rsplit(":", 1)[0] == str(ark)
        offset = int(where.rsplit(":", 1)[1])
        assert data[offset - len(key) - 1:offset] == key.encode() + b" "
        assert data[offset:offset + 2] == b"\0B"
    back = list(read_table("scp:%s" % scp))
    assert [k for k, _ in back] == [k for k, _ in items]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(items, back))
    theirs = dict(kaldi_io.read_mat_scp(str(scp)))
    assert all(np.array_equal(theirs[k], v) for k, v in back)


def test_text_ark_scp(tmp_path):
    items = list(read_table("ark:%s" % FEATS))[:2]
    ark, scp = _write_ark_scp(tmp_path, items, "ark,scp,t")
    back = list(read_table("scp:%s" % scp))
    assert [k for k, _ in back] == ["utt1", "utt2"]
    assert all(np.allclose(a, b, atol=1e-6) for (_, a), (_, b) in zip(items, back))


def test_scp_ranges(tmp_path):
    items = dict(read_table("ark:%s" % FEATS))
    ark, scp = _write_ark_scp(tmp_path, list(items.items()))
    where = {k: w for k, w in (line.split(" ") for line in scp.read_text().splitlines())}
    (tmp_path / "r.scp").write_text(
        "x %s[2:4,1:3]\ny %s[5:6]\nz %s[:,0:0]\nw %s[48:52]\n"
        % (where["utt3"], where["utt1"], where["utt2"], where["utt2"]))
    got = dict(read_table("scp:%s" % (tmp_path / "r.scp")))
    assert np.array_equal(got["x"], items["utt3"][2:5, 1:4])
    assert np.array_equal(got["y"], items["utt1"][5:7])
    assert np.array_equal(got["z"], items["utt2"][:, :1])
    assert np.array_equal(got["w"], items["utt2"][48:50])   # Kaldi's 3-row tolerance
    # (kaldi_io is no reference here: it treats the range ends as exclusive,
    # Kaldi's ParseMatrixRangeSpecifier includes them.)
    (tmp_path / "bad.scp").write_text("x %s[2:1]\n" % where["utt3"])
    with pytest.raises(PynnetError, match="range"):
        list(read_table("scp:%s" % (tmp_path / "bad.scp")))


def test_random_access_archive_and_script(tmp_path):
    items = dict(read_table("ark:%s" % FEATS))
    ark, scp = _write_ark_scp(tmp_path, list(items.items()))
    for spec in ("ark:%s" % ark, "scp:%s" % scp, "ark,s,cs:%s" % ark):
        with RandomAccessTableReader(spec) as reader:
            assert "utt3" in reader and reader.has_key("utt1")
            assert not reader.has_key("nope")
            assert np.array_equal(reader.value("utt3"), items["utt3"])
            assert np.array_equal(reader["utt1"], items["utt1"])
            with pytest.raises(PynnetError, match="no key 'nope'"):
                reader.value("nope")
    once = RandomAccessTableReader("ark,o:%s" % ark)
    assert np.array_equal(once.value("utt2"), items["utt2"])
    assert not once.has_key("utt2")


def test_duplicate_keys_in_random_access(tmp_path):
    data = FEATS.read_bytes()
    (tmp_path / "d.ark").write_bytes(data + data)
    reader = RandomAccessTableReader("ark:%s" % (tmp_path / "d.ark"))
    with pytest.raises(PynnetError, match="twice"):
        reader.value("zzz")


def test_permissive_reading(tmp_path):
    data = FEATS.read_bytes()
    (tmp_path / "t.ark").write_bytes(data[:-100])   # last entry truncated
    with pytest.raises(KaldiFormatError, match="utt4"):
        list(read_table("ark:%s" % (tmp_path / "t.ark")))
    keys = [k for k, _ in read_table("ark,p:%s" % (tmp_path / "t.ark"))]
    assert keys == ["utt1", "utt2", "utt3"]
    (tmp_path / "p.scp").write_text("a %s:5\nb /no/such/file\nc %s:5\n" % (FEATS, FEATS))
    with pytest.raises(PynnetError, match="key 'b'"):
        list(read_table("scp:%s" % (tmp_path / "p.scp")))
    assert [k for k, _ in read_table("scp,p:%s" % (tmp_path / "p.scp"))] == ["a", "c"]
    reader = RandomAccessTableReader("scp,p:%s" % (tmp_path / "p.scp"))
    assert reader.has_key("a") and not reader.has_key("b")


def test_scp_wspecifier_writes_each_object_to_its_file(tmp_path):
    (tmp_path / "w.scp").write_text("a %s\nb %s\n" % (tmp_path / "a.mat", tmp_path / "b.mat"))
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    with TableWriter("scp:%s" % (tmp_path / "w.scp")) as writer:
        writer.write("a", m)
        with pytest.raises(PynnetError, match="no entry for key 'c'"):
            writer.write("c", m)
    assert (tmp_path / "a.mat").read_bytes()[:5] == b"\0BFM "
    assert not (tmp_path / "b.mat").exists()
    with TableWriter("scp,p:%s" % (tmp_path / "w.scp")) as writer:
        writer.write("c", m)   # permissive: silently skipped


def test_bad_archives(tmp_path):
    path = tmp_path / "bad.ark"
    for data in (b"utt1\r\0BFM ", b"utt2 \0BFM \x04\x00\x00\x00\x00\x04\x00\x00\x00\x00 utt1"):
        path.write_bytes(data)
        with pytest.raises(KaldiFormatError, match="expected a space after key 'utt1'"):
            list(read_table("ark:%s" % path))
    path.write_bytes(b"utt1 \0BFV \x04\x02\x00\x00\x00")
    with pytest.raises(KaldiFormatError, match="key 'utt1'"):
        list(read_table("ark:%s" % path, "vector"))
    path.write_bytes(b"utt1 \0XFV ")
    with pytest.raises(KaldiFormatError, match="binary header"):
        list(read_table("ark:%s" % path))
    path.write_bytes(b"a b c\n\nd\n")
    with pytest.raises(PynnetError, match="invalid script-file line"):
        list(read_table("scp:%s" % path))
    path.write_bytes(b"")
    assert list(read_table("ark:%s" % path)) == []
    with pytest.raises(PynnetError, match="cannot open"):
        list(read_table("ark:%s" % (tmp_path / "missing.ark")))


def test_invalid_keys_are_refused(tmp_path):
    with TableWriter("ark:%s" % (tmp_path / "k.ark")) as writer:
        for key in ("", "a b", "a\tb", "a\nb"):
            with pytest.raises(PynnetError, match="invalid table key"):
                writer.write(key, 1)
        writer.write("\u00e9t\u00e9", 1)   # non-ASCII is fine, as in Kaldi


# -- pipes, stdin/stdout, atomicity --------------------------------------------

def test_pipes(tmp_path):
    got = list(read_table("ark:cat %s |" % FEATS))
    assert [k for k, _ in got] == ["utt1", "utt2", "utt3", "utt4"]
    out = tmp_path / "p.ark"
    with TableWriter("ark:| cat > %s" % out) as writer:
        for key, value in got:
            writer.write(key, value)
    assert out.read_bytes() == FEATS.read_bytes()
    with pytest.raises(PynnetError, match="exited with status"):
        list(read_table("ark:exit 3 |"))


def test_stdin_and_stdout(monkeypatch, capfdbinary):
    data = FEATS.read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    items = list(read_table("ark:-"))
    assert len(items) == 4
    with TableWriter("ark:-") as writer:
        for key, value in items:
            writer.write(key, value)
    assert capfdbinary.readouterr().out == data


def test_failed_writer_leaves_no_file(tmp_path):
    out = tmp_path / "never.ark"
    with pytest.raises(RuntimeError):
        with TableWriter("ark,scp:%s,%s" % (out, tmp_path / "never.scp")) as writer:
            writer.write("a", np.ones((2, 2), np.float32))
            raise RuntimeError("stop")
    assert not out.exists() and not (tmp_path / "never.scp").exists()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_sequential_reader_closes_its_file():
    reader = SequentialTableReader("ark:%s" % FEATS)
    first = next(iter(reader))
    assert first[0] == "utt1"
    reader.close()
    assert reader._data is None


# -- kaldi-io beside pynnet3; RandomAccessTableReaderMapped; script sizes ---------------

def test_kaldi_io_imports_quietly_and_leaves_path_alone():
    import subprocess
    code = ("import os; p = os.environ['PATH']; "
            "from pynnet3.io.kaldi_io_compat import import_kaldi_io; k = import_kaldi_io(); "
            "assert os.environ['PATH'] == p and 'KALDI_ROOT' not in os.environ; "
            "assert hasattr(k, 'read_mat_ark')")
    env = {k: v for k, v in os.environ.items() if k != "KALDI_ROOT"}
    env["PYTHONPATH"] = str(TEST_DATA.parent.parent)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and result.stdout == ""


def test_kaldi_io_generators_feed_our_tables_and_api(tmp_path):
    """kaldi_io's (key, matrix) generators are what pynnet3's tables and
    compute_table take and give."""
    import pynnet3
    from pynnet3.compute.api import compute_table
    data = TEST_DATA.parent / "data" / "compute" / "tdnn_lda"
    feats = "%s" % (data / "feats.ark")
    ivecs = dict(read_table("ark:%s" % (data / "online-ivectors.ark")))
    with TableWriter("ark:%s" % (tmp_path / "copy.ark")) as w:
        for key, mat in kaldi_io.read_mat_ark(feats):
            w.write(key, mat)
    assert (tmp_path / "copy.ark").read_bytes() == open(feats, "rb").read()
    nnet = pynnet3.Nnet.read(str(data / "model.raw"))
    ours = dict(compute_table(nnet, kaldi_io.read_mat_ark(feats), online_ivectors=ivecs,
                              online_ivector_period=10))
    kaldi = {k: m for k, m in kaldi_io.read_mat_ark(str(data / "compute.default.ark"))}
    assert list(ours) == list(kaldi)
    for key, value in kaldi.items():
        assert np.abs(ours[key] - value).max() <= 1e-3 * max(1.0, np.abs(value).max())


def test_random_access_mapped_by_speaker(tmp_path):
    from pynnet3.io.table import RandomAccessTableReaderMapped
    with TableWriter("ark:%s" % (tmp_path / "spk.ark")) as w:
        w.write("s1", np.arange(3, dtype=np.float32))
        w.write("s2", np.ones(3, dtype=np.float32))
    (tmp_path / "utt2spk").write_text("u1 s1\nu2 s2\nu3 s1\nu4 s9\n")
    r = RandomAccessTableReaderMapped("ark:%s" % (tmp_path / "spk.ark"),
                                      "ark:%s" % (tmp_path / "utt2spk"), "vector")
    assert np.array_equal(r.value("u3"), np.arange(3, dtype=np.float32))
    assert r.has_key("u2") and not r.has_key("u4")
    with pytest.raises(PynnetError, match="Attempting to read key u5, which is not present "
                                          "in utt2spk map"):
        r.has_key("u5")
    r.close()
    plain = RandomAccessTableReaderMapped("ark:%s" % (tmp_path / "spk.ark"), "", "vector")
    assert plain.has_key("s2") and not plain.has_key("u1")


def test_script_reader_knows_its_size(tmp_path):
    with TableWriter("ark,scp:%s,%s" % (tmp_path / "a.ark", tmp_path / "a.scp")) as w:
        for i in range(3):
            w.write("k%d" % i, np.zeros((2, 2), np.float32))
    assert SequentialTableReader("scp:%s" % (tmp_path / "a.scp")).num_entries == 3
    assert SequentialTableReader("ark:%s" % (tmp_path / "a.ark")).num_entries is None


def test_table_writers_close_together_or_abort_together(tmp_path):
    """TableWriters: every table appears when the block succeeds; none does
    when it raises (no half-written output); an empty wspecifier opens nothing."""
    from pynnet3.io.table import TableWriters
    a, b = tmp_path / "a.ark", tmp_path / "b.ark"
    with TableWriters() as writers:
        wa = writers.open("ark:%s" % a, "vector")
        wb = writers.open("ark:%s" % b, "vector")
        assert writers.open("", "vector") is None
        wa.write("x", np.ones(2, np.float32))
        wb.write("y", np.zeros(3, np.float32))
    assert dict(SequentialTableReader("ark:%s" % b, "vector"))["y"].shape == (3,)
    c, d = tmp_path / "c.ark", tmp_path / "d.ark"
    with pytest.raises(RuntimeError):
        with TableWriters() as writers:
            writers.open("ark:%s" % c, "vector").write("x", np.ones(2, np.float32))
            writers.open("ark:%s" % d, "vector")
            raise RuntimeError("tool failed")
    assert not c.exists() and not d.exists()
    assert a.exists()


def _resident_kb(path):
    """Resident KB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                inside = line.rstrip().endswith(str(path))
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's smaps")
def test_sequential_archive_reading_drops_pages_behind(tmp_path):
    """A long archive read in order holds only about RELEASE_STEP of its
    mapped pages at any time (Kaldi reads through a stream and holds none),
    and every value is read as written."""
    from pynnet3.io.mapped import RELEASE_STEP
    rng = np.random.default_rng(3)
    path = tmp_path / "long.ark"
    written = {"utt%02d" % i: rng.standard_normal((200, 400)).astype(np.float32)
               for i in range(40)}        # 40 x 320 KB = 12.8 MB
    with TableWriter("ark:%s" % path) as writer:
        for key, value in written.items():
            writer.write(key, value)
    most = 0
    with SequentialTableReader("ark:%s" % path) as reader:
        for key, value in reader:
            np.testing.assert_array_equal(value, written[key])
            most = max(most, _resident_kb(path))
    assert 0 < most * 1024 <= 2 * RELEASE_STEP + 400 * 1024, most
