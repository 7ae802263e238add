/* SPDX-License-Identifier: MIT */
/*
 * Direct launches (direct.h): sessions' rings in the executor, their
 * records taken by the submission thread that owns the session's
 * streams, launched or forwarded, and answered into the ring.
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
#include "evpool.h"
#include "inflight.h"
#include "launch.h"
#include "reply.h"
#include "streams.h"
#include "submit.h"

/* Records a thread takes from one ring before it looks at its queue and
 * its other rings again. */
#define DRING_TAKE_MAX 64
/* Statistics go to the front this often while launches keep coming; the
 * doorbell thread sends what is left this long after a ring goes quiet,
 * and a forwarded record takes them first (so that the front counts a
 * ring's launches before it serves what the client sent after them). Not
 * one message per launch: a waited launch would pay a write(2). */
#define DRING_STATS_NS 1000000
/* How long a ring waits for the resumes of answers the front wrote. */
#define DRING_DEFER_NS 10000000
/* Slots kept for Waits: launches take the others, so that a Wait for a
 * ticket always finds one while the ring's launches fill theirs. */
#define DRING_WAIT_SLOTS 32

/* A Wait for a ticket still in flight: answered when it completes. */
typedef struct dwait {
    uint64_t id;
    int32_t slot;
    struct dwait *next;
} dwait;

/* A direct launch in flight. */
typedef struct dlaunch {
    dring *g;
    cumod_exec_module *m;
    uint64_t id, generation, handle;
    uint32_t kernel;
    int32_t slot;
    uint64_t t0_ns;  /* the record was taken */
    uint64_t ticket; /* answered when enqueued, with this ticket (0: not) */
    dwait *waits;    /* Waits for it, answered when it completes */
    struct dlaunch *gnext; /* the next of its completion group (dpend) */
} dlaunch;

static dthread *
direct_thread(struct cumod_direct *d, unsigned i)
{
    return &d->thr[i < d->n ? i : 0];
}

/* --- The ring's life ----------------------------------------------------- */

static int dring_stats_flush(dring *g, uint64_t min_age);

static void
dring_ref(dring *g)
{
    atomic_fetch_add(&g->refs, 1);
}

static void
dring_unref(dring *g)
{
    if (atomic_fetch_sub(&g->refs, 1) != 1)
        return;
    (void)dring_stats_flush(g, 0); /* nothing counted is lost */
    if (g->map != NULL)
        munmap(g->map, g->map_len);
    if (g->st != NULL)
        munmap(g->st, g->st_len);
    if (g->bell_fd >= 0)
        close(g->bell_fd);
    cumod__direct_ring_snap_fini(g);
    pthread_mutex_destroy(&g->mtx);
    free(g);
}

/* The client sleeps on cq_seq: wake it (a shared futex: the word is in
 * its mapping too), from the thread that answered. Not through a waking
 * thread, as the front's one loop does: measured on the H200 with 16-48
 * crowded clients, one waking thread at 88-90% of a core capped the
 * executor at 252-291k launches a second; the submission threads making
 * their own calls reached 280-306k with lower tails (bench/notes.md). */
static void
dring_wake(dring *g)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&g->h->client_waiting, memory_order_relaxed))
        return;
    atomic_fetch_add_explicit(&g->h->cq_seq, 1, memory_order_release);
    syscall(SYS_futex, &g->h->cq_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Tells the front a ring was given up (its client broke the rules). */
static void
dring_tell_bad(dring *g, const char *why)
{
    struct cumod_direct *d = g->d;
    char buf[sizeof(cumod_chan_ring_msg) + 512];
    cumod_chan_ring_msg m = {.session = g->session};
    int n = snprintf(buf + sizeof(m), 512, "%s", why);
    m.len = (uint32_t)(n < 512 ? n : 511);
    memcpy(buf, &m, sizeof(m));
    cumod_chan_hdr h = {.op = CUMOD_CHAN_RING_BAD};
    (void)cumod__exec_send(d->ex, &h, buf, sizeof(m) + m.len);
}

/* g's client broke its rules: nothing more is read or written, the
 * client is told (its header says closed) and the front hears why. With
 * g->mtx held. */
static int
dring_bad_locked(dring *g, const char *why)
{
    if (g->gone)
        return 0;
    g->gone = 1;
    CUMOD_LOGW("CUMOD-RING",
               "the ring %s of session %u (pid %d uid %d) is given up: %s; "
               "its client goes on over its connection",
               g->name, g->session, g->pid, g->uid, why);
    atomic_store_explicit(&g->h->closed, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g->h->cq_seq, 1, memory_order_release);
    syscall(SYS_futex, &g->h->cq_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
    return 1;
}

static void
dring_bad(dring *g, const char *why)
{
    pthread_mutex_lock(&g->mtx);
    int told = dring_bad_locked(g, why);
    pthread_mutex_unlock(&g->mtx);
    if (told)
        dring_tell_bad(g, why);
}

/* --- Answers --------------------------------------------------------------
 */

/* The statistics since the last, to the front (with g->mtx held: the
 * payload built; sent by the caller after it lets go). 0 bytes: none. */
static size_t
dring_stats_take(dring *g, char *buf, size_t cap)
{
    if (g->requests == 0 && g->lat_count == 0 && g->nstat == 0)
        return 0;
    cumod_chan_dstats s = {.session = g->session,
                           .n = g->nstat,
                           .requests = g->requests,
                           .lat_count = g->lat_count,
                           .lat_sum_ns = g->lat_sum_ns};
    memcpy(s.lat_bucket, g->lat_bucket, sizeof(s.lat_bucket));
    size_t len = sizeof(s) + g->nstat * sizeof(cumod_chan_dstat);
    if (len > cap)
        return 0;
    memcpy(buf, &s, sizeof(s));
    for (uint32_t i = 0; i < g->nstat; i++) {
        cumod_chan_dstat e = {.handle = g->stat[i].handle,
                              .kernel = g->stat[i].kernel,
                              .ok = g->stat[i].ok,
                              .failed = g->stat[i].failed,
                              .gpu_ns = g->stat[i].gpu_ns};
        memcpy(buf + sizeof(s) + i * sizeof(e), &e, sizeof(e));
    }
    g->requests = g->lat_count = g->lat_sum_ns = 0;
    memset(g->lat_bucket, 0, sizeof(g->lat_bucket));
    g->nstat = 0;
    g->stats_ns = cumod__mono_ns();
    atomic_fetch_add_explicit(&g->stats_sending, 1, memory_order_relaxed);
    return len;
}

#define DRING_STATS_BYTES                                                      \
    (sizeof(cumod_chan_dstats) + DRING_STATS * sizeof(cumod_chan_dstat))

/* Sends what dring_stats_take took (and counted in stats_sending). */
static void
dring_stats_send(dring *g, const char *buf, size_t len)
{
    if (len == 0)
        return;
    cumod_chan_hdr h = {.op = CUMOD_CHAN_DIRECT_STATS};
    (void)cumod__exec_send(g->d->ex, &h, buf, len);
    atomic_fetch_sub_explicit(&g->stats_sending, 1, memory_order_release);
}

/* Sends g's statistics if they are at least min_age old: 1 when some were
 * left (too young), else 0. */
static int
dring_stats_flush(dring *g, uint64_t min_age)
{
    char stats[DRING_STATS_BYTES];
    size_t slen = 0;
    int left = 0;

    pthread_mutex_lock(&g->mtx);
    if (cumod__mono_ns() - g->stats_ns >= min_age)
        slen = dring_stats_take(g, stats, sizeof(stats));
    else
        left = g->requests != 0 || g->lat_count != 0 || g->nstat != 0;
    pthread_mutex_unlock(&g->mtx);
    dring_stats_send(g, stats, slen);
    return left;
}

/* Statistics left behind by a launch: the doorbell thread sends them
 * unless more come first. */
static void
dring_stats_due(struct cumod_direct *d)
{
    if (atomic_exchange_explicit(&d->stats_due, 1, memory_order_acq_rel) == 0) {
        uint64_t one = 1;
        (void)!write(d->tick_fd, &one, sizeof(one));
    }
}

/* A launch's figures (g->mtx held). 1 when the table is full: send. */
static int
dring_stat_add(dring *g, const dlaunch *l, int ok, uint64_t gpu_ns,
               uint64_t now)
{
    uint32_t i;
    for (i = 0; i < g->nstat; i++)
        if (g->stat[i].handle == l->handle && g->stat[i].kernel == l->kernel)
            break;
    if (i == g->nstat) {
        g->stat[i] = (dring_stat){.handle = l->handle, .kernel = l->kernel};
        g->nstat++;
    }
    if (ok)
        g->stat[i].ok++;
    else
        g->stat[i].failed++;
    g->stat[i].gpu_ns += gpu_ns;
    uint64_t lat = now > l->t0_ns ? now - l->t0_ns : 0;
    g->lat_count++;
    g->lat_sum_ns += lat;
    cumod__lat_count(g->lat_bucket, lat);
    return g->nstat == DRING_STATS;
}

/* Writes bytes (a packed cumod.Reply) into g's cq (g->mtx held), under
 * the state block's lock (the front writes the answers it gives too): 0,
 * or -1 when the client left its replies unread (the ring is given
 * up). */
static int
dring_put_locked(dring *g, const uint8_t *bytes, size_t len, int32_t slot)
{
    if (g->gone)
        return -1;
    int rv = pthread_mutex_lock(&g->st->cq_lock);
    if (rv == EOWNERDEAD) /* the front died holding it: we exit soon */
        pthread_mutex_consistent(&g->st->cq_lock);
    uint64_t tail = atomic_load_explicit(&g->st->cq_tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&g->h->cq_head, memory_order_acquire);
    if (cumod__ring_put_bytes(g->cq, g->cq_size, head, &tail, bytes, len) !=
        0) {
        pthread_mutex_unlock(&g->st->cq_lock);
        dring_bad_locked(g, "its completion ring is full (replies left "
                            "unread)");
        return -1;
    }
    if (slot >= 0)
        atomic_store_explicit(&g->st->slot[slot].answered_at, tail,
                              memory_order_release);
    atomic_store_explicit(&g->st->cq_tail, tail, memory_order_release);
    atomic_store_explicit(&g->h->cq_tail, tail, memory_order_release);
    pthread_mutex_unlock(&g->st->cq_lock);
    return 0;
}

/* The answer to request id: done (code 0, generation) or an error. */
static size_t
dring_pack(uint64_t id, int code, const char *msg, uint64_t generation,
           uint64_t ticket, uint8_t *buf, size_t cap)
{
    Cumod__Reply rep = CUMOD__REPLY__INIT;
    Cumod__DoneReply done = CUMOD__DONE_REPLY__INIT;
    Cumod__Status st = CUMOD__STATUS__INIT;

    rep.version = CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    rep.id = id;
    if (code == CUMOD_OK) {
        done.generation = generation;
        done.ticket = ticket;
        rep.body_case = CUMOD__REPLY__BODY_DONE;
        rep.done = &done;
    } else {
        st.code = code;
        st.message = (char *)(msg ? msg : "failed");
        rep.status = &st;
    }
    size_t len = cumod__reply__get_packed_size(&rep);
    if (len > cap)
        return 0;
    cumod__reply__pack(&rep, buf);
    return len;
}

/* A slot for a record (g->mtx held): its index, or DRING_NO_SLOT. */
static int32_t
dring_slot_take(dring *g, uint64_t id, uint64_t end, uint64_t t0)
{
    if (g->nfree == 0)
        return DRING_NO_SLOT;
    int32_t slot = g->free_slot[--g->nfree];
    cumod_dring_slot *sl = &g->st->slot[slot];
    sl->handle = 0;
    sl->kernel = 0;
    sl->stream = 0;
    sl->ticket = 0;
    sl->wait = 0;
    sl->posted = 0;
    sl->start_ms = t0 / 1000000;
    sl->end = end;
    atomic_store_explicit(&sl->answered_at, 0, memory_order_relaxed);
    atomic_store_explicit(&sl->id, id, memory_order_release);
    return slot;
}

static void
dring_slot_free(dring *g, int32_t slot)
{
    atomic_store_explicit(&g->st->slot[slot].id, 0, memory_order_release);
    g->free_slot[g->nfree++] = slot;
}

/* "ticket N: what" */
static void
dring_ticket_msg(char *buf, size_t cap, uint64_t ticket, int code,
                 const char *msg)
{
    snprintf(buf, cap, "ticket %llu: %s", (unsigned long long)ticket,
             msg != NULL && msg[0] != '\0' ? msg : cumod_strerror(code));
}

/* The answer to a Wait (in slot, or none) for ticket: done, or code with
 * msg (g->mtx held). */
static void
dring_wait_answer(dring *g, uint64_t id, int32_t slot, uint64_t ticket,
                  int code, const char *msg)
{
    uint8_t reply[1024];
    char text[600];
    if (code != CUMOD_OK)
        dring_ticket_msg(text, sizeof(text), ticket, code, msg);
    size_t len = dring_pack(id, code, code != CUMOD_OK ? text : NULL, 0, 0,
                            reply, sizeof(reply));
    (void)dring_put_locked(g, reply, len, slot);
}

/* A failed ticket kept for a later Wait (g->mtx held): the newest
 * CUMOD_DRING_FAILED, in the state block, where the front finds them if
 * it takes the ring back. */
static void
dring_failed_add(dring *g, uint64_t ticket, int code, const char *msg)
{
    cumod_dring_state *st = g->st;
    uint32_t i;
    if (st->nfailed < CUMOD_DRING_FAILED) {
        i = (st->failed_at + st->nfailed) % CUMOD_DRING_FAILED;
        st->nfailed++;
    } else {
        i = st->failed_at; /* the oldest goes */
        st->failed_at = (st->failed_at + 1) % CUMOD_DRING_FAILED;
    }
    cumod_dring_failed *f = &st->failed[i];
    f->code = code;
    snprintf(f->msg, sizeof(f->msg), "%s",
             msg != NULL && msg[0] != '\0' ? msg : cumod_strerror(code));
    f->ticket = ticket;
}

/* ticket's failure if one is kept (and then forgotten: reported once), g->mtx
 * held: 1 and *code, msg; else 0. */
static int
dring_failed_take(dring *g, uint64_t ticket, int *code, char *msg, size_t cap)
{
    cumod_dring_state *st = g->st;
    for (uint32_t n = 0; n < st->nfailed && n < CUMOD_DRING_FAILED; n++) {
        cumod_dring_failed *f =
            &st->failed[(st->failed_at + n) % CUMOD_DRING_FAILED];
        if (f->ticket != ticket)
            continue;
        *code = f->code;
        snprintf(msg, cap, "%s", f->msg);
        f->ticket = 0;
        return 1;
    }
    return 0;
}

/* l, answered when enqueued, ended with code (g->mtx held): its Waits
 * answered (when answer), or a failure kept. Returns 0: l itself is not
 * answered again. */
static int
dring_ticket_end(dring *g, dlaunch *l, int code, const char *msg, int answer)
{
    int waited = l->waits != NULL;
    while (l->waits != NULL) {
        dwait *w = l->waits;
        l->waits = w->next;
        if (answer)
            dring_wait_answer(g, w->id, w->slot, l->ticket, code, msg);
        dring_slot_free(g, w->slot);
        free(w);
    }
    if (code != CUMOD_OK && !waited)
        dring_failed_add(g, l->ticket, code, msg);
    return 0;
}

static void dring_detach_done(dring *g);

/* A direct launch is over: answered (unless the context is lost: then the
 * front answers it from the state block, once this process is gone), its
 * slot freed, its module and ring let go. */
static void
dlaunch_end(cumod_exec *ex, dlaunch *l, int code, const char *msg,
            uint64_t gpu_ns, int answer)
{
    /* answer 0: the ring is given up, nothing more goes into it */
    dring *g = l->g;
    uint8_t reply[1024];
    char stats[DRING_STATS_BYTES];
    size_t slen = 0;
    uint64_t now = cumod__mono_ns();
    /* A launch answered when enqueued was answered then: its Waits hear
     * how it ended, or its failure is kept for a later one. */
    int acked = l->ticket != 0;
    size_t len = answer && !acked ? dring_pack(l->id, code, msg, l->generation,
                                               0, reply, sizeof(reply))
                                  : 0;

    pthread_mutex_lock(&g->mtx);
    if (answer && !acked)
        (void)dring_put_locked(g, reply, len, l->slot);
    int woke = acked && answer && l->waits != NULL;
    if (acked)
        answer = dring_ticket_end(g, l, code, msg, answer);
    if (l->slot >= 0) {
        atomic_store_explicit(&g->st->slot[l->slot].id, 0,
                              memory_order_release);
        g->free_slot[g->nfree++] = l->slot;
    }
    g->inflight--;
    atomic_store_explicit(&g->st->inflight, g->inflight, memory_order_release);
    int full = dring_stat_add(g, l, code == CUMOD_OK, gpu_ns, now);
    if (full || now - g->stats_ns >= DRING_STATS_NS)
        slen = dring_stats_take(g, stats, sizeof(stats));
    int last = g->detaching && g->inflight == 0 && !g->detach_told;
    if (last)
        g->detach_told = 1;
    pthread_mutex_unlock(&g->mtx);
    if (answer || woke)
        dring_wake(g);
    dring_stats_send(g, stats, slen);
    if (slen == 0)
        dring_stats_due(g->d);
    if (last)
        dring_detach_done(g);
    atomic_fetch_sub(&l->m->direct, 1);
    (void)ex;
    dring_unref(g);
    free(l);
}

/* The completion thread (or the submission thread, inline): l's event
 * said r. */
static void
dlaunch_done(cumod_exec *ex, void *arg, CUresult r, uint64_t gpu_ns)
{
    dlaunch *l = arg;
    if (r == CUDA_SUCCESS) {
        dlaunch_end(ex, l, CUMOD_OK, NULL, gpu_ns, 1);
        return;
    }
    if (cumod__cu_context_lost(r)) {
        /* The front answers it, naming the culprit, from the state block
         * (this process exits right after). */
        return;
    }
    char msg[512];
    int st = cumod__cu_err(&ex->drv, r, "the work failed on the device", msg,
                           sizeof(msg));
    dlaunch_end(ex, l, st, msg, gpu_ns, 1);
}

/* --- Completions ------------------------------------------------------- */

/* An event recorded after the launches of p (on p->s), and p among t's
 * launches in flight. */
static CUresult
dthread_push(cumod_exec *ex, dthread *t, dpend *p)
{
    CUevent ev = NULL;
    CUresult r;
    if (t->npend == t->pend_cap) {
        uint32_t cap = t->pend_cap ? t->pend_cap * 2 : 64;
        dpend *np = realloc(t->pend, cap * sizeof(*np));
        if (np == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        t->pend = np;
        t->pend_cap = cap;
    }
    if ((r = cumod__exec_event_get(ex, &ev)) != CUDA_SUCCESS)
        return r;
    if ((r = ex->drv.event_record(ev, p->s)) != CUDA_SUCCESS) {
        cumod__exec_event_put(ex, ev);
        return r;
    }
    p->ev = ev;
    t->pend[t->npend++] = *p;
    return CUDA_SUCCESS;
}

/* t's open group gets its event (the end of a look, or a launch that
 * cannot join it). Should that fail, its launches end with the error
 * (on their streams already: their tickets say so). */
static void
dthread_close(cumod_exec *ex, dthread *t)
{
    if (!t->opened)
        return;
    t->opened = 0;
    CUresult r = dthread_push(ex, t, &t->open);
    if (r == CUDA_SUCCESS)
        return;
    char msg[512];
    cumod__exec_check_lost(ex, r);
    int st =
        cumod__cu_err(&ex->drv, r, "cuEventRecord failed", msg, sizeof(msg));
    for (dlaunch *l = t->open.l, *next; l != NULL; l = next) {
        next = l->gnext;
        dlaunch_end(ex, l, st, msg, 0, 1);
    }
}

/* l was launched on s by thread t: an event after it (or after the
 * launches with tickets it joins), which t polls (dthread_complete). */
static CUresult
dthread_track(cumod_exec *ex, dthread *t, CUstream s, dlaunch *l)
{
    int group = l->ticket != 0;
    if (group && t->opened && t->open.s == s && t->open.n < DGROUP_MAX) {
        t->open.last->gnext = l;
        t->open.last = l;
        t->open.n++;
        return CUDA_SUCCESS;
    }
    dthread_close(ex, t);
    dpend p = {.s = s, .l = l, .last = l, .n = 1};
    if (group) {
        t->open = p;
        t->opened = 1;
        return CUDA_SUCCESS;
    }
    return dthread_push(ex, t, &p);
}

/* The launches of t that completed: answered. How many. A lost context
 * ends the process (the front answers the rest from the state block). */
static int
dthread_complete(cumod_exec *ex, dthread *t)
{
    int done = 0;
    /* A stream completes in order: behind a launch not done yet, nothing
     * of its stream is looked at (a cuEventQuery each would cost a pass
     * over many launches answered when enqueued 1-2 us apiece). */
    CUstream busy[8];
    uint32_t nbusy = 0;
    for (uint32_t i = 0; i < t->npend;) {
        uint32_t b;
        for (b = 0; b < nbusy && busy[b] != t->pend[i].s; b++)
            ;
        if (b < nbusy) {
            i++;
            continue;
        }
        CUresult r = ex->drv.event_query(t->pend[i].ev);
        if (r == CUDA_ERROR_NOT_READY) {
            if (nbusy < 8)
                busy[nbusy++] = t->pend[i].s;
            i++;
            continue;
        }
        dpend p = t->pend[i];
        /* in order: the oldest are looked at first */
        memmove(&t->pend[i], &t->pend[i + 1],
                (t->npend - i - 1) * sizeof(*t->pend));
        t->npend--;
        if (r != CUDA_SUCCESS)
            cumod__exec_check_lost(ex, r);
        cumod__exec_event_put(ex, p.ev);
        uint64_t now = cumod__mono_ns();
        for (dlaunch *l = p.l, *next; l != NULL; l = next) {
            next = l->gnext;
            dlaunch_done(ex, l, r, now > l->t0_ns ? now - l->t0_ns : 0);
            done++;
        }
    }
    return done;
}

int
cumod__direct_drain(cumod_exec *ex, unsigned index)
{
    struct cumod_direct *d = ex->direct;
    if (d == NULL || index >= d->n)
        return 0;
    dthread *t = &d->thr[index];
    dthread_close(ex, t);
    while (t->npend > 0)
        if (dthread_complete(ex, t) == 0)
            cumod__cpu_relax();
    return 0;
}

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
            dring_bad(g, "out of memory for a record");
            return 0;
        }
        t->fwd = b;
        t->fwd_cap = need;
    }
    /* The launches before it counted first, whoever sends them. */
    (void)dring_stats_flush(g, 0);
    while (atomic_load_explicit(&g->stats_sending, memory_order_acquire) != 0)
        sched_yield();
    cumod_chan_ring_msg m = {
        .session = g->session, .len = (uint32_t)len, .end = end};
    memcpy(t->fwd, &m, sizeof(m));
    memcpy(t->fwd + sizeof(m), bytes, len);
    g->fwd_out++;
    g->fwd_total++;
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
    size_t len = dring_pack(l->id, CUMOD_OK, NULL, l->generation, l->ticket,
                            reply, sizeof(reply));
    (void)dring_put_locked(g, reply, len, l->slot);
    pthread_mutex_unlock(&g->mtx);
    dring_wake(g);
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
    dlaunch *l = malloc(sizeof(*l));
    CUresult r;
    int32_t slot;

    if (l == NULL)
        return 0;
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
        return full && req->launch->when == CUMOD__REPLY_WHEN__REPLY_WHEN_POSTED
                   ? -1
                   : 0;
    }
    slot = g->free_slot[--g->nfree];
    cumod_dring_slot *sl = &g->st->slot[slot];
    sl->handle = dm->handle;
    sl->kernel = k->k.index;
    sl->stream = (uint32_t)(key & ((1u << CUMOD_CHAN_STREAM_BITS) - 1));
    sl->start_ms = t0 / 1000000;
    sl->end = end;
    int posted = req->launch->when == CUMOD__REPLY_WHEN__REPLY_WHEN_POSTED;
    sl->ticket = posted ? CUMOD_TICKET_POSTED | req->id : 0;
    sl->wait = 0;
    sl->posted = (uint32_t)posted;
    atomic_store_explicit(&sl->answered_at, 0, memory_order_relaxed);
    atomic_store_explicit(&sl->id, req->id, memory_order_release);
    g->inflight++;
    g->requests++;
    atomic_store_explicit(&g->st->inflight, g->inflight, memory_order_release);
    pthread_mutex_unlock(&g->mtx);
    dring_publish(g, end); /* in its slot now */
    *l = (dlaunch){.g = g,
                   .m = dm->m,
                   .id = req->id,
                   .generation = dm->generation,
                   .handle = dm->handle,
                   .kernel = k->k.index,
                   .slot = slot,
                   .t0_ns = t0,
                   .ticket = sl->ticket};
    atomic_fetch_add(&dm->m->direct, 1);
    dring_ref(g);
    /* Answered when enqueued: now, checked and in its stream's order
     * (libcumod's "enqueued"), so that the client's next record comes
     * while this one is launched; an error in launching it is the
     * ticket's, for its Wait to report. */
    if (req->launch->when == CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED)
        dring_ack(g, l);

    CUstream s = cumod__exec_stream(ex, key, 1, &r);
    if (s == NULL) {
        char msg[512];
        /* A lost context: the front answers it from its slot, once this
         * process is gone. */
        cumod__exec_check_lost(ex, r);
        int st = cumod__cu_err(&ex->drv, r, "cuStreamCreate failed", msg,
                               sizeof(msg));
        dlaunch_end(ex, l, st, msg, 0, 1);
        return 1;
    }
    cumod_work_item it = t->packed->it;
    it.a = dm->handle;
    it.b = k->k.index;
    char what[512] = "";
    const char *name = NULL;
    r = cumod__exec_launch_in(ex, dm->m, &it, (const char *)t->packed->params,
                              s, NULL, what, sizeof(what), &name);
    if (r == CUDA_SUCCESS)
        r = dthread_track(ex, t, s, l);
    if (r != CUDA_SUCCESS) {
        char msg[1024];
        cumod__exec_check_lost(ex, r); /* answered by the front (above) */
        if (name != NULL)
            snprintf(what, sizeof(what), "%s failed", name);
        int st = cumod__cu_err(&ex->drv, r, what, msg, sizeof(msg));
        dlaunch_end(ex, l, st, msg, 0, 1);
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
    if (posted && l == NULL) {
        /* Not in flight here: its failure if this executor kept one, else
         * the front's to say (it served the launch, or it was done). */
        int kept = 0;
        pthread_mutex_lock(&g->mtx);
        for (uint32_t n = 0; n < g->st->nfailed && n < CUMOD_DRING_FAILED; n++)
            kept |= g->st->failed[(g->st->failed_at + n) % CUMOD_DRING_FAILED]
                        .ticket == ticket;
        pthread_mutex_unlock(&g->mtx);
        if (!kept)
            return 0;
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
    int32_t slot = dring_slot_take(g, id, end, t0);
    if (slot == DRING_NO_SLOT) {
        pthread_mutex_unlock(&g->mtx);
        free(w);
        return -1;
    }
    cumod_dring_slot *sl = &g->st->slot[slot];
    sl->ticket = ticket;
    sl->wait = 1;
    g->requests++;
    if (l != NULL) {
        /* Named as its launch is, should the context be lost meanwhile. */
        sl->handle = l->handle;
        sl->kernel = l->kernel;
        *w = (dwait){.id = id, .slot = slot, .next = l->waits};
        l->waits = w;
        pthread_mutex_unlock(&g->mtx);
        dring_publish(g, end); /* in its slot now */
        return 1;
    }
    int code = CUMOD_OK;
    char msg[256] = "";
    if (dring_failed_take(g, ticket, &code, msg, sizeof(msg)) || posted ||
        ticket < g->ticket_next) {
        dring_wait_answer(g, id, slot, ticket, code, msg);
    } else {
        uint8_t reply[512];
        snprintf(msg, sizeof(msg),
                 "ticket %llu was never given to this connection",
                 (unsigned long long)ticket);
        size_t len =
            dring_pack(id, CUMOD_ENOENT, msg, 0, 0, reply, sizeof(reply));
        (void)dring_put_locked(g, reply, len, slot);
    }
    dring_slot_free(g, slot);
    pthread_mutex_unlock(&g->mtx);
    dring_publish(g, end);
    dring_wake(g);
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

    if (!cumod__decode_launch(&t->dec, bytes, len, &req))
        goto forward;
    if (req->body_case == CUMOD__REQUEST__BODY_WAIT &&
        req->version == CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1 &&
        req->id != 0) {
        /* Its own tickets' Waits: in any order with forwarded records
         * (the ticket's launch was taken before it, here). */
        served = dring_wait(t, g, req->id, req->wait->ticket, t0, end);
        cumod__decoder_release(&t->dec);
        if (served < 0)
            return DRING_AGAIN;
        if (served)
            return 0;
        return dring_forward(t, g, bytes, len, end);
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
static int
dring_take(dthread *t, dring *g)
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
            dring_bad(g, why);
            break;
        }
        uint64_t t0 = cumod__mono_ns();
        if (rec.kind == CUMOD_RING_REC_MSG) {
            /* Out of the shared memory first: the client could change the
             * bytes while they are decoded. */
            if (rec.len > t->cap) {
                uint8_t *b = realloc(t->buf, rec.len);
                if (b == NULL) {
                    dring_bad(g, "out of memory for a record");
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

/* --- Polling ------------------------------------------------------------- */

static void
dring_tell_crowded(dring *g)
{
    uint32_t hot =
        g->d->crowd != NULL
            ? atomic_load_explicit(&g->d->crowd->hot, memory_order_relaxed)
            : atomic_load_explicit(&g->d->nhot, memory_order_relaxed);
    int crowded = hot >= (g->crowded_at ? g->crowded_at : 2);
    if (crowded != g->crowded) {
        g->crowded = crowded;
        atomic_store_explicit(&g->h->crowded, (uint32_t)crowded,
                              memory_order_relaxed);
    }
}

static void
dring_heat(dring *g, uint64_t now)
{
    g->last_ns = now;
    if (g->hot)
        return;
    g->hot = 1;
    atomic_fetch_add(&g->d->nhot, 1);
    if (g->d->crowd != NULL)
        atomic_fetch_add(&g->d->crowd->hot, 1);
    atomic_store(&g->st->hot, 1);
    atomic_store_explicit(&g->h->daemon_polling, 1, memory_order_seq_cst);
}

static void
dring_cool(dring *g)
{
    if (!g->hot)
        return;
    g->hot = 0;
    atomic_fetch_sub(&g->d->nhot, 1);
    if (g->d->crowd != NULL)
        atomic_fetch_sub(&g->d->crowd->hot, 1);
    atomic_store(&g->st->hot, 0);
    atomic_store_explicit(&g->h->daemon_polling, 0, memory_order_seq_cst);
}

int
cumod__direct_poll(cumod_exec *ex, unsigned index)
{
    struct cumod_direct *d = ex->direct;
    if (d == NULL || index >= d->n)
        return 0;
    dthread *t = &d->thr[index];
    uint64_t now = 0;
    int found = t->npend > 0 ? dthread_complete(ex, t) : 0;

    CUMOD_LIST_FOREACH_SAFE(&t->rings, n)
    {
        dring *g = CUMOD_CONTAINER_OF(n, dring, link);
        int rung = atomic_exchange_explicit(&g->rung, 0, memory_order_acq_rel);
        if (!g->hot && !rung)
            continue;
        if (g->gone || g->detaching) {
            dring_cool(g);
            continue;
        }
        dring_tell_crowded(g);
        int got = dring_take(t, g);
        if (got < 0) {
            dthread_close(ex, t);
            return got;
        }
        if (now == 0)
            now = cumod__mono_ns();
        if (got > 0 || g->defer_ns != 0 || g->stalled) {
            /* records taken, or one waiting for its resumes or a slot:
             * polled on (never cold while a record waits unread) */
            dring_heat(g, now);
            found += got;
        } else if (!g->hot) {
            /* Rung with nothing to take (the client rang twice): poll
             * for a while all the same, as the front does. */
            dring_heat(g, now);
        } else if (now - g->last_ns > (uint64_t)g->busy_poll_us * 1000u) {
            /* Cold: the client rings from now on; a last look for what
             * it wrote before it saw the flag drop. */
            dring_cool(g);
            if ((got = dring_take(t, g)) < 0) {
                dthread_close(ex, t);
                return got;
            }
            if (got > 0 || g->defer_ns != 0 || g->stalled) {
                dring_heat(g, now);
                found += got;
            }
        }
    }
    /* The launches with tickets taken in this look get their event. */
    dthread_close(ex, t);
    return found;
}

int
cumod__direct_may_sleep(cumod_exec *ex, unsigned index)
{
    struct cumod_direct *d = ex->direct;
    if (d == NULL || index >= d->n)
        return 1;
    if (d->thr[index].npend > 0 || d->thr[index].opened)
        return 0; /* its launches in flight: polled */
    CUMOD_LIST_FOREACH(&d->thr[index].rings, n)
    {
        dring *g = CUMOD_CONTAINER_OF(n, dring, link);
        if (g->hot || atomic_load_explicit(&g->rung, memory_order_acquire))
            return 0;
    }
    return 1;
}

/* --- The doorbells ------------------------------------------------------- */

/* The statistics of rings gone quiet (the doorbell thread, when they are
 * due and nothing rang for a while). */
static void
direct_stats_scan(struct cumod_direct *d)
{
    int left = 0;
    size_t cur = 0;
    dring *g;

    atomic_store_explicit(&d->stats_due, 0, memory_order_release);
    pthread_mutex_lock(&d->map_mtx);
    while ((g = cumod__idmap_next(&d->rings, &cur, NULL)) != NULL)
        left |= dring_stats_flush(g, DRING_STATS_NS);
    pthread_mutex_unlock(&d->map_mtx);
    if (left)
        atomic_store_explicit(&d->stats_due, 1, memory_order_release);
}

void
cumod__direct_flush_stats(cumod_exec *ex)
{
    struct cumod_direct *d = ex->direct;
    size_t cur = 0;
    dring *g;
    if (d == NULL)
        return;
    pthread_mutex_lock(&d->map_mtx);
    while ((g = cumod__idmap_next(&d->rings, &cur, NULL)) != NULL)
        (void)dring_stats_flush(g, 0);
    pthread_mutex_unlock(&d->map_mtx);
}

static void *
direct_bell_main(void *arg)
{
    struct cumod_direct *d = arg;
    struct epoll_event ev[32];

    pthread_setname_np(pthread_self(), "exec-bell");
    for (;;) {
        int due = atomic_load_explicit(&d->stats_due, memory_order_acquire);
        int n = epoll_wait(d->epfd, ev, 32,
                           due ? (int)(DRING_STATS_NS / 1000000) + 1 : -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        if (due && cumod__mono_ns() - d->scan_ns >= DRING_STATS_NS) {
            direct_stats_scan(d);
            d->scan_ns = cumod__mono_ns();
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == UINT64_MAX)
                return NULL;                        /* stop_fd */
            if (ev[i].data.u64 == UINT64_MAX - 1) { /* tick_fd */
                uint64_t v;
                (void)!read(d->tick_fd, &v, sizeof(v));
                continue;
            }
            char drain[256];
            pthread_mutex_lock(&d->map_mtx);
            dring *g = cumod__idmap_get(&d->rings, ev[i].data.u64);
            if (g != NULL) {
                while (read(g->bell_fd, drain, sizeof(drain)) > 0)
                    ;
                atomic_store_explicit(&g->rung, 1, memory_order_release);
                cumod__submit_wake(d->ex->submit, g->thread);
            }
            pthread_mutex_unlock(&d->map_mtx);
        }
    }
    return NULL;
}

/* --- Commands ------------------------------------------------------------ */

/* DETACH's reply, once nothing of g is in flight. */
static void
dring_detach_done(dring *g)
{
    /* Its last statistics before the ring goes back. */
    (void)dring_stats_flush(g, 0);
    while (atomic_load_explicit(&g->stats_sending, memory_order_acquire) != 0)
        sched_yield();
    cumod_chan_ring r = {.session = g->session,
                         .sq_head = g->sq_head,
                         .cq_tail = atomic_load(&g->st->cq_tail)};
    cumod_chan_hdr h = {.op = CUMOD_CHAN_RING_DETACH, .seq = g->detach_seq};
    (void)cumod__exec_send(g->d->ex, &h, &r, sizeof(r));
}

/* RING_STATE: the state block, kept for the RING_ATTACH after it. */
static int
direct_state(struct cumod_direct *d, const cumod_chan_ring *r, int fd)
{
    void *p = mmap(NULL, sizeof(cumod_dring_state), PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return 0; /* no state: its ATTACH is refused */
    pthread_mutex_lock(&d->map_mtx);
    void *old = cumod__idmap_remove(&d->states, r->session);
    if (cumod__idmap_set(&d->states, r->session, p) != CUMOD_OK) {
        munmap(p, sizeof(cumod_dring_state));
        p = NULL;
    }
    pthread_mutex_unlock(&d->map_mtx);
    if (old != NULL)
        munmap(old, sizeof(cumod_dring_state));
    return 0;
}

/* Maps the ring of an ATTACH (fd, its client's sealed memfd) and checks
 * its header as the front did: NULL with *why when it cannot be. */
static dring *
direct_map(struct cumod_direct *d, const cumod_chan_ring *r, int fd,
           const char **why)
{
    dring *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        *why = "out of memory";
        return NULL;
    }
    g->d = d;
    g->bell_fd = -1;
    g->session = r->session;
    g->pid = r->pid;
    g->uid = r->uid;
    snprintf(g->name, sizeof(g->name), "%.200s", r->name);
    g->sq_head = r->sq_head;
    g->fwd_out = r->fwd_out;
    g->fwd_total = r->fwd_out;
    g->busy_poll_us = r->busy_poll_us;
    g->crowded_at = r->crowded_at;
    g->max_inflight = CUMOD_DRING_SLOTS;
    atomic_init(&g->refs, 1);
    pthread_mutex_init(&g->mtx, NULL);
    cumod__idmap_init(&g->bufs);
    cumod__idmap_init(&g->streams);
    for (int i = CUMOD_DRING_SLOTS - 1; i >= 0; i--)
        g->free_slot[g->nfree++] = i;
    g->map_len = r->map_len;
    if (r->map_len < CUMOD_RING_HDR_SIZE ||
        (g->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                       0)) == MAP_FAILED) {
        g->map = NULL;
        *why = "its shared memory cannot be mapped";
        goto fail;
    }
    /* The header, read once: the front checked it, the client may have
     * changed it since; the sizes must still fit the mapping. */
    cumod_ring_hdr hd;
    memcpy(&hd, g->map, sizeof(hd));
    if (hd.magic != CUMOD_RING_MAGIC || hd.hdr_size != CUMOD_RING_HDR_SIZE ||
        hd.sq_size < CUMOD_RING_MIN || hd.sq_size > CUMOD_RING_MAX ||
        hd.cq_size < CUMOD_RING_MIN || hd.cq_size > CUMOD_RING_MAX ||
        (hd.sq_size & (hd.sq_size - 1)) != 0 ||
        (hd.cq_size & (hd.cq_size - 1)) != 0 ||
        CUMOD_RING_HDR_SIZE + hd.sq_size + hd.cq_size > r->map_len) {
        *why = "its header changed since it was opened";
        goto fail;
    }
    g->h = (cumod_ring_hdr *)g->map;
    g->sq = g->map + CUMOD_RING_HDR_SIZE;
    g->sq_size = hd.sq_size;
    g->cq = g->sq + hd.sq_size;
    g->cq_size = hd.cq_size;
    pthread_mutex_lock(&d->map_mtx);
    g->st = cumod__idmap_remove(&d->states, r->session);
    pthread_mutex_unlock(&d->map_mtx);
    if (g->st == NULL) {
        *why = "its state block did not come";
        goto fail;
    }
    g->st_len = sizeof(cumod_dring_state);
    /* Its tickets go on from where the front's count of them got to: a
     * Wait for one from before (the front's, or an earlier attach's) is
     * the front's to answer. */
    g->ticket_first = atomic_load(&g->st->ticket_next);
    if ((g->ticket_first & CUMOD_DRING_TICKET_BIT) == 0)
        g->ticket_first = CUMOD_DRING_TICKET_BIT | 1;
    g->ticket_next = g->ticket_first;
    atomic_store(&g->st->ticket_next, g->ticket_next);
    close(fd);
    return g;
fail:
    close(fd);
    dring_unref(g);
    return NULL;
}

/* Posts a command for session's ring to its thread (in order with its
 * work). 0 or -errno of the channel. */
static int
direct_post(struct cumod_direct *d, unsigned thread, uint32_t op,
            const void *payload, size_t len)
{
    cumod_chan_hdr h = {.op = op, .len = len};
    if (cumod__submit_post(d->ex->submit, thread, &h, payload, len) != CUMOD_OK)
        CUMOD_LOGE("CUMOD-NOMEM", "a direct-ring command is lost");
    return 0;
}

/* The thread of session's ring, or -1. */
static int
direct_owner(struct cumod_direct *d, uint32_t session)
{
    pthread_mutex_lock(&d->map_mtx);
    dring *g = cumod__idmap_get(&d->rings, session);
    int th = g != NULL ? (int)g->thread : -1;
    pthread_mutex_unlock(&d->map_mtx);
    return th;
}

/* The thread with the fewest rings. */
static unsigned
direct_pick(struct cumod_direct *d)
{
    unsigned best = 0, bestn = UINT32_MAX;
    size_t counts[64] = {0}, cur = 0;
    void *v;
    pthread_mutex_lock(&d->map_mtx);
    while ((v = cumod__idmap_next(&d->rings, &cur, NULL)) != NULL) {
        dring *g = v;
        if (g->thread < 64)
            counts[g->thread]++;
    }
    pthread_mutex_unlock(&d->map_mtx);
    for (unsigned i = 0; i < d->n && i < 64; i++)
        if (counts[i] < bestn) {
            best = i;
            bestn = (unsigned)counts[i];
        }
    return best;
}

static int
direct_attach(struct cumod_direct *d, const cumod_chan_hdr *hdr,
              const cumod_chan_ring *r, int fd)
{
    const char *why = NULL;
    cumod_chan_hdr h = {.op = CUMOD_CHAN_RING_ATTACH, .seq = hdr->seq};

    if (direct_owner(d, r->session) >= 0) {
        close(fd);
        h.status = CUMOD_EEXIST;
        return cumod__exec_send(d->ex, &h, NULL, 0);
    }
    dring *g = direct_map(d, r, fd, &why);
    if (g == NULL) {
        CUMOD_LOGW("CUMOD-EXEC-DIRECT",
                   "the ring of session %u is not taken: %s; the front serves "
                   "it",
                   r->session, why);
        h.status = CUMOD_EINVAL;
        return cumod__exec_send(d->ex, &h, why, strlen(why));
    }
    /* Its streams' work must be nowhere else: every thread's queue runs
     * out first, then the session's streams go to its ring's thread. */
    cumod__submit_quiesce(d->ex->submit);
    g->thread = direct_pick(d);
    cumod__submit_pin(d->ex->submit, g->session, g->thread);
    pthread_mutex_lock(&d->map_mtx);
    cumod_err rv = cumod__idmap_set(&d->rings, g->session, g);
    pthread_mutex_unlock(&d->map_mtx);
    if (rv != CUMOD_OK) {
        cumod__submit_unpin(d->ex->submit, g->session);
        dring_unref(g);
        h.status = CUMOD_ENOMEM;
        return cumod__exec_send(d->ex, &h, NULL, 0);
    }
    /* The thread takes it in (its list), in order with what follows. */
    direct_post(d, g->thread, CUMOD_CHAN_RING_ATTACH, &g, sizeof(g));
    CUMOD_LOGD("CUMOD-EXEC-DIRECT",
               "session %u's ring %s is read here, by submission thread %u",
               g->session, g->name, g->thread);
    return cumod__exec_send(d->ex, &h, NULL, 0);
}

static int
direct_bell(struct cumod_direct *d, const cumod_chan_ring *r, int fd)
{
    pthread_mutex_lock(&d->map_mtx);
    dring *g = cumod__idmap_get(&d->rings, r->session);
    if (g != NULL && g->bell_fd < 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        g->bell_fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = g->session};
        if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
            CUMOD_LOGW("CUMOD-EXEC-DIRECT",
                       "session %u's doorbell cannot be watched: %s",
                       r->session, strerror(errno));
        fd = -1;
    }
    pthread_mutex_unlock(&d->map_mtx);
    if (fd >= 0)
        close(fd);
    return 0;
}

static int
direct_detach(struct cumod_direct *d, const cumod_chan_hdr *hdr,
              const cumod_chan_ring *r)
{
    pthread_mutex_lock(&d->map_mtx);
    dring *g = cumod__idmap_remove(&d->rings, r->session);
    if (g != NULL && g->bell_fd >= 0)
        (void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, g->bell_fd, NULL);
    pthread_mutex_unlock(&d->map_mtx);
    if (g == NULL) {
        cumod_chan_hdr h = {.op = CUMOD_CHAN_RING_DETACH,
                            .seq = hdr->seq,
                            .status = CUMOD_ENOENT};
        return cumod__exec_send(d->ex, &h, r, sizeof(*r));
    }
    g->detach_seq = hdr->seq;
    direct_post(d, g->thread, CUMOD_CHAN_RING_DETACH, &g, sizeof(g));
    /* What the thread was given before is enqueued; later work of the
     * session goes where its streams route. */
    cumod__submit_quiesce(d->ex->submit);
    cumod__submit_unpin(d->ex->submit, r->session);
    return 0;
}

int
cumod__direct_command(cumod_exec *ex, const cumod_chan_hdr *hdr,
                      const void *payload, size_t len, int fd)
{
    struct cumod_direct *d = ex->direct;
    cumod_chan_ring r;
    int th;

    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        if (hdr->op == CUMOD_CHAN_RING_ATTACH) {
            cumod_chan_hdr h = {
                .op = hdr->op, .seq = hdr->seq, .status = CUMOD_ENOTSUP};
            return cumod__exec_send(ex, &h, NULL, 0);
        }
        return 0;
    }
    switch (hdr->op) {
    case CUMOD_CHAN_DIRECT_PAGE:
        if (fd >= 0 && d->page == NULL) {
            void *p = mmap(NULL, sizeof(cumod_direct_page), PROT_READ,
                           MAP_SHARED, fd, 0);
            if (p != MAP_FAILED)
                atomic_store_explicit(&d->page, (cumod_direct_page *)p,
                                      memory_order_release);
        }
        if (fd >= 0)
            close(fd);
        return 0;
    case CUMOD_CHAN_CROWD:
        if (fd >= 0 && d->crowd == NULL) {
            void *p = mmap(NULL, sizeof(cumod_crowd), PROT_READ | PROT_WRITE,
                           MAP_SHARED, fd, 0);
            if (p != MAP_FAILED)
                d->crowd = p;
        }
        if (fd >= 0)
            close(fd);
        return 0;
    case CUMOD_CHAN_RING_STATE:
    case CUMOD_CHAN_RING_ATTACH:
    case CUMOD_CHAN_RING_BELL:
    case CUMOD_CHAN_RING_DETACH:
        if (len < sizeof(r) || (fd < 0 && hdr->op != CUMOD_CHAN_RING_DETACH)) {
            if (fd >= 0)
                close(fd);
            CUMOD_LOGE("CUMOD-EXEC-CHAN", "malformed ring command %u", hdr->op);
            return -EPROTO;
        }
        memcpy(&r, payload, sizeof(r));
        if (hdr->op == CUMOD_CHAN_RING_STATE)
            return direct_state(d, &r, fd);
        if (hdr->op == CUMOD_CHAN_RING_ATTACH)
            return direct_attach(d, hdr, &r, fd);
        if (hdr->op == CUMOD_CHAN_RING_BELL)
            return direct_bell(d, &r, fd);
        if (fd >= 0)
            close(fd);
        return direct_detach(d, hdr, &r);
    case CUMOD_CHAN_RING_RESUME: {
        cumod_chan_ring_msg m;
        if (fd >= 0)
            close(fd);
        if (len < sizeof(m))
            return -EPROTO;
        memcpy(&m, payload, sizeof(m));
        if ((th = direct_owner(d, m.session)) < 0)
            return 0; /* detached */
        /* behind the work the answered record made, on its thread */
        return direct_post(d, (unsigned)th, hdr->op, &m, sizeof(m));
    }
    case CUMOD_CHAN_SNAP: {
        cumod_chan_snap sn;
        if (fd >= 0)
            close(fd);
        if (len < sizeof(sn))
            return -EPROTO;
        memcpy(&sn, payload, sizeof(sn));
        if (cumod__direct_snap_apply(d, &sn, (const char *)payload + sizeof(sn),
                                     len - sizeof(sn)) == 0 ||
            (th = direct_owner(d, sn.session)) < 0)
            return 0;
        return direct_post(d, (unsigned)th, hdr->op, &sn, sizeof(sn));
    }
    default:
        if (fd >= 0)
            close(fd);
        return -EPROTO;
    }
}

/* A ring's session on its thread, or NULL. */
static dring *
direct_find(struct cumod_direct *d, unsigned th, uint32_t session)
{
    CUMOD_LIST_FOREACH(&direct_thread(d, th)->rings, n)
    {
        dring *g = CUMOD_CONTAINER_OF(n, dring, link);
        if (g->session == session)
            return g;
    }
    return NULL;
}

int
cumod__direct_run(cumod_exec *ex, const cumod_chan_hdr *hdr,
                  const void *payload, size_t len)
{
    struct cumod_direct *d = ex->direct;
    dring *g = NULL;

    if (d == NULL)
        return 0;
    switch (hdr->op) {
    case CUMOD_CHAN_RING_ATTACH:
        if (len != sizeof(g))
            return 0;
        memcpy(&g, payload, sizeof(g));
        cumod__list_append(&direct_thread(d, g->thread)->rings, &g->link);
        /* Polled at once: the client may have written already. */
        atomic_store(&g->rung, 1);
        return 0;
    case CUMOD_CHAN_RING_DETACH: {
        if (len != sizeof(g))
            return 0;
        memcpy(&g, payload, sizeof(g));
        dring_cool(g);
        cumod__list_remove(&g->link);
        /* No record is read from now on; the launches in flight are
         * answered here as they complete, and the reply goes after the
         * last (dlaunch_end). */
        pthread_mutex_lock(&g->mtx);
        g->detaching = 1;
        int now = g->inflight == 0 && !g->detach_told;
        if (now)
            g->detach_told = 1;
        pthread_mutex_unlock(&g->mtx);
        if (now)
            dring_detach_done(g);
        dring_unref(g); /* the list's */
        return 0;
    }
    case CUMOD_CHAN_RING_RESUME: {
        cumod_chan_ring_msg m;
        if (len < sizeof(m))
            return 0;
        memcpy(&m, payload, sizeof(m));
        for (unsigned i = 0; i < d->n && g == NULL; i++)
            g = direct_find(d, i, m.session);
        if (g != NULL && g->fwd_out > 0)
            g->fwd_out--; /* direct again once they are all answered */
        return 0;
    }
    case CUMOD_CHAN_SNAP: {
        cumod_chan_snap sn;
        memcpy(&sn, payload, sizeof(sn));
        for (unsigned i = 0; i < d->n && g == NULL; i++)
            g = direct_find(d, i, sn.session);
        if (g != NULL)
            cumod__direct_snap_session(g, &sn);
        return 0;
    }
    default:
        return 0;
    }
}

int
cumod__direct_thread_of(cumod_exec *ex, uint64_t key)
{
    struct cumod_direct *d = ex->direct;
    if (d == NULL)
        return -1;
    return direct_owner(d, (uint32_t)(key >> CUMOD_CHAN_STREAM_BITS));
}

void
cumod__direct_module_quiet(cumod_exec *ex, cumod_exec_module *m)
{
    (void)ex;
    struct timespec nap = {0, 100000};
    while (atomic_load(&m->direct) > 0)
        nanosleep(&nap, NULL);
}

/* --- Start and stop ------------------------------------------------------ */

cumod_err
cumod__direct_start(cumod_exec *ex, unsigned nthreads)
{
    struct cumod_direct *d = calloc(1, sizeof(*d));
    if (d == NULL || nthreads == 0) {
        free(d);
        return CUMOD_ENOMEM;
    }
    d->ex = ex;
    d->n = nthreads;
    d->epfd = d->stop_fd = d->tick_fd = -1;
    pthread_rwlock_init(&d->mods_rw, NULL);
    pthread_mutex_init(&d->map_mtx, NULL);
    cumod__idmap_init(&d->rings);
    cumod__idmap_init(&d->states);
    if ((d->thr = calloc(nthreads, sizeof(*d->thr))) == NULL)
        goto fail;
    for (unsigned i = 0; i < nthreads; i++) {
        cumod__list_init(&d->thr[i].rings);
        cumod__decoder_init(&d->thr[i].dec);
        if ((d->thr[i].packed = malloc(sizeof(cumod_launch_packed))) == NULL)
            goto fail;
    }
    (void)cumod__exec_describe_device(&ex->drv, ex->cfg->device, &d->dev);
    if ((d->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (d->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
        (d->tick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        goto fail;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    struct epoll_event tick = {.events = EPOLLIN, .data.u64 = UINT64_MAX - 1};
    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->stop_fd, &ev) != 0 ||
        epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->tick_fd, &tick) != 0 ||
        pthread_create(&d->bell, NULL, direct_bell_main, d) != 0)
        goto fail;
    d->bell_started = 1;
    ex->direct = d;
    return CUMOD_OK;
fail:
    if (d != NULL) {
        ex->direct = d;
        cumod__direct_stop(ex);
    }
    return CUMOD_ENOMEM;
}

void
cumod__direct_stop_bell(cumod_exec *ex)
{
    struct cumod_direct *d = ex->direct;
    if (d == NULL || !d->bell_started)
        return;
    uint64_t one = 1;
    (void)write(d->stop_fd, &one, sizeof(one));
    pthread_join(d->bell, NULL);
    d->bell_started = 0;
}

void
cumod__direct_stop(cumod_exec *ex)
{
    struct cumod_direct *d = ex->direct;
    if (d == NULL)
        return;
    cumod__direct_stop_bell(ex);
    /* The threads are gone, and every launch in flight was answered: the
     * rings are let go (the front takes them back). */
    for (unsigned i = 0; d->thr != NULL && i < d->n; i++) {
        dthread *t = &d->thr[i];
        for (cumod_list_node *n; (n = cumod__list_pop(&t->rings)) != NULL;)
            dring_unref(CUMOD_CONTAINER_OF(n, dring, link));
        cumod__decoder_fini(&t->dec);
        free(t->pend);
        free(t->packed);
        free(t->buf);
        free(t->fwd);
    }
    size_t cur = 0;
    void *v;
    while ((v = cumod__idmap_next(&d->states, &cur, NULL)) != NULL)
        munmap(v, sizeof(cumod_dring_state));
    cumod__idmap_fini(&d->states);
    cumod__idmap_fini(&d->rings);
    cumod__direct_snap_fini(d);
    if (d->crowd != NULL)
        munmap(d->crowd, sizeof(cumod_crowd));
    if (d->page != NULL)
        munmap(d->page, sizeof(cumod_direct_page));
    pthread_rwlock_destroy(&d->mods_rw);
    pthread_mutex_destroy(&d->map_mtx);
    if (d->epfd >= 0)
        close(d->epfd);
    if (d->stop_fd >= 0)
        close(d->stop_fd);
    if (d->tick_fd >= 0)
        close(d->tick_fd);
    free(d->thr);
    free(d);
    ex->direct = NULL;
}
