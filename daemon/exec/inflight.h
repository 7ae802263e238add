/* SPDX-License-Identifier: MIT */
/*
 * Service: the work in flight (inflight.c). Handlers hand it what they
 * enqueued, with the sequence numbers to answer; the completion thread
 * it runs answers each when its event completes, and runs the reclaim
 * queues (reclaim.h). It also keeps the executor's event pool.
 */
#ifndef CUMOD_EXEC_INFLIGHT_H
#define CUMOD_EXEC_INFLIGHT_H

#include "exec.h"

/* Starts the completion thread. CUMOD_ENOMEM. */
cumod_err cumod__exec_inflight_start(cumod_exec *ex);
/* Stops the completion thread once nothing is in flight. Accepts a
 * never-started one. */
void cumod__exec_inflight_stop(cumod_exec *ex);

/* Records an event on s after the work of seqs (n of them, in stream
 * order) and hands it to the completion thread, which answers each seq
 * with DONE (read_buf's read_len bytes with it, when not NULL: then the
 * buffer is the service's). start_ns: CLOCK_MONOTONIC when the first
 * WORK came (its device time starts no earlier). On failure nothing is
 * kept (read_buf stays the caller's). Submission thread. */
CUresult cumod__exec_track(cumod_exec *ex, CUstream s, const uint64_t *seqs,
                           uint32_t n, void *read_buf, uint64_t read_len,
                           uint64_t start_ns);

/* Answers seq itself when s's work completes within INFLIGHT_INLINE_NS
 * and nothing else is in flight (a submission thread with one waited
 * launch: no hand-off to the completion thread, which a launch's round
 * trip paid; measured in bench/notes.md); otherwise as cumod__exec_track.
 * 0 when answered or handed over; else the driver's error (nothing
 * kept). */
CUresult cumod__exec_track_inline(cumod_exec *ex, CUstream s, uint64_t seq,
                                  uint64_t start_ns);

/* What is told of work tracked with a callback (a direct launch,
 * direct.h): its event said r, after gpu_ns of device time. Completion
 * thread, or the submitting thread when inline. */
typedef void (*cumod_exec_done_fn)(cumod_exec *ex, void *arg, CUresult r,
                                   uint64_t gpu_ns);

/* Records an event on s after the work just enqueued there and calls
 * cb(arg) when it completes: the submitting thread itself when s's work
 * completes within INFLIGHT_INLINE_NS and nothing else is in flight (as
 * cumod__exec_track_inline), else the completion thread. A lost context
 * (r) ends the process after cb. 0, or the driver's error (cb not
 * called). */
CUresult cumod__exec_track_cb_inline(cumod_exec *ex, CUstream s,
                                     uint64_t start_ns, cumod_exec_done_fn cb,
                                     void *arg);

/* Wakes the completion thread: something new to watch (a reclaim
 * operation). Any thread. */
void cumod__exec_inflight_kick(cumod_exec *ex);

/* Waits until every piece of work in flight now has completed (work
 * submitted meanwhile does not count), for what must not run while
 * kernels run: cuModuleLoadData and cuMemHostUnregister wait for the
 * device and hold every launch of the context until running kernels end
 * (199 ms behind a 200 ms kernel, bench/bench_threads.c), so they go
 * when what was running has ended and only young work is in flight. Logs
 * (once, naming what) after 1 s. Returns the milliseconds waited. A lane;
 * never the submission or completion thread. */
int cumod__exec_wait_quiet(cumod_exec *ex, const char *what);

#endif
