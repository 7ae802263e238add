/*
 * Device memory and shared segments in the executor. Nothing here waits
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
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "exec.h"
#include "log.h"
#include "shmguard.h"

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
    if ((r = d->stream_create(&ex->alloc_stream, CU_STREAM_NON_BLOCKING)) !=
        CUDA_SUCCESS)
        return CUMOD_EDRIVER;
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

/* Records an event on the stream of each key in use (keys: n u64s) into
 * ev (room for n); the count in *nev. With take, each stream is also taken
 * out of use and queued on rkey to go back to the pool after its work. */
static CUresult
mem_mark_streams(cumod_exec *ex, uint64_t rkey, const char *keys, uint64_t n,
                 int take, CUevent *ev, uint32_t *nev)
{
    CUresult r = CUDA_SUCCESS;

    *nev = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key;
        CUresult e;
        memcpy(&key, keys + i * sizeof(uint64_t), sizeof(key));
        CUstream s = cumod__exec_stream(ex, key, 0, &e);
        if (s == NULL)
            continue; /* never used: nothing to wait for */
        CUevent x;
        if ((r = cumod__exec_event_get(ex, &x)) != CUDA_SUCCESS)
            break;
        if ((r = ex->drv.event_record(x, s)) != CUDA_SUCCESS) {
            cumod__exec_event_put(ex, x);
            break;
        }
        if (!take) {
            ev[(*nev)++] = x;
            continue;
        }
        /* Each closed stream is an operation of its own: it goes back to
         * the pool after its own work, and later frees wait for it. */
        cumod__exec_blas_stream_closed(ex, s);
        (void)cumod__exec_stream_take(ex, key);
        if (cumod__exec_reclaim_push(ex, rkey, CUMOD_RECLAIM_STREAM, 0, 0, s,
                                     &x, 1, NULL) != CUMOD_OK) {
            cumod__exec_event_put(ex, x); /* the stream is lost to the pool */
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
    }
    return r;
}

static int
mem_free(cumod_exec *ex, const cumod_chan_hdr *hdr, const char *p, size_t len)
{
    cumod_chan_free f = {0};
    CUevent *ev = NULL;
    uint32_t nev = 0;
    CUresult e = CUDA_SUCCESS;
    char msg[256];

    if (len < sizeof(f))
        return mem_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    memcpy(&f, p, sizeof(f));
    if (f.count > (len - sizeof(f)) / sizeof(uint64_t))
        return mem_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    if (f.count > 0 && (ev = calloc(f.count, sizeof(*ev))) == NULL)
        e = CUDA_ERROR_OUT_OF_MEMORY;
    if (e == CUDA_SUCCESS)
        e = mem_mark_streams(ex, f.reclaim, p + sizeof(f), f.count, 0, ev,
                             &nev);
    if (e == CUDA_SUCCESS &&
        cumod__exec_reclaim_push(ex, f.reclaim, CUMOD_RECLAIM_FREE, f.dptr, 0,
                                 NULL, ev, nev, NULL) != CUMOD_OK)
        e = CUDA_ERROR_OUT_OF_MEMORY;
    if (e != CUDA_SUCCESS)
        for (uint32_t i = 0; i < nev; i++)
            cumod__exec_event_put(ex, ev[i]);
    free(ev);
    int st = cumod__cu_err(&ex->drv, e, "freeing", msg, sizeof(msg));
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
    CUresult e = CUDA_SUCCESS;
    uint32_t nev;
    char msg[256];

    if (len < sizeof(sc))
        return mem_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    memcpy(&sc, p, sizeof(sc));
    if (sc.count > (len - sizeof(sc)) / sizeof(uint64_t))
        return mem_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    if (sc.count == 0) {
        /* The session is gone: its queue ends after what it holds. */
        if (cumod__exec_reclaim_push(ex, sc.reclaim, CUMOD_RECLAIM_END, 0, 0,
                                     NULL, NULL, 0, NULL) != CUMOD_OK)
            e = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        e = mem_mark_streams(ex, sc.reclaim, p + sizeof(sc), sc.count, 1, NULL,
                             &nev);
    }
    int st = cumod__cu_err(&ex->drv, e, "closing streams", msg, sizeof(msg));
    if (st != CUMOD_OK)
        CUMOD_LOGW("CUMOD-EXEC-STREAMS", "%s", msg);
    int rv = mem_reply(ex, hdr, st, NULL, 0);
    mem_check_lost(ex, e);
    return rv;
}

/* Host lane: map the segment's descriptor and register it. The client
 * may shrink it at any moment: the front checked its size, but it is
 * checked again here, on the descriptor mapped, and the mapping is
 * guarded (shmguard.h) before anything of ours touches it: a CPU copy
 * (a driver's, the fake's) of pages cut off then reads zeros instead of
 * ending the executor and every session's buffers with it. */
static int
mem_seg_map(cumod_exec *ex, const cumod_chan_hdr *hdr, const void *p,
            size_t len, int fd, void *aux)
{
    const cumod_driver *d = &ex->drv;
    cumod_chan_segment sg = {0};
    cumod_shm_range *guard = NULL;
    struct stat sb;
    char msg[256];
    int st;

    (void)aux;
    if (len >= sizeof(sg))
        memcpy(&sg, p, sizeof(sg));
    void *m =
        fd >= 0 && sg.size && fstat(fd, &sb) == 0 &&
                (uint64_t)sb.st_size >= sg.size
            ? mmap(NULL, sg.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            : MAP_FAILED;
    if (fd >= 0)
        close(fd);
    if (m == MAP_FAILED) {
        st = CUMOD_EINVAL;
    } else if (cumod__shmguard_add(m, sg.size, &guard) != CUMOD_OK) {
        st = CUMOD_ENOMEM;
        munmap(m, sg.size);
    } else {
        CUresult r = d->mem_host_register(m, sg.size, 0);
        st = cumod__cu_err(d, r, "cuMemHostRegister", msg, sizeof(msg));
        if (st != CUMOD_OK) {
            CUMOD_LOGW("CUMOD-EXEC-SEGMENT", "%s", msg);
            cumod__shmguard_remove(guard);
            munmap(m, sg.size);
        } else {
            sg.host = (uint64_t)(uintptr_t)m;
        }
    }
    return mem_reply(ex, hdr, st, &sg, sizeof(sg));
}

/* Reclaim lane: once the kernels running now have ended, unregister and
 * unmap. */
static int
mem_seg_unmap(cumod_exec *ex, const cumod_chan_hdr *hdr, const void *p,
              size_t len, int fd, void *aux)
{
    const cumod_driver *d = &ex->drv;
    cumod_chan_segment sg = {0};

    (void)aux;
    if (fd >= 0)
        close(fd);
    if (len >= sizeof(sg))
        memcpy(&sg, p, sizeof(sg));
    (void)cumod__exec_wait_quiet(ex, "unregistering a segment");
    void *m = (void *)(uintptr_t)sg.host;
    if (m != NULL) {
        (void)d->mem_host_unregister(m);
        cumod__shmguard_remove(cumod__shmguard_find(sg.host, sg.size));
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
        if (fd >= 0)
            close(fd);
        if (len >= sizeof(sg))
            memcpy(&sg, payload, sizeof(sg));
        /* A closing session's segment: after what its queue holds. */
        if (sg.reclaim != 0) {
            if (cumod__exec_reclaim_push(ex, sg.reclaim, CUMOD_RECLAIM_UNMAP,
                                         sg.host, sg.size, NULL, NULL, 0,
                                         hdr) != CUMOD_OK)
                return mem_reply(ex, hdr, CUMOD_ENOMEM, NULL, 0);
            return 0;
        }
        cumod__exec_unmap_later(ex, hdr, sg.host, sg.size);
        return 0;
    }
    default:
        if (fd >= 0)
            close(fd);
        return mem_reply(ex, hdr, CUMOD_EPROTO, NULL, 0);
    }
}

void
cumod__exec_unmap_later(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        uint64_t host, uint64_t size)
{
    cumod_chan_segment sg = {.size = size, .host = host};
    if (cumod__lane_post(ex->reclaim_lane, mem_seg_unmap, hdr, &sg, sizeof(sg),
                         -1, NULL) != CUMOD_OK) {
        (void)mem_reply(ex, hdr, CUMOD_ENOMEM, NULL, 0);
        CUMOD_LOGE("CUMOD-NOMEM", "a %llu-byte segment stays mapped",
                   (unsigned long long)size);
    }
}
