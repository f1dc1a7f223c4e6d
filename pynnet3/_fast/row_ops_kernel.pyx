# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""ReplaceRowWithMatrixOps' test of an index list in C (twin:
``consecutive_block_py`` in ``pynnet3.optimize.row_ops``).

Index lists are as long as the request has frames (10,000 for an x-vector
request), and each kCopyRows / kAddRows command's list is scanned once.
"""


def consecutive_block(index_list):
    """If ``index_list`` is -1s, then k, k+1, ..., k+n-1 (n >= 1), then -1s,
    returns (position of k, k, n); else None."""
    cdef list indexes = index_list if type(index_list) is list else list(index_list)
    cdef Py_ssize_t size = len(indexes), pos = 0, first_pos, rest
    cdef long first_value, value
    while pos < size and <long>indexes[pos] < 0:
        pos += 1
    if pos == size:
        return None
    first_pos = pos
    first_value = value = indexes[pos]
    while pos < size and <long>indexes[pos] == value:
        pos += 1
        value += 1
    for rest in range(pos, size):
        if <long>indexes[rest] >= 0:
            return None
    return first_pos, first_value, value - first_value


cdef inline bint _is_noop(object row, int kind) except -1:
    if kind == 0:
        return <long>row < 0
    if kind == 1:
        return <long>row[0] < 0
    return row[0] == row[1]


def leading_trailing_counts(rows, int kind):
    """(number of leading no-op rows, number of trailing no-op rows) of
    ``rows``, where a row is a no-op when (kind 0) the index is negative,
    (kind 1) the pair's submatrix is negative, (kind 2) the range is empty;
    the leading count is len(rows) (and the trailing 0) when every row is."""
    cdef list r = rows if type(rows) is list else list(rows)
    cdef Py_ssize_t n = len(r), lead = 0, trail = 0
    while lead < n and _is_noop(r[lead], kind):
        lead += 1
    if lead == n:
        return n, 0
    while _is_noop(r[n - 1 - trail], kind):
        trail += 1
    return lead, trail
