/* SPDX-License-Identifier: MIT */
/*
 * The stream-ordered allocator: cuMemAllocAsync and cuMemFreeAsync on each
 * device's default memory pool, and the pool's attributes.
 *
 * An allocation is made at the call (the memory exists at once; nothing is
 * queued, so no hold delays it); a free is an item on its stream that frees
 * the memory when the stream reaches it. The pool keeps nothing back: freed
 * memory goes at once, so its reserved and used sizes are the same.
 */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>

void
fake_pool_init(fake_pool *pool)
{
    *pool = (fake_pool){
        .reuse_follow_event_deps = 1,
        .reuse_opportunistic = 1,
        .reuse_internal_deps = 1,
    };
}

CUresult CUDAAPI
cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    fake_state *st = fake_lock();
    fake_queue *q;
    int dev;
    CUresult rc = fake_stream_queue(st, hStream, &q, &dev);
    if (rc == CUDA_SUCCESS && (dptr == NULL || bytesize == 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        char extra[64];
        snprintf(extra, sizeof(extra), " stream=0x%jx async=1",
                 (uintmax_t)(uintptr_t)hStream);
        rc = fake_mem_alloc(st, dev, bytesize, 1, extra, dptr);
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    fake_state *st = fake_lock();
    fake_queue *q;
    fake_work *w = NULL;
    int dev;
    CUresult rc = fake_stream_queue(st, hStream, &q, &dev);
    fake_alloc *a =
        rc == CUDA_SUCCESS && dptr != 0 ? fake_alloc_at(st, dptr) : NULL;
    /* As cuMemFree: 0 is nothing to do. Memory from cuMemAlloc may be
     * freed this way too, as the driver allows; the same memory twice not. */
    if (rc == CUDA_SUCCESS && dptr != 0 && (a == NULL || a->freeing))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && dptr != 0 && (w = calloc(1, sizeof(*w))) == NULL)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (w != NULL && (rc = fake_work_prepare(st, w, q, NULL)) != CUDA_SUCCESS) {
        free(w);
        w = NULL;
    }
    if (w != NULL) {
        a->freeing = 1;
        w->kind = FAKE_WORK_FREE;
        w->dev = dev;
        w->record = SIZE_MAX;
        w->dst = (void *)(uintptr_t)dptr;
        fake_log(st, "free-queued ptr=0x%jx stream=0x%jx", (uintmax_t)dptr,
                 (uintmax_t)(uintptr_t)hStream);
        fake_work_commit(st, w); /* last: it may free a at once */
    }
    fake_unlock(st);
    return rc;
}

/* The pool handle's device, or -1. */
static int
pool_device(fake_state *st, CUmemoryPool pool)
{
    uint32_t gen, slot, sub;
    if (!fake_handle_split((uintptr_t)pool, FAKE_TAG_POOL, &gen, &slot, &sub) ||
        gen != st->pool_gen || slot >= (uint32_t)st->ndevices || sub != 0)
        return -1;
    return (int)slot;
}

CUresult CUDAAPI
cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    fake_state *st = fake_lock();
    CUresult rc = fake_check(st);
    if (rc == CUDA_SUCCESS && (dev < 0 || dev >= st->ndevices))
        rc = CUDA_ERROR_INVALID_DEVICE;
    if (rc == CUDA_SUCCESS && pool_out == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *pool_out = (CUmemoryPool)fake_handle(FAKE_TAG_POOL, st->pool_gen,
                                              (uint32_t)dev, 0);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    fake_state *st = fake_lock();
    CUresult rc = fake_check(st);
    int dev = rc == CUDA_SUCCESS ? pool_device(st, pool) : -1;
    if (rc == CUDA_SUCCESS && (dev < 0 || value == NULL))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        goto out;
    fake_device *d = &st->dev[dev];
    const int *flag = value; /* the reuse attributes are ints */
    cuuint64_t v = 0;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        d->pool.reuse_follow_event_deps = *flag != 0;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        d->pool.reuse_opportunistic = *flag != 0;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        d->pool.reuse_internal_deps = *flag != 0;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        d->pool.release_threshold = *(const cuuint64_t *)value;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        /* A high watermark can only be reset: to the current size. */
        v = *(const cuuint64_t *)value;
        if (v != 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
            d->pool.reserved_high = d->pool_used;
        else
            d->pool.used_high = d->pool_used;
        break;
    default: /* the current sizes are read-only; the rest unknown */
        rc = CUDA_ERROR_INVALID_VALUE;
        break;
    }
out:
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    fake_state *st = fake_lock();
    CUresult rc = fake_check(st);
    int dev = rc == CUDA_SUCCESS ? pool_device(st, pool) : -1;
    if (rc == CUDA_SUCCESS && (dev < 0 || value == NULL))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        goto out;
    const fake_device *d = &st->dev[dev];
    int *flag = value;
    cuuint64_t *size = value;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        *flag = d->pool.reuse_follow_event_deps;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        *flag = d->pool.reuse_opportunistic;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *flag = d->pool.reuse_internal_deps;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *size = d->pool.release_threshold;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *size = d->pool_used;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        *size = d->pool.reserved_high;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        *size = d->pool.used_high;
        break;
    default:
        rc = CUDA_ERROR_INVALID_VALUE;
        break;
    }
out:
    fake_unlock(st);
    return rc;
}
