/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver entry points cumodd uses, one X-macro row each:
 *   X(field, "base name", proto)
 * field: the member of cumod_driver that holds the pointer;
 * "base name": what cuGetProcAddress is asked for (never a _v2 name: the
 *     driver picks the version from CUMOD_CUDA_VERSION);
 * proto: the cuda.h declaration whose type the pointer has (cuda.h maps
 *     cuMemAlloc to cuMemAlloc_v2 and so on, which is the ABI the driver
 *     returns for CUMOD_CUDA_VERSION).
 *
 * tests/fakecuda exports every one of these; adding a row here means adding
 * it there too (its tests check that cuGetProcAddress resolves each row).
 */
#ifndef CUMOD_DRIVER_SYMS_H
#define CUMOD_DRIVER_SYMS_H

/* 12.4: the first driver with cuFuncGetParamInfo and module enumeration. */
#define CUMOD_CUDA_VERSION 12040

#define CUMOD_DRIVER_SYMS(X)                                                   \
    X(init, "cuInit", cuInit)                                                  \
    X(driver_get_version, "cuDriverGetVersion", cuDriverGetVersion)            \
    X(get_error_name, "cuGetErrorName", cuGetErrorName)                        \
    X(get_error_string, "cuGetErrorString", cuGetErrorString)                  \
    X(device_get, "cuDeviceGet", cuDeviceGet)                                  \
    X(device_get_count, "cuDeviceGetCount", cuDeviceGetCount)                  \
    X(device_get_name, "cuDeviceGetName", cuDeviceGetName)                     \
    X(device_get_attribute, "cuDeviceGetAttribute", cuDeviceGetAttribute)      \
    X(device_total_mem, "cuDeviceTotalMem", cuDeviceTotalMem)                  \
    X(primary_ctx_retain, "cuDevicePrimaryCtxRetain",                          \
      cuDevicePrimaryCtxRetain)                                                \
    X(primary_ctx_release, "cuDevicePrimaryCtxRelease",                        \
      cuDevicePrimaryCtxRelease)                                               \
    X(ctx_set_current, "cuCtxSetCurrent", cuCtxSetCurrent)                     \
    X(ctx_synchronize, "cuCtxSynchronize", cuCtxSynchronize)                   \
    X(mem_get_info, "cuMemGetInfo", cuMemGetInfo)                              \
    X(device_get_default_mem_pool, "cuDeviceGetDefaultMemPool",                \
      cuDeviceGetDefaultMemPool)                                               \
    X(mem_pool_set_attribute, "cuMemPoolSetAttribute", cuMemPoolSetAttribute)  \
    X(mem_pool_get_attribute, "cuMemPoolGetAttribute", cuMemPoolGetAttribute)  \
    X(module_load_data, "cuModuleLoadData", cuModuleLoadData)                  \
    X(module_load_data_ex, "cuModuleLoadDataEx", cuModuleLoadDataEx)           \
    X(module_unload, "cuModuleUnload", cuModuleUnload)                         \
    X(link_create, "cuLinkCreate", cuLinkCreate)                               \
    X(link_add_data, "cuLinkAddData", cuLinkAddData)                           \
    X(link_complete, "cuLinkComplete", cuLinkComplete)                         \
    X(link_destroy, "cuLinkDestroy", cuLinkDestroy)                            \
    X(module_get_function, "cuModuleGetFunction", cuModuleGetFunction)         \
    X(module_get_function_count, "cuModuleGetFunctionCount",                   \
      cuModuleGetFunctionCount)                                                \
    X(module_enumerate_functions, "cuModuleEnumerateFunctions",                \
      cuModuleEnumerateFunctions)                                              \
    X(func_get_name, "cuFuncGetName", cuFuncGetName)                           \
    X(func_get_param_info, "cuFuncGetParamInfo", cuFuncGetParamInfo)           \
    X(func_get_attribute, "cuFuncGetAttribute", cuFuncGetAttribute)            \
    X(mem_alloc, "cuMemAlloc", cuMemAlloc)                                     \
    X(mem_free, "cuMemFree", cuMemFree)                                        \
    X(mem_alloc_async, "cuMemAllocAsync", cuMemAllocAsync)                     \
    X(mem_free_async, "cuMemFreeAsync", cuMemFreeAsync)                        \
    X(memcpy_htod, "cuMemcpyHtoD", cuMemcpyHtoD)                               \
    X(memcpy_dtoh, "cuMemcpyDtoH", cuMemcpyDtoH)                               \
    X(memcpy_dtod, "cuMemcpyDtoD", cuMemcpyDtoD)                               \
    X(memcpy_htod_async, "cuMemcpyHtoDAsync", cuMemcpyHtoDAsync)               \
    X(memcpy_dtoh_async, "cuMemcpyDtoHAsync", cuMemcpyDtoHAsync)               \
    X(memcpy_dtod_async, "cuMemcpyDtoDAsync", cuMemcpyDtoDAsync)               \
    X(memset_d8, "cuMemsetD8", cuMemsetD8)                                     \
    X(memset_d8_async, "cuMemsetD8Async", cuMemsetD8Async)                     \
    X(mem_host_register, "cuMemHostRegister", cuMemHostRegister)               \
    X(mem_host_unregister, "cuMemHostUnregister", cuMemHostUnregister)         \
    X(mem_host_alloc, "cuMemHostAlloc", cuMemHostAlloc)                        \
    X(mem_free_host, "cuMemFreeHost", cuMemFreeHost)                           \
    X(stream_create, "cuStreamCreate", cuStreamCreate)                         \
    X(stream_destroy, "cuStreamDestroy", cuStreamDestroy)                      \
    X(stream_synchronize, "cuStreamSynchronize", cuStreamSynchronize)          \
    X(stream_query, "cuStreamQuery", cuStreamQuery)                            \
    X(stream_wait_event, "cuStreamWaitEvent", cuStreamWaitEvent)               \
    X(event_create, "cuEventCreate", cuEventCreate)                            \
    X(event_destroy, "cuEventDestroy", cuEventDestroy)                         \
    X(event_record, "cuEventRecord", cuEventRecord)                            \
    X(event_query, "cuEventQuery", cuEventQuery)                               \
    X(event_synchronize, "cuEventSynchronize", cuEventSynchronize)             \
    X(launch_kernel, "cuLaunchKernel", cuLaunchKernel)                         \
    X(launch_kernel_ex, "cuLaunchKernelEx", cuLaunchKernelEx)                  \
    X(func_set_attribute, "cuFuncSetAttribute", cuFuncSetAttribute)            \
    X(occupancy_max_active_blocks,                                             \
      "cuOccupancyMaxActiveBlocksPerMultiprocessor",                           \
      cuOccupancyMaxActiveBlocksPerMultiprocessor)                             \
    X(module_get_global, "cuModuleGetGlobal", cuModuleGetGlobal)               \
    X(func_load, "cuFuncLoad", cuFuncLoad)

/* Entry points cumodd can do without: a driver (or a fake) that lacks one
 * leaves its pointer NULL, and what it feeds says so ("" for a UUID).
 *   X(field, "base name", proto, fallback)
 * fallback: the CUDA version to ask at when CUMOD_CUDA_VERSION finds
 * nothing, for an older ABI of the same shape. cuDeviceGetUuid at 12.4 is
 * the _v2 ABI (11.4: a MIG instance's own UUID, as nvidia-smi -L prints
 * it); at 9.2 it is the first one (the whole GPU's). cuStreamWriteValue32
 * (the _v2 ABI from 11.7): without it, direct launches complete by events
 * (exec/direct_record.c). */
#define CUMOD_DRIVER_OPTIONAL_SYMS(X)                                          \
    X(device_get_uuid, "cuDeviceGetUuid", cuDeviceGetUuid, 9020)               \
    X(stream_write_value32, "cuStreamWriteValue32", cuStreamWriteValue32, 11070)

#endif
