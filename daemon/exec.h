/*
 * What the executor's files share (private to the executor process).
 */
#ifndef CUMOD_EXEC_H
#define CUMOD_EXEC_H

#include <stdint.h>

#include "channel.h"
#include "driver.h"
#include "executor.h"

/* One loaded module generation: its CUmodule and every function, resolved
 * at load (cuModuleGetFunction, which also forces lazy loading). */
typedef struct cumod_exec_module {
    uint64_t handle; /* 0: free slot */
    CUmodule mod;
    uint32_t nfunc;
    CUfunction *funcs;
    char name[132];
    uint64_t generation;
} cumod_exec_module;

typedef struct cumod_exec {
    const cumod_executor_cfg *cfg;
    cumod_driver drv;
    CUdevice dev;
    CUcontext ctx; /* the retained primary context, or NULL */
    int chan;
    /* Loaded modules: handle = tag << 32 | slot, so a stale handle (an
     * unloaded slot reused) never matches. */
    cumod_exec_module *mods;
    uint32_t nmods;
    uint32_t next_tag;
} cumod_exec;

/* Serves CUMOD_CHAN_LOAD: fd is the image's memfd (closed here). Replies
 * on the channel. 0 or -errno of the channel. Executor thread. */
int cumod__exec_on_load(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        const void *payload, size_t len, int fd);

/* Serves CUMOD_CHAN_UNLOAD. 0 or -errno of the channel. */
int cumod__exec_on_unload(cumod_exec *ex, const cumod_chan_hdr *hdr,
                          const void *payload, size_t len);

/* Unloads everything (at exit). */
void cumod__exec_modules_fini(cumod_exec *ex);

/* The loaded module of handle, or NULL when stale or unknown. */
cumod_exec_module *cumod__exec_module(cumod_exec *ex, uint64_t handle);

#endif
