/* SPDX-License-Identifier: MIT */
/* Change events: the WatchEvents long poll (daemon/front/obs/events.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

static const char *const event_names[] = {
    [CUMOD_EVENT_CATALOGUED] = "catalogued",
    [CUMOD_EVENT_LOADED] = "loaded",
    [CUMOD_EVENT_RELOADED] = "reloaded",
    [CUMOD_EVENT_LOAD_FAILED] = "load-failed",
    [CUMOD_EVENT_EVICTED] = "evicted",
    [CUMOD_EVENT_UNLOADED] = "unloaded",
    [CUMOD_EVENT_REMOVED] = "removed",
    [CUMOD_EVENT_QUARANTINED] = "quarantined",
    [CUMOD_EVENT_UNQUARANTINED] = "unquarantined",
    [CUMOD_EVENT_EXECUTOR_RESTARTED] = "executor-restarted",
};

const char *
cumod_event_kind_name(cumod_event_kind kind)
{
    if ((int)kind <= 0 ||
        (size_t)kind >= sizeof(event_names) / sizeof(event_names[0]) ||
        event_names[kind] == NULL)
        return "unknown";
    return event_names[kind];
}

static void
events_copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

int
cumod_events_wait(cumod_client *c, uint64_t *after, unsigned timeout_ms,
                  cumod_event *out, size_t cap, size_t *n, uint64_t *missed)
{
    Cumod__Request req = CUMOD__REQUEST__INIT;
    Cumod__WatchEvents w = CUMOD__WATCH_EVENTS__INIT;
    Cumod__Reply *reply = NULL;
    int rv;

    if (n != NULL)
        *n = 0;
    if (missed != NULL)
        *missed = 0;
    if (c == NULL || after == NULL || n == NULL || (cap > 0 && out == NULL))
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_events_wait: NULL argument");
    if (timeout_ms > 60000)
        return cumod__client_set_error(CUMOD_EINVAL,
                                       "cumod_events_wait: timeout_ms %u is "
                                       "more than 60000: call again instead",
                                       timeout_ms);
    /* cap 0: no events, only where the numbering is. */
    w.after = cap > 0 ? *after : CUMOD_EVENTS_NOW;
    w.max_wait_ms = cap > 0 ? timeout_ms : 0;
    w.max_events = cap > 256 ? 256 : (uint32_t)(cap > 0 ? cap : 1);
    req.body_case = CUMOD__REQUEST__BODY_WATCH_EVENTS;
    req.watch_events = &w;
    /* The reply may take the whole wait: the client's timeout on top. */
    rv = cumod__client_call_timed(c, &req, NULL, &reply, 0,
                                  (int)timeout_ms + c->timeout_ms);
    if (rv != CUMOD_OK)
        return rv;
    if (reply->body_case != CUMOD__REPLY__BODY_EVENTS) {
        cumod__reply__free_unpacked(reply, NULL);
        return cumod__client_set_error(CUMOD_EPROTO,
                                       "cumod_events_wait: cumodd answered "
                                       "with another kind of reply");
    }
    const Cumod__EventsReply *er = reply->events;
    if (missed != NULL && *after != CUMOD_EVENTS_NOW && er->first > *after + 1)
        *missed = er->first - *after - 1;
    size_t k = 0;
    for (; k < er->n_events && k < cap; k++) {
        const Cumod__Event *e = er->events[k];
        cumod_event *x = &out[k];
        memset(x, 0, sizeof(*x));
        x->seq = e->seq;
        x->kind = (cumod_event_kind)e->kind;
        events_copy(x->module, sizeof(x->module), e->module);
        x->generation = e->generation;
        x->old_generation = e->old_generation;
        events_copy(x->sha256, sizeof(x->sha256), e->sha256);
        events_copy(x->old_sha256, sizeof(x->old_sha256), e->old_sha256);
        events_copy(x->detail, sizeof(x->detail), e->detail);
        x->unix_ms = e->unix_ms;
    }
    *n = k;
    if (k > 0)
        *after = out[k - 1].seq;
    else if (cap == 0 || *after == CUMOD_EVENTS_NOW || *after > er->last)
        *after = er->last; /* from here (past the last: a new cumodd, whose
                              events so far were returned) */
    cumod__reply__free_unpacked(reply, NULL);
    return CUMOD_OK;
}
