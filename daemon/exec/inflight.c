/* SPDX-License-Identifier: MIT */
/*
 * Service: the work in flight and the completion thread (inflight.h). The
 * submission thread enqueues work on a stream and records an event
 * (cumod__exec_track); the completion thread polls the events of all work
 * in flight and answers each as it completes, in whatever order the
 * streams finish: a long kernel of one session never delays the answer to
 * another's. Between passes it runs the reclaim queues (reclaim.c), whose
 * operations wait on events of the same pool (evpool.c).
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
#include <sys/prctl.h>
#include <time.h>

#include "cumod/errors.h"
#include "evpool.h"
#include "common/idmap.h"
#include "inflight.h"
#include "common/list.h"
#include "common/log.h"
#include "pinned.h"
#include "reclaim.h"
#include "reply.h"

typedef struct work_pending {
    cumod_list_node link;
    uint64_t order; /* w->added when it was appended */
    CUevent ev;
    void *read_buf; /* a READ item's bytes, sent with DONE */
    uint64_t read_len;
    CUstream stream;       /* its events complete in order */
    uint64_t start_ns;     /* CLOCK_MONOTONIC when its first WORK came */
    cumod_exec_done_fn cb; /* told instead of seqs answered (direct) */
    void *cb_arg;
    uint32_t nseq; /* the WORKs the event answers, in stream order */
    uint64_t seq[];
} work_pending;

/* How long the completion thread polls after the last progress. */
#define WORK_POLL_NS 2000000

/* Completions that say nothing but "done" (seq and device time), sent in
 * one CUMOD_CHAN_DONE_MANY packet per pass of the completion thread. */
#define DONE_MANY_MAX 2048

struct cumod_exec_inflight {
    cumod_exec *ex;
    pthread_t thread;
    int started;
    /* The pending list is shared by the two threads.
     * Lock order: mtx is a leaf; no driver call is made while holding it
     * except cuEventQuery (which does not block). */
    pthread_mutex_t mtx;
    pthread_cond_t cond;
    pthread_cond_t idle; /* broadcast when nothing is left in flight */
    cumod_list pending;  /* work_pending, in submission order */
    /* What the completion thread took from pending to poll: its events
     * are queried without mtx (a query of a completed event takes ~1.4 us
     * on an H100 host, and the submission thread waited for each under
     * the lock to add its next launch). Only the completion thread
     * changes it, under mtx; it reads it without. Older than pending. */
    cumod_list polling;
    uint64_t added; /* work appended so far: new work resets the naps */
    uint64_t kicks; /* reclaim operations queued so far: likewise */
    int stop;
    cumod_chan_done_one many[DONE_MANY_MAX]; /* the completion thread's */
    uint32_t nmany;
    /* Device time, from completion timestamps (the completion thread's):
     * a pending's work ran from when it was submitted, or from when the
     * work before it on its stream was seen complete if later, until its
     * own event is seen complete. No driver call: cuEventElapsedTime
     * would need timing events and a start event recorded per pending on
     * the submission thread (docs/metrics.md). CUstream -> the
     * last completion seen on it, in ns (never 0). */
    cumod_idmap last_done;
};
typedef struct cumod_exec_inflight inflight;

static void
inflight_done_flush(cumod_exec *ex, inflight *w)
{
    if (w->nmany == 0)
        return;
    cumod_chan_hdr h = {.op = CUMOD_CHAN_DONE_MANY};
    (void)cumod__exec_send(ex, &h, w->many, w->nmany * sizeof(w->many[0]));
    w->nmany = 0; /* a send that failed: the front is gone */
}

static void
inflight_done_add(cumod_exec *ex, inflight *w, uint64_t seq, uint64_t gpu_ns)
{
    if (w->nmany == DONE_MANY_MAX)
        inflight_done_flush(ex, w);
    w->many[w->nmany++] = (cumod_chan_done_one){seq, gpu_ns};
}

static int
inflight_empty(const inflight *w)
{
    return cumod__list_empty(&w->pending) && cumod__list_empty(&w->polling);
}

/* The device time of p, seen complete at now (see last_done), split evenly
 * among the WORKs its event answers (a group's: one event, one figure). */
static uint64_t
inflight_gpu_ns(inflight *w, const work_pending *p, uint64_t now)
{
    uint64_t key = (uint64_t)(uintptr_t)p->stream;
    uint64_t prev = (uint64_t)(uintptr_t)cumod__idmap_get(&w->last_done, key);
    uint64_t from = prev > p->start_ns ? prev : p->start_ns;
    /* A failed set only costs the next figure its overlap. */
    (void)cumod__idmap_set(&w->last_done, key, (void *)(uintptr_t)now);
    return now > from ? (now - from) / (p->nseq ? p->nseq : 1) : 0;
}

/* Idle: look again for a while before sleeping on the condition, since
 * work usually comes back to back and a condition wake-up costs
 * microseconds that a launch's round trip pays. With w->mtx held; 1 when
 * the thread is to end. */
static int
inflight_wait(cumod_exec *ex, inflight *w)
{
    for (int spin = 0; inflight_empty(w) && !w->stop &&
                       !cumod__exec_reclaim_pending(ex) && spin < 2000;
         spin++) {
        pthread_mutex_unlock(&w->mtx);
        sched_yield();
        pthread_mutex_lock(&w->mtx);
    }
    while (inflight_empty(w) && !w->stop && !cumod__exec_reclaim_pending(ex))
        pthread_cond_wait(&w->cond, &w->mtx);
    return inflight_empty(w) && w->stop;
}

/* Answers p, whose event said r (taken off the list), and frees it. */
static void
inflight_answer(cumod_exec *ex, inflight *w, work_pending *p, CUresult r,
                uint64_t now_ns)
{
    const cumod_driver *d = &ex->drv;
    uint64_t gpu_ns = inflight_gpu_ns(w, p, now_ns);

    if (p->cb != NULL) {
        p->cb(ex, p->cb_arg, r, gpu_ns);
    } else if (r == CUDA_SUCCESS && p->read_len == 0) {
        for (uint32_t i = 0; i < p->nseq; i++)
            inflight_done_add(ex, w, p->seq[i], gpu_ns);
    } else {
        char msg[512] = "";
        int st = cumod__cu_err(d, r, "the work failed on the device", msg,
                               sizeof(msg));
        inflight_done_flush(ex, w); /* in order */
        for (uint32_t i = 0; i < p->nseq; i++)
            (void)cumod__exec_send_done_ns(ex, p->seq[i], st, -1,
                                           st ? msg : NULL, p->read_buf,
                                           st ? 0 : p->read_len, gpu_ns);
    }
    if (cumod__cu_context_lost(r))
        cumod__exec_context_lost(ex, r);
    if (!cumod__exec_pinned_put(ex, p->read_buf))
        free(p->read_buf);
    cumod__exec_event_put(ex, p->ev);
    free(p);
}

/* One pass over everything in flight (w->polling, without w->mtx): 1 when
 * something completed. A stream's work completes in order: past its first
 * unfinished event, its later ones are not asked (with thousands in
 * flight, asking each was the pass's whole cost). */
static int
inflight_pass(cumod_exec *ex, inflight *w)
{
    int done_any = 0;
    uint64_t now_ns = 0; /* read at the pass's first completion */
    CUstream busy[8];
    unsigned nbusy = 0;

    CUMOD_LIST_FOREACH_SAFE(&w->polling, n)
    {
        work_pending *p = CUMOD_CONTAINER_OF(n, work_pending, link);
        int skip = 0;
        for (unsigned i = 0; i < nbusy && !skip; i++)
            skip = busy[i] == p->stream;
        if (skip)
            continue;
        CUresult r = ex->drv.event_query(p->ev);
        if (r == CUDA_ERROR_NOT_READY) {
            if (nbusy < sizeof(busy) / sizeof(busy[0]))
                busy[nbusy++] = p->stream;
            continue;
        }
        pthread_mutex_lock(&w->mtx);
        cumod__list_remove(n);
        pthread_mutex_unlock(&w->mtx);
        done_any = 1;
        if (now_ns == 0)
            now_ns = cumod__mono_ns();
        inflight_answer(ex, w, p, r, now_ns);
    }
    inflight_done_flush(ex, w);
    if (done_any) {
        pthread_mutex_lock(&w->mtx);
        pthread_cond_broadcast(&w->idle); /* cumod__exec_wait_quiet */
        pthread_mutex_unlock(&w->mtx);
    }
    return done_any;
}

/* Nothing finished (w->mtx held): poll for 2 ms since the last progress (a
 * batch of short kernels completes within that; measured on the H100, a
 * nap's wake-up added 50-90 us to a 1.1 ms batch of 256 launches answered
 * when complete), then nap: 20 us until 5 ms, 200 us until 100 ms, then
 * 1 ms, so that a long kernel does not cost a core of polling. New work
 * ends a nap at once (it signals the condition) and starts the polling
 * again. */
static void
inflight_nap(inflight *w, const struct timespec *since, unsigned *passes)
{
    struct timespec now, until;

    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t quiet_ns = (int64_t)(now.tv_sec - since->tv_sec) * 1000000000 +
                       (now.tv_nsec - since->tv_nsec);
    if (quiet_ns < WORK_POLL_NS) {
        /* A pause between passes, a yield every eighth: a yield per pass
         * was a third of this thread's time on the H100 host (perf), and
         * each one delays the next look. */
        pthread_mutex_unlock(&w->mtx);
        if ((++*passes & 7) == 0)
            sched_yield();
        else
            for (int i = 0; i < 32; i++)
                cumod__cpu_relax();
        pthread_mutex_lock(&w->mtx);
        return;
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

static void *
inflight_main(void *arg)
{
    inflight *w = arg;
    cumod_exec *ex = w->ex;
    uint64_t seen = 0;
    unsigned passes = 0;
    struct timespec since;

    clock_gettime(CLOCK_MONOTONIC, &since);
    pthread_setname_np(pthread_self(), "exec-done");
    /* The context is per thread: make it current here too. Its naps are
     * 20 us, not 20 us plus the default 50 us of timer slack. */
    (void)ex->drv.ctx_set_current(ex->ctx);
    (void)prctl(PR_SET_TIMERSLACK, 1UL);
    pthread_mutex_lock(&w->mtx);
    for (;;) {
        if (inflight_wait(ex, w))
            break;
        cumod__list_splice(&w->polling, &w->pending);
        pthread_mutex_unlock(&w->mtx);
        int done_any = inflight_pass(ex, w);
        /* What sessions gave back, once the work before it is done. */
        done_any |= cumod__exec_reclaim_poll(ex);
        pthread_mutex_lock(&w->mtx);
        if (done_any || w->added + w->kicks != seen) {
            seen = w->added + w->kicks;
            clock_gettime(CLOCK_MONOTONIC, &since);
            continue;
        }
        inflight_nap(w, &since, &passes);
    }
    pthread_mutex_unlock(&w->mtx);
    return NULL;
}

cumod_err
cumod__exec_inflight_start(cumod_exec *ex)
{
    inflight *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return CUMOD_ENOMEM;
    w->ex = ex;
    cumod__list_init(&w->pending);
    cumod__list_init(&w->polling);
    cumod__idmap_init(&w->last_done);
    pthread_condattr_t ca;
    pthread_mutex_init(&w->mtx, NULL);
    /* Naps are timed waits on the condition, by the monotonic clock. */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&w->idle, NULL);
    if (pthread_create(&w->thread, NULL, inflight_main, w) != 0) {
        cumod__idmap_fini(&w->last_done);
        free(w);
        return CUMOD_ENOMEM;
    }
    w->started = 1;
    ex->inflight = w;
    return CUMOD_OK;
}

void
cumod__exec_inflight_stop(cumod_exec *ex)
{
    inflight *w = ex->inflight;
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mtx);
    w->stop = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mtx);
    if (w->started)
        pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mtx);
    pthread_cond_destroy(&w->cond);
    pthread_cond_destroy(&w->idle);
    cumod__idmap_fini(&w->last_done);
    free(w);
    ex->inflight = NULL;
}

void
cumod__exec_inflight_kick(cumod_exec *ex)
{
    inflight *w = ex->inflight;
    pthread_mutex_lock(&w->mtx);
    w->kicks++;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mtx);
}

int
cumod__exec_wait_quiet(cumod_exec *ex, const char *what)
{
    inflight *w = ex->inflight;
    struct timespec until;
    uint64_t mark;
    int waited = 0, logged = 0;

    pthread_mutex_lock(&w->mtx);
    mark = w->added;
    for (;;) {
        cumod_list_node *n = cumod__list_first(&w->polling);
        if (n == NULL)
            n = cumod__list_first(&w->pending);
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

/* Hands ev, recorded on s after the work of seqs, to the completion
 * thread. On failure nothing is kept (ev and read_buf stay the
 * caller's). */
static CUresult inflight_hand_cb(cumod_exec *ex, CUstream s, CUevent ev,
                                 const uint64_t *seqs, uint32_t n,
                                 void *read_buf, uint64_t read_len,
                                 uint64_t start_ns, cumod_exec_done_fn cb,
                                 void *cb_arg);

static CUresult
inflight_hand(cumod_exec *ex, CUstream s, CUevent ev, const uint64_t *seqs,
              uint32_t n, void *read_buf, uint64_t read_len, uint64_t start_ns)
{
    return inflight_hand_cb(ex, s, ev, seqs, n, read_buf, read_len, start_ns,
                            NULL, NULL);
}

static CUresult
inflight_hand_cb(cumod_exec *ex, CUstream s, CUevent ev, const uint64_t *seqs,
                 uint32_t n, void *read_buf, uint64_t read_len,
                 uint64_t start_ns, cumod_exec_done_fn cb, void *cb_arg)
{
    inflight *w = ex->inflight;
    work_pending *pend;

    if ((pend = malloc(sizeof(*pend) + n * sizeof(pend->seq[0]))) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pend->ev = ev;
    pend->read_buf = read_buf;
    pend->read_len = read_len;
    pend->stream = s;
    pend->start_ns = start_ns;
    pend->cb = cb;
    pend->cb_arg = cb_arg;
    pend->nseq = n;
    if (n > 0)
        memcpy(pend->seq, seqs, n * sizeof(seqs[0]));
    cumod__list_node_init(&pend->link);
    pthread_mutex_lock(&w->mtx);
    pend->order = ++w->added;
    cumod__list_append(&w->pending, &pend->link);
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mtx);
    return CUDA_SUCCESS;
}

/* Records an event on s after the work of seqs and hands it to the
 * completion thread. On failure nothing is kept (read_buf stays the
 * caller's). */
CUresult
cumod__exec_track(cumod_exec *ex, CUstream s, const uint64_t *seqs, uint32_t n,
                  void *read_buf, uint64_t read_len, uint64_t start_ns)
{
    CUevent ev = NULL;
    CUresult r;

    if ((r = cumod__exec_event_get(ex, &ev)) != CUDA_SUCCESS ||
        (r = ex->drv.event_record(ev, s)) != CUDA_SUCCESS ||
        (r = inflight_hand(ex, s, ev, seqs, n, read_buf, read_len, start_ns)) !=
            CUDA_SUCCESS) {
        if (ev != NULL)
            cumod__exec_event_put(ex, ev);
        return r;
    }
    return CUDA_SUCCESS;
}

/* How long a submission thread waits for its one launch itself: an empty
 * kernel completes within ~8 us of its launch on an H100; past this the
 * completion thread takes it, and the thread its next command. */
#define INFLIGHT_INLINE_NS 20000

CUresult
cumod__exec_track_inline(cumod_exec *ex, CUstream s, uint64_t seq,
                         uint64_t start_ns)
{
    inflight *w = ex->inflight;
    CUevent ev = NULL;
    CUresult r;

    pthread_mutex_lock(&w->mtx);
    int alone = inflight_empty(w);
    pthread_mutex_unlock(&w->mtx);
    if (!alone)
        return cumod__exec_track(ex, s, &seq, 1, NULL, 0, start_ns);
    if ((r = cumod__exec_event_get(ex, &ev)) != CUDA_SUCCESS ||
        (r = ex->drv.event_record(ev, s)) != CUDA_SUCCESS) {
        if (ev != NULL)
            cumod__exec_event_put(ex, ev);
        return r;
    }
    uint64_t t0 = cumod__mono_ns(), now = t0;
    while ((r = ex->drv.event_query(ev)) == CUDA_ERROR_NOT_READY &&
           (now = cumod__mono_ns()) - t0 < INFLIGHT_INLINE_NS)
        cumod__cpu_relax();
    if (r == CUDA_SUCCESS) {
        /* Its device time from its submission: the stream had nothing
         * before it in flight. */
        now = cumod__mono_ns();
        cumod__exec_event_put(ex, ev);
        (void)cumod__exec_send_done_ns(ex, seq, CUMOD_OK, -1, NULL, NULL, 0,
                                       now > start_ns ? now - start_ns : 0);
        return CUDA_SUCCESS;
    }
    /* Not yet (or it failed: the completion thread says how, and ends a
     * lost context as always). */
    if ((r = inflight_hand(ex, s, ev, &seq, 1, NULL, 0, start_ns)) !=
        CUDA_SUCCESS)
        cumod__exec_event_put(ex, ev);
    return r;
}

CUresult
cumod__exec_track_cb_inline(cumod_exec *ex, CUstream s, uint64_t start_ns,
                            cumod_exec_done_fn cb, void *arg)
{
    inflight *w = ex->inflight;
    CUevent ev = NULL;
    CUresult r;

    pthread_mutex_lock(&w->mtx);
    int alone = inflight_empty(w);
    pthread_mutex_unlock(&w->mtx);
    if ((r = cumod__exec_event_get(ex, &ev)) != CUDA_SUCCESS ||
        (r = ex->drv.event_record(ev, s)) != CUDA_SUCCESS) {
        if (ev != NULL)
            cumod__exec_event_put(ex, ev);
        return r;
    }
    if (alone) {
        uint64_t t0 = cumod__mono_ns(), now = t0;
        while ((r = ex->drv.event_query(ev)) == CUDA_ERROR_NOT_READY &&
               (now = cumod__mono_ns()) - t0 < INFLIGHT_INLINE_NS)
            cumod__cpu_relax();
        if (r == CUDA_SUCCESS) {
            now = cumod__mono_ns();
            cumod__exec_event_put(ex, ev);
            cb(ex, arg, CUDA_SUCCESS, now > start_ns ? now - start_ns : 0);
            return CUDA_SUCCESS;
        }
    }
    /* The completion thread's (a failure too: it says how, and ends a
     * lost context as always). */
    if ((r = inflight_hand_cb(ex, s, ev, NULL, 0, NULL, 0, start_ns, cb,
                              arg)) != CUDA_SUCCESS) {
        cumod__exec_event_put(ex, ev);
        return r;
    }
    return CUDA_SUCCESS;
}
