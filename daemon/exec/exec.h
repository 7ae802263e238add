/* SPDX-License-Identifier: MIT */
/*
 * The executor process (cumodd --executor) as a star: one dispatcher,
 * handlers that never call each other, and services they share below
 * them. This header is what every file of daemon/exec shares: the
 * executor's state. Each service has its own narrow header; handlers.h
 * names the handlers for the dispatcher. Private to the executor process
 * (never includes front or catalog state).
 *
 *   dispatcher  executor.c: brings the context up, reads the channel and
 *               its ring, and routes each command by its op through one
 *               table, either run at once on the serving thread, posted
 *               to the submission thread of its stream (submit.h), or
 *               posted to a lane; starts and stops everything.
 *               executor_submit.c: what the submission threads run and
 *               poll (the dispatcher's too: it wires handlers to them).
 *   handlers    exec_*.c, one per concern, each serving its commands and
 *               answering them: exec_work.c (WORK: launches, copies,
 *               GEMMs), exec_module.c (LOAD, UNLOAD), exec_globals.c
 *               (GLOBALS), exec_mem.c (ALLOC, FREE, MEMINFO), exec_seg.c
 *               (SEG_MAP, SEG_UNMAP), exec_streams.c (STREAMS_CLOSE),
 *               exec_blas.c (BLAS). A handler calls services only, never
 *               another handler nor the dispatcher.
 *   services    what several handlers share, each behind its header:
 *               reply.h (answers on the channel, a lost context),
 *               evpool.h (the event pool), inflight.h (work in flight
 *               and the completion thread), reclaim.h (what sessions give back,
 *               gated on their work), streams.h, pinned.h, modtab.h (the
 *               loaded modules), globals.h, gemm.h (cuBLAS), lane.h, submit.h,
 *               orphan.h (waiting for a new front),
 * and driver.h, blas.h (the libraries). A service never calls a handler or the
 * dispatcher. inflight.c and reclaim.c call each other: the completion thread
 * runs the reclaim queues, and a queued operation wakes it (and an unmap
 * waits for the work in flight); the events both use are evpool.c's.
 * tests/layout_check.sh checks the two "never" rules on the sources.
 *
 * Threads, and what each may wait for (the figures that decided this are in
 * bench/bench_threads.c's commit):
 *   - the serving thread (main): reads the channel, dispatches, and runs
 *     the handlers that wait for nothing a session started: allocations,
 *     stream-ordered frees, stream destruction, and the work that the
 *     submission threads do not take (GEMMs, reads, segment copies),
 *     each once the submission threads are quiet (submit.h).
 *   - the submission threads (submit.c): each runs the sessions' WORK of
 *     the streams given to it (route.h: launches, memsets, writes, device
 *     copies), with launch groups of its own.
 *   - the completion thread (inflight.c): polls the events of work in
 *     flight and answers each as it completes; runs the reclaim queues.
 *   - lanes (lane.h): "load" runs module loads (PTX through cuLink, which,
 *     unlike cuModuleLoadData's JIT, holds up no launch), globals and
 *     cuBLAS loading; "host" registers segments; "reclaim" runs what waits
 *     for the device: unloads, and unregistering segments once the device
 *     is idle.
 */
#ifndef CUMOD_EXEC_H
#define CUMOD_EXEC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/channel.h"
#include "driver.h"
#include "executor.h"
#include "lane.h"

/* One loaded module generation: its CUmodule and every function, resolved
 * at load (cuModuleGetFunction, which also forces lazy loading). */
typedef struct cumod_exec_module {
    uint64_t handle;
    CUmodule mod;
    uint32_t nfunc;
    CUfunction *funcs;
    uint32_t *nparams;    /* per function */
    uint32_t **param_off; /* per function, nparams offsets */
    /* Per function, the settings made so far: a launch that needs more
     * dynamic shared memory, or another carveout, sets the attribute just
     * before it, under attr_mtx (several threads launch). */
    int32_t *dyn_max;     /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE */
    int32_t *carveout;    /* PREFERRED_SHARED_MEMORY_CARVEOUT; -2 unset */
    uint8_t *nonportable; /* NON_PORTABLE_CLUSTER_SIZE_ALLOWED set */
    char name[132];
    uint64_t generation;
    /* Direct launches of it in flight (direct.c): its unload waits for
     * them. */
    _Atomic uint32_t direct;
} cumod_exec_module;

typedef struct cumod_exec {
    const cumod_executor_cfg *cfg;
    cumod_driver drv;
    CUdevice dev;
    CUcontext ctx; /* the retained primary context, or NULL */
    int chan;
    /* The completion ring (chanring.h) beside the socket, or NULL: every
     * answer without a descriptor goes there, under back_mtx (answers
     * come from the submission thread, the completion thread and the
     * lanes). reply.h's cumod__exec_send picks the way. */
    struct cumod_chanring *_Atomic back;
    pthread_mutex_t back_mtx;
    /* The front said CUMOD_CHAN_STOP: its channel's close is a stop, not
     * its death (orphan.h). */
    int stop_told;
    uint64_t seq_max; /* the largest command seq read (orphan.h) */
    /* The sessions' ledger the front handed (CUMOD_CHAN_LEDGER), held so
     * that it outlives the front; -1 when none. Serving thread only. */
    int ledger_fd;
    /* Loaded modules by slot: handle = tag << 32 | slot, so a stale handle
     * (an unloaded slot reused) never matches. The load and reclaim lanes
     * change the table while the submission thread looks up; mods_mtx
     * guards the table (a leaf lock, held for no driver call). A module is
     * unloaded only after the last launch using it completed (the front
     * sees to that), so a looked-up module stays valid for the launch. */
    pthread_mutex_t mods_mtx;
    /* Held while a launch sets its function's attributes (exec_work.c):
     * several submission threads launch. A leaf. */
    pthread_mutex_t attr_mtx;
    cumod_exec_module **mods;
    uint32_t nmods;
    uint32_t next_tag;
    /* At an adoption, next_tag then: modules of tags up to it are the old
     * front's (CUMOD_CHAN_FORGET unloads them); 0 when never adopted. */
    uint32_t adopt_tag;
    struct cumod_exec_evpool *evpool;     /* evpool.c */
    struct cumod_exec_inflight *inflight; /* inflight.c */
    struct cumod_exec_work *work;         /* the WORK handler's own */
    struct cumod_submit *submit;          /* submit.h; NULL: none */
    struct cumod_exec_streams *streams;   /* streams.c */
    struct cumod_exec_reclaim *reclaim;   /* reclaim.c */
    struct cumod_exec_pinned *pinned;     /* pinned.c */
    struct cumod_direct *direct;          /* direct.c; NULL: none */
    cumod_lane *load_lane, *host_lane, *reclaim_lane; /* executor.c's */
    /* The stream-ordered allocator (exec_mem.c): allocations and frees on
     * a private stream that holds nothing else; a free is issued once the
     * work that may use the memory has completed (reclaim.c). pools is 0
     * where the device has no memory pools: cuMemAlloc then. */
    int pools;
    CUstream alloc_stream;
    uint32_t multiprocessors; /* of the device, for cooperative launches */
    /* cuBLAS (gemm.c): NULL until the load lane has made its handle,
     * then read by the serving thread. */
    _Atomic(struct cumod_exec_blas *) blas;
} cumod_exec;

#endif
