/* SPDX-License-Identifier: MIT */
#include "blas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dlsearch.h"

/* Where cuBLAS is looked for when nobody names it: the names the dynamic
 * loader knows (a toolkit registered with ldconfig, or LD_LIBRARY_PATH),
 * the development link first (it names the toolkit's own version), then
 * the CUDA toolkit's usual folder, which is often not registered. */
static const char *const blas_default_names[] = {
    "libcublas.so",
    "libcublas.so.13",
    "libcublas.so.12",
    "/usr/local/cuda/lib64/libcublas.so",
    "/usr/local/cuda/lib64/libcublas.so.13",
    "/usr/local/cuda/lib64/libcublas.so.12",
};

const char *
cumod__blas_default_path(const char *explicit_path)
{
    return cumod__dl_named(explicit_path, "CUMOD_CUBLAS_LIBRARY");
}

/* Resolves every entry point of a loaded library and checks its version.
 * CUMOD_ENOTSUP with the sentence in msg. */
static cumod_err
blas_resolve(cumod_blas *b, char *msg, size_t msglen)
{
    void *fn;

#define BLAS_RESOLVE(field, name, proto)                                       \
    if ((fn = dlsym(b->dl, name)) == NULL) {                                   \
        snprintf(msg, msglen,                                                  \
                 "%s is not a usable cuBLAS: it has no entry point %s, "       \
                 "which cumodd's GEMM needs",                                  \
                 b->path, name);                                               \
        return CUMOD_ENOTSUP;                                                  \
    }                                                                          \
    *(void **)&b->field = fn;
    CUMOD_BLAS_SYMS(BLAS_RESOLVE)
#undef BLAS_RESOLVE
    if (b->get_property(MAJOR_VERSION, &b->major) != CUBLAS_STATUS_SUCCESS ||
        b->get_property(MINOR_VERSION, &b->minor) != CUBLAS_STATUS_SUCCESS ||
        b->get_property(PATCH_LEVEL, &b->patch) != CUBLAS_STATUS_SUCCESS) {
        snprintf(msg, msglen,
                 "%s is not a usable cuBLAS: cublasGetProperty does not "
                 "say its version",
                 b->path);
        return CUMOD_ENOTSUP;
    }
    if (b->major < CUMOD_BLAS_MIN_MAJOR) {
        snprintf(msg, msglen,
                 "%s is cuBLAS %d.%d.%d, older than cumodd's GEMM needs "
                 "(%d.0 or newer, as in CUDA toolkit %d): install a newer "
                 "cuBLAS and name it with --cublas-library or "
                 "CUMOD_CUBLAS_LIBRARY",
                 b->path, b->major, b->minor, b->patch, CUMOD_BLAS_MIN_MAJOR,
                 CUMOD_BLAS_MIN_MAJOR);
        return CUMOD_ENOTSUP;
    }
    return CUMOD_OK;
}

cumod_err
cumod__blas_open(cumod_blas *b, const char *path, char *msg, size_t msglen)
{
    char tried[1536];
    cumod_err rv;

    memset(b, 0, sizeof(*b));
    b->dl = cumod__dl_search(path, blas_default_names,
                             sizeof(blas_default_names) /
                                 sizeof(blas_default_names[0]),
                             b->path, sizeof(b->path), tried, sizeof(tried));
    if (b->dl == NULL) {
        snprintf(msg, msglen,
                 "cuBLAS could not be loaded, so cumodd runs no GEMM (it "
                 "serves everything else): install the CUDA toolkit's "
                 "libcublas, or name it with --cublas-library or "
                 "CUMOD_CUBLAS_LIBRARY [tried %s]",
                 tried);
        return CUMOD_ENOTSUP;
    }
    if ((rv = blas_resolve(b, msg, msglen)) != CUMOD_OK) {
        cumod__blas_close(b);
        return rv;
    }
    return CUMOD_OK;
}

void
cumod__blas_close(cumod_blas *b)
{
    /* Not dlclosed: see blas.h. */
    memset(b, 0, sizeof(*b));
}

const char *
cumod__blas_status_name(const cumod_blas *b, cublasStatus_t s)
{
    const char *name = b->get_status_name(s);
    return name != NULL ? name : "CUBLAS_STATUS_UNKNOWN";
}

cumod_err
cumod__blas_err(const cumod_blas *b, cublasStatus_t s, const char *what,
                char *msg, size_t msglen)
{
    cumod_err rv;

    switch (s) {
    case CUBLAS_STATUS_SUCCESS:
        return CUMOD_OK;
    case CUBLAS_STATUS_INVALID_VALUE:
        rv = CUMOD_EINVAL;
        break;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
        rv = CUMOD_ENOTSUP;
        break;
    case CUBLAS_STATUS_ALLOC_FAILED:
        rv = CUMOD_EDEVMEM;
        break;
    default:
        rv = CUMOD_EDRIVER;
        break;
    }
    if (msg != NULL) {
        const char *str = b->get_status_string(s);
        snprintf(msg, msglen, "%s: %s (%s)", what,
                 cumod__blas_status_name(b, s), str ? str : "no description");
    }
    return rv;
}
