# cython: language_level=3
"""The Descriptor-program interpreter, shared (as inline C) by the compiler's
kernels: it evaluates the int32 programs made by
``pynnet3.compiler.descriptor_program`` (GetDependencies, IsComputable with the
inputs used, MapToInput) with the same semantics as the Python Descriptor
classes, over packed Cindexes (cindex_keys.pxd).
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint64_t
from libcpp.vector cimport vector

from pynnet3._fast.cindex_keys cimport (CindexTable, K_NO_TIME, key_n, key_node, key_t, key_x,
                                        pack, table_find)
from pynnet3._fast.constants cimport *

# How a Predicate judges a Cindex.
cdef enum:
    MODE_EXISTS = 0
    MODE_COMPUTABLE = 1
    MODE_COMPUTABLE_OR_UNKNOWN = 2


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
        return c == kComputable
    return c == kComputable or c == kUnknown


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
