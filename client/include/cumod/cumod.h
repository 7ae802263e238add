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
    char **kernels;       /* nkernels names, owned by the list */
    char *error;          /* NULL when none; owned by the list */
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

#ifdef __cplusplus
}
#endif
#endif
