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

#include "ring.h"
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
};

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
