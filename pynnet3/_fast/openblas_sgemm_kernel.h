/* The arithmetic of the oracle's OpenBLAS sgemm (Haswell kernels), for
 * pynnet3/_fast/openblas_kernel.pyx.  The plain-Python twin and the
 * description of every step are in pynnet3/numerics/openblas_py.py; the
 * integer decisions (k blocks, which elements are paired) come in as a plan
 * from pynnet3/numerics/openblas_plan.py.
 *
 * For one block of k and one element: acc = +0, then acc = fma(a_k, b_k, acc)
 * over the block in order ("single"), or even and odd k of each group of 8
 * into two accumulators, the last k % 8 into the first, and the two added
 * ("paired"); then c = fma(alpha, acc, c).  Elements of one row that share a
 * form run in 8-wide vectors: lanes are independent elements, so the
 * vectors change nothing but speed.  Every multiply-add is a true fused
 * one: vfmadd on CPUs with FMA (checked at run time), else libm's fmaf.
 */
#ifndef PYNNET3_OPENBLAS_SGEMM_KERNEL_H
#define PYNNET3_OPENBLAS_SGEMM_KERNEL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define PN_HAVE_X86_FMA_PATH 1
#include <immintrin.h>
#else
#define PN_HAVE_X86_FMA_PATH 0
#endif

/* ---- portable path: libm's fmaf (exact, scalar) ---------------------------- */

static void pn_run_portable(const float *arow, const float *b, ptrdiff_t ldb, int kl,
                            int j0, int j1, int paired, float alpha, float *crow)
{
    int k8 = kl & ~7;
    for (int j = j0; j < j1; j++) {
        const float *bp = b + j;
        float s1 = 0.0f, s2 = 0.0f;
        if (paired) {
            int kk = 0;
            for (; kk < k8; kk += 2) {
                s1 = fmaf(arow[kk], bp[(ptrdiff_t)kk * ldb], s1);
                s2 = fmaf(arow[kk + 1], bp[(ptrdiff_t)(kk + 1) * ldb], s2);
            }
            for (; kk < kl; kk++)
                s1 = fmaf(arow[kk], bp[(ptrdiff_t)kk * ldb], s1);
            s1 = s1 + s2;
        } else {
            for (int kk = 0; kk < kl; kk++)
                s1 = fmaf(arow[kk], bp[(ptrdiff_t)kk * ldb], s1);
        }
        crow[j] = fmaf(alpha, s1, crow[j]);
    }
}

#if PN_HAVE_X86_FMA_PATH

#define PN_FMA_TARGET __attribute__((target("avx2,fma")))

PN_FMA_TARGET static inline float pn_fma_ss(float x, float y, float z)
{
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(x), _mm_set_ss(y), _mm_set_ss(z)));
}

/* Single chains for columns j0..j1-1 of one row: 32, then 8, then 1 at a time. */
PN_FMA_TARGET static void pn_run_single_fma(const float *arow, const float *b, ptrdiff_t ldb,
                                            int kl, int j0, int j1, float alpha,
                                            float *crow)
{
    const __m256 va = _mm256_set1_ps(alpha);
    int j = j0;
    for (; j + 32 <= j1; j += 32) {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        const float *bp = b + j;
        for (int kk = 0; kk < kl; kk++, bp += ldb) {
            __m256 x = _mm256_set1_ps(arow[kk]);
            s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(bp), s0);
            s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(bp + 8), s1);
            s2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(bp + 16), s2);
            s3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(bp + 24), s3);
        }
        _mm256_storeu_ps(crow + j, _mm256_fmadd_ps(va, s0, _mm256_loadu_ps(crow + j)));
        _mm256_storeu_ps(crow + j + 8, _mm256_fmadd_ps(va, s1, _mm256_loadu_ps(crow + j + 8)));
        _mm256_storeu_ps(crow + j + 16, _mm256_fmadd_ps(va, s2, _mm256_loadu_ps(crow + j + 16)));
        _mm256_storeu_ps(crow + j + 24, _mm256_fmadd_ps(va, s3, _mm256_loadu_ps(crow + j + 24)));
    }
    for (; j + 8 <= j1; j += 8) {
        __m256 s0 = _mm256_setzero_ps();
        const float *bp = b + j;
        for (int kk = 0; kk < kl; kk++, bp += ldb)
            s0 = _mm256_fmadd_ps(_mm256_set1_ps(arow[kk]), _mm256_loadu_ps(bp), s0);
        _mm256_storeu_ps(crow + j, _mm256_fmadd_ps(va, s0, _mm256_loadu_ps(crow + j)));
    }
    for (; j < j1; j++) {
        float s = 0.0f;
        const float *bp = b + j;
        for (int kk = 0; kk < kl; kk++, bp += ldb)
            s = pn_fma_ss(arow[kk], *bp, s);
        crow[j] = pn_fma_ss(alpha, s, crow[j]);
    }
}

/* Paired chains for columns j0..j1-1 of one row: 16, then 8, then 1 at a time. */
PN_FMA_TARGET static void pn_run_paired_fma(const float *arow, const float *b, ptrdiff_t ldb,
                                            int kl, int j0, int j1, float alpha,
                                            float *crow)
{
    const __m256 va = _mm256_set1_ps(alpha);
    const int k8 = kl & ~7;
    int j = j0;
    for (; j + 16 <= j1; j += 16) {
        __m256 e0 = _mm256_setzero_ps(), e1 = e0, o0 = e0, o1 = e0;
        const float *bp = b + j;
        int kk = 0;
        for (; kk < k8; kk += 2, bp += 2 * ldb) {
            __m256 x = _mm256_set1_ps(arow[kk]), y = _mm256_set1_ps(arow[kk + 1]);
            e0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(bp), e0);
            e1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(bp + 8), e1);
            o0 = _mm256_fmadd_ps(y, _mm256_loadu_ps(bp + ldb), o0);
            o1 = _mm256_fmadd_ps(y, _mm256_loadu_ps(bp + ldb + 8), o1);
        }
        for (; kk < kl; kk++, bp += ldb) {
            __m256 x = _mm256_set1_ps(arow[kk]);
            e0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(bp), e0);
            e1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(bp + 8), e1);
        }
        e0 = _mm256_add_ps(e0, o0);
        e1 = _mm256_add_ps(e1, o1);
        _mm256_storeu_ps(crow + j, _mm256_fmadd_ps(va, e0, _mm256_loadu_ps(crow + j)));
        _mm256_storeu_ps(crow + j + 8, _mm256_fmadd_ps(va, e1, _mm256_loadu_ps(crow + j + 8)));
    }
    for (; j + 8 <= j1; j += 8) {
        __m256 e0 = _mm256_setzero_ps(), o0 = e0;
        const float *bp = b + j;
        int kk = 0;
        for (; kk < k8; kk += 2, bp += 2 * ldb) {
            e0 = _mm256_fmadd_ps(_mm256_set1_ps(arow[kk]), _mm256_loadu_ps(bp), e0);
            o0 = _mm256_fmadd_ps(_mm256_set1_ps(arow[kk + 1]), _mm256_loadu_ps(bp + ldb), o0);
        }
        for (; kk < kl; kk++, bp += ldb)
            e0 = _mm256_fmadd_ps(_mm256_set1_ps(arow[kk]), _mm256_loadu_ps(bp), e0);
        e0 = _mm256_add_ps(e0, o0);
        _mm256_storeu_ps(crow + j, _mm256_fmadd_ps(va, e0, _mm256_loadu_ps(crow + j)));
    }
    for (; j < j1; j++) {
        float e = 0.0f, o = 0.0f;
        const float *bp = b + j;
        int kk = 0;
        for (; kk < k8; kk += 2, bp += 2 * ldb) {
            e = pn_fma_ss(arow[kk], bp[0], e);
            o = pn_fma_ss(arow[kk + 1], bp[ldb], o);
        }
        for (; kk < kl; kk++, bp += ldb)
            e = pn_fma_ss(arow[kk], *bp, e);
        crow[j] = pn_fma_ss(alpha, e + o, crow[j]);
    }
}

static int pn_cpu_has_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#else

static int pn_cpu_has_fma(void) { return 0; }

#endif

/* C (num_rows x num_cols, row stride ldc) gets, for every k block
 * (k_steps[2 s], k_steps[2 s + 1]), the block's chains of op(A) (row-major,
 * row stride lda) and op(B) (row-major K x num_cols, row stride ldb), in the
 * form paired[] (row-major, num_cols per row) says, added with alpha. */
static void pn_sgemm_blocks(int num_rows, int num_cols, const float *a, ptrdiff_t lda,
                            const float *b, ptrdiff_t ldb, const unsigned char *paired,
                            const int64_t *k_steps, int num_steps, float alpha, float *c,
                            ptrdiff_t ldc, int use_fma)
{
    for (int s = 0; s < num_steps; s++) {
        const ptrdiff_t ls = k_steps[2 * s];
        const int kl = (int)k_steps[2 * s + 1];
        const float *bb = b + ls * ldb;
        for (int i = 0; i < num_rows; i++) {
            const float *arow = a + (ptrdiff_t)i * lda + ls;
            const unsigned char *prow = paired + (ptrdiff_t)i * num_cols;
            float *crow = c + (ptrdiff_t)i * ldc;
            int j0 = 0;
            while (j0 < num_cols) {
                /* a run of columns that share their form */
                const unsigned char form = prow[j0];
                int j1 = j0 + 1;
                while (j1 < num_cols && prow[j1] == form)
                    j1++;
#if PN_HAVE_X86_FMA_PATH
                if (use_fma) {
                    if (form)
                        pn_run_paired_fma(arow, bb, ldb, kl, j0, j1, alpha, crow);
                    else
                        pn_run_single_fma(arow, bb, ldb, kl, j0, j1, alpha, crow);
                } else
#endif
                    pn_run_portable(arow, bb, ldb, kl, j0, j1, form, alpha, crow);
                j0 = j1;
            }
        }
    }
}

#endif
