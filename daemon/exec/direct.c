/* SPDX-License-Identifier: MIT */
/*
 * Direct launches (direct.h): sessions' rings in the executor, their
 * records taken by the submission thread that owns the session's
 * streams, launched or forwarded, and answered into the ring. Here the
 * service: polling the rings, the doorbells, the front's commands
 * (state blocks, attach, detach), start and stop. The records are
 * direct_record.c's, the answers and tickets direct_answer.c's.
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

static dthread *
direct_thread(struct cumod_direct *d, unsigned i)
{
    return &d->thr[i < d->n ? i : 0];
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

/* Whether g has launches in flight (counted under g->mtx). */
static int
dring_busy(dring *g)
{
    pthread_mutex_lock(&g->mtx);
    int busy = g->inflight > 0;
    pthread_mutex_unlock(&g->mtx);
    return busy;
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
    int found = t->npend > 0 ? cumod__dthread_complete(ex, t) : 0;

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
        int got = cumod__dring_take(t, g);
        if (got < 0) {
            cumod__dthread_close(ex, t);
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
            if (dring_busy(g) ||
                (g->fwd_out > 0 &&
                 now - g->fwd_ns < (uint64_t)g->busy_poll_us * 10000u)) {
                /* Work of its in flight (polled anyway), or forwarded
                 * for up to 10x --busy-poll-us: its client likely sends
                 * the next record once answered (cooled under a 400 us
                 * kernel, it paid the doorbell: +21 us, bench_long). */
                dring_heat(g, now);
                continue;
            }
            /* Cold: the client rings from now on; a last look for what
             * it wrote before it saw the flag drop. */
            dring_cool(g);
            if ((got = cumod__dring_take(t, g)) < 0) {
                cumod__dthread_close(ex, t);
                return got;
            }
            if (got > 0 || g->defer_ns != 0 || g->stalled) {
                dring_heat(g, now);
                found += got;
            }
        }
    }
    /* The launches with tickets taken in this look get their event. */
    cumod__dthread_close(ex, t);
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
        left |= cumod__dring_stats_flush(g, DRING_STATS_NS);
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
        (void)cumod__dring_stats_flush(g, 0);
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
void
cumod__dring_detach_done(dring *g)
{
    /* Its last statistics before the ring goes back. */
    (void)cumod__dring_stats_flush(g, 0);
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
    cumod__idmap_init(&g->gemm_ws);
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
    cumod__dring_unref(g);
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
        cumod__dring_unref(g);
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
            cumod__dring_detach_done(g);
        cumod__dring_unref(g); /* the list's */
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
            cumod__dring_unref(CUMOD_CONTAINER_OF(n, dring, link));
        cumod__decoder_fini(&t->dec);
        cumod__dthread_words_free(ex, t);
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
