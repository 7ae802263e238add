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

#include "driver_syms.h"

typedef struct cumod_driver {
    void *dl;
    char path[512];
#define CUMOD_DRIVER_FIELD(field, name, proto) __typeof__(proto) *field;
    CUMOD_DRIVER_SYMS(CUMOD_DRIVER_FIELD)
#undef CUMOD_DRIVER_FIELD
} cumod_driver;

/* The library to load: the explicit path if non-NULL, else the environment
 * variable CUMOD_CUDA_LIBRARY, else "libcuda.so.1". Static or borrowed. */
const char *cumod__driver_default_path(const char *explicit_path);

/* Loads the library and resolves every entry point of driver_syms.h.
 * On failure returns a cumod error (CUMOD_ENODRIVER when the library is
 * missing or is not a usable CUDA driver) and writes a sentence for a person
 * into msg. Blocks (dlopen). */
int cumod__driver_open(cumod_driver *drv, const char *path, char *msg,
                       size_t msglen);

/* Unloads the library. Accepts a zeroed or half-opened driver. */
void cumod__driver_close(cumod_driver *drv);

/* Converts a CUresult into a cumod error, once, where it enters: writes
 * "what: CUDA_ERROR_X (driver's sentence)" into msg when msg is non-NULL.
 * CUDA_SUCCESS gives CUMOD_OK. Any thread. */
int cumod__cu_err(const cumod_driver *drv, CUresult r, const char *what,
                  char *msg, size_t msglen);

/* The driver's name for r ("CUDA_ERROR_ILLEGAL_ADDRESS"), or "CUresult N". */
const char *cumod__cu_name(const cumod_driver *drv, CUresult r, char *buf,
                           size_t buflen);

#endif
