# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Kaldi's CPU AddRowRanges: dst[r, c] += src[j, c] for j in [begin_r, end_r),
added one source row at a time in increasing j, in float32, as Kaldi's CPU
loop adds them (so the numbers are Kaldi's exactly). Empty or reversed ranges
add nothing. The Python twin is pynnet3.components.row_ranges.add_row_ranges_py.

Rows whose elements are adjacent (the usual case, column slices included) are
added four columns per SSE2 instruction: each element still gets one float32
addition per source row, in the same order, so the bits are the scalar loop's.
With ``squared`` the source rows' squares are added (x-vector statistics
extraction), each square rounded to float32 first, as Kaldi adds the rows of
a squared copy: no temporary copy here.
"""

cimport cython

cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* d[c] += s[c] for c < n, one float32 addition per element. */
    static inline void pynnet3_add_row(float *d, const float *s, Py_ssize_t n) {
        Py_ssize_t c = 0;
    #if defined(__SSE2__)
        /* four vectors a step, written out: a loop over them ran 2.6x slower */
        for (; c + 16 <= n; c += 16) {
            float *e = d + c;
            const float *f = s + c;
            _mm_storeu_ps(e, _mm_add_ps(_mm_loadu_ps(e), _mm_loadu_ps(f)));
            _mm_storeu_ps(e + 4, _mm_add_ps(_mm_loadu_ps(e + 4), _mm_loadu_ps(f + 4)));
            _mm_storeu_ps(e + 8, _mm_add_ps(_mm_loadu_ps(e + 8), _mm_loadu_ps(f + 8)));
            _mm_storeu_ps(e + 12, _mm_add_ps(_mm_loadu_ps(e + 12), _mm_loadu_ps(f + 12)));
        }
        for (; c + 4 <= n; c += 4)
            _mm_storeu_ps(d + c, _mm_add_ps(_mm_loadu_ps(d + c), _mm_loadu_ps(s + c)));
    #endif
        for (; c < n; c++)
            d[c] += s[c];
    }
    /* d[c] += s[c] * s[c] for c < n: the square rounded to float32, then
       added (no fused multiply-add: the extensions build with
       -ffp-contract=off), as Kaldi squares a copy and then adds it. */
    static inline void pynnet3_add_row_squared(float *d, const float *s, Py_ssize_t n) {
        Py_ssize_t c = 0;
    #if defined(__SSE2__)
        for (; c + 8 <= n; c += 8) {
            __m128 a = _mm_loadu_ps(s + c), b = _mm_loadu_ps(s + c + 4);
            _mm_storeu_ps(d + c, _mm_add_ps(_mm_loadu_ps(d + c), _mm_mul_ps(a, a)));
            _mm_storeu_ps(d + c + 4, _mm_add_ps(_mm_loadu_ps(d + c + 4), _mm_mul_ps(b, b)));
        }
    #endif
        for (; c < n; c++)
            d[c] += s[c] * s[c];
    }
    #if defined(__SSE2__)
    static inline __m128 pynnet3_square_if(__m128 a, int squared) {
        return squared ? _mm_mul_ps(a, a) : a;
    }
    #endif
    /* d[c] = 0 + s[c] (or 0 + s[c] * s[c]): the first source row of a
       range onto a zeroed row, in one pass instead of zeroing and then
       adding; the same bits (0 + -0 is +0, as after zeroing). */
    static inline void pynnet3_set_row(float *d, const float *s, Py_ssize_t n, int squared) {
        Py_ssize_t c = 0;
    #if defined(__SSE2__)
        const __m128 zero = _mm_setzero_ps();
        for (; c + 16 <= n; c += 16) {
            __m128 a = _mm_loadu_ps(s + c), b = _mm_loadu_ps(s + c + 4);
            __m128 e = _mm_loadu_ps(s + c + 8), f = _mm_loadu_ps(s + c + 12);
            _mm_storeu_ps(d + c, _mm_add_ps(zero, pynnet3_square_if(a, squared)));
            _mm_storeu_ps(d + c + 4, _mm_add_ps(zero, pynnet3_square_if(b, squared)));
            _mm_storeu_ps(d + c + 8, _mm_add_ps(zero, pynnet3_square_if(e, squared)));
            _mm_storeu_ps(d + c + 12, _mm_add_ps(zero, pynnet3_square_if(f, squared)));
        }
        for (; c + 4 <= n; c += 4)
            _mm_storeu_ps(d + c, _mm_add_ps(zero, pynnet3_square_if(_mm_loadu_ps(s + c),
                                                                    squared)));
    #endif
        for (; c < n; c++)
            d[c] = 0.0f + (squared ? s[c] * s[c] : s[c]);
    }
    """
    void pynnet3_add_row(float *d, const float *s, Py_ssize_t n) nogil
    void pynnet3_add_row_squared(float *d, const float *s, Py_ssize_t n) nogil
    void pynnet3_set_row(float *d, const float *s, Py_ssize_t n, int squared) nogil

from libc.string cimport memset


def add_row_ranges(const float[:, :] src, const int[:, :] ranges, float[:, :] dst,
                   bint squared=False, bint onto_zeros=False):
    """In place on ``dst`` (any strides); ``ranges`` is (dst rows, 2) int32.
    With ``squared`` the squares of the source rows are added (each
    rounded to float32 before the addition). With ``onto_zeros`` each row
    of ``dst`` is set to zero just before its sums are added (the numbers
    of zeroing ``dst`` first, without a pass of its own over memory). The
    caller checks that every range lies inside ``src``."""
    cdef Py_ssize_t num_rows = dst.shape[0], num_cols = dst.shape[1]
    cdef Py_ssize_t r, j, c, begin, end
    cdef float x
    cdef bint adjacent = (src.strides[1] == sizeof(float) and dst.strides[1] == sizeof(float))
    if num_cols == 0:
        return
    with nogil:
        for r in range(num_rows):
            begin = ranges[r, 0]
            end = ranges[r, 1]
            if adjacent:
                if onto_zeros:
                    if begin >= end:
                        memset(&dst[r, 0], 0, num_cols * sizeof(float))
                        continue
                    pynnet3_set_row(&dst[r, 0], &src[begin, 0], num_cols, squared)
                    begin += 1
                for j in range(begin, end):
                    if squared:
                        pynnet3_add_row_squared(&dst[r, 0], &src[j, 0], num_cols)
                    else:
                        pynnet3_add_row(&dst[r, 0], &src[j, 0], num_cols)
            else:
                if onto_zeros:
                    for c in range(num_cols):
                        dst[r, c] = 0.0
                for j in range(begin, end):
                    for c in range(num_cols):
                        x = src[j, c]
                        if squared:
                            x = x * x
                        dst[r, c] += x
