/* SPDX-License-Identifier: MIT */
/*
 * The floors: what the driver and nng do alone in this process, measured in
 * the same run as cumodd, so each target is read beside its floor.
 */
#include <math.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "exec/driver.h"

static FILE *bench_rec;

void
cumod__bench_record_open(const char *path)
{
    if ((bench_rec = fopen(path, "w")) == NULL)
        fprintf(stderr, "bench: cannot write %s\n", path);
}

void
cumod__bench_record(const char *key, double v)
{
    if (bench_rec != NULL) {
        fprintf(bench_rec, "%s %.6g\n", key, v);
        fflush(bench_rec);
    }
}

void
cumod__bench_recordf(double v, const char *fmt, ...)
{
    char key[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(key, sizeof(key), fmt, ap);
    va_end(ap);
    cumod__bench_record(key, v);
}

double
cumod__bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double
cumod__bench_quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof(double), bench_cmp);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i];
}

void *
cumod__bench_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    long n;
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n > 0 && (b = calloc(1, (size_t)n + 1)) != NULL &&
        fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

int
cumod__bench_floors(const char *kdir, cumod_bench_floors *out)
{
    cumod_driver drv;
    char msg[1024], path[1024];
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUstream s;
    CUevent ev;
    enum { N = 2000 };
    double t[N];
    size_t len;

    if (cumod__driver_open(&drv, cumod__driver_default_path(NULL), msg,
                           sizeof(msg)) != 0 ||
        drv.init(0) != CUDA_SUCCESS || drv.device_get(&dev, 0) ||
        drv.primary_ctx_retain(&ctx, dev) || drv.ctx_set_current(ctx)) {
        fprintf(stderr, "bench: no usable CUDA driver: %s\n", msg);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/empty.cubin", kdir);
    void *img = cumod__bench_file(path, &len);
    for (int i = 0; i < 200; i++) {
        double t0 = cumod__bench_now_us();
        drv.module_load_data(&mod, img);
        drv.module_get_function(&fn, mod, "empty");
        t[i] = cumod__bench_now_us() - t0;
        drv.module_unload(mod);
    }
    out->load_cubin_p50_us = cumod__bench_quantile(t, 200, 0.5);
    drv.module_load_data(&mod, img);
    drv.module_get_function(&fn, mod, "empty");
    free(img);
    drv.stream_create(&s, CU_STREAM_NON_BLOCKING);
    drv.event_create(&ev, CU_EVENT_DISABLE_TIMING);
    for (int i = 0; i < N; i++) {
        double t0 = cumod__bench_now_us();
        drv.launch_kernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        drv.stream_synchronize(s);
        t[i] = cumod__bench_now_us() - t0;
    }
    out->launch_sync_p50_us = cumod__bench_quantile(t, N, 0.5);
    for (int i = 0; i < N; i++) {
        double t0 = cumod__bench_now_us();
        drv.launch_kernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        drv.event_record(ev, s);
        while (drv.event_query(ev) == CUDA_ERROR_NOT_READY)
            ;
        t[i] = cumod__bench_now_us() - t0;
    }
    out->launch_event_p50_us = cumod__bench_quantile(t, N, 0.5);
    /* The best of three: the rate the driver can reach here (it varies by
     * a third between runs on the H100), so percentages of it are the
     * conservative ones. */
    double t0;
    out->async_launches_per_s = 0;
    for (int k = 0; k < 3; k++) {
        t0 = cumod__bench_now_us();
        for (int i = 0; i < 100000; i++)
            drv.launch_kernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        drv.stream_synchronize(s);
        double r = 1e11 / (cumod__bench_now_us() - t0);
        if (r > out->async_launches_per_s)
            out->async_launches_per_s = r;
    }

    size_t n = 256u << 20;
    void *h = malloc(n);
    CUdeviceptr dp;
    memset(h, 1, n);
    drv.mem_host_register(h, n, 0);
    drv.mem_alloc(&dp, n);
    drv.memcpy_htod(dp, h, n);
    /* Each the best of three rounds of ten, as cumod's copies are timed:
     * bandwidth to host memory varies between rounds on a shared host. */
    out->h2d_pinned_gbps = out->d2h_pinned_gbps = 0;
    for (int k = 0; k < 3; k++) {
        t0 = cumod__bench_now_us();
        for (int i = 0; i < 10; i++)
            drv.memcpy_htod(dp, h, n);
        double g = 10.0 * (double)n / (cumod__bench_now_us() - t0) / 1e3;
        if (g > out->h2d_pinned_gbps)
            out->h2d_pinned_gbps = g;
        t0 = cumod__bench_now_us();
        for (int i = 0; i < 10; i++)
            drv.memcpy_dtoh(h, dp, n);
        g = 10.0 * (double)n / (cumod__bench_now_us() - t0) / 1e3;
        if (g > out->d2h_pinned_gbps)
            out->d2h_pinned_gbps = g;
    }
    drv.mem_host_unregister(h);
    /* Pageable memory (not registered), 64 MiB: what an in-process
     * library copying a NumPy array does (cupy.asarray, cupy.asnumpy). */
    out->h2d_pageable_gbps = out->d2h_pageable_gbps = 0;
    for (int k = 0; k < 3; k++) {
        size_t pn = 64u << 20;
        t0 = cumod__bench_now_us();
        for (int i = 0; i < 4; i++)
            drv.memcpy_htod(dp, h, pn);
        double g = 4.0 * (double)pn / (cumod__bench_now_us() - t0) / 1e3;
        if (g > out->h2d_pageable_gbps)
            out->h2d_pageable_gbps = g;
        t0 = cumod__bench_now_us();
        for (int i = 0; i < 4; i++)
            drv.memcpy_dtoh(h, dp, pn);
        g = 4.0 * (double)pn / (cumod__bench_now_us() - t0) / 1e3;
        if (g > out->d2h_pageable_gbps)
            out->d2h_pageable_gbps = g;
    }
    free(h);
    /* The same copy from a registered POSIX shared-memory mapping: shm
     * pages are 4 KiB (no transparent huge pages on tmpfs by default),
     * where malloc's 64 MiB above likely got 2 MiB pages. */
    char name[64];
    snprintf(name, sizeof(name), "/cumod-bench-%d", (int)getpid());
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    out->h2d_shm_gbps = NAN;
    if (fd >= 0 && ftruncate(fd, (off_t)n) == 0) {
        void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            memset(m, 1, n);
            drv.mem_host_register(m, n, 0);
            drv.memcpy_htod(dp, m, n);
            t0 = cumod__bench_now_us();
            for (int i = 0; i < 10; i++)
                drv.memcpy_htod(dp, m, n);
            out->h2d_shm_gbps =
                10.0 * (double)n / (cumod__bench_now_us() - t0) / 1e3;
            drv.mem_host_unregister(m);
            munmap(m, n);
        }
    }
    if (fd >= 0) {
        close(fd);
        shm_unlink(name);
    }
    drv.mem_free(dp);
    drv.event_destroy(ev);
    drv.stream_destroy(s);
    drv.module_unload(mod);
    drv.primary_ctx_release(dev);
    return 0;
}

static void *
bench_echo(void *arg)
{
    nng_socket *s = arg;
    nng_msg *m;
    while (nng_recvmsg(*s, &m, 0) == 0)
        if (nng_sendmsg(*s, m, 0) != 0)
            nng_msg_free(m);
    return NULL;
}

/* The echo pair, kept for the run once opened (closing the rep socket
 * under its thread is the nng 1.5.2 deadlock: DESIGN.md). */
static nng_socket echo_rep, echo_req;
static int echo_open;

static int
bench_echo_open(const char *dir)
{
    static pthread_t th;
    char url[512];
    if (echo_open)
        return 0;
    snprintf(url, sizeof(url), "ipc://%s/echo.sock", dir);
    if (nng_rep0_open(&echo_rep) || nng_listen(echo_rep, url, NULL, 0) ||
        nng_req0_open(&echo_req) || nng_dial(echo_req, url, NULL, 0))
        return -1;
    pthread_create(&th, NULL, bench_echo, &echo_rep);
    pthread_detach(th);
    echo_open = 1;
    return 0;
}

int
cumod__bench_nng_rtt(const char *dir, double *t, int n)
{
    char body[128] = {0};
    if (bench_echo_open(dir) != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        nng_msg *m;
        double t0 = cumod__bench_now_us();
        nng_msg_alloc(&m, 0);
        nng_msg_append(m, body, sizeof(body));
        nng_sendmsg(echo_req, m, 0);
        nng_recvmsg(echo_req, &m, 0);
        nng_msg_free(m);
        t[i] = cumod__bench_now_us() - t0;
    }
    return 0;
}

double
cumod__bench_nng_rtt_p50_us(const char *dir)
{
    enum { N = 5000 };
    static double t[N];
    if (cumod__bench_nng_rtt(dir, t, N) != 0)
        return NAN;
    return cumod__bench_quantile(t, N, 0.5);
}

int
cumod__bench_floor_args(const char *cubin, const unsigned *sizes, int n,
                        double *p50)
{
    cumod_driver drv;
    char msg[1024], name[32];
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUstream s;
    enum { N = 2000 };
    static double t[N];
    static unsigned char arg[4096];
    size_t len;

    if (cumod__driver_open(&drv, cumod__driver_default_path(NULL), msg,
                           sizeof(msg)) != 0 ||
        drv.init(0) != CUDA_SUCCESS || drv.device_get(&dev, 0) ||
        drv.primary_ctx_retain(&ctx, dev) || drv.ctx_set_current(ctx))
        return -1;
    void *img = cumod__bench_file(cubin, &len);
    if (img == NULL || drv.module_load_data(&mod, img) != CUDA_SUCCESS) {
        free(img);
        return -1;
    }
    free(img);
    drv.stream_create(&s, CU_STREAM_NON_BLOCKING);
    for (int k = 0; k < n; k++) {
        CUfunction fn;
        void *params[] = {arg};
        snprintf(name, sizeof(name), "args%u", sizes[k]);
        p50[k] = NAN;
        if (sizes[k] > sizeof(arg) ||
            drv.module_get_function(&fn, mod, name) != CUDA_SUCCESS)
            continue;
        for (int i = 0; i < 200; i++) /* warm-up */
            drv.launch_kernel(fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
        drv.stream_synchronize(s);
        for (int i = 0; i < N; i++) {
            double t0 = cumod__bench_now_us();
            drv.launch_kernel(fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
            drv.stream_synchronize(s);
            t[i] = cumod__bench_now_us() - t0;
        }
        p50[k] = cumod__bench_quantile(t, N, 0.5);
    }
    drv.stream_destroy(s);
    drv.module_unload(mod);
    (void)drv.primary_ctx_release(dev);
    cumod__driver_close(&drv);
    return 0;
}
