# cython: language_level=3
"""Packed Cindexes and a Cindex hash table, shared (as inline C) by the
compiler's kernels (the Descriptor programs run in descriptor_interpreter.pxd).

A Cindex (node, (n, t, x)) is packed into one non-negative int64 whose integer
order is Kaldi's Cindex order (node, then t, x, n):

    bits 51..62  node            0 .. 4095
    bits 27..50  t + 2^23        t in (-2^23, 2^23); kNoTime is stored as 0
    bits 15..26  x + 2^11        x in [-2048, 2047]
    bits  0..14  n + 2^14        n in [-16384, 16383]

``pack`` returns -1 when a value is out of range; callers turn that into a
ComputationError naming the Cindex.
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libcpp.vector cimport vector

cdef enum:
    NODE_SHIFT = 51
    T_SHIFT = 27
    X_SHIFT = 15
    T_BIAS = 8388608      # 2^23
    X_BIAS = 2048
    N_BIAS = 16384
    T_MASK = 16777215     # 2^24 - 1
    X_MASK = 4095
    N_MASK = 32767
    MAX_NODE = 4095

cdef enum:
    K_NO_TIME = -2147483648


cdef inline int64_t pack(int64_t node, int64_t n, int64_t t, int64_t x) noexcept nogil:
    cdef int64_t tf
    if t == K_NO_TIME:
        tf = 0
    else:
        tf = t + T_BIAS
        if tf < 1 or tf > T_MASK:
            return -1
    if node < 0 or node > MAX_NODE:
        return -1
    x += X_BIAS
    n += N_BIAS
    if x < 0 or x > X_MASK or n < 0 or n > N_MASK:
        return -1
    return (node << NODE_SHIFT) | (tf << T_SHIFT) | (x << X_SHIFT) | n


cdef inline int32_t key_node(int64_t key) noexcept nogil:
    return <int32_t>(key >> NODE_SHIFT)


cdef inline int32_t key_t(int64_t key) noexcept nogil:
    cdef int64_t tf = (key >> T_SHIFT) & T_MASK
    if tf == 0:
        return <int32_t>K_NO_TIME
    return <int32_t>(tf - T_BIAS)


cdef inline int32_t key_x(int64_t key) noexcept nogil:
    return <int32_t>(((key >> X_SHIFT) & X_MASK) - X_BIAS)


cdef inline int32_t key_n(int64_t key) noexcept nogil:
    return <int32_t>((key & N_MASK) - N_BIAS)


cdef inline int64_t with_node(int64_t key, int64_t node) noexcept nogil:
    """The same Index at another node (node must be in range)."""
    return (key & ((<int64_t>1 << NODE_SHIFT) - 1)) | (node << NODE_SHIFT)


# -- hash table: packed key -> int32 id (open addressing, linear probing) -------------

cdef struct CindexTable:
    int64_t *keys      # -1 = empty
    int32_t *vals
    int64_t capacity   # power of two
    int64_t size
    int shift          # 64 - log2(capacity)


cdef inline int table_init(CindexTable *t, int64_t min_capacity) noexcept nogil:
    cdef int64_t cap = 16
    cdef int bits = 4
    cdef int64_t i
    while cap < 2 * min_capacity:
        cap *= 2
        bits += 1
    t.keys = <int64_t *>malloc(cap * sizeof(int64_t))
    t.vals = <int32_t *>malloc(cap * sizeof(int32_t))
    if t.keys == NULL or t.vals == NULL:
        return -1
    for i in range(cap):
        t.keys[i] = -1
    t.capacity = cap
    t.size = 0
    t.shift = 64 - bits
    return 0


cdef inline void table_free(CindexTable *t) noexcept nogil:
    if t.keys != NULL:
        free(t.keys)
        t.keys = NULL
    if t.vals != NULL:
        free(t.vals)
        t.vals = NULL
    t.size = 0
    t.capacity = 0


cdef inline int64_t table_slot(const CindexTable *t, int64_t key) noexcept nogil:
    cdef int64_t mask = t.capacity - 1
    cdef int64_t i = <int64_t>((<uint64_t>key * <uint64_t>0x9E3779B97F4A7C15) >> t.shift)
    while True:
        if t.keys[i] == key or t.keys[i] == -1:
            return i
        i = (i + 1) & mask


cdef inline int32_t table_find(const CindexTable *t, int64_t key) noexcept nogil:
    cdef int64_t i = table_slot(t, key)
    if t.keys[i] == -1:
        return -1
    return t.vals[i]


cdef inline int table_grow(CindexTable *t) noexcept nogil:
    cdef CindexTable bigger
    cdef int64_t i, j
    if table_init(&bigger, t.capacity) != 0:
        return -1
    for i in range(t.capacity):
        if t.keys[i] != -1:
            j = table_slot(&bigger, t.keys[i])
            bigger.keys[j] = t.keys[i]
            bigger.vals[j] = t.vals[i]
    bigger.size = t.size
    table_free(t)
    t[0] = bigger
    return 0


cdef inline int32_t table_get_or_insert(CindexTable *t, int64_t key, int32_t value,
                                        bint *is_new) noexcept nogil:
    """The id stored for ``key``; if absent stores ``value`` (is_new set).
    Returns -2 on allocation failure."""
    cdef int64_t i
    if 2 * (t.size + 1) > t.capacity:
        if table_grow(t) != 0:
            return -2
    i = table_slot(t, key)
    if t.keys[i] != -1:
        is_new[0] = False
        return t.vals[i]
    t.keys[i] = key
    t.vals[i] = value
    t.size += 1
    is_new[0] = True
    return value
