/* SPDX-License-Identifier: MIT */
/*
 * The data plane on a real GPU: numbers computed by the example kernels,
 * shared-segment copies in both directions, and a module reloaded while
 * two clients launch 10,000 times, losing none. Each test skips with a
 * message where there is no GPU.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(1);

#define KDIR CUMOD_TEST_KERNEL_DIR
#define VDIR CUMOD_TEST_VARIANT_DIR

typedef th_env gt;

/* Atomically: copy to a dotfile in the folder, then rename over. */
static void
gt_swap(gt *t, const char *src, const char *name)
{
    char tmp[512], dst[512];
    th_env_put(t, src, ".swap.tmp");
    snprintf(tmp, sizeof(tmp), "%s/.swap.tmp", t->dir);
    snprintf(dst, sizeof(dst), "%s/%s", t->dir, name);
    cr_assert_eq(rename(tmp, dst), 0);
}

static void
gt_start(gt *t)
{
    static const char *const mods[] = {"vadd",   "scale", "empty",
                                       "affine", "axpy",  NULL};
    th_env_init(t, mods);
    th_env_start(t, NULL, NULL);
}

static cumod_buffer
gt_upload(gt *t, const void *p, size_t n)
{
    cumod_buffer b;
    cr_assert_eq(cumod_buffer_alloc(t->c, n, &b), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_write(t->c, b, 0, p, n, 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    return b;
}

Test(gpu_data, vadd_struct_and_template_kernels_compute_right, .timeout = 120)
{
    gt t;
    enum { N = 4099 };
    static float a[N], b[N], c[N];
    static double x[N], y[N];
    gt_start(&t);
    for (int i = 0; i < N; i++) {
        a[i] = (float)i;
        b[i] = 0.5f * (float)i;
        x[i] = (double)i / 3.0;
    }
    cumod_buffer da = gt_upload(&t, a, sizeof(a));
    cumod_buffer db = gt_upload(&t, b, sizeof(b));
    cumod_buffer dc;
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(c), &dc), CUMOD_OK);
    cumod_arg va[] = {cumod_arg_buffer(da, 0), cumod_arg_buffer(db, 0),
                      cumod_arg_buffer(dc, 0), cumod_arg_i32(N)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {(N + 255) / 256, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = va};
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t.c, dc, 0, c, sizeof(c), 0), CUMOD_OK);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += c[i] != a[i] + b[i];
    cr_expect_eq(bad, 0, "vadd: %d wrong of %d", bad, N);

    /* affine: y = p.a * x + p.b over p.n elements, a struct by value. */
    struct {
        float a;
        double b;
        int n;
        char tag;
    } ap = {3.0f, -1.25, N, 'z'};
    cumod_buffer dx = gt_upload(&t, x, sizeof(x));
    cumod_buffer dy;
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(y), &dy), CUMOD_OK);
    cumod_arg aa[] = {cumod_arg_bytes(&ap, sizeof(ap)), cumod_arg_buffer(dx, 0),
                      cumod_arg_buffer(dy, 0)};
    p.kernel = "affine:affine";
    p.args = aa;
    p.nargs = 3;
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t.c, dy, 0, y, sizeof(y), 0), CUMOD_OK);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += fabs(y[i] - (3.0f * x[i] - 1.25)) > 1e-9;
    cr_expect_eq(bad, 0, "affine: %d wrong", bad);

    /* axpy<double> and axpy<float> by their mangled names. */
    for (int i = 0; i < N; i++)
        y[i] = 1.0;
    cr_assert_eq(cumod_buffer_write(t.c, dy, 0, y, sizeof(y), 0), CUMOD_OK);
    cumod_arg xd[] = {cumod_arg_f64(2.0), cumod_arg_buffer(dx, 0),
                      cumod_arg_buffer(dy, 0), cumod_arg_i32(N)};
    p.kernel = "axpy:_Z4axpyIdEvT_PKS0_PS0_i";
    p.args = xd;
    p.nargs = 4;
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t.c, dy, 0, y, sizeof(y), 0), CUMOD_OK);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += fabs(y[i] - (2.0 * x[i] + 1.0)) > 1e-12;
    cr_expect_eq(bad, 0, "axpy<double>: %d wrong", bad);
    cumod_arg xf[] = {cumod_arg_f32(-1.0f), cumod_arg_buffer(da, 0),
                      cumod_arg_buffer(dc, 0), cumod_arg_i32(N)};
    p.kernel = "axpy:_Z4axpyIfEvT_PKS0_PS0_i";
    p.args = xf;
    cr_assert_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(t.c, dc, 0, c, sizeof(c), 0), CUMOD_OK);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += c[i] != b[i]; /* -a + (a + b) */
    cr_expect_eq(bad, 0, "axpy<float>: %d wrong", bad);
    th_env_stop(&t);
}

Test(gpu_data, segment_copies_move_data_both_ways, .timeout = 120)
{
    gt t;
    cumod_segment *seg;
    cumod_buffer d;
    size_t n = 64u << 20;
    gt_start(&t);
    cr_assert_eq(cumod_segment_create(t.c, n, &seg), CUMOD_OK, "%s",
                 cumod_last_detail());
    uint32_t *m = cumod_segment_data(seg);
    for (size_t i = 0; i < n / 4; i++)
        m[i] = (uint32_t)(i * 2654435761u);
    cr_assert_eq(cumod_buffer_alloc(t.c, n, &d), CUMOD_OK);
    cr_assert_eq(cumod_copy_to_device(t.c, d, 0, seg, 0, n, 0, NULL), CUMOD_OK,
                 "%s", cumod_last_detail());
    memset(m, 0, n);
    cr_assert_eq(cumod_copy_to_host(t.c, seg, 0, d, 0, n, 0, NULL), CUMOD_OK,
                 "%s", cumod_last_detail());
    size_t bad = 0;
    for (size_t i = 0; i < n / 4; i++)
        bad += m[i] != (uint32_t)(i * 2654435761u);
    cr_expect_eq(bad, 0, "%zu words wrong after the round trip", bad);
    cr_expect_eq(cumod_segment_destroy(t.c, seg), CUMOD_OK);
    th_env_stop(&t);
}

typedef struct hammer {
    const char *url;
    int n;
    atomic_int *swapped; /* launches done, both threads together */
    int ok, failed, old_res, new_res, wrong;
    char err[256];
} hammer;

static void *
hammer_run(void *arg)
{
    hammer *h = arg;
    cumod_client *c;
    enum { N = 1024 };
    float a[N], b[N], r[N];
    cumod_buffer da, db, dc;
    if (cumod_open(h->url, 30000, &c) != CUMOD_OK)
        return NULL;
    for (int i = 0; i < N; i++) {
        a[i] = (float)(i + 1);
        b[i] = 1.0f;
    }
    if (cumod_buffer_alloc(c, sizeof(a), &da) ||
        cumod_buffer_alloc(c, sizeof(b), &db) ||
        cumod_buffer_alloc(c, sizeof(r), &dc) ||
        cumod_buffer_write(c, da, 0, a, sizeof(a), 0) ||
        cumod_buffer_write(c, db, 0, b, sizeof(b), 0)) {
        snprintf(h->err, sizeof(h->err), "%s", cumod_last_detail());
        cumod_close(c);
        return NULL;
    }
    cumod_arg args[] = {cumod_arg_buffer(da, 0), cumod_arg_buffer(db, 0),
                        cumod_arg_buffer(dc, 0), cumod_arg_i32(N)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {4, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    for (int i = 0; i < h->n; i++) {
        if (cumod_launch(c, &p, NULL, NULL) != CUMOD_OK) {
            h->failed++;
            snprintf(h->err, sizeof(h->err), "%s", cumod_last_detail());
            continue;
        }
        h->ok++;
        atomic_fetch_add(h->swapped, 1);
        if (i % 100 == 0) {
            if (cumod_buffer_read(c, dc, 0, r, sizeof(r), 0) != CUMOD_OK) {
                h->failed++;
                continue;
            }
            /* Old kernel: a + b; the variant: a - b. */
            int old = r[5] == a[5] + b[5], nw = r[5] == a[5] - b[5];
            h->old_res += old;
            h->new_res += nw;
            h->wrong += !old && !nw;
        }
    }
    cumod_close(c);
    return NULL;
}

Test(gpu_data, a_reload_during_ten_thousand_launches_loses_none, .timeout = 300)
{
    gt t;
    pthread_t th[2];
    hammer h[2];
    atomic_int swapped = 0;
    gt_start(&t);
    for (int i = 0; i < 2; i++) {
        h[i] = (hammer){.url = t.d.url, .n = 5000, .swapped = &swapped};
        pthread_create(&th[i], NULL, hammer_run, &h[i]);
    }
    /* Swap at 20%, 45% and 70% of the launches, so all three reloads
     * happen while both clients are launching. */
    const int at[3] = {2000, 4500, 7000};
    const char *img[3] = {VDIR "/vadd.cubin", KDIR "/vadd.cubin",
                          VDIR "/vadd.cubin"};
    for (int k = 0; k < 3; k++) {
        for (int w = 0; w < 60000 && atomic_load(&swapped) < at[k]; w++)
            th_sleep_ms(1);
        gt_swap(&t, img[k], "vadd.cubin");
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    int ok = h[0].ok + h[1].ok, failed = h[0].failed + h[1].failed;
    printf("10,000 launches from two clients across 3 reloads: %d ok, %d "
           "failed; sampled results: %d old kernel, %d new kernel, %d wrong\n",
           ok, failed, h[0].old_res + h[1].old_res, h[0].new_res + h[1].new_res,
           h[0].wrong + h[1].wrong);
    cr_expect_eq(failed, 0, "no launch may fail: %s %s", h[0].err, h[1].err);
    cr_expect_eq(ok, 10000);
    cr_expect_eq(h[0].wrong + h[1].wrong, 0);
    cumod_module_list *l;
    cr_assert_eq(cumod_modules_list(t.c, &l), CUMOD_OK);
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->modules[i].name, "vadd") == 0)
            cr_expect_geq(l->modules[i].generation, 4,
                          "three reloads after the first load");
    cumod_module_list_free(l);
    th_env_stop(&t);
}
