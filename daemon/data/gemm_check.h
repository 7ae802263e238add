/* SPDX-License-Identifier: MIT */
/*
 * A GEMM's checks (gemm_check.c), for both processes: the front's
 * (front/state/checks.h: against the session) and the executor's direct
 * path (against its snapshot of the session's buffers).
 */
#ifndef CUMOD_DATA_GEMM_CHECK_H
#define CUMOD_DATA_GEMM_CHECK_H

#include <stdint.h>

#include "common/channel.h"
#include "common/status.h"
#include "cumod.pb-c.h"
#include "cumod/errors.h"

/* Buffer handle of the session (what names the operand, "A"): its device
 * address and size, or the error that names it. */
typedef cumod_err (*cumod_gemm_buf_fn)(const void *arg, const char *what,
                                       uint64_t handle, uint64_t *dptr,
                                       uint64_t *size, cumod_status *st);

/* Checks GEMM r: its types (A's and B's, and C's: the same, or FP32 for
 * FP16 and BF16 inputs), order, m, n, k and batch (1 to 2^31 - 1), and each
 * operand: a buffer buf knows, an offset that is a multiple of the element
 * size, ld (0: packed) at least the stored matrix's rows (column-major) or
 * columns (row-major), and every byte of the matrix, or of the strided
 * batch, inside the buffer; C's matrices may not overlap each other, nor
 * A's or B's bytes. Fills *out column-major (a row-major GEMM turned
 * around), with device addresses. */
cumod_err cumod__gemm_check(const Cumod__Gemm *r, cumod_gemm_buf_fn buf,
                            const void *arg, cumod_chan_gemm *out,
                            cumod_status *st);

#endif
