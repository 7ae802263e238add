/* SPDX-License-Identifier: MIT */
/*
 * Device memory (host allocations standing in for it), copies, memsets and
 * host registration.
 *
 * A CUdeviceptr is the address of a zeroed host allocation, 256-byte
 * aligned like the driver's. Allocations are kept sorted by address, so a
 * copy's range is checked against the one allocation that must hold all of
 * it (CUDA_ERROR_INVALID_VALUE otherwise) before a byte moves.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

/* The index of the last allocation with base <= p, or SIZE_MAX. */
static size_t
memory_below(const fake_state *st, uintptr_t p)
{
    size_t lo = 0, hi = st->nallocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->allocs[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? SIZE_MAX : lo - 1;
}

fake_alloc *
fake_alloc_find(fake_state *st, uintptr_t p, size_t n)
{
    size_t i = memory_below(st, p);
    if (i == SIZE_MAX)
        return NULL;
    fake_alloc *a = &st->allocs[i];
    if (p - a->base > a->size || n > a->size - (p - a->base))
        return NULL;
    return a;
}

CUresult CUDAAPI
cuMemGetInfo(size_t *free_bytes, size_t *total)
{
    fake_state *st = fake_lock();
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS && (free_bytes == NULL || total == NULL))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        *total = st->mem;
        *free_bytes =
            st->dev[dev].used < st->mem ? st->mem - st->dev[dev].used : 0;
    }
    fake_unlock(st);
    return rc;
}

static CUresult memory_alloc(fake_state *st, int dev, size_t bytesize, int pool,
                             const char *extra, CUdeviceptr *out, int quiet);

CUresult
fake_mem_alloc(fake_state *st, int dev, size_t bytesize, int pool,
               const char *extra, CUdeviceptr *out)
{
    return memory_alloc(st, dev, bytesize, pool, extra, out, 0);
}

CUresult
fake_mem_alloc_quiet(fake_state *st, int dev, size_t bytesize, CUdeviceptr *out)
{
    return memory_alloc(st, dev, bytesize, 0, "", out, 1);
}

static CUresult
memory_alloc(fake_state *st, int dev, size_t bytesize, int pool,
             const char *extra, CUdeviceptr *out, int quiet)
{
    fake_device *d = &st->dev[dev];
    void *p = NULL;
    if ((!quiet && fake_fault_fires(st, FAKECUDA_FAULT_ALLOC, ++st->n_alloc,
                                    NULL, NULL)) ||
        bytesize > st->mem - (d->used < st->mem ? d->used : st->mem) ||
        bytesize > SIZE_MAX - 255 ||
        fake_grow(&st->allocs, &st->cap_allocs, st->nallocs + 1,
                  sizeof(*st->allocs)) != 0 ||
        (p = aligned_alloc(256, (bytesize + 255) / 256 * 256)) == NULL) {
        if (!quiet)
            fake_log(st, "alloc result=CUDA_ERROR_OUT_OF_MEMORY bytes=%zu%s",
                     bytesize, extra);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memset(p, 0, bytesize);
    size_t at = memory_below(st, (uintptr_t)p);
    at = at == SIZE_MAX ? 0 : at + 1;
    memmove(&st->allocs[at + 1], &st->allocs[at],
            (st->nallocs - at) * sizeof(*st->allocs));
    st->allocs[at] = (fake_alloc){.base = (uintptr_t)p,
                                  .size = bytesize,
                                  .dev = dev,
                                  .pool = pool,
                                  .module = quiet};
    st->nallocs++;
    d->used += bytesize;
    if (pool) {
        d->pool_used += bytesize;
        if (d->pool_used > d->pool.used_high)
            d->pool.used_high = d->pool_used;
        if (d->pool_used > d->pool.reserved_high)
            d->pool.reserved_high = d->pool_used;
    }
    if (!quiet)
        fake_log(st, "alloc ptr=0x%jx bytes=%zu%s", (uintmax_t)(uintptr_t)p,
                 bytesize, extra);
    *out = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
    fake_state *st = fake_lock();
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS && (dptr == NULL || bytesize == 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = fake_mem_alloc(st, dev, bytesize, 0, "", dptr);
    fake_unlock(st);
    return rc;
}

static void
memory_remove(fake_state *st, size_t i)
{
    fake_alloc a = st->allocs[i];
    memmove(&st->allocs[i], &st->allocs[i + 1],
            (st->nallocs - i - 1) * sizeof(*st->allocs));
    st->nallocs--;
    st->dev[a.dev].used -= a.size;
    if (a.pool)
        st->dev[a.dev].pool_used -= a.size;
    free((void *)a.base);
}

fake_alloc *
fake_alloc_at(fake_state *st, uintptr_t p)
{
    size_t i = memory_below(st, p);
    return i != SIZE_MAX && st->allocs[i].base == p ? &st->allocs[i] : NULL;
}

int
fake_mem_release_quiet(fake_state *st, uintptr_t p)
{
    fake_alloc *a = fake_alloc_at(st, p);
    if (a == NULL)
        return -1;
    memory_remove(st, (size_t)(a - st->allocs));
    return 0;
}

int
fake_mem_release(fake_state *st, uintptr_t p)
{
    fake_alloc *a = fake_alloc_at(st, p);
    if (a == NULL)
        return -1;
    fake_log(st, "free ptr=0x%jx", (uintmax_t)p);
    memory_remove(st, (size_t)(a - st->allocs));
    return 0;
}

CUresult CUDAAPI
cuMemFree(CUdeviceptr dptr)
{
    fake_state *st = fake_lock();
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    fake_alloc *a = rc == CUDA_SUCCESS ? fake_alloc_at(st, dptr) : NULL;
    /* Freeing 0 does nothing, successfully, as on driver 580. Pool memory
     * may be freed here too; memory a cuMemFreeAsync is freeing may not. */
    if (rc == CUDA_SUCCESS && dptr != 0 &&
        (a == NULL || a->freeing || a->module))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && dptr != 0)
        fake_mem_release(st, dptr);
    fake_unlock(st);
    return rc;
}

void
fake_memory_clear(fake_state *st, int dev)
{
    for (size_t i = st->nallocs; i-- > 0;)
        if (dev < 0 || st->allocs[i].dev == dev)
            memory_remove(st, i);
    for (size_t i = st->nregs; i-- > 0;)
        if (dev < 0 || st->regs[i].dev == dev)
            st->regs[i] = st->regs[--st->nregs];
}

static const char *
memory_kind_name(fakecuda_copy_kind kind)
{
    switch (kind) {
    case FAKECUDA_COPY_HTOD:
        return "htod";
    case FAKECUDA_COPY_DTOH:
        return "dtoh";
    case FAKECUDA_COPY_DTOD:
        return "dtod";
    case FAKECUDA_COPY_MEMSET:
        return "memset";
    }
    return "?";
}

/* Checks, records and runs (or queues) one copy or memset. */
static CUresult
memory_copy_locked(fake_state *st, fakecuda_copy_kind kind, uintptr_t dst,
                   uintptr_t src, size_t n, unsigned char value,
                   CUstream hstream, int async)
{
    int dev;
    fake_queue *q = NULL;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS && async)
        rc = fake_stream_queue(st, hstream, &q, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    int dst_dev = kind != FAKECUDA_COPY_DTOH;
    int src_dev = kind == FAKECUDA_COPY_DTOH || kind == FAKECUDA_COPY_DTOD;
    if (n == 0)
        return CUDA_SUCCESS;
    if ((dst_dev ? fake_alloc_find(st, dst, n) == NULL : dst == 0) ||
        (kind != FAKECUDA_COPY_MEMSET &&
         (src_dev ? fake_alloc_find(st, src, n) == NULL : src == 0)))
        return CUDA_ERROR_INVALID_VALUE;
    fake_work *w = NULL;
    if (async && (w = calloc(1, sizeof(*w))) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (async && (rc = fake_work_prepare(st, w, q, NULL)) != CUDA_SUCCESS) {
        free(w);
        return rc;
    }

    size_t record = SIZE_MAX;
    st->copy_total++;
    if (st->ncopies < FAKE_MAX_RECORDS &&
        fake_grow(&st->copies, &st->cap_copies, st->ncopies + 1,
                  sizeof(*st->copies)) == 0) {
        record = st->ncopies++;
        st->copies[record] = (fakecuda_copy){.kind = kind,
                                             .dst = dst,
                                             .src = src,
                                             .bytes = n,
                                             .value = value,
                                             .async = async,
                                             .stream = hstream};
    }
    if (kind == FAKECUDA_COPY_MEMSET)
        fake_log(
            st, "memset dst=0x%jx value=0x%02x bytes=%zu stream=0x%jx async=%d",
            (uintmax_t)dst, value, n, (uintmax_t)(uintptr_t)hstream, async);
    else
        fake_log(
            st,
            "copy kind=%s dst=0x%jx src=0x%jx bytes=%zu stream=0x%jx async=%d",
            memory_kind_name(kind), (uintmax_t)dst, (uintmax_t)src, n,
            (uintmax_t)(uintptr_t)hstream, async);
    if (!async) {
        /* Synchronous copies are never held (fakecuda.h says why). */
        if (kind == FAKECUDA_COPY_MEMSET)
            memset((void *)dst, value, n);
        else
            memmove((void *)dst, (const void *)src, n);
        if (record != SIZE_MAX)
            st->copies[record].completed = 1;
        return CUDA_SUCCESS;
    }
    w->kind = FAKE_WORK_COPY;
    w->dev = dev;
    w->record = record;
    w->dst = (void *)dst;
    w->src = kind == FAKECUDA_COPY_MEMSET ? NULL : (const void *)src;
    w->bytes = n;
    w->value = value;
    w->dst_dev = (unsigned char)dst_dev;
    w->src_dev = (unsigned char)src_dev;
    fake_work_commit(st, w);
    return CUDA_SUCCESS;
}

static CUresult
memory_copy(fakecuda_copy_kind kind, uintptr_t dst, uintptr_t src, size_t n,
            unsigned char value, CUstream hstream, int async)
{
    fake_state *st = fake_lock();
    if (kind != FAKECUDA_COPY_MEMSET)
        fake_copy_hold_wait(st);
    CUresult rc =
        memory_copy_locked(st, kind, dst, src, n, value, hstream, async);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return memory_copy(FAKECUDA_COPY_HTOD, dstDevice, (uintptr_t)srcHost,
                       ByteCount, 0, NULL, 0);
}

CUresult CUDAAPI
cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return memory_copy(FAKECUDA_COPY_DTOH, (uintptr_t)dstHost, srcDevice,
                       ByteCount, 0, NULL, 0);
}

CUresult CUDAAPI
cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return memory_copy(FAKECUDA_COPY_DTOD, dstDevice, srcDevice, ByteCount, 0,
                       NULL, 0);
}

CUresult CUDAAPI
cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                  CUstream hStream)
{
    return memory_copy(FAKECUDA_COPY_HTOD, dstDevice, (uintptr_t)srcHost,
                       ByteCount, 0, hStream, 1);
}

CUresult CUDAAPI
cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                  CUstream hStream)
{
    return memory_copy(FAKECUDA_COPY_DTOH, (uintptr_t)dstHost, srcDevice,
                       ByteCount, 0, hStream, 1);
}

CUresult CUDAAPI
cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                  size_t ByteCount, CUstream hStream)
{
    return memory_copy(FAKECUDA_COPY_DTOD, dstDevice, srcDevice, ByteCount, 0,
                       hStream, 1);
}

CUresult CUDAAPI
cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return memory_copy(FAKECUDA_COPY_MEMSET, dstDevice, 0, N, uc, NULL, 0);
}

CUresult CUDAAPI
cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                CUstream hStream)
{
    return memory_copy(FAKECUDA_COPY_MEMSET, dstDevice, 0, N, uc, hStream, 1);
}

CUresult CUDAAPI
cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    const unsigned valid =
        CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
        CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    fake_state *st = fake_lock();
    int dev;
    uintptr_t b = (uintptr_t)p;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS &&
        (p == NULL || bytesize == 0 || (Flags & ~valid) != 0 ||
         bytesize > UINTPTR_MAX - b))
        rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < st->nregs; i++)
        if (b < st->regs[i].base + st->regs[i].size &&
            st->regs[i].base < b + bytesize)
            rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (rc == CUDA_SUCCESS && fake_grow(&st->regs, &st->cap_regs, st->nregs + 1,
                                        sizeof(*st->regs)) != 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        st->regs[st->nregs++] = (fake_hostreg){b, bytesize, Flags, dev};
        fake_log(st, "register ptr=0x%jx bytes=%zu flags=0x%x", (uintmax_t)b,
                 bytesize, Flags);
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuMemHostUnregister(void *p)
{
    fake_state *st = fake_lock();
    int dev;
    uintptr_t b = (uintptr_t)p;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS && p == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        /* The start of a range unregisters it; inside one is a bad value
         * (as the driver answers); anywhere else is not registered. */
        rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
        for (size_t i = 0; i < st->nregs; i++) {
            if (st->regs[i].base == b) {
                st->regs[i] = st->regs[--st->nregs];
                fake_log(st, "unregister ptr=0x%jx", (uintmax_t)b);
                rc = CUDA_SUCCESS;
                break;
            }
            if (b > st->regs[i].base && b - st->regs[i].base < st->regs[i].size)
                rc = CUDA_ERROR_INVALID_VALUE;
        }
    }
    fake_unlock(st);
    return rc;
}

/* Pinned host memory: page-aligned host memory, registered as if by
 * cuMemHostRegister so that it counts as pinned. */
CUresult CUDAAPI
cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    const unsigned valid = CU_MEMHOSTALLOC_PORTABLE |
                           CU_MEMHOSTALLOC_DEVICEMAP |
                           CU_MEMHOSTALLOC_WRITECOMBINED;
    fake_state *st = fake_lock();
    int dev;
    void *p = NULL;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS &&
        (pp == NULL || bytesize == 0 || (Flags & ~valid) != 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS &&
        (posix_memalign(&p, 4096, bytesize) != 0 ||
         fake_grow(&st->regs, &st->cap_regs, st->nregs + 1,
                   sizeof(*st->regs)) != 0)) {
        free(p);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS) {
        st->regs[st->nregs++] =
            (fake_hostreg){(uintptr_t)p, bytesize, Flags, dev};
        fake_log(st, "hostalloc ptr=0x%jx bytes=%zu", (uintmax_t)(uintptr_t)p,
                 bytesize);
        *pp = p;
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuMemFreeHost(void *p)
{
    fake_state *st = fake_lock();
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS) {
        rc = CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < st->nregs; i++)
            if (st->regs[i].base == (uintptr_t)p) {
                st->regs[i] = st->regs[--st->nregs];
                fake_log(st, "hostfree ptr=0x%jx", (uintmax_t)(uintptr_t)p);
                free(p);
                rc = CUDA_SUCCESS;
                break;
            }
    }
    fake_unlock(st);
    return rc;
}
