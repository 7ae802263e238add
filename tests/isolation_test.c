/* SPDX-License-Identifier: MIT */
/*
 * No client's waiting takes the service from the others. cumodd runs as a
 * real process on tests/fakecuda, which can hold the work of named kernels
 * (CUMOD_FAKE_HOLD lists them) and hold module loads (CUMOD_FAKE_LOAD_HOLD)
 * while everything else runs:
 *   - 200 clients blocked on launches that do not complete leave another
 *     client's status answered at once (the front used to have 16 receive
 *     contexts: a 16th waiting client silenced it);
 *   - a session freeing buffers, destroying a stream or disconnecting
 *     behind its held work leaves two other sessions' launches running
 *     (the executor used to drain the session's streams on the thread that
 *     submits everyone's work);
 *   - a module load in progress (a slow JIT) leaves other launches running
 *     (it used to run on that same thread).
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

TH_SUITE_DRIVER(0);

typedef th_env it;

static int
it_launches_in_log(it *t, const char *fn)
{
    char *log = th_read_file(t->fake_log), pat[64];
    snprintf(pat, sizeof(pat), "launch fn=%s ", fn);
    int n = log ? th_count(log, pat) : 0;
    free(log);
    return n;
}

/* A launch of empty:empty, answered when complete, by its own client. */
typedef struct it_blocked {
    const char *url;
    atomic_int *done;
    int rv;
    char detail[256];
} it_blocked;

static void *
it_blocked_main(void *arg)
{
    it_blocked *b = arg;
    cumod_client *c;
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    b->rv = cumod_open(b->url, 60000, &c);
    if (b->rv == CUMOD_OK) {
        b->rv = cumod_launch(c, &p, NULL, NULL);
        snprintf(b->detail, sizeof(b->detail), "%s", cumod_last_detail());
        cumod_close(c);
    } else {
        snprintf(b->detail, sizeof(b->detail), "open: %s", cumod_last_detail());
    }
    atomic_fetch_add(b->done, 1);
    return NULL;
}

Test(isolation, two_hundred_waiting_clients_leave_status_answered,
     .timeout = 120)
{
    enum { N = 200 };
    static const char *const k[] = {"empty", NULL};
    it t;
    pthread_t th[N];
    it_blocked b[N];
    atomic_int done = 0;

    th_env_init(&t, k);
    cr_assert_eq(th_write_file(t.fake_hold, ""),
                 0); /* empty: every launch is held */
    th_env_start(&t, NULL, NULL);
    for (int i = 0; i < N; i++) {
        b[i] = (it_blocked){.url = t.d.url, .done = &done};
        cr_assert_eq(pthread_create(&th[i], NULL, it_blocked_main, &b[i]), 0);
    }
    for (int w = 0; w < 3000 && it_launches_in_log(&t, "empty") < N; w++)
        th_sleep_ms(10);
    if (it_launches_in_log(&t, "empty") != N) {
        char *dlog = th_daemon_log(&t.d);
        char why[512] = "";
        for (int i = 0; i < N && !why[0]; i++)
            if (b[i].rv != CUMOD_OK && atomic_load(&done) > 0)
                snprintf(why, sizeof(why), "client %d: %s: %s", i,
                         cumod_errname(b[i].rv), b[i].detail);
        cr_assert_fail("%d of %d launches reached the driver; %d clients "
                       "returned (%s); the daemon's log:\n%s",
                       it_launches_in_log(&t, "empty"), N, atomic_load(&done),
                       why, dlog);
    }
    cr_expect_eq(atomic_load(&done), 0, "none of them has completed");

    /* A new client: its status is answered while all of them wait. */
    cumod_client *c;
    cumod_device_info di;
    cr_assert_eq(cumod_open(t.d.url, 5000, &c), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(cumod_device_info_get(c, &di), CUMOD_OK,
                 "status answered with %d clients waiting: %s", N,
                 cumod_last_detail());
    cumod_close(c);
    const char *args[] = {"--timeout", "5000", "status", NULL};
    char *out = NULL;
    cr_expect_eq(th_ctl(&t.d, args, &out, NULL), 0, "cumodctl status too");
    free(out);

    unlink(t.fake_hold);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(b[i].rv, CUMOD_OK, "client %d: %s", i, b[i].detail);
    }
    th_env_stop(&t);
}

/* Launches of vadd:vadd on their own buffers, answered when complete. */
typedef struct it_runner {
    const char *url;
    int launches;
    int ok;
    char detail[256];
} it_runner;

static void *
it_runner_main(void *arg)
{
    it_runner *r = arg;
    cumod_client *c;
    cumod_buffer a, b, out;
    if (cumod_open(r->url, 5000, &c) != CUMOD_OK ||
        cumod_buffer_alloc(c, 4096, &a) != CUMOD_OK ||
        cumod_buffer_alloc(c, 4096, &b) != CUMOD_OK ||
        cumod_buffer_alloc(c, 4096, &out) != CUMOD_OK) {
        snprintf(r->detail, sizeof(r->detail), "%s", cumod_last_detail());
        return NULL;
    }
    cumod_arg args[] = {cumod_arg_buffer(a, 0), cumod_arg_buffer(b, 0),
                        cumod_arg_buffer(out, 0), cumod_arg_i32(1024)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {4, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    for (int i = 0; i < r->launches; i++) {
        if (cumod_launch(c, &p, NULL, NULL) != CUMOD_OK) {
            snprintf(r->detail, sizeof(r->detail), "launch %d: %s", i,
                     cumod_last_detail());
            break;
        }
        r->ok++;
    }
    cumod_close(c);
    return NULL;
}

/* Two sessions launching 20 times each while something else waits: both
 * finish, each within its client's 5 s timeout. */
static void
it_two_others_run(it *t)
{
    pthread_t th[2];
    it_runner r[2];
    for (int i = 0; i < 2; i++) {
        r[i] = (it_runner){.url = t->d.url, .launches = 20};
        cr_assert_eq(pthread_create(&th[i], NULL, it_runner_main, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(r[i].ok, 20, "session %d: %d of 20 launches: %s", i,
                     r[i].ok, r[i].detail);
    }
}

static int
it_freed(it *t, uint64_t ptr)
{
    char *log = th_read_file(t->fake_log), pat[64];
    snprintf(pat, sizeof(pat), "free ptr=0x%llx ", (unsigned long long)ptr);
    int n = log ? th_count(log, pat) : 0;
    free(log);
    return n;
}

/* cumod on kernels k with scale's launches held and vadd resident (a
 * module load waits for work in flight, held here, to end: that would be
 * the loading session's wait, not a stall of the others). */
static void
it_start_scale_held(it *t, const char *const *k)
{
    static const char *const pin[] = {"--pin", "vadd", NULL};
    cumod_module_result mr;
    th_env_init(t, k);
    cr_assert_eq(th_write_file(t->fake_hold, "scale\n"),
                 0); /* only scale's launches are held */
    th_env_start(t, pin, NULL);
    cr_assert_eq(cumod_module_load(t->c, "vadd", &mr), CUMOD_OK);
    cumod_module_result_fini(&mr);
}

/* scale:scale on buffer x of c, on stream s, answered when enqueued: it
 * is held. Its ticket. */
static cumod_ticket
it_scale_held(cumod_client *c, cumod_buffer x, cumod_stream s)
{
    cumod_arg args[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                        cumod_arg_i32(16)};
    cumod_launch_params p = {.kernel = "scale:scale",
                             .grid = {1, 1, 1},
                             .block = {16, 1, 1},
                             .stream = s,
                             .nargs = 3,
                             .args = args};
    cumod_ticket tk = 0;
    cr_assert_eq(cumod_launch(c, &p, &tk, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    return tk;
}

Test(isolation, frees_and_closes_behind_held_work_stall_no_other_session,
     .timeout = 120)
{
    static const char *const k[] = {"vadd", "scale", NULL};
    it t;
    cumod_client *a, *d;
    cumod_buffer x, y, z;
    cumod_stream s;
    cumod_ticket tk;

    it_start_scale_held(&t, k);

    /* Session A: held work on its default stream, then a free. */
    cr_assert_eq(cumod_open(t.d.url, 5000, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(a, 12345, &x), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(a, 23456, &y), CUMOD_OK);
    tk = it_scale_held(a, x, 0);
    cr_assert_eq(cumod_buffer_free(a, y), CUMOD_OK,
                 "the free is answered behind held work: %s",
                 cumod_last_detail());
    uint64_t yptr = th_env_alloc_ptr(&t, 23456);
    cr_assert_neq(yptr, 0);

    /* Session D: held work on a stream it destroys, then it disconnects
     * with a buffer still allocated. */
    cr_assert_eq(cumod_open(t.d.url, 5000, &d), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(d, 34567, &z), CUMOD_OK);
    cr_assert_eq(cumod_stream_create(d, &s), CUMOD_OK);
    (void)it_scale_held(d, z, s);
    cr_assert_eq(cumod_stream_destroy(d, s), CUMOD_OK, "%s",
                 cumod_last_detail());
    uint64_t zptr = th_env_alloc_ptr(&t, 34567);
    cumod_close(d);

    /* Meanwhile two other sessions run to completion. */
    it_two_others_run(&t);
    cr_expect_eq(it_launches_in_log(&t, "vadd"), 40);

    /* The frees are stream-ordered: nothing freed under held work. */
    cr_expect_eq(it_freed(&t, yptr), 0,
                 "A's buffer is not freed before A's held kernel ends");
    cr_expect_eq(it_freed(&t, zptr), 0,
                 "D's buffer is not freed before D's held kernel ends");

    /* Released: A's work completes, and both frees happen after it. */
    unlink(t.fake_hold);
    cr_expect_eq(cumod_wait(a, tk), CUMOD_OK, "%s", cumod_last_detail());
    for (int w = 0; w < 500 && (!it_freed(&t, yptr) || !it_freed(&t, zptr));
         w++)
        th_sleep_ms(10);
    cr_expect_eq(it_freed(&t, yptr), 1, "A's buffer freed once its work ran");
    cr_expect_eq(it_freed(&t, zptr), 1, "D's buffer freed after it left");
    cumod_close(a);
    th_env_stop(&t);
}

typedef struct it_lazy {
    const char *url;
    atomic_int done;
    int rv;
    char detail[256];
} it_lazy;

static void *
it_lazy_main(void *arg)
{
    it_lazy *l = arg;
    cumod_client *c = NULL;
    cumod_buffer x;
    l->rv = cumod_open(l->url, 60000, &c);
    if (l->rv == CUMOD_OK &&
        (l->rv = cumod_buffer_alloc(c, 64, &x)) == CUMOD_OK) {
        cumod_arg args[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                            cumod_arg_i32(16)};
        cumod_launch_params p = {.kernel = "scale:scale",
                                 .grid = {1, 1, 1},
                                 .block = {16, 1, 1},
                                 .nargs = 3,
                                 .args = args};
        l->rv = cumod_launch(c, &p, NULL, NULL);
    }
    snprintf(l->detail, sizeof(l->detail), "%s", cumod_last_detail());
    if (c != NULL)
        cumod_close(c);
    atomic_store(&l->done, 1);
    return NULL;
}

Test(isolation, a_module_load_in_progress_stalls_no_launch, .timeout = 120)
{
    static const char *const k[] = {"vadd", "scale", NULL};
    static const char *const pin[] = {"--pin", "vadd", NULL};
    char load_hold[320], env_load[400];
    it t;
    pthread_t th;
    it_lazy l = {0};

    th_env_init(&t, k);
    snprintf(load_hold, sizeof(load_hold), "%s/.load-hold", t.dir);
    snprintf(env_load, sizeof(env_load), "CUMOD_FAKE_LOAD_HOLD=%s", load_hold);
    const char *env[] = {env_load, NULL};
    th_env_start(&t, pin, env);
    cumod_module_result mr;
    cr_assert_eq(cumod_module_load(t.c, "vadd", &mr), CUMOD_OK,
                 "vadd is resident (pinned)");
    cumod_module_result_fini(&mr);

    /* From now on module loads hang in the driver, like a long JIT. */
    cr_assert_eq(th_write_file(load_hold, ""), 0);
    l.url = t.d.url;
    cr_assert_eq(pthread_create(&th, NULL, it_lazy_main, &l), 0);
    char *log = NULL;
    for (int w = 0; w < 500; w++) {
        free(log);
        log = th_read_file(t.fake_log);
        if (log && strstr(log, "load-waiting") != NULL)
            break;
        th_sleep_ms(10);
    }
    cr_assert(log && strstr(log, "load-waiting") != NULL,
              "scale's load reached the driver and waits there:\n%s", log);
    free(log);

    it_two_others_run(&t);
    cr_expect_eq(atomic_load(&l.done), 0,
                 "the launch that needs the load still waits for it");

    unlink(load_hold);
    pthread_join(th, NULL);
    cr_expect_eq(l.rv, CUMOD_OK, "it runs once the load is done: %s", l.detail);
    th_env_stop(&t);
}

Test(isolation, a_load_waits_for_kernels_already_running_and_holds_no_one,
     .timeout = 120)
{
    static const char *const k[] = {"vadd", "scale", "empty", NULL};
    it t;
    cumod_client *a;
    cumod_buffer x;
    cumod_ticket tk;
    pthread_t th;

    it_start_scale_held(&t, k);
    cr_assert_eq(cumod_open(t.d.url, 5000, &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(a, 64, &x), CUMOD_OK);
    tk = it_scale_held(a, x, 0);

    /* empty is not resident: its load waits for scale's held kernel (a
     * load during it would hold every launch until it ends), and only the
     * launch that needs empty waits. */
    it_blocked b = {.url = t.d.url};
    atomic_int done = 0;
    b.done = &done;
    cr_assert_eq(pthread_create(&th, NULL, it_blocked_main, &b), 0);
    it_two_others_run(&t);
    cr_expect_eq(atomic_load(&done), 0,
                 "empty's first launch waits for its load");
    char *log = th_read_file(t.fake_log);
    cr_expect(log && strstr(log, "functions=empty") == NULL,
              "empty is not loaded while scale's kernel runs:\n%s", log);
    free(log);

    unlink(t.fake_hold);
    pthread_join(th, NULL);
    cr_expect_eq(b.rv, CUMOD_OK, "it runs once loaded: %s", b.detail);
    cr_expect_eq(cumod_wait(a, tk), CUMOD_OK);
    cumod_close(a);
    th_env_stop(&t);
}
