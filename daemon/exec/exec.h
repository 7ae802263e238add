/*
 * What the executor's files share (private to the executor process; never
 * includes front or catalog state).
 *
 * Threads, and what each may wait for (the figures that decided this are in
 * bench/bench_threads.c's commit):
 *   - the submission thread (main): reads the channel; enqueues every
 *     session's work, allocations, stream-ordered frees and stream
 *     destruction; waits for nothing a session started.
 *   - the completion thread (exec_work.c): polls the events of work in
 *     flight and answers each as it completes.
 *   - lanes (lane.h): "load" runs module loads (PTX through cuLink, which,
 *     unlike cuModuleLoadData's JIT, holds up no launch); "host" registers
 *     segments; "reclaim" runs what waits for the device: unloads, and
 *     unregistering segments once the device is idle.
 */
#ifndef CUMOD_EXEC_H
#define CUMOD_EXEC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "channel.h"
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
    /* Per function, the settings made so far (the submission thread's
     * alone once the module is in the table: a launch that needs more
     * dynamic shared memory, or another carveout, sets the attribute just
     * before it, on the thread that makes every launch, so two launches of
     * one function never race over it). */
    int32_t *dyn_max;     /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE */
    int32_t *carveout;    /* PREFERRED_SHARED_MEMORY_CARVEOUT; -2 unset */
    uint8_t *nonportable; /* NON_PORTABLE_CLUSTER_SIZE_ALLOWED set */
    char name[132];
    uint64_t generation;
} cumod_exec_module;

typedef struct cumod_exec {
    const cumod_executor_cfg *cfg;
    cumod_driver drv;
    CUdevice dev;
    CUcontext ctx; /* the retained primary context, or NULL */
    int chan;
    /* Loaded modules by slot: handle = tag << 32 | slot, so a stale handle
     * (an unloaded slot reused) never matches. The load and reclaim lanes
     * change the table while the submission thread looks up; mods_mtx
     * guards the table (a leaf lock, held for no driver call). A module is
     * unloaded only after the last launch using it completed (the front
     * sees to that), so a looked-up module stays valid for the launch. */
    pthread_mutex_t mods_mtx;
    cumod_exec_module **mods;
    uint32_t nmods;
    uint32_t next_tag;
    struct cumod_exec_work *work;       /* completions (exec_work.c) */
    struct cumod_exec_streams *streams; /* streams.c */
    struct cumod_exec_reclaim *reclaim; /* reclaim.c */
    struct cumod_exec_pinned *pinned;   /* pinned.c */
    cumod_lane *load_lane, *host_lane, *reclaim_lane;
    /* The stream-ordered allocator (exec_mem.c): allocations and frees on
     * a private stream that holds nothing else; a free is issued once the
     * work that may use the memory has completed (reclaim.c). pools is 0
     * where the device has no memory pools: cuMemAlloc then. */
    int pools;
    CUstream alloc_stream;
    uint32_t multiprocessors; /* of the device, for cooperative launches */
    /* cuBLAS (exec_blas.c): NULL until the load lane has made its handle,
     * then read by the submission thread. */
    _Atomic(struct cumod_exec_blas *) blas;
} cumod_exec;

/* --- exec_module.c --------------------------------------------------------
 * Serve CUMOD_CHAN_LOAD (on the load lane; fd is the image's memfd) and
 * CUMOD_CHAN_UNLOAD (on the reclaim lane: cuModuleUnload waits for the
 * device). Reply on the channel. 0 or -errno of the channel. */
/* A growing byte buffer (a LOAD's reply); oom set when it could not grow
 * (then nothing more is put). */
typedef struct cumod_exec_table {
    char *buf;
    size_t len, cap;
    int oom;
} cumod_exec_table;
void cumod__exec_table_put(cumod_exec_table *t, const void *p, size_t n);

/* Looks up the globals of a globals spec (channel.h) in mod and applies
 * their kept writes, synchronously; appends the globals table of a LOAD's
 * reply to table (when not NULL). CUMOD_OK, or an error with a sentence
 * in msg (a global with kept writes missing or at another size). Load
 * lane. */
int cumod__exec_globals_apply(cumod_exec *ex, CUmodule mod, const void *spec,
                              size_t len, const char *module, void *table,
                              char *msg, size_t msglen);

/* CUMOD_CHAN_GLOBALS: the kept writes again, to a loaded generation. */
int cumod__exec_on_globals(cumod_exec *ex, const cumod_chan_hdr *hdr,
                           const void *payload, size_t len, int fd, void *aux);

int cumod__exec_on_load(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        const void *payload, size_t len, int fd, void *aux);
int cumod__exec_on_unload(cumod_exec *ex, const cumod_chan_hdr *hdr,
                          const void *payload, size_t len, int fd, void *aux);

/* The loaded module of handle, or NULL when stale or unknown. Any thread. */
cumod_exec_module *cumod__exec_module(cumod_exec *ex, uint64_t handle);

/* Unloads everything (at exit, the lanes stopped). */
void cumod__exec_modules_fini(cumod_exec *ex);

/* --- exec_work.c -----------------------------------------------------------
 */

/* Starts the completion thread and the stream table. CUMOD_ENOMEM. */
cumod_err cumod__exec_work_start(cumod_exec *ex);

/* Stops the completion thread, destroys the streams. Accepts a
 * never-started executor. */
void cumod__exec_work_stop(cumod_exec *ex);

/* Serves CUMOD_CHAN_WORK: the payload's items are enqueued on their
 * stream and an event recorded for the completion thread. Submission
 * thread. 0 or -errno of the channel. */
int cumod__exec_on_work(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        const void *payload, size_t len);

/* Records the events of WORKs held back to be answered together
 * (CUMOD_CHAN_WORK_F_GROUP): when nothing more is to be read, and before
 * any command other than WORK. Submission thread. 0 or -errno of the
 * channel. */
int cumod__exec_work_flush(cumod_exec *ex);

/* Records the event of every group older than GROUP_AGE_NS (exec_work.c):
 * the submission thread calls it between commands, so that a group does
 * not wait on other clients' commands. 0 or -errno of the channel. */
int cumod__exec_work_age(cumod_exec *ex);

/* Wakes the completion thread: something new to watch (work, or a
 * reclaim operation). Any thread. */
void cumod__exec_work_kick(cumod_exec *ex);

/* An event from the pool (or a new one), and back. Any thread. */
CUresult cumod__exec_event_get(cumod_exec *ex, CUevent *out);
void cumod__exec_event_put(cumod_exec *ex, CUevent ev);

/* Waits until every piece of work in flight now has completed (work
 * submitted meanwhile does not count), for what must not run while
 * kernels run: cuModuleLoadData and cuMemHostUnregister wait for the
 * device and hold every launch of the context until running kernels end
 * (199 ms behind a 200 ms kernel, bench/bench_threads.c), so they go
 * when what was running has ended and only young work is in flight. Logs
 * (once, naming what) after 1 s. Returns the milliseconds waited. A lane;
 * never the submission or completion thread. */
int cumod__exec_wait_quiet(cumod_exec *ex, const char *what);

/* Answers seq with a DONE packet (status, failed item, message, data). */
int cumod__exec_send_done(cumod_exec *ex, uint64_t seq, int status, int failed,
                          const char *msg, const void *data, uint64_t dlen);
/* The same with the WORK's device time (cumod_chan_done.gpu_ns). */
int cumod__exec_send_done_ns(cumod_exec *ex, uint64_t seq, int status,
                             int failed, const char *msg, const void *data,
                             uint64_t dlen, uint64_t gpu_ns);

/* The context is lost (r is on CUMOD_CU_CONTEXT_LOST): logs it and ends
 * the process, so that the front starts a new executor. */
void cumod__exec_context_lost(cumod_exec *ex, CUresult r)
    __attribute__((noreturn));

/* --- streams.c -------------------------------------------------------------
 * Streams by key, from a pool made at start (cuStreamCreate can wait for
 * the device and hold every launch meanwhile). */
cumod_err cumod__exec_streams_start(cumod_exec *ex, size_t n);
void cumod__exec_streams_stop(cumod_exec *ex);
/* The stream of key, taken from the pool on first use (create != 0), or
 * NULL when there is none (create == 0) or it cannot be made (*r says
 * why). Submission thread. */
CUstream cumod__exec_stream(cumod_exec *ex, uint64_t key, int create,
                            CUresult *r);
/* Takes key's stream out of use (NULL if it has none); give it back with
 * cumod__exec_stream_recycle once its work has completed. Submission
 * thread. */
CUstream cumod__exec_stream_take(cumod_exec *ex, uint64_t key);
/* Back to the pool (its work has completed). Any thread. */
void cumod__exec_stream_recycle(cumod_exec *ex, CUstream s);

/* --- reclaim.c ---------------------------------------------------------------
 * A session's reclaim queue (named by its reclaim key): operations run in
 * order, each once its events have completed, on the completion thread. */
typedef enum cumod_reclaim_kind {
    CUMOD_RECLAIM_FREE = 1, /* a: the device pointer to free */
    CUMOD_RECLAIM_STREAM,   /* the stream goes back to the pool */
    CUMOD_RECLAIM_UNMAP,    /* a: host address, b: size; hdr answered */
    CUMOD_RECLAIM_END,      /* the session is gone: the queue goes too */
} cumod_reclaim_kind;
cumod_err cumod__exec_reclaim_start(cumod_exec *ex);
void cumod__exec_reclaim_stop(cumod_exec *ex);
/* Queues an operation gated by events nev events (taken: they go back to
 * the event pool after). Submission thread. CUMOD_ENOMEM. */
cumod_err cumod__exec_reclaim_push(cumod_exec *ex, uint64_t key,
                                   cumod_reclaim_kind kind, uint64_t a,
                                   uint64_t b, CUstream stream,
                                   const CUevent *ev, uint32_t nev,
                                   const cumod_chan_hdr *hdr);
/* Runs every operation whose time has come; 1 if it ran any. Completion
 * thread. */
int cumod__exec_reclaim_poll(cumod_exec *ex);
/* 1 while operations wait. Any thread. */
int cumod__exec_reclaim_pending(cumod_exec *ex);

/* --- pinned.c ----------------------------------------------------------------
 * Pinned buffers for inline reads, made at start. */
cumod_err cumod__exec_pinned_start(cumod_exec *ex);
void cumod__exec_pinned_stop(cumod_exec *ex);
/* A pinned buffer of at least len bytes, or NULL (then read into pageable
 * memory). Any thread. */
void *cumod__exec_pinned_get(cumod_exec *ex, size_t len);
/* Gives b back; 0 when b is not a pinned buffer (the caller frees it). */
int cumod__exec_pinned_put(cumod_exec *ex, void *b);

/* --- exec_mem.c ------------------------------------------------------------
 * Device memory and segments: ALLOC, FREE, STREAMS_CLOSE (submission
 * thread), SEG_MAP (posted to the host lane), SEG_UNMAP (its place in the
 * reclaim stream taken on the submission thread, the rest on the reclaim
 * lane). 0 or -errno of the channel. */
cumod_err cumod__exec_mem_start(cumod_exec *ex);
void cumod__exec_mem_stop(cumod_exec *ex);
int cumod__exec_on_mem(cumod_exec *ex, const cumod_chan_hdr *hdr,
                       const void *payload, size_t len, int fd);
/* Unregisters and unmaps a segment on the reclaim lane, when the device is
 * idle, then answers hdr. Any thread. */
void cumod__exec_unmap_later(cumod_exec *ex, const cumod_chan_hdr *hdr,
                             uint64_t host, uint64_t size);

/* --- exec_blas.c -----------------------------------------------------------
 * cuBLAS for GEMMs on the sessions' streams. */
/* CUMOD_CHAN_BLAS, on the load lane: loads cuBLAS and makes the handle
 * (once per executor); answers on the channel. 0 or -errno of it. */
int cumod__exec_on_blas(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        const void *payload, size_t len, int fd, void *aux);
/* Enqueues a CUMOD_WORK_GEMM item (extra: len bytes, a cumod_chan_gemm)
 * on s. CUMOD_OK, or a cumod error with the whole sentence in msg (the
 * cuBLAS status's name, what the GEMM was); a CUDA error that ends the
 * context goes to *lost too (the caller answers, then exits on it).
 * Submission thread. */
cumod_err cumod__exec_gemm(cumod_exec *ex, const void *extra, size_t len,
                           CUstream s, char *msg, size_t msglen,
                           CUresult *lost);
/* Stream s is being closed: its workspace is freed after its work.
 * Submission thread. */
void cumod__exec_blas_stream_closed(cumod_exec *ex, CUstream s);
/* Destroys the handle (at exit, the lanes and work stopped). */
void cumod__exec_blas_stop(cumod_exec *ex);

#endif
