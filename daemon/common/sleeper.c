/* SPDX-License-Identifier: MIT */
/*
 * Sleeping on an empty queue without a lost wake-up (sleeper.h).
 */
#include "sleeper.h"

#include <linux/futex.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

void
cumod__sleeper_wait(cumod_sleeper *s, int (*empty)(void *arg), void *arg)
{
    uint32_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    atomic_store_explicit(&s->sleeping, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    if (empty(arg))
        syscall(SYS_futex, &s->seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
    atomic_store_explicit(&s->sleeping, 0, memory_order_relaxed);
}

void
cumod__sleeper_kick(cumod_sleeper *s, int always)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (always || atomic_load_explicit(&s->sleeping, memory_order_seq_cst)) {
        atomic_fetch_add_explicit(&s->seq, 1, memory_order_release);
        syscall(SYS_futex, &s->seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}
