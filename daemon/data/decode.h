/* SPDX-License-Identifier: MIT */
/*
 * Decoding a request, for every transport (nng: server.c; a session's
 * shared-memory ring: ring.c): protobuf-c through an allocator that refuses
 * to give one message more than its budget, and the protocol version
 * checked. Failures come back as the cumod error and sentence to answer.
 * Any thread (a decoder is its caller's).
 */
#ifndef CUMOD_DECODE_H
#define CUMOD_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "cumod.pb-c.h"
#include "common/status.h"

/* A decoded request lives in an arena: protobuf-c makes one allocation per
 * sub-message, field array and byte string (a batch of 256 launches is
 * thousands), and a request is freed as a whole, so each allocation is a
 * pointer bump and freeing is dropping the chunks. One chunk is kept for
 * the next request decoded with the same decoder (an nng receive slot). */
typedef struct cumod_decoder {
    ProtobufCAllocator pa;
    size_t decoded, budget;
    int over_budget;
    struct decode_chunk *chunks; /* newest first */
    unsigned char *cur;          /* free space in the newest chunk */
    size_t left;
} cumod_decoder;

void cumod__decoder_init(cumod_decoder *d);

/* Decodes len bytes into *out, which lives until cumod__decoder_release.
 * CUMOD_ETOOBIG past the budget (32 times the size plus 1 MiB, at most 256
 * MiB over it: protobuf-c turns a few wire bytes into structs many times
 * their size), CUMOD_EPROTO for bytes that are no cumod.Request,
 * CUMOD_EVERSION for another protocol version (*out is then set, for the
 * request id). Releases what the decoder held before. */
cumod_err cumod__decode_request(cumod_decoder *d, const void *bytes, size_t len,
                                Cumod__Request **out, cumod_status *st);

/* Launches, batches of launches and Waits without protobuf-c
 * (decode_fast.c):
 * 1 and *out when the bytes are in the plain form it knows, else 0 (and
 * the arena holds garbage: release it before protobuf-c runs). Used by
 * cumod__decode_request. */
int cumod__decode_fast(cumod_decoder *d, const void *bytes, size_t len,
                       Cumod__Request **out);

/* Only what cumod__decode_fast takes (launches, batches of them and
 * Waits in the plain form), with the same budget: 1 and *out, else 0
 * (nothing held). The executor's, for the records it may serve itself;
 * the rest it hands on undecoded. */
int cumod__decode_launch(cumod_decoder *d, const void *bytes, size_t len,
                         Cumod__Request **out);

/* The number of the body field of a packed Request (its first field
 * numbered 16 or more, cumod.Request's oneof), without decoding it: 0
 * when there is none or the bytes are not a message. Cheap: the
 * executor looks before it decodes a record it may serve. */
uint32_t cumod__decode_body_field(const void *bytes, size_t len);

/* The request decoded last is done with (its memory goes back; one chunk
 * is kept). */
void cumod__decoder_release(cumod_decoder *d);

/* Everything goes back: the decoder is not used again. */
void cumod__decoder_fini(cumod_decoder *d);

#endif
