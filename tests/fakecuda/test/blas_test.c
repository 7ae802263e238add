/* SPDX-License-Identifier: MIT */
/*
 * The fake cuBLAS (libfakecublas.so) on the fake driver, in process: it
 * exports what cumodd resolves, answers as cuBLAS documents, and computes
 * a GEMM when its stream reaches it, held, faulted and ordered as a launch
 * is (fakecuda_enqueue).
 */
#include <cublas_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/blas.h"
#include "fake_test.h"

#define BLAS_IS(want, call)                                                    \
    do {                                                                       \
        cublasStatus_t blas_is_ = (call);                                      \
        cr_assert_eq(blas_is_, (want), "%s: got %s, want %s", #call,           \
                     cublasGetStatusName(blas_is_),                            \
                     cublasGetStatusName(want));                               \
    } while (0)

Test(blas, exports_every_entry_point_cumodd_resolves)
{
    void *lib = dlopen(CUMOD_TEST_FAKECUBLAS_LIB, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "%s", dlerror());
#define TEST_SYM(field, name, proto)                                           \
    cr_expect_not_null(dlsym(lib, name), "%s", name);
    CUMOD_BLAS_SYMS(TEST_SYM)
#undef TEST_SYM
    cr_expect_not_null(dlsym(lib, "cublasGetStatusName"));
    dlclose(lib);
}

Test(blas, a_handle_needs_a_current_context)
{
    cublasHandle_t h = NULL;
    int v = 0;
    BLAS_IS(CUBLAS_STATUS_NOT_INITIALIZED, cublasCreate_v2(&h));
    BLAS_IS(CUBLAS_STATUS_INVALID_VALUE, cublasCreate_v2(NULL));
    test_start();
    BLAS_IS(CUBLAS_STATUS_SUCCESS, cublasCreate_v2(&h));
    BLAS_IS(CUBLAS_STATUS_SUCCESS, cublasGetProperty(MAJOR_VERSION, &v));
    cr_expect_eq(v, CUBLAS_VER_MAJOR, "the version it was built with");
    BLAS_IS(CUBLAS_STATUS_SUCCESS, cublasDestroy_v2(h));
    BLAS_IS(CUBLAS_STATUS_NOT_INITIALIZED, cublasDestroy_v2(NULL));
    BLAS_IS(CUBLAS_STATUS_NOT_INITIALIZED, cublasSetStream_v2(NULL, NULL));
}

/* A 2 x 2 FP32 GEMM on device memory: A = [1 2; 3 4], B = I * 2. */
typedef struct blas_fix {
    cublasHandle_t h;
    CUstream s;
    CUdeviceptr a, b, c;
    float one, zero;
} blas_fix;

static void
blas_start(blas_fix *f)
{
    /* Column-major: A = [1 2; 3 4] is 1 3 2 4. */
    const float a[4] = {1, 3, 2, 4}, b[4] = {2, 0, 0, 2}, c[4] = {9, 9, 9, 9};
    test_start();
    BLAS_IS(CUBLAS_STATUS_SUCCESS, cublasCreate_v2(&f->h));
    CU_OK(cuStreamCreate(&f->s, CU_STREAM_NON_BLOCKING));
    BLAS_IS(CUBLAS_STATUS_SUCCESS, cublasSetStream_v2(f->h, f->s));
    CU_OK(cuMemAlloc(&f->a, sizeof(a)));
    CU_OK(cuMemAlloc(&f->b, sizeof(b)));
    CU_OK(cuMemAlloc(&f->c, sizeof(c)));
    CU_OK(cuMemcpyHtoD(f->a, a, sizeof(a)));
    CU_OK(cuMemcpyHtoD(f->b, b, sizeof(b)));
    CU_OK(cuMemcpyHtoD(f->c, c, sizeof(c)));
    f->one = 1;
    f->zero = 0;
}

static cublasStatus_t
blas_gemm(blas_fix *f, int lda, cudaDataType ct, cublasComputeType_t comp)
{
    return cublasGemmEx(f->h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &f->one,
                        (void *)f->a, CUDA_R_32F, lda, (void *)f->b, CUDA_R_32F,
                        2, &f->zero, (void *)f->c, ct, 2, comp,
                        CUBLAS_GEMM_DEFAULT);
}

Test(blas, checks_as_cublas_documents_and_queues_nothing_refused)
{
    blas_fix f;
    blas_start(&f);
    BLAS_IS(CUBLAS_STATUS_INVALID_VALUE,
            blas_gemm(&f, 1, CUDA_R_32F, CUBLAS_COMPUTE_32F));
    BLAS_IS(CUBLAS_STATUS_INVALID_VALUE,
            cublasGemmEx(f.h, (cublasOperation_t)9, CUBLAS_OP_N, 2, 2, 2,
                         &f.one, (void *)f.a, CUDA_R_32F, 2, (void *)f.b,
                         CUDA_R_32F, 2, &f.zero, (void *)f.c, CUDA_R_32F, 2,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    BLAS_IS(CUBLAS_STATUS_INVALID_VALUE,
            cublasGemmEx(f.h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 2, &f.one,
                         (void *)f.a, CUDA_R_32F, 2, (void *)f.b, CUDA_R_32F, 2,
                         &f.zero, (void *)f.c, CUDA_R_32F, 2,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    /* FP32 inputs give no FP16 C; FP32 inputs take no FP64 compute. */
    BLAS_IS(CUBLAS_STATUS_NOT_SUPPORTED,
            blas_gemm(&f, 2, CUDA_R_16F, CUBLAS_COMPUTE_32F));
    BLAS_IS(CUBLAS_STATUS_NOT_SUPPORTED,
            blas_gemm(&f, 2, CUDA_R_32F, CUBLAS_COMPUTE_64F));
    /* A negative batch count: what cuBLAS 13 answers on the H100. */
    BLAS_IS(CUBLAS_STATUS_EXECUTION_FAILED,
            cublasGemmStridedBatchedEx(
                f.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &f.one, (void *)f.a,
                CUDA_R_32F, 2, 4, (void *)f.b, CUDA_R_32F, 2, 4, &f.zero,
                (void *)f.c, CUDA_R_32F, 2, 4, -1, CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT));
    /* A workspace off 256-byte alignment: taken, as cuBLAS 13 takes it. */
    BLAS_IS(CUBLAS_STATUS_SUCCESS,
            cublasSetWorkspace_v2(f.h, (void *)(f.c + 4), 64));
    BLAS_IS(CUBLAS_STATUS_SUCCESS, cublasSetWorkspace_v2(f.h, NULL, 0));
    cr_expect_eq(fakecuda_pending(), 0);
    float c[4];
    CU_OK(cuMemcpyDtoH(c, f.c, sizeof(c)));
    cr_expect_eq(c[0], 9.0f, "C untouched by refused calls");
}

Test(blas, a_gemm_runs_when_its_stream_reaches_it)
{
    blas_fix f;
    float c[4];
    blas_start(&f);
    /* Held by its name, like a kernel. */
    cr_assert_eq(fakecuda_hold_functions("cublasGemmEx"), 0);
    BLAS_IS(CUBLAS_STATUS_SUCCESS,
            blas_gemm(&f, 2, CUDA_R_32F, CUBLAS_COMPUTE_32F));
    CU_OK(cuMemsetD8Async(f.b, 0, 16, f.s)); /* after it on its stream */
    cr_expect_eq(fakecuda_pending(), 2);
    CU_IS(CUDA_ERROR_NOT_READY, cuStreamQuery(f.s));
    CU_OK(cuMemcpyDtoH(c, f.c, sizeof(c)));
    cr_expect_eq(c[0], 9.0f, "not run while held");
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    CU_OK(cuStreamSynchronize(f.s));
    CU_OK(cuMemcpyDtoH(c, f.c, sizeof(c)));
    /* [1 2; 3 4] * 2I, column-major, with the B before the memset. */
    cr_expect(c[0] == 2 && c[1] == 6 && c[2] == 4 && c[3] == 8,
              "C = %g %g %g %g", c[0], c[1], c[2], c[3]);
}

Test(blas, memory_not_the_devices_faults_like_a_kernel)
{
    blas_fix f;
    float host[4];
    blas_start(&f);
    BLAS_IS(CUBLAS_STATUS_SUCCESS,
            cublasGemmEx(f.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &f.one,
                         (void *)f.a, CUDA_R_32F, 2, (void *)f.b, CUDA_R_32F, 2,
                         &f.zero, host, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
    CU_IS(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(f.s));
    cr_expect_eq(fakecuda_sticky_error(), CUDA_ERROR_ILLEGAL_ADDRESS);
}

Test(blas, a_launch_fault_may_name_it)
{
    blas_fix f;
    blas_start(&f);
    cr_assert_eq(fakecuda_inject_launch_fault("cublasGemmStridedBatchedEx"), 0);
    BLAS_IS(CUBLAS_STATUS_SUCCESS,
            blas_gemm(&f, 2, CUDA_R_32F, CUBLAS_COMPUTE_32F));
    CU_OK(cuStreamSynchronize(f.s));
    BLAS_IS(CUBLAS_STATUS_SUCCESS,
            cublasGemmStridedBatchedEx(
                f.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &f.one, (void *)f.a,
                CUDA_R_32F, 2, 0, (void *)f.b, CUDA_R_32F, 2, 0, &f.zero,
                (void *)f.c, CUDA_R_32F, 2, 4, 1, CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT));
    CU_IS(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(f.s));
}
