"""OpenFst's and Kaldi's FST operations that lattice determinization uses,
on a :class:`Lattice` (arcs (ilabel, olabel, graph cost, acoustic cost,
nextstate)): TopSort, Invert, ArcSort (with libstdc++'s std::sort, whose
order of equal elements the later steps depend on), and Kaldi's Factor and
ConvertLattice (a Lattice to a CompactLattice and back). Each gives Kaldi's state
numbering and arc order, so what is built on them is Kaldi's text.
"""

from array import array

from ..common.floats import f32
from .lattice import CompactLattice, Lattice

__all__ = ["is_top_sorted", "top_sort", "invert", "arc_sort_ilabel", "std_sort", "factor",
           "convert_lattice", "convert_compact_lattice", "f32", "times", "compare_weights", "approx_equal"]

# Weights are Python floats holding float32 values. A float32 sum or
# difference is computed in double and rounded once to float32 (f32, or this
# one-element buffer where two are rounded at once): double rounding is
# harmless for + and - since double has more than 2 * 24 + 2 bits, so this
# equals C's float arithmetic.
_BUF = array("f", [0.0])


def times(a1, a2, b1, b2):
    """Kaldi's Times on LatticeWeight (a1, a2) x (b1, b2): float32 sums."""
    buf = _BUF
    buf[0] = a1 + b1
    x = buf[0]
    buf[0] = a2 + b2
    return x, buf[0]


def compare_weights(a1, a2, b1, b2):
    """Kaldi's Compare on LatticeWeight: 1 if a is better (lower cost), -1
    if worse, 0 if equal (float32 total cost, then the graph part)."""
    fa, fb = f32(a1 + a2), f32(b1 + b2)
    if fa < fb:
        return 1
    if fa > fb:
        return -1
    if a1 < b1:
        return 1
    if a1 > b1:
        return -1
    return 0


def approx_equal(a1, a2, b1, b2, delta):
    """Kaldi's ApproxEqual on LatticeWeight: equal, or float32 total costs
    within ``delta``."""
    if a1 == b1 and a2 == b2:
        return True
    return abs(f32(f32(a1 + a2) - f32(b1 + b2))) <= delta


def is_top_sorted(lat):
    return all(a[4] > s for s in range(lat.num_states) for a in lat.arcs[s])


def top_sort(lat):
    """OpenFst's TopSort: states renumbered in reverse DFS finishing order
    (DFS from the start state, arcs in order, then from unvisited states in
    numbering order); arcs keep their order. Returns False (and leaves the
    lattice alone) if it has a cycle."""
    n = lat.num_states
    if n == 0:
        return True
    color = [0] * n            # 0 white, 1 grey, 2 black
    pos = [0] * n              # next arc to look at, per state on the stack
    finish = []
    all_arcs = lat.arcs
    roots = ([lat.start] if lat.start is not None else []) + list(range(n))
    for root in roots:
        if color[root]:
            continue
        color[root] = 1
        stack = [root]
        while stack:
            s = stack[-1]
            arcs = all_arcs[s]
            i, na = pos[s], len(arcs)
            while i < na:
                t = arcs[i][4]
                i += 1
                c = color[t]
                if c == 0:
                    color[t] = 1
                    stack.append(t)
                    break
                if c == 1:
                    return False
            else:
                color[s] = 2
                finish.append(s)
                stack.pop()
            pos[s] = i
    order = [0] * n
    for i, s in enumerate(reversed(finish)):
        order[s] = i
    arcs = [None] * n
    final = [None] * n
    for s in range(n):
        arcs[order[s]] = [(a[0], a[1], a[2], a[3], order[a[4]]) for a in lat.arcs[s]]
        final[order[s]] = lat.final[s]
    lat.arcs, lat.final = arcs, final
    if lat.start is not None:
        lat.start = order[lat.start]
    return True


def invert(lat):
    for s in range(lat.num_states):
        lat.arcs[s] = [(ol, il, x, y, t) for il, ol, x, y, t in lat.arcs[s]]


def arc_sort_ilabel(lat):
    """OpenFst's ArcSort with ILabelCompare: each state's arcs sorted on
    (input label, output label) by std::sort, which is not stable, so arcs
    with equal labels end up in libstdc++'s order (see :func:`std_sort`)."""
    key = _labels
    for s in range(lat.num_states):
        arcs = lat.arcs[s]
        if len(arcs) > _STD_SORT_THRESHOLD:
            std_sort(arcs, key)
        else:
            arcs.sort(key=key)   # libstdc++ insertion-sorts short ranges: stable


def _labels(arc):
    return arc[0], arc[1]


_STD_SORT_THRESHOLD = 16


def std_sort(v, key):
    """Sorts list ``v`` in place on ``key`` exactly as libstdc++'s std::sort
    (introsort: median-of-three partitioning down to ranges of 16, heapsort
    past the depth limit 2 floor(log2 n), then one insertion sort), so that
    elements with equal keys end up where C++ puts them."""
    n = len(v)
    if n < 2:
        return
    k = [key(x) for x in v]
    items = list(zip(k, range(n)))       # sort (key, original) pairs, compare keys only
    _introsort_loop(items, 0, n, 2 * (n.bit_length() - 1))
    _final_insertion_sort(items, 0, n)
    v[:] = [v[i] for _, i in items]


def _introsort_loop(a, first, last, depth_limit):
    while last - first > _STD_SORT_THRESHOLD:
        if depth_limit == 0:
            _heap_sort(a, first, last)
            return
        depth_limit -= 1
        mid = first + (last - first) // 2
        _move_median_to_first(a, first, first + 1, mid, last - 1)
        cut = _unguarded_partition(a, first + 1, last, first)
        _introsort_loop(a, cut, last, depth_limit)
        last = cut


def _move_median_to_first(a, result, i, j, k):
    x, y, z = a[i][0], a[j][0], a[k][0]
    if x < y:
        m = j if y < z else (k if x < z else i)
    elif x < z:
        m = i
    elif y < z:
        m = k
    else:
        m = j
    a[result], a[m] = a[m], a[result]


def _unguarded_partition(a, first, last, pivot):
    p = a[pivot][0]
    while True:
        while a[first][0] < p:
            first += 1
        last -= 1
        while p < a[last][0]:
            last -= 1
        if not first < last:
            return first
        a[first], a[last] = a[last], a[first]
        first += 1


def _final_insertion_sort(a, first, last):
    if last - first > _STD_SORT_THRESHOLD:
        _insertion_sort(a, first, first + _STD_SORT_THRESHOLD)
        for i in range(first + _STD_SORT_THRESHOLD, last):
            _unguarded_linear_insert(a, i)
    else:
        _insertion_sort(a, first, last)


def _insertion_sort(a, first, last):
    for i in range(first + 1, last):
        if a[i][0] < a[first][0]:
            val = a[i]
            a[first + 1:i + 1] = a[first:i]
            a[first] = val
        else:
            _unguarded_linear_insert(a, i)


def _unguarded_linear_insert(a, last):
    val = a[last]
    nxt = last - 1
    while val[0] < a[nxt][0]:
        a[last] = a[nxt]
        last = nxt
        nxt -= 1
    a[last] = val


def _heap_sort(a, first, last):
    # std::__partial_sort(first, last, last): make_heap, then sort_heap
    n = last - first
    if n >= 2:
        parent = (n - 2) // 2
        while True:
            _adjust_heap(a, first, parent, n, a[first + parent])
            if parent == 0:
                break
            parent -= 1
    while last - first > 1:
        last -= 1
        val = a[last]
        a[last] = a[first]
        _adjust_heap(a, first, 0, last - first, val)


def _adjust_heap(a, first, hole, n, val):
    top = hole
    child = hole
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if a[first + child][0] < a[first + child - 1][0]:
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if (n & 1) == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and a[first + parent][0] < val[0]:
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = val


def _dfs_preorder(lat):
    """States in the order OpenFst's DfsVisit first reaches them (from the
    start state, then from each unvisited state in numbering order)."""
    n = lat.num_states
    seen = [False] * n
    order = []
    pos = [0] * n
    for root in [lat.start] + list(range(n)):
        if seen[root]:
            continue
        seen[root] = True
        order.append(root)
        stack = [root]
        while stack:
            s = stack[-1]
            arcs = lat.arcs[s]
            i = pos[s]
            while i < len(arcs) and seen[arcs[i][4]]:
                i += 1
            if i == len(arcs):
                pos[s] = i
                stack.pop()
                continue
            pos[s] = i + 1
            t = arcs[i][4]
            seen[t] = True
            order.append(t)
            stack.append(t)
    return order


def factor(lat):
    """Kaldi's Factor: every chain through states with one arc in, one arc
    out, no output label on it, neither initial nor final, becomes one arc
    whose input label numbers the chain's input-label sequence. Returns
    (factored Lattice, sequences) with sequences[0] the empty one; states are
    numbered as DfsVisit reaches them."""
    out = Lattice()
    if lat.start is None:
        return out, [()]
    order = _dfs_preorder(lat)
    n = max(order) + 1
    arcs_in = [0] * n
    removable = [False] * n
    for s in range(n):
        for a in lat.arcs[s]:
            arcs_in[a[4]] += 1
    for s in range(n):
        arcs = lat.arcs[s]
        removable[s] = (s != lat.start and lat.final[s] is None and arcs_in[s] == 1
                        and len(arcs) == 1 and arcs[0][1] == 0)
    new_id = [None] * n
    symbols = {(): 0}

    def state(s):
        if new_id[s] is None:
            new_id[s] = out.num_states
            out.add_states(1)
        return new_id[s]

    for s in order:
        if removable[s]:
            continue
        news = state(s)
        for il, ol, x, y, t in lat.arcs[s]:
            seq = [il] if il else []
            while removable[t]:
                nil, _, nx, ny, t = lat.arcs[t][0]
                x, y = times(x, y, nx, ny)
                if nil:
                    seq.append(nil)
            label = symbols.setdefault(tuple(seq), len(symbols))
            out.arcs[news].append((label, ol, x, y, state(t)))
        if lat.final[s] is not None:
            out.final[news] = lat.final[s]
    out.start = new_id[lat.start]
    sequences = [None] * len(symbols)
    for seq, label in symbols.items():
        sequences[label] = seq
    return out, sequences


def convert_lattice(lat, invert_labels=True):
    """Kaldi's ConvertLattice from a Lattice to a CompactLattice: chains are
    factored (:func:`factor`) so that each arc carries the input labels of a
    chain as its string (the output labels with ``invert_labels`` false) and
    the other side's label as its label; states top-sorted."""
    if not invert_labels:
        lat = _copy(lat)
        invert(lat)
    ffst, sequences = factor(lat)
    top_sort(ffst)
    clat = CompactLattice()
    clat.start = ffst.start
    clat.arcs = [[(ol, x, y, sequences[il], t) for il, ol, x, y, t in arcs]
                 for arcs in ffst.arcs]
    clat.final = [None if f is None else (f[0], f[1], ()) for f in ffst.final]
    return clat


def convert_compact_lattice(clat, invert_labels=True):
    """Kaldi's ConvertLattice from a CompactLattice to a Lattice. States keep
    their numbers; an arc whose string has n > 1 labels becomes a chain of n
    arcs through n - 1 new states (the weight and word label on the first,
    one string label each), a final weight with a string becomes a chain to
    a new final state. New states are numbered in the order Kaldi adds them
    (state by state: the final chain, then each arc's chain). With
    ``invert_labels`` (Kaldi's default) the string labels are the input
    labels and the word labels the output labels."""
    lat = Lattice()
    lat.add_states(clat.num_states)
    lat.start = clat.start
    one = (0.0, 0.0)

    def arc(word, tid, weight, nextstate):
        il, ol = (tid, word) if invert_labels else (word, tid)
        return (il, ol) + weight + (nextstate,)

    for s in range(clat.num_states):
        final = clat.final[s]
        if final is not None:
            cur = s
            string = final[2]
            for n, tid in enumerate(string):
                nxt = lat.num_states
                lat.add_states(1)
                lat.arcs[cur].append(arc(0, tid, final[:2] if n == 0 else one, nxt))
                cur = nxt
            lat.final[cur] = one if string else final[:2]
        for label, w1, w2, string, t in clat.arcs[s]:
            cur = s
            for n in range(len(string) - 1):
                nxt = lat.num_states
                lat.add_states(1)
                lat.arcs[cur].append(arc(label if n == 0 else 0, string[n],
                                         (w1, w2) if n == 0 else one, nxt))
                cur = nxt
            lat.arcs[cur].append(arc(label if len(string) <= 1 else 0,
                                     string[-1] if string else 0,
                                     (w1, w2) if len(string) <= 1 else one, t))
    return lat


def _copy(lat):
    c = Lattice()
    c.start, c.arcs, c.final = lat.start, [list(a) for a in lat.arcs], list(lat.final)
    return c
