/* SPDX-License-Identifier: MIT */
/*
 * cuGetProcAddress: the way cumodd finds every entry point. Names are base
 * names ("cuMemAlloc", never "cuMemAlloc_v2"); the version picks the ABI. The
 * fake has one ABI per name (the one cuda.h 13 declares), served from the
 * version that introduced it.
 */
#include "fake.h"

#include <string.h>

/* The v1 entry point: cuda.h maps the name to _v2, so it is declared here. */
#undef cuGetProcAddress
FAKECUDA_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn,
                                               int cudaVersion,
                                               cuuint64_t flags);

typedef struct proc_entry {
    const char *name;
    void *fn;
    int since; /* the CUDA version that introduced this ABI */
} proc_entry;

#define PROC(name, fn, since)                                                  \
    {                                                                          \
        name, (void *)fn, since                                                \
    }

static const proc_entry proc_table[] = {
    PROC("cuInit", cuInit, 2000),
    PROC("cuDriverGetVersion", cuDriverGetVersion, 2020),
    PROC("cuGetErrorName", cuGetErrorName, 6000),
    PROC("cuGetErrorString", cuGetErrorString, 6000),
    PROC("cuGetProcAddress", cuGetProcAddress_v2, 12000),
    PROC("cuDeviceGet", cuDeviceGet, 2000),
    PROC("cuDeviceGetCount", cuDeviceGetCount, 2000),
    PROC("cuDeviceGetName", cuDeviceGetName, 2000),
    PROC("cuDeviceGetAttribute", cuDeviceGetAttribute, 2000),
    PROC("cuDeviceTotalMem", cuDeviceTotalMem_v2, 3020),
    PROC("cuDeviceGetUuid", cuDeviceGetUuid_v2, 11040),
    PROC("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 7000),
    PROC("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 11000),
    PROC("cuCtxSetCurrent", cuCtxSetCurrent, 4000),
    PROC("cuCtxGetCurrent", cuCtxGetCurrent, 4000),
    PROC("cuCtxGetDevice", cuCtxGetDevice, 2000),
    PROC("cuCtxSynchronize", cuCtxSynchronize, 2000),
    PROC("cuMemGetInfo", cuMemGetInfo_v2, 3020),
    PROC("cuModuleLoadData", cuModuleLoadData, 2000),
    PROC("cuModuleLoadDataEx", cuModuleLoadDataEx, 2010),
    PROC("cuModuleUnload", cuModuleUnload, 2000),
    PROC("cuLinkCreate", cuLinkCreate_v2, 6050),
    PROC("cuLinkAddData", cuLinkAddData_v2, 6050),
    PROC("cuLinkComplete", cuLinkComplete, 5050),
    PROC("cuLinkDestroy", cuLinkDestroy, 5050),
    PROC("cuModuleGetFunction", cuModuleGetFunction, 2000),
    PROC("cuModuleGetFunctionCount", cuModuleGetFunctionCount, 12040),
    PROC("cuModuleEnumerateFunctions", cuModuleEnumerateFunctions, 12040),
    PROC("cuFuncGetName", cuFuncGetName, 12030),
    PROC("cuFuncGetParamInfo", cuFuncGetParamInfo, 12040),
    PROC("cuFuncGetAttribute", cuFuncGetAttribute, 2020),
    PROC("cuMemAlloc", cuMemAlloc_v2, 3020),
    PROC("cuMemFree", cuMemFree_v2, 3020),
    PROC("cuMemcpyHtoD", cuMemcpyHtoD_v2, 3020),
    PROC("cuMemcpyDtoH", cuMemcpyDtoH_v2, 3020),
    PROC("cuMemcpyDtoD", cuMemcpyDtoD_v2, 3020),
    PROC("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2, 3020),
    PROC("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2, 3020),
    PROC("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync_v2, 3020),
    PROC("cuMemsetD8", cuMemsetD8_v2, 3020),
    PROC("cuMemsetD8Async", cuMemsetD8Async, 3020),
    PROC("cuMemAllocAsync", cuMemAllocAsync, 11020),
    PROC("cuMemFreeAsync", cuMemFreeAsync, 11020),
    PROC("cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool, 11020),
    PROC("cuMemPoolSetAttribute", cuMemPoolSetAttribute, 11020),
    PROC("cuMemPoolGetAttribute", cuMemPoolGetAttribute, 11020),
    PROC("cuMemHostRegister", cuMemHostRegister_v2, 6050),
    PROC("cuMemHostUnregister", cuMemHostUnregister, 4000),
    PROC("cuMemHostAlloc", cuMemHostAlloc, 3020),
    PROC("cuMemFreeHost", cuMemFreeHost, 2000),
    PROC("cuStreamCreate", cuStreamCreate, 2000),
    PROC("cuStreamDestroy", cuStreamDestroy_v2, 4000),
    PROC("cuStreamSynchronize", cuStreamSynchronize, 2000),
    PROC("cuStreamQuery", cuStreamQuery, 2000),
    PROC("cuStreamWaitEvent", cuStreamWaitEvent, 3020),
    PROC("cuEventCreate", cuEventCreate, 2000),
    PROC("cuEventDestroy", cuEventDestroy_v2, 4000),
    PROC("cuStreamWriteValue32", cuStreamWriteValue32_v2, 11070),
    PROC("cuEventRecord", cuEventRecord, 2000),
    PROC("cuEventQuery", cuEventQuery, 2000),
    PROC("cuEventSynchronize", cuEventSynchronize, 2000),
    PROC("cuLaunchKernel", cuLaunchKernel, 4000),
    PROC("cuLaunchKernelEx", cuLaunchKernelEx, 11060),
    PROC("cuFuncSetAttribute", cuFuncSetAttribute, 9000),
    PROC("cuOccupancyMaxActiveBlocksPerMultiprocessor",
         cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050),
    PROC("cuModuleGetGlobal", cuModuleGetGlobal_v2, 3020),
    PROC("cuFuncLoad", cuFuncLoad, 12040),
};

CUresult CUDAAPI
cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                    cuuint64_t flags,
                    CUdriverProcAddressQueryResult *symbolStatus)
{
    CUdriverProcAddressQueryResult status =
        CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    if (symbol == NULL || pfn == NULL ||
        (flags &
         ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    for (size_t i = 0; i < sizeof(proc_table) / sizeof(proc_table[0]); i++) {
        const proc_entry *e = &proc_table[i];
        if (strcmp(e->name, symbol) != 0)
            continue;
        if (cudaVersion > FAKECUDA_DRIVER_VERSION) {
            status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        } else if (cudaVersion >= e->since) {
            *pfn = e->fn;
            status = CU_GET_PROC_ADDRESS_SUCCESS;
            rc = CUDA_SUCCESS;
        } else if (strcmp(symbol, "cuGetProcAddress") == 0 &&
                   cudaVersion >= 11030) {
            /* Before 12.0 the name meant the v1 ABI, without symbolStatus. */
            *pfn = (void *)cuGetProcAddress;
            status = CU_GET_PROC_ADDRESS_SUCCESS;
            rc = CUDA_SUCCESS;
        } else {
            status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        }
        break;
    }
    if (symbolStatus != NULL)
        *symbolStatus = status;
    return rc;
}

CUresult CUDAAPI
cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                 cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
