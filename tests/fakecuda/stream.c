/* SPDX-License-Identifier: MIT */
/*
 * Streams and events: the calls. What completes when is queue.c's.
 *
 * An event records the point its stream had reached at cuEventRecord
 * (behind a barrier item where the legacy stream's implicit syncs are not
 * done yet); cuStreamWaitEvent queues a wait item that depends on the
 * event's point as it was at the call, so re-recording the event later does
 * not move the wait.
 */
#include "fake.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

CUresult
fake_stream_queue(fake_state *st, CUstream h, fake_queue **q, int *dev)
{
    CUresult rc = fake_check(st);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        /* The legacy stream needs a current context: it is that one's. */
        if ((rc = fake_check_ctx(st, dev)) != CUDA_SUCCESS)
            return rc;
        *q = fake_legacy_queue(st, *dev);
        return *q != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    fake_stream *s =
        fake_table_get(&st->streams, (uintptr_t)h, FAKE_TAG_STREAM, NULL);
    if (s == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    *q = s->q;
    *dev = s->dev;
    return CUDA_SUCCESS;
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
         (s->q = fake_queue_new(st, dev, 0,
                                !(Flags & CU_STREAM_NON_BLOCKING))) == NULL ||
         fake_table_add(st, &st->streams, s, &slot, &gen)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        s->dev = dev;
        s->flags = Flags;
        *phStream = (CUstream)fake_handle(FAKE_TAG_STREAM, gen, slot, 0);
        s = NULL;
    }
    if (s != NULL)
        fake_queue_unref(st, s->q);
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
        /* Returns at once; its queued work still completes, in order, and
         * keeps the queue alive until then. */
        fake_table_del(&st->streams, slot);
        fake_queue_unref(st, s->q);
        free(s);
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuStreamQuery(CUstream hStream)
{
    fake_state *st = fake_lock();
    fake_queue *q;
    fake_points set = {NULL, 0, 0};
    int dev;
    CUresult rc = fake_stream_queue(st, hStream, &q, &dev);
    if (rc == CUDA_SUCCESS) {
        fake_progress(st);
        if (st->sticky != CUDA_SUCCESS)
            rc = st->sticky;
        else if (fake_points_of_queue(st, &set, q) != 0)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            rc = set.n == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
        fake_points_fini(st, &set);
    }
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuStreamSynchronize(CUstream hStream)
{
    fake_state *st = fake_lock();
    fake_queue *q;
    fake_points set = {NULL, 0, 0};
    int dev;
    CUresult rc = fake_stream_queue(st, hStream, &q, &dev);
    if (rc == CUDA_SUCCESS && fake_points_of_queue(st, &set, q) != 0) {
        fake_points_fini(st, &set);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* What was queued before the call: later work does not move it. */
    if (rc == CUDA_SUCCESS)
        rc = fake_points_wait(st, &set);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuCtxSynchronize(void)
{
    fake_state *st = fake_lock();
    int dev;
    fake_points set = {NULL, 0, 0};
    CUresult rc = fake_check_ctx(st, &dev);
    if (rc == CUDA_SUCCESS && fake_points_of_device(st, &set, dev) != 0) {
        fake_points_fini(st, &set);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS)
        rc = fake_points_wait(st, &set);
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
        *e = (fake_event){.dev = dev, .flags = Flags, .at = {NULL, 0}};
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
        fake_point_clear(st, &e->at);
        free(e);
    }
    fake_unlock(st);
    return rc;
}

/* Queues a wait item on q that depends on deps (and, on the legacy stream,
 * on the blocking streams); nothing when there is nothing to wait for. */
static CUresult
stream_barrier(fake_state *st, fake_queue *q, int dev, const fake_points *deps)
{
    fake_work *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *w = (fake_work){.kind = FAKE_WORK_WAIT, .dev = dev, .record = SIZE_MAX};
    CUresult rc = fake_work_prepare(st, w, q, deps);
    if (rc != CUDA_SUCCESS) {
        free(w);
        return rc;
    }
    if (w->ndeps == 0) {
        fake_work_discard(st, w);
        return CUDA_SUCCESS;
    }
    fake_work_commit(st, w);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventRecord(CUevent hEvent, CUstream hStream)
{
    fake_state *st = fake_lock();
    fake_event *e;
    fake_queue *q;
    int dev;
    CUresult rc = stream_event(st, hEvent, &e, NULL);
    if (rc == CUDA_SUCCESS)
        rc = fake_stream_queue(st, hStream, &q, &dev);
    /* The record is an operation of its stream, so it has the legacy
     * stream's implicit syncs: on the legacy stream it waits for the
     * blocking streams' work so far, on a blocking stream for the legacy
     * stream's. A barrier item carries them where they are not done yet. */
    if (rc == CUDA_SUCCESS && (q->legacy || q->blocking))
        rc = stream_barrier(st, q, dev, NULL);
    if (rc == CUDA_SUCCESS) {
        fake_point_set(st, &e->at, q);
        e->held = fake_event_hold_on(st);
    }
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
        /* Recorded under CUMOD_FAKE_EVENT_HOLD: not complete while its
         * file exists, whatever the stream did. */
        if (e->held && !(e->held = fake_event_hold_on(st)))
            fake_log(st, "event-released");
        rc = st->sticky != CUDA_SUCCESS ? st->sticky
             : e->held                  ? CUDA_ERROR_NOT_READY
             : fake_point_done(&e->at)  ? CUDA_SUCCESS
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
    fake_points set = {NULL, 0, 0};
    CUresult rc = stream_event(st, hEvent, &e, NULL);
    struct timespec nap = {0, 1000 * 1000};
    /* Held (CUMOD_FAKE_EVENT_HOLD): waits for its file to go first, the
     * lock released meanwhile. */
    while (rc == CUDA_SUCCESS && e->held &&
           (e->held = fake_event_hold_on(st)) != 0) {
        fake_unlock(st);
        nanosleep(&nap, NULL);
        st = fake_lock();
        rc = stream_event(st, hEvent, &e, NULL);
    }
    /* The point is copied: a later re-record does not move this wait. */
    if (rc == CUDA_SUCCESS && e->at.q != NULL &&
        fake_points_add(&set, e->at.q, e->at.seq) != 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS)
        rc = fake_points_wait(st, &set);
    else
        fake_points_fini(st, &set);
    fake_unlock(st);
    return rc;
}

CUresult CUDAAPI
cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    fake_state *st = fake_lock();
    fake_event *e;
    fake_queue *q;
    int dev;
    fake_points deps = {NULL, 0, 0};
    CUresult rc = fake_stream_queue(st, hStream, &q, &dev);
    if (rc == CUDA_SUCCESS)
        rc = stream_event(st, hEvent, &e, NULL);
    if (rc == CUDA_SUCCESS && (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) != 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    /* The event's point as it is now: what the wait item depends on. */
    if (rc == CUDA_SUCCESS && e->at.q != NULL &&
        fake_points_add(&deps, e->at.q, e->at.seq) != 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && deps.n > 0)
        rc = stream_barrier(st, q, dev, &deps);
    fake_points_fini(st, &deps);
    fake_unlock(st);
    return rc;
}

/* cuStreamWriteValue32: the value is written when the stream reaches it
 * (a work item like a launch, so held work holds it, and a fault before it
 * leaves it unwritten), into registered host memory or device memory of
 * the stream's device, as the GPU would. */
typedef struct write32 {
    _Atomic uint32_t *at;
    uint32_t value;
} write32;

static void
write32_run(void *arg)
{
    write32 *w = arg;
    atomic_store_explicit(w->at, w->value, memory_order_release);
}

CUresult CUDAAPI
cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                        unsigned int flags)
{
    fake_state *st = fake_lock();
    CUresult rc = fake_check(st);
    int known = 0;
    if (rc == CUDA_SUCCESS &&
        (addr == 0 || addr % 4 != 0 ||
         (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) != 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < st->nregs && !known; i++)
        known = addr >= st->regs[i].base &&
                addr + 4 <= st->regs[i].base + st->regs[i].size;
    if (rc == CUDA_SUCCESS && !known && fake_alloc_find(st, addr, 4) == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    fake_unlock(st);
    if (rc != CUDA_SUCCESS)
        return rc;
    write32 *w = malloc(sizeof(*w));
    if (w == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *w = (write32){(_Atomic uint32_t *)(uintptr_t)addr, value};
    return fakecuda_enqueue(stream, "cuStreamWriteValue32", NULL, 0,
                            write32_run, free, w);
}
