/* SPDX-License-Identifier: MIT */
/*
 * Service: the executor's pool of CUDA events (disable-timing), shared by
 * every thread: an event recorded after a command's work, polled by the
 * completion thread (inflight.h) or waited on by a reclaim operation
 * (reclaim.h), then given back. Made at start while the device is idle
 * (cuEventCreate later can hold every launch); a leaf: it calls nothing
 * of the executor's. Started first and stopped last, so that every other
 * service may give events back while it stops.
 */
#ifndef CUMOD_EXEC_EVPOOL_H
#define CUMOD_EXEC_EVPOOL_H

#include "exec.h"

cumod_err cumod__exec_evpool_start(cumod_exec *ex);
void cumod__exec_evpool_stop(cumod_exec *ex);

/* An event from the pool (or a new one), and back (destroyed when the
 * pool is full, or stopped). Any thread. */
CUresult cumod__exec_event_get(cumod_exec *ex, CUevent *out);
void cumod__exec_event_put(cumod_exec *ex, CUevent ev);

#endif
