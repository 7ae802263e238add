/* SPDX-License-Identifier: MIT */
/*
 * libcumod: the client library of cumod. A process uses it to talk to
 * cumodd, the daemon that holds the CUDA context, over nng; the process
 * needs no CUDA context (nor driver) of its own.
 *
 * Errors: every call returns 0 (CUMOD_OK) or a cumod error (cumod/errors.h);
 * results go out through pointers, written only on success. After a failed
 * call, cumod_last_detail() says what was wrong in a sentence.
 *
 * Threads: a cumod_client may be used by several threads at once; each call
 * is one request and blocks until its reply or its timeout. cumod_shutdown
 * may run while other calls are in progress (those after it fail with
 * CUMOD_ECLOSED); only cumod_close must not.
 */
#ifndef CUMOD_CUMOD_H
#define CUMOD_CUMOD_H

#include <stddef.h>
#include <stdint.h>

#include "cumod/errors.h"
#include "cumod/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* libcumod.so is built with hidden visibility: what this header declares
 * is its interface, so it is exported (default visibility). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef struct cumod_client cumod_client;

/* A grid, block or cluster shape. */
typedef struct cumod_dim3 {
    unsigned x, y, z; /* 0 reads as 1 */
} cumod_dim3;

/* Connects to the daemon at url (NULL: $CUMOD_URL, else CUMOD_DEFAULT_URL
 * of cumod/version.h) and makes sure it answers (one Hello round trip).
 * timeout_ms bounds the connection and every later request of this client
 * (0: 10 s). Fails with CUMOD_ECONNREFUSED when nothing listens there, and
 * CUMOD_EPERM when the daemon refuses this user (its --allow-uid and
 * --allow-gid) or is at its --max-connections. On success *out is a
 * client the caller owns and frees with cumod_close. Blocks for the
 * connection. Any thread.
 *
 * $CUMOD_DEVICE, when set, is the device the session runs on: chosen
 * (cumod_set_device) right after connecting, and its refusal fails the
 * open with the daemon's error; CUMOD_EINVAL, before dialing, when it is
 * not an ordinal.
 *
 * A connection is a session of the daemon: if it ends (the daemon stopped
 * or refused a message), calls waiting on it fail at once with
 * CUMOD_ECLOSED, and the buffers, segments and streams made on it are
 * gone; open a new client. Requests that find no connection up for a
 * second dial again by themselves. */
int cumod_open(const char *url, int timeout_ms, cumod_client **out);

/* The files of a tls+tcp:// connection, PEM: ca, the CA certificates that
 * vouch for cumodd's (required there; the URL's host must be a name that
 * certificate carries, its CN or a DNS subject alternative name), and
 * cert and key, this client's certificate and its key (not encrypted),
 * for a cumodd that asks for one (its --tls-ca). A NULL field reads
 * $CUMOD_TLS_CA, $CUMOD_TLS_CERT or $CUMOD_TLS_KEY; cumod_open reads all
 * three so. Other URLs ignore them. */
typedef struct cumod_tls_files {
    const char *ca;
    const char *cert;
    const char *key;
} cumod_tls_files;

/* cumod_open with the TLS files of tls (NULL: all from the environment).
 * Fails with CUMOD_EINVAL naming a file that is missing or does not load,
 * and CUMOD_EPERM when the TLS handshake fails (cumodd's certificate not
 * vouched for, or this client's refused) or cumodd refuses the
 * certificate's names (its --allow-cert-subject). */
int cumod_open_tls(const char *url, int timeout_ms, const cumod_tls_files *tls,
                   cumod_client **out);

/* Ends the session; may run while other threads' calls on c are in
 * progress. Every call after it fails with CUMOD_ECLOSED, as do calls in
 * progress whose request has not been sent (waiting for a connection);
 * calls already sent run to their reply or timeout, and cumod_shutdown
 * returns once none is left and the connection is closed. The session's
 * buffers, segments and streams are gone. c stays valid (its memory)
 * until cumod_close. Idempotent; accepts NULL. */
void cumod_shutdown(cumod_client *c);

/* Closes the connection (cumod_shutdown, if it has not run) and frees the
 * client. Accepts NULL. No other call on c may be in progress; c is
 * invalid afterwards. To stop threads that use c: cumod_shutdown, join
 * them, then cumod_close. */
void cumod_close(cumod_client *c);

/* The detail message of the last call that failed on this thread: what was
 * wrong and where, e.g. "cannot connect to ipc:///x.sock: no cumodd is
 * listening there". Empty after a success. Valid until the thread's next
 * cumod call; owned by the library. */
const char *cumod_last_detail(void);

/* What cumodd reports of itself and its device. */
typedef struct cumod_device_info {
    char daemon_version[32];
    unsigned protocol_version;
    int ordinal;       /* CUDA device ordinal */
    char name[256];    /* as cuDeviceGetName */
    unsigned sm_major; /* compute capability */
    unsigned sm_minor;
    unsigned multiprocessors;
    int driver_version;    /* 1000 * major + 10 * minor, e.g. 13000 */
    uint64_t total_memory; /* bytes */
    uint64_t free_memory;  /* bytes, when the daemon answered */
    char kernel_dir[4096]; /* the folder the daemon watches */
    int64_t executor_pid;  /* the process holding the CUDA context */
    unsigned modules;      /* in the daemon's catalog */
    unsigned resident_modules;
    uint64_t resident_bytes; /* image bytes of the resident modules */
    int kernel_dir_degraded; /* 1: the folder is gone; being watched for */
    /* What the executor (the process holding the context) is doing:
     * "serving", "starting", "restarting" (after it was lost), "stuck" (it
     * stopped answering), "crash-looping" (it dies again at start),
     * "stopping"; since when. */
    char executor_state[24];
    uint64_t executor_state_since_unix_ms;
    unsigned executor_restarts; /* executors started after the first */
    char last_fault[512];       /* the last fault, hang or loss; "" if none */
    uint64_t last_fault_unix_ms;
    uint64_t free_memory_age_ms; /* free_memory is this old (a cache) */
    unsigned launch_deadline_ms; /* the daemon's default deadline; 0: none */
    unsigned max_launch_deadline_ms; /* the most a launch may ask; 0: none */
} cumod_device_info;

/* 1 while c's calls take the fast path (a shared-memory ring with cumodd,
 * set up by cumod_open when the daemon shares the host: an ipc:// URL and
 * CUMOD_NO_RING unset); 0 when they go over the connection. */
int cumod_fast_path(const cumod_client *c);

/* Why c's calls do not take the fast path, as a sentence written into buf
 * (cap bytes, snprintf's rules; returns its length): "" while they do;
 * else, e.g., "the URL is not local", "CUMOD_NO_RING is set", "cumodd did
 * not take a ring: ...", "cumodd closed this client's ring ...". A ring
 * lost with its connection comes back by itself: the first call over the
 * next connection (a dropped connection, a restarted daemon) opens a new
 * one. */
size_t cumod_fast_path_why(cumod_client *c, char *buf, size_t cap);

/* What libcumod does on its own and says once: the fast path lost (with
 * why) or regained. fn gets a syslog level (CUMOD_LOG_WARNING,
 * CUMOD_LOG_INFO), a sentence and arg, on whichever thread noticed; NULL
 * (the default) keeps the library silent. One handler per process. */
#define CUMOD_LOG_WARNING 4
#define CUMOD_LOG_INFO 6
typedef void (*cumod_log_fn)(int level, const char *message, void *arg);
void cumod_set_log_handler(cumod_log_fn fn, void *arg);

/* Asks the daemon for its device and memory (the Hello request). Writes
 * *out on success. Blocks for one round trip. */
int cumod_device_info_get(cumod_client *c, cumod_device_info *out);

/* A session of the daemon, with the device time of its completed work. */
typedef struct cumod_session_info {
    unsigned id; /* the daemon's number for it */
    int pid, uid;
    char domain[64]; /* the executor's domain ("default") */
    uint64_t gpu_ns; /* device time of its completed work */
    uint64_t memory_bytes;
    unsigned inflight; /* its work not yet complete */
    int device;        /* the device ordinal */
    int fast_path;     /* 1: its calls come through its shared-memory ring */
} cumod_session_info;

/* Lists the sessions c may see: every one for root or the daemon's own
 * user, else those of c's uid. *out is malloc'd (free() it; NULL when
 * none), *n its count; *mono_ns (may be NULL) the daemon's monotonic clock
 * at the listing, ns: two listings give each session's share of the GPU
 * between them. Blocks for one round trip. */
int cumod_sessions_list(cumod_client *c, cumod_session_info **out, size_t *n,
                        uint64_t *mono_ns);

/* Devices and fault domains (docs/faults.md "Domains"). A daemon may serve
 * several GPUs and run one executor per (device, domain); a session's
 * domain is fixed when it connects, its device is 0 unless it chooses. */

/* Chooses the device this session's work runs on (SetDevice): a CUDA
 * ordinal of one of the devices the daemon serves. Only before the session
 * holds anything: CUMOD_EBUSY once it has a buffer, segment, stream or
 * launch; CUMOD_EINVAL (the detail naming the devices served) for another
 * ordinal. cumod_open does it when $CUMOD_DEVICE is set. The choice is
 * the client's: when its connection is made again (a new session, after
 * cumodd restarted), the next call chooses the same device first, and
 * fails with that choice's error if it is refused. Blocks for one round
 * trip. Any thread. */
int cumod_set_device(cumod_client *c, int device);

/* The device this session uses, as the daemon last said (SetDevice's
 * reply, else the Hello of cumod_open or cumod_device_info_get); 0 for a
 * daemon that serves one device. Does not block; -1 when c is NULL. */
int cumod_device(const cumod_client *c);

/* One device the daemon serves. */
typedef struct cumod_gpu_info {
    int ordinal;
    char name[256];
    char uuid[48]; /* "GPU-xxxxxxxx-xxxx-...", as nvidia-smi; "" unknown */
    uint64_t total_memory;
    uint64_t free_memory; /* as last heard */
    unsigned executors;   /* serving domains on it (standbys not counted) */
    unsigned standby;     /* spare executors ready on it */
    unsigned sm_major, sm_minor;
} cumod_gpu_info;

/* One domain's executor on one device. */
typedef struct cumod_domain_info {
    char name[64];
    int device;
    char executor_state[24]; /* as cumod_device_info's; "stopped" */
    int64_t executor_pid;
    unsigned sessions;
    uint64_t memory_bytes; /* held by its sessions */
    uint64_t memory_max;   /* its limit; 0: none */
    unsigned restarts;
    char last_fault[512]; /* "" if none */
    uint64_t last_fault_unix_ms;
    unsigned resident_modules;
    /* A pool (cumodd --pool): executor pool_member (0-based) of
     * pool_size serving the domain on its device; pool_size 1: none. */
    unsigned pool_member, pool_size;
    int mps; /* its context is an MPS client: a fatal fault in any MPS
                client of the device ends it too */
} cumod_domain_info;

/* The daemon's devices and domains, and this session's place. */
typedef struct cumod_domains {
    char domain[64];  /* this session's domain ("" from an older cumodd) */
    int device;       /* this session's device */
    unsigned standby; /* spare executors up (all devices) */
    uint64_t standby_bytes; /* device memory they hold */
    uint32_t max_message;   /* the largest request cumodd takes; 0 unknown */
    size_t ndevices;
    cumod_gpu_info *devices; /* every device served */
    size_t ndomains;
    cumod_domain_info *domains; /* root and cumodd's user: every one;
                                   others: their own */
} cumod_domains;

/* Asks the daemon for its devices and domains (a Hello). On success *out
 * is the caller's, freed with cumod_domains_free; an older cumodd lists
 * none (ndevices and ndomains 0). Blocks for one round trip. */
int cumod_domains_get(cumod_client *c, cumod_domains **out);

/* Frees what cumod_domains_get gave. Accepts NULL. */
void cumod_domains_free(cumod_domains *d);

/* One module of the daemon's catalog. */
typedef struct cumod_module_info {
    char name[129];
    char state[16]; /* available, resident, failed, removed, quarantined */
    uint64_t generation;
    char sha256[65]; /* hex; empty when not read yet */
    char kind[8];    /* cubin, fatbin, cu, ptx (the file's) */
    uint64_t size;   /* bytes of the image */
    int pinned;
    size_t nkernels;
    char **kernels;   /* nkernels names, owned by the info */
    char *error;      /* NULL when none; owned by the info */
    char file[256];   /* the image file in use (of several, the preferred) */
    unsigned nimages; /* image files present: cubin, fatbin, cu, ptx */
    char images[4][256];
    uint32_t inflight; /* launches of the resident generation not complete */
    uint64_t resident_generations; /* loaded: the current one and retiring */
    uint64_t last_use_unix_ms;     /* 0: never used */
    uint64_t load_us;              /* the last load, in the executor */
    /* Quarantine: bytes that faulted or hung (quarantined_sha256 set) are
     * never loaded again until the file changes or cumodctl unquarantine;
     * quarantined is 1 while launches are refused (CUMOD_EQUARANTINED),
     * 0 while the last good generation serves in their place. */
    int quarantined;
    char *quarantine_reason; /* the fault or hang and when; NULL if none */
    char quarantined_sha256[65];
    uint64_t quarantined_unix_ms;
    uint32_t faults; /* faults and hangs these bytes were the culprit of */
    /* The resident generation: what it was loaded as (cubin, fatbin, ptx;
     * a .cu's is what NVRTC made of it), and the JIT options it was built
     * with, each with where it came from ("opt-level 3 (vadd.ptx.opts)");
     * NULL when not resident or nothing was JIT-compiled. */
    char loaded_kind[8];
    char *jit_options;
} cumod_module_info;

typedef struct cumod_module_list {
    size_t count;
    cumod_module_info *modules;
} cumod_module_list;

/* Lists the daemon's modules. On success *out is a list the caller frees
 * with cumod_module_list_free. Blocks for one round trip. */
int cumod_modules_list(cumod_client *c, cumod_module_list **out);

/* Frees a list from cumod_modules_list. Accepts NULL. */
void cumod_module_list_free(cumod_module_list *list);

/* What a module command did: the module afterwards, and a note for a person
 * ("unloaded", "resident, generation 3", ...). */
typedef struct cumod_module_result {
    cumod_module_info module;
    char note[256];
} cumod_module_result;

/* Releases what a result holds (it is embedded: the struct itself is the
 * caller's). Accepts a zeroed result. */
void cumod_module_result_fini(cumod_module_result *r);

/* Module commands. Each names a module (the file stem: "vadd" for
 * vadd.cubin) and blocks until the daemon has done it; on success fills
 * *out (the caller calls cumod_module_result_fini), on failure the detail
 * says why (unknown module, a refused image, a pinned module, ...).
 *   load    make it resident (reads and checks the file, resolves every
 *           kernel); an error if the image is refused or does not load
 *   unload  take it out of service; unloaded once its launches complete;
 *           refused for a pinned module
 *   pin     load it and keep it resident (no eviction, no idle unload)
 *   unpin   allow eviction again
 *   reload  read the file now; a resident module with new bytes gets a new
 *           generation (the old one serves its launches in flight); an
 *           error if the new bytes are refused, the old generation going on
 *   unquarantine  lift a quarantine (module.quarantined): the file's bytes
 *           may load and serve again
 */
int cumod_module_load(cumod_client *c, const char *name,
                      cumod_module_result *out);
int cumod_module_unload(cumod_client *c, const char *name,
                        cumod_module_result *out);
int cumod_module_pin(cumod_client *c, const char *name,
                     cumod_module_result *out);
int cumod_module_unpin(cumod_client *c, const char *name,
                       cumod_module_result *out);
int cumod_module_reload(cumod_client *c, const char *name,
                        cumod_module_result *out);
int cumod_module_unquarantine(cumod_client *c, const char *name,
                              cumod_module_result *out);

/* The JIT options of a load (CUjit_option): each field a value, or
 * CUMOD_JIT_UNSET (not given) or CUMOD_JIT_CLEAR (drop what an earlier
 * load gave). */
#define CUMOD_JIT_UNSET (-1)
#define CUMOD_JIT_CLEAR (-2)
typedef struct cumod_jit_options {
    int opt_level;     /* CU_JIT_OPTIMIZATION_LEVEL 0-4 */
    int max_registers; /* CU_JIT_MAX_REGISTERS 1-255 */
    int line_info;     /* CU_JIT_GENERATE_LINE_INFO 0-1 */
    int fast_compile;  /* CU_JIT_FAST_COMPILE 0-3, where the driver takes it */
} cumod_jit_options;
#define CUMOD_JIT_OPTIONS_INIT                                                 \
    {                                                                          \
        -1, -1, -1, -1                                                         \
    }

/* cumod_module_load with the load's own JIT options (PTX, a fatbin's PTX,
 * a .cu compiled to PTX). They stay the module's: later loads and reloads
 * keep them, over the configuration and NAME.ptx.opts. A resident module
 * whose options change this way gets a new generation (launches in flight
 * finish on the old one); module.jit_options says what built it. */
int cumod_module_load_jit(cumod_client *c, const char *name,
                          const cumod_jit_options *jit,
                          cumod_module_result *out);

/* One kernel parameter, as cuFuncGetParamInfo reports it. */
typedef struct cumod_param_info {
    uint32_t offset; /* bytes from the start of the parameter buffer */
    uint32_t size;   /* bytes */
} cumod_param_info;

typedef struct cumod_kernel_info {
    char *name; /* as in the image: C++ kernels have mangled names */
    size_t nparams;
    cumod_param_info *params;
} cumod_kernel_info;

typedef struct cumod_module_detail {
    cumod_module_info module;
    size_t nkernels;
    cumod_kernel_info *kernels; /* of the resident generation; none if
                                   not resident */
    char *jit_log;              /* PTX: the JIT's log; NULL when none */
    /* NAME.cu: the last compile (NVRTC's version, compiled or from the
     * cache, its time and options) and NVRTC's log; NULL when none. */
    char *compile;
    char *compile_log;
    uint64_t compiles;           /* compiles since cumodd started */
    uint64_t compile_cache_hits; /* images taken from the compile cache */
} cumod_module_detail;

/* A module with its kernels and their parameter layouts. On success *out
 * is the caller's, freed with cumod_module_detail_free. Blocks. */
int cumod_module_show(cumod_client *c, const char *name,
                      cumod_module_detail **out);

/* Accepts NULL. */
void cumod_module_detail_free(cumod_module_detail *d);

/* ---- A module described: every kernel and global, as the daemon reads
 * them from the image when it is catalogued (without loading it), or as the
 * driver gives them once it is resident. */
typedef struct cumod_param_desc {
    uint32_t offset, size;
    const char *type; /* C++ kernels: "const float*"; else "" */
    int indirect;     /* a pointer or a reference: takes a buffer */
} cumod_param_desc;

typedef struct cumod_kernel_desc {
    const char *name;      /* as in the image (C++ names mangled) */
    const char *display;   /* "axpy<float>"; the name for extern "C" */
    const char *signature; /* "axpy<float>(float, const float*, float*, int)";
                              "" when the image carries no types */
    size_t nparams;
    const cumod_param_desc *params;
    int static_shared;    /* bytes; -1 unknown (PTX before it is loaded) */
    int registers;        /* per thread; -1 unknown */
    unsigned max_threads; /* launch bounds; 0: none */
    cumod_dim3 cluster;   /* compiled cluster shape; {0,0,0}: none */
    int carveout;         /* its own carveout (percent); -1: none */
} cumod_kernel_desc;

typedef struct cumod_global_desc {
    const char *name;
    uint64_t size;
    int constant;        /* __constant__ (else __device__) */
    uint64_t kept_bytes; /* bytes clients wrote, kept across reloads */
} cumod_global_desc;

typedef struct cumod_module_description {
    cumod_module_info module;
    const char *described_from; /* "loaded", or the image it was read from */
    size_t nkernels;
    const cumod_kernel_desc *kernels;
    size_t nglobals;
    const cumod_global_desc *globals;
} cumod_module_description;

/* Describes a module (ShowModule): on success *out is the caller's, freed
 * with cumod_module_description_free; everything in it is owned by it.
 * Blocks for one round trip. */
int cumod_module_describe(cumod_client *c, const char *name,
                          cumod_module_description **out);
void cumod_module_description_free(cumod_module_description *d);

/* ---- Sessions and data ------------------------------------------------
 *
 * A client connection is a session in the daemon: the buffers, segments and
 * streams it creates are its own (a handle of another session is "not
 * found") and are freed when it closes, or when the process dies.
 * Device memory is reached through handles; clients never see device
 * pointers. Stream 0 is the session's default stream; work on one stream
 * runs in order, and never waits for another session's streams.
 *
 * Calls that take a cumod_ticket *ticket put work on a stream and return
 * once it is enqueued when ticket is non-NULL (wait for it with cumod_wait),
 * or once it is complete when ticket is NULL. "Enqueued" means checked and
 * placed in the stream's order in cumodd; an error in submitting it to the
 * GPU, like one that surfaces at completion (a kernel fault), comes back
 * from cumod_wait (or from the call, without a ticket), with the CUDA error
 * name in the detail. */

typedef uint64_t cumod_buffer; /* a device buffer of the session */
typedef uint64_t cumod_stream; /* 0: the session's default stream */
typedef uint64_t cumod_ticket; /* enqueued work to wait for */

/* Allocates size bytes of device memory (not zeroed). Fails with
 * CUMOD_EDEVMEM when the device, or the session's limit, has no room. */
int cumod_buffer_alloc(cumod_client *c, size_t size, cumod_buffer *out);

/* Frees a buffer after the work already enqueued on its session's streams
 * has completed. Returns at once: the handle is gone, and the daemon frees
 * the memory when that work is done (it counts against the session's
 * limit until the call returns, not after). */
int cumod_buffer_free(cumod_client *c, cumod_buffer buf);

/* Copies len bytes (any length the buffer holds) to or from the buffer at
 * offset, in stream order; returns when done. Up to 2 KiB travel inside
 * the message (one round trip); larger ones, on a local (ipc://)
 * connection, through a shared segment the library keeps per client
 * (made by the first transfer of 64 KiB or more, until when smaller ones
 * go inline too; 1 to 32 MiB, reused, freed by cumod_close; one
 * memcpy here, a DMA from registered memory in cumodd); elsewhere, or
 * when no segment can be had, in pieces each under cumodd's
 * --max-message. $CUMOD_INLINE_MAX (bytes) moves the 2 KiB. offset + len
 * must lie inside the buffer. For data you produce in place, a segment of
 * your own (below) saves the memcpy. */
int cumod_buffer_write(cumod_client *c, cumod_buffer buf, size_t offset,
                       const void *data, size_t len, cumod_stream stream);
int cumod_buffer_read(cumod_client *c, cumod_buffer buf, size_t offset,
                      void *data, size_t len, cumod_stream stream);

/* Sets len bytes at offset to value, in stream order. */
int cumod_buffer_memset(cumod_client *c, cumod_buffer buf, size_t offset,
                        size_t len, uint8_t value, cumod_stream stream,
                        cumod_ticket *ticket);

/* A POSIX shared-memory segment shared with the daemon, which maps it and
 * registers it with the driver once, so copies to and from it are DMA. */
typedef struct cumod_segment cumod_segment;

/* Creates a segment of size bytes (shm_open, mode 0600, unlinked from the
 * namespace once the daemon has mapped it) and maps it here. On success
 * *out is the caller's, released with cumod_segment_destroy. */
int cumod_segment_create(cumod_client *c, size_t size, cumod_segment **out);

/* The segment's memory in this process, and its size. */
void *cumod_segment_data(const cumod_segment *seg);
size_t cumod_segment_size(const cumod_segment *seg);

/* Unmaps the segment in the daemon and here, and frees it; refused with
 * CUMOD_EBUSY while copies to or from it are in flight. The daemon
 * unregisters its own mapping a little later, once the kernels running at
 * that moment have ended. Accepts NULL. */
int cumod_segment_destroy(cumod_client *c, cumod_segment *seg);

/* Copies between segments and buffers, and between buffers. Offsets and
 * lengths are checked against both sides. */
int cumod_copy_to_device(cumod_client *c, cumod_buffer dst, size_t dst_offset,
                         const cumod_segment *src, size_t src_offset,
                         size_t len, cumod_stream stream, cumod_ticket *ticket);
int cumod_copy_to_host(cumod_client *c, const cumod_segment *dst,
                       size_t dst_offset, cumod_buffer src, size_t src_offset,
                       size_t len, cumod_stream stream, cumod_ticket *ticket);
int cumod_copy_device(cumod_client *c, cumod_buffer dst, size_t dst_offset,
                      cumod_buffer src, size_t src_offset, size_t len,
                      cumod_stream stream, cumod_ticket *ticket);

/* Streams: a non-blocking stream of the daemon's one context. Destroying
 * one returns at once; the work already on it still completes (and a
 * later cumod_buffer_free waits for it). */
int cumod_stream_create(cumod_client *c, cumod_stream *out);
int cumod_stream_destroy(cumod_client *c, cumod_stream stream);

/* Returns when the work enqueued on stream so far has completed. */
int cumod_stream_synchronize(cumod_client *c, cumod_stream stream);

/* Returns when the work of ticket has completed (at once if it has; ticket
 * 0, which names work already complete, makes no request). */
int cumod_wait(cumod_client *c, cumod_ticket ticket);

/* ---- Kernel arguments: one helper per C type, so a launch reads like the
 * kernel's signature: vadd(a, b, c, n) is
 *   cumod_arg args[] = {cumod_arg_buffer(a, 0), cumod_arg_buffer(b, 0),
 *                       cumod_arg_buffer(c, 0), cumod_arg_i32(n)};
 * The daemon checks the count and each size against the kernel, and where
 * the kernel's signature is known (C++ kernels) each typed value's type:
 * cumod_arg_f32 for an int parameter, a value for a pointer or a buffer
 * for a scalar is refused with both types named ("argument 3 of
 * scale(float*, float, int): a float (f32) where the kernel takes int").
 * Arguments are numbered from 1 in every message. */
typedef enum cumod_arg_kind {
    CUMOD_ARG_VALUE = 0,  /* bytes in v.bytes (up to 16) */
    CUMOD_ARG_BUFFER = 1, /* a buffer and an offset: a device pointer */
    CUMOD_ARG_RAW = 2,    /* len bytes at raw, borrowed until the call */
} cumod_arg_kind;

/* The most arguments one launch may carry, and the most bytes of one
 * CUMOD_ARG_RAW argument (CUDA's limit on a kernel's parameters, 32764
 * bytes since CUDA 12.1 on Volta and later). Checked by the library. */
#define CUMOD_MAX_ARGS 1024
#define CUMOD_MAX_ARG_BYTES 32764

/* What C type a value is (cumod_arg.type), set by the typed helpers;
 * integers of one width pass for each other's parameters. NONE (0, as a
 * zeroed or hand-built cumod_arg has it, and cumod_arg_bytes): the daemon
 * checks the size only. */
typedef enum cumod_arg_type {
    CUMOD_TYPE_NONE = 0,
    CUMOD_TYPE_I32 = 1,
    CUMOD_TYPE_U32 = 2,
    CUMOD_TYPE_I64 = 3,
    CUMOD_TYPE_U64 = 4,
    CUMOD_TYPE_F32 = 5,
    CUMOD_TYPE_F64 = 6,
    CUMOD_TYPE_I16 = 7,
    CUMOD_TYPE_U16 = 8,
    CUMOD_TYPE_I8 = 9,
    CUMOD_TYPE_U8 = 10,
} cumod_arg_type;

typedef struct cumod_arg {
    cumod_arg_kind kind;
    uint32_t type; /* a cumod_arg_type for VALUE and RAW; 0: none */
    size_t len;
    union {
        unsigned char bytes[16];
        struct {
            cumod_buffer handle;
            uint64_t offset;
        } buffer;
        const void *raw;
    } v;
} cumod_arg;

cumod_arg cumod_arg_buffer(cumod_buffer buf, size_t offset);
cumod_arg cumod_arg_i32(int32_t v);
cumod_arg cumod_arg_u32(uint32_t v);
cumod_arg cumod_arg_i64(int64_t v);
cumod_arg cumod_arg_u64(uint64_t v);
cumod_arg cumod_arg_f32(float v);
cumod_arg cumod_arg_f64(double v);
/* A struct by value or any other bytes: borrowed, not copied, until the
 * launch call (or cumod_batch_launch) returns. */
cumod_arg cumod_arg_bytes(const void *data, size_t len);

typedef struct cumod_launch_params {
    const char *kernel;  /* "module:function", e.g. "vadd:vadd" */
    uint64_t generation; /* 0: the module's current generation */
    cumod_dim3 grid;
    cumod_dim3 block;
    unsigned shared_mem; /* dynamic shared memory, bytes */
    cumod_stream stream;
    size_t nargs;
    const cumod_arg *args;
    /* How long the kernel may run once it can start (the earlier work of
     * its stream done), in ms; 0: the daemon's default (cumodctl status
     * shows it), capped at the daemon's maximum. A launch past its
     * deadline is a hang: it fails with CUMOD_ETIMEDOUT, the daemon
     * restarts its executor (other work in flight fails with
     * CUMOD_ECTXLOST) and quarantines the kernel's module generation. */
    unsigned deadline_ms;
} cumod_launch_params;

/* Launches a kernel: loads its module if needed, checks the arguments and
 * the launch shape against the kernel and the device, and enqueues it. With
 * ticket NULL returns when the kernel has completed; else once enqueued.
 * *generation (if non-NULL) is the module generation that ran it. An
 * argument error names the argument ("argument 3: 8 bytes given, the
 * kernel takes 4"), and nothing is launched. */
int cumod_launch(cumod_client *c, const cumod_launch_params *p,
                 cumod_ticket *ticket, uint64_t *generation);

/* What a launch may ask beyond cumod_launch_params (cumod_launch_v2). A
 * zeroed struct but for carveout = -1 asks nothing more. */
typedef struct cumod_launch_attrs {
    /* Thread block clusters (sm_90+): the cluster's shape, which must
     * divide the grid, at most 8 blocks portably or 16 (the daemon allows
     * non-portable sizes for the kernel as needed); {0,0,0}: none (a kernel
     * compiled with __cluster_dims__ launches with its own shape). */
    cumod_dim3 cluster;
    /* A cooperative launch: the whole grid resident at once, so the kernel
     * may synchronize the grid (cooperative_groups::this_grid().sync());
     * refused, with the figure, when the grid is larger than that. */
    int cooperative;
    /* The preferred shared-memory carveout for this launch, in percent of
     * the unified L1/shared memory; -1: the kernel's setting
     * (cumod_kernel_set_carveout), else the driver's. */
    int carveout;
} cumod_launch_attrs;

/* cumod_launch with attrs (NULL: none). Dynamic shared memory may be
 * asked up to the device's opt-in limit less the kernel's static shared
 * memory (227 KiB on an H100): the daemon raises the kernel's limit as
 * needed. */
int cumod_launch_v2(cumod_client *c, const cumod_launch_params *p,
                    const cumod_launch_attrs *attrs, cumod_ticket *ticket,
                    uint64_t *generation);

/* Posts a launch: returns once it is in the client's ring, without
 * waiting for cumodd at all (its unbatched rate is the ring's, not a
 * round trip's), with a ticket to wait for. Its checks run after the
 * call returns, so a refusal (no such kernel, a bad argument, a limit)
 * comes back from cumod_wait, like an error in submitting it to the GPU,
 * not from this call. Without a ring (a remote daemon, CUMOD_NO_RING, a
 * ring given up) it is sent as cumod_launch_v2 with a ticket. */
int cumod_launch_post(cumod_client *c, const cumod_launch_params *p,
                      const cumod_launch_attrs *attrs, cumod_ticket *ticket);

/* Sets the carveout (percent, 0-100) that launches of kernel
 * ("module:function") use when they give none; -1 goes back to the
 * driver's default. Kept by the daemon across the module's generations. */
int cumod_kernel_set_carveout(cumod_client *c, const char *kernel, int percent);

/* ---- Module globals: a module's __device__ and __constant__ variables,
 * by name, read or written in the stream order of this session (loading
 * the module first if it is not resident). They are the module's, shared
 * by every client of it; a write is kept by the daemon and applied to
 * every later generation of the module before it serves, so a hot reload
 * keeps it (a new image without the global, or with it at another size,
 * fails its reload and the old generation goes on serving). Offsets and
 * lengths are checked against the global's size. */
int cumod_global_read(cumod_client *c, const char *module, const char *name,
                      size_t offset, void *data, size_t len,
                      cumod_stream stream);
int cumod_global_write(cumod_client *c, const char *module, const char *name,
                       size_t offset, const void *data, size_t len,
                       cumod_stream stream);

/* ---- GEMM through cuBLAS, on the session's buffers:
 *   C = alpha * op(A) * op(B) + beta * C
 * with op(A) m x k, op(B) k x n and C m x n (op(X) is X, or its transpose
 * with transa / transb), in stream order with the session's launches and
 * copies, run by cuBLAS (cublasGemmEx; with batch > 1
 * cublasGemmStridedBatchedEx) in cumodd's context: the client needs no
 * CUDA and no cuBLAS of its own. cumodd loads cuBLAS at its first GEMM
 * (its --cublas-library); where it has none, GEMMs fail with
 * CUMOD_ENOTSUP saying what it tried, and everything else works.
 *
 * Before anything runs the daemon checks the types, the shape and each
 * operand, and an error names the operand: "B: ld 10 < 64 rows", "C: needs
 * 1048576 bytes at offset 0 (512 x 512 FP32, ld 512), buffer 7 holds
 * 4096". */
typedef enum cumod_gemm_type {
    CUMOD_GEMM_FP32 = 1,
    CUMOD_GEMM_FP64 = 2,
    CUMOD_GEMM_FP16 = 3, /* IEEE half; accumulated in FP32 */
    CUMOD_GEMM_BF16 = 4, /* bfloat16; accumulated in FP32 */
} cumod_gemm_type;

/* How matrices lie in memory. Row-major (C, NumPy): element (i, j) at
 * i * ld + j, ld at least the columns; column-major (BLAS): at i + j * ld,
 * ld at least the rows. */
typedef enum cumod_gemm_order {
    CUMOD_GEMM_ROW_MAJOR = 0,
    CUMOD_GEMM_COL_MAJOR = 1,
} cumod_gemm_order;

/* One matrix (or the first of a strided batch) in a buffer of the
 * session. */
typedef struct cumod_gemm_operand {
    cumod_buffer buffer;
    size_t offset; /* bytes into the buffer; a multiple of the element size */
    size_t ld;     /* leading dimension in elements; 0: packed (the stored
                      matrix's columns row-major, rows column-major) */
    size_t stride; /* batch > 1: elements from one matrix to the next (A and
                      B may use 0: the same matrix for all; C's matrices
                      may not overlap) */
} cumod_gemm_operand;

typedef struct cumod_gemm_desc {
    cumod_gemm_type type;   /* of A and B */
    cumod_gemm_type c_type; /* of C; 0: type (FP32 is allowed for FP16 and
                               BF16 inputs; other mixes: CUMOD_ENOTSUP) */
    cumod_gemm_order order;
    int transa;     /* op(A) = A^T: A is stored k x m */
    int transb;     /* op(B) = B^T: B is stored n x k */
    size_t m, n, k; /* each 1 to 2^31 - 1 */
    double alpha;
    double beta; /* 0: C is only written (its old contents may be NaN) */
    cumod_gemm_operand a, b, c;
    size_t batch; /* 0 or 1: one GEMM; more: a strided batch */
    cumod_stream stream;
    unsigned deadline_ms; /* as cumod_launch_params.deadline_ms */
} cumod_gemm_desc;

/* Runs the GEMM d describes on its stream. With ticket NULL returns once
 * it has completed; else once enqueued (wait with cumod_wait). The first
 * GEMM of a daemon may wait for cumodd to load cuBLAS (a second or so).
 * Errors: CUMOD_EINVAL naming the operand and what was wrong (shape, ld,
 * offset, bounds, overlap), CUMOD_ENOTSUP for a type mix cuBLAS has not or
 * a daemon without cuBLAS, CUMOD_EDRIVER / CUMOD_EINVAL with the cuBLAS
 * status's name when cuBLAS refuses it. Blocks. */
int cumod_gemm(cumod_client *c, const cumod_gemm_desc *d, cumod_ticket *ticket);

/* ---- Batches: many launches, copies, memsets, writes and GEMMs in one
 * request, run in order on one stream, answered once. */
typedef struct cumod_batch cumod_batch;

int cumod_batch_alloc(cumod_batch **out);
void cumod_batch_free(cumod_batch *b); /* accepts NULL */
/* Empties the batch for reuse. */
void cumod_batch_reset(cumod_batch *b);
size_t cumod_batch_count(const cumod_batch *b);

/* Appends items; arguments and data are copied into the batch. The stream
 * and ticket of each item are the batch's own (cumod_batch_submit). */
int cumod_batch_launch(cumod_batch *b, const cumod_launch_params *p);
int cumod_batch_launch_v2(cumod_batch *b, const cumod_launch_params *p,
                          const cumod_launch_attrs *attrs);
int cumod_batch_write(cumod_batch *b, cumod_buffer buf, size_t offset,
                      const void *data, size_t len);
int cumod_batch_memset(cumod_batch *b, cumod_buffer buf, size_t offset,
                       size_t len, uint8_t value);
int cumod_batch_copy_to_device(cumod_batch *b, cumod_buffer dst,
                               size_t dst_offset, const cumod_segment *src,
                               size_t src_offset, size_t len);
int cumod_batch_copy_to_host(cumod_batch *b, const cumod_segment *dst,
                             size_t dst_offset, cumod_buffer src,
                             size_t src_offset, size_t len);
/* A GEMM item (d->stream and d->deadline_ms are the batch's). */
int cumod_batch_gemm(cumod_batch *b, const cumod_gemm_desc *d);

/* The deadline of the whole batch (as cumod_launch_params.deadline_ms,
 * which the batch's launches ignore); 0, the default: the daemon's. Kept
 * across cumod_batch_reset. */
void cumod_batch_set_deadline(cumod_batch *b, unsigned deadline_ms);

/* Runs the batch on stream. With ticket NULL returns when all of it has
 * completed. On failure *failed_index (if non-NULL) is the index of the
 * first item that failed (-1 when the failure is not one item's) and the
 * detail names it; nothing after it runs. */
int cumod_batch_submit(cumod_client *c, cumod_batch *b, cumod_stream stream,
                       cumod_ticket *ticket, int *failed_index);

/* --- Change events (cumodctl watch) -------------------------------------
 * What happens to modules and to the executor, in order, each numbered
 * (seq, from 1). cumodd keeps the last 4,096. */
typedef enum cumod_event_kind {
    CUMOD_EVENT_CATALOGUED = 1,    /* a module's files appeared or changed */
    CUMOD_EVENT_LOADED = 2,        /* a generation became resident */
    CUMOD_EVENT_RELOADED = 3,      /* generation replaces old_generation */
    CUMOD_EVENT_LOAD_FAILED = 4,   /* detail: the error */
    CUMOD_EVENT_EVICTED = 5,       /* detail: idle, or what needed room */
    CUMOD_EVENT_UNLOADED = 6,      /* asked */
    CUMOD_EVENT_REMOVED = 7,       /* its files are gone */
    CUMOD_EVENT_QUARANTINED = 8,   /* detail: the fault or hang */
    CUMOD_EVENT_UNQUARANTINED = 9, /* asked, or new bytes */
    CUMOD_EVENT_EXECUTOR_RESTARTED = 10, /* detail: after what */
} cumod_event_kind;

typedef struct cumod_event {
    uint64_t seq;
    cumod_event_kind kind;
    char module[256]; /* empty for the executor's */
    uint64_t generation, old_generation;
    char sha256[65], old_sha256[65]; /* hex; empty when none */
    char detail[1024];
    uint64_t unix_ms;
} cumod_event;

/* "catalogued", "loaded", ... ("unknown" for another value). */
const char *cumod_event_kind_name(cumod_event_kind kind);

/* As *after for cumod_events_wait: from now on (no past events). */
#define CUMOD_EVENTS_NOW UINT64_MAX

/* Waits up to timeout_ms (at most 60,000; 0: not at all) for events
 * numbered after *after, and returns up to cap of them, in order, in out
 * (*n of them). *after becomes the number of the last one returned, or,
 * with none, the last event so far (so a loop of calls sees each once).
 * *missed (if non-NULL) is how many after *after cumodd no longer kept. */
int cumod_events_wait(cumod_client *c, uint64_t *after, unsigned timeout_ms,
                      cumod_event *out, size_t cap, size_t *n,
                      uint64_t *missed);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
