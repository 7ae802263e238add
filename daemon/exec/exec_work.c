/*
 * The executor's streams and work (launches, copies, memsets) enqueued on
 * them. The submission thread (the executor's main thread) enqueues and
 * records an event; the completion thread polls the events of all work in
 * flight and answers each as it completes, in whatever order the streams
 * finish: a long kernel of one session never delays the answer to
 * another's.
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
#include <sys/socket.h>
#include <sys/uio.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "exec.h"
#include "idmap.h"
#include "list.h"
#include "log.h"
#include "shmguard.h"

typedef struct work_pending {
    cumod_list_node link;
    uint64_t order; /* w->added when it was appended */
    CUevent ev;
    void *read_buf; /* a READ item's bytes, sent with DONE */
    uint64_t read_len;
    CUstream stream;   /* its events complete in order */
    uint64_t start_ns; /* CLOCK_MONOTONIC when its first WORK came */
    uint32_t nseq;     /* the WORKs the event answers, in stream order */
    uint64_t seq[];
} work_pending;

/* WORKs of one stream enqueued back to back, whose event is not recorded
 * yet (CUMOD_CHAN_WORK_F_GROUP): one event answers them all. A group
 * closes when it is full, when the stream gets work that is not grouped,
 * before any other command, and as soon as the submission thread finds
 * nothing more to read: so grouping happens only while commands queue up
 * (the submission thread is the bottleneck), and an idle executor answers
 * each launch as before. Measured on the H100: an event record, its
 * queries and its answer cost as much as the launch they follow. */
#define GROUP_MAX 64
/* ...and when it is this old: a client waiting on a grouped launch must
 * not wait on another client that keeps the submission thread busy (its
 * commands would otherwise keep the group open for as long as they come).
 * About a full group's enqueueing time on the H100. */
#define GROUP_AGE_NS 200000
/* How long the completion thread polls after the last progress. */
#define WORK_POLL_NS 2000000
/* Work of this many items is timed at debug level: in all, and in
 * cuLaunchKernel (the submission thread's). */
#define WORK_TIMED_ITEMS 64
#define GROUPS 8

typedef struct work_group {
    CUstream s;
    uint32_t n;
    uint64_t opened_ns; /* CLOCK_MONOTONIC when its first WORK came */
    uint64_t seq[GROUP_MAX];
} work_group;

/* Completions that say nothing but "done" (seq and device time), sent in
 * one CUMOD_CHAN_DONE_MANY packet per pass of the completion thread. */
#define DONE_MANY_MAX 2048

typedef struct cumod_exec_work {
    cumod_exec *ex;
    pthread_t thread;
    int started;
    /* The pending list and the event pool are shared by the two threads.
     * Lock order: mtx is a leaf; no driver call is made while holding it
     * except cuEventQuery (which does not block). */
    pthread_mutex_t mtx;
    pthread_cond_t cond;
    pthread_cond_t idle; /* broadcast when nothing is left in flight */
    cumod_list pending;  /* work_pending, in submission order */
    uint64_t added;      /* work appended so far: new work resets the naps */
    uint64_t kicks;      /* reclaim operations queued so far: likewise */
    CUevent *pool;
    size_t npool, cappool;
    int stop;
    cumod_chan_done_one many[DONE_MANY_MAX]; /* the completion thread's */
    uint32_t nmany;
    /* Device time, from completion timestamps (the completion thread's):
     * a pending's work ran from when it was submitted, or from when the
     * work before it on its stream was seen complete if later, until its
     * own event is seen complete. No driver call: cuEventElapsedTime
     * would need timing events and a start event recorded per pending on
     * the submission thread (README, Metrics). CUstream -> the
     * last completion seen on it, in ns (never 0). */
    cumod_idmap last_done;
    work_group groups[GROUPS]; /* the submission thread's */
    uint32_t ngroups;
    /* The WORK being timed (debug level only) and its time so far in
     * cuLaunchKernel: the submission thread's. */
    int timing;
    uint64_t timing_ns;
} cumod_exec_work;

int
cumod__exec_send_done(cumod_exec *ex, uint64_t seq, int status, int failed,
                      const char *msg, const void *data, uint64_t dlen)
{
    return cumod__exec_send_done_ns(ex, seq, status, failed, msg, data, dlen,
                                    0);
}

int
cumod__exec_send_done_ns(cumod_exec *ex, uint64_t seq, int status, int failed,
                         const char *msg, const void *data, uint64_t dlen,
                         uint64_t gpu_ns)
{
    cumod_chan_hdr h = {.op = CUMOD_CHAN_DONE, .seq = seq, .status = status};
    cumod_chan_done d = {.failed_index = failed, .gpu_ns = gpu_ns};
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

static void
done_flush(cumod_exec *ex, cumod_exec_work *w)
{
    if (w->nmany == 0)
        return;
    cumod_chan_hdr h = {.op = CUMOD_CHAN_DONE_MANY};
    (void)cumod__chan_send_any(ex->chan, &h, w->many,
                               w->nmany * sizeof(w->many[0]));
    w->nmany = 0; /* a send that failed: the front is gone */
}

static void
done_add(cumod_exec *ex, cumod_exec_work *w, uint64_t seq, uint64_t gpu_ns)
{
    if (w->nmany == DONE_MANY_MAX)
        done_flush(ex, w);
    w->many[w->nmany++] = (cumod_chan_done_one){seq, gpu_ns};
}

/* The device time of p, seen complete at now (see last_done), split evenly
 * among the WORKs its event answers (a group's: one event, one figure). */
static uint64_t
work_gpu_ns(cumod_exec_work *w, const work_pending *p, uint64_t now)
{
    uint64_t key = (uint64_t)(uintptr_t)p->stream;
    uint64_t prev = (uint64_t)(uintptr_t)cumod__idmap_get(&w->last_done, key);
    uint64_t from = prev > p->start_ns ? prev : p->start_ns;
    /* A failed set only costs the next figure its overlap. */
    (void)cumod__idmap_set(&w->last_done, key, (void *)(uintptr_t)now);
    return now > from ? (now - from) / (p->nseq ? p->nseq : 1) : 0;
}

void
cumod__exec_context_lost(cumod_exec *ex, CUresult r)
{
    char name[64];
    cumod_chan_hdr h = {.op = CUMOD_CHAN_FAULT, .status = CUMOD_ECTXLOST};
    cumod_chan_error e = {.code = CUMOD_ECTXLOST};

    CUMOD_LOGE("CUMOD-EXEC-FAULT",
               "%s: the CUDA context is lost; the executor exits so that a "
               "new one can serve",
               cumod__cu_name(&ex->drv, r, name, sizeof(name)));
    /* The front hears it before the exit, whichever call met it first (a
     * launch's completion, a submission, an allocation, a load). */
    (void)cumod__cu_err(&ex->drv, r, "the CUDA context is lost", e.message,
                        sizeof(e.message));
    (void)cumod__chan_send_any(ex->chan, &h, &e, sizeof(e));
    _exit(EX_SOFTWARE);
}

static void *
work_completions(void *arg)
{
    cumod_exec_work *w = arg;
    cumod_exec *ex = w->ex;
    const cumod_driver *d = &ex->drv;
    uint64_t seen = 0;
    struct timespec since;

    clock_gettime(CLOCK_MONOTONIC, &since);
    /* The context is per thread: make it current here too. Its naps are
     * 20 us, not 20 us plus the default 50 us of timer slack. */
    (void)d->ctx_set_current(ex->ctx);
    (void)prctl(PR_SET_TIMERSLACK, 1UL);
    pthread_mutex_lock(&w->mtx);
    for (;;) {
        /* Idle: look again for a while before sleeping on the condition,
         * since work usually comes back to back and a condition wake-up
         * costs microseconds that a launch's round trip pays. */
        for (int spin = 0; cumod__list_empty(&w->pending) && !w->stop &&
                           !cumod__exec_reclaim_pending(ex) && spin < 2000;
             spin++) {
            pthread_mutex_unlock(&w->mtx);
            sched_yield();
            pthread_mutex_lock(&w->mtx);
        }
        while (cumod__list_empty(&w->pending) && !w->stop &&
               !cumod__exec_reclaim_pending(ex))
            pthread_cond_wait(&w->cond, &w->mtx);
        if (cumod__list_empty(&w->pending) && w->stop)
            break;
        /* One pass over everything in flight. A stream's work completes
         * in order: past its first unfinished event, its later ones are
         * not asked (with thousands in flight, asking each was the
         * pass's whole cost). */
        int done_any = 0;
        uint64_t now_ns = 0; /* read at the pass's first completion */
        CUstream busy[8];
        unsigned nbusy = 0;
        CUMOD_LIST_FOREACH_SAFE(&w->pending, n)
        {
            work_pending *p = CUMOD_CONTAINER_OF(n, work_pending, link);
            int skip = 0;
            for (unsigned i = 0; i < nbusy && !skip; i++)
                skip = busy[i] == p->stream;
            if (skip)
                continue;
            CUresult r = d->event_query(p->ev);
            if (r == CUDA_ERROR_NOT_READY) {
                if (nbusy < sizeof(busy) / sizeof(busy[0]))
                    busy[nbusy++] = p->stream;
                continue;
            }
            cumod__list_remove(n);
            done_any = 1;
            pthread_mutex_unlock(&w->mtx);
            if (now_ns == 0)
                now_ns = cumod__mono_ns();
            uint64_t gpu_ns = work_gpu_ns(w, p, now_ns);
            if (r == CUDA_SUCCESS && p->read_len == 0) {
                for (uint32_t i = 0; i < p->nseq; i++)
                    done_add(ex, w, p->seq[i], gpu_ns);
            } else {
                char msg[512] = "";
                int st = cumod__cu_err(d, r, "the work failed on the device",
                                       msg, sizeof(msg));
                done_flush(ex, w); /* in order */
                for (uint32_t i = 0; i < p->nseq; i++)
                    (void)cumod__exec_send_done_ns(
                        ex, p->seq[i], st, -1, st ? msg : NULL, p->read_buf,
                        st ? 0 : p->read_len, gpu_ns);
            }
            if (cumod__cu_context_lost(r))
                cumod__exec_context_lost(ex, r);
            if (!cumod__exec_pinned_put(ex, p->read_buf))
                free(p->read_buf);
            pthread_mutex_lock(&w->mtx);
            if (w->npool < w->cappool)
                w->pool[w->npool++] = p->ev;
            else
                (void)d->event_destroy(p->ev);
            free(p);
        }
        done_flush(ex, w);
        if (done_any)
            pthread_cond_broadcast(&w->idle); /* cumod__exec_wait_quiet */
        /* What sessions gave back, once the work before it is done. */
        pthread_mutex_unlock(&w->mtx);
        done_any |= cumod__exec_reclaim_poll(ex);
        pthread_mutex_lock(&w->mtx);
        if (done_any || w->added + w->kicks != seen) {
            seen = w->added + w->kicks;
            clock_gettime(CLOCK_MONOTONIC, &since);
            continue;
        }
        /* Nothing finished: poll for 2 ms since the last progress (a batch
         * of short kernels completes within that; measured on the H100, a
         * nap's wake-up added 50-90 us to a 1.1 ms batch of 256 launches
         * answered when complete), then nap: 20 us until 5 ms, 200 us
         * until 100 ms, then 1 ms, so that a long kernel does not cost a
         * core of polling. New work ends a nap at once (it signals the
         * condition) and starts the polling again. */
        struct timespec now, until;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t quiet_ns = (int64_t)(now.tv_sec - since.tv_sec) * 1000000000 +
                           (now.tv_nsec - since.tv_nsec);
        if (quiet_ns < WORK_POLL_NS) {
            pthread_mutex_unlock(&w->mtx);
            sched_yield();
            pthread_mutex_lock(&w->mtx);
            continue;
        }
        long nap_ns = quiet_ns < 5000000     ? 20000
                      : quiet_ns < 100000000 ? 200000
                                             : 1000000;
        until = now;
        until.tv_nsec += nap_ns;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&w->cond, &w->mtx, &until);
    }
    pthread_mutex_unlock(&w->mtx);
    return NULL;
}

cumod_err
cumod__exec_work_start(cumod_exec *ex)
{
    cumod_exec_work *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return CUMOD_ENOMEM;
    w->ex = ex;
    cumod__list_init(&w->pending);
    cumod__idmap_init(&w->last_done);
    w->cappool = 4096;
    if ((w->pool = calloc(w->cappool, sizeof(CUevent))) == NULL) {
        cumod__idmap_fini(&w->last_done);
        free(w);
        return CUMOD_ENOMEM;
    }
    pthread_condattr_t ca;
    pthread_mutex_init(&w->mtx, NULL);
    /* Naps are timed waits on the condition, by the monotonic clock. */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&w->idle, NULL);
    if (pthread_create(&w->thread, NULL, work_completions, w) != 0) {
        cumod__idmap_fini(&w->last_done);
        free(w->pool);
        free(w);
        return CUMOD_ENOMEM;
    }
    w->started = 1;
    ex->work = w;
    return CUMOD_OK;
}

void
cumod__exec_work_stop(cumod_exec *ex)
{
    cumod_exec_work *w = ex->work;
    if (w == NULL)
        return;
    (void)cumod__exec_work_flush(ex);
    pthread_mutex_lock(&w->mtx);
    w->stop = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mtx);
    if (w->started)
        pthread_join(w->thread, NULL);
    for (size_t i = 0; i < w->npool; i++)
        (void)ex->drv.event_destroy(w->pool[i]);
    pthread_mutex_destroy(&w->mtx);
    pthread_cond_destroy(&w->cond);
    pthread_cond_destroy(&w->idle);
    cumod__idmap_fini(&w->last_done);
    free(w->pool);
    free(w);
    ex->work = NULL;
}

void
cumod__exec_work_kick(cumod_exec *ex)
{
    cumod_exec_work *w = ex->work;
    pthread_mutex_lock(&w->mtx);
    w->kicks++;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mtx);
}

CUresult
cumod__exec_event_get(cumod_exec *ex, CUevent *out)
{
    cumod_exec_work *w = ex->work;
    CUevent ev = NULL;
    pthread_mutex_lock(&w->mtx);
    if (w->npool > 0)
        ev = w->pool[--w->npool];
    pthread_mutex_unlock(&w->mtx);
    if (ev == NULL) {
        CUresult r = ex->drv.event_create(&ev, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS)
            return r;
    }
    *out = ev;
    return CUDA_SUCCESS;
}

void
cumod__exec_event_put(cumod_exec *ex, CUevent ev)
{
    cumod_exec_work *w = ex->work;
    pthread_mutex_lock(&w->mtx);
    if (w->npool < w->cappool) {
        w->pool[w->npool++] = ev;
        ev = NULL;
    }
    pthread_mutex_unlock(&w->mtx);
    if (ev != NULL)
        (void)ex->drv.event_destroy(ev);
}

int
cumod__exec_wait_quiet(cumod_exec *ex, const char *what)
{
    cumod_exec_work *w = ex->work;
    struct timespec until;
    uint64_t mark;
    int waited = 0, logged = 0;

    pthread_mutex_lock(&w->mtx);
    mark = w->added;
    for (;;) {
        cumod_list_node *n = cumod__list_first(&w->pending);
        if (n == NULL || w->stop ||
            CUMOD_CONTAINER_OF(n, work_pending, link)->order > mark)
            break;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&w->idle, &w->mtx, &until) != 0 &&
            (waited += 100) >= 1000 && !logged) {
            logged = 1;
            pthread_mutex_unlock(&w->mtx);
            CUMOD_LOGI("CUMOD-EXEC-QUIET",
                       "%s waits for kernels that have run for over 1 s to "
                       "end: done now, it would hold every launch until "
                       "they do",
                       what);
            pthread_mutex_lock(&w->mtx);
        }
    }
    pthread_mutex_unlock(&w->mtx);
    return waited;
}

/* What a launch needs set on its function first, on this thread (the one
 * that makes every launch, so no launch of the function races it): more
 * dynamic shared memory than the function allows so far, another
 * carveout, non-portable cluster sizes; and a cooperative launch's grid
 * checked against what can be resident at once. */
static CUresult
work_launch_setup(cumod_exec *ex, cumod_exec_module *m,
                  const cumod_work_item *it, char *what, size_t whatlen)
{
    const cumod_driver *d = &ex->drv;
    CUfunction f = m->funcs[it->b];
    uint32_t i = (uint32_t)it->b;
    CUresult r;

    if ((int64_t)it->shmem > m->dyn_max[i]) {
        snprintf(what, whatlen,
                 "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, %u)",
                 it->shmem);
        r = d->func_set_attribute(
            f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)it->shmem);
        if (r != CUDA_SUCCESS)
            return r;
        m->dyn_max[i] = (int32_t)it->shmem;
    }
    if ((it->flags & CUMOD_WORK_F_CARVEOUT) && m->carveout[i] != it->carveout) {
        snprintf(what, whatlen,
                 "cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT, %d)",
                 it->carveout);
        r = d->func_set_attribute(
            f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            it->carveout);
        if (r != CUDA_SUCCESS)
            return r;
        m->carveout[i] = it->carveout;
    }
    uint64_t csize = (uint64_t)it->cluster[0] * it->cluster[1] * it->cluster[2];
    if (csize > 8 && !m->nonportable[i]) {
        snprintf(what, whatlen,
                 "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED) for a "
                 "cluster of %llu blocks",
                 (unsigned long long)csize);
        r = d->func_set_attribute(
            f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
        if (r != CUDA_SUCCESS)
            return r;
        m->nonportable[i] = 1;
    }
    if (it->flags & CUMOD_WORK_F_COOPERATIVE) {
        int per_sm = 0;
        int threads = (int)(it->block[0] * it->block[1] * it->block[2]);
        r = d->occupancy_max_active_blocks(&per_sm, f, threads, it->shmem);
        if (r != CUDA_SUCCESS) {
            snprintf(what, whatlen,
                     "cuOccupancyMaxActiveBlocksPerMultiprocessor");
            return r;
        }
        uint64_t blocks = (uint64_t)it->grid[0] * it->grid[1] * it->grid[2];
        uint64_t most = (uint64_t)per_sm * ex->multiprocessors;
        if (blocks > most) {
            snprintf(what, whatlen,
                     "a cooperative launch of %llu blocks (at most %llu can "
                     "be resident at once: %d per multiprocessor x %u, by "
                     "cuOccupancyMaxActiveBlocksPerMultiprocessor for %d "
                     "threads and %u bytes of dynamic shared memory)",
                     (unsigned long long)blocks, (unsigned long long)most,
                     per_sm, ex->multiprocessors, threads, it->shmem);
            return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
        }
    }
    return CUDA_SUCCESS;
}

/* Enqueues one item on s. On failure, what says what failed: the call's
 * name in *name (set on success too: formatting it for every launch cost
 * more than the check), or the whole sentence in what. */
static CUresult
work_item(cumod_exec *ex, const cumod_work_item *it, const char *extra,
          CUstream s, void **read_buf, char *what, size_t whatlen,
          const char **name)
{
    const cumod_driver *d = &ex->drv;

    switch (it->op) {
    case CUMOD_WORK_LAUNCH: {
        cumod_exec_module *m = cumod__exec_module(ex, it->a);
        if (m == NULL || it->b >= m->nfunc) {
            snprintf(what, whatlen, "the kernel's module is not loaded");
            return CUDA_ERROR_INVALID_HANDLE;
        }
        CUresult r = work_launch_setup(ex, m, it, what, whatlen);
        if (r != CUDA_SUCCESS)
            return r;
        uint32_t np = m->nparams[it->b];
        void *stackp[64];
        void **params = np <= 64 ? stackp : calloc(np, sizeof(void *));
        if (params == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        for (uint32_t i = 0; i < np; i++)
            params[i] = (void *)(extra + m->param_off[it->b][i]);
        if (it->cluster[0] == 0 && !(it->flags & CUMOD_WORK_F_COOPERATIVE)) {
            struct timespec l0, l1;
            *name = "cuLaunchKernel";
            int timed = ex->work->timing;
            if (timed)
                clock_gettime(CLOCK_MONOTONIC, &l0);
            r = d->launch_kernel(m->funcs[it->b], it->grid[0], it->grid[1],
                                 it->grid[2], it->block[0], it->block[1],
                                 it->block[2], it->shmem, s, np ? params : NULL,
                                 NULL);
            if (timed) {
                clock_gettime(CLOCK_MONOTONIC, &l1);
                ex->work->timing_ns +=
                    (uint64_t)((l1.tv_sec - l0.tv_sec) * 1000000000L +
                               (l1.tv_nsec - l0.tv_nsec));
            }
        } else {
            /* Clusters and cooperative launches need cuLaunchKernelEx;
             * the plain path stays on cuLaunchKernel. */
            CUlaunchAttribute at[2];
            unsigned na = 0;
            if (it->cluster[0] != 0) {
                at[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
                at[na].value.clusterDim.x = it->cluster[0];
                at[na].value.clusterDim.y = it->cluster[1];
                at[na].value.clusterDim.z = it->cluster[2];
                na++;
            }
            if (it->flags & CUMOD_WORK_F_COOPERATIVE) {
                at[na].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
                at[na].value.cooperative = 1;
                na++;
            }
            CUlaunchConfig cfg = {
                .gridDimX = it->grid[0],
                .gridDimY = it->grid[1],
                .gridDimZ = it->grid[2],
                .blockDimX = it->block[0],
                .blockDimY = it->block[1],
                .blockDimZ = it->block[2],
                .sharedMemBytes = it->shmem,
                .hStream = s,
                .attrs = at,
                .numAttrs = na,
            };
            *name = "cuLaunchKernelEx";
            r = d->launch_kernel_ex(&cfg, m->funcs[it->b], np ? params : NULL,
                                    NULL);
        }
        if (params != stackp)
            free(params);
        return r;
    }
    case CUMOD_WORK_HTOD:
        *name = "cuMemcpyHtoDAsync";
        return d->memcpy_htod_async((CUdeviceptr)it->a,
                                    (const void *)(uintptr_t)it->b, it->c, s);
    case CUMOD_WORK_DTOH:
        *name = "cuMemcpyDtoHAsync";
        return d->memcpy_dtoh_async((void *)(uintptr_t)it->a,
                                    (CUdeviceptr)it->b, it->c, s);
    case CUMOD_WORK_DTOD:
        *name = "cuMemcpyDtoDAsync";
        return d->memcpy_dtod_async((CUdeviceptr)it->a, (CUdeviceptr)it->b,
                                    it->c, s);
    case CUMOD_WORK_MEMSET:
        *name = "cuMemsetD8Async";
        return d->memset_d8_async((CUdeviceptr)it->a, (unsigned char)it->b,
                                  it->c, s);
    case CUMOD_WORK_WRITE:
        /* From pageable memory: the driver stages the bytes before it
         * returns, so the packet buffer may be reused at once. */
        *name = "cuMemcpyHtoDAsync";
        return d->memcpy_htod_async((CUdeviceptr)it->a, extra, it->c, s);
    case CUMOD_WORK_READ:
        /* Pinned: a copy into pageable memory would hold this thread
         * until the stream reaches it (pinned.c). */
        if ((*read_buf = cumod__exec_pinned_get(ex, it->c ? it->c : 1)) ==
                NULL &&
            (*read_buf = malloc(it->c ? it->c : 1)) == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        *name = "cuMemcpyDtoHAsync";
        return d->memcpy_dtoh_async(*read_buf, (CUdeviceptr)it->b, it->c, s);
    default:
        snprintf(what, whatlen, "unknown work item %u", it->op);
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Records an event on s after the work of seqs and hands it to the
 * completion thread. On failure nothing is kept (read_buf stays the
 * caller's). */
static CUresult
work_track(cumod_exec *ex, CUstream s, const uint64_t *seqs, uint32_t n,
           void *read_buf, uint64_t read_len, uint64_t start_ns)
{
    cumod_exec_work *w = ex->work;
    CUevent ev = NULL;
    work_pending *pend;
    CUresult r;

    if ((pend = malloc(sizeof(*pend) + n * sizeof(pend->seq[0]))) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((r = cumod__exec_event_get(ex, &ev)) != CUDA_SUCCESS ||
        (r = ex->drv.event_record(ev, s)) != CUDA_SUCCESS) {
        if (ev != NULL)
            cumod__exec_event_put(ex, ev);
        free(pend);
        return r;
    }
    pend->ev = ev;
    pend->read_buf = read_buf;
    pend->read_len = read_len;
    pend->stream = s;
    pend->start_ns = start_ns;
    pend->nseq = n;
    memcpy(pend->seq, seqs, n * sizeof(seqs[0]));
    cumod__list_node_init(&pend->link);
    pthread_mutex_lock(&w->mtx);
    pend->order = ++w->added;
    cumod__list_append(&w->pending, &pend->link);
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mtx);
    return CUDA_SUCCESS;
}

/* Closes group g: its event, or each of its WORKs answered with the
 * error. 0 or -errno of the channel. */
static int
work_group_close(cumod_exec *ex, uint32_t gi)
{
    cumod_exec_work *w = ex->work;
    work_group *g = &w->groups[gi];
    CUresult r = work_track(ex, g->s, g->seq, g->n, NULL, 0, g->opened_ns);
    int rv = 0;

    if (g->n > 1)
        CUMOD_LOGD("CUMOD-EXEC-GROUP",
                   "%u commands of one stream answered by one event", g->n);

    if (r != CUDA_SUCCESS) {
        char msg[1024];
        int st = cumod__cu_err(&ex->drv, r, "cuEventRecord failed", msg,
                               sizeof(msg));
        for (uint32_t i = 0; i < g->n && rv == 0; i++)
            rv = cumod__exec_send_done(ex, g->seq[i], st, -1, msg, NULL, 0);
        if (cumod__cu_context_lost(r))
            cumod__exec_context_lost(ex, r);
    }
    w->groups[gi] = w->groups[--w->ngroups];
    return rv;
}

static int
work_group_close_stream(cumod_exec *ex, CUstream s)
{
    cumod_exec_work *w = ex->work;
    for (uint32_t i = 0; i < w->ngroups; i++)
        if (w->groups[i].s == s)
            return work_group_close(ex, i);
    return 0;
}

static int
work_group_add(cumod_exec *ex, CUstream s, uint64_t seq, uint64_t start_ns)
{
    cumod_exec_work *w = ex->work;
    uint32_t i;
    int rv = 0;

    for (i = 0; i < w->ngroups && w->groups[i].s != s; i++)
        ;
    if (i == w->ngroups) {
        if (w->ngroups == GROUPS && (rv = cumod__exec_work_flush(ex)) != 0)
            return rv;
        i = w->ngroups++;
        w->groups[i].s = s;
        w->groups[i].n = 0;
        w->groups[i].opened_ns = start_ns;
    }
    w->groups[i].seq[w->groups[i].n++] = seq;
    return w->groups[i].n == GROUP_MAX ? work_group_close(ex, i) : 0;
}

int
cumod__exec_work_age(cumod_exec *ex)
{
    cumod_exec_work *w = ex->work;
    if (w == NULL || w->ngroups == 0)
        return 0;
    uint64_t now = cumod__mono_ns();
    for (uint32_t i = w->ngroups; i-- > 0;)
        if (now - w->groups[i].opened_ns >= GROUP_AGE_NS) {
            int rv = work_group_close(ex, i);
            if (rv != 0)
                return rv;
        }
    return 0;
}

int
cumod__exec_work_flush(cumod_exec *ex)
{
    cumod_exec_work *w = ex->work;
    int rv = 0;
    while (w != NULL && w->ngroups > 0)
        if ((rv = work_group_close(ex, w->ngroups - 1)) != 0)
            return rv;
    return 0;
}

int
cumod__exec_on_work(cumod_exec *ex, const cumod_chan_hdr *hdr,
                    const void *payload, size_t len)
{
    const char *p = payload;
    cumod_chan_work cw;
    CUstream s;
    CUresult r;
    void *read_buf = NULL;
    uint64_t read_len = 0;
    char what[512] = "", msg[1024];
    uint32_t i = 0;
    int closed, st;
    CUresult lost = CUDA_SUCCESS; /* a failure that lost the context */

    if (len < sizeof(cw))
        return cumod__exec_send_done(ex, hdr->seq, CUMOD_EPROTO, -1,
                                     "malformed work", NULL, 0);
    memcpy(&cw, p, sizeof(cw));
    size_t at = sizeof(cw);
    /* Its device time starts no earlier (work_gpu_ns). */
    uint64_t start_ns = cumod__mono_ns();
    /* Large work says at debug level how long enqueueing it took. */
    struct timespec t0 = {0, 0};
    ex->work->timing = 0;
    if (cw.nitems >= WORK_TIMED_ITEMS && cumod__log_enabled(CUMOD_LOG_DEBUG)) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ex->work->timing = 1;
        ex->work->timing_ns = 0;
    }
    if ((s = cumod__exec_stream(ex, cw.stream, 1, &r)) == NULL) {
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
        if (it.op == CUMOD_WORK_GEMM) {
            /* cuBLAS answers in its own statuses: exec_blas.c says it
             * all, and the items before it stay enqueued, as after a
             * failed launch. */
            st = cumod__exec_gemm(ex, p + at, it.extra, s, msg, sizeof(msg),
                                  &lost);
            at += pad;
            if (st == CUMOD_OK)
                continue;
            goto fail_answer;
        }
        if ((it.op == CUMOD_WORK_HTOD || it.op == CUMOD_WORK_DTOH) &&
            cumod__shmguard_bad(cumod__shmguard_find(
                it.op == CUMOD_WORK_HTOD ? it.b : it.a, it.c))) {
            /* An earlier copy of this segment met pages its client cut
             * off: the mapping holds zeros since, whatever the client did
             * after (it may have grown the file again). */
            st = CUMOD_EPERM;
            snprintf(msg, sizeof(msg),
                     "the segment of this copy was truncated by its client "
                     "while cumodd copied it (SIGBUS); cumodd's mapping of it "
                     "holds zeros since: map a new segment");
            goto fail_answer;
        }
        const char *name = NULL;
        r = work_item(ex, &it, p + at, s, &read_buf, what, sizeof(what), &name);
        if (r != CUDA_SUCCESS && name != NULL)
            snprintf(what, sizeof(what), "%s", name);
        at += pad;
        if (r != CUDA_SUCCESS)
            goto fail;
    }
    if (t0.tv_sec != 0) {
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                    (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
        CUMOD_LOGD("CUMOD-EXEC-TIMING",
                   "%u items enqueued in %.1f us (%.2f us each; %.1f us in "
                   "cuLaunchKernel)",
                   cw.nitems, us, us / cw.nitems,
                   (double)ex->work->timing_ns / 1e3);
        ex->work->timing = 0;
    }
    if ((cw.flags & CUMOD_CHAN_WORK_F_GROUP) && read_buf == NULL)
        return work_group_add(ex, s, hdr->seq, start_ns);
    /* Its stream's group first: answers go in stream order. */
    if ((closed = work_group_close_stream(ex, s)) != 0)
        goto fail_after;
    if ((r = work_track(ex, s, &hdr->seq, 1, read_buf, read_len, start_ns)) !=
        CUDA_SUCCESS) {
        snprintf(what, sizeof(what), "cuEventRecord");
        i = (uint32_t)-1;
        goto fail;
    }
    return 0;

fail:
    strncat(what, " failed", sizeof(what) - strlen(what) - 1);
    st = cumod__cu_err(&ex->drv, r, what, msg, sizeof(msg));
    if (cumod__cu_context_lost(r))
        lost = r;
fail_answer: /* st and msg say it; lost: a context lost on the way */
    if (!cumod__exec_pinned_put(ex, read_buf))
        free(read_buf);
    ex->work->timing = 0;
    {
        /* Its stream's group first (answers go in stream order); a group
         * that failed answers its own WORKs with its error. */
        int rv = s != NULL ? work_group_close_stream(ex, s) : 0;
        if (rv == 0)
            rv = cumod__exec_send_done(ex, hdr->seq, st,
                                       i == (uint32_t)-1 ? -1 : (int)i, msg,
                                       NULL, 0);
        if (lost != CUDA_SUCCESS)
            cumod__exec_context_lost(ex, lost);
        return rv;
    }
fail_after: /* the channel failed: nobody to answer */
    if (!cumod__exec_pinned_put(ex, read_buf))
        free(read_buf);
    return closed;
}
