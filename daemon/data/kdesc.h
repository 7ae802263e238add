/* SPDX-License-Identifier: MIT */
/*
 * A kernel's description, as the checks of a launch read it (data/
 * launch_check.h): its parameter layout, what the driver says of it once
 * loaded, and, for C++ kernels, its signature's types. The catalog makes
 * them from an image and the executor's load (catalog/kernel_desc.c); the
 * executor keeps copies of those its direct launches may run
 * (exec/direct_snap.c). Plain data: no allocation here.
 */
#ifndef CUMOD_DATA_KDESC_H
#define CUMOD_DATA_KDESC_H

#include <stdint.h>

/* One kernel of a loaded generation, with its parameter layout as
 * cuFuncGetParamInfo gave it. */
typedef struct cumod_kernel {
    char *name;
    uint32_t index; /* its function's index in the executor's module */
    uint32_t nparams;
    uint32_t *offsets;
    uint32_t *sizes;
    /* What the driver says of it once loaded (channel.h kattr). */
    int32_t static_shared; /* bytes; -1 unknown */
    int32_t registers;     /* -1 unknown */
    uint32_t max_threads;  /* 0: none */
    uint32_t cluster[3];   /* its compiled cluster shape; 0s: none */
    int32_t max_dyn_shared;
    /* C++ kernels: the demangled signature, what messages name it by, and
     * each parameter's type (NULL for extern "C" kernels, whose images
     * carry no types). */
    char *display;      /* "axpy<float>" (the name itself when not C++) */
    char *signature;    /* "axpy<float>(float, const float*, float*, int)" */
    char **ptypes;      /* nparams types, or NULL */
    uint8_t *pindirect; /* nparams: 1 for a pointer or reference */
    /* nparams (with ptypes): the Cumod__ArgType of an arithmetic
     * parameter (int, float, ...); 0 for any other (a class, an enum,
     * char, bool, __half): such a value is checked by its size. */
    uint8_t *pvalue;
} cumod_kernel;

#endif
