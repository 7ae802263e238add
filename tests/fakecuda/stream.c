/*
 * Streams, events and the work queue: completion, holding and waiting.
 *
 * All asynchronous work of the process goes through one FIFO. Each item
 * gets the next sequence number; a stream remembers the last it was given,
 * an event the sequence it waits for. Completing in submission order means
 * "everything up to completed_seq is done", which answers every query. Work
 * completes as soon as it is queued unless held (fakecuda_hold or the
 * CUMOD_FAKE_HOLD file); then it waits until some call notices the release:
 * any query, a waiter (they poll every 5 ms) or fakecuda_hold(0).
 */
#include "fake.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int
fake_held(fake_state *st)
{
    return st->hold_api ||
           (st->hold_path != NULL && access(st->hold_path, F_OK) == 0);
}

static void
stream_complete(fake_state *st, fake_work *w)
{
    if (w->kind == FAKE_WORK_LAUNCH) {
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
    /* The device memory may have been freed since the copy was queued: a
     * real GPU would write freed memory; the fake skips the copy. */
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
}

static void
stream_free(fake_work *w)
{
    free(w->name);
    free(w);
}

void
fake_progress(fake_state *st)
{
    if (st->head == NULL || st->sticky != CUDA_SUCCESS || fake_held(st))
        return;
    while (st->head != NULL && st->sticky == CUDA_SUCCESS) {
        fake_work *w = st->head;
        st->head = w->next;
        if (st->head == NULL)
            st->tail = NULL;
        st->pending--;
        stream_complete(st, w);
        if (st->sticky == CUDA_SUCCESS)
            st->completed_seq = w->seq;
        stream_free(w);
    }
    /* After a fault nothing behind it ever completes. */
    if (st->sticky != CUDA_SUCCESS)
        fake_queue_clear(st, -1);
    pthread_cond_broadcast(&st->cond);
}

void
fake_queue_clear(fake_state *st, int dev)
{
    fake_work **link = &st->head;
    st->tail = NULL;
    while (*link != NULL) {
        fake_work *w = *link;
        if (dev < 0 || w->dev == dev) {
            *link = w->next;
            st->pending--;
            stream_free(w);
        } else {
            st->tail = w;
            link = &w->next;
        }
    }
    /* Dropped work counts as done: what waited on it must not wait forever
     * (after a fault, every wait returns the sticky error first). */
    uint64_t done = st->head != NULL ? st->head->seq - 1 : st->next_seq;
    if (done > st->completed_seq)
        st->completed_seq = done;
    pthread_cond_broadcast(&st->cond);
}

void
fake_enqueue(fake_state *st, fake_work *w, fake_stream *s)
{
    w->seq = ++st->next_seq;
    w->next = NULL;
    if (s != NULL)
        s->last_seq = w->seq;
    else
        st->null_last_seq = w->seq;
    if (st->tail != NULL)
        st->tail->next = w;
    else
        st->head = w;
    st->tail = w;
    st->pending++;
    fake_progress(st);
}

CUresult
fake_stream_resolve(fake_state *st, CUstream h, fake_stream **out)
{
    *out = NULL;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
        return CUDA_SUCCESS;
    *out = fake_table_get(&st->streams, (uintptr_t)h, FAKE_TAG_STREAM, NULL);
    return *out != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* What a stream's work so far completes with: its own last item; for the
 * legacy stream, also the last of every blocking stream. */
static uint64_t
stream_target(fake_state *st, const fake_stream *s)
{
    if (s != NULL)
        return s->last_seq;
    uint64_t t = st->null_last_seq;
    for (uint32_t i = 0; i < st->streams.cap; i++) {
        const fake_stream *o = st->streams.items[i];
        if (o != NULL && !(o->flags & CU_STREAM_NON_BLOCKING) &&
            o->last_seq > t)
            t = o->last_seq;
    }
    return t;
}

/* Blocks (the lock released) until target has completed, the context is
 * lost, or the state is reset. */
static CUresult
stream_wait(fake_state *st, uint64_t target)
{
    uint64_t epoch = st->epoch;
    for (;;) {
        fake_progress(st);
        if (st->epoch != epoch)
            return CUDA_ERROR_DEINITIALIZED;
        if (st->sticky != CUDA_SUCCESS)
            return st->sticky;
        if (st->completed_seq >= target)
            return CUDA_SUCCESS;
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
}

CUresult CUDAAPI
cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    fake_state *st = fake_lock();
    int dev;
    fake_stream *s = NULL;
    uint32_t slot, gen;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS &&
        (phStream == NULL || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS &&
        ((s = calloc(1, sizeof(*s))) == NULL ||
         fake_table_add(st, &st->streams, s, &slot, &gen)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        *s = (fake_stream){.dev = dev, .flags = Flags, .last_seq = 0};
        *phStream = (CUstream)fake_handle(FAKE_TAG_STREAM, gen, slot, 0);
        s = NULL;
    }
    free(s);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuStreamDestroy(CUstream hStream)
{
    fake_state *st = fake_lock();
    CUresult rc = fake_check(st);
    uint32_t slot;
    fake_stream *s = NULL;
    if (rc == CUDA_SUCCESS &&
        (s = fake_table_get(&st->streams, (uintptr_t)hStream, FAKE_TAG_STREAM,
                            &slot)) == NULL)
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS) {
        /* Its queued work still completes; items keep no stream pointer. */
        fake_table_del(&st->streams, slot);
        free(s);
    }
    fake_unlock(st);
    return rc;
}

/* Checks a stream argument: the legacy stream needs a current context. */
static CUresult
stream_arg(fake_state *st, CUstream h, fake_stream **s)
{
    int dev;
    CUresult rc = fake_check(st);
    if (rc == CUDA_SUCCESS)
        rc = fake_stream_resolve(st, h, s);
    if (rc == CUDA_SUCCESS && *s == NULL)
        rc = fake_check_ctx(st, &dev);
    return rc;
}

CUresult CUDAAPI
cuStreamQuery(CUstream hStream)
{
    fake_state *st = fake_lock();
    fake_stream *s;
    CUresult rc = stream_arg(st, hStream, &s);
    if (rc == CUDA_SUCCESS) {
        fake_progress(st);
        rc = st->sticky != CUDA_SUCCESS                  ? st->sticky
             : st->completed_seq >= stream_target(st, s) ? CUDA_SUCCESS
                                                         : CUDA_ERROR_NOT_READY;
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuStreamSynchronize(CUstream hStream)
{
    fake_state *st = fake_lock();
    fake_stream *s;
    CUresult rc = stream_arg(st, hStream, &s);
    if (rc == CUDA_SUCCESS)
        rc = stream_wait(st, stream_target(st, s));
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuCtxSynchronize(void)
{
    fake_state *st = fake_lock();
    int dev;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS)
        rc = stream_wait(st, st->next_seq);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    const unsigned valid = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                           CU_EVENT_INTERPROCESS;
    fake_state *st = fake_lock();
    int dev;
    fake_event *e = NULL;
    uint32_t slot, gen;
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS && (phEvent == NULL || (Flags & ~valid) != 0 ||
                               ((Flags & CU_EVENT_INTERPROCESS) &&
                                !(Flags & CU_EVENT_DISABLE_TIMING))))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && ((e = calloc(1, sizeof(*e))) == NULL ||
                               fake_table_add(st, &st->events, e, &slot, &gen)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        *e = (fake_event){.dev = dev, .flags = Flags, .seq = 0};
        *phEvent = (CUevent)fake_handle(FAKE_TAG_EVENT, gen, slot, 0);
        e = NULL;
    }
    free(e);
    fake_unlock(st);
    return rc;
}

static CUresult
stream_event(fake_state *st, CUevent h, fake_event **e, uint32_t *slot)
{
    CUresult rc = fake_check(st);
    if (rc == CUDA_SUCCESS &&
        (*e = fake_table_get(&st->events, (uintptr_t)h, FAKE_TAG_EVENT,
                             slot)) == NULL)
        rc = CUDA_ERROR_INVALID_HANDLE;
    return rc;
}

CUresult CUDAAPI
cuEventDestroy(CUevent hEvent)
{
    fake_state *st = fake_lock();
    fake_event *e;
    uint32_t slot;
    CUresult rc = stream_event(st, hEvent, &e, &slot);
    if (rc == CUDA_SUCCESS) {
        fake_table_del(&st->events, slot);
        free(e);
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuEventRecord(CUevent hEvent, CUstream hStream)
{
    fake_state *st = fake_lock();
    fake_event *e;
    fake_stream *s;
    CUresult rc = stream_event(st, hEvent, &e, NULL);
    if (rc == CUDA_SUCCESS)
        rc = stream_arg(st, hStream, &s);
    if (rc == CUDA_SUCCESS)
        e->seq = stream_target(st, s);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuEventQuery(CUevent hEvent)
{
    fake_state *st = fake_lock();
    fake_event *e;
    CUresult rc = stream_event(st, hEvent, &e, NULL);
    if (rc == CUDA_SUCCESS) {
        fake_progress(st);
        rc = st->sticky != CUDA_SUCCESS    ? st->sticky
             : st->completed_seq >= e->seq ? CUDA_SUCCESS
                                           : CUDA_ERROR_NOT_READY;
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuEventSynchronize(CUevent hEvent)
{
    fake_state *st = fake_lock();
    fake_event *e;
    CUresult rc = stream_event(st, hEvent, &e, NULL);
    /* The target is read once: a later re-record does not move this wait. */
    if (rc == CUDA_SUCCESS)
        rc = stream_wait(st, e->seq);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    fake_state *st = fake_lock();
    fake_event *e;
    fake_stream *s;
    CUresult rc = stream_arg(st, hStream, &s);
    if (rc == CUDA_SUCCESS)
        rc = stream_event(st, hEvent, &e, NULL);
    if (rc == CUDA_SUCCESS && (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) != 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    /* Nothing to do: work completes in submission order, so whatever this
     * stream queues next completes after the event's work anyway. */
    fake_unlock(st);
    return rc;
}
