/* SPDX-License-Identifier: MIT */
/*
 * Handlers of CUMOD_CHAN_ALLOC, CUMOD_CHAN_FREE and CUMOD_CHAN_MEMINFO, on
 * the submission thread; the stream-ordered allocator they use is set up
 * here (cumod__exec_mem_start). What they share with the stream and
 * segment handlers (exec_streams.c, exec_seg.c) is in the services:
 * streams.h, reclaim.h. Nothing here waits
 * for a session's work on the submission thread (figures from
 * bench/bench_threads.c on an H100, driver 580):
 *   - allocations come from the device's default memory pool on a private
 *     stream (cuMemAllocAsync, then a synchronize of that stream, which
 *     holds nothing else: 0.3 ms with a kernel running elsewhere);
 *   - a free records an event on each of the session's streams and goes
 *     to the session's reclaim queue (reclaim.c), which issues
 *     cuMemFreeAsync on the private stream once they have completed;
 *     cuMemFree instead waits for the device and holds every launch of the
 *     context meanwhile, and a stream made to wait for a long kernel
 *     (cuStreamWaitEvent) holds up streams that share its hardware queue;
 *   - a closed stream goes back to the pool once its work has completed;
 *   - segments are registered on the host lane (cuMemHostRegister of 256
 *     MiB takes 14-50 ms) and unregistered on the reclaim lane once the
 *     work in flight at that moment has completed (cuMemHostUnregister
 *     waits for the device and holds every launch meanwhile).
 * The pool's internal dependencies are turned off, so an allocation never
 * waits on another stream's free.
 */
#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"
#include "handlers.h"
#include "evpool.h"
#include "common/log.h"
#include "reclaim.h"
#include "reply.h"
#include "streams.h"

cumod_err
cumod__exec_mem_start(cumod_exec *ex)
{
    const cumod_driver *d = &ex->drv;
    int pools = 0;
    CUmemoryPool pool;
    CUresult r;

    if (d->device_get_attribute(&pools,
                                CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                ex->dev) != CUDA_SUCCESS)
        pools = 0;
    if (pools) {
        int zero = 0;
        char msg[256];
        if ((r = d->device_get_default_mem_pool(&pool, ex->dev)) !=
                CUDA_SUCCESS ||
            (r = d->mem_pool_set_attribute(
                 pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                 &zero)) != CUDA_SUCCESS) {
            cumod__cu_err(d, r, "setting up the memory pool", msg, sizeof(msg));
            CUMOD_LOGW("CUMOD-EXEC-POOL", "%s; allocating with cuMemAlloc",
                       msg);
            pools = 0;
        }
    } else {
        CUMOD_LOGI("CUMOD-EXEC-POOL",
                   "the device has no memory pools: allocating with "
                   "cuMemAlloc");
    }
    ex->pools = pools;
    if ((r = d->stream_create(&ex->alloc_stream, CU_STREAM_NON_BLOCKING)) !=
        CUDA_SUCCESS)
        return CUMOD_EDRIVER;
    return CUMOD_OK;
}

void
cumod__exec_mem_stop(cumod_exec *ex)
{
    if (ex->alloc_stream != NULL)
        (void)ex->drv.stream_destroy(ex->alloc_stream);
    ex->alloc_stream = NULL;
}

int
cumod__exec_on_alloc(cumod_exec *ex, const cumod_chan_hdr *hdr, const void *p,
                     size_t len, int fd, void *aux)
{
    const cumod_driver *d = &ex->drv;
    cumod_chan_alloc a = {0};
    CUdeviceptr dp = 0;
    CUresult r;

    (void)aux;
    /* A short command allocates a byte. */
    (void)cumod__exec_payload(p, len, fd, &a, sizeof(a));
    if (ex->pools) {
        r = d->mem_alloc_async(&dp, a.size ? a.size : 1, ex->alloc_stream);
        /* The private stream holds only allocations: this waits for this
         * one, never for a session's work. */
        if (r == CUDA_SUCCESS)
            r = d->stream_synchronize(ex->alloc_stream);
    } else {
        r = d->mem_alloc(&dp, a.size ? a.size : 1);
    }
    a.dptr = r == CUDA_SUCCESS ? dp : 0;
    return cumod__exec_reply_cu(ex, hdr, r, "cuMemAllocAsync", NULL, &a,
                                sizeof(a));
}

/* Records an event on the stream of each key in use (keys: n u64s) into
 * ev (room for n); the count in *nev. */
static CUresult
mem_mark_streams(cumod_exec *ex, const char *keys, uint64_t n, CUevent *ev,
                 uint32_t *nev)
{
    CUresult r = CUDA_SUCCESS;

    *nev = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key;
        CUstream s;
        CUevent x;
        memcpy(&key, keys + i * sizeof(uint64_t), sizeof(key));
        if ((r = cumod__exec_stream_mark(ex, key, &s, &x)) != CUDA_SUCCESS)
            break;
        if (s != NULL) /* else never used: nothing to wait for */
            ev[(*nev)++] = x;
    }
    return r;
}

int
cumod__exec_on_free(cumod_exec *ex, const cumod_chan_hdr *hdr,
                    const void *payload, size_t len, int fd, void *aux)
{
    const char *p = payload;
    cumod_chan_free f = {0};
    CUevent *ev = NULL;
    uint32_t nev = 0;
    CUresult e = CUDA_SUCCESS;

    (void)aux;
    if (cumod__exec_payload(p, len, fd, &f, sizeof(f)) != 0 ||
        !cumod__exec_keys_fit(len, sizeof(f), f.count))
        return cumod__exec_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    if (f.count > 0 && (ev = calloc(f.count, sizeof(*ev))) == NULL)
        e = CUDA_ERROR_OUT_OF_MEMORY;
    if (e == CUDA_SUCCESS)
        e = mem_mark_streams(ex, p + sizeof(f), f.count, ev, &nev);
    if (e == CUDA_SUCCESS &&
        cumod__exec_reclaim_push(ex, f.reclaim, CUMOD_RECLAIM_FREE, f.dptr, 0,
                                 NULL, ev, nev, NULL) != CUMOD_OK)
        e = CUDA_ERROR_OUT_OF_MEMORY;
    if (e != CUDA_SUCCESS)
        for (uint32_t i = 0; i < nev; i++)
            cumod__exec_event_put(ex, ev[i]);
    free(ev);
    return cumod__exec_reply_cu(ex, hdr, e, "freeing", "CUMOD-EXEC-FREE", NULL,
                                0);
}

int
cumod__exec_on_meminfo(cumod_exec *ex, const cumod_chan_hdr *hdr,
                       const void *payload, size_t len, int fd, void *aux)
{
    cumod_chan_meminfo mi = {0};
    size_t free_b = 0, total_b = 0;
    char msg[256];
    CUresult r = ex->drv.mem_get_info(&free_b, &total_b);

    (void)aux;
    (void)cumod__exec_payload(payload, len, fd, NULL, 0);
    int st = cumod__cu_err(&ex->drv, r, "cuMemGetInfo", msg, sizeof(msg));
    if (st != CUMOD_OK)
        CUMOD_LOGW("CUMOD-EXEC-MEMINFO", "%s", msg);
    mi.free_memory = free_b;
    mi.total_memory = total_b;
    return cumod__exec_reply(ex, hdr, st, &mi, sizeof(mi));
}
