"""glibc's rand() (the default TYPE_3 additive feedback generator of
random_r), which Kaldi's Rand()/RandInt() call: tools that sample with it
(compute-wer-bootci) draw the same numbers as Kaldi built against glibc.

Guarantees: after ``GlibcRand(seed)`` the values of :meth:`rand` are those of
glibc's ``rand()`` after ``srand(seed)`` (an unseeded program behaves as
seed 1); :meth:`rand_int` is Kaldi's RandInt(min, max) (no draw at all when
min == max).
"""

_MASK32 = 0xFFFFFFFF
_MODULUS = 2147483647       # 2^31 - 1, the seeding recurrence's modulus


class GlibcRand:
    def __init__(self, seed=1):
        self.srand(seed)

    def srand(self, seed):
        seed &= _MASK32
        if seed == 0:       # glibc replaces a zero seed by 1
            seed = 1
        r = [seed]
        word = seed if seed < 2**31 else seed - 2**32
        for _ in range(1, 31):
            # 16807 * word mod (2^31 - 1) by Schrage's method, in signed
            # 32-bit arithmetic as glibc computes it.
            hi, lo = divmod(word, 127773) if word >= 0 else (-((-word) // 127773),
                                                               -((-word) % 127773))
            word = 16807 * lo - 2836 * hi
            if word < 0:
                word += _MODULUS
            r.append(word & _MASK32)
        r.extend(r[:3])     # r[31..33] = r[0..2]
        # The first 310 outputs of the feedback are thrown away.
        for _ in range(310):
            r.append((r[-31] + r[-3]) & _MASK32)
        self._state = r[-34:]

    def rand_block(self, n):
        """The next ``n`` values of rand() as a list."""
        r = self._state
        for _ in range(n):
            r.append((r[-31] + r[-3]) & _MASK32)
        out = [v >> 1 for v in r[len(r) - n:]] if n else []
        del r[:-34]
        return out

    def rand(self):
        return self.rand_block(1)[0]

    def rand_int(self, min_val, max_val):
        """Kaldi's RandInt: min_val + rand() % (max_val + 1 - min_val)."""
        if max_val < min_val:
            raise ValueError("rand_int: max_val %d < min_val %d" % (max_val, min_val))
        if max_val == min_val:
            return min_val
        return min_val + self.rand() % (max_val + 1 - min_val)
