/* SPDX-License-Identifier: MIT */
/*
 * Many clients at once (issue 21 point 2: "64 and 256 clients all
 * served"): 256 sessions, each its own connection with its own
 * shared-memory ring, start together and each launch an empty kernel and
 * wait for it, a hundred times; every launch is served, and cumodctl status
 * is answered meanwhile. Counts, not times: the benchmark
 * (bench/bench_compare.c) gives the figures.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(0);

#define MC_LAUNCHES 100

typedef struct mc_client {
    const char *url;
    pthread_barrier_t *go;
    atomic_int *running;
    int opened, ring; /* cumod_open's result; cumod_fast_path then */
    int served;       /* launches answered CUMOD_OK */
    int rv;           /* the first error, else CUMOD_OK */
    char detail[256];
} mc_client;

static void *
mc_client_main(void *arg)
{
    mc_client *m = arg;
    cumod_client *c = NULL;
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};

    m->opened = cumod_open(m->url, 60000, &c);
    if (m->opened != CUMOD_OK)
        snprintf(m->detail, sizeof(m->detail), "open: %s", cumod_last_detail());
    else
        m->ring = cumod_fast_path(c);
    /* Every one connected (or failed to) before any launches. */
    pthread_barrier_wait(m->go);
    for (int i = 0; c != NULL && i < MC_LAUNCHES; i++) {
        int rv = cumod_launch(c, &p, NULL, NULL);
        if (rv == CUMOD_OK) {
            m->served++;
        } else if (m->rv == CUMOD_OK) {
            m->rv = rv;
            snprintf(m->detail, sizeof(m->detail), "launch %d: %s: %s", i,
                     cumod_errname(rv), cumod_last_detail());
        }
    }
    atomic_fetch_sub(m->running, 1);
    cumod_close(c);
    return NULL;
}

/* Runs n clients together on t's daemon; checks each was served whole,
 * through its ring, and that status is answered while they run. */
static void
mc_run(th_env *t, int n)
{
    mc_client *m = calloc((size_t)n, sizeof(*m));
    pthread_t *th = calloc((size_t)n, sizeof(*th));
    pthread_barrier_t go;
    atomic_int running = n;

    cr_assert(m != NULL && th != NULL);
    cr_assert_eq(pthread_barrier_init(&go, NULL, (unsigned)n + 1), 0);
    for (int i = 0; i < n; i++) {
        m[i] = (mc_client){.url = t->d.url, .go = &go, .running = &running};
        /* A small stack: 256 threads of the default 8 MiB are 2 GiB of
         * address space (too much under ASan). */
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, 256 * 1024);
        cr_assert_eq(pthread_create(&th[i], &a, mc_client_main, &m[i]), 0);
        pthread_attr_destroy(&a);
    }
    pthread_barrier_wait(&go);
    /* The operator's view while they run (or just after, on a fast
     * machine): answered, and it counts the sessions. */
    char *out = NULL, *err = NULL;
    int rc = th_ctl(&t->d, (const char *const[]){"status", NULL}, &out, &err);
    cr_expect_eq(rc, 0,
                 "cumodctl status with %d clients at work (%d still "
                 "running): %s%s",
                 n, atomic_load(&running), out ? out : "", err ? err : "");
    free(out);
    free(err);
    int opened = 0, rings = 0, served = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        opened += m[i].opened == CUMOD_OK;
        rings += m[i].ring;
        served += m[i].served;
        cr_expect(m[i].opened == CUMOD_OK && m[i].rv == CUMOD_OK &&
                      m[i].served == MC_LAUNCHES,
                  "client %d of %d: %d of %d launches served: %s", i, n,
                  m[i].served, MC_LAUNCHES, m[i].detail);
    }
    cr_log_info("%d clients: %d connected, %d with a ring, %d launches served",
                n, opened, rings, served);
    cr_expect_eq(opened, n, "every client connected");
    cr_expect_eq(rings, n, "every client had its ring (the fast path)");
    cr_expect_eq(served, n * MC_LAUNCHES, "every launch served");
    pthread_barrier_destroy(&go);
    free(th);
    free(m);
}

/* Each client holds a connection and a ring (a shared-memory segment and a
 * FIFO doorbell) on both sides: descriptors as a daemon host would give. */
static void
mc_raise_nofile(void)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* n clients at once on a daemon of their own; then it goes on serving: a
 * new client's launch, at once. */
static void
mc_at_once(int n)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;

    mc_raise_nofile();
    th_env_init(&t, k);
    th_env_start(&t, NULL, NULL);
    mc_run(&t, n);
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cr_expect_eq(cumod_launch(t.c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    th_env_stop(&t);
}

Test(many_clients, two_hundred_fifty_six_at_once_all_served, .timeout = 300)
{
    mc_at_once(256);
}

Test(many_clients, sixty_four_at_once_all_served, .timeout = 300)
{
    mc_at_once(64);
}

/* Several submission threads (--submit-threads, daemon/exec/submit.h):
 * each client's writes and memsets go, unanswered, to the thread of its
 * stream, then a read (which the executor's serving thread runs, once
 * every thread has enqueued what it was given) must see them, every
 * round, for every client at once. */
#define MC_ORDER_CLIENTS 12
#define MC_ORDER_ROUNDS 40
#define MC_ORDER_BYTES 4096

typedef struct mc_order {
    const char *url;
    pthread_barrier_t *go;
    int bad_rounds, errors;
    char detail[256];
} mc_order;

static void *
mc_order_main(void *arg)
{
    mc_order *m = arg;
    cumod_client *c = NULL;
    cumod_buffer x = 0;
    cumod_stream own = 0;
    unsigned char want[MC_ORDER_BYTES], got[MC_ORDER_BYTES];

    if (cumod_open(m->url, 60000, &c) != CUMOD_OK ||
        cumod_buffer_alloc(c, MC_ORDER_BYTES, &x) != CUMOD_OK ||
        cumod_stream_create(c, &own) != CUMOD_OK) {
        m->errors++;
        snprintf(m->detail, sizeof(m->detail), "setup: %s",
                 cumod_last_detail());
    }
    pthread_barrier_wait(m->go);
    for (int r = 0; c != NULL && x != 0 && r < MC_ORDER_ROUNDS; r++) {
        /* The session's default stream and one it made, in turns. */
        cumod_stream s = (r & 1) ? own : 0;
        cumod_batch *b = NULL;
        cumod_ticket tk = 0;
        memset(want, r & 0xff, sizeof(want));
        memset(want + 256, (r + 1) & 0xff, 512);
        cumod_launch_params p = {
            .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
        if (cumod_batch_alloc(&b) != CUMOD_OK ||
            cumod_batch_write(b, x, 0, want, sizeof(want)) != CUMOD_OK ||
            cumod_batch_memset(b, x, 256, 512, (uint8_t)(r + 1)) != CUMOD_OK ||
            cumod_batch_launch(b, &p) != CUMOD_OK ||
            cumod_batch_submit(c, b, s, &tk, NULL) != CUMOD_OK) {
            m->errors++;
            snprintf(m->detail, sizeof(m->detail), "round %d: %s", r,
                     cumod_last_detail());
        }
        cumod_batch_free(b);
        memset(got, 0xee, sizeof(got));
        if (cumod_buffer_read(c, x, 0, got, sizeof(got), s) != CUMOD_OK) {
            m->errors++;
            snprintf(m->detail, sizeof(m->detail), "read %d: %s", r,
                     cumod_last_detail());
        } else if (memcmp(got, want, sizeof(want)) != 0) {
            m->bad_rounds++;
        }
    }
    cumod_close(c);
    return NULL;
}

Test(many_clients, several_submission_threads_keep_each_streams_order,
     .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    mc_order m[MC_ORDER_CLIENTS];
    pthread_t th[MC_ORDER_CLIENTS];
    pthread_barrier_t go;
    th_env t;

    th_env_init(&t, k);
    th_env_start(&t, (const char *[]){"--submit-threads", "4", NULL}, NULL);
    cr_assert_eq(pthread_barrier_init(&go, NULL, MC_ORDER_CLIENTS + 1), 0);
    for (int i = 0; i < MC_ORDER_CLIENTS; i++) {
        m[i] = (mc_order){.url = t.d.url, .go = &go};
        cr_assert_eq(pthread_create(&th[i], NULL, mc_order_main, &m[i]), 0);
    }
    pthread_barrier_wait(&go);
    for (int i = 0; i < MC_ORDER_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        cr_expect(m[i].errors == 0 && m[i].bad_rounds == 0,
                  "client %d: %d errors, %d of %d reads missed the writes "
                  "before them: %s",
                  i, m[i].errors, m[i].bad_rounds, MC_ORDER_ROUNDS,
                  m[i].detail);
    }
    pthread_barrier_destroy(&go);
    char *log = th_daemon_log(&t.d);
    cr_expect(strstr(log, " error ") == NULL, "%s", log);
    free(log);
    th_env_stop(&t);
}

/* A fault while several submission threads hold other clients' work: the
 * context is lost for all of them (one context), but each of those
 * launches is answered (CUMOD_OK before the fault, CUMOD_ECTXLOST for what
 * was in flight), none hangs, the faulting one names its cause, and every
 * client is served again. */
#define MC_FAULT_CLIENTS 8
#define MC_FAULT_LAUNCHES 300

typedef struct mc_faulted {
    const char *url;
    pthread_barrier_t *go;
    int ok, lost, other, after;
    char detail[256];
} mc_faulted;

static void *
mc_faulted_main(void *arg)
{
    mc_faulted *m = arg;
    cumod_client *c = NULL;
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    /* 10 s a call: an answer or a wake-up lost with the executor shows as
     * a failure (it did: the executor's waker thread died with the
     * wake-ups it held, and a client slept out its whole timeout). */
    int opened = cumod_open(m->url, 10000, &c) == CUMOD_OK;
    pthread_barrier_wait(m->go);
    for (int i = 0; opened && i < MC_FAULT_LAUNCHES; i++) {
        int rv = cumod_launch(c, &p, NULL, NULL);
        if (rv == CUMOD_OK) {
            m->ok++;
        } else if (rv == CUMOD_ECTXLOST) {
            m->lost++;
        } else if (m->other++ == 0) {
            snprintf(m->detail, sizeof(m->detail), "launch %d: %s: %s", i,
                     cumod_errname(rv), cumod_last_detail());
        }
    }
    /* Served again once the new executor is up. */
    for (int w = 0; opened && w < 200 && !m->after; w++) {
        m->after = cumod_launch(c, &p, NULL, NULL) == CUMOD_OK;
        if (!m->after)
            th_sleep_ms(25);
    }
    if (!opened)
        snprintf(m->detail, sizeof(m->detail), "open: %s", cumod_last_detail());
    cumod_close(c);
    return NULL;
}

Test(many_clients, a_fault_beside_several_submission_threads_answers_everyone,
     .timeout = 120)
{
    static const char *const k[] = {"empty", "scale", NULL};
    mc_faulted m[MC_FAULT_CLIENTS];
    pthread_t th[MC_FAULT_CLIENTS];
    pthread_barrier_t go;
    th_env t;

    th_env_init(&t, k);
    th_env_start(&t, (const char *[]){"--submit-threads", "4", NULL},
                 (const char *[]){"CUMOD_FAKE_FAULT=launch:scale", NULL});
    cumod_buffer x;
    cr_assert_eq(cumod_buffer_alloc(t.c, 1024, &x), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(pthread_barrier_init(&go, NULL, MC_FAULT_CLIENTS + 1), 0);
    for (int i = 0; i < MC_FAULT_CLIENTS; i++) {
        m[i] = (mc_faulted){.url = t.d.url, .go = &go};
        cr_assert_eq(pthread_create(&th[i], NULL, mc_faulted_main, &m[i]), 0);
    }
    pthread_barrier_wait(&go);
    th_sleep_ms(20); /* the others' launches under way */
    cumod_arg args[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                        cumod_arg_i32(256)};
    cumod_launch_params fp = {.kernel = "scale:scale",
                              .grid = {1, 1, 1},
                              .block = {256, 1, 1},
                              .args = args,
                              .nargs = 3};
    int rv = cumod_launch(t.c, &fp, NULL, NULL);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "the faulting launch: %s: %s",
                 cumod_errname(rv), cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "CUDA_ERROR_ILLEGAL_ADDRESS") != NULL,
              "it names its cause: %s", cumod_last_detail());
    int ok = 0, lost = 0;
    for (int i = 0; i < MC_FAULT_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        ok += m[i].ok;
        lost += m[i].lost;
        cr_expect(m[i].other == 0 && m[i].ok + m[i].lost == MC_FAULT_LAUNCHES,
                  "client %d: %d served, %d lost with the context, %d other "
                  "answers of %d: %s",
                  i, m[i].ok, m[i].lost, m[i].other, MC_FAULT_LAUNCHES,
                  m[i].detail);
        cr_expect(m[i].after, "client %d is served again after the fault: %s",
                  i, m[i].detail);
    }
    cr_log_info("around the fault: %d launches served, %d lost with the "
                "context",
                ok, lost);
    cr_expect_gt(ok, 0, "launches were served around the fault");
    pthread_barrier_destroy(&go);
    th_env_stop(&t);
}
