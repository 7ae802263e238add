/* SPDX-License-Identifier: MIT */
/*
 * A request, whatever transport brought it (nng: server.c; a session's
 * shared-memory ring: ring.c; the next one), from its arrival until its
 * answer. The object, not a transport, owns what every client relies on
 * (DESIGN.md "Trust"): each request is answered exactly once. The reply
 * (version, request id, status, body) is built here, once for every
 * transport; a transport only frames and sends its bytes.
 *
 * A second answer, an answer after a drop or a drop after an answer is a
 * bug in cumodd. A debug build (NDEBUG undefined) aborts there, with a
 * CUMOD-BUG line that says which request; a release build logs the line
 * and sends nothing, so that no client ever hears a reply that was not
 * its own.
 */
#ifndef CUMOD_REQ_H
#define CUMOD_REQ_H

#include <stdint.h>

#include "cumod.pb-c.h"
#include "common/list.h"
#include "common/status.h"

struct cumod_req;

/* What a transport does for its requests. Called by req.c only, at most
 * once per request, on the thread that holds the request. */
typedef struct cumod_req_ops {
    const char *name; /* the transport, for the log: "nng", "ring" */
    /* Frames and sends reply (complete: version, id and status filled
     * in), then takes the request back: r must not be used after.
     * CUMOD_OK, or an error when it could not be sent (the transport logs
     * why). */
    cumod_err (*send)(struct cumod_req *r, const Cumod__Reply *reply);
    /* Takes the request back without a reply. */
    void (*drop)(struct cumod_req *r);
    /* The peer's credentials of r's connection (-1 where unknown);
     * CUMOD_ECLOSED when the connection is gone. */
    cumod_err (*peer)(const struct cumod_req *r, int *uid, int *gid, int *pid);
} cumod_req_ops;

/* One request in progress. Its transport owns the memory, and may reuse
 * it for a later request once this one is answered (both do: nng slots,
 * ring requests); the loop reads msg, id and pipe_id and must answer it
 * exactly once, through cumod__req_answer (or the wrappers below), or drop
 * it. After that, nobody may touch it again. */
typedef struct cumod_req {
    const cumod_req_ops *ops;  /* its transport */
    const Cumod__Request *msg; /* decoded; valid until the answer */
    uint64_t id;      /* the reply's request id (a request refused for its
                         version still has one); 0 when not known */
    uint32_t pipe_id; /* the client connection it came on (a ring's
                         requests: its session's connection) */
    /* Free for whoever holds the request while it waits (a waiter list, a
     * ticket's waiters): on no list when the loop receives it. */
    cumod_list_node link;
    /* Called once on the loop thread as the request is answered (or
     * dropped), before its reply leaves, when set by the loop: the
     * session's count of requests in progress. Must not answer. */
    void (*answered)(void *arg, struct cumod_req *r);
    void *answered_arg;
    /* The guard: set by the answer or the drop; cleared only by
     * cumod__req_begin, when the transport hands the memory out again as
     * a new request. */
    int done;
} cumod_req;

/* The transport makes r a new request of ops (fresh or reused memory):
 * not answered, no msg, id or hook, on no list. Fill in msg, id and
 * pipe_id after. The transport's thread. */
void cumod__req_begin(cumod_req *r, const cumod_req_ops *ops);

/* Builds the reply to request id into *reply (st: its status's storage,
 * which must live as long as *reply). code CUMOD_OK: body (NULL: an empty
 * reply) without a status; any other code: a Status with code and text (a
 * person's sentence; NULL: the error's own), and body too when non-NULL (a
 * refused Batch carries its failed_index so). body's fields are copied;
 * what they point to is shared. Any thread. */
void cumod__reply_build(Cumod__Reply *reply, Cumod__Status *st, uint64_t id,
                        cumod_err code, const char *text,
                        const Cumod__Reply *body);

/* The one answer point: builds r's reply (cumod__reply_build) and has its
 * transport send it; r is the transport's again. A second answer is a bug
 * (see above): in a release build it returns CUMOD_EINTERNAL and sends
 * nothing. The thread that holds r: the loop, or the transport's own
 * before it hands r over. */
cumod_err cumod__req_answer(cumod_req *r, cumod_err code, const char *msg,
                            Cumod__Reply *body);

/* Gives r back without a reply: a duplicate of a request in progress,
 * whose client hears the first one's reply (nng's req matches replies by
 * its own request id, which a resend keeps). Counts as r's answer. */
void cumod__req_drop(cumod_req *r);

/* cumod__req_answer with st's code and sentence (and no body). */
cumod_err cumod__req_fail(cumod_req *r, const cumod_status *st);

/* cumod__req_answer with a formatted sentence. */
cumod_err cumod__req_failf(cumod_req *r, cumod_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The peer's credentials of r's connection (IPC; -1 where unknown).
 * CUMOD_ECLOSED when the connection is already gone. Loop thread. */
cumod_err cumod__req_peer(const cumod_req *r, int *uid, int *gid, int *pid);

#endif
