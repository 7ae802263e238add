/* SPDX-License-Identifier: MIT */
/*
 * The fast path: a session's shared-memory ring (proto/cumod_ring.h), a
 * second transport beside nng for the requests of one connection. A ring
 * is opened by an OpenRing request on that connection (after its peer was
 * admitted), lives with its session, and feeds the same dispatch as nng:
 * each record is copied out of the shared memory, decoded with the same
 * budget, and answered through cumod__req_answer into the ring's cq.
 *
 * Latency: the loop takes a ring's records when its FIFO doorbell rings
 * (uv_poll), then polls every active ring on each loop iteration (a
 * uv_idle, so the loop does not sleep) for CUMOD_RING_HOT_US after the
 * last record, telling clients meanwhile that no doorbell is needed.
 *
 * Loop thread only.
 */
#ifndef CUMOD_RING_FRONT_H
#define CUMOD_RING_FRONT_H

#include <stdint.h>
#include <uv.h>

#include "common/config.h"
#include "cumod_ring.h"
#include "common/list.h"
#include "front/transport/server.h"
#include "common/status.h"

typedef struct cumod_ring cumod_ring;

/* Who reads a ring (front/units/direct.c). */
enum {
    CUMOD_RING_FRONT = 0,
    CUMOD_RING_ATTACHING,
    CUMOD_RING_DIRECT,
    CUMOD_RING_DETACHING,
};

/* The rings of a front: the active ones polled by the idle handle. */
/* Something else the loop polls while it spins (an executor's completion
 * ring, xclient.c): poll takes what is there and says how much; sleep(1)
 * is called before the loop sleeps in epoll (the poller then says how it
 * wants to be woken, and looks once more: it returns what it found, and
 * the loop spins on if anything), sleep(0) when it spins again. */
typedef struct cumod_rings_poller {
    cumod_list_node link;
    int (*poll)(void *arg);
    int (*sleep)(void *arg, int sleeping);
    void *arg;
    struct cumod_rings *rs; /* the rings it was added to */
} cumod_rings_poller;

typedef struct cumod_rings {
    uv_loop_t *loop;
    const cumod_config *cfg; /* live: busy_poll_us */
    /* Each request a ring takes, as the nng server's cfg.cb (server.h). */
    void (*cb)(void *arg, cumod_req *r);
    void *arg;
    uv_idle_t idle;
    int idle_on, stopped;
    cumod_list pollers;        /* cumod_rings_poller */
    uint64_t pollers_gen;      /* bumped when one is added or removed */
    cumod_list hot;            /* cumod_ring, by hot_link */
    uint32_t nhot;             /* rings on it */
    uint32_t ncpu;             /* the host's cores, read at init */
    int crowded;               /* nhot >= --crowded-at: told to hot rings */
    struct cumod_waker *waker; /* wakes clients when crowded (waker.h) */
    int no_waker;              /* it could not be started */
    uint32_t open;             /* rings open now */
    /* Rings polled now host-wide, this loop's and the executors' (direct
     * launches): a memfd the executors map too (front/units/direct.c); NULL
     * until made (nhot alone then). */
    struct cumod_crowd *crowd;
    int crowd_fd;
    uint64_t spin_until_ns; /* keep polling until then (cumod__rings_spin) */
    /* Rings an executor reads (direct launches, front/units/direct.h),
     * set by the front: the transport calls up through these only. The
     * session lets go of g (1: g stays until detached), and an answer to
     * a record the executor forwarded. NULL: no ring leaves the loop. */
    int (*ring_closing)(struct cumod_ring *g);
    void (*ring_answer)(struct cumod_ring *g, const uint8_t *bytes, size_t len);
    /* A posted launch (never answered) of g's session was refused: its
     * ticket keeps why, for the Wait for it. */
    void (*posted_failed)(struct cumod_ring *g, uint64_t ticket, cumod_err code,
                          const char *msg);
    uint64_t opened, records, closed_bad;
    struct ring_req *pool[64]; /* requests to reuse (ring.c) */
    unsigned npool;
} cumod_rings;

/* The rings of loop hand each request they take to cb(arg, request), as
 * the nng server does (the front's dispatch). */
void cumod__rings_init(cumod_rings *rs, uv_loop_t *loop,
                       const cumod_config *cfg,
                       void (*cb)(void *arg, cumod_req *r), void *arg);
/* Work was sent to the executor: keep the loop polling (not sleeping in
 * epoll) for up to us microseconds, so that its completion, and the
 * client's next request, are taken without a wake-up. */
void cumod__rings_spin(cumod_rings *rs, unsigned us);

/* Adds p to what the spinning loop polls (p->link unlinked before), or
 * takes it out (a no-op when not in). */
void cumod__rings_poller_add(cumod_rings *rs, cumod_rings_poller *p);
void cumod__rings_poller_remove(cumod_rings_poller *p);

/* Stops polling (rings close with their sessions). */
void cumod__rings_close(cumod_rings *rs);

struct cumod_fdpass;

/* OpenRing of request r for session (pipe_id, uid, gid, pid): maps the
 * named segment and opens its doorbell, each only if the peer's uid owns
 * it, or takes the memfd and doorbell that process handed over at fp with
 * the request's token; and checks the header. On success *out is the
 * session's new ring and CUMOD_OK; else an error with a sentence in st. */
cumod_err cumod__ring_open(cumod_rings *rs, struct cumod_fdpass *fp,
                           const Cumod__OpenRing *q, uint32_t pipe_id, int uid,
                           int gid, int pid, cumod_ring **out,
                           cumod_status *st);

/* The sizes a ring was opened with. */
void cumod__ring_sizes(const cumod_ring *g, uint64_t *sq, uint64_t *cq);

/* 1 when g was handed over sealed (an executor may read it: direct.h),
 * 0 when opened by name. */
int cumod__ring_sealed(const cumod_ring *g);

/* The session lets go of its ring (it closed, or another ring replaced
 * this one): the client hears it through the header; requests of it still
 * in progress are answered into nothing. A ring given up for bad bytes is
 * shut at once but freed only here. Accepts NULL. */
void cumod__ring_close(cumod_ring *g);

/* 1 while g takes requests (cumodd has not given it up). */
int cumod__ring_serving(const cumod_ring *g);

/* A ring's records: data/ringio.h. */

/* 1 when r came through a ring (the fast path). */
int cumod__ring_req(const cumod_req *r);

#endif
