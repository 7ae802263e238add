/* SPDX-License-Identifier: MIT */
/*
 * cumod_bench: DESIGN.md's targets, each printed beside its floor measured
 * in the same run on the same machine. Starts its own cumodd (on a copy of
 * the example kernels in a temp folder) on the real driver.
 *
 *   cumod_bench [--only PART,...]   (parts: see its usage; gemm is
 *                                    bench_gemm.c's)
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cumod/cumod.h"

extern char **environ;

typedef struct bench {
    char dir[128], kdir[160], url[200];
    pid_t pid;
    cumod_client *c;
    double up_ms; /* from its start to its first answer */
} bench;

static void
bench_sh(const char *cmd)
{
    if (system(cmd) != 0)
        fprintf(stderr, "bench: '%s' failed\n", cmd);
}

static int
bench_start(bench *b, const char *kdir)
{
    /* CUMOD_BENCH_LOG_LEVEL=debug: the daemon's timings of large work
     * (CUMOD-RING-TIMING, CUMOD-EXEC-TIMING) on stderr. */
    const char *level = getenv("CUMOD_BENCH_LOG_LEVEL");
    /* CUMOD_BENCH_DAEMON_ARGS: more options for cumodd, split at spaces
     * (an A/B of one setting, e.g. "--submit-threads 1"). */
    static char extra[512];
    char *argv[24] = {CUMOD_BENCH_CUMODD,
                      "--kernels",
                      (char *)kdir,
                      "--listen",
                      b->url,
                      "--log-level",
                      (char *)(level && level[0] ? level : "warn"),
                      NULL};
    const char *more = getenv("CUMOD_BENCH_DAEMON_ARGS");
    if (more != NULL) {
        int n = 7;
        snprintf(extra, sizeof(extra), "%s", more);
        for (char *save = NULL, *tok = strtok_r(extra, " ", &save);
             tok != NULL && n < 23; tok = strtok_r(NULL, " ", &save))
            argv[n++] = tok;
        argv[n] = NULL;
    }
    /* CUMOD_BENCH_DAEMON_WRAP: a command cumodd runs under, split at
     * spaces ("nice -n -10": an A/B of its threads' priority against
     * spinning clients; the command must exec cumodd in its place). */
    static char wrap[256];
    char *wargv[40];
    int w = 0;
    const char *wr = getenv("CUMOD_BENCH_DAEMON_WRAP");
    if (wr != NULL && wr[0] != '\0') {
        snprintf(wrap, sizeof(wrap), "%s", wr);
        for (char *save = NULL, *tok = strtok_r(wrap, " ", &save);
             tok != NULL && w < 15; tok = strtok_r(NULL, " ", &save))
            wargv[w++] = tok;
    }
    for (int i = 0; argv[i] != NULL && w < 39; i++)
        wargv[w++] = argv[i];
    wargv[w] = NULL;
    double t0 = cumod__bench_now_us();
    if (posix_spawnp(&b->pid, wargv[0], NULL, NULL, wargv, environ) != 0)
        return -1;
    for (int i = 0; i < 3000; i++) {
        cumod_device_info di;
        if (cumod_open(b->url, 5000, &b->c) == CUMOD_OK) {
            if (cumod_device_info_get(b->c, &di) == CUMOD_OK) {
                b->up_ms = (cumod__bench_now_us() - t0) / 1e3;
                printf("  cumodd up and answering: %.0f ms after start\n",
                       b->up_ms);
                return 0;
            }
            cumod_close(b->c);
        }
        usleep(1000);
    }
    return -1;
}

static void
bench_stop(bench *b)
{
    cumod_close(b->c);
    b->c = NULL;
    kill(b->pid, SIGTERM);
    waitpid(b->pid, NULL, 0);
}

static cumod_launch_params
bench_empty(void)
{
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    return p;
}

/* Round trips of empty launches on c: answered when complete, and when
 * enqueued; p50 and p99 of each into q[4]. */
static void
bench_rtt(cumod_client *c, double q[4])
{
    enum { N = 20000 };
    static double t[N];
    cumod_launch_params p = bench_empty();
    cumod_ticket tk;

    static double at[N];
    for (int i = 0; i < 1000; i++) /* loads the module, warms up */
        cumod_launch(c, &p, NULL, NULL);
    for (int i = 0; i < N; i++) {
        double t0 = cumod__bench_now_us();
        cumod_launch(c, &p, NULL, NULL);
        t[i] = cumod__bench_now_us() - t0;
        at[i] = t0;
    }
    /* CUMOD_BENCH_TAIL=US: when the slow ones came (to tell a period). */
    const char *tail = getenv("CUMOD_BENCH_TAIL");
    if (tail != NULL && atof(tail) > 0) {
        double lim = atof(tail), last = at[0];
        int k = 0;
        printf("  round trips over %.0f us (index: us, ms since the last "
               "such):",
               lim);
        for (int i = 0; i < N; i++)
            if (t[i] > lim) {
                if (k++ < 40)
                    printf(" %d:%.0f/%.1f", i, t[i], (at[i] - last) / 1e3);
                last = at[i];
            }
        printf(" (%d in all)\n", k);
    }
    q[0] = cumod__bench_quantile(t, N, 0.5);
    q[1] = cumod__bench_quantile(t, N, 0.99);
    for (int i = 0; i < N; i++) {
        double t0 = cumod__bench_now_us();
        cumod_launch(c, &p, &tk, NULL);
        t[i] = cumod__bench_now_us() - t0;
    }
    cumod_stream_synchronize(c, 0);
    q[2] = cumod__bench_quantile(t, N, 0.5);
    q[3] = cumod__bench_quantile(t, N, 0.99);
}

/* Round trips that never reach the executor: a launch refused by the
 * checks (an argument too many); the p50. */
static double
bench_refused_rtt(cumod_client *c)
{
    enum { N = 20000 };
    static double t[N];
    cumod_arg extra = cumod_arg_i32(1);
    cumod_launch_params p = bench_empty();
    p.nargs = 1;
    p.args = &extra;
    for (int i = 0; i < N; i++) {
        double t0 = cumod__bench_now_us();
        cumod_launch(c, &p, NULL, NULL);
        t[i] = cumod__bench_now_us() - t0;
    }
    return cumod__bench_quantile(t, N, 0.5);
}

/* Unbatched launches answered when enqueued, one wait at the end. */
static double
bench_async_rate(cumod_client *c, int *errors, int post)
{
    enum { N = 100000 };
    cumod_launch_params p = bench_empty();
    cumod_ticket tk = 0;
    *errors = 0;
    double t0 = cumod__bench_now_us();
    for (int i = 0; i < N; i++) /* post: cumod_launch_post, no answer */
        *errors += (post ? cumod_launch_post(c, &p, NULL, &tk)
                         : cumod_launch(c, &p, &tk, NULL)) != CUMOD_OK;
    *errors += cumod_wait(c, tk) != CUMOD_OK;
    return N / ((cumod__bench_now_us() - t0) / 1e6);
}

/* The nng path against nng's own round trip, taken in turns (five rounds
 * of 2,000 each: echo, cumod answered when complete, cumod answered when
 * enqueued), so that both see the same moment of the machine: nng's round
 * trip moved from 78 to 166 us between runs on one H100 host. q as
 * bench_rtt's; returns the echo's p50. */
static double
bench_rtt_nng(bench *b, cumod_client *c, double q[4])
{
    enum { R = 5, N = 2000 };
    static double echo[R * N], done[R * N], enq[R * N];
    cumod_launch_params p = bench_empty();
    cumod_ticket tk;

    for (int i = 0; i < 1000; i++) /* loads the module, warms up */
        cumod_launch(c, &p, NULL, NULL);
    for (int r = 0; r < R; r++) {
        if (cumod__bench_nng_rtt(b->dir, echo + r * N, N) != 0)
            return NAN;
        for (int i = 0; i < N; i++) {
            double t0 = cumod__bench_now_us();
            cumod_launch(c, &p, NULL, NULL);
            done[r * N + i] = cumod__bench_now_us() - t0;
        }
        for (int i = 0; i < N; i++) {
            double t0 = cumod__bench_now_us();
            cumod_launch(c, &p, &tk, NULL);
            enq[r * N + i] = cumod__bench_now_us() - t0;
        }
        cumod_stream_synchronize(c, 0);
    }
    q[0] = cumod__bench_quantile(done, R * N, 0.5);
    q[1] = cumod__bench_quantile(done, R * N, 0.99);
    q[2] = cumod__bench_quantile(enq, R * N, 0.5);
    q[3] = cumod__bench_quantile(enq, R * N, 0.99);
    return cumod__bench_quantile(echo, R * N, 0.5);
}

static double
bench_launches(bench *b, const cumod_bench_floors *f, double nng_p50)
{
    double ring[4], nng[4];
    cumod_client *n;
    int errs;

    setenv("CUMOD_NO_RING", "1", 1);
    int rv = cumod_open(b->url, 10000, &n);
    unsetenv("CUMOD_NO_RING");
    if (rv != CUMOD_OK) {
        printf("launches: %s\n", cumod_last_detail());
        return NAN;
    }
    printf("launch round trips, empty kernel (the fast path is %s):\n",
           cumod_fast_path(b->c) ? "on" : "OFF");
    bench_rtt(b->c, ring);
    double echo = bench_rtt_nng(b, n, nng);
    if (!isnan(echo))
        nng_p50 = echo; /* taken beside the nng path's own samples */
    cumod__bench_record("nng_rtt_interleaved_p50_us", nng_p50);
    printf("  in process (floor): launch + cuStreamSynchronize p50 %.1f us; "
           "launch + event spin p50 %.1f us\n",
           f->launch_sync_p50_us, f->launch_event_p50_us);
    printf("  fast path, answered when complete: p50 %.1f us, p99 %.1f us "
           "(target: p50 25, p99 60)\n",
           ring[0], ring[1]);
    double refused = bench_refused_rtt(b->c);
    printf("  fast path, answered when enqueued: p50 %.1f us, p99 %.1f us; "
           "a launch refused by the checks (never sent to the executor): "
           "p50 %.1f us\n",
           ring[2], ring[3], refused);
    static const char *const qn[] = {"complete_p50", "complete_p99",
                                     "enqueued_p50", "enqueued_p99"};
    for (int i = 0; i < 4; i++) {
        cumod__bench_recordf(ring[i], "ring_%s_us", qn[i]);
        cumod__bench_recordf(nng[i], "nng_%s_us", qn[i]);
    }
    cumod__bench_record("ring_refused_p50_us", refused);
    printf("  nng, answered when complete: p50 %.1f us, p99 %.1f us (target: "
           "nng round trip, taken in turns with it, %.1f + 20 = %.1f us)\n",
           nng[0], nng[1], nng_p50, nng_p50 + 20);
    printf("  nng, answered when enqueued: p50 %.1f us, p99 %.1f us (target: "
           "%.1f + 10 = %.1f us)\n",
           nng[2], nng[3], nng_p50, nng_p50 + 10);
    double r = bench_async_rate(b->c, &errs, 0);
    cumod__bench_record("ring_async_per_s", r);
    cumod__bench_record("ring_async_errors", errs);
    printf("unbatched launches answered when enqueued, one wait at the end: "
           "fast path %.0f/s = %.0f%% of in-process async %.0f/s (target "
           "50%%); %d errors\n",
           r, 100 * r / f->async_launches_per_s, f->async_launches_per_s, errs);
    r = bench_async_rate(b->c, &errs, 1);
    cumod__bench_record("ring_posted_per_s", r);
    printf("  posted (cumod_launch_post), one wait at the end: %.0f/s = "
           "%.0f%% of in-process async; %d errors\n",
           r, 100 * r / f->async_launches_per_s, errs);
    r = bench_async_rate(n, &errs, 0);
    cumod__bench_record("nng_async_per_s", r);
    printf("  the same over nng: %.0f/s = %.0f%%; %d errors\n", r,
           100 * r / f->async_launches_per_s, errs);
    cumod_close(n);
    return ring[0];
}

static void
bench_batches(bench *b, double async_rate)
{
    cumod_batch *bt;
    cumod_launch_params p = bench_empty();
    int failed;
    cumod_batch_alloc(&bt);
    for (int i = 0; i < 256; i++)
        cumod_batch_launch(bt, &p);
    cumod_batch_submit(b->c, bt, 0, NULL, &failed);
    /* The best of three rounds, as the floor is taken (bench_floor.c). */
    double rate = 0;
    int errs = 0;
    for (int k = 0; k < 3; k++) {
        double t0 = cumod__bench_now_us();
        for (int i = 0; i < 200; i++)
            errs += cumod_batch_submit(b->c, bt, 0, NULL, &failed) != CUMOD_OK;
        double r = 200.0 * 256 / ((cumod__bench_now_us() - t0) / 1e6);
        if (r > rate)
            rate = r;
    }
    if (errs)
        printf("  %d batches failed: %s\n", errs, cumod_last_detail());
    cumod__bench_record("batch_complete_per_s", rate);
    cumod__bench_record("batch_complete_errors", errs);
    printf("batches of 256 empty launches, one client, each answered when "
           "complete: %.0f launches/s = %.0f%% of in-process async %.0f/s "
           "(target: 80%%)\n",
           rate, 100 * rate / async_rate, async_rate);
    /* As the floor is measured: asynchronous, one wait at the end. */
    cumod_ticket tk = 0;
    int errors = 0;
    rate = 0;
    for (int k = 0; k < 3; k++) {
        double t0 = cumod__bench_now_us();
        for (int i = 0; i < 200; i++)
            errors += cumod_batch_submit(b->c, bt, 0, &tk, &failed) != CUMOD_OK;
        errors += cumod_wait(b->c, tk) != CUMOD_OK;
        double r = 200.0 * 256 / ((cumod__bench_now_us() - t0) / 1e6);
        if (r > rate)
            rate = r;
    }
    cumod__bench_record("batch_enqueued_per_s", rate);
    cumod__bench_record("batch_enqueued_errors", errors);
    printf("batches of 256 empty launches, one client, answered when "
           "enqueued (one wait at the end): %.0f launches/s = %.0f%% of "
           "in-process async; %d errors%s%s\n",
           rate, 100 * rate / async_rate, errors, errors ? ": " : "",
           errors ? cumod_last_detail() : "");
    cumod_batch_free(bt);
}

/* cumod_buffer_write / cumod_buffer_read of len bytes from plain
 * (pageable) memory, best of rounds; GB/s each way. */
static void
bench_xfer_one(bench *b, cumod_buffer d, uint8_t *h, size_t len, double *up,
               double *down, int *errs)
{
    int rounds = len >= (256u << 20) ? 3 : len >= (1u << 20) ? 5 : 50;
    *up = *down = 0;
    for (int k = 0; k < rounds; k++) {
        double t0 = cumod__bench_now_us();
        *errs += cumod_buffer_write(b->c, d, 0, h, len, 0) != CUMOD_OK;
        double g = (double)len / (cumod__bench_now_us() - t0) / 1e3;
        *up = g > *up ? g : *up;
        t0 = cumod__bench_now_us();
        *errs += cumod_buffer_read(b->c, d, 0, h, len, 0) != CUMOD_OK;
        g = (double)len / (cumod__bench_now_us() - t0) / 1e3;
        *down = g > *down ? g : *down;
    }
}

/* Issue 22 point 1: the plain calls at every size, inline against staged
 * (CUMOD_INLINE_MAX moves the crossover) for the small ones, beside the
 * in-process copy from pageable memory (what CuPy's asarray does). */
static void
bench_transfers(bench *b, const cumod_bench_floors *f)
{
    static const size_t sizes[] = {512,       1u << 10,  2u << 10,   4u << 10,
                                   16u << 10, 64u << 10, 256u << 10, 1u << 20,
                                   4u << 20,  16u << 20, 60u << 20,  256u << 20,
                                   1u << 30};
    size_t max = 1u << 30;
    cumod_buffer d;
    uint8_t *h = malloc(max);
    int errs = 0;

    if (h == NULL || cumod_buffer_alloc(b->c, max, &d) != CUMOD_OK) {
        printf("transfers: %s\n", h ? cumod_last_detail() : "no memory");
        free(h);
        return;
    }
    memset(h, 3, max);
    /* The staging segment made first (a client makes it on its first
     * transfer of 64 KiB or more), so that small staged ones are. */
    double wu, wd;
    bench_xfer_one(b, d, h, 1u << 20, &wu, &wd, &errs);
    printf("transfers through cumod_buffer_write / cumod_buffer_read from "
           "pageable memory (in-process cuMemcpy from pageable 64 MiB: "
           "H2D %.1f, D2H %.1f GB/s):\n",
           f->h2d_pageable_gbps, f->d2h_pageable_gbps);
    cumod__bench_record("floor_h2d_pageable_gbps", f->h2d_pageable_gbps);
    cumod__bench_record("floor_d2h_pageable_gbps", f->d2h_pageable_gbps);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        double up, down, sup = NAN, sdown = NAN, iup = NAN, idown = NAN;
        bench_xfer_one(b, d, h, sizes[i], &up, &down, &errs);
        if (sizes[i] <= (16u << 20)) {
            setenv("CUMOD_INLINE_MAX", "0", 1); /* always staged */
            bench_xfer_one(b, d, h, sizes[i], &sup, &sdown, &errs);
            setenv("CUMOD_INLINE_MAX", "1073741824", 1); /* inline/pieces */
            bench_xfer_one(b, d, h, sizes[i], &iup, &idown, &errs);
            unsetenv("CUMOD_INLINE_MAX");
        }
        printf("  %10zu B: up %6.2f GB/s, down %6.2f GB/s (staged %.2f / "
               "%.2f, inline %.2f / %.2f)\n",
               sizes[i], up, down, sup, sdown, iup, idown);
        cumod__bench_recordf(up, "xfer_%zub_up_gbps", sizes[i]);
        cumod__bench_recordf(down, "xfer_%zub_down_gbps", sizes[i]);
        cumod__bench_recordf(sup, "xfer_%zub_staged_up_gbps", sizes[i]);
        cumod__bench_recordf(sdown, "xfer_%zub_staged_down_gbps", sizes[i]);
        cumod__bench_recordf(iup, "xfer_%zub_inline_up_gbps", sizes[i]);
        cumod__bench_recordf(idown, "xfer_%zub_inline_down_gbps", sizes[i]);
    }
    if (errs)
        printf("  %d transfers failed: %s\n", errs, cumod_last_detail());
    cumod__bench_record("xfer_errors", errs);
    cumod_buffer_free(b->c, d);
    free(h);
}

static void
bench_copies(bench *b, double h2d, double d2h, double shm_h2d)
{
    size_t n = 256u << 20;
    cumod_segment *seg;
    cumod_buffer d;
    if (cumod_segment_create(b->c, n, &seg) ||
        cumod_buffer_alloc(b->c, n, &d)) {
        printf("copies: %s\n", cumod_last_detail());
        return;
    }
    memset(cumod_segment_data(seg), 1, n);
    cumod_copy_to_device(b->c, d, 0, seg, 0, n, 0, NULL);
    /* The best of three rounds of ten, as the floor is taken. */
    double up = 0, down = 0;
    for (int k = 0; k < 3; k++) {
        double t0 = cumod__bench_now_us();
        for (int i = 0; i < 10; i++)
            cumod_copy_to_device(b->c, d, 0, seg, 0, n, 0, NULL);
        double g = 10.0 * (double)n / (cumod__bench_now_us() - t0) / 1e3;
        up = g > up ? g : up;
        t0 = cumod__bench_now_us();
        for (int i = 0; i < 10; i++)
            cumod_copy_to_host(b->c, seg, 0, d, 0, n, 0, NULL);
        g = 10.0 * (double)n / (cumod__bench_now_us() - t0) / 1e3;
        down = g > down ? g : down;
    }
    cumod__bench_record("copy_h2d_gbps", up);
    cumod__bench_record("copy_d2h_gbps", down);
    printf("shared-segment copies, 256 MiB: to device %.1f GB/s (%.0f%% of "
           "in-process pinned %.1f), to host %.1f GB/s (%.0f%% of %.1f) "
           "(target: 90%%)\n",
           up, 100 * up / h2d, h2d, down, 100 * down / d2h, d2h);
    printf("  (in-process cuMemcpyHtoD from a registered shm mapping: %.1f "
           "GB/s)\n",
           shm_h2d);
    cumod_buffer_free(b->c, d);
    cumod_segment_destroy(b->c, seg);
}

typedef struct hammer {
    const char *url;
    atomic_int stop;
    long ok, failed;
} hammer;

static void *
bench_hammer(void *arg)
{
    hammer *h = arg;
    cumod_client *c;
    cumod_launch_params p = bench_empty();
    if (cumod_open(h->url, 10000, &c) != CUMOD_OK)
        return NULL;
    while (!atomic_load(&h->stop)) {
        if (cumod_launch(c, &p, NULL, NULL) == CUMOD_OK)
            h->ok++;
        else
            h->failed++;
    }
    cumod_close(c);
    return NULL;
}

/* rename() of a new vadd.cubin to the first launch that runs it, while
 * another client keeps launching. */
static void
bench_reload(bench *b)
{
    enum { N = 64, SWAPS = 200 };
    float a[N], bb[N], r[N];
    cumod_buffer da, db, dc;
    hammer h = {.url = b->url};
    pthread_t th;
    double t[SWAPS];
    char cmd[1024];

    for (int i = 0; i < N; i++) {
        a[i] = 3;
        bb[i] = 1;
    }
    cumod_buffer_alloc(b->c, sizeof(a), &da);
    cumod_buffer_alloc(b->c, sizeof(a), &db);
    cumod_buffer_alloc(b->c, sizeof(a), &dc);
    cumod_buffer_write(b->c, da, 0, a, sizeof(a), 0);
    cumod_buffer_write(b->c, db, 0, bb, sizeof(bb), 0);
    cumod_arg args[] = {cumod_arg_buffer(da, 0), cumod_arg_buffer(db, 0),
                        cumod_arg_buffer(dc, 0), cumod_arg_i32(N)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {1, 1, 1},
                             .block = {64, 1, 1},
                             .nargs = 4,
                             .args = args};
    cumod_launch(b->c, &p, NULL, NULL);
    pthread_create(&th, NULL, bench_hammer, &h);
    for (int s = 0; s < SWAPS; s++) {
        const char *src = s % 2 == 0 ? CUMOD_BENCH_VARIANT_DIR "/vadd.cubin"
                                     : CUMOD_BENCH_KERNEL_DIR "/vadd.cubin";
        float want = s % 2 == 0 ? 2.0f : 4.0f; /* a - b, a + b */
        snprintf(cmd, sizeof(cmd), "cp %s %s/.vadd.tmp", src, b->kdir);
        bench_sh(cmd);
        char from[512], to[512];
        snprintf(from, sizeof(from), "%s/.vadd.tmp", b->kdir);
        snprintf(to, sizeof(to), "%s/vadd.cubin", b->kdir);
        double t0 = cumod__bench_now_us();
        rename(from, to);
        for (;;) {
            if (cumod_launch(b->c, &p, NULL, NULL) == CUMOD_OK &&
                cumod_buffer_read(b->c, dc, 0, r, sizeof(r), 0) == CUMOD_OK &&
                r[0] == want)
                break;
            if (cumod__bench_now_us() - t0 > 5e6)
                break;
        }
        t[s] = cumod__bench_now_us() - t0;
        usleep(5000);
    }
    atomic_store(&h.stop, 1);
    pthread_join(th, NULL);
    cumod__bench_record("reload_p50_ms",
                        cumod__bench_quantile(t, SWAPS, 0.5) / 1e3);
    cumod__bench_record("reload_p99_ms",
                        cumod__bench_quantile(t, SWAPS, 0.99) / 1e3);
    cumod__bench_record("reload_swaps", SWAPS);
    cumod__bench_record("reload_other_ok", (double)h.ok);
    cumod__bench_record("reload_other_failed", (double)h.failed);
    printf("rename() of a new cubin to the first launch running it: p50 %.2f "
           "ms, p99 %.2f ms over %d swaps (target 2 / 10 ms); the other "
           "client: %ld launches, %ld failed\n",
           cumod__bench_quantile(t, SWAPS, 0.5) / 1e3,
           cumod__bench_quantile(t, SWAPS, 0.99) / 1e3, SWAPS, h.ok, h.failed);
}

/* A kernel's fault: how soon another client is served again. */
static void
bench_fault(bench *b)
{
    cumod_client *other;
    char cmd[1024];
    cumod_launch_params e = bench_empty();
    snprintf(cmd, sizeof(cmd), "cp %s/fault.cubin %s/", CUMOD_BENCH_FAULT_DIR,
             b->kdir);
    bench_sh(cmd);
    usleep(200000);
    if (cumod_open(b->url, 10000, &other) != CUMOD_OK)
        return;
    cumod_launch(other, &e, NULL, NULL);
    cumod_arg args[] = {cumod_arg_u64(0)};
    cumod_launch_params p = {.kernel = "fault:fault",
                             .grid = {1, 1, 1},
                             .block = {32, 1, 1},
                             .nargs = 1,
                             .args = args};
    double t0 = cumod__bench_now_us();
    int rv = cumod_launch(b->c, &p, NULL, NULL);
    char why[256];
    snprintf(why, sizeof(why), "%s", cumod_last_detail());
    double back = -1;
    while (cumod__bench_now_us() - t0 < 10e6) {
        if (cumod_launch(other, &e, NULL, NULL) == CUMOD_OK) {
            back = cumod__bench_now_us() - t0;
            break;
        }
    }
    cumod__bench_record("fault_back_ms", back / 1e3);
    printf("a kernel's fault (%s: %s): another client served again %.0f ms "
           "after the faulting launch (target 500 ms)\n",
           cumod_errname(rv), why, back / 1e3);
    cumod_close(other);
}

/* Round trips (answered when complete) of an empty launch on module m,
 * p50 and p99. */
static void
bench_rtt_of(cumod_client *c, const char *kernel, int n, double q[2])
{
    static double t[5000];
    cumod_launch_params p = bench_empty();
    p.kernel = kernel;
    if (n > 5000)
        n = 5000;
    for (int i = 0; i < 200; i++)
        cumod_launch(c, &p, NULL, NULL);
    for (int i = 0; i < n; i++) {
        double t0 = cumod__bench_now_us();
        cumod_launch(c, &p, NULL, NULL);
        t[i] = cumod__bench_now_us() - t0;
    }
    q[0] = cumod__bench_quantile(t, (size_t)n, 0.5);
    q[1] = cumod__bench_quantile(t, (size_t)n, 0.99);
}

/* 1,000 module files: the start, then launch round trips while 1, 10,
 * 100 and 1,000 of them are resident. */
static void
bench_many_modules(bench *b)
{
    char cmd[2048], kernel[64];
    bench m = {0};
    snprintf(m.dir, sizeof(m.dir), "%.64s/many", b->dir);
    snprintf(m.url, sizeof(m.url), "ipc://%.64s/many.sock", b->dir);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s && for i in $(seq -w 0 999); do cp %s/empty.cubin "
             "%s/m$i.cubin; done",
             m.dir, CUMOD_BENCH_KERNEL_DIR, m.dir);
    bench_sh(cmd);
    printf("start with 1,000 module files (target: answering within 1 s):\n");
    if (bench_start(&m, m.dir) != 0)
        return;
    cumod__bench_record("modules_1000_start_ms", m.up_ms);
    printf("launch round trips (fast path, answered when complete) with N "
           "modules resident:\n");
    static const int counts[] = {1, 10, 100, 1000};
    int loaded = 0;
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        for (; loaded < counts[k]; loaded++) {
            snprintf(kernel, sizeof(kernel), "m%03d:empty", loaded);
            cumod_launch_params p = bench_empty();
            p.kernel = kernel;
            cumod_launch(m.c, &p, NULL, NULL); /* loads it */
        }
        double first[2], last[2];
        bench_rtt_of(m.c, "m000:empty", 5000, first);
        snprintf(kernel, sizeof(kernel), "m%03d:empty", loaded - 1);
        bench_rtt_of(m.c, kernel, 5000, last);
        printf("  %4d resident: the first module p50 %.1f us, p99 %.1f us; "
               "the last loaded p50 %.1f us, p99 %.1f us\n",
               counts[k], first[0], first[1], last[0], last[1]);
        cumod__bench_recordf(first[0], "modules_%d_p50_us", counts[k]);
        cumod__bench_recordf(first[1], "modules_%d_p99_us", counts[k]);
        cumod__bench_recordf(last[0], "modules_%d_last_p50_us", counts[k]);
        cumod__bench_recordf(last[1], "modules_%d_last_p99_us", counts[k]);
    }
    bench_stop(&m);
}

/* Launch round trips against argument bytes: one struct argument of 16 B
 * to 4 KiB, beside the same launch in process. */
static void
bench_args(bench *b)
{
    static const unsigned sizes[] = {16, 64, 256, 1024, 4096};
    enum { K = sizeof(sizes) / sizeof(sizes[0]) };
    static unsigned char bytes[4096];
    double floor[K];
    char path[600], kernel[64];

    snprintf(path, sizeof(path), "%s/args.cubin", CUMOD_BENCH_FAULT_DIR);
    if (cumod__bench_floor_args(path, sizes, K, floor) != 0)
        for (int k = 0; k < K; k++)
            floor[k] = NAN;
    printf("launch round trips against argument bytes (fast path, answered "
           "when complete; in process: launch + cuStreamSynchronize):\n");
    for (int k = 0; k < K; k++) {
        static double t[5000];
        cumod_arg a = cumod_arg_bytes(bytes, sizes[k]);
        cumod_launch_params p = bench_empty();
        snprintf(kernel, sizeof(kernel), "args:args%u", sizes[k]);
        p.kernel = kernel;
        p.nargs = 1;
        p.args = &a;
        int errs = 0;
        for (int i = 0; i < 200; i++)
            errs += cumod_launch(b->c, &p, NULL, NULL) != CUMOD_OK;
        for (int i = 0; i < 5000; i++) {
            double t0 = cumod__bench_now_us();
            errs += cumod_launch(b->c, &p, NULL, NULL) != CUMOD_OK;
            t[i] = cumod__bench_now_us() - t0;
        }
        double p50 = cumod__bench_quantile(t, 5000, 0.5);
        double p99 = cumod__bench_quantile(t, 5000, 0.99);
        printf("  %4u B: p50 %.1f us, p99 %.1f us (in process p50 %.1f us)"
               "%s%s\n",
               sizes[k], p50, p99, floor[k], errs ? "; FAILED: " : "",
               errs ? cumod_last_detail() : "");
        cumod__bench_recordf(p50, "args_%u_p50_us", sizes[k]);
        cumod__bench_recordf(p99, "args_%u_p99_us", sizes[k]);
        cumod__bench_recordf(floor[k], "args_%u_floor_p50_us", sizes[k]);
        cumod__bench_recordf(errs, "args_%u_errors", sizes[k]);
    }
}

int
main(int argc, char **argv)
{
    bench b = {0};
    cumod_bench_floors f;
    char cmd[1024];
    const char *only = NULL;

    if (argc >= 3 && strcmp(argv[1], "--worker") == 0)
        return cumod__bench_worker(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--record") == 0 && i + 1 < argc) {
            cumod__bench_record_open(argv[++i]);
        } else {
            fprintf(stderr,
                    "usage: cumod_bench [--only PART,...] [--record "
                    "FILE]\n"
                    "  parts: launches batches args copies transfers reload "
                    "many compare gemm fault many-modules\n"
                    "  --record: every figure also as a \"key "
                    "value\" line (bench/report)\n");
            return 2;
        }
    }
#define PART(name) (only == NULL || strstr(only, name) != NULL)

    snprintf(b.dir, sizeof(b.dir), "/tmp/cumod-bench.XXXXXX");
    if (mkdtemp(b.dir) == NULL)
        return 1;
    snprintf(b.kdir, sizeof(b.kdir), "%s/k", b.dir);
    snprintf(b.url, sizeof(b.url), "ipc://%s/cumodd.sock", b.dir);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s && cp %s/*.cubin %s/spin.cubin %s/args.cubin %s/",
             b.kdir, CUMOD_BENCH_KERNEL_DIR, CUMOD_BENCH_FAULT_DIR,
             CUMOD_BENCH_FAULT_DIR, b.kdir);
    bench_sh(cmd);

    if (cumod__bench_floors(CUMOD_BENCH_KERNEL_DIR, &f) != 0)
        return 1;
    double nng = cumod__bench_nng_rtt_p50_us(b.dir);
    printf("floors, in this process: empty launch + sync p50 %.1f us; "
           "launch + event spin p50 %.1f us; async launches %.0f/s; "
           "pinned H2D %.1f GB/s, D2H %.1f GB/s; cuModuleLoadData + "
           "GetFunction (cubin) p50 %.1f us; nng req/rep ipc 128 B p50 %.1f "
           "us\n",
           f.launch_sync_p50_us, f.launch_event_p50_us, f.async_launches_per_s,
           f.h2d_pinned_gbps, f.d2h_pinned_gbps, f.load_cubin_p50_us, nng);
    cumod__bench_record("floor_launch_sync_p50_us", f.launch_sync_p50_us);
    cumod__bench_record("floor_launch_event_p50_us", f.launch_event_p50_us);
    cumod__bench_record("floor_async_per_s", f.async_launches_per_s);
    cumod__bench_record("floor_h2d_gbps", f.h2d_pinned_gbps);
    cumod__bench_record("floor_d2h_gbps", f.d2h_pinned_gbps);
    cumod__bench_record("floor_load_cubin_p50_us", f.load_cubin_p50_us);
    cumod__bench_record("nng_rtt_p50_us", nng);
    if (bench_start(&b, b.kdir) != 0) {
        fprintf(stderr, "bench: cumodd did not start\n");
        return 1;
    }
    double ring_p50 = NAN;
    if (PART("launches"))
        ring_p50 = bench_launches(&b, &f, nng);
    if (PART("batches"))
        bench_batches(&b, f.async_launches_per_s);
    if (PART("args"))
        bench_args(&b);
    if (PART("copies"))
        bench_copies(&b, f.h2d_pinned_gbps, f.d2h_pinned_gbps, f.h2d_shm_gbps);
    if (PART("transfers"))
        bench_transfers(&b, &f);
    if (PART("reload"))
        bench_reload(&b);
    if (PART("many"))
        cumod__bench_many("/proc/self/exe", b.url, b.kdir, b.dir, (int)b.pid);
    if (PART("compare"))
        cumod__bench_compare("/proc/self/exe", b.url, b.kdir, b.dir, &f,
                             ring_p50);
    if (PART("gemm"))
        cumod__bench_gemm(b.c);
    if (PART("fault"))
        bench_fault(&b);
    bench_stop(&b);
    if (PART("many-modules"))
        bench_many_modules(&b);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", b.dir);
    bench_sh(cmd);
    return 0;
}
