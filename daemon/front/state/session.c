/* SPDX-License-Identifier: MIT */
#include "front/state/session.h"

#include "front/state/sledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void
cumod__sessions_init(cumod_sessions *ss)
{
    cumod__idmap_init(&ss->by_pipe);
    ss->lg = NULL;
}

cumod_session *
cumod__sessions_get(cumod_sessions *ss, uint32_t id)
{
    return cumod__idmap_get(&ss->by_pipe, id);
}

cumod_err
cumod__sessions_add(cumod_sessions *ss, uint32_t id, int uid, int gid, int pid,
                    cumod_session **out)
{
    cumod_session *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return CUMOD_ENOMEM;
    s->id = id;
    s->uid = uid;
    s->gid = gid;
    s->pid = pid;
    s->next_handle = 1;
    s->next_ticket = 1;
    s->next_stream = 1;
    cumod__idmap_init(&s->bufs);
    cumod__idmap_init(&s->segs);
    cumod__idmap_init(&s->streams);
    cumod__idmap_init(&s->tickets);
    cumod__idmap_init(&s->live_ids);
    if (cumod__idmap_set(&ss->by_pipe, id, s) != CUMOD_OK) {
        free(s);
        return CUMOD_ENOMEM;
    }
    s->lg = ss->lg;
    cumod__sledger_open_session(s->lg, s);
    *out = s;
    return CUMOD_OK;
}

cumod_session *
cumod__sessions_take(cumod_sessions *ss, uint32_t id)
{
    return cumod__idmap_remove(&ss->by_pipe, id);
}

cumod_session *
cumod__sessions_next(cumod_sessions *ss, size_t *cursor)
{
    return cumod__idmap_next(&ss->by_pipe, cursor, NULL);
}

void
cumod__sessions_fini(cumod_sessions *ss, cumod_list *orphans)
{
    size_t cur = 0;
    cumod_session *s;
    while ((s = cumod__idmap_next(&ss->by_pipe, &cur, NULL)) != NULL)
        cumod__session_free(s, orphans);
    cumod__idmap_fini(&ss->by_pipe);
}

/* Frees every value of m with free(), then the map. */
static void
session_map_free(cumod_idmap *m)
{
    size_t cur = 0;
    void *v;
    while ((v = cumod__idmap_next(m, &cur, NULL)) != NULL)
        free(v);
    cumod__idmap_fini(m);
}

static void
session_ticket_free(cumod_ticket *t, cumod_list *orphans)
{
    cumod__list_splice(orphans, &t->waiters);
    free(t->error);
    free(t);
}

void
cumod__session_free(cumod_session *s, cumod_list *orphans)
{
    size_t cur = 0;
    cumod_ticket *t;

    if (s == NULL)
        return;
    cumod__sledger_close_session(s->lg, s);
    cumod__idmap_fini(&s->live_ids); /* its values are not pointers */
    cumod_seg *g;
    while ((g = cumod__idmap_next(&s->segs, &cur, NULL)) != NULL)
        if (g->fd >= 0)
            close(g->fd);
    cur = 0;
    session_map_free(&s->bufs);
    session_map_free(&s->segs);
    session_map_free(&s->streams);
    while ((t = cumod__idmap_next(&s->tickets, &cur, NULL)) != NULL)
        session_ticket_free(t, orphans);
    cumod__idmap_fini(&s->tickets);
    free(s);
}

int
cumod__session_holds_device_state(const cumod_session *s)
{
    return cumod__idmap_count(&s->bufs) > 0 || cumod__idmap_count(&s->segs) > 0;
}

void
cumod__session_lose_device_state(cumod_session *s, const char *why)
{
    size_t cur = 0;
    snprintf(s->lost_why, sizeof(s->lost_why), "%s", why ? why : "");
    cumod_buf *b;
    cumod_seg *g;
    /* Gone from the executor: gone from the ledger (the handles stay
     * here, answering with why, until freed). */
    while ((b = cumod__idmap_next(&s->bufs, &cur, NULL)) != NULL) {
        if (!b->lost)
            cumod__sledger_buf(s->lg, s, b, 1);
        b->lost = 1;
    }
    cur = 0;
    while ((g = cumod__idmap_next(&s->segs, &cur, NULL)) != NULL) {
        if (!g->lost)
            cumod__sledger_seg(s->lg, s, g, 1);
        g->lost = 1;
    }
}

uint64_t
cumod__session_key(const cumod_session *s, uint32_t index)
{
    return ((uint64_t)s->id << CUMOD_CHAN_STREAM_BITS) | index;
}

cumod_buf *
cumod__session_buf(const cumod_session *s, uint64_t handle)
{
    return cumod__idmap_get(&s->bufs, handle);
}

cumod_seg *
cumod__session_seg(const cumod_session *s, uint64_t handle)
{
    return cumod__idmap_get(&s->segs, handle);
}

cumod_sstream *
cumod__session_stream(const cumod_session *s, uint64_t handle)
{
    return cumod__idmap_get(&s->streams, handle);
}

uint64_t
cumod__session_stream_key(const cumod_session *s, uint64_t handle)
{
    cumod_sstream *t;
    if (handle == 0)
        return cumod__session_key(s, 0);
    t = cumod__session_stream(s, handle);
    return t != NULL ? t->key : 0;
}

cumod_err
cumod__session_stream_keys(const cumod_session *s, uint64_t **keys, size_t *n)
{
    size_t count = cumod__idmap_count(&s->streams) + 1, i = 0, cur = 0;
    uint64_t *k = malloc(count * sizeof(*k));
    cumod_sstream *t;

    if (k == NULL)
        return CUMOD_ENOMEM;
    k[i++] = cumod__session_key(s, 0);
    while ((t = cumod__idmap_next(&s->streams, &cur, NULL)) != NULL)
        k[i++] = t->key;
    *keys = k;
    *n = i;
    return CUMOD_OK;
}

cumod_err
cumod__session_reserve(cumod_session *s, uint64_t size, uint64_t limit,
                       cumod_status *st)
{
    if (limit && (size > limit || s->mem_used > limit - size))
        return cumod__status_set(
            st, CUMOD_EDEVMEM,
            "cannot allocate %llu bytes: this connection holds %llu bytes "
            "and its limit (--session-memory-limit) is %llu",
            (unsigned long long)size, (unsigned long long)s->mem_used,
            (unsigned long long)limit);
    s->mem_used += size;
    return CUMOD_OK;
}

void
cumod__session_unreserve(cumod_session *s, uint64_t size)
{
    s->mem_used -= size;
}

cumod_err
cumod__session_buf_add(cumod_session *s, uint64_t size, uint64_t dptr,
                       cumod_buf **out)
{
    cumod_buf *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return CUMOD_ENOMEM;
    b->handle = s->next_handle;
    b->size = size;
    b->dptr = dptr;
    if (cumod__idmap_set(&s->bufs, b->handle, b) != CUMOD_OK) {
        free(b);
        return CUMOD_ENOMEM;
    }
    s->next_handle++;
    cumod__sledger_buf(s->lg, s, b, 0);
    *out = b;
    return CUMOD_OK;
}

void
cumod__session_buf_remove(cumod_session *s, cumod_buf *b)
{
    if (!b->lost)
        cumod__sledger_buf(s->lg, s, b, 1);
    cumod__idmap_remove(&s->bufs, b->handle);
    s->mem_used -= b->size;
    free(b);
}

cumod_err
cumod__session_seg_add(cumod_session *s, uint64_t size, uint64_t host,
                       const char *name, cumod_seg **out)
{
    cumod_seg *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return CUMOD_ENOMEM;
    g->handle = s->next_handle;
    g->size = size;
    g->host = host;
    g->fd = -1;
    snprintf(g->name, sizeof(g->name), "%s", name ? name : "");
    if (cumod__idmap_set(&s->segs, g->handle, g) != CUMOD_OK) {
        free(g);
        return CUMOD_ENOMEM;
    }
    s->next_handle++;
    cumod__sledger_seg(s->lg, s, g, 0);
    *out = g;
    return CUMOD_OK;
}

void
cumod__session_seg_remove(cumod_session *s, cumod_seg *g)
{
    if (!g->lost)
        cumod__sledger_seg(s->lg, s, g, 1);
    cumod__idmap_remove(&s->segs, g->handle);
    if (g->fd >= 0)
        close(g->fd);
    free(g);
}

cumod_err
cumod__session_stream_add(cumod_session *s, cumod_sstream **out)
{
    cumod_sstream *t;

    if (s->next_stream >= CUMOD_CHAN_RECLAIM)
        return CUMOD_EBUSY;
    if ((t = calloc(1, sizeof(*t))) == NULL)
        return CUMOD_ENOMEM;
    t->handle = s->next_handle;
    t->key = cumod__session_key(s, s->next_stream);
    if (cumod__idmap_set(&s->streams, t->handle, t) != CUMOD_OK) {
        free(t);
        return CUMOD_ENOMEM;
    }
    s->next_handle++;
    s->next_stream++;
    cumod__sledger_stream(s->lg, s, t, 0);
    *out = t;
    return CUMOD_OK;
}

void
cumod__session_stream_remove(cumod_session *s, cumod_sstream *t)
{
    cumod__sledger_stream(s->lg, s, t, 1);
    s->mem_used -= t->ws_bytes; /* the executor frees it with the stream */
    cumod__idmap_remove(&s->streams, t->handle);
    free(t);
}

cumod_ticket *
cumod__session_ticket(const cumod_session *s, uint64_t ticket)
{
    return cumod__idmap_get(&s->tickets, ticket);
}

cumod_err
cumod__session_ticket_new(cumod_session *s, cumod_ticket **out)
{
    cumod_ticket *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return CUMOD_ENOMEM;
    t->ticket = s->next_ticket;
    cumod__list_init(&t->waiters);
    if (cumod__idmap_set(&s->tickets, t->ticket, t) != CUMOD_OK) {
        free(t);
        return CUMOD_ENOMEM;
    }
    s->next_ticket++;
    *out = t;
    return CUMOD_OK;
}

cumod_err
cumod__session_ticket_new_at(cumod_session *s, uint64_t ticket,
                             cumod_ticket **out)
{
    if (cumod__session_ticket(s, ticket) != NULL)
        return CUMOD_EEXIST;
    cumod_ticket *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return CUMOD_ENOMEM;
    t->ticket = ticket;
    cumod__list_init(&t->waiters);
    if (cumod__idmap_set(&s->tickets, ticket, t) != CUMOD_OK) {
        free(t);
        return CUMOD_ENOMEM;
    }
    *out = t;
    return CUMOD_OK;
}

cumod_err
cumod__session_ticket_failed(cumod_session *s, uint64_t ticket,
                             cumod_err status, const char *error)
{
    cumod_ticket *t = cumod__session_ticket(s, ticket);
    cumod_list waiters;
    if (t == NULL) {
        if (cumod__session_ticket_new_at(s, ticket, &t) != CUMOD_OK)
            return CUMOD_ENOMEM;
    } else if (t->done) {
        return CUMOD_OK; /* already kept */
    }
    cumod__list_init(&waiters);
    cumod__session_ticket_done(s, ticket, status, error, &waiters);
    return CUMOD_OK; /* nobody waits on it in the front */
}

void
cumod__session_ticket_forget(cumod_session *s, cumod_ticket *t)
{
    cumod_list none;
    cumod__list_init(&none);
    cumod__idmap_remove(&s->tickets, t->ticket);
    if (t->done && t->status != CUMOD_OK)
        s->nfailed_tickets--;
    session_ticket_free(t, &none); /* nobody waits on a forgotten one */
}

void
cumod__session_ticket_done(cumod_session *s, uint64_t ticket, cumod_err status,
                           const char *error, cumod_list *waiters)
{
    cumod_ticket *t = cumod__session_ticket(s, ticket);
    if (t == NULL)
        return;
    cumod__list_splice(waiters, &t->waiters);
    if (status == CUMOD_OK) {
        /* Success is forgotten at once: a later wait returns at once. */
        t->done = 1;
        cumod__session_ticket_forget(s, t);
        return;
    }
    /* A failure is kept for a later wait to report, the newest
     * CUMOD_SESSION_FAILED_TICKETS of them. */
    t->done = 1;
    t->status = status;
    t->error = error ? strdup(error) : NULL;
    s->nfailed_tickets++;
    while (s->nfailed_tickets > CUMOD_SESSION_FAILED_TICKETS) {
        cumod_ticket *oldest = NULL, *x;
        size_t cur = 0;
        while ((x = cumod__idmap_next(&s->tickets, &cur, NULL)) != NULL)
            if (x->done && (!oldest || x->ticket < oldest->ticket))
                oldest = x;
        if (oldest == NULL)
            break;
        cumod__session_ticket_forget(s, oldest);
    }
}

int
cumod__session_id_state(const cumod_session *s, uint64_t id)
{
    if (id == 0)
        return CUMOD_SESSION_ID_NEW;
    if (cumod__idmap_get(&s->live_ids, id) != NULL)
        return CUMOD_SESSION_ID_LIVE;
    /* libcumod's ids only grow: a new one is past every id answered, and
     * needs no scan (which cost a tenth of the front's instructions per
     * fast-path launch). */
    if (id > s->recent_max)
        return CUMOD_SESSION_ID_NEW;
    for (uint32_t i = 0; i < CUMOD_SESSION_RECENT_IDS; i++)
        if (s->recent_ids[i] == id)
            return CUMOD_SESSION_ID_DONE;
    return CUMOD_SESSION_ID_NEW;
}

cumod_err
cumod__session_id_begin(cumod_session *s, uint64_t id)
{
    /* The map wants a non-NULL value: any will do. */
    if (id != 0 && cumod__idmap_set(&s->live_ids, id, s) != CUMOD_OK)
        return CUMOD_ENOMEM;
    s->requests++;
    return CUMOD_OK;
}

void
cumod__session_id_end(cumod_session *s, uint64_t id)
{
    if (s->requests > 0)
        s->requests--;
    if (id == 0 || cumod__idmap_remove(&s->live_ids, id) == NULL)
        return;
    s->recent_ids[s->recent_at] = id;
    if (id > s->recent_max)
        s->recent_max = id;
    s->recent_at = (s->recent_at + 1) % CUMOD_SESSION_RECENT_IDS;
}

void
cumod__session_placed(cumod_session *s)
{
    cumod__sledger_place(s->lg, s);
}

void
cumod__session_ws_charged(cumod_session *s, cumod_sstream *t)
{
    cumod__sledger_ws(s->lg, s, t);
}

/* next_handle past handle: a replayed one is never given again. */
static void
session_handle_seen(cumod_session *s, uint64_t handle)
{
    if (handle >= s->next_handle)
        s->next_handle = handle + 1;
}

cumod_err
cumod__session_buf_put(cumod_session *s, uint64_t handle, uint64_t size,
                       uint64_t dptr)
{
    if (handle == 0 || cumod__session_buf(s, handle) != NULL)
        return CUMOD_EEXIST;
    cumod_buf *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return CUMOD_ENOMEM;
    *b = (cumod_buf){.handle = handle, .size = size, .dptr = dptr};
    if (cumod__idmap_set(&s->bufs, handle, b) != CUMOD_OK) {
        free(b);
        return CUMOD_ENOMEM;
    }
    s->mem_used += size;
    session_handle_seen(s, handle);
    return CUMOD_OK;
}

cumod_err
cumod__session_seg_put(cumod_session *s, uint64_t handle, uint64_t size,
                       uint64_t host, const char *name)
{
    if (handle == 0 || cumod__session_seg(s, handle) != NULL)
        return CUMOD_EEXIST;
    cumod_seg *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return CUMOD_ENOMEM;
    *g = (cumod_seg){.handle = handle, .size = size, .host = host, .fd = -1};
    snprintf(g->name, sizeof(g->name), "%s", name);
    if (cumod__idmap_set(&s->segs, handle, g) != CUMOD_OK) {
        free(g);
        return CUMOD_ENOMEM;
    }
    session_handle_seen(s, handle);
    return CUMOD_OK;
}

cumod_err
cumod__session_stream_put(cumod_session *s, uint64_t handle, uint64_t key)
{
    uint32_t index = (uint32_t)(key & ((1ull << CUMOD_CHAN_STREAM_BITS) - 1));
    if (handle == 0 || cumod__session_stream(s, handle) != NULL || index == 0 ||
        index >= CUMOD_CHAN_RECLAIM)
        return CUMOD_EEXIST;
    cumod_sstream *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return CUMOD_ENOMEM;
    *t = (cumod_sstream){.handle = handle, .key = key};
    if (cumod__idmap_set(&s->streams, handle, t) != CUMOD_OK) {
        free(t);
        return CUMOD_ENOMEM;
    }
    session_handle_seen(s, handle);
    if (index >= s->next_stream)
        s->next_stream = index + 1;
    return CUMOD_OK;
}
