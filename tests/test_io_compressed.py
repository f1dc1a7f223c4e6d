"""Kaldi's CompressedMatrix (CM, CM2, CM3): decompression and compression.

The kaldi-ref oracle holds no compressed matrix, so the checks are against
straightforward element-by-element transcriptions of Kaldi's
compressed-matrix.cc arithmetic (written here independently of the vectorized
module), plus kaldi_io's CM reader as an outside cross-check.
"""

import os
import struct

import numpy as np
import pytest

from pynnet3.errors import KaldiFormatError
from pynnet3.io import compressed
from pynnet3.io.stream import InputStream
from pynnet3.io.table import TableWriter, read_table

os.environ.setdefault("KALDI_ROOT", "/tmp")
import kaldi_io  # noqa: E402

f32 = np.float32


# -- element-by-element reference (mirrors the C++ expression by expression) ---

def ref_uint16_to_float(min_value, range_, q):
    return f32(f32(f32(range_) * f32(1.52590218966964e-05)) * f32(q)) + f32(min_value)


def ref_char_to_float(p0, p25, p75, p100, c):
    if c <= 64:
        return f32(float(f32(f32(p25 - p0) * f32(c))) * (1 / 64.0) + float(p0))
    if c <= 192:
        return f32(float(f32(f32(p75 - p25) * f32(c - 64))) * (1 / 128.0) + float(p25))
    return f32(float(f32(f32(p100 - p75) * f32(c - 192))) * (1 / 63.0) + float(p75))


def ref_decompress(blob):
    """Parses token + header + data and decompresses one element at a time."""
    token, rest = blob.split(b" ", 1)
    min_value, range_, rows, cols = struct.unpack_from("<ffii", rest)
    body = rest[16:]
    out = np.zeros((rows, cols), dtype=np.float32)
    if token == b"CM":
        for c in range(cols):
            q = struct.unpack_from("<4H", body, 8 * c)
            p = [ref_uint16_to_float(min_value, range_, v) for v in q]
            for r in range(rows):
                out[r, c] = ref_char_to_float(*p, body[8 * cols + c * rows + r])
    else:
        two = token == b"CM2"
        inc = f32(float(f32(range_)) * (1.0 / (65535.0 if two else 255.0)))
        for r in range(rows):
            for c in range(cols):
                code = (struct.unpack_from("<H", body, 2 * (r * cols + c))[0] if two
                        else body[r * cols + c])
                out[r, c] = f32(f32(code) * inc) + f32(min_value)
    return out


def ref_float_to_uint(min_value, range_, value, top):
    f = f32(f32(f32(value) - f32(min_value)) / f32(range_))
    f = min(max(f, f32(0)), f32(1))
    return int(float(f32(f * f32(top))) + 0.499)


def ref_float_to_char(p0, p25, p75, p100, v):
    if v < p25:
        ans = int(float(f32(f32(f32(v - p0) / f32(p25 - p0)) * f32(64))) + 0.5)
        return min(max(ans, 0), 64)
    if v < p75:
        ans = 64 + int(float(f32(f32(f32(v - p25) / f32(p75 - p25)) * f32(128))) + 0.5)
        return min(max(ans, 64), 192)
    ans = 192 + int(float(f32(f32(f32(v - p75) / f32(p100 - p75)) * f32(63))) + 0.5)
    return min(max(ans, 192), 255)


def ref_compress(mat, method):
    rows, cols = mat.shape
    if method == "auto":
        method = "speech" if rows > 8 else "2byte"
    lo, hi = f32(mat.min()), f32(mat.max())
    if lo == hi:
        hi = f32(float(lo) + (1.0 + abs(float(lo))))
    rng = f32(hi - lo)
    head = struct.pack("<ffii", float(lo), float(rng), rows, cols)
    if method == "2byte":
        return b"CM2 " + head + b"".join(
            struct.pack("<H", ref_float_to_uint(lo, rng, mat[r, c], 65535))
            for r in range(rows) for c in range(cols))
    if method == "1byte":
        return b"CM3 " + head + bytes(ref_float_to_uint(lo, rng, mat[r, c], 255)
                                      for r in range(rows) for c in range(cols))
    headers, codes = b"", b""
    for c in range(cols):
        s = sorted(mat[:, c].tolist())
        if rows >= 5:
            qn = rows // 4
            vals = [s[0], s[qn], s[3 * qn], s[rows - 1]]
        else:
            vals = s + [None] * (4 - rows)
        q0 = min(ref_float_to_uint(lo, rng, vals[0], 65535), 65532)
        q25 = (min(max(ref_float_to_uint(lo, rng, vals[1], 65535), q0 + 1), 65533)
               if vals[1] is not None else q0 + 1)
        q75 = (min(max(ref_float_to_uint(lo, rng, vals[2], 65535), q25 + 1), 65534)
               if vals[2] is not None else q25 + 1)
        q100 = (max(ref_float_to_uint(lo, rng, vals[3], 65535), q75 + 1)
                if vals[3] is not None else q75 + 1)
        headers += struct.pack("<4H", q0, q25, q75, q100)
        p = [ref_uint16_to_float(lo, rng, q) for q in (q0, q25, q75, q100)]
        codes += bytes(ref_float_to_char(*p, f32(v)) for v in mat[:, c])
    return b"CM " + head + headers + codes


def _read(blob):
    return InputStream(b"\0B" + blob, True, "test", 2).read_matrix()


# -- tests ---------------------------------------------------------------------

def _random_blob(rng, token, rows, cols):
    min_value = f32(rng.normal() * 3)
    range_ = f32(abs(rng.normal()) * 10 + 0.01)
    head = struct.pack("<ffii", float(min_value), float(range_), rows, cols)
    if token == b"CM":
        q = np.sort(rng.integers(0, 65536, size=(cols, 4)), axis=1).astype("<u2")
        body = q.tobytes() + rng.integers(0, 256, size=rows * cols).astype("u1").tobytes()
    elif token == b"CM2":
        body = rng.integers(0, 65536, size=rows * cols).astype("<u2").tobytes()
    else:
        body = rng.integers(0, 256, size=rows * cols).astype("u1").tobytes()
    return token + b" " + head + body


@pytest.mark.parametrize("token", [b"CM", b"CM2", b"CM3"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (17, 4), (40, 13)])
def test_decompression_is_bit_exact(token, shape):
    rng = np.random.default_rng(hash((token, shape)) % 2**32)
    for _ in range(3):
        blob = _random_blob(rng, token, *shape)
        got = _read(blob)
        assert got.dtype == np.float32 and got.shape == shape
        assert np.array_equal(got.view(np.uint32), ref_decompress(blob).view(np.uint32))


@pytest.mark.parametrize("method", ["auto", "speech", "2byte", "1byte"])
@pytest.mark.parametrize("shape", [(1, 3), (2, 2), (3, 4), (4, 3), (5, 2), (9, 7), (33, 5)])
def test_compression_bytes_match_reference(method, shape):
    rng = np.random.default_rng(abs(hash((method, shape))) % 2**32)
    mat = (rng.normal(size=shape) * rng.uniform(0.1, 10)).astype(np.float32)
    assert compressed.compress(mat, method) == ref_compress(mat, method)


def test_compression_of_constant_and_tied_columns():
    for mat in (np.full((10, 3), 2.5, np.float32), np.zeros((6, 2), np.float32),
                np.array([[1, 1], [1, 2], [1, 2], [1, 2], [0, 2], [1, 2]], np.float32)):
        for method in ("auto", "speech", "2byte", "1byte"):
            assert compressed.compress(mat, method) == ref_compress(mat, method)


@pytest.mark.parametrize("method,tol", [("speech", 0.02), ("2byte", 1e-4), ("1byte", 0.01)])
def test_round_trip_accuracy(method, tol):
    rng = np.random.default_rng(5)
    mat = rng.normal(size=(50, 13)).astype(np.float32)
    back = _read(compressed.compress(mat, method))
    span = float(mat.max() - mat.min())
    assert np.max(np.abs(back - mat)) <= tol * span


class _NumpyWithOldReshape:
    """kaldi_io's CM reader calls np.reshape(newshape=...), which NumPy 2
    removed; this shim lets it run unchanged."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def reshape(a, newshape=None, **kwargs):
        return np.reshape(a, newshape if newshape is not None else kwargs.pop("shape"))


def test_cm_agrees_with_kaldi_io(tmp_path, monkeypatch):
    monkeypatch.setattr(kaldi_io.kaldi_io, "np", _NumpyWithOldReshape())
    rng = np.random.default_rng(7)
    mat = rng.normal(size=(30, 6)).astype(np.float32)
    path = tmp_path / "c.ark"
    path.write_bytes(b"utt \0B" + compressed.compress(mat, "speech"))
    ((key, theirs),) = list(kaldi_io.read_mat_ark(str(path)))
    ((key2, ours),) = list(read_table("ark:%s" % path))
    assert key == key2 == "utt"
    assert np.allclose(ours, theirs, rtol=0, atol=1e-5)


def test_compressed_matrices_inside_archives(tmp_path):
    rng = np.random.default_rng(3)
    mats = {"a": rng.normal(size=(20, 4)), "b": rng.normal(size=(3, 4)),
            "c": rng.normal(size=(6, 2))}
    data = b""
    for key, mat in mats.items():
        data += key.encode() + b" \0B" + compressed.compress(mat.astype(np.float32))
    (tmp_path / "c.ark").write_bytes(data)
    got = dict(read_table("ark:%s" % (tmp_path / "c.ark")))
    for key, mat in mats.items():
        assert np.array_equal(got[key], _read(compressed.compress(mat.astype(np.float32))))
    # Written back as ordinary float matrices, as Kaldi's Matrix holder does.
    with TableWriter("ark:%s" % (tmp_path / "d.ark")) as w:
        for key, value in got.items():
            w.write(key, value)
    again = dict(read_table("ark:%s" % (tmp_path / "d.ark")))
    assert all(np.array_equal(again[k], got[k]) for k in got)


def test_empty_compressed_matrix():
    blob = compressed.compress(np.zeros((0, 5), np.float32))
    assert blob == b"CM " + bytes(16)
    assert _read(blob).shape == (0, 0)


@pytest.mark.parametrize("token", [b"CM", b"CM2", b"CM3"])
def test_truncated_or_bad_sizes_raise_format_errors(token):
    blob = _random_blob(np.random.default_rng(1), token, 6, 3)
    for cut in (len(token) + 1, len(token) + 5, len(token) + 17, len(blob) - 1):
        with pytest.raises(KaldiFormatError):
            _read(blob[:cut])
    bad = token + b" " + struct.pack("<ffii", 0.0, 1.0, -3, 2)
    with pytest.raises(KaldiFormatError, match="negative size"):
        _read(bad)


def test_compress_rejects_non_finite_and_bad_method():
    with pytest.raises(ValueError):
        compressed.compress(np.array([[np.nan, 1.0]], np.float32))
    with pytest.raises(ValueError):
        compressed.compress(np.ones((2, 2), np.float32), "zip")
