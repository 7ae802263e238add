/* SPDX-License-Identifier: MIT */
/*
 * What the GEMM suites share (tests/gemm_*_test.c on the fake cuBLAS,
 * tests/gpu/gpu_gemm_test.c on the real one): matrices of the four types
 * laid out as a GEMM describes them (order, ld, offset, a strided batch),
 * uploaded through libcumod, and the result checked element by element
 * against a host reference in double, including that nothing outside C's
 * matrices changed.
 */
#ifndef CUMOD_TEST_GEMM_UTIL_H
#define CUMOD_TEST_GEMM_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "cumod/cumod.h"

/* One GEMM to run and check. Each operand's ld is its packed one plus
 * pad_*; each lies off_* elements into its own buffer; with batch > 1 its
 * matrices are gap_* elements apart beyond their own span (A and B may
 * set share_* instead: stride 0, one matrix for the whole batch). */
typedef struct gm_case {
    cumod_gemm_type type, c_type; /* c_type 0: type */
    cumod_gemm_order order;
    int transa, transb;
    size_t m, n, k, batch;
    size_t pad_a, pad_b, pad_c;
    size_t off_a, off_b, off_c;
    size_t gap_a, gap_b, gap_c;
    int share_a, share_b;
    double alpha, beta;
} gm_case;

/* The element size of a type, and its name ("BF16"). */
size_t gm_esize(cumod_gemm_type t);
const char *gm_type_name(cumod_gemm_type t);

/* v (a double) rounded to type t (nearest even) and stored at p; and back. */
void gm_store(cumod_gemm_type t, void *p, size_t i, double v);
double gm_load(cumod_gemm_type t, const void *p, size_t i);

/* The host side of a case: the three buffers' bytes as uploaded, and what
 * C's must be after the GEMM. */
typedef struct gm_host {
    gm_case k;
    size_t elems[3];         /* A, B, C: elements of each buffer */
    void *bytes[3];          /* their contents (typed) */
    double *want;            /* C's buffer as it must be afterwards */
    double *scale;           /* per element of C: the size of the terms */
    size_t ld[3], stride[3]; /* as given to cumod_gemm */
} gm_host;

/* Makes the host side of k with values from seed (small multiples of 1/4,
 * exact in every type; C's buffer around its matrices gets other values,
 * which must survive). */
int gm_host_make(gm_host *h, const gm_case *k, unsigned seed);
void gm_host_free(gm_host *h);

/* The descriptor of k on buffers a, b, c (laid out as h's). */
cumod_gemm_desc gm_desc(const gm_host *h, cumod_buffer a, cumod_buffer b,
                        cumod_buffer c);

/* Compares C's buffer as read back (got, h->elems[2] typed elements) with
 * h->want: each element of C's matrices within rel times its terms' size
 * (rel: the caller's tolerance for the type), every other element
 * unchanged. The number of elements wrong; the first few described in
 * why. */
size_t gm_compare(const gm_host *h, const void *got, double rel, char *why,
                  size_t whylen);

/* The tolerance of a type on the fake cuBLAS (FP32 accumulation, one
 * rounding to C) or on a GPU (sums in another order, tensor cores). */
double gm_tolerance(cumod_gemm_type c_type, int real_gpu);

/* Runs case k on client c end to end: three buffers made and written,
 * cumod_gemm (on stream, answered when complete), C read back and
 * compared, the buffers freed. Returns the number of elements wrong (0: all
 * right), or -1 with the call that failed in why. */
long gm_run(cumod_client *c, const gm_case *k, unsigned seed,
            cumod_stream stream, double rel, char *why, size_t whylen);

/* "FP16 row-major A^T B m 5 n 7 k 3 batch 1": a case, for messages. */
void gm_case_name(const gm_case *k, char *out, size_t len);

#endif
