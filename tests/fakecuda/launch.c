/* SPDX-License-Identifier: MIT */
/*
 * cuLaunchKernel: the driver's checks, the packed parameter buffer, the
 * record a test reads back, and the queued work item.
 */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The launch's configuration against the device's and the kernel's limits:
 * CUDA_ERROR_INVALID_VALUE for each violation, as the H100 answers. */
static CUresult
launch_check_dims(const fake_kernel *k, const unsigned g[3],
                  const unsigned b[3], unsigned shmem)
{
    if (g[0] == 0 || g[1] == 0 || g[2] == 0 || b[0] == 0 || b[1] == 0 ||
        b[2] == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (b[0] > 1024 || b[1] > 1024 || b[2] > 64 ||
        (uint64_t)b[0] * b[1] * b[2] > (uint64_t)k->max_threads)
        return CUDA_ERROR_INVALID_VALUE;
    if (g[0] > 2147483647u || g[1] > 65535 || g[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    /* Past 48 KiB only as far as cuFuncSetAttribute allowed. */
    if (shmem > (unsigned)fake_kernel_dyn_max(k))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Packs the parameters at the kernel's offsets into a new zeroed buffer. */
static CUresult
launch_pack(const fake_kernel *k, void **params, void **extra,
            unsigned char **out)
{
    if (params != NULL && extra != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (k->nparams > 0 && params == NULL && extra == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char *buf = calloc(1, k->param_bytes ? k->param_bytes : 1);
    if (buf == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (params != NULL) {
        for (uint32_t i = 0; i < k->nparams; i++) {
            if (params[i] == NULL) {
                free(buf);
                return CUDA_ERROR_INVALID_VALUE;
            }
            memcpy(buf + k->params[i].offset, params[i], k->params[i].size);
        }
    } else if (extra != NULL) {
        /* CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE pairs, up to _END. */
        const void *src = NULL;
        const size_t *size = NULL;
        for (size_t i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                src = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                size = extra[i + 1];
            else
                break;
        }
        if (src == NULL || size == NULL || *size < k->param_bytes) {
            free(buf);
            return CUDA_ERROR_INVALID_VALUE;
        }
        memcpy(buf, src, k->param_bytes);
    }
    *out = buf;
    return CUDA_SUCCESS;
}

static void
launch_log(fake_state *st, CUfunction f, const fake_kernel *k,
           const unsigned g[3], const unsigned b[3], unsigned shmem, CUstream s,
           const unsigned char *p, const unsigned cluster[3], int cooperative)
{
    char more[96] = "";
    if (cluster != NULL && cluster[0] != 0)
        snprintf(more, sizeof(more), " cluster=%u,%u,%u", cluster[0],
                 cluster[1], cluster[2]);
    if (cooperative)
        snprintf(more + strlen(more), sizeof(more) - strlen(more),
                 " cooperative=1");
    if (st->log_fd < 0)
        return;
    char *hex = malloc((size_t)k->param_bytes * 2 + 1);
    if (hex == NULL)
        return;
    for (uint32_t i = 0; i < k->param_bytes; i++)
        snprintf(hex + 2 * i, 3, "%02x", p[i]);
    hex[2 * (size_t)k->param_bytes] = '\0';
    fake_log(st,
             "launch fn=%s module=0x%jx grid=%u,%u,%u block=%u,%u,%u shmem=%u "
             "stream=0x%jx "
             "params=%s%s",
             k->name, (uintmax_t)((uintptr_t)f & ~(uintptr_t)0xffff), g[0],
             g[1], g[2], b[0], b[1], b[2], shmem, (uintmax_t)(uintptr_t)s, hex,
             more);
    free(hex);
}

CUresult
fake_launch_locked(fake_state *st, CUfunction f, const unsigned g[3],
                   const unsigned b[3], unsigned shmem, CUstream hstream,
                   void **params, void **extra, const unsigned cluster[3],
                   int cooperative)
{
    int dev, sdev;
    fake_module *mod;
    fake_kernel *k;
    fake_queue *q;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS)
        rc = fake_function_resolve(st, f, &mod, &k);
    if (rc == CUDA_SUCCESS)
        rc = fake_stream_queue(st, hstream, &q, &sdev);
    if (rc == CUDA_SUCCESS && (mod->dev != dev || sdev != dev))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS)
        rc = launch_check_dims(k, g, b, shmem);
    if (rc == CUDA_SUCCESS &&
        fake_fault_fires(st, FAKECUDA_FAULT_REFUSE, 0, k->name, NULL))
        rc = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    unsigned char *buf = NULL;
    if (rc == CUDA_SUCCESS)
        rc = launch_pack(k, params, extra, &buf);
    fake_work *w = NULL;
    if (rc == CUDA_SUCCESS && ((w = calloc(1, sizeof(*w))) == NULL ||
                               (w->name = strdup(k->name)) == NULL))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    /* The last step that can fail: nothing is recorded before it. */
    if (rc == CUDA_SUCCESS)
        rc = fake_work_prepare(st, w, q, NULL);
    if (rc != CUDA_SUCCESS)
        goto fail;

    int fault = fake_fault_fires(st, FAKECUDA_FAULT_LAUNCH, ++st->n_launch,
                                 k->name, NULL);
    for (uint32_t i = 0; !fault && i < mod->img.nkernels; i++)
        fault = fake_fault_fires(st, FAKECUDA_FAULT_POISON, 0,
                                 mod->img.kernels[i].name, NULL);
    launch_log(st, f, k, g, b, shmem, hstream, buf, cluster, cooperative);
    size_t record = SIZE_MAX;
    char *name = NULL;
    st->launch_total++;
    if (st->nlaunches < FAKE_MAX_RECORDS && (name = strdup(k->name)) != NULL &&
        fake_grow(&st->launches, &st->cap_launches, st->nlaunches + 1,
                  sizeof(*st->launches)) == 0) {
        record = st->nlaunches++;
        st->launches[record] = (fakecuda_launch){
            .function = name,
            .module = (CUmodule)((uintptr_t)f & ~(uintptr_t)0xffff),
            .grid = {g[0], g[1], g[2]},
            .block = {b[0], b[1], b[2]},
            .shared_mem = shmem,
            .stream = hstream,
            .params = buf,
            .params_size = k->param_bytes,
        };
        name = NULL;
        buf = NULL;
    }
    free(name);
    free(buf);
    w->kind = FAKE_WORK_LAUNCH;
    w->dev = dev;
    w->record = record;
    w->fault = fault;
    fake_work_commit(st, w);
    return CUDA_SUCCESS;
fail:
    if (w != NULL)
        free(w->name);
    free(w);
    free(buf);
    return rc;
}

CUresult CUDAAPI
cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
               unsigned int gridDimZ, unsigned int blockDimX,
               unsigned int blockDimY, unsigned int blockDimZ,
               unsigned int sharedMemBytes, CUstream hStream,
               void **kernelParams, void **extra)
{
    const unsigned g[3] = {gridDimX, gridDimY, gridDimZ};
    const unsigned b[3] = {blockDimX, blockDimY, blockDimZ};
    fake_state *st = fake_lock();
    CUresult rc = fake_launch_locked(st, f, g, b, sharedMemBytes, hStream,
                                     kernelParams, extra, NULL, 0);
    fake_unlock(st);
    return rc;
}
