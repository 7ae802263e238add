/* SPDX-License-Identifier: MIT */
/*
 * What Hopper-era kernels need beyond cuLaunchKernel: cuFuncSetAttribute
 * (more than 48 KiB of dynamic shared memory, the carveout, non-portable
 * cluster sizes), cuLaunchKernelEx with clusters and cooperative launches,
 * and the occupancy a cooperative launch is checked against.
 *
 * As driver 580 answers on the H100 (sm_90): the opt-in limit is 227 KiB
 * per block (232448 bytes) less the kernel's static shared memory; a
 * cluster's dimensions must divide the grid's, hold at most 8 blocks (16
 * once NON_PORTABLE_CLUSTER_SIZE_ALLOWED is set), and equal the kernel's
 * compiled shape where it has one; a cooperative grid larger than what can
 * be resident at once is CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE.
 *
 * The occupancy is the fake's own estimate: blocks per multiprocessor
 * limited by 2048 threads (in warps), 32 blocks, 64 Ki registers (256 per
 * warp at a time) and 228 KiB of shared memory (1 KiB reserved per block).
 * It matches the H100 for the example kernels, not for every kernel.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

int
fake_kernel_dyn_max(const fake_kernel *k)
{
    return k->dyn_max > 0 ? k->dyn_max : FAKE_STATIC_SHMEM - k->shared_bytes;
}

CUresult CUDAAPI
cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    fake_state *st = fake_lock();
    fake_module *mod;
    fake_kernel *k;
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS)
        rc = fake_function_resolve(st, hfunc, &mod, &k);
    if (rc == CUDA_SUCCESS) {
        int optin = fake_device_attr(
            st->sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
        switch (attrib) {
        case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
            if (value < 0 || value > optin - k->shared_bytes)
                rc = CUDA_ERROR_INVALID_VALUE;
            else
                k->dyn_max = value > 0 ? value : -1;
            break;
        case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
            if (value < -1 || value > 100)
                rc = CUDA_ERROR_INVALID_VALUE;
            else
                k->carveout = value + 1;
            break;
        case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
            if (value != 0 && value != 1)
                rc = CUDA_ERROR_INVALID_VALUE;
            else
                k->nonportable_cluster = value;
            break;
        default:
            rc = CUDA_ERROR_INVALID_VALUE;
        }
    }
    if (rc == CUDA_SUCCESS)
        fake_log(st, "setattr fn=%s attr=%d value=%d", k->name, (int)attrib,
                 value);
    fake_unlock(st);
    return rc;
}

/* Blocks of k that fit on one multiprocessor at once. */
static int
launch_ex_occupancy(const fake_state *st, const fake_kernel *k, int threads,
                    size_t dyn)
{
    if (threads <= 0 || threads > k->max_threads)
        return 0;
    int warps = (threads + 31) / 32;
    int by_threads = 64 / warps; /* 2048 threads: 64 warps */
    int n = by_threads < 32 ? by_threads : 32;
    if (k->num_regs > 0) {
        int per_warp = (k->num_regs * 32 + 255) / 256 * 256;
        int by_regs = 65536 / (per_warp * warps);
        if (by_regs < n)
            n = by_regs;
    }
    int smem_sm = fake_device_attr(
        st->sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    size_t per_block = (size_t)k->shared_bytes + dyn + 1024;
    int by_smem = (int)((size_t)smem_sm / per_block);
    return by_smem < n ? by_smem : n;
}

CUresult CUDAAPI
cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                            int blockSize,
                                            size_t dynamicSMemSize)
{
    fake_state *st = fake_lock();
    fake_module *mod;
    fake_kernel *k;
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS)
        rc = fake_function_resolve(st, func, &mod, &k);
    if (rc == CUDA_SUCCESS && numBlocks == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *numBlocks = launch_ex_occupancy(st, k, blockSize, dynamicSMemSize);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                 void **kernelParams, void **extra)
{
    fake_state *st = fake_lock();
    fake_module *mod;
    fake_kernel *k;
    unsigned cluster[3] = {0, 0, 0};
    int cooperative = 0, dev;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS && config == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = fake_function_resolve(st, f, &mod, &k);
    for (unsigned i = 0; rc == CUDA_SUCCESS && i < config->numAttrs; i++) {
        const CUlaunchAttribute *a = &config->attrs[i];
        if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            cluster[0] = a->value.clusterDim.x;
            cluster[1] = a->value.clusterDim.y;
            cluster[2] = a->value.clusterDim.z;
        } else if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
            cooperative = a->value.cooperative != 0;
        } else {
            rc = CUDA_ERROR_INVALID_VALUE;
        }
    }
    const unsigned g[3] = {config ? config->gridDimX : 0,
                           config ? config->gridDimY : 0,
                           config ? config->gridDimZ : 0};
    const unsigned b[3] = {config ? config->blockDimX : 0,
                           config ? config->blockDimY : 0,
                           config ? config->blockDimZ : 0};
    if (rc == CUDA_SUCCESS && cluster[0] != 0) {
        uint64_t size = (uint64_t)cluster[0] * cluster[1] * cluster[2];
        if (!fake_device_attr(st->sm, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH))
            rc = CUDA_ERROR_NOT_SUPPORTED;
        else if (cluster[1] == 0 || cluster[2] == 0 || g[0] % cluster[0] ||
                 g[1] % cluster[1] || g[2] % cluster[2])
            rc = CUDA_ERROR_INVALID_CLUSTER_SIZE;
        else if (size > (k->nonportable_cluster ? 16u : 8u))
            rc = CUDA_ERROR_INVALID_CLUSTER_SIZE;
        else if (k->cluster[0] != 0 && ((unsigned)k->cluster[0] != cluster[0] ||
                                        (unsigned)k->cluster[1] != cluster[1] ||
                                        (unsigned)k->cluster[2] != cluster[2]))
            rc = CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
    if (rc == CUDA_SUCCESS && cooperative) {
        int threads = (int)(b[0] * b[1] * b[2]);
        uint64_t most = (uint64_t)launch_ex_occupancy(st, k, threads,
                                                      config->sharedMemBytes) *
                        (uint64_t)fake_device_attr(
                            st->sm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
        if ((uint64_t)g[0] * g[1] * g[2] > most)
            rc = CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    if (rc == CUDA_SUCCESS)
        rc = fake_launch_locked(st, f, g, b, config->sharedMemBytes,
                                config->hStream, kernelParams, extra,
                                cluster[0] ? cluster : NULL, cooperative);
    fake_unlock(st);
    return rc;
}

/* The fake loads every function with its module, as a driver without lazy
 * loading does: cuFuncLoad only checks the handle. */
CUresult CUDAAPI
cuFuncLoad(CUfunction function)
{
    fake_state *st = fake_lock();
    fake_module *mod;
    fake_kernel *k;
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS)
        rc = fake_function_resolve(st, function, &mod, &k);
    fake_unlock(st);
    return rc;
}
