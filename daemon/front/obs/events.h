/* SPDX-License-Identifier: MIT */
/*
 * Change events (cumodctl watch): what happened to modules and to the
 * executor, numbered from 1, the last CUMOD_EVENTS_KEPT kept. A
 * WatchEvents request is answered at once with the events after its
 * number, or parks until one comes or its wait ends (a long poll on the
 * request socket: proto/cumod.proto says why not a pub socket). Loop
 * thread only.
 */
#ifndef CUMOD_EVENTS_H
#define CUMOD_EVENTS_H

#include <stdint.h>
#include <uv.h>

#include "catalog/catalog.h"
#include "common/list.h"
#include "front/transport/server.h"

#define CUMOD_EVENTS_KEPT 4096
#define CUMOD_EVENTS_PER_REPLY 256

typedef struct cumod_event_rec {
    uint64_t seq;
    int kind; /* Cumod__EventKind */
    char *module, *sha256, *old_sha256, *detail;
    uint64_t generation, old_generation;
    uint64_t unix_ms;
} cumod_event_rec;

typedef struct cumod_events {
    cumod_event_rec ring[CUMOD_EVENTS_KEPT];
    uint64_t last; /* the last number given; 0: none yet */
    cumod_list waiters;
    uv_timer_t timer; /* ends waits, while some wait */
    int timer_on, closed;
} cumod_events;

void cumod__events_init(cumod_events *ev, uv_loop_t *loop);

/* Records one event and answers the waits it ends. */
void cumod__events_add(cumod_events *ev, const cumod_catalog_event *e);

/* Answers r (a WatchEvents) now, or parks it for at most max_wait_ms
 * (--max-watch-wait; a longer wait asked is refused). */
void cumod__events_watch(cumod_events *ev, cumod_req *r, uint32_t max_wait_ms);

/* The connection pipe_id closed: its waits end unanswered (dropped). */
void cumod__events_conn_closed(cumod_events *ev, uint32_t pipe_id);

/* Answers every wait with code and msg, frees the events, closes the
 * timer. */
void cumod__events_close(cumod_events *ev, cumod_err code, const char *msg);

#endif
