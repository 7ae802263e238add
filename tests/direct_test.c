/* SPDX-License-Identifier: MIT */
/*
 * Direct launches (issue 33; daemon/front/units/direct.h,
 * daemon/exec/direct.h): a session's ring read by its executor, which launches
 * what its snapshot lets it check and forwards the rest to the front. Against
 * cumodd as a real process, on the fake driver (and, built as gpu_direct_test,
 * on a GPU, where the vector adds' numbers are checked too). Every guarantee
 * the front gave holds with launches that never reach it: answers once
 * each, ring order with forwarded requests, hot swaps (launches in flight
 * finish on the old generation, the next runs the new one, the old one
 * unloaded once), a freed buffer and a quarantine refused at the next
 * launch, limits that count direct launches, faults blamed and answered,
 * the counts in the metrics, and a hostile client rewriting its ring
 * under the executor costing only itself.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cumod.pb-c.h"
#include "cumod/cumod.h"
#include "cumod_ring.h"
#include "fixture.h"
#include "raw_req.h"

#ifndef CUMOD_TEST_REAL_GPU
#define CUMOD_TEST_REAL_GPU 0
#endif
TH_SUITE_DRIVER(CUMOD_TEST_REAL_GPU);

/* --- helpers ------------------------------------------------------------ */

/* cumodd on kernels with a metrics port (*port) and extra arguments. */
static void
dt_start(th_env *t, const char *const *kernels, const char *const *extra,
         const char *const *env, int *port)
{
    static char ps[32];
    const char *args[32];
    int n = 0;
    *port = th_free_port();
    cr_assert_gt(*port, 0);
    snprintf(ps, sizeof(ps), "127.0.0.1:%d", *port);
    args[n++] = "--log-level";
    args[n++] = "debug";
    args[n++] = "--metrics-listen";
    args[n++] = ps;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 30; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    th_env_init(t, kernels);
    th_env_start(t, args, env);
}

/* A counter of the metrics summed (harness.h: th_metric_sum). */
static double
dt_metric(int port, const char *name, const char *label)
{
    return th_metric_sum(port, name, label);
}

/* The metric once it is at least want (within ms): its value then. The
 * executor tells the front its counts as launches complete. */
static double
dt_metric_until(int port, const char *name, const char *label, double want,
                int ms)
{
    double v = -1;
    for (int w = 0; w < ms / 10; w++) {
        if ((v = dt_metric(port, name, label)) >= want)
            return v;
        th_sleep_ms(10);
    }
    return v;
}

static const cumod_launch_params dt_empty = {
    .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {32, 1, 1}};

/* A vector add of n floats through c (buffers of its own); 0 when every
 * element is right (on a GPU; the fake computes nothing and only the
 * calls are checked there). sub: the variant's c = a - b. *gen: the
 * generation that ran it. */
typedef struct dt_vadd {
    cumod_buffer a, b, c;
    int n;
} dt_vadd;

static int
dt_vadd_init(cumod_client *c, dt_vadd *v, int n)
{
    float *x = malloc((size_t)n * sizeof(float)),
          *y = malloc((size_t)n * sizeof(float));
    int rv = -1;
    v->n = n;
    if (x == NULL || y == NULL)
        goto out;
    for (int i = 0; i < n; i++) {
        x[i] = (float)i;
        y[i] = 2.0f * (float)i;
    }
    if (cumod_buffer_alloc(c, (size_t)n * 4, &v->a) == CUMOD_OK &&
        cumod_buffer_alloc(c, (size_t)n * 4, &v->b) == CUMOD_OK &&
        cumod_buffer_alloc(c, (size_t)n * 4, &v->c) == CUMOD_OK &&
        cumod_buffer_write(c, v->a, 0, x, (size_t)n * 4, 0) == CUMOD_OK &&
        cumod_buffer_write(c, v->b, 0, y, (size_t)n * 4, 0) == CUMOD_OK)
        rv = 0;
out:
    free(x);
    free(y);
    return rv;
}

static int
dt_vadd_run(cumod_client *c, dt_vadd *v, uint64_t *gen, int *wrong)
{
    cumod_arg args[] = {cumod_arg_buffer(v->a, 0), cumod_arg_buffer(v->b, 0),
                        cumod_arg_buffer(v->c, 0), cumod_arg_i32(v->n)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {(unsigned)(v->n + 255) / 256, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    int rv = cumod_launch(c, &p, NULL, gen);
    *wrong = 0;
    if (rv != CUMOD_OK || !th_real_gpu())
        return rv;
    float out[64];
    if ((rv = cumod_buffer_read(c, v->c, 0, out, sizeof(out), 0)) != CUMOD_OK)
        return rv;
    for (int i = 0; i < 64 && i < v->n; i++) {
        float want = *gen >= 2 ? (float)i - 2.0f * (float)i : 3.0f * (float)i;
        if (out[i] != want)
            (*wrong)++;
    }
    return CUMOD_OK;
}

/* --- the path ----------------------------------------------------------- */

/* The first launch of a module goes through the front (which publishes
 * it to the executor); plain launches after it are the executor's, and
 * everything else still the front's. */
Test(direct, plain_launches_go_direct_the_rest_through_the_front,
     .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    int port;
    dt_start(&t, k, NULL, NULL, &port);
    cr_assert(cumod_fast_path(t.c), "the client has its ring");
    cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    enum { N = 200 };
    for (int i = 0; i < N; i++)
        cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK,
                     "launch %d: %s", i, cumod_last_detail());
    /* Counted as they complete; the last within milliseconds of the ring
     * going quiet. */
    (void)dt_metric_until(port, "cumod_direct_launches_total", "", N - 2, 5000);
    th_sleep_ms(100);
    double direct = dt_metric(port, "cumod_direct_launches_total", "");
    cr_expect_geq(direct, N - 2,
                  "the launches after the first were the executor's: %.0f of "
                  "%d",
                  direct, N);
    cr_expect_leq(direct, N, "the first went through the front: %.0f", direct);
    /* Launches answered when enqueued: the executor's too (its tickets:
     * direct_ticket_test); memsets, allocations, streams: the front's. */
    cumod_buffer x;
    cumod_ticket tk;
    cr_assert_eq(cumod_buffer_alloc(t.c, 256, &x), CUMOD_OK);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(cumod_launch(t.c, &dt_empty, &tk, NULL), CUMOD_OK);
    cr_assert_eq(cumod_wait(t.c, tk), CUMOD_OK);
    direct = dt_metric_until(port, "cumod_direct_launches_total", "",
                             direct + 20, 5000);
    cr_assert_eq(cumod_buffer_memset(t.c, x, 0, 256, 7, 0, NULL), CUMOD_OK);
    cumod_stream sm;
    cr_assert_eq(cumod_stream_create(t.c, &sm), CUMOD_OK);
    th_sleep_ms(100);
    cr_expect_eq(dt_metric(port, "cumod_direct_launches_total", ""), direct,
                 "nothing but launches is taken directly");
    cr_expect_geq(dt_metric(port, "cumod_launches_total", "empty"), N + 21,
                  "every launch counted by module");
    char *log = th_daemon_log(&t.d);
    cr_expect_null(strstr(log, " error "), "%s", log);
    free(log);
    th_env_stop(&t);
}

/* Direct launches answered when complete, and forwarded memsets answered
 * when enqueued, one after the other on one stream: the fake driver's log
 * shows them enqueued in the order the client sent them, and the buffer
 * holds the last memset's bytes. */
Test(direct, direct_and_forwarded_records_stay_in_ring_order, .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    int port;
    cumod_buffer x;
    cumod_ticket tk;
    if (th_real_gpu())
        cr_skip_test("the order is read from the fake driver's log");
    dt_start(&t, k, NULL, NULL, &port);
    cr_assert_eq(cumod_buffer_alloc(t.c, 64, &x), CUMOD_OK);
    cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK);
    enum { N = 60 };
    for (int i = 0; i < N; i++) {
        cr_assert_eq(
            cumod_buffer_memset(t.c, x, 0, 64, (uint8_t)(i + 1), 0, &tk),
            CUMOD_OK, "%s", cumod_last_detail());
        cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK, "%s",
                     cumod_last_detail());
    }
    cr_assert_eq(cumod_wait(t.c, tk), CUMOD_OK);
    uint8_t back[64];
    cr_assert_eq(cumod_buffer_read(t.c, x, 0, back, sizeof(back), 0), CUMOD_OK);
    cr_expect_eq(back[0], N, "the last memset's byte: %u", back[0]);
    /* memset, launch, memset, launch...: in the driver's order. */
    char *fl = th_env_fake_log_wait(&t, "never", 200);
    cr_assert_not_null(fl);
    int seq = 0, bad = 0;
    const char *p = strstr(fl, "launch fn=empty"); /* the first, alone */
    p = p ? strchr(p, '\n') : NULL;
    for (; p != NULL && *p; p = strchr(p + 1, '\n')) {
        const char *l = p + 1;
        if (strncmp(l, "memset ", 7) == 0 && strstr(l, "bytes=64 ") &&
            strstr(l, "async=1"))
            bad += seq++ % 2 != 0;
        else if (strncmp(l, "launch fn=empty", 15) == 0)
            bad += seq++ % 2 != 1;
    }
    cr_expect_eq(seq, 2 * N, "%d memsets and launches in the log", seq);
    cr_expect_eq(bad, 0, "%d out of the client's order", bad);
    free(fl);
    cr_expect_gt(
        dt_metric_until(port, "cumod_direct_launches_total", "", 1, 5000), 0,
        "some of the launches were direct");
    th_env_stop(&t);
}

/* A direct launch's completion is a word the device writes after it
 * (cuStreamWriteValue32), read by the executor as plain memory; with
 * CUMOD_EXEC_COMPLETION=event (or a driver without the call) an event.
 * Either way every launch is answered, waited and ticketed alike. */
static void
dt_completion_run(const char *const *env, int *writes, int *direct)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    int port;
    cumod_ticket tk;
    dt_start(&t, k, NULL, env, &port);
    enum { N = 100 };
    for (int i = 0; i < N; i++)
        cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK,
                     "waited launch %d: %s", i, cumod_last_detail());
    for (int i = 0; i < N; i++)
        cr_assert_eq(cumod_launch(t.c, &dt_empty, &tk, NULL), CUMOD_OK,
                     "launch %d answered when enqueued: %s", i,
                     cumod_last_detail());
    cr_assert_eq(cumod_wait(t.c, tk), CUMOD_OK, "%s", cumod_last_detail());
    *direct = (int)dt_metric_until(port, "cumod_direct_launches_total", "",
                                   2 * N - 2, 5000);
    char *fl = th_env_fake_log_wait(&t, "never", 50);
    cr_assert_not_null(fl);
    *writes = th_count(fl, "call fn=cuStreamWriteValue32 ");
    free(fl);
    th_env_stop(&t);
}

Test(direct, launches_complete_by_words_the_device_writes, .timeout = 120)
{
    int writes, direct;
    if (th_real_gpu())
        cr_skip_test("the writes are counted in the fake driver's log");
    dt_completion_run(NULL, &writes, &direct);
    cr_expect_geq(direct, 198, "direct launches: %d", direct);
    /* one a waited launch, one a look's ticketed launches of a stream */
    cr_expect_geq(writes, 99, "a word written after each waited launch: %d",
                  writes);
    static const char *const ev[] = {"CUMOD_EXEC_COMPLETION=event", NULL};
    dt_completion_run(ev, &writes, &direct);
    cr_expect_geq(direct, 198, "direct launches by events: %d", direct);
    cr_expect_eq(writes, 0, "no words when told to use events: %d", writes);
}

/* --- hot swaps ---------------------------------------------------------- */

typedef struct dt_swapper {
    const char *url;
    _Atomic int stop;
    int launches, failed, wrong, backwards;
    uint64_t first_gen, last_gen;
    char detail[512];
} dt_swapper;

static void *
dt_swapper_main(void *arg)
{
    dt_swapper *w = arg;
    cumod_client *c;
    dt_vadd v;
    if (cumod_open(w->url, 20000, &c) != CUMOD_OK) {
        w->failed++;
        snprintf(w->detail, sizeof(w->detail), "%s", cumod_last_detail());
        return NULL;
    }
    if (dt_vadd_init(c, &v, 4096) != 0) {
        w->failed++;
        snprintf(w->detail, sizeof(w->detail), "init: %s", cumod_last_detail());
    }
    while (!atomic_load(&w->stop) && w->failed == 0) {
        uint64_t gen = 0;
        int wrong;
        int rv = dt_vadd_run(c, &v, &gen, &wrong);
        if (rv != CUMOD_OK) {
            w->failed++;
            snprintf(w->detail, sizeof(w->detail), "%s: %s", cumod_errname(rv),
                     cumod_last_detail());
            break;
        }
        w->launches++;
        w->wrong += wrong;
        if (w->first_gen == 0)
            w->first_gen = gen;
        w->backwards += gen < w->last_gen;
        w->last_gen = gen;
    }
    cumod_close(c);
    return NULL;
}

/* Clients launching all along while the module's file is replaced: none
 * fails, each sees generation 1 then 2 and never back, the numbers are
 * the generation's; launches go direct on the new generation too; the old
 * generation is unloaded once. */
Test(direct, a_hot_swap_under_direct_launches, .timeout = 120)
{
    static const char *const k[] = {"vadd", NULL};
    th_env t;
    int port;
    enum { W = 4 };
    dt_swapper w[W];
    pthread_t th[W];
    dt_start(&t, k, NULL, NULL, &port);
    for (int i = 0; i < W; i++) {
        w[i] = (dt_swapper){.url = t.d.url};
        cr_assert_eq(pthread_create(&th[i], NULL, dt_swapper_main, &w[i]), 0);
    }
    double d0 =
        dt_metric_until(port, "cumod_direct_launches_total", "", 200, 10000);
    cr_expect_geq(d0, 200, "launches went direct before the swap");
    th_env_put(&t, CUMOD_TEST_VARIANT_DIR "/vadd.cubin", "vadd.cubin");
    /* Launches on the new generation, direct again. */
    int moved = 0;
    for (int i = 0; i < 1000 && !moved; i++) {
        moved = 1;
        for (int j = 0; j < W; j++)
            moved &= w[j].last_gen >= 2 || w[j].failed;
        th_sleep_ms(10);
    }
    double d1 = dt_metric(port, "cumod_direct_launches_total", "");
    double d2 = dt_metric_until(port, "cumod_direct_launches_total", "",
                                d1 + 200, 10000);
    for (int i = 0; i < W; i++)
        atomic_store(&w[i].stop, 1);
    for (int i = 0; i < W; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < W; i++) {
        cr_expect_eq(w[i].failed, 0, "client %d: %s", i, w[i].detail);
        cr_expect_eq(w[i].first_gen, 1, "client %d began on generation 1", i);
        cr_expect_eq(w[i].last_gen, 2, "client %d ended on generation 2", i);
        cr_expect_eq(w[i].backwards, 0, "client %d never went back", i);
        cr_expect_eq(w[i].wrong, 0, "client %d: each generation's numbers", i);
    }
    cr_expect_geq(d2, d1 + 200, "direct again after the swap (%.0f, %.0f)", d1,
                  d2);
    if (!th_real_gpu()) {
        char *fl = th_env_fake_log_wait(&t, "unload module=", 5000);
        cr_expect_eq(th_count(fl, "unload module="), 1,
                     "the old generation unloaded once");
        free(fl);
    }
    th_env_stop(&t);
}

typedef struct dt_call {
    const char *url;
    cumod_client *c;
    int rv;
    uint64_t gen;
    char detail[512];
} dt_call;

static void *
dt_call_main(void *arg)
{
    dt_call *k = arg;
    dt_vadd v;
    int wrong;
    if (dt_vadd_init(k->c, &v, 256) != 0) {
        k->rv = -1;
        return NULL;
    }
    k->rv = dt_vadd_run(k->c, &v, &k->gen, &wrong);
    snprintf(k->detail, sizeof(k->detail), "%s", cumod_last_detail());
    return NULL;
}

/* Launches held in the driver when the file changes finish on the old
 * generation (they say so); the next one runs the new; the old
 * generation's module is unloaded only after its held launches complete,
 * and once. */
Test(direct, launches_in_flight_at_a_swap_finish_on_the_old_generation,
     .timeout = 120)
{
    static const char *const k[] = {"vadd", NULL};
    th_env t;
    int port;
    if (th_real_gpu())
        cr_skip_test("holds launches in the fake driver");
    dt_start(&t, k, NULL, NULL, &port);
    dt_vadd v;
    uint64_t gen = 0;
    int wrong;
    cr_assert_eq(dt_vadd_init(t.c, &v, 256), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(dt_vadd_run(t.c, &v, &gen, &wrong), CUMOD_OK);
    cr_assert_geq(
        dt_metric_until(port, "cumod_direct_launches_total", "", 2, 5000), 2);
    cr_assert_eq(th_write_file(t.fake_hold, "vadd\n"), 0);
    enum { H = 3 };
    dt_call calls[H];
    pthread_t th[H];
    for (int i = 0; i < H; i++) {
        calls[i] = (dt_call){0};
        cr_assert_eq(cumod_open(t.d.url, 20000, &calls[i].c), CUMOD_OK);
        /* each its own: launched once to be published, then held */
        dt_vadd cv;
        cr_assert_eq(dt_vadd_init(calls[i].c, &cv, 256), 0);
        cr_assert_eq(pthread_create(&th[i], NULL, dt_call_main, &calls[i]), 0);
    }
    char *fl = NULL;
    for (int w = 0; w < 500; w++) {
        free(fl);
        fl = th_env_fake_log_wait(&t, "launch fn=vadd", 10);
        if (th_count(fl, "launch fn=vadd") >= 3 + H)
            break;
        th_sleep_ms(10);
    }
    cr_assert_geq(th_count(fl, "launch fn=vadd"), 3 + H, "held launches: %d",
                  th_count(fl, "launch fn=vadd"));
    free(fl);
    th_env_put(&t, CUMOD_TEST_VARIANT_DIR "/vadd.cubin", "vadd.cubin");
    /* The new bytes are read; their load waits for the launches running
     * (exec/inflight.h: a load holds every launch of the context), and
     * nothing is unloaded meanwhile. */
    th_sleep_ms(300);
    fl = th_env_fake_log_wait(&t, "never", 10);
    cr_expect_eq(th_count(fl, "unload module="), 0,
                 "the old generation stays while its launches run");
    free(fl);
    unlink(t.fake_hold);
    for (int i = 0; i < H; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(calls[i].rv, CUMOD_OK, "held launch %d: %s", i,
                     calls[i].detail);
        cr_expect_eq(calls[i].gen, 1, "held launch %d ran generation 1", i);
        cumod_close(calls[i].c);
    }
    /* The new generation serves once loaded. */
    uint64_t now = 0;
    for (int w = 0; w < 500 && now < 2; w++) {
        cumod_module_list *ml = NULL;
        if (cumod_modules_list(t.c, &ml) == CUMOD_OK)
            for (size_t i = 0; i < ml->count; i++)
                if (strcmp(ml->modules[i].name, "vadd") == 0)
                    now = ml->modules[i].generation;
        cumod_module_list_free(ml);
        if (now < 2)
            th_sleep_ms(10);
    }
    cr_assert_eq(now, 2, "generation 2 loaded");
    cr_assert_eq(dt_vadd_run(t.c, &v, &gen, &wrong), CUMOD_OK);
    cr_expect_eq(gen, 2, "the next launch runs generation 2");
    fl = th_env_fake_log_wait(&t, "unload module=", 5000);
    cr_expect_eq(th_count(fl, "unload module="), 1,
                 "the old generation unloaded once, after its launches");
    free(fl);
    th_env_stop(&t);
}

/* --- what the front takes back ------------------------------------------ */

/* A buffer freed is refused at the very next launch that names it. */
Test(direct, a_freed_buffer_is_refused_at_the_next_launch, .timeout = 60)
{
    static const char *const k[] = {"vadd", NULL};
    th_env t;
    int port;
    dt_start(&t, k, NULL, NULL, &port);
    dt_vadd v;
    uint64_t gen;
    int wrong;
    cr_assert_eq(dt_vadd_init(t.c, &v, 256), 0);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(dt_vadd_run(t.c, &v, &gen, &wrong), CUMOD_OK);
    cr_assert_geq(
        dt_metric_until(port, "cumod_direct_launches_total", "", 3, 5000), 3);
    cr_assert_eq(cumod_buffer_free(t.c, v.c), CUMOD_OK);
    int rv = dt_vadd_run(t.c, &v, &gen, &wrong);
    cr_expect_eq(rv, CUMOD_ENOENT, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "argument 3") &&
                  strstr(cumod_last_detail(), "not one of this connection's"),
              "%s", cumod_last_detail());
    cr_expect_eq(cumod_buffer_alloc(t.c, 1024, &v.c), CUMOD_OK);
    cr_expect_eq(dt_vadd_run(t.c, &v, &gen, &wrong), CUMOD_OK, "%s",
                 cumod_last_detail());
    th_env_stop(&t);
}

/* A module removed from the folder is refused at the next launch, and a
 * launch with a wrong argument is refused with the front's words. */
Test(direct, a_removed_module_and_a_bad_launch_are_refused, .timeout = 60)
{
    static const char *const k[] = {"vadd", "empty", NULL};
    th_env t;
    int port;
    dt_start(&t, k, NULL, NULL, &port);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK);
    cr_assert_geq(
        dt_metric_until(port, "cumod_direct_launches_total", "", 3, 5000), 3);
    cumod_launch_params bad = dt_empty;
    bad.block.x = 100000;
    int rv = cumod_launch(t.c, &bad, NULL, NULL);
    cr_expect_eq(rv, CUMOD_EINVAL, "%s", cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "block.x = 100000"), "%s",
              cumod_last_detail());
    char path[512];
    snprintf(path, sizeof(path), "%s/empty.cubin", t.dir);
    cr_assert_eq(unlink(path), 0);
    int gone = 0;
    for (int w = 0; w < 300 && !gone; w++) {
        gone = cumod_launch(t.c, &dt_empty, NULL, NULL) == CUMOD_ENOENT;
        if (!gone)
            th_sleep_ms(10);
    }
    cr_expect(gone, "the removed module is refused: %s", cumod_last_detail());
    th_env_stop(&t);
}

/* One empty launch on a shared client (k->c). */
static void *
dt_held_one(void *arg)
{
    dt_call *k = arg;
    k->rv = cumod_launch(k->c, &dt_empty, NULL, NULL);
    snprintf(k->detail, sizeof(k->detail), "%s", cumod_last_detail());
    return NULL;
}

/* --session-max-inflight counts direct launches: a session whose direct
 * launches fill it is refused the next, naming the limit. */
Test(direct, the_inflight_limit_counts_direct_launches, .timeout = 60)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    int port;
    if (th_real_gpu())
        cr_skip_test("holds launches in the fake driver");
    dt_start(&t, k, (const char *const[]){"--session-max-inflight", "2", NULL},
             NULL, &port);
    cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK);
    cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK);
    cr_assert_geq(
        dt_metric_until(port, "cumod_direct_launches_total", "", 1, 5000), 1);
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    /* Two launches of t.c's session held, from two threads sharing it. */
    pthread_t th[2];
    dt_call calls[2];
    for (int i = 0; i < 2; i++) {
        calls[i] = (dt_call){.c = t.c};
        cr_assert_eq(pthread_create(&th[i], NULL, dt_held_one, &calls[i]), 0);
    }
    char *fl = NULL;
    for (int w = 0; w < 500; w++) {
        free(fl);
        fl = th_env_fake_log_wait(&t, "launch fn=empty", 10);
        if (th_count(fl, "launch fn=empty") >= 4)
            break;
        th_sleep_ms(10);
    }
    free(fl);
    int rv = cumod_launch(t.c, &dt_empty, NULL, NULL);
    cr_expect_eq(rv, CUMOD_ELIMIT, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "--session-max-inflight"), "%s",
              cumod_last_detail());
    unlink(t.fake_hold);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(calls[i].rv, CUMOD_OK, "%s", calls[i].detail);
    }
    th_env_stop(&t);
}

/* --- faults ------------------------------------------------------------- */

/* A fault in a direct launch (the sixth launch of the executor faults,
 * once): the launch is answered with the lost context naming its culprit
 * (kernel, module, generation), the module is quarantined, its next
 * launches are refused at once, the new executor serves the rest, and
 * its rings go direct again. */
Test(direct, a_fault_in_a_direct_launch_is_blamed_and_quarantined,
     .timeout = 120)
{
    static const char *const k[] = {"empty", "vadd", NULL};
    char once[300], once_env[340];
    th_env t;
    int port, rv = CUMOD_OK, i;
    if (th_real_gpu())
        cr_skip_test("the fault is injected in the fake driver");
    const char *tmp = getenv("TMPDIR");
    snprintf(once, sizeof(once), "%s/cumod-direct-fault-%d",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp", (int)getpid());
    unlink(once);
    snprintf(once_env, sizeof(once_env), "CUMOD_FAKE_FAULT_ONCE=%s", once);
    dt_start(&t, k, NULL,
             (const char *const[]){"CUMOD_FAKE_FAULT=launch:6", once_env, NULL},
             &port);
    for (i = 0; i < 5; i++)
        cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK,
                     "launch %d: %s", i, cumod_last_detail());
    /* The four after the first were the executor's. */
    cr_assert_geq(
        dt_metric_until(port, "cumod_direct_launches_total", "", 4, 5000), 4);
    rv = cumod_launch(t.c, &dt_empty, NULL, NULL);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "the sixth faulted: %s: %s",
                 cumod_errname(rv), cumod_last_detail());
    const char *d = cumod_last_detail();
    cr_expect(strstr(d, "kernel empty of module empty (generation 1") != NULL,
              "the answer names the culprit: %s", d);
    cr_expect(strstr(d, "quarantined") != NULL, "%s", d);
    /* One CUMOD-FAULT line, naming the session. */
    char *log = NULL;
    for (int w = 0; w < 500; w++) {
        free(log);
        log = th_daemon_log(&t.d);
        if (th_count(log, "CUMOD-FAULT") >= 1)
            break;
        th_sleep_ms(10);
    }
    char pid[32];
    snprintf(pid, sizeof(pid), "pid %d ", (int)getpid());
    const char *line = strstr(log, "CUMOD-FAULT");
    cr_assert_not_null(line, "%s", log);
    const char *eol = strchr(line, '\n');
    size_t ll = eol ? (size_t)(eol - line) : strlen(line);
    cr_expect(memmem(line, ll, "kernel empty of module empty generation 1",
                     41) != NULL &&
                  memmem(line, ll, pid, strlen(pid)) != NULL,
              "%.*s", (int)ll, line);
    cr_expect_eq(th_count(log, "CUMOD-FAULT"), 1, "%s", log);
    free(log);
    /* Served again by a new executor; empty refused at once. */
    cumod_buffer x;
    for (int w = 0; w < 1000; w++) {
        if ((rv = cumod_buffer_alloc(t.c, 64, &x)) == CUMOD_OK)
            break;
        th_sleep_ms(10);
    }
    cr_assert_eq(rv, CUMOD_OK, "served again: %s", cumod_last_detail());
    for (i = 0; i < 5; i++) {
        rv = cumod_launch(t.c, &dt_empty, NULL, NULL);
        cr_expect_eq(rv, CUMOD_EQUARANTINED, "launch %d after: %s: %s", i,
                     cumod_errname(rv), cumod_last_detail());
    }
    /* Another module's launches go direct on the new executor. */
    double before = dt_metric(port, "cumod_direct_launches_total", "");
    dt_vadd v;
    uint64_t gen;
    int wrong;
    cr_assert_eq(dt_vadd_init(t.c, &v, 256), 0, "%s", cumod_last_detail());
    for (i = 0; i < 6; i++)
        cr_assert_eq(dt_vadd_run(t.c, &v, &gen, &wrong), CUMOD_OK, "%s",
                     cumod_last_detail());
    cr_expect_geq(dt_metric_until(port, "cumod_direct_launches_total", "",
                                  before + 5, 5000),
                  before + 5, "the ring went direct again");
    th_env_stop(&t);
    unlink(once);
}

/* --- domains ------------------------------------------------------------ */

/* A ring is read by its own domain's executor only: two domains (the
 * default and one of its own socket), a client in each launching
 * directly, each launch run by its domain's executor (the fake driver's
 * log names the process), and the counts in each. */
Test(direct, a_ring_is_served_only_by_its_own_domains_executor, .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    int port;
    char conf[300], url[320], text[400], ps[32];
    cumod_client *a = NULL;
    cumod_device_info dd, da;
    if (th_real_gpu())
        cr_skip_test("which process launched is read from the fake's log");

    th_env_init(&t, k);
    snprintf(url, sizeof(url), "ipc://%s/.tenant-a.sock", t.dir);
    snprintf(conf, sizeof(conf), "%s/.cumodd.conf", t.dir);
    snprintf(text, sizeof(text), "[domain tenant-a]\nlisten = %s\n", url);
    cr_assert_eq(th_write_file(conf, text), 0);
    port = th_free_port();
    snprintf(ps, sizeof(ps), "127.0.0.1:%d", port);
    th_env_start(
        &t,
        (const char *const[]){"--config", conf, "--metrics-listen", ps, NULL},
        NULL);
    cr_assert_eq(cumod_open(url, 10000, &a), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert(cumod_fast_path(a), "tenant-a's client has its ring");
    /* Told apart in the fake's log by their grids. */
    cumod_launch_params pa = dt_empty;
    pa.grid.x = 3;
    /* tenant-a's executor starts with its first session's work. */
    cr_assert_eq(cumod_launch(a, &pa, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_device_info_get(t.c, &dd), CUMOD_OK);
    cr_assert_eq(cumod_device_info_get(a, &da), CUMOD_OK);
    cr_assert_neq(dd.executor_pid, da.executor_pid,
                  "two domains, two executors (%u, %u)", dd.executor_pid,
                  da.executor_pid);
    enum { N = 100 };
    for (int i = 0; i < N; i++) {
        cr_assert_eq(cumod_launch(t.c, &dt_empty, NULL, NULL), CUMOD_OK, "%s",
                     cumod_last_detail());
        cr_assert_eq(cumod_launch(a, &pa, NULL, NULL), CUMOD_OK, "%s",
                     cumod_last_detail());
    }
    cr_expect_geq(dt_metric_until(port, "cumod_direct_launches_total", "",
                                  2 * (N - 1), 5000),
                  2 * (N - 1), "both went direct");
    char *fl = th_read_file(t.fake_log);
    cr_assert_not_null(fl);
    int mine[2] = {0, 0}, wrong = 0;
    for (char *l = fl; l != NULL && *l != '\0';) {
        char *end = strchr(l, '\n');
        if (end != NULL)
            *end = '\0';
        if (strncmp(l, "launch fn=empty", 15) == 0) {
            const char *p = strstr(l, " pid=");
            long pid = p ? atol(p + 5) : -1;
            int is_a = strstr(l, "grid=3,1,1") != NULL;
            if (pid == (long)(is_a ? da.executor_pid : dd.executor_pid))
                mine[is_a]++;
            else
                wrong++;
        }
        l = end ? end + 1 : NULL;
    }
    free(fl);
    cr_expect_eq(mine[0], N + 1,
                 "the default domain's launches, by its executor");
    cr_expect_eq(mine[1], N + 1, "tenant-a's launches, by its executor");
    cr_expect_eq(wrong, 0, "no launch ran in the other domain's executor");
    cr_expect_geq(dt_metric(port, "cumod_launches_total", "empty"), 2 * N);
    cumod_close(a);
    th_env_stop(&t);
}

/* --- the snapshot's timing ---------------------------------------------- */

/* A new generation (a load with new JIT options) is what the very next
 * launch runs, however soon it follows the load's answer: the executor's
 * submission threads read the ring while its dispatcher applies the
 * front's messages, so the front takes the old generation back in the
 * unit's direct page before it answers the load (Python's
 * test_a_prepared_launch_runs_the_modules_current_generation once saw the
 * old generation run after its load). Rounds of: direct launches, a load,
 * the next launch at once. */
Test(direct, a_new_generation_runs_from_the_very_next_launch, .timeout = 120)
{
    th_env t;
    int port;
    char src[512];
    cumod_buffer x;

    th_env_init(&t, NULL);
    snprintf(src, sizeof(src), "%s/scale_ptx.ptx", th_kernel_dir);
    th_env_put(&t, src, "scale_ptx.ptx");
    snprintf(src, sizeof(src), "127.0.0.1:%d", port = th_free_port());
    th_env_start(&t, (const char *const[]){"--metrics-listen", src, NULL},
                 NULL);
    cr_assert_eq(cumod_buffer_alloc(t.c, 1024, &x), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_arg args[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                        cumod_arg_i32(256)};
    cumod_launch_params p = {.kernel = "scale_ptx:scale",
                             .grid = {1, 1, 1},
                             .block = {256, 1, 1},
                             .args = args,
                             .nargs = 3};
    uint64_t gen = 0, want = 1;
    int stale = 0;
    enum { ROUNDS = 40 };
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < 5; i++)
            cr_assert_eq(cumod_launch(t.c, &p, NULL, &gen), CUMOD_OK, "%s",
                         cumod_last_detail());
        cr_assert_eq(gen, want, "round %d: generation %llu runs", r,
                     (unsigned long long)gen);
        cumod_jit_options jit = CUMOD_JIT_OPTIONS_INIT;
        jit.opt_level = r % 2 ? 3 : 1;
        cumod_module_result m;
        cr_assert_eq(cumod_module_load_jit(t.c, "scale_ptx", &jit, &m),
                     CUMOD_OK, "%s", cumod_last_detail());
        want = m.module.generation;
        cumod_module_result_fini(&m);
        cr_assert_eq(cumod_launch(t.c, &p, NULL, &gen), CUMOD_OK, "%s",
                     cumod_last_detail());
        stale += gen != want;
    }
    cr_expect_eq(stale, 0,
                 "%d of %d launches right after a load ran the old "
                 "generation",
                 stale, ROUNDS);
    cr_expect_gt(dt_metric(port, "cumod_direct_launches_total", ""), 0,
                 "launches went direct between the loads");
    th_env_stop(&t);
}
