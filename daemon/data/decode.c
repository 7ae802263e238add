/* SPDX-License-Identifier: MIT */
#include "decode.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "cumod/errors.h"

/* A chunk of the arena; its space follows it. */
typedef struct decode_chunk {
    struct decode_chunk *next;
    size_t size;
    max_align_t space[];
} decode_chunk;

/* The first chunk, kept between requests; later ones double, so a request
 * of n bytes decoded takes O(log n) mallocs. */
#define DECODE_CHUNK_MIN 4096u
#define DECODE_KEEP_MAX (64u << 10)

static void *
decode_alloc(void *data, size_t size)
{
    cumod_decoder *d = data;
    size_t need = (size + 15) & ~(size_t)15;

    if (size > d->budget - d->decoded || need < size) {
        d->over_budget = 1;
        return NULL;
    }
    d->decoded += size;
    if (need > d->left) {
        size_t want = d->chunks ? d->chunks->size * 2 : DECODE_CHUNK_MIN;
        if (want < need)
            want = need;
        decode_chunk *c = malloc(sizeof(*c) + want);
        if (c == NULL)
            return NULL;
        c->size = want;
        c->next = d->chunks;
        d->chunks = c;
        d->cur = (unsigned char *)c->space;
        d->left = want;
    }
    void *p = d->cur;
    d->cur += need;
    d->left -= need;
    return p;
}

static void
decode_free(void *data, void *p)
{
    (void)data;
    (void)p; /* the arena goes as a whole */
}

void
cumod__decoder_init(cumod_decoder *d)
{
    d->pa = (ProtobufCAllocator){
        .alloc = decode_alloc, .free = decode_free, .allocator_data = d};
    d->decoded = d->budget = 0;
    d->over_budget = 0;
    d->chunks = NULL;
    d->cur = NULL;
    d->left = 0;
}

void
cumod__decoder_release(cumod_decoder *d)
{
    decode_chunk *keep = NULL;
    for (decode_chunk *c = d->chunks, *next; c != NULL; c = next) {
        next = c->next;
        if (keep == NULL && c->size <= DECODE_KEEP_MAX && next == NULL)
            keep = c; /* the oldest, smallest one */
        else
            free(c);
    }
    d->chunks = keep;
    if (keep != NULL) {
        keep->next = NULL;
        d->cur = (unsigned char *)keep->space;
        d->left = keep->size;
    } else {
        d->cur = NULL;
        d->left = 0;
    }
}

void
cumod__decoder_fini(cumod_decoder *d)
{
    for (decode_chunk *c = d->chunks, *next; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    d->chunks = NULL;
    d->cur = NULL;
    d->left = 0;
}

/* What one message of len bytes may take decoded: 32 times its size and a
 * MiB (the most real requests take is about 16 times: a batch of small
 * launches), but never more than 256 MiB beyond its own bytes. */
static size_t
decode_budget(size_t len)
{
    size_t a = len * 32 + (1u << 20), b = len + (256u << 20);
    return a < b ? a : b;
}

int
cumod__decode_launch(cumod_decoder *d, const void *bytes, size_t len,
                     Cumod__Request **out)
{
    cumod__decoder_release(d);
    d->decoded = 0;
    d->budget = decode_budget(len);
    d->over_budget = 0;
    *out = NULL;
    if (cumod__decode_fast(d, bytes, len, out))
        return 1;
    cumod__decoder_release(d);
    *out = NULL;
    return 0;
}

cumod_err
cumod__decode_request(cumod_decoder *d, const void *bytes, size_t len,
                      Cumod__Request **out, cumod_status *st)
{
    Cumod__Request *req;

    cumod__decoder_release(d);
    d->decoded = 0;
    d->budget = decode_budget(len);
    d->over_budget = 0;
    *out = NULL;
    if (!cumod__decode_fast(d, bytes, len, &req)) {
        cumod__decoder_release(d);
        d->decoded = 0;
        d->over_budget = 0;
        req = cumod__request__unpack(&d->pa, len, bytes);
    }
    if (req == NULL && d->over_budget)
        return cumod__status_set(
            st, CUMOD_ETOOBIG,
            "the %zu-byte request would take more than %zu bytes to decode, "
            "its limit: send fewer items at a time",
            len, d->budget);
    if (req == NULL)
        return cumod__status_set(st, CUMOD_EPROTO,
                                 "the request is not a valid cumod.Request "
                                 "message");
    *out = req;
    if (req->version != CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1)
        return cumod__status_set(st, CUMOD_EVERSION,
                                 "protocol version %u is not supported; this "
                                 "cumodd speaks version %d",
                                 req->version,
                                 CUMOD__PROTOCOL_VERSION__PROTOCOL_VERSION_1);
    return CUMOD_OK;
}
