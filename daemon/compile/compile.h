/* SPDX-License-Identifier: MIT */
/*
 * CUDA C++ sources: NAME.cu compiled by NVRTC in a worker process.
 *
 * The catalog's reader (a thread of libuv's pool) calls cumod__compile,
 * which starts `cumodd --nvrtc-worker` (this binary again), hands it the
 * source in a sealed memfd and waits for it under a time limit. The worker
 * loads libnvrtc with dlopen, looks the compile up in the on-disk cache,
 * else compiles and stores the result there. A compiler that crashes, hangs
 * or eats memory costs only that process: the front's loop and the
 * executor never run NVRTC.
 *
 * The cache key is the SHA-256 of the source, every option in order, the
 * NVRTC version, the SM and the headers the source includes from the
 * folder and the -I folders (deps.h), so a changed option, header or
 * compiler compiles again and a restart does not.
 */
#ifndef CUMOD_COMPILE_H
#define CUMOD_COMPILE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "catalog/image/image.h"
#include "cumod/errors.h"

/* The worker's exit statuses. */
#define CUMOD_COMPILE_OK 0       /* compiled (or found in the cache) */
#define CUMOD_COMPILE_FAILED 1   /* NVRTC refused the source: see its log */
#define CUMOD_COMPILE_NO_NVRTC 2 /* libnvrtc could not be loaded */
#define CUMOD_COMPILE_INTERNAL 3 /* anything else (the log says) */

/* The workers running now, owned by whoever starts compiles (the
 * catalog), so that a stopping daemon need not wait out their time limits
 * (cumod__compile_cancel_all). Its functions may be called from any
 * thread. */
#define CUMOD_COMPILE_MAX_RUNNING 64
typedef struct cumod_compilers {
    pthread_mutex_t mu;
    pid_t running[CUMOD_COMPILE_MAX_RUNNING]; /* 0: a free slot */
    int cancelled; /* kill any worker started from now on */
} cumod_compilers;

void cumod__compilers_init(cumod_compilers *c);
/* After the last compile returned. */
void cumod__compilers_fini(cumod_compilers *c);

typedef struct cumod_compile_req {
    cumod_compilers *workers; /* where the worker is registered */
    const char *program;      /* the cumodd binary to run as the worker */
    const char *library;      /* libnvrtc path or soname; NULL: defaults */
    const char *cache_dir;    /* NULL: no cache */
    const char *name;         /* "vadd.cu", for messages */
    const char *path;         /* its full path, for messages */
    unsigned sm_major, sm_minor;
    const char *const *opts; /* NVRTC options, in order (the arch and the
                                include path already there) */
    size_t nopts;
    const char *deps; /* the digest of the headers it includes (deps.h),
                         part of the cache key; NULL or "": none */
    int src_fd;       /* a memfd holding the source (len bytes) */
    size_t src_len;
    uint32_t timeout_ms; /* wall clock; the worker is killed after, and its
                            CPU time is limited to as much */
    /* What the worker may read (sandbox.h): the kernel folder first (the
     * source's own), then the configured include folders; the toolkit's
     * headers and NVRTC's folder are added by the worker. */
    const char *const *roots;
    size_t nroots;
    uint64_t memory_max; /* address space beyond NVRTC's; 0: no limit */
} cumod_compile_req;

typedef struct cumod_compile_res {
    cumod_image img; /* the compiled image: a cubin, or PTX */
    int cached;      /* 1: read from the cache, not compiled */
    char nvrtc[32];  /* NVRTC's version, "13.0" */
    char key[65];    /* the cache key, hex */
    char *log;       /* NVRTC's program log (malloc'd, may be "") */
    uint64_t ms;     /* the worker's time, start to end */
} cumod_compile_res;

/* Compiles req's source. CUMOD_OK with res filled (the caller releases it
 * with cumod__compile_res_fini); otherwise a sentence in msg naming the
 * file and what went wrong (NVRTC's errors, a crash and its signal, the
 * time limit, a missing libnvrtc), with the compile log in res->log where
 * there is one: CUMOD_EIMAGE the source did not compile, CUMOD_ETIMEDOUT
 * the time limit, CUMOD_ENOTSUP no NVRTC, CUMOD_EINTERNAL a crash or
 * other failure. Blocks (up to the time limit): a thread of the pool. */
cumod_err cumod__compile(const cumod_compile_req *req, cumod_compile_res *res,
                         char *msg, size_t msglen);

void cumod__compile_res_fini(cumod_compile_res *res);

/* Kills every worker of c running, and any started later: the daemon is
 * stopping and will not wait out their time limits. Any thread. */
void cumod__compile_cancel_all(cumod_compilers *c);

/* 1 if an NVRTC option names the target architecture (-arch, --gpu-
 * architecture, -arch=..., --gpu-architecture=...). */
int cumod__compile_names_arch(const char *opt);

/* The worker: `cumodd --nvrtc-worker LIBRARY NAME SM CACHE DEPS [--root
 * DIR]... [--memory-max BYTES] [--cpu-max SECONDS] -- OPTIONS...` with the
 * source on descriptor 0, the image written to descriptor 1, the log to
 * descriptor 2 and "key value" lines to descriptor 3 (kind, cached, nvrtc,
 * key). LIBRARY, CACHE and DEPS may be "" (defaults; no cache; no
 * headers). The first root is the source's folder, where the worker runs.
 * An include outside the roots fails the compile unread; NVRTC runs
 * confined (sandbox.h). Returns the exit status. */
int cumod__nvrtc_worker_main(int argc, char **argv);

#endif
