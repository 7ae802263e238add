/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver, loaded at run time. cumodd never links libcuda: it
 * dlopens the library (libcuda.so.1 unless told otherwise) and resolves every
 * entry point through cuGetProcAddress with an explicit CUDA version, so
 * the same binary runs on a machine without a GPU long enough to say so, and
 * tests can substitute tests/fakecuda.
 *
 * Used by the executor process only; one cumod_driver per process.
 */
#ifndef CUMOD_DRIVER_H
#define CUMOD_DRIVER_H

#include <cuda.h>
#include <stddef.h>

#include "cumod/errors.h"
#include "driver_syms.h"

typedef struct cumod_driver {
    void *dl;
    char path[512];
#define CUMOD_DRIVER_FIELD(field, name, proto) __typeof__(proto) *field;
    CUMOD_DRIVER_SYMS(CUMOD_DRIVER_FIELD)
#undef CUMOD_DRIVER_FIELD
#define CUMOD_DRIVER_OPTIONAL_FIELD(field, name, proto, fallback)              \
    __typeof__(proto) *field; /* NULL: the driver lacks it */
    CUMOD_DRIVER_OPTIONAL_SYMS(CUMOD_DRIVER_OPTIONAL_FIELD)
#undef CUMOD_DRIVER_OPTIONAL_FIELD
} cumod_driver;

/* The library to load: the explicit path if non-NULL, else the environment
 * variable CUMOD_CUDA_LIBRARY, else "libcuda.so.1". Static or borrowed. */
const char *cumod__driver_default_path(const char *explicit_path);

/* Loads the library and resolves every entry point of driver_syms.h.
 * On failure returns a cumod error (CUMOD_ENODRIVER when the library is
 * missing or is not a usable CUDA driver) and writes a sentence for a person
 * into msg. Blocks (dlopen). */
cumod_err cumod__driver_open(cumod_driver *drv, const char *path, char *msg,
                             size_t msglen);

/* Unloads the library. Accepts a zeroed or half-opened driver. */
void cumod__driver_close(cumod_driver *drv);

/* A device's UUID as nvidia-smi writes it, "GPU-" and 8-4-4-4-12
 * lowercase hex digits (41 bytes with the NUL), into out; "" when the
 * driver lacks cuDeviceGetUuid or it fails, or cap is too small. Needs
 * cuInit; any thread. */
void cumod__driver_device_uuid(const cumod_driver *drv, CUdevice dev, char *out,
                               size_t cap);

/* The 16 bytes of a CUuuid in that form; "" when cap < 41. */
void cumod__driver_uuid_format(const unsigned char bytes[16], char *out,
                               size_t cap);

/* The CUDA errors after which the context is lost for good: cuda.h says of
 * each that it leaves the process in an inconsistent state (every later
 * call fails the same way) or that the context cannot be used any more.
 * The one list: cumod__cu_err turns them into CUMOD_ECTXLOST and the
 * executor exits on them so that a new process can serve. Numbers, not
 * names, for the rows newer than CUDA 12.0's cuda.h. */
#define CUMOD_CU_CONTEXT_LOST(X)                                               \
    X(CUDA_ERROR_ECC_UNCORRECTABLE)                                            \
    X(CUDA_ERROR_NVLINK_UNCORRECTABLE)                                         \
    X((CUresult)226 /* CUDA_ERROR_CONTAINED */)                                \
    X(CUDA_ERROR_ILLEGAL_ADDRESS)                                              \
    X(CUDA_ERROR_LAUNCH_TIMEOUT)                                               \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED)                                         \
    X(CUDA_ERROR_ASSERT)                                                       \
    X(CUDA_ERROR_HARDWARE_STACK_ERROR)                                         \
    X(CUDA_ERROR_ILLEGAL_INSTRUCTION)                                          \
    X(CUDA_ERROR_MISALIGNED_ADDRESS)                                           \
    X(CUDA_ERROR_INVALID_ADDRESS_SPACE)                                        \
    X(CUDA_ERROR_INVALID_PC)                                                   \
    X(CUDA_ERROR_LAUNCH_FAILED)                                                \
    X((CUresult)721 /* CUDA_ERROR_TENSOR_MEMORY_LEAK */)                       \
    X(CUDA_ERROR_MPS_CLIENT_TERMINATED)                                        \
    X(CUDA_ERROR_EXTERNAL_DEVICE)                                              \
    X(CUDA_ERROR_UNKNOWN)

/* 1 when r is one of CUMOD_CU_CONTEXT_LOST. Pure. */
int cumod__cu_context_lost(CUresult r);

/* Converts a CUresult into a cumod error, once, where it enters: writes
 * "what: CUDA_ERROR_X (driver's sentence)" into msg when msg is non-NULL.
 * CUDA_SUCCESS gives CUMOD_OK; the context-lost list CUMOD_ECTXLOST. Any
 * thread. */
cumod_err cumod__cu_err(const cumod_driver *drv, CUresult r, const char *what,
                        char *msg, size_t msglen);

/* The driver's name for r ("CUDA_ERROR_ILLEGAL_ADDRESS"), or "CUresult N". */
const char *cumod__cu_name(const cumod_driver *drv, CUresult r, char *buf,
                           size_t buflen);

#endif
