/* SPDX-License-Identifier: MIT */
/*
 * Service: which submission thread owns a stream (submit.h). A stream
 * key is given, at its first work, to the thread that owns the fewest
 * streams (ties taken in turn), and keeps it until the front closes the
 * stream (CUMOD_CHAN_STREAMS_CLOSE), so that a stream's work stays in
 * order on one thread and the streams in use spread evenly over all of
 * them.
 *
 * Why not a hash of the key: measured on the H100 (issue 21), the keys of
 * eight clients (nng pipe ids, a few apart, shifted past the stream bits)
 * hashed by `key * 0x9e3779b97f4a7c15 >> 32 % n` went to two of the four
 * threads, four each; any hash leaves some threads two or three streams
 * where a count leaves none.
 *
 * Not thread-safe: the dispatcher's (the executor's serving thread).
 */
#ifndef CUMOD_EXEC_ROUTE_H
#define CUMOD_EXEC_ROUTE_H

#include <stdint.h>

#include "common/idmap.h"

#define CUMOD_ROUTE_MAX_THREADS 64

typedef struct cumod_route {
    unsigned n;                              /* threads, 1 to the max */
    unsigned next;                           /* where ties start */
    unsigned owned[CUMOD_ROUTE_MAX_THREADS]; /* streams each owns */
    cumod_idmap keys;                        /* key -> thread + 1 */
} cumod_route;

void cumod__route_init(cumod_route *rt, unsigned n);
void cumod__route_fini(cumod_route *rt);

/* The thread of key, given one on its first call. Never fails: when the
 * table cannot grow, a key goes by its hash (and is not remembered). */
unsigned cumod__route_thread(cumod_route *rt, uint64_t key);

/* key's stream is closed: its thread owns one stream fewer. */
void cumod__route_forget(cumod_route *rt, uint64_t key);

/* How many streams thread i owns (0 past n). */
unsigned cumod__route_owned(const cumod_route *rt, unsigned i);

#endif
