/* SPDX-License-Identifier: MIT */
/*
 * What a module image holds, read from its bytes without the driver: every
 * kernel's name, parameter layout, static shared memory, registers, launch
 * bounds and required cluster shape, and the module's globals (__device__
 * and __constant__ variables). The catalog can describe an image as soon as
 * it is read, long before the module is loaded into the context.
 *
 * Each fact is read where the driver reads it (see image_meta.c for the
 * sections and .nv.info attributes, checked against nvcc 13.0's output and
 * driver 580 on an H100): a description agrees with what cuFuncGetParamInfo,
 * cuFuncGetAttribute and cuModuleGetGlobal say once the image is loaded,
 * where the image says it at all. What only the JIT knows (a PTX kernel's
 * registers) is -1.
 *
 * Nothing here keeps state between calls: every function may be called from
 * any thread, and never blocks.
 */
#ifndef CUMOD_IMAGE_META_H
#define CUMOD_IMAGE_META_H

#include <stddef.h>
#include <stdint.h>

#include "cumod/errors.h"
#include "image.h"

/* One kernel parameter: where it lies in the parameter buffer. */
typedef struct cumod_kparam {
    uint32_t offset;
    uint32_t size;
} cumod_kparam;

/* One kernel (a __global__ function; device functions are not listed). */
typedef struct cumod_kdesc {
    char *name;       /* as in the image: C++ names stay mangled */
    uint32_t nparams; /* params holds nparams entries, in parameter order */
    cumod_kparam *params;
    /* Bytes of static __shared__ memory, as CU_FUNC_ATTRIBUTE_SHARED_SIZE_
     * BYTES gives it (without the block's reserved shared memory); -1 where
     * the image cannot say (PTX with module-scope .shared variables). */
    int32_t static_shared;
    int32_t registers; /* per thread, as CU_FUNC_ATTRIBUTE_NUM_REGS; -1 PTX */
    /* Launch bounds: the threads a block may have at most (the product of
     * __launch_bounds__ / .maxntid), 0 if none; the exact block shape the
     * kernel requires (.reqntid), 0s if none. */
    int32_t max_threads;
    uint32_t reqntid[3];
    /* The cluster shape the kernel was compiled for (__cluster_dims__,
     * .reqnctapercluster), as CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
     * HEIGHT, DEPTH: 0s if none. cluster_explicit is 1 where the kernel
     * must be launched as clusters (__cluster_dims__, .explicitcluster):
     * CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET. */
    uint32_t cluster[3];
    int cluster_explicit;
} cumod_kdesc;

/* One module global, as cuModuleGetGlobal finds it by name. */
typedef struct cumod_gdesc {
    char *name;
    uint64_t size; /* bytes */
    int constant;  /* 1 for __constant__ (.const), 0 for __device__ */
} cumod_gdesc;

/* Which image the description was read from. */
typedef enum cumod_imeta_source {
    CUMOD_IMETA_CUBIN = 0,        /* a cubin */
    CUMOD_IMETA_PTX = 1,          /* PTX text */
    CUMOD_IMETA_FATBIN_CUBIN = 2, /* a fatbin's cubin entry */
    CUMOD_IMETA_FATBIN_PTX = 3,   /* a fatbin's PTX entry */
} cumod_imeta_source;

/* A module image's description. Owned by whoever cumod__imeta_describe
 * wrote it for; released with cumod__imeta_fini. */
typedef struct cumod_imeta {
    size_t nkernels;
    cumod_kdesc *kernels; /* in the order cuModuleEnumerateFunctions gives */
    size_t nglobals;
    cumod_gdesc *globals; /* in the order the image declares them */
    /* Bytes of the module's __constant__ memory: what CU_FUNC_ATTRIBUTE_
     * CONST_SIZE_BYTES says of every kernel of the module. */
    uint64_t const_bytes;
    cumod_imeta_source source;
    /* The SM of what was described, major * 10 + minor: the cubin's (from
     * its ELF header), or the PTX .target's (90 for sm_90 / compute_90). */
    unsigned source_sm;
    /* A fatbin: the byte offset of the entry described (its header); 0 for
     * other images. */
    size_t source_offset;
} cumod_imeta;

/* "cubin", "ptx", "fatbin cubin", "fatbin ptx"; "?" for other values.
 * Static; any thread. */
const char *cumod__imeta_source_name(cumod_imeta_source s);

/* Describes the image bytes (len of them, of the given kind) as the driver
 * would load them on a device of SM sm_major.sm_minor. A cubin or PTX text
 * is first checked as cumod__image_check does (0, 0 skips its SM check);
 * a fatbin's entry is picked as the driver picks it: the cubin of the
 * device's major SM with the highest minor not above the device's (an
 * arch-specific cubin only on exactly its SM), else the PTX of the highest
 * SM not above the device's (source and source_offset say which); a
 * fatbin needs the SM (0, 0 is CUMOD_EINVAL).
 * On success writes *out (the caller releases it with cumod__imeta_fini).
 * Errors, each with a sentence in msg (msg may be NULL when msglen is 0)
 * that starts with name (NULL: "the image") and says what was wrong and
 * where: CUMOD_EIMAGE for an image that cumod__image_check refuses, that
 * has no entry for the device, or whose tables are malformed (a record
 * running past its section, a parameter described twice or never);
 * CUMOD_ENOTSUP where the entry the driver would pick is compressed ("not
 * described: compressed"; nothing here decompresses) and for CUDA C++
 * source (described once NVRTC compiled it); CUMOD_EINVAL for a
 * NULL bytes or out, or an unknown kind; CUMOD_ENOMEM.
 * Pure: no driver, no globals, never reads outside bytes[0, len), never
 * blocks; any thread. */
cumod_err cumod__imeta_describe(const uint8_t *bytes, size_t len,
                                cumod_image_kind kind, const char *name,
                                unsigned sm_major, unsigned sm_minor,
                                cumod_imeta *out, char *msg, size_t msglen);

/* Frees what m holds and zeroes it. Accepts a zeroed or already released
 * description. The thread that owns m. */
void cumod__imeta_fini(cumod_imeta *m);

#endif
