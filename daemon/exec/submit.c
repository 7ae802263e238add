/* SPDX-License-Identifier: MIT */
/*
 * Service: the submission threads (submit.h). Each thread has a queue of
 * one producer (the dispatcher) and one consumer (the thread): a ring of
 * job pointers with two free-running counts, no lock (issue 21: a mutex
 * and a condition per job, taken by both sides, were 3-4% of every
 * submission thread's profile at 8 to 48 clients on the H100). The
 * dispatcher also reads two counters without a lock: commands posted to a
 * thread, and commands it has finished with (advanced only once its
 * queue is empty and done() has run). A thread that finds its queue empty
 * looks again for a while before sleeping (2 ms, a pause between looks, a
 * yield every 8th), since a wake-up costs microseconds each launch would
 * pay; it sleeps on a futex of its own, woken by the dispatcher only when
 * it says it sleeps.
 */
#include "submit.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sleeper.h"
#include "route.h"

#define SUBMIT_LOOK_NS 2000000
/* Pauses between two looks at the thread's rings while it has nothing
 * queued ($CUMOD_EXEC_PAUSES, 1 to 1024, for measuring). 32 (1.5-2 us)
 * left a record or a completion waiting ~1 us on average; A/B on the
 * H200 (cumod_bench many, two rounds): 4 gave 8 clients 345-374k
 * launches/s against 285-335k, 16 and 48 clients 264-285k against
 * 246-264k, one client the same p50 (11-12 us either way). */
#define SUBMIT_PAUSES 4

static unsigned
submit_pauses(void)
{
    const char *e = getenv("CUMOD_EXEC_PAUSES");
    int v = e != NULL ? atoi(e) : 0;
    return v >= 1 && v <= 1024 ? (unsigned)v : SUBMIT_PAUSES;
}
#define SUBMIT_QUEUE_BYTES CUMOD_SUBMIT_QUEUE_BYTES
#define SUBMIT_QUEUE_JOBS CUMOD_SUBMIT_QUEUE_JOBS

typedef struct submit_job {
    cumod_chan_hdr hdr;
    size_t len;
    char payload[];
} submit_job;

typedef struct submit_thread {
    cumod_submit *sb;
    unsigned index;
    pthread_t thread;
    int started;
    void *aux;
    submit_job *slot[SUBMIT_QUEUE_JOBS];
    alignas(64) _Atomic uint64_t head; /* jobs put: the dispatcher's */
    alignas(64) _Atomic uint64_t tail; /* jobs taken: the thread's */
    _Atomic size_t queued_bytes;       /* both: added, then taken off */
    cumod_sleeper sleep;               /* where the thread sleeps when idle */
    _Atomic int stop;
    alignas(64) _Atomic uint64_t posted;
    _Atomic uint64_t finished;
} submit_thread;

struct cumod_submit {
    cumod_exec *ex;
    cumod_submit_ops ops;
    unsigned n;
    submit_thread *t;
    cumod_route route; /* the dispatcher's: streams to threads */
    cumod_idmap pins;  /* the dispatcher's: session -> thread + 1 */
};

/* Whether the thread may sleep: nothing posted past what it took, not
 * told to stop, and its own polling content (ops.may_sleep). */
static int
submit_idle(void *arg)
{
    submit_thread *t = arg;
    cumod_submit *sb = t->sb;
    return atomic_load_explicit(&t->head, memory_order_seq_cst) ==
               atomic_load_explicit(&t->tail, memory_order_relaxed) &&
           !atomic_load_explicit(&t->stop, memory_order_seq_cst) &&
           (sb->ops.may_sleep == NULL ||
            sb->ops.may_sleep(sb->ex, t->index, t->aux));
}

/* The thread's own polling (ops.poll): how much it did. */
static int
submit_poll(submit_thread *t)
{
    cumod_submit *sb = t->sb;
    if (sb->ops.poll == NULL)
        return 0;
    int got = sb->ops.poll(sb->ex, t->index, t->aux);
    if (got < 0) {
        CUMOD_LOGD("CUMOD-EXEC-CHAN",
                   "submission thread %u: channel send failed: %s", t->index,
                   strerror(-got));
        return 0;
    }
    return got;
}

static void *
submit_main(void *arg)
{
    submit_thread *t = arg;
    cumod_submit *sb = t->sb;
    cumod_exec *ex = sb->ex;
    char name[16];
    uint64_t taken = 0;
    int held = 0; /* commands run since done() last ran */

    unsigned pauses = submit_pauses();
    snprintf(name, sizeof(name), "exec-sub%u", t->index);
    pthread_setname_np(pthread_self(), name);
    (void)ex->drv.ctx_set_current(ex->ctx);
    for (;;) {
        int stop = atomic_load_explicit(&t->stop, memory_order_acquire);
        if (atomic_load_explicit(&t->head, memory_order_acquire) != taken) {
            submit_job *j = t->slot[taken & (SUBMIT_QUEUE_JOBS - 1)];
            taken++;
            atomic_store_explicit(&t->tail, taken, memory_order_release);
            atomic_fetch_sub_explicit(&t->queued_bytes, j->len,
                                      memory_order_relaxed);
            held = 1;
            int rv = sb->ops.run(ex, &j->hdr, j->payload, j->len, -1, t->aux);
            if (rv == 0)
                rv = sb->ops.age(ex, t->aux);
            if (rv != 0)
                CUMOD_LOGD("CUMOD-EXEC-CHAN",
                           "submission thread %u: channel send failed: %s",
                           t->index, strerror(-rv));
            free(j);
            continue;
        }
        /* Nothing queued: what is held back for one event is recorded,
         * then the dispatcher may count this thread quiet. */
        if (held) {
            (void)sb->ops.done(ex, t->aux);
            held = 0;
        }
        atomic_store_explicit(&t->finished, taken, memory_order_release);
        if (stop) {
            if (sb->ops.drain != NULL)
                (void)sb->ops.drain(ex, t->index, t->aux);
            break;
        }
        /* Its own polling (direct rings) whenever its queue is empty. */
        if (submit_poll(t) > 0)
            continue;
        uint64_t t0 = cumod__mono_ns();
        unsigned looks = 0;
        int polled = 0;
        while (atomic_load_explicit(&t->head, memory_order_acquire) == taken &&
               cumod__mono_ns() - t0 < SUBMIT_LOOK_NS &&
               !atomic_load_explicit(&t->stop, memory_order_relaxed)) {
            if ((polled = submit_poll(t)) > 0)
                break;
            if ((++looks & 7) == 0)
                sched_yield();
            else
                /* the queue looked at after each pause: a look after
                 * the last of 32 (1.5 to 2 us on the H100 host's cores)
                 * made a job wait half of that on average */
                for (unsigned i = 0;
                     i < pauses && atomic_load_explicit(
                                       &t->head, memory_order_acquire) == taken;
                     i++)
                    cumod__cpu_relax();
        }
        if (polled > 0)
            continue;
        /* Still nothing: sleep (sleeper.h) until the dispatcher posts, or
         * a doorbell rings. */
        if (submit_idle(t))
            cumod__sleeper_wait(&t->sleep, submit_idle, t);
    }
    return NULL;
}

cumod_err
cumod__submit_start(cumod_exec *ex, unsigned n, const cumod_submit_ops *ops,
                    void *const *aux, cumod_submit **out)
{
    cumod_submit *sb = calloc(1, sizeof(*sb));
    /* aligned: the counters have cache lines of their own */
    if (sb == NULL ||
        (sb->t = aligned_alloc(alignof(submit_thread),
                               (size_t)n * sizeof(*sb->t))) == NULL) {
        free(sb);
        return CUMOD_ENOMEM;
    }
    memset(sb->t, 0, (size_t)n * sizeof(*sb->t));
    sb->ex = ex;
    sb->ops = *ops;
    sb->n = n;
    cumod__route_init(&sb->route, n);
    cumod__idmap_init(&sb->pins);
    for (unsigned i = 0; i < n; i++) {
        submit_thread *t = &sb->t[i];
        t->sb = sb;
        t->index = i;
        t->aux = aux[i];
    }
    for (unsigned i = 0; i < n; i++) {
        if (pthread_create(&sb->t[i].thread, NULL, submit_main, &sb->t[i]) !=
            0) {
            cumod__submit_stop(sb);
            return CUMOD_ENOMEM;
        }
        sb->t[i].started = 1;
    }
    *out = sb;
    return CUMOD_OK;
}

unsigned
cumod__submit_count(const cumod_submit *sb)
{
    return sb != NULL ? sb->n : 0;
}

unsigned
cumod__submit_thread_of(cumod_submit *sb, uint64_t key)
{
    void *v = cumod__idmap_get(&sb->pins, key >> CUMOD_CHAN_STREAM_BITS);
    if (v != NULL)
        return (unsigned)((uintptr_t)v - 1);
    return cumod__route_thread(&sb->route, key);
}

void
cumod__submit_pin(cumod_submit *sb, uint32_t session, unsigned i)
{
    if (sb != NULL && i < sb->n)
        (void)cumod__idmap_set(&sb->pins, session, (void *)(uintptr_t)(i + 1));
}

void
cumod__submit_unpin(cumod_submit *sb, uint32_t session)
{
    if (sb != NULL)
        (void)cumod__idmap_remove(&sb->pins, session);
}

void
cumod__submit_wake(cumod_submit *sb, unsigned i)
{
    if (sb != NULL && i < sb->n)
        cumod__sleeper_kick(&sb->t[i].sleep, 0);
}

void
cumod__submit_forget(cumod_submit *sb, uint64_t key)
{
    if (sb != NULL)
        cumod__route_forget(&sb->route, key);
}

cumod_err
cumod__submit_post(cumod_submit *sb, unsigned i, const cumod_chan_hdr *hdr,
                   const void *payload, size_t len)
{
    submit_thread *t = &sb->t[i];
    submit_job *j = malloc(sizeof(*j) + len);
    if (j == NULL)
        return CUMOD_ENOMEM;
    j->hdr = *hdr;
    j->len = len;
    if (len)
        memcpy(j->payload, payload, len);
    uint64_t head = atomic_load_explicit(&t->head, memory_order_relaxed);
    /* Full (in jobs or bytes, an empty queue takes any one): wait for the
     * thread, so that the channel fills and the front queues in order. */
    while (head != atomic_load_explicit(&t->tail, memory_order_acquire) &&
           (head - atomic_load_explicit(&t->tail, memory_order_acquire) >=
                SUBMIT_QUEUE_JOBS ||
            atomic_load_explicit(&t->queued_bytes, memory_order_relaxed) + len >
                SUBMIT_QUEUE_BYTES)) {
        struct timespec nap = {0, 50000};
        nanosleep(&nap, NULL);
    }
    atomic_fetch_add_explicit(&t->queued_bytes, len, memory_order_relaxed);
    t->slot[head & (SUBMIT_QUEUE_JOBS - 1)] = j;
    atomic_store_explicit(&t->head, head + 1, memory_order_release);
    atomic_fetch_add_explicit(&t->posted, 1, memory_order_release);
    cumod__sleeper_kick(&t->sleep, 0);
    return CUMOD_OK;
}

void
cumod__submit_quiesce(cumod_submit *sb)
{
    if (sb == NULL)
        return;
    for (unsigned i = 0; i < sb->n; i++) {
        submit_thread *t = &sb->t[i];
        unsigned looks = 0;
        while (atomic_load_explicit(&t->finished, memory_order_acquire) !=
               atomic_load_explicit(&t->posted, memory_order_relaxed)) {
            if ((++looks & 7) == 0)
                sched_yield();
            else
                cumod__cpu_relax();
        }
    }
}

void
cumod__submit_stop(cumod_submit *sb)
{
    if (sb == NULL)
        return;
    for (unsigned i = 0; i < sb->n; i++) {
        submit_thread *t = &sb->t[i];
        atomic_store_explicit(&t->stop, 1, memory_order_seq_cst);
        cumod__sleeper_kick(&t->sleep, 1);
    }
    for (unsigned i = 0; i < sb->n; i++) {
        submit_thread *t = &sb->t[i];
        if (t->started)
            pthread_join(t->thread, NULL);
        /* What a thread never took (it was never started) */
        uint64_t head = atomic_load_explicit(&t->head, memory_order_acquire);
        for (uint64_t k = atomic_load_explicit(&t->tail, memory_order_acquire);
             k != head; k++)
            free(t->slot[k & (SUBMIT_QUEUE_JOBS - 1)]);
    }
    cumod__route_fini(&sb->route);
    cumod__idmap_fini(&sb->pins);
    free(sb->t);
    free(sb);
}
