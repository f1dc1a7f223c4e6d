"""Kaldi's edit distances between token sequences (util/edit-distance):
what compute-wer and align-text score with.

Guarantees: :func:`levenshtein_edit_distance` returns the minimum number of
insertions, deletions and substitutions turning ``ref`` into ``hyp``, and
splits it into those three counts exactly as Kaldi does when several splits
reach the minimum (a substitution only when strictly cheaper than both
others, then a deletion when strictly cheaper than an insertion, otherwise an
insertion), so ``%WER`` lines break the total down as Kaldi's.
:func:`levenshtein_alignment` returns a minimum-cost alignment, choosing
among equal-cost ones as Kaldi's trace-back does (match/substitution first,
then deletion, then insertion, deciding from the end backwards).
"""


def levenshtein_edit_distance(ref, hyp):
    """(total, ins, del, sub) of turning ``ref`` into ``hyp``."""
    # One row per hypothesis prefix, one entry per reference prefix:
    # (cost, ins, del, sub).
    row = [(i, 0, i, 0) for i in range(len(ref) + 1)]
    for h in hyp:
        cost, ins, dels, sub = row[0]
        new = [(cost + 1, ins + 1, dels, sub)]
        for r_index, r in enumerate(ref, 1):
            ins_cost = row[r_index][0] + 1
            del_cost = new[r_index - 1][0] + 1
            same = h == r
            sub_cost = row[r_index - 1][0] + (0 if same else 1)
            # Kaldi's order of preference on ties decides the ins/del/sub split.
            if sub_cost < ins_cost and sub_cost < del_cost:
                _, i, d, s = row[r_index - 1]
                new.append((sub_cost, i, d, s if same else s + 1))
            elif del_cost < ins_cost:
                _, i, d, s = new[r_index - 1]
                new.append((del_cost, i, d + 1, s))
            else:
                _, i, d, s = row[r_index]
                new.append((ins_cost, i + 1, d, s))
        row = new
    return row[-1]


def levenshtein_alignment(a, b, eps_symbol):
    """(cost, pairs): a minimum-cost alignment of ``a`` (reference) with
    ``b`` (hypothesis) as a list of pairs, ``eps_symbol`` standing for the
    missing side of a deletion or insertion. Neither sequence may contain
    ``eps_symbol``."""
    if eps_symbol in a or eps_symbol in b:
        raise ValueError("sequences to align contain the epsilon symbol %r" % (eps_symbol,))
    m_len, n_len = len(a), len(b)
    e = [list(range(n_len + 1))]
    for m in range(1, m_len + 1):
        prev = e[-1]
        row = [prev[0] + 1]
        for n in range(1, n_len + 1):
            row.append(min(prev[n - 1] + (a[m - 1] != b[n - 1]), prev[n] + 1, row[n - 1] + 1))
        e.append(row)
    pairs = []
    m, n = m_len, n_len
    while m or n:
        if m == 0:
            last_m, last_n = m, n - 1
        elif n == 0:
            last_m, last_n = m - 1, n
        else:
            sub_or_ok = e[m - 1][n - 1] + (a[m - 1] != b[n - 1])
            dele = e[m - 1][n] + 1
            ins = e[m][n - 1] + 1
            if sub_or_ok <= min(dele, ins):
                last_m, last_n = m - 1, n - 1
            elif dele <= ins:
                last_m, last_n = m - 1, n
            else:
                last_m, last_n = m, n - 1
        pairs.append((eps_symbol if last_m == m else a[last_m],
                      eps_symbol if last_n == n else b[last_n]))
        m, n = last_m, last_n
    pairs.reverse()
    return e[m_len][n_len], pairs
