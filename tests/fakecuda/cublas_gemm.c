/* SPDX-License-Identifier: MIT */
/*
 * The fake cuBLAS's GEMM: cuBLAS's checks, then the work queued on the
 * stream, which computes C = alpha op(A) op(B) + beta C on the fake's
 * host-backed memory when the stream reaches it: products and sums in FP32
 * for the FP32 compute types (FP16 and BF16 inputs converted exactly), FP64
 * for FP64, then rounded once to C's type (round to nearest even), as
 * cuBLAS with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION does up to
 * the order of the sums. beta 0 ignores C's old contents (NaN included).
 */
#pragma GCC visibility push(default)
#include <cublas_api.h>
#pragma GCC visibility pop

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fakecublas.h"
#include "fakecuda.h"

typedef struct gemm_job {
    fake_gemm g;
    int fp64;
    double alpha, beta;           /* pointer mode host: read at the call */
    const void *alpha_p, *beta_p; /* pointer mode device: read when it runs */
} gemm_job;

static size_t
gemm_esize(cudaDataType t)
{
    switch (t) {
    case CUDA_R_64F:
        return 8;
    case CUDA_R_32F:
        return 4;
    default:
        return 2;
    }
}

static float
gemm_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f,
             m = h & 0x3ff, bits;
    float f;
    if (e == 0x1f)
        bits = sign | 0x7f800000u | (m << 13); /* inf, NaN */
    else if (e != 0)
        bits = sign | ((e + 112) << 23) | (m << 13);
    else if (m == 0)
        bits = sign;
    else
        return (h >> 15 ? -1.0f : 1.0f) * ldexpf((float)m, -24); /* subnormal */
    memcpy(&f, &bits, sizeof(f));
    return f;
}

static uint16_t
gemm_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    float a = fabsf(f);
    if (isnan(f))
        return sign | 0x7e00;
    if (a >= 65520.0f) /* rounds to infinity */
        return sign | 0x7c00;
    if (a < ldexpf(1.0f, -14)) {
        /* Subnormal (or zero): a multiple of 2^-24, rounded to even. */
        float q = nearbyintf(a * ldexpf(1.0f, 24));
        return sign | (uint16_t)q;
    }
    int e;
    float mant = frexpf(a, &e);           /* a = mant * 2^e, mant in [0.5, 1) */
    float q = nearbyintf(mant * 2048.0f); /* 11 significant bits, to even */
    if (q >= 2048.0f) {
        q /= 2.0f;
        e++;
    }
    return sign | (uint16_t)((uint32_t)(e + 14) << 10) |
           (uint16_t)((uint32_t)q - 1024);
}

static float
gemm_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

static uint16_t
gemm_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if (isnan(f))
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1); /* round to nearest even */
    return (uint16_t)(x >> 16);
}

static double
gemm_load(cudaDataType t, const void *base, size_t i)
{
    const char *p = (const char *)base + i * gemm_esize(t);
    uint16_t h;
    float f;
    double d;
    switch (t) {
    case CUDA_R_64F:
        memcpy(&d, p, sizeof(d));
        return d;
    case CUDA_R_32F:
        memcpy(&f, p, sizeof(f));
        return f;
    case CUDA_R_16F:
        memcpy(&h, p, sizeof(h));
        return gemm_half_to_float(h);
    default:
        memcpy(&h, p, sizeof(h));
        return gemm_bf16_to_float(h);
    }
}

static void
gemm_store(cudaDataType t, void *base, size_t i, double v)
{
    char *p = (char *)base + i * gemm_esize(t);
    uint16_t h;
    float f = (float)v;
    switch (t) {
    case CUDA_R_64F:
        memcpy(p, &v, sizeof(v));
        return;
    case CUDA_R_32F:
        memcpy(p, &f, sizeof(f));
        return;
    case CUDA_R_16F:
        h = gemm_float_to_half(f);
        memcpy(p, &h, sizeof(h));
        return;
    default:
        h = gemm_float_to_bf16(f);
        memcpy(p, &h, sizeof(h));
        return;
    }
}

/* op(X)(i, j) of a column-major X with leading dimension ld. */
static size_t
gemm_at(cublasOperation_t t, long long ld, int i, int j)
{
    return t == CUBLAS_OP_N ? (size_t)i + (size_t)j * (size_t)ld
                            : (size_t)j + (size_t)i * (size_t)ld;
}

static void
gemm_run(void *arg)
{
    gemm_job *j = arg;
    const fake_gemm *g = &j->g;
    double alpha = j->alpha, beta = j->beta;

    if (j->alpha_p != NULL) {
        alpha =
            j->fp64 ? *(const double *)j->alpha_p : *(const float *)j->alpha_p;
        beta = j->fp64 ? *(const double *)j->beta_p : *(const float *)j->beta_p;
    }
    for (int b = 0; b < g->batch; b++) {
        const char *a =
            (const char *)g->a +
            (ptrdiff_t)(b * g->stride_a) * (ptrdiff_t)gemm_esize(g->atype);
        const char *bm =
            (const char *)g->b +
            (ptrdiff_t)(b * g->stride_b) * (ptrdiff_t)gemm_esize(g->btype);
        char *c = (char *)g->c + (ptrdiff_t)(b * g->stride_c) *
                                     (ptrdiff_t)gemm_esize(g->ctype);
        for (int col = 0; col < g->n; col++)
            for (int row = 0; row < g->m; row++) {
                size_t ci = (size_t)row + (size_t)col * (size_t)g->ldc;
                double r;
                if (j->fp64) {
                    double acc = 0;
                    for (int p = 0; p < g->k; p++)
                        acc += gemm_load(g->atype, a,
                                         gemm_at(g->transa, g->lda, row, p)) *
                               gemm_load(g->btype, bm,
                                         gemm_at(g->transb, g->ldb, p, col));
                    r = alpha * acc;
                    if (beta != 0)
                        r += beta * gemm_load(g->ctype, c, ci);
                } else {
                    float acc = 0;
                    for (int p = 0; p < g->k; p++)
                        acc += (float)gemm_load(
                                   g->atype, a,
                                   gemm_at(g->transa, g->lda, row, p)) *
                               (float)gemm_load(
                                   g->btype, bm,
                                   gemm_at(g->transb, g->ldb, p, col));
                    float rf = (float)alpha * acc;
                    if (beta != 0)
                        rf += (float)beta * (float)gemm_load(g->ctype, c, ci);
                    r = rf;
                }
                gemm_store(g->ctype, c, ci, r);
            }
    }
}

/* The type mixes cublasGemmEx has for these compute types (cuBLAS's
 * table; the fake leaves out the integer and complex ones). */
static int
gemm_supported(const fake_gemm *g, int *fp64)
{
    switch (g->compute) {
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
        *fp64 = 1;
        return g->atype == CUDA_R_64F && g->btype == CUDA_R_64F &&
               g->ctype == CUDA_R_64F;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
        *fp64 = 0;
        if (g->atype != g->btype)
            return 0;
        if (g->atype == CUDA_R_32F)
            return g->ctype == CUDA_R_32F;
        if (g->atype == CUDA_R_16F || g->atype == CUDA_R_16BF)
            return g->ctype == g->atype || g->ctype == CUDA_R_32F;
        return 0;
    default:
        return 0;
    }
}

/* The bytes a column-major rows x cols matrix with ld spans, over a
 * strided batch. */
static fakecuda_span
gemm_span(const void *p, cudaDataType t, int rows, int cols, long long ld,
          long long stride, int batch)
{
    long long one = (long long)(cols - 1) * ld + rows;
    long long lo = 0, hi = one;
    if (batch > 1) {
        long long last = (long long)(batch - 1) * stride;
        if (last < 0)
            lo = last;
        else
            hi = last + one;
    }
    fakecuda_span s = {
        .ptr = (CUdeviceptr)((uintptr_t)p +
                             (intptr_t)(lo * (long long)gemm_esize(t))),
        .bytes = (size_t)(hi - lo) * gemm_esize(t),
    };
    return s;
}

static int
gemm_trans_ok(cublasOperation_t t)
{
    return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C;
}

static int
gemm_max1(int v)
{
    return v > 1 ? v : 1;
}

cublasStatus_t
fake_gemm_submit(cudaStream_t stream, cublasPointerMode_t pm, const char *name,
                 const fake_gemm *g, const void *alpha, const void *beta)
{
    fakecuda_span spans[3];
    size_t nspans = 0;
    gemm_job *j;
    int fp64 = 0;

    /* A negative batch count: the real cuBLAS 13 answers
     * CUBLAS_STATUS_EXECUTION_FAILED (the driver report compares). */
    if (g->batch < 0)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    if (!gemm_trans_ok(g->transa) || !gemm_trans_ok(g->transb) || g->m < 0 ||
        g->n < 0 || g->k < 0 ||
        g->lda < gemm_max1(g->transa == CUBLAS_OP_N ? g->m : g->k) ||
        g->ldb < gemm_max1(g->transb == CUBLAS_OP_N ? g->k : g->n) ||
        g->ldc < gemm_max1(g->m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!gemm_supported(g, &fp64))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (alpha == NULL || beta == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t forced = fake_blas_forced_status();
    if (forced != CUBLAS_STATUS_SUCCESS)
        return forced;
    if (g->m == 0 || g->n == 0 || g->batch == 0)
        return CUBLAS_STATUS_SUCCESS;
    if ((j = calloc(1, sizeof(*j))) == NULL)
        return CUBLAS_STATUS_ALLOC_FAILED;
    j->g = *g;
    j->fp64 = fp64;
    if (pm == CUBLAS_POINTER_MODE_DEVICE) {
        j->alpha_p = alpha;
        j->beta_p = beta;
    } else {
        j->alpha = fp64 ? *(const double *)alpha : *(const float *)alpha;
        j->beta = fp64 ? *(const double *)beta : *(const float *)beta;
    }
    if (g->k > 0) {
        int ta = g->transa == CUBLAS_OP_N;
        int tb = g->transb == CUBLAS_OP_N;
        spans[nspans++] =
            gemm_span(g->a, g->atype, ta ? g->m : g->k, ta ? g->k : g->m,
                      g->lda, g->stride_a, g->batch);
        spans[nspans++] =
            gemm_span(g->b, g->btype, tb ? g->k : g->n, tb ? g->n : g->k,
                      g->ldb, g->stride_b, g->batch);
    }
    spans[nspans++] =
        gemm_span(g->c, g->ctype, g->m, g->n, g->ldc, g->stride_c, g->batch);
    /* drop frees the job, whatever happens to the work. */
    if (fakecuda_enqueue((CUstream)stream, name, spans, nspans, gemm_run, free,
                         j) != CUDA_SUCCESS)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}
