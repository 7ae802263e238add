/* SPDX-License-Identifier: MIT */
/*
 * cumod_bench_submit: what one CUDA context gives launches that are waited
 * for, by how the waiting is done and by how many threads submit (issue
 * 21: does the executor need more than one submission thread, and what
 * must a waited launch cost on it?). Prints figures; asserts nothing.
 *
 *   cumod_bench_submit KERNEL_DIR [SECONDS_PER_FIGURE]
 *
 * KERNEL_DIR holds empty.cubin. Each figure runs for SECONDS (0.5) and
 * prints launches/s in all, and the p50 and p99 of one launch's round
 * trip (launch to seen complete).
 *
 *  - the host cost of each driver call on the waited launch's path;
 *  - one thread: launch, then cuStreamSynchronize / spin on cuEventQuery
 *    of an event recorded after it / spin on cuStreamQuery;
 *  - T threads (1..32), each with its own stream, each launching and
 *    spinning on cuStreamQuery (every thread its own submitter and
 *    completer); and the same with an event recorded after each launch
 *    and spun on with cuEventQuery (as the executor's direct path does);
 *  - today's executor: one thread submits for K streams (launch, event
 *    record), a second polls the events (K outstanding, one per "client");
 *  - completion written by the GPU instead of an event: after each launch,
 *    cuStreamWriteValue32 of a sequence number into pinned host memory,
 *    which the waiting thread reads as plain memory (one thread; T
 *    threads; one submitter + one poller of the words).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "exec/driver.h"

#define SUB_MAX_THREADS 64
#define SUB_SAMPLES (1u << 20)

typedef struct sub {
    cumod_driver drv;
    CUcontext ctx;
    CUfunction empty;
    double secs;
    /* cuStreamWriteValue32 (NULL: the driver has none) and the words it
     * writes: one per thread or stream, 128 bytes apart. */
    CUresult (*write32)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
    volatile uint32_t *words;
    unsigned wflags; /* CUMOD_BENCH_WV_FLAGS: cuStreamWriteValue32's flags */
} sub;

#define SUB_WORD(b, i) ((b)->words + (size_t)(i)*32)
#define SUB_WORD_DEV(b, i) ((CUdeviceptr)(uintptr_t)SUB_WORD(b, i))

typedef struct sub_fig {
    double rate, p50, p99;
} sub_fig;

static sub_fig
sub_fig_of(double *rtt, size_t n, double wall_s)
{
    sub_fig f = {.rate = n / wall_s};
    f.p50 = cumod__bench_quantile(rtt, n, 0.5);
    f.p99 = cumod__bench_quantile(rtt, n, 0.99);
    return f;
}

/* --- the calls' host costs ----------------------------------------------- */

static void
sub_costs(sub *b)
{
    const cumod_driver *d = &b->drv;
    CUstream s;
    CUevent ev;
    enum { N = 20000 };
    double t0, t_launch = 0, t_rec = 0, t_eq_busy = 0, t_eq_done = 0,
               t_sq_done = 0, t_sq_busy = 0;
    int busy_n = 0, sbusy_n = 0;

    d->stream_create(&s, CU_STREAM_NON_BLOCKING);
    d->event_create(&ev, CU_EVENT_DISABLE_TIMING);
    for (int i = 0; i < N; i++) {
        t0 = cumod__bench_now_us();
        d->launch_kernel(b->empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        double t1 = cumod__bench_now_us();
        d->event_record(ev, s);
        double t2 = cumod__bench_now_us();
        t_launch += t1 - t0;
        t_rec += t2 - t1;
        for (;;) {
            double q0 = cumod__bench_now_us();
            CUresult r = d->stream_query(s);
            double q1 = cumod__bench_now_us();
            if (r == CUDA_ERROR_NOT_READY) {
                t_sq_busy += q1 - q0;
                sbusy_n++;
                double e0 = cumod__bench_now_us();
                CUresult re = d->event_query(ev);
                double e1 = cumod__bench_now_us();
                if (re == CUDA_ERROR_NOT_READY) {
                    t_eq_busy += e1 - e0;
                    busy_n++;
                }
                continue;
            }
            t_sq_done += q1 - q0;
            double e0 = cumod__bench_now_us();
            d->event_query(ev);
            t_eq_done += cumod__bench_now_us() - e0;
            break;
        }
    }
    printf("  host cost per call (us, mean of %d): cuLaunchKernel %.2f, "
           "cuEventRecord %.2f, cuEventQuery not ready %.2f / done %.2f, "
           "cuStreamQuery not ready %.2f / done %.2f\n",
           N, t_launch / N, t_rec / N, busy_n ? t_eq_busy / busy_n : 0,
           t_eq_done / N, sbusy_n ? t_sq_busy / sbusy_n : 0, t_sq_done / N);
    cumod__bench_record("submit_launch_us", t_launch / N);
    cumod__bench_record("submit_event_record_us", t_rec / N);
    cumod__bench_record("submit_event_query_us", t_eq_done / N);
    cumod__bench_record("submit_stream_query_us", t_sq_done / N);
    if (b->write32 != NULL) {
        double t_wv = 0, t_seen = 0;
        for (int i = 1; i <= N; i++) {
            d->launch_kernel(b->empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
            t0 = cumod__bench_now_us();
            CUresult wr =
                b->write32(s, SUB_WORD_DEV(b, 0), (cuuint32_t)i, b->wflags);
            double t1 = cumod__bench_now_us();
            if (wr != CUDA_SUCCESS) {
                printf("  cuStreamWriteValue32 (flags %u): CUresult %d; the "
                       "written-word figures are left out\n",
                       b->wflags, (int)wr);
                b->write32 = NULL;
                break;
            }
            while (*SUB_WORD(b, 0) != (uint32_t)i)
                ;
            t_wv += t1 - t0;
            /* what cuEventQuery costs when done, paid here instead: */
            double e0 = cumod__bench_now_us();
            (void)*SUB_WORD(b, 0);
            t_seen += cumod__bench_now_us() - e0;
        }
        printf("  host cost per call (us, mean of %d): cuStreamWriteValue32 "
               "%.2f, reading its word once done %.2f\n",
               N, t_wv / N, t_seen / N);
        cumod__bench_record("submit_write_value_us", t_wv / N);
    }
    d->event_destroy(ev);
    d->stream_destroy(s);
}

/* --- one thread, three ways of waiting ----------------------------------- */

enum { WAIT_SYNC, WAIT_EVENT, WAIT_STREAMQ, WAIT_WORD };

static sub_fig
sub_one(sub *b, int how, double *rtt)
{
    const cumod_driver *d = &b->drv;
    CUstream s;
    CUevent ev;
    size_t n = 0, count = 0;
    uint32_t seq = *SUB_WORD(b, 0);

    d->stream_create(&s, CU_STREAM_NON_BLOCKING);
    d->event_create(&ev, CU_EVENT_DISABLE_TIMING);
    double start = cumod__bench_now_us(), end = start + b->secs * 1e6, now;
    do {
        double t0 = cumod__bench_now_us();
        d->launch_kernel(b->empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        if (how == WAIT_SYNC) {
            d->stream_synchronize(s);
        } else if (how == WAIT_WORD) {
            b->write32(s, SUB_WORD_DEV(b, 0), ++seq, b->wflags);
            while (*SUB_WORD(b, 0) != seq)
                ;
        } else if (how == WAIT_EVENT) {
            d->event_record(ev, s);
            while (d->event_query(ev) == CUDA_ERROR_NOT_READY)
                ;
        } else {
            while (d->stream_query(s) == CUDA_ERROR_NOT_READY)
                ;
        }
        now = cumod__bench_now_us();
        count++;
        if (n < SUB_SAMPLES)
            rtt[n++] = now - t0;
    } while (now < end);
    d->event_destroy(ev);
    d->stream_destroy(s);
    sub_fig f = sub_fig_of(rtt, n, (now - start) / 1e6);
    f.rate = count / ((now - start) / 1e6);
    return f;
}

/* --- T threads, each its own submitter and completer ---------------------- */

typedef struct sub_thr {
    sub *b;
    pthread_t th;
    atomic_int *go;
    double *rtt;
    size_t n, count;
    double t_end;
    int events; /* 1: record an event after each launch and spin on it;
                   2: write a word after it and spin on the word */
    int index;
} sub_thr;

static void *
sub_thr_main(void *arg)
{
    sub_thr *t = arg;
    const cumod_driver *d = &t->b->drv;
    CUstream s;
    CUevent ev;
    d->ctx_set_current(t->b->ctx);
    d->stream_create(&s, CU_STREAM_NON_BLOCKING);
    d->event_create(&ev, CU_EVENT_DISABLE_TIMING);
    volatile uint32_t *w = SUB_WORD(t->b, t->index);
    uint32_t seq = *w;
    while (!atomic_load(t->go))
        ;
    double end = cumod__bench_now_us() + t->b->secs * 1e6, now;
    do {
        double t0 = cumod__bench_now_us();
        d->launch_kernel(t->b->empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        if (t->events == 2) {
            t->b->write32(s, SUB_WORD_DEV(t->b, t->index), ++seq, t->b->wflags);
            while (*w != seq)
                ;
        } else if (t->events) {
            d->event_record(ev, s);
            while (d->event_query(ev) == CUDA_ERROR_NOT_READY)
                ;
        } else {
            while (d->stream_query(s) == CUDA_ERROR_NOT_READY)
                ;
        }
        now = cumod__bench_now_us();
        t->count++;
        if (t->n < SUB_SAMPLES / SUB_MAX_THREADS)
            t->rtt[t->n++] = now - t0;
    } while (now < end);
    t->t_end = now;
    d->event_destroy(ev);
    d->stream_destroy(s);
    return NULL;
}

static sub_fig
sub_threads(sub *b, int nt, int events, double *rtt)
{
    sub_thr t[SUB_MAX_THREADS];
    atomic_int go = 0;
    size_t per = SUB_SAMPLES / SUB_MAX_THREADS;
    for (int i = 0; i < nt; i++) {
        t[i] = (sub_thr){.b = b,
                         .go = &go,
                         .rtt = rtt + i * per,
                         .events = events,
                         .index = i};
        pthread_create(&t[i].th, NULL, sub_thr_main, &t[i]);
    }
    double start = cumod__bench_now_us(), last = start;
    atomic_store(&go, 1);
    size_t n = 0, count = 0;
    double *all = malloc(SUB_SAMPLES * sizeof(double));
    for (int i = 0; i < nt; i++) {
        pthread_join(t[i].th, NULL);
        last = t[i].t_end > last ? t[i].t_end : last;
        memcpy(all + n, t[i].rtt, t[i].n * sizeof(double));
        n += t[i].n;
        count += t[i].count;
    }
    sub_fig f = sub_fig_of(all, n, (last - start) / 1e6);
    f.rate = count / ((last - start) / 1e6);
    free(all);
    return f;
}

/* --- today's executor: one submitter, one event poller -------------------- */

typedef struct sub_x {
    sub *b;
    int k;
    atomic_int stop;
    /* slot i: 0 free (the "client" has its answer), 1 in flight */
    _Atomic int state[SUB_MAX_THREADS];
    int words; /* completion by written words, not events */
    uint32_t seq[SUB_MAX_THREADS];
    CUevent ev[SUB_MAX_THREADS];
    double t0[SUB_MAX_THREADS];
    double *rtt;
    _Atomic size_t n;
} sub_x;

static void *
sub_x_poller(void *arg)
{
    sub_x *x = arg;
    const cumod_driver *d = &x->b->drv;
    d->ctx_set_current(x->b->ctx);
    while (!atomic_load(&x->stop)) {
        for (int i = 0; i < x->k; i++) {
            if (atomic_load(&x->state[i]) != 1)
                continue;
            if (x->words ? *SUB_WORD(x->b, i) != x->seq[i]
                         : d->event_query(x->ev[i]) == CUDA_ERROR_NOT_READY)
                continue;
            size_t n = atomic_fetch_add(&x->n, 1);
            if (n < SUB_SAMPLES)
                x->rtt[n] = cumod__bench_now_us() - x->t0[i];
            atomic_store(&x->state[i], 0);
        }
    }
    return NULL;
}

static sub_fig
sub_today(sub *b, int k, int words, double *rtt)
{
    const cumod_driver *d = &b->drv;
    sub_x *x = calloc(1, sizeof(*x));
    CUstream s[SUB_MAX_THREADS];
    pthread_t th;

    x->b = b;
    x->k = k;
    x->rtt = rtt;
    x->words = words;
    for (int i = 0; i < k; i++)
        x->seq[i] = *SUB_WORD(b, i);
    for (int i = 0; i < k; i++) {
        d->stream_create(&s[i], CU_STREAM_NON_BLOCKING);
        d->event_create(&x->ev[i], CU_EVENT_DISABLE_TIMING);
    }
    pthread_create(&th, NULL, sub_x_poller, x);
    double start = cumod__bench_now_us(), end = start + b->secs * 1e6, now;
    do {
        for (int i = 0; i < k; i++) {
            if (atomic_load(&x->state[i]) != 0)
                continue;
            x->t0[i] = cumod__bench_now_us();
            d->launch_kernel(b->empty, 1, 1, 1, 1, 1, 1, 0, s[i], NULL, NULL);
            if (words)
                b->write32(s[i], SUB_WORD_DEV(b, i), ++x->seq[i], b->wflags);
            else
                d->event_record(x->ev[i], s[i]);
            atomic_store(&x->state[i], 1);
        }
        now = cumod__bench_now_us();
    } while (now < end);
    atomic_store(&x->stop, 1);
    pthread_join(th, NULL);
    d->ctx_synchronize();
    size_t count = atomic_load(&x->n);
    size_t n = count < SUB_SAMPLES ? count : SUB_SAMPLES;
    sub_fig f = sub_fig_of(rtt, n, (now - start) / 1e6);
    f.rate = count / ((now - start) / 1e6);
    for (int i = 0; i < k; i++) {
        d->event_destroy(x->ev[i]);
        d->stream_destroy(s[i]);
    }
    free(x);
    return f;
}

int
main(int argc, char **argv)
{
    sub b = {.secs = 0.5};
    char msg[1024], path[1024];
    CUdevice dev;
    CUmodule m;
    size_t len;

    if (argc < 2) {
        fprintf(stderr, "usage: %s KERNEL_DIR [SECONDS_PER_FIGURE]\n", argv[0]);
        return 2;
    }
    if (argc > 2)
        b.secs = atof(argv[2]);
    if (getenv("CUMOD_BENCH_WV_FLAGS") != NULL)
        b.wflags = (unsigned)atoi(getenv("CUMOD_BENCH_WV_FLAGS"));
    if (getenv("CUMOD_BENCH_RECORD") != NULL)
        cumod__bench_record_open(getenv("CUMOD_BENCH_RECORD"));
    if (cumod__driver_open(&b.drv, cumod__driver_default_path(NULL), msg,
                           sizeof(msg)) != 0 ||
        b.drv.init(0) != CUDA_SUCCESS || b.drv.device_get(&dev, 0) ||
        b.drv.primary_ctx_retain(&b.ctx, dev) || b.drv.ctx_set_current(b.ctx)) {
        fprintf(stderr, "bench_submit: no usable CUDA driver: %s\n", msg);
        return 1;
    }
    snprintf(path, sizeof(path), "%s/empty.cubin", argv[1]);
    void *cubin = cumod__bench_file(path, &len);
    if (cubin == NULL || b.drv.module_load_data(&m, cubin) ||
        b.drv.module_get_function(&b.empty, m, "empty")) {
        fprintf(stderr, "bench_submit: cannot load %s\n", path);
        return 1;
    }
    void *words = NULL;
    *(void **)&b.write32 = dlsym(b.drv.dl, "cuStreamWriteValue32_v2");
    if (b.write32 != NULL &&
        b.drv.mem_host_alloc(&words, SUB_MAX_THREADS * 128,
                             CU_MEMHOSTALLOC_PORTABLE |
                                 CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS)
        b.write32 = NULL;
    if (b.write32 == NULL) {
        static uint32_t none[SUB_MAX_THREADS * 32];
        words = none;
        printf("  (no cuStreamWriteValue32: the written-word figures are "
               "left out)\n");
    }
    memset(words, 0, SUB_MAX_THREADS * 128);
    b.words = words;
    /* The ring's kind of memory: a memfd mapped shared, registered. */
    if (b.write32 != NULL && getenv("CUMOD_BENCH_MEMFD") != NULL) {
        int fd = memfd_create("cumod-bench-words", MFD_CLOEXEC);
        void *p = MAP_FAILED;
        if (fd >= 0 && ftruncate(fd, SUB_MAX_THREADS * 128) == 0)
            p = mmap(NULL, SUB_MAX_THREADS * 128, PROT_READ | PROT_WRITE,
                     MAP_SHARED, fd, 0);
        CUresult r =
            p == MAP_FAILED
                ? CUDA_ERROR_OUT_OF_MEMORY
                : b.drv.mem_host_register(p, SUB_MAX_THREADS * 128,
                                          CU_MEMHOSTREGISTER_DEVICEMAP |
                                              CU_MEMHOSTREGISTER_PORTABLE);
        printf("  words in a registered memfd mapping: cuMemHostRegister "
               "CUresult %d\n",
               (int)r);
        if (r == CUDA_SUCCESS)
            b.words = p;
    }
    double *rtt = malloc(SUB_SAMPLES * sizeof(double));
    printf("waited empty launches in one context (%.1f s a figure):\n", b.secs);
    sub_costs(&b);
    static const char *how[] = {"cuStreamSynchronize", "spin on cuEventQuery",
                                "spin on cuStreamQuery",
                                "spin on a written word"};
    for (int h = 0; h < (b.write32 != NULL ? 4 : 3); h++) {
        sub_fig f = sub_one(&b, h, rtt);
        printf("  one thread, %-22s p50 %6.1f p99 %6.1f us, %8.0f/s\n", how[h],
               f.p50, f.p99, f.rate);
        cumod__bench_recordf(f.p50, "submit_one_%d_p50_us", h);
    }
    static const int counts[] = {1, 2, 4, 8, 16, 32};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        sub_fig f = sub_threads(&b, counts[i], 0, rtt);
        sub_fig e = sub_threads(&b, counts[i], 1, rtt);
        sub_fig g = sub_today(&b, counts[i], 0, rtt);
        printf("  %2d: a thread each (launch, spin on cuStreamQuery) p50 %6.1f "
               "p99 %7.1f us, %8.0f/s | the same, an event each (record, "
               "spin on cuEventQuery) p50 %6.1f p99 %7.1f us, %8.0f/s | one "
               "submitter + one event poller p50 %6.1f p99 %7.1f us, "
               "%8.0f/s\n",
               counts[i], f.p50, f.p99, f.rate, e.p50, e.p99, e.rate, g.p50,
               g.p99, g.rate);
        cumod__bench_recordf(e.rate, "submit_threads_ev_%d_rate", counts[i]);
        cumod__bench_recordf(f.rate, "submit_threads_%d_rate", counts[i]);
        cumod__bench_recordf(f.p50, "submit_threads_%d_p50_us", counts[i]);
        cumod__bench_recordf(g.rate, "submit_today_%d_rate", counts[i]);
        cumod__bench_recordf(g.p50, "submit_today_%d_p50_us", counts[i]);
        if (b.write32 != NULL) {
            sub_fig w = sub_threads(&b, counts[i], 2, rtt);
            sub_fig x = sub_today(&b, counts[i], 1, rtt);
            printf("      written words: a thread each (launch, write, spin "
                   "on the word) p50 %6.1f p99 %7.1f us, %8.0f/s | one "
                   "submitter + one poller of the words p50 %6.1f p99 %7.1f "
                   "us, %8.0f/s\n",
                   w.p50, w.p99, w.rate, x.p50, x.p99, x.rate);
            cumod__bench_recordf(w.rate, "submit_threads_word_%d_rate",
                                 counts[i]);
            cumod__bench_recordf(w.p50, "submit_threads_word_%d_p50_us",
                                 counts[i]);
            cumod__bench_recordf(x.rate, "submit_today_word_%d_rate",
                                 counts[i]);
        }
        fflush(stdout);
    }
    free(rtt);
    return 0;
}
