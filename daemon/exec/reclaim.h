/* SPDX-License-Identifier: MIT */
/*
 * Service: a session's reclaim queue (reclaim.c), named by its reclaim
 * key: operations run in order, each once its events have completed, on
 * the completion thread (inflight.h).
 */
#ifndef CUMOD_EXEC_RECLAIM_H
#define CUMOD_EXEC_RECLAIM_H

#include "exec.h"

typedef enum cumod_reclaim_kind {
    CUMOD_RECLAIM_FREE = 1, /* a: the device pointer to free */
    CUMOD_RECLAIM_STREAM,   /* the stream goes back to the pool */
    CUMOD_RECLAIM_UNMAP,    /* a: host address, b: size; hdr answered */
    CUMOD_RECLAIM_END,      /* the session is gone: the queue goes too */
} cumod_reclaim_kind;
cumod_err cumod__exec_reclaim_start(cumod_exec *ex);
void cumod__exec_reclaim_stop(cumod_exec *ex);
/* Queues an operation gated by events nev events (taken: they go back to
 * the event pool after). Submission thread. CUMOD_ENOMEM. */
cumod_err cumod__exec_reclaim_push(cumod_exec *ex, uint64_t key,
                                   cumod_reclaim_kind kind, uint64_t a,
                                   uint64_t b, CUstream stream,
                                   const CUevent *ev, uint32_t nev,
                                   const cumod_chan_hdr *hdr);
/* Runs every operation whose time has come; 1 if it ran any. Completion
 * thread. */
int cumod__exec_reclaim_poll(cumod_exec *ex);
/* 1 while operations wait. Any thread. */
int cumod__exec_reclaim_pending(cumod_exec *ex);

/* Unregisters and unmaps a segment on the reclaim lane, when the device is
 * idle, then answers hdr. Any thread. */
void cumod__exec_unmap_later(cumod_exec *ex, const cumod_chan_hdr *hdr,
                             uint64_t host, uint64_t size);

#endif
