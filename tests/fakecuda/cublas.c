/* SPDX-License-Identifier: MIT */
/*
 * libfakecublas.so: a fake cuBLAS for tests, on the fake driver
 * (libfakecuda.so, which it links: the executor that dlopened the fake
 * driver gets the same one). It exports the entry points cumodd resolves
 * (daemon/exec/blas.h) with cublas_api.h's prototypes, answers them with
 * the statuses the real cuBLAS documents (CUBLAS_STATUS_INVALID_VALUE for a
 * bad ld, CUBLAS_STATUS_NOT_SUPPORTED for a type mix it has not, ...), and
 * computes each GEMM on the fake's host-backed device memory when its
 * stream reaches it (fakecuda_enqueue, named "cublasGemmEx" or
 * "cublasGemmStridedBatchedEx" for holds and faults): in order with the
 * stream's launches and copies, FP16 and BF16 accumulated in FP32, results
 * rounded to C's type (cublas_gemm.c). Small GEMMs only: it is a triple
 * loop.
 *
 * Settings (environment, read at each call):
 *   CUMOD_FAKE_CUBLAS_VERSION  what cublasGetProperty says, "MAJOR.MINOR.PATCH"
 *                              (default: the cublas_api.h it was built with)
 *   CUMOD_FAKE_CUBLAS_STATUS   a cuBLAS status name or number every GEMM call
 *                              returns, after its checks, queuing nothing
 *   CUMOD_FAKE_LOG             as the driver's: `cublas-create` and
 *                              `cublas-destroy` lines (a GEMM's own work is
 *                              the driver's `call` line)
 */
#pragma GCC visibility push(default)
#include <cublas_api.h>
#pragma GCC visibility pop

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakecublas.h"
#include "fakecuda.h"

#define FAKE_BLAS_MAGIC 0xb1a5c0deu

struct cublasContext {
    unsigned magic;
    CUcontext ctx;
    cudaStream_t stream;
    void *workspace;
    size_t workspace_size;
    cublasMath_t math;
    cublasPointerMode_t pointer_mode;
};

/* One line to CUMOD_FAKE_LOG, as the driver writes them. */
static void
blas_log(const char *what, const void *h)
{
    const char *path = getenv("CUMOD_FAKE_LOG");
    char line[160];
    int fd, n;

    if (path == NULL || path[0] == '\0')
        return;
    if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0)
        return;
    n = snprintf(line, sizeof(line), "%s handle=0x%jx pid=%d\n", what,
                 (uintmax_t)(uintptr_t)h, (int)getpid());
    if (n > 0 && write(fd, line, (size_t)n) < 0)
        n = 0; /* a test's log: nothing to do about it */
    close(fd);
}

static int
blas_handle_ok(cublasHandle_t h)
{
    return h != NULL && h->magic == FAKE_BLAS_MAGIC;
}

static void
blas_version(int v[3])
{
    const char *s = getenv("CUMOD_FAKE_CUBLAS_VERSION");
    v[0] = CUBLAS_VER_MAJOR;
    v[1] = CUBLAS_VER_MINOR;
    v[2] = CUBLAS_VER_PATCH;
    if (s != NULL && s[0] != '\0' &&
        sscanf(s, "%d.%d.%d", &v[0], &v[1], &v[2]) < 1)
        v[0] = 0;
}

/* Names and sentences, as cuBLAS 13 gives them. */
static const struct {
    cublasStatus_t s;
    const char *name, *text;
} blas_statuses[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED",
     "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED",
     "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE",
     "an invalid numeric value was used as an argument"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH",
     "an absent device architectural feature is required"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR",
     "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED",
     "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR",
     "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED",
     "the functionality requested is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR",
     "error detected trying to check the license"},
};

#define BLAS_NSTATUS (sizeof(blas_statuses) / sizeof(blas_statuses[0]))

const char *CUBLASWINAPI
cublasGetStatusName(cublasStatus_t status)
{
    for (size_t i = 0; i < BLAS_NSTATUS; i++)
        if (blas_statuses[i].s == status)
            return blas_statuses[i].name;
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *CUBLASWINAPI
cublasGetStatusString(cublasStatus_t status)
{
    for (size_t i = 0; i < BLAS_NSTATUS; i++)
        if (blas_statuses[i].s == status)
            return blas_statuses[i].text;
    return "unknown error";
}

/* CUMOD_FAKE_CUBLAS_STATUS, or CUBLAS_STATUS_SUCCESS. */
cublasStatus_t
fake_blas_forced_status(void)
{
    const char *s = getenv("CUMOD_FAKE_CUBLAS_STATUS");
    char *end;

    if (s == NULL || s[0] == '\0')
        return CUBLAS_STATUS_SUCCESS;
    for (size_t i = 0; i < BLAS_NSTATUS; i++)
        if (strcmp(blas_statuses[i].name, s) == 0)
            return blas_statuses[i].s;
    long v = strtol(s, &end, 10);
    return *end == '\0' ? (cublasStatus_t)v : CUBLAS_STATUS_INTERNAL_ERROR;
}

cublasStatus_t CUBLASWINAPI
cublasGetProperty(libraryPropertyType type, int *value)
{
    int v[3];
    if (value == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    blas_version(v);
    switch (type) {
    case MAJOR_VERSION:
        *value = v[0];
        return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION:
        *value = v[1];
        return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL:
        *value = v[2];
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t CUBLASWINAPI
cublasGetVersion_v2(cublasHandle_t handle, int *version)
{
    int v[3];
    if (version == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    blas_version(v);
    *version = v[0] * 10000 + v[1] * 100 + v[2];
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasCreate_v2(cublasHandle_t *handle)
{
    CUcontext ctx = NULL;
    struct cublasContext *h;

    if (handle == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    /* The real one initialises the runtime on the current context. */
    if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((h = calloc(1, sizeof(*h))) == NULL)
        return CUBLAS_STATUS_ALLOC_FAILED;
    h->magic = FAKE_BLAS_MAGIC;
    h->ctx = ctx;
    h->math = CUBLAS_DEFAULT_MATH;
    h->pointer_mode = CUBLAS_POINTER_MODE_HOST;
    blas_log("cublas-create", h);
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasDestroy_v2(cublasHandle_t handle)
{
    if (!blas_handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    blas_log("cublas-destroy", handle);
    handle->magic = 0;
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    if (!blas_handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = streamId;
    /* As documented: back to the default workspace. */
    handle->workspace = NULL;
    handle->workspace_size = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId)
{
    if (!blas_handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (streamId == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    *streamId = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                      size_t workspaceSizeInBytes)
{
    if (!blas_handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    /* The documentation asks for 256-byte alignment, but cuBLAS 13 on the
     * H100 takes a workspace 4 bytes off it (the driver report compares):
     * the fake takes any, as the real one does. */
    handle->workspace = workspace;
    handle->workspace_size = workspace != NULL ? workspaceSizeInBytes : 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    unsigned base = (unsigned)mode &
                    ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (!blas_handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (base > CUBLAS_TF32_TENSOR_OP_MATH)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    if (!blas_handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->math;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
    if (!blas_handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t *mode)
{
    if (!blas_handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
             cublasOperation_t transb, int m, int n, int k, const void *alpha,
             const void *A, cudaDataType Atype, int lda, const void *B,
             cudaDataType Btype, int ldb, const void *beta, void *C,
             cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
             cublasGemmAlgo_t algo)
{
    fake_gemm g = {
        .transa = transa,
        .transb = transb,
        .m = m,
        .n = n,
        .k = k,
        .a = A,
        .atype = Atype,
        .lda = lda,
        .b = B,
        .btype = Btype,
        .ldb = ldb,
        .c = C,
        .ctype = Ctype,
        .ldc = ldc,
        .compute = computeType,
        .batch = 1,
    };
    if (!blas_handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    (void)algo;
    return fake_gemm_submit(handle->stream, handle->pointer_mode,
                            "cublasGemmEx", &g, alpha, beta);
}

cublasStatus_t CUBLASWINAPI
cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k,
                           const void *alpha, const void *A, cudaDataType Atype,
                           int lda, long long int strideA, const void *B,
                           cudaDataType Btype, int ldb, long long int strideB,
                           const void *beta, void *C, cudaDataType Ctype,
                           int ldc, long long int strideC, int batchCount,
                           cublasComputeType_t computeType,
                           cublasGemmAlgo_t algo)
{
    fake_gemm g = {
        .transa = transa,
        .transb = transb,
        .m = m,
        .n = n,
        .k = k,
        .a = A,
        .atype = Atype,
        .lda = lda,
        .stride_a = strideA,
        .b = B,
        .btype = Btype,
        .ldb = ldb,
        .stride_b = strideB,
        .c = C,
        .ctype = Ctype,
        .ldc = ldc,
        .stride_c = strideC,
        .compute = computeType,
        .batch = batchCount,
    };
    if (!blas_handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    (void)algo;
    return fake_gemm_submit(handle->stream, handle->pointer_mode,
                            "cublasGemmStridedBatchedEx", &g, alpha, beta);
}
