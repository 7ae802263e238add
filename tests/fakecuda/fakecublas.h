/* SPDX-License-Identifier: MIT */
/*
 * What libfakecublas.so's files share (cublas.c: the entry points and the
 * handle; cublas_gemm.c: a GEMM's checks, its queued work and its
 * arithmetic). Not installed.
 */
#ifndef FAKECUBLAS_H
#define FAKECUBLAS_H

#include <cublas_api.h>

/* A GEMM as cublasGemmEx or cublasGemmStridedBatchedEx were called
 * (column-major; batch 1 and strides 0 for cublasGemmEx). */
typedef struct fake_gemm {
    cublasOperation_t transa, transb;
    int m, n, k;
    const void *a, *b;
    void *c;
    cudaDataType atype, btype, ctype;
    int lda, ldb, ldc;
    long long stride_a, stride_b, stride_c;
    cublasComputeType_t compute;
    int batch;
} fake_gemm;

/* Checks g as cuBLAS does (INVALID_VALUE for a bad operation, size or ld,
 * NOT_SUPPORTED for a type mix it has not), then queues it on stream
 * (fakecuda_enqueue, named name): CUBLAS_STATUS_SUCCESS, or the status.
 * alpha and beta are read now (pointer mode host) or when it runs
 * (device). */
cublasStatus_t fake_gemm_submit(cudaStream_t stream, cublasPointerMode_t pm,
                                const char *name, const fake_gemm *g,
                                const void *alpha, const void *beta);

/* CUMOD_FAKE_CUBLAS_STATUS, or CUBLAS_STATUS_SUCCESS. */
cublasStatus_t fake_blas_forced_status(void);

#endif
