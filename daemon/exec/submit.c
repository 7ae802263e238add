/* SPDX-License-Identifier: MIT */
/*
 * Service: the submission threads (submit.h). Each thread has a queue
 * (a mutex, a condition and a list, as lane.c: not a lane itself, which
 * sleeps at once when idle, holds any amount and cannot say when it is
 * quiet) and two counters the
 * dispatcher reads without the lock: commands posted to it, and commands
 * it has finished with (advanced only once its queue is empty and done()
 * has run). A thread that finds its queue empty looks again for a while
 * before sleeping (2 ms, a pause between looks, a yield every 8th), since
 * a wake-up on the condition costs microseconds each launch would pay.
 */
#include "submit.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/list.h"
#include "common/log.h"

#define SUBMIT_LOOK_NS 2000000
/* What a thread's queue holds at most: past it, the dispatcher waits, so
 * that a thread held by the device (a copy that waits, a full hardware
 * queue) makes the channel fill and the front queue in order (its
 * backpressure), rather than this process's memory grow. */
#define SUBMIT_QUEUE_BYTES ((size_t)4 << 20)
#define SUBMIT_QUEUE_JOBS 4096

typedef struct submit_job {
    cumod_list_node link;
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
    pthread_mutex_t mtx;
    pthread_cond_t cond;
    cumod_list jobs;
    size_t queued, queued_bytes;
    int sleeping;
    _Atomic int stop; /* set under mtx; also read in the look loop */
    _Atomic uint64_t posted;
    _Atomic uint64_t finished;
} submit_thread;

struct cumod_submit {
    cumod_exec *ex;
    cumod_submit_ops ops;
    unsigned n;
    submit_thread *t;
};

static void *
submit_main(void *arg)
{
    submit_thread *t = arg;
    cumod_submit *sb = t->sb;
    cumod_exec *ex = sb->ex;
    char name[16];
    uint64_t taken = 0;
    int held = 0; /* commands run since done() last ran */

    snprintf(name, sizeof(name), "exec-sub%u", t->index);
    pthread_setname_np(pthread_self(), name);
    (void)ex->drv.ctx_set_current(ex->ctx);
    for (;;) {
        pthread_mutex_lock(&t->mtx);
        cumod_list_node *n = cumod__list_pop(&t->jobs);
        int stop = t->stop;
        if (n != NULL) {
            t->queued--;
            t->queued_bytes -= CUMOD_CONTAINER_OF(n, submit_job, link)->len;
        }
        pthread_mutex_unlock(&t->mtx);
        if (n != NULL) {
            submit_job *j = CUMOD_CONTAINER_OF(n, submit_job, link);
            taken++;
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
        if (stop)
            break;
        uint64_t t0 = cumod__mono_ns();
        unsigned looks = 0;
        while (atomic_load_explicit(&t->posted, memory_order_acquire) ==
                   taken &&
               cumod__mono_ns() - t0 < SUBMIT_LOOK_NS && !t->stop) {
            if ((++looks & 7) == 0)
                sched_yield();
            else
                for (int i = 0; i < 32; i++)
                    cumod__cpu_relax();
        }
        pthread_mutex_lock(&t->mtx);
        t->sleeping = 1;
        while (cumod__list_empty(&t->jobs) && !t->stop)
            pthread_cond_wait(&t->cond, &t->mtx);
        t->sleeping = 0;
        pthread_mutex_unlock(&t->mtx);
    }
    return NULL;
}

cumod_err
cumod__submit_start(cumod_exec *ex, unsigned n, const cumod_submit_ops *ops,
                    void *const *aux, cumod_submit **out)
{
    cumod_submit *sb = calloc(1, sizeof(*sb));
    if (sb == NULL || (sb->t = calloc(n, sizeof(*sb->t))) == NULL) {
        free(sb);
        return CUMOD_ENOMEM;
    }
    sb->ex = ex;
    sb->ops = *ops;
    sb->n = n;
    for (unsigned i = 0; i < n; i++) {
        submit_thread *t = &sb->t[i];
        t->sb = sb;
        t->index = i;
        t->aux = aux[i];
        cumod__list_init(&t->jobs);
        pthread_mutex_init(&t->mtx, NULL);
        pthread_cond_init(&t->cond, NULL);
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
cumod__submit_thread_of(const cumod_submit *sb, uint64_t key)
{
    /* Keys are a session id and a stream number: mixed, then spread. */
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (unsigned)((h >> 32) % sb->n);
}

cumod_err
cumod__submit_post(cumod_submit *sb, unsigned i, const cumod_chan_hdr *hdr,
                   const void *payload, size_t len)
{
    submit_thread *t = &sb->t[i];
    submit_job *j = malloc(sizeof(*j) + len);
    if (j == NULL)
        return CUMOD_ENOMEM;
    cumod__list_node_init(&j->link);
    j->hdr = *hdr;
    j->len = len;
    if (len)
        memcpy(j->payload, payload, len);
    pthread_mutex_lock(&t->mtx);
    while (t->queued > 0 && (t->queued >= SUBMIT_QUEUE_JOBS ||
                             t->queued_bytes + len > SUBMIT_QUEUE_BYTES)) {
        pthread_mutex_unlock(&t->mtx);
        struct timespec nap = {0, 50000};
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&t->mtx);
    }
    t->queued++;
    t->queued_bytes += len;
    cumod__list_append(&t->jobs, &j->link);
    atomic_fetch_add_explicit(&t->posted, 1, memory_order_release);
    if (t->sleeping)
        pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->mtx);
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
        pthread_mutex_lock(&t->mtx);
        t->stop = 1;
        pthread_cond_signal(&t->cond);
        pthread_mutex_unlock(&t->mtx);
    }
    for (unsigned i = 0; i < sb->n; i++) {
        submit_thread *t = &sb->t[i];
        if (t->started)
            pthread_join(t->thread, NULL);
        for (cumod_list_node *n; (n = cumod__list_pop(&t->jobs)) != NULL;)
            free(CUMOD_CONTAINER_OF(n, submit_job, link));
        pthread_mutex_destroy(&t->mtx);
        pthread_cond_destroy(&t->cond);
    }
    free(sb->t);
    free(sb);
}
