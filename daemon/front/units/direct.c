/* SPDX-License-Identifier: MIT */
/*
 * Direct launches, the front's side (direct.h): rings handed to their
 * session's executor and taken back, the records it forwards, the
 * tickets it gave, and what it counts. What is published for its checks
 * is direct_pub.c's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "cumod/errors.h"
#include "data/ringio.h"
#include "front/units/direct.h"
#include "front/units/direct_impl.h"
#include "front/front.h"
#include "front/metrics.h"
#include "front/transport/ring_impl.h"

/* --- Rings ------------------------------------------------------------ */

/* Sends what the executor checks a session's launches against. */
static void
fd_session_snap(cumod_unit *u, cumod_session *s)
{
    cumod_front *f = u->f;
    cumod_chan_snap sn = {.op = CUMOD_SNAP_LIMIT,
                          .session = s->id,
                          .a = f->cfg->session_max_inflight};
    cumod__fd_snap(u, &sn, NULL, 0);
    size_t cur = 0;
    for (cumod_buf *b; (b = cumod__idmap_next(&s->bufs, &cur, NULL)) != NULL;)
        if (!b->lost) {
            cumod_chan_snap sb = {.op = CUMOD_SNAP_BUF_ADD,
                                  .session = s->id,
                                  .a = b->handle,
                                  .b = b->dptr,
                                  .c = b->size};
            cumod__fd_snap(u, &sb, NULL, 0);
        }
    cur = 0;
    for (cumod_sstream *t; (t = cumod__idmap_next(&s->streams, &cur, NULL));) {
        cumod_chan_snap ss = {.op = CUMOD_SNAP_STREAM_ADD,
                              .session = s->id,
                              .a = t->handle,
                              .b = t->key};
        cumod__fd_snap(u, &ss, NULL, 0);
        if (t->ws_bytes != 0) {
            cumod_chan_snap sg = {
                .op = CUMOD_SNAP_GEMM, .session = s->id, .a = t->handle};
            cumod__fd_snap(u, &sg, NULL, 0);
        }
    }
    if (s->default_ws_bytes != 0) {
        cumod_chan_snap sg = {.op = CUMOD_SNAP_GEMM, .session = s->id};
        cumod__fd_snap(u, &sg, NULL, 0);
    }
}

static void
fd_state_free(cumod_ring *g)
{
    if (g->st != NULL)
        munmap(g->st, sizeof(cumod_dring_state));
    if (g->st_fd >= 0)
        close(g->st_fd);
    g->st = NULL;
    g->st_fd = -1;
}

/* The answer of a direct launch the executor took and never answered. */
static void
fd_answer_lost(cumod_ring *g, cumod_unit *u, const cumod_dring_slot *sl,
               uint64_t id)
{
    cumod_err st;
    char msg[CUMOD_STATUS_MSG];
    cumod__faults_lost_answer(&u->faults, sl->handle, sl->kernel, &st, msg,
                              sizeof(msg));
    Cumod__Reply rep = CUMOD__REPLY__INIT;
    Cumod__Status status;
    cumod__reply_build(&rep, &status, id, st, msg, NULL);
    size_t len = cumod__reply__get_packed_size(&rep);
    uint8_t *b = malloc(len);
    if (b == NULL)
        return;
    cumod__reply__pack(&rep, b);
    (void)cumod__ring_put_packed(g, b, len);
    free(b);
}

/* The executor's tickets of g's session (s) come back with g: how far it
 * gave them, the failures no Wait reported yet, and the launches
 * answered when enqueued that it never finished (the context was lost:
 * a later Wait says so). */
static void
fd_take_tickets(cumod_ring *g, cumod_unit *u, cumod_session *s, uint64_t cq)
{
    cumod_dring_state *st = g->st;
    uint64_t next = atomic_load(&st->ticket_next);
    if ((next & CUMOD_DRING_TICKET_BIT) && next > s->next_dticket)
        s->next_dticket = next;
    for (uint32_t n = 0; n < st->nfailed && n < CUMOD_DRING_FAILED; n++) {
        cumod_dring_failed *e =
            &st->failed[(st->failed_at + n) % CUMOD_DRING_FAILED];
        int posted = (e->ticket & CUMOD_DRING_TICKET_BIT) == 0 &&
                     (e->ticket & CUMOD_TICKET_POSTED) != 0;
        if (!posted && ((e->ticket & CUMOD_DRING_TICKET_BIT) == 0 ||
                        e->ticket >= s->next_dticket))
            continue; /* reported, or never given */
        e->msg[sizeof(e->msg) - 1] = '\0';
        cumod_err code = e->code > 0 ? (cumod_err)e->code : CUMOD_EIO;
        (void)cumod__session_ticket_failed(s, e->ticket, code, e->msg);
    }
    for (int i = 0; i < CUMOD_DRING_SLOTS; i++) {
        cumod_dring_slot *sl = &st->slot[i];
        uint64_t at = atomic_load(&sl->answered_at);
        if (atomic_load(&sl->id) == 0 || sl->wait)
            continue;
        if (!(sl->posted && (sl->ticket & CUMOD_TICKET_POSTED)) &&
            (at == 0 || at > cq || (sl->ticket & CUMOD_DRING_TICKET_BIT) == 0 ||
             sl->ticket >= s->next_dticket))
            continue; /* not a launch answered when enqueued, nor posted */
        cumod_err code;
        char msg[CUMOD_STATUS_MSG];
        cumod__faults_lost_answer(&u->faults, sl->handle, sl->kernel, &code,
                                  msg, sizeof(msg));
        (void)cumod__session_ticket_failed(s, sl->ticket, code, msg);
    }
}

uint64_t
cumod__fdirect_ticket_next(const cumod_session *s)
{
    const cumod_ring *g = s->ring;
    uint64_t next = s->next_dticket;
    if (g != NULL && g->st != NULL && g->mode != CUMOD_RING_FRONT) {
        uint64_t live = atomic_load(&g->st->ticket_next);
        if ((live & CUMOD_DRING_TICKET_BIT) && live > next)
            next = live;
    }
    return next;
}

int
cumod__fdirect_ticket_live(const cumod_session *s, uint64_t ticket,
                           uint32_t *stream, cumod_err *code, char *msg,
                           size_t cap)
{
    const cumod_ring *g = s->ring;
    if (g == NULL || g->st == NULL || g->mode == CUMOD_RING_FRONT)
        return 0;
    const cumod_dring_state *st = g->st;
    for (int i = 0; i < CUMOD_DRING_SLOTS; i++) {
        const cumod_dring_slot *sl = &st->slot[i];
        if (atomic_load(&sl->id) != 0 && !sl->wait && sl->ticket == ticket) {
            *stream = sl->stream;
            return 1;
        }
    }
    for (uint32_t n = 0; n < st->nfailed && n < CUMOD_DRING_FAILED; n++) {
        const cumod_dring_failed *e =
            &st->failed[(st->failed_at + n) % CUMOD_DRING_FAILED];
        if (e->ticket == ticket) {
            *code = e->code > 0 ? (cumod_err)e->code : CUMOD_EIO;
            snprintf(msg, cap, "%.*s", (int)sizeof(e->msg) - 1, e->msg);
            return 2;
        }
    }
    return 0;
}

/* g comes back to the front: where the executor got to (its state
 * block), the direct launches it took and did not answer answered here,
 * held answers written, and the loop reads it again unless its session
 * let go. */
static void
fd_take_back(cumod_ring *g)
{
    cumod_unit *u = g->unit;
    if (g->st != NULL) {
        /* The executor is gone or done with it: nobody else writes. */
        if (pthread_mutex_lock(&g->st->cq_lock) == EOWNERDEAD)
            pthread_mutex_consistent(&g->st->cq_lock);
        uint64_t cq = atomic_load(&g->st->cq_tail);
        pthread_mutex_unlock(&g->st->cq_lock);
        /* Its count in the crowd goes with it. */
        if (atomic_exchange(&g->st->hot, 0) && g->rs->crowd != NULL)
            atomic_fetch_sub(&g->rs->crowd->hot, 1);
        /* Where it read to: what it published, or past a record it
         * forwarded or put in a slot before it could say so (it died
         * between the two). */
        uint64_t head = atomic_load(&g->st->sq_head);
        if (g->fwd_end > head)
            head = g->fwd_end;
        for (int i = 0; i < CUMOD_DRING_SLOTS; i++)
            if (atomic_load(&g->st->slot[i].id) != 0 &&
                g->st->slot[i].end > head)
                head = g->st->slot[i].end;
        g->sq_head = head;
        g->cq_tail = cq;
        if (!g->closed)
            atomic_store(&g->h->sq_head, g->sq_head);
        g->mode = CUMOD_RING_FRONT;
        for (int i = 0; i < CUMOD_DRING_SLOTS && u != NULL; i++) {
            cumod_dring_slot *sl = &g->st->slot[i];
            uint64_t id = atomic_load(&sl->id);
            uint64_t at = atomic_load(&sl->answered_at);
            if (id == 0 || (at != 0 && at <= cq) || sl->posted)
                continue; /* answered, or never to be (a posted launch) */
            if (!g->closed)
                fd_answer_lost(g, u, sl, id);
        }
        cumod_session *s =
            u != NULL && !g->closed
                ? cumod__sessions_get(&u->f->sessions, g->pipe_id)
                : NULL;
        if (s != NULL)
            fd_take_tickets(g, u, s, cq);
        /* A wake-up the executor queued for its waker thread dies with
         * it: the client is woken here, whatever it waits for. */
        if (!g->closed)
            cumod__ring_wake_client(g);
    }
    g->mode = CUMOD_RING_FRONT;
    g->unit = NULL;
    fd_state_free(g);
    cumod_front *f = u != NULL ? u->f : NULL;
    int drained = g->drain_held;
    g->drain_held = 0;
    if (g->detach_closes) {
        g->detach_closes = 0;
        cumod__ring_unref(g); /* the session's */
    } else {
        cumod__ring_resume(g);
    }
    /* Its direct launches were the drain's work in flight too. */
    if (drained && f != NULL && --f->inflight == 0 && f->draining)
        f->drained(f);
}

static void fd_on_detached(void *arg, const cumod_chan_hdr *hdr,
                           const void *payload, size_t len);

/* Takes g (DIRECT) back for a stop's drain: its executor stops reading it
 * and answers what it launched; the front then reads it (and refuses
 * what comes, as it stops). Counted in the front's work in flight until
 * it is back. */
static void
fd_drain_ring(cumod_ring *g)
{
    cumod_front *f = g->unit->f;
    cumod_chan_ring r = {.session = g->pipe_id};
    g->mode = CUMOD_RING_DETACHING;
    g->drain_held = 1;
    f->inflight++;
    if (cumod__xc_call(g->unit->xc, CUMOD_CHAN_RING_DETACH, &r, sizeof(r), -1,
                       fd_on_detached, g) == CUMOD_OK)
        g->refs++;
    else
        fd_take_back(g);
}

void
cumod__fdirect_drain(cumod_front *f)
{
    size_t cur = 0;
    cumod_session *s;
    while ((s = cumod__sessions_next(&f->sessions, &cur)) != NULL)
        if (s->ring != NULL && s->ring->mode == CUMOD_RING_DIRECT &&
            s->ring->unit != NULL)
            fd_drain_ring(s->ring);
}

static void
fd_on_attached(void *arg, const cumod_chan_hdr *hdr, const void *payload,
               size_t len)
{
    cumod_ring *g = arg;
    (void)len;
    if (g->mode == CUMOD_RING_ATTACHING) {
        if (hdr->status == CUMOD_OK) {
            g->mode = CUMOD_RING_DIRECT;
            if (g->detach_closes) {
                /* the session went while this was on its way */
                g->detach_closes = 0;
                if (!cumod__fdirect_ring_closing(g))
                    cumod__ring_unref(g);
            } else if (g->unit->f->stopping) {
                /* cumodd began to stop meanwhile */
                fd_drain_ring(g);
            }
        } else {
            if (payload != NULL && hdr->status != CUMOD_ENOTSUP)
                CUMOD_LOGD("CUMOD-DIRECT",
                           "ring %s of session %u stays on the front: %s",
                           g->name, g->pipe_id, cumod_errname(hdr->status));
            fd_take_back(g);
        }
    }
    cumod__ring_unref(g); /* the call's */
}

static void
fd_attach(cumod_unit *u, cumod_session *s, cumod_ring *g)
{
    cumod_front *f = u->f;
    int fd = memfd_create("cumod-ring-state", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, sizeof(cumod_dring_state)) != 0) {
        if (fd >= 0)
            close(fd);
        return;
    }
    void *st = mmap(NULL, sizeof(cumod_dring_state), PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
    if (st == MAP_FAILED) {
        close(fd);
        return;
    }
    g->st = st;
    g->st_fd = fd;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&g->st->cq_lock, &ma);
    pthread_mutexattr_destroy(&ma);
    atomic_store(&g->st->sq_head, g->sq_head);
    atomic_store(&g->st->cq_tail, g->cq_tail);
    atomic_store(&g->st->ticket_next, s->next_dticket);
    atomic_store(&g->st->front_inflight, s->inflight);
    g->fwd_end = g->sq_head;
    /* What the front still answers: its requests in progress (each
     * resumes the executor's reading when answered). */
    cumod_chan_ring r = {.session = s->id,
                         .pid = s->pid,
                         .uid = s->uid,
                         .fwd_out = g->live,
                         .sq_head = g->sq_head,
                         .cq_tail = g->cq_tail,
                         .map_len = g->map_len,
                         .busy_poll_us = f->cfg->busy_poll_us,
                         .crowded_at = f->cfg->crowded_at  ? f->cfg->crowded_at
                                       : f->rings.ncpu > 6 ? f->rings.ncpu - 4
                                                           : 2};
    snprintf(r.name, sizeof(r.name), "%s", g->name);
    cumod__fdirect_unit_update(u);
    cumod__ring_pause(g);
    g->mode = CUMOD_RING_ATTACHING;
    g->unit = u;
    if (cumod__xc_post(u->xc, CUMOD_CHAN_RING_STATE, &r, sizeof(r), fd) !=
            CUMOD_OK ||
        cumod__xc_call(u->xc, CUMOD_CHAN_RING_ATTACH, &r, sizeof(r), g->fd,
                       fd_on_attached, g) != CUMOD_OK) {
        fd_take_back(g);
        return;
    }
    g->refs++; /* the call's */
    fd_session_snap(u, s);
    if (g->bell_fd >= 0)
        (void)cumod__xc_post(u->xc, CUMOD_CHAN_RING_BELL, &r, sizeof(r),
                             g->bell_fd);
}

void
cumod__fdirect_ring_opened(cumod_session *s)
{
    cumod_unit *u = s->unit;
    cumod_ring *g = s->ring;
    if (g == NULL || u == NULL || !cumod__fd_on(u->f) || !g->sealed ||
        g->mode != CUMOD_RING_FRONT || g->closed || !u->serves ||
        !cumod__unit_ready(u))
        return;
    fd_attach(u, s, g);
}

static void
fd_on_detached(void *arg, const cumod_chan_hdr *hdr, const void *payload,
               size_t len)
{
    cumod_ring *g = arg;
    cumod_chan_ring r;
    if (g->mode == CUMOD_RING_DETACHING) {
        if (hdr->status == CUMOD_OK && payload != NULL && len >= sizeof(r)) {
            /* Every direct launch was answered: the state block says so
             * as the reply does. */
            memcpy(&r, payload, sizeof(r));
            if (g->st != NULL) {
                atomic_store(&g->st->sq_head, r.sq_head);
                atomic_store(&g->st->cq_tail, r.cq_tail);
            }
        }
        fd_take_back(g);
    }
    cumod__ring_unref(g); /* the call's */
}

int
cumod__fdirect_ring_closing(cumod_ring *g)
{
    if (g->mode == CUMOD_RING_DETACHING || g->mode == CUMOD_RING_ATTACHING) {
        g->detach_closes = 1;
        return 1;
    }
    if (g->mode != CUMOD_RING_DIRECT)
        return 0;
    cumod_chan_ring r = {.session = g->pipe_id};
    g->mode = CUMOD_RING_DETACHING;
    g->detach_closes = 1;
    if (cumod__xc_call(g->unit->xc, CUMOD_CHAN_RING_DETACH, &r, sizeof(r), -1,
                       fd_on_detached, g) != CUMOD_OK) {
        fd_take_back(g); /* the session's reference goes there */
        return 1;
    }
    g->refs++;
    return 1;
}

void
cumod__fdirect_answer(cumod_ring *g, const uint8_t *bytes, size_t len)
{
    /* Beside the executor's own answers: under the state block's lock,
     * from where the answers got to. */
    if (pthread_mutex_lock(&g->st->cq_lock) == EOWNERDEAD)
        pthread_mutex_consistent(&g->st->cq_lock); /* the executor died */
    g->cq_tail = atomic_load(&g->st->cq_tail);
    uint64_t head = atomic_load_explicit(&g->h->cq_head, memory_order_acquire);
    /* bytes NULL: a posted launch's, answered to nobody, counted. */
    int put =
        bytes == NULL || cumod__ring_put_bytes(g->cq, g->cq_size, head,
                                               &g->cq_tail, bytes, len) == 0;
    if (put) {
        atomic_store(&g->st->cq_tail, g->cq_tail);
        atomic_store_explicit(&g->h->cq_tail, g->cq_tail, memory_order_release);
    }
    pthread_mutex_unlock(&g->st->cq_lock);
    atomic_fetch_add(&g->st->fwd_answered, 1);
    if (!put)
        cumod__ring_bad(g, "its completion ring is full (replies left "
                           "unread)");
    else if (bytes != NULL)
        cumod__ring_wake_client(g);
    /* The executor reads on (its launches directly again) once every
     * record it forwarded is answered, and after the work each made:
     * this follows that work in the channel. */
    if (g->mode == CUMOD_RING_DIRECT || g->mode == CUMOD_RING_ATTACHING) {
        cumod_chan_ring_msg m = {.session = g->pipe_id};
        (void)cumod__xc_post(g->unit->xc, CUMOD_CHAN_RING_RESUME, &m, sizeof(m),
                             -1);
    }
}

void
cumod__fdirect_posted_failed(cumod_ring *g, uint64_t ticket, cumod_err code,
                             const char *msg)
{
    cumod_front *f = g->rs->arg;
    cumod_session *s = cumod__sessions_get(&f->sessions, g->pipe_id);
    /* A ticket of that number already kept is another launch's (a client
     * that used a request id twice): left as it is. */
    if (s != NULL && cumod__session_ticket(s, ticket) == NULL)
        (void)cumod__session_ticket_failed(s, ticket, code, msg);
}

void
cumod__fdirect_unit_ready(cumod_unit *u)
{
    cumod_front *f = u->f;
    fdirect_unit *du = cumod__fd_unit(u);
    if (du == NULL)
        return;
    du->told = 0;
    du->page_told = 0;
    /* The host's crowd: counted by every process that polls rings. */
    if (f->rings.crowd_fd >= 0)
        (void)cumod__xc_post(u->xc, CUMOD_CHAN_CROWD, NULL, 0,
                             f->rings.crowd_fd);
    cumod__fdirect_unit_update(u);
    if (!cumod__fd_on(f) || !u->serves)
        return;
    size_t cur = 0;
    for (cumod_session *s; (s = cumod__sessions_next(&f->sessions, &cur));)
        if (s->unit == u && s->ring != NULL)
            cumod__fdirect_ring_opened(s);
}

void
cumod__fdirect_unit_lost(cumod_unit *u)
{
    cumod_front *f = u->f;
    size_t cur = 0;
    /* Every ring it held comes back (those whose session let go are
     * kept in their own reference until then: walked through the
     * sessions, and the closing ones through their calls' failures). */
    for (cumod_session *s; (s = cumod__sessions_next(&f->sessions, &cur));) {
        cumod_ring *g = s->ring;
        if (g != NULL && g->unit == u && g->mode == CUMOD_RING_DIRECT)
            fd_take_back(g);
    }
    fdirect_unit *du = u->direct;
    if (du != NULL) {
        cumod__fd_pubs_free(&du->pubs);
        cumod__fd_pubs_free(&du->retired);
        du->told = 0;
        du->page_told = 0;
        /* The next executor starts with nothing valid. */
        atomic_store(&du->page->flags, 0);
        for (uint32_t i = 0; i < CUMOD_DIRECT_SLOTS; i++)
            atomic_store_explicit(&du->page->valid[i], 0, memory_order_relaxed);
        memset(du->used, 0, sizeof(du->used));
    }
}

void
cumod__fdirect_unit_free(cumod_unit *u)
{
    fdirect_unit *du = u->direct;
    if (du == NULL)
        return;
    cumod__fd_pubs_free(&du->pubs);
    cumod__fd_pubs_free(&du->retired);
    munmap(du->page, sizeof(cumod_direct_page));
    close(du->page_fd);
    free(du);
    u->direct = NULL;
}

/* The unit whose executor reads s's ring, or NULL. */
static cumod_unit *
fd_reader(cumod_session *s)
{
    cumod_ring *g = s->ring;
    if (g == NULL || g->unit == NULL ||
        (g->mode != CUMOD_RING_DIRECT && g->mode != CUMOD_RING_ATTACHING))
        return NULL;
    return g->unit;
}

void
cumod__fdirect_buf(cumod_session *s, const cumod_buf *b, int add)
{
    cumod_unit *u = fd_reader(s);
    if (u == NULL || b == NULL)
        return;
    cumod_chan_snap sn = {.op = add ? CUMOD_SNAP_BUF_ADD : CUMOD_SNAP_BUF_DEL,
                          .session = s->id,
                          .a = b->handle,
                          .b = b->dptr,
                          .c = b->size};
    cumod__fd_snap(u, &sn, NULL, 0);
}

void
cumod__fdirect_stream(cumod_session *s, uint64_t handle, uint64_t key, int add)
{
    cumod_unit *u = fd_reader(s);
    if (u == NULL)
        return;
    cumod_chan_snap sn = {.op = add ? CUMOD_SNAP_STREAM_ADD
                                    : CUMOD_SNAP_STREAM_DEL,
                          .session = s->id,
                          .a = handle,
                          .b = key};
    cumod__fd_snap(u, &sn, NULL, 0);
}

void
cumod__fdirect_gemm(cumod_session *s, uint64_t handle)
{
    cumod_unit *u = fd_reader(s);
    if (u == NULL)
        return;
    cumod_chan_snap sn = {.op = CUMOD_SNAP_GEMM, .session = s->id, .a = handle};
    cumod__fd_snap(u, &sn, NULL, 0);
}

/* --- What the executor says ------------------------------------------ */

static void
fd_stats(cumod_unit *u, const void *payload, size_t len)
{
    cumod_front *f = u->f;
    cumod_chan_dstats ds;
    if (len < sizeof(ds))
        return;
    memcpy(&ds, payload, sizeof(ds));
    if (ds.n > (len - sizeof(ds)) / sizeof(cumod_chan_dstat))
        return;
    cumod_session *s = cumod__sessions_get(&f->sessions, ds.session);
    cumod__metrics_direct(f, ds.requests, ds.lat_count, ds.lat_sum_ns,
                          ds.lat_bucket);
    f->rings.records += ds.requests; /* Hello's ring_requests */
    const char *dom = s ? cumod__session_domain(s) : u->domain;
    for (uint32_t i = 0; i < ds.n; i++) {
        cumod_chan_dstat e;
        memcpy(&e, (const char *)payload + sizeof(ds) + i * sizeof(e),
               sizeof(e));
        /* Handle 0: GEMMs, counted as the front counts its own (device
         * time as "gemm", no launches). */
        const fpub *p = e.handle ? cumod__fd_pub_of(u, e.handle) : NULL;
        const char *module = p ? p->name : "";
        const char *kernel =
            e.handle ? cumod__fd_pub_kernel(p, e.kernel) : "gemm";
        if (p != NULL && p->g != NULL) {
            cumod__catalog_touch(f->cat, p->name);
            if (u->replicas_on)
                cumod__reps_touch(u, e.handle);
        }
        if (e.ok && e.handle)
            cumod__metrics_launches(f, module, 1, (uint32_t)e.ok);
        if (e.failed && e.handle)
            cumod__metrics_launches(f, module, 0, (uint32_t)e.failed);
        if (s != NULL)
            s->gpu_ns += e.gpu_ns;
        if (f->metrics != NULL && e.gpu_ns != 0)
            cumod__metrics_gpu(f, s ? s->device : u->device, dom, module,
                               kernel, e.gpu_ns);
    }
}

void
cumod__fdirect_packet(cumod_unit *u, uint32_t op, const void *payload,
                      size_t len)
{
    cumod_front *f = u->f;
    cumod_chan_ring_msg m;

    if (op == CUMOD_CHAN_DIRECT_STATS) {
        fd_stats(u, payload, len);
        return;
    }
    if (len < sizeof(m))
        return;
    memcpy(&m, payload, sizeof(m));
    if (m.len > len - sizeof(m))
        return;
    cumod_session *s = cumod__sessions_get(&f->sessions, m.session);
    cumod_ring *g = s != NULL ? s->ring : NULL;
    if (g == NULL || g->unit != u || g->mode == CUMOD_RING_FRONT)
        return; /* its session went: nobody to answer */
    const uint8_t *bytes = (const uint8_t *)payload + sizeof(m);
    if (op == CUMOD_CHAN_RING_FWD) {
        if (m.end > g->fwd_end)
            g->fwd_end = m.end;
        cumod__ring_forwarded(g, bytes, m.len);
        return;
    }
    if (op == CUMOD_CHAN_RING_BAD) {
        /* The executor said why in its log; here the ring is shut and
         * comes back once detached. */
        char why[256];
        snprintf(why, sizeof(why), "%.*s", (int)(m.len < 255 ? m.len : 255),
                 (const char *)bytes);
        CUMOD_LOGD("CUMOD-DIRECT", "ring %s given up by the executor: %s",
                   g->name, why);
        if (g->mode == CUMOD_RING_DIRECT) {
            cumod_chan_ring r = {.session = g->pipe_id};
            g->mode = CUMOD_RING_DETACHING;
            if (cumod__xc_call(u->xc, CUMOD_CHAN_RING_DETACH, &r, sizeof(r), -1,
                               fd_on_detached, g) == CUMOD_OK)
                g->refs++;
            else
                fd_take_back(g);
        }
        cumod__ring_given_up(g);
    }
}

size_t
cumod__fdirect_in_flight(cumod_unit *u, const cumod_gen **gens,
                         const cumod_kernel **kerns, const cumod_session **sess,
                         size_t max)
{
    cumod_front *f = u->f;
    size_t n = 0, cur = 0;
    for (cumod_session *s; (s = cumod__sessions_next(&f->sessions, &cur));) {
        cumod_ring *g = s->ring;
        if (g == NULL || g->unit != u || g->st == NULL)
            continue;
        for (int i = 0; i < CUMOD_DRING_SLOTS; i++) {
            cumod_dring_slot *sl = &g->st->slot[i];
            if (atomic_load(&sl->id) == 0 || sl->wait)
                continue; /* a Wait is no work of its own */
            const fpub *p = cumod__fd_pub_of(u, sl->handle);
            const cumod_kernel *k = NULL;
            if (p != NULL && p->g == NULL)
                p = NULL; /* retired: its generation may be gone */
            for (uint32_t j = 0;
                 p != NULL && j < cumod__gen_kernel_count((cumod_gen *)p->g);
                 j++)
                if (cumod__gen_kernel_at((cumod_gen *)p->g, j)->index ==
                    sl->kernel)
                    k = cumod__gen_kernel_at((cumod_gen *)p->g, j);
            if (n < max) {
                gens[n] = p ? p->g : NULL;
                kerns[n] = k;
                sess[n] = s;
            }
            n++;
        }
    }
    return n;
}

void
cumod__fdirect_session_calls(const cumod_session *s)
{
    const cumod_ring *g = s->ring;
    if (g != NULL && g->st != NULL)
        atomic_store_explicit(&g->st->front_inflight, s->inflight,
                              memory_order_release);
}

uint32_t
cumod__fdirect_session_inflight(const cumod_session *s)
{
    const cumod_ring *g = s->ring;
    if (g == NULL || g->st == NULL || g->mode == CUMOD_RING_FRONT)
        return 0;
    return atomic_load(&g->st->inflight);
}
