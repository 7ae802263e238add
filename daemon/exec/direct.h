/* SPDX-License-Identifier: MIT */
/*
 * Service: direct launches (direct.c, direct_snap.c; docs/architecture.md
 * "The data path"). Once the front has admitted a session and its ring,
 * it hands the ring to this executor (RING_STATE, RING_ATTACH,
 * RING_BELL), and the submission thread that owns the session's streams
 * reads it: a plain launch answered when complete, whose module, kernel,
 * buffers and stream the snapshot knows, is checked here (data/
 * launch_check.h), launched and answered into the ring by this process;
 * every other record is forwarded to the front (RING_FWD), and so is
 * every record after it until the front has answered them all (through
 * RING_RESUME, in the thread's queue behind the work they made), so that
 * the ring's order holds for both kinds.
 *
 * The snapshot: the modules this executor may launch directly (the front
 * publishes a module's current generation once it serves here, and takes
 * it back before anything changes it: a new generation, a quarantine, an
 * unload), applied by the dispatcher under a lock the launching threads
 * read; and per session its buffers, streams and limits, applied by the
 * session's thread between records. A launch is checked against one
 * version of each: what the front took back is refused (forwarded) from
 * the next record on.
 *
 * Exactly once: each record is answered by one thread, the one that took
 * it (forwarded ones by the front, through it). The ring's state block
 * (cumod_dring_state, the front's memory) says which direct launches were
 * taken and not answered, so that the front answers them when this
 * process dies.
 *
 * Threads: the dispatcher calls the entry points of the handlers
 * (exec_direct.c); a submission thread calls run, poll and may_sleep;
 * the completion thread answers through the callbacks it is handed; the
 * doorbell thread (direct.c) wakes the owner of a rung ring.
 */
#ifndef CUMOD_EXEC_DIRECT_H
#define CUMOD_EXEC_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "exec.h"

/* Starts the service (its doorbell thread) for n submission threads;
 * stop unmaps every ring (after the threads and the completion service
 * have stopped). CUMOD_ENOMEM. */
cumod_err cumod__direct_start(cumod_exec *ex, unsigned nthreads);
void cumod__direct_stop(cumod_exec *ex);

/* Dispatcher: a direct op of the channel (RING_STATE, RING_ATTACH,
 * RING_BELL, RING_DETACH, RING_RESUME, SNAP), fd its descriptor (the
 * service's to close). Module snapshots are applied here; what concerns
 * a session is posted to its thread. 0 or -errno of the channel. */
int cumod__direct_command(cumod_exec *ex, const cumod_chan_hdr *hdr,
                          const void *payload, size_t len, int fd);

/* Dispatcher: the thread serving stream key's session ring; -1 when its
 * session has none (route by the stream). */
int cumod__direct_thread_of(cumod_exec *ex, uint64_t key);

/* Submission thread: a command posted by cumod__direct_command (its op
 * a direct one). 0 or -errno of the channel. */
int cumod__direct_run(cumod_exec *ex, const cumod_chan_hdr *hdr,
                      const void *payload, size_t len);

/* Submission thread `index`: takes the records of its rings that are
 * polled (hot) or rung; how many, or -errno of the channel. */
int cumod__direct_poll(cumod_exec *ex, unsigned index);

/* Whether thread `index` may sleep: none of its rings is hot (a
 * doorbell wakes it). */
int cumod__direct_may_sleep(cumod_exec *ex, unsigned index);

/* The submission thread index stops: its direct launches in flight are
 * completed and answered first. 0. */
int cumod__direct_drain(cumod_exec *ex, unsigned index);

/* Stops the doorbell thread (it wakes submission threads: it goes
 * before they do). */
void cumod__direct_stop_bell(cumod_exec *ex);

/* Every ring's statistics to the front now (the process is about to end:
 * the counts of its last launches are not lost with it). Any thread that
 * holds none of the service's locks. */
void cumod__direct_flush_stats(cumod_exec *ex);

/* The module m is to be unloaded: returns once no direct launch of it is
 * in flight (reclaim lane). */
void cumod__direct_module_quiet(cumod_exec *ex, cumod_exec_module *m);

/* An adopting front's names are not the old one's (orphan.h): every module
 * the old front published for direct launches is forgotten, so that none
 * is launched directly until the new front publishes its own. */
void cumod__direct_forget_modules(cumod_exec *ex);

#endif
