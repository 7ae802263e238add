/* SPDX-License-Identifier: MIT */
/*
 * Service: GEMM in the executor (gemm.h): cuBLAS bound to the primary context
 * that every session's work runs in, and each GEMM put on its session's stream,
 * in stream order with the launches and copies around it.
 *
 * - Loading (cumod__exec_blas_open, for the CUMOD_CHAN_BLAS handler in
 *   exec_blas.c) runs on the load lane: libcublas and
 *   libcublasLt are hundreds of megabytes, and dlopen plus cublasCreate
 *   would hold every session's launches on the submission thread. The
 *   front asks for it before the first GEMM of each executor (a new
 *   process after a fault makes its own handle) and holds its GEMMs until
 *   the answer. One handle per executor.
 * - A GEMM (CUMOD_WORK_GEMM) is enqueued on the submission thread like a
 *   launch: cublasSetStream to the session's stream, then that stream's
 *   workspace, then cublasGemmEx or cublasGemmStridedBatchedEx. Pointer
 *   mode is host: alpha and beta are read at the call.
 * - Workspaces: one handle serves every stream, and cublasSetStream puts
 *   the handle back on its default workspace, which kernels on two streams
 *   would then share while they run side by side. So each stream gets its
 *   own (cublasSetWorkspace after every cublasSetStream), of the size
 *   cuBLAS's documentation recommends (32 MiB on Hopper and later, 4 MiB
 *   before), allocated stream-ordered on that stream at its first GEMM and
 *   freed stream-ordered when the stream is closed.
 * - Threads: the dispatcher runs the GEMMs the front sends, and the
 *   submission threads those they read from their rings (direct.h); one
 *   handle serves them all, under its lock (binding it to a stream and
 *   enqueueing the GEMM are a few microseconds of the host's).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blas.h"
#include "gemm.h"
#include "common/idmap.h"
#include "common/log.h"

struct cumod_exec_blas {
    cumod_blas lib;
    cublasHandle_t h;
    size_t ws_size;
    pthread_mutex_t mtx; /* the handle, bound and ws */
    /* The stream the handle is on, with that stream's workspace: the
     * submission thread's. A GEMM on the same stream as the last skips
     * binding the handle again. */
    CUstream bound;
    /* CUstream -> its workspace (a CUdeviceptr); the submission thread's
     * own. */
    cumod_idmap ws;
};

/* A checked type's name (the front refused any other). */
static const char *
blas_type_name(uint32_t t)
{
    const char *n = cumod__chan_gemm_type_name(t);
    return n != NULL ? n : "?";
}

static int
blas_data_type(uint32_t t, cudaDataType *out)
{
    switch (t) {
    case CUMOD_CHAN_GEMM_FP32:
        *out = CUDA_R_32F;
        return 0;
    case CUMOD_CHAN_GEMM_FP64:
        *out = CUDA_R_64F;
        return 0;
    case CUMOD_CHAN_GEMM_FP16:
        *out = CUDA_R_16F;
        return 0;
    case CUMOD_CHAN_GEMM_BF16:
        *out = CUDA_R_16BF;
        return 0;
    }
    return -1;
}

/* Loads cuBLAS and makes the handle; the sentence in msg either way. */
static cumod_err
blas_start(cumod_exec *ex, struct cumod_exec_blas *bl, char *msg, size_t msglen)
{
    const char *path = cumod__blas_default_path(ex->cfg->cublas_library);
    cublasStatus_t s;
    cumod_err rv;
    int major = 0;

    if ((rv = cumod__blas_open(&bl->lib, path, msg, msglen)) != CUMOD_OK)
        return rv;
    /* The context is current on this lane: the handle is bound to it. */
    if ((s = bl->lib.create(&bl->h)) != CUBLAS_STATUS_SUCCESS) {
        bl->h = NULL;
        return cumod__blas_err(&bl->lib, s, "cublasCreate failed", msg, msglen);
    }
    /* FP16 and BF16 accumulate in FP32 to the end, split reductions
     * included; FP32 stays FP32 (no TF32): what a GEMM's type promises. */
    if ((s = bl->lib.set_math_mode(
             bl->h,
             (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))) !=
            CUBLAS_STATUS_SUCCESS ||
        (s = bl->lib.set_pointer_mode(bl->h, CUBLAS_POINTER_MODE_HOST)) !=
            CUBLAS_STATUS_SUCCESS)
        return cumod__blas_err(&bl->lib, s, "setting up the cuBLAS handle", msg,
                               msglen);
    (void)ex->drv.device_get_attribute(
        &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ex->dev);
    bl->ws_size = (size_t)CUMOD_BLAS_WORKSPACE(major);
    snprintf(msg, msglen,
             "cuBLAS %d.%d.%d from %s, a %zu MiB workspace per stream that "
             "runs GEMMs",
             bl->lib.major, bl->lib.minor, bl->lib.patch, bl->lib.path,
             bl->ws_size >> 20);
    return CUMOD_OK;
}

static void
blas_free(cumod_exec *ex, struct cumod_exec_blas *bl)
{
    if (bl == NULL)
        return;
    if (bl->h != NULL)
        (void)bl->lib.destroy(bl->h);
    cumod__idmap_fini(&bl->ws);
    pthread_mutex_destroy(&bl->mtx);
    cumod__blas_close(&bl->lib);
    free(bl);
}

/* The workspace of stream s, allocated on it at its first GEMM. */
static CUresult
blas_workspace(cumod_exec *ex, struct cumod_exec_blas *bl, CUstream s,
               CUdeviceptr *out)
{
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)cumod__idmap_get(
        &bl->ws, (uint64_t)(uintptr_t)s);
    CUresult r;

    if (p == 0) {
        r = ex->pools ? ex->drv.mem_alloc_async(&p, bl->ws_size, s)
                      : ex->drv.mem_alloc(&p, bl->ws_size);
        if (r != CUDA_SUCCESS)
            return r;
        if (cumod__idmap_set(&bl->ws, (uint64_t)(uintptr_t)s,
                             (void *)(uintptr_t)p) != CUMOD_OK) {
            if (ex->pools)
                (void)ex->drv.mem_free_async(p, s);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    *out = p;
    return CUDA_SUCCESS;
}

static cumod_err
blas_gemm(cumod_exec *ex, struct cumod_exec_blas *bl, const void *extra,
          size_t len, CUstream s, char *msg, size_t msglen, CUresult *lost)
{
    cumod_chan_gemm g;
    cudaDataType ab, ct;
    CUdeviceptr ws;
    cublasStatus_t st;
    char what[160];
    CUresult r;

    if (len < sizeof(g)) {
        snprintf(msg, msglen, "a malformed GEMM item (%zu bytes)", len);
        return CUMOD_EPROTO;
    }
    memcpy(&g, extra, sizeof(g));
    if (blas_data_type(g.type, &ab) != 0 || blas_data_type(g.c_type, &ct)) {
        snprintf(msg, msglen, "a GEMM of unknown types %u, %u", g.type,
                 g.c_type);
        return CUMOD_EPROTO;
    }
    /* The shape as the client gave it (a row-major GEMM was turned
     * around: its m is cuBLAS's n). */
    snprintf(what, sizeof(what), "%s (%s%s%s, m %d, n %d, k %d, batch %d)",
             g.batch > 1 ? "cublasGemmStridedBatchedEx" : "cublasGemmEx",
             blas_type_name(g.type), g.c_type != g.type ? " to " : "",
             g.c_type != g.type ? blas_type_name(g.c_type) : "",
             g.row_major ? g.n : g.m, g.row_major ? g.m : g.n, g.k, g.batch);
    if ((r = blas_workspace(ex, bl, s, &ws)) != CUDA_SUCCESS) {
        char w2[256];
        if (cumod__cu_context_lost(r))
            *lost = r;
        snprintf(w2, sizeof(w2), "%s: its stream's %zu MiB cuBLAS workspace",
                 what, bl->ws_size >> 20);
        return cumod__cu_err(&ex->drv, r, w2, msg, msglen);
    }
    /* cublasSetStream puts the handle back on its default workspace:
     * this stream's own goes after it. */
    if (bl->bound != s) {
        bl->bound = NULL;
        if ((st = bl->lib.set_stream(bl->h, (cudaStream_t)s)) !=
                CUBLAS_STATUS_SUCCESS ||
            (st = bl->lib.set_workspace(bl->h, (void *)(uintptr_t)ws,
                                        bl->ws_size)) != CUBLAS_STATUS_SUCCESS)
            return cumod__blas_err(&bl->lib, st, "binding cuBLAS to the stream",
                                   msg, msglen);
        bl->bound = s;
    }
    cublasOperation_t ta = g.transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = g.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const void *a = (const void *)(uintptr_t)g.a;
    const void *b = (const void *)(uintptr_t)g.b;
    void *c = (void *)(uintptr_t)g.c;
    /* The scalars' type is the compute type's. */
    float alpha32 = (float)g.alpha, beta32 = (float)g.beta;
    int fp64 = g.type == CUMOD_CHAN_GEMM_FP64;
    const void *alpha = fp64 ? (const void *)&g.alpha : (const void *)&alpha32;
    const void *beta = fp64 ? (const void *)&g.beta : (const void *)&beta32;
    cublasComputeType_t compute =
        fp64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    if (g.batch <= 1)
        st = bl->lib.gemm_ex(bl->h, ta, tb, g.m, g.n, g.k, alpha, a, ab, g.lda,
                             b, ab, g.ldb, beta, c, ct, g.ldc, compute,
                             CUBLAS_GEMM_DEFAULT);
    else
        st = bl->lib.gemm_strided_batched_ex(
            bl->h, ta, tb, g.m, g.n, g.k, alpha, a, ab, g.lda, g.stride_a, b,
            ab, g.ldb, g.stride_b, beta, c, ct, g.ldc, g.stride_c, g.batch,
            compute, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        char w2[200];
        snprintf(w2, sizeof(w2), "%s failed", what);
        return cumod__blas_err(&bl->lib, st, w2, msg, msglen);
    }
    return CUMOD_OK;
}

cumod_err
cumod__exec_gemm(cumod_exec *ex, const void *extra, size_t len, CUstream s,
                 char *msg, size_t msglen, CUresult *lost)
{
    struct cumod_exec_blas *bl =
        atomic_load_explicit(&ex->blas, memory_order_acquire);
    if (bl == NULL) {
        snprintf(msg, msglen,
                 "cuBLAS is not loaded in this executor (the front asks for "
                 "it before the first GEMM)");
        return CUMOD_EINTERNAL;
    }
    pthread_mutex_lock(&bl->mtx);
    cumod_err rv = blas_gemm(ex, bl, extra, len, s, msg, msglen, lost);
    pthread_mutex_unlock(&bl->mtx);
    return rv;
}

int
cumod__exec_blas_ready(cumod_exec *ex)
{
    return atomic_load_explicit(&ex->blas, memory_order_acquire) != NULL;
}

void
cumod__exec_blas_stream_closed(cumod_exec *ex, CUstream s)
{
    struct cumod_exec_blas *bl =
        atomic_load_explicit(&ex->blas, memory_order_acquire);
    /* Without memory pools a free would wait for the device: the stream
     * keeps its workspace back in the pool instead, for its next user. */
    if (bl == NULL || !ex->pools)
        return;
    pthread_mutex_lock(&bl->mtx);
    void *p = cumod__idmap_remove(&bl->ws, (uint64_t)(uintptr_t)s);
    if (p != NULL)
        (void)ex->drv.mem_free_async((CUdeviceptr)(uintptr_t)p, s);
    /* The stream goes back to the pool: its next GEMM binds it again,
     * with a new workspace. */
    if (bl->bound == s)
        bl->bound = NULL;
    pthread_mutex_unlock(&bl->mtx);
}

void
cumod__exec_blas_stop(cumod_exec *ex)
{
    struct cumod_exec_blas *bl =
        atomic_exchange_explicit(&ex->blas, NULL, memory_order_acq_rel);
    blas_free(ex, bl);
}

cumod_err
cumod__exec_blas_open(cumod_exec *ex, char *msg, size_t msglen)
{
    struct cumod_exec_blas *bl =
        atomic_load_explicit(&ex->blas, memory_order_acquire);
    cumod_err rv;

    if (bl != NULL) {
        snprintf(msg, msglen, "cuBLAS %d.%d.%d from %s", bl->lib.major,
                 bl->lib.minor, bl->lib.patch, bl->lib.path);
        return CUMOD_OK;
    }
    if ((bl = calloc(1, sizeof(*bl))) == NULL) {
        snprintf(msg, msglen, "out of memory");
        return CUMOD_ENOMEM;
    }
    cumod__idmap_init(&bl->ws);
    pthread_mutex_init(&bl->mtx, NULL);
    rv = blas_start(ex, bl, msg, msglen);
    if (rv != CUMOD_OK) {
        CUMOD_LOGW("CUMOD-BLAS-FAIL", "%s", msg);
        blas_free(ex, bl);
        return rv;
    }
    CUMOD_LOGN("CUMOD-BLAS", "%s", msg);
    /* Published to the submission thread, which reads it at a GEMM the
     * front sends once it has this answer. */
    atomic_store_explicit(&ex->blas, bl, memory_order_release);
    return CUMOD_OK;
}
