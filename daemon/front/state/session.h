/* SPDX-License-Identifier: MIT */
/*
 * The session store: one session per client connection (nng pipe), and
 * what each owns: buffers, segments, streams and tickets, by the handles
 * the client knows them by. A plain data structure: no executor, no nng,
 * no loop; the front (calls.c) decides what the executor must release when
 * a session goes, and answers the requests a session held.
 *
 * Loop thread only.
 */
#ifndef CUMOD_SESSION_H
#define CUMOD_SESSION_H

#include <stdint.h>

#include "common/channel.h"
#include "common/idmap.h"
#include "common/list.h"
#include "common/status.h"

typedef struct cumod_buf {
    uint64_t handle;
    uint64_t size;
    uint64_t dptr;
    int lost; /* its executor died: the memory is gone, the handle stays */
} cumod_buf;

typedef struct cumod_seg {
    uint64_t handle;
    uint64_t size;
    uint64_t host;     /* the executor's mapping */
    uint32_t inflight; /* copies in flight from or to it */
    int lost;          /* as cumod_buf's */
    int fd;            /* the shm object, kept to fstat (seg_guard.h); -1 */
    int shrunk;        /* its client truncated it: copies refused */
    char name[208];    /* as the client named it */
} cumod_seg;

typedef struct cumod_sstream {
    uint64_t handle;
    uint64_t key;      /* the executor's name for it */
    uint64_t ws_bytes; /* its cuBLAS workspace, charged at its first GEMM */
} cumod_sstream;

/* A ticket whose work has not completed, or failed and is not yet waited
 * for. Completed tickets are forgotten: waiting for one returns at once. */
typedef struct cumod_ticket {
    uint64_t ticket;
    int done;
    cumod_err status;
    char *error;
    cumod_list waiters; /* cumod_req, by link: Wait requests */
} cumod_ticket;

/* Failed tickets kept per session for a later wait to report. */
#define CUMOD_SESSION_FAILED_TICKETS 1024

typedef struct cumod_session {
    uint32_t id; /* the pipe's id */
    int uid, gid, pid;
    uint64_t next_handle; /* buffers, segments and streams share it */
    uint64_t next_ticket;
    /* The next ticket its executor gives (CUMOD_DRING_TICKET_BIT), as the
     * front last heard it (front/units/direct.c). */
    uint64_t next_dticket;
    uint32_t next_stream;
    cumod_idmap bufs, segs, streams, tickets;
    uint32_t nfailed_tickets;
    uint64_t mem_used; /* bytes held, and reserved while an alloc runs */
    uint64_t default_ws_bytes; /* the default stream's cuBLAS workspace */
    uint32_t inflight;         /* executor calls not yet answered */
    int closed;                /* the connection is gone */
    /* Requests of the connection not yet answered, by request id (id 0 is
     * never tracked), and the ids of the last CUMOD_SESSION_RECENT_IDS
     * answered: a request whose id is among either is a duplicate (an nng
     * resend) and does not run twice. */
    cumod_idmap live_ids;
    uint32_t requests;
    uint64_t recent_ids[256];
    uint32_t recent_at;
    uint64_t recent_max; /* the largest id in recent_ids, ever */
    /* Allocations and segment maps sent to the executor and not answered
     * yet: they count against the limits already. */
    uint32_t pending_allocs, pending_maps;
    struct cumod_ring *ring; /* its shared-memory ring (ring.h), or NULL */
    /* Why its buffers and segments were last lost (the executor's fault,
     * hang or exit, as status says it); "" when never. */
    char lost_why[256];
    uint64_t gpu_ns; /* device time of its completed work (work.c) */
    /* Its executor (unit.h), domain and device: fixed at connect, but for
     * the device, which SetDevice may change while it holds nothing. */
    struct cumod_unit *unit;
    char domain[64];
    int device;
    /* The sessions' ledger its changes are written to (sledger.h), or
     * NULL. */
    struct cumod_sledger *lg;
} cumod_session;

/* The domain s belongs to (docs/faults.md "Domains"). */
static inline const char *
cumod__session_domain(const cumod_session *s)
{
    return s->domain[0] ? s->domain : "default";
}

#define CUMOD_SESSION_RECENT_IDS 256

/* Duplicates: CUMOD_SESSION_ID_NEW for an id to run, _LIVE for one in
 * progress, _DONE for one answered recently. */
enum {
    CUMOD_SESSION_ID_NEW = 0,
    CUMOD_SESSION_ID_LIVE,
    CUMOD_SESSION_ID_DONE,
};
int cumod__session_id_state(const cumod_session *s, uint64_t id);

/* id (not 0) is in progress: CUMOD_ENOMEM. */
cumod_err cumod__session_id_begin(cumod_session *s, uint64_t id);

/* id was answered: it moves to the recent ones. */
void cumod__session_id_end(cumod_session *s, uint64_t id);

typedef struct cumod_sessions {
    cumod_idmap by_pipe;
    struct cumod_sledger *lg; /* new sessions' ledger (sledger.h), or NULL */
} cumod_sessions;

void cumod__sessions_init(cumod_sessions *ss);

/* The session of pipe id, or NULL. */
cumod_session *cumod__sessions_get(cumod_sessions *ss, uint32_t id);

/* A new session for pipe id with the peer's credentials. CUMOD_ENOMEM. */
cumod_err cumod__sessions_add(cumod_sessions *ss, uint32_t id, int uid, int gid,
                              int pid, cumod_session **out);

/* Takes the session of pipe id out of the store (its connection closed);
 * NULL if there is none. The caller frees it (cumod__session_free). */
cumod_session *cumod__sessions_take(cumod_sessions *ss, uint32_t id);

/* Iteration: *cursor = 0 first; NULL at the end; no changes meanwhile. */
cumod_session *cumod__sessions_next(cumod_sessions *ss, size_t *cursor);

/* Frees every session; their waiting requests go to orphans (the caller
 * answers them). */
void cumod__sessions_fini(cumod_sessions *ss, cumod_list *orphans);

/* Frees s and all it holds. Requests still waiting on its tickets are
 * appended to orphans: the caller must answer them. */
void cumod__session_free(cumod_session *s, cumod_list *orphans);

/* 1 when s holds device memory or segments (what an executor's death
 * takes away). */
int cumod__session_holds_device_state(const cumod_session *s);

/* The executor died (why: what it met, "" when not known): every buffer
 * and segment of s is lost. Their handles stay, answering CUMOD_ECTXLOST
 * with why, until the client frees them. */
void cumod__session_lose_device_state(cumod_session *s, const char *why);

/* The executor's key of the session's stream index i (0: the default
 * stream; CUMOD_CHAN_RECLAIM: the reclaim stream). */
uint64_t cumod__session_key(const cumod_session *s, uint32_t index);

/* Lookups; NULL when the handle is not the session's. */
cumod_buf *cumod__session_buf(const cumod_session *s, uint64_t handle);
cumod_seg *cumod__session_seg(const cumod_session *s, uint64_t handle);
/* The executor key of a stream handle (0: the default stream); 0 when the
 * handle is not the session's. */
uint64_t cumod__session_stream_key(const cumod_session *s, uint64_t handle);

/* Every stream key of the session in use: its default stream first, then
 * the ones it created. *keys is malloc'ed (caller frees). CUMOD_ENOMEM. */
cumod_err cumod__session_stream_keys(const cumod_session *s, uint64_t **keys,
                                     size_t *n);

/* Memory accounting against limit (0: none): reserves size bytes while an
 * allocation runs; CUMOD_EDEVMEM with a sentence when over. */
cumod_err cumod__session_reserve(cumod_session *s, uint64_t size,
                                 uint64_t limit, cumod_status *st);
void cumod__session_unreserve(cumod_session *s, uint64_t size);

/* Records an allocated buffer (its bytes were reserved already).
 * CUMOD_ENOMEM. */
cumod_err cumod__session_buf_add(cumod_session *s, uint64_t size, uint64_t dptr,
                                 cumod_buf **out);
/* Forgets b and gives its bytes back. */
void cumod__session_buf_remove(cumod_session *s, cumod_buf *b);

cumod_err cumod__session_seg_add(cumod_session *s, uint64_t size, uint64_t host,
                                 const char *name, cumod_seg **out);
void cumod__session_seg_remove(cumod_session *s, cumod_seg *g);

/* A new stream handle (the executor creates the stream on first use).
 * CUMOD_ENOMEM, or CUMOD_EBUSY past 2^20 - 2 streams. */
cumod_err cumod__session_stream_add(cumod_session *s, cumod_sstream **out);
cumod_sstream *cumod__session_stream(const cumod_session *s, uint64_t handle);
void cumod__session_stream_remove(cumod_session *s, cumod_sstream *t);

/* s's domain and device are set (or its device changed): the ledger
 * says so. */
void cumod__session_placed(cumod_session *s);
/* A stream's cuBLAS workspace was charged (t NULL: the default stream's):
 * the ledger says so. */
void cumod__session_ws_charged(cumod_session *s, cumod_sstream *t);

/* What a replayed ledger puts back (sledger.c): a buffer, segment or
 * stream with its own handle (next_handle and next_stream move past it).
 * CUMOD_ENOMEM, or CUMOD_EEXIST when the handle is taken. */
cumod_err cumod__session_buf_put(cumod_session *s, uint64_t handle,
                                 uint64_t size, uint64_t dptr);
cumod_err cumod__session_seg_put(cumod_session *s, uint64_t handle,
                                 uint64_t size, uint64_t host,
                                 const char *name);
cumod_err cumod__session_stream_put(cumod_session *s, uint64_t handle,
                                    uint64_t key);

/* Tickets: a new one for enqueued work; its completion, which hands the
 * requests waiting on it to waiters (the caller answers them: success, or
 * the ticket's error); lookup. */
cumod_err cumod__session_ticket_new(cumod_session *s, cumod_ticket **out);
/* A ticket numbered by the client (a posted launch's, CUMOD_TICKET_POSTED
 * with its request id): CUMOD_EEXIST when one of that number is kept,
 * CUMOD_ENOMEM. */
cumod_err cumod__session_ticket_new_at(cumod_session *s, uint64_t ticket,
                                       cumod_ticket **out);
void cumod__session_ticket_done(cumod_session *s, uint64_t ticket,
                                cumod_err status, const char *error,
                                cumod_list *waiters);
cumod_ticket *cumod__session_ticket(const cumod_session *s, uint64_t ticket);

/* A ticket the executor gave (CUMOD_DRING_TICKET_BIT) failed and was not
 * yet reported: kept as the front's own failures are, for a later Wait.
 * CUMOD_ENOMEM. */
cumod_err cumod__session_ticket_failed(cumod_session *s, uint64_t ticket,
                                       cumod_err status, const char *error);
/* Forgets a completed ticket (after a wait has reported its failure). */
void cumod__session_ticket_forget(cumod_session *s, cumod_ticket *t);

#endif
