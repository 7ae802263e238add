/* SPDX-License-Identifier: MIT */
/*
 * GEMM through cumodd on the fake driver and the fake cuBLAS
 * (tests/fakecuda/libfakecublas.so), which computes small GEMMs on the
 * fake's host-backed memory in stream order: every type, both orders,
 * transposes, alpha and beta, leading dimensions with padding, offsets,
 * strided batches, GEMMs inside a batch between writes and launches, work
 * held in flight, and several clients at once each checking its own
 * numbers. The errors are gemm_errors_test.c's.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"
#include "gemm_util.h"

TH_SUITE_DRIVER(0);

static void
gt_start(th_env *t)
{
    static const char *const kernels[] = {"vadd", "empty", NULL};
    th_env_init(t, kernels);
    th_env_start(t, NULL, NULL);
}

static int
gt_calls(th_env *t, const char *name)
{
    char needle[96];
    char *log = th_read_file(t->fake_log);
    snprintf(needle, sizeof(needle), "call fn=%s ", name);
    int n = log ? th_count(log, needle) : 0;
    free(log);
    return n;
}

static void
gt_expect_case(cumod_client *c, const gm_case *k, unsigned seed)
{
    char why[1024], name[200];
    cumod_gemm_type ct = k->c_type ? k->c_type : k->type;
    long bad = gm_run(c, k, seed, 0, gm_tolerance(ct, 0), why, sizeof(why));
    gm_case_name(k, name, sizeof(name));
    cr_expect_eq(bad, 0, "%s: %ld wrong: %s", name, bad, why);
}

Test(gemm, every_type_order_and_transpose_computes_right, .timeout = 120)
{
    static const cumod_gemm_type types[] = {CUMOD_GEMM_FP32, CUMOD_GEMM_FP64,
                                            CUMOD_GEMM_FP16, CUMOD_GEMM_BF16};
    th_env t;
    unsigned seed = 1;
    gt_start(&t);
    for (int ti = 0; ti < 4; ti++)
        for (int order = 0; order < 2; order++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    /* Not square, padded leading dimensions, operands
                     * off the start of their buffers. */
                    gm_case k = {.type = types[ti],
                                 .order = (cumod_gemm_order)order,
                                 .transa = ta,
                                 .transb = tb,
                                 .m = 5,
                                 .n = 7,
                                 .k = 3,
                                 .pad_a = 2,
                                 .pad_c = 1,
                                 .off_b = 3,
                                 .off_c = 4,
                                 .alpha = 1.5,
                                 .beta = -0.5};
                    gt_expect_case(t.c, &k, seed++);
                }
    /* FP32 results from FP16 and BF16 inputs; alpha only (beta 0: C's old
     * contents are not read). */
    gm_case k = {.type = CUMOD_GEMM_FP16,
                 .c_type = CUMOD_GEMM_FP32,
                 .m = 9,
                 .n = 4,
                 .k = 11,
                 .alpha = 2};
    gt_expect_case(t.c, &k, seed++);
    k.type = CUMOD_GEMM_BF16;
    k.order = CUMOD_GEMM_COL_MAJOR;
    k.transa = 1;
    gt_expect_case(t.c, &k, seed++);
    cr_expect_eq(gt_calls(&t, "cublasGemmEx"), 34, "one cuBLAS call each");
    th_env_stop(&t);
}

Test(gemm, strided_batches_compute_each_matrix, .timeout = 120)
{
    th_env t;
    gt_start(&t);
    gm_case k = {.type = CUMOD_GEMM_FP32,
                 .m = 4,
                 .n = 3,
                 .k = 5,
                 .batch = 4,
                 .pad_a = 1,
                 .gap_a = 3,
                 .gap_c = 2,
                 .off_c = 2,
                 .alpha = 1,
                 .beta = 1};
    gt_expect_case(t.c, &k, 11);
    /* B shared by the whole batch (stride 0), column-major, transposed. */
    k.type = CUMOD_GEMM_BF16;
    k.order = CUMOD_GEMM_COL_MAJOR;
    k.share_b = 1;
    k.transa = 1;
    k.beta = 0.25;
    gt_expect_case(t.c, &k, 12);
    k.type = CUMOD_GEMM_FP64;
    k.share_b = 0;
    k.share_a = 1;
    k.transb = 1;
    k.batch = 7;
    gt_expect_case(t.c, &k, 13);
    k.type = CUMOD_GEMM_FP16;
    k.c_type = CUMOD_GEMM_FP32;
    gt_expect_case(t.c, &k, 14);
    cr_expect_eq(gt_calls(&t, "cublasGemmStridedBatchedEx"), 4);
    cr_expect_eq(gt_calls(&t, "cublasGemmEx"), 0,
                 "a batch is one strided call");
    th_env_stop(&t);
}

/* An m x n FP32 matrix of ones times a column of v: each row is sum(v). */
static void
gt_ones_desc(cumod_gemm_desc *d, cumod_buffer a, cumod_buffer b, cumod_buffer c,
             size_t m, size_t k)
{
    *d = (cumod_gemm_desc){.type = CUMOD_GEMM_FP32,
                           .m = m,
                           .n = 1,
                           .k = k,
                           .alpha = 1,
                           .a = {a, 0, 0, 0},
                           .b = {b, 0, 0, 0},
                           .c = {c, 0, 0, 0}};
}

Test(gemm, runs_in_stream_order_inside_a_batch, .timeout = 60)
{
    enum { M = 8, K = 16 };
    float ones[M * K], v1[K], v2[K], c1[M], c2[M];
    cumod_buffer a, b, c, d2;
    cumod_batch *bt;
    cumod_gemm_desc d;
    int failed = 0;
    th_env t;

    gt_start(&t);
    for (int i = 0; i < M * K; i++)
        ones[i] = 1;
    for (int i = 0; i < K; i++) {
        v1[i] = (float)i;     /* sum 120 */
        v2[i] = (float)i * 2; /* sum 240 */
    }
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(ones), &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(v1), &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(c1), &c), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(c2), &d2), CUMOD_OK);
    cr_assert_eq(cumod_batch_alloc(&bt), CUMOD_OK);
    /* write A and B, GEMM into c, write B again, GEMM into d2, a launch:
     * each GEMM sees the B written just before it. */
    cr_assert_eq(cumod_batch_write(bt, a, 0, ones, sizeof(ones)), CUMOD_OK);
    cr_assert_eq(cumod_batch_write(bt, b, 0, v1, sizeof(v1)), CUMOD_OK);
    gt_ones_desc(&d, a, b, c, M, K);
    cr_assert_eq(cumod_batch_gemm(bt, &d), CUMOD_OK, "%s", cumod_last_detail());
    cr_assert_eq(cumod_batch_write(bt, b, 0, v2, sizeof(v2)), CUMOD_OK);
    d.c.buffer = d2;
    cr_assert_eq(cumod_batch_gemm(bt, &d), CUMOD_OK);
    cumod_launch_params e = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cr_assert_eq(cumod_batch_launch(bt, &e), CUMOD_OK);
    cr_assert_eq(cumod_batch_submit(t.c, bt, 0, NULL, &failed), CUMOD_OK,
                 "item %d: %s", failed, cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t.c, c, 0, c1, sizeof(c1), 0), CUMOD_OK);
    cr_assert_eq(cumod_buffer_read(t.c, d2, 0, c2, sizeof(c2), 0), CUMOD_OK);
    for (int i = 0; i < M; i++) {
        cr_expect_eq(c1[i], 120.0f, "first GEMM row %d: %g", i, c1[i]);
        cr_expect_eq(c2[i], 240.0f, "second GEMM row %d: %g", i, c2[i]);
    }
    /* The fake saw them in the batch's order: GEMM, GEMM, then the
     * launch. */
    char *log = th_read_file(t.fake_log);
    char *g1 = strstr(log, "call fn=cublasGemmEx");
    char *g2 = g1 ? strstr(g1 + 1, "call fn=cublasGemmEx") : NULL;
    char *l = g2 ? strstr(g2, "launch fn=empty") : NULL;
    cr_expect(l != NULL, "GEMM, GEMM, launch in order:\n%s", log);
    free(log);

    /* A bad GEMM in a batch: named by its item, nothing of the batch runs. */
    int before = gt_calls(&t, "cublasGemmEx");
    cumod_batch_reset(bt);
    cr_assert_eq(cumod_batch_write(bt, b, 0, v1, sizeof(v1)), CUMOD_OK);
    cr_assert_eq(cumod_batch_gemm(bt, &d), CUMOD_OK);
    d.a.ld = 4; /* row-major A is M x K: ld 4 < 16 columns */
    cr_assert_eq(cumod_batch_gemm(bt, &d), CUMOD_OK);
    cr_expect_eq(cumod_batch_submit(t.c, bt, 0, NULL, &failed), CUMOD_EINVAL);
    cr_expect_eq(failed, 2);
    cr_expect(strstr(cumod_last_detail(), "item 2: A: ld 4 < 16 columns") !=
                  NULL,
              "%s", cumod_last_detail());
    cr_expect_eq(gt_calls(&t, "cublasGemmEx"), before,
                 "a refused batch runs nothing");
    cumod_batch_free(bt);
    th_env_stop(&t);
}

Test(gemm, held_work_keeps_its_stream_order_and_others_go_on, .timeout = 60)
{
    enum { M = 4, K = 4 };
    float ones[M * K], v[K], out[M];
    cumod_buffer a, b, c;
    cumod_stream s;
    cumod_ticket tk = 0;
    cumod_gemm_desc d;
    th_env t;

    gt_start(&t);
    for (int i = 0; i < M * K; i++)
        ones[i] = 1;
    for (int i = 0; i < K; i++)
        v[i] = 1;
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(ones), &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(v), &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(out), &c), CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t.c, a, 0, ones, sizeof(ones), 0),
                 CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t.c, b, 0, v, sizeof(v), 0), CUMOD_OK);
    for (int i = 0; i < M; i++)
        out[i] = 7;
    cr_assert_eq(cumod_buffer_write(t.c, c, 0, out, sizeof(out), 0), CUMOD_OK);
    cr_assert_eq(cumod_stream_create(t.c, &s), CUMOD_OK);
    /* empty resident first: a module load waits for the work running when
     * it is asked for (docs/kernels.md "Modules and hot reload"). */
    cumod_launch_params e = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cr_assert_eq(cumod_launch(t.c, &e, NULL, NULL), CUMOD_OK);
    /* GEMMs are held by their function's name, as kernels are. */
    cr_assert_eq(th_write_file(t.fake_hold, "cublasGemmEx\n"), 0);
    gt_ones_desc(&d, a, b, c, M, K);
    d.stream = s;
    cr_assert_eq(cumod_gemm(t.c, &d, &tk), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_neq(tk, 0, "answered when enqueued, with a ticket");
    /* Behind it on its stream, a memset of C waits; another stream's
     * launch does not. */
    cumod_ticket after = 0;
    cr_assert_eq(cumod_buffer_memset(t.c, c, 0, sizeof(out), 0, s, &after),
                 CUMOD_OK);
    cr_expect_eq(cumod_launch(t.c, &e, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    /* Read on the default stream meanwhile: neither the GEMM nor the
     * memset behind it has touched C. */
    cr_assert_eq(cumod_buffer_read(t.c, c, 0, out, sizeof(out), 0), CUMOD_OK);
    for (int i = 0; i < M; i++)
        cr_expect_eq(out[i], 7.0f, "C untouched while the GEMM is held");
    unlink(t.fake_hold);
    cr_assert_eq(cumod_wait(t.c, tk), CUMOD_OK, "%s", cumod_last_detail());
    cr_assert_eq(cumod_wait(t.c, after), CUMOD_OK);
    cr_assert_eq(cumod_buffer_read(t.c, c, 0, out, sizeof(out), s), CUMOD_OK);
    for (int i = 0; i < M; i++)
        cr_expect_eq(out[i], 0.0f, "the memset after the GEMM came last");
    th_env_stop(&t);
}

typedef struct gt_worker {
    const char *url;
    int id;
    int runs, wrong;
    char why[1024];
} gt_worker;

static void *
gt_work(void *arg)
{
    static const cumod_gemm_type types[] = {CUMOD_GEMM_FP32, CUMOD_GEMM_FP64,
                                            CUMOD_GEMM_FP16, CUMOD_GEMM_BF16};
    gt_worker *w = arg;
    cumod_client *c;
    cumod_stream s = 0;

    if (cumod_open(w->url, 20000, &c) != CUMOD_OK) {
        snprintf(w->why, sizeof(w->why), "open: %s", cumod_last_detail());
        w->wrong = -1;
        return NULL;
    }
    if (w->id % 2 == 1 && cumod_stream_create(c, &s) != CUMOD_OK)
        s = 0;
    for (int i = 0; i < 12 && w->wrong == 0; i++) {
        gm_case k = {.type = types[(w->id + i) % 4],
                     .order = (cumod_gemm_order)(i % 2),
                     .transa = w->id % 2,
                     .transb = i % 3 == 0,
                     .m = 3 + (size_t)w->id,
                     .n = 2 + (size_t)(i % 5),
                     .k = 4 + (size_t)i,
                     .batch = i % 4 == 0 ? 3 : 1,
                     .alpha = 1,
                     .beta = w->id % 3 == 0 ? 0.5 : 0};
        /* Each client's own numbers: the seed is its id and the round. */
        long bad = gm_run(c, &k, (unsigned)(w->id * 1000 + i), s,
                          gm_tolerance(k.type, 0), w->why, sizeof(w->why));
        w->runs++;
        if (bad != 0)
            w->wrong = (int)bad;
    }
    cumod_close(c);
    return NULL;
}

Test(gemm, several_clients_at_once_each_get_their_own_results, .timeout = 180)
{
    enum { N = 6 };
    gt_worker w[N];
    pthread_t th[N];
    th_env t;

    gt_start(&t);
    for (int i = 0; i < N; i++) {
        w[i] = (gt_worker){.url = t.d.url, .id = i};
        cr_assert_eq(pthread_create(&th[i], NULL, gt_work, &w[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        cr_expect_eq(w[i].wrong, 0, "client %d: %s", i, w[i].why);
        cr_expect_eq(w[i].runs, 12, "client %d ran %d", i, w[i].runs);
    }
    /* One cuBLAS handle for all of them, made once. */
    char *log = th_read_file(t.fake_log);
    cr_expect_eq(th_count(log, "cublas-create"), 1, "%s", log);
    free(log);
    th_env_stop(&t);
}

Test(gemm, each_stream_has_its_own_workspace_freed_with_it, .timeout = 60)
{
    gm_case k = {.type = CUMOD_GEMM_FP32, .m = 4, .n = 4, .k = 4, .alpha = 1};
    cumod_stream s1, s2;
    char why[1024];
    th_env t;

    gt_start(&t);
    cr_assert_eq(cumod_stream_create(t.c, &s1), CUMOD_OK);
    cr_assert_eq(cumod_stream_create(t.c, &s2), CUMOD_OK);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(gm_run(t.c, &k, 1, s1, 1e-6, why, sizeof(why)), 0, "%s",
                     why);
        cr_assert_eq(gm_run(t.c, &k, 2, s2, 1e-6, why, sizeof(why)), 0, "%s",
                     why);
    }
    /* The fake is an sm_90 (Hopper): 32 MiB each, one per stream, made on
     * that stream at its first GEMM. */
    char *log = th_read_file(t.fake_log);
    cr_expect_eq(th_count(log, "bytes=33554432"), 2, "%s", log);
    free(log);
    cr_assert_eq(cumod_stream_destroy(t.c, s1), CUMOD_OK);
    cr_assert_eq(cumod_stream_synchronize(t.c, 0), CUMOD_OK);
    log = th_read_file(t.fake_log);
    char *at = strstr(log, "bytes=33554432");
    char ptr[64] = "";
    /* "alloc ptr=0x... bytes=33554432": the first one's pointer. */
    char *p = at;
    while (p > log && strncmp(p, "ptr=", 4) != 0)
        p--;
    sscanf(p, "ptr=%63s", ptr);
    char want[96];
    snprintf(want, sizeof(want), "free-queued ptr=%s", ptr);
    cr_expect(strstr(log, want) != NULL, "%s freed with its stream:\n%s", ptr,
              log);
    free(log);
    th_env_stop(&t);
}

/* cumodctl gemm: a type and shape run once and then timed (what an
 * operator runs at start to have cuBLAS load a shape's kernels), its
 * options, and its errors: its own before it connects, the daemon's after. */
Test(gemm, cumodctl_gemm_runs_a_shape_and_says_what_is_wrong, .timeout = 120)
{
    th_env t;
    char *out = NULL, *err = NULL;
    gt_start(&t);
    int rv = th_ctl(&t.d,
                    (const char *const[]){"gemm", "fp32", "64", "32", "16",
                                          "--repeat", "3", NULL},
                    &out, &err);
    cr_assert_eq(rv, 0, "%s", err);
    cr_expect(strstr(out, "gemm fp32 64 x 32 x 16: the first ") != NULL, "%s",
              out);
    cr_expect(strstr(out, " over 3 = ") != NULL, "%s", out);
    cr_expect_eq(gt_calls(&t, "cublasGemmEx"), 4, "once, then 3 timed");
    cr_log_info("%s", out);
    free(out);
    free(err);

    rv = th_ctl(&t.d,
                (const char *const[]){"gemm", "bf16", "8", "8", "8", "--batch",
                                      "3", "--transa", "--c-type", "fp32",
                                      "--repeat", "1", "--json", NULL},
                &out, &err);
    cr_assert_eq(rv, 0, "%s", err);
    cr_expect(strstr(out, "\"batch\": 3") != NULL, "%s", out);
    cr_expect(strstr(out, "\"transa\": true") != NULL, "%s", out);
    cr_expect(strstr(out, "\"tflops\": ") != NULL, "%s", out);
    cr_expect_eq(gt_calls(&t, "cublasGemmStridedBatchedEx"), 2);
    cr_log_info("%s", out);
    free(out);
    free(err);

    static const struct {
        const char *args[8];
        int rv;
        const char *err;
    } bad[] = {
        {{"gemm", "fp8", "1", "1", "1"}, 2, "TYPE is fp32, fp64, fp16 or bf16"},
        {{"gemm", "fp32", "0", "1", "1"}, 2, "M, N and K are from 1"},
        {{"gemm", "fp32", "1", "1"}, 2, "give TYPE M N K"},
        {{"gemm", "fp32", "1", "1", "1", "--batch", "x"}, 2, "--batch wants"},
        {{"gemm", "fp32", "1", "1", "1", "--bogus"}, 2, "unknown option"},
        /* The daemon's check: no FP32 results from FP64 inputs. */
        {{"gemm", "fp64", "4", "4", "4", "--c-type", "fp32"}, 1, "FP64"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rv = th_ctl(&t.d, bad[i].args, &out, &err);
        cr_expect_eq(rv, bad[i].rv, "%s %s: exit %d: %s", bad[i].args[1],
                     bad[i].args[2], rv, err);
        cr_expect(strstr(err, bad[i].err) != NULL, "want '%s' in: %s",
                  bad[i].err, err);
        free(out);
        free(err);
    }
    th_env_stop(&t);
}
