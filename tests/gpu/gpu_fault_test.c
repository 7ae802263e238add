/* SPDX-License-Identifier: MIT */
/*
 * The fault domain on a real GPU: kernels that end the context (an
 * out-of-bounds write, a device-side assert, a trap) and one that never
 * returns (bench/faults.cu), each while another session launches vector
 * adds and checks every element. Prints the recovery figures (another
 * client's first success after a fault, and after a hang's start); nothing
 * here asserts a time. Each test skips with a message where there is no
 * GPU.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(1);

#define FAULTS CUMOD_TEST_BENCH_KERNEL_DIR "/faults.cubin"
#define BAD_VADD CUMOD_TEST_BAD_KERNEL_DIR "/vadd.cubin"
#define GOOD_VADD CUMOD_TEST_KERNEL_DIR "/vadd.cubin"

typedef th_env gf;

/* A session with a, b and out of N floats, a and b filled. */
enum { N = 1 << 16 };
typedef struct gf_vadd {
    cumod_client *c;
    cumod_buffer a, b, out;
    float *ha, *hb, *hc;
    cumod_arg args[4];
    cumod_launch_params p;
} gf_vadd;

static int
gf_vadd_buffers(gf_vadd *v)
{
    if (cumod_buffer_alloc(v->c, N * 4, &v->a) != CUMOD_OK ||
        cumod_buffer_alloc(v->c, N * 4, &v->b) != CUMOD_OK ||
        cumod_buffer_alloc(v->c, N * 4, &v->out) != CUMOD_OK ||
        cumod_buffer_write(v->c, v->a, 0, v->ha, N * 4, 0) != CUMOD_OK ||
        cumod_buffer_write(v->c, v->b, 0, v->hb, N * 4, 0) != CUMOD_OK)
        return -1;
    v->args[0] = cumod_arg_buffer(v->a, 0);
    v->args[1] = cumod_arg_buffer(v->b, 0);
    v->args[2] = cumod_arg_buffer(v->out, 0);
    v->args[3] = cumod_arg_i32(N);
    return 0;
}

/* Opens a session for kernel; with buffers unless lazy (then the caller
 * allocates them, e.g. once an executor serves again). */
static int
gf_vadd_open_ex(gf_vadd *v, const char *url, const char *kernel, int lazy)
{
    memset(v, 0, sizeof(*v));
    v->ha = malloc(N * 4);
    v->hb = malloc(N * 4);
    v->hc = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        v->ha[i] = (float)i;
        v->hb[i] = (float)(3 * i + 1);
    }
    v->p = (cumod_launch_params){.kernel = kernel,
                                 .grid = {N / 256, 1, 1},
                                 .block = {256, 1, 1},
                                 .nargs = 4,
                                 .args = v->args};
    if (cumod_open(url, 20000, &v->c) != CUMOD_OK)
        return -1;
    return lazy ? 0 : gf_vadd_buffers(v);
}

static int
gf_vadd_open(gf_vadd *v, const char *url, const char *kernel)
{
    return gf_vadd_open_ex(v, url, kernel, 0);
}

static void
gf_vadd_close(gf_vadd *v)
{
    cumod_close(v->c);
    free(v->ha);
    free(v->hb);
    free(v->hc);
}

/* One checked round: 1 right, 0 wrong elements, or -(cumod error). */
static int
gf_vadd_round(gf_vadd *v, uint64_t *gen)
{
    int rv;
    memset(v->hc, 0, N * 4);
    if ((rv = cumod_buffer_memset(v->c, v->out, 0, N * 4, 0, 0, NULL)) !=
            CUMOD_OK ||
        (rv = cumod_launch(v->c, &v->p, NULL, gen)) != CUMOD_OK ||
        (rv = cumod_buffer_read(v->c, v->out, 0, v->hc, N * 4, 0)) != CUMOD_OK)
        return -rv;
    for (int i = 0; i < N; i++)
        if (v->hc[i] != v->ha[i] + v->hb[i])
            return 0;
    return 1;
}

/* Another session checking vector adds all the while. */
typedef struct gf_checker {
    const char *url;
    atomic_int stop;
    int ok, wrong, lost, other;
    char detail[512];
} gf_checker;

static void *
gf_checker_main(void *arg)
{
    gf_checker *k = arg;
    gf_vadd v;
    if (gf_vadd_open(&v, k->url, "vadd:vadd") != 0) {
        snprintf(k->detail, sizeof(k->detail), "%s", cumod_last_detail());
        k->other++;
        return NULL;
    }
    int need = 0;
    while (!atomic_load(&k->stop)) {
        if (need && gf_vadd_buffers(&v) != 0) {
            usleep(2000);
            continue;
        }
        need = 0;
        int r = gf_vadd_round(&v, NULL);
        if (r == 1) {
            k->ok++;
        } else if (r == 0) {
            k->wrong++;
        } else if (-r == CUMOD_ECTXLOST) {
            k->lost++;
            need = 1; /* the buffers went with the context */
        } else {
            k->other++;
            snprintf(k->detail, sizeof(k->detail), "%s: %s", cumod_errname(-r),
                     cumod_last_detail());
            usleep(2000);
        }
    }
    gf_vadd_close(&v);
    return NULL;
}

static void
gf_checker_start(gf_checker *k, pthread_t *th, const char *url)
{
    memset(k, 0, sizeof(*k));
    k->url = url;
    cr_assert_eq(pthread_create(th, NULL, gf_checker_main, k), 0);
    for (int w = 0; w < 500 && k->ok == 0 && k->other == 0; w++)
        usleep(10000);
    cr_assert_gt(k->ok, 0, "the checker runs: %s", k->detail);
}

static void
gf_checker_stop(gf_checker *k, pthread_t th, const char *what)
{
    atomic_store(&k->stop, 1);
    pthread_join(th, NULL);
    printf("  %s: the other session's vector adds: %d right, %d wrong, %d "
           "lost with the context\n",
           what, k->ok, k->wrong, k->lost);
    cr_expect_eq(k->wrong, 0, "%s: no wrong result, ever", what);
    cr_expect_eq(k->other, 0, "%s: only context losses: %s", what, k->detail);
}

/* Launches kernel (one of faults.cu's) of module mod on a buffer of c. */
static int
gf_bad_launch(cumod_client *c, cumod_buffer x, const char *kernel,
              unsigned deadline_ms)
{
    cumod_arg a[] = {cumod_arg_buffer(x, 0)};
    cumod_launch_params p = {.kernel = kernel,
                             .grid = {1, 1, 1},
                             .block = {32, 1, 1},
                             .nargs = 1,
                             .args = a,
                             .deadline_ms = deadline_ms};
    return cumod_launch(c, &p, NULL, NULL);
}

/* Another client's first successful vector add after t0: ms after t0. */
static double
gf_served_after(const char *url, double t0)
{
    gf_vadd v;
    double back = -1;
    int have = 0;
    cr_assert_eq(gf_vadd_open_ex(&v, url, "vadd:vadd", 1), 0, "%s",
                 cumod_last_detail());
    while (th_now_ms() - t0 < 20000) {
        /* Buffers first (refused while no executor serves), then a
         * checked vector add. */
        if (!have && (have = gf_vadd_buffers(&v) == 0) == 0) {
            usleep(500);
            continue;
        }
        int r = gf_vadd_round(&v, NULL);
        if (r == 1) {
            back = th_now_ms() - t0;
            break;
        }
        if (r == -CUMOD_ECTXLOST)
            have = 0;
        else
            usleep(500);
    }
    gf_vadd_close(&v);
    return back;
}

static void
gf_start(gf *t, const char *const *extra)
{
    static const char *const k[] = {"vadd", NULL};
    th_env_init(t, k);
    th_env_put(t, FAULTS, "f_oob.cubin");
    th_env_put(t, FAULTS, "f_assert.cubin");
    th_env_put(t, FAULTS, "f_trap.cubin");
    th_env_put(t, FAULTS, "f_hang.cubin");
    th_env_put(t, FAULTS, "f_loop.cubin");
    th_env_start(t, extra, NULL);
}

static unsigned
gf_restarts(gf *t)
{
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(t->c, &di), CUMOD_OK);
    return di.executor_restarts;
}

Test(gpu_fault, each_fault_costs_its_own_work_and_is_quarantined,
     .timeout = 300)
{
    static const char *const pins[] = {"--pin", "vadd",   "--pin",
                                       "f_oob", "--pin",  "f_assert",
                                       "--pin", "f_trap", NULL};
    static const struct {
        const char *kernel, *error;
    } cases[] = {
        {"f_oob:oob", "CUDA_ERROR_ILLEGAL_ADDRESS"},
        {"f_assert:dev_assert", "CUDA_ERROR_ASSERT"},
        {"f_trap:trap", "CUDA_ERROR_"},
    };
    gf t;
    cumod_buffer x;

    gf_start(&t, pins);
    printf("gpu_fault: faults, each while another session checks vector "
           "adds\n");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gf_checker k;
        pthread_t th;
        gf_checker_start(&k, &th, t.d.url);
        unsigned r0 = gf_restarts(&t);
        int faults = 0, rv = CUMOD_OK;
        double first = -1;
        char detail[1024] = "";
        /* Among the checker's launches the first fault may not be pinned
         * down; the second runs alone. The third is refused. */
        for (int n = 0; n < 3; n++) {
            cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &x), CUMOD_OK, "%s",
                         cumod_last_detail());
            double t0 = th_now_ms();
            rv = gf_bad_launch(t.c, x, cases[i].kernel, 0);
            if (rv != CUMOD_ECTXLOST)
                break;
            faults++;
            snprintf(detail, sizeof(detail), "%s", cumod_last_detail());
            cr_expect(strstr(detail, cases[i].error), "%s: %s", cases[i].kernel,
                      detail);
            double back = gf_served_after(t.d.url, t0);
            if (first < 0)
                first = back;
            printf("  %s: %s; another client served again %.0f ms after "
                   "the faulting launch was sent (target 500 ms)\n",
                   cases[i].kernel, strstr(detail, "CUDA_ERROR_"), back);
        }
        cr_expect_eq(rv, CUMOD_EQUARANTINED, "%s: then refused: %s: %s",
                     cases[i].kernel, cumod_errname(rv), cumod_last_detail());
        cr_expect(faults >= 1 && faults <= 2,
                  "%s: %d faults before the "
                  "quarantine",
                  cases[i].kernel, faults);
        cr_expect(strstr(detail, "the culprit is kernel"),
                  "the last fault named its culprit: %s", detail);
        cr_expect_eq(gf_restarts(&t) - r0, (unsigned)faults);
        gf_checker_stop(&k, th, cases[i].kernel);
    }
    th_env_stop(&t);
}

Test(gpu_fault, a_hang_past_its_deadline_costs_its_own_work, .timeout = 300)
{
    static const char *const pins[] = {"--pin", "vadd", "--pin", "f_hang",
                                       NULL};
    gf t;
    gf_checker k;
    pthread_t th;
    cumod_buffer x;

    gf_start(&t, pins);
    gf_checker_start(&k, &th, t.d.url);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &x), CUMOD_OK);
    cr_assert_eq(cumod_buffer_memset(t.c, x, 0, 4096, 0, 0, NULL), CUMOD_OK);
    double t0 = th_now_ms();
    int rv = gf_bad_launch(t.c, x, "f_hang:hang", 500);
    double answered = th_now_ms() - t0;
    cr_expect_eq(rv, CUMOD_ETIMEDOUT, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "kernel hang of module f_hang") &&
                  strstr(cumod_last_detail(), "deadline of 500 ms"),
              "%s", cumod_last_detail());
    double back = gf_served_after(t.d.url, t0);
    printf("gpu_fault: a kernel that never returns, deadline 500 ms: its "
           "launch answered CUMOD_ETIMEDOUT after %.0f ms; another client "
           "served again %.0f ms after the hang began (target deadline + "
           "500 = 1000 ms)\n",
           answered, back);
    rv = gf_bad_launch(t.c, x, "f_hang:hang", 500);
    cr_expect_eq(rv, CUMOD_EQUARANTINED, "%s", cumod_last_detail());
    gf_checker_stop(&k, th, "hang");
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_expect_str_eq(di.executor_state, "serving");
    cr_expect(strstr(di.last_fault, "deadline"), "%s", di.last_fault);
    th_env_stop(&t);
}

Test(gpu_fault, quarantine_stops_a_faulting_loop, .timeout = 300)
{
    static const char *const pins[] = {"--pin", "vadd", "--pin", "f_loop",
                                       NULL};
    gf t;
    gf_checker k;
    pthread_t th;
    cumod_buffer x;
    int lost = 0, refused = 0;

    gf_start(&t, pins);
    gf_checker_start(&k, &th, t.d.url);
    unsigned r0 = gf_restarts(&t);
    double t0 = th_now_ms();
    /* 50 launches (a buffer first: refused while the executor restarts). */
    for (int i = 0; i < 50 && th_now_ms() - t0 < 30000;) {
        if (cumod_buffer_alloc(t.c, 4096, &x) != CUMOD_OK) {
            usleep(2000);
            continue;
        }
        int rv = gf_bad_launch(t.c, x, "f_loop:oob", 0);
        lost += rv == CUMOD_ECTXLOST;
        refused += rv == CUMOD_EQUARANTINED;
        i++;
    }
    double took = th_now_ms() - t0;
    unsigned restarts = gf_restarts(&t) - r0;
    printf("gpu_fault: 50 launches of a faulting kernel in a loop: %d "
           "faulted, %d refused, %u executor restarts, in %.0f ms\n",
           lost, refused, restarts, took);
    cr_expect(restarts >= 1 && restarts <= 2, "%u restarts", restarts);
    cr_expect_eq((unsigned)lost, restarts);
    cr_expect_eq(lost + refused, 50, "every launch faulted or was refused");
    gf_checker_stop(&k, th, "faulting loop");
    th_env_stop(&t);
}

Test(gpu_fault, a_faulting_generation_rolls_back_to_the_good_one,
     .timeout = 300)
{
    static const char *const k[] = {"vadd", NULL};
    gf t;
    gf_vadd v;
    uint64_t gen = 0;

    th_env_init(&t, k);
    th_env_start(&t, NULL, NULL);
    cr_assert_eq(gf_vadd_open(&v, t.d.url, "vadd:vadd"), 0);
    cr_assert_eq(gf_vadd_round(&v, &gen), 1, "%s", cumod_last_detail());
    cr_expect_eq(gen, 1);
    /* The bad generation: its launches write through a wild pointer. */
    char tmp[320], dst[320];
    th_env_put(&t, BAD_VADD, ".incoming");
    snprintf(tmp, sizeof(tmp), "%s/.incoming", t.dir);
    snprintf(dst, sizeof(dst), "%s/vadd.cubin", t.dir);
    cr_assert_eq(rename(tmp, dst), 0);
    int r = 1;
    for (int w = 0; w < 500 && r == 1; w++) {
        r = gf_vadd_round(&v, &gen);
        if (r == 1)
            usleep(10000); /* generation 1 until the new file is read */
    }
    cr_expect_eq(r, -CUMOD_ECTXLOST, "%d: %s", r, cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "generation 2"), "%s",
              cumod_last_detail());
    /* Generation 3 is generation 1's bytes: right results again. */
    r = 0;
    for (int w = 0; w < 500 && r != 1; w++) {
        if (r == -CUMOD_ECTXLOST || r == 0)
            (void)gf_vadd_buffers(&v);
        r = gf_vadd_round(&v, &gen);
        if (r != 1)
            usleep(10000);
    }
    cr_expect_eq(r, 1, "%s", cumod_last_detail());
    cr_expect_eq(gen, 3);
    printf("gpu_fault: a faulting generation 2 of vadd was quarantined; "
           "generation %llu (generation 1's bytes) serves right results\n",
           (unsigned long long)gen);
    gf_vadd_close(&v);
    th_env_stop(&t);
}
