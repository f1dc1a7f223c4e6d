"""The public table API (pynnet3.read_table, open_table, write_table,
TableWriter, read_object, write_object), cross-checked against kaldiio and
kaldi-io, the two Python readers Kaldi users know:

- what pynnet3 writes (binary and text archives, script files, pipes,
  matrices, vectors, integer vectors, double precision) kaldiio and kaldi-io
  read back with the same values, and the binary bytes equal theirs;
- what they write (archives with script files, text, kaldiio's compressed
  matrices) pynnet3 reads with the same values, matrices and vectors told
  apart by their header without naming a kind (kaldiio's compressed
  matrices agree within its double-precision decompression);
- Kaldi's lattices read and write byte for byte; single objects with
  offsets and (inclusive) ranges as kaldiio's load_mat reads them;
- errors: an unknown kind, an object whose kind cannot be told, a failed
  write leaves no file.
"""

import io
import contextlib

import numpy as np
import pytest

import pynnet3
from pynnet3 import examples
from pynnet3.io.kaldi_io_compat import import_kaldi_io

kaldiio = pytest.importorskip("kaldiio")
kaldi_io = import_kaldi_io()


def _tables():
    rng = np.random.default_rng(7)
    return {
        "matrices": {"utt1": rng.standard_normal((3, 4)).astype(np.float32),
                     "utt2": rng.standard_normal((5, 4)).astype(np.float32),
                     "empty": np.zeros((0, 0), np.float32)},
        "vectors": {"spk1": rng.standard_normal(6).astype(np.float32),
                    "spk2": rng.standard_normal(6).astype(np.float32)},
        "doubles": {"a": rng.standard_normal((2, 3)), "b": rng.standard_normal(4)},
    }


@pytest.mark.parametrize("name", ["matrices", "vectors", "doubles"])
def test_our_binary_archives_are_kaldiios_and_kaldi_ios_bytes(tmp_path, name):
    table = _tables()[name]
    assert pynnet3.write_table("ark,scp:%s/ours.ark,%s/ours.scp" % (tmp_path, tmp_path),
                               table) == len(table)
    kaldiio.save_ark(str(tmp_path / "kaldiio.ark"), table,
                     scp=str(tmp_path / "kaldiio.scp"))
    ours = (tmp_path / "ours.ark").read_bytes()
    assert ours == (tmp_path / "kaldiio.ark").read_bytes()
    # the script files agree up to the archive's name
    assert (tmp_path / "ours.scp").read_text().replace("ours.ark", "X") == \
        (tmp_path / "kaldiio.scp").read_text().replace("kaldiio.ark", "X")
    with open(tmp_path / "kaldi_io.ark", "wb") as f:
        for key, value in table.items():
            if value.ndim == 2:
                kaldi_io.write_mat(f, value, key=key)
            else:
                kaldi_io.write_vec_flt(f, value, key=key)
    assert ours == (tmp_path / "kaldi_io.ark").read_bytes()
    # and they read ours back
    theirs = dict(kaldiio.load_scp(str(tmp_path / "ours.scp")))
    for key, value in table.items():
        np.testing.assert_array_equal(theirs[key], value)
        assert theirs[key].dtype == value.dtype


def test_we_read_what_kaldiio_writes_without_naming_the_kind(tmp_path):
    tables = _tables()
    mixed = {**tables["matrices"], **tables["vectors"], **tables["doubles"]}
    kaldiio.save_ark(str(tmp_path / "k.ark"), mixed, scp=str(tmp_path / "k.scp"))
    for rspecifier in ("ark:%s/k.ark" % tmp_path, "scp:%s/k.scp" % tmp_path):
        ours = dict(pynnet3.read_table(rspecifier))
        assert list(ours) == list(mixed)
        for key, value in mixed.items():
            np.testing.assert_array_equal(ours[key], value)
            assert ours[key].dtype == value.dtype and ours[key].ndim == value.ndim
    with pynnet3.open_table("scp:%s/k.scp" % tmp_path) as table:
        np.testing.assert_array_equal(table["spk2"], mixed["spk2"])
        assert "nope" not in table


def test_text_archives_both_ways(tmp_path):
    table = {**_tables()["matrices"], **_tables()["vectors"]}
    # kaldiio writes an empty matrix as "[]", which Kaldi cannot read either
    del table["empty"]
    pynnet3.write_table("ark,t:%s/ours.txt" % tmp_path, table)
    theirs = dict(kaldiio.load_ark(str(tmp_path / "ours.txt")))
    kaldiio.save_ark(str(tmp_path / "theirs.txt"), table, text=True)
    ours = dict(pynnet3.read_table("ark:%s/theirs.txt" % tmp_path))
    for key, value in table.items():
        # text keeps 7 significant digits (ours, as Kaldi) or more (kaldiio)
        np.testing.assert_allclose(theirs[key], value, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(ours[key], value, rtol=1e-6, atol=1e-7)
        assert ours[key].ndim == value.ndim


def test_kaldiio_compressed_matrices(tmp_path):
    table = _tables()["matrices"]
    del table["empty"]
    for method in (1, 2, 3):
        kaldiio.save_ark(str(tmp_path / "c.ark"), table, compression_method=method)
        theirs = dict(kaldiio.load_ark(str(tmp_path / "c.ark")))
        ours = dict(pynnet3.read_table("ark:%s/c.ark" % tmp_path))
        for key in table:
            # kaldiio decompresses in double precision, Kaldi (and pynnet3,
            # checked bit for bit in test_io_compressed.py) in float
            np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-6, atol=1e-6)


def test_pipes_and_kaldi_io_readers(tmp_path):
    table = _tables()["matrices"]
    pynnet3.write_table("ark:| gzip -c > %s/m.ark.gz" % tmp_path, table)
    with kaldiio.ReadHelper("ark:gunzip -c %s/m.ark.gz |" % tmp_path) as reader:
        theirs = dict(reader)
    ours = dict(pynnet3.read_table("ark:gunzip -c %s/m.ark.gz |" % tmp_path))
    pynnet3.write_table("ark:%s/m.ark" % tmp_path, table)
    via_kaldi_io = dict(kaldi_io.read_mat_ark(str(tmp_path / "m.ark")))
    for key, value in table.items():
        for other in (theirs, ours, via_kaldi_io):
            np.testing.assert_array_equal(other[key], value)
    pynnet3.write_table("ark:%s/v.ark" % tmp_path, _tables()["vectors"])
    for key, value in kaldi_io.read_vec_flt_ark(str(tmp_path / "v.ark")):
        np.testing.assert_array_equal(value, _tables()["vectors"][key])


def test_integer_vectors_and_tokens(tmp_path):
    alignments = {"utt1": np.array([1, 2, 2, 3], np.int32), "utt2": np.array([4], np.int32)}
    pynnet3.write_table("ark:%s/ali.ark" % tmp_path, alignments)
    with open(tmp_path / "kaldi_io.ark", "wb") as f:
        for key, value in alignments.items():
            kaldi_io.write_vec_int(f, value, key=key)
    assert (tmp_path / "ali.ark").read_bytes() == (tmp_path / "kaldi_io.ark").read_bytes()
    back = dict(pynnet3.read_table("ark:%s/ali.ark" % tmp_path, "int32_vector"))
    assert back == {"utt1": [1, 2, 2, 3], "utt2": [4]}
    assert dict(kaldi_io.read_vec_int_ark(str(tmp_path / "ali.ark")))["utt1"].tolist() == \
        [1, 2, 2, 3]
    pynnet3.write_table("ark,t:%s/text" % tmp_path, {"u": ["a", "b"]}, "token_vector")
    assert (tmp_path / "text").read_text() == "u a b \n"


def test_lattices_byte_for_byte(tmp_path):
    source = examples.path("lat.narrow.ark")
    lattices = dict(pynnet3.read_table("ark:" + source, "compact_lattice"))
    assert list(lattices) == ["utt1", "utt2", "utt3", "utt4"]
    pynnet3.write_table("ark:%s/copy.ark" % tmp_path, lattices)      # kind inferred
    assert (tmp_path / "copy.ark").read_bytes() == open(source, "rb").read()
    with pynnet3.TableWriter("ark:%s/copy2.ark" % tmp_path, "compact_lattice") as writer:
        for key, lattice in lattices.items():
            writer.write(key, lattice)
    assert (tmp_path / "copy2.ark").read_bytes() == open(source, "rb").read()
    # read as state-level lattices (Kaldi's ConvertLattice), written in text
    raw = dict(pynnet3.read_table("ark:" + source, "lattice"))
    assert type(raw["utt1"]).__name__ == "Lattice"
    pynnet3.write_table("ark,t:%s/raw.txt" % tmp_path, raw)
    assert (tmp_path / "raw.txt").read_text().startswith("utt1 \n")


def test_single_objects_with_offsets_and_ranges(tmp_path):
    table = _tables()["matrices"]
    pynnet3.write_table("ark,scp:%s/m.ark,%s/m.scp" % (tmp_path, tmp_path), table)
    for line in (tmp_path / "m.scp").read_text().splitlines():
        key, location = line.split()
        np.testing.assert_array_equal(pynnet3.read_object(location), table[key])
        if table[key].shape[0] >= 2:
            ranged = location + "[0:1,1:2]"            # inclusive, as Kaldi
            np.testing.assert_array_equal(pynnet3.read_object(ranged), table[key][0:2, 1:3])
            np.testing.assert_array_equal(kaldiio.load_mat(ranged), table[key][0:2, 1:3])
    matrix = table["utt2"]
    pynnet3.write_object(str(tmp_path / "ours.mat"), matrix)
    kaldiio.save_mat(str(tmp_path / "kaldiio.mat"), matrix)
    assert (tmp_path / "ours.mat").read_bytes() == (tmp_path / "kaldiio.mat").read_bytes()
    np.testing.assert_array_equal(pynnet3.read_object(str(tmp_path / "kaldiio.mat")), matrix)
    pynnet3.write_object(str(tmp_path / "v.txt"), np.array([0.5, 2], np.float32), binary=False)
    assert (tmp_path / "v.txt").read_text() == " [ 0.5 2 ]\n"
    np.testing.assert_array_equal(kaldiio.load_mat(str(tmp_path / "v.txt")), [0.5, 2])


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(pynnet3.PynnetError, match="unknown table kind 'matirx'"):
        pynnet3.read_table("ark:x.ark", "matirx")
    ali = tmp_path / "ali.ark"
    pynnet3.write_table("ark:%s" % ali, {"u": np.array([1, 2], np.int32)})
    with pytest.raises(pynnet3.PynnetError, match="cannot tell the kind.*pass kind="):
        list(pynnet3.read_table("ark:%s" % ali))
    with pytest.raises(pynnet3.PynnetError, match="invalid rspecifier 'feats.ark'"):
        pynnet3.read_table("feats.ark")
    # a value that cannot be written: no file is left behind
    with pytest.raises(pynnet3.PynnetError):
        pynnet3.write_table("ark:%s/out.ark" % tmp_path,
                            [("a", np.eye(2, dtype=np.float32)), ("b", object())])
    assert not (tmp_path / "out.ark").exists()
    with pytest.raises(pynnet3.PynnetError, match="invalid table key"):
        pynnet3.write_table("ark:%s/out.ark" % tmp_path, {"two words": np.eye(2)})
    assert not (tmp_path / "out.ark").exists()


def test_binary_file_read_as_an_archive_has_no_nul_in_the_error(tmp_path):
    from pynnet3.bin import nnet3_compute
    err = io.StringIO()
    model = examples.path("tdnn_lda.raw")
    with contextlib.redirect_stderr(err):
        status = nnet3_compute.main([model, "ark:" + model, "ark:%s/o.ark" % tmp_path])
    assert status == 255
    error = [line for line in err.getvalue().splitlines() if line.startswith("ERROR")]
    assert len(error) == 1 and "\0" not in err.getvalue()
    assert "key '\\x00B<Nnet3>'" in error[0]
    assert not (tmp_path / "o.ark").exists()
