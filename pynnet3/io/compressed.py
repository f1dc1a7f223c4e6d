"""Kaldi's CompressedMatrix: the lossy binary matrix formats CM, CM2 and CM3.

A compressed matrix is written (binary mode only) as a token naming the
format, then a 16-byte global header and the packed data, all little-endian:

  global header   float32 min_value, float32 range, int32 num_rows, int32 num_cols
  ``CM``  (kOneByteWithColHeaders, Kaldi's format 1)
        num_cols per-column headers of four uint16 quantized percentiles
        (0th, 25th, 75th, 100th), then num_rows*num_cols uint8 codes stored
        column by column.  A percentile q decodes to
        ``min_value + range * (1/65535) * q``; a code c decodes piecewise-
        linearly between the column's percentiles: 0..64 spans p0..p25,
        64..192 spans p25..p75, 192..255 spans p75..p100.
  ``CM2`` (kTwoByte, format 2)   row-major uint16, ``min_value + c * range/65535``
  ``CM3`` (kOneByte, format 3)   row-major uint8,  ``min_value + c * range/255``

Guarantees:
- :func:`decompress` reproduces Kaldi's ``CompressedMatrix::CopyToMat`` bit for
  bit: the float32/float64 mix of Kaldi's C++ expressions is mirrored
  operation by operation (with NumPy arrays, no per-element Python loop).
- :func:`compress` reproduces ``CompressedMatrix::CopyFromMat`` (methods
  ``auto``, ``speech``, ``2byte``, ``1byte``) so the bytes we write equal
  Kaldi's for the same float32 input.
- Truncated or inconsistent data raises :class:`KaldiFormatError`.
"""

import struct

import numpy as np

from ..errors import KaldiFormatError

_HEADER = struct.Struct("<ffii")
_FORMAT_OF_TOKEN = {"CM": 1, "CM2": 2, "CM3": 3}
_TOKEN_OF_FORMAT = {1: "CM", 2: "CM2", 3: "CM3"}

# Kaldi's literal 1.52590218966964e-05F (1/65535 as a float32 constant).
_INV_65535_F32 = np.float32(1.52590218966964e-05)


def data_size(fmt, num_rows, num_cols):
    """Bytes after the global header for a matrix of this format and shape."""
    if fmt == 1:
        return num_cols * (8 + num_rows)
    if fmt == 2:
        return 2 * num_rows * num_cols
    return num_rows * num_cols


def read_compressed_matrix(stream, token, start_offset):
    """Reads the body of a compressed matrix whose token (``CM``, ``CM2`` or
    ``CM3``) the binary ``stream`` has just consumed; returns float32 array.

    ``start_offset`` is where the token started (for error messages).
    """
    fmt = _FORMAT_OF_TOKEN.get(token)
    if fmt is None:
        raise stream.error("expected CM, CM2 or CM3, got '%s'" % token, start_offset)
    raw = stream._read_raw(_HEADER.size, "compressed-matrix header")
    min_value, range_, num_rows, num_cols = _HEADER.unpack(raw)
    if num_cols == 0:
        return np.zeros((0, 0), dtype=np.float32)
    if num_rows < 0 or num_cols < 0:
        raise stream.error("compressed matrix has negative size %dx%d"
                           % (num_rows, num_cols), start_offset)
    body = stream._read_raw(data_size(fmt, num_rows, num_cols), "compressed-matrix data")
    return decompress(fmt, min_value, range_, num_rows, num_cols, body)


def decompress(fmt, min_value, range_, num_rows, num_cols, body):
    """The float32 matrix Kaldi's CopyToMat produces from a compressed body."""
    min_value = np.float32(min_value)
    range_ = np.float32(range_)
    if fmt == 2 or fmt == 3:
        divisor = 65535.0 if fmt == 2 else 255.0
        codes = np.frombuffer(body, dtype="<u2" if fmt == 2 else "u1")
        # Kaldi: float increment = range * (1.0 / divisor)  [double product,
        # stored as float]; element = min_value + code * increment in float.
        increment = np.float32(float(range_) * (1.0 / divisor))
        out = codes.astype(np.float32) * increment
        out += min_value
        return out.reshape(num_rows, num_cols)
    if fmt != 1:  # pragma: no cover - callers pass 1, 2 or 3
        raise KaldiFormatError("unknown compressed-matrix format %d" % fmt)
    headers = np.frombuffer(body, dtype="<u2", count=4 * num_cols).reshape(num_cols, 4)
    codes = np.frombuffer(body, dtype="u1", offset=8 * num_cols).reshape(num_cols, num_rows)
    p = _uint16_to_float(min_value, range_, headers)  # (num_cols, 4) float32
    p0, p25, p75, p100 = (p[:, i:i + 1] for i in range(4))
    out = _char_to_float(p0, p25, p75, p100, codes)
    return np.ascontiguousarray(out.T)


def _uint16_to_float(min_value, range_, q):
    # Kaldi: min_value + range * 1.52590218966964e-05F * value, all in float.
    step = np.float32(range_ * _INV_65535_F32)
    return q.astype(np.float32) * step + min_value


def _char_to_float(p0, p25, p75, p100, codes):
    """Kaldi's CharToFloat over a (num_cols, num_rows) code array; p* are
    (num_cols, 1) float32 columns."""
    c = codes.astype(np.float32)
    # Each branch: float32 product (p_hi - p_lo) * k, then times a double
    # constant and plus p_lo in double, rounded to float on return.
    low = (((p25 - p0) * c).astype(np.float64) * (1 / 64.0) + p0).astype(np.float32)
    mid = (((p75 - p25) * (c - np.float32(64))).astype(np.float64) * (1 / 128.0)
           + p25).astype(np.float32)
    high = (((p100 - p75) * (c - np.float32(192))).astype(np.float64) * (1 / 63.0)
            + p75).astype(np.float32)
    return np.where(codes <= 64, low, np.where(codes <= 192, mid, high))


# -- compression (Kaldi's CompressedMatrix::CopyFromMat) ------------------------

_METHODS = ("auto", "speech", "2byte", "1byte")


def compress(mat, method="auto"):
    """The bytes Kaldi writes for ``CompressedMatrix(mat, method).Write(binary)``
    (token included, no ``\\0B`` header). ``method`` is ``auto`` (Kaldi's
    kAutomaticMethod: CM for more than 8 rows, else CM2), ``speech`` (CM),
    ``2byte`` (CM2) or ``1byte`` (CM3), each with automatic min/range."""
    if method not in _METHODS:
        raise ValueError("compression method must be one of %s" % ", ".join(_METHODS))
    mat = np.ascontiguousarray(mat, dtype=np.float32)
    if mat.ndim != 2:
        raise ValueError("compress() needs a 2-D matrix")
    num_rows, num_cols = mat.shape
    if num_rows == 0:
        return b"CM " + _HEADER.pack(0.0, 0.0, 0, 0)
    if method == "auto":
        method = "speech" if num_rows > 8 else "2byte"
    fmt = {"speech": 1, "2byte": 2, "1byte": 3}[method]
    if not np.all(np.isfinite(mat)):
        raise ValueError("cannot compress a matrix with NaN or Inf")
    min_value = np.float32(mat.min())
    max_value = np.float32(mat.max())
    if max_value == min_value:
        max_value = np.float32(float(min_value) + (1.0 + abs(float(min_value))))
    range_ = np.float32(max_value - min_value)
    header = _HEADER.pack(float(min_value), float(range_), num_rows, num_cols)
    token = _TOKEN_OF_FORMAT[fmt].encode() + b" "
    if fmt == 2:
        body = _float_to_uint(min_value, range_, mat, 65535).astype("<u2").tobytes()
    elif fmt == 3:
        body = _float_to_uint(min_value, range_, mat, 255).astype("u1").tobytes()
    else:
        body = _compress_columns(min_value, range_, mat)
    return token + header + body


def _float_to_uint(min_value, range_, values, top):
    # Kaldi: f = (value - min) / range in float, clamped to [0, 1];
    # int(f * top + 0.499) with the sum done in double.
    f = (values - min_value) / range_
    f = np.clip(f, np.float32(0), np.float32(1))
    return ((f * np.float32(top)).astype(np.float64) + 0.499).astype(np.int64)


def _compress_columns(min_value, range_, mat):
    num_rows, num_cols = mat.shape
    cols = mat.T  # (num_cols, num_rows)
    srt = np.sort(cols, axis=1)
    if num_rows >= 5:
        quarter = num_rows // 4
        picks = [0, quarter, 3 * quarter, num_rows - 1]
        q = _float_to_uint(min_value, range_, srt[:, picks], 65535)
        q0 = np.minimum(q[:, 0], 65532)
        q25 = np.minimum(np.maximum(q[:, 1], q0 + 1), 65533)
        q75 = np.minimum(np.maximum(q[:, 2], q25 + 1), 65534)
        q100 = np.maximum(q[:, 3], q75 + 1)
    else:
        q = _float_to_uint(min_value, range_, srt, 65535)
        q0 = np.minimum(q[:, 0], 65532)
        q25 = (np.minimum(np.maximum(q[:, 1], q0 + 1), 65533) if num_rows > 1 else q0 + 1)
        q75 = (np.minimum(np.maximum(q[:, 2], q25 + 1), 65534) if num_rows > 2 else q25 + 1)
        q100 = np.maximum(q[:, 3], q75 + 1) if num_rows > 3 else q75 + 1
    # Kaldi stores these as uint16 (the +1 arithmetic cannot exceed 65535).
    headers = np.stack([q0, q25, q75, q100], axis=1).astype("<u2")
    p = _uint16_to_float(min_value, range_, headers)
    p0, p25, p75, p100 = (p[:, i:i + 1] for i in range(4))
    codes = _float_to_char(p0, p25, p75, p100, cols)
    return headers.tobytes() + codes.astype("u1").tobytes()


def _float_to_char(p0, p25, p75, p100, v):
    """Kaldi's FloatToChar over (num_cols, num_rows) values."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f_low = (v - p0) / (p25 - p0)
        f_mid = (v - p25) / (p75 - p25)
        f_high = (v - p75) / (p100 - p75)
    low = _trunc(f_low * np.float32(64), 0.5)
    mid = 64 + _trunc(f_mid * np.float32(128), 0.5)
    high = 192 + _trunc(f_high * np.float32(63), 0.5)
    low = np.clip(low, 0, 64)
    mid = np.clip(mid, 64, 192)
    high = np.clip(high, 192, 255)
    return np.where(v < p25, low, np.where(v < p75, mid, high))


def _trunc(x, add):
    # static_cast<int>(float * k + 0.5): the sum is a double, truncated to 0.
    y = x.astype(np.float64) + add
    y = np.nan_to_num(y, nan=0.0, posinf=2.0**31 - 1, neginf=-2.0**31)
    return np.trunc(np.clip(y, -2.0**31, 2.0**31 - 1)).astype(np.int64)
