/* SPDX-License-Identifier: MIT */
/*
 * The floor of a fault's cost to a bystander: two plain processes, each
 * with its own CUDA context (no cumod), one checking vadd sums in a loop
 * while the other's kernel faults. What the checker loses here the GPU
 * takes from everyone (an illegal address stalls the whole GPU while the
 * driver handles it); what it loses beyond this under cumod is cumod's.
 * The processes are this program run again as workers, so neither shares
 * anything with the bench's own process.
 */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_domains.h"
#include "exec/driver.h"

extern char **environ;

enum { FN = 4096 };

void
cumod__bench_trace_add(cumod_bench_trace *tr, double t, int ok)
{
    if (tr->n == tr->cap) {
        size_t cap = tr->cap ? 2 * tr->cap : 65536;
        cumod_bench_round *r = realloc(tr->r, cap * sizeof(*r));
        if (r == NULL)
            return;
        tr->r = r;
        tr->cap = cap;
    }
    tr->r[tr->n++] = (cumod_bench_round){.t = t, .ok = ok};
}

void
cumod__bench_trace_free(cumod_bench_trace *tr)
{
    free(tr->r);
    memset(tr, 0, sizeof(*tr));
}

void
cumod__bench_window(const cumod_bench_trace *tr, double w0, double w1,
                    double report, cumod_bench_window *out)
{
    double prev = w0, gap = 0, fail = -1, back = -1;
    long failed = 0;
    int closed = 0;

    for (size_t i = 0; i < tr->n; i++) {
        const cumod_bench_round *r = &tr->r[i];
        if (r->t < w0) {
            if (r->ok)
                prev = r->t;
            continue;
        }
        if (!r->ok) {
            if (r->t <= w1) {
                failed++;
                if (fail < 0)
                    fail = r->t;
            }
            continue;
        }
        if (!closed) {
            if (r->t - prev > gap)
                gap = r->t - prev;
            prev = r->t;
            closed = r->t > w1;
        }
    }
    if (!closed && w1 - prev > gap)
        gap = w1 - prev;
    /* A second pass: the failure that ends the wait is known only now. */
    for (size_t i = 0; report > 0 && i < tr->n && back < 0; i++)
        if (tr->r[i].ok && tr->r[i].t > (fail >= 0 ? fail : report))
            back = (tr->r[i].t - report) / 1e3;
    out->failed = failed;
    out->gap_ms = gap / 1e3;
    out->back_ms = back;
}

/* --- the workers: `cumod_bench_domains --floor-worker MODE ...` ---------- */

typedef struct fw_ctx {
    cumod_driver drv;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
} fw_ctx;

/* A context of this process's own on device 0, cubin loaded, kernel
 * found. 0, or -1 with a message on stderr. */
static int
fw_open(fw_ctx *w, const char *cubin, const char *kernel)
{
    char msg[1024];
    size_t len;
    if (cumod__driver_open(&w->drv, cumod__driver_default_path(NULL), msg,
                           sizeof(msg)) != 0 ||
        w->drv.init(0) != CUDA_SUCCESS || w->drv.device_get(&w->dev, 0) ||
        w->drv.primary_ctx_retain(&w->ctx, w->dev) ||
        w->drv.ctx_set_current(w->ctx)) {
        fprintf(stderr, "floor worker: no usable CUDA driver: %s\n", msg);
        return -1;
    }
    void *img = cumod__bench_file(cubin, &len);
    CUresult r =
        img ? w->drv.module_load_data(&w->mod, img) : CUDA_ERROR_FILE_NOT_FOUND;
    free(img);
    if (r != CUDA_SUCCESS ||
        w->drv.module_get_function(&w->fn, w->mod, kernel) != CUDA_SUCCESS) {
        fprintf(stderr, "floor worker: cannot load %s from %s\n", kernel,
                cubin);
        return -1;
    }
    return 0;
}

/* check VADD_CUBIN OUT STOP READY: vadd sums checked in a loop until STOP
 * exists (60 s at most); READY is made once it runs; OUT gets the rounds
 * (cumod_bench_round, binary). */
static int
fw_check(const char *cubin, const char *out, const char *stop,
         const char *ready)
{
    static float a[FN], b[FN], c[FN];
    fw_ctx w;
    CUdeviceptr da, db, dc;
    cumod_bench_trace tr = {0};
    int n = FN;
    const char *u = getenv("CUMOD_BENCH_UNCHECKED");
    int check = u == NULL || strcmp(u, "1") != 0; /* bench_domains.c */

    if (fw_open(&w, cubin, "vadd") != 0)
        return 1;
    for (int i = 0; i < FN; i++) {
        a[i] = (float)i;
        b[i] = (float)(2 * i);
    }
    if (w.drv.mem_alloc(&da, sizeof(a)) || w.drv.mem_alloc(&db, sizeof(b)) ||
        w.drv.mem_alloc(&dc, sizeof(c)) ||
        w.drv.memcpy_htod(da, a, sizeof(a)) ||
        w.drv.memcpy_htod(db, b, sizeof(b)))
        return 1;
    void *params[] = {&da, &db, &dc, &n};
    int fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0)
        close(fd);
    double t0 = cumod__bench_now_us();
    while (access(stop, F_OK) != 0 && cumod__bench_now_us() - t0 < 60e6) {
        /* The copy waits for the launch (both on the legacy stream). */
        int ok = w.drv.launch_kernel(w.fn, FN / 256, 1, 1, 256, 1, 1, 0, NULL,
                                     params, NULL) == CUDA_SUCCESS &&
                 w.drv.memcpy_dtoh(c, dc, sizeof(c)) == CUDA_SUCCESS;
        for (int i = 0; ok && check && i < FN; i++)
            ok = c[i] == a[i] + b[i];
        cumod__bench_trace_add(&tr, cumod__bench_now_us(), ok);
    }
    FILE *f = fopen(out, "wb");
    int rc = f == NULL || fwrite(tr.r, sizeof(*tr.r), tr.n, f) != tr.n;
    if (f != NULL && fclose(f) != 0)
        rc = 1;
    cumod__bench_trace_free(&tr);
    return rc;
}

/* fault FAULTS_CUBIN KERNEL DEADLINE_MS OUT: launches KERNEL(p) once on a
 * zeroed buffer; OUT gets "T_LAUNCH T_REPORT ERROR". Without a deadline
 * the report is when cuCtxSynchronize returned the error; with one, the
 * process kills itself that long after the launch if the kernel still
 * runs (ERROR "killed"), as cumodd kills an executor past a deadline. */
static int
fw_fault(const char *cubin, const char *kernel, unsigned deadline_ms,
         const char *out)
{
    fw_ctx w;
    CUdeviceptr p;
    char name[64] = "killed";
    CUresult r;

    if (fw_open(&w, cubin, kernel) != 0 || w.drv.mem_alloc(&p, 4096) ||
        w.drv.memset_d8(p, 0, 4096) || w.drv.ctx_synchronize())
        return 1;
    void *params[] = {&p};
    double t0 = cumod__bench_now_us(), t1;
    r = w.drv.launch_kernel(w.fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
    if (r == CUDA_SUCCESS && deadline_ms == 0) {
        r = w.drv.ctx_synchronize();
    } else if (r == CUDA_SUCCESS) {
        while ((r = w.drv.stream_query(NULL)) == CUDA_ERROR_NOT_READY &&
               cumod__bench_now_us() - t0 < deadline_ms * 1e3)
            usleep(100);
    }
    t1 = cumod__bench_now_us();
    if (r != CUDA_ERROR_NOT_READY) {
        char buf[64];
        snprintf(name, sizeof(name), "%s",
                 cumod__cu_name(&w.drv, r, buf, sizeof(buf)));
    }
    FILE *f = fopen(out, "w");
    if (f == NULL)
        return 1;
    fprintf(f, "%.3f %.3f %s\n", t0, t1, name);
    if (fclose(f) != 0)
        return 1;
    if (r == CUDA_ERROR_NOT_READY)
        raise(SIGKILL);
    /* CUMOD_BENCH_FLOOR_EXIT=1: leave as cumodd's executor does after a
     * fault (_exit, no library teardown), to tell the two costs apart. */
    const char *e = getenv("CUMOD_BENCH_FLOOR_EXIT");
    if (e != NULL && strcmp(e, "1") == 0)
        _exit(0);
    return 0;
}

int
cumod__bench_domains_worker(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[2], "check") == 0)
        return fw_check(argv[3], argv[4], argv[5], argv[6]);
    if (argc == 7 && strcmp(argv[2], "fault") == 0)
        return fw_fault(argv[3], argv[4], (unsigned)atoi(argv[5]), argv[6]);
    fprintf(stderr, "cumod_bench_domains: bad worker arguments\n");
    return 2;
}

/* --- the parent ----------------------------------------------------------- */

static int
fl_spawn(pid_t *pid, const char *self, char *const *argv)
{
    if (posix_spawn(pid, self, NULL, NULL, argv, environ) != 0) {
        fprintf(stderr, "bench: cannot run %s\n", self);
        return -1;
    }
    return 0;
}

/* Waits up to ms for pid to exit (SIGKILL after); its wait status, or -1
 * when it had to be killed. */
static int
fl_reap(pid_t pid, int ms)
{
    int st;
    for (int w = 0; w < ms; w++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return st;
        usleep(1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static void
fl_sleep_until(double t_us)
{
    double now;
    while ((now = cumod__bench_now_us()) < t_us)
        usleep((useconds_t)(t_us - now < 100000 ? t_us - now : 100000));
}

int
cumod__bench_domains_floor(const char *self, const char *dir,
                           const char *vadd_cubin, const char *faults_cubin,
                           const char *kernel, unsigned deadline_ms,
                           double window_ms, cumod_bench_floor_fault *out)
{
    char bout[512], stop[512], ready[512], aout[512], dl[16], name[64] = "";
    double t0 = 0, t1 = 0;
    pid_t b, a;
    int rc = -1;
    size_t len = 0;
    char *text = NULL;
    cumod_bench_trace tr = {0};

    snprintf(bout, sizeof(bout), "%s/floor-b.out", dir);
    snprintf(stop, sizeof(stop), "%s/floor-b.stop", dir);
    snprintf(ready, sizeof(ready), "%s/floor-b.ready", dir);
    snprintf(aout, sizeof(aout), "%s/floor-a.out", dir);
    snprintf(dl, sizeof(dl), "%u", deadline_ms);
    unlink(bout);
    unlink(stop);
    unlink(ready);
    unlink(aout);
    char *bargv[] = {(char *)self, "--floor-worker",
                     "check",      (char *)vadd_cubin,
                     bout,         stop,
                     ready,        NULL};
    if (fl_spawn(&b, self, bargv) != 0)
        return -1;
    int st, up = 0;
    for (int w = 0; w < 30000 && !up; w++) {
        if (waitpid(b, &st, WNOHANG) == b) {
            fprintf(stderr, "bench: the floor's checker exited\n");
            return -1;
        }
        up = access(ready, F_OK) == 0;
        if (!up)
            usleep(1000);
    }
    if (!up) {
        fprintf(stderr, "bench: the floor's checker never ran\n");
        fl_reap(b, 0);
        return -1;
    }
    usleep(300000); /* the checker in its loop: the fault lands among it */
    char *aargv[] = {(char *)self,   "--floor-worker",
                     "fault",        (char *)faults_cubin,
                     (char *)kernel, dl,
                     aout,           NULL};
    if (fl_spawn(&a, self, aargv) != 0)
        goto fail;
    fl_reap(a, 30000);
    if ((text = cumod__bench_file(aout, &len)) == NULL ||
        sscanf(text, "%lf %lf %63s", &t0, &t1, name) != 3) {
        fprintf(stderr, "bench: the floor's faulting process said nothing\n");
        goto fail;
    }
    fl_sleep_until(t0 + window_ms * 1e3 + 100e3);
    rc = 0;
fail:;
    int fd = open(stop, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0)
        close(fd);
    if (fl_reap(b, 30000) != 0)
        rc = -1;
    free(text);
    if (rc == 0 && (text = cumod__bench_file(bout, &len)) != NULL) {
        tr.r = (cumod_bench_round *)(void *)text;
        tr.n = tr.cap = len / sizeof(cumod_bench_round);
        cumod__bench_window(&tr, t0, t0 + window_ms * 1e3, 0, &out->b);
        out->report_ms = (t1 - t0) / 1e3;
        snprintf(out->error, sizeof(out->error), "%s", name);
    } else {
        rc = -1;
    }
    free(text);
    unlink(bout);
    unlink(stop);
    unlink(ready);
    unlink(aout);
    return rc;
}
