/* SPDX-License-Identifier: MIT */
/*
 * The handler of OpenRing (handlers.h): the session's shared-memory ring,
 * opened by ring.c, replacing one it had.
 */
#include "cumod/errors.h"
#include "front/units/direct.h"
#include "front/front.h"
#include "front/serve/handlers.h"

/* OpenRing: the session's ring, replacing one it had. */
void
cumod__h_open_ring(cumod_front *f, cumod_req *r, cumod_session *s)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__RingReply rr = CUMOD__RING_REPLY__INIT;
    cumod_status st;
    cumod_ring *g;

    if (cumod__ring_open(&f->rings, f->fdpass, r->msg->open_ring, s->id, s->uid,
                         s->gid, s->pid, &g, &st) != CUMOD_OK) {
        cumod__req_fail(r, &st);
        return;
    }
    cumod__ring_close(s->ring);
    s->ring = g;
    cumod__ring_sizes(g, &rr.sq_size, &rr.cq_size);
    reply.body_case = CUMOD__REPLY__BODY_RING;
    reply.ring = &rr;
    cumod__req_answer(r, CUMOD_OK, NULL, &reply);
    /* A ring by name is not sealed: the front reads it, its launches are
     * never direct. Said, since the client does not see it (its handover
     * failed, or it was told not to hand over). */
    if (!cumod__ring_sealed(g) && f->cfg->direct_launches)
        CUMOD_LOGN("CUMOD-RING",
                   "session %u (pid %d uid %d) opened its ring by name, not "
                   "handed over: the front serves its launches (no direct "
                   "launches for it)",
                   s->id, s->pid, s->uid);
    /* Its executor reads it from now on, where it may (direct.h). */
    cumod__fdirect_ring_opened(s);
}
