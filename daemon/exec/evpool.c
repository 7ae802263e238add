/* SPDX-License-Identifier: MIT */
/*
 * Service: the executor's event pool (evpool.h). Its lock is a leaf: no
 * driver call is made while holding it.
 */
#include <pthread.h>
#include <stdlib.h>

#include "evpool.h"

/* How many events the pool keeps for reuse. */
#define EVPOOL_CAP 4096

struct cumod_exec_evpool {
    pthread_mutex_t mtx;
    CUevent *pool;
    size_t n, cap;
};

cumod_err
cumod__exec_evpool_start(cumod_exec *ex)
{
    struct cumod_exec_evpool *ep = calloc(1, sizeof(*ep));

    if (ep == NULL)
        return CUMOD_ENOMEM;
    ep->cap = EVPOOL_CAP;
    if ((ep->pool = calloc(ep->cap, sizeof(CUevent))) == NULL) {
        free(ep);
        return CUMOD_ENOMEM;
    }
    pthread_mutex_init(&ep->mtx, NULL);
    ex->evpool = ep;
    return CUMOD_OK;
}

void
cumod__exec_evpool_stop(cumod_exec *ex)
{
    struct cumod_exec_evpool *ep = ex->evpool;

    if (ep == NULL)
        return;
    for (size_t i = 0; i < ep->n; i++)
        (void)ex->drv.event_destroy(ep->pool[i]);
    pthread_mutex_destroy(&ep->mtx);
    free(ep->pool);
    free(ep);
    ex->evpool = NULL;
}

CUresult
cumod__exec_event_get(cumod_exec *ex, CUevent *out)
{
    struct cumod_exec_evpool *ep = ex->evpool;
    CUevent ev = NULL;

    if (ep != NULL) {
        pthread_mutex_lock(&ep->mtx);
        if (ep->n > 0)
            ev = ep->pool[--ep->n];
        pthread_mutex_unlock(&ep->mtx);
    }
    if (ev == NULL) {
        CUresult r = ex->drv.event_create(&ev, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS)
            return r;
    }
    *out = ev;
    return CUDA_SUCCESS;
}

void
cumod__exec_event_put(cumod_exec *ex, CUevent ev)
{
    struct cumod_exec_evpool *ep = ex->evpool;

    if (ep != NULL) {
        pthread_mutex_lock(&ep->mtx);
        if (ep->n < ep->cap) {
            ep->pool[ep->n++] = ev;
            ev = NULL;
        }
        pthread_mutex_unlock(&ep->mtx);
    }
    if (ev != NULL)
        (void)ex->drv.event_destroy(ev);
}
