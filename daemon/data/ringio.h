/* SPDX-License-Identifier: MIT */
/*
 * A session's shared-memory ring (proto/cumod_ring.h), record by record,
 * for whichever process reads it: the front for the rings it serves, the
 * executor for those whose launches go to it directly. The client can
 * write anything in the ring at any time: each index is read once and
 * checked, and the caller copies a record out before decoding it and
 * looks at the ring's SIGBUS guard (common/shmguard.h) after each read.
 * No state; any thread.
 */
#ifndef CUMOD_DATA_RINGIO_H
#define CUMOD_DATA_RINGIO_H

#include <stdint.h>

#include "cumod.pb-c.h"
#include "cumod_ring.h"

/* The record at head of a submission ring of size bytes at sq (client
 * memory), its header copied once into *rec: 1 with the bytes to step in
 * *step, 0 when tail == head, -1 with a sentence in *why when the record
 * breaks the ring's rules. Reads only sq; the caller checks the ring's
 * SIGBUS guard after it (the front's ring_take, the executor's
 * direct_take, tests/fuzz/fuzz_ring.c). */
int cumod__ring_next(const uint8_t *sq, uint64_t size, uint64_t head,
                     uint64_t tail, cumod_ring_rec *rec, uint64_t *step,
                     const char **why);

/* Writes reply (len bytes packed) as one record of a completion ring of
 * size bytes at cq, whose client has read up to head (read once by the
 * caller), from *tail on (the writer's own count, never the client's);
 * advances *tail. 0, or -1 when head is one the client made up or the
 * record does not fit (the client leaves its replies unread). The caller
 * publishes *tail to the header and wakes the client. */
int cumod__ring_put(uint8_t *cq, uint64_t size, uint64_t head, uint64_t *tail,
                    const Cumod__Reply *reply, size_t len);

/* The same with the reply already packed (len bytes at bytes). */
int cumod__ring_put_bytes(uint8_t *cq, uint64_t size, uint64_t head,
                          uint64_t *tail, const uint8_t *bytes, size_t len);

#endif
