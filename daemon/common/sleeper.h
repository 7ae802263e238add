/* SPDX-License-Identifier: MIT */
/*
 * A thread that spins on a queue and sleeps when it stays empty, and the
 * producers that wake it only when it says it sleeps (one system call per
 * sleep, not per item): the front's waking thread (front/waker.c) and the
 * executor's submission threads (exec/submit.c).
 *
 * The protocol, without a lost wake-up: the sleeper reads seq, says it
 * sleeps, looks at its queue once more and waits on seq only if still
 * empty; a producer puts its item, then (after a full fence) bumps seq
 * and wakes if the sleeper says it sleeps. Either the sleeper's last look
 * sees the item, or the producer sees the flag, and a bump between the
 * sleeper's read and its wait makes the wait return at once.
 */
#ifndef CUMOD_SLEEPER_H
#define CUMOD_SLEEPER_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct cumod_sleeper {
    alignas(64) _Atomic uint32_t seq; /* the futex (private) */
    _Atomic uint32_t sleeping;
} cumod_sleeper;

/* The sleeper: sleeps unless empty(arg) says its queue has something
 * (or it is told to stop), or until woken. */
void cumod__sleeper_wait(cumod_sleeper *s, int (*empty)(void *arg), void *arg);

/* A producer, after putting an item (or setting a stop flag the sleeper's
 * empty() reads): wakes the sleeper if it sleeps. always: wake it
 * whatever it says (stopping). */
void cumod__sleeper_kick(cumod_sleeper *s, int always);

#endif
