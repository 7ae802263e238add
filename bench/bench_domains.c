/* SPDX-License-Identifier: MIT */
/*
 * cumod_bench_domains: what one tenant's fault costs the others (issue 20,
 * point 8), for each fault of bench/faults.cu (an illegal address, a
 * device assert, a trap, a hang with a 500 ms deadline):
 *   - two domains (each [domain NAME] on a socket of its own): tenant b
 *     checks vadd sums in a loop while tenant a's kernel faults; b's failed
 *     rounds, whether it lost its buffers (target: none) and its longest
 *     gap between successes in [a's faulting launch, +2 s]; a's own first
 *     checked vadd after its fault was reported;
 *   - the floor, in the same run: two plain processes with contexts of
 *     their own (bench_domains_floor.c), the same checker and fault
 *     (target: b's gap <= the floor's + 20 ms);
 *   - one domain, two sessions (the same-domain bystander, which loses
 *     what it had in flight and its buffers: the cost of one context): b's
 *     time from a's fault report to its first success after it, without a
 *     standby and with --standby 1 (target with: 100 ms).
 * Each figure comes from a cumodd of its own (a fresh daemon, nothing
 * quarantined). Nothing asserts a time; it needs the real driver and says
 * "skipped" without one. CUMOD_BENCH_UNCHECKED=1 leaves the sums
 * unchecked, to try it on tests/fakecuda (CUMOD_CUDA_LIBRARY), which runs
 * no kernel.
 *
 *   cumod_bench_domains [--only domains,floor,same] [--kinds oob,...]
 *                       [--record FILE]
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_domains.h"
#include "cumod/cumod.h"
#include "exec/driver.h"

extern char **environ;

enum { VN = 4096 };
#define WINDOW_MS 2000.0

typedef struct bd_kind {
    const char *name; /* faults.cu's kernel */
    unsigned deadline_ms;
} bd_kind;

static const bd_kind bd_kinds[] = {
    {"oob", 0}, {"dev_assert", 0}, {"trap", 0}, {"hang", 500}};
enum { NKINDS = sizeof(bd_kinds) / sizeof(bd_kinds[0]) };

/* Every figure of one kind; NAN-free: -1 where it was not measured. */
typedef struct bd_row {
    int have_dom, have_floor, have_same[2];
    cumod_bench_window dom_b; /* two domains: b over the window */
    int dom_lost;
    double dom_report_ms, dom_a_back_ms; /* a: launch to error; to its
                                            first success after the error */
    cumod_bench_floor_fault floor;
    cumod_bench_window same_b[2]; /* one domain, [0] no standby, [1] one */
    char error[160];              /* what a's launch was answered */
} bd_row;

typedef struct bd_daemon {
    pid_t pid;
    char url[300];
    cumod_client *c;
} bd_daemon;

/* A vadd tenant's buffers and launch on client c. */
typedef struct bd_vadd {
    cumod_client *c;
    cumod_buffer a, b, out;
    cumod_arg args[4];
    cumod_launch_params p;
    int unchecked; /* CUMOD_BENCH_UNCHECKED=1: sums not compared */
} bd_vadd;

static float bd_ha[VN], bd_hb[VN];

static int
bd_vadd_setup(bd_vadd *v)
{
    if (cumod_buffer_alloc(v->c, sizeof(bd_ha), &v->a) != CUMOD_OK ||
        cumod_buffer_alloc(v->c, sizeof(bd_hb), &v->b) != CUMOD_OK ||
        cumod_buffer_alloc(v->c, sizeof(bd_ha), &v->out) != CUMOD_OK ||
        cumod_buffer_write(v->c, v->a, 0, bd_ha, sizeof(bd_ha), 0) !=
            CUMOD_OK ||
        cumod_buffer_write(v->c, v->b, 0, bd_hb, sizeof(bd_hb), 0) != CUMOD_OK)
        return -1;
    v->args[0] = cumod_arg_buffer(v->a, 0);
    v->args[1] = cumod_arg_buffer(v->b, 0);
    v->args[2] = cumod_arg_buffer(v->out, 0);
    v->args[3] = cumod_arg_i32(VN);
    v->p = (cumod_launch_params){.kernel = "vadd:vadd",
                                 .grid = {VN / 256, 1, 1},
                                 .block = {256, 1, 1},
                                 .nargs = 4,
                                 .args = v->args};
    /* tests/fakecuda runs no kernel, so its sums are never right: there
     * the bench's own workings can be tried with the comparison off. */
    const char *u = getenv("CUMOD_BENCH_UNCHECKED");
    v->unchecked = u != NULL && strcmp(u, "1") == 0;
    return 0;
}

/* One checked round: CUMOD_OK when every sum is right, CUMOD_EIO when one
 * is wrong, or the error. */
static int
bd_vadd_round(bd_vadd *v)
{
    static _Thread_local float c[VN];
    int rv = cumod_launch(v->c, &v->p, NULL, NULL);
    if (rv == CUMOD_OK)
        rv = cumod_buffer_read(v->c, v->out, 0, c, sizeof(c), 0);
    for (int i = 0; rv == CUMOD_OK && !v->unchecked && i < VN; i++)
        if (c[i] != bd_ha[i] + bd_hb[i])
            rv = CUMOD_EIO;
    return rv;
}

/* --- tenant b: checks vadd in a loop on a thread of its own ------------- */

typedef struct bd_checker {
    const char *url;
    atomic_int stop, ready;
    cumod_bench_trace tr;
    int lost; /* its buffers went with a context */
    char first[256];
} bd_checker;

static void *
bd_checker_main(void *arg)
{
    bd_checker *k = arg;
    bd_vadd v = {0};
    if (cumod_open(k->url, 20000, &v.c) != CUMOD_OK || bd_vadd_setup(&v)) {
        snprintf(k->first, sizeof(k->first), "setup: %s", cumod_last_detail());
        atomic_store(&k->ready, -1);
        cumod_close(v.c);
        return NULL;
    }
    atomic_store(&k->ready, 1);
    double t0 = cumod__bench_now_us();
    while (!atomic_load(&k->stop) && cumod__bench_now_us() - t0 < 60e6) {
        int rv = bd_vadd_round(&v);
        cumod__bench_trace_add(&k->tr, cumod__bench_now_us(), rv == CUMOD_OK);
        if (rv == CUMOD_OK)
            continue;
        if (k->first[0] == '\0')
            snprintf(k->first, sizeof(k->first), "%s: %s", cumod_errname(rv),
                     rv == CUMOD_EIO ? "wrong sums" : cumod_last_detail());
        if (rv == CUMOD_ECTXLOST) {
            /* Its buffers went with the context: new ones (the allocation
             * waits for the domain's new executor). */
            k->lost = 1;
            cumod_buffer_free(v.c, v.a);
            cumod_buffer_free(v.c, v.b);
            cumod_buffer_free(v.c, v.out);
            while (!atomic_load(&k->stop) && bd_vadd_setup(&v) != 0) {
                cumod__bench_trace_add(&k->tr, cumod__bench_now_us(), 0);
                usleep(1000);
            }
        }
    }
    /* Its buffers still hold what it wrote: nothing of its was lost. */
    static _Thread_local float back[VN];
    if (!k->lost &&
        (cumod_buffer_read(v.c, v.a, 0, back, sizeof(back), 0) != CUMOD_OK ||
         memcmp(back, bd_ha, sizeof(back)) != 0))
        k->lost = 1;
    cumod_close(v.c);
    return NULL;
}

/* --- cumodd ----------------------------------------------------------------
 */

/* Starts cumodd on kdir, listening on dir/cumodd.sock, with the config
 * file conf (or none) and standby spare executors; its log goes to
 * dir/cumodd-SEQ.log. Waits until it answers. */
static int
bd_daemon_start(bd_daemon *d, const char *dir, const char *kdir,
                const char *conf, int standby, int seq)
{
    char log[400], sb[16];
    posix_spawn_file_actions_t fa;
    const char *argv[24];
    int n = 0;

    snprintf(d->url, sizeof(d->url), "ipc://%s/cumodd.sock", dir);
    snprintf(log, sizeof(log), "%s/cumodd-%d.log", dir, seq);
    snprintf(sb, sizeof(sb), "%d", standby);
    argv[n++] = CUMOD_BENCH_CUMODD;
    argv[n++] = "--kernels";
    argv[n++] = kdir;
    argv[n++] = "--listen";
    argv[n++] = d->url;
    argv[n++] = "--log-level";
    argv[n++] = "info";
    /* Both modules in every executor from its start: no load inside the
     * window, none after a restart. */
    argv[n++] = "--pin";
    argv[n++] = "vadd";
    argv[n++] = "--pin";
    argv[n++] = "faults";
    /* Work sent during a restart waits for it, however long it takes. */
    argv[n++] = "--restart-wait";
    argv[n++] = "20000";
    argv[n++] = "--standby";
    argv[n++] = sb;
    if (conf != NULL) {
        argv[n++] = "--config";
        argv[n++] = conf;
    }
    argv[n] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    int rv =
        posix_spawn(&d->pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rv != 0)
        return -1;
    for (int i = 0; i < 3000; i++) {
        cumod_device_info di;
        if (cumod_open(d->url, 5000, &d->c) == CUMOD_OK) {
            if (cumod_device_info_get(d->c, &di) == CUMOD_OK)
                return 0;
            cumod_close(d->c);
            d->c = NULL;
        }
        if (waitpid(d->pid, NULL, WNOHANG) == d->pid)
            break;
        usleep(10000);
    }
    fprintf(stderr, "bench: cumodd did not start (its log: %s)\n", log);
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    return -1;
}

static void
bd_daemon_stop(bd_daemon *d)
{
    cumod_close(d->c);
    d->c = NULL;
    kill(d->pid, SIGTERM);
    waitpid(d->pid, NULL, 0);
}

/* Waits (30 s at most) until standby spare executors are up. The
 * domains need no wait: a tenant's first allocation waits for its
 * domain's executor, whenever that one starts. 0, or -1. */
static int
bd_wait_standby(bd_daemon *d, unsigned standby)
{
    for (int w = 0; w < 3000; w++) {
        cumod_domains *ds;
        unsigned up = 0;
        if (cumod_domains_get(d->c, &ds) == CUMOD_OK) {
            up = ds->standby;
            cumod_domains_free(ds);
        }
        if (up >= standby)
            return 0;
        usleep(10000);
    }
    fprintf(stderr, "bench: no standby executor came up\n");
    return -1;
}

/* --- one measurement -------------------------------------------------------
 */

/* Tenant a (session v, buffer x zeroed) launches k's kernel; t0 and t1:
 * when it was sent and answered; *back_us: from t1 to a's first checked
 * vadd after it (new buffers: the old ones went with its context), -1 if
 * none came within 20 s. */
static void
bd_a_fault(bd_vadd *v, cumod_buffer x, const bd_kind *k, double *t0, double *t1,
           double *back_us, char *error, size_t errlen)
{
    char kernel[64];
    snprintf(kernel, sizeof(kernel), "faults:%s", k->name);
    cumod_arg args[] = {cumod_arg_buffer(x, 0)};
    cumod_launch_params p = {.kernel = kernel,
                             .grid = {1, 1, 1},
                             .block = {32, 1, 1},
                             .nargs = 1,
                             .args = args,
                             .deadline_ms = k->deadline_ms};
    *t0 = cumod__bench_now_us();
    int rv = cumod_launch(v->c, &p, NULL, NULL);
    *t1 = cumod__bench_now_us();
    snprintf(error, errlen, "%s: %s", cumod_errname(rv),
             rv ? cumod_last_detail() : "it ran");
    *back_us = -1;
    while (cumod__bench_now_us() - *t1 < 20e6) {
        if (bd_vadd_setup(v) == 0 && bd_vadd_round(v) == CUMOD_OK) {
            *back_us = cumod__bench_now_us() - *t1;
            return;
        }
        usleep(1000);
    }
}

/* Tenant a's fault on url_a while b checks on url_b, on cumodd d once
 * both are served and standby spares are up: b's window, a's report and
 * a's first success after it. 0, or -1. */
static int
bd_fault_beside(bd_daemon *d, unsigned standby, const char *url_a,
                const char *url_b, const bd_kind *k, cumod_bench_window *bw,
                int *lost, double *report_ms, double *a_back_ms, char *error,
                size_t errlen)
{
    bd_checker chk = {.url = url_b};
    pthread_t th;
    bd_vadd v = {0};
    cumod_buffer x;
    double t0, t1, back;

    if (cumod_open(url_a, 20000, &v.c) != CUMOD_OK ||
        cumod_buffer_alloc(v.c, 4096, &x) != CUMOD_OK ||
        cumod_buffer_memset(v.c, x, 0, 4096, 0, 0, NULL) != CUMOD_OK) {
        fprintf(stderr, "bench: tenant a: %s\n", cumod_last_detail());
        cumod_close(v.c);
        return -1;
    }
    if (pthread_create(&th, NULL, bd_checker_main, &chk) != 0) {
        cumod_close(v.c);
        return -1;
    }
    while (atomic_load(&chk.ready) == 0)
        usleep(1000);
    int up = atomic_load(&chk.ready) > 0;
    if (up && standby > 0 && bd_wait_standby(d, standby) != 0) {
        snprintf(chk.first, sizeof(chk.first), "no standby");
        up = 0;
    }
    if (up) {
        usleep(300000); /* b in its loop: the fault lands among its rounds */
        bd_a_fault(&v, x, k, &t0, &t1, &back, error, errlen);
        /* b runs on past the window, so that its gap there is whole. */
        while (cumod__bench_now_us() < t0 + WINDOW_MS * 1e3 + 100e3)
            usleep(10000);
    }
    atomic_store(&chk.stop, 1);
    pthread_join(th, NULL);
    if (up) {
        cumod__bench_window(&chk.tr, t0, t0 + WINDOW_MS * 1e3, t1, bw);
        *lost = chk.lost;
        *report_ms = (t1 - t0) / 1e3;
        *a_back_ms = back < 0 ? -1 : back / 1e3;
        if (bw->failed > 0)
            printf("    (b's first failure: %.200s)\n", chk.first);
    } else {
        fprintf(stderr, "bench: tenant b: %s\n", chk.first);
    }
    cumod__bench_trace_free(&chk.tr);
    cumod_close(v.c);
    return up ? 0 : -1;
}

typedef struct bench_dom {
    char dir[128], kdir[200];
    const char *self;
    int seq;
    int failures; /* measurements that could not be made */
} bench_dom;

/* Two domains, a and b, each with a socket of its own. */
static int
bd_two_domains(bench_dom *b, const bd_kind *k, bd_row *row)
{
    char conf[300], text[1200], ua[300], ub[300];
    bd_daemon d = {0};
    snprintf(ua, sizeof(ua), "ipc://%s/a.sock", b->dir);
    snprintf(ub, sizeof(ub), "ipc://%s/b.sock", b->dir);
    snprintf(conf, sizeof(conf), "%s/cumodd.conf", b->dir);
    snprintf(text, sizeof(text),
             "[domain a]\nlisten = %s\nstart = always\n\n"
             "[domain b]\nlisten = %s\nstart = always\n",
             ua, ub);
    FILE *f = fopen(conf, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
        return -1;
    if (bd_daemon_start(&d, b->dir, b->kdir, conf, 0, b->seq++) != 0)
        return -1;
    int rc = bd_fault_beside(&d, 0, ua, ub, k, &row->dom_b, &row->dom_lost,
                             &row->dom_report_ms, &row->dom_a_back_ms,
                             row->error, sizeof(row->error));
    bd_daemon_stop(&d);
    row->have_dom = rc == 0;
    return rc;
}

/* One domain (the default), a and b two sessions of it. */
static int
bd_one_domain(bench_dom *b, const bd_kind *k, int standby, bd_row *row)
{
    bd_daemon d = {0};
    int lost;
    double rep, aback;
    char err[160];
    if (bd_daemon_start(&d, b->dir, b->kdir, NULL, standby, b->seq++) != 0)
        return -1;
    int rc = bd_fault_beside(&d, (unsigned)standby, d.url, d.url, k,
                             &row->same_b[standby], &lost, &rep, &aback, err,
                             sizeof(err));
    bd_daemon_stop(&d);
    row->have_same[standby] = rc == 0;
    return rc;
}

/* --- the table -------------------------------------------------------------
 */

/* A time in the table; -1 (not measured, or never) as "-". */
static void
bd_print(double v)
{
    if (v < 0)
        printf(" %9s", "-");
    else
        printf(" %9.1f", v);
}

static void
bd_table(const bd_row *rows, const int *want)
{
    printf("\nfault domains (issue 20): tenant b checks vadd sums while "
           "tenant a's kernel faults; window: a's faulting launch + %.0f "
           "ms. Times in ms; -: not measured.\n",
           WINDOW_MS);
    printf("%-11s|%-44s|%-28s|%s\n", "", " two domains (cumod)",
           " floor: two processes",
           " one domain: b's failures, b back after a's report");
    printf("%-11s|%-44s|%-28s|%-17s|%s\n", "", "", "", " no standby",
           " --standby 1");
    printf("%-11s| %6s %5s %9s %9s %9s | %6s %9s %9s | %6s %9s | %6s %9s\n",
           "fault", "b fail", "lost", "b gap", "a report", "a back", "b fail",
           "b gap", "a report", "b fail", "b back", "b fail", "b back");
    for (int i = 0; i < NKINDS; i++) {
        const bd_row *r = &rows[i];
        if (!want[i])
            continue;
        printf("%-11s|", bd_kinds[i].name);
        if (r->have_dom) {
            printf(" %6ld %5s", r->dom_b.failed, r->dom_lost ? "yes" : "no");
            bd_print(r->dom_b.gap_ms);
            bd_print(r->dom_report_ms);
            bd_print(r->dom_a_back_ms);
        } else {
            printf(" %6s %5s %9s %9s %9s", "-", "-", "-", "-", "-");
        }
        printf(" |");
        if (r->have_floor) {
            printf(" %6ld", r->floor.b.failed);
            bd_print(r->floor.b.gap_ms);
            bd_print(r->floor.report_ms);
        } else {
            printf(" %6s %9s %9s", "-", "-", "-");
        }
        printf(" |");
        for (int s = 0; s < 2; s++) {
            printf(s ? " |" : "");
            if (r->have_same[s]) {
                printf(" %6ld", r->same_b[s].failed);
                bd_print(r->same_b[s].back_ms);
            } else {
                printf(" %6s %9s", "-", "-");
            }
        }
        printf("\n");
    }
    printf("targets: two domains, b fail 0 and lost no; b gap <= the floor's "
           "b gap + 20 ms. One domain with --standby 1: b back <= 100 ms "
           "(b's failures there are its work in flight, the cost of one "
           "context).\n");
}

static void
bd_record(const bd_row *r, const char *kind)
{
    if (r->have_dom) {
        cumod__bench_recordf((double)r->dom_b.failed, "domains_%s_b_failed",
                             kind);
        cumod__bench_recordf(r->dom_lost, "domains_%s_b_lost", kind);
        cumod__bench_recordf(r->dom_b.gap_ms, "domains_%s_b_gap_ms", kind);
        cumod__bench_recordf(r->dom_report_ms, "domains_%s_a_report_ms", kind);
        cumod__bench_recordf(r->dom_a_back_ms, "domains_%s_a_back_ms", kind);
    }
    if (r->have_floor) {
        cumod__bench_recordf((double)r->floor.b.failed,
                             "domains_floor_%s_b_failed", kind);
        cumod__bench_recordf(r->floor.b.gap_ms, "domains_floor_%s_b_gap_ms",
                             kind);
        cumod__bench_recordf(r->floor.report_ms, "domains_floor_%s_a_report_ms",
                             kind);
    }
    static const char *const sn[] = {"nostandby", "standby"};
    for (int s = 0; s < 2; s++)
        if (r->have_same[s]) {
            cumod__bench_recordf((double)r->same_b[s].failed,
                                 "domains_same_%s_%s_b_failed", sn[s], kind);
            cumod__bench_recordf(r->same_b[s].back_ms,
                                 "domains_same_%s_%s_b_back_ms", sn[s], kind);
            cumod__bench_recordf(r->same_b[s].gap_ms,
                                 "domains_same_%s_%s_b_gap_ms", sn[s], kind);
        }
}

/* 1 when the driver loads and finds a device (this process makes no
 * context: the workers and cumodd make their own). */
static int
bd_driver_usable(char *why, size_t len)
{
    static cumod_driver drv; /* kept loaded: unloading cuInit's is unsafe */
    int n = 0;
    if (cumod__driver_open(&drv, cumod__driver_default_path(NULL), why, len) !=
        0)
        return 0;
    CUresult r = drv.init(0);
    if (r != CUDA_SUCCESS || drv.device_get_count(&n) != CUDA_SUCCESS ||
        n < 1) {
        snprintf(why, len, "the CUDA driver found no device (cuInit: %d)",
                 (int)r);
        return 0;
    }
    return 1;
}

static void
bd_sh(const char *cmd)
{
    if (system(cmd) != 0)
        fprintf(stderr, "bench: '%s' failed\n", cmd);
}

int
main(int argc, char **argv)
{
    const char *only = NULL, *kinds = NULL;
    bench_dom b = {.self = "/proc/self/exe"};
    bd_row rows[NKINDS];
    int want[NKINDS];
    char why[1024], cmd[1024];

    if (argc >= 2 && strcmp(argv[1], "--floor-worker") == 0)
        return cumod__bench_domains_worker(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--kinds") == 0 && i + 1 < argc) {
            kinds = argv[++i];
        } else if (strcmp(argv[i], "--record") == 0 && i + 1 < argc) {
            cumod__bench_record_open(argv[++i]);
        } else {
            fprintf(stderr,
                    "usage: cumod_bench_domains [--only domains,floor,same] "
                    "[--kinds oob,dev_assert,trap,hang] [--record FILE]\n");
            return 2;
        }
    }
#define PART(name) (only == NULL || strstr(only, name) != NULL)
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!bd_driver_usable(why, sizeof(why))) {
        printf("skipped: %s\n", why);
        return 0;
    }
    for (int i = 0; i < VN; i++) {
        bd_ha[i] = (float)i;
        bd_hb[i] = (float)(2 * i);
    }
    snprintf(b.dir, sizeof(b.dir), "/tmp/cumod-bench-domains.XXXXXX");
    if (mkdtemp(b.dir) == NULL)
        return 1;
    snprintf(b.kdir, sizeof(b.kdir), "%s/k", b.dir);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s && cp %s/vadd.cubin %s/faults.cubin %s/", b.kdir,
             CUMOD_BENCH_KERNEL_DIR, CUMOD_BENCH_FAULT_DIR, b.kdir);
    bd_sh(cmd);
    memset(rows, 0, sizeof(rows));
    for (int i = 0; i < NKINDS; i++) {
        const bd_kind *k = &bd_kinds[i];
        bd_row *r = &rows[i];
        want[i] = kinds == NULL || strstr(kinds, k->name) != NULL;
        if (!want[i])
            continue;
        printf("%s%s:\n", k->name, k->deadline_ms ? " (deadline 500 ms)" : "");
        if (PART("domains") && bd_two_domains(&b, k, r) != 0)
            b.failures++;
        if (r->have_dom)
            printf("  two domains: a's launch answered %.1f ms after it was "
                   "sent (%.150s); a served again %.1f ms after; b: %ld "
                   "failed, buffers %s, longest gap %.1f ms\n",
                   r->dom_report_ms, r->error, r->dom_a_back_ms,
                   r->dom_b.failed, r->dom_lost ? "LOST" : "kept",
                   r->dom_b.gap_ms);
        if (PART("floor")) {
            r->have_floor =
                cumod__bench_domains_floor(
                    b.self, b.dir, CUMOD_BENCH_KERNEL_DIR "/vadd.cubin",
                    CUMOD_BENCH_FAULT_DIR "/faults.cubin", k->name,
                    k->deadline_ms, WINDOW_MS, &r->floor) == 0;
            b.failures += !r->have_floor;
            if (r->have_floor)
                printf("  floor, two processes: a's %s after %.1f ms; b: %ld "
                       "failed, longest gap %.1f ms\n",
                       r->floor.error, r->floor.report_ms, r->floor.b.failed,
                       r->floor.b.gap_ms);
        }
        for (int s = 0; s < 2 && PART("same"); s++) {
            if (bd_one_domain(&b, k, s, r) != 0)
                b.failures++;
            else
                printf("  one domain, %s: b %ld failed, served again %.1f ms "
                       "after a's fault was reported (longest gap %.1f "
                       "ms)\n",
                       s ? "--standby 1" : "no standby", r->same_b[s].failed,
                       r->same_b[s].back_ms, r->same_b[s].gap_ms);
        }
        bd_record(r, k->name);
    }
    bd_table(rows, want);
    if (b.failures > 0) {
        /* The daemons' logs say why. */
        printf("%d measurements failed; their cumodd logs are kept in %s\n",
               b.failures, b.dir);
        return 1;
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", b.dir);
    bd_sh(cmd);
    return 0;
}
