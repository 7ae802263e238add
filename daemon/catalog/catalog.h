/* SPDX-License-Identifier: MIT */
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
 *
 * The catalog reaches the executor only through its ops (a call and a
 * readiness test), so that it can be tested against a fake executor; it
 * never answers a request itself: requests that must wait for a module
 * park a waiter whose callback hears the outcome.
 */
#ifndef CUMOD_CATALOG_H
#define CUMOD_CATALOG_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/channel.h"
#include "common/config.h"
#include "data/kdesc.h"
#include "cumod.pb-c.h"
#include "common/list.h"
#include "common/status.h"

typedef struct cumod_catalog cumod_catalog;
typedef struct cumod_module cumod_module;
typedef struct cumod_gen cumod_gen;

/* cumod_kernel, one kernel of a loaded generation: data/kdesc.h (the
 * executor checks direct launches against copies of it). */

/* A global (__device__, __constant__) of a loaded generation. */
typedef struct cumod_gen_global {
    char *name;
    uint64_t dptr;
    uint64_t size;
} cumod_gen_global;

/* A change to a module, as the catalog reports it (ops.event). */
typedef struct cumod_catalog_event {
    Cumod__EventKind kind;
    const char *module;
    uint64_t generation, old_generation;
    const char *sha256, *old_sha256; /* hex, or NULL */
    const char *detail;              /* the error, the reason, or NULL */
} cumod_catalog_event;

/* How the catalog reaches the executor: call sends a command (LOAD,
 * UNLOAD) and calls cb once with the reply (a NULL payload when the
 * executor went away first); it returns an error, and never calls cb, when
 * the command could not be sent. ready says whether an executor serves. */
typedef struct cumod_catalog_ops {
    cumod_err (*call)(void *arg, uint32_t op, const void *payload, size_t len,
                      int fd, cumod_chan_reply_cb cb, void *cbarg);
    int (*ready)(void *arg);
    /* The first scan is done: every module of the folder is known and its
     * image read and checked (may be NULL). Once. */
    void (*scanned)(void *arg);
    /* Something happened to a module (may be NULL): the change events of
     * `cumodctl watch`. The strings live during the call only. */
    void (*event)(void *arg, const cumod_catalog_event *ev);
    /* Why no executor serves now, for a load that cannot start (may be
     * NULL: "the CUDA executor is restarting: retry"). */
    void (*unready)(void *arg, char *msg, size_t len);
    /* A load in the executor (what 0) or a NAME.cu compile (what 1: the
     * worker ran, compiling or taking the compile cache's image, and
     * succeeded or failed) took ns (may be NULL). */
    void (*timed)(void *arg, int what, uint64_t ns);
    void *arg;
} cumod_catalog_ops;

/* What a parked request waits for. */
typedef enum cumod_wait_op {
    CUMOD_WAIT_LOAD = 1, /* resident (load, pin) */
    CUMOD_WAIT_RELOAD,   /* the file read again, and loaded where resident */
    CUMOD_WAIT_LAUNCH,   /* resident, for a launch to resolve again */
} cumod_wait_op;

typedef struct cumod_waiter cumod_waiter;

/* Called once, on the loop thread, when the module's operation settles,
 * the module goes, or the catalog stops. st->code CUMOD_OK: what op asked
 * for holds; otherwise st says why not. m is valid during the call only. */
typedef void (*cumod_waiter_cb)(cumod_waiter *w, cumod_module *m,
                                const cumod_status *st);

/* Embedded in whatever waits (a request's state); the catalog links it
 * while it waits. */
struct cumod_waiter {
    cumod_list_node link;
    cumod_wait_op op;
    cumod_waiter_cb cb;
};

/* Starts the catalog: watches cfg->kernel_dir (the first scan waits for
 * cumod__catalog_exec_ready). On failure writes a sentence into st. */
cumod_err cumod__catalog_open(uv_loop_t *loop, const cumod_config *cfg,
                              const cumod_catalog_ops *ops, cumod_catalog **out,
                              cumod_status *st);

/* Stops watching and unloads nothing (the executor is going away); frees
 * the catalog once its handles are closed and its reads have returned.
 * Every parked waiter hears CUMOD_ESHUTDOWN. Accepts NULL. */
void cumod__catalog_stop(cumod_catalog *cat);

/* An executor came up (again) on a device of this SM: the first time, scan
 * the folder; every time, load what is pinned or waited for. */
void cumod__catalog_exec_ready(cumod_catalog *cat, unsigned sm_major,
                               unsigned sm_minor);

/* Reads the folder whole again (SIGHUP), as after an inotify overflow. */
void cumod__catalog_rescan(cumod_catalog *cat);

/* The configuration's pins changed (SIGHUP): cfg->pins now holds the new
 * list, old the previous one. Modules no longer listed are unpinned (and
 * may be evicted), new ones pinned and loaded; the idle timer follows
 * cfg->idle_unload_s. */
void cumod__catalog_pins_changed(cumod_catalog *cat, const char *const *old,
                                 int nold);

/* The JIT or NVRTC options of the configuration changed (SIGHUP): every
 * module is read again at the next rescan, and one whose options now
 * differ from its generation's gets a new generation. */
void cumod__catalog_options_changed(cumod_catalog *cat);

/* Loads m with a load's own JIT options (cumodctl load --jit-*), merged
 * into the ones earlier loads gave (a field of -2 clears it): like
 * cumod__catalog_load, but a resident module whose options change this
 * way gets a new generation. */
int cumod__catalog_load_jit(cumod_catalog *cat, cumod_module *m,
                            const cumod_jit_opts *jit, cumod_waiter *w);

/* The executor died: every generation is gone with its context. explained:
 * its death has a known cause (a fault it reported, a hang, a kill, work
 * in flight); otherwise a module that was the only one loading when it
 * died is suspected, and quarantined when it happens twice. */
void cumod__catalog_exec_lost(cumod_catalog *cat, int explained);

/* Counters for Hello. */
void cumod__catalog_stats(const cumod_catalog *cat, uint32_t *modules,
                          uint32_t *resident, uint64_t *resident_bytes,
                          int *degraded);

/* NAME.cu compiles since start: compiled, taken from the cache, failed. */
void cumod__catalog_compile_stats(const cumod_catalog *cat, uint64_t *compiled,
                                  uint64_t *cached, uint64_t *failed);

/* --- Requests (catalog_requests.c) ------------------------------------ */

/* The module a request names: CUMOD_EINVAL for a name that is not one,
 * CUMOD_ENOENT for no such module; NULL then, with st set. */
cumod_module *cumod__catalog_find(cumod_catalog *cat, const char *name,
                                  cumod_status *st);

/* Makes m resident (load) or pins it and makes it resident (pin): 0 when
 * it is resident already (nothing parked), 1 when w was parked (op
 * CUMOD_WAIT_LOAD) and hears the outcome. */
int cumod__catalog_load(cumod_catalog *cat, cumod_module *m, cumod_waiter *w);
int cumod__catalog_pin(cumod_catalog *cat, cumod_module *m, cumod_waiter *w);
void cumod__catalog_unpin(cumod_module *m);

/* Takes m out of service (unloaded after its launches): writes what
 * happened into note; CUMOD_EPERM when pinned, CUMOD_EBUSY while loading,
 * with st set. */
cumod_err cumod__catalog_unload(cumod_catalog *cat, cumod_module *m, char *note,
                                size_t notelen, cumod_status *st);

/* Reads m's file again (and loads it where resident, or where its last
 * load failed); always parks w (op CUMOD_WAIT_RELOAD). */
void cumod__catalog_reload(cumod_catalog *cat, cumod_module *m,
                           cumod_waiter *w);

/* A launch's module: READY with *out the generation (the current one, or
 * the one asked for when generation is not 0); PARKED with w waiting for
 * a lazy load (op CUMOD_WAIT_LAUNCH: resolve again when it hears
 * CUMOD_OK); REFUSED with st saying why (no such module, generation not
 * loaded). Marks the module used. */
typedef enum cumod_resolve {
    CUMOD_RESOLVE_READY,
    CUMOD_RESOLVE_PARKED,
    CUMOD_RESOLVE_REFUSED,
} cumod_resolve;
cumod_resolve cumod__catalog_resolve(cumod_catalog *cat, const char *module,
                                     uint64_t generation, cumod_waiter *w,
                                     cumod_gen **out, cumod_status *st);

/* A launch of g was the sole culprit of a fault of the context, or ran
 * past its deadline (hang): counts against g's bytes, and quarantines
 * them at --quarantine-after faults, or at once for a hang (reason says
 * what happened, for ls and the launches refused). 1 when g's bytes are
 * quarantined now. */
int cumod__catalog_blame(cumod_catalog *cat, cumod_gen *g, const char *reason,
                         int hang);

/* Lifts m's quarantine (the file's bytes are read and serve again where
 * m is resident or pinned); writes what happened into note. */
cumod_err cumod__catalog_unquarantine(cumod_catalog *cat, cumod_module *m,
                                      char *note, size_t notelen);

/* For a fault's report: g's module name, bytes and the kernels' names. */
const char *cumod__gen_module(const cumod_gen *g);
const char *cumod__gen_sha256(const cumod_gen *g);

/* The kernel fn of g; NULL with st naming the kernels g has. */
const cumod_kernel *cumod__gen_kernel(const cumod_gen *g, const char *fn,
                                      cumod_status *st);
uint64_t cumod__gen_number(const cumod_gen *g);
/* g's kernels, by position (the direct launches' snapshot: front/
 * direct.c). */
uint32_t cumod__gen_kernel_count(const cumod_gen *g);
const cumod_kernel *cumod__gen_kernel_at(const cumod_gen *g, uint32_t i);
/* Module name was used now (launches the front did not see: direct ones,
 * counted when the executor reports them): its idle clock starts again. */
void cumod__catalog_touch(cumod_catalog *cat, const char *name);
/* The carveout KernelSettings gave kernel fn of m (g's module); -1: none. */
int32_t cumod__gen_kernel_carveout(const cumod_gen *g, const char *fn);
int32_t cumod__module_kernel_carveout(const cumod_module *m, const char *fn);
/* The symbol of the kernel fn names in m (fn itself, or a C++ kernel's
 * display name, "axpy<float>"); fn when no kernel or several match. The
 * string lives as long as m's generation or description. */
const char *cumod__module_kernel_name(const cumod_module *m, const char *fn);

/* Sets (carveout 0-100) or clears (-1) kernel fn's carveout. CUMOD_ENOMEM. */
cumod_err cumod__module_set_carveout(cumod_module *m, const char *fn,
                                     int32_t carveout);

/* Keeps a write of len bytes at offset of global name (size bytes) of m,
 * for every later generation of m. CUMOD_ELIMIT past what is kept per
 * module (16 MiB). */
cumod_err cumod__globals_keep(cumod_module *m, const char *name, uint64_t size,
                              uint64_t offset, const void *data, uint64_t len,
                              cumod_status *st);

/* The global name of g, or NULL. */
const cumod_gen_global *cumod__gen_global(const cumod_gen *g, const char *name);
uint64_t cumod__gen_handle(const cumod_gen *g); /* the executor's */

/* A launch in flight holds its generation: a retired generation is
 * unloaded once its last hold is released. */
void cumod__gen_hold(cumod_gen *g);
void cumod__gen_release(cumod_gen *g);

/* --- Views for ls and show (catalog_info.c) --------------------------- */

const char *cumod__module_name(const cumod_module *m);
uint64_t cumod__module_generation(const cumod_module *m);
int cumod__module_resident(const cumod_module *m);

/* A module's ModuleInfo, with the strings it points at. */
typedef struct cumod_module_view {
    Cumod__ModuleInfo mi;
    char *images[4]; /* CUMOD_IMAGE_KINDS */
    char **kernels;
} cumod_module_view;

void cumod__module_view(const cumod_module *m, cumod_module_view *v);
void cumod__module_view_fini(cumod_module_view *v);

/* Every module's view, sorted by name. CUMOD_ENOMEM. */
cumod_err cumod__catalog_views(const cumod_catalog *cat,
                               cumod_module_view **out, size_t *n);
void cumod__catalog_views_free(cumod_module_view *v, size_t n);

/* The ShowModuleReply of m (its view, JIT log, kernels and parameter
 * layouts), pointing into *show until cumod__module_show_fini. */
typedef struct cumod_module_show {
    Cumod__ShowModuleReply reply;
    cumod_module_view view;
    Cumod__KernelInfo *ks, **kp;
    Cumod__ParamInfo *ps, **pp;
    Cumod__Dim3 *cl;
    Cumod__GlobalInfo *gs, **gp;
} cumod_module_show;
cumod_err cumod__module_show(const cumod_module *m, cumod_module_show *show);
void cumod__module_show_fini(cumod_module_show *show);

#endif

/* --- Replicas (front/units/replica.c)
 * ------------------------------------------- Where several executors serve
 * (fault domains, devices), the catalog's own executor loads each generation
 * first; another executor loads the same bytes again when its sessions use it
 * (a replica). A replica holds its generation: not unloaded nor freed while
 * held, though it may retire. */
void cumod__gen_replica_hold(cumod_gen *g);
void cumod__gen_replica_release(cumod_gen *g);
/* The current generation of module, without using it (no load, no use
 * recorded); NULL when not resident or quarantined. */
cumod_gen *cumod__catalog_current(cumod_catalog *cat, const char *module);
/* 1 when g takes new work (its module's current generation). */
int cumod__gen_is_current(const cumod_gen *g);
/* 1 when g's module is pinned. */
int cumod__gen_pinned(const cumod_gen *g);
/* The LOAD command that loads g's bytes again (with the writes kept for
 * its globals): *payload malloc'ed, *fd g's image (the caller does not
 * close it). CUMOD_ENOENT when g kept no image, CUMOD_ENOMEM. */
cumod_err cumod__gen_load_msg(const cumod_gen *g, char **payload, size_t *len,
                              int *fd);
/* A replica's LOAD reply (status and payload as the channel gave them):
 * a generation of its own (handle, kernels, globals; no module), freed
 * with cumod__gen_replica_free; NULL with st saying why. */
cumod_gen *cumod__gen_replica_parse(const cumod_gen *like, int status,
                                    const void *payload, size_t len,
                                    cumod_status *st);
void cumod__gen_replica_free(cumod_gen *g);
