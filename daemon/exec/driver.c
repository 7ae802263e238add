/* SPDX-License-Identifier: MIT */
#include "driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"

/* cuGetProcAddress_v2 (CUDA 12.0+): the symbol status tells "not found"
 * from "driver too old", which a person needs to hear apart. */
typedef CUresult (*driver_getproc_fn)(const char *, void **, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult *);

const char *
cumod__driver_default_path(const char *explicit_path)
{
    const char *env = getenv("CUMOD_CUDA_LIBRARY");
    if (explicit_path != NULL && explicit_path[0] != '\0')
        return explicit_path;
    if (env != NULL && env[0] != '\0')
        return env;
    return "libcuda.so.1";
}

static int
driver_resolve(cumod_driver *drv, driver_getproc_fn getproc, char *msg,
               size_t msglen)
{
    CUdriverProcAddressQueryResult st;
    CUresult r;
    void *fn;
    int ver = 0;

    /* Ask the driver its version first, so "too old" names both numbers. */
    fn = NULL;
    r = getproc("cuDriverGetVersion", &fn, 2020, CU_GET_PROC_ADDRESS_DEFAULT,
                &st);
    if (r == CUDA_SUCCESS && fn != NULL)
        ((__typeof__(cuDriverGetVersion) *)fn)(&ver);

#define DRIVER_RESOLVE(field, name, proto)                                     \
    fn = NULL;                                                                 \
    r = getproc(name, &fn, CUMOD_CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT,    \
                &st);                                                          \
    if (r != CUDA_SUCCESS || fn == NULL) {                                     \
        if (st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)                  \
            snprintf(msg, msglen,                                              \
                     "the CUDA driver in %s is too old: it supports CUDA "     \
                     "%d.%d and cumodd needs %d.%d or newer for %s; update "   \
                     "the NVIDIA driver",                                      \
                     drv->path, ver / 1000, (ver % 1000) / 10,                 \
                     CUMOD_CUDA_VERSION / 1000,                                \
                     (CUMOD_CUDA_VERSION % 1000) / 10, name);                  \
        else                                                                   \
            snprintf(msg, msglen,                                              \
                     "%s is not a usable CUDA driver: it has no entry point "  \
                     "%s (CUresult %d)",                                       \
                     drv->path, name, (int)r);                                 \
        return CUMOD_ENODRIVER;                                                \
    }                                                                          \
    drv->field = (__typeof__(proto) *)fn;
    CUMOD_DRIVER_SYMS(DRIVER_RESOLVE)
#undef DRIVER_RESOLVE
#define DRIVER_RESOLVE_OPTIONAL(field, name, proto, fallback)                  \
    fn = NULL;                                                                 \
    if (getproc(name, &fn, CUMOD_CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT,    \
                &st) != CUDA_SUCCESS ||                                        \
        fn == NULL) {                                                          \
        fn = NULL;                                                             \
        if (getproc(name, &fn, (fallback), CU_GET_PROC_ADDRESS_DEFAULT,        \
                    &st) != CUDA_SUCCESS)                                      \
            fn = NULL;                                                         \
    }                                                                          \
    drv->field = (__typeof__(proto) *)fn;
    CUMOD_DRIVER_OPTIONAL_SYMS(DRIVER_RESOLVE_OPTIONAL)
#undef DRIVER_RESOLVE_OPTIONAL
    return CUMOD_OK;
}

cumod_err
cumod__driver_open(cumod_driver *drv, const char *path, char *msg,
                   size_t msglen)
{
    driver_getproc_fn getproc;
    cumod_err rv;

    memset(drv, 0, sizeof(*drv));
    snprintf(drv->path, sizeof(drv->path), "%s", path);
    /* RTLD_LOCAL: nothing else in this process should bind to its symbols;
     * RTLD_NOW: a broken library fails here, not at some later call. */
    drv->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (drv->dl == NULL) {
        const char *why = dlerror();
        snprintf(msg, msglen,
                 "the NVIDIA CUDA driver library %s could not be loaded, so "
                 "this machine has no usable NVIDIA driver: cumodd needs an "
                 "NVIDIA GPU with the NVIDIA driver installed (if the driver "
                 "is installed elsewhere, name its libcuda.so.1 with "
                 "--cuda-library or CUMOD_CUDA_LIBRARY) [dlopen: %s]",
                 path, why ? why : "unknown reason");
        return CUMOD_ENODRIVER;
    }
    *(void **)&getproc = dlsym(drv->dl, "cuGetProcAddress_v2");
    if (getproc == NULL) {
        snprintf(msg, msglen,
                 "%s is not a CUDA driver of version 12.0 or newer (it has no "
                 "cuGetProcAddress_v2); cumodd needs an NVIDIA driver "
                 "supporting CUDA %d.%d or newer",
                 path, CUMOD_CUDA_VERSION / 1000,
                 (CUMOD_CUDA_VERSION % 1000) / 10);
        rv = CUMOD_ENODRIVER;
        goto fail;
    }
    if ((rv = driver_resolve(drv, getproc, msg, msglen)) != CUMOD_OK)
        goto fail;
    return CUMOD_OK;

fail:
    cumod__driver_close(drv);
    return rv;
}

void
cumod__driver_close(cumod_driver *drv)
{
    /* The real driver does not support being unloaded while a context
     * lives; the executor exits right after, so only tests care. */
    if (drv->dl != NULL)
        dlclose(drv->dl);
    memset(drv, 0, sizeof(*drv));
}

void
cumod__driver_uuid_format(const unsigned char b[16], char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;

    if (cap < 41) {
        if (cap > 0)
            out[0] = '\0';
        return;
    }
    memcpy(out, "GPU-", 4);
    n = 4;
    for (int i = 0; i < 16; i++) {
        /* 8-4-4-4-12 digits: a dash before bytes 4, 6, 8 and 10. */
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[n++] = '-';
        out[n++] = hex[b[i] >> 4];
        out[n++] = hex[b[i] & 15];
    }
    out[n] = '\0';
}

void
cumod__driver_device_uuid(const cumod_driver *drv, CUdevice dev, char *out,
                          size_t cap)
{
    CUuuid u;

    if (cap > 0)
        out[0] = '\0';
    if (drv->device_get_uuid == NULL ||
        drv->device_get_uuid(&u, dev) != CUDA_SUCCESS)
        return;
    cumod__driver_uuid_format((const unsigned char *)u.bytes, out, cap);
}

const char *
cumod__cu_name(const cumod_driver *drv, CUresult r, char *buf, size_t buflen)
{
    const char *name = NULL;
    if (drv->get_error_name == NULL ||
        drv->get_error_name(r, &name) != CUDA_SUCCESS || name == NULL) {
        snprintf(buf, buflen, "CUresult %d", (int)r);
        return buf;
    }
    return name;
}

int
cumod__cu_context_lost(CUresult r)
{
#define DRIVER_LOST(code)                                                      \
    if (r == (code))                                                           \
        return 1;
    CUMOD_CU_CONTEXT_LOST(DRIVER_LOST)
#undef DRIVER_LOST
    return 0;
}

cumod_err
cumod__cu_err(const cumod_driver *drv, CUresult r, const char *what, char *msg,
              size_t msglen)
{
    const char *str = NULL;
    char namebuf[32];
    cumod_err rv;

    switch (r) {
    case CUDA_SUCCESS:
        return CUMOD_OK;
    case CUDA_ERROR_OUT_OF_MEMORY:
        rv = CUMOD_EDEVMEM;
        break;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
        rv = CUMOD_ENODEVICE;
        break;
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
        rv = CUMOD_EIMAGE;
        break;
    case CUDA_ERROR_NOT_FOUND:
        rv = CUMOD_ENOENT;
        break;
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
        rv = CUMOD_EINVAL; /* the launch's shape, not the device */
        break;
    default:
        rv = cumod__cu_context_lost(r) ? CUMOD_ECTXLOST : CUMOD_EDRIVER;
        break;
    }
    if (msg != NULL) {
        if (drv->get_error_string == NULL ||
            drv->get_error_string(r, &str) != CUDA_SUCCESS || str == NULL)
            str = "no description";
        snprintf(msg, msglen, "%s: %s (%s)", what,
                 cumod__cu_name(drv, r, namebuf, sizeof(namebuf)), str);
    }
    return rv;
}
