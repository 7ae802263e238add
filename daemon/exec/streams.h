/* SPDX-License-Identifier: MIT */
/*
 * Service: streams by key (streams.c), from a pool made at start
 * (cuStreamCreate can wait for the device and hold every launch
 * meanwhile).
 */
#ifndef CUMOD_EXEC_STREAMS_H
#define CUMOD_EXEC_STREAMS_H

#include "exec.h"

cumod_err cumod__exec_streams_start(cumod_exec *ex, size_t n);
void cumod__exec_streams_stop(cumod_exec *ex);
/* The stream of key, taken from the pool on first use (create != 0), or
 * NULL when there is none (create == 0) or it cannot be made (*r says
 * why). Submission thread. */
CUstream cumod__exec_stream(cumod_exec *ex, uint64_t key, int create,
                            CUresult *r);
/* Records an event from the pool (inflight.h) on key's stream: the
 * stream in *s and the event in *ev, which the caller gives back; *s NULL
 * (and no event) when key has no stream. A CUDA error when the event
 * could not be had or recorded. Submission thread. */
CUresult cumod__exec_stream_mark(cumod_exec *ex, uint64_t key, CUstream *s,
                                 CUevent *ev);
/* Takes key's stream out of use (NULL if it has none); give it back with
 * cumod__exec_stream_recycle once its work has completed. Submission
 * thread. */
CUstream cumod__exec_stream_take(cumod_exec *ex, uint64_t key);
/* Back to the pool (its work has completed). Any thread. */
void cumod__exec_stream_recycle(cumod_exec *ex, CUstream s);

#endif
