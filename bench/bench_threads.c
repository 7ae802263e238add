/* SPDX-License-Identifier: MIT */
/*
 * cumod_bench_threads: what one CUDA context does to launches on one thread
 * while another thread of the same process loads modules, frees memory,
 * unregisters host memory or waits on a stream. It decides which of the
 * executor's operations may share the submission thread (DESIGN.md: nothing
 * that can wait on one session's work runs there) and which need a thread
 * of their own. Prints figures; asserts nothing.
 *
 *   cumod_bench_threads KERNEL_DIR BENCH_KERNEL_DIR
 *
 * KERNEL_DIR holds empty.cubin; BENCH_KERNEL_DIR spin.cubin and heavy.ptx.
 * Thread A launches the empty kernel, records an event and spins on it, over
 * and over, on its own stream; thread B does one activity meanwhile. For each
 * activity: A's round trips (p50, p99, max) and cuLaunchKernel's host time
 * (max), and how long B's calls took.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "exec/driver.h"

typedef struct bt {
    cumod_driver drv;
    CUcontext ctx;
    CUdevice dev;
    CUfunction empty, spin;
    void *ptx;
    size_t ptx_len;
    void *cubin;
    /* Entry points cumodd does not use (yet): looked up here only. */
    CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    CUresult (*link_create)(unsigned, CUjit_option *, void **, CUlinkState *);
    CUresult (*link_add)(CUlinkState, CUjitInputType, void *, size_t,
                         const char *, unsigned, CUjit_option *, void **);
    CUresult (*link_complete)(CUlinkState, void **, size_t *);
    CUresult (*link_destroy)(CUlinkState);
    atomic_int stop;
    /* A's samples */
    double *rtt, *host;
    size_t n, cap;
} bt;

static void *
bt_launcher(void *arg)
{
    bt *b = arg;
    CUstream s;
    CUevent ev;
    b->drv.ctx_set_current(b->ctx);
    b->drv.stream_create(&s, CU_STREAM_NON_BLOCKING);
    b->drv.event_create(&ev, CU_EVENT_DISABLE_TIMING);
    while (!atomic_load(&b->stop) && b->n < b->cap) {
        double t0 = cumod__bench_now_us();
        b->drv.launch_kernel(b->empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        double t1 = cumod__bench_now_us();
        b->drv.event_record(ev, s);
        while (b->drv.event_query(ev) == CUDA_ERROR_NOT_READY)
            ;
        b->rtt[b->n] = cumod__bench_now_us() - t0;
        b->host[b->n] = t1 - t0;
        b->n++;
    }
    b->drv.event_destroy(ev);
    b->drv.stream_destroy(s);
    return NULL;
}

typedef void (*bt_activity)(bt *b, double *op_us, int *nops, char *note,
                            size_t notelen);

static void
bt_report(bt *b, const char *name, bt_activity act)
{
    pthread_t th;
    double op[64];
    int nops = 0;
    char note[256] = "";

    b->n = 0;
    atomic_store(&b->stop, 0);
    pthread_create(&th, NULL, bt_launcher, b);
    usleep(20000); /* A warms up */
    size_t n0 = b->n;
    act(b, op, &nops, note, sizeof(note));
    size_t n1 = b->n;
    atomic_store(&b->stop, 1);
    pthread_join(th, NULL);
    size_t n = n1 - n0;
    double *r = b->rtt + n0, *h = b->host + n0;
    double hmax = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i] > hmax)
            hmax = h[i];
    double p50 = cumod__bench_quantile(r, n, 0.5);
    double p99 = cumod__bench_quantile(r, n, 0.99);
    double max = cumod__bench_quantile(r, n, 1.0);
    double omin = 1e18, omax = 0, osum = 0;
    for (int i = 0; i < nops; i++) {
        osum += op[i];
        omin = op[i] < omin ? op[i] : omin;
        omax = op[i] > omax ? op[i] : omax;
    }
    printf(
        "  %-34s A: %6zu launches, rtt p50 %7.1f p99 %9.1f max %9.1f us, "
        "launch call max %9.1f us | B: %d ops, %.1f..%.1f us (mean %.1f) %s\n",
        name, n, p50, p99, max, hmax, nops, nops ? omin : 0, nops ? omax : 0,
        nops ? osum / nops : 0, note);
    fflush(stdout);
}

static void
act_idle(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)b, (void)op, (void)nops, (void)note, (void)nl;
    usleep(300000);
}

static void
act_load_cubin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)note, (void)nl;
    for (int i = 0; i < 64; i++) {
        CUmodule m;
        CUfunction f;
        double t0 = cumod__bench_now_us();
        b->drv.module_load_data(&m, b->cubin);
        b->drv.module_get_function(&f, m, "empty");
        b->drv.module_unload(m);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        usleep(2000);
    }
}

static void
act_load_ptx(bt *b, double *op, int *nops, char *note, size_t nl)
{
    for (int i = 0; i < 3; i++) {
        CUmodule m;
        double t0 = cumod__bench_now_us();
        CUresult r = b->drv.module_load_data(&m, b->ptx);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        if (r == CUDA_SUCCESS)
            b->drv.module_unload(m);
        else
            snprintf(note, nl, "(load: CUresult %d)", (int)r);
    }
}

/* The PTX compiled by cuLink* into a cubin, then loaded: is it the JIT or
 * the load that holds launches up? */
static void
act_link_ptx(bt *b, double *op, int *nops, char *note, size_t nl)
{
    if (b->link_create == NULL) {
        snprintf(note, nl, "(no cuLinkCreate)");
        return;
    }
    for (int i = 0; i < 3; i++) {
        CUlinkState ls;
        void *out;
        size_t outlen;
        CUmodule m;
        double t0 = cumod__bench_now_us();
        CUresult r = b->link_create(0, NULL, NULL, &ls);
        if (r == CUDA_SUCCESS)
            r = b->link_add(ls, CU_JIT_INPUT_PTX, b->ptx, b->ptx_len + 1,
                            "heavy.ptx", 0, NULL, NULL);
        if (r == CUDA_SUCCESS)
            r = b->link_complete(ls, &out, &outlen);
        double t1 = cumod__bench_now_us();
        if (r == CUDA_SUCCESS &&
            b->drv.module_load_data(&m, out) == CUDA_SUCCESS)
            b->drv.module_unload(m);
        double t2 = cumod__bench_now_us();
        b->link_destroy(ls);
        op[(*nops)++] = t1 - t0;
        snprintf(note, nl, "(link %.0f us, then load %.0f us; r=%d)", t1 - t0,
                 t2 - t1, (int)r);
    }
}

/* A 200 ms kernel on stream s, then f(): how long f takes, and what A
 * sees meanwhile. */
static CUstream
bt_spin(bt *b, double ms)
{
    CUstream s;
    unsigned long long ns = (unsigned long long)(ms * 1e6);
    void *args[] = {&ns};
    b->drv.stream_create(&s, CU_STREAM_NON_BLOCKING);
    b->drv.launch_kernel(b->spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
    usleep(1000);
    return s;
}

static void
act_free_behind_spin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)note, (void)nl;
    for (int i = 0; i < 2; i++) {
        CUdeviceptr p;
        b->drv.mem_alloc(&p, 64u << 20);
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        b->drv.mem_free(p);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        b->drv.stream_synchronize(s);
        b->drv.stream_destroy(s);
    }
}

static void
act_alloc_behind_spin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)note, (void)nl;
    for (int i = 0; i < 2; i++) {
        CUdeviceptr p;
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        b->drv.mem_alloc(&p, 64u << 20);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        b->drv.stream_synchronize(s);
        b->drv.stream_destroy(s);
        b->drv.mem_free(p);
    }
}

/* cuMemFreeAsync of memory from cuMemAlloc: allowed, and does it wait? */
static void
act_free_async_memalloc(bt *b, double *op, int *nops, char *note, size_t nl)
{
    if (b->free_async == NULL) {
        snprintf(note, nl, "(no cuMemFreeAsync)");
        return;
    }
    for (int i = 0; i < 2; i++) {
        CUdeviceptr p;
        b->drv.mem_alloc(&p, 64u << 20);
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        CUresult r = b->free_async(p, s);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        snprintf(note, nl, "(cuMemFreeAsync of a cuMemAlloc pointer: r=%d)",
                 (int)r);
        b->drv.stream_synchronize(s);
        b->drv.stream_destroy(s);
        if (r != CUDA_SUCCESS)
            b->drv.mem_free(p);
    }
}

/* The stream-ordered allocator: alloc on a private stream, free on the
 * stream of a running kernel. */
static void
act_pool_behind_spin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    if (b->alloc_async == NULL) {
        snprintf(note, nl, "(no cuMemAllocAsync)");
        return;
    }
    CUstream priv;
    b->drv.stream_create(&priv, CU_STREAM_NON_BLOCKING);
    for (int i = 0; i < 2; i++) {
        CUdeviceptr p;
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        CUresult r1 = b->alloc_async(&p, 64u << 20, priv);
        CUresult r2 = b->drv.stream_synchronize(priv);
        double t1 = cumod__bench_now_us();
        CUresult r3 = b->free_async(p, s);
        double t2 = cumod__bench_now_us();
        op[(*nops)++] = t1 - t0;
        op[(*nops)++] = t2 - t1;
        snprintf(note, nl,
                 "(alloc+sync of a private stream %.0f us, free on the busy "
                 "stream %.0f us; r=%d,%d,%d)",
                 t1 - t0, t2 - t1, (int)r1, (int)r2, (int)r3);
        b->drv.stream_synchronize(s);
        b->drv.stream_destroy(s);
    }
    b->drv.stream_destroy(priv);
}

static void
act_unregister_behind_spin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)note, (void)nl;
    size_t n = 64u << 20;
    for (int i = 0; i < 2; i++) {
        void *h = mmap(NULL, n, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        memset(h, 1, n);
        b->drv.mem_host_register(h, n, 0);
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        b->drv.mem_host_unregister(h);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        b->drv.stream_synchronize(s);
        b->drv.stream_destroy(s);
        munmap(h, n);
    }
}

static void
act_register_256m(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)note, (void)nl;
    size_t n = 256u << 20;
    for (int i = 0; i < 2; i++) {
        void *h = mmap(NULL, n, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        memset(h, 1, n);
        double t0 = cumod__bench_now_us();
        b->drv.mem_host_register(h, n, 0);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        b->drv.mem_host_unregister(h);
        munmap(h, n);
    }
}

static void
act_sync_behind_spin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)note, (void)nl;
    for (int i = 0; i < 2; i++) {
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        b->drv.stream_synchronize(s);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        b->drv.stream_destroy(s);
    }
}

static void
act_destroy_behind_spin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)note, (void)nl;
    for (int i = 0; i < 2; i++) {
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        b->drv.stream_destroy(s);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        usleep(210000);
    }
}

static void
act_unload_behind_spin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)note, (void)nl;
    for (int i = 0; i < 2; i++) {
        CUmodule m;
        CUfunction f;
        b->drv.module_load_data(&m, b->cubin);
        b->drv.module_get_function(&f, m, "empty");
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        b->drv.module_unload(m);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        b->drv.stream_synchronize(s);
        b->drv.stream_destroy(s);
    }
}

static void
act_load_behind_spin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)note, (void)nl;
    for (int i = 0; i < 2; i++) {
        CUmodule m;
        CUfunction f;
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        b->drv.module_load_data(&m, b->cubin);
        b->drv.module_get_function(&f, m, "empty");
        op[(*nops)++] = cumod__bench_now_us() - t0;
        b->drv.stream_synchronize(s);
        b->drv.stream_destroy(s);
        b->drv.module_unload(m);
    }
}

static void
act_meminfo_behind_spin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    (void)note, (void)nl;
    for (int i = 0; i < 2; i++) {
        size_t fr, tot;
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        b->drv.mem_get_info(&fr, &tot);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        b->drv.stream_synchronize(s);
        b->drv.stream_destroy(s);
    }
}

/* A read into pageable memory queued behind a long kernel on its stream:
 * does the call wait for the kernel? */
static void
act_read_pageable_behind_spin(bt *b, double *op, int *nops, char *note,
                              size_t nl)
{
    (void)note, (void)nl;
    CUdeviceptr p;
    char *h = malloc(4096);
    b->drv.mem_alloc(&p, 4096);
    for (int i = 0; i < 2; i++) {
        CUstream s = bt_spin(b, 200);
        double t0 = cumod__bench_now_us();
        b->drv.memcpy_dtoh_async(h, p, 4096, s);
        op[(*nops)++] = cumod__bench_now_us() - t0;
        b->drv.stream_synchronize(s);
        b->drv.stream_destroy(s);
    }
    b->drv.mem_free(p);
    free(h);
}

/* Streams made to wait (cuStreamWaitEvent) for a long kernel's event, each
 * with a launch queued behind the wait: does work on A's own stream wait
 * too, because its hardware queue is shared (CUDA_DEVICE_MAX_CONNECTIONS)? */
static void
act_waits_behind_spin(bt *b, double *op, int *nops, char *note, size_t nl)
{
    enum { NS = 40 };
    CUstream x[NS];
    CUevent ev;
    b->drv.event_create(&ev, CU_EVENT_DISABLE_TIMING);
    CUstream s = bt_spin(b, 300);
    b->drv.event_record(ev, s);
    double t0 = cumod__bench_now_us();
    for (int i = 0; i < NS; i++) {
        b->drv.stream_create(&x[i], CU_STREAM_NON_BLOCKING);
        b->drv.stream_wait_event(x[i], ev, 0);
        b->drv.launch_kernel(b->empty, 1, 1, 1, 1, 1, 1, 0, x[i], NULL, NULL);
    }
    op[(*nops)++] = cumod__bench_now_us() - t0;
    usleep(320000);
    for (int i = 0; i < NS; i++) {
        b->drv.stream_synchronize(x[i]);
        b->drv.stream_destroy(x[i]);
    }
    b->drv.stream_synchronize(s);
    b->drv.stream_destroy(s);
    b->drv.event_destroy(ev);
    const char *c = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    snprintf(note, nl, "(%d streams wait; CUDA_DEVICE_MAX_CONNECTIONS=%s)", NS,
             c ? c : "unset");
}

/* Many streams each running a long kernel (more than the hardware's
 * queues): does a launch on A's stream wait behind them? */
static void
act_many_spins(bt *b, double *op, int *nops, char *note, size_t nl)
{
    enum { NS = 40 };
    CUstream x[NS];
    unsigned long long ns = 300000000ull;
    void *args[] = {&ns};
    double t0 = cumod__bench_now_us();
    for (int i = 0; i < NS; i++) {
        b->drv.stream_create(&x[i], CU_STREAM_NON_BLOCKING);
        b->drv.launch_kernel(b->spin, 1, 1, 1, 1, 1, 1, 0, x[i], args, NULL);
    }
    op[(*nops)++] = cumod__bench_now_us() - t0;
    usleep(320000);
    for (int i = 0; i < NS; i++) {
        b->drv.stream_synchronize(x[i]);
        b->drv.stream_destroy(x[i]);
    }
    snprintf(note, nl, "(%d streams each run a 300 ms kernel)", NS);
}

/* What the executor does for 200 sessions each launching a long kernel:
 * a stream each (made on first use), the launch, an event behind it. The
 * longest of each call. */
static void
act_200_sessions(bt *b, double *op, int *nops, char *note, size_t nl)
{
    enum { NS = 200 };
    static CUstream x[NS];
    static CUevent ev[NS];
    unsigned long long ns = 1000000000ull;
    void *args[] = {&ns};
    double mc = 0, ml = 0, me = 0, t;
    double t0 = cumod__bench_now_us();
    for (int i = 0; i < NS; i++) {
        t = cumod__bench_now_us();
        b->drv.stream_create(&x[i], CU_STREAM_NON_BLOCKING);
        double c = cumod__bench_now_us() - t;
        t = cumod__bench_now_us();
        b->drv.launch_kernel(b->spin, 1, 1, 1, 1, 1, 1, 0, x[i], args, NULL);
        double l = cumod__bench_now_us() - t;
        b->drv.event_create(&ev[i], CU_EVENT_DISABLE_TIMING);
        t = cumod__bench_now_us();
        b->drv.event_record(ev[i], x[i]);
        double e = cumod__bench_now_us() - t;
        mc = c > mc ? c : mc;
        ml = l > ml ? l : ml;
        me = e > me ? e : me;
    }
    op[(*nops)++] = cumod__bench_now_us() - t0;
    for (int i = 0; i < NS; i++) {
        b->drv.stream_synchronize(x[i]);
        b->drv.stream_destroy(x[i]);
        b->drv.event_destroy(ev[i]);
    }
    snprintf(note, nl,
             "(200 streams, 1 s kernels: longest cuStreamCreate %.0f us, "
             "cuLaunchKernel %.0f us, cuEventRecord %.0f us)",
             mc, ml, me);
}

/* The same with streams and events made beforehand, while the device is
 * idle: how long that takes, and whether the launches then hold anyone. */
static void
act_200_precreated(bt *b, double *op, int *nops, char *note, size_t nl)
{
    enum { NS = 256 };
    static CUstream x[NS];
    static CUevent ev[NS];
    unsigned long long ns = 1000000000ull;
    void *args[] = {&ns};
    double t0 = cumod__bench_now_us();
    for (int i = 0; i < NS; i++) {
        b->drv.stream_create(&x[i], CU_STREAM_NON_BLOCKING);
        b->drv.event_create(&ev[i], CU_EVENT_DISABLE_TIMING);
    }
    double made = cumod__bench_now_us() - t0, ml = 0;
    t0 = cumod__bench_now_us();
    for (int i = 0; i < 200; i++) {
        double t = cumod__bench_now_us();
        b->drv.launch_kernel(b->spin, 1, 1, 1, 1, 1, 1, 0, x[i], args, NULL);
        b->drv.event_record(ev[i], x[i]);
        t = cumod__bench_now_us() - t;
        ml = t > ml ? t : ml;
    }
    op[(*nops)++] = cumod__bench_now_us() - t0;
    /* More events while the kernels run: does cuEventCreate wait? */
    CUevent more[512];
    double me = 0;
    for (int i = 0; i < 512; i++) {
        double t = cumod__bench_now_us();
        b->drv.event_create(&more[i], CU_EVENT_DISABLE_TIMING);
        t = cumod__bench_now_us() - t;
        me = t > me ? t : me;
    }
    for (int i = 0; i < NS; i++) {
        b->drv.stream_synchronize(x[i]);
        b->drv.stream_destroy(x[i]);
        b->drv.event_destroy(ev[i]);
    }
    for (int i = 0; i < 512; i++)
        b->drv.event_destroy(more[i]);
    snprintf(note, nl,
             "(256 streams + events made idle in %.0f us; 200 launches of "
             "1 s kernels, longest launch+record %.0f us; 512 more events "
             "while they run, longest cuEventCreate %.0f us)",
             made, ml, me);
}

/* 64 MiB copies from registered host memory into memory from cuMemAlloc
 * and from the default pool: is either slower? */
static void
act_copy_pool_vs_memalloc(bt *b, double *op, int *nops, char *note, size_t nl)
{
    size_t n = 64u << 20;
    CUdeviceptr pa, pp;
    CUstream s;
    void *h = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    memset(h, 1, n);
    b->drv.mem_host_register(h, n, 0);
    b->drv.stream_create(&s, CU_STREAM_NON_BLOCKING);
    b->drv.mem_alloc(&pa, n);
    b->alloc_async(&pp, n, s);
    b->drv.stream_synchronize(s);
    double gb[2][2];
    for (int k = 0; k < 2; k++) {
        CUdeviceptr d = k ? pp : pa;
        b->drv.memcpy_htod_async(d, h, n, s);
        b->drv.stream_synchronize(s);
        double t0 = cumod__bench_now_us();
        for (int i = 0; i < 10; i++) {
            b->drv.memcpy_htod_async(d, h, n, s);
            b->drv.stream_synchronize(s);
        }
        gb[k][0] = 10.0 * (double)n / (cumod__bench_now_us() - t0) / 1e3;
        t0 = cumod__bench_now_us();
        for (int i = 0; i < 10; i++) {
            b->drv.memcpy_dtoh_async(h, d, n, s);
            b->drv.stream_synchronize(s);
        }
        gb[k][1] = 10.0 * (double)n / (cumod__bench_now_us() - t0) / 1e3;
    }
    op[(*nops)++] = 0;
    snprintf(note, nl,
             "(cuMemAlloc: H2D %.1f, D2H %.1f GB/s; pool: H2D %.1f, D2H "
             "%.1f GB/s)",
             gb[0][0], gb[0][1], gb[1][0], gb[1][1]);
    b->free_async(pp, s);
    b->drv.stream_synchronize(s);
    b->drv.mem_free(pa);
    b->drv.mem_host_unregister(h);
    munmap(h, n);
    b->drv.stream_destroy(s);
}

int
main(int argc, char **argv)
{
    bt b = {0};
    char msg[1024], path[1024];
    CUmodule me, ms;
    size_t len;

    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s KERNEL_DIR BENCH_KERNEL_DIR [--copies]\n",
                argv[0]);
        return 2;
    }
    /* Every PTX load is a real JIT, not a cache hit. */
    setenv("CUDA_CACHE_DISABLE", "1", 1);
    if (cumod__driver_open(&b.drv, cumod__driver_default_path(NULL), msg,
                           sizeof(msg)) != 0 ||
        b.drv.init(0) != CUDA_SUCCESS || b.drv.device_get(&b.dev, 0) ||
        b.drv.primary_ctx_retain(&b.ctx, b.dev) ||
        b.drv.ctx_set_current(b.ctx)) {
        fprintf(stderr, "bench_threads: no usable CUDA driver: %s\n", msg);
        return 1;
    }
    *(void **)&b.alloc_async = dlsym(b.drv.dl, "cuMemAllocAsync");
    *(void **)&b.free_async = dlsym(b.drv.dl, "cuMemFreeAsync");
    *(void **)&b.link_create = dlsym(b.drv.dl, "cuLinkCreate_v2");
    *(void **)&b.link_add = dlsym(b.drv.dl, "cuLinkAddData_v2");
    *(void **)&b.link_complete = dlsym(b.drv.dl, "cuLinkComplete");
    *(void **)&b.link_destroy = dlsym(b.drv.dl, "cuLinkDestroy");
    snprintf(path, sizeof(path), "%s/empty.cubin", argv[1]);
    b.cubin = cumod__bench_file(path, &len);
    snprintf(path, sizeof(path), "%s/heavy.ptx", argv[2]);
    b.ptx = cumod__bench_file(path, &b.ptx_len);
    snprintf(path, sizeof(path), "%s/spin.cubin", argv[2]);
    void *spin = cumod__bench_file(path, &len);
    if (b.cubin == NULL || b.ptx == NULL || spin == NULL ||
        b.drv.module_load_data(&me, b.cubin) ||
        b.drv.module_get_function(&b.empty, me, "empty") ||
        b.drv.module_load_data(&ms, spin) ||
        b.drv.module_get_function(&b.spin, ms, "spin")) {
        fprintf(stderr, "bench_threads: cannot load the kernels\n");
        return 1;
    }
    b.cap = 4u << 20;
    b.rtt = calloc(b.cap, sizeof(double));
    b.host = calloc(b.cap, sizeof(double));
    printf("launches on thread A while thread B works, one context:\n");
    if (argc > 3 && strcmp(argv[3], "--copies") == 0) {
        bt_report(&b, "copies: pool vs cuMemAlloc", act_copy_pool_vs_memalloc);
        return 0;
    }
    bt_report(&b, "idle", act_idle);
    bt_report(&b, "cubin load+get+unload x64", act_load_cubin);
    bt_report(&b, "PTX JIT load (200 KB) x3", act_load_ptx);
    bt_report(&b, "PTX cuLink JIT, then load x3", act_link_ptx);
    bt_report(&b, "cuModuleUnload behind 200 ms", act_unload_behind_spin);
    bt_report(&b, "cuMemFree behind 200 ms", act_free_behind_spin);
    bt_report(&b, "cuMemAlloc behind 200 ms", act_alloc_behind_spin);
    bt_report(&b, "cuMemFreeAsync(cuMemAlloc ptr)", act_free_async_memalloc);
    bt_report(&b, "pool alloc; free async behind", act_pool_behind_spin);
    bt_report(&b, "cuMemHostUnregister behind 200ms",
              act_unregister_behind_spin);
    bt_report(&b, "cuMemHostRegister 256 MiB", act_register_256m);
    bt_report(&b, "cuStreamSynchronize behind 200ms", act_sync_behind_spin);
    bt_report(&b, "cuStreamDestroy behind 200 ms", act_destroy_behind_spin);
    bt_report(&b, "cuMemGetInfo behind 200 ms", act_meminfo_behind_spin);
    bt_report(&b, "cubin load+get behind 200 ms", act_load_behind_spin);
    bt_report(&b, "DtoH to pageable behind 200 ms",
              act_read_pageable_behind_spin);
    bt_report(&b, "40 streams wait on a 300 ms kernel", act_waits_behind_spin);
    bt_report(&b, "40 streams run 300 ms kernels", act_many_spins);
    bt_report(&b, "200 sessions launch 1 s kernels", act_200_sessions);
    bt_report(&b, "the same on streams made idle", act_200_precreated);
    b.drv.primary_ctx_release(b.dev);
    return 0;
}
