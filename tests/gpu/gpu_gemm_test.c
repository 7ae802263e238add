/* SPDX-License-Identifier: MIT */
/*
 * GEMM on a real GPU through cumodd's cuBLAS: every type against a host
 * reference in double within its tolerance (tests/gemm_util.c), both
 * orders and transposes, strided batches, a 512^3 BF16 GEMM, a GEMM
 * between kernels in one batch, and clients at once. Each test skips with a
 * message where there is no GPU; where cumodd finds no cuBLAS it fails
 * with cumodd's sentence (a GPU machine for cumod should have one).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/cumod.h"
#include "fixture.h"
#include "gemm_util.h"

TH_SUITE_DRIVER(1);

static const cumod_gemm_type gg_types[] = {CUMOD_GEMM_FP32, CUMOD_GEMM_FP64,
                                           CUMOD_GEMM_FP16, CUMOD_GEMM_BF16};

static void
gg_start(th_env *t)
{
    static const char *const kernels[] = {"vadd", "scale", NULL};
    th_env_init(t, kernels);
    th_env_start(t, NULL, NULL);
}

static void
gg_expect(cumod_client *c, const gm_case *k, unsigned seed)
{
    char why[1024], name[200];
    cumod_gemm_type ct = k->c_type ? k->c_type : k->type;
    long bad = gm_run(c, k, seed, 0, gm_tolerance(ct, 1), why, sizeof(why));
    gm_case_name(k, name, sizeof(name));
    cr_expect_eq(bad, 0, "%s: %ld wrong: %s", name, bad, why);
    if (bad < 0)
        printf("gpu_gemm: %s: %s\n", name, why);
}

Test(gpu_gemm, every_type_matches_the_host_reference, .timeout = 300)
{
    th_env t;
    unsigned seed = 1;
    gg_start(&t);
    for (int ti = 0; ti < 4; ti++)
        for (int order = 0; order < 2; order++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    /* Sizes that fill no tile evenly, padded ld, offsets. */
                    gm_case k = {.type = gg_types[ti],
                                 .order = (cumod_gemm_order)order,
                                 .transa = ta,
                                 .transb = tb,
                                 .m = 67,
                                 .n = 45,
                                 .k = 129,
                                 .pad_a = 3,
                                 .pad_b = 1,
                                 .pad_c = 5,
                                 .off_a = 8,
                                 .off_c = 16,
                                 .alpha = 1.5,
                                 .beta = -0.5};
                    gg_expect(t.c, &k, seed++);
                }
    gm_case k = {.type = CUMOD_GEMM_BF16,
                 .c_type = CUMOD_GEMM_FP32,
                 .m = 128,
                 .n = 96,
                 .k = 200,
                 .alpha = 1};
    gg_expect(t.c, &k, seed++);
    k.type = CUMOD_GEMM_FP16;
    k.order = CUMOD_GEMM_COL_MAJOR;
    k.transb = 1;
    gg_expect(t.c, &k, seed++);
    th_env_stop(&t);
}

Test(gpu_gemm, strided_batches_and_a_large_bf16_gemm, .timeout = 300)
{
    th_env t;
    gg_start(&t);
    for (int ti = 0; ti < 4; ti++) {
        gm_case k = {.type = gg_types[ti],
                     .m = 33,
                     .n = 70,
                     .k = 48,
                     .batch = 5,
                     .gap_a = 7,
                     .gap_c = 3,
                     .share_b = ti % 2,
                     .alpha = 0.5,
                     .beta = 2};
        gg_expect(t.c, &k, 100u + (unsigned)ti);
    }
    gm_case big = {
        .type = CUMOD_GEMM_BF16, .m = 512, .n = 512, .k = 512, .alpha = 1};
    gg_expect(t.c, &big, 200);
    th_env_stop(&t);
}

Test(gpu_gemm, a_gemm_between_kernels_in_one_batch, .timeout = 120)
{
    /* C = (x + y) * B in one batch: vadd, the GEMM, then scale C by 2. */
    enum { M = 64, K = 32, N = 48 };
    static float x[M * K], y[M * K], b[K * N], c[M * N];
    cumod_buffer dx, dy, da, db, dc;
    th_env t;
    gg_start(&t);
    for (int i = 0; i < M * K; i++) {
        x[i] = (float)(i % 7) - 3;
        y[i] = (float)(i % 5) * 0.5f;
    }
    for (int i = 0; i < K * N; i++)
        b[i] = (float)(i % 9) - 4;
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(x), &dx), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(y), &dy), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(x), &da), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(b), &db), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(c), &dc), CUMOD_OK);
    cumod_batch *bt;
    cr_assert_eq(cumod_batch_alloc(&bt), CUMOD_OK);
    cr_assert_eq(cumod_batch_write(bt, dx, 0, x, sizeof(x)), CUMOD_OK);
    cr_assert_eq(cumod_batch_write(bt, dy, 0, y, sizeof(y)), CUMOD_OK);
    cr_assert_eq(cumod_batch_write(bt, db, 0, b, sizeof(b)), CUMOD_OK);
    cumod_arg va[] = {cumod_arg_buffer(dx, 0), cumod_arg_buffer(dy, 0),
                      cumod_arg_buffer(da, 0), cumod_arg_i32(M * K)};
    cumod_launch_params vadd = {.kernel = "vadd:vadd",
                                .grid = {(M * K + 255) / 256, 1, 1},
                                .block = {256, 1, 1},
                                .nargs = 4,
                                .args = va};
    cr_assert_eq(cumod_batch_launch(bt, &vadd), CUMOD_OK);
    cumod_gemm_desc d = {.type = CUMOD_GEMM_FP32,
                         .m = M,
                         .n = N,
                         .k = K,
                         .alpha = 1,
                         .a = {da, 0, 0, 0},
                         .b = {db, 0, 0, 0},
                         .c = {dc, 0, 0, 0}};
    cr_assert_eq(cumod_batch_gemm(bt, &d), CUMOD_OK);
    cumod_arg sa[] = {cumod_arg_buffer(dc, 0), cumod_arg_f32(2),
                      cumod_arg_i32(M * N)};
    cumod_launch_params scale = {.kernel = "scale:scale",
                                 .grid = {(M * N + 255) / 256, 1, 1},
                                 .block = {256, 1, 1},
                                 .nargs = 3,
                                 .args = sa};
    cr_assert_eq(cumod_batch_launch(bt, &scale), CUMOD_OK);
    int failed = -1;
    cr_assert_eq(cumod_batch_submit(t.c, bt, 0, NULL, &failed), CUMOD_OK,
                 "item %d: %s", failed, cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t.c, dc, 0, c, sizeof(c), 0), CUMOD_OK);
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = 0, mag = 0;
            for (int p = 0; p < K; p++) {
                double a = (double)x[i * K + p] + y[i * K + p];
                want += a * b[p * N + j];
                mag += fabs(a * b[p * N + j]);
            }
            want *= 2;
            bad += fabs(c[i * N + j] - want) > 1e-4 * (2 * mag) + 1e-30;
        }
    cr_expect_eq(bad, 0, "%d of %d wrong", bad, M * N);
    cumod_batch_free(bt);
    th_env_stop(&t);
}

typedef struct gg_worker {
    const char *url;
    int id, wrong;
    char why[1024];
} gg_worker;

static void *
gg_work(void *arg)
{
    gg_worker *w = arg;
    cumod_client *c;
    cumod_stream s = 0;
    if (cumod_open(w->url, 30000, &c) != CUMOD_OK) {
        w->wrong = -1;
        snprintf(w->why, sizeof(w->why), "%s", cumod_last_detail());
        return NULL;
    }
    if (w->id % 2 && cumod_stream_create(c, &s) != CUMOD_OK)
        s = 0;
    for (int i = 0; i < 16 && w->wrong == 0; i++) {
        gm_case k = {.type = gg_types[(w->id + i) % 4],
                     .order = (cumod_gemm_order)(i % 2),
                     .transa = i % 3 == 0,
                     .m = 40 + (size_t)w->id * 3,
                     .n = 24 + (size_t)i,
                     .k = 64,
                     .batch = i % 4 == 0 ? 3 : 1,
                     .alpha = 1,
                     .beta = 0.5};
        long bad = gm_run(c, &k, (unsigned)(w->id * 100 + i), s,
                          gm_tolerance(k.type, 1), w->why, sizeof(w->why));
        if (bad != 0)
            w->wrong = (int)bad;
    }
    cumod_close(c);
    return NULL;
}

Test(gpu_gemm, clients_at_once_each_get_their_own_numbers, .timeout = 300)
{
    enum { N = 6 };
    gg_worker w[N];
    pthread_t th[N];
    th_env t;
    gg_start(&t);
    for (int i = 0; i < N; i++) {
        w[i] = (gg_worker){.url = t.d.url, .id = i};
        cr_assert_eq(pthread_create(&th[i], NULL, gg_work, &w[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++)
        cr_expect_eq(w[i].wrong, 0, "client %d: %s", i, w[i].why);
    th_env_stop(&t);
}
