/* SPDX-License-Identifier: MIT */
/*
 * The isolation suite's scenarios on a real GPU, with numbers checked: a
 * kernel that spins on the GPU's clock stands in for held work, and a big
 * PTX (its JIT takes about half a second on an H100) for a slow load.
 * Two other sessions run vector adds meanwhile and check every element;
 * they must be done while the long work still runs. Each test skips with a
 * message where there is no GPU.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(1);

#define BDIR CUMOD_TEST_BENCH_KERNEL_DIR

typedef th_env gi;

static void
gi_start(gi *t, const char *const *env)
{
    static const char *const k[] = {"vadd", NULL};
    char src[512];
    th_env_init(t, k);
    snprintf(src, sizeof(src), "%s/spin.cubin", BDIR);
    th_env_put(t, src, "spin.cubin");
    th_env_start(t, NULL, env);
}

/* spin(ns) on stream s, answered when enqueued. */
static cumod_ticket
gi_spin(cumod_client *c, cumod_stream s, unsigned long long ns)
{
    cumod_arg a[] = {cumod_arg_u64(ns)};
    cumod_launch_params p = {.kernel = "spin:spin",
                             .grid = {1, 1, 1},
                             .block = {1, 1, 1},
                             .stream = s,
                             .nargs = 1,
                             .args = a};
    cumod_ticket tk = 0;
    cr_assert_eq(cumod_launch(c, &p, &tk, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    return tk;
}

/* Vector adds by a session of its own, every element checked. */
typedef struct gi_runner {
    const char *url;
    int ok, wrong;
    char detail[256];
} gi_runner;

static void *
gi_runner_main(void *arg)
{
    enum { N = 4096, ROUNDS = 20 };
    gi_runner *r = arg;
    cumod_client *c;
    cumod_buffer a, b, out;
    float *ha = malloc(N * 4), *hb = malloc(N * 4), *hc = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        ha[i] = (float)i;
        hb[i] = (float)(2 * i + 1);
    }
    if (cumod_open(r->url, 10000, &c) != CUMOD_OK ||
        cumod_buffer_alloc(c, N * 4, &a) != CUMOD_OK ||
        cumod_buffer_alloc(c, N * 4, &b) != CUMOD_OK ||
        cumod_buffer_alloc(c, N * 4, &out) != CUMOD_OK ||
        cumod_buffer_write(c, a, 0, ha, N * 4, 0) != CUMOD_OK ||
        cumod_buffer_write(c, b, 0, hb, N * 4, 0) != CUMOD_OK) {
        snprintf(r->detail, sizeof(r->detail), "%s", cumod_last_detail());
        goto out;
    }
    cumod_arg args[] = {cumod_arg_buffer(a, 0), cumod_arg_buffer(b, 0),
                        cumod_arg_buffer(out, 0), cumod_arg_i32(N)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {N / 256, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    for (int k = 0; k < ROUNDS; k++) {
        memset(hc, 0, N * 4);
        if (cumod_buffer_memset(c, out, 0, N * 4, 0, 0, NULL) != CUMOD_OK ||
            cumod_launch(c, &p, NULL, NULL) != CUMOD_OK ||
            cumod_buffer_read(c, out, 0, hc, N * 4, 0) != CUMOD_OK) {
            snprintf(r->detail, sizeof(r->detail), "round %d: %s", k,
                     cumod_last_detail());
            break;
        }
        for (int i = 0; i < N; i++)
            if (hc[i] != ha[i] + hb[i])
                r->wrong++;
        r->ok++;
    }
    cumod_close(c);
out:
    free(ha);
    free(hb);
    free(hc);
    return NULL;
}

static void
gi_two_others_run(gi *t)
{
    pthread_t th[2];
    gi_runner r[2];
    for (int i = 0; i < 2; i++) {
        r[i] = (gi_runner){.url = t->d.url};
        cr_assert_eq(pthread_create(&th[i], NULL, gi_runner_main, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(r[i].ok, 20, "session %d: %d of 20 rounds: %s", i, r[i].ok,
                     r[i].detail);
        cr_expect_eq(r[i].wrong, 0, "session %d: every element right", i);
    }
}

/* Waits for a ticket on a thread, to tell whether it is done yet. */
typedef struct gi_waiter {
    cumod_client *c;
    cumod_ticket tk;
    atomic_int done;
    int rv;
} gi_waiter;

static void *
gi_waiter_main(void *arg)
{
    gi_waiter *w = arg;
    w->rv = cumod_wait(w->c, w->tk);
    atomic_store(&w->done, 1);
    return NULL;
}

Test(gpu_isolation, frees_and_closes_behind_a_long_kernel_stall_no_one,
     .timeout = 120)
{
    gi t;
    cumod_client *a, *d;
    cumod_buffer x, y, z;
    cumod_stream s;
    pthread_t wt;

    gi_start(&t, NULL);
    /* Resident first: a module load waits for running kernels to end (in
     * the driver; bench/bench_threads.c), which would be the test's own
     * doing, not a stall of one session by another's free. */
    cumod_module_result mr;
    cr_assert_eq(cumod_module_load(t.c, "vadd", &mr), CUMOD_OK);
    cumod_module_result_fini(&mr);
    cr_assert_eq(cumod_open(t.d.url, 10000, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(a, 1 << 20, &x), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(a, 1 << 20, &y), CUMOD_OK);
    gi_waiter w = {.c = a, .tk = gi_spin(a, 0, 4000000000ull)};
    cr_assert_eq(cumod_buffer_free(a, y), CUMOD_OK, "%s", cumod_last_detail());
    cr_assert_eq(pthread_create(&wt, NULL, gi_waiter_main, &w), 0);

    cr_assert_eq(cumod_open(t.d.url, 10000, &d), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(d, 1 << 20, &z), CUMOD_OK);
    cr_assert_eq(cumod_stream_create(d, &s), CUMOD_OK);
    (void)gi_spin(d, s, 4000000000ull);
    cr_assert_eq(cumod_stream_destroy(d, s), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_close(d);

    gi_two_others_run(&t);
    cr_expect_eq(atomic_load(&w.done), 0,
                 "the 4 s kernel still runs when the others are done");
    pthread_join(wt, NULL);
    cr_expect_eq(w.rv, CUMOD_OK, "%s", cumod_last_detail());
    (void)x;
    cumod_close(a);
    th_env_stop(&t);
}

typedef struct gi_blocked {
    const char *url;
    atomic_int *done;
    int rv;
} gi_blocked;

static void *
gi_blocked_main(void *arg)
{
    gi_blocked *b = arg;
    cumod_client *c;
    b->rv = cumod_open(b->url, 60000, &c);
    if (b->rv == CUMOD_OK) {
        cumod_arg a[] = {cumod_arg_u64(3000000000ull)};
        cumod_launch_params p = {.kernel = "spin:spin",
                                 .grid = {1, 1, 1},
                                 .block = {1, 1, 1},
                                 .nargs = 1,
                                 .args = a};
        b->rv = cumod_launch(c, &p, NULL, NULL);
        cumod_close(c);
    }
    atomic_fetch_add(b->done, 1);
    return NULL;
}

Test(gpu_isolation, two_hundred_waiting_clients_leave_status_answered,
     .timeout = 120)
{
    enum { N = 200 };
    gi t;
    pthread_t th[N];
    gi_blocked b[N];
    atomic_int done = 0;
    cumod_module_result mr;

    gi_start(&t, NULL);
    cr_assert_eq(cumod_module_load(t.c, "spin", &mr), CUMOD_OK);
    cumod_module_result_fini(&mr);
    for (int i = 0; i < N; i++) {
        b[i] = (gi_blocked){.url = t.d.url, .done = &done};
        cr_assert_eq(pthread_create(&th[i], NULL, gi_blocked_main, &b[i]), 0);
    }
    sleep(1); /* they connect and launch: 3 s kernels, answered when done */
    cumod_client *c;
    cumod_device_info di;
    cr_assert_eq(cumod_open(t.d.url, 5000, &c), CUMOD_OK);
    if (cumod_device_info_get(c, &di) != CUMOD_OK) {
        char *dlog = th_daemon_log(&t.d);
        cr_expect_fail("status: %s; the daemon's log:\n%s", cumod_last_detail(),
                       dlog);
        free(dlog);
    }
    cr_expect_eq(atomic_load(&done), 0,
                 "status was answered while all %d clients waited", N);
    cumod_close(c);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(b[i].rv, CUMOD_OK, "client %d", i);
    }
    th_env_stop(&t);
}

typedef struct gi_lazy {
    const char *url;
    atomic_int done;
    int rv;
} gi_lazy;

static void *
gi_lazy_main(void *arg)
{
    gi_lazy *l = arg;
    cumod_client *c;
    cumod_buffer x;
    l->rv = cumod_open(l->url, 60000, &c);
    if (l->rv == CUMOD_OK) {
        if ((l->rv = cumod_buffer_alloc(c, 1024, &x)) == CUMOD_OK) {
            cumod_arg a[] = {cumod_arg_buffer(x, 0)};
            cumod_launch_params p = {.kernel = "heavy:heavy",
                                     .grid = {1, 1, 1},
                                     .block = {32, 1, 1},
                                     .nargs = 1,
                                     .args = a};
            l->rv = cumod_launch(c, &p, NULL, NULL);
        }
        cumod_close(c);
    }
    atomic_store(&l->done, 1);
    return NULL;
}

Test(gpu_isolation, a_slow_jit_stalls_no_launch, .timeout = 120)
{
    static const char *const env[] = {"CUDA_CACHE_DISABLE=1", NULL};
    char src[512];
    gi t;
    pthread_t th;
    gi_lazy l = {0};
    cumod_module_result mr;

    gi_start(&t, env);
    cr_assert_eq(cumod_module_load(t.c, "vadd", &mr), CUMOD_OK);
    cumod_module_result_fini(&mr);
    snprintf(src, sizeof(src), "%s/heavy.ptx", BDIR);
    th_env_put(&t, src, "heavy.ptx");
    th_sleep_ms(200); /* catalogued */
    l.url = t.d.url;
    cr_assert_eq(pthread_create(&th, NULL, gi_lazy_main, &l), 0);
    th_sleep_ms(50); /* its JIT has begun */
    gi_two_others_run(&t);
    cr_expect_eq(atomic_load(&l.done), 0,
                 "the launch that needs the JIT still waits for it");
    pthread_join(th, NULL);
    cr_expect_eq(l.rv, CUMOD_OK, "it ran once its module was loaded");
    th_env_stop(&t);
}
