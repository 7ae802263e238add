/* SPDX-License-Identifier: MIT */
/*
 * Handler of CUMOD_CHAN_WORK (launches, copies, memsets, GEMMs), on the
 * submission thread: each item is enqueued on its stream, then an event
 * recorded and handed to the completion service (inflight.h), which
 * answers when the stream gets there. The executor's hot path: reached
 * from the dispatcher by one table lookup; what it shares with other
 * handlers (stream and module lookup, pinned buffers, replies) it calls
 * in the services, never in another handler.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "gemm.h"
#include "handlers.h"
#include "inflight.h"
#include "launch.h"
#include "common/log.h"
#include "modtab.h"
#include "pinned.h"
#include "reply.h"
#include "common/shmguard.h"
#include "streams.h"

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

/* The WORK handler's own state: the submission thread's. */
struct cumod_exec_work {
    work_group groups[GROUPS];
    uint32_t ngroups;
    /* The WORK being timed (debug level only) and its time so far in
     * cuLaunchKernel. */
    int timing;
    uint64_t timing_ns;
};

/* Enqueues one item on s. On failure, what says what failed: the call's
 * name in *name (set on success too: formatting it for every launch cost
 * more than the check), or the whole sentence in what. */
static CUresult
work_item(cumod_exec *ex, struct cumod_exec_work *w, const cumod_work_item *it,
          const char *extra, CUstream s, void **read_buf, char *what,
          size_t whatlen, const char **name)
{
    const cumod_driver *d = &ex->drv;

    switch (it->op) {
    case CUMOD_WORK_LAUNCH:
        return cumod__exec_launch(ex, it, extra, s,
                                  w->timing ? &w->timing_ns : NULL, what,
                                  whatlen, name);
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

/* Closes group g: its event, or each of its WORKs answered with the
 * error. 0 or -errno of the channel. */
static int
work_group_close(cumod_exec *ex, struct cumod_exec_work *w, uint32_t gi)
{
    work_group *g = &w->groups[gi];
    CUresult r =
        cumod__exec_track(ex, g->s, g->seq, g->n, NULL, 0, g->opened_ns);
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
work_group_close_stream(cumod_exec *ex, struct cumod_exec_work *w, CUstream s)
{
    for (uint32_t i = 0; i < w->ngroups; i++)
        if (w->groups[i].s == s)
            return work_group_close(ex, w, i);
    return 0;
}

static int
work_group_add(cumod_exec *ex, struct cumod_exec_work *w, CUstream s,
               uint64_t seq, uint64_t start_ns)
{
    uint32_t i;
    int rv = 0;

    for (i = 0; i < w->ngroups && w->groups[i].s != s; i++)
        ;
    if (i == w->ngroups) {
        if (w->ngroups == GROUPS &&
            (rv = cumod__exec_work_flush_in(ex, w)) != 0)
            return rv;
        i = w->ngroups++;
        w->groups[i].s = s;
        w->groups[i].n = 0;
        w->groups[i].opened_ns = start_ns;
    }
    w->groups[i].seq[w->groups[i].n++] = seq;
    return w->groups[i].n == GROUP_MAX ? work_group_close(ex, w, i) : 0;
}

int
cumod__exec_work_age(cumod_exec *ex)
{
    return cumod__exec_work_age_in(ex, ex->work);
}

int
cumod__exec_work_age_in(cumod_exec *ex, struct cumod_exec_work *w)
{
    if (w == NULL || w->ngroups == 0)
        return 0;
    uint64_t now = cumod__mono_ns();
    for (uint32_t i = w->ngroups; i-- > 0;)
        if (now - w->groups[i].opened_ns >= GROUP_AGE_NS) {
            int rv = work_group_close(ex, w, i);
            if (rv != 0)
                return rv;
        }
    return 0;
}

int
cumod__exec_work_flush(cumod_exec *ex)
{
    return cumod__exec_work_flush_in(ex, ex->work);
}

int
cumod__exec_work_flush_in(cumod_exec *ex, struct cumod_exec_work *w)
{
    int rv = 0;
    while (w != NULL && w->ngroups > 0)
        if ((rv = work_group_close(ex, w, w->ngroups - 1)) != 0)
            return rv;
    return 0;
}

struct cumod_exec_work *
cumod__exec_work_new(void)
{
    return calloc(1, sizeof(struct cumod_exec_work));
}

void
cumod__exec_work_free(cumod_exec *ex, struct cumod_exec_work *w)
{
    /* What is held back is recorded first, while the completion thread
     * still runs to answer it. */
    (void)cumod__exec_work_flush_in(ex, w);
    free(w);
}

cumod_err
cumod__exec_work_start(cumod_exec *ex)
{
    if ((ex->work = cumod__exec_work_new()) == NULL)
        return CUMOD_ENOMEM;
    return CUMOD_OK;
}

void
cumod__exec_work_stop(cumod_exec *ex)
{
    cumod__exec_work_free(ex, ex->work);
    ex->work = NULL;
}

/* One WORK as it runs, and what its failure says. */
typedef struct work_run {
    CUstream s;
    void *read_buf; /* a READ item's pinned (or malloc'd) bytes */
    uint64_t read_len;
    uint32_t i;     /* the item that failed; (uint32_t)-1: none of them */
    CUresult r;     /* a driver call's failure (RUN_DRIVER) */
    CUresult lost;  /* a failure that lost the context */
    int st;         /* the answer's status (RUN_ANSWER) */
    char what[512]; /* the call that failed (RUN_DRIVER) */
    char msg[1024]; /* the answer's words */
} work_run;

/* How work_items ended: every item enqueued; a driver call failed (r and
 * what say which); or the answer is known (st and msg). */
enum { RUN_OK, RUN_DRIVER, RUN_ANSWER };

/* Enqueues the items of a WORK (cw's, from p + at on, len bytes in all)
 * on run->s, one after the other. */
static int
work_items(cumod_exec *ex, struct cumod_exec_work *w, const cumod_chan_work *cw,
           const char *p, size_t len, size_t at, work_run *run)
{
    for (run->i = 0; run->i < cw->nitems; run->i++) {
        cumod_work_item it;
        if (len - at < sizeof(it)) {
            run->r = CUDA_ERROR_INVALID_VALUE;
            snprintf(run->what, sizeof(run->what), "truncated work");
            return RUN_DRIVER;
        }
        memcpy(&it, p + at, sizeof(it));
        at += sizeof(it);
        size_t pad = ((size_t)it.extra + 7) & ~(size_t)7;
        if (len - at < pad) {
            run->r = CUDA_ERROR_INVALID_VALUE;
            snprintf(run->what, sizeof(run->what), "truncated work");
            return RUN_DRIVER;
        }
        if (it.op == CUMOD_WORK_READ)
            run->read_len = it.c;
        if (it.op == CUMOD_WORK_GEMM) {
            /* cuBLAS answers in its own statuses: gemm.c says it all, and
             * the items before it stay enqueued, as after a failed
             * launch. */
            run->st = cumod__exec_gemm(ex, p + at, it.extra, run->s, run->msg,
                                       sizeof(run->msg), &run->lost);
            at += pad;
            if (run->st == CUMOD_OK)
                continue;
            return RUN_ANSWER;
        }
        if ((it.op == CUMOD_WORK_HTOD || it.op == CUMOD_WORK_DTOH) &&
            cumod__shmguard_bad(cumod__shmguard_find(
                it.op == CUMOD_WORK_HTOD ? it.b : it.a, it.c))) {
            /* An earlier copy of this segment met pages its client cut
             * off: the mapping holds zeros since, whatever the client did
             * after (it may have grown the file again). */
            run->st = CUMOD_EPERM;
            snprintf(run->msg, sizeof(run->msg),
                     "the segment of this copy was truncated by its client "
                     "while cumodd copied it (SIGBUS); cumodd's mapping of it "
                     "holds zeros since: map a new segment");
            return RUN_ANSWER;
        }
        const char *name = NULL;
        run->r = work_item(ex, w, &it, p + at, run->s, &run->read_buf,
                           run->what, sizeof(run->what), &name);
        if (run->r != CUDA_SUCCESS && name != NULL)
            snprintf(run->what, sizeof(run->what), "%s", name);
        at += pad;
        if (run->r != CUDA_SUCCESS)
            return RUN_DRIVER;
    }
    return RUN_OK;
}

/* Large work says at debug level how long enqueueing it took (t0: when it
 * began, 0 when not timed). */
static void
work_timing_end(struct cumod_exec_work *w, const cumod_chan_work *cw,
                struct timespec t0)
{
    if (t0.tv_sec == 0)
        return;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
    CUMOD_LOGD("CUMOD-EXEC-TIMING",
               "%u items enqueued in %.1f us (%.2f us each; %.1f us in "
               "cuLaunchKernel)",
               cw->nitems, us, us / cw->nitems, (double)w->timing_ns / 1e3);
    w->timing = 0;
}

/* A WORK that failed: a driver call's failure (driver) made into st and
 * msg first; answered after its stream's group (answers go in stream
 * order; a group that failed answers its own WORKs with its error). 0 or
 * -errno of the channel. */
static int
work_fail(cumod_exec *ex, struct cumod_exec_work *w, const cumod_chan_hdr *hdr,
          work_run *run, int driver)
{
    if (driver) {
        strncat(run->what, " failed",
                sizeof(run->what) - strlen(run->what) - 1);
        run->st = cumod__cu_err(&ex->drv, run->r, run->what, run->msg,
                                sizeof(run->msg));
        if (cumod__cu_context_lost(run->r))
            run->lost = run->r;
    }
    if (!cumod__exec_pinned_put(ex, run->read_buf))
        free(run->read_buf);
    w->timing = 0;
    int rv = run->s != NULL ? work_group_close_stream(ex, w, run->s) : 0;
    if (rv == 0)
        rv = cumod__exec_send_done(ex, hdr->seq, run->st,
                                   run->i == (uint32_t)-1 ? -1 : (int)run->i,
                                   run->msg, NULL, 0);
    if (run->lost != CUDA_SUCCESS)
        cumod__exec_context_lost(ex, run->lost);
    return rv;
}

int
cumod__exec_on_work(cumod_exec *ex, const cumod_chan_hdr *hdr,
                    const void *payload, size_t len, int fd, void *aux)
{
    const char *p = payload;
    cumod_chan_work cw;
    work_run run = {.lost = CUDA_SUCCESS};
    CUresult r;
    int closed, how;
    /* The submitting thread's own state: a submission thread's (aux), or
     * the serving thread's. */
    struct cumod_exec_work *w = aux != NULL ? aux : ex->work;

    if (fd >= 0) /* a WORK carries none: a front's mistake */
        close(fd);
    if (len < sizeof(cw))
        return cumod__exec_send_done(ex, hdr->seq, CUMOD_EPROTO, -1,
                                     "malformed work", NULL, 0);
    memcpy(&cw, p, sizeof(cw));
    /* Its device time starts no earlier (work_gpu_ns). */
    uint64_t start_ns = cumod__mono_ns();
    /* Large work says at debug level how long enqueueing it took. */
    struct timespec t0 = {0, 0};
    w->timing = 0;
    if (cw.nitems >= WORK_TIMED_ITEMS && cumod__log_enabled(CUMOD_LOG_DEBUG)) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        w->timing = 1;
        w->timing_ns = 0;
    }
    if ((run.s = cumod__exec_stream(ex, cw.stream, 1, &run.r)) == NULL) {
        snprintf(run.what, sizeof(run.what), "cuStreamCreate");
        return work_fail(ex, w, hdr, &run, 1);
    }
    if ((how = work_items(ex, w, &cw, p, len, sizeof(cw), &run)) != RUN_OK)
        return work_fail(ex, w, hdr, &run, how == RUN_DRIVER);
    work_timing_end(w, &cw, t0);
    if ((cw.flags & CUMOD_CHAN_WORK_F_GROUP) && run.read_buf == NULL)
        return work_group_add(ex, w, run.s, hdr->seq, start_ns);
    /* Its stream's group first: answers go in stream order. */
    if ((closed = work_group_close_stream(ex, w, run.s)) != 0) {
        /* the channel failed: nobody to answer */
        if (!cumod__exec_pinned_put(ex, run.read_buf))
            free(run.read_buf);
        return closed;
    }
    /* A submission thread's waited WORK (aux: its own state) may be
     * answered by the thread itself (inflight.h). */
    if (aux != NULL && run.read_buf == NULL)
        r = cumod__exec_track_inline(ex, run.s, hdr->seq, start_ns);
    else
        r = cumod__exec_track(ex, run.s, &hdr->seq, 1, run.read_buf,
                              run.read_len, start_ns);
    if (r != CUDA_SUCCESS) {
        run.r = r;
        snprintf(run.what, sizeof(run.what), "cuEventRecord");
        run.i = (uint32_t)-1;
        return work_fail(ex, w, hdr, &run, 1);
    }
    return 0;
}
