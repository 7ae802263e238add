/* SPDX-License-Identifier: MIT */
/*
 * cumod_driver_report's parts (driver_report.c, driver_report_cases.c,
 * driver_report_meta.c): the driver as resolved, the images read, the
 * report's state. One thread.
 */
#ifndef CUMOD_DRIVER_REPORT_H
#define CUMOD_DRIVER_REPORT_H

#include <cuda.h>
#include <stddef.h>

#include "exec/driver_syms.h"

typedef struct report_driver {
#define REPORT_FIELD(field, name, proto) __typeof__(proto) *field;
    CUMOD_DRIVER_SYMS(REPORT_FIELD)
#undef REPORT_FIELD
#define REPORT_OPTIONAL_FIELD(field, name, proto, fallback)                    \
    __typeof__(proto) *field;
    CUMOD_DRIVER_OPTIONAL_SYMS(REPORT_OPTIONAL_FIELD)
#undef REPORT_OPTIONAL_FIELD
} report_driver;

typedef struct report_image {
    const char *path;
    unsigned char *bytes; /* followed by REPORT_PAD zero bytes */
    size_t size;
} report_image;

typedef struct report {
    report_driver d;
    int sorted;
    int attributes;
    int stale;
    int sm; /* device compute capability, major * 10 + minor */
    report_image *images;
    int nimages;
    report_image *foreign;
    int nforeign;
    char errbuf[32];    /* report_err's answer for a code the driver lacks */
    CUmodule stale_mod; /* unloaded, for report_stale_cases */
    CUfunction stale_fn;
    char stale_name[256]; /* a copy: the driver's string goes with it */
} report;

/* Zero bytes after every image: PTX is NUL-terminated and a truncated image
 * reads zeros, not whatever the heap holds, so both drivers see the same. */
enum { REPORT_PAD = 65536, REPORT_LOG = 4096 };

/* How a function's attributes may be compared (report_attributes). */
typedef enum report_origin {
    REPORT_SASS = 0,   /* from a cubin: every attribute is the image's */
    REPORT_JIT = 1,    /* compiled from PTX: registers are the JIT's */
    REPORT_LINKED = 2, /* a cuLink result: nothing is compared */
} report_origin;

/* The driver's name of rc ("CUDA_ERROR_INVALID_VALUE"). */
const char *report_err(report *r, CUresult rc);

/* Prints "case NAME RESULT". */
void report_case(report *r, const char *name, CUresult rc);

/* The file name of a path; whether it ends in suffix. */
const char *report_base(const char *path);
int report_has_suffix(const char *path, const char *suffix);

/* The SM a cubin's ELF header names, major * 10 + minor; -1 if none. */
int report_cubin_sm(const report_image *img);

/* Loads an image with cuModuleLoadDataEx, its JIT log to stderr. */
CUresult report_load(report *r, CUmodule *mod, const void *image,
                     const char *what);

/* Links PTX text with cuLink* (see driver_report.c): cuLinkAddData's
 * result; with functions, every step and the result's functions printed
 * as "PREFIX STEP RESULT". */
CUresult report_link(report *r, const char *prefix, const char *ptx,
                     int functions);

/* The fixed list of cases (driver_report_cases.c), in order: malformed
 * images, handles, memory, the pool, launches, overruns, then handles of
 * an unloaded module (last: driver 580 may crash on them). */
void report_cases(report *r);

/* What cuBLAS library lib answers to the calls cumodd makes
 * (driver_report_blas.c), on the current context: "blas NAME STATUS"
 * lines and whether small GEMMs' numbers are right. */
void report_blas(report *r, const char *lib);

/* Prints, for function f (named name) of file, the attributes both drivers
 * answer alike: static shared memory, constant memory, the required
 * cluster shape and whether it must be set, and (origin REPORT_SASS) the
 * registers and the threads a block may have; those of a JIT-compiled
 * function go to stderr. */
void report_attributes(report *r, CUfunction f, const char *file,
                       const char *name, report_origin origin);

/* The origin of an image's functions: REPORT_JIT where the driver compiles
 * PTX for this device (a .ptx file, or a fatbin without a cubin for it). */
report_origin report_image_origin(report *r, const report_image *img);

/* Prints what cumod__imeta_describe says of img ("static" lines) and
 * checks it against what the driver says of mod, the image loaded (NULL
 * where it did not load): a "static differs" line for each disagreement. */
void report_static(report *r, const report_image *img, CUmodule mod);

#endif
