/* SPDX-License-Identifier: MIT */
/* The sessions' ledger (sledger.h). */
#include "front/state/sledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "front/state/session.h"

#define SLEDGER_START ((size_t)64 << 10)

static void sledger_compact(cumod_sledger *lg);

static void
sledger_put(cumod_sledger *lg, uint16_t type, const void *p, uint32_t len)
{
    cumod_status st;
    if (lg == NULL || lg->broken)
        return;
    if (cumod__ledger_append(&lg->l, type, p, len, &st) != CUMOD_OK) {
        /* Sessions go on; only a restart would lose them. */
        lg->broken = 1;
        CUMOD_LOGE("CUMOD-LEDGER",
                   "the sessions' ledger stops here (%s): a front started "
                   "after this one could not take the sessions over",
                   st.msg);
        return;
    }
    if (lg->l.len > lg->min && lg->l.len > 2 * lg->base)
        sledger_compact(lg);
}

/* --- what the store writes ---------------------------------------------- */

void
cumod__sledger_open_session(cumod_sledger *lg, const cumod_session *s)
{
    cumod_slr_open r = {
        .id = s->id, .uid = s->uid, .gid = s->gid, .pid = s->pid};
    sledger_put(lg, CUMOD_SLR_OPEN, &r, sizeof(r));
}

void
cumod__sledger_place(cumod_sledger *lg, const cumod_session *s)
{
    cumod_slr_place r = {.id = s->id, .device = s->device};
    snprintf(r.domain, sizeof(r.domain), "%s", s->domain);
    sledger_put(lg, CUMOD_SLR_PLACE, &r, sizeof(r));
}

void
cumod__sledger_close_session(cumod_sledger *lg, const cumod_session *s)
{
    cumod_slr_id r = {.id = s->id};
    sledger_put(lg, CUMOD_SLR_CLOSE, &r, sizeof(r));
}

static void
sledger_del(cumod_sledger *lg, uint16_t type, uint32_t id, uint64_t handle)
{
    cumod_slr_handle r = {.id = id, .handle = handle};
    sledger_put(lg, type, &r, sizeof(r));
}

void
cumod__sledger_buf(cumod_sledger *lg, const cumod_session *s,
                   const cumod_buf *b, int gone)
{
    if (gone) {
        sledger_del(lg, CUMOD_SLR_BUF_DEL, s->id, b->handle);
        return;
    }
    cumod_slr_buf r = {
        .id = s->id, .handle = b->handle, .size = b->size, .dptr = b->dptr};
    sledger_put(lg, CUMOD_SLR_BUF, &r, sizeof(r));
}

void
cumod__sledger_seg(cumod_sledger *lg, const cumod_session *s,
                   const cumod_seg *g, int gone)
{
    if (gone) {
        sledger_del(lg, CUMOD_SLR_SEG_DEL, s->id, g->handle);
        return;
    }
    cumod_slr_seg r = {
        .id = s->id, .handle = g->handle, .size = g->size, .host = g->host};
    snprintf(r.name, sizeof(r.name), "%s", g->name);
    sledger_put(lg, CUMOD_SLR_SEG, &r, sizeof(r));
}

void
cumod__sledger_stream(cumod_sledger *lg, const cumod_session *s,
                      const cumod_sstream *t, int gone)
{
    if (gone) {
        sledger_del(lg, CUMOD_SLR_STREAM_DEL, s->id, t->handle);
        return;
    }
    cumod_slr_stream r = {.id = s->id,
                          .index = (uint32_t)(t->key & 0xffffffffu),
                          .handle = t->handle,
                          .key = t->key};
    sledger_put(lg, CUMOD_SLR_STREAM, &r, sizeof(r));
}

void
cumod__sledger_ws(cumod_sledger *lg, const cumod_session *s,
                  const cumod_sstream *t)
{
    cumod_slr_ws r = {.id = s->id,
                      .handle = t ? t->handle : 0,
                      .bytes = t ? t->ws_bytes : s->default_ws_bytes};
    sledger_put(lg, CUMOD_SLR_WS, &r, sizeof(r));
}

/* --- compaction ---------------------------------------------------------- */

/* Every record that makes s as it is now. */
static void
sledger_snapshot(cumod_sledger *lg, cumod_session *s)
{
    size_t cur = 0;
    cumod__sledger_open_session(lg, s);
    cumod__sledger_place(lg, s);
    cumod_buf *b;
    while ((b = cumod__idmap_next(&s->bufs, &cur, NULL)) != NULL)
        if (!b->lost)
            cumod__sledger_buf(lg, s, b, 0);
    cur = 0;
    cumod_seg *g;
    while ((g = cumod__idmap_next(&s->segs, &cur, NULL)) != NULL)
        if (!g->lost)
            cumod__sledger_seg(lg, s, g, 0);
    cur = 0;
    cumod_sstream *t;
    while ((t = cumod__idmap_next(&s->streams, &cur, NULL)) != NULL) {
        cumod__sledger_stream(lg, s, t, 0);
        if (t->ws_bytes != 0)
            cumod__sledger_ws(lg, s, t);
    }
    if (s->default_ws_bytes != 0)
        cumod__sledger_ws(lg, s, NULL);
}

/* A new ledger of the live sessions only; the old one is let go once the
 * executors have the new one (on_new). */
static void
sledger_compact(cumod_sledger *lg)
{
    cumod_sledger next = *lg;
    cumod_status st;
    size_t was = lg->l.len;
    if (cumod__ledger_create(&next.l, "cumodd-ledger", SLEDGER_START, &st) !=
        CUMOD_OK) {
        CUMOD_LOGW("CUMOD-LEDGER",
                   "the sessions' ledger cannot be compacted (%s): it grows "
                   "on",
                   st.msg);
        lg->base = lg->l.len; /* not tried again before it doubles */
        return;
    }
    /* Written with compaction off: a snapshot never compacts itself. */
    next.min = SIZE_MAX;
    size_t cur = 0;
    cumod_session *s;
    while ((s = cumod__sessions_next(lg->ss, &cur)) != NULL)
        sledger_snapshot(&next, s);
    if (next.broken) {
        cumod__ledger_close(&next.l);
        lg->base = lg->l.len;
        return;
    }
    next.min = lg->min;
    next.base = next.l.len;
    next.compactions = lg->compactions + 1;
    cumod__ledger_close(&lg->l);
    *lg = next;
    CUMOD_LOGD("CUMOD-LEDGER",
               "the sessions' ledger compacted: %zu bytes to %zu (%llu live "
               "records)",
               was, lg->l.len, (unsigned long long)lg->l.records);
    if (lg->on_new != NULL)
        lg->on_new(lg->arg, lg->l.fd);
}

cumod_err
cumod__sledger_open(cumod_sledger *lg, cumod_sessions *ss, cumod_status *st)
{
    memset(lg, 0, sizeof(*lg));
    if (cumod__ledger_create(&lg->l, "cumodd-ledger", SLEDGER_START, st) !=
        CUMOD_OK)
        return st->code;
    lg->ss = ss;
    lg->min = CUMOD_SLEDGER_MIN;
    lg->base = lg->l.len;
    ss->lg = lg;
    return CUMOD_OK;
}

void
cumod__sledger_close(cumod_sledger *lg)
{
    if (lg->ss != NULL && lg->ss->lg == lg)
        lg->ss->lg = NULL;
    cumod__ledger_close(&lg->l);
    memset(lg, 0, sizeof(*lg));
}

/* --- replay -------------------------------------------------------------- */

typedef struct sledger_rep {
    cumod_sessions *ss;
    char *why;
    size_t whylen;
} sledger_rep;

static int
rep_bad(sledger_rep *r, uint64_t seq, const char *what, uint32_t id)
{
    snprintf(r->why, r->whylen, "record %llu: %s (session %u)",
             (unsigned long long)seq, what, id);
    return 1;
}

/* The record's payload of exactly len bytes, copied into out; 0 if the
 * length is not the type's. */
#define REP_TAKE(out, p, len) ((len) == sizeof(out) && memcpy(&(out), p, len))

static int
rep_one(void *arg, uint64_t seq, uint16_t type, const void *p, uint32_t len)
{
    sledger_rep *r = arg;
    cumod_session *s;
    union {
        cumod_slr_open o;
        cumod_slr_place pl;
        cumod_slr_id i;
        cumod_slr_buf b;
        cumod_slr_handle h;
        cumod_slr_seg g;
        cumod_slr_stream t;
        cumod_slr_ws w;
    } u;
    uint32_t id;

    if (len < sizeof(uint32_t))
        return rep_bad(r, seq, "too short", 0);
    memcpy(&id, p, sizeof(id));
    if (type == CUMOD_SLR_OPEN) {
        if (!REP_TAKE(u.o, p, len))
            return rep_bad(r, seq, "an opening of the wrong size", id);
        if (cumod__sessions_get(r->ss, id) != NULL)
            return rep_bad(r, seq, "opened twice", id);
        return cumod__sessions_add(r->ss, id, u.o.uid, u.o.gid, u.o.pid, &s) !=
               CUMOD_OK;
    }
    if ((s = cumod__sessions_get(r->ss, id)) == NULL)
        return rep_bad(r, seq, "a session never opened", id);
    switch (type) {
    case CUMOD_SLR_PLACE:
        if (!REP_TAKE(u.pl, p, len))
            return rep_bad(r, seq, "a place of the wrong size", id);
        u.pl.domain[sizeof(u.pl.domain) - 1] = '\0';
        s->device = u.pl.device;
        snprintf(s->domain, sizeof(s->domain), "%s", u.pl.domain);
        return 0;
    case CUMOD_SLR_CLOSE:
        cumod__session_free(cumod__sessions_take(r->ss, id), NULL);
        return 0;
    case CUMOD_SLR_BUF:
        if (!REP_TAKE(u.b, p, len) ||
            cumod__session_buf_put(s, u.b.handle, u.b.size, u.b.dptr) !=
                CUMOD_OK)
            return rep_bad(r, seq, "a buffer that cannot be", id);
        return 0;
    case CUMOD_SLR_SEG:
        if (!REP_TAKE(u.g, p, len))
            return rep_bad(r, seq, "a segment of the wrong size", id);
        u.g.name[sizeof(u.g.name) - 1] = '\0';
        if (cumod__session_seg_put(s, u.g.handle, u.g.size, u.g.host,
                                   u.g.name) != CUMOD_OK)
            return rep_bad(r, seq, "a segment that cannot be", id);
        return 0;
    case CUMOD_SLR_STREAM:
        if (!REP_TAKE(u.t, p, len) ||
            cumod__session_stream_put(s, u.t.handle, u.t.key) != CUMOD_OK)
            return rep_bad(r, seq, "a stream that cannot be", id);
        return 0;
    case CUMOD_SLR_WS:
        if (!REP_TAKE(u.w, p, len))
            return rep_bad(r, seq, "a workspace of the wrong size", id);
        if (u.w.handle == 0) {
            s->default_ws_bytes = u.w.bytes;
        } else {
            cumod_sstream *t = cumod__session_stream(s, u.w.handle);
            if (t == NULL)
                return rep_bad(r, seq, "a workspace of no stream", id);
            t->ws_bytes = u.w.bytes;
        }
        s->mem_used += u.w.bytes;
        return 0;
    case CUMOD_SLR_BUF_DEL:
    case CUMOD_SLR_SEG_DEL:
    case CUMOD_SLR_STREAM_DEL:
        if (!REP_TAKE(u.h, p, len))
            return rep_bad(r, seq, "a removal of the wrong size", id);
        if (type == CUMOD_SLR_BUF_DEL) {
            cumod_buf *b = cumod__session_buf(s, u.h.handle);
            if (b == NULL)
                return rep_bad(r, seq, "a buffer freed twice", id);
            cumod__session_buf_remove(s, b);
        } else if (type == CUMOD_SLR_SEG_DEL) {
            cumod_seg *g = cumod__session_seg(s, u.h.handle);
            if (g == NULL)
                return rep_bad(r, seq, "a segment unmapped twice", id);
            cumod__session_seg_remove(s, g);
        } else {
            cumod_sstream *t = cumod__session_stream(s, u.h.handle);
            if (t == NULL)
                return rep_bad(r, seq, "a stream destroyed twice", id);
            cumod__session_stream_remove(s, t);
        }
        return 0;
    }
    return rep_bad(r, seq, "a record of an unknown type", id);
}

cumod_err
cumod__sledger_replay(int fd, cumod_sessions *ss, uint64_t *records, char *why,
                      size_t whylen, cumod_status *st)
{
    char bad[200] = "";
    sledger_rep r = {.ss = ss, .why = bad, .whylen = sizeof(bad)};
    size_t good;
    /* The store replayed into writes no ledger of its own. */
    cumod_sledger *keep = ss->lg;
    ss->lg = NULL;
    cumod_err rv =
        cumod__ledger_replay(fd, rep_one, &r, records, &good, why, whylen, st);
    ss->lg = keep;
    if (rv == CUMOD_EINTERNAL)
        return cumod__status_set(st, CUMOD_EPROTO,
                                 "the sessions' ledger makes no sense at %s",
                                 bad[0] ? bad : "a record (out of memory)");
    return rv;
}
