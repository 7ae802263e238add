/* SPDX-License-Identifier: MIT */
/*
 * Pools of executors under MPS (issue 33 point 5; docs/isolation.md "A
 * pool under MPS"): cumodd --pool N --mps own|join serves the default
 * domain with N executors on one GPU, each an MPS client, its sessions
 * spread over them. Real cumodd on tests/fakecuda, whose
 * CU_DEVICE_ATTRIBUTE_MPS_ENABLED says whether an MPS control daemon
 * answers in CUDA_MPS_PIPE_DIRECTORY (as the driver does), and
 * tests/fake-mps-control standing in for nvidia-cuda-mps-control:
 *   - a pool without MPS is refused with the reason, on the command line
 *     and in a [domain] section;
 *   - --mps own starts a control daemon in its pipe directory before the
 *     executors and tells it to quit after them; the pool's executors are
 *     MPS clients and the loader is not; sessions go to the ready member
 *     with the fewest; status, cumodctl and the metrics show the pool;
 *   - --mps join with no control daemon is refused at start, naming it;
 *     a pool executor restarted after the control daemon went fails its
 *     start saying it is not an MPS client;
 *   - a pool member's death costs its own sessions only, and it comes
 *     back as an MPS client;
 *   - the domain's memory limit counts the sessions of every member;
 *   - a fault in one member while another member has work in flight
 *     blames nobody (under MPS every client sees one client's fault, each
 *     in its own kernel); alone, the culprit is pinned down.
 * What a fault costs the other MPS clients is the real driver's (tested
 * on the GPU: tests/gpu/gpu_pool_test.c).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"
#include "harness.h"

TH_SUITE_DRIVER(0);

#define FAKE_MPS CUMOD_TEST_SOURCE_DIR "/fake-mps-control"
#define BAD_VADD CUMOD_TEST_BAD_KERNEL_DIR "/vadd.cubin"
#define POISON "CUMOD_FAKE_FAULT=poison:cumod_fake_poison"

/* Waits until executor member of the default domain's pool is up. */
static void
pt_wait_up(int port, int member)
{
    char series[256];
    snprintf(series, sizeof(series),
             "cumod_domain_executor_up{device=\"0\",domain=\"default\","
             "member=\"%d\"" TH_DEV_END(0),
             member);
    for (int w = 0; w < 1500; w++) {
        if (th_metric(port, series) == 1)
            return;
        th_sleep_ms(10);
    }
    cr_assert_fail("pool executor %d never came up (%s)", member, series);
}

/* Whether the (fake) control daemon of dir runs: its pid file's pid. */
static int
pt_mps_runs(const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/nvidia-cuda-mps-control.pid", dir);
    char *pid = th_read_file(path);
    int alive = pid != NULL && atoi(pid) > 0 && kill(atoi(pid), 0) == 0;
    free(pid);
    return alive;
}

/* cumodd on vadd and empty, metrics on *port, with extra. */
static void
pt_start(th_env *t, int *port, const char *const *extra)
{
    static const char *const k[] = {"vadd", "empty", NULL};
    const char *args[32];
    char ps[32];
    int n = 0;

    th_env_init(t, k);
    *port = th_free_port();
    snprintf(ps, sizeof(ps), "127.0.0.1:%d", *port);
    args[n++] = "--metrics-listen";
    args[n++] = ps;
    for (int i = 0; extra[i] != NULL && n < 31; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    th_env_start(t, args, NULL);
}

/* cumodd as pt_start with a pool of n executors under a fake MPS control
 * daemon of its own in the fresh directory mps (cap bytes), with more
 * arguments (NULL-ended, may be NULL); waits until every executor of the
 * pool serves when wait is set. */
static void
pt_start_pool(th_env *t, int *port, char *mps, size_t cap, int n, int wait,
              const char *const *more)
{
    const char *args[32];
    char pool[16];
    int k = 0;

    th_tmpdir(mps, cap);
    snprintf(pool, sizeof(pool), "%d", n);
    const char *const base[] = {
        "--pool",         pool, "--mps", "own", "--mps-control", FAKE_MPS,
        "--mps-pipe-dir", mps,  NULL};
    for (int i = 0; base[i] != NULL; i++)
        args[k++] = base[i];
    for (int i = 0; more != NULL && more[i] != NULL && k < 31; i++)
        args[k++] = more[i];
    args[k] = NULL;
    pt_start(t, port, args);
    for (int i = 0; wait && i < n; i++)
        pt_wait_up(*port, i);
}

/* A session works: a buffer written and read back, and a launch. */
static void
pt_works(cumod_client *c, int seed)
{
    cumod_buffer b;
    uint32_t in[256], out[256];
    for (int i = 0; i < 256; i++)
        in[i] = (uint32_t)(seed * 1000 + i);
    cr_assert_eq(cumod_buffer_alloc(c, sizeof(in), &b), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_write(c, b, 0, in, sizeof(in), 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {32, 1, 1}};
    cr_assert_eq(cumod_launch(c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(c, b, 0, out, sizeof(out), 0), CUMOD_OK,
                 "%s", cumod_last_detail());
    cr_assert_eq(memcmp(in, out, sizeof(in)), 0, "session %d read back wrong",
                 seed);
    cr_assert_eq(cumod_buffer_free(c, b), CUMOD_OK);
}

/* The pid of c's executor (the session's own). */
static pid_t
pt_exec_pid(cumod_client *c)
{
    cumod_device_info di;
    cr_assert_eq(cumod_device_info_get(c, &di), CUMOD_OK, "%s",
                 cumod_last_detail());
    return (pid_t)di.executor_pid;
}

Test(pool, a_pool_without_mps_is_refused_with_the_reason, .timeout = 60)
{
    char *out = NULL, *err = NULL;
    const char *argv[] = {CUMOD_TEST_CUMODD, "--kernels", "/tmp",
                          "--pool",          "2",         NULL};
    int rc = th_run(argv, NULL, &out, &err, 20000);
    cr_expect_eq(rc, 64, "exit %d: %s", rc, err);
    cr_expect(err &&
                  strstr(err, "--pool: a pool of 2 executors on one GPU "
                              "needs MPS") != NULL &&
                  strstr(err, "time-slice") != NULL,
              "%s", err);
    free(out);
    free(err);

    /* The same from a [domain] section of a file: a configuration error. */
    char dir[256], conf[300];
    th_tmpdir(dir, sizeof(dir));
    snprintf(conf, sizeof(conf), "%s/cumodd.conf", dir);
    cr_assert_eq(th_write_file(conf, "kernels = /tmp\n[domain batch]\n"
                                     "uids = 0\npool = 4\n"),
                 0);
    const char *argv2[] = {CUMOD_TEST_CUMODD, "--config", conf, "--check",
                           NULL};
    rc = th_run(argv2, NULL, &out, &err, 20000);
    cr_expect_eq(rc, 78, "exit %d: %s", rc, err);
    cr_expect(err && strstr(err, "batch (its pool): a pool of 4") != NULL, "%s",
              err);
    free(out);
    free(err);

    /* A pool size out of range, named with its limit. */
    cr_assert_eq(th_write_file(conf, "kernels = /tmp\nmps = own\n"
                                     "[domain batch]\nuids = 0\npool = 99\n"),
                 0);
    rc = th_run(argv2, NULL, &out, &err, 20000);
    cr_expect_eq(rc, 78, "exit %d: %s", rc, err);
    cr_expect(err && strstr(err, "pool: '99' is not a number from 1 to 48"),
              "%s", err);
    free(out);
    free(err);
    th_rmtree(dir);
}

Test(pool, own_mps_serves_the_pool_spread_over_its_executors, .timeout = 120)
{
    th_env t;
    int port;
    char mps[256], log[300];
    pt_start_pool(&t, &port, mps, sizeof(mps), 3, 0, NULL);
    /* The control daemon answered before any executor started. */
    cr_assert(pt_mps_runs(mps), "no control daemon for %s", mps);
    /* The first session started the whole pool. */
    for (int k = 0; k < 3; k++)
        pt_wait_up(port, k);
    cumod_client *c[5];
    for (int i = 0; i < 5; i++)
        cr_assert_eq(cumod_open(t.d.url, 10000, &c[i]), CUMOD_OK, "%s",
                     cumod_last_detail());
    pt_works(t.c, 0);
    for (int i = 0; i < 5; i++)
        pt_works(c[i], i + 1);

    /* Status: three executors of the default domain, two sessions each,
     * all MPS clients. */
    cumod_domains *d = NULL;
    cr_assert_eq(cumod_domains_get(t.c, &d), CUMOD_OK, "%s",
                 cumod_last_detail());
    unsigned seen = 0, pool_rows = 0;
    for (size_t i = 0; i < d->ndomains; i++) {
        const cumod_domain_info *m = &d->domains[i];
        if (strcmp(m->name, "default") != 0)
            continue;
        pool_rows++;
        cr_expect_eq(m->pool_size, 3);
        cr_expect_eq(m->sessions, 2, "member %u has %u sessions",
                     m->pool_member, m->sessions);
        cr_expect(m->mps, "member %u is not an MPS client", m->pool_member);
        seen |= 1u << m->pool_member;
    }
    cr_expect_eq(pool_rows, 3);
    cr_expect_eq(seen, 7u);
    cumod_domains_free(d);
    /* Distinct executors: three processes. */
    pid_t p0 = pt_exec_pid(t.c), p1 = pt_exec_pid(c[0]), p2 = pt_exec_pid(c[1]);
    cr_expect(p0 != p1 && p1 != p2 && p0 != p2, "pids %d %d %d", (int)p0,
              (int)p1, (int)p2);

    /* The fake driver: three contexts made as MPS clients, the loader's
     * not. */
    char *fl = th_env_fake_log_wait(&t, "mps=1", 2000);
    cr_assert_not_null(fl);
    cr_expect_eq(th_count(fl, "retain device=0 refs=1 mps=1"), 3, "%s", fl);
    cr_expect_eq(th_count(fl, "retain device=0 refs=1 mps=0"), 1, "%s", fl);
    free(fl);

    /* cumodctl and the metrics show it. */
    char *out = NULL, *err = NULL;
    cr_expect_eq(
        th_ctl(&t.d, (const char *const[]){"status", NULL}, &out, &err), 0,
        "%s", err);
    cr_expect(out && strstr(out, "default[2/3]*") != NULL &&
                  strstr(out, "an MPS client") != NULL,
              "%s", out);
    free(out);
    free(err);
    cr_expect_eq(th_metric(port,
                           "cumod_domain_executor_mps{device=\"0\","
                           "domain=\"default\",member=\"2\"" TH_DEV_END(0)),
                 1);
    cr_expect_eq(th_metric(port,
                           "cumod_domain_sessions{device=\"0\","
                           "domain=\"default\",member=\"1\"" TH_DEV_END(0)),
                 2);
    for (int i = 0; i < 5; i++)
        cumod_close(c[i]);
    th_env_stop(&t);
    /* After the executors, the control daemon was told to quit. */
    cr_expect(!pt_mps_runs(mps), "the control daemon still answers");
    snprintf(log, sizeof(log), "%s/log/control.log", mps);
    char *cl = th_read_file(log);
    cr_expect(cl && strcmp(cl, "started\nquit\n") == 0, "control log: %s",
              cl ? cl : "(none)");
    free(cl);
    th_rmtree(mps);
}

Test(pool, a_pool_executors_death_costs_only_its_own_sessions, .timeout = 120)
{
    th_env t;
    int port;
    char mps[256];
    pt_start_pool(&t, &port, mps, sizeof(mps), 2, 1,
                  (const char *const[]){"--restart-wait", "20000", NULL});
    cumod_client *other;
    cr_assert_eq(cumod_open(t.d.url, 10000, &other), CUMOD_OK, "%s",
                 cumod_last_detail());
    pid_t mine = pt_exec_pid(t.c), theirs = pt_exec_pid(other);
    cr_assert(mine > 0 && theirs > 0 && mine != theirs);
    cumod_buffer keep, lost;
    cr_assert_eq(cumod_buffer_alloc(other, 4096, &keep), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(t.c, 4096, &lost), CUMOD_OK);

    cr_assert_eq(kill(mine, SIGKILL), 0);
    /* The other member's session keeps its buffer and works throughout. */
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(cumod_buffer_memset(other, keep, 0, 4096, i, 0, NULL),
                     CUMOD_OK, "round %d: %s", i, cumod_last_detail());
        th_sleep_ms(10);
    }
    pt_works(other, 7);
    /* Ours lost its buffer, saying so, and is served again. */
    int rv = cumod_buffer_memset(t.c, lost, 0, 16, 0, 0, NULL);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    pt_works(t.c, 8);
    pid_t again = pt_exec_pid(t.c);
    cr_expect(again != mine && again != theirs, "pid %d", (int)again);
    /* As an MPS client again (a standby outside MPS never takes a pool
     * member's place). */
    char *fl = th_env_fake_log_wait(&t, "mps=1", 2000);
    cr_expect_eq(th_count(fl, "retain device=0 refs=1 mps=1"), 3, "%s", fl);
    free(fl);
    cumod_close(other);
    th_env_stop(&t);
    th_rmtree(mps);
}

Test(pool, join_without_a_control_daemon_is_refused_at_start, .timeout = 60)
{
    th_daemon d;
    char dir[256], mps[256];
    th_tmpdir(dir, sizeof(dir));
    th_tmpdir(mps, sizeof(mps));
    int rc =
        th_daemon_start_in(&d, dir,
                           (const char *const[]){"--pool", "2", "--mps", "join",
                                                 "--mps-pipe-dir", mps, NULL},
                           NULL);
    cr_assert_eq(rc, -1, "cumodd started without a control daemon");
    char *log = th_daemon_log(&d);
    cr_expect(log &&
                  strstr(log, "--mps join: no MPS control daemon answers "
                              "in") != NULL &&
                  strstr(log, mps) != NULL,
              "%s", log);
    free(log);
    cr_expect_eq(th_daemon_stop(&d), 69); /* EX_UNAVAILABLE */
    th_rmtree(dir);
    th_rmtree(mps);
}

Test(pool, a_pool_executor_outside_mps_fails_its_start_saying_so,
     .timeout = 120)
{
    th_env t;
    int port;
    char mps[256], env[300];
    th_tmpdir(mps, sizeof(mps));
    snprintf(env, sizeof(env), "CUDA_MPS_PIPE_DIRECTORY=%s", mps);
    const char *argv[] = {FAKE_MPS, "-d", NULL};
    const char *envs[] = {env, NULL};
    cr_assert_eq(th_run(argv, envs, NULL, NULL, 10000), 0);
    pt_start(&t, &port,
             (const char *const[]){"--pool", "2", "--mps", "join",
                                   "--mps-pipe-dir", mps, "--restart-wait",
                                   "3000", NULL});
    pt_wait_up(port, 0);
    pt_wait_up(port, 1);
    pid_t mine = pt_exec_pid(t.c);
    /* The control daemon goes (an operator's, joined), then our executor
     * dies: the one started again is no MPS client and says so. */
    char *out = NULL;
    const char *quit[] = {"/bin/sh", "-c", "echo quit | " FAKE_MPS, NULL};
    cr_assert_eq(th_run(quit, envs, &out, NULL, 10000), 0, "%s", out);
    free(out);
    for (int w = 0; w < 200 && pt_mps_runs(mps); w++)
        th_sleep_ms(10);
    cr_assert(!pt_mps_runs(mps));
    cr_assert_eq(kill(mine, SIGKILL), 0);
    int found = 0;
    for (int w = 0; w < 1000 && !found; w++) {
        char *log = th_daemon_log(&t.d);
        found = log &&
                strstr(log, "a pool's executor must be an MPS client") != NULL;
        free(log);
        if (!found)
            th_sleep_ms(10);
    }
    cr_expect(found, "no log of the failed start");
    cumod_buffer b;
    int rv = cumod_buffer_alloc(t.c, 4096, &b);
    cr_expect_neq(rv, CUMOD_OK);
    cr_expect(strstr(cumod_last_detail(), "MPS") != NULL, "%s",
              cumod_last_detail());
    th_env_stop(&t);
    th_rmtree(mps);
}

Test(pool, the_domain_memory_limit_counts_every_member, .timeout = 120)
{
    th_env t;
    int port;
    char mps[256];
    pt_start_pool(&t, &port, mps, sizeof(mps), 2, 1,
                  (const char *const[]){"--domain-memory-max", "1M", NULL});
    cumod_client *other;
    cr_assert_eq(cumod_open(t.d.url, 10000, &other), CUMOD_OK);
    cr_assert_neq(pt_exec_pid(t.c), pt_exec_pid(other));
    cumod_buffer a, b;
    cr_assert_eq(cumod_buffer_alloc(t.c, 700000, &a), CUMOD_OK, "%s",
                 cumod_last_detail());
    int rv = cumod_buffer_alloc(other, 700000, &b);
    cr_expect_eq(rv, CUMOD_EDEVMEM, "%s", cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "domain default") != NULL, "%s",
              cumod_last_detail());
    cumod_close(other);
    th_env_stop(&t);
    th_rmtree(mps);
}

/* Whether module name is quarantined now. */
static int
pt_quarantined(cumod_client *c, const char *name)
{
    cumod_module_detail *d;
    cr_assert_eq(cumod_module_show(c, name, &d), CUMOD_OK, "%s",
                 cumod_last_detail());
    int q = d->module.quarantined;
    cumod_module_detail_free(d);
    return q;
}

/* bad:vadd (the fake driver faults it) on three fresh buffers of c. */
static int
pt_bad_launch(cumod_client *c)
{
    cumod_buffer a, b, o;
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &a), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &b), CUMOD_OK);
    cr_assert_eq(cumod_buffer_alloc(c, 4096, &o), CUMOD_OK);
    cumod_arg args[4] = {cumod_arg_buffer(a, 0), cumod_arg_buffer(b, 0),
                         cumod_arg_buffer(o, 0), cumod_arg_i32(1024)};
    cumod_launch_params p = {.kernel = "bad:vadd",
                             .grid = {4, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    return cumod_launch(c, &p, NULL, NULL);
}

Test(pool, a_fault_beside_another_members_work_blames_nobody, .timeout = 120)
{
    static const char *const env[] = {POISON, NULL};
    static const char *const k[] = {"vadd", "empty", NULL};
    th_env t;
    int port;
    char mps[256], ps[32];
    th_tmpdir(mps, sizeof(mps));
    th_env_init(&t, k);
    th_env_put(&t, BAD_VADD, "bad.cubin");
    port = th_free_port();
    snprintf(ps, sizeof(ps), "127.0.0.1:%d", port);
    th_env_start(&t,
                 (const char *const[]){
                     "--metrics-listen", ps, "--pool", "2", "--mps", "own",
                     "--mps-control", FAKE_MPS, "--mps-pipe-dir", mps, "--pin",
                     "bad", "--pin", "empty", "--restart-wait", "20000", NULL},
                 env);
    pt_wait_up(port, 0);
    pt_wait_up(port, 1);
    cumod_client *other;
    cr_assert_eq(cumod_open(t.d.url, 10000, &other), CUMOD_OK);
    cr_assert_neq(pt_exec_pid(t.c), pt_exec_pid(other));

    /* The other member has an empty kernel in flight (held). */
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    cumod_launch_params e = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {32, 1, 1}};
    cumod_ticket tk;
    cr_assert_eq(cumod_launch(other, &e, &tk, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
    char *fl = th_env_fake_log_wait(&t, "launch fn=empty", 5000);
    cr_assert(fl && strstr(fl, "launch fn=empty"), "empty never launched");
    free(fl);

    int rv = pt_bad_launch(t.c);
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    cr_expect(strstr(cumod_last_detail(), "could not be pinned down") &&
                  strstr(cumod_last_detail(), "under MPS"),
              "%s", cumod_last_detail());
    cr_expect(!pt_quarantined(t.c, "bad"), "bad was blamed beside other work");
    char *log = th_daemon_log(&t.d);
    cr_expect(log && strstr(log, "in an MPS client of device 0") != NULL, "%s",
              log);
    free(log);
    unlink(t.fake_hold);
    cr_expect_eq(cumod_wait(other, tk), CUMOD_OK, "%s", cumod_last_detail());

    /* Alone (the shared window past, nothing else in flight), it is
     * pinned down and quarantined. */
    th_sleep_ms(3200);
    rv = pt_bad_launch(t.c);
    for (int i = 0; i < 20 && rv != CUMOD_ECTXLOST; i++) {
        th_sleep_ms(50); /* served again after the restart */
        rv = pt_bad_launch(t.c);
    }
    cr_expect_eq(rv, CUMOD_ECTXLOST, "%s", cumod_last_detail());
    cr_expect(pt_quarantined(t.c, "bad"), "alone, bad is pinned down: %s",
              cumod_last_detail());
    cumod_close(other);
    th_env_stop(&t);
    th_rmtree(mps);
}

/* Every pool executor reads its sessions' rings: plain launches after a
 * module's first are direct in each of them. */
Test(pool, every_pool_executor_launches_its_sessions_directly, .timeout = 120)
{
    th_env t;
    int port;
    char mps[256];
    pt_start_pool(&t, &port, mps, sizeof(mps), 3, 0, NULL);
    enum { C = 6, N = 200 };
    cumod_client *c[C];
    c[0] = t.c;
    for (int i = 1; i < C; i++)
        cr_assert_eq(cumod_open(t.d.url, 10000, &c[i]), CUMOD_OK, "%s",
                     cumod_last_detail());
    cumod_launch_params e = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {32, 1, 1}};
    for (int i = 0; i < C; i++)
        cr_assert(cumod_fast_path(c[i]), "client %d has its ring", i);
    for (int r = 0; r < N; r++)
        for (int i = 0; i < C; i++)
            cr_assert_eq(cumod_launch(c[i], &e, NULL, NULL), CUMOD_OK,
                         "client %d launch %d: %s", i, r, cumod_last_detail());
    double direct = -1;
    for (int w = 0; w < 500; w++) {
        if ((direct = th_metric(port, "cumod_direct_launches_total ")) >=
            C * (N - 2))
            break;
        th_sleep_ms(10);
    }
    cr_expect_geq(direct, C * (N - 2),
                  "launches after each executor's first of the module are "
                  "direct: %.0f of %d",
                  direct, C * N);
    for (int i = 1; i < C; i++)
        cumod_close(c[i]);
    th_env_stop(&t);
    th_rmtree(mps);
}

/* A [domain] section's pool: its sessions (on its own socket) spread over
 * its executors, each an MPS client; the default domain stays one
 * executor outside MPS. */
Test(pool, a_sections_pool_is_mps_and_the_default_domain_is_not, .timeout = 120)
{
    static const char *const k[] = {"vadd", "empty", NULL};
    th_env t;
    char mps[256], conf[300], text[1024], url[300], ps[32];
    th_tmpdir(mps, sizeof(mps));
    th_env_init(&t, k);
    snprintf(url, sizeof(url), "ipc://%s/.batch.sock", t.dir);
    snprintf(conf, sizeof(conf), "%s/.cumodd.conf", t.dir);
    snprintf(text, sizeof(text),
             "mps = own\nmps-control = %s\nmps-pipe-dir = %s\n\n"
             "[domain batch]\nlisten = %s\npool = 2\n",
             FAKE_MPS, mps, url);
    cr_assert_eq(th_write_file(conf, text), 0);
    int port = th_free_port();
    snprintf(ps, sizeof(ps), "127.0.0.1:%d", port);
    th_env_start(
        &t,
        (const char *const[]){"--config", conf, "--metrics-listen", ps, NULL},
        NULL);
    cumod_client *b[4];
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(cumod_open(url, 10000, &b[i]), CUMOD_OK, "%s",
                     cumod_last_detail());
        pt_works(b[i], i);
    }
    pt_works(t.c, 9);
    cumod_domains *d = NULL;
    cr_assert_eq(cumod_domains_get(t.c, &d), CUMOD_OK, "%s",
                 cumod_last_detail());
    unsigned batch = 0, sessions = 0, def = 0;
    for (size_t i = 0; i < d->ndomains; i++) {
        const cumod_domain_info *m = &d->domains[i];
        if (strcmp(m->name, "batch") == 0) {
            batch++;
            sessions += m->sessions;
            cr_expect_eq(m->pool_size, 2);
            cr_expect(m->mps, "batch's executor %u is no MPS client",
                      m->pool_member);
        } else if (strcmp(m->name, "default") == 0) {
            def++;
            cr_expect_eq(m->pool_size, 1);
            cr_expect(!m->mps, "the default domain is an MPS client");
        }
    }
    cr_expect_eq(batch, 2);
    cr_expect_eq(sessions, 4);
    cr_expect_eq(def, 1);
    cumod_domains_free(d);
    char *fl = th_env_fake_log_wait(&t, "mps=1", 2000);
    cr_expect_eq(th_count(fl, "refs=1 mps=1"), 2, "%s", fl);
    free(fl);
    for (int i = 0; i < 4; i++)
        cumod_close(b[i]);
    th_env_stop(&t);
    th_rmtree(mps);
}

/* --mps own whose control program fails, or is not there: cumodd does not
 * start, and says what failed and where its log is. */
Test(pool, an_mps_control_that_cannot_start_stops_cumodd_saying_why,
     .timeout = 60)
{
    static const struct {
        const char *control, *says;
    } cases[] = {
        {"/bin/false", "/bin/false -d exited with status 1 (its log: "},
        {"/nonexistent/nvidia-cuda-mps-control",
         "cannot run /nonexistent/nvidia-cuda-mps-control (not installed"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        th_daemon d;
        char dir[256], mps[256];
        th_tmpdir(dir, sizeof(dir));
        th_tmpdir(mps, sizeof(mps));
        int rc = th_daemon_start_in(
            &d, dir,
            (const char *const[]){"--pool", "2", "--mps", "own",
                                  "--mps-control", cases[i].control,
                                  "--mps-pipe-dir", mps, NULL},
            NULL);
        cr_expect_eq(rc, -1, "cumodd started with %s", cases[i].control);
        char *log = th_daemon_log(&d);
        cr_expect(log &&
                      strstr(log, "--mps own: cannot start the MPS "
                                  "control daemon") != NULL &&
                      strstr(log, cases[i].says) != NULL,
                  "%s", log);
        free(log);
        cr_expect_eq(th_daemon_stop(&d), 69); /* EX_UNAVAILABLE */
        th_rmtree(dir);
        th_rmtree(mps);
    }
}

/* The submission threads given by --submit-threads are each pool
 * executor's own (only the default is shared among the pool). */
Test(pool, an_explicit_submit_threads_is_each_pool_executors, .timeout = 60)
{
    th_env t;
    int port;
    char mps[256], path[64];
    pt_start_pool(&t, &port, mps, sizeof(mps), 2, 0,
                  (const char *const[]){"--submit-threads", "3", NULL});
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pt_exec_pid(t.c));
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    int found = 0;
    for (size_t i = 0; i + 1 < n; i += strlen(buf + i) + 1)
        if (strcmp(buf + i, "--submit-threads") == 0 &&
            i + 17 < n) /* the value follows */
            found = strcmp(buf + i + 17, "3") == 0;
    cr_expect(found, "the pool executor runs with --submit-threads 3");
    th_env_stop(&t);
    th_rmtree(mps);
}

/* A pipe directory someone else may write to (or that is someone else's)
 * could hold a control daemon of theirs: --mps own and join refuse it. */
Test(pool, a_pipe_directory_others_control_is_refused, .timeout = 60)
{
    for (int k = 0; k < 2; k++) {
        th_daemon d;
        char dir[256], mps[256];
        th_tmpdir(dir, sizeof(dir));
        th_tmpdir(mps, sizeof(mps));
        const char *mode = k == 0 ? "own" : "join";
        if (k == 0) {
            cr_assert_eq(chmod(mps, 0777), 0);
        } else {
            if (geteuid() != 0) {
                th_rmtree(dir);
                th_rmtree(mps);
                cr_skip_test("needs root, to give the directory to uid 65534");
            }
            cr_assert_eq(chown(mps, 65534, 65534), 0);
        }
        int rc = th_daemon_start_in(
            &d, dir,
            (const char *const[]){"--pool", "2", "--mps", mode, "--mps-control",
                                  FAKE_MPS, "--mps-pipe-dir", mps, NULL},
            NULL);
        cr_expect_eq(rc, -1, "--mps %s took %s", mode, mps);
        char *log = th_daemon_log(&d);
        cr_expect(log && strstr(log, k == 0 ? "may be written by others "
                                              "(mode 0777)"
                                            : "belongs to uid 65534") != NULL,
                  "%s", log);
        free(log);
        cr_expect_eq(th_daemon_stop(&d), 69);
        th_rmtree(dir);
        th_rmtree(mps);
    }
}

/* A launch held in flight on one pool executor when that executor dies:
 * answered once, with the context's loss; the other executor's session
 * writes and reads its buffers meanwhile, and launches after. */
typedef struct pt_held {
    cumod_client *c;
    int rv;
    char detail[512];
} pt_held;

static void *
pt_held_launch(void *arg)
{
    pt_held *h = arg;
    cumod_launch_params e = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {32, 1, 1}};
    h->rv = cumod_launch(h->c, &e, NULL, NULL);
    snprintf(h->detail, sizeof(h->detail), "%s", cumod_last_detail());
    return NULL;
}

Test(pool, a_launch_in_flight_on_a_dying_executor_costs_only_its_session,
     .timeout = 120)
{
    th_env t;
    int port;
    char mps[256];
    pt_start_pool(&t, &port, mps, sizeof(mps), 2, 1,
                  (const char *const[]){"--restart-wait", "20000", NULL});
    cumod_client *other;
    cr_assert_eq(cumod_open(t.d.url, 10000, &other), CUMOD_OK);
    pid_t mine = pt_exec_pid(t.c);
    cr_assert_neq(mine, pt_exec_pid(other));
    /* empty is held in the driver; the other session works with vadd. */
    cr_assert_eq(th_write_file(t.fake_hold, "empty\n"), 0);
    pt_held h = {.c = t.c};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, pt_held_launch, &h), 0);
    char *fl = th_env_fake_log_wait(&t, "launch fn=empty", 5000);
    cr_assert(fl && strstr(fl, "launch fn=empty"), "empty never launched");
    free(fl);
    cr_assert_eq(kill(mine, SIGKILL), 0);
    pthread_join(th, NULL);
    cr_expect_eq(h.rv, CUMOD_ECTXLOST, "the held launch: %s", h.detail);
    /* The other session's memory, meanwhile (its empty launches would be
     * held too). */
    for (int i = 0; i < 5; i++) {
        cumod_buffer b;
        uint8_t in[512], out[512];
        memset(in, 0x40 + i, sizeof(in));
        cr_assert_eq(cumod_buffer_alloc(other, sizeof(in), &b), CUMOD_OK, "%s",
                     cumod_last_detail());
        cr_assert_eq(cumod_buffer_write(other, b, 0, in, sizeof(in), 0),
                     CUMOD_OK, "%s", cumod_last_detail());
        cr_assert_eq(cumod_buffer_read(other, b, 0, out, sizeof(out), 0),
                     CUMOD_OK, "%s", cumod_last_detail());
        cr_expect_eq(memcmp(in, out, sizeof(in)), 0);
        cr_assert_eq(cumod_buffer_free(other, b), CUMOD_OK);
    }
    unlink(t.fake_hold);
    pt_works(other, 20);
    pt_works(t.c, 30); /* served again, by a new executor */
    cr_expect_neq(pt_exec_pid(t.c), mine);
    cumod_close(other);
    th_env_stop(&t);
    th_rmtree(mps);
}
