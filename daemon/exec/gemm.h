/* SPDX-License-Identifier: MIT */
/*
 * Service: cuBLAS for GEMMs on the sessions' streams (gemm.c).
 */
#ifndef CUMOD_EXEC_GEMM_H
#define CUMOD_EXEC_GEMM_H

#include "exec.h"

/* Loads cuBLAS and makes the handle, once per executor (a second call
 * says what was loaded); the sentence in msg either way. CUMOD_OK or why
 * not. Load lane. */
cumod_err cumod__exec_blas_open(cumod_exec *ex, char *msg, size_t msglen);
/* Enqueues a CUMOD_WORK_GEMM item (extra: len bytes, a cumod_chan_gemm)
 * on s. CUMOD_OK, or a cumod error with the whole sentence in msg (the
 * cuBLAS status's name, what the GEMM was); a CUDA error that ends the
 * context goes to *lost too (the caller answers, then exits on it).
 * The dispatcher or a submission thread (under the handle's lock). */
cumod_err cumod__exec_gemm(cumod_exec *ex, const void *extra, size_t len,
                           CUstream s, char *msg, size_t msglen,
                           CUresult *lost);
/* Whether cuBLAS is loaded here (the direct path serves GEMMs then only;
 * else the front asks for it first). Any thread. */
int cumod__exec_blas_ready(cumod_exec *ex);
/* Stream s is being closed: its workspace is freed after its work.
 * Submission thread. */
void cumod__exec_blas_stream_closed(cumod_exec *ex, CUstream s);
/* Destroys the handle (at exit, the lanes and work stopped). */
void cumod__exec_blas_stop(cumod_exec *ex);

#endif
