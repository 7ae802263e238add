/* SPDX-License-Identifier: MIT */
/*
 * Initialisation, devices and their primary contexts, the current context.
 */
#include "fake.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int device_mps(void);

CUresult CUDAAPI
cuInit(unsigned int Flags)
{
    const char *crash = getenv("CUMOD_FAKE_CRASH");
    if (crash != NULL && crash[0] != '\0' && access(crash, F_OK) == 0) {
        fprintf(stderr,
                "fakecuda: cuInit: %s exists: crashing, as a broken "
                "driver would\n",
                crash);
        abort();
    }
    /* A driver slow to come up (cuInit and the primary context take
     * 250 ms on an H100): the daemon must not say it is ready before. */
    const char *delay = getenv("CUMOD_FAKE_INIT_DELAY_MS");
    if (delay != NULL && atoi(delay) > 0)
        usleep((useconds_t)atoi(delay) * 1000);
    fake_state *st = fake_lock();
    CUresult rc = st->sticky;
    if (rc == CUDA_SUCCESS && Flags != 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && !st->initialised) {
        rc = fake_config_load(st);
        if (rc == CUDA_SUCCESS && st->ndevices == 0) {
            /* A driver without a GPU: nothing stays set up. */
            if (st->log_fd >= 0)
                close(st->log_fd);
            st->log_fd = -1;
            rc = CUDA_ERROR_NO_DEVICE;
        }
        if (rc == CUDA_SUCCESS) {
            st->initialised = 1;
            st->pool_gen = fake_gen_next(st);
            for (int d = 0; d < FAKE_MAX_DEVICES; d++)
                fake_pool_init(&st->dev[d].pool);
            fake_log(st, "init sm=%d devices=%d mem=%zu", st->sm, st->ndevices,
                     st->mem);
        }
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuDriverGetVersion(int *driverVersion)
{
    if (driverVersion == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = FAKECUDA_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

static CUresult
device_check(fake_state *st, CUdevice dev)
{
    CUresult rc = fake_check(st);
    if (rc == CUDA_SUCCESS && (dev < 0 || dev >= st->ndevices))
        rc = CUDA_ERROR_INVALID_DEVICE;
    return rc;
}

CUresult CUDAAPI
cuDeviceGetCount(int *count)
{
    fake_state *st = fake_lock();
    CUresult rc = fake_check(st);
    if (rc == CUDA_SUCCESS && count == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *count = st->ndevices;
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuDeviceGet(CUdevice *device, int ordinal)
{
    fake_state *st = fake_lock();
    CUresult rc = device_check(st, ordinal);
    if (rc == CUDA_SUCCESS && device == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *device = ordinal;
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuDeviceGetName(char *name, int len, CUdevice dev)
{
    fake_state *st = fake_lock();
    CUresult rc = device_check(st, dev);
    if (rc == CUDA_SUCCESS && (name == NULL || len <= 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        if (st->sm == 90)
            snprintf(name, (size_t)len, "NVIDIA H100 80GB HBM3 (fakecuda)");
        else
            snprintf(name, (size_t)len, "fakecuda sm_%d device", st->sm);
    }
    fake_unlock(st);
    return rc;
}

/* A UUID per ordinal, the same on every run, so tests can tell two fake
 * devices apart and name them: fa6ec0da-c0de-4000-8000- then the ordinal
 * in 12 hex digits (version 4, variant 1, like the driver's). cuda.h
 * maps the name to cuDeviceGetUuid_v2, the ABI served at 11.4+. */
CUresult CUDAAPI
cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    static const unsigned char prefix[10] = {0xfa, 0x6e, 0xc0, 0xda, 0xc0,
                                             0xde, 0x40, 0x00, 0x80, 0x00};
    fake_state *st = fake_lock();
    CUresult rc = device_check(st, dev);
    if (rc == CUDA_SUCCESS && uuid == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        memcpy(uuid->bytes, prefix, sizeof(prefix));
        for (int i = 0; i < 6; i++)
            uuid->bytes[10 + i] =
                (char)(((uint64_t)dev >> (8 * (5 - i))) & 0xff);
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    fake_state *st = fake_lock();
    CUresult rc = device_check(st, dev);
    if (rc == CUDA_SUCCESS && bytes == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *bytes = st->mem;
    fake_unlock(st);
    return rc;
}

/* What an H100 SXM answers (driver 580), with the SM-dependent limits of
 * the configured SM; -1 for an attribute the fake does not know. */
static int device_attribute(int sm, int dev, CUdevice_attribute a);

int
fake_device_attr(int sm, CUdevice_attribute a)
{
    return device_attribute(sm, 0, a);
}

static int
device_attribute(int sm, int dev, CUdevice_attribute a)
{
    int consumer = sm == 86 || sm == 87 || sm == 89 || sm / 10 == 12;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        return sm / 10;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        return sm % 10;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        return 132;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
        return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
        return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
        return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
        return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
        return FAKE_STATIC_SHMEM;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
        return consumer ? 101376 : sm == 80 ? 166912 : 232448;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
        return consumer ? 102400 : sm == 80 ? 167936 : 233472;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
        return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
        return consumer ? 1536 : 2048;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
        return consumer ? 24 : 32;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        return 1980000;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
        return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
        return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
        return 52428800;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
        return 34078720;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
        return 512;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
        return 32;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
        return 3;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        return 0x18 + dev;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES:
        return 0;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
        return sm >= 90;
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED:
        return device_mps();
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT:
        return sm >= 90 ? 4 : 1;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        return 1;
    default:
        return -1;
    }
}

/* Whether contexts made now would be MPS clients: as the driver, whether
 * an MPS control daemon runs for CUDA_MPS_PIPE_DIRECTORY (default
 * /tmp/nvidia-mps): the pid its nvidia-cuda-mps-control.pid there names
 * is alive. */
static int
device_mps(void)
{
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    char path[4200], buf[32];
    snprintf(path, sizeof(path), "%s/nvidia-cuda-mps-control.pid",
             dir != NULL && dir[0] ? dir : "/tmp/nvidia-mps");
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    long pid = fgets(buf, sizeof(buf), f) ? strtol(buf, NULL, 10) : 0;
    fclose(f);
    return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

CUresult CUDAAPI
cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    fake_state *st = fake_lock();
    CUresult rc = device_check(st, dev);
    int v = device_attribute(st->sm, dev, attrib);
    if (rc == CUDA_SUCCESS && (pi == NULL || v < 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *pi = v;
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    fake_state *st = fake_lock();
    CUresult rc = device_check(st, dev);
    if (rc == CUDA_SUCCESS && pctx == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        fake_device *d = &st->dev[dev];
        if (d->ctx_refs++ == 0) {
            /* A new context: a new generation, so handles of the last one
             * are stale. The generation counter only moves forward. */
            d->ctx_gen = fake_gen_next(st);
            d->used = 0;
            d->pool_used = 0;
        }
        *pctx =
            (CUcontext)fake_handle(FAKE_TAG_CTX, d->ctx_gen, (uint32_t)dev, 0);
        fake_log(st, "retain device=%d refs=%d mps=%d", dev, d->ctx_refs,
                 device_mps());
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuDevicePrimaryCtxRelease(CUdevice dev)
{
    fake_state *st = fake_lock();
    CUresult rc = device_check(st, dev);
    if (rc == CUDA_SUCCESS && st->dev[dev].ctx_refs == 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS) {
        fake_device *d = &st->dev[dev];
        if (--d->ctx_refs == 0) {
            fake_device_log_left(st, dev);
            fake_device_teardown(st, dev);
        }
        fake_log(st, "release device=%d refs=%d", dev, d->ctx_refs);
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuCtxSetCurrent(CUcontext ctx)
{
    fake_state *st = fake_lock();
    CUresult rc = fake_check(st);
    uint32_t gen, slot, sub;
    if (rc == CUDA_SUCCESS && ctx != NULL &&
        (!fake_handle_split((uintptr_t)ctx, FAKE_TAG_CTX, &gen, &slot, &sub) ||
         slot >= (uint32_t)st->ndevices || st->dev[slot].ctx_refs == 0 ||
         st->dev[slot].ctx_gen != gen))
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS)
        fake_set_current(ctx);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuCtxGetCurrent(CUcontext *pctx)
{
    fake_state *st = fake_lock();
    CUresult rc = fake_check(st);
    if (rc == CUDA_SUCCESS && pctx == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *pctx = fake_current();
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuCtxGetDevice(CUdevice *device)
{
    fake_state *st = fake_lock();
    int dev = 0;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS && device == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *device = dev;
    fake_unlock(st);
    return rc;
}
