/* SPDX-License-Identifier: MIT */
/*
 * The gemm part: a 4096 x 4096 x 4096 BF16 GEMM (FP32 accumulation,
 * row-major as a client would ask it) through cumod, against the same
 * cublasGemmEx call made in this process on a context of its own (the
 * floor: cuBLAS loaded as cumodd loads it, the same math mode, a 32 MiB
 * workspace on its stream), in the same run.
 *
 * Time per GEMM is measured back to back, as GEMMs are used: a round
 * enqueues K of them (cumod: answered when enqueued, one wait for the
 * last), and its time over K is one sample; rounds of the two alternate,
 * so both see the same clocks and temperature. Also one GEMM waited for,
 * alone: what a call costs besides the GPU's work.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cumod/cumod.h"
#include "exec/blas.h"
#include "exec/driver.h"

enum {
    GEMM_K = 10,      /* GEMMs per round (CUMOD_BENCH_GEMM_K) */
    GEMM_ROUNDS = 8,  /* of each, alternating */
    GEMM_WARM = 30,   /* GEMMs before any is timed, each side */
    GEMM_SINGLE = 30, /* one GEMM waited for, each side */
    GEMM_BLOCK = 1,   /* single GEMMs a side before the other's (..._BLOCK) */
};

static int
gemm_env(const char *name, int dflt, int max)
{
    const char *e = getenv(name);
    int v = e != NULL ? atoi(e) : 0;
    return v > 0 && v <= max ? v : dflt;
}
#define GEMM_WS ((size_t)32 << 20)

/* The in-process side: its own context (the primary one of this process)
 * and handle. */
typedef struct gemm_floor {
    int n;
    cumod_driver drv;
    cumod_blas blas;
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUdeviceptr a, b, c, ws;
    cublasHandle_t h;
} gemm_floor;

static int
gemm_floor_open(gemm_floor *f, int n, const uint16_t *host, char *why,
                size_t len)
{
    size_t bytes = (size_t)n * n * 2;
    cumod_driver *d = &f->drv;
    CUresult r = CUDA_SUCCESS;

    memset(f, 0, sizeof(*f));
    f->n = n;
    if (cumod__driver_open(d, cumod__driver_default_path(NULL), why, len) !=
        CUMOD_OK)
        return -1;
    if (d->init(0) != CUDA_SUCCESS || d->device_get(&f->dev, 0) ||
        d->primary_ctx_retain(&f->ctx, f->dev) || d->ctx_set_current(f->ctx)) {
        snprintf(why, len, "no CUDA context in this process");
        return -1;
    }
    if ((r = d->stream_create(&f->s, CU_STREAM_NON_BLOCKING)) ||
        (r = d->mem_alloc(&f->a, bytes)) || (r = d->mem_alloc(&f->b, bytes)) ||
        (r = d->mem_alloc(&f->c, bytes)) ||
        (r = d->mem_alloc(&f->ws, GEMM_WS)) ||
        (r = d->memcpy_htod(f->a, host, bytes)) ||
        (r = d->memcpy_htod(f->b, host + (size_t)f->n * f->n, bytes))) {
        (void)cumod__cu_err(d, r, "setting up", why, len);
        return -1;
    }
    if (cumod__blas_open(&f->blas, cumod__blas_default_path(NULL), why, len) !=
        CUMOD_OK)
        return -1;
    /* As cumodd's executor sets its handle up (exec_blas.c). */
    if (f->blas.create(&f->h) != CUBLAS_STATUS_SUCCESS ||
        f->blas.set_math_mode(
            f->h,
            (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                           CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) ||
        f->blas.set_pointer_mode(f->h, CUBLAS_POINTER_MODE_HOST) ||
        f->blas.set_stream(f->h, (cudaStream_t)f->s) ||
        f->blas.set_workspace(f->h, (void *)(uintptr_t)f->ws, GEMM_WS)) {
        snprintf(why, len, "cuBLAS in this process would not set up");
        return -1;
    }
    return 0;
}

/* One C = A B, row-major as cumod turns it: cuBLAS's column-major C^T =
 * B^T A^T, so B goes first. */
static int
gemm_floor_one(gemm_floor *f)
{
    float alpha = 1, beta = 0;
    return f->blas.gemm_ex(f->h, CUBLAS_OP_N, CUBLAS_OP_N, f->n, f->n, f->n,
                           &alpha, (void *)(uintptr_t)f->b, CUDA_R_16BF, f->n,
                           (void *)(uintptr_t)f->a, CUDA_R_16BF, f->n, &beta,
                           (void *)(uintptr_t)f->c, CUDA_R_16BF, f->n,
                           CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
}

static void
gemm_floor_close(gemm_floor *f)
{
    cumod_driver *d = &f->drv;
    if (f->h != NULL)
        (void)f->blas.destroy(f->h);
    if (d->mem_free != NULL) {
        (void)d->stream_synchronize(f->s);
        (void)d->mem_free(f->a);
        (void)d->mem_free(f->b);
        (void)d->mem_free(f->c);
        (void)d->mem_free(f->ws);
        (void)d->stream_destroy(f->s);
    }
    if (f->ctx != NULL)
        (void)d->primary_ctx_release(f->dev);
}

/* The cumod side: three buffers of the session, the same bytes. */
typedef struct gemm_cumod {
    int n;
    cumod_client *c;
    cumod_buffer a, b, out;
    cumod_gemm_desc d;
} gemm_cumod;

static int
gemm_cumod_open(gemm_cumod *g, int n, cumod_client *c, const uint16_t *host)
{
    size_t bytes = (size_t)n * n * 2, chunk = 8u << 20;

    memset(g, 0, sizeof(*g));
    g->n = n;
    g->c = c;
    if (cumod_buffer_alloc(c, bytes, &g->a) ||
        cumod_buffer_alloc(c, bytes, &g->b) ||
        cumod_buffer_alloc(c, bytes, &g->out))
        return -1;
    for (size_t at = 0; at < bytes; at += chunk) {
        size_t len = bytes - at < chunk ? bytes - at : chunk;
        if (cumod_buffer_write(c, g->a, at, (const char *)host + at, len, 0) ||
            cumod_buffer_write(c, g->b, at, (const char *)host + bytes + at,
                               len, 0))
            return -1;
    }
    g->d = (cumod_gemm_desc){.type = CUMOD_GEMM_BF16,
                             .order = CUMOD_GEMM_ROW_MAJOR,
                             .m = (size_t)n,
                             .n = (size_t)n,
                             .k = (size_t)n,
                             .alpha = 1,
                             .a = {g->a, 0, 0, 0},
                             .b = {g->b, 0, 0, 0},
                             .c = {g->out, 0, 0, 0}};
    return 0;
}

static double
gemm_tflops(int n, double us)
{
    return 2.0 * n * (double)n * n / (us * 1e-6) / 1e12;
}

void
cumod__bench_gemm(cumod_client *c)
{
    static double tf[GEMM_ROUNDS], tc[GEMM_ROUNDS], sf[GEMM_SINGLE],
        sc[GEMM_SINGLE];
    /* CUMOD_BENCH_GEMM_N: another size (a smoke run on the fake driver
     * and cuBLAS, CUMOD_CUDA_LIBRARY and CUMOD_CUBLAS_LIBRARY). */
    const char *env = getenv("CUMOD_BENCH_GEMM_N");
    int n = env != NULL && atoi(env) > 0 ? atoi(env) : 4096;
    size_t elems = (size_t)n * n;
    uint16_t *host = malloc(2 * elems * sizeof(uint16_t));
    char why[1024] = "";
    gemm_floor f;
    gemm_cumod g;
    int errors = 0;

    printf("GEMM, %d x %d x %d BF16 (FP32 accumulation), row-major:\n", n, n,
           n);
    if (host == NULL)
        return;
    /* Values in [-1, 1) as BF16 (the top half of an FP32): real data,
     * not zeros, which a GPU multiplies faster. */
    uint32_t x = 12345;
    for (size_t i = 0; i < 2 * elems; i++) {
        x = x * 1664525u + 1013904223u;
        float v = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
        uint32_t bits;
        memcpy(&bits, &v, sizeof(bits));
        host[i] = (uint16_t)(bits >> 16);
    }
    if (gemm_floor_open(&f, n, host, why, sizeof(why)) != 0) {
        printf("  in process: %s\n", why);
        gemm_floor_close(&f);
        free(host);
        return;
    }
    if (gemm_cumod_open(&g, n, c, host) != 0) {
        printf("  through cumod: %s\n", cumod_last_detail());
        gemm_floor_close(&f);
        free(host);
        return;
    }
    free(host);
    /* Warm-up: cuBLAS loaded in cumodd (its first GEMM) and here, kernels
     * chosen and loaded, clocks up. */
    double t0 = cumod__bench_now_us();
    errors += cumod_gemm(c, &g.d, NULL) != CUMOD_OK;
    if (errors) {
        printf("  through cumod: %s\n", cumod_last_detail());
        gemm_floor_close(&f);
        return;
    }
    printf("  the first GEMM through cumod (cumodd loads cuBLAS): %.0f ms\n",
           (cumod__bench_now_us() - t0) / 1e3);
    for (int i = 0; i < GEMM_WARM; i++) {
        errors += gemm_floor_one(&f);
        errors += cumod_gemm(c, &g.d, NULL) != CUMOD_OK;
    }
    (void)f.drv.stream_synchronize(f.s);
    /* Two A/B knobs (bench/notes.md, "GEMM"): GEMMs per round, and how
     * many single GEMMs one side waits for before the other's turn (the
     * GPU switches between cumodd's context and this process's at every
     * turn, which neither pays alone). */
    int k = gemm_env("CUMOD_BENCH_GEMM_K", GEMM_K, 1000);
    int block = gemm_env("CUMOD_BENCH_GEMM_BLOCK", GEMM_BLOCK, GEMM_SINGLE);
    for (int r = 0; r < GEMM_ROUNDS; r++) {
        t0 = cumod__bench_now_us();
        for (int i = 0; i < k; i++)
            errors += gemm_floor_one(&f);
        errors += f.drv.stream_synchronize(f.s) != CUDA_SUCCESS;
        tf[r] = (cumod__bench_now_us() - t0) / k;
        cumod_ticket tk = 0;
        t0 = cumod__bench_now_us();
        for (int i = 0; i < k; i++)
            errors += cumod_gemm(c, &g.d, &tk) != CUMOD_OK;
        errors += cumod_wait(c, tk) != CUMOD_OK;
        tc[r] = (cumod__bench_now_us() - t0) / k;
    }
    for (int i = 0; i < GEMM_SINGLE; i += block) {
        for (int j = i; j < i + block && j < GEMM_SINGLE; j++) {
            t0 = cumod__bench_now_us();
            errors += gemm_floor_one(&f);
            errors += f.drv.stream_synchronize(f.s) != CUDA_SUCCESS;
            sf[j] = cumod__bench_now_us() - t0;
        }
        for (int j = i; j < i + block && j < GEMM_SINGLE; j++) {
            t0 = cumod__bench_now_us();
            errors += cumod_gemm(c, &g.d, NULL) != CUMOD_OK;
            sc[j] = cumod__bench_now_us() - t0;
        }
    }
    double pf = cumod__bench_quantile(tf, GEMM_ROUNDS, 0.5);
    double pc = cumod__bench_quantile(tc, GEMM_ROUNDS, 0.5);
    double qf = cumod__bench_quantile(sf, GEMM_SINGLE, 0.5);
    double qc = cumod__bench_quantile(sc, GEMM_SINGLE, 0.5);
    printf("  back to back (%d rounds of %d, alternating): through cumod "
           "p50 %.1f us per GEMM = %.0f TFLOP/s; in process (cublasGemmEx, "
           "a context of its own) %.1f us = %.0f TFLOP/s; cumod at %.1f%% "
           "(target: 90%%)\n",
           GEMM_ROUNDS, k, pc, gemm_tflops(n, pc), pf, gemm_tflops(n, pf),
           100 * pf / pc);
    printf("  one GEMM waited for (turns of %d): through cumod p50 %.1f us, "
           "in process %.1f us, cumod at %.1f%%; %d errors%s%s\n",
           block, qc, qf, 100 * qf / qc, errors, errors ? ": " : "",
           errors ? cumod_last_detail() : "");
    cumod__bench_recordf(pc, "gemm_bf16_%d_us", n);
    cumod__bench_recordf(gemm_tflops(n, pc), "gemm_bf16_%d_tflops", n);
    cumod__bench_recordf(pf, "gemm_bf16_%d_floor_us", n);
    cumod__bench_recordf(gemm_tflops(n, pf), "gemm_bf16_%d_floor_tflops", n);
    cumod__bench_recordf(pf / pc, "gemm_bf16_%d_ratio", n);
    cumod__bench_recordf(qc, "gemm_bf16_%d_single_us", n);
    cumod__bench_recordf(qf, "gemm_bf16_%d_floor_single_us", n);
    cumod__bench_recordf(errors, "gemm_bf16_%d_errors", n);
    (void)cumod_buffer_free(c, g.a);
    (void)cumod_buffer_free(c, g.b);
    (void)cumod_buffer_free(c, g.out);
    gemm_floor_close(&f);
}
