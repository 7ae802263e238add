/* SPDX-License-Identifier: MIT */
/*
 * cuBLAS, loaded at run time like the driver (driver.h): cumodd never links
 * libcublas. The executor dlopens it at the first GEMM (the library and its
 * libcublasLt are hundreds of megabytes: a daemon that serves no GEMM never
 * pays for them, and one without cuBLAS serves everything else), resolves
 * the entry points below with dlsym and checks the version.
 *
 * Used by the executor process (gemm.c) and by the benchmark's
 * in-process floor; one cumod_blas per user.
 */
#ifndef CUMOD_BLAS_H
#define CUMOD_BLAS_H

#include <cublas_api.h>
#include <stddef.h>

#include "cumod/errors.h"

/* The oldest cuBLAS cumodd takes: cublasGemmEx and
 * cublasGemmStridedBatchedEx with cublasComputeType_t (11.0) and BF16,
 * with a per-stream workspace (cublasSetWorkspace), as the toolkits cumod is
 * built and tested with (12 and 13) have them. */
#define CUMOD_BLAS_MIN_MAJOR 12

/* The cuBLAS entry points cumodd uses, one row each: X(field, "symbol",
 * proto), proto the cublas_api.h declaration whose type the pointer has.
 * tests/fakecuda's libfakecublas.so exports every one. */
#define CUMOD_BLAS_SYMS(X)                                                     \
    X(create, "cublasCreate_v2", cublasCreate_v2)                              \
    X(destroy, "cublasDestroy_v2", cublasDestroy_v2)                           \
    X(get_property, "cublasGetProperty", cublasGetProperty)                    \
    X(set_stream, "cublasSetStream_v2", cublasSetStream_v2)                    \
    X(set_workspace, "cublasSetWorkspace_v2", cublasSetWorkspace_v2)           \
    X(set_math_mode, "cublasSetMathMode", cublasSetMathMode)                   \
    X(set_pointer_mode, "cublasSetPointerMode_v2", cublasSetPointerMode_v2)    \
    X(gemm_ex, "cublasGemmEx", cublasGemmEx)                                   \
    X(gemm_strided_batched_ex, "cublasGemmStridedBatchedEx",                   \
      cublasGemmStridedBatchedEx)                                              \
    X(get_status_name, "cublasGetStatusName", cublasGetStatusName)             \
    X(get_status_string, "cublasGetStatusString", cublasGetStatusString)

typedef struct cumod_blas {
    void *dl;
    char path[512]; /* the library that loaded */
    int major, minor, patch;
#define CUMOD_BLAS_FIELD(field, name, proto) __typeof__(proto) *field;
    CUMOD_BLAS_SYMS(CUMOD_BLAS_FIELD)
#undef CUMOD_BLAS_FIELD
} cumod_blas;

/* The library to load: explicit_path if not NULL or empty, else the
 * environment variable CUMOD_CUBLAS_LIBRARY, else NULL: the default list
 * (libcublas.so, libcublas.so.13, libcublas.so.12 as the dynamic loader
 * finds them, then the same in /usr/local/cuda/lib64). Static or
 * borrowed. */
const char *cumod__blas_default_path(const char *explicit_path);

/* Loads path (NULL: the default list, first that loads), resolves every
 * entry point and checks the version (CUMOD_BLAS_MIN_MAJOR or newer). On
 * failure returns CUMOD_ENOTSUP (no usable cuBLAS: missing, not cuBLAS, too
 * old) and writes a sentence for a person into msg: what was tried and
 * dlerror()'s answer for each. Blocks (dlopen of a large library). Any
 * thread; no context needed. */
cumod_err cumod__blas_open(cumod_blas *b, const char *path, char *msg,
                           size_t msglen);

/* Forgets the library without unloading it: the runtime inside libcublas
 * keeps state until the process exits (and registers exit handlers), so
 * cumodd never dlcloses it. Accepts a zeroed or half-opened one. */
void cumod__blas_close(cumod_blas *b);

/* The status's name ("CUBLAS_STATUS_INVALID_VALUE"); static. */
const char *cumod__blas_status_name(const cumod_blas *b, cublasStatus_t s);

/* Converts a cuBLAS status into a cumod error, once, where it enters:
 * writes "what: CUBLAS_STATUS_X (cuBLAS's sentence)" into msg when msg is
 * not NULL. INVALID_VALUE gives CUMOD_EINVAL, NOT_SUPPORTED and
 * ARCH_MISMATCH CUMOD_ENOTSUP, ALLOC_FAILED CUMOD_EDEVMEM, the rest
 * CUMOD_EDRIVER. Any thread. */
cumod_err cumod__blas_err(const cumod_blas *b, cublasStatus_t s,
                          const char *what, char *msg, size_t msglen);

#endif
