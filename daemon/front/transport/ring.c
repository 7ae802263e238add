/* SPDX-License-Identifier: MIT */
/*
 * Running a ring (ring.h): records taken from the submission ring under
 * the SIGBUS guard, decoded and handed to the rings' callback as
 * requests; answers written into the completion ring; the doorbell, and
 * the loop spinning on hot rings (and the executors' completion rings)
 * for --busy-poll-us. Opening one is ring_open.c's.
 */
#include "front/transport/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "cumod_ring.h"
#include "data/decode.h"
#include "data/ringio.h"
#include "common/log.h"
#include "front/transport/ring_impl.h"
#include "common/channel.h"
#include "common/waker.h"
#include "common/shmguard.h"

/* How many records one look takes before the loop goes on to other work.
 * A ring stays polled for --busy-poll-us after its last record. */
/* Requests this large are timed (debug level). */
#define RING_TIMED_BYTES 4096
#define RING_TAKE_MAX 64

/* A request that came through a ring. */
struct ring_req {
    cumod_req r;
    cumod_ring *g;
    Cumod__Request *req;
    cumod_decoder dec;
};
typedef struct ring_req ring_req;

void
cumod__ring_free(cumod_ring *g)
{
    if (g->st != NULL)
        munmap(g->st, sizeof(cumod_dring_state));
    if (g->st_fd >= 0)
        close(g->st_fd);
    cumod__shmguard_remove(g->guard);
    if (g->map != NULL)
        munmap(g->map, g->map_len);
    if (g->fd >= 0)
        close(g->fd);
    if (g->bell_fd >= 0)
        close(g->bell_fd);
    free(g);
}

static void
ring_unref(cumod_ring *g)
{
    if (--g->refs == 0)
        cumod__ring_free(g);
}

void
cumod__ring_unref(cumod_ring *g)
{
    ring_unref(g);
}

static void
ring_on_poll_close(uv_handle_t *h)
{
    ring_unref(h->data);
}

/* The client sleeps on cq_seq: wake it (a shared futex: the word is in
 * its mapping too). On a crowded host, where clients sleep as a rule,
 * the waking thread makes the call (waker.h), started at the first. */
static void
ring_wake(cumod_ring *g)
{
    cumod_rings *rs = g->rs;
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&g->h->client_waiting, memory_order_relaxed))
        return;
    atomic_fetch_add_explicit(&g->h->cq_seq, 1, memory_order_release);
    if (rs->crowded && !rs->stopped && !rs->no_waker) {
        if (rs->waker == NULL && (rs->waker = cumod__waker_start()) == NULL)
            rs->no_waker = 1;
        if (rs->waker != NULL &&
            cumod__waker_push(rs->waker, &g->h->cq_seq) == 0)
            return;
    }
    syscall(SYS_futex, &g->h->cq_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

void
cumod__ring_wake_client(cumod_ring *g)
{
    ring_wake(g);
}

/* How many rings in use at once make the host crowded: --crowded-at, else
 * the cores less 4 (the front's thread and the executor's busy ones), at
 * least 2. Measured on the H100 host (bench/notes.md, "Crowded"). */
static uint32_t
rings_crowded_at(const cumod_rings *rs)
{
    uint32_t n = rs->cfg->crowded_at;
    if (n > 0)
        return n;
    return rs->ncpu > 6 ? rs->ncpu - 4 : 2;
}

/* Rings polled now, host-wide (the executors' too), or this loop's. */
static uint32_t
rings_hot(const cumod_rings *rs)
{
    return rs->crowd != NULL
               ? atomic_load_explicit(&rs->crowd->hot, memory_order_relaxed)
               : rs->nhot;
}

/* The hot rings' count changed (d: by how many, here): crowded or not,
 * told to each hot ring as the loop next looks at it. */
static void
rings_count(cumod_rings *rs, int d)
{
    if (rs->crowd != NULL && d != 0)
        atomic_fetch_add(&rs->crowd->hot, (uint32_t)d);
    rs->crowded = rings_hot(rs) >= rings_crowded_at(rs);
}

/* Tells g's client whether the host is crowded, if that changed (the
 * executors' rings count too: read afresh). */
static void
ring_tell_crowded(cumod_ring *g)
{
    g->rs->crowded = rings_hot(g->rs) >= rings_crowded_at(g->rs);
    if (g->crowded == g->rs->crowded || g->h == NULL || g->closed)
        return;
    g->crowded = g->rs->crowded;
    atomic_store_explicit(&g->h->crowded, (uint32_t)g->crowded,
                          memory_order_relaxed);
}

static void
ring_unhot(cumod_ring *g)
{
    if (!g->hot)
        return;
    g->hot = 0;
    g->rs->nhot--;
    rings_count(g->rs, -1);
    cumod__list_remove(&g->hot_link);
    if (g->h != NULL)
        atomic_store_explicit(&g->h->daemon_polling, 0, memory_order_seq_cst);
}

/* Takes no more records and tells the client (through the header, also
 * if it sleeps); the session keeps its reference until it lets go. */
static void
ring_shut(cumod_ring *g)
{
    if (g->closed)
        return;
    g->closed = 1;
    g->rs->open--;
    ring_unhot(g);
    atomic_store_explicit(&g->h->closed, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g->h->cq_seq, 1, memory_order_release);
    syscall(SYS_futex, &g->h->cq_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
    if (g->poll_open) {
        g->poll_open = 0;
        uv_poll_stop(&g->poll);
        uv_close((uv_handle_t *)&g->poll, ring_on_poll_close);
    }
}

int
cumod__ring_serving(const cumod_ring *g)
{
    return g != NULL && !g->closed;
}

void
cumod__ring_close(cumod_ring *g)
{
    if (g == NULL)
        return;
    ring_shut(g);
    /* Read by an executor: it lets go first (the session's reference goes
     * with its reply). */
    if (g->mode != CUMOD_RING_FRONT && g->rs->ring_closing != NULL &&
        g->rs->ring_closing(g))
        return;
    ring_unref(g); /* the session's */
}

/* The client broke the ring's rules: it is given up, said once. */
static void ring_bad(cumod_ring *g, const char *why);

void
cumod__ring_bad(cumod_ring *g, const char *why)
{
    ring_bad(g, why);
}

static void
ring_bad(cumod_ring *g, const char *why)
{
    if (g->closed)
        return;
    g->rs->closed_bad++;
    CUMOD_LOGW("CUMOD-RING",
               "the ring %s of session %u (pid %d uid %d) is given up: %s; "
               "its client goes on over its connection",
               g->name, g->pipe_id, g->pid, g->uid, why);
    ring_shut(g);
}

void
cumod__ring_given_up(cumod_ring *g)
{
    if (g->closed)
        return;
    g->rs->closed_bad++;
    ring_shut(g);
}

/* --- answers ------------------------------------------------------------ */

/* Requests go back to a small pool, their decoder's chunk kept: a launch
 * then takes no malloc here. */
#define RING_REQ_POOL 64

static void
ring_req_free(ring_req *rr)
{
    cumod_ring *g = rr->g;
    cumod_rings *rs = g->rs;
    if (g->live > 0)
        g->live--;
    /* The --busy-poll-us clock starts at the last answer (rings_pass). */
    if (g->hot)
        g->last_ns = cumod__mono_ns();
    if (rs->npool < RING_REQ_POOL && !rs->stopped) {
        cumod__decoder_release(&rr->dec);
        rr->req = NULL;
        rs->pool[rs->npool++] = rr;
    } else {
        cumod__decoder_fini(&rr->dec);
        free(rr);
    }
    ring_unref(g);
}

static ring_req *
ring_req_new(cumod_rings *rs)
{
    ring_req *rr;
    if (rs->npool > 0) {
        rr = rs->pool[--rs->npool];
        cumod_decoder dec = rr->dec;
        memset(rr, 0, sizeof(*rr));
        rr->dec = dec;
        return rr;
    }
    if ((rr = calloc(1, sizeof(*rr))) != NULL)
        cumod__decoder_init(&rr->dec);
    return rr;
}

/* Writes reply (len bytes packed) as one record of g's cq and wakes the
 * client; 0, or -1 when it does not fit (the client leaves its replies
 * unread). */
static int
ring_put(cumod_ring *g, const Cumod__Reply *reply, size_t len)
{
    uint64_t head = atomic_load_explicit(&g->h->cq_head, memory_order_acquire);
    if (cumod__ring_put(g->cq, g->cq_size, head, &g->cq_tail, reply, len) != 0)
        return -1;
    atomic_store_explicit(&g->h->cq_tail, g->cq_tail, memory_order_release);
    ring_wake(g);
    return 0;
}

int
cumod__ring_put_packed(cumod_ring *g, const uint8_t *bytes, size_t len)
{
    uint64_t head = atomic_load_explicit(&g->h->cq_head, memory_order_acquire);
    if (cumod__ring_put_bytes(g->cq, g->cq_size, head, &g->cq_tail, bytes,
                              len) != 0) {
        ring_bad(g, "its completion ring is full (replies left unread)");
        return -1;
    }
    atomic_store_explicit(&g->h->cq_tail, g->cq_tail, memory_order_release);
    ring_wake(g);
    return 0;
}

/* An answer on its way: written here, alone (the front reads g) or beside
 * the executor that reads it (front/units/direct.c). */
static void
ring_emit(cumod_ring *g, const Cumod__Reply *reply, size_t len)
{
    if (g->mode == CUMOD_RING_FRONT) {
        if (ring_put(g, reply, len) != 0)
            ring_bad(g, "its completion ring is full (replies left unread)");
        return;
    }
    uint8_t stackbuf[4096];
    uint8_t *b = len <= sizeof(stackbuf) ? stackbuf : malloc(len);
    if (b == NULL) {
        CUMOD_LOGE("CUMOD-NOMEM", "an answer of ring %s is lost", g->name);
        return;
    }
    cumod__reply__pack(reply, b);
    if (g->rs->ring_answer != NULL)
        g->rs->ring_answer(g, b, len);
    if (b != stackbuf)
        free(b);
}

/* The ring's send: the reply as one record of its cq, the request back
 * to the pool. A ring given up meanwhile takes nothing. */
static cumod_err
ring_send(cumod_req *r, const Cumod__Reply *reply)
{
    ring_req *rr = CUMOD_CONTAINER_OF(r, ring_req, r);
    cumod_ring *g = rr->g;
    const Cumod__Request *q = rr->req;

    if (q != NULL && q->body_case == CUMOD__REQUEST__BODY_LAUNCH &&
        q->launch->when == CUMOD__REPLY_WHEN__REPLY_WHEN_POSTED) {
        /* A posted launch: nobody waits for this answer. A refusal goes
         * to its ticket; an executor that forwarded it still hears that
         * it was served (its reading goes on). */
        if (!g->closed && reply->status != NULL &&
            reply->status->code != CUMOD_OK && g->rs->posted_failed != NULL)
            g->rs->posted_failed(g, CUMOD_TICKET_POSTED | reply->id,
                                 (cumod_err)reply->status->code,
                                 reply->status->message);
        if (!g->closed && g->mode != CUMOD_RING_FRONT &&
            g->rs->ring_answer != NULL)
            g->rs->ring_answer(g, NULL, 0);
        ring_req_free(rr);
        return CUMOD_OK;
    }
    if (!g->closed) {
        size_t len = cumod__reply__get_packed_size(reply);
        if (len > g->cq_size / 4) {
            /* Too big for the ring (a large read): said so, in its place. */
            Cumod__Reply small;
            Cumod__Status big;
            cumod__reply_build(&small, &big, reply->id, CUMOD_ETOOBIG,
                               "the reply does not fit the ring: ask over "
                               "the connection",
                               NULL);
            ring_emit(g, &small, cumod__reply__get_packed_size(&small));
        } else {
            ring_emit(g, reply, len);
        }
    }
    ring_req_free(rr);
    return CUMOD_OK;
}

static void
ring_drop(cumod_req *r)
{
    ring_req_free(CUMOD_CONTAINER_OF(r, ring_req, r));
}

static cumod_err
ring_peer(const cumod_req *r, int *uid, int *gid, int *pid)
{
    const ring_req *rr = CUMOD_CONTAINER_OF(r, ring_req, r);
    *uid = rr->g->uid;
    *gid = rr->g->gid;
    *pid = rr->g->pid;
    return rr->g->closed ? CUMOD_ECLOSED : CUMOD_OK;
}

static const cumod_req_ops ring_req_ops = {
    .name = "ring",
    .send = ring_send,
    .drop = ring_drop,
    .peer = ring_peer,
};

int
cumod__ring_req(const cumod_req *r)
{
    return r->ops == &ring_req_ops;
}

/* --- requests ----------------------------------------------------------- */

/* One record's bytes (copied out of the shared memory): decoded and
 * dispatched as a request of the ring's session. */
static void
ring_request(cumod_ring *g, const uint8_t *bytes, size_t len)
{
    ring_req *rr = ring_req_new(g->rs);
    cumod_status st;

    if (rr == NULL) {
        CUMOD_LOGE("CUMOD-NOMEM", "a ring request is lost");
        return;
    }
    rr->g = g;
    g->refs++;
    g->live++;
    cumod__req_begin(&rr->r, &ring_req_ops);
    rr->r.pipe_id = g->pipe_id;
    g->rs->records++;
    /* Big requests (batches) say at debug level where their time went. */
    uint64_t t0 = len >= RING_TIMED_BYTES ? cumod__mono_ns() : 0;
    cumod_err rv = cumod__decode_request(&rr->dec, bytes, len, &rr->req, &st);
    rr->r.id = rr->req != NULL ? rr->req->id : 0;
    if (rv != CUMOD_OK) {
        cumod__req_fail(&rr->r, &st);
        return;
    }
    rr->r.msg = rr->req;
    uint64_t t1 = t0 ? cumod__mono_ns() : 0;
    g->rs->cb(g->rs->arg, &rr->r);
    if (t0)
        CUMOD_LOGD("CUMOD-RING-TIMING",
                   "a %zu-byte request: decoded in %.1f us, checked and sent "
                   "on in %.1f us",
                   len, (double)(t1 - t0) / 1e3,
                   (double)(cumod__mono_ns() - t1) / 1e3);
}

void
cumod__ring_forwarded(cumod_ring *g, const uint8_t *bytes, size_t len)
{
    g->refs++; /* the request may close the ring */
    ring_request(g, bytes, len);
    ring_unref(g);
}

/* The ring's memory raised SIGBUS (its client shrank it): the guard put
 * zeros in its place; the ring is given up, saying what changed. -1. */
static int
ring_gone(cumod_ring *g)
{
    struct stat sb;
    char why[256];
    if (fstat(g->fd, &sb) == 0)
        snprintf(why, sizeof(why),
                 "its shared memory was truncated under cumodd: %lld bytes "
                 "now, %zu when it was opened (a read raised SIGBUS; cumodd "
                 "reads zeros in its place)",
                 (long long)sb.st_size, g->map_len);
    else
        snprintf(why, sizeof(why),
                 "its shared memory changed under cumodd (a read raised "
                 "SIGBUS; cumodd reads zeros in its place)");
    ring_bad(g, why);
    return -1;
}

/* Takes up to RING_TAKE_MAX records; returns how many, or -1 when the
 * ring broke. Each read of the client's memory is followed by a look at
 * its guard: a SIGBUS in between left zeros, not the client's bytes. */
int
cumod__ring_take(cumod_ring *g)
{
    uint8_t stackbuf[4096];
    int n = 0;

    if (g->mode != CUMOD_RING_FRONT)
        return 0; /* an executor reads it (direct.c), or is told to */

    while (!g->closed && n < RING_TAKE_MAX) {
        uint64_t tail =
            atomic_load_explicit(&g->h->sq_tail, memory_order_acquire);
        uint64_t head = g->sq_head, size = g->sq_size, step = 0;
        const char *why = NULL;
        cumod_ring_rec rec;
        if (cumod__shmguard_bad(g->guard))
            return ring_gone(g);
        int got = cumod__ring_next(g->sq, size, head, tail, &rec, &step, &why);
        if (cumod__shmguard_bad(g->guard))
            return ring_gone(g);
        if (got == 0)
            break;
        if (got < 0) {
            ring_bad(g, why);
            return -1;
        }
        uint64_t off = head & (size - 1);
        if (rec.kind == CUMOD_RING_REC_MSG) {
            /* Out of the shared memory first: the client could change the
             * bytes while they are decoded. */
            uint8_t *buf =
                rec.len <= sizeof(stackbuf) ? stackbuf : malloc(rec.len);
            if (buf == NULL) {
                ring_bad(g, "out of memory for a record");
                return -1;
            }
            memcpy(buf, g->sq + off + sizeof(rec), rec.len);
            if (cumod__shmguard_bad(g->guard)) {
                if (buf != stackbuf)
                    free(buf);
                return ring_gone(g);
            }
            g->sq_head = head + step;
            atomic_store_explicit(&g->h->sq_head, g->sq_head,
                                  memory_order_release);
            g->refs++; /* the request may close the ring */
            ring_request(g, buf, rec.len);
            if (buf != stackbuf)
                free(buf);
            int closed = g->closed;
            ring_unref(g);
            if (closed)
                return -1;
            n++;
        } else {
            g->sq_head = head + step;
            atomic_store_explicit(&g->h->sq_head, g->sq_head,
                                  memory_order_release);
        }
    }
    return n;
}

/* --- polling ------------------------------------------------------------ */

/* One callback of the idle handle spins this long at most before libuv
 * looks at its descriptors and timers again: before, every look at the
 * rings was one turn of the loop, an epoll_wait and two clock reads, and
 * at 8 clients on the H100 those were half the front's time (perf). */
#define RINGS_SPIN_NS 20000
/* ...and gives the loop back sooner once it has done something, so that
 * what came meanwhile on a socket (nng, the executor's) waits little. */
#define RINGS_SPIN_BUSY_NS 5000

static void rings_on_idle(uv_idle_t *h);

/* The pollers are told the loop spins (0) or sleeps (1); what they found
 * while saying so. */
static int
rings_pollers_sleep(cumod_rings *rs, int sleeping)
{
    int found = 0;
    for (cumod_list_node *n = cumod__list_first(&rs->pollers); n != NULL;) {
        cumod_rings_poller *p = CUMOD_CONTAINER_OF(n, cumod_rings_poller, link);
        uint64_t gen = rs->pollers_gen;
        n = cumod__list_next(&rs->pollers, n);
        found += p->sleep(p->arg, sleeping);
        if (gen != rs->pollers_gen)
            break; /* the list changed under us: enough for this time */
    }
    return found;
}

static void
rings_idle_start(cumod_rings *rs)
{
    if (rs->idle_on || rs->stopped)
        return;
    rs->idle_on = 1;
    uv_idle_start(&rs->idle, rings_on_idle);
    (void)rings_pollers_sleep(rs, 0);
}

/* g had records: poll it without doorbells for a while. */
void
cumod__ring_heat(cumod_ring *g)
{
    cumod_rings *rs = g->rs;
    g->last_ns = cumod__mono_ns();
    if (g->hot || g->closed || g->mode != CUMOD_RING_FRONT)
        return;
    g->hot = 1;
    rs->nhot++;
    rings_count(rs, 1);
    cumod__list_append(&rs->hot, &g->hot_link);
    atomic_store_explicit(&g->h->daemon_polling, 1, memory_order_seq_cst);
    rings_idle_start(rs);
}

/* One look at every hot ring and every poller: how much was taken. */
static int
rings_pass(cumod_rings *rs, uint64_t now)
{
    int found = 0;
    cumod_list_node *n = cumod__list_first(&rs->hot);

    while (n != NULL) {
        cumod_ring *g = CUMOD_CONTAINER_OF(n, cumod_ring, hot_link);
        n = cumod__list_next(&rs->hot, n);
        g->refs++;
        ring_tell_crowded(g);
        int got = cumod__ring_take(g);
        if (got > 0) {
            g->last_ns = now;
            found += got;
        } else if (got == 0 &&
                   now - g->last_ns > (uint64_t)rs->cfg->busy_poll_us *
                                          (g->live > 0 ? 10000u : 1000u)) {
            /* Requests of its in progress: their client most likely waits
             * for one and sends the next once answered; polled for ten
             * times as long (as work.c polls for a waited answer), else a
             * 400 us kernel cost the next request the doorbell's wake-up
             * (bench/bench_long.py). */
            /* Cold: tell the client to ring again, then look once more
             * (it may have written just before it saw the flag drop). */
            ring_unhot(g);
            if (cumod__ring_take(g) > 0)
                cumod__ring_heat(g);
        }
        ring_unref(g);
    }
    for (n = cumod__list_first(&rs->pollers); n != NULL && !rs->stopped;) {
        cumod_rings_poller *p = CUMOD_CONTAINER_OF(n, cumod_rings_poller, link);
        uint64_t gen = rs->pollers_gen;
        n = cumod__list_next(&rs->pollers, n);
        found += p->poll(p->arg);
        if (gen != rs->pollers_gen)
            break;
    }
    return found;
}

static void
rings_on_idle(uv_idle_t *h)
{
    cumod_rings *rs = h->data;
    uint64_t start = cumod__mono_ns(), now = start;
    int found = 0;

    /* No sched_yield() when a look finds nothing: measured on the H100
     * (three runs each, same machine), yielding here put the fast path's
     * p99 at 34-102 us, not yielding at 33-40 us; a yield can hand the
     * core away for a whole time slice. */
    for (unsigned pass = 1; rs->idle_on && !rs->stopped; pass++) {
        found += rings_pass(rs, now);
        /* The clock every few passes: it was a tenth of the front's time
         * read on every one. */
        if (found == 0 && (pass & 7) != 0)
            continue;
        now = cumod__mono_ns();
        if (now - start >= (found ? RINGS_SPIN_BUSY_NS : RINGS_SPIN_NS))
            break;
        if (cumod__list_empty(&rs->hot) && now >= rs->spin_until_ns)
            break;
    }
    if (!rs->idle_on || rs->stopped)
        return;
    if (cumod__list_empty(&rs->hot) && now >= rs->spin_until_ns) {
        /* To sleep in epoll: the pollers say how to be woken, and look
         * once more. */
        if (rings_pollers_sleep(rs, 1) > 0) {
            (void)rings_pollers_sleep(rs, 0);
            return;
        }
        rs->idle_on = 0;
        uv_idle_stop(&rs->idle);
    }
}

void
cumod__rings_spin(cumod_rings *rs, unsigned us)
{
    if (us == 0)
        return;
    uint64_t until = cumod__mono_ns() + (uint64_t)us * 1000u;
    if (until > rs->spin_until_ns)
        rs->spin_until_ns = until;
    rings_idle_start(rs);
}

void
cumod__rings_poller_add(cumod_rings *rs, cumod_rings_poller *p)
{
    cumod__list_append(&rs->pollers, &p->link);
    p->rs = rs;
    rs->pollers_gen++;
    (void)p->sleep(p->arg, !rs->idle_on);
}

void
cumod__rings_poller_remove(cumod_rings_poller *p)
{
    if (!cumod__list_node_active(&p->link))
        return;
    cumod__list_remove(&p->link);
    /* A walk of the list in progress stops at its next step. */
    p->rs->pollers_gen++;
}

void
cumod__ring_on_bell(uv_poll_t *h, int status, int events)
{
    cumod_ring *g = h->data;
    char drain[256];
    (void)events;
    if (status < 0) {
        ring_bad(g, "its doorbell failed");
        return;
    }
    while (read(g->bell_fd, drain, sizeof(drain)) > 0)
        ;
    g->refs++;
    if (cumod__ring_take(g) >= 0)
        cumod__ring_heat(g);
    ring_unref(g);
}

void
cumod__ring_pause(cumod_ring *g)
{
    ring_unhot(g);
    if (g->poll_open)
        uv_poll_stop(&g->poll);
}

void
cumod__ring_resume(cumod_ring *g)
{
    if (g->closed)
        return;
    if (g->poll_open)
        uv_poll_start(&g->poll, UV_READABLE, cumod__ring_on_bell);
    g->refs++;
    if (cumod__ring_take(g) >= 0)
        cumod__ring_heat(g);
    ring_unref(g);
}

void
cumod__rings_init(cumod_rings *rs, uv_loop_t *loop, const cumod_config *cfg,
                  void (*cb)(void *arg, cumod_req *r), void *arg)
{
    memset(rs, 0, sizeof(*rs));
    rs->loop = loop;
    rs->cfg = cfg;
    rs->cb = cb;
    rs->arg = arg;
    cumod__list_init(&rs->hot);
    cumod__list_init(&rs->pollers);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    rs->ncpu = n > 0 ? (uint32_t)n : 1;
    uv_idle_init(loop, &rs->idle);
    rs->idle.data = rs;
    /* The host's crowd, shared with the executors (CUMOD_CHAN_CROWD). */
    rs->crowd_fd = memfd_create("cumod-crowd", MFD_CLOEXEC);
    if (rs->crowd_fd >= 0 &&
        ftruncate(rs->crowd_fd, sizeof(cumod_crowd)) == 0) {
        void *p = mmap(NULL, sizeof(cumod_crowd), PROT_READ | PROT_WRITE,
                       MAP_SHARED, rs->crowd_fd, 0);
        if (p != MAP_FAILED)
            rs->crowd = p;
    }
}

void
cumod__rings_close(cumod_rings *rs)
{
    rs->stopped = 1;
    while (rs->npool > 0) {
        ring_req *rr = rs->pool[--rs->npool];
        cumod__decoder_fini(&rr->dec);
        free(rr);
    }
    while (!cumod__list_empty(&rs->hot))
        ring_unhot(CUMOD_CONTAINER_OF(cumod__list_first(&rs->hot), cumod_ring,
                                      hot_link));
    rs->idle_on = 0;
    uv_idle_stop(&rs->idle);
    uv_close((uv_handle_t *)&rs->idle, NULL);
    (void)cumod__waker_stop(rs->waker);
    rs->waker = NULL;
    if (rs->crowd != NULL)
        munmap(rs->crowd, sizeof(cumod_crowd));
    rs->crowd = NULL;
    if (rs->crowd_fd >= 0)
        close(rs->crowd_fd);
    rs->crowd_fd = -1;
}
