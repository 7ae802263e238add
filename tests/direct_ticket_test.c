/* SPDX-License-Identifier: MIT */
/*
 * Launches answered when enqueued on the direct path (issue 33, point 7:
 * unbatched async launches): the executor launches them, answers each
 * with a ticket of its own and serves the Waits for them, while the
 * front keeps the guarantees of a ticket: a Wait returns once the work
 * completed, says why it failed, and a ticket never given is refused.
 * Against cumodd as a real process on the fake driver (and, built as
 * gpu_direct_ticket_test, on a GPU, where the sums are checked).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

#ifndef CUMOD_TEST_REAL_GPU
#define CUMOD_TEST_REAL_GPU 0
#endif
TH_SUITE_DRIVER(CUMOD_TEST_REAL_GPU);

static const cumod_launch_params tk_empty = {
    .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {32, 1, 1}};

/* cumodd on kernels, its metrics on *port. */
static void
tk_start(th_env *t, const char *const *kernels, const char *const *env,
         int *port)
{
    static char ps[32];
    *port = th_free_port();
    cr_assert_gt(*port, 0);
    snprintf(ps, sizeof(ps), "127.0.0.1:%d", *port);
    const char *args[] = {"--log-level", "debug", "--metrics-listen", ps, NULL};
    th_env_init(t, kernels);
    th_env_start(t, args, env);
}

/* The direct launches counted so far (once at least want, within 5 s). */
static double
tk_direct(int port, double want)
{
    double v = -1;
    for (int w = 0; w < 500; w++) {
        if ((v = th_metric_sum(port, "cumod_direct_launches_total", "")) >=
            want)
            return v;
        th_sleep_ms(10);
    }
    return v;
}

/* Launches answered when enqueued go direct: a ticket each, distinct and
 * rising; every Wait returns done; a ticket never given is refused by
 * name; and the launches are counted as the executor's. */
Test(direct_ticket, enqueued_launches_are_the_executors_with_its_tickets,
     .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    int port;
    tk_start(&t, k, NULL, &port);
    cr_assert(cumod_fast_path(t.c), "the client has its ring");
    /* The first launch goes through the front, which publishes the
     * module to the executor. */
    cr_assert_eq(cumod_launch(t.c, &tk_empty, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    double before = tk_direct(port, 0);
    enum { N = 300 };
    static cumod_ticket tk[N];
    for (int i = 0; i < N; i++) {
        cr_assert_eq(cumod_launch(t.c, &tk_empty, &tk[i], NULL), CUMOD_OK,
                     "launch %d: %s", i, cumod_last_detail());
        cr_assert_neq(tk[i], 0, "launch %d has a ticket", i);
        if (i > 0)
            cr_assert_gt(tk[i], tk[i - 1], "tickets rise: %llu after %llu",
                         (unsigned long long)tk[i],
                         (unsigned long long)tk[i - 1]);
    }
    for (int i = 0; i < N; i++)
        cr_assert_eq(cumod_wait(t.c, tk[i]), CUMOD_OK, "wait %d: %s", i,
                     cumod_last_detail());
    /* Waited again: still done (success is forgotten, not an error). */
    cr_expect_eq(cumod_wait(t.c, tk[0]), CUMOD_OK, "%s", cumod_last_detail());
    int rv = cumod_wait(t.c, tk[N - 1] + 1000);
    cr_expect_eq(rv, CUMOD_ENOENT, "a ticket never given: %s: %s",
                 cumod_errname(rv), cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "never given") != NULL, "%s",
              cumod_last_detail());
    double direct = tk_direct(port, before + N);
    cr_expect_geq(direct, before + N,
                  "the enqueued launches were the executor's: %.0f of %d",
                  direct - before, N);
    cr_expect_geq(th_metric_sum(port, "cumod_launches_total", "empty"), N + 1,
                  "every launch counted by module");
    char *log = th_daemon_log(&t.d);
    cr_expect_null(strstr(log, " error "), "%s", log);
    free(log);
    th_env_stop(&t);
}

typedef struct tk_waiter {
    cumod_client *c;
    cumod_ticket tk;
    int rv;
    _Atomic int done;
    char detail[512];
} tk_waiter;

static void *
tk_wait_main(void *arg)
{
    tk_waiter *w = arg;
    w->rv = cumod_wait(w->c, w->tk);
    snprintf(w->detail, sizeof(w->detail), "%s", cumod_last_detail());
    atomic_store(&w->done, 1);
    return NULL;
}

/* A launch held on the device (the fake driver holds it): its ticket comes
 * back at once, a Wait for it returns only once it completed, and the
 * answers of the two go to the right callers. */
Test(direct_ticket, a_wait_returns_once_its_launch_completed, .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    int port;
    if (th_real_gpu())
        cr_skip_test("holds a launch in the fake driver");
    tk_start(&t, k, NULL, &port);
    cr_assert_eq(cumod_launch(t.c, &tk_empty, NULL, NULL), CUMOD_OK);
    cr_assert_geq(tk_direct(port, 0), 0);
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    cumod_ticket held;
    cr_assert_eq(cumod_launch(t.c, &tk_empty, &held, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    tk_waiter w = {.c = t.c, .tk = held};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, tk_wait_main, &w), 0);
    th_sleep_ms(300);
    cr_expect_eq(atomic_load(&w.done), 0,
                 "the Wait is still waiting for the held launch");
    unlink(t.fake_hold);
    pthread_join(th, NULL);
    cr_expect_eq(w.rv, CUMOD_OK, "%s", w.detail);
    cr_expect_eq(cumod_wait(t.c, held), CUMOD_OK, "%s", cumod_last_detail());
    th_env_stop(&t);
}

/* The launch behind a ticket faults on the device: the ticket's Wait says
 * so (the context lost, the culprit named), whether it reached the
 * executor before its death or the front after; the session is served
 * again after. */
Test(direct_ticket, a_ticket_whose_launch_faulted_says_so, .timeout = 120)
{
    static const char *const k[] = {"empty", "vadd", NULL};
    char once[300], once_env[340];
    th_env t;
    int port, rv = CUMOD_OK;
    if (th_real_gpu())
        cr_skip_test("the fault is injected in the fake driver");
    const char *tmp = getenv("TMPDIR");
    snprintf(once, sizeof(once), "%s/cumod-ticket-fault-%d",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp", (int)getpid());
    unlink(once);
    snprintf(once_env, sizeof(once_env), "CUMOD_FAKE_FAULT_ONCE=%s", once);
    tk_start(&t, k,
             (const char *const[]){"CUMOD_FAKE_FAULT=launch:6", once_env, NULL},
             &port);
    cumod_ticket tk[5];
    for (int i = 0; i < 5; i++)
        cr_assert_eq(cumod_launch(t.c, &tk_empty, i == 0 ? NULL : &tk[i], NULL),
                     CUMOD_OK, "launch %d: %s", i, cumod_last_detail());
    for (int i = 1; i < 5; i++)
        cr_assert_eq(cumod_wait(t.c, tk[i]), CUMOD_OK, "%s",
                     cumod_last_detail());
    cr_assert_geq(tk_direct(port, 4), 4, "four went direct");
    cumod_ticket bad;
    rv = cumod_launch(t.c, &tk_empty, &bad, NULL);
    if (rv == CUMOD_OK)
        rv = cumod_wait(t.c, bad);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "the sixth faulted: %s: %s",
                 cumod_errname(rv), cumod_last_detail());
    const char *d = cumod_last_detail();
    cr_expect(strstr(d, "kernel empty of module empty") != NULL,
              "the answer names the culprit: %s", d);
    /* Served again, by a new executor, direct again. */
    cumod_buffer x;
    for (int w = 0; w < 1000; w++) {
        if ((rv = cumod_buffer_alloc(t.c, 64, &x)) == CUMOD_OK)
            break;
        th_sleep_ms(10);
    }
    cr_assert_eq(rv, CUMOD_OK, "served again: %s", cumod_last_detail());
    th_env_stop(&t);
    unlink(once);
}

/* A launch the driver refuses (cuLaunchKernel's error, after the ticket
 * was given: "enqueued" is checked and in the stream's order): the Wait
 * for its ticket reports the driver's error, once; the executor lives
 * on, and the next launches are served. */
Test(direct_ticket, a_launch_the_driver_refuses_fails_its_ticket,
     .timeout = 120)
{
    static const char *const k[] = {"empty", "vadd", NULL};
    th_env t;
    int port;
    if (th_real_gpu())
        cr_skip_test("the refusal is injected in the fake driver");
    tk_start(&t, k, (const char *const[]){"CUMOD_FAKE_FAULT=refuse:vadd", NULL},
             &port);
    cumod_buffer a;
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &a), CUMOD_OK);
    cumod_arg args[] = {cumod_arg_buffer(a, 0), cumod_arg_buffer(a, 0),
                        cumod_arg_buffer(a, 0), cumod_arg_i32(1024)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {4, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    /* The first through the front publishes the module. */
    int rv = cumod_launch(t.c, &p, NULL, NULL);
    cr_expect_eq(rv, CUMOD_EDRIVER, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    cr_assert_eq(cumod_launch(t.c, &tk_empty, NULL, NULL), CUMOD_OK);
    for (int i = 0; i < 3; i++) {
        cumod_ticket tk = 0;
        rv = cumod_launch(t.c, &p, &tk, NULL);
        cr_assert_eq(rv, CUMOD_OK, "enqueued: %s: %s", cumod_errname(rv),
                     cumod_last_detail());
        cr_expect_geq(tk, 1ull << 62, "the executor's ticket: %llu",
                      (unsigned long long)tk);
        rv = cumod_wait(t.c, tk);
        cr_expect_eq(rv, CUMOD_EDRIVER, "its Wait: %s: %s", cumod_errname(rv),
                     cumod_last_detail());
        cr_expect(strstr(cumod_last_detail(),
                         "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES") != NULL &&
                      strstr(cumod_last_detail(), "ticket ") != NULL,
                  "%s", cumod_last_detail());
        cr_expect_eq(cumod_wait(t.c, tk), CUMOD_OK,
                     "reported once, then forgotten: %s", cumod_last_detail());
    }
    cumod_ticket ok;
    cr_assert_eq(cumod_launch(t.c, &tk_empty, &ok, NULL), CUMOD_OK);
    cr_expect_eq(cumod_wait(t.c, ok), CUMOD_OK, "%s", cumod_last_detail());
    char *log = th_daemon_log(&t.d);
    cr_expect_null(strstr(log, "restart"), "the executor lived on: %s", log);
    free(log);
    th_env_stop(&t);
}

/* Waits held in the executor when it dies (SIGKILL, its launches held on
 * the device): the Wait parked on a launch answered when enqueued, and
 * the one for a posted launch after, each come back with the loss from
 * the front (which answers the parked Wait's slot and keeps the tickets'
 * loss), never hang; a third client's session is served again after. */
Test(direct_ticket, waits_parked_in_a_dying_executor_are_answered,
     .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    int port;
    if (th_real_gpu())
        cr_skip_test("holds launches in the fake driver");
    tk_start(&t, k, NULL, &port);
    cr_assert_eq(cumod_launch(t.c, &tk_empty, NULL, NULL), CUMOD_OK);
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK, "%s",
                 cumod_last_detail());
    pid_t exec_pid = (pid_t)di.executor_pid;
    cr_assert_gt(exec_pid, 0);
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    cumod_ticket acked, posted;
    cr_assert_eq(cumod_launch(t.c, &tk_empty, &acked, NULL), CUMOD_OK);
    cr_assert_geq(acked, 1ull << 62, "the executor's ticket");
    cr_assert_eq(cumod_launch_post(t.c, &tk_empty, NULL, &posted), CUMOD_OK);
    tk_waiter w = {.c = t.c, .tk = acked};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, tk_wait_main, &w), 0);
    th_sleep_ms(300);
    cr_assert_eq(atomic_load(&w.done), 0, "parked on the held launch");
    cr_assert_eq(kill(exec_pid, SIGKILL), 0);
    pthread_join(th, NULL);
    cr_expect_eq(w.rv, CUMOD_ECTXLOST, "the parked Wait says it was lost: %s",
                 w.detail);
    cr_expect(strstr(w.detail, "executor exited") != NULL, "%s", w.detail);
    unlink(t.fake_hold);
    int rv = cumod_wait(t.c, posted);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "the posted launch's Wait too: %s: %s",
                 cumod_errname(rv), cumod_last_detail());
    cumod_buffer x;
    for (int i = 0; i < 1000; i++) {
        if ((rv = cumod_buffer_alloc(t.c, 64, &x)) == CUMOD_OK)
            break;
        th_sleep_ms(10);
    }
    cr_expect_eq(rv, CUMOD_OK, "served again: %s", cumod_last_detail());
    cumod_ticket again;
    cr_expect_eq(cumod_launch(t.c, &tk_empty, &again, NULL), CUMOD_OK);
    cr_expect_eq(cumod_wait(t.c, again), CUMOD_OK, "%s", cumod_last_detail());
    th_env_stop(&t);
}

/* --- posted launches (cumod_launch_post) ------------------------------- */

#define TK_POSTED (1ull << 61)

/* Posted launches: each call returns with a ticket of its own request id
 * and the posted bit, without an answer; the first of a module not yet
 * loaded (served by the front, parked on the load) and the rest (the
 * executor's) all complete, their Waits done, the later launches the
 * executor's, and the vector add's sums right (on a GPU). */
Test(direct_ticket, posted_launches_complete_and_their_waits_say_so,
     .timeout = 120)
{
    static const char *const k[] = {"empty", "vadd", NULL};
    th_env t;
    int port;
    tk_start(&t, k, NULL, &port);
    cr_assert(cumod_fast_path(t.c));
    enum { N = 4096, L = 400 };
    static float x[N], out[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)i;
    cumod_buffer a, b, c;
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(x), &a), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(x), &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, sizeof(x), &c), CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t.c, a, 0, x, sizeof(x), 0), CUMOD_OK);
    cr_assert_eq(cumod_buffer_write(t.c, b, 0, x, sizeof(x), 0), CUMOD_OK);
    cumod_arg args[] = {cumod_arg_buffer(a, 0), cumod_arg_buffer(b, 0),
                        cumod_arg_buffer(c, 0), cumod_arg_i32(N)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {N / 256, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    /* vadd's first launch: the module is loaded on the way. */
    cumod_ticket first;
    cr_assert_eq(cumod_launch_post(t.c, &p, NULL, &first), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(first & TK_POSTED, TK_POSTED, "a posted ticket: %llx",
                 (unsigned long long)first);
    cr_assert_eq(cumod_wait(t.c, first), CUMOD_OK, "%s", cumod_last_detail());
    /* empty's first launch, through the front, publishes it too. */
    cr_assert_eq(cumod_launch(t.c, &tk_empty, NULL, NULL), CUMOD_OK);
    double before = tk_direct(port, 0);
    if (before < 0)
        before = 0; /* none counted yet */
    static cumod_ticket tk[L];
    for (int i = 0; i < L; i++) {
        cr_assert_eq(
            cumod_launch_post(t.c, i % 2 ? &p : &tk_empty, NULL, &tk[i]),
            CUMOD_OK, "post %d: %s", i, cumod_last_detail());
        cr_assert_eq(tk[i] & TK_POSTED, TK_POSTED);
        if (i > 0)
            cr_assert_gt(tk[i], tk[i - 1]);
    }
    /* Out of order, some twice. */
    for (int i = L - 1; i >= 0; i -= 3)
        cr_assert_eq(cumod_wait(t.c, tk[i]), CUMOD_OK, "wait %d: %s", i,
                     cumod_last_detail());
    for (int i = 0; i < L; i++)
        cr_assert_eq(cumod_wait(t.c, tk[i]), CUMOD_OK, "wait %d: %s", i,
                     cumod_last_detail());
    cr_expect_geq(tk_direct(port, before + L), before + L,
                  "the posted launches were the executor's");
    int rv = cumod_wait(t.c, tk[L - 1] + 1000);
    cr_expect_eq(rv, CUMOD_ENOENT, "a posted ticket never given: %s: %s",
                 cumod_errname(rv), cumod_last_detail());
    if (th_real_gpu()) {
        cr_assert_eq(cumod_buffer_read(t.c, c, 0, out, sizeof(out), 0),
                     CUMOD_OK);
        int wrong = 0;
        for (int i = 0; i < N; i++)
            wrong += out[i] != 2.0f * (float)i;
        cr_expect_eq(wrong, 0, "%d sums wrong", wrong);
    }
    char *log = th_daemon_log(&t.d);
    cr_expect_null(strstr(log, " error "), "%s", log);
    free(log);
    th_env_stop(&t);
}

/* A posted launch the checks refuse (no such module, a wrong argument
 * count, a freed buffer) returns a ticket all the same; the Wait for it
 * says why, by name, once; the launches posted after it are served. */
Test(direct_ticket, a_refused_posted_launch_fails_its_wait, .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    int port;
    tk_start(&t, k, NULL, &port);
    cumod_ticket ok;
    cr_assert_eq(cumod_launch_post(t.c, &tk_empty, NULL, &ok), CUMOD_OK);
    cr_assert_eq(cumod_wait(t.c, ok), CUMOD_OK, "%s", cumod_last_detail());
    cumod_launch_params nosuch = tk_empty;
    nosuch.kernel = "nosuch:empty";
    cumod_launch_params extra = tk_empty;
    cumod_arg one[] = {cumod_arg_i32(7)};
    extra.nargs = 1;
    extra.args = one;
    cumod_ticket bad1, bad2, after[20];
    cr_assert_eq(cumod_launch_post(t.c, &nosuch, NULL, &bad1), CUMOD_OK);
    cr_assert_eq(cumod_launch_post(t.c, &extra, NULL, &bad2), CUMOD_OK);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(cumod_launch_post(t.c, &tk_empty, NULL, &after[i]),
                     CUMOD_OK);
    int rv = cumod_wait(t.c, bad1);
    cr_expect_eq(rv, CUMOD_ENOENT, "no such module: %s: %s", cumod_errname(rv),
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "nosuch") != NULL, "%s",
              cumod_last_detail());
    rv = cumod_wait(t.c, bad2);
    cr_expect_eq(rv, CUMOD_EINVAL, "an argument too many: %s: %s",
                 cumod_errname(rv), cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "argument") != NULL, "%s",
              cumod_last_detail());
    cr_expect_eq(cumod_wait(t.c, bad2), CUMOD_OK, "reported once: %s",
                 cumod_last_detail());
    for (int i = 0; i < 20; i++)
        cr_expect_eq(cumod_wait(t.c, after[i]), CUMOD_OK, "after %d: %s", i,
                     cumod_last_detail());
    th_env_stop(&t);
}

/* Posted launches in flight when the executor dies of a fault: each one's
 * Wait says the context was lost, the culprit named; the session is
 * served after. */
Test(direct_ticket, posted_launches_lost_with_their_executor_say_so,
     .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    char once[300], once_env[340];
    th_env t;
    int port, rv;
    if (th_real_gpu())
        cr_skip_test("the fault is injected in the fake driver");
    const char *tmp = getenv("TMPDIR");
    snprintf(once, sizeof(once), "%s/cumod-posted-fault-%d",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp", (int)getpid());
    unlink(once);
    snprintf(once_env, sizeof(once_env), "CUMOD_FAKE_FAULT_ONCE=%s", once);
    tk_start(&t, k,
             (const char *const[]){"CUMOD_FAKE_FAULT=launch:8", once_env, NULL},
             &port);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(cumod_launch(t.c, &tk_empty, NULL, NULL), CUMOD_OK);
    cr_assert_geq(tk_direct(port, 4), 4);
    cumod_ticket tk[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cumod_launch_post(t.c, &tk_empty, NULL, &tk[i]), CUMOD_OK);
    int lost = 0, ok = 0;
    for (int i = 0; i < 3; i++) {
        rv = cumod_wait(t.c, tk[i]);
        ok += rv == CUMOD_OK;
        if (rv == CUMOD_ECTXLOST) {
            lost++;
            cr_expect(strstr(cumod_last_detail(), "empty") != NULL, "%s",
                      cumod_last_detail());
        }
    }
    /* The faulting launch and any behind it on the stream went with the
     * context; those that completed before are done. */
    cr_expect_eq(ok + lost, 3, "each Wait done or lost: %d and %d", ok, lost);
    cr_expect_geq(lost, 1, "the faulting one says the context was lost");
    cr_expect_eq(rv, CUMOD_ECTXLOST, "the last one was lost");
    cumod_buffer x;
    for (int w = 0; w < 1000; w++) {
        if ((rv = cumod_buffer_alloc(t.c, 64, &x)) == CUMOD_OK)
            break;
        th_sleep_ms(10);
    }
    cr_expect_eq(rv, CUMOD_OK, "served again: %s", cumod_last_detail());
    th_env_stop(&t);
    unlink(once);
}

/* Posted launches past the ring's slots and past --session-max-inflight
 * while the first are held on the device: none is refused (a posted
 * launch waits for room, its ring alone), all complete once let go. */
Test(direct_ticket, posted_launches_past_the_limits_wait_for_room,
     .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    if (th_real_gpu())
        cr_skip_test("holds launches in the fake driver");
    th_env_init(&t, k);
    th_env_start(&t, (const char *const[]){"--session-max-inflight", "8", NULL},
                 NULL);
    cr_assert_eq(cumod_launch(t.c, &tk_empty, NULL, NULL), CUMOD_OK);
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    enum { N = 300 };
    static cumod_ticket tk[N];
    for (int i = 0; i < N; i++)
        cr_assert_eq(cumod_launch_post(t.c, &tk_empty, NULL, &tk[i]), CUMOD_OK,
                     "post %d: %s", i, cumod_last_detail());
    th_sleep_ms(200);
    unlink(t.fake_hold);
    for (int i = 0; i < N; i++)
        cr_assert_eq(cumod_wait(t.c, tk[i]), CUMOD_OK, "wait %d: %s", i,
                     cumod_last_detail());
    char *fl = th_env_fake_log_wait(&t, "never", 100);
    cr_expect_eq(th_count(fl, "launch fn=empty"), N + 1,
                 "every posted launch ran once");
    free(fl);
    th_env_stop(&t);
}

/* Without a ring (CUMOD_NO_RING), a posted launch is an answered one: the
 * daemon's ticket, waited as any. */
Test(direct_ticket, a_posted_launch_without_a_ring_is_answered, .timeout = 60)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    int port;
    tk_start(&t, k, NULL, &port);
    cumod_client *n;
    setenv("CUMOD_NO_RING", "1", 1);
    int rv = cumod_open(t.d.url, 10000, &n);
    unsetenv("CUMOD_NO_RING");
    cr_assert_eq(rv, CUMOD_OK, "%s", cumod_last_detail());
    cr_assert(!cumod_fast_path(n));
    cumod_ticket tk;
    cr_assert_eq(cumod_launch_post(n, &tk_empty, NULL, &tk), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_eq(tk & TK_POSTED, 0, "the daemon's ticket: %llx",
                 (unsigned long long)tk);
    cr_expect_eq(cumod_wait(n, tk), CUMOD_OK, "%s", cumod_last_detail());
    cumod_launch_params nosuch = tk_empty;
    nosuch.kernel = "nosuch:empty";
    rv = cumod_launch_post(n, &nosuch, NULL, &tk);
    cr_expect_eq(rv, CUMOD_ENOENT, "refused at once over the connection: %s",
                 cumod_errname(rv));
    cumod_close(n);
    th_env_stop(&t);
}

typedef struct tk_client {
    const char *url;
    int post; /* cumod_launch_post, else cumod_launch with a ticket */
    int launches, failed;
    char detail[512];
} tk_client;

/* Launches a vadd answered when enqueued, waits, checks the sum (on a
 * GPU), over and over. */
static void *
tk_client_main(void *arg)
{
    tk_client *w = arg;
    cumod_client *c;
    enum { N = 4096 };
    static _Thread_local float x[N], y[N], out[N];
    cumod_buffer a, b, s;
    if (cumod_open(w->url, 20000, &c) != CUMOD_OK) {
        w->failed++;
        snprintf(w->detail, sizeof(w->detail), "%s", cumod_last_detail());
        return NULL;
    }
    for (int i = 0; i < N; i++) {
        x[i] = (float)i;
        y[i] = 0.5f * (float)i;
    }
    if (cumod_buffer_alloc(c, sizeof(x), &a) != CUMOD_OK ||
        cumod_buffer_alloc(c, sizeof(x), &b) != CUMOD_OK ||
        cumod_buffer_alloc(c, sizeof(x), &s) != CUMOD_OK ||
        cumod_buffer_write(c, a, 0, x, sizeof(x), 0) != CUMOD_OK ||
        cumod_buffer_write(c, b, 0, y, sizeof(y), 0) != CUMOD_OK) {
        w->failed++;
        snprintf(w->detail, sizeof(w->detail), "setup: %s",
                 cumod_last_detail());
        cumod_close(c);
        return NULL;
    }
    cumod_arg args[] = {cumod_arg_buffer(a, 0), cumod_arg_buffer(b, 0),
                        cumod_arg_buffer(s, 0), cumod_arg_i32(N)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {N / 256, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    for (int round = 0; round < 40 && w->failed == 0; round++) {
        cumod_ticket tk[8];
        int rv = CUMOD_OK;
        for (int i = 0; i < 8 && rv == CUMOD_OK; i++)
            rv = w->post ? cumod_launch_post(c, &p, NULL, &tk[i])
                         : cumod_launch(c, &p, &tk[i], NULL);
        for (int i = 7; i >= 0 && rv == CUMOD_OK; i--)
            rv = cumod_wait(c, tk[i]);
        if (rv == CUMOD_OK && th_real_gpu()) {
            memset(out, 0, sizeof(out));
            rv = cumod_buffer_read(c, s, 0, out, sizeof(out), 0);
            for (int i = 0; i < N && rv == CUMOD_OK; i++)
                if (out[i] != 1.5f * (float)i) {
                    rv = -1;
                    snprintf(w->detail, sizeof(w->detail),
                             "element %d is %g, not %g", i, out[i],
                             1.5f * (float)i);
                }
        }
        if (rv != CUMOD_OK) {
            w->failed++;
            if (rv != -1)
                snprintf(w->detail, sizeof(w->detail), "%s: %s",
                         cumod_errname(rv), cumod_last_detail());
            break;
        }
        w->launches += 8;
    }
    cumod_close(c);
    return NULL;
}

/* Many clients at once, each launching vector adds answered when
 * enqueued (half of them posted) and waiting for them out of order: every Wait
 * done, every sum right (on a GPU), and the launches the executor's. */
Test(direct_ticket, many_clients_wait_for_their_own_tickets, .timeout = 180)
{
    static const char *const k[] = {"vadd", NULL};
    th_env t;
    int port;
    tk_start(&t, k, NULL, &port);
    enum { C = 6 };
    tk_client w[C];
    pthread_t th[C];
    for (int i = 0; i < C; i++) {
        w[i] = (tk_client){.url = t.d.url, .post = i % 2};
        cr_assert_eq(pthread_create(&th[i], NULL, tk_client_main, &w[i]), 0);
    }
    int launches = 0;
    for (int i = 0; i < C; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(w[i].failed, 0, "client %d: %s", i, w[i].detail);
        launches += w[i].launches;
    }
    cr_expect_eq(launches, C * 40 * 8);
    cr_expect_geq(tk_direct(port, launches / 2), launches / 2,
                  "most launches were the executor's");
    th_env_stop(&t);
}
