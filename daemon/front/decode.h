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
#include "status.h"

typedef struct cumod_decoder {
    ProtobufCAllocator pa; /* free with it what decode made */
    size_t decoded, budget;
    int over_budget;
} cumod_decoder;

void cumod__decoder_init(cumod_decoder *d);

/* Decodes len bytes into *out (freed with cumod__request__free_unpacked(
 * *out, &d->pa)). CUMOD_ETOOBIG past the budget (32 times the size plus 1
 * MiB, at most 256 MiB over it: protobuf-c turns a few wire bytes into
 * structs many times their size), CUMOD_EPROTO for bytes that are no
 * cumod.Request, CUMOD_EVERSION for another protocol version (*out is then
 * set, for the request id; the caller frees it). */
cumod_err cumod__decode_request(cumod_decoder *d, const void *bytes, size_t len,
                                Cumod__Request **out, cumod_status *st);

#endif
