# cython: language_level=3
"""Packed Cindexes, a Cindex hash table and the Descriptor-program interpreter,
shared (as inline C) by the Cython compiler modules.

A Cindex (node, (n, t, x)) is packed into one non-negative int64 whose integer
order is Kaldi's Cindex order (node, then t, x, n):

    bits 51..62  node            0 .. 4095
    bits 27..50  t + 2^23        t in (-2^23, 2^23); kNoTime is stored as 0
    bits 15..26  x + 2^11        x in [-2048, 2047]
    bits  0..14  n + 2^14        n in [-16384, 16383]

``pack`` returns -1 when a value is out of range; callers turn that into a
ComputationError naming the Cindex. The interpreter evaluates the int32
programs made by ``pynnet3.compiler.descriptor_program`` with the same
semantics as the Python Descriptor classes.
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
    F_NODE = 1
    F_OFFSET = 2
    F_SWITCH = 3
    F_ROUND = 4
    F_REPLACE_T = 5
    F_REPLACE_X = 6
    S_SIMPLE = 10
    S_OPTIONAL = 11
    S_CONST = 12
    S_SUM = 13
    S_FAILOVER = 14

# ComputableInfo values (Kaldi's), and predicate modes for the interpreter.
cdef enum:
    K_UNKNOWN = 0
    K_COMPUTABLE = 1
    K_NOT_COMPUTABLE = 2
    K_WILL_NOT_COMPUTE = 3
    MODE_EXISTS = 0
    MODE_COMPUTABLE = 1
    MODE_COMPUTABLE_OR_UNKNOWN = 2

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


# -- Descriptor programs ---------------------------------------------------------------

cdef struct Predicate:
    const CindexTable *table
    const int8_t *computable   # computable state of cindex_id 0 (unused for MODE_EXISTS)
    int stride                 # bytes between the states of consecutive cindex_ids
    int mode


cdef inline bint pred_holds(const Predicate *p, int64_t key) noexcept nogil:
    cdef int32_t cid = table_find(p.table, key)
    cdef int8_t c
    if cid < 0:
        return False
    if p.mode == MODE_EXISTS:
        return True
    c = p.computable[<int64_t>cid * p.stride]
    if p.mode == MODE_COMPUTABLE:
        return c == K_COMPUTABLE
    return c == K_COMPUTABLE or c == K_UNKNOWN


cdef inline int64_t math_mod(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t m = a % b
    if m < 0:
        m += b
    return m


cdef inline int64_t fwd_map(const int32_t *prog, int pos, int64_t n, int64_t t,
                            int64_t x) noexcept nogil:
    """MapToInput: the packed input Cindex, or -1 if out of the packable range."""
    cdef int op
    while True:
        op = prog[pos]
        if op == F_NODE:
            return pack(prog[pos + 1], n, t, x)
        elif op == F_OFFSET:
            n += prog[pos + 1]
            t += prog[pos + 2]
            x += prog[pos + 3]
            pos += 4
        elif op == F_SWITCH:
            pos = prog[pos + 2 + math_mod(t, prog[pos + 1])]
        elif op == F_ROUND:
            t -= math_mod(t, prog[pos + 1])
            pos += 2
        elif op == F_REPLACE_T:
            t = prog[pos + 1]
            pos += 2
        elif op == F_REPLACE_X:
            x = prog[pos + 1]
            pos += 2
        else:
            return -1


cdef inline int sum_dependencies(const int32_t *prog, int pos, int64_t n, int64_t t,
                                 int64_t x, vector[int64_t] *out) noexcept nogil:
    """GetDependencies of one SumDescriptor: appends packed keys; -1 on a range error."""
    cdef int op = prog[pos]
    cdef int64_t key
    if op == S_SIMPLE:
        key = fwd_map(prog, pos + 1, n, t, x)
        if key < 0:
            return -1
        out.push_back(key)
        return 0
    elif op == S_OPTIONAL:
        return sum_dependencies(prog, pos + 1, n, t, x, out)
    elif op == S_CONST:
        return 0
    elif op == S_SUM or op == S_FAILOVER:
        if sum_dependencies(prog, pos + 2, n, t, x, out) < 0:
            return -1
        return sum_dependencies(prog, prog[pos + 1], n, t, x, out)
    return -1


cdef inline int sum_is_computable(const int32_t *prog, int pos, int64_t n, int64_t t,
                                  int64_t x, const Predicate *pred,
                                  vector[int64_t] *used) noexcept nogil:
    """IsComputable of one SumDescriptor: 1 / 0, or -1 on a range error. With
    ``used`` (may be NULL) it appends the inputs used, only when computable."""
    cdef int op = prog[pos]
    cdef int64_t key
    cdef int ok1, ok2
    cdef size_t start, mid
    if op == S_SIMPLE:
        key = fwd_map(prog, pos + 1, n, t, x)
        if key < 0:
            return -1
        if pred_holds(pred, key):
            if used != NULL:
                used.push_back(key)
            return 1
        return 0
    elif op == S_OPTIONAL:
        if used != NULL:
            if sum_is_computable(prog, pos + 1, n, t, x, pred, used) < 0:
                return -1
        return 1
    elif op == S_CONST:
        return 1
    elif op == S_SUM or op == S_FAILOVER:
        if used == NULL:
            ok1 = sum_is_computable(prog, pos + 2, n, t, x, pred, NULL)
            if ok1 < 0:
                return -1
            ok2 = sum_is_computable(prog, prog[pos + 1], n, t, x, pred, NULL)
            if ok2 < 0:
                return -1
            if op == S_SUM:
                return 1 if (ok1 and ok2) else 0
            return 1 if (ok1 or ok2) else 0
        start = used.size()
        ok1 = sum_is_computable(prog, pos + 2, n, t, x, pred, used)
        if ok1 < 0:
            return -1
        mid = used.size()
        ok2 = sum_is_computable(prog, prog[pos + 1], n, t, x, pred, used)
        if ok2 < 0:
            return -1
        if op == S_SUM:
            if ok1 and ok2:
                return 1
            used.resize(start)
            return 0
        if ok1:
            used.resize(mid)
            return 1
        if ok2:
            return 1
        used.resize(start)
        return 0
    return -1


cdef inline int desc_is_computable(const int32_t *prog, const int32_t *starts, int num_parts,
                                   int64_t n, int64_t t, int64_t x, const Predicate *pred,
                                   vector[int64_t] *used) noexcept nogil:
    """Descriptor::IsComputable: all parts computable; ``used`` is cleared first
    and cleared again on failure."""
    cdef int p, r
    if used != NULL:
        used.clear()
    for p in range(num_parts):
        r = sum_is_computable(prog, starts[p], n, t, x, pred, used)
        if r <= 0:
            if used != NULL:
                used.clear()
            return r
    return 1


cdef inline int desc_dependencies(const int32_t *prog, const int32_t *starts, int num_parts,
                                  int64_t n, int64_t t, int64_t x,
                                  vector[int64_t] *out) noexcept nogil:
    cdef int p
    for p in range(num_parts):
        if sum_dependencies(prog, starts[p], n, t, x, out) < 0:
            return -1
    return 0
