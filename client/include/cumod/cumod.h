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
 * is one request and blocks until its reply or its timeout. Only
 * cumod_close must not run while another call on the same client is in
 * progress.
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

typedef struct cumod_client cumod_client;

/* Connects to the daemon at url (NULL: $CUMOD_URL, else CUMOD_DEFAULT_URL
 * of cumod/version.h).
 * timeout_ms bounds every later request of this client (0: 10 s). Fails
 * with CUMOD_ECONNREFUSED when nothing listens there. On success *out is a
 * client the caller owns and frees with cumod_close. Blocks for the
 * connection. Any thread. */
int cumod_open(const char *url, int timeout_ms, cumod_client **out);

/* Closes the connection and frees the client. Accepts NULL. No other call
 * on c may be in progress; c is invalid afterwards. */
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
    int ordinal;              /* CUDA device ordinal */
    char name[256];           /* as cuDeviceGetName */
    unsigned sm_major;        /* compute capability */
    unsigned sm_minor;
    unsigned multiprocessors;
    int driver_version;       /* 1000 * major + 10 * minor, e.g. 13000 */
    uint64_t total_memory;    /* bytes */
    uint64_t free_memory;     /* bytes, when the daemon answered */
    char kernel_dir[4096];    /* the folder the daemon watches */
    int64_t executor_pid;     /* the process holding the CUDA context */
    unsigned modules;         /* in the daemon's catalog */
    unsigned resident_modules;
    uint64_t resident_bytes;  /* image bytes of the resident modules */
    int kernel_dir_degraded;  /* 1: the folder is gone; being watched for */
} cumod_device_info;

/* Asks the daemon for its device and memory (the Hello request). Writes
 * *out on success. Blocks for one round trip. */
int cumod_device_info_get(cumod_client *c, cumod_device_info *out);

/* One module of the daemon's catalog. */
typedef struct cumod_module_info {
    char name[129];
    char state[16];       /* available, resident, failed, removed */
    uint64_t generation;
    char sha256[65];      /* hex; empty when not read yet */
    char kind[8];         /* cubin, fatbin, ptx */
    uint64_t size;        /* bytes of the image */
    int pinned;
    size_t nkernels;
    char **kernels;       /* nkernels names, owned by the info */
    char *error;          /* NULL when none; owned by the info */
    char file[256];       /* the image file in use (of several, the preferred) */
    unsigned nimages;     /* image files present: cubin, fatbin, ptx */
    char images[3][256];
    uint32_t inflight;    /* launches of the resident generation not complete */
    uint64_t resident_generations; /* loaded: the current one and retiring */
    uint64_t last_use_unix_ms;     /* 0: never used */
    uint64_t load_us;     /* the last load, in the executor */
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
} cumod_module_detail;

/* A module with its kernels and their parameter layouts. On success *out
 * is the caller's, freed with cumod_module_detail_free. Blocks. */
int cumod_module_show(cumod_client *c, const char *name,
                      cumod_module_detail **out);

/* Accepts NULL. */
void cumod_module_detail_free(cumod_module_detail *d);

#ifdef __cplusplus
}
#endif
#endif
