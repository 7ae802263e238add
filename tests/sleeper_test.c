/* SPDX-License-Identifier: MIT */
/*
 * The sleep-when-idle protocol (daemon/common/sleeper.h) that the front's
 * waking thread and the executor's submission threads use: a consumer
 * that sleeps whenever its queue is empty is woken for every item, and a
 * stop, however the producer's puts and the consumer's sleeps interleave.
 * A lost wake-up would leave the consumer asleep and the test at its
 * timeout.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "common/sleeper.h"

typedef struct q {
    cumod_sleeper s;
    _Atomic uint64_t head, tail;
    _Atomic int stop;
    _Atomic uint64_t sleeps;
} q;

static int
q_empty(void *arg)
{
    q *x = arg;
    return atomic_load_explicit(&x->head, memory_order_seq_cst) ==
               atomic_load_explicit(&x->tail, memory_order_relaxed) &&
           !atomic_load_explicit(&x->stop, memory_order_seq_cst);
}

/* Takes every item, sleeping at once whenever there is none. */
static void *
consumer(void *arg)
{
    q *x = arg;
    for (;;) {
        uint64_t h = atomic_load_explicit(&x->head, memory_order_acquire);
        uint64_t t = atomic_load_explicit(&x->tail, memory_order_relaxed);
        if (h != t) {
            atomic_store_explicit(&x->tail, t + 1, memory_order_release);
            continue;
        }
        if (atomic_load_explicit(&x->stop, memory_order_acquire))
            return NULL;
        atomic_fetch_add_explicit(&x->sleeps, 1, memory_order_relaxed);
        cumod__sleeper_wait(&x->s, q_empty, x);
    }
}

static void
nap_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

Test(sleeper, every_item_wakes_a_consumer_that_sleeps_whenever_idle,
     .timeout = 60)
{
    static q x; /* aligned as its type asks (static storage) */
    pthread_t th;
    enum { ITEMS = 200000 };
    cr_assert_eq(pthread_create(&th, NULL, consumer, &x), 0);
    for (uint64_t i = 1; i <= ITEMS; i++) {
        atomic_store_explicit(&x.head, i, memory_order_release);
        cumod__sleeper_kick(&x.s, 0);
        /* now and then let it fall asleep, so puts meet every phase of
         * its sleep */
        if (i % 1000 == 0)
            nap_ns(20000);
        /* and wait for it to keep up, so that it is idle often */
        while (i % 7 == 0 &&
               atomic_load_explicit(&x.tail, memory_order_acquire) < i)
            ;
    }
    while (atomic_load_explicit(&x.tail, memory_order_acquire) < ITEMS)
        nap_ns(100000);
    cr_expect_eq(atomic_load(&x.tail), ITEMS, "every item taken");
    cr_expect_gt(atomic_load(&x.sleeps), 100,
                 "the consumer slept between items (%llu times): the "
                 "wake-ups were tested",
                 (unsigned long long)atomic_load(&x.sleeps));
    atomic_store_explicit(&x.stop, 1, memory_order_seq_cst);
    cumod__sleeper_kick(&x.s, 1);
    cr_expect_eq(pthread_join(th, NULL), 0, "a stop wakes it and it ends");
}

Test(sleeper, a_kick_without_a_sleeper_is_one_look_and_no_harm)
{
    static q x;
    /* nobody sleeps: a kick makes no call and changes nothing */
    cumod__sleeper_kick(&x.s, 0);
    cr_expect_eq(atomic_load(&x.s.seq), 0, "no wake-up made");
    /* a consumer with work waiting does not sleep */
    atomic_store(&x.head, 1);
    cumod__sleeper_wait(&x.s, q_empty, &x);
    cr_expect_eq(atomic_load(&x.s.sleeping), 0, "it does not stay asleep");
    /* a forced kick always counts */
    cumod__sleeper_kick(&x.s, 1);
    cr_expect_eq(atomic_load(&x.s.seq), 1);
}
