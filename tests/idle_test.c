/* SPDX-License-Identifier: MIT */
/*
 * An idle daemon costs under 1% of one core (issue 21 point 5): once the
 * polling that follows activity has ended, cumodd's processes together
 * (the front and every executor: serving, loader, standby) burn less than
 * 1% of the time that passes, even with a client connected and its
 * shared-memory ring open. What is measured is CPU time (utime + stime of
 * each process, all its threads included), not latency: load elsewhere on
 * the machine does not raise it. The figure is printed either way.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/cumod.h"
#include "fixture.h"

TH_SUITE_DRIVER(0);

/* The window measured, and the quiet before it: the front polls
 * --busy-poll-us (10x while work is waited for) after activity and the
 * executor's completion thread 2 ms, so a second is ample. */
#define IL_SETTLE_MS 1000
#define IL_WINDOW_MS 5000
#define IL_MAX_PIDS 64

/* One process's utime + stime (clock ticks), or -1 if it is gone; its
 * parent in *ppid. Fields 4 (ppid), 14 and 15 of /proc/PID/stat, counted
 * after the command name's closing parenthesis (a name may hold spaces). */
static long long
il_stat(pid_t pid, pid_t *ppid, char *comm, size_t cap)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    char *text = th_read_file(path);
    if (text == NULL)
        return -1;
    char *open = strchr(text, '(');
    char *close = strrchr(text, ')');
    long long ticks = -1;
    if (open != NULL && close != NULL && close > open) {
        if (comm != NULL)
            snprintf(comm, cap, "%.*s", (int)(close - open - 1), open + 1);
        int pp;
        unsigned long long ut, st;
        /* state ppid pgrp session tty tpgid flags minflt cminflt majflt
         * cmajflt utime stime */
        if (sscanf(close + 2,
                   "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &pp,
                   &ut, &st) == 3) {
            if (ppid != NULL)
                *ppid = pp;
            ticks = (long long)(ut + st);
        }
    }
    free(text);
    return ticks;
}

/* root and every process descending from it: at most cap, root first. */
static size_t
il_tree(pid_t root, pid_t *out, size_t cap)
{
    size_t n = 0;
    out[n++] = root;
    /* Children appear after their parent in the list only by chance: scan
     * until a pass adds nothing. */
    for (int added = 1; added && n < cap;) {
        added = 0;
        DIR *d = opendir("/proc");
        cr_assert_not_null(d);
        struct dirent *e;
        while ((e = readdir(d)) != NULL && n < cap) {
            char *end;
            long p = strtol(e->d_name, &end, 10);
            if (*end != '\0' || p <= 0)
                continue;
            pid_t pp = 0;
            if (il_stat((pid_t)p, &pp, NULL, 0) < 0)
                continue;
            int known = 0, parent = 0;
            for (size_t i = 0; i < n; i++) {
                known |= out[i] == (pid_t)p;
                parent |= out[i] == pp;
            }
            if (parent && !known) {
                out[n++] = (pid_t)p;
                added = 1;
            }
        }
        closedir(d);
    }
    return n;
}

/* Every thread of pid with its ticks, one "comm=ticks" each, appended to
 * buf: what a failure shows to say who burns. */
static void
il_threads(pid_t pid, char *buf, size_t cap)
{
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[400], comm[64] = "";
        snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
        char *text = th_read_file(path);
        if (text == NULL)
            continue;
        char *open = strchr(text, '('), *close = strrchr(text, ')');
        unsigned long long ut = 0, st = 0;
        if (open != NULL && close != NULL && close > open) {
            snprintf(comm, sizeof(comm), "%.*s", (int)(close - open - 1),
                     open + 1);
            (void)sscanf(close + 2,
                         "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
                         "%llu",
                         &ut, &st);
        }
        free(text);
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, " %s/%s=%llu", comm, e->d_name, ut + st);
    }
    closedir(d);
}

typedef struct il_figure {
    double cpu_ms;  /* the daemon's processes' CPU time in the window */
    double wall_ms; /* the window */
    size_t nprocs;
    char detail[4096]; /* per process, then per thread (ticks, cumulative) */
} il_figure;

/* Waits for the polling to end, then measures the daemon's tree over the
 * window. Processes are listed at the start; one that is gone at the end
 * counts what it had at the start (an idle daemon starts and ends none). */
static void
il_measure(const th_daemon *d, il_figure *f)
{
    pid_t pids[IL_MAX_PIDS];
    long long t0[IL_MAX_PIDS];

    th_sleep_ms(IL_SETTLE_MS);
    size_t n = il_tree(d->pid, pids, IL_MAX_PIDS);
    double w0 = th_now_ms();
    for (size_t i = 0; i < n; i++)
        t0[i] = il_stat(pids[i], NULL, NULL, 0);
    th_sleep_ms(IL_WINDOW_MS);
    long long ticks = 0;
    memset(f, 0, sizeof(*f));
    for (size_t i = 0; i < n; i++) {
        char comm[64] = "";
        long long t1 = il_stat(pids[i], NULL, comm, sizeof(comm));
        long long dt = (t0[i] >= 0 && t1 >= t0[i]) ? t1 - t0[i] : 0;
        ticks += dt;
        size_t len = strlen(f->detail);
        snprintf(f->detail + len, sizeof(f->detail) - len,
                 "\n  pid %d %s: %lld ticks in the window; threads:",
                 (int)pids[i], comm, dt);
        len = strlen(f->detail);
        il_threads(pids[i], f->detail + len, sizeof(f->detail) - len);
    }
    f->wall_ms = th_now_ms() - w0;
    f->cpu_ms = (double)ticks * 1000.0 / (double)sysconf(_SC_CLK_TCK);
    f->nprocs = n;
}

/* What a client does before it goes quiet: launches waited for and
 * answered when enqueued, a buffer written and read. Leaves the client
 * connected, its ring open. */
static void
il_work(cumod_client *c)
{
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cr_assert(cumod_fast_path(c), "the client should have its ring");
    for (int i = 0; i < 200; i++)
        cr_assert_eq(cumod_launch(c, &p, NULL, NULL), CUMOD_OK, "%s",
                     cumod_last_detail());
    cumod_ticket tk;
    for (int i = 0; i < 50; i++)
        cr_assert_eq(cumod_launch(c, &p, &tk, NULL), CUMOD_OK, "%s",
                     cumod_last_detail());
    cr_assert_eq(cumod_wait(c, tk), CUMOD_OK, "%s", cumod_last_detail());
    cumod_buffer b;
    char in[256], out[256];
    memset(in, 7, sizeof(in));
    cr_assert_eq(cumod_buffer_alloc(c, sizeof(in), &b), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_write(c, b, 0, in, sizeof(in), 0), CUMOD_OK, "%s",
                 cumod_last_detail());
    cr_assert_eq(cumod_buffer_read(c, b, 0, out, sizeof(out), 0), CUMOD_OK,
                 "%s", cumod_last_detail());
    cr_assert_eq(memcmp(in, out, sizeof(in)), 0);
    cr_assert(cumod_fast_path(c), "the client should still have its ring");
}

static void
il_check(const char *what, const il_figure *f, const th_daemon *d)
{
    double pct = 100.0 * f->cpu_ms / f->wall_ms;
    cr_log_info("idle %s: %.1f ms of CPU in %.0f ms (%.2f%% of a core), "
                "%zu processes",
                what, f->cpu_ms, f->wall_ms, pct, f->nprocs);
    fprintf(stderr,
            "idle %s: %.1f ms of CPU in %.0f ms (%.2f%% of a core), %zu "
            "processes\n",
            what, f->cpu_ms, f->wall_ms, pct, f->nprocs);
    char *log = NULL;
    if (pct >= 1.0)
        log = th_daemon_log(d);
    cr_expect_lt(pct, 1.0,
                 "an idle cumodd (%s) should use under 1%% of a core: %.2f%% "
                 "(%.1f ms in %.0f ms):%s\nlog:\n%s",
                 what, pct, f->cpu_ms, f->wall_ms, f->detail, log ? log : "");
    free(log);
}

/* Still serving, at once, after the idle window. */
static void
il_still_serves(cumod_client *c)
{
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    cr_expect_eq(cumod_launch(c, &p, NULL, NULL), CUMOD_OK, "%s",
                 cumod_last_detail());
}

Test(idle, one_executor_after_work_with_a_ring_open, .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    th_env t;
    il_figure f;

    th_env_init(&t, k);
    th_env_start(&t, NULL, NULL);
    il_work(t.c);
    il_measure(&t.d, &f);
    cr_expect_geq(f.nprocs, 2, "the front and its executor:%s", f.detail);
    il_check("one executor", &f, &t.d);
    il_still_serves(t.c);
    th_env_stop(&t);
}

/* Waits until cumodd has n standbys ready. */
static void
il_wait_standby(cumod_client *c, unsigned n)
{
    for (int w = 0; w < 2000; w++) {
        cumod_domains *d = NULL;
        cr_assert_eq(cumod_domains_get(c, &d), CUMOD_OK, "%s",
                     cumod_last_detail());
        unsigned have = d->standby;
        cumod_domains_free(d);
        if (have >= n)
            return;
        th_sleep_ms(10);
    }
    cr_assert_fail("no standby ready");
}

/* Each executor's idle cost adds up: with domains, the loader, the
 * domain's executor and two standbys (each once cost ~0.3% of a core, its
 * heartbeat starting 2000 looks at its channel every second). */
Test(idle, domains_with_a_loader_and_standbys_after_work, .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    static const char *const extra[] = {"--domains", "uid", "--standby", "2",
                                        NULL};
    th_env t;
    il_figure f;

    th_env_init(&t, k);
    th_env_start(&t, extra, NULL);
    il_work(t.c);
    il_wait_standby(t.c, 2);
    il_measure(&t.d, &f);
    /* The front, the loader, the domain's executor and the standbys. */
    cr_expect_geq(f.nprocs, 5, "the front and four executors:%s", f.detail);
    il_check("domains and two standbys", &f, &t.d);
    il_still_serves(t.c);
    th_env_stop(&t);
}

/* Sixty-four clients connected, each with its ring handed to the executor
 * (direct launches, issue 33 point 7) and a few launches done, then idle:
 * the submission threads that read those rings back off to sleep, and the
 * whole daemon stays under 1% of a core. */
Test(idle, sixty_four_idle_clients_with_direct_rings, .timeout = 120)
{
    static const char *const k[] = {"empty", NULL};
    enum { N = 64 };
    cumod_client *c[N];
    th_env t;
    il_figure f;
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};

    th_env_init(&t, k);
    th_env_start(&t, NULL, NULL);
    il_work(t.c);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(cumod_open(t.d.url, 10000, &c[i]), CUMOD_OK,
                     "client %d: %s", i, cumod_last_detail());
        cr_assert(cumod_fast_path(c[i]), "client %d has its ring", i);
        for (int j = 0; j < 5; j++)
            cr_assert_eq(cumod_launch(c[i], &p, NULL, NULL), CUMOD_OK,
                         "client %d: %s", i, cumod_last_detail());
    }
    il_measure(&t.d, &f);
    il_check("64 clients connected, their rings with the executor", &f, &t.d);
    for (int i = 0; i < N; i++) {
        il_still_serves(c[i]);
        cumod_close(c[i]);
    }
    th_env_stop(&t);
}
