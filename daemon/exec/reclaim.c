/* SPDX-License-Identifier: MIT */
/*
 * Service: reclaim queues (reclaim.h): what a session gives back (memory,
 * streams, segments), each thing once the work that may still use it has
 * completed, in the order the session gave them back. One queue per
 * session, named by its reclaim key; each operation carries the events
 * that gate it (recorded on the session's streams by the submission
 * thread) and runs, on the completion thread, once they have all
 * completed and every earlier operation of its queue has run. A
 * segment's unregistering waits for the device, so it goes on to the
 * reclaim lane (cumod__exec_unmap_later, also the SEG_UNMAP handler's).
 *
 * Why gated on the host and not by cuStreamWaitEvent: a stream waiting on
 * a long kernel's event holds up other streams that share its hardware
 * queue. Measured on an H100 (driver 580, bench/bench_threads.c): with 40
 * streams each waiting on a 300 ms kernel, a launch on an unrelated stream
 * waited up to 298 ms (also with CUDA_DEVICE_MAX_CONNECTIONS=32), while 40
 * streams each running a 300 ms kernel held it up for nothing.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/idmap.h"
#include "evpool.h"
#include "inflight.h"
#include "common/list.h"
#include "common/log.h"
#include "reclaim.h"
#include "reply.h"
#include "common/shmguard.h"
#include "streams.h"

typedef struct reclaim_op {
    cumod_list_node link;
    cumod_reclaim_kind kind;
    uint64_t a, b;      /* FREE: a dptr; UNMAP: a host address, b size */
    CUstream stream;    /* STREAM: the stream to give back to the pool */
    cumod_chan_hdr hdr; /* UNMAP: the command, answered when done */
    uint32_t nev;
    CUevent ev[];
} reclaim_op;

typedef struct reclaim_q {
    cumod_list_node link;
    uint64_t key;
    cumod_list ops;
} reclaim_q;

struct cumod_exec_reclaim {
    /* Guards the queues. A leaf: the only driver call made under it is
     * cuEventQuery, which does not block. */
    pthread_mutex_t mtx;
    cumod_idmap by_key;
    cumod_list queues;
    size_t nops; /* operations not run yet, in every queue */
};

cumod_err
cumod__exec_reclaim_start(cumod_exec *ex)
{
    struct cumod_exec_reclaim *rc = calloc(1, sizeof(*rc));
    if (rc == NULL)
        return CUMOD_ENOMEM;
    pthread_mutex_init(&rc->mtx, NULL);
    cumod__idmap_init(&rc->by_key);
    cumod__list_init(&rc->queues);
    ex->reclaim = rc;
    return CUMOD_OK;
}

static void
reclaim_op_free(cumod_exec *ex, reclaim_op *op)
{
    for (uint32_t i = 0; i < op->nev; i++)
        cumod__exec_event_put(ex, op->ev[i]);
    free(op);
}

void
cumod__exec_reclaim_stop(cumod_exec *ex)
{
    struct cumod_exec_reclaim *rc = ex->reclaim;
    if (rc == NULL)
        return;
    /* At exit: memory and segments not given back yet go with the
     * context. A stream is destroyed here: it is in neither of the
     * stream pool's lists, which cumod__exec_streams_stop destroys. */
    for (cumod_list_node *n; (n = cumod__list_pop(&rc->queues)) != NULL;) {
        reclaim_q *q = CUMOD_CONTAINER_OF(n, reclaim_q, link);
        for (cumod_list_node *o; (o = cumod__list_pop(&q->ops)) != NULL;) {
            reclaim_op *op = CUMOD_CONTAINER_OF(o, reclaim_op, link);
            if (op->kind == CUMOD_RECLAIM_STREAM && op->stream != NULL)
                (void)ex->drv.stream_destroy(op->stream);
            reclaim_op_free(ex, op);
        }
        free(q);
    }
    cumod__idmap_fini(&rc->by_key);
    pthread_mutex_destroy(&rc->mtx);
    free(rc);
    ex->reclaim = NULL;
}

cumod_err
cumod__exec_reclaim_push(cumod_exec *ex, uint64_t key, cumod_reclaim_kind kind,
                         uint64_t a, uint64_t b, CUstream stream,
                         const CUevent *ev, uint32_t nev,
                         const cumod_chan_hdr *hdr)
{
    struct cumod_exec_reclaim *rc = ex->reclaim;
    reclaim_op *op = calloc(1, sizeof(*op) + nev * sizeof(CUevent));
    reclaim_q *q;

    if (op == NULL)
        return CUMOD_ENOMEM;
    cumod__list_node_init(&op->link);
    op->kind = kind;
    op->a = a;
    op->b = b;
    op->stream = stream;
    if (hdr != NULL)
        op->hdr = *hdr;
    op->nev = nev;
    if (nev)
        memcpy(op->ev, ev, nev * sizeof(CUevent));
    pthread_mutex_lock(&rc->mtx);
    if ((q = cumod__idmap_get(&rc->by_key, key)) == NULL) {
        if ((q = calloc(1, sizeof(*q))) == NULL ||
            cumod__idmap_set(&rc->by_key, key, q) != CUMOD_OK) {
            pthread_mutex_unlock(&rc->mtx);
            free(q);
            free(op);
            return CUMOD_ENOMEM;
        }
        q->key = key;
        cumod__list_init(&q->ops);
        cumod__list_node_init(&q->link);
        cumod__list_append(&rc->queues, &q->link);
    }
    cumod__list_append(&q->ops, &op->link);
    rc->nops++;
    pthread_mutex_unlock(&rc->mtx);
    cumod__exec_inflight_kick(ex);
    return CUMOD_OK;
}

int
cumod__exec_reclaim_pending(cumod_exec *ex)
{
    struct cumod_exec_reclaim *rc = ex->reclaim;
    pthread_mutex_lock(&rc->mtx);
    int busy = rc->nops > 0;
    pthread_mutex_unlock(&rc->mtx);
    return busy;
}

/* The first operation of some queue whose gate is open, taken off its
 * queue; NULL when none. */
static reclaim_op *
reclaim_next_ready(cumod_exec *ex, struct cumod_exec_reclaim *rc)
{
    reclaim_op *ready = NULL;

    pthread_mutex_lock(&rc->mtx);
    CUMOD_LIST_FOREACH_SAFE(&rc->queues, n)
    {
        reclaim_q *q = CUMOD_CONTAINER_OF(n, reclaim_q, link);
        cumod_list_node *first = cumod__list_first(&q->ops);
        if (first == NULL)
            continue;
        reclaim_op *op = CUMOD_CONTAINER_OF(first, reclaim_op, link);
        int open = 1;
        for (uint32_t i = 0; i < op->nev && open; i++)
            open = ex->drv.event_query(op->ev[i]) != CUDA_ERROR_NOT_READY;
        if (!open)
            continue;
        cumod__list_remove(first);
        rc->nops--;
        if (op->kind == CUMOD_RECLAIM_END) {
            /* The session is gone and so is all it gave back. */
            cumod__idmap_remove(&rc->by_key, q->key);
            cumod__list_remove(&q->link);
            free(q);
        }
        ready = op;
        break;
    }
    pthread_mutex_unlock(&rc->mtx);
    return ready;
}

int
cumod__exec_reclaim_poll(cumod_exec *ex)
{
    struct cumod_exec_reclaim *rc = ex->reclaim;
    reclaim_op *op;
    int ran = 0;

    while ((op = reclaim_next_ready(ex, rc)) != NULL) {
        ran = 1;
        switch (op->kind) {
        case CUMOD_RECLAIM_FREE: {
            /* On the allocation stream, which holds nothing long: the
             * memory is the pool's again at once. */
            CUresult r =
                ex->drv.mem_free_async((CUdeviceptr)op->a, ex->alloc_stream);
            if (r != CUDA_SUCCESS) {
                char msg[256];
                cumod__cu_err(&ex->drv, r, "cuMemFreeAsync", msg, sizeof(msg));
                CUMOD_LOGW("CUMOD-EXEC-FREE", "%s", msg);
                if (cumod__cu_context_lost(r))
                    cumod__exec_context_lost(ex, r);
            }
            break;
        }
        case CUMOD_RECLAIM_STREAM:
            cumod__exec_stream_recycle(ex, op->stream);
            break;
        case CUMOD_RECLAIM_UNMAP:
            cumod__exec_unmap_later(ex, &op->hdr, op->a, op->b);
            break;
        case CUMOD_RECLAIM_END:
            break;
        }
        reclaim_op_free(ex, op);
    }
    return ran;
}
/* Reclaim lane: once the kernels running now have ended, unregister and
 * unmap. */
static int
reclaim_seg_unmap(cumod_exec *ex, const cumod_chan_hdr *hdr, const void *p,
                  size_t len, int fd, void *aux)
{
    const cumod_driver *d = &ex->drv;
    cumod_chan_segment sg = {0};

    (void)aux;
    (void)cumod__exec_payload(p, len, fd, &sg, sizeof(sg));
    (void)cumod__exec_wait_quiet(ex, "unregistering a segment");
    void *m = (void *)(uintptr_t)sg.host;
    if (m != NULL) {
        (void)d->mem_host_unregister(m);
        cumod__shmguard_remove(cumod__shmguard_find(sg.host, sg.size));
        munmap(m, sg.size);
    }
    return cumod__exec_reply(ex, hdr, CUMOD_OK, NULL, 0);
}

void
cumod__exec_unmap_later(cumod_exec *ex, const cumod_chan_hdr *hdr,
                        uint64_t host, uint64_t size)
{
    cumod_chan_segment sg = {.size = size, .host = host};
    cumod_err rv = cumod__lane_post(ex->reclaim_lane, reclaim_seg_unmap, hdr,
                                    &sg, sizeof(sg), -1, NULL);
    if (rv == CUMOD_ECLOSED) {
        /* The executor is stopping: the front is gone, and the mapping
         * goes with the process. */
        CUMOD_LOGD("CUMOD-EXEC-STOP",
                   "a %llu-byte segment is left mapped: the executor stops",
                   (unsigned long long)size);
    } else if (rv != CUMOD_OK) {
        (void)cumod__exec_reply(ex, hdr, CUMOD_ENOMEM, NULL, 0);
        CUMOD_LOGE("CUMOD-NOMEM", "a %llu-byte segment stays mapped",
                   (unsigned long long)size);
    }
}
