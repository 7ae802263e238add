/* SPDX-License-Identifier: MIT */
/*
 * What goes wrong with GEMMs, on the fake driver and the fake cuBLAS: each
 * bad operand refused before anything runs, with an error naming it;
 * bounds that hold to the byte with offsets, strides and batches; a daemon
 * without cuBLAS, or with one too old, that refuses GEMMs saying why and
 * serves everything else; cuBLAS's own errors by name; a GEMM that faults
 * or hangs handled like a launch; a new executor that makes a new handle.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"
#include "gemm_util.h"

/* TH_SUITE_DRIVER(0) is gemm_test.c's: one executable. */

static void
ge_start(th_env *t, const char *const *extra, const char *const *env)
{
    static const char *const kernels[] = {"vadd", "empty", "scale", NULL};
    th_env_init(t, kernels);
    th_env_start(t, extra, env);
}

static int
ge_count(th_env *t, const char *needle)
{
    char *log = th_read_file(t->fake_log);
    int n = log ? th_count(log, needle) : 0;
    free(log);
    return n;
}

static int
ge_empty_launch(th_env *t)
{
    cumod_launch_params e = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    return cumod_launch(t->c, &e, NULL, NULL);
}

/* A 16 x 16 x 16 FP32 column-major GEMM on buffers a, b, c (4 KiB each). */
static cumod_gemm_desc
ge_base(cumod_buffer a, cumod_buffer b, cumod_buffer c)
{
    cumod_gemm_desc d = {.type = CUMOD_GEMM_FP32,
                         .order = CUMOD_GEMM_COL_MAJOR,
                         .m = 16,
                         .n = 16,
                         .k = 16,
                         .alpha = 1,
                         .a = {a, 0, 0, 0},
                         .b = {b, 0, 0, 0},
                         .c = {c, 0, 0, 0}};
    return d;
}

static void
ge_refused(th_env *t, const cumod_gemm_desc *d, int code, const char *needle)
{
    int rv = cumod_gemm(t->c, d, NULL);
    cr_expect_eq(rv, code, "'%s': got %s (%s)", needle, cumod_errname(rv),
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), needle) != NULL,
              "detail '%s' lacks '%s'", cumod_last_detail(), needle);
}

Test(gemm_errors, each_bad_operand_is_named_and_nothing_runs, .timeout = 60)
{
    cumod_buffer a, b, c;
    cumod_gemm_desc d;
    char want[300];
    th_env t;

    ge_start(&t, NULL, NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &c), CUMOD_OK);

    d = ge_base(a, b, c);
    d.a.buffer = 999;
    ge_refused(&t, &d, CUMOD_ENOENT,
               "A: buffer 999 is not one of this connection's");
    d = ge_base(a, b, c);
    d.k = 64;
    d.n = 8;
    d.b.ld = 10;
    ge_refused(&t, &d, CUMOD_EINVAL, "B: ld 10 < 64 rows");
    d = ge_base(a, b, c);
    d.transa = 1;
    d.k = 64;
    d.a.ld = 16; /* A^T: A is stored 64 x 16 */
    ge_refused(&t, &d, CUMOD_EINVAL, "A: ld 16 < 64 rows");
    d = ge_base(a, b, c);
    d.order = CUMOD_GEMM_ROW_MAJOR;
    d.a.ld = 3;
    ge_refused(&t, &d, CUMOD_EINVAL, "A: ld 3 < 16 columns (row-major");
    d = ge_base(a, b, c);
    d.m = d.n = 512;
    d.k = 1;
    snprintf(want, sizeof(want),
             "C: needs 1048576 bytes at offset 0 (512 x 512 FP32, ld 512), "
             "buffer %llu holds 4096",
             (unsigned long long)c);
    ge_refused(&t, &d, CUMOD_EINVAL, want);
    d = ge_base(a, b, c);
    d.c.offset = 8192;
    ge_refused(&t, &d, CUMOD_EINVAL, "C: needs 1024 bytes at offset 8192");
    d = ge_base(a, b, c);
    d.a.offset = 6;
    ge_refused(&t, &d, CUMOD_EINVAL,
               "A: offset 6 is not a multiple of 4, the size of one FP32 "
               "element");
    /* A strided batch: the last matrix must fit too. */
    d = ge_base(a, b, c);
    d.batch = 3;
    d.b.offset = 2048;
    d.b.stride = 256;
    d.c.stride = 256;
    snprintf(want, sizeof(want),
             "B: needs 3072 bytes at offset 2048 (3 matrices of 16 x 16 FP32, "
             "ld 16, stride 256), buffer %llu holds 4096",
             (unsigned long long)b);
    ge_refused(&t, &d, CUMOD_EINVAL, want);
    d.b.offset = 0;
    d.b.stride = 1ull << 62; /* past any buffer, without wrapping around */
    ge_refused(&t, &d, CUMOD_EINVAL, "more bytes than any buffer holds");
    d.b.stride = 256;
    d.c.stride = 100;
    ge_refused(&t, &d, CUMOD_EINVAL,
               "C: stride 100 elements < 256, the elements of one matrix");
    d = ge_base(a, b, c);
    d.c.buffer = a;
    d.c.offset = 2048;
    d.a.offset = 1024 + 4; /* A's last byte is C's first ... and more */
    ge_refused(&t, &d, CUMOD_EINVAL, "C overlaps A in buffer");
    d = ge_base(a, b, c);
    d.m = 0;
    ge_refused(&t, &d, CUMOD_EINVAL,
               "GEMM: m is 0; m, n and k must be at least 1");
    d = ge_base(a, b, c);
    d.k = 1ull << 31;
    ge_refused(&t, &d, CUMOD_EINVAL,
               "GEMM: k = 2147483648 is above cuBLAS's limit");
    d = ge_base(a, b, c);
    d.c.ld = 1ull << 31;
    ge_refused(&t, &d, CUMOD_EINVAL, "C: ld 2147483648 is above cuBLAS's");
    d = ge_base(a, b, c);
    d.type = CUMOD_GEMM_FP64;
    d.c_type = CUMOD_GEMM_FP16;
    ge_refused(&t, &d, CUMOD_ENOTSUP,
               "GEMM: FP64 inputs with a C of FP16 are not supported");
    d.type = CUMOD_GEMM_FP32;
    d.c_type = CUMOD_GEMM_BF16;
    ge_refused(&t, &d, CUMOD_ENOTSUP, "FP32 inputs with a C of BF16");
    d = ge_base(a, b, c);
    d.stream = 77;
    ge_refused(&t, &d, CUMOD_ENOENT, "stream 77 is not one of this");
    /* What libcumod checks itself. */
    d = ge_base(a, b, c);
    d.type = (cumod_gemm_type)0;
    ge_refused(&t, &d, CUMOD_EINVAL,
               "cumod_gemm: type 0 is not a cumod_gemm_type");
    d = ge_base(a, b, c);
    d.order = (cumod_gemm_order)5;
    ge_refused(&t, &d, CUMOD_EINVAL, "cumod_gemm: order 5");
    cr_expect_eq(cumod_gemm(t.c, NULL, NULL), CUMOD_EINVAL);

    /* Nothing reached cuBLAS: it was not even loaded. */
    cr_expect_eq(ge_count(&t, "call fn=cublasGemm"), 0);
    cr_expect_eq(ge_count(&t, "cublas-create"), 0);
    th_env_stop(&t);
}

Test(gemm_errors, bounds_hold_to_the_byte_with_strides_and_batches,
     .timeout = 60)
{
    /* Row-major FP16 C of 3 matrices of 4 x 5, ld 7, stride 40, at 2
     * elements in: it spans 2 * 40 + (3 * 7 + 5) = 106 elements, so a
     * buffer of (2 + 106) * 2 bytes holds it exactly. */
    gm_case k = {.type = CUMOD_GEMM_FP16,
                 .m = 4,
                 .n = 5,
                 .k = 6,
                 .batch = 3,
                 .pad_c = 2,
                 .gap_c = 14,
                 .off_c = 2,
                 .alpha = 1};
    cumod_buffer a, b, c, small;
    gm_host h;
    th_env t;

    ge_start(&t, NULL, NULL);
    cr_assert_eq(gm_host_make(&h, &k, 5), 0);
    cr_assert_eq(h.elems[2], 108);
    cr_assert_eq(cumod_buffer_alloc(t.c, h.elems[0] * 2, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, h.elems[1] * 2, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, h.elems[2] * 2, &c), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, h.elems[2] * 2 - 2, &small), CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t.c, a, 0, h.bytes[0], h.elems[0] * 2, 0),
                 CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t.c, b, 0, h.bytes[1], h.elems[1] * 2, 0),
                 CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t.c, c, 0, h.bytes[2], h.elems[2] * 2, 0),
                 CUMOD_OK);
    cumod_gemm_desc d = gm_desc(&h, a, b, c);
    cr_expect_eq(cumod_gemm(t.c, &d, NULL), CUMOD_OK, "exactly fits: %s",
                 cumod_last_detail());
    uint16_t got[108];
    char why[512];
    cr_assert_eq(cumod_buffer_read(t.c, c, 0, got, sizeof(got), 0), CUMOD_OK);
    cr_expect_eq(
        gm_compare(&h, got, gm_tolerance(CUMOD_GEMM_FP16, 0), why, sizeof(why)),
        0, "%s", why);
    /* One element short: refused, naming C and the bytes. */
    d.c.buffer = small;
    ge_refused(&t, &d, CUMOD_EINVAL,
               "C: needs 212 bytes at offset 4 (3 matrices of 4 x 5 FP16, "
               "ld 7, stride 40)");
    /* An offset one element further: the same. */
    d.c.buffer = c;
    d.c.offset += 2;
    ge_refused(&t, &d, CUMOD_EINVAL, "C: needs 212 bytes at offset 6");
    /* The batch one larger: the same. */
    d.c.offset -= 2;
    d.batch = 4;
    d.a.stride = d.b.stride = 0;
    ge_refused(&t, &d, CUMOD_EINVAL, "C: needs 292 bytes at offset 4");
    gm_host_free(&h);
    th_env_stop(&t);
}

Test(gemm_errors, without_cublas_gemms_say_why_and_all_else_works,
     .timeout = 60)
{
    static const char *const extra[] = {"--cublas-library",
                                        "/nonexistent/libcublas.so.13", NULL};
    cumod_buffer a, b, c;
    th_env t;

    ge_start(&t, extra, NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &c), CUMOD_OK);
    cumod_gemm_desc d = ge_base(a, b, c);
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(cumod_gemm(t.c, &d, NULL), CUMOD_ENOTSUP);
        const char *why = cumod_last_detail();
        cr_expect(strstr(why, "cuBLAS could not be loaded") != NULL, "%s", why);
        cr_expect(strstr(why, "/nonexistent/libcublas.so.13") != NULL &&
                      strstr(why, "No such file") != NULL,
                  "what was tried and dlerror(): %s", why);
        cr_expect(strstr(why, "--cublas-library") != NULL, "%s", why);
    }
    /* A batch with a GEMM item: refused, naming the item. */
    cumod_batch *bt;
    int failed = -1;
    cr_assert_eq(cumod_batch_alloc(&bt), CUMOD_OK);
    cr_assert_eq(cumod_batch_memset(bt, c, 0, 64, 0), CUMOD_OK);
    cr_assert_eq(cumod_batch_gemm(bt, &d), CUMOD_OK);
    cr_expect_eq(cumod_batch_submit(t.c, bt, 0, NULL, &failed), CUMOD_ENOTSUP);
    cr_expect_eq(failed, 1, "%s", cumod_last_detail());
    cumod_batch_free(bt);
    /* Everything else is served. */
    cr_expect_eq(ge_empty_launch(&t), CUMOD_OK, "%s", cumod_last_detail());
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, "CUMOD-BLAS-FAIL") != NULL, "%s", log);
    free(log);
    th_env_stop(&t);
}

Test(gemm_errors, a_cublas_too_old_is_refused_with_its_version, .timeout = 60)
{
    static const char *const env[] = {"CUMOD_FAKE_CUBLAS_VERSION=11.8.89",
                                      NULL};
    cumod_buffer a, b, c;
    th_env t;

    ge_start(&t, NULL, env);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &c), CUMOD_OK);
    cumod_gemm_desc d = ge_base(a, b, c);
    cr_expect_eq(cumod_gemm(t.c, &d, NULL), CUMOD_ENOTSUP);
    cr_expect(strstr(cumod_last_detail(), "is cuBLAS 11.8.89, older than") !=
                      NULL &&
                  strstr(cumod_last_detail(), "12.0 or newer") != NULL,
              "%s", cumod_last_detail());
    cr_expect_eq(ge_count(&t, "cublas-create"), 0, "no handle made");
    th_env_stop(&t);
}

Test(gemm_errors, cublas_errors_come_back_by_name, .timeout = 60)
{
    static const char *const env[] = {
        "CUMOD_FAKE_CUBLAS_STATUS=CUBLAS_STATUS_EXECUTION_FAILED", NULL};
    cumod_buffer a, b, c;
    th_env t;

    ge_start(&t, NULL, env);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &c), CUMOD_OK);
    cumod_gemm_desc d = ge_base(a, b, c);
    d.type = CUMOD_GEMM_BF16;
    d.c_type = CUMOD_GEMM_FP32;
    cr_expect_eq(cumod_gemm(t.c, &d, NULL), CUMOD_EDRIVER);
    cr_expect(strstr(cumod_last_detail(),
                     "cublasGemmEx (BF16 to FP32, m 16, n 16, k 16, batch 1) "
                     "failed: CUBLAS_STATUS_EXECUTION_FAILED (the GPU program "
                     "failed to execute)") != NULL,
              "%s", cumod_last_detail());
    /* Answered when enqueued: the ticket says it. */
    cumod_ticket tk = 0;
    int rv = cumod_gemm(t.c, &d, &tk);
    if (rv == CUMOD_OK)
        rv = cumod_wait(t.c, tk);
    cr_expect_eq(rv, CUMOD_EDRIVER, "%s", cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "CUBLAS_STATUS_EXECUTION_FAILED"),
              "%s", cumod_last_detail());
    /* The executor serves on: the session's stream still works. */
    cr_expect_eq(ge_empty_launch(&t), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(ge_count(&t, "cublas-create"), 1);
    th_env_stop(&t);
}

Test(gemm_errors, a_faulting_gemm_costs_its_work_and_a_new_handle_serves,
     .timeout = 120)
{
    static const char *const env[] = {"CUMOD_FAKE_FAULT=launch:scale", NULL};
    gm_case k = {.type = CUMOD_GEMM_FP32, .m = 6, .n = 5, .k = 4, .alpha = 1};
    char why[1024];
    th_env t;

    ge_start(&t, NULL, env);
    cr_expect_eq(
        gm_run(t.c, &k, 1, 0, gm_tolerance(k.type, 0), why, sizeof(why)), 0,
        "%s", why);
    /* A kernel faults: the executor and its cuBLAS handle go. */
    cumod_buffer x;
    cr_assert_eq(cumod_buffer_alloc(t.c, 64, &x), CUMOD_OK);
    cumod_arg args[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2),
                        cumod_arg_i32(4)};
    cumod_launch_params p = {.kernel = "scale:scale",
                             .grid = {1, 1, 1},
                             .block = {4, 1, 1},
                             .nargs = 3,
                             .args = args};
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_ECTXLOST, "%s",
                 cumod_last_detail());
    /* The next executor makes its own, at its first GEMM. */
    long bad = -1;
    for (int i = 0; i < 100 && bad != 0; i++) {
        bad = gm_run(t.c, &k, 2, 0, gm_tolerance(k.type, 0), why, sizeof(why));
        if (bad != 0)
            th_sleep_ms(50);
    }
    cr_expect_eq(bad, 0, "%s", why);
    cr_expect_eq(ge_count(&t, "cublas-create"), 2);
    th_env_stop(&t);
}

Test(gemm_errors, a_gemm_that_faults_is_lost_with_the_context, .timeout = 120)
{
    static const char *const env[] = {"CUMOD_FAKE_FAULT=launch:cublasGemmEx",
                                      NULL};
    gm_case k = {.type = CUMOD_GEMM_FP16, .m = 6, .n = 5, .k = 4, .alpha = 1};
    char why[1024];
    th_env t;

    ge_start(&t, NULL, env);
    long bad = gm_run(t.c, &k, 1, 0, gm_tolerance(k.type, 0), why, sizeof(why));
    cr_expect_eq(bad, -1);
    cr_expect(strstr(why, "CUDA_ERROR_ILLEGAL_ADDRESS") != NULL, "%s", why);
    /* The executor comes back and serves launches. */
    int rv = -1;
    for (int i = 0; i < 100 && rv != CUMOD_OK; i++)
        if ((rv = ge_empty_launch(&t)) != CUMOD_OK)
            th_sleep_ms(50);
    cr_expect_eq(rv, CUMOD_OK, "%s", cumod_last_detail());
    th_env_stop(&t);
}

Test(gemm_errors, a_hung_gemm_is_a_hang_past_its_deadline, .timeout = 120)
{
    cumod_buffer a, b, c;
    th_env t;

    ge_start(&t, NULL, NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &c), CUMOD_OK);
    cr_assert_eq(th_write_file(t.fake_hold, "cublasGemmEx\n"), 0);
    cumod_gemm_desc d = ge_base(a, b, c);
    d.deadline_ms = 300;
    double t0 = th_now_ms();
    cr_expect_eq(cumod_gemm(t.c, &d, NULL), CUMOD_ETIMEDOUT, "%s",
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(),
                     "the GEMM ran past its deadline of 300 ms") != NULL,
              "%s", cumod_last_detail());
    cr_expect(th_now_ms() - t0 < 5000, "answered near its deadline");
    unlink(t.fake_hold);
    /* The buffers went with the context; new ones work on a new handle. */
    cr_expect_eq(cumod_gemm(t.c, &d, NULL), CUMOD_ECTXLOST);
    gm_case k = {.type = CUMOD_GEMM_BF16, .m = 3, .n = 3, .k = 3, .alpha = 1};
    char why[1024];
    long bad = -1;
    for (int i = 0; i < 100 && bad != 0; i++)
        if ((bad = gm_run(t.c, &k, 3, 0, gm_tolerance(k.type, 0), why,
                          sizeof(why))) != 0)
            th_sleep_ms(50);
    cr_expect_eq(bad, 0, "%s", why);
    th_env_stop(&t);
}

/* Each stream's cuBLAS workspace (32 MiB on the fake's sm_90) counts
 * against --session-memory-limit like a buffer, from its first GEMM until
 * the stream goes: a session cannot hold 32 MiB per stream past its
 * limit. */
Test(gemm_errors, a_streams_workspace_counts_against_the_memory_limit,
     .timeout = 60)
{
    th_env t;
    ge_start(&t, (const char *const[]){"--session-memory-limit", "40M", NULL},
             NULL);
    cumod_buffer a, b, c, big;
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &c), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 16 << 20, &big), CUMOD_OK);
    cumod_gemm_desc d = ge_base(a, b, c);
    ge_refused(&t, &d, CUMOD_EDEVMEM,
               "a GEMM on stream 0 needs the stream's 32 MiB cuBLAS "
               "workspace");
    cr_assert_eq(cumod_buffer_free(t.c, big), CUMOD_OK);
    cumod_stream s;
    cr_assert_eq(cumod_stream_create(t.c, &s), CUMOD_OK);
    d.stream = s;
    cr_expect_eq(cumod_gemm(t.c, &d, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_gemm(t.c, &d, NULL), CUMOD_OK, "charged once");
    /* Buffers meet the charge; a second stream needs a second one. */
    cr_expect_eq(cumod_buffer_alloc(t.c, 16 << 20, &big), CUMOD_EDEVMEM);
    d.stream = 0;
    ge_refused(&t, &d, CUMOD_EDEVMEM, "needs the stream's 32 MiB");
    /* The charge goes with its stream. */
    cr_assert_eq(cumod_stream_destroy(t.c, s), CUMOD_OK);
    cr_expect_eq(cumod_gemm(t.c, &d, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    th_env_stop(&t);
}

/* A GEMM in a batch is charged to the batch's stream: the one its
 * workspace is made for in the executor. */
Test(gemm_errors, a_batch_gemm_charges_the_batchs_stream, .timeout = 60)
{
    th_env t;
    ge_start(&t, (const char *const[]){"--session-memory-limit", "40M", NULL},
             NULL);
    cumod_buffer a, b, c;
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &c), CUMOD_OK);
    cumod_stream s1, s2;
    cr_assert_eq(cumod_stream_create(t.c, &s1), CUMOD_OK);
    cr_assert_eq(cumod_stream_create(t.c, &s2), CUMOD_OK);
    cumod_gemm_desc d = ge_base(a, b, c);
    cumod_batch *bt;
    cr_assert_eq(cumod_batch_alloc(&bt), CUMOD_OK);
    cr_assert_eq(cumod_batch_gemm(bt, &d), CUMOD_OK);
    cr_expect_eq(cumod_batch_submit(t.c, bt, s1, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    /* s1 holds its workspace: a second stream's is over the limit, in a
     * batch as in a GEMM of its own. */
    int failed = 0;
    cr_expect_eq(cumod_batch_submit(t.c, bt, s2, NULL, &failed), CUMOD_EDEVMEM);
    cr_expect(strstr(cumod_last_detail(), "needs the stream's 32 MiB") != NULL,
              "%s", cumod_last_detail());
    d.stream = s2;
    ge_refused(&t, &d, CUMOD_EDEVMEM, "a GEMM on stream");
    /* s1's charge goes with it. */
    cr_assert_eq(cumod_stream_destroy(t.c, s1), CUMOD_OK);
    cr_expect_eq(cumod_batch_submit(t.c, bt, s2, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_batch_free(bt);
    th_env_stop(&t);
}

/* A GEMM that hangs in a batch beside a launch: the hang is no kernel's
 * alone, so no module is quarantined for it. */
Test(gemm_errors, a_hung_gemm_in_a_batch_blames_no_kernel, .timeout = 120)
{
    th_env t;
    ge_start(&t, NULL, NULL);
    cumod_buffer a, b, c;
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &c), CUMOD_OK);
    cr_assert_eq(ge_empty_launch(&t), CUMOD_OK);
    cumod_batch *bt;
    cr_assert_eq(cumod_batch_alloc(&bt), CUMOD_OK);
    cumod_launch_params e = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cr_assert_eq(cumod_batch_launch(bt, &e), CUMOD_OK);
    cumod_gemm_desc d = ge_base(a, b, c);
    cr_assert_eq(cumod_batch_gemm(bt, &d), CUMOD_OK);
    cumod_batch_set_deadline(bt, 300);
    cr_assert_eq(th_write_file(t.fake_hold, "cublasGemmEx\n"), 0);
    cr_expect_eq(cumod_batch_submit(t.c, bt, 0, NULL, NULL), CUMOD_ETIMEDOUT,
                 "%s", cumod_last_detail());
    unlink(t.fake_hold);
    cumod_batch_free(bt);
    cumod_module_detail *md = NULL;
    cr_assert_eq(cumod_module_show(t.c, "empty", &md), CUMOD_OK);
    cr_expect(!md->module.quarantined && md->module.quarantined_sha256[0] == 0,
              "empty is not quarantined for a GEMM's hang: %s",
              md->module.quarantine_reason ? md->module.quarantine_reason : "");
    cumod_module_detail_free(md);
    double end = th_now_ms() + 20000;
    int rv;
    while ((rv = ge_empty_launch(&t)) != CUMOD_OK && th_now_ms() < end)
        th_sleep_ms(50);
    cr_expect_eq(rv, CUMOD_OK, "empty launches again: %s", cumod_last_detail());
    th_env_stop(&t);
}
