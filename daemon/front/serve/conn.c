/* SPDX-License-Identifier: MIT */
/*
 * Sessions as connections come and go: made at a connection's first
 * request (joining its unit), released in the executor when it closes and
 * its calls are back (calls.c), their device state lost with their
 * unit's executor.
 */
#include <stdio.h>

#include "cumod/errors.h"
#include "front/front.h"
#include "common/log.h"

cumod_err
cumod__front_session(cumod_front *f, cumod_req *r, cumod_session **out,
                     cumod_status *st)
{
    cumod_session *s = cumod__sessions_get(&f->sessions, r->pipe_id);
    int uid, gid, pid;

    if (s != NULL) {
        *out = s;
        return CUMOD_OK;
    }
    /* Made on the loop, after checking the pipe is still there: its close,
     * if it comes, is then handled after this. */
    if (cumod__req_peer(r, &uid, &gid, &pid) != CUMOD_OK)
        return cumod__status_set(st, CUMOD_ECLOSED, "the connection is closed");
    /* Its domain: by the socket it came by, its uid or gid (unit.h). */
    int listener = f->srv != NULL && !cumod__ring_req(r)
                       ? cumod__server_pipe_listener(f->srv, r->pipe_id)
                       : 0;
    cumod_unit *u = cumod__unit_for_session(f, listener, uid, gid, -1);
    if (u == NULL || cumod__sessions_add(&f->sessions, r->pipe_id, uid, gid,
                                         pid, &s) != CUMOD_OK)
        return cumod__status_set(st, CUMOD_ENOMEM, "out of memory");
    cumod__unit_join(u, s);
    CUMOD_LOGD("CUMOD-SESSION",
               "session %u opened: pid %d uid %d gid %d, domain %s, device %d",
               s->id, pid, uid, gid, s->domain, s->device);
    *out = s;
    return CUMOD_OK;
}

void
cumod__front_conn_closed(void *arg, uint32_t pipe_id)
{
    cumod_front *f = arg;
    cumod__events_conn_closed(&f->events, pipe_id); /* its watches */
    cumod_session *s = cumod__sessions_take(&f->sessions, pipe_id);
    if (s == NULL)
        return; /* it never made a request */
    s->closed = 1;
    /* Its ring goes with its connection, now: nothing more comes in. */
    cumod__ring_close(s->ring);
    s->ring = NULL;
    if (s->inflight == 0)
        cumod__front_release(f, s);
}

void
cumod__front_sessions_lost(cumod_front *f, cumod_unit *u, const char *why)
{
    size_t cur = 0;
    cumod_session *s;
    /* Sessions stay connected: their buffers and segments answer
     * CUMOD_ECTXLOST until freed, their streams are made again on first
     * use, and new allocations work. Other units' sessions lose nothing. */
    while ((s = cumod__sessions_next(&f->sessions, &cur)) != NULL)
        if (s->unit == u)
            cumod__session_lose_device_state(s, why);
}
