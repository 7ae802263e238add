/* SPDX-License-Identifier: MIT */
/*
 * The catalog's records, shared by catalog.c (the whole), catalog_records.c
 * (the records), catalog_read.c (reads, the reload decision),
 * catalog_scan.c (the folder), residency.c (loads, unloads, the budget),
 * catalog_requests.c (what requests ask), catalog_waiters.c (the waiters),
 * quarantine.c and catalog_info.c (views). Loop thread only.
 */
#ifndef CUMOD_CATALOG_INTERNAL_H
#define CUMOD_CATALOG_INTERNAL_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <uv.h>

#include "catalog.h"
#include "compile/compile.h"
#include "catalog/image/image.h"
#include "watch.h"
#include "common/modopts.h"

#define CUMOD_CAT_READS 16
#define CUMOD_CAT_COMPILES 2

typedef enum cumod_mod_state {
    CUMOD_MOD_AVAILABLE = 0, /* on disk, not loaded */
    CUMOD_MOD_RESIDENT,      /* a generation is loaded and takes new work */
    CUMOD_MOD_FAILED,        /* not loaded, and its bytes failed to read/load */
    CUMOD_MOD_REMOVED,       /* no file left; unloads when idle */
} cumod_mod_state;

typedef enum cumod_mod_op {
    CUMOD_OP_IDLE = 0,
    CUMOD_OP_READING, /* image read in the thread pool */
    CUMOD_OP_LOADING, /* load in the executor */
} cumod_mod_op;

/* One image file of a module, with the stat of its last read so a rescan
 * skips files that did not change. */
typedef struct cumod_file {
    int present;
    char name[256];
    int stat_valid;
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns, ctime_ns;
} cumod_file;

/* An image kept in memory (a sealed memfd) to load again later. */
typedef struct cumod_kept_image {
    int fd; /* -1: none */
    uint64_t len;
    cumod_image_kind kind;
    char sha256[65];
    cumod_jit_opts jit; /* the JIT options it was loaded with */
    char jit_from[256];
} cumod_kept_image;

/* Writes clients made to one global of a module (globals.c): a shadow of
 * it and a mask of the bytes written. */
typedef struct cumod_kept_global {
    char *name;
    uint64_t size;
    uint8_t *bytes, *mask;
} cumod_kept_global;

/* A loaded generation of a module. */
struct cumod_gen {
    cumod_module *mod;
    uint64_t generation;
    uint64_t handle; /* the executor's */
    cumod_image_kind kind;
    char sha256[65];
    uint64_t size;
    uint32_t nkernels;
    cumod_kernel *kernels;
    uint32_t nglobals;
    cumod_gen_global *globals;
    cumod_jit_opts jit; /* PTX, fatbin: the JIT options it was built with */
    char jit_from[256]; /* those, each with where it came from */
    uint32_t inflight;  /* launches using this generation, not complete */
    /* Domains' executors that loaded these bytes too (the front's
     * replicas, front/units/replica.c): it is not unloaded or freed while one
     * does, but may retire (eviction, a new file) as if idle. */
    uint32_t replicas;
    /* Its image, kept for those replicas' loads (a dup of the memfd). */
    cumod_kept_image image;
    /* Its executor (the catalog's) died while launches of other
     * executors or replicas still held it: nothing to unload, freed at
     * the last release. */
    int lost;
    int unloading;
    cumod_list_node link; /* the module's retiring list */
};

struct cumod_module {
    cumod_catalog *cat;
    char name[129];
    cumod_file files[CUMOD_IMAGE_KINDS];
    cumod_mod_state state;

    /* The last read of the preferred image (what `ls` shows). */
    int read_valid;
    cumod_image_kind kind;
    char sha256[65];
    uint64_t size;
    char *error;   /* the last failure, NULL when none */
    char *jit_log; /* PTX: the JIT's log of the last load */
    /* NAME.cu: the last compile's log and what it was ("NVRTC 13.0, 812
     * ms: -arch=..."), and how many compiles and cache hits it had. */
    char *compile_log;
    char *compile_note;
    uint64_t compiles, compile_hits;
    /* The last image a compile made (a sealed memfd, -1: none) and what
     * from: the source's hash and the options, one a line. */
    cumod_kept_image compiled;
    char *compiled_with;
    /* The sidecar files NAME.ptx.opts and NAME.cu.opts (stat at the last
     * read), the JIT options the last read found in the first, and a
     * load's own (cumodctl load --jit-*), which later loads keep. */
    cumod_file opts_files[CUMOD_OPTS_KINDS];
    cumod_jit_opts sidecar_jit, load_jit;
    /* The options the next load takes (set just before it). */
    cumod_jit_opts next_jit;
    char next_jit_from[256];
    cumod_jit_opts failed_jit; /* with failed_sha */
    char failed_sha[65];       /* bytes that failed to load: not retried */

    /* Images kept to load again without the file: the current
     * generation's, and the last one that served without a fault (what a
     * quarantine rolls back to). Sealed memfds, -1 when none. */
    cumod_kept_image cur_image, good_image;
    /* Quarantine: these bytes faulted or hung (quarantine_after times);
     * they are never loaded again until their file changes or unquarantine
     * is asked. */
    char quarantine_sha[65];
    char *quarantine_reason;
    uint64_t quarantine_unix_ms;
    char fault_sha[65];   /* the bytes faults counts for */
    uint32_t faults;      /* faults and hangs of those bytes */
    uint32_t load_deaths; /* executors that died loading the current bytes */
    int load_died;        /* the executor died while this was its one load */
    char load_died_sha[65];
    int rollback;     /* load good_image at the next chance */
    int was_resident; /* resident when the executor died: load again */

    uint64_t generation; /* the newest generation number given */
    cumod_gen *current;  /* takes new work; NULL when not resident */
    cumod_list retiring; /* older ones (cumod_gen), unloaded when idle */
    uint64_t load_us;

    int pinned;
    int want_load;  /* load once the read is done */
    int force_read; /* re-read even if stat says unchanged */
    int dirty;      /* something changed during the op: redo after it */
    cumod_mod_op op;
    uint64_t last_use_ms;      /* uv_now of the last use */
    uint64_t last_use_unix_ms; /* the same, wall clock, for display */
    cumod_list waiters;        /* cumod_waiter */

    /* Globals: what clients wrote (kept for every later generation),
     * counted by version (a load that began before a write gets it after),
     * and the names the image's description lists. */
    cumod_kept_global *kept;
    uint32_t nkept;
    uint64_t globals_version;
    char **described;
    uint32_t ndescribed;
    uint64_t *described_size;
    uint8_t *described_const;
    /* The kernels the image describes (before it is loaded), and from
     * what ("vadd.cubin", "vadd_fat.fatbin (its sm_90 cubin)"). */
    cumod_kernel *desc_kernels;
    uint32_t ndesc_kernels;
    char *desc_from;
    /* KernelSettings: kernels' own carveouts, kept across generations. */
    struct cumod_kset {
        char *fn;
        int32_t carveout;
    } * ksets;
    uint32_t nksets;

    cumod_module *hnext;       /* hash chain */
    cumod_list_node read_link; /* queued for a read slot */
    cumod_image_kind read_kind;
};

struct cumod_catalog {
    const cumod_config *cfg;
    cumod_catalog_ops ops;
    unsigned sm_major, sm_minor; /* the device's, once an executor is up */
    uv_loop_t *loop;
    cumod_watch *watch;
    char dir[4096];
    cumod_module **table; /* hash by name, chained */
    size_t nbuckets;
    size_t count;
    uint32_t resident;
    uint64_t resident_bytes;
    uint32_t reads_in_flight;
    uint32_t loads; /* LOAD calls not answered yet */
    /* Reads wait here for one of CUMOD_CAT_READS slots: each holds a
     * descriptor and a thread-pool slot, and a rescan of 50,000 files must
     * not take 50,000 of either at once. */
    cumod_list read_queue; /* cumod_module, by read_link */
    /* NAME.cu reads wait here while CUMOD_CAT_COMPILES compile: a compile
     * holds a thread of the pool for as long as it runs. */
    cumod_list compile_wait;
    uint32_t compiles_running;
    cumod_compilers compilers; /* their workers (cumod__catalog_stop) */
    char exe[4096];            /* this program: the NVRTC worker */
    char cache_dir[4096];      /* compiled images; "" none */
    int cache_made;            /* cache_dir was made (at the first compile) */
    uint64_t compiles, compile_hits, compile_failures;
    uv_timer_t idle_timer;
    int scanned;             /* the first scan ran (it waits for the device) */
    int scan_reported;       /* and its reads returned: ops.scanned called */
    unsigned long overflows; /* the watcher's count at the last rescan */
    int stopping;
    int handles_open;
};

/* catalog_records.c: the records */
cumod_module *cumod__mod_find(cumod_catalog *cat, const char *name);
/* The record of name, made when there is none; NULL when out of memory. */
cumod_module *cumod__mod_get(cumod_catalog *cat, const char *name);
/* Drops a module with nothing left (no file, no generation, no op). */
void cumod__mod_maybe_free(cumod_module *m);
/* Forgets every loaded generation of m, without unloading: the context
 * that held them is gone (or going). Returns whether one was current. */
int cumod__mod_drop_gens(cumod_module *m);
/* Frees every record and the catalog itself (its handles closed, its reads
 * returned). */
void cumod__cat_free_all(cumod_catalog *cat);
/* Reports a change of m to the catalog's owner (ops.event). */
void cumod__mod_event(cumod_module *m, Cumod__EventKind kind, uint64_t gen,
                      uint64_t old_gen, const char *sha, const char *old_sha,
                      const char *detail);

void cumod__mod_set_error(cumod_module *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *cumod__mod_state_name(cumod_mod_state s);
int cumod__mod_preferred(const cumod_module *m); /* kind, or -1 if none */

/* The JIT options a load of m as kind takes: the configuration's, the
 * module's settings, sidecar (NAME.ptx.opts), then the load's own; none for
 * a cubin. from gets each with where it came from. */
void cumod__mod_jit_for(const cumod_module *m, cumod_image_kind kind,
                        const cumod_jit_opts *sidecar, cumod_jit_opts *out,
                        char *from, size_t fromlen);
/* A file's stat, kept at its read; 1 when st is the same file unchanged. */
void cumod__file_set_stat(cumod_file *f, const struct stat *st);
int cumod__file_same_stat(const cumod_file *f, const struct stat *st);
/* Closes a kept image (fd -1 after: none). */
void cumod__kept_fini(cumod_kept_image *k);
/* Frees a generation no one holds any more. */
void cumod__gen_free(cumod_gen *g);

/* catalog_read.c: the reader and the reload decision */
/* Starts whatever the module needs next: a read if its files changed or a
 * load is wanted, the end of a removed module, or answering its waiters. */
void cumod__mod_refresh(cumod_module *m);
/* Reports the first scan done (ops.scanned, once) when every read it
 * started has returned. */
void cumod__cat_maybe_scanned(cumod_catalog *cat);

/* catalog_scan.c: the folder */
/* Reads the folder whole and makes the catalog equal to it. */
void cumod__cat_scan(cumod_catalog *cat);
/* The watcher's callback (watch.h): arg is the catalog. */
void cumod__cat_on_watch(void *arg, cumod_watch_event ev, const char *name);

/* residency.c */
/* Called once a load that started ends, worked or failed (m's op idle
 * again), for the starter's next step; its waiters are not told yet. */
typedef void (*cumod_load_done_cb)(cumod_module *m);
/* Sends img to the executor as generation N+1; takes img (closes it).
 * done runs when the executor answered (not when the load did not start:
 * the waiters are told then). */
void cumod__res_load(cumod_module *m, cumod_image *img,
                     cumod_load_done_cb done);
/* Loads a kept image again (the rollback of a quarantine). */
void cumod__res_load_kept(cumod_module *m, const cumod_kept_image *k,
                          cumod_load_done_cb done);
/* Takes the current generation out of service: unloaded now if idle, else
 * when its last launch completes. */
void cumod__res_retire_current(cumod_module *m);
/* Unloads generations that are retiring and idle. */
void cumod__res_reap(cumod_module *m);
/* Makes room for one more resident module of `bytes` by evicting the least
 * recently used idle unpinned ones. CUMOD_OK or CUMOD_EBUSY with msg. */
cumod_err cumod__res_make_room(cumod_catalog *cat, cumod_module *except,
                               uint64_t bytes, char *msg, size_t msglen);
void cumod__res_start_idle_timer(cumod_catalog *cat);

/* catalog_waiters.c */
/* Tells every waiter of m what its state means for it (when m's op is
 * idle). */
void cumod__mod_answer_waiters(cumod_module *m);
/* Tells every waiter of m: code, "NAME: msg". */
void cumod__mod_fail_waiters(cumod_module *m, cumod_err code, const char *msg);

/* quarantine.c */
/* 1 when m refuses launches: its serving bytes, or the bytes it would
 * load, are quarantined (and no good generation can serve instead). */
int cumod__mod_quarantined(const cumod_module *m);
/* Quarantines the bytes sha of m for reason (a fault's blame, an executor
 * dying); a kept good image of other bytes is loaded instead at the next
 * chance. */
void cumod__mod_quarantine(cumod_module *m, const char *sha,
                           const char *reason);
void cumod__mod_unquarantine(cumod_module *m);
/* The CUMOD_EQUARANTINED status of a launch of m, with the reason. */
void cumod__mod_quarantine_status(const cumod_module *m, cumod_status *st);

/* --- kernel_desc.c ---------------------------------------------------------
 * Fills k's display name, signature and parameter types from its name (a
 * C++ kernel's is demangled). 0, or -1 when out of memory. */
int cumod__kernel_describe_types(cumod_kernel *k);

/* 1 when the described global name is a __constant__ one. */
int cumod__module_global_constant(const cumod_module *m, const char *name);
/* Frees what the image's description left in m. */
void cumod__module_desc_fini(cumod_module *m);
/* Frees the strings a cumod_kernel owns (not the struct). */
void cumod__kernel_fini(cumod_kernel *k);

/* --- globals.c ------------------------------------------------------------ */

/* Bytes of global name that clients wrote. */
uint64_t cumod__globals_kept_bytes(const cumod_module *m, const char *name);
void cumod__globals_fini(cumod_module *m);
/* The globals spec of m (channel.h), malloc'ed. CUMOD_ENOMEM. */
cumod_err cumod__globals_spec(const cumod_module *m, uint8_t **out,
                              size_t *len);
/* Reads the globals table of a LOAD's reply into g. 0 or -1. */
int cumod__globals_parse(cumod_gen *g, const uint8_t *p, size_t len);
void cumod__gen_globals_free(cumod_gen *g);

#endif
