/* SPDX-License-Identifier: MIT */
/*
 * Inside the rings (ring.h), shared by their two rooms: running a ring
 * (ring.c: records in, answers out, the doorbell and the spinning loop)
 * and opening one (ring_open.c: the client's name, memory, header and
 * doorbell checked). Opening calls the running side; never the reverse.
 *
 * Loop thread only.
 */
#ifndef CUMOD_RING_IMPL_H
#define CUMOD_RING_IMPL_H

#include <stdint.h>
#include <uv.h>

#include "front/transport/ring.h"
#include "common/shmguard.h"

struct cumod_ring {
    cumod_rings *rs;
    uint32_t pipe_id;
    int uid, gid, pid;
    char name[208];
    uint8_t *map;
    size_t map_len;
    int fd;                 /* the shm, kept to say what a client changed */
    cumod_shm_range *guard; /* map's SIGBUS guard (shmguard.h) */
    cumod_ring_hdr *h;
    uint8_t *sq, *cq;
    uint64_t sq_size, cq_size;
    uint64_t sq_head, cq_tail; /* ours; published to the header */
    int bell_fd;
    uv_poll_t poll;
    int poll_open;
    unsigned refs; /* the session, each request in progress, the poll */
    int closed;
    int hot;
    int crowded; /* what its header's crowded says (cumod_rings.crowded) */
    uint64_t last_ns;
    cumod_list_node hot_link;
    /* Direct launches (front/units/direct.c): who reads the ring.
     * CUMOD_RING_FRONT: this loop, which alone writes its answers.
     * CUMOD_RING_DIRECT: its session's executor (unit); both write
     * answers then, under the state block's lock. ATTACHING, DETACHING:
     * nobody reads it while the executor is told. */
    int mode;
    struct cumod_unit *unit;
    int sealed;    /* a memfd sealed against shrinking: may be handed on */
    uint32_t live; /* requests taken and not answered yet */
    int st_fd;     /* the state block (cumod_dring_state), or -1 */
    struct cumod_dring_state *st;
    int detach_closes; /* the session let go: freed once detached */
    int drain_held;    /* detached for a stop: in the front's inflight */
    uint64_t fwd_end;  /* the sq position after the last record forwarded */
};

/* Writes packed answer bytes into g's cq and wakes its client: 0, or -1
 * when they do not fit (g is then given up). The front's writes, in
 * CUMOD_RING_FRONT mode (ring.c). */
int cumod__ring_put_packed(cumod_ring *g, const uint8_t *bytes, size_t len);

/* Wakes g's client, which sleeps on its answers (ring.c). */
void cumod__ring_wake_client(cumod_ring *g);

/* The front reads g again (its doorbell, its records), from the
 * positions it holds (ring.c). */
void cumod__ring_resume(cumod_ring *g);
/* The front stops reading g (its doorbell unpolled, not hot) (ring.c). */
void cumod__ring_pause(cumod_ring *g);
/* g's client broke its rules: given up, said once (ring.c). */
void cumod__ring_bad(cumod_ring *g, const char *why);
/* The same, said already (by the executor that read g). */
void cumod__ring_given_up(cumod_ring *g);
/* A record the executor forwarded, as one the loop took (ring.c). */
void cumod__ring_forwarded(cumod_ring *g, const uint8_t *bytes, size_t len);
void cumod__ring_unref(cumod_ring *g);

/* Frees g: its mapping, guard and descriptors (not yet polled, or its
 * poll handle closed). */
void cumod__ring_free(cumod_ring *g);

/* Takes up to a look's worth of g's records: how many, or -1 when the
 * ring broke (ring.c). */
int cumod__ring_take(cumod_ring *g);

/* g took records: the loop keeps polling it for --busy-poll-us. */
void cumod__ring_heat(cumod_ring *g);

/* g's doorbell rang. */
void cumod__ring_on_bell(uv_poll_t *h, int status, int events);

#endif
