/* SPDX-License-Identifier: MIT */
/*
 * The handlers, for the dispatcher (executor.c) and nobody else: a
 * handler never calls another's entry point (tests/layout_check.sh).
 * Each serves the commands of one concern; its signature is a lane's
 * (lane.h), so that the dispatcher's table runs it at once or posts it:
 * hdr and payload as they came, fd the command's descriptor (the
 * handler's to close), aux unused. Each answers its command on the
 * channel and returns 0 or -errno of the channel (which ends the
 * executor). Which thread runs each is the dispatcher's table's to say.
 */
#ifndef CUMOD_EXEC_HANDLERS_H
#define CUMOD_EXEC_HANDLERS_H

#include "exec.h"

/* exec_work.c: CUMOD_CHAN_WORK, on the submission thread: the payload's
 * items are enqueued on their stream and an event recorded for the
 * completion thread (inflight.h). */
int cumod__exec_on_work(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        const void *payload, size_t len, int fd, void *aux);
/* The WORK handler's state (groups): CUMOD_ENOMEM. Stop records what is
 * held back (before the completion service stops); accepts a never
 * started one. */
cumod_err cumod__exec_work_start(cumod_exec *ex);
void cumod__exec_work_stop(cumod_exec *ex);
/* Records the events of WORKs held back to be answered together
 * (CUMOD_CHAN_WORK_F_GROUP): when nothing more is to be read, and before
 * any command other than WORK. Submission thread. 0 or -errno of the
 * channel. */
int cumod__exec_work_flush(cumod_exec *ex);
/* Records the event of every group older than GROUP_AGE_NS (exec_work.c):
 * the submission thread calls it between commands, so that a group does
 * not wait on other clients' commands. 0 or -errno of the channel. */
int cumod__exec_work_age(cumod_exec *ex);
/* The same for one submission thread's own state (its aux): made, freed
 * (what it holds back recorded first), flushed and aged by the thread
 * (the dispatcher hands these to the submission threads, submit.h). */
struct cumod_exec_work *cumod__exec_work_new(void);
void cumod__exec_work_free(cumod_exec *ex, struct cumod_exec_work *w);
int cumod__exec_work_flush_in(cumod_exec *ex, struct cumod_exec_work *w);
int cumod__exec_work_age_in(cumod_exec *ex, struct cumod_exec_work *w);

/* exec_module.c: CUMOD_CHAN_LOAD (load lane; fd is the image's memfd) and
 * CUMOD_CHAN_UNLOAD (reclaim lane: cuModuleUnload waits for the
 * device). */
int cumod__exec_on_load(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        const void *payload, size_t len, int fd, void *aux);
int cumod__exec_on_unload(cumod_exec *ex, const cumod_chan_hdr *hdr,
                          const void *payload, size_t len, int fd, void *aux);
/* FORGET: the old front's modules, after an adoption (orphan.h). */
int cumod__exec_on_forget(cumod_exec *ex, const cumod_chan_hdr *hdr,
                          const void *payload, size_t len, int fd, void *aux);

/* exec_globals.c: CUMOD_CHAN_GLOBALS (load lane, after the load it
 * follows): the kept writes again, to a loaded generation. */
int cumod__exec_on_globals(cumod_exec *ex, const cumod_chan_hdr *hdr,
                           const void *payload, size_t len, int fd, void *aux);

/* exec_mem.c: CUMOD_CHAN_ALLOC, CUMOD_CHAN_FREE, CUMOD_CHAN_MEMINFO, on
 * the submission thread. Start sets up the stream-ordered allocator
 * (CUMOD_EDRIVER); stop accepts a never started one. */
cumod_err cumod__exec_mem_start(cumod_exec *ex);
void cumod__exec_mem_stop(cumod_exec *ex);
int cumod__exec_on_alloc(cumod_exec *ex, const cumod_chan_hdr *hdr,
                         const void *payload, size_t len, int fd, void *aux);
int cumod__exec_on_free(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        const void *payload, size_t len, int fd, void *aux);
int cumod__exec_on_meminfo(cumod_exec *ex, const cumod_chan_hdr *hdr,
                           const void *payload, size_t len, int fd, void *aux);

/* exec_devices.c: CUMOD_CHAN_DEVICES, on the submission thread. */
int cumod__exec_on_devices(cumod_exec *ex, const cumod_chan_hdr *hdr,
                           const void *payload, size_t len, int fd, void *aux);

/* exec_seg.c: CUMOD_CHAN_SEG_MAP (host lane; fd is the segment) and
 * CUMOD_CHAN_SEG_UNMAP (submission thread). */
int cumod__exec_on_seg_map(cumod_exec *ex, const cumod_chan_hdr *hdr,
                           const void *payload, size_t len, int fd, void *aux);
int cumod__exec_on_seg_unmap(cumod_exec *ex, const cumod_chan_hdr *hdr,
                             const void *payload, size_t len, int fd,
                             void *aux);

/* exec_streams.c: CUMOD_CHAN_STREAMS_CLOSE, submission thread. */
int cumod__exec_on_streams_close(cumod_exec *ex, const cumod_chan_hdr *hdr,
                                 const void *payload, size_t len, int fd,
                                 void *aux);

/* exec_direct.c: the direct launches' commands (direct.h): on the
 * serving thread (RING_*, SNAP), and posted to a ring's submission
 * thread (run). */
int cumod__exec_on_direct(cumod_exec *ex, const cumod_chan_hdr *hdr,
                          const void *payload, size_t len, int fd, void *aux);
int cumod__exec_on_direct_run(cumod_exec *ex, const cumod_chan_hdr *hdr,
                              const void *payload, size_t len, int fd,
                              void *aux);

/* exec_blas.c: CUMOD_CHAN_BLAS, on the load lane (a large dlopen). */
int cumod__exec_on_blas(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        const void *payload, size_t len, int fd, void *aux);

#endif
