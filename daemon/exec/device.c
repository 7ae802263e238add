/* SPDX-License-Identifier: MIT */
/*
 * What the executor says of a device (device.h).
 */
#include <stdio.h>
#include <string.h>

#include "cumod/errors.h"
#include "device.h"

static uint32_t
device_attr(const cumod_driver *d, CUdevice dev, CUdevice_attribute a)
{
    int v = 0;
    if (d->device_get_attribute(&v, a, dev) != CUDA_SUCCESS || v < 0)
        return 0;
    return (uint32_t)v;
}

int
cumod__exec_describe_device(const cumod_driver *d, int ordinal,
                            cumod_chan_device *out)
{
    CUdevice dev;
    int count = 0;
    size_t total = 0;

    memset(out, 0, sizeof(*out));
    out->ordinal = ordinal;
    (void)d->driver_get_version(&out->driver_version);
    if (d->device_get_count(&count) == CUDA_SUCCESS && count > 0)
        out->device_count = (uint32_t)count;
    if (d->device_get(&dev, ordinal) != CUDA_SUCCESS)
        return CUMOD_ENODEVICE;
    if (d->device_get_name(out->name, (int)sizeof(out->name) - 1, dev) !=
        CUDA_SUCCESS)
        snprintf(out->name, sizeof(out->name), "CUDA device %d", ordinal);
    cumod__driver_device_uuid(d, dev, out->uuid, sizeof(out->uuid));
    out->sm_major =
        device_attr(d, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    out->sm_minor =
        device_attr(d, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    out->multiprocessors =
        device_attr(d, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    out->max_threads_per_block =
        device_attr(d, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    out->max_block[0] =
        device_attr(d, dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
    out->max_block[1] =
        device_attr(d, dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
    out->max_block[2] =
        device_attr(d, dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
    out->max_grid[0] = device_attr(d, dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
    out->max_grid[1] = device_attr(d, dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
    out->max_grid[2] = device_attr(d, dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
    out->max_shared_per_block =
        device_attr(d, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    out->max_shared_per_block_optin = device_attr(
        d, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    out->cluster_launch =
        device_attr(d, dev, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH);
    out->cooperative_launch =
        device_attr(d, dev, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
    out->mps = device_attr(d, dev, CU_DEVICE_ATTRIBUTE_MPS_ENABLED) == 1;
    if (d->device_total_mem(&total, dev) == CUDA_SUCCESS)
        out->total_memory = total;
    return CUMOD_OK;
}
