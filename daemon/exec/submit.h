/* SPDX-License-Identifier: MIT */
/*
 * Service: the submission threads (issue 21). Sessions' work (WORK
 * commands) is enqueued by several threads, each owning the streams given
 * to it (a stream's work always goes to the same thread, so it stays in
 * order): measured on an H100 host (bench/bench_submit.c), one thread
 * launching and recording events stops at about 200,000 waited launches a
 * second, eight in one context reach about 460,000.
 *
 * The dispatcher posts a WORK to the thread of its stream and keeps every
 * other command for itself, after cumod__submit_quiesce: every WORK posted
 * before it has been enqueued on its stream (and what a thread held back
 * for one event recorded), exactly as when the one serving thread did
 * everything. The threads run the handler the dispatcher gives them (a
 * function pointer: this service names no handler).
 */
#ifndef CUMOD_EXEC_SUBMIT_H
#define CUMOD_EXEC_SUBMIT_H

#include <stddef.h>
#include <stdint.h>

#include "exec.h"

typedef struct cumod_submit cumod_submit;

/* What a thread's queue holds at most: past it, the dispatcher waits in
 * cumod__submit_post, so that a thread held by the device (a copy that
 * waits, a full hardware queue) makes the channel fill and the front
 * queue in order (its backpressure), rather than this process's memory
 * grow. An empty queue takes any one command, however large. */
#define CUMOD_SUBMIT_QUEUE_BYTES ((size_t)4 << 20)
#define CUMOD_SUBMIT_QUEUE_JOBS 4096 /* a power of two: the ring's slots */

/* What the threads are given: run a command (fn, with its thread's own
 * state as aux); when a thread's queue is empty, done(ex, aux) once (the
 * dispatcher's: flush what is held back); after each command, age(ex,
 * aux). */
typedef struct cumod_submit_ops {
    cumod_lane_fn run;
    int (*done)(cumod_exec *ex, void *aux);
    int (*age)(cumod_exec *ex, void *aux);
    /* May be NULL. poll: the thread's own work besides its queue (direct
     * rings, direct.h), looked at whenever the queue is empty: how much
     * it did, or -errno of the channel. may_sleep: 0 while that work
     * wants the thread awake (a ring polled); it wakes a sleeping thread
     * with cumod__submit_wake. */
    int (*poll)(cumod_exec *ex, unsigned index, void *aux);
    int (*may_sleep)(cumod_exec *ex, unsigned index, void *aux);
    /* May be NULL: at the thread's stop, what its own work has in flight
     * finished. */
    int (*drain)(cumod_exec *ex, unsigned index, void *aux);
} cumod_submit_ops;

/* Starts n threads, thread i with state aux[i]. */
cumod_err cumod__submit_start(cumod_exec *ex, unsigned n,
                              const cumod_submit_ops *ops, void *const *aux,
                              cumod_submit **out);

/* How many threads; the thread that owns stream key (given one at its
 * first work, route.h); key's stream closed, after a quiesce. The
 * dispatcher's. */
unsigned cumod__submit_count(const cumod_submit *sb);
unsigned cumod__submit_thread_of(cumod_submit *sb, uint64_t key);
void cumod__submit_forget(cumod_submit *sb, uint64_t key);

/* Every stream of session (its keys' high bits) goes to thread i from now
 * on, whatever route.h gave them, until unpinned (a direct ring's: its
 * streams' work and its records stay in order on one thread). After a
 * quiesce. The dispatcher's. */
void cumod__submit_pin(cumod_submit *sb, uint32_t session, unsigned i);
void cumod__submit_unpin(cumod_submit *sb, uint32_t session);

/* Wakes thread i if it sleeps (its poll has something). Any thread. */
void cumod__submit_wake(cumod_submit *sb, unsigned i);

/* Posts a copy of the command to thread i, waiting while its queue is
 * full. CUMOD_OK or CUMOD_ENOMEM. */
cumod_err cumod__submit_post(cumod_submit *sb, unsigned i,
                             const cumod_chan_hdr *hdr, const void *payload,
                             size_t len);

/* Returns once every command posted so far has run and each thread has
 * run its done(). */
void cumod__submit_quiesce(cumod_submit *sb);

/* Stops the threads after what they hold (each runs its done() last). */
void cumod__submit_stop(cumod_submit *sb);

#endif
