/* SPDX-License-Identifier: MIT */
/*
 * The work queues: order per stream, dependencies across streams, and
 * completion.
 *
 * Every stream has a queue (a device's legacy stream too), and every
 * asynchronous item is on one queue and on the state's list of pending
 * items, in submission order, with a sequence number that grows across the
 * process. An item completes when it is the oldest of its queue, every
 * point it depends on has completed, nothing holds it and the context is
 * not lost. Dependencies only ever point at earlier items (an event records
 * what was queued before the wait that names it), so one pass over the list
 * in submission order completes everything that can complete.
 *
 * A point (queue, seq) has completed once the queue's oldest pending item
 * is newer than seq, or the queue is empty: dropped items count as done. A
 * queue lives while anything refers to it (its stream, an event, an item's
 * dependency, a waiter) or it has pending items, so a destroyed stream's
 * work still completes and its events still answer.
 *
 * The legacy stream syncs with blocking streams as the driver's does: an
 * item on it depends on the last item of every blocking queue of its device,
 * an item on a blocking stream on the legacy queue's last item.
 */
#include "fake.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

fake_queue *
fake_queue_new(fake_state *st, int dev, int legacy, int blocking)
{
    fake_queue *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return NULL;
    q->dev = dev;
    q->legacy = legacy;
    q->blocking = blocking;
    q->refs = 1;
    q->next = st->queues;
    if (st->queues != NULL)
        st->queues->prev = q;
    st->queues = q;
    return q;
}

void
fake_queue_ref(fake_queue *q)
{
    q->refs++;
}

static void
queue_maybe_free(fake_state *st, fake_queue *q)
{
    if (q->refs > 0 || q->head != NULL)
        return;
    if (q->prev != NULL)
        q->prev->next = q->next;
    else
        st->queues = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    free(q);
}

void
fake_queue_unref(fake_state *st, fake_queue *q)
{
    if (q == NULL)
        return;
    q->refs--;
    queue_maybe_free(st, q);
}

void
fake_queues_free_all(fake_state *st)
{
    while (st->queues != NULL) {
        fake_queue *q = st->queues;
        st->queues = q->next;
        free(q);
    }
}

fake_queue *
fake_legacy_queue(fake_state *st, int dev)
{
    fake_device *d = &st->dev[dev];
    if (d->legacy == NULL)
        d->legacy = fake_queue_new(st, dev, 1, 0);
    return d->legacy;
}

int
fake_point_done(const fake_point *p)
{
    return p->q == NULL || p->q->head == NULL || p->q->head->seq > p->seq;
}

void
fake_point_set(fake_state *st, fake_point *p, fake_queue *q)
{
    fake_queue_ref(q);
    fake_point_clear(st, p);
    *p = (fake_point){q, q->last_seq};
}

void
fake_point_clear(fake_state *st, fake_point *p)
{
    fake_queue *q = p->q;
    *p = (fake_point){NULL, 0};
    fake_queue_unref(st, q);
}

int
fake_points_add(fake_points *set, fake_queue *q, uint64_t seq)
{
    fake_point p = {q, seq};
    if (fake_point_done(&p))
        return 0;
    if (fake_grow(&set->p, &set->cap, set->n + 1, sizeof(*set->p)) != 0)
        return -1;
    fake_queue_ref(q);
    set->p[set->n++] = p;
    return 0;
}

int
fake_points_of_queue(fake_state *st, fake_points *set, fake_queue *q)
{
    if (fake_points_add(set, q, q->last_seq) != 0)
        return -1;
    if (!q->legacy)
        return 0;
    for (fake_queue *o = st->queues; o != NULL; o = o->next)
        if (o->dev == q->dev && o->blocking &&
            fake_points_add(set, o, o->last_seq) != 0)
            return -1;
    return 0;
}

int
fake_points_of_device(fake_state *st, fake_points *set, int dev)
{
    for (fake_queue *o = st->queues; o != NULL; o = o->next)
        if (o->dev == dev && fake_points_add(set, o, o->last_seq) != 0)
            return -1;
    return 0;
}

int
fake_points_done(const fake_points *set)
{
    for (size_t i = 0; i < set->n; i++)
        if (!fake_point_done(&set->p[i]))
            return 0;
    return 1;
}

void
fake_points_fini(fake_state *st, fake_points *set)
{
    for (size_t i = 0; i < set->n; i++)
        fake_queue_unref(st, set->p[i].q);
    free(set->p);
    *set = (fake_points){NULL, 0, 0};
}

CUresult
fake_points_wait(fake_state *st, fake_points *set)
{
    uint64_t epoch = st->epoch;
    CUresult rc;
    for (;;) {
        fake_progress(st);
        if (st->epoch != epoch) {
            /* The reset freed every queue: the refs went with them. */
            free(set->p);
            *set = (fake_points){NULL, 0, 0};
            return CUDA_ERROR_DEINITIALIZED;
        }
        if (st->sticky != CUDA_SUCCESS) {
            rc = st->sticky;
            break;
        }
        if (fake_points_done(set)) {
            rc = CUDA_SUCCESS;
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 5 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        int e;
        do {
            e = pthread_cond_timedwait(&st->cond, &st->lock, &ts);
        } while (e == EINTR);
    }
    fake_points_fini(st, set);
    return rc;
}

CUresult
fake_work_prepare(fake_state *st, fake_work *w, fake_queue *q,
                  const fake_points *extra)
{
    fake_points deps = {NULL, 0, 0};
    int rc = 0;
    if (q->legacy) {
        for (fake_queue *o = st->queues; o != NULL && rc == 0; o = o->next)
            if (o->dev == q->dev && o->blocking)
                rc = fake_points_add(&deps, o, o->last_seq);
    } else if (q->blocking && st->dev[q->dev].legacy != NULL) {
        fake_queue *l = st->dev[q->dev].legacy;
        rc = fake_points_add(&deps, l, l->last_seq);
    }
    for (size_t i = 0; extra != NULL && i < extra->n && rc == 0; i++)
        rc = fake_points_add(&deps, extra->p[i].q, extra->p[i].seq);
    if (rc != 0) {
        fake_points_fini(st, &deps);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    fake_queue_ref(q); /* until commit or discard: q must stay */
    w->q = q;
    w->deps = deps.p;
    w->ndeps = deps.n;
    return CUDA_SUCCESS;
}

static void
queue_work_free(fake_state *st, fake_work *w)
{
    for (size_t i = 0; i < w->ndeps; i++)
        fake_queue_unref(st, w->deps[i].q);
    free(w->deps);
    free(w->name);
    if (w->drop != NULL)
        w->drop(w->arg);
    free(w->spans);
    free(w);
}

void
fake_work_discard(fake_state *st, fake_work *w)
{
    if (w == NULL)
        return;
    fake_queue *q = w->q;
    queue_work_free(st, w);
    fake_queue_unref(st, q);
}

static int
queue_visible(const fake_work *w)
{
    return w->kind != FAKE_WORK_WAIT;
}

void
fake_work_commit(fake_state *st, fake_work *w)
{
    fake_queue *q = w->q;
    w->seq = ++st->next_seq;
    w->next = NULL;
    w->qnext = NULL;
    q->last_seq = w->seq;
    if (q->tail != NULL)
        q->tail->qnext = w;
    else
        q->head = w;
    q->tail = w;
    if (st->work_tail != NULL)
        st->work_tail->next = w;
    else
        st->work = w;
    st->work_tail = w;
    if (queue_visible(w))
        st->pending++;
    /* The queue now has an item: prepare's ref is no longer needed. */
    fake_queue_unref(st, q);
    fake_progress(st);
}

static void
queue_complete(fake_state *st, fake_work *w)
{
    switch (w->kind) {
    case FAKE_WORK_LAUNCH: {
        fakecuda_launch *rec =
            w->record != SIZE_MAX ? &st->launches[w->record] : NULL;
        if (rec != NULL) {
            rec->completed = 1;
            rec->faulted = w->fault;
        }
        if (w->fault) {
            st->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
            fake_log(st, "fault fn=%s result=CUDA_ERROR_ILLEGAL_ADDRESS",
                     w->name);
        }
        return;
    }
    case FAKE_WORK_COPY:
        /* The device memory may have been freed since the copy was queued:
         * a real GPU would write freed memory; the fake skips the copy. */
        if ((w->dst_dev &&
             fake_alloc_find(st, (uintptr_t)w->dst, w->bytes) == NULL) ||
            (w->src_dev &&
             fake_alloc_find(st, (uintptr_t)w->src, w->bytes) == NULL))
            fake_log(st, "copy-skipped dst=0x%jx bytes=%zu",
                     (uintmax_t)(uintptr_t)w->dst, w->bytes);
        else if (w->src == NULL)
            memset(w->dst, w->value, w->bytes);
        else
            memmove(w->dst, w->src, w->bytes);
        if (w->record != SIZE_MAX)
            st->copies[w->record].completed = 1;
        return;
    case FAKE_WORK_FREE:
        /* A cuMemFree since the call is refused, so the memory is there
         * unless the context went away, which dropped this item too. */
        fake_mem_release(st, (uintptr_t)w->dst);
        return;
    case FAKE_WORK_WAIT:
        return;
    case FAKE_WORK_CALL:
        fake_call_complete(st, w);
        return;
    }
}

/* Unlinks w, which follows prev on st->work (prev NULL: w is the head) and
 * is the head of its queue unless dropping a whole queue. */
static void
queue_unlink(fake_state *st, fake_work *prev, fake_work *w)
{
    if (prev != NULL)
        prev->next = w->next;
    else
        st->work = w->next;
    if (st->work_tail == w)
        st->work_tail = prev;
    if (queue_visible(w))
        st->pending--;
}

static int
queue_ready(const fake_state *st, const fake_work *w)
{
    if (w->q->head != w || fake_hold_blocks(st, w))
        return 0;
    for (size_t i = 0; i < w->ndeps; i++)
        if (!fake_point_done(&w->deps[i]))
            return 0;
    return 1;
}

void
fake_progress(fake_state *st)
{
    if (st->work == NULL || st->sticky != CUDA_SUCCESS)
        return;
    fake_hold_refresh(st);
    int moved = 0;
    fake_work *prev = NULL, *w = st->work;
    while (w != NULL && st->sticky == CUDA_SUCCESS) {
        fake_work *next = w->next;
        if (!queue_ready(st, w)) {
            prev = w;
            w = next;
            continue;
        }
        queue_unlink(st, prev, w);
        fake_queue *q = w->q;
        q->head = w->qnext;
        if (q->head == NULL)
            q->tail = NULL;
        queue_complete(st, w);
        queue_work_free(st, w);
        queue_maybe_free(st, q);
        moved = 1;
        w = next;
    }
    /* After a fault nothing behind it ever completes. */
    if (st->sticky != CUDA_SUCCESS)
        fake_work_clear(st, -1);
    if (moved)
        pthread_cond_broadcast(&st->cond);
}

void
fake_work_clear(fake_state *st, int dev)
{
    fake_work *prev = NULL, *w = st->work;
    while (w != NULL) {
        fake_work *next = w->next;
        if (dev >= 0 && w->dev != dev) {
            prev = w;
            w = next;
            continue;
        }
        queue_unlink(st, prev, w);
        queue_work_free(st, w);
        w = next;
    }
    /* A queue's items are all of its device's: they went together. */
    for (fake_queue *q = st->queues, *next; q != NULL; q = next) {
        next = q->next;
        if (dev < 0 || q->dev == dev) {
            q->head = q->tail = NULL;
            queue_maybe_free(st, q);
        }
    }
    /* Dropped work counts as done: what waited on it must not wait forever
     * (after a fault, every wait returns the sticky error first). */
    pthread_cond_broadcast(&st->cond);
}
