/* SPDX-License-Identifier: MIT */
/*
 * fakecuda internals, shared by the library's files. Include this first in
 * every file of the library: it includes cuda.h with default visibility, so
 * that the cu* functions defined against its prototypes are exported while
 * everything else stays hidden (-fvisibility=hidden).
 */
#ifndef FAKE_H
#define FAKE_H

#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fakecuda.h"

enum {
    FAKE_MAX_DEVICES = 16,
    FAKE_MAX_FAULTS = 32,
    FAKE_MAX_RECORDS = 1 << 20,
    FAKE_MAX_SLOTS = 0xffff,       /* live modules, streams, events each */
    FAKE_MAX_KERNELS = 0xfffe,     /* kernels per module */
    FAKE_MAX_PARAMS = 4096,        /* parameters per kernel */
    FAKE_STATIC_SHMEM = 48 * 1024, /* shared memory a block gets by default */
    FAKE_DEFAULT_SM = 90,
};

/* ---- images: image.c, cubin.c, fatbin.c, ptx.c --------------------------- */

typedef struct fake_param {
    uint32_t offset;
    uint32_t size;
} fake_param;

typedef struct fake_kernel {
    char *name;
    fake_param *params;
    uint32_t nparams;
    uint32_t param_bytes; /* the packed buffer's size */
    int num_regs;
    int shared_bytes; /* static shared memory */
    int local_bytes;
    int max_threads;
    /* Set by cuFuncSetAttribute (launch_ex.c); made at parse time: 0
     * dyn_max means the default, 48 KiB less the static. */
    int dyn_max;
    int carveout; /* percent + 1; 0: none */
    int nonportable_cluster;
    int cluster[3];       /* required cluster shape; 0s: none */
    int cluster_explicit; /* must be launched as clusters */
} fake_kernel;

/* A __device__ or __constant__ variable of a cubin (globals.c). */
typedef struct fake_global {
    char *name;
    uint64_t size;
    uint8_t *init; /* its initial bytes, or NULL (zeros) */
    int constant;
} fake_global;

typedef enum fake_image_kind {
    FAKE_IMAGE_CUBIN = 1,
    FAKE_IMAGE_PTX,
    FAKE_IMAGE_FATBIN_CUBIN,
    FAKE_IMAGE_FATBIN_PTX,
} fake_image_kind;

typedef struct fake_image {
    fake_image_kind kind;
    int sm;          /* the SASS's SM (a PTX image: the device's) */
    int ptx_version; /* the virtual architecture, e.g. 90 */
    int const_bytes; /* the module's __constant__ memory */
    fake_kernel *kernels;
    uint32_t nkernels;
    fake_global *globals;
    uint32_t nglobals;
} fake_image;

/* The JIT log buffers of cuModuleLoadDataEx: [0] info, [1] error. */
typedef struct fake_jitlog {
    char *buf[2];
    size_t cap[2];
    size_t len[2];
    int verbose;
    /* The compiler options given (value + 1; 0: not given):
     * CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_MAX_REGISTERS,
     * CU_JIT_GENERATE_LINE_INFO, CU_JIT_FAST_COMPILE. The fake reports
     * them in the info log and caps a PTX kernel's registers. */
    int jit[4];
} fake_jitlog;

/* "fakecuda: JIT options: CU_JIT_OPTIMIZATION_LEVEL=3 ..." into the info
 * log, when any was given. */
void fake_jit_report(fake_jitlog *log);

void fake_jitlog_printf(fake_jitlog *log, int error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The error log line of an image in no known format. */
extern const char fake_unknown_format_log[];

/* Loads an image from a caller's pointer of unknown length: finds its extent
 * from its headers, copies it with reads that cannot fault, and parses the
 * copy. Returns the driver's code; fills *img on success. */
CUresult fake_image_load(const void *image, int sm, fake_image *img,
                         fake_jitlog *log);

/* Copies a NUL-terminated text of at most max bytes (0: any length) from
 * a caller's pointer, with reads that cannot fault: unreadable memory ends
 * it. *out is NUL-terminated; the caller frees it. */
CUresult fake_text_copy(const void *image, size_t max, char **out, size_t *len);

/* The parsers: p[0..n) is the whole image, every read bound-checked. */
CUresult fake_cubin_parse(const uint8_t *p, size_t n, int sm, fake_image *img,
                          fake_jitlog *log);
CUresult fake_fatbin_parse(const uint8_t *p, size_t n, int sm, fake_image *img,
                           fake_jitlog *log);
CUresult fake_ptx_parse(const char *p, size_t n, int sm, fake_image *img,
                        fake_jitlog *log);

/* The SM and arch-specific flag a cubin's header claims, or -1 if p[0..n) is
 * no CUDA ELF header. */
int fake_cubin_sm(const uint8_t *p, size_t n, int *arch_specific);

/* .nv.info records (nvinfo.c). A kernel's section: its parameters, buffer
 * size, launch bounds and cluster shape into *k. The module's: register counts
 * and frame sizes into regs[] and frame[] (nsyms each) by symbol index. Both
 * return 0, or -1 if the records are malformed. */
int fake_nvinfo_kernel(const uint8_t *d, size_t len, fake_kernel *k);
int fake_nvinfo_module(const uint8_t *d, size_t len, uint32_t nsyms, int *regs,
                       int *frame);
/* Whether a byte-valued record attr == value is there. */
int fake_nvinfo_has(const uint8_t *d, size_t len, uint8_t attr, uint8_t value);

/* Whether an image built for image_sm runs on a device_sm device. */
int fake_sm_compatible(int image_sm, int arch_specific, int device_sm);

/* Appends a kernel named name[0..len); NULL when out of memory or limits. */
fake_kernel *fake_image_add_kernel(fake_image *img, const char *name,
                                   size_t len);
void fake_image_fini(fake_image *img);

/* ---- state: state.c --------------------------------------------------------
 */

/* Handles are never pointers: tag, generation and slot packed in a word, so
 * a stale or forged handle is recognised without dereferencing anything. */
typedef enum fake_tag {
    FAKE_TAG_CTX = 0xc1,
    FAKE_TAG_MODULE = 0xc2,
    FAKE_TAG_FUNC = 0xc3,
    FAKE_TAG_STREAM = 0xc4,
    FAKE_TAG_EVENT = 0xc5,
    FAKE_TAG_POOL = 0xc6,
    FAKE_TAG_LINK = 0xc7,
} fake_tag;

uintptr_t fake_handle(fake_tag tag, uint32_t gen, uint32_t slot, uint32_t sub);
/* Splits a handle; returns 0 if its tag is not `tag`. */
int fake_handle_split(uintptr_t h, fake_tag tag, uint32_t *gen, uint32_t *slot,
                      uint32_t *sub);

typedef struct fake_table {
    void **items;
    uint32_t *gens;
    uint32_t cap;
} fake_table;

typedef struct fake_module {
    fake_image img;
    int dev;
    uint32_t ctx_gen;
    uintptr_t *global_ptr; /* per global, its memory once asked for */
} fake_module;

/* globals.c: adds a global found in an image; frees a module's globals'
 * memory (at unload). */
int fake_image_add_global(fake_image *img, const char *name, uint64_t size,
                          const uint8_t *init, int constant);
struct fake_state;
void fake_module_globals_free(struct fake_state *st, fake_module *mod);

/* A stream's work, in order: a created stream's or a device's legacy
 * stream's (queue.c). It outlives its stream while work is queued on it or
 * anything refers to it: a destroyed stream's work still completes, and an
 * event recorded there still answers. */
typedef struct fake_queue {
    struct fake_queue *prev, *next; /* st->queues: every live queue */
    struct fake_work *head, *tail;  /* pending items, oldest first */
    uint64_t last_seq;              /* of the last item queued */
    unsigned refs;                  /* owners, points and waiters */
    int dev;
    int legacy;   /* a device's legacy (NULL) stream */
    int blocking; /* a created stream that syncs with the legacy stream */
} fake_queue;

/* A point of a queue: complete once every item of q up to seq has
 * completed (or was dropped). q == NULL: nothing to wait for. A point that
 * is kept (an event's, an item's dependency, a waiter's) holds a ref. */
typedef struct fake_point {
    fake_queue *q;
    uint64_t seq;
} fake_point;

/* A set of points a call waits for or asks about, each holding a ref. */
typedef struct fake_points {
    fake_point *p;
    size_t n, cap;
} fake_points;

typedef struct fake_stream {
    int dev;
    unsigned flags;
    fake_queue *q; /* holds a ref */
} fake_stream;

typedef struct fake_event {
    int dev;
    unsigned flags;
    fake_point at; /* where cuEventRecord put it; q NULL if never */
    int held;      /* recorded while CUMOD_FAKE_EVENT_HOLD's file existed */
} fake_event;

typedef struct fake_alloc {
    uintptr_t base;
    size_t size;
    int dev;
    int pool;    /* from cuMemAllocAsync: the device's default pool */
    int freeing; /* a cuMemFreeAsync is queued: no other free may come */
    int module;  /* a module's global: cuMemFree refuses it */
} fake_alloc;

typedef struct fake_hostreg {
    uintptr_t base;
    size_t size;
    unsigned flags;
    int dev;
} fake_hostreg;

typedef enum fake_work_kind {
    FAKE_WORK_LAUNCH = 1,
    FAKE_WORK_COPY,
    FAKE_WORK_FREE, /* cuMemFreeAsync: frees dst when it completes */
    FAKE_WORK_WAIT, /* a cuStreamWaitEvent, or a legacy-stream barrier */
    FAKE_WORK_CALL, /* a library's work on the fake (fakecuda_enqueue) */
} fake_work_kind;

typedef struct fake_work {
    struct fake_work *next;  /* st->work: every pending item, oldest first */
    struct fake_work *qnext; /* its queue's pending items */
    fake_queue *q;
    fake_point *deps; /* other queues' points it waits for, each a ref */
    size_t ndeps;
    fake_work_kind kind;
    uint64_t seq;
    int dev;
    size_t record;   /* index into launches or copies, or SIZE_MAX */
    int fault;       /* a launch that completes with ILLEGAL_ADDRESS */
    char *name;      /* a launch's function, for the log and holds */
    void *dst;       /* a copy; the pointer a free frees */
    const void *src; /* NULL for a memset */
    size_t bytes;
    unsigned char value;
    unsigned char dst_dev, src_dev; /* which side is device memory */
    /* FAKE_WORK_CALL: run(arg) when it completes, drop(arg) when the item
     * goes either way; the device memory it touches. */
    void (*run)(void *arg);
    void (*drop)(void *arg);
    void *arg;
    fakecuda_span *spans;
    size_t nspans;
} fake_work;

/* Names, NUL-separated in one buffer: "a\0b\0". */
typedef struct fake_names {
    char *buf;
    size_t len; /* bytes of buf used */
    size_t n;   /* names */
} fake_names;

/* What holds work and loads (hold.c). */
typedef struct fake_hold {
    int api;           /* fakecuda_hold(1): all work */
    fake_names api_fn; /* fakecuda_hold_functions */
    char *path;        /* CUMOD_FAKE_HOLD */
    /* The hold file as last read: absent, all work, or these functions. */
    int file_exists;
    char *file_text; /* its bytes, to see whether it changed */
    size_t file_len;
    fake_names file_fn;
    int all; /* all work is held now (api, or a file without names) */

    int load_api;     /* fakecuda_hold_loads(1) */
    char *load_path;  /* CUMOD_FAKE_LOAD_HOLD */
    char *copy_path;  /* CUMOD_FAKE_COPY_HOLD */
    char *event_path; /* CUMOD_FAKE_EVENT_HOLD */
} fake_hold;

/* The default memory pool of a device: its attributes (pool.c). */
typedef struct fake_pool {
    int reuse_follow_event_deps;
    int reuse_opportunistic;
    int reuse_internal_deps;
    uint64_t release_threshold;
    uint64_t reserved_high, used_high;
} fake_pool;

/* A cuLinkCreate state (link.c). */
typedef struct fake_link {
    fake_jitlog log; /* cuLinkCreate's log buffers, filled across calls */
    unsigned nopts;
    CUjit_option *opts; /* a copy of cuLinkCreate's options */
    void **vals;        /* the caller's values: log sizes are written back */
    char **texts;       /* the PTX inputs, NUL-terminated */
    size_t *lens;
    uint32_t ntexts;
    unsigned char *image; /* cuLinkComplete's, owned until cuLinkDestroy */
    size_t image_size;
} fake_link;

typedef struct fake_fault {
    fakecuda_fault_kind kind;
    uint64_t at;   /* fires on this call of its kind (0: by name) */
    char *name;    /* a launch fault by function name */
    CUresult code; /* a load fault's code */
} fake_fault;

typedef struct fake_device {
    int ctx_refs;
    uint32_t ctx_gen;   /* of the live primary context */
    size_t used;        /* bytes allocated */
    size_t pool_used;   /* of which from the default pool */
    fake_queue *legacy; /* the legacy stream's queue, made on first use */
    fake_pool pool;
} fake_device;

typedef struct fake_state {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint32_t next_gen; /* survives reset, so old handles stay stale */
    uint64_t epoch;    /* bumped by reset; waiters give up */

    /* Settings made through fakecuda_set_*; 0 / -1 when not set. */
    int set_sm;
    size_t set_mem;
    int set_devices;

    int initialised;
    int sm;
    size_t mem;
    int ndevices;
    int log_fd;
    fake_hold hold;
    uint32_t pool_gen; /* of the default pools' handles */
    CUresult sticky;
    fake_device dev[FAKE_MAX_DEVICES];

    fake_table modules;
    fake_table streams;
    fake_table events;
    fake_table links;
    fake_alloc *allocs; /* sorted by base */
    size_t nallocs, cap_allocs;
    fake_hostreg *regs;
    size_t nregs, cap_regs;

    fake_work *work, *work_tail; /* every pending item, oldest first */
    fake_queue *queues;          /* every live queue */
    size_t pending;              /* launches, copies and frees in work */
    uint64_t next_seq;

    fake_fault faults[FAKE_MAX_FAULTS];
    int nfaults;
    uint64_t n_launch, n_alloc, n_load; /* calls so far, for faults */

    fakecuda_launch *launches;
    size_t nlaunches, cap_launches, launch_total;
    fakecuda_copy *copies;
    size_t ncopies, cap_copies, copy_total;
} fake_state;

/* Locks the one state and returns it. */
fake_state *fake_lock(void);
void fake_unlock(fake_state *st);

/* The error a call must return before anything else: not initialised, or
 * the sticky error. */
CUresult fake_check(fake_state *st);
/* fake_check, then the calling thread's current context: its device. */
CUresult fake_check_ctx(fake_state *st, int *dev);
/* The calling thread's current context handle (thread-local). */
CUcontext fake_current(void);
void fake_set_current(CUcontext ctx);

/* The next generation for a new handle (never 0, 24 bits). */
uint32_t fake_gen_next(fake_state *st);

/* Tables of handles: add returns the handle's slot and generation. */
int fake_table_add(fake_state *st, fake_table *t, void *item, uint32_t *slot,
                   uint32_t *gen);
void *fake_table_get(const fake_table *t, uintptr_t h, fake_tag tag,
                     uint32_t *slot);
void fake_table_del(fake_table *t, uint32_t slot);

/* Grows *data (of *cap elements of size elem) to hold need; 0 or -1. */
int fake_grow(void *data, size_t *cap, size_t need, size_t elem);

/* Appends one line to CUMOD_FAKE_LOG, if set (" pid=N\n" is added). */
void fake_log(fake_state *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Whether a fault of this kind fires on call number `count` (or for this
 * function name); a load fault's code goes to *code. */
int fake_fault_fires(fake_state *st, fakecuda_fault_kind kind, uint64_t count,
                     const char *name, CUresult *code);
int fake_fault_add(fake_state *st, fakecuda_fault_kind kind, uint64_t at,
                   const char *name, CUresult code);

/* Frees every resource of device dev (its primary context went away). */
void fake_device_teardown(fake_state *st, int dev);
/* Frees everything; the state is as at load afterwards. */
void fake_state_clear(fake_state *st);
/* Logs what device dev's context still holds ("teardown device=..."). */
void fake_device_log_left(fake_state *st, int dev);

/* ---- config.c, errors.c
 * ------------------------------------------------------ */

/* Reads the CUMOD_FAKE_* environment into st (called by cuInit). */
CUresult fake_config_load(fake_state *st);
int fake_parse_sm(const char *s, int *sm);
const char *fake_errname(CUresult rc);
/* A CUresult from a number or a name; 0 on success, -1 if unknown. */
int fake_errparse(const char *s, CUresult *rc);

/* ---- queue.c: per-stream order, dependencies, completion ----------------- */

/* A new queue with one ref (its owner's), or NULL when out of memory. */
fake_queue *fake_queue_new(fake_state *st, int dev, int legacy, int blocking);
void fake_queue_ref(fake_queue *q);
/* Drops a ref; frees q once nothing refers to it and nothing is queued. */
void fake_queue_unref(fake_state *st, fake_queue *q);
/* Device dev's legacy-stream queue, made on first use; NULL on OOM. */
fake_queue *fake_legacy_queue(fake_state *st, int dev);

int fake_point_done(const fake_point *p);
/* Points p at q's last item (taking a ref), dropping what p held. */
void fake_point_set(fake_state *st, fake_point *p, fake_queue *q);
void fake_point_clear(fake_state *st, fake_point *p);

/* Adds q's point `seq` to a set unless already complete; -1 on OOM. */
int fake_points_add(fake_points *set, fake_queue *q, uint64_t seq);
/* What work queued so far on q completes with: its last item; for a legacy
 * queue, also the last of every blocking queue of its device. */
int fake_points_of_queue(fake_state *st, fake_points *set, fake_queue *q);
/* Every queue of device dev. */
int fake_points_of_device(fake_state *st, fake_points *set, int dev);
int fake_points_done(const fake_points *set);
void fake_points_fini(fake_state *st, fake_points *set);
/* Blocks (the lock released, polling every 5 ms) until every point of set
 * has completed, the context is lost or the state is reset; finishes set. */
CUresult fake_points_wait(fake_state *st, fake_points *set);

/* Queues w on q behind q's earlier work, with the legacy stream's implicit
 * dependencies and `extra`'s points: a first step that can fail (before
 * anything is recorded), then one that cannot, which completes what it can.
 * Prepare takes nothing on failure; commit takes w. */
CUresult fake_work_prepare(fake_state *st, fake_work *w, fake_queue *q,
                           const fake_points *extra);
void fake_work_commit(fake_state *st, fake_work *w);
/* Frees an item never committed (after a successful prepare too). */
void fake_work_discard(fake_state *st, fake_work *w);
/* Completes every item that can complete now. */
void fake_progress(fake_state *st);
/* Drops device dev's pending items (every device's for -1): they never
 * complete, and what waits on them goes on. */
void fake_work_clear(fake_state *st, int dev);
/* Frees every queue, refs or not (reset; waiters see the new epoch). */
void fake_queues_free_all(fake_state *st);
/* A FAKE_WORK_CALL item completes (call.c): it faults, is skipped when its
 * memory was freed meanwhile, or runs. */
void fake_call_complete(fake_state *st, fake_work *w);

/* Resolves a stream handle to its queue (the legacy stream: dev's) and
 * device; checks the context the legacy stream needs. */
CUresult fake_stream_queue(fake_state *st, CUstream h, fake_queue **q,
                           int *dev);

/* ---- hold.c: held work and held loads ------------------------------------ */

/* Reads the hold file again (call once per completion pass). */
void fake_hold_refresh(fake_state *st);
/* Whether w is held, by the state fake_hold_refresh read. */
int fake_hold_blocks(const fake_state *st, const fake_work *w);
/* Sets names from a comma list (NULL or "": none); 0, or -1 on OOM. */
int fake_names_set_list(fake_names *names, const char *list, char sep);
void fake_names_fini(fake_names *names);
/* Blocks while loads are held, the lock released and taken again between
 * polls every 5 ms; logs how long `call` waited. */
void fake_load_hold_wait(fake_state *st, const char *call);
/* A copy waits here (the lock released) while CUMOD_FAKE_COPY_HOLD's file
 * exists. */
void fake_copy_hold_wait(fake_state *st);
/* Whether CUMOD_FAKE_EVENT_HOLD's file exists now. */
int fake_event_hold_on(fake_state *st);
void fake_hold_fini(fake_hold *h);

/* ---- memory.c, pool.c, module.c, link.c ---------------------------------- */

/* The allocation holding [p, p + n), or NULL. */
fake_alloc *fake_alloc_find(fake_state *st, uintptr_t p, size_t n);
/* The allocation starting at p, or NULL. */
fake_alloc *fake_alloc_at(fake_state *st, uintptr_t p);
/* Allocates bytes on device dev (cuMemAlloc, or the pool's), counting
 * toward alloc faults, and logs it; `extra` goes into the log line. */
CUresult fake_mem_alloc(fake_state *st, int dev, size_t bytes, int pool,
                        const char *extra, CUdeviceptr *out);
/* Frees the allocation at p, logging it; 0, or -1 if there is none. */
int fake_mem_release(fake_state *st, uintptr_t p);
/* Module memory (globals): not counted toward alloc faults, not logged. */
CUresult fake_mem_alloc_quiet(fake_state *st, int dev, size_t bytes,
                              CUdeviceptr *out);
int fake_mem_release_quiet(fake_state *st, uintptr_t p);
void fake_memory_clear(fake_state *st, int dev);
/* Default pool attributes for a device (cuInit). */
void fake_pool_init(fake_pool *pool);

/* launch.c: a launch, with the lock held; cluster (NULL: none) and
 * cooperative come from cuLaunchKernelEx (launch_ex.c), which checked them. */
CUresult fake_launch_locked(fake_state *st, CUfunction f, const unsigned g[3],
                            const unsigned b[3], unsigned shmem,
                            CUstream hstream, void **params, void **extra,
                            const unsigned cluster[3], int cooperative);
/* A device attribute of a device of this SM, as the fake answers it; -1
 * for one it does not know (device.c). */
int fake_device_attr(int sm, CUdevice_attribute a);

/* The dynamic shared memory a launch of k may ask (launch_ex.c). */
int fake_kernel_dyn_max(const fake_kernel *k);

/* Resolves a function handle to its module and kernel. */
CUresult fake_function_resolve(fake_state *st, CUfunction f, fake_module **mod,
                               fake_kernel **k);
void fake_modules_clear(fake_state *st, int dev);

/* JIT options of cuModuleLoadDataEx and cuLinkCreate: the log buffers into
 * *log; fake_jit_done writes back how much of each log was filled. */
CUresult fake_jit_options(fake_jitlog *log, unsigned n,
                          const CUjit_option *opts, void **vals);
void fake_jit_done(const fake_jitlog *log, unsigned n, const CUjit_option *opts,
                   void **vals);

/* A cuLinkComplete image: whether head[0..n) starts one, and its extent. */
int fake_link_image_size(const uint8_t *head, size_t n, uint64_t *size);
/* Parses a whole cuLinkComplete image into *img (kind PTX). */
CUresult fake_link_image_parse(const uint8_t *p, size_t n, int sm,
                               fake_image *img, fake_jitlog *log);
void fake_links_clear(fake_state *st);

#endif
