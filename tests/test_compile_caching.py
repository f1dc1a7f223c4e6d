"""CachingOptimizingCompiler and Kaldi's compiler-cache file.

- The x-vector cache Kaldi wrote (``nnet3-xvector-compute
  --cached-compiler-out``, copied into tests/data/xvector_cache) reads, writes
  back byte for byte, and its computations run: the same numbers as ours for
  the same requests, and Kaldi's x-vectors for the utterances they were made
  for.
- Compiling those requests in the order Kaldi did, with a fresh compiler,
  gives Kaldi's file byte for byte (our optimized computations, Kaldi's
  request hash and Kaldi's map order).
- The map order is libstdc++'s: checked against the order a real libstdc++
  unordered_map gave for recorded insert/erase sequences.
- Hits, capacity and least-recently-used eviction behave as Kaldi's
  ComputationCache; the shortcut caches the two-sequence computation too.
"""

import logging

import numpy as np
import pytest

import pynnet3.components  # noqa: F401  (registers component types)
from conftest import TEST_DATA
from pynnet3.bin._cli import ToolParser
from pynnet3.bin._option_groups import options_from, register_options
from pynnet3.compiler.request import ComputationRequest, IoSpecification
from pynnet3.driver.caching import (CachingOptimizingCompiler, CachingOptimizingCompilerOptions,
                                    ComputationCache, _KaldiHashOrder, request_hash)
from pynnet3.optimize.options import optimize_options_equal, read_optimize_options
from pynnet3.compiler.computation import NnetComputation
from pynnet3.compute.computer import NnetComputer
from pynnet3.io.files import open_input
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.io.table import read_table
from pynnet3.nnet.collapse import collapse_model
from pynnet3.common.index import Index
from pynnet3.nnet.nnet import Nnet
from pynnet3.nnet.component_ops import set_batchnorm_test_mode, set_dropout_test_mode
from pynnet3.optimize.options import NnetOptimizeOptions

XVECTOR = TEST_DATA / "xvector_cache"
CACHE = XVECTOR / "kaldi-compiler-cache.bin"


@pytest.fixture(scope="module")
def xvector_nnet():
    # what nnet3-xvector-compute does to the network before compiling
    nnet = Nnet.read(str(XVECTOR / "extract.raw"))
    set_batchnorm_test_mode(nnet, True)
    set_dropout_test_mode(nnet, True)
    collapse_model(nnet)
    return nnet


def _cache_bytes(compiler, binary=True):
    out = OutputStream(binary)
    out.write_header()
    compiler.write_cache(out)
    return out.getvalue()


def _kaldi_compiler(nnet):
    compiler = CachingOptimizingCompiler(nnet)
    compiler.read_cache_file(str(CACHE))
    return compiler


def test_kaldi_cache_reads_and_writes_back_byte_identical(xvector_nnet):
    compiler = _kaldi_compiler(xvector_nnet)
    assert len(compiler.cache) == 3
    assert _cache_bytes(compiler) == CACHE.read_bytes()
    # and through text, back to binary
    text = _cache_bytes(compiler, binary=False)
    again = CachingOptimizingCompiler(xvector_nnet)
    again.read_cache(InputStream.from_bytes(text, "text cache"))
    assert _cache_bytes(again) == CACHE.read_bytes()


def test_fresh_compiler_writes_kaldis_cache(xvector_nnet):
    # nnet3-xvector-compute compiled utt1 and utt2 (both padded to 100
    # frames: one entry), then utt3 (173 frames), then utt4 (301 frames)
    requests = _kaldi_compiler(xvector_nnet).cache.requests()   # in file order
    by_frames = {len(r.inputs[0].indexes): r for r in requests}
    compiler = CachingOptimizingCompiler(xvector_nnet)
    for frames in (100, 100, 173, 301):
        compiler.compile(by_frames[frames])
    assert len(compiler.cache) == 3
    assert _cache_bytes(compiler) == CACHE.read_bytes()


def _output(computation, nnet, features):
    computer = NnetComputer(computation, nnet, undefined_fill=np.nan)
    computer.accept_input("input", features)
    computer.run()
    return computer.get_output("output")


def test_cached_computations_run_like_ours_and_give_kaldis_xvectors(xvector_nnet):
    kaldi = _kaldi_compiler(xvector_nnet)
    ours = CachingOptimizingCompiler(xvector_nnet)
    rng = np.random.default_rng(0)
    for request in kaldi.cache.requests():
        features = rng.standard_normal((len(request.inputs[0].indexes), 23)).astype(np.float32)
        cached = kaldi.cache.find(request)
        np.testing.assert_allclose(_output(cached, xvector_nnet, features),
                                   _output(ours.compile(request), xvector_nnet, features),
                                   rtol=1e-5, atol=1e-5)
    feats = dict(read_table("ark:" + str(XVECTOR / "feats.ark"), "matrix"))
    xvectors = dict(read_table("ark:" + str(XVECTOR / "xvector.default.ark"), "vector"))
    by_frames = {len(r.inputs[0].indexes): r for r in kaldi.cache.requests()}
    for utt in ("utt3", "utt4"):       # long enough to need no padding: one chunk each
        computation = kaldi.cache.find(by_frames[feats[utt].shape[0]])
        got = _output(computation, xvector_nnet, feats[utt])[0]
        np.testing.assert_allclose(got, xvectors[utt], rtol=1e-3, atol=1e-3 * max(
            1.0, float(np.abs(xvectors[utt]).max())))


def test_cache_from_other_optimize_options_is_not_used(xvector_nnet, caplog):
    compiler = CachingOptimizingCompiler(
        xvector_nnet, NnetOptimizeOptions(propagate_in_place=False))
    with caplog.at_level(logging.WARNING):
        compiler.read_cache_file(str(CACHE))
    assert len(compiler.cache) == 0
    assert "other options" in caplog.text
    # Kaldi's equality ignores extend_matrices
    assert optimize_options_equal(NnetOptimizeOptions(),
                                  NnetOptimizeOptions(extend_matrices=False))


# -- the map order ------------------------------------------------------------------------

class _Key:
    def __init__(self, value):
        self.hash = value


def test_map_order_is_libstdcxx_order():
    lines = [line for line in (TEST_DATA / "libstdcxx_unordered_map_order.txt")
             .read_text().splitlines() if not line.startswith("#")]
    assert len(lines) == 4
    for ops, expected in zip(lines[::2], lines[1::2]):
        order = _KaldiHashOrder()
        keys = {}
        words = ops.split()
        for op, value in zip(words[::2], words[1::2]):
            value = int(value)
            if op == "i":
                keys[value] = _Key(value)
                order.insert(keys[value])
            else:
                order.erase(keys.pop(value))
        assert [k.hash for k in order.order] == [int(v) for v in expected.split()]


def test_request_hash_is_kaldis():
    # the x-vector cache's three requests land in Kaldi's buckets 8, 2, 2 of 13:
    # that is the order Kaldi wrote them in
    requests = ComputationCache(4)
    stream = open_input(str(CACHE))
    read_optimize_options(stream)
    requests.read(stream)
    assert [request_hash(r) % 13 for r in requests.requests()] == [8, 2, 2]
    # int32 products wrap as in C before widening
    spec = IoSpecification("input", [Index(0, 200000, 30000)])
    assert request_hash(ComputationRequest([spec], [spec])) == request_hash(
        ComputationRequest([IoSpecification("input", [Index(0, 200000, 30000)])], [spec]))


# -- LRU behaviour ------------------------------------------------------------------------

def _simple_request(frames, name="input", num_n=1):
    spec = IoSpecification(name, [Index(n, t, 0) for n in range(num_n) for t in range(frames)])
    out = IoSpecification("output", [Index(n, 0, 0) for n in range(num_n)])
    return ComputationRequest([spec], [out])


def test_cache_hits_capacity_and_least_recently_used_eviction():
    cache = ComputationCache(2)
    a, b, c = NnetComputation(), NnetComputation(), NnetComputation()
    cache.insert(_simple_request(10), a)
    cache.insert(_simple_request(11), b)
    assert cache.find(_simple_request(10)) is a      # a is now the most recent
    cache.insert(_simple_request(12), c)              # evicts b, the least recent
    assert len(cache) == 2
    assert cache.find(_simple_request(11)) is None
    assert cache.find(_simple_request(10)) is a
    assert cache.find(_simple_request(12)) is c
    # a request is a different one if any field differs
    other = _simple_request(10)
    other.inputs[0].has_deriv = True
    assert cache.find(other) is None
    # the cache keeps its own copy of the request
    request = _simple_request(13)
    cache.insert(request, NnetComputation())
    request.inputs[0].indexes.pop()
    assert cache.find(_simple_request(13)) is not None
    with pytest.raises(ValueError):
        ComputationCache(0)


def test_compiler_caches_and_takes_the_shortcut(xvector_nnet):
    request = _simple_request(120, num_n=4)
    compiler = CachingOptimizingCompiler(xvector_nnet)
    first = compiler.compile(request)
    assert len(compiler.cache) == 2          # the two-sequence request and this one
    assert compiler.compile(_simple_request(120, num_n=4)) is first
    assert compiler.seconds_taken["expand"] > 0
    plain = CachingOptimizingCompiler(
        xvector_nnet, compiler_options=CachingOptimizingCompilerOptions(use_shortcut=False))
    plain.compile(request)
    assert len(plain.cache) == 1
    assert "seconds taken in nnet3 compilation total" in compiler.timing_summary()
    # the x-vector extractor's context (nnet3-info of extract.raw: 0 left, 7 right)
    assert compiler.get_simple_nnet_context() == (0, 7)
    # capacity 1: the full computation evicts the two-sequence one
    small = CachingOptimizingCompiler(
        xvector_nnet, compiler_options=CachingOptimizingCompilerOptions(cache_capacity=1))
    small.compile(request)
    assert small.cache.requests() == [request]


def test_options_register_as_kaldi_tools_do():
    assert CachingOptimizingCompilerOptions() == CachingOptimizingCompilerOptions(
        use_shortcut=True, cache_capacity=64)
    for prefix, flag in (("", "--"), ("compiler", "--compiler.")):
        parser = ToolParser("Usage: test-tool [options] <a>")
        register_options(parser, prefix, CachingOptimizingCompilerOptions())
        assert flag + "use-shortcut" in parser.usage_text()
        opts, args = parser.parse([flag + "use-shortcut=false", flag + "cache-capacity=5", "x"])
        assert options_from(opts, prefix, CachingOptimizingCompilerOptions()) == \
            CachingOptimizingCompilerOptions(use_shortcut=False, cache_capacity=5)
