/* SPDX-License-Identifier: MIT */
/*
 * What the files of libcumod share; not installed.
 */
#ifndef CUMOD_CLIENT_INTERNAL_H
#define CUMOD_CLIENT_INTERNAL_H

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>
#include <stdatomic.h>

#include "cumod.pb-c.h"
#include "pack_fast.h"
#include "cumod/cumod.h"

/* The threads that copy large staged transfers (data.c). */
typedef struct cumod__copy_pool cumod__copy_pool;

/* The fast path (ring.c): a shared-memory ring beside the connection. */
typedef struct cumod__ring cumod__ring;

/* What cumod__ring_call says besides CUMOD_OK (not cumod errors). */
enum {
    CUMOD__RING_NOT_TAKEN = -1, /* busy, dead or full: use nng */
    CUMOD__RING_TIMEDOUT = -2,  /* sent, no reply within the timeout */
    CUMOD__RING_CLOSED = -3,    /* sent; cumodd closed the ring meanwhile */
    CUMOD__RING_BROKEN = -4,    /* sent; the ring holds bytes not a reply */
};

/* 1 when url is local (ipc://) and CUMOD_NO_RING is unset (or "0"). */
int cumod__ring_wanted(const char *url);
/* Makes a ring and asks cumodd (over c's connection) to take it. CUMOD_OK
 * and *out, or an error with its detail (the client goes on without). */
struct cumod_client;
/* Opens a ring; *on: the connection (pipe id) whose session took it. */
int cumod__ring_open(struct cumod_client *c, cumod__ring **out, uint32_t *on);
/* 1 when req may go through the ring: launches, waits and small
 * transfers; control, and replies that can be large, go over nng. */
int cumod__ring_eligible(const Cumod__Request *req);
/* Sends req (id set) through g and waits up to timeout_ms for its reply:
 * CUMOD_OK and *out, or a CUMOD__RING_ value. Takes the ring only if no
 * other call holds it and req packs small enough. */
int cumod__ring_call(cumod__ring *g, const Cumod__Request *req,
                     const cumod__pack_items *pre, int timeout_ms,
                     Cumod__Reply **out);
/* Puts req (id set; a posted launch, never answered) into g, waiting up to
 * timeout_ms for room: CUMOD_OK, or CUMOD__RING_NOT_TAKEN (busy, dead,
 * too big, or still full: nothing was written). */
int cumod__ring_post(cumod__ring *g, const Cumod__Request *req, int timeout_ms);
/* The connection ended: no call uses g again, and one waiting wakes. */
void cumod__ring_kill(cumod__ring *g);
void cumod__ring_destroy(cumod__ring *g);
/* Calls that went through g. */
uint64_t cumod__ring_calls(const cumod__ring *g);

/* Hands n descriptors to cumodd at c's fd socket (handover.c) with a
 * fresh token (CUMOD_HANDOVER_TOKEN bytes), which OpenRing or MapSegment
 * then names: CUMOD_OK, or CUMOD_ENOTSUP when cumodd has no such socket
 * (then the memory goes by name), or an error. */
#define CUMOD_HANDOVER_TOKEN 16
int cumod__handover(cumod_client *c, const int *fds, int n, uint8_t *token);
/* A memfd of size bytes sealed against shrinking and growing, mapped
 * read-write at *data: its descriptor, or -1 with errno. */
int cumod__memfd_make(const char *what, size_t size, void **data);

/* A call over the connection, known to the pipe watcher (on c->calls
 * from its send to its end). Its reply's wait is the caller's, not the
 * aio's: a caller that times out leaves the call "late", kept by the
 * library with its receive posted until the reply comes (or the
 * connection ends, or cumod_shutdown), so that the socket is never closed
 * while a reply it still expects can arrive (nng #1813: nng 1.5 to 1.7
 * can hang in nng_close if it does). call.c. */
typedef struct cumod__call {
    struct cumod_client *c;
    nng_aio *aio;     /* its callback: call.c client_call_cb */
    nng_ctx ctx;      /* a context per call */
    nng_cv *cv;       /* its caller waits here, on c->mtx */
    _Atomic int sent; /* its request left: cumod_shutdown lets it be */
    _Atomic int recv; /* its receive is posted (the callback's phase) */
    int done;         /* the receive completed; under c->mtx */
    int late;         /* its caller gave up; under c->mtx */
    struct cumod__call *next;
} cumod__call;

/* Late calls a client keeps at most: past it the oldest is abandoned to
 * nng (its reply, if it comes, is dropped there). */
#define CLIENT_LATE_MAX 256
/* How long cumod_shutdown waits for late calls' replies before it aborts
 * them, and for nng_close (nng #1813): each bounds a close. */
#define CLIENT_LATE_CLOSE_MS 1000
#define CLIENT_CLOSE_MS 2000

struct cumod_client {
    nng_socket sock;
    int timeout_ms;
    _Atomic uint64_t next_id;
    char url[512];
    /* The connection's end fails the calls waiting on it at once: nng's
     * req would resend them on the next connection, which is another
     * session of the daemon (the buffers they name are gone), or, when the
     * daemon refused the connection, wait out the timeout. Guarded by mtx
     * (a leaf: nng_aio_abort is the only call made under it). */
    nng_mtx *mtx;
    cumod__call *calls;
    uint64_t replies;  /* replies received, on any connection */
    int connected;     /* a connection is up (its handshake done) */
    int refused;       /* the daemon refused us: the dialer is closed */
    unsigned dial_gen; /* dialers made: a redial happens once per stall */
    nng_dialer dialer;
    nng_pipe pipe; /* the connection last made (id 0: none yet) */
    /* The connections up now (ids): during a redial the old dialer's can
     * outlive the new one's coming, and their events can come in either
     * order; pipe is the newest of them. Under mtx. */
    uint32_t live[4];
    unsigned n_live;
    /* The fast path, or NULL. Replaced (under ring_mtx, published under
     * mtx) when a new connection opens a new ring; a ring replaced stays
     * allocated on old_rings until cumod_close, since a caller may still
     * hold it (cumod__ring_call on a dead ring returns at once). */
    _Atomic(cumod__ring *) ring;
    int ring_want;            /* an ipc:// URL and CUMOD_NO_RING unset */
    _Atomic int ring_opening; /* one thread (re)opens a ring at a time */
    uint32_t ring_pipe;       /* the connection a ring was last tried on */
    uint32_t ring_on;         /* the one whose session took it (its reply's) */
    cumod__ring **old_rings;
    size_t n_old_rings;
    /* Why calls go over the connection ("" while on the fast path), and
     * whether that reason was logged (once per reason); under mtx. */
    char ring_why[320];
    int ring_why_told;
    /* cumodd's --max-message (its Hello; 0: not told, an older cumodd):
     * no request larger is sent, and larger transfers are split under
     * it (data.c). */
    _Atomic uint32_t max_message;
    /* Where cumodd takes rings' and segments' descriptors (HelloReply's
     * fd_socket; "" when it has none, an older cumodd); under mtx. */
    char fd_socket[108];
    /* The segment that stages transfers larger than inline ones (data.c),
     * made on first need, grown, freed at close; under stage_mtx. It
     * belongs to the session of connection stage_pipe. */
    nng_mtx *stage_mtx;
    struct cumod_segment *stage;
    uint32_t stage_pipe;
    struct cumod__copy_pool *copy_pool; /* data.c; under stage_mtx */
    unsigned copy_threads; /* how many copy a large piece; 0: not yet asked */
    /* tls+ URLs: every dialer's TLS configuration; else NULL */
    nng_tls_config *tls;
    /* The device this client chose (cumod_set_device, $CUMOD_DEVICE; -1:
     * none) and the connection that heard it (device_pipe, a pipe id
     * under mtx; device_lost once that connection ended): a new session
     * hears it again before its first call (device.c). device: the one
     * the daemon last named. */
    _Atomic int want_device;
    _Atomic int device;
    uint32_t device_pipe;
    int device_lost;
    /* cumod_shutdown: 1 once it began (no call starts after), 2 once the
     * socket is closed; users: the calls in progress (call.c), which it
     * waits out (failing those not sent yet) before closing the socket. */
    _Atomic int shut;
    _Atomic int users;
    /* Late calls (cumod__call): on calls, counted here under mtx (n_late
     * also read without it, as a hint); late_cv is signalled as each
     * completes. close_stuck: nng_close did not return within
     * CLIENT_CLOSE_MS, so c is never freed (nng may still call
     * cumod__client_on_pipe with it). */
    _Atomic unsigned n_late;
    unsigned n_late_done;
    nng_cv *late_cv;
    int close_stuck;
};

/* 1 while g takes calls (its connection is up, cumodd has not closed
 * it). */
int cumod__ring_alive(const cumod__ring *g);

/* The id of the connection calls go over now (0: none up). */
uint32_t cumod__client_pipe(cumod_client *c);
/* The connection (pipe id) the calling thread's last reply over nng came
 * on; 0: none yet. */
uint32_t cumod__client_reply_pipe(void);

/* The connection (conn.c). */

/* How long a request may wait for a connection before a new one is
 * dialed (cumod__client_redial). */
#define CLIENT_STALL_MS 1000

/* nng's codes, converted once where they enter. */
int cumod__client_nng_err(int rv);

/* nng_dial, with the client's TLS configuration on tls+ URLs. */
int cumod__client_dial(cumod_client *c, int flags, nng_dialer *out);

/* The TLS configuration of a tls+ URL into c->tls (files: the CA, and
 * this client's certificate and key; NULL: from the environment). */
int cumod__client_tls(cumod_client *c, const cumod_tls_files *files);

/* nng's thread: a connection of c's socket came or went. */
void cumod__client_on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg);

/* A call waiting on c (its aio), and done (replied: a reply came). */
void cumod__client_call_add(cumod_client *c, cumod__call *k);
void cumod__client_call_remove(cumod_client *c, cumod__call *k, int replied);

/* The error of a call whose connection ended under it (set). */
int cumod__client_conn_ended(cumod_client *c);

/* The error of a call on a client cumod_shutdown ended (set). */
int cumod__client_shut_error(cumod_client *c);

/* Frees the late calls whose replies came. all: wait for the rest too,
 * up to CLIENT_LATE_CLOSE_MS, then abort them (cumod_shutdown, once no
 * call is in progress). */
void cumod__client_late_reap(cumod_client *c, int all);

/* The error of a call on a client cumodd refused (set). */
int cumod__client_refused(cumod_client *c);

/* No connection came up for a while: dial again (once per stall, gen
 * the dial generation seen; force: even with one up). */
void cumod__client_redial(cumod_client *c, unsigned gen, int force);

/* Opens a ring for connection pipe's session (once per connection). */
void cumod__client_ring_try(cumod_client *c, uint32_t pipe);

/* The ring a call may take now, or NULL. */
cumod__ring *cumod__client_ring_now(cumod_client *c);

/* The fast path went away or could not be had: remembers why (for
 * cumod_fast_path_why) and tells the log handler, once per reason. */
void cumod__client_ring_off(cumod_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Logs through the handler of cumod_set_log_handler, if any. */
void cumod__client_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Frees c's staging segment (data.c), at close. */
void cumod__stage_free(cumod_client *c);

/* Before req goes out: a client that chose a device and whose connection
 * has not heard it (a new session) chooses it again, once per
 * connection; CUMOD_OK, or that choice's error (device.c). */
int cumod__device_again(cumod_client *c, const Cumod__Request *req);

/* A launch posted through c's ring (req->launch->when POSTED): CUMOD_OK
 * and its ticket (CUMOD_TICKET_POSTED with its id) once it is in the
 * ring; without a ring, sent answered when enqueued as cumod_launch does
 * (the daemon's ticket then). */
int cumod__client_post(cumod_client *c, Cumod__Request *req, const char *fn,
                       cumod_ticket *ticket);

/* A reply to req came over the connection pipe_id (0: not known): a
 * SetDevice's marks that connection as having heard the choice; another
 * request's answered by a session that had not heard it (the connection
 * was made again while it was sent) is CUMOD_ECLOSED. */
int cumod__device_replied(cumod_client *c, const Cumod__Request *req,
                          uint32_t pipe_id);

/* $CUMOD_DEVICE, for cumod_open: CUMOD_OK and *device (-1: unset), or
 * CUMOD_EINVAL when it is not an ordinal. */
int cumod__device_env(int *device);

/* Sets this thread's detail message and returns code (error.c). */
int cumod__client_set_error(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears this thread's detail message and returns CUMOD_OK (error.c). */
int cumod__client_ok(void);

/* One request, one reply: fills in version and id, sends, waits. A reply
 * whose status is not OK becomes that error (its message the detail). On
 * success *out is the decoded reply, freed by the caller with
 * cumod__reply__free_unpacked. Blocks up to the client's timeout. */
int cumod__client_call(cumod_client *c, Cumod__Request *req,
                       Cumod__Reply **out);

/* cumod__client_call that also checks the reply is of the kind `want`
 * (else CUMOD_EPROTO, naming fn, the public call). */
int cumod__client_call_for(cumod_client *c, Cumod__Request *req,
                           Cumod__Reply__BodyCase want, const char *fn,
                           Cumod__Reply **out);

/* As cumod__client_call; with keep_on_error set, a reply whose status is
 * not OK is handed back too: the error is returned (and is the detail) and
 * *out is the reply, which the caller frees; *out is NULL when no reply
 * came (a transport or decoding error). Batch uses it for failed_index. */
int cumod__client_call_ex(cumod_client *c, Cumod__Request *req,
                          Cumod__Reply **out, int keep_on_error);

/* As cumod__client_call_ex, for a Batch whose items are packed already
 * (pre; NULL: none), waiting timeout_ms (0: the client's) for the reply
 * over nng (a long poll asks more). */
int cumod__client_call_timed(cumod_client *c, Cumod__Request *req,
                             const cumod__pack_items *pre, Cumod__Reply **out,
                             int keep_on_error, int timeout_ms);

/* A shared-memory segment (segment.c): mapped here at data, and in the
 * daemon under handle. Its name is unlinked once the daemon has it. */
struct cumod_segment {
    uint64_t handle;
    void *data;
    size_t size;
};

/* How a request that puts work on a stream is answered: once enqueued when
 * the caller wants a ticket, else once complete. */
#define CUMOD__WHEN(ticket)                                                    \
    ((ticket) != NULL ? CUMOD__REPLY_WHEN__REPLY_WHEN_ENQUEUED                 \
                      : CUMOD__REPLY_WHEN__REPLY_WHEN_COMPLETE)

/* Sends req (a request that puts work on a stream; fn names the public call
 * for messages) and reads its DoneReply: on success *ticket and
 * *generation, where non-NULL, are the reply's. Blocks. */
int cumod__client_done(cumod_client *c, Cumod__Request *req, const char *fn,
                       cumod_ticket *ticket, uint64_t *generation);

/* Checks that [offset, offset + len) lies within size bytes; else sets the
 * detail ("<fn>: <what> offset 100 + length 8 is past the end of <whose>
 * (64 bytes)") and returns CUMOD_EINVAL. */
int cumod__client_check_range(const char *fn, const char *what, size_t offset,
                              size_t len, size_t size, const char *whose);

/* Checks a launch's parameters (launch.c): the kernel name, the shape and
 * every argument, naming the first one wrong in the detail. */
int cumod__launch_check(const char *fn, const cumod_launch_params *p);

/* Storage for the protobuf form of a launch of nargs arguments: the
 * caller's (a stack array or a batch item's block). */
typedef struct cumod__launch_msg {
    Cumod__Launch launch;
    Cumod__Dim3 grid, block, cluster;
    Cumod__Carveout carveout;
    Cumod__Arg *args;       /* nargs */
    Cumod__Arg **argv;      /* nargs pointers into args */
    Cumod__BufferRef *refs; /* nargs: one per argument, used by buffers */
} cumod__launch_msg;

/* Storage for the protobuf form of a GEMM (gemm.c). */
typedef struct cumod__gemm_msg {
    Cumod__Gemm gemm;
    Cumod__GemmOperand a, b, c;
} cumod__gemm_msg;

/* Fills m from d (its stream, reply and deadline left 0) after the checks
 * that need no buffer; CUMOD_EINVAL with the detail naming fn. */
int cumod__gemm_fill(const char *fn, const cumod_gemm_desc *d,
                     cumod__gemm_msg *m);

/* Module infos (modules.c): a copy of a reply's, and its release; a
 * module name checked, the detail naming fn. */
int cumod__module_info_copy(cumod_module_info *m, const Cumod__ModuleInfo *src);
void cumod__module_info_fini(cumod_module_info *m);
int cumod__module_check_name(const char *fn, const char *name);

/* Fills m from a checked p. The value bytes are borrowed from p's
 * arguments (v.bytes or raw) until the message is packed. */
void cumod__launch_fill(cumod__launch_msg *m, const cumod_launch_params *p);

/* Adds attrs (may be NULL) to a filled m. CUMOD_EINVAL for a carveout
 * above 100 (the detail names fn). */
int cumod__launch_attrs(cumod__launch_msg *m, const cumod_launch_attrs *attrs,
                        const char *fn);

#endif
