#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"
#include "front.h"
#include "dataplane.h"
#include "log.h"

static cumod_session **
session_slot(cumod_daemon *d, uint32_t id)
{
    cumod_session **pp = &d->sessions[id % CUMOD_DAEMON_SESSION_BUCKETS];
    while (*pp != NULL && (*pp)->id != id)
        pp = &(*pp)->next;
    return pp;
}

cumod_session *
cumod__session_of(cumod_daemon *d, cumod_work *w)
{
    uint32_t id = (uint32_t)nng_pipe_id(w->pipe);
    cumod_session **pp = session_slot(d, id);
    cumod_session *s = *pp;
    int uid, gid, pid;

    if (s != NULL) {
        if (s->lost) {
            cumod__server_fail(w, CUMOD_ECTXLOST,
                               "the CUDA context was lost (a fault, or the "
                               "executor died): this connection's buffers, "
                               "segments and streams are gone; reconnect");
            return NULL;
        }
        return s;
    }
    /* Created on the loop, after checking the pipe is still there: its
     * close, if it comes, is then handled after this. */
    cumod__server_peer(w->pipe, &uid, &gid, &pid);
    uint64_t probe;
    /* A closed pipe is not found; a live one of another transport answers
     * "not supported" for the IPC option. */
    if (nng_pipe_get_uint64(w->pipe, NNG_OPT_IPC_PEER_PID, &probe) ==
        NNG_ENOENT) {
        cumod__server_fail(w, CUMOD_ECLOSED, "the connection is closed");
        return NULL;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL) {
        cumod__server_fail(w, CUMOD_ENOMEM, "out of memory");
        return NULL;
    }
    s->d = d;
    s->id = id;
    s->uid = uid;
    s->gid = gid;
    s->pid = pid;
    s->next_handle = 1;
    s->next_ticket = 1;
    s->next_stream = 1;
    *pp = s;
    CUMOD_LOGD("CUMOD-SESSION", "session %u opened: pid %d uid %d gid %d", id,
               pid, uid, gid);
    return s;
}

cumod_buf *
cumod__session_buf(cumod_session *s, uint64_t handle)
{
    cumod_buf *b = s->bufs[handle % CUMOD_SESSION_BUCKETS];
    while (b != NULL && b->handle != handle)
        b = b->next;
    return b;
}

cumod_seg *
cumod__session_seg(cumod_session *s, uint64_t handle)
{
    cumod_seg *g = s->segs;
    while (g != NULL && g->handle != handle)
        g = g->next;
    return g;
}

uint64_t
cumod__session_stream_key(cumod_session *s, uint64_t handle)
{
    uint64_t base = (uint64_t)s->id << 20;
    if (handle == 0)
        return base; /* the default stream, index 0 */
    for (cumod_sstream *t = s->streams; t != NULL; t = t->next)
        if (t->handle == handle)
            return t->key;
    return 0;
}

cumod_buf *
cumod__session_add_buf(cumod_session *s, uint64_t size, uint64_t dptr)
{
    cumod_buf *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->handle = s->next_handle++;
    b->size = size;
    b->dptr = dptr;
    b->next = s->bufs[b->handle % CUMOD_SESSION_BUCKETS];
    s->bufs[b->handle % CUMOD_SESSION_BUCKETS] = b;
    s->mem_used += size;
    return b;
}

void
cumod__session_remove_buf(cumod_session *s, cumod_buf *b)
{
    cumod_buf **pp = &s->bufs[b->handle % CUMOD_SESSION_BUCKETS];
    while (*pp != NULL && *pp != b)
        pp = &(*pp)->next;
    if (*pp == b)
        *pp = b->next;
    s->mem_used -= b->size;
    free(b);
}

cumod_ticket_rec *
cumod__session_ticket(cumod_session *s, uint64_t ticket)
{
    cumod_ticket_rec *t = s->tickets;
    while (t != NULL && t->ticket != ticket)
        t = t->next;
    return t;
}

cumod_ticket_rec *
cumod__session_ticket_new(cumod_session *s)
{
    cumod_ticket_rec *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->ticket = s->next_ticket++;
    t->next = s->tickets;
    s->tickets = t;
    return t;
}

static void
session_ticket_unlink(cumod_session *s, cumod_ticket_rec *t)
{
    cumod_ticket_rec **pp = &s->tickets;
    while (*pp != NULL && *pp != t)
        pp = &(*pp)->next;
    if (*pp == t)
        *pp = t->next;
    if (t->done && t->status != CUMOD_OK)
        s->nfailed_tickets--;
    free(t->error);
    free(t);
}

void
cumod__session_ticket_done(cumod_session *s, uint64_t ticket, int status,
                           const char *error)
{
    cumod_ticket_rec *t = cumod__session_ticket(s, ticket);
    if (t == NULL)
        return;
    t->done = 1;
    t->status = status;
    t->error = error ? strdup(error) : NULL;
    cumod_work *w = t->waiters;
    t->waiters = NULL;
    while (w != NULL) {
        cumod_work *next = w->next;
        w->next = NULL;
        if (status == CUMOD_OK) {
            cumod__dp_reply_done(w, 0, 0);
        } else {
            cumod__server_fail(w, status, "ticket %llu: %s",
                               (unsigned long long)ticket,
                               error ? error : cumod_strerror(status));
        }
        w = next;
    }
    if (status == CUMOD_OK || t->waiters == NULL) {
        /* Success is forgotten at once; a failure is kept (up to 1024 per
         * session) for a later wait to report. */
        if (status == CUMOD_OK) {
            session_ticket_unlink(s, t);
            return;
        }
        s->nfailed_tickets++;
        while (s->nfailed_tickets > 1024) {
            cumod_ticket_rec *oldest = NULL;
            for (cumod_ticket_rec *x = s->tickets; x; x = x->next)
                if (x->done && (!oldest || x->ticket < oldest->ticket))
                    oldest = x;
            if (oldest == NULL)
                break;
            session_ticket_unlink(s, oldest);
        }
    }
}

static void
session_free(cumod_session *s)
{
    for (int b = 0; b < CUMOD_SESSION_BUCKETS; b++)
        while (s->bufs[b] != NULL)
            cumod__session_remove_buf(s, s->bufs[b]);
    while (s->segs != NULL) {
        cumod_seg *g = s->segs;
        s->segs = g->next;
        free(g);
    }
    while (s->streams != NULL) {
        cumod_sstream *t = s->streams;
        s->streams = t->next;
        free(t);
    }
    while (s->tickets != NULL) {
        cumod_ticket_rec *t = s->tickets;
        cumod_work *w = t->waiters;
        t->waiters = NULL;
        while (w != NULL) {
            cumod_work *next = w->next;
            w->next = NULL;
            cumod__server_fail(w, CUMOD_ECLOSED, "the session closed");
            w = next;
        }
        session_ticket_unlink(s, t);
    }
    free(s);
}

size_t
cumod__session_drain_streams(cumod_daemon *d, cumod_session *s)
{
    size_t n = 1; /* the default stream, then the created ones */
    for (cumod_sstream *t = s->streams; t; t = t->next)
        n++;
    size_t len = sizeof(cumod_chan_stream) + n * sizeof(uint64_t);
    char *msg = malloc(len);
    if (msg == NULL)
        return n;
    cumod_chan_stream st = {.count = n};
    uint64_t key = cumod__session_stream_key(s, 0);
    memcpy(msg, &st, sizeof(st));
    memcpy(msg + sizeof(st), &key, sizeof(key));
    size_t i = 1;
    for (cumod_sstream *t = s->streams; t; t = t->next, i++)
        memcpy(msg + sizeof(st) + i * sizeof(uint64_t), &t->key,
               sizeof(uint64_t));
    (void)cumod__exec_call(d, CUMOD_CHAN_STREAMS_CLOSE, msg, len, -1, NULL,
                           NULL);
    free(msg);
    return n;
}

/* Releases what the session holds in the executor: its streams drained and
 * destroyed first (so nothing still uses the memory), then its buffers
 * freed and segments unregistered. The channel keeps the order. */
static void
session_release(cumod_daemon *d, cumod_session *s)
{
    uint64_t bytes = s->mem_used;
    unsigned nbuf = 0, nseg = 0;
    size_t n = 0;

    if (!s->lost && cumod__exec_ready(d)) {
        n = cumod__session_drain_streams(d, s);
        for (int b = 0; b < CUMOD_SESSION_BUCKETS; b++)
            for (cumod_buf *x = s->bufs[b]; x; x = x->next, nbuf++) {
                cumod_chan_free f = {.dptr = x->dptr};
                (void)cumod__exec_call(d, CUMOD_CHAN_FREE, &f, sizeof(f), -1,
                                       NULL, NULL);
            }
        for (cumod_seg *g = s->segs; g; g = g->next, nseg++) {
            cumod_chan_segment sg = {.size = g->size, .host = g->host};
            (void)cumod__exec_call(d, CUMOD_CHAN_SEG_UNMAP, &sg, sizeof(sg), -1,
                                   NULL, NULL);
        }
    }
    CUMOD_LOGI("CUMOD-SESSION",
               "session %u (pid %d) closed: released %u buffers (%llu bytes), "
               "%u segments, %zu streams",
               s->id, s->pid, nbuf, (unsigned long long)bytes, nseg, n);
    session_free(s);
}

void
cumod__session_closed(cumod_daemon *d, uint32_t pipe_id)
{
    cumod_session **pp = session_slot(d, pipe_id);
    cumod_session *s = *pp;
    if (s == NULL)
        return; /* it never made a request */
    *pp = s->next;
    s->closed = 1;
    if (s->inflight == 0)
        session_release(d, s);
}

void
cumod__session_call_done(cumod_session *s)
{
    if (--s->inflight == 0 && s->closed)
        session_release(s->d, s);
}

void
cumod__sessions_lost(cumod_daemon *d)
{
    /* Only sessions that held device memory or segments lose anything:
     * the others (and their streams, created again on first use) go on
     * with the new executor. */
    for (int b = 0; b < CUMOD_DAEMON_SESSION_BUCKETS; b++)
        for (cumod_session *s = d->sessions[b]; s; s = s->next) {
            int held = s->segs != NULL;
            for (int k = 0; k < CUMOD_SESSION_BUCKETS && !held; k++)
                held = s->bufs[k] != NULL;
            if (held)
                s->lost = 1;
        }
}

void
cumod__sessions_fini(cumod_daemon *d)
{
    for (int b = 0; b < CUMOD_DAEMON_SESSION_BUCKETS; b++)
        while (d->sessions[b] != NULL) {
            cumod_session *s = d->sessions[b];
            d->sessions[b] = s->next;
            session_free(s);
        }
}
