/* Fused element-wise passes for pynnet3/_fast/fused_elementwise_kernel.pyx (the
 * twins, which define the results, are in pynnet3/compute/fused_elementwise.py).
 *
 * Each element goes through the same float32 operations as the twin's NumPy
 * passes, one rounding each, never contracted into a fused multiply-add:
 * the vector paths (AVX-512, AVX2, chosen at run time) only do 16 or 8
 * independent elements at once, so every path gives the same bits.
 */
#ifndef PYNNET3_FUSED_ELEMENTWISE_KERNEL_H
#define PYNNET3_FUSED_ELEMENTWISE_KERNEL_H

#include <stddef.h>
#include <stdint.h>

/* max(v, 0) as NumPy's maximum(v, +0) gives it: NaN stays NaN, positive
 * values stay, everything else (negatives, -0 and +0) becomes +0 */
static inline float pn_relu(float v) { return (v > 0.0f || v != v) ? v : 0.0f; }

/* row[j] = relu(row[j] + b[j]) * s[j] + o[j]; b, s, o may be NULL (left out) */
static void pn_brso_scalar(float *row, ptrdiff_t n, const float *b, const float *s,
                           const float *o)
{
    for (ptrdiff_t j = 0; j < n; j++) {
        float v = row[j];
        if (b) { v = v + b[j]; }
        v = pn_relu(v);
        if (s) { v = v * s[j]; }
        if (o) { v = v + o[j]; }
        row[j] = v;
    }
}

/* d[j] = (alpha == 1 ? x[j] : x[j] * alpha) + (beta == 1 ? y[j] : y[j] * beta) */
static void pn_sca_scalar(float *d, const float *x, const float *y, ptrdiff_t n, float alpha,
                          float beta)
{
    for (ptrdiff_t j = 0; j < n; j++) {
        float v = x[j], w = y[j];
        if (alpha != 1.0f) { v = v * alpha; }
        if (beta != 1.0f) { w = w * beta; }
        d[j] = v + w;
    }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define PN_FUSED_X86 1

__attribute__((target("avx2")))
static void pn_brso_avx2(float *row, ptrdiff_t n, const float *b, const float *s,
                         const float *o)
{
    const __m256 zero = _mm256_setzero_ps();
    ptrdiff_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(row + j);
        if (b) { v = _mm256_add_ps(v, _mm256_loadu_ps(b + j)); }
        __m256 keep = _mm256_or_ps(_mm256_cmp_ps(v, zero, _CMP_GT_OQ),
                                   _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        v = _mm256_and_ps(v, keep);
        if (s) { v = _mm256_mul_ps(v, _mm256_loadu_ps(s + j)); }
        if (o) { v = _mm256_add_ps(v, _mm256_loadu_ps(o + j)); }
        _mm256_storeu_ps(row + j, v);
    }
    pn_brso_scalar(row + j, n - j, b ? b + j : NULL, s ? s + j : NULL, o ? o + j : NULL);
}

__attribute__((target("avx512f")))
static void pn_brso_avx512(float *row, ptrdiff_t n, const float *b, const float *s,
                           const float *o)
{
    const __m512 zero = _mm512_setzero_ps();
    ptrdiff_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_loadu_ps(row + j);
        if (b) { v = _mm512_add_ps(v, _mm512_loadu_ps(b + j)); }
        __mmask16 keep = _mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ)
                         | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        v = _mm512_maskz_mov_ps(keep, v);
        if (s) { v = _mm512_mul_ps(v, _mm512_loadu_ps(s + j)); }
        if (o) { v = _mm512_add_ps(v, _mm512_loadu_ps(o + j)); }
        _mm512_storeu_ps(row + j, v);
    }
    pn_brso_scalar(row + j, n - j, b ? b + j : NULL, s ? s + j : NULL, o ? o + j : NULL);
}

__attribute__((target("avx2")))
static void pn_sca_avx2(float *d, const float *x, const float *y, ptrdiff_t n, float alpha,
                        float beta)
{
    const __m256 a = _mm256_set1_ps(alpha), c = _mm256_set1_ps(beta);
    ptrdiff_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(x + j), w = _mm256_loadu_ps(y + j);
        if (alpha != 1.0f) { v = _mm256_mul_ps(v, a); }
        if (beta != 1.0f) { w = _mm256_mul_ps(w, c); }
        _mm256_storeu_ps(d + j, _mm256_add_ps(v, w));
    }
    pn_sca_scalar(d + j, x + j, y + j, n - j, alpha, beta);
}

__attribute__((target("avx512f")))
static void pn_sca_avx512(float *d, const float *x, const float *y, ptrdiff_t n, float alpha,
                          float beta)
{
    const __m512 a = _mm512_set1_ps(alpha), c = _mm512_set1_ps(beta);
    ptrdiff_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_loadu_ps(x + j), w = _mm512_loadu_ps(y + j);
        if (alpha != 1.0f) { v = _mm512_mul_ps(v, a); }
        if (beta != 1.0f) { w = _mm512_mul_ps(w, c); }
        _mm512_storeu_ps(d + j, _mm512_add_ps(v, w));
    }
    pn_sca_scalar(d + j, x + j, y + j, n - j, alpha, beta);
}

/* 2: AVX-512, 1: AVX2, 0: scalar */
static int pn_fused_level(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) { return 2; }
    if (__builtin_cpu_supports("avx2")) { return 1; }
    return 0;
}
#else
#define PN_FUSED_X86 0
static int pn_fused_level(void) { return 0; }
#endif

/* Every row of a matrix: rows, cols, row stride (floats). */
static void pn_bias_relu_scale_offset(int level, float *m, ptrdiff_t rows, ptrdiff_t cols,
                                      ptrdiff_t stride, const float *b, const float *s,
                                      const float *o)
{
    for (ptrdiff_t i = 0; i < rows; i++) {
        float *row = m + i * stride;
#if PN_FUSED_X86
        if (level == 2) { pn_brso_avx512(row, cols, b, s, o); continue; }
        if (level == 1) { pn_brso_avx2(row, cols, b, s, o); continue; }
#endif
        pn_brso_scalar(row, cols, b, s, o);
    }
}

/* d[i] = alpha x[r(i)] + beta y[i], r(i) = rows[i] or i (rows NULL) */
static void pn_scaled_copy_add(int level, float *d, ptrdiff_t n, ptrdiff_t cols,
                               ptrdiff_t d_stride, const float *x, ptrdiff_t x_stride,
                               const int64_t *rows, float alpha, const float *y,
                               ptrdiff_t y_stride, float beta)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        float *drow = d + i * d_stride;
        const float *xrow = x + (rows ? rows[i] : i) * x_stride;
        const float *yrow = y + i * y_stride;
#if PN_FUSED_X86
        if (level == 2) { pn_sca_avx512(drow, xrow, yrow, cols, alpha, beta); continue; }
        if (level == 1) { pn_sca_avx2(drow, xrow, yrow, cols, alpha, beta); continue; }
#endif
        pn_sca_scalar(drow, xrow, yrow, cols, alpha, beta);
    }
}

#endif
