/* SPDX-License-Identifier: MIT */
/*
 * A session's calls in flight, and its release once the last is back.
 * The release goes through the session's reclaim queue (channel.h): its
 * streams are closed behind their work, then its buffers freed and its
 * segments unmapped, each once that work has completed. Nothing in the
 * executor waits for it, so a session closing with a kernel still running
 * holds up nobody else. The daemon's last call back while it drains
 * signals f->drained: the front stops from there, not from here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumod/errors.h"
#include "front/front.h"
#include "front/units/direct.h"
#include "common/log.h"

void
cumod__front_fail_all(cumod_list *list, cumod_err code, const char *msg)
{
    for (cumod_list_node *n; (n = cumod__list_pop(list)) != NULL;)
        cumod__req_answer(CUMOD_CONTAINER_OF(n, cumod_req, link), code, msg,
                          NULL);
}

/* A command with u64 keys after it, sent without waiting for its reply. */
static void
calls_send_keys(cumod_xc *xc, uint32_t op, const void *head, size_t hlen,
                const uint64_t *keys, size_t n)
{
    size_t len = hlen + n * sizeof(uint64_t);
    char *msg = malloc(len);
    if (msg == NULL) {
        CUMOD_LOGE("CUMOD-NOMEM", "a session's release is incomplete");
        return;
    }
    memcpy(msg, head, hlen);
    if (n)
        memcpy(msg + hlen, keys, n * sizeof(uint64_t));
    (void)cumod__xc_call(xc, op, msg, len, -1, NULL, NULL);
    free(msg);
}

/* Releases what s holds in the executor, in stream order, then frees it. */
void
cumod__front_release(cumod_front *f, cumod_session *s)
{
    uint64_t bytes = s->mem_used, *keys = NULL;
    size_t nkeys = 0, nbuf = cumod__idmap_count(&s->bufs);
    size_t nseg = cumod__idmap_count(&s->segs);
    uint64_t reclaim = cumod__session_key(s, CUMOD_CHAN_RECLAIM);
    cumod_list orphans;
    cumod_xc *xc = s->unit->xc;

    cumod__ring_close(s->ring);
    s->ring = NULL;
    if (cumod__unit_ready(s->unit) &&
        cumod__session_stream_keys(s, &keys, &nkeys) == CUMOD_OK) {
        cumod_chan_streams close = {.reclaim = reclaim, .count = nkeys};
        size_t cur = 0;
        cumod_buf *b;
        cumod_seg *g;

        calls_send_keys(xc, CUMOD_CHAN_STREAMS_CLOSE, &close, sizeof(close),
                        keys, nkeys);
        while ((b = cumod__idmap_next(&s->bufs, &cur, NULL)) != NULL) {
            if (b->lost)
                continue; /* gone with an earlier executor */
            cumod_chan_free fr = {.dptr = b->dptr, .reclaim = reclaim};
            (void)cumod__xc_call(xc, CUMOD_CHAN_FREE, &fr, sizeof(fr), -1, NULL,
                                 NULL);
        }
        cur = 0;
        while ((g = cumod__idmap_next(&s->segs, &cur, NULL)) != NULL) {
            if (g->lost)
                continue;
            cumod_chan_segment sg = {
                .size = g->size, .host = g->host, .reclaim = reclaim};
            (void)cumod__xc_call(xc, CUMOD_CHAN_SEG_UNMAP, &sg, sizeof(sg), -1,
                                 NULL, NULL);
        }
        /* Last, the end of the session's reclaim queue, after all it holds. */
        cumod_chan_streams last = {.reclaim = reclaim, .count = 0};
        (void)cumod__xc_call(xc, CUMOD_CHAN_STREAMS_CLOSE, &last, sizeof(last),
                             -1, NULL, NULL);
        free(keys);
    } else {
        nkeys = 0;
    }
    CUMOD_LOGI("CUMOD-SESSION",
               "session %u (pid %d) closed: released %zu buffers (%llu "
               "bytes), %zu segments, %zu streams",
               s->id, s->pid, nbuf, (unsigned long long)bytes, nseg, nkeys);
    cumod__list_init(&orphans);
    cumod__unit_leave(s->unit, s);
    cumod__session_free(s, &orphans);
    cumod__front_fail_all(&orphans, CUMOD_ECLOSED, "the session closed");
}

void
cumod__front_call_begin(cumod_front *f, cumod_session *s)
{
    s->inflight++;
    f->inflight++;
    cumod__fdirect_session_calls(s);
}

void
cumod__front_call_end(cumod_front *f, cumod_session *s)
{
    f->inflight--;
    --s->inflight;
    cumod__fdirect_session_calls(s);
    if (s->inflight == 0 && s->closed)
        cumod__front_release(f, s);
    if (f->inflight == 0 && f->draining)
        f->drained(f);
}

/* --- An adopted executor's old sessions ------------------------------------
 */

/* The sessions a dead front left in an executor this front adopted: their
 * rings detached first (their direct launches answered), then released as
 * a closed session's are, then the old front's modules let go. */
typedef struct adopt_release {
    cumod_front *f;
    cumod_unit *u;
    cumod_session **ss;
    size_t n, waiting;
} adopt_release;

static void
adopt_forgot(void *arg, const cumod_chan_hdr *hdr, const void *payload,
             size_t len)
{
    (void)arg;
    uint64_t n = 0;
    if (hdr->status == CUMOD_OK && payload != NULL && len >= sizeof(n))
        memcpy(&n, payload, sizeof(n));
    CUMOD_LOGN("CUMOD-EXEC-ADOPT",
               "the adopted executor let %llu modules of the old front go",
               (unsigned long long)n);
}

static void
adopt_detached(void *arg, const cumod_chan_hdr *hdr, const void *payload,
               size_t len)
{
    adopt_release *a = arg;
    (void)hdr, (void)payload, (void)len;
    if (--a->waiting > 0)
        return;
    size_t bufs = 0;
    for (size_t i = 0; i < a->n; i++) {
        bufs += cumod__idmap_count(&a->ss[i]->bufs);
        if (cumod__unit_ready(a->u))
            cumod__front_release(a->f, a->ss[i]);
        else { /* its executor went meanwhile: nothing left to release */
            cumod__unit_leave(a->u, a->ss[i]);
            cumod__session_free(a->ss[i], NULL);
        }
    }
    CUMOD_LOGN("CUMOD-EXEC-ADOPT",
               "released what the old front's sessions held: %zu sessions, "
               "%zu buffers",
               a->n, bufs);
    if (cumod__unit_ready(a->u))
        (void)cumod__xc_call(a->u->xc, CUMOD_CHAN_FORGET, NULL, 0, -1,
                             adopt_forgot, NULL);
    free(a->ss);
    free(a);
}

void
cumod__front_adopted(cumod_unit *u, int ledger_fd)
{
    cumod_front *f = u->f;
    cumod_sessions old;
    cumod_status st;
    uint64_t records = 0;
    char why[256] = "";
    adopt_release *a = calloc(1, sizeof(*a));

    cumod__sessions_init(&old);
    if (a == NULL || cumod__sledger_replay(ledger_fd, &old, &records, why,
                                           sizeof(why), &st) != CUMOD_OK) {
        CUMOD_LOGW("CUMOD-EXEC-ADOPT",
                   "the old front's sessions' ledger could not be read (%s): "
                   "what they held stays in the executor",
                   a == NULL ? "out of memory" : st.msg);
        free(a);
        cumod__sessions_fini(&old, NULL);
        close(ledger_fd);
        return;
    }
    close(ledger_fd);
    if (why[0] != '\0')
        CUMOD_LOGW("CUMOD-EXEC-ADOPT",
                   "the old front's sessions' ledger ends early: %s", why);
    a->f = f;
    a->u = u;
    size_t n = 0, cur = 0;
    cumod_session *s;
    while (cumod__sessions_next(&old, &cur) != NULL)
        n++;
    a->ss = calloc(n ? n : 1, sizeof(*a->ss));
    if (a->ss == NULL) {
        free(a);
        cumod__sessions_fini(&old, NULL);
        return;
    }
    /* Out of the replayed store, each in this front's unit (released as
     * a session of it), its ring detached first. */
    cur = 0;
    while ((s = cumod__sessions_next(&old, &cur)) != NULL)
        a->ss[a->n++] = s;
    a->waiting = a->n + 1;
    for (size_t i = 0; i < a->n; i++) {
        cumod__sessions_take(&old, a->ss[i]->id);
        cumod__unit_join(u, a->ss[i]);
        cumod_chan_ring r = {.session = a->ss[i]->id};
        if (cumod__xc_call(u->xc, CUMOD_CHAN_RING_DETACH, &r, sizeof(r), -1,
                           adopt_detached, a) != CUMOD_OK)
            a->waiting--;
    }
    cumod__sessions_fini(&old, NULL);
    adopt_detached(a, NULL, NULL, 0); /* the +1: done if nothing waits */
}
