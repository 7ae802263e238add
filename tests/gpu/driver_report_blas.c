/* SPDX-License-Identifier: MIT */
/*
 * cumod_driver_report --cublas LIB: what a cuBLAS answers to the calls
 * cumodd makes, on the driver and context the report already holds, so
 * that the fake cuBLAS (tests/fakecuda's libfakecublas.so, on the fake
 * driver) can be compared with the real one on a GPU: the statuses of
 * documented errors (bad sizes, leading dimensions, operations, batch
 * counts, a misaligned workspace, type mixes), and small GEMMs of each
 * type whose numbers are exact in every type, checked on the host ("ok" or
 * what came out). Only what both should agree on goes to stdout.
 */
#include <cublas_api.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "driver_report.h"

typedef struct blas_lib {
    __typeof__(cublasCreate_v2) *create;
    __typeof__(cublasDestroy_v2) *destroy;
    __typeof__(cublasGetProperty) *get_property;
    __typeof__(cublasSetStream_v2) *set_stream;
    __typeof__(cublasSetWorkspace_v2) *set_workspace;
    __typeof__(cublasSetPointerMode_v2) *set_pointer_mode;
    __typeof__(cublasGemmEx) *gemm;
    __typeof__(cublasGemmStridedBatchedEx) *gemm_sb;
    __typeof__(cublasGetStatusName) *status_name;
    cublasHandle_t h;
    CUstream s;
    CUdeviceptr a, b, c, ws;
} blas_lib;

static void
blas_case_print(blas_lib *b, const char *name, cublasStatus_t st)
{
    printf("blas %-32s %s\n", name, b->status_name(st));
    fflush(stdout);
}

/* The real cuBLAS prints "** On entry to GEMM_EX parameter number N had an
 * illegal value" on stdout for a refused argument: while a case's call
 * runs, stdout goes to stderr, where what differs by nature is kept. */
static int
blas_quiet_begin(void)
{
    fflush(stdout);
    int saved = dup(1);
    if (saved >= 0)
        dup2(2, 1);
    return saved;
}

static void
blas_quiet_end(int saved)
{
    fflush(stdout);
    if (saved >= 0) {
        dup2(saved, 1);
        close(saved);
    }
}

#define blas_case(b, name, call)                                               \
    do {                                                                       \
        int q_ = blas_quiet_begin();                                           \
        cublasStatus_t st_ = (call);                                           \
        blas_quiet_end(q_);                                                    \
        blas_case_print((b), (name), st_);                                     \
    } while (0)

/* Stores v as type t at element i of p. */
static void
blas_put(cudaDataType t, void *p, size_t i, double v)
{
    float f = (float)v;
    uint32_t x;
    uint16_t h;
    switch (t) {
    case CUDA_R_64F:
        memcpy((char *)p + 8 * i, &v, 8);
        return;
    case CUDA_R_32F:
        memcpy((char *)p + 4 * i, &f, 4);
        return;
    case CUDA_R_16BF:
        memcpy(&x, &f, 4);
        h = (uint16_t)(x >> 16); /* exact for the small values used */
        memcpy((char *)p + 2 * i, &h, 2);
        return;
    default: /* CUDA_R_16F, exact for small integers */
        if (f == 0) {
            h = 0;
        } else {
            int e;
            float m = frexpf(fabsf(f), &e);
            h = (uint16_t)((f < 0 ? 0x8000 : 0) | (uint32_t)(e + 14) << 10 |
                           ((uint32_t)(m * 2048) - 1024));
        }
        memcpy((char *)p + 2 * i, &h, 2);
        return;
    }
}

static double
blas_get(cudaDataType t, const void *p, size_t i)
{
    double d;
    float f;
    uint16_t h;
    uint32_t x;
    switch (t) {
    case CUDA_R_64F:
        memcpy(&d, (const char *)p + 8 * i, 8);
        return d;
    case CUDA_R_32F:
        memcpy(&f, (const char *)p + 4 * i, 4);
        return f;
    case CUDA_R_16BF:
        memcpy(&h, (const char *)p + 2 * i, 2);
        x = (uint32_t)h << 16;
        memcpy(&f, &x, 4);
        return f;
    default:
        memcpy(&h, (const char *)p + 2 * i, 2);
        if ((h & 0x7fff) == 0)
            return 0;
        d = ldexp((double)((h & 0x3ff) | 0x400), ((h >> 10) & 0x1f) - 25);
        return (h & 0x8000) ? -d : d;
    }
}

static size_t
blas_size(cudaDataType t)
{
    return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2;
}

/* An m x n x k GEMM of types ab -> ct (column-major, packed), batch
 * matrices apart by their size, on small integers: the status, then the
 * numbers against the host's. */
static void
blas_numbers(report *r, blas_lib *b, const char *name, cudaDataType ab,
             cudaDataType ct, cublasComputeType_t comp, int m, int n, int k,
             int batch)
{
    double ha[256], hb[256], hc[256], want[256];
    unsigned char buf[2048];
    char what[96];
    int sa = m * k, sb = k * n, sc = m * n;
    double alpha = 2, beta = -1;
    float alpha32 = 2, beta32 = -1;
    int fp64 = comp == CUBLAS_COMPUTE_64F;

    for (int i = 0; i < sa * batch; i++)
        ha[i] = (double)(i % 5) - 2;
    for (int i = 0; i < sb * batch; i++)
        hb[i] = (double)(i % 3) - 1;
    for (int i = 0; i < sc * batch; i++)
        hc[i] = (double)(i % 4);
    for (int x = 0; x < batch; x++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double acc = 0;
                for (int p = 0; p < k; p++)
                    acc += ha[x * sa + i + p * m] * hb[x * sb + p + j * k];
                want[x * sc + i + j * m] =
                    alpha * acc + beta * hc[x * sc + i + j * m];
            }
    for (int i = 0; i < sa * batch; i++)
        blas_put(ab, buf, (size_t)i, ha[i]);
    r->d.memcpy_htod(b->a, buf, (size_t)(sa * batch) * blas_size(ab));
    for (int i = 0; i < sb * batch; i++)
        blas_put(ab, buf, (size_t)i, hb[i]);
    r->d.memcpy_htod(b->b, buf, (size_t)(sb * batch) * blas_size(ab));
    for (int i = 0; i < sc * batch; i++)
        blas_put(ct, buf, (size_t)i, hc[i]);
    r->d.memcpy_htod(b->c, buf, (size_t)(sc * batch) * blas_size(ct));
    const void *al = fp64 ? (const void *)&alpha : (const void *)&alpha32;
    const void *be = fp64 ? (const void *)&beta : (const void *)&beta32;
    int ldb = k > 0 ? k : 1;
    cublasStatus_t st =
        batch == 1 ? b->gemm(b->h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, al,
                             (void *)b->a, ab, m, (void *)b->b, ab, ldb, be,
                             (void *)b->c, ct, m, comp, CUBLAS_GEMM_DEFAULT)
                   : b->gemm_sb(b->h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, al,
                                (void *)b->a, ab, m, sa, (void *)b->b, ab, ldb,
                                sb, be, (void *)b->c, ct, m, sc, batch, comp,
                                CUBLAS_GEMM_DEFAULT);
    blas_case(b, name, st);
    snprintf(what, sizeof(what), "%s-sync", name);
    report_case(r, what, r->d.stream_synchronize(b->s));
    r->d.memcpy_dtoh(buf, b->c, (size_t)(sc * batch) * blas_size(ct));
    int bad = 0;
    for (int i = 0; i < sc * batch; i++)
        bad += blas_get(ct, buf, (size_t)i) != want[i];
    printf("blas %-32s %s\n", name, bad ? "numbers wrong" : "numbers ok");
}

/* A 4 x 4 x 4 FP32 GEMM with these figures, for the status alone. */
static cublasStatus_t
blas_try(blas_lib *b, cublasOperation_t ta, int m, int n, int k, int lda,
         int ldb, int ldc, cudaDataType ab, cudaDataType ct,
         cublasComputeType_t comp)
{
    double one = 1, zero = 0;
    float one32 = 1, zero32 = 0;
    int fp64 = comp == CUBLAS_COMPUTE_64F;
    return b->gemm(b->h, ta, CUBLAS_OP_N, m, n, k,
                   fp64 ? (const void *)&one : (const void *)&one32,
                   (void *)b->a, ab, lda, (void *)b->b, ab, ldb,
                   fp64 ? (const void *)&zero : (const void *)&zero32,
                   (void *)b->c, ct, ldc, comp, CUBLAS_GEMM_DEFAULT);
}

void
report_blas(report *r, const char *lib)
{
    blas_lib b;
    int v = 0;
    void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

    memset(&b, 0, sizeof(b));
    if (dl == NULL) {
        printf("blas library missing\n");
        fprintf(stderr, "driver_report: %s: %s\n", lib, dlerror());
        return;
    }
    *(void **)&b.create = dlsym(dl, "cublasCreate_v2");
    *(void **)&b.destroy = dlsym(dl, "cublasDestroy_v2");
    *(void **)&b.get_property = dlsym(dl, "cublasGetProperty");
    *(void **)&b.set_stream = dlsym(dl, "cublasSetStream_v2");
    *(void **)&b.set_workspace = dlsym(dl, "cublasSetWorkspace_v2");
    *(void **)&b.set_pointer_mode = dlsym(dl, "cublasSetPointerMode_v2");
    *(void **)&b.gemm = dlsym(dl, "cublasGemmEx");
    *(void **)&b.gemm_sb = dlsym(dl, "cublasGemmStridedBatchedEx");
    *(void **)&b.status_name = dlsym(dl, "cublasGetStatusName");
    if (!b.create || !b.destroy || !b.get_property || !b.set_stream ||
        !b.set_workspace || !b.set_pointer_mode || !b.gemm || !b.gemm_sb ||
        !b.status_name) {
        printf("blas entry points missing\n");
        return;
    }
    blas_case(&b, "get-property-null", b.get_property(MAJOR_VERSION, NULL));
    blas_case(&b, "get-property-bad-type",
              b.get_property((libraryPropertyType)7, &v));
    blas_case(&b, "get-property-major", b.get_property(MAJOR_VERSION, &v));
    fprintf(stderr, "driver_report: %s: cuBLAS major version %d\n", lib, v);
    blas_case(&b, "create", b.create(&b.h));
    if (b.h == NULL)
        return;
    report_case(r, "blas-stream-create",
                r->d.stream_create(&b.s, CU_STREAM_NON_BLOCKING));
    report_case(r, "blas-alloc", r->d.mem_alloc(&b.a, 4096));
    r->d.mem_alloc(&b.b, 4096);
    r->d.mem_alloc(&b.c, 4096);
    r->d.mem_alloc(&b.ws, 1 << 20);
    blas_case(&b, "set-stream", b.set_stream(b.h, (cudaStream_t)b.s));
    blas_case(&b, "set-workspace-misaligned",
              b.set_workspace(b.h, (void *)(b.ws + 4), 4096));
    blas_case(&b, "set-workspace", b.set_workspace(b.h, (void *)b.ws, 1 << 20));
    blas_case(&b, "set-pointer-mode-host",
              b.set_pointer_mode(b.h, CUBLAS_POINTER_MODE_HOST));

    /* Documented refusals (cublasGemmEx's "CUBLAS_STATUS_INVALID_VALUE"),
     * then what is no error. */
    const cudaDataType f32 = CUDA_R_32F;
    const cublasComputeType_t c32 = CUBLAS_COMPUTE_32F;
    blas_case(&b, "gemm-negative-m",
              blas_try(&b, CUBLAS_OP_N, -1, 4, 4, 4, 4, 4, f32, f32, c32));
    blas_case(&b, "gemm-negative-k",
              blas_try(&b, CUBLAS_OP_N, 4, 4, -1, 4, 4, 4, f32, f32, c32));
    blas_case(
        &b, "gemm-bad-operation",
        blas_try(&b, (cublasOperation_t)9, 4, 4, 4, 4, 4, 4, f32, f32, c32));
    blas_case(&b, "gemm-lda-below-m",
              blas_try(&b, CUBLAS_OP_N, 4, 4, 4, 3, 4, 4, f32, f32, c32));
    blas_case(&b, "gemm-lda-below-k-transposed",
              blas_try(&b, CUBLAS_OP_T, 8, 4, 4, 3, 4, 8, f32, f32, c32));
    blas_case(&b, "gemm-ldb-below-k",
              blas_try(&b, CUBLAS_OP_N, 4, 4, 4, 4, 3, 4, f32, f32, c32));
    blas_case(&b, "gemm-ldc-below-m",
              blas_try(&b, CUBLAS_OP_N, 4, 4, 4, 4, 4, 3, f32, f32, c32));
    blas_case(&b, "gemm-ld-0-with-m-0",
              blas_try(&b, CUBLAS_OP_N, 0, 4, 4, 0, 4, 0, f32, f32, c32));
    blas_case(&b, "gemm-m-0",
              blas_try(&b, CUBLAS_OP_N, 0, 4, 4, 1, 4, 1, f32, f32, c32));
    blas_case(
        &b, "gemm-fp32-to-fp16",
        blas_try(&b, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, f32, CUDA_R_16F, c32));
    blas_case(&b, "gemm-fp64-to-fp16",
              blas_try(&b, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_64F,
                       CUDA_R_16F, CUBLAS_COMPUTE_64F));
    report_case(r, "blas-refusals-sync", r->d.stream_synchronize(b.s));
    double one = 1, zero = 0;
    blas_case(&b, "gemm-strided-negative-batch",
              b.gemm_sb(b.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one,
                        (void *)b.a, CUDA_R_64F, 4, 16, (void *)b.b, CUDA_R_64F,
                        4, 16, &zero, (void *)b.c, CUDA_R_64F, 4, 16, -1,
                        CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT));

    /* Numbers, exact in every type. */
    blas_numbers(r, &b, "gemm-fp32", CUDA_R_32F, CUDA_R_32F, c32, 5, 3, 4, 1);
    blas_numbers(r, &b, "gemm-fp64", CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F,
                 5, 3, 4, 1);
    blas_numbers(r, &b, "gemm-fp16", CUDA_R_16F, CUDA_R_16F, c32, 6, 4, 5, 1);
    blas_numbers(r, &b, "gemm-bf16", CUDA_R_16BF, CUDA_R_16BF, c32, 6, 4, 5, 1);
    blas_numbers(r, &b, "gemm-bf16-to-fp32", CUDA_R_16BF, CUDA_R_32F, c32, 7, 2,
                 3, 1);
    blas_numbers(r, &b, "gemm-k-0-scales-c", CUDA_R_32F, CUDA_R_32F, c32, 4, 4,
                 0, 1);
    blas_numbers(r, &b, "gemm-strided-fp16-to-fp32", CUDA_R_16F, CUDA_R_32F,
                 c32, 3, 4, 5, 3);

    blas_case(&b, "destroy", b.destroy(b.h));
    r->d.mem_free(b.a);
    r->d.mem_free(b.b);
    r->d.mem_free(b.c);
    r->d.mem_free(b.ws);
    r->d.stream_destroy(b.s);
    /* Not dlclosed: a real cuBLAS keeps runtime state to the end. */
}
