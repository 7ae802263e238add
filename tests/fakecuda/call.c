/* SPDX-License-Identifier: MIT */
/*
 * Work that a library built on the fake queues on a stream
 * (fakecuda_enqueue): libfakecublas.so's GEMMs. It is a work item like a
 * launch, so it keeps the stream's order with launches and copies, holds
 * and faults name it, and it computes on the fake's host-backed device
 * memory when it completes, as the GPU would when the stream reaches it.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

CUresult
fakecuda_enqueue(CUstream stream, const char *name, const fakecuda_span *spans,
                 size_t nspans, void (*run)(void *arg), void (*drop)(void *arg),
                 void *arg)
{
    fake_state *st = fake_lock();
    fake_work *w = NULL;
    fake_queue *q;
    int dev, sdev;
    CUresult rc = fake_check_ctx(st, &dev);

    if (rc == CUDA_SUCCESS &&
        (name == NULL || run == NULL || (nspans > 0 && spans == NULL)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = fake_stream_queue(st, stream, &q, &sdev);
    if (rc == CUDA_SUCCESS && sdev != dev)
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS &&
        ((w = calloc(1, sizeof(*w))) == NULL ||
         (w->name = strdup(name)) == NULL ||
         (nspans > 0 && (w->spans = malloc(nspans * sizeof(*spans))) == NULL)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS)
        rc = fake_work_prepare(st, w, q, NULL);
    if (rc != CUDA_SUCCESS) {
        if (w != NULL) {
            free(w->name);
            free(w->spans);
            free(w);
        }
        fake_unlock(st);
        if (drop != NULL)
            drop(arg);
        return rc;
    }
    if (nspans > 0)
        memcpy(w->spans, spans, nspans * sizeof(*spans));
    w->nspans = nspans;
    w->kind = FAKE_WORK_CALL;
    w->dev = dev;
    w->record = SIZE_MAX;
    w->run = run;
    w->drop = drop;
    w->arg = arg;
    w->fault = fake_fault_fires(st, FAKECUDA_FAULT_LAUNCH, 0, name, NULL);
    /* Memory that is not the device's: a kernel reading it faults. */
    for (size_t i = 0; i < nspans && !w->fault; i++) {
        fake_alloc *a =
            fake_alloc_find(st, (uintptr_t)spans[i].ptr, spans[i].bytes);
        w->fault = a == NULL || a->dev != dev;
    }
    fake_log(st, "call fn=%s stream=0x%jx spans=%zu", name,
             (uintmax_t)(uintptr_t)stream, nspans);
    fake_work_commit(st, w);
    fake_unlock(st);
    return CUDA_SUCCESS;
}

void
fake_call_complete(fake_state *st, fake_work *w)
{
    if (w->fault) {
        st->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
        fake_log(st, "fault fn=%s result=CUDA_ERROR_ILLEGAL_ADDRESS", w->name);
        return;
    }
    for (size_t i = 0; i < w->nspans; i++)
        if (fake_alloc_find(st, (uintptr_t)w->spans[i].ptr,
                            w->spans[i].bytes) == NULL) {
            fake_log(st, "call-skipped fn=%s", w->name);
            return;
        }
    w->run(w->arg);
}
