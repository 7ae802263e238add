/* SPDX-License-Identifier: MIT */
/*
 * Service: a thread that wakes clients asleep on their rings' futexes,
 * so that the front's loop does not make each FUTEX_WAKE itself.
 *
 * Measured on the H100 host (issue 21, bench/profile-many at 48 clients,
 * the host crowded so clients sleep on cq_seq): 38% of the front's thread
 * was waking them (the syscall, the shared futex's page lookup, the
 * scheduler's wake-up of another task), one wake per answer, while the
 * front's thread is what limits every client's rate there. The loop now
 * queues the word's address and goes on; this thread makes the calls,
 * spinning a while when it runs out, then sleeping on a word of its own
 * (one wake-up from the loop for many answers when busy).
 *
 * A queued address whose ring was unmapped meanwhile costs nothing: the
 * kernel answers EFAULT, or wakes nobody who is not waiting on it (a
 * waiter re-reads its word, so a wake-up in vain is harmless).
 *
 * The executor uses it too, for the rings it reads (exec/direct.c).
 *
 * Push: one producer at a time (the front's loop thread; an executor's
 * threads under a lock of their own).
 */
#ifndef CUMOD_COMMON_WAKER_H
#define CUMOD_COMMON_WAKER_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct cumod_waker cumod_waker;

/* Starts the thread: NULL when it cannot be had (the caller wakes its
 * clients itself). */
cumod_waker *cumod__waker_start(void);

/* Queues a FUTEX_WAKE of one waiter on word (a shared futex): 0, or -1
 * when the queue is full (the caller wakes it itself). */
int cumod__waker_push(cumod_waker *w, _Atomic uint32_t *word);

/* Wakes what is queued, then stops and frees the thread; the wakes it
 * made in all (every push that returned 0). */
uint64_t cumod__waker_stop(cumod_waker *w);

/* Wakes made by the thread so far (tests, metrics). */
uint64_t cumod__waker_count(const cumod_waker *w);

#endif
