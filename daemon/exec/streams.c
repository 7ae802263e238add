/* SPDX-License-Identifier: MIT */
/*
 * Service: the executor's streams (streams.h): one per stream key the front
 * names (session << 20 | index), taken from a pool made at start and given back
 * to it once a closed stream's work has completed.
 *
 * Why a pool: cuStreamCreate sometimes waits for the device, and holds
 * every launch of the context meanwhile. Measured on an H100 (driver 580,
 * bench/bench_threads.c): 200 streams made while 1 s kernels run took 3 s,
 * the longest cuStreamCreate 1.0 s, and another thread's cuLaunchKernel
 * waited 1.0 s with it; 256 streams made while the device is idle take
 * 12 ms, and launching on them holds nobody. So streams are made at start,
 * when the device is idle, and recycled rather than destroyed; a stream is
 * made at run time only when every pooled one is in use (logged).
 */
#include <pthread.h>
#include <stdlib.h>

#include "common/idmap.h"
#include "evpool.h"
#include "common/log.h"
#include "streams.h"

struct cumod_exec_streams {
    /* key -> CUstream, under map_mtx: the submission threads look up
     * and add (a stream's key always on the same one), the serving thread
     * takes (while they are quiet). A leaf. */
    cumod_idmap by_key;
    pthread_mutex_t map_mtx;
    /* Spare streams: taken by the submission thread, given back by the
     * completion thread. mtx is a leaf: no driver call is made under it. */
    pthread_mutex_t mtx;
    CUstream *spare;
    size_t nspare, cap;
    size_t made; /* all streams ever made */
};

cumod_err
cumod__exec_streams_start(cumod_exec *ex, size_t n)
{
    struct cumod_exec_streams *st = calloc(1, sizeof(*st));
    if (st == NULL ||
        (st->spare = calloc(n ? n : 1, sizeof(CUstream))) == NULL) {
        free(st);
        return CUMOD_ENOMEM;
    }
    cumod__idmap_init(&st->by_key);
    pthread_mutex_init(&st->mtx, NULL);
    pthread_mutex_init(&st->map_mtx, NULL);
    st->cap = n ? n : 1;
    for (size_t i = 0; i < n; i++) {
        CUstream s;
        if (ex->drv.stream_create(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
            break;
        st->spare[st->nspare++] = s;
        st->made++;
    }
    ex->streams = st;
    return CUMOD_OK;
}

void
cumod__exec_streams_stop(cumod_exec *ex)
{
    struct cumod_exec_streams *st = ex->streams;
    size_t cur = 0;
    CUstream s;

    if (st == NULL)
        return;
    while ((s = cumod__idmap_next(&st->by_key, &cur, NULL)) != NULL)
        (void)ex->drv.stream_destroy(s);
    cumod__idmap_fini(&st->by_key);
    for (size_t i = 0; i < st->nspare; i++)
        (void)ex->drv.stream_destroy(st->spare[i]);
    pthread_mutex_destroy(&st->mtx);
    pthread_mutex_destroy(&st->map_mtx);
    free(st->spare);
    free(st);
    ex->streams = NULL;
}

CUstream
cumod__exec_stream(cumod_exec *ex, uint64_t key, int create, CUresult *rp)
{
    struct cumod_exec_streams *st = ex->streams;
    pthread_mutex_lock(&st->map_mtx);
    CUstream s = cumod__idmap_get(&st->by_key, key);
    pthread_mutex_unlock(&st->map_mtx);
    CUresult r;

    if (s != NULL || !create)
        return s;
    pthread_mutex_lock(&st->mtx);
    if (st->nspare > 0)
        s = st->spare[--st->nspare];
    pthread_mutex_unlock(&st->mtx);
    if (s == NULL) {
        if ((r = ex->drv.stream_create(&s, CU_STREAM_NON_BLOCKING)) !=
            CUDA_SUCCESS) {
            *rp = r;
            return NULL;
        }
        pthread_mutex_lock(&st->mtx);
        size_t made = ++st->made;
        pthread_mutex_unlock(&st->mtx);
        if ((made & 63) == 1)
            CUMOD_LOGI("CUMOD-EXEC-STREAMS",
                       "%zu streams in use: making more while the device "
                       "is busy can hold every launch for as long as "
                       "running kernels take",
                       made);
    }
    pthread_mutex_lock(&st->map_mtx);
    cumod_err set = cumod__idmap_set(&st->by_key, key, s);
    pthread_mutex_unlock(&st->map_mtx);
    if (set != CUMOD_OK) {
        cumod__exec_stream_recycle(ex, s);
        *rp = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    return s;
}

CUstream
cumod__exec_stream_take(cumod_exec *ex, uint64_t key)
{
    pthread_mutex_lock(&ex->streams->map_mtx);
    CUstream s = cumod__idmap_remove(&ex->streams->by_key, key);
    pthread_mutex_unlock(&ex->streams->map_mtx);
    return s;
}

void
cumod__exec_stream_recycle(cumod_exec *ex, CUstream s)
{
    struct cumod_exec_streams *st = ex->streams;
    int keep = 0;

    pthread_mutex_lock(&st->mtx);
    if (st->nspare == st->cap) {
        CUstream *n = realloc(st->spare, st->cap * 2 * sizeof(*n));
        if (n != NULL) {
            st->spare = n;
            st->cap *= 2;
        }
    }
    if (st->nspare < st->cap) {
        st->spare[st->nspare++] = s;
        keep = 1;
    }
    pthread_mutex_unlock(&st->mtx);
    if (!keep)
        (void)ex->drv.stream_destroy(s);
}

CUresult
cumod__exec_stream_mark(cumod_exec *ex, uint64_t key, CUstream *sp,
                        CUevent *evp)
{
    CUresult r;
    CUevent x;
    CUstream s = cumod__exec_stream(ex, key, 0, &r);

    if (s == NULL) {
        *sp = NULL;
        return CUDA_SUCCESS;
    }
    if ((r = cumod__exec_event_get(ex, &x)) != CUDA_SUCCESS)
        return r;
    if ((r = ex->drv.event_record(x, s)) != CUDA_SUCCESS) {
        cumod__exec_event_put(ex, x);
        return r;
    }
    *sp = s;
    *evp = x;
    return CUDA_SUCCESS;
}
