/* SPDX-License-Identifier: MIT */
/*
 * Service: pinned buffers for inline reads (pinned.c), made at start.
 */
#ifndef CUMOD_EXEC_PINNED_H
#define CUMOD_EXEC_PINNED_H

#include "exec.h"

cumod_err cumod__exec_pinned_start(cumod_exec *ex);
void cumod__exec_pinned_stop(cumod_exec *ex);
/* A pinned buffer of at least len bytes, or NULL (then read into pageable
 * memory). Any thread. */
void *cumod__exec_pinned_get(cumod_exec *ex, size_t len);
/* Gives b back; 0 when b is not a pinned buffer (the caller frees it). */
int cumod__exec_pinned_put(cumod_exec *ex, void *b);

#endif
