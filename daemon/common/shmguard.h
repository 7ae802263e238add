/* SPDX-License-Identifier: MIT */
/*
 * Client-mapped memory that cannot kill the process: a SIGBUS guard for
 * the shared memory a client hands cumodd (its ring in the front, its
 * segments in the executor), as Wayland compositors guard wl_shm pools
 * (wayland src/wayland-shm.c).
 *
 * A client may ftruncate its shared memory while cumodd maps it; a later
 * touch of a page past the new end raises SIGBUS, whose default kills the
 * process and every session in it. The guard's handler looks the faulting
 * address up among the ranges registered here; inside one, it maps private
 * zero pages over the whole range (MAP_FIXED), marks the range bad and
 * returns, so the access repeats and reads zeros (or writes into memory
 * nobody else sees). The code that touched it checks cumod__shmguard_bad
 * afterwards and fails the client's ring or copy with a sentence. A SIGBUS
 * elsewhere goes to the handler that was there before (ASan's, say), or
 * kills as it always did.
 *
 * The registry is process-wide, as signal dispositions are: a handler has
 * no argument to find a context by, so this file keeps the one mutable
 * file-scope state of the daemon (STYLE.md rule 3 yields to the signal
 * API). Ranges live in fixed chunks of slots, linked once and never freed,
 * so the handler reads them with plain atomic loads, without a lock.
 *
 * A range must not be removed while another thread may touch it (the
 * owners already ensure it: a ring is touched on the loop thread that
 * closes it; a segment is unmapped only when no copy of it is in flight).
 * Every function here is thread-safe; only the handler runs in signal
 * context.
 */
#ifndef CUMOD_SHMGUARD_H
#define CUMOD_SHMGUARD_H

#include <stddef.h>
#include <stdint.h>

#include "cumod/errors.h"

typedef struct cumod_shm_range cumod_shm_range;

/* Installs the SIGBUS handler once per process (later calls do nothing).
 * CUMOD_OK, or CUMOD_EIO when sigaction failed. */
cumod_err cumod__shmguard_install(void);

/* Registers [p, p + len), a mapping of client memory made MAP_SHARED by
 * the caller; installs the handler if that was not done. *out is the
 * caller's until cumod__shmguard_remove. CUMOD_ENOMEM. */
cumod_err cumod__shmguard_add(void *p, size_t len, cumod_shm_range **out);

/* 1 once a SIGBUS hit the range (it reads zeros since), else 0. Cheap: an
 * atomic load. Accepts NULL (0). */
int cumod__shmguard_bad(const cumod_shm_range *r);

/* The range holding [addr, addr + len), or NULL: for code that has only
 * an address (the executor's copies). A scan of the registry. */
cumod_shm_range *cumod__shmguard_find(uintptr_t addr, size_t len);

/* Unregisters r, before its owner unmaps it (which it still must do).
 * Accepts NULL. */
void cumod__shmguard_remove(cumod_shm_range *r);

/* SIGBUS faults handled so far in this process (for tests and logs). */
uint64_t cumod__shmguard_faults(void);

#endif
