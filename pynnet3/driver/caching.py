"""CachingOptimizingCompiler: compile + optimize once per distinct request
(Kaldi's CachingOptimizingCompiler and ComputationCache, nnet-optimize*).

``CachingOptimizingCompiler(nnet, optimize_options, compiler_options).compile(
request)`` returns the optimized computation for ``request``, compiling it only
the first time that request (equal inputs, outputs, flags) is seen. With
``use_shortcut`` (the default) a request with N > 2 regularly laid out
sequences is compiled for two sequences and expanded
(:mod:`pynnet3.compiler.shortcut`); that two-sequence computation goes through
the cache too, as in Kaldi.

The cache keeps the ``cache_capacity`` most recently used computations: a hit
makes an entry the most recent, and inserting into a full cache first evicts
the least recently used one. ``read_cache`` / ``write_cache`` use Kaldi's
format (``--cached-compiler-in/out``): the NnetOptimizeOptions, then the
entries as (ComputationRequest, NnetComputation) pairs. Kaldi writes the
entries in the iteration order of its ``std::unordered_map`` (libstdc++),
which depends on Kaldi's request hash and the table's bucket count; this
module reproduces both (:class:`_KaldiHashOrder`) so that a cache written here
is the file Kaldi writes for the same history of compilations. Reading a
cache restores the order it was written in, so a cache Kaldi wrote reads and
writes back byte for byte (Kaldi's own read + write reverses the entries of
such a file; see :meth:`_KaldiHashOrder.restore`).
"""

import gc
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..common.heap import GivingBack
from ..compiler.computation_io import read_computation, write_computation
from ..compiler.request import ComputationRequest, IoSpecification
from ..compiler.shortcut import expand_computation, request_is_decomposable
from ..errors import ComputationError
from ..io.files import open_input, write_object
from ..model.context import compute_simple_nnet_context
from ..optimize.checker import CheckComputationOptions, ComputationChecker
from ..optimize.optimizer import max_output_time_in_request, optimize
from ..optimize.options import (NnetOptimizeOptions, optimize_options_equal,
                                read_optimize_options, write_optimize_options)
from .compile_and_optimize import compile as compile_

log = logging.getLogger(__name__)

__all__ = ["CachingOptimizingCompilerOptions", "CachingOptimizingCompiler",
           "ComputationCache", "request_hash"]

_MASK64 = (1 << 64) - 1


def _opt(default, doc):
    return field(default=default, metadata={"doc": doc})


@dataclass
class CachingOptimizingCompilerOptions:
    """Kaldi's CachingOptimizingCompilerOptions (names, defaults, docs).

    Kaldi's x-vector tools register these without a prefix
    (``--use-shortcut``, ``--cache-capacity``); its training and diagnostic
    tools under ``compiler`` (``--compiler.use-shortcut``, ...); its decoders
    not at all (tools register them with ``pynnet3.bin._option_groups``)."""

    use_shortcut: bool = _opt(
        True, "If true, use the 'shortcut' in compilation whereby computation requests with "
        "regular structure are identified as such, a computation with a smaller number of "
        "distinct values of 'n' is compiled (e.g. 2), and the compiled computation is "
        "expanded to match the size of the real computation request.")
    cache_capacity: int = _opt(
        64, "Determines how many computations the computation-cache will store "
        "(most-recently-used).")


# -- Kaldi's request hash ----------------------------------------------------------------

def _int32_term(value, factor):
    """``value * factor`` as C's int arithmetic gives it (wrapping at 32
    bits), widened to size_t as Kaldi's hasher adds it."""
    v = (value * factor) & 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def _string_hash(name):
    """Kaldi's StringHasher (chars are signed on Kaldi's platform)."""
    ans = 0
    for c in name.encode("utf-8"):
        ans = (ans * 7853 + (c - 256 if c > 127 else c)) & _MASK64
    return ans


def _index_vector_hash(indexes):
    """Kaldi's IndexVectorHasher: the first 15 Indexes, then every 10th."""
    size = len(indexes)
    ans = 1433 + 34949 * size
    positions = list(range(min(15, size))) + list(range(15, size, 10))
    for i in positions:
        n, t, x = indexes[i]
        ans += _int32_term(n, 1619) + _int32_term(t, 15649) + _int32_term(x, 89809)
    return ans & _MASK64


def _io_hash(spec):
    return (_string_hash(spec.name) + _index_vector_hash(spec.indexes)
            + (4261 if spec.has_deriv else 0)) & _MASK64


def request_hash(request):
    """Kaldi's ComputationRequestHasher (a 64-bit size_t)."""
    ans = 0
    for spec in request.inputs:
        ans = (ans * 4111 + _io_hash(spec)) & _MASK64
    for spec in request.outputs:
        ans = (ans * 26951 + _io_hash(spec)) & _MASK64
    return ans


class _RequestKey:
    """A cached request as a dict key: Kaldi's hash, Kaldi's equality (every
    field of the request)."""

    __slots__ = ("request", "hash")

    def __init__(self, request):
        self.request = request
        self.hash = request_hash(request)

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        return self.hash == other.hash and self.request == other.request


def _copy_request(request):
    return ComputationRequest(
        [IoSpecification(s.name, list(s.indexes), s.has_deriv) for s in request.inputs],
        [IoSpecification(s.name, list(s.indexes), s.has_deriv) for s in request.outputs],
        request.need_model_derivative, request.store_component_stats, request.misc_info)


# -- libstdc++'s unordered_map iteration order -------------------------------------------

# The bucket counts libstdc++'s prime rehash policy (max load factor 1) steps
# through as a default-constructed unordered_map grows: it rehashes before
# inserting an element that would make the size exceed the bucket count.
_BUCKET_COUNTS = (1, 13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043,
                  85229, 172933, 351061, 712697, 1447153, 2938679, 5967347, 12117689)


class _KaldiHashOrder:
    """The iteration order of Kaldi's cache map (a libstdc++ unordered_map
    with unique keys), kept as a list. libstdc++ links all elements in one
    list with each bucket's elements contiguous: a new element goes first in
    its bucket's run, or first in the list when its bucket is empty; a rehash
    re-inserts the elements in their old order by the same rule; an erase
    just unlinks."""

    def __init__(self):
        self.order = []
        self.bucket_index = 0

    def _place(self, order, key, num_buckets):
        bucket = key.hash % num_buckets
        for pos, other in enumerate(order):
            if other.hash % num_buckets == bucket:
                order.insert(pos, key)
                return
        order.insert(0, key)

    def insert(self, key):
        if self.bucket_index == 0 or len(self.order) + 1 > _BUCKET_COUNTS[self.bucket_index]:
            if self.bucket_index + 1 >= len(_BUCKET_COUNTS):
                raise ComputationError("computation cache: more than %d entries"
                                       % _BUCKET_COUNTS[-1])
            self.bucket_index += 1
            rehashed = []
            for other in self.order:
                self._place(rehashed, other, _BUCKET_COUNTS[self.bucket_index])
            self.order = rehashed
        self._place(self.order, key, _BUCKET_COUNTS[self.bucket_index])

    def erase(self, key):
        self.order.remove(key)

    def restore(self, keys):
        """Sets the map to the state it had when it iterated as ``keys`` (a
        cache file's order), with the fewest buckets that hold them.

        Deliberately not what Kaldi does: Kaldi re-inserts a file's entries
        one by one, which reverses their order (a new entry goes first), so
        a cache it reads and writes back changes; restoring the written
        order makes a cache file round-trip byte for byte, and later
        insertions follow libstdc++'s rule from there."""
        self.order = list(keys)
        self.bucket_index = 0
        if keys:    # the first insertion allocates buckets; then they grow as needed
            self.bucket_index = 1
            while _BUCKET_COUNTS[self.bucket_index] < len(keys):
                self.bucket_index += 1


class ComputationCache:
    """Kaldi's ComputationCache: request -> computation, most recently used
    first to stay (see the module docstring)."""

    def __init__(self, cache_capacity):
        if cache_capacity <= 0:
            raise ValueError("cache_capacity must be positive, got %d" % cache_capacity)
        self.cache_capacity = cache_capacity
        self._entries = OrderedDict()     # _RequestKey -> computation, least recent first
        self._order = _KaldiHashOrder()

    def __len__(self):
        return len(self._entries)

    def requests(self):
        """The cached requests, least recently used first."""
        return [key.request for key in self._entries]

    def find(self, request):
        """The cached computation for ``request`` (now the most recently
        used), or None."""
        key = _RequestKey(request)
        computation = self._entries.get(key)
        if computation is not None:
            self._entries.move_to_end(key)
        return computation

    def insert(self, request, computation):
        """Caches ``computation`` for (a copy of) ``request``, evicting the
        least recently used entry if the cache is full; returns
        ``computation``."""
        if len(self._entries) >= self.cache_capacity:
            oldest = next(iter(self._entries))
            del self._entries[oldest]
            self._order.erase(oldest)
        key = _RequestKey(_copy_request(request))
        if key not in self._entries:   # (Kaldi keeps the entry already there)
            self._entries[key] = computation
            self._order.insert(key)
        return computation

    def read(self, stream):
        """Kaldi's ComputationCache::Read: replaces the contents with the
        entries in ``stream`` (inserted in file order, so a file with more
        entries than the capacity keeps the last ones)."""
        stream.expect_token("<ComputationCacheSize>")
        start = stream.pos
        size = stream.read_int32()
        if size < 0:
            raise stream.error("negative <ComputationCacheSize> %d" % size, start)
        self._entries.clear()
        self._order = _KaldiHashOrder()
        stream.expect_token("<ComputationCache>")
        for _ in range(size):
            request = ComputationRequest().read_from(stream)
            self.insert(request, read_computation(stream))
        # Restore the map order the file was written in (see _KaldiHashOrder.restore).
        self._order.restore(list(self._entries))

    def write(self, stream):
        """Kaldi's ComputationCache::Write, entries in Kaldi's map order."""
        stream.write_token("<ComputationCacheSize>")
        stream.write_int32(len(self._entries))
        stream.write_token("<ComputationCache>")
        for key in self._order.order:
            key.request.write_to(stream)
            write_computation(self._entries[key], stream)


# -- the compiler ------------------------------------------------------------------------

class CachingOptimizingCompiler:
    """Compiles and optimizes requests for one network, caching the results
    (Kaldi's CachingOptimizingCompiler; see the module docstring). The
    network must not change while the compiler is in use."""

    def __init__(self, nnet, optimize_options=None, compiler_options=None):
        self.nnet = nnet
        self.optimize_options = (optimize_options if optimize_options is not None
                                 else NnetOptimizeOptions())
        self.config = (compiler_options if compiler_options is not None
                       else CachingOptimizingCompilerOptions())
        self.cache = ComputationCache(self.config.cache_capacity)
        self._simple_context = None
        self._giving_back = GivingBack()     # after compilations (see _compile_internal)
        # seconds spent, as Kaldi reports them when the compiler goes away
        self.seconds_taken = dict(total=0.0, compile=0.0, optimize=0.0, expand=0.0, check=0.0,
                                  io=0.0)

    def compile(self, request):
        """The optimized NnetComputation for ``request`` (shared with the
        cache: do not modify it)."""
        start = time.perf_counter()
        # Each stage (compile, check, optimize, expand) already pauses the
        # cyclic GC while it runs; paused across all of them too, the young
        # objects of one stage are not rescanned at the start of the next
        # (nothing here makes reference cycles).
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._compile_internal(request)
        finally:
            if gc_was_enabled:
                gc.enable()
            self.seconds_taken["total"] += time.perf_counter() - start

    def _compile_internal(self, request):
        computation = self.cache.find(request)
        if computation is not None:
            return computation
        # a large compilation's temporaries, freed by its end, are given
        # back, or a tool's peak memory keeps them under the matrices its
        # computations then run on (pynnet3.common.heap); a cache hit
        # allocates nothing and is not measured
        with self._giving_back.around():
            if self.config.use_shortcut:
                computation = self._compile_via_shortcut(request)
            if computation is None:
                computation = self._compile_no_shortcut(request)
            return self.cache.insert(request, computation)

    def _compile_no_shortcut(self, request):
        """Compile, check, optimize, check again: Kaldi checks every
        computation it caches (the first check includes the rewrite check,
        valid only before optimization)."""
        t0 = time.perf_counter()
        computation = compile_(self.nnet, request, optimize=False)
        t1 = time.perf_counter()
        ComputationChecker(CheckComputationOptions(check_rewrite=True), self.nnet,
                           computation).check()
        t2 = time.perf_counter()
        optimize(self.optimize_options, self.nnet, max_output_time_in_request(request),
                 computation)
        t3 = time.perf_counter()
        ComputationChecker(CheckComputationOptions(), self.nnet, computation).check()
        t4 = time.perf_counter()
        self.seconds_taken["compile"] += t1 - t0
        self.seconds_taken["check"] += (t2 - t1) + (t4 - t3)
        self.seconds_taken["optimize"] += t3 - t2
        return computation

    def _compile_via_shortcut(self, request):
        ans = request_is_decomposable(request)
        if ans is None:
            return None
        mini_request, num_n = ans
        # the mini request is compiled (and cached) like any other
        mini = self._compile_internal(mini_request)
        start = time.perf_counter()
        computation = expand_computation(self.nnet, request.misc_info, mini, True, num_n)
        self.seconds_taken["expand"] += time.perf_counter() - start
        return computation

    def get_simple_nnet_context(self):
        """(left_context, right_context) of the (simple) network, computed
        once: Kaldi keeps it here because the decoders ask for every chunk."""
        if self._simple_context is None:
            self._simple_context = compute_simple_nnet_context(self.nnet)
        return self._simple_context

    def timing_summary(self):
        """Kaldi's closing log line (``... seconds taken in nnet3 compilation
        total (breakdown: ...)``)."""
        t = self.seconds_taken
        misc = t["total"] - t["compile"] - t["optimize"] - t["expand"] - t["check"]
        return ("%.3g seconds taken in nnet3 compilation total (breakdown: %.3g compilation, "
                "%.3g optimization, %.3g shortcut expansion, %.3g checking, %.3g misc.) + "
                "%.3g I/O." % (t["total"], t["compile"], t["optimize"], t["expand"], t["check"],
                               misc, t["io"]))

    # -- the cache file ---------------------------------------------------------------
    def read_cache(self, stream):
        """Kaldi's ReadCache: the options the cache was made with, then the
        entries; the entries are ignored (with a warning) when those options
        differ from this compiler's, since they would be other computations."""
        start = time.perf_counter()
        cached_options = read_optimize_options(stream)
        if not optimize_options_equal(cached_options, self.optimize_options):
            log.warning("not using the cached computations in %s: they were optimized with "
                        "other options", stream.source)
            return
        self.cache.read(stream)
        self.seconds_taken["io"] += time.perf_counter() - start

    def write_cache(self, stream):
        """Kaldi's WriteCache."""
        start = time.perf_counter()
        write_optimize_options(stream, self.optimize_options)
        self.cache.write(stream)
        self.seconds_taken["io"] += time.perf_counter() - start

    def read_cache_file(self, rxfilename):
        """Reads a cache file (binary or text, as Kaldi's Input detects)."""
        self.read_cache(open_input(rxfilename))

    def write_cache_file(self, wxfilename, binary=True):
        write_object(wxfilename, binary, self.write_cache)
