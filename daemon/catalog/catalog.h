/*
 * The module catalog: every module of the kernel folder, its image files,
 * its state and its loaded generations. Owned by the front's loop thread;
 * nothing here may be touched from another thread.
 *
 * A module is named by its file stem. Of its images the catalog uses one:
 * a cubin if present, else a fatbin, else PTX. Residency is lazy: a module
 * is loaded when asked (a launch, `load`, or --pin at start), every
 * function resolved at load; resident modules follow their file: new bytes
 * load generation N+1 beside N in the executor, then N+1 takes new work and
 * N is unloaded when its last launch completes. A load that fails leaves N
 * serving and the error on record, and is not retried until the bytes
 * change.
 */
#ifndef CUMOD_CATALOG_H
#define CUMOD_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "cumod.pb-c.h"

struct cumod_daemon;
struct cumod_work;
typedef struct cumod_catalog cumod_catalog;
typedef struct cumod_module cumod_module;
typedef struct cumod_gen cumod_gen;

/* One kernel of a loaded generation, with its parameter layout as
 * cuFuncGetParamInfo gave it. */
typedef struct cumod_kernel {
    char *name;
    uint32_t index; /* its function's index in the executor's module */
    uint32_t nparams;
    uint32_t *offsets;
    uint32_t *sizes;
} cumod_kernel;

/* Starts the catalog: watches cfg->kernel_dir and scans it. On failure
 * writes a sentence into msg. Loop thread. */
int cumod__catalog_open(struct cumod_daemon *d, cumod_catalog **out, char *msg,
                        size_t msglen);

/* Stops watching and unloads nothing (the executor is going away); frees
 * the catalog once its handles are closed and its reads have returned.
 * Answers every parked request with CUMOD_ESHUTDOWN. Accepts NULL. */
void cumod__catalog_stop(cumod_catalog *cat);

/* The executor came up (again): load what is pinned. */
void cumod__catalog_exec_ready(cumod_catalog *cat);

/* The executor died: every generation is gone with its context. */
void cumod__catalog_exec_lost(cumod_catalog *cat);

/* Counters for Hello. */
void cumod__catalog_stats(const cumod_catalog *cat, uint32_t *modules,
                          uint32_t *resident, uint64_t *resident_bytes,
                          int *degraded);

/* Request handlers (catalog_requests.c). Each answers w exactly once. */
void cumod__catalog_list(cumod_catalog *cat, struct cumod_work *w);
void cumod__catalog_show(cumod_catalog *cat, struct cumod_work *w,
                         const char *name);
void cumod__catalog_load(cumod_catalog *cat, struct cumod_work *w,
                         const char *name);
void cumod__catalog_unload(cumod_catalog *cat, struct cumod_work *w,
                           const char *name);
void cumod__catalog_pin(cumod_catalog *cat, struct cumod_work *w,
                        const char *name, int pin);
void cumod__catalog_reload(cumod_catalog *cat, struct cumod_work *w,
                           const char *name);

#endif
