/* SPDX-License-Identifier: MIT */
#include "front/obs/events.h"

#include <stdlib.h>
#include <string.h>

#include "cumod/errors.h"
#include "common/log.h"

typedef struct ev_waiter {
    cumod_list_node link;
    cumod_req *r;
    uint32_t pipe_id;
    uint64_t after;
    uint32_t max;
    uint64_t until_ms; /* uv time */
} ev_waiter;

static char *
ev_dup(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

static void
ev_rec_free(cumod_event_rec *e)
{
    free(e->module);
    free(e->sha256);
    free(e->old_sha256);
    free(e->detail);
    memset(e, 0, sizeof(*e));
}

void
cumod__events_init(cumod_events *ev, uv_loop_t *loop)
{
    memset(ev, 0, sizeof(*ev));
    cumod__list_init(&ev->waiters);
    uv_timer_init(loop, &ev->timer);
    ev->timer.data = ev;
}

/* The oldest event still kept (last + 1 when none). */
static uint64_t
ev_first(const cumod_events *ev)
{
    return ev->last >= CUMOD_EVENTS_KEPT ? ev->last - CUMOD_EVENTS_KEPT + 1 : 1;
}

/* Answers r with the events after `after`, at most max. */
static void
ev_answer(cumod_events *ev, cumod_req *r, uint64_t after, uint32_t max)
{
    Cumod__Reply reply = CUMOD__REPLY__INIT;
    Cumod__EventsReply er = CUMOD__EVENTS_REPLY__INIT;
    Cumod__Event evs[CUMOD_EVENTS_PER_REPLY];
    Cumod__Event *ptrs[CUMOD_EVENTS_PER_REPLY];
    uint64_t from = after + 1 > ev_first(ev) ? after + 1 : ev_first(ev);
    size_t n = 0;

    if (after >= ev->last)
        from = ev->last + 1; /* none: "from now" */
    for (uint64_t s = from; s <= ev->last && n < max; s++, n++) {
        const cumod_event_rec *e = &ev->ring[s % CUMOD_EVENTS_KEPT];
        Cumod__Event *x = &evs[n];
        cumod__event__init(x);
        x->seq = e->seq;
        x->kind = (Cumod__EventKind)e->kind;
        x->module = e->module ? e->module : (char *)"";
        x->generation = e->generation;
        x->old_generation = e->old_generation;
        x->sha256 = e->sha256 ? e->sha256 : (char *)"";
        x->old_sha256 = e->old_sha256 ? e->old_sha256 : (char *)"";
        x->detail = e->detail ? e->detail : (char *)"";
        x->unix_ms = e->unix_ms;
        ptrs[n] = x;
    }
    er.n_events = n;
    er.events = ptrs;
    er.last = ev->last;
    er.first = ev_first(ev);
    reply.body_case = CUMOD__REPLY__BODY_EVENTS;
    reply.events = &er;
    cumod__req_answer(r, CUMOD_OK, NULL, &reply);
}

static void ev_timer_update(cumod_events *ev);

static void
ev_on_timer(uv_timer_t *h)
{
    cumod_events *ev = h->data;
    uint64_t now = uv_now(h->loop);
    CUMOD_LIST_FOREACH_SAFE(&ev->waiters, n)
    {
        ev_waiter *w = CUMOD_CONTAINER_OF(n, ev_waiter, link);
        if (now < w->until_ms)
            continue;
        cumod__list_remove(n);
        ev_answer(ev, w->r, w->after, w->max); /* nothing came: none */
        free(w);
    }
    ev_timer_update(ev);
}

/* The timer runs (every 50 ms) while something waits. */
static void
ev_timer_update(cumod_events *ev)
{
    int want = !cumod__list_empty(&ev->waiters) && !ev->closed;
    if (want && !ev->timer_on)
        uv_timer_start(&ev->timer, ev_on_timer, 50, 50);
    else if (!want && ev->timer_on)
        uv_timer_stop(&ev->timer);
    ev->timer_on = want;
}

void
cumod__events_add(cumod_events *ev, const cumod_catalog_event *e)
{
    if (ev->closed)
        return;
    uint64_t seq = ++ev->last;
    cumod_event_rec *x = &ev->ring[seq % CUMOD_EVENTS_KEPT];
    ev_rec_free(x);
    x->seq = seq;
    x->kind = (int)e->kind;
    x->module = ev_dup(e->module);
    x->sha256 = ev_dup(e->sha256);
    x->old_sha256 = ev_dup(e->old_sha256);
    x->detail = ev_dup(e->detail);
    x->generation = e->generation;
    x->old_generation = e->old_generation;
    x->unix_ms = cumod__wall_ms();
    CUMOD_LIST_FOREACH_SAFE(&ev->waiters, n)
    {
        ev_waiter *w = CUMOD_CONTAINER_OF(n, ev_waiter, link);
        cumod__list_remove(n);
        ev_answer(ev, w->r, w->after, w->max);
        free(w);
    }
    ev_timer_update(ev);
}

void
cumod__events_watch(cumod_events *ev, cumod_req *r, uint32_t max_wait_ms)
{
    const Cumod__WatchEvents *q = r->msg->watch_events;
    uint32_t max = q->max_events ? q->max_events : CUMOD_EVENTS_PER_REPLY;
    uint32_t wait = q->max_wait_ms;
    ev_waiter *w;

    if (max > CUMOD_EVENTS_PER_REPLY)
        max = CUMOD_EVENTS_PER_REPLY;
    if (wait > max_wait_ms) {
        cumod__req_failf(r, CUMOD_EINVAL,
                         "a wait of %u ms is more than this cumodd allows "
                         "(--max-watch-wait %u): ask again instead",
                         wait, max_wait_ms);
        return;
    }
    /* A number past the last but "from now" (2^64-1) is a previous
     * cumodd's: this one's numbers started again, all of them are new. */
    uint64_t after = q->after;
    if (after > ev->last && after != UINT64_MAX)
        after = 0;
    /* Something to say now, or nothing to wait for. */
    if (after < ev->last || wait == 0 || ev->closed) {
        ev_answer(ev, r, after, max);
        return;
    }
    if ((w = calloc(1, sizeof(*w))) == NULL) {
        cumod__req_failf(r, CUMOD_ENOMEM, "out of memory");
        return;
    }
    w->r = r;
    w->pipe_id = r->pipe_id;
    /* "From now" (or a number past the last) means after the last one. */
    w->after = after > ev->last ? ev->last : after;
    w->max = max;
    w->until_ms = uv_now(ev->timer.loop) + wait;
    cumod__list_append(&ev->waiters, &w->link);
    ev_timer_update(ev);
}

void
cumod__events_conn_closed(cumod_events *ev, uint32_t pipe_id)
{
    CUMOD_LIST_FOREACH_SAFE(&ev->waiters, n)
    {
        ev_waiter *w = CUMOD_CONTAINER_OF(n, ev_waiter, link);
        if (w->pipe_id != pipe_id)
            continue;
        cumod__list_remove(n);
        cumod__req_drop(w->r); /* nobody is left to hear it */
        free(w);
    }
    ev_timer_update(ev);
}

void
cumod__events_close(cumod_events *ev, cumod_err code, const char *msg)
{
    if (ev->closed)
        return;
    CUMOD_LIST_FOREACH_SAFE(&ev->waiters, n)
    {
        ev_waiter *w = CUMOD_CONTAINER_OF(n, ev_waiter, link);
        cumod__list_remove(n);
        cumod__req_failf(w->r, code, "%s", msg);
        free(w);
    }
    ev->closed = 1;
    ev_timer_update(ev);
    uv_close((uv_handle_t *)&ev->timer, NULL);
    for (size_t i = 0; i < CUMOD_EVENTS_KEPT; i++)
        ev_rec_free(&ev->ring[i]);
}
