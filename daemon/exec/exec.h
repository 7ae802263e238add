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
    uint32_t *nparams;    /* per function */
    uint32_t **param_off; /* per function, nparams offsets */
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
    struct cumod_exec_work *work; /* streams and completions (exec_work.c) */
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

/* Starts the completion thread and the stream table. 0 or -1. */
int cumod__exec_work_start(cumod_exec *ex);

/* Stops the completion thread (after the work in flight), destroys the
 * streams. Accepts a never-started executor. */
void cumod__exec_work_stop(cumod_exec *ex);

/* Serves the data commands (ALLOC, FREE, SEG_MAP, SEG_UNMAP,
 * STREAM_DESTROY, STREAMS_CLOSE, WORK): packet buf of n bytes with its
 * descriptor fd (closed here). 0 or -errno of the channel. */
int cumod__exec_on_data(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        const void *buf, size_t n, int fd);

/* The loaded module of handle, or NULL when stale or unknown. */
cumod_exec_module *cumod__exec_module(cumod_exec *ex, uint64_t handle);

#endif
