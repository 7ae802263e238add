/* SPDX-License-Identifier: MIT */
/*
 * The stream-ordered allocator: cuMemAllocAsync allocates at once,
 * cuMemFreeAsync frees when its stream reaches it, and the default pool's
 * attributes are kept; the executor's pattern of frees behind events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_test.h"

static size_t
pool_free_bytes(void)
{
    size_t free_bytes = 0, total = 0;
    CU_OK(cuMemGetInfo(&free_bytes, &total));
    return free_bytes;
}

Test(pool, devices_support_memory_pools)
{
    test_start();
    int v = -1;
    CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                               0));
    cr_expect_eq(v, 1);
}

Test(pool, alloc_is_immediate_and_free_waits_for_its_stream)
{
    test_start();
    CUfunction empty = test_function("empty.cubin", "empty");
    CUstream s;
    CUdeviceptr p = 0;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    size_t before = pool_free_bytes();
    fakecuda_hold(1);
    /* Held work does not hold an allocation: it is made at the call. */
    CU_OK(cuMemAllocAsync(&p, 1000, s));
    cr_assert_neq(p, 0);
    cr_expect_eq(p % 256, 0);
    cr_expect_eq(pool_free_bytes(), before - 1000);
    cr_expect_eq(fakecuda_allocation_count(), 1);
    unsigned char in[1000], out[1000];
    memset(in, 0x3c, sizeof(in));
    CU_OK(cuMemcpyHtoD(p, in, sizeof(in)));
    CU_OK(cuMemcpyDtoH(out, p, sizeof(out)));
    cr_expect_arr_eq(in, out, sizeof(in));

    CU_OK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    CU_OK(cuMemFreeAsync(p, s));
    cr_expect_eq(fakecuda_pending(), 2, "the free is a work item");
    cr_expect_eq(fakecuda_allocation_count(), 1, "not freed while held");
    cr_expect_eq(pool_free_bytes(), before - 1000);
    /* Being freed: no second free of either kind. */
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(p, s));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFree(p));
    fakecuda_hold(0);
    CU_OK(cuStreamSynchronize(s));
    cr_expect_eq(fakecuda_allocation_count(), 0);
    cr_expect_eq(pool_free_bytes(), before);
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(p, s));
}

Test(pool, frees_mix_with_cumemalloc_both_ways)
{
    test_start();
    CUdeviceptr a = 0, b = 0;
    CU_OK(cuMemAlloc(&a, 512));
    CU_OK(cuMemAllocAsync(&b, 512, NULL));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(a + 8, NULL));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(0x1000, NULL));
    CU_OK(cuMemFreeAsync(0, NULL));
    CU_OK(cuMemFreeAsync(a, NULL)); /* memory from cuMemAlloc */
    CU_OK(cuMemFree(b));            /* memory from the pool */
    CU_OK(cuCtxSynchronize());
    cr_expect_eq(fakecuda_allocation_count(), 0);
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemAllocAsync(&a, 0, NULL));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemAllocAsync(NULL, 16, NULL));
    CU_IS(CUDA_ERROR_INVALID_HANDLE,
          cuMemAllocAsync(&a, 16, (CUstream)0x7f0000001000));
    cr_assert_eq(fakecuda_set_memory(4096), 0);
    CU_IS(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocAsync(&a, 8192, NULL));
    /* Without a current context the legacy stream is nobody's. */
    CU_OK(cuCtxSetCurrent(NULL));
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuMemAllocAsync(&a, 16, NULL));
    CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuMemFreeAsync(a, NULL));
}

Test(pool, alloc_faults_count_async_allocations)
{
    setenv("CUMOD_FAKE_FAULT", "alloc:2", 1);
    test_start();
    CUdeviceptr a, b, c;
    CU_OK(cuMemAllocAsync(&a, 16, NULL));
    CU_IS(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocAsync(&b, 16, NULL));
    CU_OK(cuMemAlloc(&c, 16));
}

/* The new executor's free: the session's streams record events, the free
 * stream waits for them, then frees; the memory stays until they are done. */
Test(pool, a_free_behind_events_waits_for_the_other_streams)
{
    CUcontext ctx = test_start();
    CUfunction scale = test_function("scale.cubin", "scale");
    CUstream priv, work, freer;
    CUevent done;
    CUdeviceptr p = 0;
    CU_OK(cuStreamCreate(&priv, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&work, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&freer, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    CU_OK(cuMemAllocAsync(&p, 256, priv));
    CU_OK(cuStreamSynchronize(priv));
    cr_assert_eq(fakecuda_hold_functions("scale"), 0);
    float f = 2.0f;
    int n = 64;
    void *args[] = {&p, &f, &n};
    CU_OK(cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, work, args, NULL));
    CU_OK(cuEventRecord(done, work));
    CU_OK(cuStreamWaitEvent(freer, done, 0));
    CU_OK(cuMemFreeAsync(p, freer));
    CU_IS(CUDA_ERROR_NOT_READY, cuStreamQuery(freer));
    cr_expect_eq(fakecuda_allocation_count(), 1, "in use by the held launch");
    /* Other work of the context goes on meanwhile. */
    CUdeviceptr q = 0;
    CU_OK(cuMemAllocAsync(&q, 64, priv));
    CU_OK(cuStreamSynchronize(priv));
    CU_OK(cuMemFreeAsync(q, priv));
    CU_OK(cuStreamSynchronize(priv));
    cr_expect_eq(fakecuda_allocation_count(), 1);
    test_waiter w = {.what = TEST_WAIT_STREAM, .stream = freer, .ctx = ctx};
    test_waiter_start(&w);
    cr_assert_eq(fakecuda_hold_functions(NULL), 0);
    test_waiter_join(&w);
    cr_expect_eq(w.rc, CUDA_SUCCESS);
    cr_expect_eq(fakecuda_allocation_count(), 0);
}

Test(pool, the_log_says_when_memory_goes)
{
    char path[] = "/tmp/fakecuda_log_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("CUMOD_FAKE_LOG", path, 1);
    test_start();
    CUstream s;
    CUdeviceptr p;
    CU_OK(cuStreamCreate(&s, 0));
    CU_OK(cuMemAllocAsync(&p, 777, s));
    fakecuda_hold(1);
    CU_OK(cuMemFreeAsync(p, s));
    char *log = NULL;
    size_t len = 0;
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    cr_assert_geq(getdelim(&log, &len, '\0', f), 0);
    fclose(f);
    char want[128];
    snprintf(want, sizeof(want), "alloc ptr=0x%jx bytes=777 stream=0x",
             (uintmax_t)p);
    cr_expect(strstr(log, want) != NULL, "%s", log);
    snprintf(want, sizeof(want), "free ptr=0x%jx ", (uintmax_t)p);
    cr_expect(strstr(log, want) == NULL, "not freed yet: %s", log);
    cr_expect(strstr(log, "free-queued ptr=0x") != NULL, "%s", log);
    fakecuda_hold(0);
    CU_OK(cuStreamSynchronize(s));
    f = fopen(path, "r");
    cr_assert_geq(getdelim(&log, &len, '\0', f), 0);
    fclose(f);
    cr_expect(strstr(log, want) != NULL, "%s", log);
    free(log);
    unlink(path);
}

Test(pool, default_pool_attributes)
{
    test_start();
    CUmemoryPool pool = NULL;
    CU_OK(cuDeviceGetDefaultMemPool(&pool, 0));
    cr_assert_not_null(pool);
    int v = -1;
    cuuint64_t size = 99;
    CU_OK(cuMemPoolGetAttribute(
        pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &v));
    cr_expect_eq(v, 1, "enabled by default");
    CU_OK(cuMemPoolGetAttribute(
        pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &v));
    cr_expect_eq(v, 1);
    CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                                &v));
    cr_expect_eq(v, 1);
    CU_OK(
        cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &size));
    cr_expect_eq(size, 0);

    int off = 0;
    CU_OK(cuMemPoolSetAttribute(
        pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &off));
    CU_OK(cuMemPoolGetAttribute(
        pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &v));
    cr_expect_eq(v, 0);
    cuuint64_t threshold = 1 << 20;
    CU_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                &threshold));
    CU_OK(
        cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &size));
    cr_expect_eq(size, 1 << 20);
    CUmemoryPool again;
    CU_OK(cuDeviceGetDefaultMemPool(&again, 0));
    cr_expect_eq(again, pool, "one default pool per device");

    /* Sizes: what the pool has out now, and the high watermarks. */
    CUdeviceptr a, b, c;
    CU_OK(cuMemAllocAsync(&a, 1000, NULL));
    CU_OK(cuMemAllocAsync(&b, 3000, NULL));
    CU_OK(cuMemAlloc(&c, 1)); /* not pool memory */
    CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &size));
    cr_expect_eq(size, 4000);
    CU_OK(cuMemFreeAsync(b, NULL));
    CU_OK(cuCtxSynchronize());
    CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &size));
    cr_expect_eq(size, 1000);
    CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &size));
    cr_expect_eq(size, 4000);
    cuuint64_t zero = 0, one = 1;
    CU_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &size));
    cr_expect_eq(size, 1000, "reset to the current size");

    /* What the driver refuses. */
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &one));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                                &zero));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuMemPoolSetAttribute(pool, (CUmemPool_attribute)99, &zero));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuMemPoolGetAttribute(pool, (CUmemPool_attribute)0, &size));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, NULL));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, NULL));
    CU_IS(CUDA_ERROR_INVALID_VALUE,
          cuMemPoolGetAttribute((CUmemoryPool)0x1234,
                                CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &size));
    CU_IS(CUDA_ERROR_INVALID_VALUE, cuDeviceGetDefaultMemPool(NULL, 0));
    CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetDefaultMemPool(&again, 1));
    CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetDefaultMemPool(&again, -1));
    /* A reset makes old pool handles stale. */
    fakecuda_reset();
    test_start();
    CU_IS(
        CUDA_ERROR_INVALID_VALUE,
        cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &size));
}

Test(pool, releasing_the_context_frees_pool_memory)
{
    test_start();
    CUdeviceptr p;
    CU_OK(cuMemAllocAsync(&p, 4096, NULL));
    fakecuda_hold(1);
    CU_OK(cuMemFreeAsync(p, NULL));
    CU_OK(cuDevicePrimaryCtxRelease(0));
    cr_expect_eq(fakecuda_allocation_count(), 0);
    cr_expect_eq(fakecuda_pending(), 0);
    fakecuda_hold(0);
    CUcontext ctx;
    CU_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU_OK(cuCtxSetCurrent(ctx));
    size_t free_bytes, total;
    CU_OK(cuMemGetInfo(&free_bytes, &total));
    cr_expect_eq(free_bytes, total);
}
