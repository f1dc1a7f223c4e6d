"""Fuzzing the readers: bad bytes must give a PynnetError, nothing else.

Real Kaldi files (components, small networks, an .mdl, an archive) are
truncated, bit-flipped, spliced with extreme values and read back through
InputStream's primitives, Component.read_new, Nnet.read_from, the .mdl reader
and the table reader. A reader may accept a mutated file (many mutations keep
it valid) but must never fail with IndexError, struct.error, ValueError, ...
"""

import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import KALDI_REF, TEST_DATA
from pynnet3.components import Component
from pynnet3.errors import KaldiFormatError, PynnetError
from pynnet3.io.stream import InputStream
from pynnet3.io.table import read_table
from pynnet3.model.am import read_mdl_from
from pynnet3.nnet.nnet import Nnet

FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _load(paths, limit, max_size):
    out = []
    for path in paths:
        if path.stat().st_size <= max_size:
            out.append(path.read_bytes())
        if len(out) >= limit:
            break
    return out


def _files(pattern_ref, pattern_data):
    return sorted(TEST_DATA.glob(pattern_data)) + sorted(KALDI_REF.glob(pattern_ref))


COMPONENTS = _load(_files("components/comp*/component.*", "components/comp*/component.*"),
                   80, 40000)
NETWORKS = _load(_files("random/case*/model.*", "models/random/case*/model.*"), 40, 40000)
MDL = (TEST_DATA / "mdl" / "tdnn_lda" / "final.mdl").read_bytes()
ARCHIVE = (TEST_DATA / "io" / "feats.ark").read_bytes()[:3000]

SPECIAL = [b"\x04\xff\xff\xff\x7f", b"\x04\x00\x00\x00\x80", b"\x04\xff\xff\xff\xff",
           b"\xff\xff\xff\x7f", b" ", b"\n", b"[", b"]", b" nan ", b"-1", b"1e40", b"<",
           b"\0B", b"FM ", b"CM ", b"CM2 ", b"DV ", b"\x08", b"\x04", b"T", b"</Nnet3> "]


@st.composite
def mutated(draw, corpus):
    data = bytearray(draw(st.sampled_from(corpus)))
    payloads = st.one_of(st.binary(min_size=1, max_size=8), st.sampled_from(SPECIAL))
    ops = draw(st.lists(st.tuples(st.sampled_from(["flip", "trunc", "insert", "delete", "set"]),
                                  st.integers(0, 2**31), payloads), min_size=1, max_size=4))
    for op, pos, payload in ops:
        if not data:
            break
        i = pos % len(data)
        if op == "flip":
            data[i] ^= payload[0] or 1
        elif op == "trunc":
            del data[i:]
        elif op == "insert":
            data[i:i] = payload
        elif op == "delete":
            del data[i:i + len(payload)]
        else:
            data[i:i + len(payload)] = payload
    return bytes(data)


PRIMITIVES = ["read_token", "peek_token", "read_int32", "read_int64", "read_uint32",
              "read_float", "read_double", "read_bool", "read_vector", "read_double_vector",
              "read_matrix", "read_int_vector", "read_int_pair_vector", "at_eof", "expect_token",
              "read_optional_token"]


@FUZZ
@given(data=st.one_of(st.binary(max_size=64),
                      st.lists(st.sampled_from(SPECIAL + [b"3", b"0.5", b"<A>", b"F"]),
                               max_size=12).map(b"".join)),
       binary=st.booleans(), calls=st.lists(st.sampled_from(PRIMITIVES), min_size=1,
                                            max_size=8))
def test_input_stream_primitives(data, binary, calls):
    stream = InputStream(data, binary, "fuzz")
    for name in calls:
        try:
            if name in ("expect_token", "read_optional_token"):
                getattr(stream, name)("<A>")
            else:
                getattr(stream, name)()
        except KaldiFormatError:
            return


def _read_component(data):
    stream = InputStream.from_bytes(data, "fuzz")
    Component.read_new(stream)


def _read_nnet(data):
    Nnet().read_from(InputStream.from_bytes(data, "fuzz"))


def _read_mdl(data):
    read_mdl_from(InputStream.from_bytes(data, "fuzz"))


_TMP = tempfile.mkdtemp(prefix="pynnet3-fuzz-")


def _read_archive(data):
    path = os.path.join(_TMP, "a.ark")
    with open(path, "wb") as f:
        f.write(data)
    for kind in ("matrix", "vector", "int32_vector"):
        try:
            list(read_table("ark:" + path, kind))
        except PynnetError:
            pass


def _only_pynnet_errors(reader, data):
    try:
        reader(data)
    except PynnetError:
        pass


@pytest.mark.skipif(not COMPONENTS, reason="no component files")
@FUZZ
@given(data=mutated(COMPONENTS or [b""]))
def test_component_read_new(data):
    _only_pynnet_errors(_read_component, data)


@pytest.mark.skipif(not NETWORKS, reason="no network files")
@FUZZ
@given(data=mutated(NETWORKS or [b""]))
def test_nnet_read(data):
    _only_pynnet_errors(_read_nnet, data)


@settings(FUZZ, max_examples=40)
@given(data=mutated([MDL]))
def test_mdl_read(data):
    _only_pynnet_errors(_read_mdl, data)


@settings(FUZZ, max_examples=60)
@given(data=mutated([ARCHIVE]))
def test_archive_read(data):
    _read_archive(data)
