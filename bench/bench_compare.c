/* SPDX-License-Identifier: MIT */
/*
 * What users would pick instead of cumod, and many clients at once: every
 * figure here comes from fresh processes (cumod_bench runs itself in a
 * worker mode), as users would run them:
 *
 *   - cumod: a client of the bench's cumodd (libcumod, no CUDA context);
 *   - own: a process with its own CUDA context (cuInit, the primary
 *     context, the module loaded from its file), as a program linking
 *     libcuda does;
 *   - MPS: the same program under NVIDIA MPS, where the host has
 *     nvidia-cuda-mps-control (a control daemon of the bench's own, in a
 *     temp folder, stopped at the end).
 */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cumod/cumod.h"
#include "exec/driver.h"

extern char **environ;

/* --- workers (run as `cumod_bench --worker MODE ...`) -------------------- */

enum { VN = 4096 };

static int
worker_verify(const float *c)
{
    for (int i = 0; i < VN; i++)
        if (c[i] != (float)i + 2.0f * (float)i)
            return -1;
    return 0;
}

/* $CUMOD_BENCH_STEPS set: each step of the first vector add, in us since
 * the one before, on stderr (where a cold start's time goes). */
static void
worker_step(const char *what, double *t)
{
    if (getenv("CUMOD_BENCH_STEPS") == NULL)
        return;
    double now = cumod__bench_now_us();
    fprintf(stderr, "%s %.0f us; ", what, now - *t);
    *t = now;
}

/* The first verified vector add, through cumod. */
static int
worker_first_cumod(const char *url)
{
    static float a[VN], b[VN], c[VN];
    cumod_client *cl;
    cumod_buffer da, db, dc;
    double t = cumod__bench_now_us();
    for (int i = 0; i < VN; i++) {
        a[i] = (float)i;
        b[i] = 2.0f * (float)i;
    }
    if (cumod_open(url, 10000, &cl))
        return 1;
    worker_step("open", &t);
    if (cumod_buffer_alloc(cl, sizeof(a), &da) ||
        cumod_buffer_alloc(cl, sizeof(a), &db) ||
        cumod_buffer_alloc(cl, sizeof(a), &dc))
        return 1;
    worker_step("3 allocs", &t);
    if (cumod_buffer_write(cl, da, 0, a, sizeof(a), 0) ||
        cumod_buffer_write(cl, db, 0, b, sizeof(b), 0))
        return 1;
    worker_step("2 writes", &t);
    cumod_arg args[] = {cumod_arg_buffer(da, 0), cumod_arg_buffer(db, 0),
                        cumod_arg_buffer(dc, 0), cumod_arg_i32(VN)};
    cumod_launch_params p = {.kernel = "vadd:vadd",
                             .grid = {VN / 256, 1, 1},
                             .block = {256, 1, 1},
                             .nargs = 4,
                             .args = args};
    if (cumod_launch(cl, &p, NULL, NULL))
        return 1;
    worker_step("launch", &t);
    if (cumod_buffer_read(cl, dc, 0, c, sizeof(c), 0) || worker_verify(c))
        return 1;
    worker_step("read", &t);
    cumod_close(cl);
    worker_step("close", &t);
    if (getenv("CUMOD_BENCH_STEPS") != NULL)
        fprintf(stderr, "\n");
    return 0;
}

typedef struct own {
    cumod_driver drv;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
} own;

/* A context of this process's own and module `stem` from kdir. */
static int
own_open(own *o, const char *kdir, const char *stem)
{
    char msg[512], path[1024];
    size_t len;
    if (cumod__driver_open(&o->drv, cumod__driver_default_path(NULL), msg,
                           sizeof(msg)) ||
        o->drv.init(0) || o->drv.device_get(&o->dev, 0) ||
        o->drv.primary_ctx_retain(&o->ctx, o->dev) ||
        o->drv.ctx_set_current(o->ctx))
        return -1;
    snprintf(path, sizeof(path), "%s/%s.cubin", kdir, stem);
    void *img = cumod__bench_file(path, &len);
    if (img == NULL || o->drv.module_load_data(&o->mod, img) ||
        o->drv.module_get_function(&o->fn, o->mod, stem))
        return -1;
    free(img);
    return 0;
}

static int
worker_first_own(const char *kdir)
{
    static float a[VN], b[VN], c[VN];
    own o;
    CUdeviceptr da, db, dc;
    int n = VN;
    for (int i = 0; i < VN; i++) {
        a[i] = (float)i;
        b[i] = 2.0f * (float)i;
    }
    if (own_open(&o, kdir, "vadd") || o.drv.mem_alloc(&da, sizeof(a)) ||
        o.drv.mem_alloc(&db, sizeof(a)) || o.drv.mem_alloc(&dc, sizeof(a)) ||
        o.drv.memcpy_htod(da, a, sizeof(a)) ||
        o.drv.memcpy_htod(db, b, sizeof(b)))
        return 1;
    void *params[] = {&da, &db, &dc, &n};
    if (o.drv.launch_kernel(o.fn, VN / 256, 1, 1, 256, 1, 1, 0, NULL, params,
                            NULL) ||
        o.drv.memcpy_dtoh(c, dc, sizeof(c)) || worker_verify(c))
        return 1;
    return 0;
}

/* n launches of spin(ns), each waited for. */
static int
worker_spin_cumod(const char *url, int n, unsigned long long ns)
{
    cumod_client *cl;
    if (cumod_open(url, 10000, &cl))
        return 1;
    cumod_arg args[] = {cumod_arg_u64(ns)};
    cumod_launch_params p = {.kernel = "spin:spin",
                             .grid = {1, 1, 1},
                             .block = {32, 1, 1},
                             .nargs = 1,
                             .args = args};
    for (int i = 0; i < n; i++)
        if (cumod_launch(cl, &p, NULL, NULL))
            return 1;
    cumod_close(cl);
    return 0;
}

static int
worker_spin_own(const char *kdir, int n, unsigned long long ns)
{
    own o;
    if (own_open(&o, kdir, "spin"))
        return 1;
    void *params[] = {&ns};
    for (int i = 0; i < n; i++)
        if (o.drv.launch_kernel(o.fn, 1, 1, 1, 32, 1, 1, 0, NULL, params,
                                NULL) ||
            o.drv.ctx_synchronize())
            return 1;
    return 0;
}

/* Holds a client (cumod) or a context (own) with 1 MiB allocated until its
 * stdin closes; says "ready" first. */
static int
worker_hold(const char *mode, const char *arg)
{
    char b;
    if (strcmp(mode, "hold-cumod") == 0) {
        cumod_client *cl;
        cumod_buffer x;
        if (cumod_open(arg, 10000, &cl) || cumod_buffer_alloc(cl, 1 << 20, &x))
            return 1;
    } else {
        own o;
        CUdeviceptr d;
        if (own_open(&o, arg, "vadd") || o.drv.mem_alloc(&d, 1 << 20))
            return 1;
    }
    printf("ready\n");
    fflush(stdout);
    while (read(0, &b, 1) > 0)
        ;
    return 0;
}

/* The timed part of the launches workers: after "go" on stdin, n calls of
 * one(arg), each timed; prints "launches seconds p99_us p50_us". */
static int
worker_timed(int n, int (*one)(void *), void *arg)
{
    char go;
    double *t = malloc(sizeof(double) * (size_t)n);
    if (t == NULL || one(arg) != 0) /* warm: the module loaded */
        return 1;
    printf("ready\n");
    fflush(stdout);
    if (read(0, &go, 1) != 1)
        return 1;
    double t0 = cumod__bench_now_us();
    for (int i = 0; i < n; i++) {
        double s = cumod__bench_now_us();
        if (one(arg) != 0)
            return 1;
        t[i] = cumod__bench_now_us() - s;
    }
    double secs = (cumod__bench_now_us() - t0) / 1e6;
    double p99 = cumod__bench_quantile(t, (size_t)n, 0.99);
    printf("%d %.6f %.1f %.1f\n", n, secs, p99,
           cumod__bench_quantile(t, (size_t)n, 0.5));
    fflush(stdout);
    free(t);
    return 0;
}

static int
launch_cumod(void *arg)
{
    cumod_launch_params p = {
        .kernel = "empty:empty", .grid = {1, 1, 1}, .block = {1, 1, 1}};
    return cumod_launch(arg, &p, NULL, NULL) != CUMOD_OK;
}

/* Empty launches through cumod (the fast path), answered when complete. */
static int
worker_launches(const char *url, int n)
{
    cumod_client *cl;
    if (cumod_open(url, 30000, &cl))
        return 1;
    int rc = worker_timed(n, launch_cumod, cl);
    cumod_close(cl);
    return rc;
}

static int
launch_own(void *arg)
{
    own *o = arg;
    return o->drv.launch_kernel(o->fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) !=
               CUDA_SUCCESS ||
           o->drv.ctx_synchronize() != CUDA_SUCCESS;
}

/* The same in a context of the process's own (under MPS where env says). */
static int
worker_launches_own(const char *kdir, int n)
{
    own o;
    if (own_open(&o, kdir, "empty"))
        return 1;
    return worker_timed(n, launch_own, &o);
}

int
cumod__bench_worker(int argc, char **argv)
{
    const char *mode = argv[2];
    if (strcmp(mode, "first-cumod") == 0 && argc == 4)
        return worker_first_cumod(argv[3]);
    if (strcmp(mode, "first-own") == 0 && argc == 4)
        return worker_first_own(argv[3]);
    if (strcmp(mode, "spin-cumod") == 0 && argc == 6)
        return worker_spin_cumod(argv[3], atoi(argv[4]),
                                 strtoull(argv[5], NULL, 10));
    if (strcmp(mode, "spin-own") == 0 && argc == 6)
        return worker_spin_own(argv[3], atoi(argv[4]),
                               strtoull(argv[5], NULL, 10));
    if (strncmp(mode, "hold-", 5) == 0 && argc == 4)
        return worker_hold(mode, argv[3]);
    if (strcmp(mode, "launches") == 0 && argc == 5)
        return worker_launches(argv[3], atoi(argv[4]));
    if (strcmp(mode, "launches-own") == 0 && argc == 5)
        return worker_launches_own(argv[3], atoi(argv[4]));
    fprintf(stderr, "cumod_bench --worker: unknown mode %s\n", mode);
    return 2;
}

/* --- the parent ----------------------------------------------------------- */

typedef struct proc {
    pid_t pid;
    int in, out; /* its stdin (ours to write), its stdout (ours to read) */
} proc;

static int
proc_start(proc *p, const char *self, const char *const *args, char *const *env)
{
    int in[2], out[2];
    char *argv[12];
    int n = 0;
    posix_spawn_file_actions_t fa;

    argv[n++] = (char *)self;
    argv[n++] = "--worker";
    for (; *args != NULL && n < 11; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    /* Close-on-exec: another worker must not hold this one's stdin open
     * (its end is how a holder learns to go). */
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
        return -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    int rv = posix_spawn(&p->pid, self, &fa, NULL, argv, env ? env : environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    p->in = in[1];
    p->out = out[0];
    return rv == 0 ? 0 : -1;
}

/* A line of p's stdout (blocking). */
static int
proc_line(proc *p, char *buf, size_t cap)
{
    size_t n = 0;
    char ch;
    while (n + 1 < cap && read(p->out, &ch, 1) == 1 && ch != '\n')
        buf[n++] = ch;
    buf[n] = '\0';
    return n > 0 ? 0 : -1;
}

static int
proc_wait(proc *p)
{
    int st;
    close(p->in);
    close(p->out);
    if (waitpid(p->pid, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs one worker to its end: its wall time from spawn in ms (-1 when it
 * failed). */
static double
run_one(const char *self, const char *const *args, char *const *env)
{
    proc p;
    double t0 = cumod__bench_now_us();
    if (proc_start(&p, self, args, env))
        return -1;
    int rc = proc_wait(&p);
    return rc == 0 ? (cumod__bench_now_us() - t0) / 1e3 : -1;
}

/* n workers at once, to their ends: the wall time in ms, or -1. */
static double
run_many(const char *self, int n, const char *const *args, char *const *env)
{
    proc p[64];
    int bad = 0;
    double t0 = cumod__bench_now_us();
    for (int i = 0; i < n; i++)
        if (proc_start(&p[i], self, args, env))
            return -1;
    for (int i = 0; i < n; i++)
        bad += proc_wait(&p[i]) != 0;
    return bad ? -1 : (cumod__bench_now_us() - t0) / 1e3;
}

/* The GPU's used memory in MiB as nvidia-smi reports it (every process's,
 * the MPS server's included), or NaN. */
static double
gpu_used_mib(void)
{
    FILE *f = popen("nvidia-smi --query-gpu=memory.used "
                    "--format=csv,noheader,nounits -i 0 2>/dev/null",
                    "r");
    double v = NAN;
    if (f != NULL) {
        if (fscanf(f, "%lf", &v) != 1)
            v = NAN;
        pclose(f);
    }
    return v;
}

/* Device memory per holder: n of them started, the growth divided by n. */
static double
mem_per(const char *self, const char *mode, const char *arg, int n,
        char *const *env)
{
    proc p[16];
    char line[64];
    double before = gpu_used_mib();
    int ok = 1;
    for (int i = 0; i < n; i++) {
        const char *args[] = {mode, arg, NULL};
        if (proc_start(&p[i], self, args, env) ||
            proc_line(&p[i], line, sizeof(line)) || strcmp(line, "ready"))
            ok = 0;
    }
    usleep(300000);
    double after = gpu_used_mib();
    for (int i = 0; i < n; i++)
        proc_wait(&p[i]);
    return ok ? (after - before) / n : NAN;
}

/* MPS: a control daemon of our own (its pipes in dir). The environment for
 * its clients in env (NULL-ended, static storage), or NULL without MPS. */
static char **
mps_start(const char *dir)
{
    static char pipe_env[300], log_env[300];
    static char *env[256];
    char cmd[1024];
    if (system("command -v nvidia-cuda-mps-control > /dev/null 2>&1") != 0)
        return NULL;
    /* CUMOD_BENCH_MPS_PIPE=DIR: the control daemon already running there
     * (cumodd's own, --mps own --mps-pipe-dir DIR, serving a pool): its
     * clients join it, and it is not stopped here. Two control daemons
     * would each run an MPS server, time-slicing the GPU between them. */
    const char *join = getenv("CUMOD_BENCH_MPS_PIPE");
    if (join != NULL && join[0]) {
        snprintf(pipe_env, sizeof(pipe_env), "CUDA_MPS_PIPE_DIRECTORY=%s",
                 join);
        int n = 0;
        for (char **e = environ; *e != NULL && n < 250; e++)
            if (strncmp(*e, "CUDA_MPS_", 9) != 0)
                env[n++] = *e;
        env[n++] = pipe_env;
        env[n] = NULL;
        return env;
    }
    snprintf(pipe_env, sizeof(pipe_env), "CUDA_MPS_PIPE_DIRECTORY=%s/mps-pipe",
             dir);
    snprintf(log_env, sizeof(log_env), "CUDA_MPS_LOG_DIRECTORY=%s/mps-log",
             dir);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s/mps-pipe %s/mps-log && %s %s nvidia-cuda-mps-control "
             "-d",
             dir, dir, pipe_env, log_env);
    if (system(cmd) != 0)
        return NULL;
    int n = 0;
    for (char **e = environ; *e != NULL && n < 250; e++)
        if (strncmp(*e, "CUDA_MPS_", 9) != 0)
            env[n++] = *e;
    env[n++] = pipe_env;
    env[n++] = log_env;
    env[n] = NULL;
    usleep(200000);
    return env;
}

static void
mps_stop(const char *dir)
{
    char cmd[1024];
    const char *join = getenv("CUMOD_BENCH_MPS_PIPE");
    if (join != NULL && join[0])
        return; /* not ours */
    snprintf(cmd, sizeof(cmd),
             "echo quit | CUDA_MPS_PIPE_DIRECTORY=%s/mps-pipe "
             "nvidia-cuda-mps-control > /dev/null 2>&1; sleep 1",
             dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench: stopping MPS failed\n");
}

/* The median of k runs of one worker (ms), or -1 when one failed. */
static double
median_runs(const char *self, const char *const *args, char *const *env, int k)
{
    double t[9];
    for (int i = 0; i < k; i++)
        if ((t[i] = run_one(self, args, env)) < 0)
            return -1;
    return cumod__bench_quantile(t, (size_t)k, 0.5);
}

void
cumod__bench_compare(const char *self, const char *url, const char *kdir,
                     const char *dir, const cumod_bench_floors *f,
                     double ring_p50)
{
    const char *fc[] = {"first-cumod", url, NULL};
    const char *fo[] = {"first-own", kdir, NULL};
    char **mps = mps_start(dir);

    printf("against what users would pick instead (fresh processes; MPS %s):\n",
           mps ? "with a control daemon of the bench's own"
               : "not on this host, left out");
    double c = median_runs(self, fc, NULL, 5);
    double o = median_runs(self, fo, NULL, 5);
    double m = mps ? median_runs(self, fo, mps, 5) : NAN;
    printf("  a fresh process to its first verified vector add (median of "
           "5): cumod %.1f ms; own context %.1f ms; under MPS %.1f ms\n",
           c, o, m);
    double mc = mem_per(self, "hold-cumod", url, 8, NULL);
    double mo = mem_per(self, "hold-own", kdir, 4, NULL);
    double mm = mps ? mem_per(self, "hold-own", kdir, 4, mps) : NAN;
    printf("  device memory per client, 1 MiB buffer each (nvidia-smi, 8 "
           "cumod clients, 4 of the others): cumod %.1f MiB; own context "
           "%.0f MiB; under MPS %.0f MiB\n",
           mc, mo, mm);
    const char *sc[] = {"spin-cumod", url, "200", "50000", NULL};
    const char *so[] = {"spin-own", kdir, "200", "50000", NULL};
    double wc = run_many(self, 8, sc, NULL);
    double wo = run_many(self, 8, so, NULL);
    double wm = mps ? run_many(self, 8, so, mps) : NAN;
    printf("  8 fresh clients, each 200 launches of a 50 us kernel waited for, "
           "start to all done: cumod %.0f ms; own contexts %.0f ms; under MPS "
           "%.0f ms\n",
           wc, wo, wm);
    printf("  an empty launch waited for: in process (driver API) %.1f us; "
           "through cumod's fast path %.1f us\n",
           f->launch_sync_p50_us, ring_p50);
    cumod__bench_record("first_cumod_ms", c);
    cumod__bench_record("first_own_ms", o);
    cumod__bench_record("first_mps_ms", m);
    cumod__bench_record("mem_cumod_mib", mc);
    cumod__bench_record("mem_own_mib", mo);
    cumod__bench_record("mem_mps_mib", mm);
    cumod__bench_record("spin8_cumod_ms", wc);
    cumod__bench_record("spin8_own_ms", wo);
    cumod__bench_record("spin8_mps_ms", wm);
    if (mps)
        mps_stop(dir);
}

/* One point of the many-clients curve. */
typedef struct many_fig {
    int bad;          /* workers that failed */
    double rate;      /* all launches over the time to the last one's end */
    double mean_rate; /* per client */
    double slowest;   /* the slowest client's rate */
    double p50, p99;  /* the clients' p50s' mean; the worst client's p99 */
} many_fig;

/* n workers of mode (launches, launches-own) on arg, each per launches:
 * all started and ready (connected or with their context, the module
 * loaded), then told to go at once (the start barrier). */
static void
many_run(const char *self, const char *mode, const char *arg, int n, int per,
         char *const *env, many_fig *f)
{
    char nbuf[16], line[128];
    const char *args[] = {mode, arg, nbuf, NULL};
    proc *p = calloc((size_t)n, sizeof(*p));
    char *ok = calloc((size_t)n, 1);

    *f = (many_fig){.slowest = INFINITY};
    if (p == NULL || ok == NULL) {
        f->bad = n;
        goto done;
    }
    snprintf(nbuf, sizeof(nbuf), "%d", per);
    for (int i = 0; i < n; i++)
        ok[i] = proc_start(&p[i], self, args, env) == 0;
    for (int i = 0; i < n; i++)
        if (ok[i] && (proc_line(&p[i], line, sizeof(line)) ||
                      strcmp(line, "ready") != 0))
            ok[i] = 0;
    double t0 = cumod__bench_now_us();
    for (int i = 0; i < n; i++)
        if (ok[i] && write(p[i].in, "g", 1) != 1)
            ok[i] = 0;
    int good = 0;
    double p50sum = 0, sum = 0;
    for (int i = 0; i < n; i++) {
        int cnt;
        double secs, q99, q50;
        if (!ok[i] || proc_line(&p[i], line, sizeof(line)) ||
            sscanf(line, "%d %lf %lf %lf", &cnt, &secs, &q99, &q50) != 4) {
            ok[i] = 0;
            continue;
        }
        double rate = cnt / secs;
        good++;
        sum += rate;
        p50sum += q50;
        f->slowest = rate < f->slowest ? rate : f->slowest;
        f->p99 = q99 > f->p99 ? q99 : f->p99;
    }
    double wall = (cumod__bench_now_us() - t0) / 1e6;
    for (int i = 0; i < n; i++)
        if (p[i].pid > 0 && proc_wait(&p[i]) != 0)
            ok[i] = 0;
    for (int i = 0; i < n; i++)
        f->bad += !ok[i];
    f->rate = (double)good * per / wall;
    f->mean_rate = good ? sum / good : NAN;
    f->p50 = good ? p50sum / good : NAN;
done:
    if (f->bad == n)
        f->rate = f->mean_rate = f->slowest = f->p50 = f->p99 = NAN;
    free(ok);
    free(p);
}

/* "p50 / p99 us, rate/s" of f, or "-" when not run (ran 0). */
static const char *
many_str(char *buf, size_t cap, int ran, const many_fig *f)
{
    if (!ran)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.1f / %.0f us, %.0f/s%s", f->p50, f->p99, f->rate,
                 f->bad ? " (SOME FAILED)" : "");
    return buf;
}

static void
many_record(const char *who, int n, int ran, const many_fig *f)
{
    if (!ran)
        return;
    cumod__bench_recordf(f->p50, "%s_%d_p50_us", who, n);
    cumod__bench_recordf(f->p99, "%s_%d_p99_us", who, n);
    cumod__bench_recordf(f->rate, "%s_%d_rate", who, n);
    cumod__bench_recordf(f->bad, "%s_%d_failed", who, n);
}

/* MPS serves at most this many clients per device (Volta and later). */
#define MANY_MPS_MAX 48
/* Contexts of their own time-slice the GPU: ~1 ms per launch at 8. */
#define MANY_OWN_MAX 8

void
cumod__bench_many(const char *self, const char *url, const char *kdir,
                  const char *dir, int daemon_pid)
{
    static cumod_bench_cpu cpu0, cpu1;
    static const int counts[] = {1, 2, 4, 8, 16, 32, 48, 64, 128, 256};
    char **mps = mps_start(dir);

    /* A worker that failed before reading its go must not end the bench;
     * each worker holds two pipes here, 256 of them more than 1024. */
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    printf("many clients at once (processes started together), empty "
           "launches answered when complete; mean p50 / worst p99, "
           "launches/s in all: cumod's fast path; own contexts "
           "(time-sliced, up to %d); MPS (%s, up to %d):\n",
           MANY_OWN_MAX,
           mps ? "a control daemon of the bench's own"
               : "not on "
                 "this host",
           MANY_MPS_MAX);
    /* CUMOD_BENCH_MANY=N[:PER]: N clients only, PER launches each (to
     * profile one point of the curve). */
    const char *only = getenv("CUMOD_BENCH_MANY");
    int only_n = only ? atoi(only) : 0;
    int only_per = only && strchr(only, ':') ? atoi(strchr(only, ':') + 1) : 0;
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        int n = counts[k];
        int per = n <= 64 ? 2000 : 1000; /* each: the whole curve < 2 min */
        if (only_n > 0 && n != only_n)
            continue;
        if (only_per > 0)
            per = only_per;
        int run_own = n <= MANY_OWN_MAX, run_mps = mps && n <= MANY_MPS_MAX;
        many_fig c, o = {0}, m = {0};
        char so[96], sm[96];

        cumod__bench_cpu_snap(daemon_pid, &cpu0);
        double w0 = cumod__bench_now_us();
        many_run(self, "launches", url, n, per, NULL, &c);
        double wall = (cumod__bench_now_us() - w0) / 1e6;
        cumod__bench_cpu_snap(daemon_pid, &cpu1);
        if (run_own)
            many_run(self, "launches-own", kdir, n, per, NULL, &o);
        if (run_mps)
            many_run(self, "launches-own", kdir, n, per, mps, &m);
        /* The keys the report's client table has always read. */
        cumod__bench_recordf(c.rate, "clients_%d_per_s", n);
        cumod__bench_recordf(c.mean_rate, "clients_%d_mean_per_s", n);
        cumod__bench_recordf(c.slowest, "clients_%d_slowest_per_s", n);
        cumod__bench_recordf(c.p99, "clients_%d_worst_p99_us", n);
        cumod__bench_recordf(c.bad, "clients_%d_failed", n);
        many_record("many", n, 1, &c);
        many_record("own", n, run_own, &o);
        many_record("mps", n, run_mps, &m);
        printf("  %3d clients x %d: cumod %.1f / %.0f us, %.0f launches/s in "
               "all (per client mean %.0f/s, slowest %.0f/s)%s; own "
               "contexts %s; MPS %s\n",
               n, per, c.p50, c.p99, c.rate, c.mean_rate, c.slowest,
               c.bad ? " (SOME CLIENTS FAILED)" : "",
               many_str(so, sizeof(so), run_own, &o),
               many_str(sm, sizeof(sm), run_mps, &m));
        cumod__bench_cpu_print(&cpu0, &cpu1, wall, "       ");
        fflush(stdout);
    }
    if (mps)
        mps_stop(dir);
}
