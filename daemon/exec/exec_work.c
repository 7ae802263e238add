/*
 * The executor's data plane: device memory, shared segments, streams, and
 * work (launches, copies, memsets) enqueued on streams. The submission
 * thread (the executor's main thread) enqueues and records an event; the
 * completion thread polls the events of all work in flight and answers
 * each as it completes, in whatever order the streams finish: a long kernel
 * of one session never delays the answer to another's.
 *
 * Not cuLaunchHostFunc: measured at 26 us from launch to callback against
 * 11 us for an event poll (DESIGN.md).
 *
 * A fault that poisons the context (an illegal address and its kin) is
 * answered with its CUDA error name, and then the process exits: nothing
 * in it can succeed again, and the front starts a new executor.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "exec.h"
#include "log.h"

typedef struct work_pending {
    uint64_t seq;
    CUevent ev;
    void *read_buf; /* a READ item's bytes, sent with DONE */
    uint64_t read_len;
    struct work_pending *next;
} work_pending;

typedef struct stream_ent {
    uint64_t key;
    CUstream s;
    struct stream_ent *next;
} stream_ent;

#define WORK_NBUCKETS 1024

typedef struct cumod_exec_work {
    cumod_exec *ex;
    pthread_t thread;
    int started;
    /* The pending list and the event pool are shared by the two threads.
     * Lock order: mtx is a leaf; no driver call is made while holding it
     * except cuEventQuery (which does not block). */
    pthread_mutex_t mtx;
    pthread_cond_t cond;
    work_pending *head, *tail;
    CUevent *pool;
    size_t npool, cappool;
    int stop;
    /* Streams by key: the submission thread's own. */
    stream_ent *streams[WORK_NBUCKETS];
} cumod_exec_work;

static int
work_send_done(cumod_exec *ex, uint32_t op, uint64_t seq, int status,
               int failed, const char *msg, const void *data, uint64_t dlen)
{
    cumod_chan_hdr h = {.op = op, .seq = seq, .status = status};
    cumod_chan_done d = {.failed_index = failed};
    size_t mlen = msg ? strlen(msg) : 0;
    size_t total = sizeof(d) + mlen + dlen;
    char stackbuf[1024];
    char *buf = total <= sizeof(stackbuf) ? stackbuf : malloc(total);
    int rv;

    if (buf == NULL)
        return -ENOMEM;
    d.msg_len = (uint32_t)mlen;
    d.data_len = dlen;
    memcpy(buf, &d, sizeof(d));
    if (mlen)
        memcpy(buf + sizeof(d), msg, mlen);
    if (dlen)
        memcpy(buf + sizeof(d) + mlen, data, dlen);
    rv = cumod__chan_send_any(ex->chan, &h, buf, total);
    if (buf != stackbuf)
        free(buf);
    return rv;
}

/* A CUDA error that leaves the context unusable. */
static int
work_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
        return 1;
    default:
        return 0;
    }
}

/* The context is lost: say so, and let the front start a new executor. */
static void
work_poisoned(cumod_exec *ex, CUresult r)
{
    char name[64];
    CUMOD_LOGE("CUMOD-EXEC-FAULT",
               "%s: the CUDA context is lost; the executor exits so that a "
               "new one can serve",
               cumod__cu_name(&ex->drv, r, name, sizeof(name)));
    _exit(EX_SOFTWARE);
}

static void *
work_completions(void *arg)
{
    cumod_exec_work *w = arg;
    cumod_exec *ex = w->ex;
    const cumod_driver *d = &ex->drv;
    int idle = 0;

    /* The context is per thread: make it current here too. Its naps are
     * 20 us, not 20 us plus the default 50 us of timer slack. */
    (void)d->ctx_set_current(ex->ctx);
    (void)prctl(PR_SET_TIMERSLACK, 1UL);
    pthread_mutex_lock(&w->mtx);
    for (;;) {
        /* Idle: look again for a while before sleeping on the condition,
         * since work usually comes back to back and a condition wake-up
         * costs microseconds that a launch's round trip pays. */
        for (int spin = 0; w->head == NULL && !w->stop && spin < 2000; spin++) {
            pthread_mutex_unlock(&w->mtx);
            sched_yield();
            pthread_mutex_lock(&w->mtx);
        }
        while (w->head == NULL && !w->stop)
            pthread_cond_wait(&w->cond, &w->mtx);
        if (w->head == NULL && w->stop)
            break;
        /* One pass over everything in flight. */
        work_pending **pp = &w->head, *prev = NULL;
        int done_any = 0;
        while (*pp != NULL) {
            work_pending *p = *pp;
            CUresult r = d->event_query(p->ev);
            if (r == CUDA_ERROR_NOT_READY) {
                prev = p;
                pp = &p->next;
                continue;
            }
            *pp = p->next;
            if (w->tail == p)
                w->tail = prev;
            done_any = 1;
            pthread_mutex_unlock(&w->mtx);
            char msg[512] = "";
            int st = cumod__cu_err(d, r, "the work failed on the device", msg,
                                   sizeof(msg));
            (void)work_send_done(ex, CUMOD_CHAN_DONE, p->seq, st, -1,
                                 st ? msg : NULL, p->read_buf,
                                 st ? 0 : p->read_len);
            if (work_sticky(r))
                work_poisoned(ex, r);
            free(p->read_buf);
            pthread_mutex_lock(&w->mtx);
            if (w->npool < w->cappool)
                w->pool[w->npool++] = p->ev;
            else
                (void)d->event_destroy(p->ev);
            free(p);
        }
        if (done_any) {
            idle = 0;
            continue;
        }
        /* Nothing finished: spin a little (completions of short kernels
         * come within microseconds), then back off to 20 us naps. */
        pthread_mutex_unlock(&w->mtx);
        if (++idle < 200) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&w->mtx);
    }
    pthread_mutex_unlock(&w->mtx);
    return NULL;
}

int
cumod__exec_work_start(cumod_exec *ex)
{
    cumod_exec_work *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return -1;
    w->ex = ex;
    w->cappool = 4096;
    if ((w->pool = calloc(w->cappool, sizeof(CUevent))) == NULL) {
        free(w);
        return -1;
    }
    pthread_mutex_init(&w->mtx, NULL);
    pthread_cond_init(&w->cond, NULL);
    if (pthread_create(&w->thread, NULL, work_completions, w) != 0) {
        free(w->pool);
        free(w);
        return -1;
    }
    w->started = 1;
    ex->work = w;
    return 0;
}

void
cumod__exec_work_stop(cumod_exec *ex)
{
    cumod_exec_work *w = ex->work;
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mtx);
    w->stop = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mtx);
    if (w->started)
        pthread_join(w->thread, NULL);
    for (size_t i = 0; i < w->npool; i++)
        (void)ex->drv.event_destroy(w->pool[i]);
    for (size_t b = 0; b < WORK_NBUCKETS; b++) {
        stream_ent *e = w->streams[b];
        while (e != NULL) {
            stream_ent *next = e->next;
            (void)ex->drv.stream_destroy(e->s);
            free(e);
            e = next;
        }
    }
    pthread_mutex_destroy(&w->mtx);
    pthread_cond_destroy(&w->cond);
    free(w->pool);
    free(w);
    ex->work = NULL;
}

static stream_ent **
work_stream_slot(cumod_exec_work *w, uint64_t key)
{
    stream_ent **pp = &w->streams[(key * 0x9E3779B97F4A7C15ull) >> 54];
    while (*pp != NULL && (*pp)->key != key)
        pp = &(*pp)->next;
    return pp;
}

/* The stream of key, created non-blocking on first use. */
static CUresult
work_stream(cumod_exec_work *w, uint64_t key, CUstream *out)
{
    stream_ent **pp = work_stream_slot(w, key);
    CUresult r;

    if (*pp == NULL) {
        stream_ent *e = calloc(1, sizeof(*e));
        if (e == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        if ((r = w->ex->drv.stream_create(&e->s, CU_STREAM_NON_BLOCKING)) !=
            CUDA_SUCCESS) {
            free(e);
            return r;
        }
        e->key = key;
        *pp = e;
    }
    *out = (*pp)->s;
    return CUDA_SUCCESS;
}

static void
work_stream_destroy(cumod_exec_work *w, uint64_t key)
{
    stream_ent **pp = work_stream_slot(w, key);
    if (*pp == NULL)
        return;
    stream_ent *e = *pp;
    *pp = e->next;
    /* Waits for the stream's work: destroy would not, and a session's
     * buffers are freed right after. */
    (void)w->ex->drv.stream_synchronize(e->s);
    (void)w->ex->drv.stream_destroy(e->s);
    free(e);
}

static CUresult
work_event(cumod_exec_work *w, CUevent *out)
{
    CUevent ev = NULL;
    pthread_mutex_lock(&w->mtx);
    if (w->npool > 0)
        ev = w->pool[--w->npool];
    pthread_mutex_unlock(&w->mtx);
    if (ev == NULL) {
        CUresult r = w->ex->drv.event_create(&ev, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS)
            return r;
    }
    *out = ev;
    return CUDA_SUCCESS;
}

/* Enqueues one item on s. */
static CUresult
work_item(cumod_exec *ex, const cumod_work_item *it, const char *extra,
          CUstream s, void **read_buf, char *what, size_t whatlen)
{
    const cumod_driver *d = &ex->drv;

    switch (it->op) {
    case CUMOD_WORK_LAUNCH: {
        cumod_exec_module *m = cumod__exec_module(ex, it->a);
        if (m == NULL || it->b >= m->nfunc) {
            snprintf(what, whatlen, "the kernel's module is not loaded");
            return CUDA_ERROR_INVALID_HANDLE;
        }
        uint32_t np = m->nparams[it->b];
        void *stackp[64];
        void **params = np <= 64 ? stackp : calloc(np, sizeof(void *));
        if (params == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        for (uint32_t i = 0; i < np; i++)
            params[i] = (void *)(extra + m->param_off[it->b][i]);
        snprintf(what, whatlen, "cuLaunchKernel");
        CUresult r = d->launch_kernel(m->funcs[it->b], it->grid[0], it->grid[1],
                                      it->grid[2], it->block[0], it->block[1],
                                      it->block[2], it->shmem, s,
                                      np ? params : NULL, NULL);
        if (params != stackp)
            free(params);
        return r;
    }
    case CUMOD_WORK_HTOD:
        snprintf(what, whatlen, "cuMemcpyHtoDAsync");
        return d->memcpy_htod_async((CUdeviceptr)it->a,
                                    (const void *)(uintptr_t)it->b, it->c, s);
    case CUMOD_WORK_DTOH:
        snprintf(what, whatlen, "cuMemcpyDtoHAsync");
        return d->memcpy_dtoh_async((void *)(uintptr_t)it->a,
                                    (CUdeviceptr)it->b, it->c, s);
    case CUMOD_WORK_DTOD:
        snprintf(what, whatlen, "cuMemcpyDtoDAsync");
        return d->memcpy_dtod_async((CUdeviceptr)it->a, (CUdeviceptr)it->b,
                                    it->c, s);
    case CUMOD_WORK_MEMSET:
        snprintf(what, whatlen, "cuMemsetD8Async");
        return d->memset_d8_async((CUdeviceptr)it->a, (unsigned char)it->b,
                                  it->c, s);
    case CUMOD_WORK_WRITE:
        /* From pageable memory: the driver stages the bytes before it
         * returns, so the packet buffer may be reused at once. */
        snprintf(what, whatlen, "cuMemcpyHtoDAsync");
        return d->memcpy_htod_async((CUdeviceptr)it->a, extra, it->c, s);
    case CUMOD_WORK_READ:
        if ((*read_buf = malloc(it->c ? it->c : 1)) == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        snprintf(what, whatlen, "cuMemcpyDtoHAsync");
        return d->memcpy_dtoh_async(*read_buf, (CUdeviceptr)it->b, it->c, s);
    default:
        snprintf(what, whatlen, "unknown work item %u", it->op);
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static int
work_on_work(cumod_exec *ex, const cumod_chan_hdr *hdr, const char *p,
             size_t len)
{
    cumod_exec_work *w = ex->work;
    cumod_chan_work cw;
    CUstream s;
    CUresult r;
    void *read_buf = NULL;
    uint64_t read_len = 0;
    char what[128] = "", msg[512];
    uint32_t i = 0;

    if (len < sizeof(cw))
        return work_send_done(ex, CUMOD_CHAN_DONE, hdr->seq, CUMOD_EPROTO, -1,
                              "malformed work", NULL, 0);
    memcpy(&cw, p, sizeof(cw));
    size_t at = sizeof(cw);
    if ((r = work_stream(w, cw.stream, &s)) != CUDA_SUCCESS) {
        snprintf(what, sizeof(what), "cuStreamCreate");
        goto fail;
    }
    for (i = 0; i < cw.nitems; i++) {
        cumod_work_item it;
        if (len - at < sizeof(it)) {
            r = CUDA_ERROR_INVALID_VALUE;
            snprintf(what, sizeof(what), "truncated work");
            goto fail;
        }
        memcpy(&it, p + at, sizeof(it));
        at += sizeof(it);
        size_t pad = ((size_t)it.extra + 7) & ~(size_t)7;
        if (len - at < pad) {
            r = CUDA_ERROR_INVALID_VALUE;
            snprintf(what, sizeof(what), "truncated work");
            goto fail;
        }
        if (it.op == CUMOD_WORK_READ)
            read_len = it.c;
        r = work_item(ex, &it, p + at, s, &read_buf, what, sizeof(what));
        at += pad;
        if (r != CUDA_SUCCESS)
            goto fail;
    }
    CUevent ev = NULL;
    work_pending *pend = NULL;
    if ((r = work_event(w, &ev)) != CUDA_SUCCESS ||
        (pend = calloc(1, sizeof(*pend))) == NULL ||
        (r = ex->drv.event_record(ev, s)) != CUDA_SUCCESS) {
        free(pend);
        r = r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
        snprintf(what, sizeof(what), ev ? "cuEventRecord" : "cuEventCreate");
        i = (uint32_t)-1;
        goto fail;
    }
    pend->seq = hdr->seq;
    pend->ev = ev;
    pend->read_buf = read_buf;
    pend->read_len = read_len;
    pthread_mutex_lock(&w->mtx);
    if (w->tail)
        w->tail->next = pend;
    else
        w->head = pend;
    w->tail = pend;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mtx);
    return 0;

fail:
    free(read_buf);
    {
        char w2[200];
        snprintf(w2, sizeof(w2), "%s failed", what);
        int st = cumod__cu_err(&ex->drv, r, w2, msg, sizeof(msg));
        int rv = work_send_done(ex, CUMOD_CHAN_DONE, hdr->seq, st,
                                i == (uint32_t)-1 ? -1 : (int)i, msg, NULL, 0);
        if (work_sticky(r))
            work_poisoned(ex, r);
        return rv;
    }
}

int
cumod__exec_on_data(cumod_exec *ex, const cumod_chan_hdr *hdr, const void *buf,
                    size_t n, int fd)
{
    cumod_chan_payload pl;
    cumod_chan_hdr h = {.op = hdr->op, .seq = hdr->seq};
    const cumod_driver *d = &ex->drv;
    char msg[256];
    int rv;

    /* A memfd payload (a big write) comes as the packet's descriptor. */
    int seg_fd = hdr->op == CUMOD_CHAN_SEG_MAP ? fd : -1;
    if ((rv = cumod__chan_payload(buf, n, seg_fd >= 0 ? -1 : fd, &pl)) != 0) {
        if (fd >= 0)
            close(fd);
        h.status = CUMOD_EPROTO;
        return cumod__chan_send(ex->chan, &h, NULL, 0, -1);
    }
    if (!(hdr->flags & CUMOD_CHAN_F_MEMFD) && fd >= 0 && seg_fd < 0)
        close(fd);
    const char *p = pl.data;
    size_t len = pl.len;

    switch (hdr->op) {
    case CUMOD_CHAN_WORK:
        rv = work_on_work(ex, hdr, p, len);
        break;
    case CUMOD_CHAN_ALLOC: {
        cumod_chan_alloc a = {0};
        CUdeviceptr dp = 0;
        if (len >= sizeof(a))
            memcpy(&a, p, sizeof(a));
        h.status = cumod__cu_err(d, d->mem_alloc(&dp, a.size ? a.size : 1),
                                 "cuMemAlloc", msg, sizeof(msg));
        a.dptr = dp;
        rv = cumod__chan_send(ex->chan, &h, &a, sizeof(a), -1);
        break;
    }
    case CUMOD_CHAN_FREE: {
        cumod_chan_free f = {0};
        if (len >= sizeof(f))
            memcpy(&f, p, sizeof(f));
        h.status = cumod__cu_err(d, d->mem_free((CUdeviceptr)f.dptr),
                                 "cuMemFree", msg, sizeof(msg));
        rv = cumod__chan_send(ex->chan, &h, NULL, 0, -1);
        break;
    }
    case CUMOD_CHAN_SEG_MAP: {
        cumod_chan_segment sg = {0};
        if (len >= sizeof(sg))
            memcpy(&sg, p, sizeof(sg));
        void *m = seg_fd >= 0 && sg.size
                      ? mmap(NULL, sg.size, PROT_READ | PROT_WRITE, MAP_SHARED,
                             seg_fd, 0)
                      : MAP_FAILED;
        if (seg_fd >= 0)
            close(seg_fd);
        if (m == MAP_FAILED) {
            h.status = CUMOD_EINVAL;
        } else {
            CUresult r = d->mem_host_register(m, sg.size, 0);
            h.status =
                cumod__cu_err(d, r, "cuMemHostRegister", msg, sizeof(msg));
            if (h.status != CUMOD_OK)
                munmap(m, sg.size);
            else
                sg.host = (uint64_t)(uintptr_t)m;
        }
        rv = cumod__chan_send(ex->chan, &h, &sg, sizeof(sg), -1);
        break;
    }
    case CUMOD_CHAN_SEG_UNMAP: {
        cumod_chan_segment sg = {0};
        if (len >= sizeof(sg))
            memcpy(&sg, p, sizeof(sg));
        void *m = (void *)(uintptr_t)sg.host;
        /* Copies in flight from it complete first: the front unmaps only
         * segments with nothing in flight, and unregister syncs. */
        (void)d->mem_host_unregister(m);
        munmap(m, sg.size);
        rv = cumod__chan_send(ex->chan, &h, NULL, 0, -1);
        break;
    }
    case CUMOD_CHAN_STREAM_DESTROY:
    case CUMOD_CHAN_STREAMS_CLOSE: {
        cumod_chan_stream st = {0};
        if (len >= sizeof(st))
            memcpy(&st, p, sizeof(st));
        if (hdr->op == CUMOD_CHAN_STREAM_DESTROY) {
            work_stream_destroy(ex->work, st.key);
        } else {
            for (uint64_t i = 0;
                 i < st.count && sizeof(st) + (i + 1) * 8 <= len; i++) {
                uint64_t k;
                memcpy(&k, p + sizeof(st) + i * 8, 8);
                work_stream_destroy(ex->work, k);
            }
        }
        rv = cumod__chan_send(ex->chan, &h, NULL, 0, -1);
        break;
    }
    default:
        rv = -EPROTO;
        break;
    }
    cumod__chan_payload_fini(&pl);
    return rv;
}
