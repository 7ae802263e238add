/* SPDX-License-Identifier: MIT */
/*
 * Direct launches' records (direct_impl.h): a ring's records taken by its
 * submission thread, checked and launched or forwarded to the front, and
 * the Waits for the executor's tickets. Their completions are
 * direct_complete.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sched.h>
#include <unistd.h>

#include "common/log.h"
#include "cumod/errors.h"
#include "data/latency.h"
#include "data/ringio.h"
#include "device.h"
#include "direct_impl.h"
#include "data/gemm_check.h"
#include "evpool.h"
#include "gemm.h"
#include "inflight.h"
#include "launch.h"
#include "reply.h"
#include "streams.h"
#include "submit.h"

/* --- Records ------------------------------------------------------------- */

/* Where the executor read g to, for the front and the client: only once
 * the record before end is accounted for (in a slot, or forwarded), so
 * that a front taking g back after this process died neither loses it
 * nor serves it twice. */
static void
dring_publish(dring *g, uint64_t end)
{
    atomic_store_explicit(&g->st->sq_head, end, memory_order_release);
    atomic_store_explicit(&g->h->sq_head, end, memory_order_release);
}

/* Hands a record to the front, in ring order. 0 or -errno of the
 * channel. */
static int
dring_forward(dthread *t, dring *g, const uint8_t *bytes, size_t len,
              uint64_t end)
{
    size_t need = sizeof(cumod_chan_ring_msg) + len;
    if (need > t->fwd_cap) {
        char *b = realloc(t->fwd, need);
        if (b == NULL) {
            cumod__dring_bad(g, "out of memory for a record");
            return 0;
        }
        t->fwd = b;
        t->fwd_cap = need;
    }
    /* The launches before it counted first, whoever sends them. */
    (void)cumod__dring_stats_flush(g, 0);
    while (atomic_load_explicit(&g->stats_sending, memory_order_acquire) != 0)
        sched_yield();
    cumod_chan_ring_msg m = {
        .session = g->session, .len = (uint32_t)len, .end = end};
    memcpy(t->fwd, &m, sizeof(m));
    memcpy(t->fwd + sizeof(m), bytes, len);
    g->fwd_out++;
    g->fwd_total++;
    g->fwd_ns = cumod__mono_ns();
    cumod_chan_hdr h = {.op = CUMOD_CHAN_RING_FWD};
    int rv = cumod__exec_send(g->d->ex, &h, t->fwd, need);
    dring_publish(g, end); /* the front has it (m.end) */
    return rv;
}

/* l, answered when enqueued, is on its stream: its ticket is the answer
 * (the slot stays taken, answered, until it completes). */
static void
dring_ack(dring *g, dlaunch *l)
{
    uint8_t reply[128];
    pthread_mutex_lock(&g->mtx);
    l->ticket = g->ticket_next++;
    atomic_store_explicit(&g->st->ticket_next, g->ticket_next,
                          memory_order_release);
    g->st->slot[l->slot].ticket = l->ticket;
    size_t len = cumod__dring_pack(l->id, CUMOD_OK, NULL, l->generation,
                                   l->ticket, reply, sizeof(reply));
    (void)cumod__dring_put_locked(g, reply, len, l->slot);
    pthread_mutex_unlock(&g->mtx);
    cumod__dring_wake(g);
}

/* What a direct launch or GEMM is before it runs: its request, the
 * module and kernel it runs (none for a GEMM), its stream. */
typedef struct dstart {
    uint64_t id, key, t0, end;
    int when; /* Cumod__ReplyWhen */
    const dmod *dm;
    uint32_t kernel;
} dstart;

/* A slot for what w describes, answered at once when enqueued: the
 * dlaunch and its stream (*s), or NULL with *rv: 0 to forward it
 * instead, -1 when a posted launch must wait for room (taken again
 * later), 1 when it is over already (its stream could not be had: its
 * answer given). */
static dlaunch *
dring_start(dring *g, const dstart *w, CUstream *s, int *rv)
{
    cumod_exec *ex = g->d->ex;
    dlaunch *l = malloc(sizeof(*l));
    CUresult r;
    int32_t slot;

    *rv = 0;
    if (l == NULL)
        return NULL;
    pthread_mutex_lock(&g->mtx);
    if (g->nfree <= DRING_WAIT_SLOTS || g->gone ||
        g->inflight + atomic_load_explicit(&g->st->front_inflight,
                                           memory_order_acquire) >=
            (g->max_inflight ? g->max_inflight : 1)) {
        /* Its limit (--session-max-inflight, the slots): the front
         * counts it and says so; a posted launch, whose client does not
         * wait for an answer, waits for room instead (its ring only). */
        int full = !g->gone;
        pthread_mutex_unlock(&g->mtx);
        free(l);
        *rv = full && w->when == CUMOD__REPLY_WHEN__REPLY_WHEN_POSTED ? -1 : 0;
        return NULL;
    }
    int posted = w->when == CUMOD__REPLY_WHEN__REPLY_WHEN_POSTED;
    uint64_t handle = w->dm ? w->dm->handle : 0;
    slot = cumod__dring_slot_take(
        g,
        &(cumod_dring_slot){
            .id = w->id,
            .handle = handle,
            .kernel = w->kernel,
            .stream = (uint32_t)(w->key & ((1u << CUMOD_CHAN_STREAM_BITS) - 1)),
            .start_ms = w->t0 / 1000000,
            .end = w->end,
            .ticket = posted ? CUMOD_TICKET_POSTED | w->id : 0,
            .posted = (uint32_t)posted});
    g->inflight++;
    g->requests++;
    atomic_store_explicit(&g->st->inflight, g->inflight, memory_order_release);
    pthread_mutex_unlock(&g->mtx);
    dring_publish(g, w->end); /* in its slot now */
    *l = (dlaunch){.g = g,
                   .m = w->dm ? w->dm->m : NULL,
                   .id = w->id,
                   .generation = w->dm ? w->dm->generation : 0,
                   .handle = handle,
                   .kernel = w->kernel,
                   .slot = slot,
                   .t0_ns = w->t0,
                   .ticket = posted ? CUMOD_TICKET_POSTED | w->id : 0};
    if (l->m != NULL)
        atomic_fetch_add(&l->m->direct, 1);
    cumod__dring_ref(g);
    /* Answered when enqueued: now, checked and in its stream's order
     * (libcumod's "enqueued"), so that the client's next record comes
     * while this one is launched; an error in launching it is the
     * ticket's, for its Wait to report. */
    if (w->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED)
        dring_ack(g, l);

    if ((*s = cumod__exec_stream(ex, w->key, 1, &r)) == NULL) {
        char msg[512];
        /* A lost context: the front answers it from its slot, once this
         * process is gone. */
        cumod__exec_check_lost(ex, r);
        int st = cumod__cu_err(&ex->drv, r, "cuStreamCreate failed", msg,
                               sizeof(msg));
        cumod__dlaunch_end(ex, l, st, msg, 0, 1);
        *rv = 1;
        return NULL;
    }
    return l;
}

/* A launch of req whose checks passed (k of module dm, read-locked): a
 * slot, the launch, its completion handed on. 1 when launched (or
 * answered), 0 to forward it instead, -1 when a posted launch must wait
 * for room (taken again later). */
static int
dring_launch(dthread *t, dring *g, const Cumod__Request *req, const dmod *dm,
             const dkern *k, uint64_t key, uint64_t t0, uint64_t end)
{
    cumod_exec *ex = g->d->ex;
    dstart w = {.id = req->id,
                .key = key,
                .t0 = t0,
                .end = end,
                .when = (int)req->launch->when,
                .dm = dm,
                .kernel = k->k.index};
    CUstream s;
    int rv;
    dlaunch *l = dring_start(g, &w, &s, &rv);
    if (l == NULL)
        return rv;
    cumod_work_item it = t->packed->it;
    it.a = dm->handle;
    it.b = k->k.index;
    char what[512] = "";
    const char *name = NULL;
    CUresult r =
        cumod__exec_launch_in(ex, dm->m, &it, (const char *)t->packed->params,
                              s, NULL, what, sizeof(what), &name);
    if (r == CUDA_SUCCESS)
        r = cumod__dthread_track(ex, t, s, l);
    if (r != CUDA_SUCCESS) {
        char msg[1024];
        cumod__exec_check_lost(ex, r); /* answered by the front (above) */
        if (name != NULL)
            snprintf(what, sizeof(what), "%s failed", name);
        int st = cumod__cu_err(&ex->drv, r, what, msg, sizeof(msg));
        cumod__dlaunch_end(ex, l, st, msg, 0, 1);
    }
    return 1;
}

/* A GEMM of req (decoded in full): served here when the front has made it
 * possible (cuBLAS loaded, the stream's workspace charged: SNAP_GEMM), it
 * is plain (answered when complete or enqueued, no deadline) and its
 * checks pass against the snapshot; 1 when served, 0 to forward it (the
 * front then says what was wrong, in its words). A GEMM through the front
 * cost a waited 4096^3 BF16 one 15-17 us more than in process (H200,
 * bench/bench_long.py): the hops there and back. */
static int
dring_gemm(dthread *t, dring *g, const Cumod__Request *req, uint64_t t0,
           uint64_t end)
{
    struct cumod_direct *d = g->d;
    cumod_exec *ex = d->ex;
    const Cumod__Gemm *q = req->gemm;
    cumod_direct_page *pg =
        atomic_load_explicit(&d->page, memory_order_acquire);
    uint32_t flags =
        pg != NULL ? atomic_load_explicit(&pg->flags, memory_order_acquire) : 0;
    uint64_t key;
    cumod_chan_gemm cg;
    cumod_status st;

    if (!(flags & CUMOD_SNAP_F_DIRECT) ||
        (q->when != CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE &&
         q->when != CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED) ||
        q->deadline_ms != 0 ||
        atomic_load_explicit(&d->deadline_ms, memory_order_relaxed) != 0 ||
        atomic_load_explicit(&d->max_deadline_ms, memory_order_relaxed) != 0 ||
        !cumod__exec_blas_ready(ex) ||
        cumod__idmap_get(&g->gemm_ws, q->stream + 1) == NULL)
        return 0;
    if (q->stream == 0)
        key = (uint64_t)g->session << CUMOD_CHAN_STREAM_BITS;
    else if ((key = (uint64_t)(uintptr_t)cumod__idmap_get(&g->streams,
                                                          q->stream)) == 0)
        return 0;
    if (cumod__gemm_check(q, cumod__direct_buf_size, g, &cg, &st) != CUMOD_OK)
        return 0;
    dstart w = {
        .id = req->id, .key = key, .t0 = t0, .end = end, .when = (int)q->when};
    CUstream s;
    int rv;
    dlaunch *l = dring_start(g, &w, &s, &rv);
    if (l == NULL)
        return rv;
    char msg[1024];
    CUresult lost = CUDA_SUCCESS;
    cumod_err code =
        cumod__exec_gemm(ex, &cg, sizeof(cg), s, msg, sizeof(msg), &lost);
    CUresult r = CUDA_SUCCESS;
    if (code == CUMOD_OK &&
        (r = cumod__dthread_track(ex, t, s, l)) != CUDA_SUCCESS)
        code = cumod__cu_err(&ex->drv, r, "cuEventRecord after a GEMM", msg,
                             sizeof(msg));
    if (code != CUMOD_OK) {
        if (lost != CUDA_SUCCESS)
            cumod__exec_check_lost(ex, lost);
        if (r != CUDA_SUCCESS)
            cumod__exec_check_lost(ex, r);
        cumod__dlaunch_end(ex, l, code, msg, 0, 1);
    }
    return 1;
}

/* Whether l, decoded, may be served here: answered when complete or
 * when enqueued (with a ticket of the executor's), no deadline, the unit
 * launching directly. */
static int
dring_plain(struct cumod_direct *d, const Cumod__Launch *l)
{
    /* The flags as the page says them (written by the front before it
     * answers anything after a change: a suspect, a stop). */
    cumod_direct_page *pg =
        atomic_load_explicit(&d->page, memory_order_acquire);
    uint32_t flags =
        pg != NULL ? atomic_load_explicit(&pg->flags, memory_order_acquire) : 0;
    return (flags & CUMOD_SNAP_F_DIRECT) &&
           (l->when == CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE ||
            l->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED ||
            l->when == CUMOD__REPLY_WHEN__REPLY_WHEN_POSTED) &&
           l->deadline_ms == 0 &&
           atomic_load_explicit(&d->deadline_ms, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&d->max_deadline_ms, memory_order_relaxed) == 0;
}

/* Whether dm may be launched directly now: the direct page (which the
 * front writes before it answers anything after taking a module back)
 * still holds its handle in its slot. */
static int
dmod_current(struct cumod_direct *d, const dmod *dm)
{
    cumod_direct_page *pg =
        atomic_load_explicit(&d->page, memory_order_acquire);
    return pg != NULL && dm->slot != 0 && dm->slot < CUMOD_DIRECT_SLOTS &&
           atomic_load_explicit(&pg->valid[dm->slot], memory_order_acquire) ==
               dm->handle;
}

/* A Wait (request id) for ticket: answered here if the ticket is this
 * attach's (at once, or when its launch completes), or a posted launch's
 * in flight here or failed here: 1; 0 to forward it (the front's ticket,
 * an earlier attach's, a posted launch the front served or that is done);
 * -1 when no slot is free now (the record is taken again later). */
static int
dring_wait(dthread *t, dring *g, uint64_t id, uint64_t ticket, uint64_t t0,
           uint64_t end)
{
    int posted = (ticket & CUMOD_DRING_TICKET_BIT) == 0 &&
                 (ticket & CUMOD_TICKET_POSTED) != 0;
    if (!posted &&
        ((ticket & CUMOD_DRING_TICKET_BIT) == 0 || ticket < g->ticket_first))
        return 0;
    dlaunch *l = NULL;
    for (uint32_t i = 0; i <= t->npend && l == NULL; i++) {
        const dpend *p = i < t->npend ? &t->pend[i]
                         : t->opened  ? &t->open
                                      : NULL;
        for (dlaunch *x = p ? p->l : NULL; x != NULL && l == NULL; x = x->gnext)
            if (x->g == g && x->ticket == ticket)
                l = x;
    }
    dwait *w = l != NULL ? malloc(sizeof(*w)) : NULL;
    if (l != NULL && w == NULL)
        return -1;
    pthread_mutex_lock(&g->mtx);
    if (g->gone) {
        pthread_mutex_unlock(&g->mtx);
        free(w);
        return 1; /* nothing more goes into it */
    }
    if (posted && l == NULL && cumod__dring_failed_find(g, ticket) == NULL) {
        /* Not in flight here, no failure kept here: the front's to say
         * (it served the launch, or the launch is done). */
        pthread_mutex_unlock(&g->mtx);
        return 0;
    }
    /* Named as its launch is, should the context be lost meanwhile. */
    int32_t slot = cumod__dring_slot_take(
        g, &(cumod_dring_slot){.id = id,
                               .handle = l != NULL ? l->handle : 0,
                               .kernel = l != NULL ? l->kernel : 0,
                               .start_ms = t0 / 1000000,
                               .end = end,
                               .ticket = ticket,
                               .wait = 1});
    if (slot == DRING_NO_SLOT) {
        pthread_mutex_unlock(&g->mtx);
        free(w);
        return -1;
    }
    g->requests++;
    if (l != NULL) {
        *w = (dwait){.id = id, .slot = slot, .next = l->waits};
        l->waits = w;
        pthread_mutex_unlock(&g->mtx);
        dring_publish(g, end); /* in its slot now */
        return 1;
    }
    int code = CUMOD_OK;
    char msg[256] = "";
    if (cumod__dring_failed_take(g, ticket, &code, msg, sizeof(msg)) ||
        posted || ticket < g->ticket_next) {
        cumod__dring_wait_answer(g, id, slot, ticket, code, msg);
    } else {
        uint8_t reply[512];
        snprintf(msg, sizeof(msg),
                 "ticket %llu was never given to this connection",
                 (unsigned long long)ticket);
        size_t len = cumod__dring_pack(id, CUMOD_ENOENT, msg, 0, 0, reply,
                                       sizeof(reply));
        (void)cumod__dring_put_locked(g, reply, len, slot);
    }
    cumod__dring_slot_free(g, slot);
    pthread_mutex_unlock(&g->mtx);
    dring_publish(g, end);
    cumod__dring_wake(g);
    return 1;
}

/* One record (copied out of the ring): launched here, or forwarded. 0,
 * DRING_AGAIN (taken again later), or -errno of the channel. */
static int
dring_record(dthread *t, dring *g, const uint8_t *bytes, size_t len,
             uint64_t t0, uint64_t end)
{
    struct cumod_direct *d = g->d;
    Cumod__Request *req = NULL;
    int served = 0;

    if (!cumod__decode_launch(&t->dec, bytes, len, &req)) {
        /* A GEMM (small, and the body says so before anything is
         * decoded: the rest goes on undecoded). */
        cumod_status dst;
        if (g->fwd_out > 0 || len > DRING_GEMM_MAX ||
            cumod__decode_body_field(bytes, len) != CUMOD__REQUEST__BODY_GEMM ||
            cumod__decode_request(&t->dec, bytes, len, &req, &dst) !=
                CUMOD_OK ||
            req->version != CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1 ||
            req->body_case != CUMOD__REQUEST__BODY_GEMM || req->id == 0) {
            req = NULL;
            cumod__decoder_release(&t->dec);
            return dring_forward(t, g, bytes, len, end);
        }
        served = dring_gemm(t, g, req, t0, end);
        cumod__decoder_release(&t->dec);
        goto done;
    }
    if (req->body_case == CUMOD__REQUEST__BODY_WAIT &&
        req->version == CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1 &&
        req->id != 0) {
        /* Its own tickets' Waits: in any order with forwarded records
         * (the ticket's launch was taken before it, here). */
        served = dring_wait(t, g, req->id, req->wait->ticket, t0, end);
        cumod__decoder_release(&t->dec);
        goto done;
    }
    if (g->fwd_out > 0 ||
        req->version != CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1 ||
        req->body_case != CUMOD__REQUEST__BODY_LAUNCH ||
        !dring_plain(d, req->launch) || req->id == 0)
        goto forward;
    const Cumod__Launch *l = req->launch;
    uint64_t key;
    if (l->stream == 0)
        key = (uint64_t)g->session << CUMOD_CHAN_STREAM_BITS;
    else if ((key = (uint64_t)(uintptr_t)cumod__idmap_get(&g->streams,
                                                          l->stream)) == 0)
        goto forward;
    char module[129];
    const char *fn;
    cumod_status st;
    if (cumod__check_kernel_name(l->kernel, module, &fn, &st) != CUMOD_OK)
        goto forward;
    pthread_rwlock_rdlock(&d->mods_rw);
    const dmod *dm = cumod__direct_mod_find(d, module);
    const dkern *k = dm ? cumod__direct_kern_find(dm, fn) : NULL;
    cumod_launch_opts opts = {
        .allow_pointer_values =
            (atomic_load_explicit(&d->flags, memory_order_relaxed) &
             CUMOD_SNAP_F_POINTER_VALUES) != 0,
        .carveout = k ? k->carveout : -1,
    };
    if (k != NULL && dmod_current(d, dm) &&
        (l->generation == 0 || l->generation == dm->generation) &&
        cumod__launch_check(&d->dev, &k->k, l, &opts, cumod__direct_buf, g,
                            t->packed, &st) == CUMOD_OK)
        served = dring_launch(t, g, req, dm, k, key, t0, end);
    pthread_rwlock_unlock(&d->mods_rw);
    cumod__decoder_release(&t->dec);
done:
    if (served < 0)
        return DRING_AGAIN;
    if (served)
        return 0;
    /* Refused or not known here: the front says why (its checks, its
     * words, its counts), or serves it. */
    return dring_forward(t, g, bytes, len, end);
forward:
    if (req != NULL)
        cumod__decoder_release(&t->dec);
    return dring_forward(t, g, bytes, len, end);
}

/* Takes up to DRING_TAKE_MAX records of g (its thread's): how many, or
 * -errno of the channel. */
int
cumod__dring_take(dthread *t, dring *g)
{
    int n = 0, err = 0;

    while (n < DRING_TAKE_MAX && !g->gone && !g->detaching) {
        /* Every forwarded record answered, their resumes on their way
         * (behind the work they made): wait for them a moment rather than
         * forward the next record too, which would keep a client that
         * alternates kinds off the direct path. */
        if (g->fwd_out > 0 &&
            atomic_load_explicit(&g->st->fwd_answered, memory_order_acquire) >=
                g->fwd_total) {
            uint64_t now = cumod__mono_ns();
            if (g->defer_ns == 0)
                g->defer_ns = now;
            if (now - g->defer_ns < DRING_DEFER_NS)
                break;
        } else {
            g->defer_ns = 0;
        }
        uint64_t tail =
            atomic_load_explicit(&g->h->sq_tail, memory_order_acquire);
        uint64_t head = g->sq_head, step = 0;
        const char *why = NULL;
        cumod_ring_rec rec;
        int got =
            cumod__ring_next(g->sq, g->sq_size, head, tail, &rec, &step, &why);
        if (got == 0)
            break;
        if (got < 0) {
            cumod__dring_bad(g, why);
            break;
        }
        uint64_t t0 = cumod__mono_ns();
        if (rec.kind == CUMOD_RING_REC_MSG) {
            /* Out of the shared memory first: the client could change the
             * bytes while they are decoded. */
            if (rec.len > t->cap) {
                uint8_t *b = realloc(t->buf, rec.len);
                if (b == NULL) {
                    cumod__dring_bad(g, "out of memory for a record");
                    break;
                }
                t->buf = b;
                t->cap = rec.len;
            }
            memcpy(t->buf, g->sq + (head & (g->sq_size - 1)) + sizeof(rec),
                   rec.len);
        }
        g->sq_head = head + step;
        if (rec.kind == CUMOD_RING_REC_MSG) {
            err = dring_record(t, g, t->buf, rec.len, t0, g->sq_head);
            if (err == DRING_AGAIN) {
                /* Read again once a slot is free (its launches complete
                 * on this thread's next looks). */
                g->sq_head = head;
                g->stalled = 1;
                break;
            }
            g->stalled = 0;
            dring_publish(g, g->sq_head);
            if (err != 0)
                return err;
            n++;
        } else {
            dring_publish(g, g->sq_head);
        }
    }
    return n;
}
