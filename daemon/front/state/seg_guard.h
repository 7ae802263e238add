/* SPDX-License-Identifier: MIT */
/*
 * A client's segment may be truncated under cumodd at any moment (it owns
 * the shm object). The executor's mapping is guarded against the SIGBUS
 * that follows (shmguard.h); the front keeps the object's descriptor and
 * checks its size with fstat before a copy is sent and after it completed,
 * so the client hears what it did, on the real driver too, where the copy
 * is DMA to pages the driver holds pinned and no SIGBUS comes. Loop thread.
 */
#ifndef CUMOD_SEG_GUARD_H
#define CUMOD_SEG_GUARD_H

#include "front/state/session.h"
#include "common/status.h"

/* CUMOD_OK while g's shm object is still at least g->size bytes long.
 * Else CUMOD_EPERM with a sentence in st naming the segment and its sizes;
 * the first time, g is marked shrunk (every later copy is refused, whatever
 * the client does next) and a CUMOD-SEGMENT warning names the session's
 * pid and uid. A segment without a descriptor (unit tests) passes. */
cumod_err cumod__seg_intact(const cumod_session *s, cumod_seg *g,
                            cumod_status *st);

#endif
