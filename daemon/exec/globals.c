/* SPDX-License-Identifier: MIT */
/*
 * Service: module globals in the executor (globals.h), for the LOAD and
 * GLOBALS handlers. A LOAD (or a GLOBALS command) carries the module's
 * globals spec (channel.h): the names of its __device__ and
 * __constant__ variables, the size each had, and the writes clients made
 * to them, which the daemon keeps. Each is looked up in the new module
 * (cuModuleGetGlobal) and the kept writes applied, synchronously on the
 * load lane, before the generation serves: a hot reload never silently
 * resets what clients set. A global with kept writes that the new image
 * lacks, or has at another size, fails the load, and the old generation
 * goes on serving.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "globals.h"
#include "common/log.h"
#include "reply.h"

/* A reader of the spec's bytes, failing on anything short. */
typedef struct spec_rd {
    const uint8_t *p;
    size_t len, at;
    int bad;
} spec_rd;

static const void *
spec_take(spec_rd *r, size_t n)
{
    if (r->bad || n > r->len - r->at) {
        r->bad = 1;
        return NULL;
    }
    const void *v = r->p + r->at;
    r->at += n;
    return v;
}

static uint64_t
spec_u(spec_rd *r, size_t n)
{
    const void *v = spec_take(r, n);
    uint64_t x = 0;
    if (v != NULL)
        memcpy(&x, v, n); /* little-endian host: the same binary writes it */
    return x;
}

int
cumod__exec_globals_apply(cumod_exec *ex, CUmodule mod, const void *spec,
                          size_t len, const char *module, void *out_table,
                          char *msg, size_t msglen)
{
    const cumod_driver *d = &ex->drv;
    cumod_exec_table *t = out_table;
    spec_rd r = {.p = spec, .len = len};
    uint32_t n = len ? (uint32_t)spec_u(&r, 4) : 0;
    char name[1024];

    if (t != NULL)
        cumod__exec_table_put(t, &n, sizeof(n));
    for (uint32_t i = 0; i < n && !r.bad; i++) {
        uint16_t nl = (uint16_t)spec_u(&r, 2);
        const char *nm = spec_take(&r, nl);
        uint64_t want = spec_u(&r, 8);
        uint32_t nw = (uint32_t)spec_u(&r, 4);
        if (r.bad || nl == 0 || nl >= sizeof(name))
            break;
        memcpy(name, nm, nl);
        name[nl] = '\0';
        CUdeviceptr dptr = 0;
        size_t size = 0;
        CUresult cr = d->module_get_global(&dptr, &size, mod, name);
        if (cr != CUDA_SUCCESS) {
            dptr = 0;
            size = 0;
        }
        if (nw > 0 && cr != CUDA_SUCCESS) {
            snprintf(msg, msglen,
                     "global %s of %s has writes kept for it, but this image "
                     "has no such global: the module's earlier generation "
                     "keeps serving",
                     name, module);
            return cr == CUDA_ERROR_NOT_FOUND
                       ? CUMOD_EIMAGE
                       : cumod__cu_err(d, cr, "cuModuleGetGlobal", msg, msglen);
        }
        if (nw > 0 && want != 0 && size != want) {
            snprintf(msg, msglen,
                     "global %s of %s is %zu bytes in this image, %llu in the "
                     "one it replaces, with writes kept for it: the earlier "
                     "generation keeps serving",
                     name, module, size, (unsigned long long)want);
            return CUMOD_EIMAGE;
        }
        for (uint32_t w = 0; w < nw; w++) {
            uint64_t off = spec_u(&r, 8);
            uint32_t wl = (uint32_t)spec_u(&r, 4);
            const void *bytes = spec_take(&r, wl);
            if (r.bad)
                break;
            if (off > size || wl > size - off) {
                snprintf(msg, msglen,
                         "a kept write to global %s of %s (offset %llu, %u "
                         "bytes) is past its %zu bytes",
                         name, module, (unsigned long long)off, wl, size);
                return CUMOD_EIMAGE;
            }
            /* Synchronous, from pageable memory, on the load lane: the
             * generation does not serve before it is done. */
            cr = d->memcpy_htod(dptr + off, bytes, wl);
            if (cr != CUDA_SUCCESS) {
                char w2[1200];
                snprintf(w2, sizeof(w2), "cuMemcpyHtoD to global %s of %s",
                         name, module);
                return cumod__cu_err(d, cr, w2, msg, msglen);
            }
        }
        if (t != NULL) {
            uint64_t v[2] = {dptr, size};
            cumod__exec_table_put(t, &nl, sizeof(nl));
            cumod__exec_table_put(t, name, nl);
            cumod__exec_table_put(t, v, sizeof(v));
        }
    }
    if (r.bad) {
        snprintf(msg, msglen, "malformed globals spec for %s", module);
        return CUMOD_EPROTO;
    }
    return CUMOD_OK;
}
