/*
 * Sessions: one per client connection (nng pipe). A session owns the
 * buffers, segments, streams and tickets it created; handles are its own.
 * When its connection closes, everything it owns is released in the
 * executor (streams drained and destroyed first, then memory freed and
 * segments unregistered) once its work in flight has come back.
 * Loop thread only.
 */
#ifndef CUMOD_SESSION_H
#define CUMOD_SESSION_H

#include <stdint.h>

#include "server.h"

struct cumod_daemon;

typedef struct cumod_buf {
    uint64_t handle;
    uint64_t size;
    uint64_t dptr;
    struct cumod_buf *next;
} cumod_buf;

typedef struct cumod_seg {
    uint64_t handle;
    uint64_t size;
    uint64_t host; /* the executor's mapping */
    uint32_t inflight;
    struct cumod_seg *next;
} cumod_seg;

typedef struct cumod_sstream {
    uint64_t handle;
    uint64_t key; /* the executor's name for it */
    struct cumod_sstream *next;
} cumod_sstream;

/* A ticket whose work has not completed, or failed and is not yet waited
 * for. Completed tickets are forgotten: waiting for one returns at once. */
typedef struct cumod_ticket_rec {
    uint64_t ticket;
    int done;
    int status;
    char *error;
    struct cumod_work *waiters;
    struct cumod_ticket_rec *next;
} cumod_ticket_rec;

#define CUMOD_SESSION_BUCKETS 64

typedef struct cumod_session {
    struct cumod_daemon *d;
    uint32_t id; /* the pipe's id */
    int uid, gid, pid;
    uint64_t next_handle;
    uint64_t next_ticket;
    uint32_t next_stream;
    cumod_buf *bufs[CUMOD_SESSION_BUCKETS];
    cumod_seg *segs;
    cumod_sstream *streams;
    cumod_ticket_rec *tickets;
    uint32_t nfailed_tickets;
    uint64_t mem_used;
    uint32_t inflight; /* executor calls not yet answered */
    int closed;        /* the connection is gone */
    int lost;          /* its executor died: every handle is gone */
    struct cumod_session *next;
} cumod_session;

/* The session of w's connection, created at its first request (with the
 * peer's credentials). NULL after answering w when the connection is
 * already gone or the session's context was lost. */
cumod_session *cumod__session_of(struct cumod_daemon *d, struct cumod_work *w);

/* The connection closed: release the session when its work is back. */
void cumod__session_closed(struct cumod_daemon *d, uint32_t pipe_id);

/* An executor call of s came back; releases a closed session when it was
 * the last. */
void cumod__session_call_done(cumod_session *s);

/* The executor died: sessions that held buffers or segments lost them and
 * get CUMOD_ECTXLOST from now on; the others carry on. */
void cumod__sessions_lost(struct cumod_daemon *d);

/* Frees every session without telling the executor (shutdown). */
void cumod__sessions_fini(struct cumod_daemon *d);

/* Lookups; NULL when the handle is not the session's. */
cumod_buf *cumod__session_buf(cumod_session *s, uint64_t handle);
cumod_seg *cumod__session_seg(cumod_session *s, uint64_t handle);
/* The executor key of a stream handle (0: the default stream); 0 when the
 * handle is not the session's. */
uint64_t cumod__session_stream_key(cumod_session *s, uint64_t handle);

/* Drains and destroys the session's streams in the executor (STREAMS_CLOSE:
 * it waits for their work), so that what follows on the channel, frees and
 * unmaps, runs after that work. Streams are created again on next use.
 * Returns how many streams it named. */
size_t cumod__session_drain_streams(struct cumod_daemon *d, cumod_session *s);

/* Adds a buffer record (after the executor allocated it). */
cumod_buf *cumod__session_add_buf(cumod_session *s, uint64_t size,
                                  uint64_t dptr);
void cumod__session_remove_buf(cumod_session *s, cumod_buf *b);

/* Tickets: a new one for enqueued work; its completion; lookup. */
cumod_ticket_rec *cumod__session_ticket_new(cumod_session *s);
void cumod__session_ticket_done(cumod_session *s, uint64_t ticket, int status,
                                const char *error);
cumod_ticket_rec *cumod__session_ticket(cumod_session *s, uint64_t ticket);

#endif
