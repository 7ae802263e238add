/* SPDX-License-Identifier: MIT */
/*
 * A lane: a thread of the executor with its own queue of commands, for the
 * operations that may take long or wait for the device and so must not run
 * on the submission thread that every session's launches go through
 * (DESIGN.md; the figures in bench/bench_threads.c): module loads (a JIT
 * takes hundreds of milliseconds), registering host memory, and what waits
 * for the device (unloads, unregistering). Each lane runs its commands in
 * the order they were posted, with the context current, and answers each on
 * the channel itself (the channel is a SOCK_SEQPACKET socket: a packet is
 * sent whole whichever thread sends it).
 */
#ifndef CUMOD_LANE_H
#define CUMOD_LANE_H

#include <stddef.h>

#include "common/channel.h"
#include "cumod/errors.h"

struct cumod_exec;
typedef struct cumod_lane cumod_lane;

/* A command run on a lane: hdr and payload as they came (the payload is a
 * copy the lane owns), fd passed along (the handler closes it), aux what
 * the poster attached. Returns 0 or -errno of the channel (which ends the
 * executor). */
typedef int (*cumod_lane_fn)(struct cumod_exec *ex, const cumod_chan_hdr *hdr,
                             const void *payload, size_t len, int fd,
                             void *aux);

/* Starts a lane named name (for the log and the thread's name). */
cumod_err cumod__lane_start(struct cumod_exec *ex, const char *name,
                            cumod_lane **out);

/* Queues fn for the lane; copies payload; takes fd. CUMOD_ENOMEM, or
 * CUMOD_ECLOSED once the lane is stopped (fd is closed then). Any thread;
 * never blocks. */
cumod_err cumod__lane_post(cumod_lane *l, cumod_lane_fn fn,
                           const cumod_chan_hdr *hdr, const void *payload,
                           size_t len, int fd, void *aux);

/* Stops the lane: commands still queued are dropped (their descriptors
 * closed), the one running finishes; joins the thread. Later posts are
 * refused, so that another thread may still post (the completion thread
 * runs the reclaim queues until it is stopped itself): the lane is freed
 * by cumod__lane_free, once no thread can. Both accept NULL. */
void cumod__lane_stop(cumod_lane *l);
void cumod__lane_free(cumod_lane *l);

#endif
