/* SPDX-License-Identifier: MIT */
/*
 * The front's waking thread (daemon/common/waker.h) with real futex
 * waiters: every wake queued is made, a queue that is full says so (the
 * front then wakes the client itself) and loses nothing it took, and a
 * stop makes what is queued first. A lost wake-up leaves a waiter asleep
 * past its timeout, which the test counts.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/waker.h"

enum { WT_WAITERS = 16 };

typedef struct wt_waiter {
    _Atomic uint32_t word; /* bumped, then woken, by the test */
    _Atomic uint32_t seen; /* the last value the waiter saw */
    _Atomic int stop;
    _Atomic uint64_t late; /* waits that ran into their timeout */
    _Atomic int asleep;    /* about to wait, or waiting */
    pthread_t thread;
} wt_waiter;

static wt_waiter wt[WT_WAITERS];

/* Sleeps on its word until it changes, like a client on its ring's
 * cq_seq; a wait that times out although the word had changed before it
 * is a lost wake-up. */
static void *
wt_waiter_main(void *arg)
{
    wt_waiter *w = arg;
    uint32_t v = atomic_load(&w->word);

    while (!atomic_load(&w->stop)) {
        struct timespec to = {2, 0};
        atomic_store(&w->asleep, 1);
        long rc = syscall(SYS_futex, &w->word, FUTEX_WAIT, v, &to, NULL, 0);
        atomic_store(&w->asleep, 0);
        if (rc != 0 && errno == ETIMEDOUT && atomic_load(&w->word) != v)
            atomic_fetch_add(&w->late, 1);
        v = atomic_load(&w->word);
        atomic_store(&w->seen, v);
    }
    return NULL;
}

static void
wt_start_waiters(void)
{
    for (int i = 0; i < WT_WAITERS; i++) {
        atomic_store(&wt[i].word, 0);
        atomic_store(&wt[i].seen, 0);
        atomic_store(&wt[i].stop, 0);
        atomic_store(&wt[i].late, 0);
        cr_assert_eq(
            pthread_create(&wt[i].thread, NULL, wt_waiter_main, &wt[i]), 0);
    }
}

static void
wt_wake_self(_Atomic uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Stops the waiters (each woken by hand); how many waits were late. */
static uint64_t
wt_stop_waiters(void)
{
    uint64_t late = 0;
    for (int i = 0; i < WT_WAITERS; i++) {
        atomic_store(&wt[i].stop, 1);
        atomic_fetch_add(&wt[i].word, 1);
        wt_wake_self(&wt[i].word);
        pthread_join(wt[i].thread, NULL);
        late += atomic_load(&wt[i].late);
    }
    return late;
}

Test(waker, every_queued_wake_is_made_and_a_full_queue_says_so, .timeout = 90)
{
    enum { ROUNDS = 200000 };
    uint64_t queued = 0, by_hand = 0;
    cumod_waker *w = cumod__waker_start();

    cr_assert_not_null(w);
    wt_start_waiters();
    /* Answers as fast as the loop makes them, in bursts that can outrun
     * the thread: each bumps a client's word and queues its wake-up, or
     * makes it itself when the queue is full. */
    for (int k = 0; k < ROUNDS; k++) {
        wt_waiter *x = &wt[k % WT_WAITERS];
        atomic_fetch_add(&x->word, 1);
        if (cumod__waker_push(w, &x->word) == 0)
            queued++;
        else {
            by_hand++;
            wt_wake_self(&x->word);
        }
    }
    /* Every client sees its last answer without another wake-up. */
    for (int i = 0; i < WT_WAITERS; i++) {
        uint32_t want = atomic_load(&wt[i].word);
        for (int k = 0; k < 3000 && atomic_load(&wt[i].seen) != want; k++)
            usleep(1000);
        cr_expect_eq(atomic_load(&wt[i].seen), want,
                     "waiter %d saw its last answer (%u of %u)", i,
                     atomic_load(&wt[i].seen), want);
    }
    cr_expect_eq(cumod__waker_stop(w), queued,
                 "every wake queued was made, none other");
    cr_expect_eq(wt_stop_waiters(), 0, "no waiter slept through an answer");
    cr_expect_eq(queued + by_hand, ROUNDS);
    cr_log_info("%llu wakes queued, %llu made by hand (queue full)",
                (unsigned long long)queued, (unsigned long long)by_hand);
}

Test(waker, the_queue_takes_4096_and_a_stop_makes_every_wake_it_took,
     .timeout = 60)
{
    static _Atomic uint32_t word;
    cumod_waker *w = cumod__waker_start();
    uint64_t took = 0, refused = 0;

    cr_assert_not_null(w);
    /* However fast the thread drains, the first 4,096 fit. */
    for (int k = 0; k < 4096; k++)
        cr_assert_eq(cumod__waker_push(w, &word), 0, "push %d taken", k);
    took = 4096;
    /* Far more than it holds, faster than the thread makes system calls:
     * some may be refused (the caller wakes those itself); each taken one
     * is made, those still queued at the stop included. */
    for (int k = 0; k < 200000; k++) {
        if (cumod__waker_push(w, &word) == 0)
            took++;
        else
            refused++;
    }
    cr_expect_eq(cumod__waker_stop(w), took, "%llu taken, %llu refused",
                 (unsigned long long)took, (unsigned long long)refused);
    cr_log_info("%llu taken, %llu refused", (unsigned long long)took,
                (unsigned long long)refused);
}
