/* SPDX-License-Identifier: MIT */
/*
 * A kernel that faults or hangs costs only its own work, never the
 * service. cumodd runs as a real process on tests/fakecuda, which faults
 * every launch of an image that carries a marker function
 * (CUMOD_FAKE_FAULT=poison:cumod_fake_poison; tests/kernels/bad/vadd.cu
 * is such an image of vadd), holds the launches of named kernels
 * (CUMOD_FAKE_HOLD: a launch that never completes until released), and
 * crashes at cuInit while a file exists (CUMOD_FAKE_CRASH):
 *   - a fault with one launch in flight names its culprit (kernel, module
 *     generation, SHA-256, session) in the answer and one CUMOD-FAULT log
 *     line, and quarantines it: its next launches fail at once with
 *     CUMOD_EQUARANTINED, with no further recovery; unquarantine lifts it,
 *     new bytes start clean;
 *   - a fault with several kernels in flight blames nobody; each suspect's
 *     next launch runs alone, which pins the culprit down; a client looping
 *     on a faulting kernel costs the others two recoveries, not one per
 *     launch;
 *   - a generation that served without fault serves again (rollback) when
 *     the one after it is quarantined;
 *   - a launch past its deadline answers CUMOD_ETIMEDOUT naming the kernel
 *     and the deadline, the others in flight CUMOD_ECTXLOST, and the
 *     service goes on;
 *   - status answers while the executor is stopped (SIGSTOP), says it is
 *     stuck, and the executor is replaced after --stuck-timeout;
 *   - SIGKILL of the executor mid-batch: the batch fails, the session's
 *     buffers answer CUMOD_ECTXLOST until freed, the service goes on;
 *   - an executor that crashes at every start backs off, says
 *     crash-looping, and serves again once the cause is gone;
 *   - SIGTERM with a stopped executor and work held exits 0 within the
 *     drain timeout and its grace.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(0);

#define BAD_VADD CUMOD_TEST_BAD_KERNEL_DIR "/vadd.cubin"
#define GOOD_VADD CUMOD_TEST_KERNEL_DIR "/vadd.cubin"
#define POISON "CUMOD_FAKE_FAULT=poison:cumod_fake_poison"

typedef th_env ft;

/* How many executors have started (each logs "init" to the fake's log). */
static int
ft_inits(ft *t)
{
    char *log = th_read_file(t->fake_log);
    int n = log ? th_count(log, "init sm=") : 0;
    free(log);
    return n;
}

static int
ft_log_count(ft *t, const char *needle)
{
    char *log = th_daemon_log(&t->d);
    int n = log ? th_count(log, needle) : 0;
    free(log);
    return n;
}

/* The daemon's log line holding needle (a copy), or NULL. */
static char *
ft_log_line(ft *t, const char *needle)
{
    char *log = th_daemon_log(&t->d), *p, *line = NULL;
    if (log != NULL && (p = strstr(log, needle)) != NULL) {
        char *b = p, *e = strchr(p, '\n');
        while (b > log && b[-1] != '\n')
            b--;
        line = strndup(b, e ? (size_t)(e - b) : strlen(b));
    }
    free(log);
    return line;
}

/* Puts src into the folder as name with a rename, and waits until the
 * daemon has read those bytes (ls shows sha256 changed from before). */
static void
ft_replace(ft *t, const char *src, const char *name)
{
    char tmp[320], dst[320], mod[64];
    cumod_module_list *l;
    char before[65] = "";

    snprintf(mod, sizeof(mod), "%.*s", (int)(strchr(name, '.') - name), name);
    if (cumod_modules_list(t->c, &l) == CUMOD_OK) {
        for (size_t i = 0; i < l->count; i++)
            if (strcmp(l->modules[i].name, mod) == 0)
                snprintf(before, sizeof(before), "%s", l->modules[i].sha256);
        cumod_module_list_free(l);
    }
    th_env_put(t, src, ".incoming");
    snprintf(tmp, sizeof(tmp), "%s/.incoming", t->dir);
    snprintf(dst, sizeof(dst), "%s/%s", t->dir, name);
    cr_assert_eq(rename(tmp, dst), 0);
    for (int w = 0; w < 500; w++) {
        int seen = 0;
        if (cumod_modules_list(t->c, &l) == CUMOD_OK) {
            for (size_t i = 0; i < l->count; i++)
                if (strcmp(l->modules[i].name, mod) == 0 &&
                    l->modules[i].sha256[0] &&
                    strcmp(l->modules[i].sha256, before) != 0)
                    seen = 1;
            cumod_module_list_free(l);
        }
        if (seen)
            return;
        th_sleep_ms(10);
    }
    cr_assert_fail("the daemon never read the new %s", name);
}

/* The module's info from ls (the caller frees its strings with
 * cumod_module_result_fini on a wrapper), as a result for convenience. */
static cumod_module_result
ft_module(ft *t, const char *name)
{
    cumod_module_detail *d;
    cumod_module_result r;
    memset(&r, 0, sizeof(r));
    cr_assert_eq(cumod_module_show(t->c, name, &d), CUMOD_OK, "%s",
                 cumod_last_detail());
    r.module = d->module;
    memset(&d->module, 0, sizeof(d->module)); /* moved */
    cumod_module_detail_free(d);
    return r;
}

/* vadd of module mod on three fresh buffers of c; the launch's result. */
typedef struct ft_vadd {
    cumod_buffer a, b, out;
    cumod_arg args[4];
    cumod_launch_params p;
} ft_vadd;

static void
ft_vadd_init(ft_vadd *v, cumod_client *c, const char *kernel)
{
    memset(v, 0, sizeof(*v));
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &v->a), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &v->b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &v->out), CUMOD_OK);
    v->args[0] = cumod_arg_buffer(v->a, 0);
    v->args[1] = cumod_arg_buffer(v->b, 0);
    v->args[2] = cumod_arg_buffer(v->out, 0);
    v->args[3] = cumod_arg_i32(1024);
    v->p = (cumod_launch_params){.kernel = kernel,
                                 .grid = {4, 1, 1},
                                 .block = {256, 1, 1},
                                 .nargs = 4,
                                 .args = v->args};
}

/* Waits (up to 10 s) for c to be served again after a restart: a fresh
 * allocation works. */
static void
ft_served_again(cumod_client *c)
{
    cumod_buffer x;
    for (int i = 0; i < 1000; i++) {
        if (cumod_buffer_alloc(c, 64, &x) == CUMOD_OK) {
            cumod_buffer_free(c, x);
            return;
        }
        th_sleep_ms(10);
    }
    cr_assert_fail("not served again: %s", cumod_last_detail());
}

/* Starts cumod on vadd, empty and a module bad (the bad vadd image). */
static void
ft_start_bad(ft *t, const char *const *extra, const char *const *env)
{
    static const char *const k[] = {"vadd", "empty", NULL};
    th_env_init(t, k);
    th_env_put(t, BAD_VADD, "bad.cubin");
    th_env_start(t, extra, env);
}

Test(fault, one_launch_in_flight_is_the_culprit_and_is_quarantined,
     .timeout = 120)
{
    static const char *const env[] = {POISON, NULL};
    ft t;
    ft_vadd v;
    uint64_t gen = 0;

    ft_start_bad(&t, NULL, env);
    ft_vadd_init(&v, t.c, "bad:vadd");
    int rv = cumod_launch(t.c, &v.p, NULL, &gen);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    const char *d = cumod_last_detail();
    cr_expect(strstr(d, "CUDA_ERROR_ILLEGAL_ADDRESS") != NULL, "%s", d);
    cr_expect(strstr(d, "kernel vadd of module bad (generation 1") != NULL,
              "the answer names the culprit: %s", d);
    cr_expect(strstr(d, "quarantined") != NULL, "%s", d);

    /* One log line, with a stable tag, names kernel, generation, bytes
     * and session. */
    cumod_module_result bad = ft_module(&t, "bad");
    char *line = ft_log_line(&t, "CUMOD-FAULT");
    cr_assert_not_null(line, "a CUMOD-FAULT line is logged");
    char pid[32], uid[32];
    snprintf(pid, sizeof(pid), "pid %d ", (int)getpid());
    snprintf(uid, sizeof(uid), "uid %d", (int)getuid());
    cr_expect(strstr(line, "kernel vadd of module bad generation 1") != NULL,
              "%s", line);
    cr_expect(strstr(line, bad.module.quarantined_sha256) != NULL &&
                  bad.module.quarantined_sha256[0],
              "the full SHA-256 (%s): %s", bad.module.quarantined_sha256, line);
    cr_expect(strstr(line, pid) && strstr(line, uid), "%s", line);
    free(line);
    cr_expect_eq(ft_log_count(&t, "CUMOD-FAULT"), 1);

    /* ls and show say it is quarantined, and why. */
    cr_expect(bad.module.quarantined);
    cr_expect_str_eq(bad.module.state, "quarantined");
    cr_expect(
        bad.module.quarantine_reason &&
            strstr(bad.module.quarantine_reason, "CUDA_ERROR_ILLEGAL_ADDRESS"),
        "%s", bad.module.quarantine_reason);
    cr_expect_eq(bad.module.faults, 1);
    cumod_module_result_fini(&bad);
    const char *ls[] = {"ls", NULL};
    char *out = NULL;
    cr_expect_eq(th_ctl(&t.d, ls, &out, NULL), 0);
    cr_expect(out && strstr(out, "quarantined"), "%s", out);
    free(out);

    /* Its next launches fail at once, naming the fault, and cost nobody a
     * recovery. */
    ft_served_again(t.c);
    int inits = ft_inits(&t);
    cr_expect_eq(inits, 2, "one restart");
    ft_vadd_init(&v, t.c, "bad:vadd");
    for (int i = 0; i < 20; i++) {
        rv = cumod_launch(t.c, &v.p, NULL, NULL);
        cr_assert_eq(rv, CUMOD_EQUARANTINED, "launch %d: %s: %s", i,
                     cumod_errname(rv), cumod_last_detail());
    }
    d = cumod_last_detail();
    cr_expect(strstr(d, "quarantined") && strstr(d, "CUDA_ERROR_") &&
                  strstr(d, "cumodctl unquarantine bad"),
              "%s", d);
    cr_expect_eq(ft_inits(&t), inits, "no further restart");
    /* Other modules are served. */
    ft_vadd v2;
    ft_vadd_init(&v2, t.c, "vadd:vadd");
    cr_expect_eq(cumod_launch(t.c, &v2.p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());

    /* unquarantine lifts it: the same bytes fault again, once. */
    const char *uq[] = {"unquarantine", "bad", NULL};
    cr_expect_eq(th_ctl(&t.d, uq, &out, NULL), 0);
    cr_expect(out && strstr(out, "bad: quarantine lifted"), "%s", out);
    free(out);
    rv = cumod_launch(t.c, &v.p, NULL, NULL);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    ft_served_again(t.c);
    ft_vadd_init(&v, t.c, "bad:vadd");
    cr_expect_eq(cumod_launch(t.c, &v.p, NULL, NULL), CUMOD_EQUARANTINED);

    /* New bytes start clean. */
    ft_replace(&t, GOOD_VADD, "bad.cubin");
    rv = cumod_launch(t.c, &v.p, NULL, &gen);
    cr_expect_eq(rv, CUMOD_OK, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    bad = ft_module(&t, "bad");
    cr_expect(!bad.module.quarantined);
    cr_expect_eq(bad.module.quarantined_sha256[0], '\0');
    cumod_module_result_fini(&bad);
    th_env_stop(&t);
}

Test(fault, a_fault_met_by_another_call_is_attributed_all_the_same,
     .timeout = 120)
{
    static const char *const env[] = {POISON, NULL};
    ft t;
    ft_vadd v;
    cumod_ticket tk;

    ft_start_bad(&t, NULL, env);
    ft_vadd_init(&v, t.c, "bad:vadd");
    /* Answered once enqueued: whichever of the executor's calls meets the
     * sticky error first (the completion's query, the allocations that
     * follow) reports it. */
    cr_assert_eq(cumod_launch(t.c, &v.p, &tk, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    for (int i = 0; i < 20; i++) {
        cumod_buffer x;
        if (cumod_buffer_alloc(t.c, 64, &x) != CUMOD_OK)
            break;
    }
    int rv = cumod_wait(t.c, tk);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    if (!strstr(cumod_last_detail(), "kernel vadd of module bad")) {
        /* Seen once under ASan on a loaded machine: keep what the daemon
         * said, to tell which of its calls met the fault. */
        char *log = th_daemon_log(&t.d);
        cr_expect_fail("%s\ncumodd's log:\n%s", cumod_last_detail(), log);
        free(log);
    }
    char *line = ft_log_line(&t, "CUMOD-FAULT");
    cr_expect(line && strstr(line, "the culprit is kernel vadd of module bad"),
              "%s", line);
    free(line);
    ft_served_again(t.c);
    cumod_module_result r = ft_module(&t, "bad");
    cr_expect(r.module.quarantined);
    cumod_module_result_fini(&r);
    th_env_stop(&t);
}

Test(fault, a_good_generation_serves_again_when_the_next_is_quarantined,
     .timeout = 120)
{
    static const char *const env[] = {POISON, NULL};
    static const char *const k[] = {"vadd", NULL};
    ft t;
    ft_vadd v;
    uint64_t gen = 0;

    th_env_init(&t, k);
    th_env_start(&t, NULL, env);
    ft_vadd_init(&v, t.c, "vadd:vadd");
    cr_assert_eq(cumod_launch(t.c, &v.p, NULL, &gen), CUMOD_OK);
    cr_expect_eq(gen, 1);
    cumod_module_result good = ft_module(&t, "vadd");

    /* Generation 2: bytes that fault. */
    ft_replace(&t, BAD_VADD, "vadd.cubin");
    int rv = cumod_launch(t.c, &v.p, NULL, &gen);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "generation 2"), "%s",
              cumod_last_detail());
    ft_served_again(t.c);

    /* Generation 3 is generation 1's bytes again. */
    ft_vadd_init(&v, t.c, "vadd:vadd");
    for (int w = 0; w < 300; w++) {
        rv = cumod_launch(t.c, &v.p, NULL, &gen);
        if (rv == CUMOD_OK)
            break;
        th_sleep_ms(10);
    }
    cr_expect_eq(rv, CUMOD_OK, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    cr_expect_eq(gen, 3, "the rollback is a new generation");
    cumod_module_result now = ft_module(&t, "vadd");
    cr_expect_str_eq(now.module.sha256, good.module.sha256,
                     "the good bytes serve");
    cr_expect_str_eq(now.module.state, "resident");
    cr_expect(!now.module.quarantined, "launches are served");
    cr_expect(now.module.quarantined_sha256[0] &&
                  strcmp(now.module.quarantined_sha256, good.module.sha256),
              "the bad bytes stay quarantined");
    cr_expect_not_null(now.module.quarantine_reason);
    cumod_module_result_fini(&now);
    cr_expect_eq(ft_log_count(&t, "CUMOD-ROLLBACK"), 1);

    /* Unquarantine: the file's bytes (the bad ones) serve again, and fault
     * again. */
    cumod_module_result r;
    cr_expect_eq(cumod_module_unquarantine(t.c, "vadd", &r), CUMOD_OK);
    cumod_module_result_fini(&r);
    for (int w = 0; w < 300; w++) {
        now = ft_module(&t, "vadd");
        int back = strcmp(now.module.sha256, good.module.sha256) != 0;
        cumod_module_result_fini(&now);
        if (back)
            break;
        th_sleep_ms(10);
    }
    rv = cumod_launch(t.c, &v.p, NULL, &gen);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    cumod_module_result_fini(&good);
    th_env_stop(&t);
}

/* A client launching kernel in a loop for ms, counting its outcomes. */
typedef struct ft_looper {
    const char *url;
    const char *kernel;
    int ms;
    atomic_int *stop;
    int ok, lost, quarantined, other;
    char detail[512];
} ft_looper;

static void *
ft_looper_main(void *arg)
{
    ft_looper *l = arg;
    cumod_client *c;
    ft_vadd v;
    if (cumod_open(l->url, 20000, &c) != CUMOD_OK)
        return NULL;
    double t0 = th_now_ms();
    int need_buffers = 1;
    while (th_now_ms() - t0 < l->ms && !atomic_load(l->stop)) {
        if (need_buffers) {
            memset(&v, 0, sizeof(v));
            if (cumod_buffer_alloc(c, 4096, &v.a) != CUMOD_OK ||
                cumod_buffer_alloc(c, 4096, &v.b) != CUMOD_OK ||
                cumod_buffer_alloc(c, 4096, &v.out) != CUMOD_OK) {
                th_sleep_ms(5);
                continue;
            }
            v.args[0] = cumod_arg_buffer(v.a, 0);
            v.args[1] = cumod_arg_buffer(v.b, 0);
            v.args[2] = cumod_arg_buffer(v.out, 0);
            v.args[3] = cumod_arg_i32(1024);
            v.p = (cumod_launch_params){.kernel = l->kernel,
                                        .grid = {4, 1, 1},
                                        .block = {256, 1, 1},
                                        .nargs = 4,
                                        .args = v.args};
            need_buffers = 0;
        }
        int rv = cumod_launch(c, &v.p, NULL, NULL);
        if (rv == CUMOD_OK) {
            l->ok++;
        } else if (rv == CUMOD_ECTXLOST) {
            l->lost++;
            need_buffers = 1; /* they went with the context */
            snprintf(l->detail, sizeof(l->detail), "%s", cumod_last_detail());
        } else if (rv == CUMOD_EQUARANTINED) {
            l->quarantined++;
        } else {
            l->other++;
            snprintf(l->detail, sizeof(l->detail), "%s: %s", cumod_errname(rv),
                     cumod_last_detail());
            th_sleep_ms(2);
        }
    }
    cumod_close(c);
    return NULL;
}

Test(fault, a_faulting_loop_among_busy_clients_costs_few_recoveries,
     .timeout = 120)
{
    enum { OTHERS = 3 };
    static const char *const env[] = {POISON, NULL};
    ft t;
    pthread_t th[OTHERS + 1];
    ft_looper l[OTHERS + 1];
    atomic_int stop = 0;

    ft_start_bad(&t, NULL, env);
    /* Three clients launch vadd all the while; a fourth loops on the bad
     * kernel. Whether its first fault finds others in flight is up to
     * timing: alone, it is pinned down at once; among others, nobody is
     * blamed and the suspects' next launches run alone, which pins it down
     * at its second fault. */
    for (int i = 0; i <= OTHERS; i++) {
        l[i] = (ft_looper){.url = t.d.url,
                           .kernel = i < OTHERS ? "vadd:vadd" : "bad:vadd",
                           .ms = 4000,
                           .stop = &stop};
        cr_assert_eq(pthread_create(&th[i], NULL, ft_looper_main, &l[i]), 0);
        if (i == OTHERS - 1)
            th_sleep_ms(300); /* the others are busy first */
    }
    for (int i = 0; i <= OTHERS; i++)
        pthread_join(th[i], NULL);
    int restarts = ft_inits(&t) - 1;
    char *log = th_daemon_log(&t.d);
    cr_expect(restarts >= 1 && restarts <= 2,
              "the faulting loop cost %d recoveries (1 or 2 expected); the "
              "log:\n%s",
              restarts, log);
    free(log);
    ft_looper *bad = &l[OTHERS];
    cr_expect_eq(bad->ok, 0);
    cr_expect_eq(bad->lost, restarts, "one fault per recovery");
    cr_expect_gt(bad->quarantined, 10, "then refused at once (%d)",
                 bad->quarantined);
    for (int i = 0; i < OTHERS; i++) {
        cr_expect_gt(l[i].ok, 20, "client %d served: %d launches", i, l[i].ok);
        cr_expect_leq(l[i].lost, restarts, "client %d lost %d launches", i,
                      l[i].lost);
        cr_expect_eq(l[i].other, 0, "client %d: %s", i, l[i].detail);
        if (l[i].lost > 0)
            cr_expect(strstr(l[i].detail, "CUDA_ERROR_ILLEGAL_ADDRESS"),
                      "the others hear why: %s", l[i].detail);
    }
    cumod_module_result r = ft_module(&t, "bad");
    cr_expect(r.module.quarantined);
    cumod_module_result_fini(&r);
    r = ft_module(&t, "vadd");
    cr_expect(!r.module.quarantined && r.module.quarantined_sha256[0] == 0,
              "the busy kernel is never blamed");
    cumod_module_result_fini(&r);
    th_env_stop(&t);
}

/* A launch of empty:empty by its own client, answered when complete. */
typedef struct ft_bg {
    const char *url;
    unsigned deadline_ms;
    int rv;
    char detail[512];
    double ms;
} ft_bg;

static void *
ft_bg_empty(void *arg)
{
    ft_bg *b = arg;
    cumod_client *c;
    cumod_launch_params p = {.kernel = "empty:empty",
                             .grid = {1, 1, 1},
                             .block = {1, 1, 1},
                             .deadline_ms = b->deadline_ms};
    b->rv = cumod_open(b->url, 30000, &c);
    if (b->rv != CUMOD_OK)
        return NULL;
    double t0 = th_now_ms();
    b->rv = cumod_launch(c, &p, NULL, NULL);
    b->ms = th_now_ms() - t0;
    snprintf(b->detail, sizeof(b->detail), "%s", cumod_last_detail());
    cumod_close(c);
    return NULL;
}

Test(fault, several_in_flight_blame_nobody_until_one_runs_alone, .timeout = 120)
{
    static const char *const env[] = {POISON, NULL};
    /* Pinned: a module load waits for the kernels running (a held one
     * here), so both must be loaded before. */
    static const char *const pins[] = {"--pin", "bad", "--pin", "empty", NULL};
    ft t;
    pthread_t th;
    ft_bg b = {0};

    ft_start_bad(&t, pins, env);
    /* Another client's empty is in flight (held) when bad faults. */
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    b.url = t.d.url;
    cr_assert_eq(pthread_create(&th, NULL, ft_bg_empty, &b), 0);
    for (int w = 0; w < 500; w++) {
        char *fl = th_read_file(t.fake_log);
        int in = fl && strstr(fl, "launch fn=empty");
        free(fl);
        if (in)
            break;
        th_sleep_ms(10);
    }
    ft_vadd v;
    ft_vadd_init(&v, t.c, "bad:vadd");
    int rv = cumod_launch(t.c, &v.p, NULL, NULL);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "could not be pinned down"), "%s",
              cumod_last_detail());
    pthread_join(th, NULL);
    cr_expect_eq(b.rv, CUMOD_ECTXLOST, "%s", b.detail);
    cr_expect(strstr(b.detail, "could not be pinned down"), "%s", b.detail);
    char *line = ft_log_line(&t, "CUMOD-FAULT");
    cr_expect(line && strstr(line, "cannot be pinned down") &&
                  strstr(line, "bad:vadd") && strstr(line, "empty:empty"),
              "%s", line);
    free(line);
    cumod_module_result r = ft_module(&t, "bad");
    cr_expect(!r.module.quarantined, "nobody is blamed");
    cumod_module_result_fini(&r);
    unlink(t.fake_hold);
    ft_served_again(t.c);

    /* The suspects' next launches run alone: bad faults alone and is
     * pinned down; empty runs alone and is cleared. */
    ft_vadd_init(&v, t.c, "bad:vadd");
    rv = cumod_launch(t.c, &v.p, NULL, NULL);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "the culprit is kernel vadd of "
                                          "module bad"),
              "%s", cumod_last_detail());
    ft_served_again(t.c);
    r = ft_module(&t, "bad");
    cr_expect(r.module.quarantined, "pinned down when run alone");
    cumod_module_result_fini(&r);
    b = (ft_bg){.url = t.d.url};
    ft_bg_empty(&b);
    cr_expect_eq(b.rv, CUMOD_OK, "%s", b.detail);
    char *dl = th_daemon_log(&t.d);
    cr_expect_eq(th_count(dl, "CUMOD-FAULT: a launch of suspect"), 2,
                 "both suspects ran alone:\n%s", dl);
    free(dl);
    cr_expect_eq(ft_log_count(&t, "without a fault: cleared"), 1);
    th_env_stop(&t);
}

/* A launch with a ticket (answered once enqueued) of kernel on c. */
static cumod_ticket
ft_enqueue(cumod_client *c, const char *kernel, cumod_buffer x)
{
    cumod_arg args[] = {cumod_arg_buffer(x, 0), cumod_arg_buffer(x, 0),
                        cumod_arg_buffer(x, 0), cumod_arg_i32(16)};
    cumod_arg sargs[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                         cumod_arg_i32(16)};
    int is_empty = strcmp(kernel, "empty:empty") == 0;
    int is_scale = strcmp(kernel, "scale:scale") == 0;
    cumod_launch_params p = {.kernel = kernel,
                             .grid = {1, 1, 1},
                             .block = {16, 1, 1},
                             .nargs = is_empty   ? 0
                                      : is_scale ? 3
                                                 : 4,
                             .args = is_scale ? sargs : args};
    cumod_ticket tk = 0;
    cr_assert_eq(cumod_launch(c, &p, &tk, NULL), CUMOD_OK, "%s: %s", kernel,
                 cumod_last_detail());
    return tk;
}

Test(fault, suspects_waiting_together_each_run_alone_in_turn, .timeout = 120)
{
    static const char *const env[] = {POISON, NULL};
    static const char *const k[] = {"vadd", "empty", "scale", NULL};
    static const char *const pins[] = {"--pin", "bad",   "--pin", "empty",
                                       "--pin", "scale", NULL};
    ft t;
    pthread_t th;
    ft_bg b = {0};
    cumod_client *ca, *cb, *cc;
    cumod_buffer xa, xb, xc;

    th_env_init(&t, k);
    th_env_put(&t, BAD_VADD, "bad.cubin");
    /* A fault with two kernels in flight: bad and a held empty. */
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    th_env_start(&t, pins, env);
    b.url = t.d.url;
    cr_assert_eq(pthread_create(&th, NULL, ft_bg_empty, &b), 0);
    for (int w = 0; w < 500; w++) {
        char *fl = th_read_file(t.fake_log);
        int in = fl && strstr(fl, "launch fn=empty");
        free(fl);
        if (in)
            break;
        th_sleep_ms(10);
    }
    ft_vadd v;
    ft_vadd_init(&v, t.c, "bad:vadd");
    cr_expect_eq(cumod_launch(t.c, &v.p, NULL, NULL), CUMOD_ECTXLOST);
    pthread_join(th, NULL);
    cr_assert(strstr(cumod_last_detail(), "could not be pinned down"), "%s",
              cumod_last_detail());

    /* Now scale (no suspect) is held in flight; then both suspects come,
     * empty first: empty waits at the gate for scale, bad behind it. */
    cr_assert_eq(th_write_file(t.fake_hold, "scale\n"), 0);
    ft_served_again(t.c);
    cr_assert_eq(cumod_open(t.d.url, 10000, &ca), CUMOD_OK);
    cr_assert_eq(cumod_open(t.d.url, 10000, &cb), CUMOD_OK);
    cr_assert_eq(cumod_open(t.d.url, 10000, &cc), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(ca, 256, &xa), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(cb, 256, &xb), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(cc, 256, &xc), CUMOD_OK);
    cumod_ticket tc = ft_enqueue(cc, "scale:scale", xc);
    cumod_ticket tb = ft_enqueue(cb, "empty:empty", xb);
    cumod_ticket ta = ft_enqueue(ca, "bad:vadd", xa);
    th_sleep_ms(100);
    char *fl = th_read_file(t.fake_log);
    int empties = th_count(fl, "launch fn=empty"),
        vadds = th_count(fl, "launch "
                             "fn=vadd");
    free(fl);
    unlink(t.fake_hold); /* scale completes: the suspects go, one by one */
    cr_expect_eq(cumod_wait(cc, tc), CUMOD_OK, "%s", cumod_last_detail());
    cr_expect_eq(cumod_wait(cb, tb), CUMOD_OK, "empty ran alone: %s",
                 cumod_last_detail());
    int rv = cumod_wait(ca, ta);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "the culprit is kernel vadd of "
                                          "module bad"),
              "pinned down alone: %s", cumod_last_detail());
    fl = th_read_file(t.fake_log);
    cr_expect_eq(th_count(fl, "launch fn=empty"), empties + 1);
    cr_expect_eq(th_count(fl, "launch fn=vadd"), vadds + 1);
    free(fl);
    char *dl = th_daemon_log(&t.d);
    char *e = strstr(dl, "suspect kernel empty of module empty ran alone");
    char *a = strstr(dl, "suspect kernel vadd of module bad (session");
    cr_expect(e && a && e < a, "empty ran alone, then bad:\n%s", dl);
    free(dl);
    cumod_module_result r = ft_module(&t, "bad");
    cr_expect(r.module.quarantined);
    cumod_module_result_fini(&r);
    r = ft_module(&t, "empty");
    cr_expect(!r.module.quarantined);
    cumod_module_result_fini(&r);
    cumod_close(ca);
    cumod_close(cb);
    cumod_close(cc);
    th_env_stop(&t);
}

Test(fault, a_launch_past_its_deadline_is_a_hang_that_costs_only_itself,
     .timeout = 120)
{
    static const char *const k[] = {"vadd", "empty", NULL};
    static const char *const extra[] = {"--launch-deadline",
                                        "5000",
                                        "--max-launch-deadline",
                                        "60000",
                                        "--pin",
                                        "empty",
                                        NULL};
    ft t;

    th_env_init(&t, k);
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"),
                 0); /* empty never completes */
    th_env_start(&t, extra, NULL);

    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_expect_eq(di.launch_deadline_ms, 5000);
    cr_expect_eq(di.max_launch_deadline_ms, 60000);

    /* The hung launch: 300 ms deadline. */
    ft_bg hung = {.url = t.d.url, .deadline_ms = 300};
    double t0 = th_now_ms();
    ft_bg_empty(&hung);
    double took = th_now_ms() - t0;
    cr_expect_eq(hung.rv, CUMOD_ETIMEDOUT, "%s: %s", cumod_errname(hung.rv),
                 hung.detail);
    cr_expect(strstr(hung.detail, "kernel empty of module empty") &&
                  strstr(hung.detail, "deadline of 300 ms"),
              "%s", hung.detail);
    cr_expect_lt(took, 5000,
                 "answered at its deadline, not at the "
                 "client's timeout (%.0f ms)",
                 took);
    char *line = ft_log_line(&t, "CUMOD-HANG");
    cr_expect(line && strstr(line, "kernel empty of module empty") &&
                  strstr(line, "deadline of 300 ms"),
              "%s", line);
    free(line);

    /* The service goes on; the hung kernel's generation is quarantined. */
    ft_served_again(t.c);
    ft_vadd v;
    ft_vadd_init(&v, t.c, "vadd:vadd");
    cr_expect_eq(cumod_launch(t.c, &v.p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    ft_bg again = {.url = t.d.url, .deadline_ms = 300};
    ft_bg_empty(&again);
    cr_expect_eq(again.rv, CUMOD_EQUARANTINED, "%s", again.detail);
    cr_expect(strstr(again.detail, "deadline"), "%s", again.detail);
    th_env_stop(&t);
}

Test(fault, other_work_in_flight_hears_context_lost_at_a_hang, .timeout = 120)
{
    static const char *const k[] = {"vadd", "empty", "scale", NULL};
    ft t;
    cumod_client *o;
    cumod_buffer x;
    cumod_ticket tk;

    static const char *const pins[] = {"--pin", "empty", "--pin", "scale",
                                       NULL};
    th_env_init(&t, k);
    cr_assert_eq(th_write_file(t.fake_hold, "empty\nscale\n"), 0);
    th_env_start(&t, pins, NULL);
    /* Another session's scale is in flight (held, no deadline), started
     * after the hung launch below. */
    cr_assert_eq(cumod_open(t.d.url, 10000, &o), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(o, 64, &x), CUMOD_OK);
    ft_bg hung = {.url = t.d.url, .deadline_ms = 500};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, ft_bg_empty, &hung), 0);
    th_sleep_ms(100);
    cumod_arg args[] = {cumod_arg_buffer(x, 0), cumod_arg_f32(2.0f),
                        cumod_arg_i32(16)};
    cumod_launch_params p = {.kernel = "scale:scale",
                             .grid = {1, 1, 1},
                             .block = {16, 1, 1},
                             .nargs = 3,
                             .args = args};
    cr_assert_eq(cumod_launch(o, &p, &tk, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    pthread_join(th, NULL);
    cr_expect_eq(hung.rv, CUMOD_ETIMEDOUT, "%s", hung.detail);
    int rv = cumod_wait(o, tk);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "ran past its deadline of 500 ms"),
              "the others hear why: %s", cumod_last_detail());
    /* Its buffer went with the context; the session goes on. */
    cr_expect_eq(cumod_buffer_memset(o, x, 0, 4, 0, 0, NULL), CUMOD_ECTXLOST);
    cr_expect_eq(cumod_buffer_free(o, x), CUMOD_OK);
    ft_served_again(o);
    cumod_close(o);
    th_env_stop(&t);
}

/* A batch submitted on a thread of its own. */
typedef struct ft_batch_call {
    cumod_client *c;
    cumod_batch *b;
    cumod_ticket tk;
    int rv;
    char detail[512];
} ft_batch_call;

static void *
ft_batch_main(void *arg)
{
    ft_batch_call *k = arg;
    k->rv = cumod_batch_submit(k->c, k->b, 0, &k->tk, NULL);
    snprintf(k->detail, sizeof(k->detail), "%s", cumod_last_detail());
    return NULL;
}

Test(fault, status_answers_while_the_executor_is_stopped, .timeout = 120)
{
    static const char *const k[] = {"vadd", NULL};
    static const char *const extra[] = {"--stuck-timeout", "4000", NULL};
    ft t;
    cumod_device_info di;

    th_env_init(&t, k);
    th_env_start(&t, extra, NULL);
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_expect_str_eq(di.executor_state, "serving");
    pid_t exec = (pid_t)di.executor_pid;
    cr_assert_gt(exec, 0);
    ft_vadd v;
    ft_vadd_init(&v, t.c, "vadd:vadd");
    cr_assert_eq(cumod_launch(t.c, &v.p, NULL, NULL), CUMOD_OK); /* loaded */
    cr_assert_eq(kill(exec, SIGSTOP), 0);

    /* A batch sent while it is stopped, from another thread: the ring is
     * read by the executor (direct launches), so its answer waits for the
     * executor or for its replacement, while status answers at once. */
    ft_batch_call bc = {.c = t.c};
    cr_assert_eq(cumod_batch_alloc(&bc.b), CUMOD_OK);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(cumod_batch_launch(bc.b, &v.p), CUMOD_OK);
    pthread_t bth;
    cr_assert_eq(pthread_create(&bth, NULL, ft_batch_main, &bc), 0);

    /* Status answers at once and, after 2 s of silence, says stuck. */
    int stuck = 0;
    for (int w = 0; w < 40 && !stuck; w++) {
        double t0 = th_now_ms();
        cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK, "%s",
                     cumod_last_detail());
        /* at once: not the stuck executor's 10 s; room for a loaded host */
        cr_expect_lt(th_now_ms() - t0, 4000, "status answered at once");
        stuck = strcmp(di.executor_state, "stuck") == 0;
        if (!stuck)
            th_sleep_ms(100);
    }
    cr_expect(stuck, "status says stuck: %s", di.executor_state);
    const char *st[] = {"--timeout", "2000", "status", NULL};
    char *out = NULL;
    cr_expect_eq(th_ctl(&t.d, st, &out, NULL), 0);
    cr_expect(out && strstr(out, "executor: stuck since"), "%s", out);
    free(out);

    /* After --stuck-timeout it is replaced; the batch failed, answered
     * once: refused for its lost buffer (taken from the ring after the
     * replacement), or enqueued and then lost with the context. */
    pthread_join(bth, NULL);
    int rv = bc.rv == CUMOD_OK ? cumod_wait(t.c, bc.tk) : bc.rv;
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s: %s", cumod_errname(rv),
                 bc.rv == CUMOD_OK ? cumod_last_detail() : bc.detail);
    ft_served_again(t.c);
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_expect_str_eq(di.executor_state, "serving");
    cr_expect_eq(di.executor_restarts, 1);
    cr_expect(strstr(di.last_fault, "stopped answering"), "%s", di.last_fault);
    cr_expect_neq(di.executor_pid, exec);
    kill(exec, SIGCONT);
    ft_vadd_init(&v, t.c, "vadd:vadd");
    cr_expect_eq(cumod_launch(t.c, &v.p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_batch_free(bc.b);
    th_env_stop(&t);
}

Test(fault, sigkill_of_the_executor_mid_batch, .timeout = 120)
{
    static const char *const k[] = {"vadd", NULL};
    ft t;
    cumod_device_info di;
    cumod_batch *b;
    cumod_ticket tk;

    th_env_init(&t, k);
    cr_assert_eq(th_write_file(t.fake_hold, ""), 0); /* all work held */
    th_env_start(&t, NULL, NULL);
    ft_vadd v;
    ft_vadd_init(&v, t.c, "vadd:vadd");
    cr_assert_eq(cumod_batch_alloc(&b), CUMOD_OK);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(cumod_batch_launch(b, &v.p), CUMOD_OK);
    cr_assert_eq(cumod_batch_submit(t.c, b, 0, &tk, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_assert_eq(kill((pid_t)di.executor_pid, SIGKILL), 0);
    int rv = cumod_wait(t.c, tk);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s: %s", cumod_errname(rv),
                 cumod_last_detail());
    unlink(t.fake_hold);
    ft_served_again(t.c);
    /* The session's buffers went with the context. */
    rv = cumod_buffer_memset(t.c, v.a, 0, 4, 0, 0, NULL);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    cr_expect_eq(cumod_launch(t.c, &v.p, NULL, NULL), CUMOD_ECTXLOST,
                 "a launch on lost buffers: %s", cumod_last_detail());
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_expect(strstr(di.last_fault, "signal 9"), "%s", di.last_fault);
    ft_vadd_init(&v, t.c, "vadd:vadd");
    cr_expect_eq(cumod_launch(t.c, &v.p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_batch_free(b);
    th_env_stop(&t);
}

/* "executor started, pid" lines: executors spawned. */
static int
ft_spawns(ft *t)
{
    return ft_log_count(t, "CUMOD-EXEC-SPAWN");
}

Test(fault, an_executor_that_dies_at_every_start_backs_off, .timeout = 120)
{
    static const char *const k[] = {"vadd", NULL};
    ft t;
    char crash[320], env_crash[400];
    cumod_device_info di;

    th_env_init(&t, k);
    snprintf(crash, sizeof(crash), "%s/.crash", t.dir);
    snprintf(env_crash, sizeof(env_crash), "CUMOD_FAKE_CRASH=%s", crash);
    const char *env[] = {env_crash, NULL};
    th_env_start(&t, NULL, env);
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);

    /* From now on every executor dies at cuInit. */
    cr_assert_eq(th_write_file(crash, ""), 0);
    cr_assert_eq(kill((pid_t)di.executor_pid, SIGKILL), 0);
    th_sleep_ms(3500);
    int spawns = ft_spawns(&t);
    /* The first restart is at once, the next ones wait 100, 200, 400, 800,
     * 1600 ms: at most 7 starts in 3.5 s (the first one included). */
    cr_expect(spawns >= 4 && spawns <= 7, "%d executors started in 3.5 s",
              spawns);
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_expect_str_eq(di.executor_state, "crash-looping");
    cr_expect_gt(ft_log_count(&t, "CUMOD-EXEC-CRASHLOOP"), 1);
    const char *st[] = {"status", NULL};
    char *out = NULL;
    cr_expect_eq(th_ctl(&t.d, st, &out, NULL), 0);
    cr_expect(out && strstr(out, "crash-looping"), "%s", out);
    free(out);
    ft_vadd v;
    memset(&v, 0, sizeof(v));
    cumod_buffer x;
    cr_expect_eq(cumod_buffer_alloc(t.c, 64, &x), CUMOD_ECTXLOST,
                 "refused at once while no executor serves");

    /* The cause goes: it serves again within the backoff (at most 5 s). */
    unlink(crash);
    for (int w = 0; w < 800; w++) {
        if (cumod_device_info_get(t.c, &di) == CUMOD_OK &&
            strcmp(di.executor_state, "serving") == 0)
            break;
        th_sleep_ms(10);
    }
    cr_expect_str_eq(di.executor_state, "serving");
    ft_vadd_init(&v, t.c, "vadd:vadd");
    cr_expect_eq(cumod_launch(t.c, &v.p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    th_env_stop(&t);
}

Test(fault, sigterm_with_a_stopped_executor_exits_0_within_the_drain,
     .timeout = 120)
{
    static const char *const k[] = {"vadd", "empty", NULL};
    static const char *const extra[] = {"--drain-timeout", "1000", "--pin",
                                        "empty", NULL};
    ft t;
    cumod_device_info di;
    pthread_t th;
    ft_bg b = {0};

    th_env_init(&t, k);
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    th_env_start(&t, extra, NULL);
    b.url = t.d.url;
    cr_assert_eq(pthread_create(&th, NULL, ft_bg_empty, &b), 0);
    th_sleep_ms(300);
    cr_assert_eq(cumod_device_info_get(t.c, &di), CUMOD_OK);
    cr_assert_eq(kill((pid_t)di.executor_pid, SIGSTOP), 0);
    double t0 = th_now_ms();
    cr_assert_eq(kill(t.d.pid, SIGTERM), 0);
    int rc = th_daemon_wait(&t.d, 10000);
    double took = th_now_ms() - t0;
    cr_expect_eq(rc, 0, "exit status 0");
    /* The drain (1 s), then the executor's grace (2 s) and a kill: about
     * 3 s, printed; asserted only as not waiting for the stopped executor
     * (th_daemon_wait's 10 s above; CI's load once made it 4.8 s). */
    cr_log_info("stopped in %.0f ms (the drain 1 s, the grace 2 s)", took);
    cr_expect_lt(took, 9000, "stopped in %.0f ms", took);
    pthread_join(th, NULL);
    cr_expect_eq(b.rv, CUMOD_ESHUTDOWN, "%s: %s", cumod_errname(b.rv),
                 b.detail);
    kill((pid_t)di.executor_pid, SIGKILL); /* in case it is still there */
    cumod_close(t.c);
    t.c = NULL;
    th_daemon_stop(&t.d);
    th_rmtree(t.dir);
}
