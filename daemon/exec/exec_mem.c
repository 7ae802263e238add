/*
 * Device memory and shared segments in the executor. Nothing here waits
 * for a session's work on the submission thread (figures from
 * bench/bench_threads.c on an H100, driver 580):
 *   - allocations come from the device's default memory pool on a private
 *     stream (cuMemAllocAsync, then a synchronize of that stream, which
 *     holds nothing else: 0.3 ms with a kernel running elsewhere);
 *   - frees are cuMemFreeAsync on the session's reclaim stream, made to
 *     wait (cuStreamWaitEvent) for the work the session's streams have at
 *     that moment; cuMemFree instead waits for the device and holds every
 *     launch of the context meanwhile;
 *   - a closing session's streams are destroyed behind their work
 *     (cuStreamDestroy returns at once), its reclaim stream waiting for
 *     them first;
 *   - segments are registered on the host lane (cuMemHostRegister of 256
 *     MiB takes 14-50 ms) and unregistered on the reclaim lane once the
 *     device is idle (cuMemHostUnregister waits for the device and holds
 *     every launch meanwhile), or after 5 s without an idle moment.
 * The pool's internal dependencies are turned off, so an allocation never
 * waits on another stream's free.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "exec.h"
#include "log.h"

/* How long an unmap waits for an idle device before it stalls launches. */
#define MEM_UNMAP_IDLE_WAIT_MS 5000

static int
mem_reply(cumod_exec *ex, const cumod_chan_hdr *req, int status,
          const void *payload, size_t len)
{
    cumod_chan_hdr h = {.op = req->op, .seq = req->seq, .status = status};
    return cumod__chan_send(ex->chan, &h, payload, len, -1);
}

/* A CUDA error of the submission thread: a lost context ends the process
 * (after the reply: the request that met it hears why). */
static void
mem_check_lost(cumod_exec *ex, CUresult r)
{
    if (cumod__cu_context_lost(r))
        cumod__exec_context_lost(ex, r);
}

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
                 &zero)) != CUDA_SUCCESS ||
            (r = d->stream_create(&ex->alloc_stream, CU_STREAM_NON_BLOCKING)) !=
                CUDA_SUCCESS) {
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
    if (cumod__lane_start(ex, "load", &ex->load_lane) != CUMOD_OK ||
        cumod__lane_start(ex, "host", &ex->host_lane) != CUMOD_OK ||
        cumod__lane_start(ex, "reclaim", &ex->reclaim_lane) != CUMOD_OK)
        return CUMOD_ENOMEM;
    return CUMOD_OK;
}

void
cumod__exec_mem_stop(cumod_exec *ex)
{
    cumod__lane_stop(ex->load_lane);
    cumod__lane_stop(ex->host_lane);
    cumod__lane_stop(ex->reclaim_lane);
    ex->load_lane = ex->host_lane = ex->reclaim_lane = NULL;
    if (ex->alloc_stream != NULL)
        (void)ex->drv.stream_destroy(ex->alloc_stream);
    ex->alloc_stream = NULL;
}

static int
mem_alloc(cumod_exec *ex, const cumod_chan_hdr *hdr, const void *p, size_t len)
{
    const cumod_driver *d = &ex->drv;
    cumod_chan_alloc a = {0};
    CUdeviceptr dp = 0;
    char msg[256];
    CUresult r;

    if (len >= sizeof(a))
        memcpy(&a, p, sizeof(a));
    if (ex->pools) {
        r = d->mem_alloc_async(&dp, a.size ? a.size : 1, ex->alloc_stream);
        /* The private stream holds only allocations: this waits for this
         * one, never for a session's work. */
        if (r == CUDA_SUCCESS)
            r = d->stream_synchronize(ex->alloc_stream);
    } else {
        r = d->mem_alloc(&dp, a.size ? a.size : 1);
    }
    int st = cumod__cu_err(d, r, "cuMemAllocAsync", msg, sizeof(msg));
    a.dptr = st == CUMOD_OK ? dp : 0;
    int rv = mem_reply(ex, hdr, st, &a, sizeof(a));
    mem_check_lost(ex, r);
    return rv;
}

/* Makes stream r wait for the work every stream of keys has now. The
 * event may be recorded again at once: a wait takes the event's state at
 * the call. */
static CUresult
mem_wait_streams(cumod_exec *ex, CUstream r, const char *keys, uint64_t n,
                 int destroy)
{
    const cumod_driver *d = &ex->drv;
    CUevent ev = NULL;
    CUresult rv = CUDA_SUCCESS;

    for (uint64_t i = 0; i < n; i++) {
        uint64_t key;
        CUresult e;
        memcpy(&key, keys + i * sizeof(uint64_t), sizeof(key));
        CUstream s = cumod__exec_stream(ex, key, 0, &e);
        if (s == NULL)
            continue; /* never used: nothing to wait for */
        if (r != NULL) {
            if (ev == NULL &&
                (rv = cumod__exec_event_get(ex, &ev)) != CUDA_SUCCESS)
                break;
            if ((rv = d->event_record(ev, s)) != CUDA_SUCCESS ||
                (rv = d->stream_wait_event(r, ev, 0)) != CUDA_SUCCESS)
                break;
        }
        if (destroy)
            cumod__exec_stream_destroy(ex, key);
    }
    if (ev != NULL)
        cumod__exec_event_put(ex, ev);
    return rv;
}

static int
mem_free(cumod_exec *ex, const cumod_chan_hdr *hdr, const char *p, size_t len)
{
    const cumod_driver *d = &ex->drv;
    cumod_chan_free f = {0};
    CUstream r = NULL;
    CUresult e = CUDA_SUCCESS;
    char msg[256];

    if (len < sizeof(f))
        return mem_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    memcpy(&f, p, sizeof(f));
    if (f.count > (len - sizeof(f)) / sizeof(uint64_t))
        return mem_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    if ((r = cumod__exec_stream(ex, f.reclaim, 1, &e)) != NULL &&
        (e = mem_wait_streams(ex, r, p + sizeof(f), f.count, 0)) ==
            CUDA_SUCCESS)
        e = d->mem_free_async((CUdeviceptr)f.dptr, r);
    int st = cumod__cu_err(d, e, "cuMemFreeAsync", msg, sizeof(msg));
    if (st != CUMOD_OK)
        CUMOD_LOGW("CUMOD-EXEC-FREE", "%s", msg);
    int rv = mem_reply(ex, hdr, st, NULL, 0);
    mem_check_lost(ex, e);
    return rv;
}

static int
mem_streams_close(cumod_exec *ex, const cumod_chan_hdr *hdr, const char *p,
                  size_t len)
{
    cumod_chan_streams sc = {0};
    CUstream r = NULL;
    CUresult e = CUDA_SUCCESS;
    char msg[256];

    if (len < sizeof(sc))
        return mem_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    memcpy(&sc, p, sizeof(sc));
    if (sc.count > (len - sizeof(sc)) / sizeof(uint64_t))
        return mem_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    if (sc.reclaim != 0)
        r = cumod__exec_stream(ex, sc.reclaim, 1, &e);
    if (sc.reclaim == 0 || r != NULL)
        e = mem_wait_streams(ex, r, p + sizeof(sc), sc.count, 1);
    int st = cumod__cu_err(&ex->drv, e, "closing streams", msg, sizeof(msg));
    if (st != CUMOD_OK)
        CUMOD_LOGW("CUMOD-EXEC-STREAMS", "%s", msg);
    int rv = mem_reply(ex, hdr, st, NULL, 0);
    mem_check_lost(ex, e);
    return rv;
}

/* Host lane: map the segment's descriptor and register it. */
static int
mem_seg_map(cumod_exec *ex, const cumod_chan_hdr *hdr, const void *p,
            size_t len, int fd, void *aux)
{
    const cumod_driver *d = &ex->drv;
    cumod_chan_segment sg = {0};
    char msg[256];
    int st;

    (void)aux;
    if (len >= sizeof(sg))
        memcpy(&sg, p, sizeof(sg));
    void *m = fd >= 0 && sg.size ? mmap(NULL, sg.size, PROT_READ | PROT_WRITE,
                                        MAP_SHARED, fd, 0)
                                 : MAP_FAILED;
    if (fd >= 0)
        close(fd);
    if (m == MAP_FAILED) {
        st = CUMOD_EINVAL;
    } else {
        CUresult r = d->mem_host_register(m, sg.size, 0);
        st = cumod__cu_err(d, r, "cuMemHostRegister", msg, sizeof(msg));
        if (st != CUMOD_OK) {
            CUMOD_LOGW("CUMOD-EXEC-SEGMENT", "%s", msg);
            munmap(m, sg.size);
        } else {
            sg.host = (uint64_t)(uintptr_t)m;
        }
    }
    return mem_reply(ex, hdr, st, &sg, sizeof(sg));
}

/* Reclaim lane: after the reclaim stream's work (aux: an event recorded on
 * it, or NULL) and an idle device, unregister and unmap. */
static int
mem_seg_unmap(cumod_exec *ex, const cumod_chan_hdr *hdr, const void *p,
              size_t len, int fd, void *aux)
{
    const cumod_driver *d = &ex->drv;
    cumod_chan_segment sg = {0};
    CUevent ev = aux;

    if (fd >= 0)
        close(fd);
    if (len >= sizeof(sg))
        memcpy(&sg, p, sizeof(sg));
    if (ev != NULL) {
        /* Polled, not cuEventSynchronize: this lane only waits. */
        struct timespec nap = {0, 1000000};
        while (d->event_query(ev) == CUDA_ERROR_NOT_READY)
            nanosleep(&nap, NULL);
        cumod__exec_event_put(ex, ev);
    }
    if (!cumod__exec_wait_idle(ex, MEM_UNMAP_IDLE_WAIT_MS))
        CUMOD_LOGI("CUMOD-EXEC-SEGMENT",
                   "no idle moment in %d ms: unregistering a %llu-byte "
                   "segment now holds launches until running work ends",
                   MEM_UNMAP_IDLE_WAIT_MS, (unsigned long long)sg.size);
    void *m = (void *)(uintptr_t)sg.host;
    if (m != NULL) {
        (void)d->mem_host_unregister(m);
        munmap(m, sg.size);
    }
    return mem_reply(ex, hdr, CUMOD_OK, NULL, 0);
}

int
cumod__exec_on_mem(cumod_exec *ex, const cumod_chan_hdr *hdr,
                   const void *payload, size_t len, int fd)
{
    switch (hdr->op) {
    case CUMOD_CHAN_ALLOC:
        return mem_alloc(ex, hdr, payload, len);
    case CUMOD_CHAN_FREE:
        return mem_free(ex, hdr, payload, len);
    case CUMOD_CHAN_STREAMS_CLOSE:
        return mem_streams_close(ex, hdr, payload, len);
    case CUMOD_CHAN_SEG_MAP:
        if (cumod__lane_post(ex->host_lane, mem_seg_map, hdr, payload, len, fd,
                             NULL) != CUMOD_OK)
            return mem_reply(ex, hdr, CUMOD_ENOMEM, NULL, 0);
        return 0;
    case CUMOD_CHAN_SEG_UNMAP: {
        cumod_chan_segment sg = {0};
        CUevent ev = NULL;
        CUresult e;
        if (fd >= 0)
            close(fd);
        if (len >= sizeof(sg))
            memcpy(&sg, payload, sizeof(sg));
        /* Its place in the reclaim stream is taken here, in order. */
        CUstream r =
            sg.reclaim ? cumod__exec_stream(ex, sg.reclaim, 0, &e) : NULL;
        if (r != NULL && cumod__exec_event_get(ex, &ev) == CUDA_SUCCESS &&
            ex->drv.event_record(ev, r) != CUDA_SUCCESS) {
            cumod__exec_event_put(ex, ev);
            ev = NULL;
        }
        if (cumod__lane_post(ex->reclaim_lane, mem_seg_unmap, hdr, payload, len,
                             -1, ev) != CUMOD_OK)
            return mem_reply(ex, hdr, CUMOD_ENOMEM, NULL, 0);
        return 0;
    }
    default:
        if (fd >= 0)
            close(fd);
        return mem_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    }
}
