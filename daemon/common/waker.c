/* SPDX-License-Identifier: MIT */
/*
 * The waking thread (waker.h): a single-producer single-consumer queue of
 * futex addresses, and the thread's own futex to sleep on when it has
 * been idle for a while.
 */
#include "waker.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sleeper.h"

#define WAKER_SLOTS 4096 /* a power of two */
/* How long the thread looks for more before it sleeps: about a round
 * trip's worth, so that a steady stream of answers never needs its
 * wake-up. */
#define WAKER_SPIN_NS 30000

struct cumod_waker {
    pthread_t thread;
    _Alignas(64) _Atomic uint64_t head; /* written by the producer */
    _Alignas(64) _Atomic uint64_t tail; /* by the thread */
    cumod_sleeper sleep;                /* where the thread sleeps when idle */
    _Atomic uint32_t stop;
    _Atomic uint32_t *slot[WAKER_SLOTS];
};

static void
waker_wake_shared(_Atomic uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Whether the thread may sleep: nothing queued past what it took, and
 * not told to stop. */
static int
waker_idle(void *arg)
{
    cumod_waker *w = arg;
    return atomic_load_explicit(&w->head, memory_order_seq_cst) ==
               atomic_load_explicit(&w->tail, memory_order_relaxed) &&
           !atomic_load_explicit(&w->stop, memory_order_seq_cst);
}

static void *
waker_main(void *arg)
{
    cumod_waker *w = arg;
    uint64_t tail = atomic_load_explicit(&w->tail, memory_order_relaxed);

    pthread_setname_np(pthread_self(), "cumodd-wake");
    for (;;) {
        uint64_t head = atomic_load_explicit(&w->head, memory_order_acquire);
        if (head != tail) {
            while (tail != head) {
                waker_wake_shared(w->slot[tail & (WAKER_SLOTS - 1)]);
                tail++;
            }
            atomic_store_explicit(&w->tail, tail, memory_order_release);
            continue;
        }
        if (atomic_load_explicit(&w->stop, memory_order_acquire))
            break;
        uint64_t t0 = cumod__mono_ns();
        while (atomic_load_explicit(&w->head, memory_order_acquire) == tail &&
               !atomic_load_explicit(&w->stop, memory_order_relaxed) &&
               cumod__mono_ns() - t0 < WAKER_SPIN_NS)
            for (int i = 0;
                 i < 16 &&
                 atomic_load_explicit(&w->head, memory_order_relaxed) == tail;
                 i++)
                cumod__cpu_relax();
        if (atomic_load_explicit(&w->head, memory_order_acquire) != tail ||
            atomic_load_explicit(&w->stop, memory_order_relaxed))
            continue;
        cumod__sleeper_wait(&w->sleep, waker_idle, w);
    }
    return NULL;
}

cumod_waker *
cumod__waker_start(void)
{
    /* aligned: the two counters have cache lines of their own */
    cumod_waker *w = aligned_alloc(_Alignof(cumod_waker), sizeof(*w));
    if (w == NULL)
        return NULL;
    memset(w, 0, sizeof(*w));
    if (pthread_create(&w->thread, NULL, waker_main, w) != 0) {
        free(w);
        return NULL;
    }
    return w;
}

int
cumod__waker_push(cumod_waker *w, _Atomic uint32_t *word)
{
    uint64_t head = atomic_load_explicit(&w->head, memory_order_relaxed);
    if (head - atomic_load_explicit(&w->tail, memory_order_acquire) >=
        WAKER_SLOTS)
        return -1;
    w->slot[head & (WAKER_SLOTS - 1)] = word;
    atomic_store_explicit(&w->head, head + 1, memory_order_release);
    cumod__sleeper_kick(&w->sleep, 0);
    return 0;
}

uint64_t
cumod__waker_stop(cumod_waker *w)
{
    uint64_t made;

    if (w == NULL)
        return 0;
    atomic_store_explicit(&w->stop, 1, memory_order_seq_cst);
    cumod__sleeper_kick(&w->sleep, 1);
    pthread_join(w->thread, NULL);
    made = atomic_load_explicit(&w->tail, memory_order_acquire);
    free(w);
    return made;
}

uint64_t
cumod__waker_count(const cumod_waker *w)
{
    return w != NULL ? atomic_load_explicit(&w->tail, memory_order_acquire) : 0;
}
