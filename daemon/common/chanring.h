/* SPDX-License-Identifier: MIT */
/*
 * The channel's fast lane: a shared-memory ring from the front to the
 * executor, beside the socket pair. Measured on the H100: a launch
 * answered when enqueued took 7.2 us from a client's ring, of which about
 * 4 us was the hop to the executor (a sendmsg per command); a ring write
 * is a copy and a release store.
 *
 * The front puts a command here when it carries no descriptor, fits, and
 * nothing waits before it in the socket's out queue; everything else goes
 * over the socket as before. Both carry the channel's one sequence (every
 * command's seq, from one counter), and the executor takes whichever
 * command is next in that sequence: it looks at the ring first, then at
 * the socket (a command the front wrote to the ring before it sent a
 * later one on the socket is visible by then), so commands run in the
 * order the front made them, whichever way they came.
 *
 * One producer (the front's loop thread), one consumer (the executor's
 * serving thread). The completion ring is the same structure the other
 * way (cumod__chanring_attach_producer): the executor's answers without
 * descriptors, put under its own lock by whichever of its threads
 * answers, read by the front while it polls (issue 21: a sendmsg, an
 * epoll wake-up and two recvmsg per completion before). Records are a
 * cumod_chanring_rec and a channel packet (header and payload), padded to 8; a
 * PAD record skips to the end. The executor sleeps in poll(2) on the socket and
 * an eventfd, which the front writes only when the executor says it sleeps.
 */
#ifndef CUMOD_CHANRING_H
#define CUMOD_CHANRING_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "channel.h"

#define CUMOD_CHANRING_SIZE ((uint64_t)4 << 20) /* bytes of records */
#define CUMOD_CHANRING_HDR 4096

typedef struct cumod_chanring_hdr {
    alignas(64) _Atomic uint64_t tail;     /* the producer's */
    alignas(64) _Atomic uint64_t head;     /* the consumer's */
    alignas(64) _Atomic uint32_t sleeping; /* the consumer is in poll() */
    /* The command ring only: packets the front has sent over the socket
     * so far (counted once sent, before any later packet is put here). The
     * executor reads the socket only when this says a packet is there,
     * not once per command (a recvmsg that said EAGAIN, ~1 us a launch). */
    alignas(64) _Atomic uint64_t sock_sent;
} cumod_chanring_hdr;

typedef struct cumod_chanring {
    uint8_t *map;
    size_t map_len;
    cumod_chanring_hdr *h;
    uint8_t *data;
    uint64_t size;
    uint64_t pos; /* the producer's tail, or the consumer's head */
    int mem_fd;   /* the memfd (the front hands it to the executor) */
    int bell_fd;  /* the eventfd */
    uint64_t puts, bells;
} cumod_chanring;

/* The front: a new ring, its memfd and eventfd close-on-exec (the spawn
 * hands them to the executor as descriptors 4 and 5). 0, or -errno. */
int cumod__chanring_create(cumod_chanring *r);

/* The executor: maps the ring the front made, as its consumer (the
 * command ring) or its producer (the completion ring). 0, or -errno. */
int cumod__chanring_attach(cumod_chanring *r, int mem_fd, int bell_fd);
int cumod__chanring_attach_producer(cumod_chanring *r, int mem_fd, int bell_fd);

/* Unmaps and closes. Accepts a zeroed ring. */
void cumod__chanring_close(cumod_chanring *r);

/* The front: puts one packet (hdr and len bytes of payload). 0, or
 * -EAGAIN when it does not fit now (full, or larger than a quarter of the
 * ring): send it over the socket instead. */
int cumod__chanring_put(cumod_chanring *r, const cumod_chan_hdr *hdr,
                        const void *payload, size_t len);

/* The executor: the next packet, in place (valid until
 * cumod__chanring_pop), or 0 when there is none. -EPROTO when the ring
 * holds something that is not one. */
long cumod__chanring_peek(cumod_chanring *r, const uint8_t **pkt);
void cumod__chanring_pop(cumod_chanring *r);
/* The consumer: whether the producer has put anything not yet taken (one
 * load, for a spinning look; peek says what). */
int cumod__chanring_ready(const cumod_chanring *r);

/* The consumer is about to sleep (1) or woke (0). */
void cumod__chanring_sleeping(cumod_chanring *r, int sleeping);

#endif
