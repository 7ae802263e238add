#include "decode.h"

#include <stdio.h>
#include <stdlib.h>

#include "cumod/errors.h"

static void *
decode_alloc(void *data, size_t size)
{
    cumod_decoder *d = data;
    if (size > d->budget - d->decoded) {
        d->over_budget = 1;
        return NULL;
    }
    d->decoded += size;
    return malloc(size);
}

static void
decode_free(void *data, void *p)
{
    (void)data;
    free(p);
}

void
cumod__decoder_init(cumod_decoder *d)
{
    d->pa = (ProtobufCAllocator){
        .alloc = decode_alloc, .free = decode_free, .allocator_data = d};
    d->decoded = d->budget = 0;
    d->over_budget = 0;
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

cumod_err
cumod__decode_request(cumod_decoder *d, const void *bytes, size_t len,
                      Cumod__Request **out, cumod_status *st)
{
    Cumod__Request *req;

    d->decoded = 0;
    d->budget = decode_budget(len);
    d->over_budget = 0;
    *out = NULL;
    req = cumod__request__unpack(&d->pa, len, bytes);
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
