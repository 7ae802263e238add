/* SPDX-License-Identifier: MIT */
/*
 * Service: a kernel launch on a stream (launch.h), for the WORK handler
 * (launches the front checked) and direct launches (checked here against
 * the front's snapshot).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launch.h"
#include "modtab.h"

/* What a launch needs set on its function first, on this thread (the one
 * that makes every launch, so no launch of the function races it): more
 * dynamic shared memory than the function allows so far, another
 * carveout, non-portable cluster sizes; and a cooperative launch's grid
 * checked against what can be resident at once. */
static CUresult
work_launch_setup(cumod_exec *ex, cumod_exec_module *m,
                  const cumod_work_item *it, char *what, size_t whatlen)
{
    const cumod_driver *d = &ex->drv;
    CUfunction f = m->funcs[it->b];
    uint32_t i = (uint32_t)it->b;
    CUresult r;

    if ((int64_t)it->shmem > m->dyn_max[i]) {
        snprintf(what, whatlen,
                 "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, %u)",
                 it->shmem);
        r = d->func_set_attribute(
            f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)it->shmem);
        if (r != CUDA_SUCCESS)
            return r;
        m->dyn_max[i] = (int32_t)it->shmem;
    }
    if ((it->flags & CUMOD_WORK_F_CARVEOUT) && m->carveout[i] != it->carveout) {
        snprintf(what, whatlen,
                 "cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT, %d)",
                 it->carveout);
        r = d->func_set_attribute(
            f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            it->carveout);
        if (r != CUDA_SUCCESS)
            return r;
        m->carveout[i] = it->carveout;
    }
    uint64_t csize = (uint64_t)it->cluster[0] * it->cluster[1] * it->cluster[2];
    if (csize > 8 && !m->nonportable[i]) {
        snprintf(what, whatlen,
                 "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED) for a "
                 "cluster of %llu blocks",
                 (unsigned long long)csize);
        r = d->func_set_attribute(
            f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
        if (r != CUDA_SUCCESS)
            return r;
        m->nonportable[i] = 1;
    }
    if (it->flags & CUMOD_WORK_F_COOPERATIVE) {
        int per_sm = 0;
        int threads = (int)(it->block[0] * it->block[1] * it->block[2]);
        r = d->occupancy_max_active_blocks(&per_sm, f, threads, it->shmem);
        if (r != CUDA_SUCCESS) {
            snprintf(what, whatlen,
                     "cuOccupancyMaxActiveBlocksPerMultiprocessor");
            return r;
        }
        uint64_t blocks = (uint64_t)it->grid[0] * it->grid[1] * it->grid[2];
        uint64_t most = (uint64_t)per_sm * ex->multiprocessors;
        if (blocks > most) {
            snprintf(what, whatlen,
                     "a cooperative launch of %llu blocks (at most %llu can "
                     "be resident at once: %d per multiprocessor x %u, by "
                     "cuOccupancyMaxActiveBlocksPerMultiprocessor for %d "
                     "threads and %u bytes of dynamic shared memory)",
                     (unsigned long long)blocks, (unsigned long long)most,
                     per_sm, ex->multiprocessors, threads, it->shmem);
            return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
        }
    }
    return CUDA_SUCCESS;
}

/* Whether work_launch_setup has anything to do for it (read without the
 * lock: what it reads only grows or changes under the lock, and a stale
 * read only takes the lock for nothing or is re-checked under it). */
static int
work_needs_setup(const cumod_exec_module *m, const cumod_work_item *it)
{
    uint32_t i = (uint32_t)it->b;
    uint64_t csize = (uint64_t)it->cluster[0] * it->cluster[1] * it->cluster[2];
    return (int64_t)it->shmem > m->dyn_max[i] ||
           ((it->flags & CUMOD_WORK_F_CARVEOUT) &&
            m->carveout[i] != it->carveout) ||
           (csize > 8 && !m->nonportable[i]) ||
           (it->flags & CUMOD_WORK_F_COOPERATIVE);
}

/* cuLaunchKernel of it on s, its time added to *timing_ns when not
 * NULL. */
static CUresult
work_launch_plain(cumod_exec *ex, uint64_t *timing_ns,
                  const cumod_exec_module *m, const cumod_work_item *it,
                  CUstream s, void **params)
{
    struct timespec l0, l1;
    int timed = timing_ns != NULL;
    CUresult r;

    if (timed)
        clock_gettime(CLOCK_MONOTONIC, &l0);
    r = ex->drv.launch_kernel(m->funcs[it->b], it->grid[0], it->grid[1],
                              it->grid[2], it->block[0], it->block[1],
                              it->block[2], it->shmem, s, params, NULL);
    if (timed) {
        clock_gettime(CLOCK_MONOTONIC, &l1);
        *timing_ns += (uint64_t)((l1.tv_sec - l0.tv_sec) * 1000000000L +
                                 (l1.tv_nsec - l0.tv_nsec));
    }
    return r;
}

/* Clusters and cooperative launches need cuLaunchKernelEx; the plain path
 * stays on cuLaunchKernel. */
static CUresult
work_launch_ex(cumod_exec *ex, const cumod_exec_module *m,
               const cumod_work_item *it, CUstream s, void **params)
{
    CUlaunchAttribute at[2];
    unsigned na = 0;

    if (it->cluster[0] != 0) {
        at[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        at[na].value.clusterDim.x = it->cluster[0];
        at[na].value.clusterDim.y = it->cluster[1];
        at[na].value.clusterDim.z = it->cluster[2];
        na++;
    }
    if (it->flags & CUMOD_WORK_F_COOPERATIVE) {
        at[na].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        at[na].value.cooperative = 1;
        na++;
    }
    CUlaunchConfig cfg = {
        .gridDimX = it->grid[0],
        .gridDimY = it->grid[1],
        .gridDimZ = it->grid[2],
        .blockDimX = it->block[0],
        .blockDimY = it->block[1],
        .blockDimZ = it->block[2],
        .sharedMemBytes = it->shmem,
        .hStream = s,
        .attrs = at,
        .numAttrs = na,
    };
    return ex->drv.launch_kernel_ex(&cfg, m->funcs[it->b], params, NULL);
}

CUresult
cumod__exec_launch(cumod_exec *ex, const cumod_work_item *it, const char *extra,
                   CUstream s, uint64_t *timing_ns, char *what, size_t whatlen,
                   const char **name)
{
    return cumod__exec_launch_in(ex, cumod__exec_module(ex, it->a), it, extra,
                                 s, timing_ns, what, whatlen, name);
}

CUresult
cumod__exec_launch_in(cumod_exec *ex, cumod_exec_module *m,
                      const cumod_work_item *it, const char *extra, CUstream s,
                      uint64_t *timing_ns, char *what, size_t whatlen,
                      const char **name)
{
    if (m == NULL || it->b >= m->nfunc) {
        snprintf(what, whatlen, "the kernel's module is not loaded");
        return CUDA_ERROR_INVALID_HANDLE;
    }
    CUresult r = CUDA_SUCCESS;
    if (work_needs_setup(m, it)) {
        /* Several threads submit: one sets a function's attributes at a
         * time (a carveout is a preference: a launch of another thread
         * between one's set and its launch may run with the other's). */
        pthread_mutex_lock(&ex->attr_mtx);
        r = work_launch_setup(ex, m, it, what, whatlen);
        pthread_mutex_unlock(&ex->attr_mtx);
    }
    if (r != CUDA_SUCCESS)
        return r;
    uint32_t np = m->nparams[it->b];
    void *stackp[64];
    void **params = np <= 64 ? stackp : calloc(np, sizeof(void *));
    if (params == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < np; i++)
        params[i] = (void *)(extra + m->param_off[it->b][i]);
    if (it->cluster[0] == 0 && !(it->flags & CUMOD_WORK_F_COOPERATIVE)) {
        *name = "cuLaunchKernel";
        r = work_launch_plain(ex, timing_ns, m, it, s, np ? params : NULL);
    } else {
        *name = "cuLaunchKernelEx";
        r = work_launch_ex(ex, m, it, s, np ? params : NULL);
    }
    if (params != stackp)
        free(params);
    return r;
}
