/* SPDX-License-Identifier: MIT */
/*
 * The layout of a session's shared-memory ring, the fast path between a
 * client (libcumod) and cumodd on one host: a segment the client makes
 * (shm_open, mode 0600), holding this header and two byte rings of
 * records, each single-producer single-consumer:
 *   sq  client -> daemon: cumod.Request messages
 *   cq  daemon -> client: cumod.Reply messages
 * Positions are free-running byte counts (offset = position & (size - 1)).
 * A record is a cumod_ring_rec and its bytes, padded to 8; one that would
 * run past the ring's end is preceded by a PAD record to the end.
 *
 * Doorbells: the client writes a byte to a FIFO (NAME.bell in /dev/shm)
 * when the daemon does not say it is polling; the daemon bumps cq_seq and
 * wakes it (FUTEX_WAKE, shared) when the client says it sleeps on it.
 *
 * The client can write anything here at any time: the daemon reads each
 * index once, checks it, and copies a record out before it decodes it.
 * Both sides are the same build on one machine (host byte order).
 */
#ifndef CUMOD_RING_H
#define CUMOD_RING_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#define CUMOD_RING_MAGIC 0x31474e4952444d43ull /* "CMDRING1" */

/* The ticket of a launch posted on a ring (ReplyWhen POSTED, never
 * answered): its request id with this bit. Both sides compute it. */
#define CUMOD_TICKET_POSTED (1ull << 61)
#define CUMOD_RING_VERSION 1
#define CUMOD_RING_HDR_SIZE 4096
#define CUMOD_RING_MIN ((uint64_t)64 << 10) /* bytes of each ring, at least */
#define CUMOD_RING_MAX ((uint64_t)64 << 20) /* and at most */

typedef struct cumod_ring_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t hdr_size; /* CUMOD_RING_HDR_SIZE: sq starts there */
    uint64_t sq_size;  /* powers of two, MIN to MAX; cq follows sq */
    uint64_t cq_size;
    alignas(64) _Atomic uint64_t sq_tail; /* written by the client */
    alignas(64) _Atomic uint64_t sq_head; /* by the daemon */
    alignas(64) _Atomic uint64_t cq_tail; /* by the daemon */
    alignas(64) _Atomic uint64_t cq_head; /* by the client */
    /* 1 while the daemon looks at sq without a doorbell; 1 once it gave
     * the ring up (corrupt, full, or the connection gone): the client must
     * stop using it. */
    alignas(64) _Atomic uint32_t daemon_polling;
    _Atomic uint32_t closed;
    /* The client's futex: bumped by the daemon after each reply while
     * client_waiting is 1. */
    alignas(64) _Atomic uint32_t cq_seq;
    _Atomic uint32_t client_waiting;
    /* 1 while more clients wait on the daemon at once than the host's
     * cores serve spinning (cumodd --crowded-at): a waiting client then
     * spins briefly and sleeps on cq_seq instead of yielding, so that the
     * daemon's threads and the other clients keep their cores. Written by
     * the daemon when it changes; 0 from a daemon that does not know it. */
    alignas(64) _Atomic uint32_t crowded;
} cumod_ring_hdr;

_Static_assert(sizeof(cumod_ring_hdr) <= CUMOD_RING_HDR_SIZE,
               "the header fits its page");

enum {
    CUMOD_RING_REC_MSG = 1, /* len bytes of message follow */
    CUMOD_RING_REC_PAD = 2, /* skip to the ring's end */
};

typedef struct cumod_ring_rec {
    uint32_t len;
    uint32_t kind;
} cumod_ring_rec;

/* Bytes a record of len bytes takes, header and padding included. */
static inline uint64_t
cumod_ring_rec_space(uint64_t len)
{
    return sizeof(cumod_ring_rec) + ((len + 7) & ~(uint64_t)7);
}

#endif
